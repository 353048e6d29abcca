"""The heap merge: the same merges as the scan in O(n log n), for long chunks."""
from fastbpe._out cimport OutBuf
from fastbpe._vocab cimport Vocab

cdef int bpe_heap(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                  Py_ssize_t* err_pos) noexcept nogil
    # Append enc(p[:n]) to out: ERR_NONE, ERR_NOMEM, or ERR_BYTE (err_pos[0]: the byte).
