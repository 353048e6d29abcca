"""Merging by characters (see _merge_chars.pyx and docs/merge_rules.md)."""
from libc.stdint cimport uint32_t, uint64_t

from fastbpe._chunk_cache cimport CacheEntry
from fastbpe._out cimport OutBuf
from fastbpe._tuning cimport Tuning
from fastbpe._vocab cimport Vocab, bigram_bits

cdef enum:
    UNITS_MIN = 7             # bytes; shorter chunks merge faster from bytes
    UNITS_MAX = 256           # bytes; longer chunks take the heap (bounded work)
    UNITS_BUDGET = 4          # bytes re-encoded at junctions, per byte of chunk
    JOIN_BYTES_MAX = 512


cdef inline bint cross_bit(const Vocab* v, uint32_t x, uint32_t y) noexcept nogil:
    cdef uint32_t e = x | (y << 8)
    return (v.cross_bits[e >> 6] >> (e & 63)) & 1


cdef inline bint bigram_may_join(const Vocab* v, uint32_t a, uint32_t b) noexcept nogil:
    """False only if no token holds character a followed by character b (whole). A false
    True (about 1%) only costs a split not taken."""
    cdef uint64_t word
    cdef uint64_t bits = bigram_bits(a, b, &word)
    return (v.bigram_bloom[word] & bits) == bits


cdef inline bint no_token_spans(const Vocab* v, bint clean, uint32_t a,
                                uint32_t b) noexcept nogil:
    """Corollary 4 (split)'s test for the boundary between characters a and b, given clean = its
    cross bit is clear (no token that is not whole characters spans it)."""
    return clean and not bigram_may_join(v, a, b)


cdef int bpe_by_chars(const Vocab* v, const unsigned char* p, Py_ssize_t n,
                      OutBuf* out, CacheEntry* cache, const Tuning* tuning) noexcept nogil
    # Append enc(p[:n]) to out by merging characters (ERR_NONE); -1, out unchanged,
    # when the caller must merge from bytes instead. UNITS_MIN <= n <= UNITS_MAX.


# Testing hooks (CoreBPE's _encode_chunk_by_chars, _split_points, _bigram_may_join):
cdef object chars_ids(const Vocab* v, bytes piece, const Tuning* tuning, Py_ssize_t n_shared)
    # bpe_by_chars of one chunk as a list of ids; None when that path gives up or is
    # off for this vocabulary.
cdef object split_points(const Vocab* v, bytes piece)
    # The offsets inside piece where Corollary 4 (split) may cut; None when merging by
    # characters is off or the piece is not UTF-8 of 1- to 3-byte characters.
cdef object bigram_filter(const Vocab* v, object a, object b)
    # bigram_may_join of two characters as a bool; None when merging by characters is off.
