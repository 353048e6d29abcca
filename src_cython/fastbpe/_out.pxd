"""Output buffers: where a job's ids go.

``OutBuf`` is the one growable buffer of ids of the encoder. A batch's buffers come
from ``OutArena``s: slabs of at least 1 MiB from a process-wide pool (``_out.pyx``),
kept between calls up to 32 MiB, so that batches write to memory the process already
has instead of faulting fresh pages every call (measured, gpt2 Python in ~2 KB
documents on one thread: 29-33 ms per call with 3.1k-6.1k page faults, 22-24 ms with
the pool). ``out_push`` is inline: it runs per token; ``out_grow`` only when a buffer
is full.
"""
from libc.stdint cimport uint32_t
from libc.stdlib cimport free

cdef extern from "fbe_slab.h" nogil:
    ctypedef struct FbeSlab:
        FbeSlab* next
        size_t size
        size_t used


cdef struct OutArena:
    FbeSlab* head             # the slab being filled; earlier ones follow through next


cdef struct OutBuf:
    uint32_t* data
    Py_ssize_t size
    Py_ssize_t cap
    OutArena* arena           # NULL: data is malloc'd (free it with out_free)


cdef inline void out_init(OutBuf* o, uint32_t* data, Py_ssize_t cap) noexcept nogil:
    # An empty buffer over data[:cap], not from an arena. With data NULL and cap 0 it
    # grows by malloc (free it with out_free); over a caller's array, the caller must
    # make sure it never grows (out_grow would realloc that array).
    o.data = data
    o.size = 0
    o.cap = cap
    o.arena = NULL


cdef inline void out_free(OutBuf* o) noexcept nogil:
    if o.arena == NULL:
        free(o.data)
    o.data = NULL


cdef int out_grow(OutBuf* o, Py_ssize_t need) noexcept nogil
    # Room for `need` ids in all (0), or -1 out of memory.


cdef inline int out_push(OutBuf* o, uint32_t v) noexcept nogil:
    if o.size == o.cap:
        if out_grow(o, o.size + 1) < 0:
            return -1
    o.data[o.size] = v
    o.size += 1
    return 0


cdef void arena_release(OutArena* a) noexcept nogil
    # Give an arena's slabs back to the pool (once every list and array is built).
