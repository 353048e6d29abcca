"""Vocabulary tables: byte string -> rank, the way merging asks.

An open-addressing table whose slots hold a token's first 8 bytes (short strings
compare without memcmp), and in front of it a table of every 2-byte string's rank and a
Bloom filter, both small enough for L2: most lookups while merging are of short
non-tokens. For merging by characters (``fastbpe._merge_chars``) also rank -> bytes,
per BMP code point its single token and largest own merge rank (or "wall"), per
boundary byte pair whether (and from which rank on) a token that is not whole characters
spans it, and a 64 KiB filter of the character pairs that occur whole inside a token
(see docs/merge_rules.md).

The lookups are inline here: they are the innermost step of every merge loop, and a
call across modules would be an indirect call. The tables are built once by
``CoreBPE`` with the functions of ``_vocab.pyx``, which also checks the vocabulary
given (``pack_ranks``, ``check_packed``, ``check_lengths``: TypeError or ValueError
naming the first bad item).
"""
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.string cimport memcmp

from fastbpe._common cimport (NO_RANK, fbe_hash, fbe_hash_word, fbe_load64, fbe_prefetch,
                              fbe_word, fbe_word_padded)

cdef enum:
    CHAR_WALL = 1             # char_info high word of a character of several tokens
    BIGRAM_WORDS = 8192       # 64 KiB filter: ~25k pairs in o200k, ~1% false positives

cdef struct Slot:
    uint64_t word     # the first 8 bytes of the token, zero-padded: compared before memcmp
    uint32_t length   # 0 marks an empty slot (empty tokens are never looked up)
    uint32_t rank


cdef struct Vocab:
    const unsigned char* arena
    Slot* slots
    uint32_t* long_offset   # per slot: arena offset of tokens longer than 8 bytes
    uint64_t mask
    uint32_t* pair_rank2    # rank of every 2-byte string, indexed by b0 | b1 << 8
    uint64_t* bloom         # 2 bits per token in one word: rejects most non-tokens
    uint64_t bloom_mask     # without touching the (much larger) slot table
    uint32_t byte_rank[256]
    # Merging by characters (see bpe_by_chars); NULL tables turn it off.
    uint64_t* rank_span     # rank -> arena offset | length << 32 (0 length: no token)
    uint64_t n_ranks
    uint64_t* char_info     # code point < 0x10000 -> token | (M + 1) << 32, or NO_RANK
                            # (| CHAR_WALL << 32 when its bytes merge into several tokens)
    uint64_t* cross_bits    # bit x | y << 8: a token that is not whole characters has
                            # byte x followed by a character's first byte y
    uint32_t* cross_min     # x | y << 8 -> the lowest rank among those tokens
    uint64_t* bigram_bloom  # filter of the code point pairs (a, b) that occur as adjacent
                            # whole characters inside some token (see bigram_may_join)


cdef inline uint64_t slot_hash(const unsigned char* p, size_t n, uint64_t word) noexcept nogil:
    # Short strings (almost every lookup during merging) hash their zero-padded word;
    # the length is mixed in so b"a" and b"a\0" differ.
    if n <= 8:
        return fbe_hash_word(word, n)
    return fbe_hash(p, n)


cdef inline bint bloom_may_contain(const Vocab* v, uint64_t h) noexcept nogil:
    cdef uint64_t bits = (1ULL << ((h >> 52) & 63)) | (1ULL << (h >> 58))
    return (v.bloom[(h >> 32) & v.bloom_mask] & bits) == bits


cdef inline void bloom_add(Vocab* v, uint64_t h) noexcept nogil:
    v.bloom[(h >> 32) & v.bloom_mask] |= (1ULL << ((h >> 52) & 63)) | (1ULL << (h >> 58))


cdef inline uint32_t slot_probe(const Vocab* v, uint64_t i, uint64_t w, size_t n) noexcept nogil:
    """Linear probing from slot i for the string of n <= 8 bytes whose word is w."""
    cdef const Slot* sl
    while True:
        sl = &v.slots[i]
        if sl.word == w and sl.length == n:
            return sl.rank
        if sl.length == 0:
            return NO_RANK
        i = (i + 1) & v.mask


cdef inline uint32_t vocab_rank_hashed(const Vocab* v, const unsigned char* p, size_t n,
                                       uint64_t w, uint64_t h) noexcept nogil:
    """Rank of p[:n] given w = its first-word (fbe_word, or the first 8 bytes when n > 8)
    and h = slot_hash(p, n, w); NO_RANK if it is not a token."""
    cdef uint64_t i
    cdef const Slot* s
    if not bloom_may_contain(v, h):
        return NO_RANK
    i = h & v.mask
    if n <= 8:
        return slot_probe(v, i, w, n)
    while True:
        s = &v.slots[i]
        if (s.length == n and s.word == w
                and memcmp(v.arena + v.long_offset[i] + 8, p + 8, n - 8) == 0):
            return s.rank
        if s.length == 0:
            return NO_RANK
        i = (i + 1) & v.mask


cdef inline uint64_t short_word(const unsigned char* p, size_t n, bint padded) noexcept nogil:
    """fbe_word(p, n) for 1 <= n <= 8; padded: 8 bytes are readable at p (the scan's
    padded copy of its chunk), so one masked load does it without branches."""
    return fbe_word_padded(p, n) if padded else fbe_word(p, n)


