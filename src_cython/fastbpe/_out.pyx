"""The process-wide pool of output slabs behind ``OutArena`` (see ``_out.pxd``), and
``out_grow``."""
from libc.stdint cimport uint32_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy

cdef extern from "fbe_slab.h" nogil:
    unsigned char* fbe_slab_data(FbeSlab* s) noexcept
    const size_t FBE_SLAB_BYTES
    FbeSlab* fbe_slab_take(size_t min_bytes) noexcept
    void fbe_slabs_give(FbeSlab* s) noexcept
    void fbe_pool_after_fork() noexcept
    size_t fbe_pool_size() noexcept
    int pthread_atfork(void (*prepare)() noexcept nogil, void (*parent)() noexcept nogil,
                       void (*child)() noexcept nogil)

pthread_atfork(NULL, NULL, fbe_pool_after_fork)


def _output_pool_bytes():
    """Testing hook: bytes of output slabs kept between calls."""
    return fbe_pool_size()


cdef void arena_release(OutArena* a) noexcept nogil:
    fbe_slabs_give(a.head)
    a.head = NULL


cdef int out_grow(OutBuf* o, Py_ssize_t need) noexcept nogil:
    cdef Py_ssize_t cap = o.cap * 2 if o.cap else 256
    while cap < need:
        cap *= 2
    cdef uint32_t* d
    cdef FbeSlab* s
    cdef size_t extra
    if o.arena != NULL and cap * sizeof(uint32_t) > FBE_SLAB_BYTES // 2:
        # a big output leaves the arena for malloc, whose realloc grows it in place (a
        # chain of ever larger slabs would hold twice the memory until the call ends)
        d = <uint32_t*>malloc(cap * sizeof(uint32_t))
        if d == NULL:
            return -1
        if o.size:
            memcpy(d, o.data, o.size * sizeof(uint32_t))
        o.arena = NULL
    elif o.arena == NULL:
        d = <uint32_t*>realloc(o.data, cap * sizeof(uint32_t))
        if d == NULL:
            return -1
    else:
        s = o.arena.head
        extra = (cap - o.cap) * sizeof(uint32_t)
        if (s != NULL and o.data != NULL
                and <unsigned char*>(o.data + o.cap) == fbe_slab_data(s) + s.used
                and s.used + extra <= s.size):
            s.used += extra       # the buffer ends the slab's used part: grow in place
            o.cap = cap
            return 0
        if s == NULL or s.used + cap * sizeof(uint32_t) > s.size:
            s = fbe_slab_take(cap * sizeof(uint32_t))
            if s == NULL:
                return -1
            s.next = o.arena.head
            o.arena.head = s
        d = <uint32_t*>(fbe_slab_data(s) + s.used)
        s.used += cap * sizeof(uint32_t)
        if o.size:
            memcpy(d, o.data, o.size * sizeof(uint32_t))
    o.data = d
    o.cap = cap
    return 0
