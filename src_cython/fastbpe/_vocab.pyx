"""Building the vocabulary tables of ``_vocab.pxd`` (run once per ``CoreBPE``)."""
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, malloc
from libc.string cimport memcmp

from fastbpe._common cimport NO_RANK, fbe_hash, fbe_load64, fbe_word, table_alloc
from libc.stdlib cimport free

import numpy as np


def first_duplicate(ids):
    """The smallest value that occurs twice in the uint32 array ids, or None (a sort:
    np.unique's hashing took 58 ms of cl100k's 190 ms build)."""
    if len(ids) < 2:
        return None
    s = np.sort(ids)
    same = s[1:] == s[:len(s) - 1]   # no negative index: wraparound is off
    return int(s[1:][same][0]) if same.any() else None


def pack_ranks(mergeable_ranks):
    """(arena, lengths, ids) of a dict bytes -> rank: the token bytes end to end, and
    per token its length and rank (uint32 arrays), after checking every item."""
    if not isinstance(mergeable_ranks, dict):
        raise TypeError(f"mergeable_ranks must be a dict[bytes, int], not "
                        f"{type(mergeable_ranks).__name__}")
    keys = list(mergeable_ranks.keys())
    values = list(mergeable_ranks.values())
    for k in keys:
        if not isinstance(k, bytes):
            raise TypeError(f"mergeable_ranks keys must be bytes, got {k!r}")
    for k, v in zip(keys, values):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"rank of {k!r} must be an int, got {v!r}")
        if v < 0 or v >= NO_RANK:
            raise ValueError(f"rank of {k!r} must be in [0, 2**32 - 1), got {v}")
    lengths = np.fromiter((len(k) for k in keys), dtype=np.uint32, count=len(keys))
    ids = np.array(values, dtype=np.uint32) if values else np.zeros(0, dtype=np.uint32)
    return b"".join(keys), lengths, ids


def check_packed(bytes arena, ids, special_tokens):
    """Check a packed vocabulary (see pack_ranks) and its special tokens (a dict str ->
    id): TypeError or ValueError naming the first problem."""
    if not isinstance(special_tokens, dict):
        raise TypeError(f"special_tokens must be a dict[str, int], not "
                        f"{type(special_tokens).__name__}")
    for s, t in special_tokens.items():
        if not isinstance(s, str):
            raise TypeError(f"special token must be a str, got {s!r}")
        if isinstance(t, bool) or not isinstance(t, int):
            raise TypeError(f"id of special token {s!r} must be an int, got {t!r}")
        if t < 0 or t >= NO_RANK:
            raise ValueError(f"id of special token {s!r} must be in [0, 2**32 - 1), got {t}")
    dup = first_duplicate(ids)
    if dup is not None:
        raise ValueError(f"duplicate rank {dup} in mergeable_ranks")
    if len(arena) >= (1 << 32) - (1 << 20):
        raise ValueError("vocabulary too large (token bytes must total under 4 GiB)")


def check_lengths(bytes arena, lengths):
    """ValueError unless the token lengths (uint32 array) add up to the arena's size."""
    if int(np.sum(lengths, dtype=np.int64)) != len(arena):
        raise ValueError("token lengths do not add up to the arena size")


def ranks_are_plain(dict ranks):
    """Whether ranks is already what a vocabulary must be, in one pass without building
    anything: every key exactly bytes, every value exactly an int in [0, 2**32 - 1), no
    value twice. ``Encoding`` takes its fast path on True (a copy of the dict) and runs
    its item-by-item check, which names the problem or converts numpy ints and bytes
    subclasses, only on False."""
    cdef Py_ssize_t i = 0
    cdef object k, v
    ids = np.empty(len(ranks), dtype=np.uint32)
    cdef uint32_t[::1] out = ids
    for k, v in ranks.items():
        if type(k) is not bytes or type(v) is not int:
            return False
        if v < 0 or v >= NO_RANK:
            return False
        out[i] = <uint32_t>v
        i += 1
    return first_duplicate(ids) is None


cdef void insert_slot(Vocab* v, const unsigned char* p, uint32_t n, uint32_t offset,
                      uint32_t rank) noexcept nogil:
    cdef uint64_t w = fbe_word(p, n) if n <= 8 else fbe_load64(p)
    cdef uint64_t h = slot_hash(p, n, w)
    cdef uint64_t i = h & v.mask
    bloom_add(v, h)
    while v.slots[i].length != 0:
        i = (i + 1) & v.mask
    v.slots[i].word = w
    v.slots[i].length = n
    v.slots[i].rank = rank
    v.long_offset[i] = offset


cdef uint32_t slot_lookup(const Vocab* v, const unsigned char* p, size_t n) noexcept nogil:
    """Hash-table lookup without the 2-byte shortcut (used to fill that shortcut)."""
    cdef uint64_t w = fbe_word(p, n) if n <= 8 else fbe_load64(p)
    cdef uint64_t i = slot_hash(p, n, w) & v.mask
    while v.slots[i].length != 0:
        if (v.slots[i].length == n and v.slots[i].word == w
                and memcmp(v.arena + v.long_offset[i], p, n) == 0):
            return v.slots[i].rank
        i = (i + 1) & v.mask
    return NO_RANK