cdef inline uint32_t vocab_rank(const Vocab* v, const unsigned char* p, size_t n) noexcept nogil:
    """Rank of the byte string p[:n] (n >= 1), or NO_RANK."""
    return vocab_rank_in(v, p, n, False)


cdef inline uint32_t vocab_rank_in(const Vocab* v, const unsigned char* p, size_t n,
                                   bint padded) noexcept nogil:
    """vocab_rank, reading words as short_word(padded) does.

    Merging asks mostly about short strings, many of which are not tokens: the 2-byte
    table and the Bloom filter answer those from L2-sized memory; only likely hits probe
    the slot table (megabytes for a 200k vocabulary, so each probe is a cache miss).
    """
    cdef uint64_t w, h
    if n == 2:
        return v.pair_rank2[p[0] | (<uint32_t>p[1] << 8)]
    if n > 8:
        return vocab_rank_long(v, p, n)
    # short strings: kept small so that the compiler inlines it into the merge loops
    w = short_word(p, n, padded)
    h = fbe_hash_word(w, n)
    if not bloom_may_contain(v, h):
        return NO_RANK
    return slot_probe(v, h & v.mask, w, n)


cdef uint32_t vocab_rank_long(const Vocab* v, const unsigned char* p, size_t n) noexcept nogil
    # vocab_rank of more than 8 bytes: a call (in _vocab.pyx), so that vocab_rank stays
    # small enough to be inlined into the merge loops.


cdef inline void vocab_rank_two(const Vocab* v, const unsigned char* pa, size_t na,
                                const unsigned char* pb, size_t nb, uint32_t* ra,
                                uint32_t* rb, bint padded) noexcept nogil:
    """vocab_rank of two strings (a merge re-ranks both of its neighbours) with the loads
    of both issued before either answer is needed: their cache misses overlap instead
    of queueing behind each other."""
    cdef uint64_t wa, ha, wb, hb, fa, fb, bits_a, bits_b
    if na < 3 or na > 8 or nb < 3 or nb > 8:
        ra[0] = vocab_rank_in(v, pa, na, padded)
        rb[0] = vocab_rank_in(v, pb, nb, padded)
        return
    wa = short_word(pa, na, padded)
    ha = fbe_hash_word(wa, na)
    wb = short_word(pb, nb, padded)
    hb = fbe_hash_word(wb, nb)
    fa = v.bloom[(ha >> 32) & v.bloom_mask]
    fb = v.bloom[(hb >> 32) & v.bloom_mask]
    fbe_prefetch(&v.slots[ha & v.mask])
    fbe_prefetch(&v.slots[hb & v.mask])
    bits_a = (1ULL << ((ha >> 52) & 63)) | (1ULL << (ha >> 58))
    bits_b = (1ULL << ((hb >> 52) & 63)) | (1ULL << (hb >> 58))
    ra[0] = slot_probe(v, ha & v.mask, wa, na) if (fa & bits_a) == bits_a else NO_RANK
    rb[0] = slot_probe(v, hb & v.mask, wb, nb) if (fb & bits_b) == bits_b else NO_RANK


cdef inline uint64_t bigram_bits(uint32_t a, uint32_t b, uint64_t* word) noexcept nogil:
    """The filter word index (to word[0]) and the two bits of the character pair a, b."""
    cdef uint64_t h = fbe_hash_word((<uint64_t>a << 32) | b, 8)
    word[0] = (h >> 32) & (BIGRAM_WORDS - 1)
    return (1ULL << ((h >> 52) & 63)) | (1ULL << (h >> 58))


cdef inline uint32_t decode_char(const unsigned char* p, Py_ssize_t left,
                                 Py_ssize_t* q) noexcept nogil:
    """Code point of the 1..3-byte UTF-8 character at p and its length in q[0];
    NO_RANK for a 4-byte character or malformed bytes (the caller falls back)."""
    cdef uint32_t c = p[0]
    if c < 0x80:
        q[0] = 1
        return c
    if c >= 0xC2 and c < 0xE0 and left >= 2 and (p[1] & 0xC0) == 0x80:
        q[0] = 2
        return ((c & 0x1F) << 6) | (p[1] & 0x3F)
    if c >= 0xE0 and c < 0xF0 and left >= 3 and (p[1] & 0xC0) == 0x80 and (p[2] & 0xC0) == 0x80:
        q[0] = 3
        c = ((c & 0x0F) << 12) | ((<uint32_t>p[1] & 0x3F) << 6) | (p[2] & 0x3F)
        return c if c >= 0x800 else NO_RANK
    return NO_RANK


# Building (once, by CoreBPE)
cdef void vocab_clear(Vocab* v) noexcept nogil
    # Every table NULL (a Vocab not built, or freed).
cdef int vocab_build(Vocab* v, Py_ssize_t n, const uint32_t* lens, const uint32_t* ids,
                     const int64_t* offs) noexcept nogil
    # Every table for n tokens arena[offs[i]:offs[i] + lens[i]] of rank ids[i]; -1 if
    # out of memory.
cdef void vocab_free(Vocab* v) noexcept nogil
