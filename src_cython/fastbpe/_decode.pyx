"""Decoding tables and loops (see ``_decode.pxd``)."""
from cpython.ref cimport PyObject
from libc.stdint cimport int64_t, uint32_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

from fastbpe._common cimport NO_RANK

import numpy as np

cdef extern from "Python.h":
    PyObject** PySequence_Fast_ITEMS(object o)
    bint fbe_long_check_exact "PyLong_CheckExact"(PyObject* o) noexcept
    long long fbe_long_as_ll "PyLong_AsLongLongAndOverflow"(PyObject* o, int* overflow) noexcept
    object PyBytes_FromStringAndSize(const char* s, Py_ssize_t n)
    char* PyBytes_AS_STRING(object b)


cdef void decode_clear(DecodeTable* d) noexcept nogil:
    d.arena = NULL
    d.entry_off = NULL
    d.entry_len = NULL
    d.n_entries = 0
    d.dense_entry = NULL
    d.dense_size = 0
    d.sorted_ids = NULL
    d.sorted_entry = NULL


cdef void decode_free(DecodeTable* d) noexcept nogil:
    free(d.entry_off)
    free(d.entry_len)
    free(d.dense_entry)
    free(d.sorted_ids)
    free(d.sorted_entry)
    decode_clear(d)


cdef int decode_build(DecodeTable* d, const unsigned char* arena, object lens,
                      object ids) except -1:
    cdef const uint32_t[::1] lens_v = lens
    cdef const int64_t[::1] ids_v = ids
    cdef Py_ssize_t n = lens_v.shape[0], i, e
    cdef int64_t off = 0, max_id = 0
    d.arena = arena
    d.n_entries = n
    d.entry_off = <int64_t*>malloc(max(n, 1) * sizeof(int64_t))
    d.entry_len = <uint32_t*>malloc(max(n, 1) * sizeof(uint32_t))
    if d.entry_off == NULL or d.entry_len == NULL:
        raise MemoryError()
    for i in range(n):
        d.entry_off[i] = off
        d.entry_len[i] = lens_v[i]
        off += lens_v[i]
        if ids_v[i] > max_id:
            max_id = ids_v[i]
    if n and max_id < 4 * n + 65536:
        d.dense_size = <Py_ssize_t>max_id + 1
        d.dense_entry = <int64_t*>malloc(d.dense_size * sizeof(int64_t))
        if d.dense_entry == NULL:
            raise MemoryError()
        for i in range(d.dense_size):
            d.dense_entry[i] = -1
        for e in range(n - 1, -1, -1):    # backwards: the first entry of an id wins
            d.dense_entry[<Py_ssize_t>ids_v[e]] = e
        return 0
    d.dense_size = 0
    d.sorted_ids = <uint32_t*>malloc(max(n, 1) * sizeof(uint32_t))
    d.sorted_entry = <int64_t*>malloc(max(n, 1) * sizeof(int64_t))
    if d.sorted_ids == NULL or d.sorted_entry == NULL:
        raise MemoryError()
    order = np.argsort(ids, kind="stable")    # stable: the first entry of an id first
    cdef const int64_t[::1] order_v = np.ascontiguousarray(order, dtype=np.int64)
    for i in range(n):
        e = order_v[i]
        d.sorted_ids[i] = <uint32_t>ids_v[e]
        d.sorted_entry[i] = e
    return 0


cdef int64_t decode_entry(const DecodeTable* d, int64_t token) noexcept nogil:
    cdef Py_ssize_t lo, hi, mid
    if token < 0:
        return -1
    if d.dense_entry != NULL:
        return d.dense_entry[token] if token < d.dense_size else -1
    lo = 0
    hi = d.n_entries
    while lo < hi:
        mid = (lo + hi) >> 1
        if d.sorted_ids[mid] < token:
            lo = mid + 1
        else:
            hi = mid
    if lo < d.n_entries and d.sorted_ids[lo] == token:
        # several entries can share an id (a special equal to a mergeable id);
        # the stable sort put the mergeable one first
        return d.sorted_entry[lo]
    return -1


cdef bytes decode_ids(const DecodeTable* d, int64_t* ids, Py_ssize_t n, object given,
                      bint scratch):
    cdef Py_ssize_t i, total = 0, bad = -1
    cdef int64_t e
    with nogil:
        for i in range(n):
            e = decode_entry(d, ids[i])
            if e < 0:
                bad = i
                break
            if scratch:
                ids[i] = e
            total += d.entry_len[e]
    if bad >= 0:
        raise KeyError(int(given[bad]))
    cdef bytes out = PyBytes_FromStringAndSize(NULL, total)
    cdef char* dst = PyBytes_AS_STRING(out)
    cdef const char* src = <const char*>d.arena
    with nogil:
        for i in range(n):
            e = ids[i] if scratch else decode_entry(d, ids[i])
            memcpy(dst, src + d.entry_off[e], d.entry_len[e])
            dst += d.entry_len[e]
    return out


cdef object decode_exact_ints(const DecodeTable* d, object tokens):
    """Reading the ints in place: numpy's conversion of a list costs about 30 ns an
    item, which made decode slower than tiktoken's."""
    cdef Py_ssize_t n = len(tokens), i
    cdef PyObject** items = PySequence_Fast_ITEMS(tokens)
    cdef int64_t* ids
    cdef long long v
    cdef int overflow = 0
    if n == 0:
        return b""
    ids = <int64_t*>malloc(n * sizeof(int64_t))
    if ids == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            if not fbe_long_check_exact(items[i]):
                return None
            v = fbe_long_as_ll(items[i], &overflow)
            ids[i] = v if overflow == 0 and 0 <= v < NO_RANK else -1
        return decode_ids(d, ids, n, tokens, True)
    finally:
        free(ids)


cdef bytes entry_bytes(const DecodeTable* d, int64_t e):
    return PyBytes_FromStringAndSize(<const char*>d.arena + d.entry_off[e], d.entry_len[e])


cdef list entries_sorted(const DecodeTable* d, Py_ssize_t n):
    cdef Py_ssize_t i
    cdef list out = [entry_bytes(d, i) for i in range(n)]
    out.sort()
    return out