cdef bint valid_utf8_chars(const unsigned char* t, Py_ssize_t n, Py_ssize_t* chars) noexcept nogil:
    """t[:n] is whole, valid UTF-8 characters of 1..3 bytes (chars[0] = how many)."""
    cdef Py_ssize_t pos = 0, q = 0, k = 0
    cdef uint32_t cp
    while pos < n:
        cp = decode_char(t + pos, n - pos, &q)
        if cp == NO_RANK or 0xD800 <= cp <= 0xDFFF:
            return False
        pos += q
        k += 1
    chars[0] = k
    return True


cdef bint all_bytes_are_tokens(const Vocab* v, uint32_t cp) noexcept nogil:
    if cp < 0x800:
        return (v.byte_rank[0xC0 | (cp >> 6)] != NO_RANK
                and v.byte_rank[0x80 | (cp & 0x3F)] != NO_RANK)
    return (v.byte_rank[0xE0 | (cp >> 12)] != NO_RANK
            and v.byte_rank[0x80 | ((cp >> 6) & 0x3F)] != NO_RANK
            and v.byte_rank[0x80 | (cp & 0x3F)] != NO_RANK)


cdef int build_char_tables(Vocab* v, Py_ssize_t n, const uint32_t* lens,
                           const uint32_t* ids, const int64_t* offs) noexcept nogil:
    """rank_span, char_info and cross_bits for bpe_by_chars; -1 if out of memory."""
    cdef Py_ssize_t i, pos, q = 0, k = 0
    cdef uint32_t cp, r1, r2, r3, tok, m_rank, e
    cdef unsigned char b[3]
    cdef const unsigned char* t
    cdef uint64_t info
    cdef uint32_t prev
    cdef uint64_t word, bits
    v.char_info = <uint64_t*>malloc(65536 * sizeof(uint64_t))
    v.cross_bits = <uint64_t*>calloc(1024, sizeof(uint64_t))
    v.cross_min = <uint32_t*>malloc(65536 * sizeof(uint32_t))
    v.bigram_bloom = <uint64_t*>calloc(BIGRAM_WORDS, sizeof(uint64_t))
    if (v.char_info == NULL or v.cross_bits == NULL or v.cross_min == NULL
            or v.bigram_bloom == NULL):
        return -1
    for e in range(65536):
        v.cross_min[e] = NO_RANK
    for i in range(n):
        v.rank_span[ids[i]] = <uint64_t>offs[i] | (<uint64_t>lens[i] << 32)
    # 1. every code point below 0x10000: its single token and the largest merge rank on
    #    the way (M), or NO_RANK when its bytes do not merge into one token
    for cp in range(65536):
        tok = NO_RANK
        m_rank = 0
        if cp < 0x80:
            tok = v.byte_rank[cp]
            m_rank = 0                      # stored as M + 1: no merge at all
        elif cp < 0x800:
            b[0] = <unsigned char>(0xC0 | (cp >> 6))
            b[1] = <unsigned char>(0x80 | (cp & 0x3F))
            if v.byte_rank[b[0]] != NO_RANK and v.byte_rank[b[1]] != NO_RANK:
                tok = v.pair_rank2[b[0] | (<uint32_t>b[1] << 8)]
                m_rank = tok + 1
        elif not (0xD800 <= cp <= 0xDFFF):
            b[0] = <unsigned char>(0xE0 | (cp >> 12))
            b[1] = <unsigned char>(0x80 | ((cp >> 6) & 0x3F))
            b[2] = <unsigned char>(0x80 | (cp & 0x3F))
            r1 = v.pair_rank2[b[0] | (<uint32_t>b[1] << 8)]
            r2 = v.pair_rank2[b[1] | (<uint32_t>b[2] << 8)]
            r3 = slot_lookup(v, b, 3)
            # BPE of 3 bytes: merge the lower of the two pairs, then the rest
            if (v.byte_rank[b[0]] != NO_RANK and v.byte_rank[b[1]] != NO_RANK
                    and v.byte_rank[b[2]] != NO_RANK and r3 != NO_RANK
                    and (r1 != NO_RANK or r2 != NO_RANK)):
                tok = r3
                m_rank = (r1 if r1 < r2 else r2)
                if r3 > m_rank:
                    m_rank = r3
                m_rank += 1
        if tok != NO_RANK and tok < v.n_ranks:
            v.char_info[cp] = tok | (<uint64_t>m_rank << 32)
        elif cp >= 0x80 and not (0xD800 <= cp <= 0xDFFF) and all_bytes_are_tokens(v, cp):
            v.char_info[cp] = NO_RANK | (<uint64_t>CHAR_WALL << 32)   # several tokens
        else:
            v.char_info[cp] = NO_RANK
    # 2. Corollary 2 (b) for every token of several whole characters; Corollary 2 (a)'s cross bits for
    #    every token that is not whole characters
    for i in range(n):
        t = v.arena + offs[i]
        if lens[i] < 2:
            continue
        if valid_utf8_chars(t, lens[i], &k):
            if k < 2:
                continue
            pos = 0
            while pos < lens[i]:
                cp = decode_char(t + pos, lens[i] - pos, &q)
                info = v.char_info[cp]
                if <uint32_t>info != NO_RANK and ids[i] + 1 <= <uint32_t>(info >> 32):
                    v.char_info[cp] = NO_RANK   # rank(token) <= M: never a unit
                pos += q
        else:
            for pos in range(1, lens[i]):
                if (t[pos] & 0xC0) != 0x80:
                    e = t[pos - 1] | (<uint32_t>t[pos] << 8)
                    v.cross_bits[e >> 6] |= 1ULL << (e & 63)
                    if ids[i] < v.cross_min[e]:
                        v.cross_min[e] = ids[i]
    # 3. Corollary 4 (split)'s filter: every pair of adjacent whole characters inside a token, valid
    #    UTF-8 or not (decoding resynchronizes at the next lead byte, as in the text)
    for i in range(n):
        t = v.arena + offs[i]
        pos = 0
        prev = NO_RANK
        while pos < lens[i]:
            cp = decode_char(t + pos, lens[i] - pos, &q)
            if cp == NO_RANK:
                prev = NO_RANK
                pos += 1
                continue
            if prev != NO_RANK:
                bits = bigram_bits(prev, cp, &word)
                v.bigram_bloom[word] |= bits
            prev = cp
            pos += q
    return 0


