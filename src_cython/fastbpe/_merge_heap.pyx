"""The heap merge: the scan's merges in O(n log n), a min-heap of (rank, position) over a
linked list of parts, for chunks of tens of bytes to kilobytes (longer ones take the
bucket merge, whose queues are read in order where a heap of megabytes is read at
random). The heap is 8-ary and cache-line aligned; its sift is inline here."""
from libc.stdint cimport uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc

from fastbpe._common cimport ERR_BYTE, ERR_NOMEM, ERR_NONE, NO_RANK
from fastbpe._out cimport OutBuf, out_grow, out_push
from fastbpe._vocab cimport Vocab, vocab_rank

cdef enum:
    HEAP_STACK_WORDS = 1024   # 8 KiB: the heap merge of a 256-byte chunk without malloc


# A heap entry is one word, rank << 32 | position: lowest rank first and, on equal
# ranks, the leftmost pair, exactly as the scan chooses. (Positions fit in 32 bits:
# longer chunks are refused before merging.)
ctypedef uint64_t HeapItem

# The heap is 8-ary: the children of entry k are 8k + 1 .. 8k + 8, and the array starts
# 7 entries past a 64-byte boundary, so each set of children is one cache line. A long
# chunk's heap is megabytes read at random, and a binary heap's sift-down reads a new
# line at each of its log2(size) levels; this one reads log8(size) lines, three times
# fewer. Entries from `size` to the end of the last set of children hold HEAP_EMPTY, so
# the minimum of a set takes no bounds checks.
cdef enum:
    HEAP_PAD_FRONT = 7      # entries before entry 0, to align the sets of children
    HEAP_PAD_BACK = 8       # HEAP_EMPTY entries past the largest size, for the last set

cdef extern from "fbe_util.h":
    const uint64_t HEAP_EMPTY "FBE_HEAP_EMPTY"


cdef inline void heap_sift_down(HeapItem* h, Py_ssize_t size, Py_ssize_t i) noexcept nogil:
    cdef HeapItem item = h[i], least, x
    cdef Py_ssize_t first, child, k
    while True:
        first = 8 * i + 1
        if first >= size:
            break
        # the least of the 8 children, branch-free (cmov); the empty ones never win
        least = h[first]
        child = first
        for k in range(1, 8):
            x = h[first + k]
            child = first + k if x < least else child
            least = x if x < least else least
        if least >= item:
            break
        h[i] = least
        i = child
    h[i] = item


cdef inline void heap_push(HeapItem* h, Py_ssize_t* size, uint32_t rank, Py_ssize_t pos) noexcept nogil:
    cdef Py_ssize_t i = size[0], parent
    cdef HeapItem item = (<uint64_t>rank << 32) | <uint64_t>pos
    size[0] += 1
    while i > 0:
        parent = (i - 1) >> 3
        if item >= h[parent]:
            break
        h[i] = h[parent]
        i = parent
    h[i] = item


cdef bint any_pair_merges(const Vocab* v, const unsigned char* p, Py_ssize_t n) noexcept nogil:
    # Every merge sequence starts by joining two single bytes, so a chunk in which no two
    # adjacent bytes form a token never merges: its tokens are its bytes. Long runs of
    # such a pair (" " * 10**7 in GPT-2) then cost a table lookup per byte instead of
    # the merges' fresh scratch memory per byte.
    cdef Py_ssize_t i
    for i in range(n - 1):
        if v.pair_rank2[p[i] | (<uint32_t>p[i + 1] << 8)] != NO_RANK:
            return True
    return False


cdef int push_parts(const uint32_t* token, const uint32_t* nxt, Py_ssize_t n, OutBuf* out,
                    Py_ssize_t* err_pos) noexcept nogil:
    cdef Py_ssize_t i = 0
    while i < n:
        if token[i] == NO_RANK:
            err_pos[0] = i
            return ERR_BYTE
        if out_push(out, token[i]) < 0:
            return ERR_NOMEM
        i = nxt[i]
    return ERR_NONE


