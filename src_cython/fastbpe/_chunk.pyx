"""The slow half of ``bpe_chunk`` (see ``_chunk.pxd``)."""
from libc.stdint cimport uint32_t, uint64_t

from fastbpe._chunk_cache cimport CacheEntry, cache_put
from fastbpe._common cimport ERR_NOMEM, ERR_NONE, NO_RANK
from fastbpe._merge cimport bpe_merge
from fastbpe._merge_chars cimport UNITS_MAX, UNITS_MIN, bpe_by_chars
from fastbpe._out cimport OutBuf, out_push
from fastbpe._tuning cimport Tuning
from fastbpe._vocab cimport Vocab, vocab_rank_hashed


cdef int bpe_chunk_miss(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
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
                      Py_ssize_t* err_pos, CacheEntry* cache, const Tuning* tuning) noexcept nogil:
    return bpe_chunk(v, p, n, out, err_pos, cache, tuning)
