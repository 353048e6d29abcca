"""The heap merge: the same merges as the scan in O(n log n), for long chunks (up to
``Tuning.bucket_threshold`` bytes; see _merge_buckets)."""
from libc.stdint cimport uint32_t

from fastbpe._common cimport NO_RANK
from fastbpe._out cimport OutBuf
from fastbpe._vocab cimport Vocab, vocab_rank

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


cdef inline void merge_part(const Vocab* v, const unsigned char* p, Py_ssize_t n,
                            uint32_t* nxt, uint32_t* prv, uint32_t* token,
                            uint32_t* pair_rank, Py_ssize_t i, uint32_t r) noexcept nogil:
    """One merge of the heap and bucket merges' linked list of parts (named by their
    start offset; pair_rank[i]: the rank of part i with its successor, NO_RANK if none
    or absorbed): join live part i, whose pair has rank r, with its successor, and set
    the new ranks of the merged part's pair and of its predecessor's (prv[i]), which the
    caller then queues."""
    cdef Py_ssize_t j = nxt[i], k = nxt[j], h
    token[i] = r
    pair_rank[j] = NO_RANK
    nxt[i] = <uint32_t>k
    if k < n:
        prv[k] = <uint32_t>i
        pair_rank[i] = vocab_rank(v, p + i, nxt[k] - i)
    else:
        pair_rank[i] = NO_RANK
    h = prv[i]
    if h != NO_RANK:
        pair_rank[h] = vocab_rank(v, p + h, k - h)
