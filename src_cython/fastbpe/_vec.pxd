# Growable int32/int64 arrays for nogil kernels (WordPiece encode and training): plain
# structs freed by their owner, doubling on push from `first` slots (callers pick it: a
# few for the many small lists of training, more for one output buffer). Inline, so
# this .pxd needs no module.

from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport realloc


cdef struct I32Vec:
    int32_t* data
    Py_ssize_t size
    Py_ssize_t cap


cdef struct I64Vec:
    int64_t* data
    Py_ssize_t size
    Py_ssize_t cap


cdef inline Py_ssize_t grown(Py_ssize_t cap, Py_ssize_t first) noexcept nogil:
    return cap * 2 if cap else first


cdef inline int i32_push(I32Vec* v, int32_t x, Py_ssize_t first) noexcept nogil:
    """Append x; -1 (v unchanged) when memory runs out."""
    cdef int32_t* p
    if v.size == v.cap:
        p = <int32_t*>realloc(v.data, grown(v.cap, first) * sizeof(int32_t))
        if p == NULL:
            return -1
        v.data = p
        v.cap = grown(v.cap, first)
    v.data[v.size] = x
    v.size += 1
    return 0


cdef inline int i64_push(I64Vec* v, int64_t x, Py_ssize_t first) noexcept nogil:
    """Append x; -1 (v unchanged) when memory runs out."""
    cdef int64_t* p
    if v.size == v.cap:
        p = <int64_t*>realloc(v.data, grown(v.cap, first) * sizeof(int64_t))
        if p == NULL:
            return -1
        v.data = p
        v.cap = grown(v.cap, first)
    v.data[v.size] = x
    v.size += 1
    return 0
