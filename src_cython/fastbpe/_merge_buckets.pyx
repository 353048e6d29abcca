"""The bucket merge: ``bpe_heap``'s merges, in its order, from queues read front to back.

Why: ``bpe_heap`` pops (rank, position) keys from one heap of up to 2n entries. For a
chunk of megabytes ("x" * n, "\\n" * n, one CJK character repeated) that heap is tens of
megabytes read at random, a DRAM miss per level, and the levels grow with n: 10x the
input took 16x the time. Here the same keys are held in two structures:

- Q[r], for each rank r, a FIFO of positions that is non-decreasing from front to back
  (invariant S), in linked 64-byte blocks that go back to a free list once read;
- R, a binary min-heap of the ranks whose queue is not empty, each at most once.

Corollary B1 (same order). While S holds, the least key held is
``R.top << 32 | front(Q[R.top])``: the front of a queue is its least position, and R
holds exactly the ranks of the non-empty queues. So the keys come out in the order
``bpe_heap`` pops them (lowest rank, then leftmost), a key is live under the same test
(``pair_rank[i] == r``), and the merges and the tokens are identical.

Corollary B2 (S holds). A push of (r, i) into a non-empty Q[r] whose last position is
above i would break S; the push checks, and then the whole chunk is merged by
``bpe_heap`` instead (nothing is written before the end), so the tokens are the same
either way. Why it does not happen when every merge creates a token of a higher rank
than its parts' (as training makes them): the merges of one rank are popped left to
right, and each pushes at its predecessor's position and then its own, at or after those
of the merge before; and a key (T, i) arises only when the parts over T's bytes at i
are two, which the merges inside those bytes decide alone (no part crosses them yet),
the same merges in the same order at every occurrence of T; so every occurrence gets
its key in the same run, left to right. Vocabularies whose ranks are shuffled (a token
below a part of it) break the premise, yet 500k random chunks under 100k shuffled
vocabularies never reached the check (2026-12-03).

Corollary B3 (linear). At most 3n keys are pushed (n - 1 pairs, then two per merge) and
each is popped once; a queue push or pop is O(1), touching the two ends of its queue.
R changes only when a queue turns empty or non-empty, at most once per key each way, at
O(log V) in a heap of at most the V ranks of the vocabulary (kilobytes, in cache).
Memory: 16 bytes per byte of the chunk for its parts, 4 bytes per key held in a queue
(plus one block per rank in use), and 4 bytes per rank of the vocabulary for the
rank -> queue table. (Not on transparent huge pages: they cut a 10 MB chunk's page
faults from 45k to 4k and its steady time by a third, but the first call of a process
took 0.5 s of system time in half the tries on the VMs we measure on; see
PERFORMANCE_NOTES.)
"""
from libc.stdint cimport uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc

from fastbpe._common cimport ERR_NOMEM, NO_RANK
from fastbpe._merge_heap cimport (any_pair_merges, bpe_heap, merge_part, push_byte_tokens,
                                  push_parts)
from fastbpe._out cimport OutBuf
from fastbpe._vec cimport vec_grow
from fastbpe._vocab cimport Vocab

cdef enum:
    BLOCK_SLOTS = 15      # positions per block: with the link, one 64-byte line
    FIRST_ITEMS = 64      # blocks, queues and ranks allocated at first (then doubled)
    OUT_OF_ORDER = -2     # key_push's and merge_all's: S would break (Corollary B2)


cdef struct Block:
    uint32_t pos[BLOCK_SLOTS]
    uint32_t next         # the next block of the queue (valid while this is not its tail)


cdef struct Queue:
    uint32_t head         # block read from
    uint32_t tail         # block written to (head == tail: one block)
    uint32_t read         # next slot to read in head
    uint32_t write        # next slot to write in tail; empty iff head == tail, read == write
                          # (else the tail holds the position pushed last, at write - 1)


