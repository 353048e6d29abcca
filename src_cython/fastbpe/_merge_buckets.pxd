"""The bucket merge: the heap merge's merges for chunks of many kilobytes, taken from one
queue of positions per rank, so that "x" * 10**7 streams through memory instead of
sifting a heap of tens of megabytes (the corollaries are in _merge_buckets.pyx)."""
from fastbpe._out cimport OutBuf
from fastbpe._vocab cimport Vocab

cdef int bpe_buckets(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                     Py_ssize_t* err_pos) noexcept nogil
    # Append enc(p[:n]) to out: ERR_NONE, ERR_NOMEM, or ERR_BYTE (err_pos[0]: the byte).
    # The same tokens as bpe_heap, which it calls itself if a queue's order would break
    # (Corollary B2). Needs dense ranks (v.n_ranks > 0: the rank -> queue table is
    # indexed by rank); bpe_merge sends other vocabularies to the heap.