cdef int push_byte_tokens(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                          Py_ssize_t* err_pos) noexcept nogil:
    """Append the token of each byte of p[:n] (ERR_BYTE at the first that has none)."""
    cdef Py_ssize_t i
    cdef uint32_t r
    if out.size + n > out.cap and out_grow(out, out.size + n) < 0:
        return ERR_NOMEM
    for i in range(n):
        r = v.byte_rank[p[i]]
        if r == NO_RANK:
            err_pos[0] = i
            return ERR_BYTE
        out.data[out.size] = r
        out.size += 1
    return ERR_NONE


cdef int bpe_heap(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                  Py_ssize_t* err_pos) noexcept nogil:
    """Same merges as ``bpe_scan`` in O(n log n): a min-heap of (rank, position) over a
    doubly linked list of parts, with lazy invalidation.

    Parts are named by their start offset. pair_rank[i] is the current rank of merging
    part i with its successor (NO_RANK if none, or if part i was absorbed). A heap entry
    is live iff it still equals pair_rank[i]: a pair's bytes only ever grow, so a given
    part never sees the same rank twice and a stale entry can never look live.

    Memory: 32 bytes per byte of the chunk (none when no pair can merge). The heap never
    holds more than 2n entries: n - 1 at the start, and each merge pops one entry
    before pushing at most two.
    """
    cdef Py_ssize_t i, h, heap_size = 0
    cdef uint32_t r
    cdef HeapItem top
    cdef int rc = ERR_NONE
    # Chunks of up to SCAN_STACK bytes (the common case) need no malloc.
    cdef uint64_t stack_block[HEAP_STACK_WORDS]
    cdef size_t heap_words = 2 * n + HEAP_PAD_FRONT + HEAP_PAD_BACK + 8   # + 8: alignment
    cdef size_t need = heap_words * sizeof(HeapItem) + n * 4 * sizeof(uint32_t)
    cdef char* block = <char*>stack_block
    if not any_pair_merges(v, p, n):
        return push_byte_tokens(v, p, n, out, err_pos)
    if need > sizeof(stack_block):
        block = <char*>malloc(need)
        if block == NULL:
            return ERR_NOMEM
    # positions fit in 32 bits (bpe_merge refuses longer chunks); prv of part 0 is NO_RANK
    cdef HeapItem* heap = <HeapItem*>((<uintptr_t>block + 63) & ~(<uintptr_t>63)) + HEAP_PAD_FRONT
    cdef uint32_t* nxt = <uint32_t*>(<HeapItem*>block + heap_words)
    cdef uint32_t* prv = nxt + n
    cdef uint32_t* token = prv + n
    cdef uint32_t* pair_rank = token + n

    for i in range(n):
        nxt[i] = <uint32_t>(i + 1)
        prv[i] = <uint32_t>(i - 1) if i > 0 else NO_RANK
        token[i] = v.byte_rank[p[i]]
        r = vocab_rank(v, p + i, 2) if i + 1 < n else NO_RANK
        pair_rank[i] = r
        if r != NO_RANK:
            heap[heap_size] = (<uint64_t>r << 32) | <uint64_t>i
            heap_size += 1
    for i in range(heap_size, 2 * n + HEAP_PAD_BACK):
        heap[i] = HEAP_EMPTY
    i = (heap_size + 6) // 8     # the entries with children: 0 .. (heap_size - 2) // 8
    while i > 0:
        i -= 1
        heap_sift_down(heap, heap_size, i)

    while heap_size > 0:
        top = heap[0]
        heap_size -= 1
        heap[0] = heap[heap_size]
        heap[heap_size] = HEAP_EMPTY
        if heap_size > 0:
            heap_sift_down(heap, heap_size, 0)
        i = <Py_ssize_t>(top & <uint64_t>NO_RANK)
        r = <uint32_t>(top >> 32)
        if pair_rank[i] != r:
            continue  # stale
        merge_part(v, p, n, nxt, prv, token, pair_rank, i, r)
        if pair_rank[i] != NO_RANK:
            heap_push(heap, &heap_size, pair_rank[i], i)
        h = prv[i]
        if h != NO_RANK and pair_rank[h] != NO_RANK:
            heap_push(heap, &heap_size, pair_rank[h], h)

    rc = push_parts(token, nxt, n, out, err_pos)
    if block != <char*>stack_block:
        free(block)
    return rc