cdef struct Buckets:
    uint32_t* queue_of    # rank -> 1 + its queue's index (0: no queue yet)
    Queue* queues
    Py_ssize_t n_queues
    Py_ssize_t cap_queues
    uint32_t* ranks       # R
    Py_ssize_t n_ranks
    Py_ssize_t cap_ranks
    Block* blocks         # every queue's blocks; indices, not pointers (it grows)
    Py_ssize_t n_blocks
    Py_ssize_t cap_blocks
    uint32_t free_block   # a list through Block.next (NO_RANK: empty)


cdef uint32_t new_block(Buckets* b) noexcept nogil:
    """A free block's index (NO_RANK if out of memory). b.blocks may move."""
    cdef uint32_t k = b.free_block
    if k != NO_RANK:
        b.free_block = b.blocks[k].next
        return k
    if b.n_blocks == b.cap_blocks and vec_grow(<void**>&b.blocks, &b.cap_blocks, FIRST_ITEMS,
                                               sizeof(Block)) < 0:
        return NO_RANK
    b.n_blocks += 1
    return <uint32_t>(b.n_blocks - 1)


cdef inline void ranks_push(Buckets* b, uint32_t r) noexcept nogil:
    cdef Py_ssize_t i = b.n_ranks, parent
    b.n_ranks += 1
    while i > 0:
        parent = (i - 1) >> 1
        if r >= b.ranks[parent]:
            break
        b.ranks[i] = b.ranks[parent]
        i = parent
    b.ranks[i] = r


cdef inline void ranks_pop(Buckets* b) noexcept nogil:
    cdef Py_ssize_t i = 0, child
    b.n_ranks -= 1
    cdef uint32_t r = b.ranks[b.n_ranks]
    while True:
        child = 2 * i + 1
        if child >= b.n_ranks:
            break
        if child + 1 < b.n_ranks and b.ranks[child + 1] < b.ranks[child]:
            child += 1
        if b.ranks[child] >= r:
            break
        b.ranks[i] = b.ranks[child]
        i = child
    b.ranks[i] = r


cdef int key_push(Buckets* b, uint32_t r, uint32_t pos) noexcept nogil:
    """Hold the key (r, pos) in Q[r]: 0, -1 if out of memory, OUT_OF_ORDER if S would
    break."""
    cdef uint32_t qi = b.queue_of[r], k
    cdef Queue* q
    cdef bint empty
    if qi == 0:
        # R holds each queue's rank at most once, so it needs no more room than queues
        if b.n_queues == b.cap_queues and (
                vec_grow(<void**>&b.queues, &b.cap_queues, FIRST_ITEMS, sizeof(Queue)) < 0
                or vec_grow(<void**>&b.ranks, &b.cap_ranks, FIRST_ITEMS, sizeof(uint32_t)) < 0):
            return -1
        k = new_block(b)
        if k == NO_RANK:
            return -1
        q = &b.queues[b.n_queues]
        q.head = q.tail = k
        q.read = q.write = 0
        b.n_queues += 1
        qi = b.queue_of[r] = <uint32_t>b.n_queues
    q = &b.queues[qi - 1]
    empty = q.head == q.tail and q.read == q.write
    if not empty and pos < b.blocks[q.tail].pos[q.write - 1]:
        return OUT_OF_ORDER
    if q.write == BLOCK_SLOTS:
        k = new_block(b)
        if k == NO_RANK:
            return -1
        b.blocks[q.tail].next = k
        q.tail = k
        q.write = 0
    b.blocks[q.tail].pos[q.write] = pos
    q.write += 1
    if empty:
        ranks_push(b, r)
    return 0


