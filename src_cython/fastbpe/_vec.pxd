# Growable int32/int64 arrays for nogil kernels (WordPiece encode and training; the
# bucket merge grows its arrays with vec_grow): plain structs freed by their owner,
# doubling on push from `first` slots (callers pick it: a few for the many small lists
# of training, more for one output buffer). Inline, so this .pxd needs no module.

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


cdef inline int vec_grow(void** data, Py_ssize_t* cap, Py_ssize_t first,
                         size_t item) noexcept nogil:
    """Double *cap (to `first` when empty), reallocating *data of item-byte slots;
    -1 (both unchanged) when memory runs out."""
    cdef Py_ssize_t new_cap = cap[0] * 2 if cap[0] else first
    cdef void* p = realloc(data[0], new_cap * item)
    if p == NULL:
        return -1
    data[0] = p
    cap[0] = new_cap
    return 0


cdef inline int i32_push(I32Vec* v, int32_t x, Py_ssize_t first) noexcept nogil:
    """Append x; -1 (v unchanged) when memory runs out."""
    if v.size == v.cap and vec_grow(<void**>&v.data, &v.cap, first, sizeof(int32_t)) < 0:
        return -1
    v.data[v.size] = x
    v.size += 1
    return 0


cdef inline int i64_push(I64Vec* v, int64_t x, Py_ssize_t first) noexcept nogil:
    """Append x; -1 (v unchanged) when memory runs out."""
    if v.size == v.cap and vec_grow(<void**>&v.data, &v.cap, first, sizeof(int64_t)) < 0:
        return -1
    v.data[v.size] = x
    v.size += 1
    return 0