cdef uint32_t vocab_rank_long(const Vocab* v, const unsigned char* p, size_t n) noexcept nogil:
    return vocab_rank_hashed(v, p, n, fbe_load64(p), fbe_hash(p, n))


cdef void vocab_clear(Vocab* v) noexcept nogil:
    v.slots = NULL
    v.long_offset = NULL
    v.pair_rank2 = NULL
    v.bloom = NULL
    v.rank_span = NULL
    v.char_info = NULL
    v.cross_bits = NULL
    v.cross_min = NULL
    v.bigram_bloom = NULL
    v.n_ranks = 0


cdef void vocab_free(Vocab* v) noexcept nogil:
    free(v.slots)
    free(v.long_offset)
    free(v.pair_rank2)
    free(v.bloom)
    free(v.rank_span)
    free(v.char_info)
    free(v.cross_bits)
    free(v.cross_min)
    free(v.bigram_bloom)
    vocab_clear(v)


cdef int vocab_build(Vocab* v, Py_ssize_t n, const uint32_t* lens, const uint32_t* ids,
                     const int64_t* offs) noexcept nogil:
    """Every table of v for the n mergeable tokens arena[offs[i]:offs[i] + lens[i]] of
    rank ids[i] (v.arena set, the tables cleared); -1 if out of memory (vocab_free
    releases what was made)."""
    cdef Py_ssize_t i
    cdef unsigned char two[2]
    cdef uint64_t max_rank = 0
    # 1. the hash table, load factor <= 1/2, and the Bloom filter in front of it: ~16
    #    filter bits per token, 2 set per token (a few % false positives)
    cdef uint64_t cap = 16
    while cap < 2 * <uint64_t>n + 2:
        cap *= 2
    v.slots = <Slot*>table_alloc(cap * sizeof(Slot))
    v.long_offset = <uint32_t*>calloc(cap, sizeof(uint32_t))
    v.pair_rank2 = <uint32_t*>malloc(65536 * sizeof(uint32_t))
    cdef uint64_t bloom_words = 64
    while bloom_words * 4 < <uint64_t>n:
        bloom_words *= 2
    v.bloom = <uint64_t*>table_alloc(bloom_words * sizeof(uint64_t))
    v.bloom_mask = bloom_words - 1
    if v.slots == NULL or v.long_offset == NULL or v.pair_rank2 == NULL or v.bloom == NULL:
        return -1
    v.mask = cap - 1
    for i in range(n):
        if lens[i] > 0:
            insert_slot(v, v.arena + offs[i], lens[i], <uint32_t>offs[i], ids[i])
    # 2. the single bytes and the 2-byte table
    for i in range(256):
        two[0] = <unsigned char>i
        v.byte_rank[i] = vocab_rank(v, two, 1)
    for i in range(65536):
        two[0] = <unsigned char>(i & 0xFF)
        two[1] = <unsigned char>(i >> 8)
        v.pair_rank2[i] = slot_lookup(v, two, 2)
    # 3. the tables for merging by characters, when ranks are dense enough to index
    for i in range(n):
        if ids[i] > max_rank:
            max_rank = ids[i]
    if n and max_rank < 4 * <uint64_t>n + 65536:
        v.rank_span = <uint64_t*>calloc(max_rank + 1, sizeof(uint64_t))
        if v.rank_span == NULL:
            return -1
        v.n_ranks = max_rank + 1
        return build_char_tables(v, n, lens, ids, offs)
    return 0