cdef inline uint64_t key_pop(Buckets* b) noexcept nogil:
    """Remove and return the least key held (Corollary B1); there must be one."""
    cdef uint32_t r = b.ranks[0], old
    cdef Queue* q = &b.queues[b.queue_of[r] - 1]
    cdef uint64_t key = (<uint64_t>r << 32) | b.blocks[q.head].pos[q.read]
    q.read += 1
    if q.head == q.tail:
        if q.read == q.write:          # empty: start the block over, R loses the rank
            q.read = q.write = 0
            ranks_pop(b)
    elif q.read == BLOCK_SLOTS:        # the head block is read: free it
        old = q.head
        q.head = b.blocks[old].next
        q.read = 0
        b.blocks[old].next = b.free_block
        b.free_block = old
    return key


cdef void buckets_free(Buckets* b) noexcept nogil:
    free(b.queue_of)
    free(b.queues)
    free(b.ranks)
    free(b.blocks)


cdef int merge_all(Buckets* b, const Vocab* v, const unsigned char* p, Py_ssize_t n,
                   uint32_t* nxt, uint32_t* prv, uint32_t* token,
                   uint32_t* pair_rank) noexcept nogil:
    """The merges of bpe_heap over its doubly linked list of parts (named by their start
    offset; pair_rank[i]: the rank of merging part i with its successor, NO_RANK if none
    or if part i was absorbed), the keys held in b: 0, or key_push's error."""
    cdef Py_ssize_t i, h
    cdef uint32_t r
    cdef uint64_t key
    cdef int rc
    # 1. the parts are the bytes; every adjacent pair that is a token is a key
    for i in range(n):
        nxt[i] = <uint32_t>(i + 1)
        prv[i] = <uint32_t>(i - 1) if i > 0 else NO_RANK
        token[i] = v.byte_rank[p[i]]
        r = v.pair_rank2[p[i] | (<uint32_t>p[i + 1] << 8)] if i + 1 < n else NO_RANK
        pair_rank[i] = r
        if r != NO_RANK:
            rc = key_push(b, r, <uint32_t>i)
            if rc < 0:
                return rc
    # 2. merge the least live key until none is held (stale ones are skipped)
    while b.n_ranks:
        key = key_pop(b)
        i = <Py_ssize_t>(key & <uint64_t>NO_RANK)
        r = <uint32_t>(key >> 32)
        if pair_rank[i] != r:
            continue
        merge_part(v, p, n, nxt, prv, token, pair_rank, i, r)
        # the predecessor's pair first, then this part's: Corollary B2's order
        h = prv[i]
        if h != NO_RANK and pair_rank[h] != NO_RANK:
            rc = key_push(b, pair_rank[h], <uint32_t>h)
            if rc < 0:
                return rc
        if pair_rank[i] != NO_RANK:
            rc = key_push(b, pair_rank[i], <uint32_t>i)
            if rc < 0:
                return rc
    return 0


cdef int bpe_buckets(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                     Py_ssize_t* err_pos) noexcept nogil:
    cdef int rc = ERR_NOMEM, merged = -1
    if not any_pair_merges(v, p, n):
        return push_byte_tokens(v, p, n, out, err_pos)
    cdef Buckets b
    b.queues = NULL
    b.ranks = NULL
    b.blocks = NULL
    b.n_queues = b.cap_queues = b.n_ranks = b.cap_ranks = b.n_blocks = b.cap_blocks = 0
    b.free_block = NO_RANK
    b.queue_of = <uint32_t*>calloc(v.n_ranks, sizeof(uint32_t))
    cdef uint32_t* nxt = <uint32_t*>malloc(4 * n * sizeof(uint32_t))
    if b.queue_of != NULL and nxt != NULL:
        merged = merge_all(&b, v, p, n, nxt, nxt + n, nxt + 2 * n, nxt + 3 * n)
        if merged == 0:
            # 3. the parts' tokens, left to right
            rc = push_parts(nxt + 2 * n, nxt, n, out, err_pos)
    free(nxt)
    buckets_free(&b)
    if merged == OUT_OF_ORDER:
        return bpe_heap(v, p, n, out, err_pos)
    return rc
