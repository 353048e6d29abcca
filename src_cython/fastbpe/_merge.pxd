"""Merging one chunk from its bytes: the scan for short chunks, the heap for long ones
(``Tuning.heap_threshold``), the bucket merge for very long ones
(``Tuning.bucket_threshold``); all give identical output, and the tests compare them.
Measured: from ~20 bytes on the heap wins (CJK runs); words in alphabetic scripts are
shorter."""
from libc.stdint cimport uint64_t

from fastbpe._common cimport ERR_TOO_LONG, NO_RANK
from fastbpe._merge_buckets cimport bpe_buckets
from fastbpe._merge_heap cimport bpe_heap
from fastbpe._merge_scan cimport bpe_scan
from fastbpe._out cimport OutBuf
from fastbpe._tuning cimport Tuning
from fastbpe._vocab cimport Vocab


cdef inline int bpe_merge(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                          Py_ssize_t* err_pos, const Tuning* tuning) noexcept nogil:
    if <uint64_t>n >= <uint64_t>NO_RANK:   # positions must fit in 32 bits
        err_pos[0] = 0
        return ERR_TOO_LONG
    if n > tuning.bucket_threshold and v.n_ranks:
        return bpe_buckets(v, p, n, out, err_pos)
    if n > tuning.heap_threshold:
        return bpe_heap(v, p, n, out, err_pos)
    return bpe_scan(v, p, n, out, err_pos)
