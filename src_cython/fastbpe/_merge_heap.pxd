"""The heap merge: the same merges as the scan in O(n log n), for long chunks (up to
``Tuning.bucket_threshold`` bytes; see _merge_buckets)."""
from libc.stdint cimport uint32_t

from fastbpe._out cimport OutBuf
from fastbpe._vocab cimport Vocab

cdef int bpe_heap(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                  Py_ssize_t* err_pos) noexcept nogil
    # Append enc(p[:n]) to out: ERR_NONE, ERR_NOMEM, or ERR_BYTE (err_pos[0]: the byte).

# Shared with the bucket merge (fastbpe._merge_buckets):
cdef bint any_pair_merges(const Vocab* v, const unsigned char* p, Py_ssize_t n) noexcept nogil
    # False if no two adjacent bytes of p[:n] form a token: then nothing merges, and the
    # chunk's tokens are its bytes (push_byte_tokens), with no scratch memory.
cdef int push_byte_tokens(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                          Py_ssize_t* err_pos) noexcept nogil
    # Append the token of each byte of p[:n] (ERR_BYTE at the first that has none).
cdef int push_parts(const uint32_t* token, const uint32_t* nxt, Py_ssize_t n, OutBuf* out,
                    Py_ssize_t* err_pos) noexcept nogil
    # Append token[i] for the parts i = 0, nxt[0], ... below n (ERR_BYTE at a part whose
    # token is NO_RANK: a single byte that is not a token).
