"""The lowest-rank scan (tiktoken's merge loop): find the lowest pair rank, leftmost on
ties, merge, repeat. O(n^2) in the worst case but the fastest for the short chunks that
make up almost all text; ``fastbpe._merge`` sends longer ones to the heap."""
from libc.stdint cimport uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memmove

from fastbpe._common cimport ERR_BYTE, ERR_NOMEM, ERR_NONE, NO_RANK
from fastbpe._out cimport OutBuf, out_grow, out_push
from fastbpe._vocab cimport Vocab, vocab_rank, vocab_rank_in, vocab_rank_two

cdef enum:
    # Chunks up to this many bytes use stack buffers.
    SCAN_STACK = 256


cdef struct ScanPart:
    uint32_t start
    uint32_t rank     # rank of merging this part with the next one
    uint32_t token    # this part's own token (NO_RANK for a byte that is not a token)


cdef int bpe_scan(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                  Py_ssize_t* err_pos) noexcept nogil:
    """tiktoken's merge loop: find the lowest pair rank (leftmost on ties), merge, repeat.

    O(n^2) in the worst case, but the fastest choice for the short chunks that make up
    almost all text. parts[m-1] is a sentinel holding the end offset.
    """
    cdef ScanPart stack_parts[SCAN_STACK + 1 + 8]
    cdef ScanPart tmp_parts[8]
    cdef ScanPart* parts = stack_parts
    cdef unsigned char stack_text[SCAN_STACK + 8]
    cdef unsigned char* text = stack_text
    cdef Py_ssize_t m = n + 1, i
    cdef uint32_t best
    cdef uint64_t key, cand, zero = 0
    cdef int rc = ERR_NONE
    if n > SCAN_STACK:
        parts = <ScanPart*>malloc((n + 1) * sizeof(ScanPart) + n + 8)
        if parts == NULL:
            return ERR_NOMEM
        text = <unsigned char*>(parts + n + 1)
    # A copy of the chunk with 8 zero bytes after it: every word the merges look up
    # is then one load and a mask (short_word, padded) instead of a branchy read.
    memcpy(text, p, n)
    memcpy(text + n, &zero, 8)
    p = text
    for i in range(n):
        parts[i].start = <uint32_t>i
        parts[i].token = v.byte_rank[p[i]]
        parts[i].rank = vocab_rank(v, p + i, 2) if i + 1 < n else NO_RANK
    parts[n].start = <uint32_t>n
    parts[n].rank = NO_RANK
    parts[n].token = NO_RANK
    while True:
        # argmin as the min of rank << 32 | index: branch-free (cmov), and the lowest
        # index wins ties as the scan requires
        key = <uint64_t>NO_RANK << 32
        for i in range(m - 2):
            cand = (<uint64_t>parts[i].rank << 32) | <uint64_t>i
            key = cand if cand < key else key
        best = <uint32_t>(key >> 32)
        if best == NO_RANK:
            break
        i = <Py_ssize_t>(key & 0xFFFFFFFFULL)
        parts[i].token = best
        if m - i - 2 <= 8 and parts == stack_parts:
            # two fixed-size copies through a buffer compile to a few vector moves; a
            # libc memmove of varying small sizes mispredicts its size dispatch. Past
            # the sentinel it copies stale entries, inside the padded stack array.
            memcpy(tmp_parts, &parts[i + 2], 8 * sizeof(ScanPart))
            memcpy(&parts[i + 1], tmp_parts, 8 * sizeof(ScanPart))
        else:
            memmove(&parts[i + 1], &parts[i + 2], (m - i - 2) * sizeof(ScanPart))
        m -= 1
        # Part i now ends at parts[i + 1].start; re-rank its pairs with both neighbours.
        if i > 0 and i + 2 < m:
            vocab_rank_two(v, p + parts[i].start, parts[i + 2].start - parts[i].start,
                           p + parts[i - 1].start, parts[i + 1].start - parts[i - 1].start,
                           &parts[i].rank, &parts[i - 1].rank, True)
        elif i + 2 < m:
            parts[i].rank = vocab_rank_in(v, p + parts[i].start,
                                          parts[i + 2].start - parts[i].start, True)
        else:
            parts[i].rank = NO_RANK
            if i > 0:
                parts[i - 1].rank = vocab_rank_in(v, p + parts[i - 1].start,
                                                  parts[i + 1].start - parts[i - 1].start,
                                                  True)
    for i in range(m - 1):
        if parts[i].token == NO_RANK:
            err_pos[0] = parts[i].start
            rc = ERR_BYTE
            break
        if out_push(out, parts[i].token) < 0:
            rc = ERR_NOMEM
            break
    if parts != stack_parts:
        free(parts)
    return rc
