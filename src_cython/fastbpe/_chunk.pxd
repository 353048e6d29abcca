"""Encoding one pre-tokenized chunk: the common cases inline (one byte, a 2-byte token, a
chunk-cache hit), since they end most chunks and a call would save and restore
registers for each; the rest (``bpe_chunk_miss``: the chunk is a token, or merge it by
characters or by bytes) is also compiled into the job's module (inline here), where the
compiler keeps it out of the loop as a direct call; the merges it picks are calls."""
from libc.stdint cimport uint32_t, uint64_t

from fastbpe._chunk_cache cimport (CACHE_KEY_MAX, CacheEntry, cache_get, cache_get_word,
                                   cache_line, cache_put)
from fastbpe._merge cimport bpe_merge
from fastbpe._merge_chars cimport UNITS_MAX, UNITS_MIN, bpe_by_chars
from fastbpe._common cimport ERR_BYTE, ERR_NOMEM, ERR_NONE, NO_RANK, fbe_hash, fbe_hash_word, fbe_load64, fbe_word
from fastbpe._out cimport OutBuf, out_push
from fastbpe._tuning cimport Tuning
from fastbpe._vocab cimport Vocab, vocab_rank_hashed


cdef inline bint bpe_chunk_short(const Vocab* v, const unsigned char* p, Py_ssize_t n,
                                 OutBuf* out, Py_ssize_t* err_pos, int* rc) noexcept nogil:
    """The chunks that need no hash: one byte, or two that are a token. True (rc set)
    if p[:n] is one of them."""
    cdef uint32_t r
    # A quarter of all chunks is one byte (punctuation, newlines): its token comes from
    # a 1 KiB table, cheaper than hashing it for the chunk cache.
    if n == 1:
        r = v.byte_rank[p[0]]
        if r == NO_RANK:
            err_pos[0] = 0
            rc[0] = ERR_BYTE
        else:
            rc[0] = ERR_NOMEM if out_push(out, r) < 0 else ERR_NONE
        return True
    if n == 2:
        r = v.pair_rank2[p[0] | (<uint32_t>p[1] << 8)]
        if r != NO_RANK:
            rc[0] = ERR_NOMEM if out_push(out, r) < 0 else ERR_NONE
            return True
    return False


cdef inline void chunk_key(const unsigned char* p, Py_ssize_t n, uint64_t* w,
                           uint64_t* h) noexcept nogil:
    """The chunk's word w (zero-padded for n <= 8, else its first 8 bytes) and hash h,
    as the chunk cache and the vocabulary's slot_hash take them."""
    if n <= 8:
        w[0] = fbe_word(p, n)
        h[0] = fbe_hash_word(w[0], n)
    else:
        w[0] = fbe_load64(p)
        h[0] = fbe_hash(p, n)


cdef inline int bpe_chunk(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                          Py_ssize_t* err_pos, CacheEntry* cache,
                          const Tuning* tuning) noexcept nogil:
    """Encode one pre-tokenized chunk: a whole-chunk hit first, as tiktoken does.

    With a cache, short chunks are looked up there first: one line of a small table,
    instead of the filter word and slot of a vocabulary table far bigger than L2.
    Only these common cases are inline in the chunk loop (most chunks end here, and a
    call would save and restore registers for each); the rest is bpe_chunk_miss.
    """
    cdef uint64_t w, h
    cdef int rc
    if bpe_chunk_short(v, p, n, out, err_pos, &rc):
        return rc
    chunk_key(p, n, &w, &h)
    return bpe_chunk_keyed(v, p, n, w, h, out, err_pos, cache, tuning)


cdef inline int bpe_chunk_keyed(const Vocab* v, const unsigned char* p, Py_ssize_t n,
                                uint64_t w, uint64_t h, OutBuf* out, Py_ssize_t* err_pos,
                                CacheEntry* cache, const Tuning* tuning) noexcept nogil:
    """bpe_chunk past bpe_chunk_short, given chunk_key's w and h: the cache line, then
    bpe_chunk_miss."""
    cdef CacheEntry* e = NULL
    cdef int rc
    if cache != NULL and n <= CACHE_KEY_MAX:
        e = cache_line(cache, h)
        if (cache_get_word(e, w, n, h, out, &rc) if n <= 8
                else cache_get(e, p, n, h, out, &rc)):
            return rc
    return bpe_chunk_miss(v, p, n, out, err_pos, cache, e, w, h, tuning)


cdef inline int bpe_chunk_miss(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                        Py_ssize_t* err_pos, CacheEntry* cache, CacheEntry* e, uint64_t w,
                        uint64_t h, const Tuning* tuning) noexcept nogil:
    """bpe_chunk past the fast paths, given its word w and hash h (slot_hash) and the
    cache entry e to fill (NULL: none): the whole chunk is a token, or merge it."""
    cdef uint32_t r
    cdef Py_ssize_t before = out.size
    cdef int rc
    if n == 2:
        rc = bpe_merge(v, p, n, out, err_pos, tuning)
    else:
        r = vocab_rank_hashed(v, p, n, w, h)
        if r != NO_RANK:
            rc = ERR_NOMEM if out_push(out, r) < 0 else ERR_NONE
        elif (v.char_info != NULL and tuning.by_chars and UNITS_MIN <= n <= UNITS_MAX
              and (p[0] >= 0xE0 or p[1] >= 0xE0)
              and bpe_by_chars(v, p, n, out, cache, tuning) == ERR_NONE):
            rc = ERR_NONE
        else:
            rc = bpe_merge(v, p, n, out, err_pos, tuning)
    if e != NULL and rc == ERR_NONE:
        cache_put(e, p, n, h, out, before)
    return rc


cdef int encode_chunk(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                      Py_ssize_t* err_pos, CacheEntry* cache, const Tuning* tuning) noexcept nogil
    # bpe_chunk as a call, for the paths that are not the per-chunk loop of a job: each
    # inline copy of bpe_chunk in a module is a reason for the compiler not to inline it
    # into that loop.
cdef list piece_ids(const Vocab* v, bytes piece, bint whole_first, const Tuning* tuning,
                    Py_ssize_t n_shared)
    # The ids of one piece of raw bytes, no pre-tokenization, as a list: encode_chunk
    # (its id if it is a token) when whole_first, else bpe_merge from single bytes;
    # MemoryError, or ValueError for a byte that is not a token or a piece too long.
