"""The slow half of ``bpe_chunk`` (see ``_chunk.pxd``)."""
from libc.stdint cimport uint32_t, uint64_t

from libc.stdlib cimport free

from fastbpe._chunk_cache cimport CacheEntry
from fastbpe._idlists cimport outbuf_to_list
from fastbpe._out cimport OutBuf, out_init
from fastbpe._tuning cimport Tuning
from fastbpe._vocab cimport Vocab


cdef int encode_chunk(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                      Py_ssize_t* err_pos, CacheEntry* cache, const Tuning* tuning) noexcept nogil:
    return bpe_chunk(v, p, n, out, err_pos, cache, tuning)


cdef list piece_ids(const Vocab* v, bytes piece, bint whole_first, const Tuning* tuning,
                    Py_ssize_t n_shared):
    cdef OutBuf out
    cdef Py_ssize_t err_pos = 0
    cdef int rc
    cdef Tuning knobs = tuning[0]     # a copy: set_tuning may run while the GIL is free
    out_init(&out, NULL, 0)
    cdef const unsigned char* p = <const unsigned char*>piece
    cdef Py_ssize_t n = len(piece)
    if n == 0:
        return []
    try:
        with nogil:
            rc = (encode_chunk(v, p, n, &out, &err_pos, NULL, &knobs) if whole_first
                  else bpe_merge(v, p, n, &out, &err_pos, &knobs))
        if rc == ERR_NOMEM:
            raise MemoryError()
        if rc == ERR_BYTE:
            raise ValueError(f"byte at {err_pos} is not a token")
        if rc != ERR_NONE:
            raise ValueError(f"piece of {n} bytes is too long to merge")
        return outbuf_to_list(&out, n_shared)
    finally:
        free(out.data)
