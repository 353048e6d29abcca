"""The slow half of ``bpe_chunk`` (see ``_chunk.pxd``)."""
from libc.stdint cimport uint32_t, uint64_t

from fastbpe._chunk_cache cimport CacheEntry
from fastbpe._out cimport OutBuf
from fastbpe._tuning cimport Tuning
from fastbpe._vocab cimport Vocab


cdef int encode_chunk(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                      Py_ssize_t* err_pos, CacheEntry* cache, const Tuning* tuning) noexcept nogil:
    return bpe_chunk(v, p, n, out, err_pos, cache, tuning)
