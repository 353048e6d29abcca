"""Native BPE of a sentencepiece-style tokenizer.json (HF's BPE by merge rank): the twin
of ``fastbpe.reference.hf_spm.pieces`` + ``words`` + ``bpe_word``; the steps are in
``_hf_spm.pxd``.

``HFSpmKernel(spec)`` builds its tables once from an ``HFSpmSpec``. ``encode(text,
allowed)`` is ``reference.hf_spm.encode`` (the added-token cut included), and
``encode_batch`` / ``encode_batch_to_numpy`` run a batch of them on native threads
without the GIL, each thread on a context of its own (``_hf_spm.pxd``, "Threads").
``encode_pieces`` gives the ids of ``reference.hf_spm.pieces``' list, ``encode_words``
those of a list of words (``ignore_merges`` models: each word is looked up whole, under
the GIL), ``bpe(word)`` one word's. Text with lone surrogates is encoded with them as
U+FFFD (``reference.core.fix_surrogates``, as every fastbpe tokenizer does).
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memmove, memset

cimport numpy as cnp

from fastbpe._common cimport fbe_prefetch
from fastbpe._idlists cimport collect_young_if_due, outbuf_to_list, shared_id_ints, track_lists
from fastbpe._out cimport OutBuf, out_init
from fastbpe._runner cimport Runner, run_jobs

from fastbpe._hf_spm cimport (CACHE_BITS, CACHE_SLOTS, CACHE_SYMS, SCHEME_ALWAYS, SCHEME_FIRST, SCHEME_NEVER,
                              AddedSet, CacheEntry, HFCtx, HFTables, Scratch, Slot, Table)
from fastbpe._hf_spm_cache cimport (SEG_CHARS, SEG_IDS, SEG_LONG_SYMS, SEG_MAX_ID, seg_find, seg_free, seg_hash,
                                    seg_init, seg_store)
from fastbpe._hf_spm_scan cimport scan_free, scan_init, scan_resume, scan_segment

from fastbpe._runner import _batch_threads
from fastbpe.reference.core import fix_surrogates

cnp.import_array()

cdef extern from "fbe_atomic.h" nogil:
    Py_ssize_t fbe_atomic_next(Py_ssize_t* counter) noexcept
    void fbe_flag_store(char* flag, char v) noexcept

cdef extern from *:
    int __builtin_ctzll(unsigned long long x) nogil

cdef extern from "Python.h":
    int PyUnicode_KIND(object text)
    const void* PyUnicode_DATA(object text)
    uint32_t PyUnicode_READ(int kind, const void* data, Py_ssize_t index) nogil
    Py_ssize_t PyUnicode_GET_LENGTH(object text)

cdef enum:
    NO_RANK = 0x7FFFFFFF
    DENSE_MAX_BITS = 1 << 23    # the largest junction bit matrix (1 MiB); past it, the hash table
    POOL = 8                    # batch contexts the kernel keeps warm (their caches) between calls
    KEEP_ROOM = 1 << 20         # a kept context gives back buffers past this many items after a call
    PAIR_FILTER_BITS = 1 << 19  # HFTables.pair_filter: 64 KiB
    BUCKETS_FROM = 4096         # the shortest segment merged by buckets (merge_buckets), not the heap
    NOGIL_TEXT = 1 << 16        # a single text this long is encoded without the GIL
    MAX_ADDED_SETS = 64         # AddedTokens kept per kernel (one per allowed set seen)

cdef uint64_t EMPTY_KEY = 0xFFFFFFFFFFFFFFFFULL


# --------------------------------------------------------------------------- tables
cdef inline uint64_t slot_of(const Table* t, uint64_t key) noexcept nogil:
    # Fibonacci hashing: the top bits of the product depend on every bit of the key
    # (both ids of a pair), where its low bits would see only the right one
    return (key * 0x9E3779B97F4A7C15ULL) >> t.shift


cdef int table_init(Table* t, Py_ssize_t n) except -1:
    cdef uint64_t cap = 16
    cdef uint64_t i
    while cap < <uint64_t>(2 * n + 2):
        cap <<= 1
    t.slots = <Slot*>malloc(cap * sizeof(Slot))
    if t.slots == NULL:
        raise MemoryError()
    t.mask = cap - 1
    t.shift = 64
    i = cap
    while i > 1:
        i >>= 1
        t.shift -= 1
    for i in range(cap):
        t.slots[i].key = EMPTY_KEY
    return 0


cdef void table_put(Table* t, uint64_t key, int32_t rank, int32_t merged) noexcept nogil:
    """Insert key (the first value stays when it is there: the callers insert each key once)."""
    cdef uint64_t i = slot_of(t, key)
    while t.slots[i].key != EMPTY_KEY:
        if t.slots[i].key == key:
            return
        i = (i + 1) & t.mask
    t.slots[i].key = key
    t.slots[i].rank = rank
    t.slots[i].merged = merged


cdef inline const Slot* table_get(const Table* t, uint64_t key) noexcept nogil:
    cdef uint64_t i = slot_of(t, key)
    while True:
        if t.slots[i].key == key:
            return &t.slots[i]
        if t.slots[i].key == EMPTY_KEY:
            return NULL
        i = (i + 1) & t.mask


cdef inline uint64_t pair_key(int32_t left, int32_t right) noexcept nogil:
    return (<uint64_t><uint32_t>left << 32) | <uint32_t>right


cdef inline uint64_t filter_bit(uint64_t key) noexcept nogil:
    """The bit of HFTables.pair_filter a pair key sets: 19 top bits of another odd
    product than slot_of's (so a filter hit is not the slot's own luck)."""
    return (key * 0xC2B2AE3D27D4EB4FULL) >> 45


# --------------------------------------------------------------------------- heap
cdef inline void heap_push(uint64_t* heap, Py_ssize_t* size, uint64_t item) noexcept nogil:
    cdef Py_ssize_t i = size[0]
    cdef Py_ssize_t parent
    size[0] = i + 1
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent] <= item:
            break
        heap[i] = heap[parent]
        i = parent
    heap[i] = item


cdef inline uint64_t heap_pop(uint64_t* heap, Py_ssize_t* size) noexcept nogil:
    cdef uint64_t top = heap[0]
    cdef Py_ssize_t n = size[0] - 1
    cdef uint64_t item = heap[n]
    cdef Py_ssize_t i = 0
    cdef Py_ssize_t child
    size[0] = n
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and heap[child + 1] < heap[child]:
            child += 1
        if item <= heap[child]:
            break
        heap[i] = heap[child]
        i = child
    if n > 0:
        heap[i] = item
    return top


# --------------------------------------------------------------------------- contexts
cdef inline int grow_to(void** p, size_t size) noexcept nogil:
    """realloc *p to size bytes; -1 (*p unchanged) when memory runs out."""
    cdef void* q = realloc(p[0], size)
    if q == NULL:
        return -1
    p[0] = q
    return 0


cdef int ctx_ready(const HFTables* t, HFCtx* c) noexcept nogil:
    """The context's segment cache, made when first used (calloc: pages touched as
    used): the compact one (``_hf_spm_cache.pxd``) when the model's ids fit 16 bits,
    else the wide one; -1 out of memory."""
    if c.seg.mem == NULL and c.cache == NULL:
        if seg_init(&c.seg, t.n_ids) < 0:
            return -1
        if c.seg.short_ == NULL:
            c.cache = <CacheEntry*>calloc(CACHE_SLOTS, sizeof(CacheEntry))
            if c.cache == NULL:
                return -1
    c.out_len = 0
    return 0


cdef void scratch_free(Scratch* s) noexcept nogil:
    free(s.ids)
    free(s.nxt)
    free(s.prv)
    free(s.rank)
    free(s.heap)
    free(s.cuts)
    free(s.rank_count)
    free(s.rank_head)
    free(s.rank_filled)
    free(s.run)
    free(s.pool_pos)
    free(s.pool_link)
    free(s.gather)
    memset(s, 0, sizeof(Scratch))


cdef void ctx_free(HFCtx* c) noexcept nogil:
    scratch_free(&c.s)
    free(c.out)
    free(c.cache)
    seg_free(&c.seg)
    memset(c, 0, sizeof(HFCtx))


cdef void ctx_trim(HFCtx* c) noexcept nogil:
    """After a call: keep the cache (warm for the next call), not the room a huge text took."""
    if c.s.cap > KEEP_ROOM or c.s.ids_cap > KEEP_ROOM or c.s.cuts_cap > KEEP_ROOM or c.s.bq_cap > KEEP_ROOM:
        scratch_free(&c.s)
    if c.out_cap > KEEP_ROOM:
        free(c.out)
        c.out = NULL
        c.out_cap = 0
    c.out_len = 0


cdef int reserve(HFCtx* c, Py_ssize_t n) noexcept nogil:
    """Scratch for a word of n symbols, and room for n more output ids; -1 out of memory."""
    cdef Py_ssize_t cap
    if n > c.s.cap:
        cap = max(n, 2 * c.s.cap, 64)
        if (grow_to(<void**>&c.s.nxt, cap * sizeof(int32_t)) < 0
                or grow_to(<void**>&c.s.prv, cap * sizeof(int32_t)) < 0
                or grow_to(<void**>&c.s.rank, cap * sizeof(int32_t)) < 0
                or grow_to(<void**>&c.s.heap, 3 * cap * sizeof(uint64_t)) < 0):
            return -1
        c.s.cap = cap
    if c.out_len + n > c.out_cap:
        cap = max(c.out_len + n, 2 * c.out_cap, 256)
        if grow_to(<void**>&c.out, cap * sizeof(int32_t)) < 0:
            return -1
        c.out_cap = cap
    return 0


cdef int grow_ids(HFCtx* c, Py_ssize_t n) noexcept nogil:
    """Room for n symbol ids; -1 out of memory."""
    cdef Py_ssize_t cap
    if n > c.s.ids_cap:
        cap = max(n, 2 * c.s.ids_cap, 64)
        if grow_to(<void**>&c.s.ids, cap * sizeof(int32_t)) < 0:
            return -1
        c.s.ids_cap = cap
    return 0


# --------------------------------------------------------------------------- steps
cdef inline bint joinable(const HFTables* t, int32_t left, int32_t right) noexcept nogil:
    """Whether a merge may ever cross between symbols ``left`` and ``right`` (step 2)."""
    cdef uint32_t r, c, bit
    if not t.cut:
        return True
    if t.dense:
        r = t.row[left]
        c = t.col[right]
        if r == 0 or c == 0:
            return False
        bit = (r - 1) * t.n_cols + (c - 1)
        return (t.bits[bit >> 3] >> (bit & 7)) & 1
    return table_get(&t.joins, pair_key(t.last[left], t.first[right])) != NULL


cdef Py_ssize_t symbols(const HFTables* t, HFCtx* c, int kind, const void* data, Py_ssize_t start,
                        Py_ssize_t end, bint lead, bint escape, bint split) noexcept nogil:
    """Step 1 (``initial_symbols``): the symbol ids of text[start:end] into s.ids; their
    count, or -1 out of memory. For a piece (``reference.hf_spm.words``): a ``▁`` first
    when ``lead``, spaces as ``▁`` when ``escape``, and when ``split`` the position of
    each word's first symbol into s.cuts (``n_cuts``; a word's unknown run is its own)."""
    cdef Py_ssize_t n = end - start
    cdef Py_ssize_t k, m = 0
    cdef uint32_t cp
    cdef int32_t tid
    cdef const Slot* slot
    cdef unsigned char b[4]
    cdef int nb, j
    cdef bint prev_unk = False, ok
    cdef int32_t* ids
    c.n_cuts = 0
    if grow_ids(c, n + 8) < 0:
        return -1
    if split and n + 2 > c.s.cuts_cap:
        if grow_to(<void**>&c.s.cuts, (n + 2) * sizeof(int32_t)) < 0:
            return -1
        c.s.cuts_cap = n + 2
    ids = c.s.ids
    for k in range(-1 if lead else 0, n):
        if m + 4 > c.s.ids_cap:     # byte fallback made more symbols than characters
            if grow_ids(c, m + 8 + (n - k)) < 0:
                return -1
            ids = c.s.ids
        cp = 0x2581 if k < 0 else PyUnicode_READ(kind, data, start + k)
        if escape and cp == 0x20:
            cp = 0x2581
        if split and cp == 0x2581 and k > (-1 if lead else 0):
            c.s.cuts[c.n_cuts] = <int32_t>m   # a word starts here
            c.n_cuts += 1
            prev_unk = False
        if cp < 0x10000:
            tid = t.bmp[cp]
        else:
            slot = table_get(&t.astral, cp)
            tid = slot.rank if slot != NULL else -1
        if tid >= 0:
            ids[m] = tid
            m += 1
            prev_unk = False
            continue
        if t.byte_fallback:
            if cp < 0x80:
                b[0] = cp
                nb = 1
            elif cp < 0x800:
                b[0] = 0xC0 | (cp >> 6)
                b[1] = 0x80 | (cp & 0x3F)
                nb = 2
            elif cp < 0x10000:
                b[0] = 0xE0 | (cp >> 12)
                b[1] = 0x80 | ((cp >> 6) & 0x3F)
                b[2] = 0x80 | (cp & 0x3F)
                nb = 3
            else:
                b[0] = 0xF0 | (cp >> 18)
                b[1] = 0x80 | ((cp >> 12) & 0x3F)
                b[2] = 0x80 | ((cp >> 6) & 0x3F)
                b[3] = 0x80 | (cp & 0x3F)
                nb = 4
            ok = True
            for j in range(nb):
                if t.byte_ids[b[j]] < 0:
                    ok = False
            if ok:
                for j in range(nb):
                    ids[m] = t.byte_ids[b[j]]
                    m += 1
                prev_unk = False
                continue
        if t.unk_id < 0:
            continue           # dropped (no unk_token)
        if not (t.fuse_unk and prev_unk):
            ids[m] = t.unk_id
            m += 1
        prev_unk = True
    return m


cdef inline int32_t rank_of(const HFTables* t, int32_t left, int32_t right, int32_t* merged) noexcept nogil:
    cdef const Slot* slot = table_get(&t.merges, pair_key(left, right))
    if slot == NULL:
        return NO_RANK
    merged[0] = slot.merged
    return slot.rank


cdef void merge_scan(const HFTables* t, HFCtx* c, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    """Step 3 for a short segment s.ids[a:b]: rank[i] is the rank of pair (i, i + 1),
    nxt[i] its merged id; each merge takes the lowest rank (strict <: the leftmost),
    then drops the right symbol and refreshes the two pairs around it."""
    cdef int32_t* ids = c.s.ids
    cdef int32_t* rank = c.s.rank
    cdef int32_t* merged = c.s.nxt
    cdef Py_ssize_t m = b - a, i, best_i
    cdef int32_t best
    for i in range(a, b - 1):
        rank[i] = rank_of(t, ids[i], ids[i + 1], &merged[i])
    while m > 1:
        best = NO_RANK
        best_i = -1
        for i in range(a, a + m - 1):
            if rank[i] < best:
                best = rank[i]
                best_i = i
        if best_i < 0:
            break
        ids[best_i] = merged[best_i]
        i = a + m - best_i - 2          # symbols after the dropped one
        memmove(&ids[best_i + 1], &ids[best_i + 2], i * sizeof(int32_t))
        memmove(&rank[best_i + 1], &rank[best_i + 2], i * sizeof(int32_t))
        memmove(&merged[best_i + 1], &merged[best_i + 2], i * sizeof(int32_t))
        m -= 1
        if best_i > a:
            rank[best_i - 1] = rank_of(t, ids[best_i - 1], ids[best_i], &merged[best_i - 1])
        if best_i < a + m - 1:
            rank[best_i] = rank_of(t, ids[best_i], ids[best_i + 1], &merged[best_i])
    for i in range(a, a + m):
        c.out[c.out_len] = ids[i]
        c.out_len += 1


cdef inline void join_pair(int32_t* ids, int32_t* nxt, int32_t* prv, Py_ssize_t left, Py_ssize_t right,
                           int32_t merged) noexcept nogil:
    """Merge the pair (left, right) of a linked segment: left takes the merged id, right
    leaves the list."""
    ids[left] = merged
    ids[right] = -1
    nxt[left] = nxt[right]
    if nxt[right] >= 0:
        prv[nxt[right]] = <int32_t>left


cdef inline void push_pair(const HFTables* t, HFCtx* c, Py_ssize_t left, uint64_t* heap,
                           Py_ssize_t* size) noexcept nogil:
    cdef int32_t merged
    cdef int32_t rank
    if left < 0 or c.s.nxt[left] < 0:
        return
    rank = rank_of(t, c.s.ids[left], c.s.ids[c.s.nxt[left]], &merged)
    if rank != NO_RANK:
        heap_push(heap, size, (<uint64_t>rank << 32) | <uint64_t>left)


cdef void merge_heap(const HFTables* t, HFCtx* c, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    """Step 3 for a long segment s.ids[a:b]: a linked list of symbols and a heap of
    ``rank << 32 | left position``; a popped pair whose left symbol is gone, has no
    right neighbour or another rank now is stale and skipped (ranks are distinct per
    pair, so an equal rank is the same pair)."""
    cdef int32_t* ids = c.s.ids
    cdef int32_t* nxt = c.s.nxt
    cdef int32_t* prv = c.s.prv
    cdef uint64_t* heap = c.s.heap
    cdef Py_ssize_t size = 0, i, left, right
    cdef uint64_t item
    cdef int32_t rank, merged = 0
    for i in range(a, b):
        nxt[i] = i + 1 if i + 1 < b else -1
        prv[i] = i - 1 if i > a else -1
    for i in range(a, b - 1):
        push_pair(t, c, i, heap, &size)
    while size > 0:
        item = heap_pop(heap, &size)
        left = <Py_ssize_t>(item & 0xFFFFFFFFULL)
        if ids[left] < 0 or nxt[left] < 0:
            continue
        right = nxt[left]
        rank = rank_of(t, ids[left], ids[right], &merged)
        if <uint64_t>rank != (item >> 32):
            continue                          # stale: the pair changed since the push
        join_pair(ids, nxt, prv, left, right, merged)
        push_pair(t, c, prv[left], heap, &size)
        push_pair(t, c, left, heap, &size)
    i = a
    while i >= 0:
        c.out[c.out_len] = ids[i]
        c.out_len += 1
        i = nxt[i]


# --------------------------------------------------------------------------- long segments: buckets by rank
cdef int buckets_ready(const HFTables* t, Scratch* s, Py_ssize_t n) noexcept nogil:
    """merge_buckets' scratch for a segment of n symbols (the per-rank arrays made once,
    empty); -1 out of memory (then nothing of the segment has changed)."""
    cdef Py_ssize_t cap, r
    if s.rank_head == NULL:
        s.rank_count = <uint32_t*>calloc(t.n_ranks + 1, sizeof(uint32_t))
        s.rank_filled = <uint64_t*>calloc((t.n_ranks + 63) >> 6, sizeof(uint64_t))
        s.rank_head = <int32_t*>malloc(t.n_ranks * sizeof(int32_t))
        if s.rank_count == NULL or s.rank_filled == NULL or s.rank_head == NULL:
            free(s.rank_count)
            free(s.rank_filled)
            free(s.rank_head)
            s.rank_count = NULL
            s.rank_filled = NULL
            s.rank_head = NULL
            return -1
        for r in range(t.n_ranks):
            s.rank_head[r] = -1
    if n > s.bq_cap:
        cap = max(n, 2 * s.bq_cap)
        if (grow_to(<void**>&s.run, cap * sizeof(uint32_t)) < 0
                or grow_to(<void**>&s.pool_pos, 2 * cap * sizeof(uint32_t)) < 0
                or grow_to(<void**>&s.pool_link, 2 * cap * sizeof(int32_t)) < 0
                or grow_to(<void**>&s.gather, 4 * cap * sizeof(uint32_t)) < 0):
            return -1
        s.bq_cap = cap
    return 0


cdef uint32_t* sort_rising(uint32_t* x, uint32_t* other, Py_ssize_t n, uint32_t low, uint32_t span) noexcept nogil:
    """x[:n] (values in [low, low + span)) sorted rising, in x or in other (n more
    values): the sorted copy's address. A few by insertion, else LSD radix on 8-bit
    digits of value - low (linear: a bucket costs its length, not a log of it)."""
    cdef Py_ssize_t i, j
    cdef uint32_t v, shift = 0, total, k
    cdef uint32_t at[256]
    cdef uint32_t* swap
    if n <= 32:
        for i in range(1, n):
            v = x[i]
            j = i - 1
            while j >= 0 and x[j] > v:
                x[j + 1] = x[j]
                j -= 1
            x[j + 1] = v
        return x
    while shift < 32 and (span - 1) >> shift:
        memset(at, 0, sizeof(at))
        for i in range(n):
            at[((x[i] - low) >> shift) & 255] += 1
        total = 0
        for k in range(256):
            v = at[k]
            at[k] = total
            total += v
        for i in range(n):
            k = ((x[i] - low) >> shift) & 255
            other[at[k]] = x[i]
            at[k] += 1
        swap = x
        x = other
        other = swap
        shift += 8
    return x


cdef inline void bucket_push(const HFTables* t, HFCtx* c, Py_ssize_t left, uint32_t cur, Py_ssize_t* heap_size,
                             Py_ssize_t* pooled, uint32_t* lowest) noexcept nogil:
    """Queue the pair (left, next[left]) if it is a merge: into the heap when its rank is
    <= cur (its turn has come), else into its rank's bucket (``lowest``: the lowest
    filled one)."""
    cdef int32_t rank
    cdef Py_ssize_t e
    cdef uint64_t key, bit
    cdef const Slot* slot
    if left < 0 or c.s.nxt[left] < 0:
        return
    key = pair_key(c.s.ids[left], c.s.ids[c.s.nxt[left]])
    bit = filter_bit(key)
    if not (t.pair_filter[bit >> 6] >> (bit & 63)) & 1:
        return                              # no merge: most pairs a merge makes are none
    slot = table_get(&t.merges, key)
    if slot == NULL:
        return
    rank = slot.rank
    if <uint32_t>rank <= cur:
        heap_push(c.s.heap, heap_size, (<uint64_t>rank << 32) | <uint64_t>left)
        return
    e = pooled[0]
    pooled[0] = e + 1
    c.s.pool_pos[e] = <uint32_t>left
    c.s.pool_link[e] = c.s.rank_head[rank]
    c.s.rank_head[rank] = <int32_t>e
    c.s.rank_filled[rank >> 6] |= (<uint64_t>1) << (rank & 63)
    if <uint32_t>rank < lowest[0]:
        lowest[0] = rank


cdef uint32_t lowest_filled(const HFTables* t, const Scratch* s, uint32_t r) noexcept nogil:
    """The lowest rank >= r whose bucket holds entries, or n_ranks."""
    cdef uint32_t w = r >> 6, n_words = (<uint32_t>t.n_ranks + 63) >> 6
    cdef uint64_t bits
    if r >= <uint32_t>t.n_ranks:
        return t.n_ranks
    bits = s.rank_filled[w] & (~(<uint64_t>0) << (r & 63))
    while bits == 0:
        w += 1
        if w >= n_words:
            return t.n_ranks
        bits = s.rank_filled[w]
    return (w << 6) + <uint32_t>__builtin_ctzll(bits)


cdef enum:
    AHEAD = 8                   # how many pops ahead merge_buckets prefetches a symbol


cdef int merge_buckets(const HFTables* t, HFCtx* c, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    """Step 3 for a long segment s.ids[a:b] (>= buckets_from symbols), the twin of
    ``reference.hf_spm.merge_buckets``: ``merge_heap``'s queue of ``rank << 32 | left``
    as the initial pairs sorted once (a counting sort by rank: ranks are dense; the
    run holds positions, its ranks implied by each rank's end in rank_count), a
    bucket per rank above cur (the rank being read) of the positions merges pushed
    with it, radix-sorted when cur reaches it, and a heap for what merges push with a
    rank <= cur (it stays small). Each pop takes the smallest key of the three heads,
    which is the heap's next pop (``reference.sentencepiece.bucket_queue``'s corollary),
    so the merges are merge_heap's; a pop costs O(1) amortized and reads the symbols
    in rising addresses, where the heap's log n levels were cache misses. -1 out of
    memory before anything changed (the caller merges by the heap)."""
    cdef Py_ssize_t n = b - a, i, left, right, n_run = 0, ri = 0, pi = 0, pn = 0, hs = 0, pooled = 0
    cdef int32_t* ids = c.s.ids
    cdef int32_t* nxt
    cdef int32_t* prv
    cdef int32_t* rank
    cdef uint32_t* count
    cdef uint32_t* cur_pos = NULL
    cdef uint32_t* run
    cdef uint32_t rr = 0     # the rank of run[ri]
    cdef uint64_t key, kr, kp, INF = ~(<uint64_t>0)
    cdef uint32_t cur, r, lowest = t.n_ranks, total, k
    cdef int32_t merged = 0, e
    if buckets_ready(t, &c.s, n) < 0:
        return -1
    nxt = c.s.nxt
    prv = c.s.prv
    rank = c.s.rank
    count = c.s.rank_count
    run = c.s.run
    for i in range(a, b - 1):
        rank[i] = rank_of(t, ids[i], ids[i + 1], &prv[i])    # prv: the merged id, for now
        if rank[i] != NO_RANK:
            count[rank[i]] += 1
            n_run += 1
    if n_run:
        total = 0
        for r in range(<uint32_t>t.n_ranks):
            k = count[r]
            count[r] = total
            total += k
        for i in range(a, b - 1):
            if rank[i] != NO_RANK:
                run[count[rank[i]]] = <uint32_t>i
                count[rank[i]] += 1
        # count[r] is now where rank r's pairs end in run (zeroed after the merge)
        while count[rr] == 0:
            rr += 1
        cur = rr
    for i in range(a, b - 1):
        rank[i] = prv[i]         # from now on: the merged id of the initial pair (i, i + 1)
    for i in range(a, b):
        nxt[i] = i + 1 if i + 1 < b else -1
        prv[i] = i - 1 if i > a else -1
    while n_run:
        if ri < n_run:
            while count[rr] <= ri:
                rr += 1
            kr = (<uint64_t>rr << 32) | run[ri]
        else:
            kr = INF
        kp = ((<uint64_t>cur << 32) | cur_pos[pi]) if pi < pn else INF
        key = kr if kr < kp else kp
        if hs and c.s.heap[0] < key:
            key = heap_pop(c.s.heap, &hs)
        elif key == INF or (key >> 32) > cur:
            # nothing of rank <= cur is left (the heap is empty): cur moves on
            r = <uint32_t>(kr >> 32) if ri < n_run else <uint32_t>t.n_ranks
            if lowest < r:
                r = lowest
            if r >= <uint32_t>t.n_ranks:
                break
            cur = r
            pi = pn = 0
            if r == lowest:
                e = c.s.rank_head[r]
                while e >= 0:
                    c.s.gather[pn] = c.s.pool_pos[e]
                    pn += 1
                    e = c.s.pool_link[e]
                c.s.rank_head[r] = -1
                c.s.rank_filled[r >> 6] &= ~((<uint64_t>1) << (r & 63))
                lowest = lowest_filled(t, &c.s, r + 1)
                cur_pos = sort_rising(c.s.gather, c.s.gather + 2 * c.s.bq_cap, pn, <uint32_t>a, <uint32_t>n)
            continue
        elif key == kr:
            # the run and cur's bucket are known ahead: their symbols are prefetched
            if ri + AHEAD < n_run:
                left = run[ri + AHEAD]
                fbe_prefetch(&ids[left])
                fbe_prefetch(&nxt[left])
                fbe_prefetch(&prv[left])
                fbe_prefetch(&rank[left])      # its merged id, read when it is unchanged
            ri += 1
            left = <Py_ssize_t>(key & 0xFFFFFFFFULL)
            if (ids[left] >= 0 and nxt[left] == left + 1
                    and nxt[left + 1] == (left + 2 if left + 2 < b else -1)):
                # an initial pair neither symbol of which has merged since: still a
                # candidate of its rank, its merged id kept (rank[left]), no lookup
                merged = rank[left]
                right = left + 1
                join_pair(ids, nxt, prv, left, right, merged)
                bucket_push(t, c, prv[left], cur, &hs, &pooled, &lowest)
                bucket_push(t, c, left, cur, &hs, &pooled, &lowest)
                continue
        else:
            if pi + AHEAD < pn:
                left = cur_pos[pi + AHEAD]
                fbe_prefetch(&ids[left])
                fbe_prefetch(&nxt[left])
                fbe_prefetch(&prv[left])
            pi += 1
        left = <Py_ssize_t>(key & 0xFFFFFFFFULL)
        if ids[left] < 0 or nxt[left] < 0:
            continue
        right = nxt[left]
        if <uint64_t>rank_of(t, ids[left], ids[right], &merged) != (key >> 32):
            continue                          # stale: the pair changed since the push
        join_pair(ids, nxt, prv, left, right, merged)
        bucket_push(t, c, prv[left], cur, &hs, &pooled, &lowest)
        bucket_push(t, c, left, cur, &hs, &pooled, &lowest)
    if n_run:
        memset(count, 0, t.n_ranks * sizeof(uint32_t))
    i = a
    while i >= 0:
        c.out[c.out_len] = ids[i]
        c.out_len += 1
        i = nxt[i]
    return 0


cdef inline void merge_long(const HFTables* t, HFCtx* c, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    """Step 3 for a segment longer than scan_max: by buckets from t.buckets_from symbols
    (and memory for them), else by the heap."""
    if b - a >= t.buckets_from and merge_buckets(t, c, a, b) == 0:
        return
    merge_heap(t, c, a, b)


cdef inline void char_symbols(const HFTables* t, HFCtx* c, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    """s.ids[a:b] from characters (each one symbol of its own) to their ids."""
    cdef Py_ssize_t i
    for i in range(a, b):
        c.s.ids[i] = t.bmp[c.s.ids[i]]


cdef void merge_cached(const HFTables* t, HFCtx* c, Py_ssize_t a, Py_ssize_t b, uint32_t tag) noexcept nogil:
    """Step 3 through the context's segment cache (``_hf_spm.pxd``; ``_hf_spm_cache.pxd``
    when ids fit 16 bits): a hit copies the ids, a miss merges (scan or heap as for any
    segment) and stores the result. ``tag`` ``SEG_CHARS``: s.ids[a:b] are the segment's
    characters (the fused scan), made symbols on a miss; else ``SEG_IDS``."""
    cdef const int32_t* key = c.s.ids + a
    cdef uint32_t n = <uint32_t>(b - a)
    cdef uint64_t h = 0xCBF29CE484222325ULL
    cdef uint32_t i
    cdef Py_ssize_t before
    cdef CacheEntry* e
    cdef int32_t saved[SEG_LONG_SYMS]
    cdef int got
    if c.seg.short_ != NULL:
        h = seg_hash(key, n)
        got = seg_find(&c.seg, h, key, n, tag, c.out + c.out_len)
        if got >= 0:
            c.out_len += got
            return
        memcpy(saved, key, n * sizeof(int32_t))   # the merge rewrites s.ids
        if tag == SEG_CHARS:
            char_symbols(t, c, a, b)
        before = c.out_len
        if n <= <uint32_t>t.scan_max:
            merge_scan(t, c, a, b)
        else:
            merge_heap(t, c, a, b)
        seg_store(&c.seg, h, saved, n, tag, c.out + before, <uint32_t>(c.out_len - before))
        return
    for i in range(n):
        h = (h ^ <uint32_t>key[i]) * 0x100000001B3ULL
    h ^= h >> 29
    h *= 0xBF58476D1CE4E5B9ULL
    e = &c.cache[h >> (64 - CACHE_BITS)]
    if e.n_in == n:
        i = 0
        while i < n and e.key[i] == key[i]:
            i += 1
        if i == n:
            for i in range(e.n_out):
                c.out[c.out_len + i] = e.ids[i]
            c.out_len += e.n_out
            return
    e.n_in = n
    memcpy(e.key, key, n * sizeof(int32_t))   # before merging: the merge rewrites s.ids
    before = c.out_len
    if n <= <uint32_t>t.scan_max:
        merge_scan(t, c, a, b)
    else:
        merge_heap(t, c, a, b)
    e.n_out = <uint32_t>(c.out_len - before)
    memcpy(e.ids, c.out + before, e.n_out * sizeof(int32_t))


cdef int run(const HFTables* t, HFCtx* c, int kind, const void* data, Py_ssize_t start, Py_ssize_t end,
             bint lead, bint escape, bint split) noexcept nogil:
    """A word, or a piece (``symbols``) text[start:end]: its ids appended to c.out,
    through the fused scan (``run_chars``) when the kernel has one, the three steps
    (``steps``) where it stops; -1 out of memory."""
    cdef Py_ssize_t n = end - start, k = -1 if lead else 0, stop = 0
    cdef const void* piece = <const char*>data + start * kind    # kind: bytes a character
    while t.chars.info != NULL:
        k = run_chars(t, c, kind, piece, n, k, escape, split, &stop)
        if k == -2:
            return -1
        if k >= n:
            return 0
        if steps(t, c, kind, data, start + max(k, 0), start + stop, k < 0, escape, split) < 0:
            return -1
        k = stop
        if k >= n:
            return 0
    return steps(t, c, kind, data, start, end, lead, escape, split)


cdef Py_ssize_t run_chars(const HFTables* t, HFCtx* c, int kind, const void* data, Py_ssize_t n, Py_ssize_t k,
                          bint escape, bint split, Py_ssize_t* resume) noexcept nogil:
    """The fused scan (``_hf_spm_scan.pxd``) of a piece's n characters from character
    ``k`` (-1: the ``▁`` in front): each segment's ids appended to c.out, through the
    cache by its characters; the start of the segment holding a character that is not
    one symbol of its own (the three steps take it to ``*resume``, ``scan_resume``), or
    n; -2 out of memory."""
    cdef Py_ssize_t end, m = 0
    if grow_ids(c, n + 2) < 0 or reserve(c, n + 2) < 0:
        return -2
    while k < n:
        end = scan_segment(&t.chars, kind, data, n, k, escape, split, c.s.ids, &m)
        if end < 0:
            resume[0] = scan_resume(&t.chars, kind, data, n, -2 - end, escape, split)
            return k
        if m == 1:
            c.out[c.out_len] = t.bmp[c.s.ids[0]]
            c.out_len += 1
        elif m <= t.cache_syms:
            merge_cached(t, c, 0, m, SEG_CHARS)
        else:
            char_symbols(t, c, 0, m)
            if m <= t.scan_max:
                merge_scan(t, c, 0, m)
            else:
                merge_long(t, c, 0, m)
        k = end
    return n


cdef int steps(const HFTables* t, HFCtx* c, int kind, const void* data, Py_ssize_t start, Py_ssize_t end,
               bint lead, bint escape, bint split) noexcept nogil:
    """The three steps for text[start:end] (``symbols``), its ids appended to c.out; -1
    out of memory."""
    cdef Py_ssize_t m, k, first = 0, ci = 0
    cdef const int32_t* ids
    cdef bint forced
    m = symbols(t, c, kind, data, start, end, lead, escape, split)
    if m < 0 or reserve(c, m + 1) < 0:
        return -1
    ids = c.s.ids
    for k in range(1, m + 1):
        forced = False
        while ci < c.n_cuts and c.s.cuts[ci] <= k:
            forced = forced or c.s.cuts[ci] == k
            ci += 1
        if k < m and not forced and joinable(t, ids[k - 1], ids[k]):
            continue
        if k - first == 1:
            c.out[c.out_len] = ids[first]
            c.out_len += 1
        elif k - first <= t.cache_syms:
            merge_cached(t, c, first, k, SEG_IDS)
        elif k - first <= t.scan_max:
            merge_scan(t, c, first, k)
        else:
            merge_long(t, c, first, k)
        first = k
    return 0


# --------------------------------------------------------------------------- the added-token cut
cdef inline bint lead_of(const HFTables* t, uint32_t first, Py_ssize_t offset) noexcept nogil:
    """``reference.hf_spm.prefix`` of a piece whose first code point is ``first``, at
    character ``offset`` of the text."""
    if t.prepend:
        return True
    if t.scheme == SCHEME_ALWAYS or (t.scheme == SCHEME_FIRST and offset == 0):
        return not (first == 0x2581 or (t.escape and first == 0x20))
    return False


cdef inline Py_ssize_t narrow(const AddedSet* a, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t j, uint32_t cp,
                             bint upper) noexcept nogil:
    """The first token of a[lo:hi] (sorted, all longer than j) whose code point j is
    >= cp (> cp when upper)."""
    cdef Py_ssize_t mid
    cdef uint32_t c
    while lo < hi:
        mid = (lo + hi) >> 1
        c = a.cps[a.at[mid] + j]
        if c < cp or (upper and c == cp):
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline Py_ssize_t added_at(const AddedSet* a, int kind, const void* data, Py_ssize_t pos,
                                Py_ssize_t n, int32_t* tid) noexcept nogil:
    """The length of the longest token of ``a`` at text[pos:n] (its id in tid), or 0.

    The tokens are sorted (by code points), so those sharing the text's first j
    characters are a range, the one of exactly those j characters (if any) first: the
    range is narrowed one character at a time by binary search, each whole token met on
    the way a match (the last the longest). O(match length x log tokens) a position,
    whatever the tokens share (Mistral v3: 768 of 771 start with "[")."""
    cdef uint32_t cp = PyUnicode_READ(kind, data, pos)
    cdef const Slot* slot
    cdef Py_ssize_t lo, hi, j = 1, found = 0
    if not (a.firsts[(cp & 0xFFFF) >> 6] >> (cp & 63)) & 1:
        return 0
    slot = table_get(&a.by_first, cp)
    if slot == NULL:
        return 0
    lo = slot.rank
    hi = lo + slot.merged
    while True:
        if a.length[lo] == j:      # text[pos:pos + j] is this token
            found = j
            tid[0] = a.ids[lo]
            lo += 1
            if lo == hi:
                break
        if pos + j >= n:
            break
        cp = PyUnicode_READ(kind, data, pos + j)
        lo = narrow(a, lo, hi, j, cp, False)
        hi = narrow(a, lo, hi, j, cp, True)
        if lo == hi:
            break
        j += 1
    return found


cdef int encode_text(const HFTables* t, const AddedSet* a, HFCtx* c, int kind, const void* data,
                     Py_ssize_t n) noexcept nogil:
    """``reference.hf_spm.encode`` of a text (code points as ``PyUnicode_READ`` reads
    them; no lone surrogates): the tokens of ``a`` cut out first, leftmost then longest
    (``pieces``), each piece between them through ``run`` with ``prefix``'s ``▁``; the
    ids appended to c.out. -1 out of memory."""
    cdef Py_ssize_t pos = 0, start = 0, m
    cdef int32_t tid = 0
    if a.count:
        while pos < n:
            m = added_at(a, kind, data, pos, n, &tid)
            if m == 0:
                pos += 1
                continue
            if start < pos and run(t, c, kind, data, start, pos, lead_of(t, PyUnicode_READ(kind, data, start), start),
                                   t.escape, t.split) < 0:
                return -1
            if reserve(c, 1) < 0:
                return -1
            c.out[c.out_len] = tid
            c.out_len += 1
            pos += m
            start = pos
    if start < n:
        return run(t, c, kind, data, start, n, lead_of(t, PyUnicode_READ(kind, data, start), start),
                   t.escape, t.split)
    return 0


cdef class AddedTokens:
    """The ``AddedSet`` of one call's tokens (``{text: id}``, non-empty texts)."""

    cdef AddedSet a

    def __cinit__(self):
        memset(&self.a, 0, sizeof(AddedSet))

    def __init__(self, dict tokens):
        cdef Py_ssize_t k, at = 0
        cdef uint32_t cp
        order = sorted(tokens)   # by code points (added_at)
        if order and not order[0]:
            raise ValueError("an added token has empty text (it would match everywhere)")
        n = len(order)
        self.a.cps = <uint32_t*>malloc((sum(len(s) for s in order) + 1) * sizeof(uint32_t))
        self.a.at = <Py_ssize_t*>malloc((n + 1) * sizeof(Py_ssize_t))
        self.a.length = <Py_ssize_t*>malloc((n + 1) * sizeof(Py_ssize_t))
        self.a.ids = <int32_t*>malloc((n + 1) * sizeof(int32_t))
        if self.a.cps == NULL or self.a.at == NULL or self.a.length == NULL or self.a.ids == NULL:
            raise MemoryError()
        table_init(&self.a.by_first, n)
        for k, s in enumerate(order):
            self.a.at[k] = at
            self.a.length[k] = len(s)
            self.a.ids[k] = tokens[s]
            for ch in s:
                self.a.cps[at] = ord(ch)
                at += 1
            cp = ord(s[0])
            self.a.firsts[(cp & 0xFFFF) >> 6] |= 1ULL << (cp & 63)
            if k == 0 or order[k - 1][0] != s[0]:
                table_put(&self.a.by_first, cp, <int32_t>k, 0)
            (<Slot*>table_get(&self.a.by_first, cp)).merged += 1
        self.a.count = n

    def __dealloc__(self):
        free(self.a.cps)
        free(self.a.at)
        free(self.a.length)
        free(self.a.ids)
        free(self.a.by_first.slots)


# --------------------------------------------------------------------------- batches
cdef struct TextRef:
    const void* data
    Py_ssize_t n
    int kind


cdef struct Batch:
    # a batch on the runner: job i is text i (blocks of neighbouring texts per thread,
    # taken over by an idle thread: fastbpe._runner); each thread has a context of its own
    const HFTables* t
    const AddedSet* added
    const TextRef* texts
    HFCtx** owner             # text i's ids are owner[i].out[begins[i]:ends[i]]
    Py_ssize_t* begins
    Py_ssize_t* ends
    HFCtx* pool               # the kernel's POOL contexts, or NULL (another batch holds them)
    HFCtx** ctxs              # thread k's context (k: the order the threads started in) ...
    Py_ssize_t n_ctxs         # ... for k < n_ctxs (atomic)
    char error                # out of memory (fbe_flag_store)


cdef void* batch_begin(void* payload) noexcept nogil:
    """A thread's context: the next of the kernel's pool, else a fresh one."""
    cdef Batch* b = <Batch*>payload
    cdef Py_ssize_t k = fbe_atomic_next(&b.n_ctxs)
    cdef HFCtx* c = &b.pool[k] if b.pool != NULL and k < POOL else <HFCtx*>calloc(1, sizeof(HFCtx))
    b.ctxs[k] = c
    if c == NULL or ctx_ready(b.t, c) < 0:
        fbe_flag_store(&b.error, 1)
        return NULL
    return c


cdef void batch_text(void* payload, Py_ssize_t i, Py_ssize_t slot, void* state) noexcept nogil:
    cdef Batch* b = <Batch*>payload
    cdef HFCtx* c = <HFCtx*>state
    if c == NULL:
        return
    b.owner[i] = c
    b.begins[i] = c.out_len
    if encode_text(b.t, b.added, c, b.texts[i].kind, b.texts[i].data, b.texts[i].n) < 0:
        fbe_flag_store(&b.error, 1)
    b.ends[i] = c.out_len


cdef inline bint has_surrogate(str text):
    cdef int kind = PyUnicode_KIND(text)
    cdef const void* data = PyUnicode_DATA(text)
    cdef Py_ssize_t i
    cdef uint32_t cp
    if kind == 1:
        return False
    for i in range(PyUnicode_GET_LENGTH(text)):
        cp = PyUnicode_READ(kind, data, i)
        if 0xD800 <= cp < 0xE000:
            return True
    return False


cdef inline str valid(str text):
    """text, its lone surrogates as U+FFFD (``reference.core.fix_surrogates``)."""
    return fix_surrogates(text) if has_surrogate(text) else text


cdef void write_ids(const int32_t* src, Py_ssize_t n, void* dst, Py_ssize_t at, bint u16) noexcept nogil:
    """src[:n] into the uint16 or uint32 array dst from item ``at`` (ids are >= 0)."""
    cdef Py_ssize_t k
    cdef uint16_t* h = <uint16_t*>dst + at
    if u16:
        for k in range(n):
            h[k] = <uint16_t>src[k]
    elif n:
        memcpy(<uint32_t*>dst + at, src, n * sizeof(uint32_t))


cdef cnp.ndarray id_array(Py_ssize_t n, object dtype):
    """An empty 1-d array of n ids of dtype (uint16 or uint32, checked by the caller),
    through numpy's C API (np.empty costs ~1 us a call)."""
    cdef cnp.npy_intp size = n
    return cnp.PyArray_EMPTY(1, &size, cnp.NPY_UINT16 if dtype.itemsize == 2 else cnp.NPY_UINT32, 0)


# --------------------------------------------------------------------------- kernel
cdef class HFSpmKernel:
    """The native ``encode`` of one ``HFSpmSpec``. ``scan_max``: the longest segment
    merged by a scan, longer ones by the heap, and from ``buckets_from`` symbols by
    buckets (``merge_buckets``); ``dense``: the junctions' bit matrix when small, else
    their hash table (tests set them to check every path)."""

    cdef HFTables t
    cdef HFCtx one              # single calls' context ...
    cdef bint one_busy          # ... unless another call holds it (then a fresh one)
    cdef HFCtx pool[POOL]       # batch threads' contexts, warm from call to call ...
    cdef bint pool_busy         # ... unless another batch holds them
    cdef Py_ssize_t n_shared
    cdef bint ignore_merges
    cdef object vocab
    cdef dict added_sets        # frozenset of allowed special tokens -> AddedTokens
    cdef AddedTokens plain      # added_sets[frozenset()]: asked for on most calls
    cdef dict added, special

    def __cinit__(self):
        memset(&self.t, 0, sizeof(HFTables))
        memset(&self.one, 0, sizeof(HFCtx))
        memset(self.pool, 0, sizeof(self.pool))

    def __init__(self, spec, int scan_max=16, bint dense=True, Py_ssize_t buckets_from=BUCKETS_FROM):
        from fastbpe.reference.hf_spm import junctions

        cdef int32_t i
        cdef Py_ssize_t k
        cdef uint64_t bit
        self.t.scan_max = scan_max
        self.t.buckets_from = max(buckets_from, scan_max + 1)
        self.t.prepend = spec.prepend
        self.t.scheme = {"never": SCHEME_NEVER, "first": SCHEME_FIRST, "always": SCHEME_ALWAYS}[spec.prepend_scheme]
        self.ignore_merges = spec.ignore_merges
        self.vocab = spec.vocab
        self.added, self.special, self.added_sets = dict(spec.added), dict(spec.special), {}
        n_ids = max(list(spec.vocab.values()) + [-1]) + 1
        self.t.n_ids = n_ids
        self.t.n_ranks = max([rank for rank, _ in spec.merges.values()] + [-1]) + 1
        self.t.cache_syms = SEG_LONG_SYMS if n_ids <= SEG_MAX_ID + 1 else CACHE_SYMS   # ctx_ready's choice
        self.n_shared = shared_id_ints(n_ids)
        self.t.bmp = <int32_t*>malloc(0x10000 * sizeof(int32_t))
        self.t.first = <uint32_t*>calloc(n_ids + 1, sizeof(uint32_t))
        self.t.last = <uint32_t*>calloc(n_ids + 1, sizeof(uint32_t))
        if self.t.bmp == NULL or self.t.first == NULL or self.t.last == NULL:
            raise MemoryError()
        for k in range(0x10000):
            self.t.bmp[k] = -1
        for k in range(256):
            self.t.byte_ids[k] = -1
        astral = {}
        for text, tid in spec.vocab.items():
            if text:
                self.t.first[tid] = ord(text[0])
                self.t.last[tid] = ord(text[len(text) - 1])
            if len(text) == 1:
                if ord(text) < 0x10000:
                    self.t.bmp[ord(text)] = tid
                else:
                    astral[ord(text)] = tid
            elif len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
                try:
                    byte = int(text[3:5], 16)
                except ValueError:
                    byte = -1
                if 0 <= byte < 256 and text == f"<0x{byte:02X}>":   # the form initial_symbols looks up
                    self.t.byte_ids[byte] = tid
        table_init(&self.t.astral, len(astral))
        for cp, tid in astral.items():
            table_put(&self.t.astral, cp, tid, 0)
        self.t.unk_id = -1 if spec.unk_id is None else spec.unk_id
        self.t.byte_fallback = spec.byte_fallback
        self.t.fuse_unk = spec.fuse_unk
        self.t.escape = spec.replace_space
        self.t.split = spec.split
        table_init(&self.t.merges, len(spec.merges))
        self.t.pair_filter = <uint64_t*>calloc(PAIR_FILTER_BITS // 64, sizeof(uint64_t))
        if self.t.pair_filter == NULL:
            raise MemoryError()
        for (left, right), (rank, merged) in spec.merges.items():
            table_put(&self.t.merges, pair_key(left, right), rank, merged)
            bit = filter_bit(pair_key(left, right))
            self.t.pair_filter[bit >> 6] |= (<uint64_t>1) << (bit & 63)
        joins = junctions(spec)
        self.t.cut = joins is not None
        table_init(&self.t.joins, len(joins or ()))
        for a, b in joins or ():
            table_put(&self.t.joins, pair_key(ord(a), ord(b)), 0, 0)
        if dense:
            self.dense_joins(joins or frozenset(), spec.vocab)
        if self.t.dense and self.t.cut and n_ids <= SEG_MAX_ID + 1:   # the scan keys the compact cache
            if scan_init(&self.t.chars, self.t.bmp, self.t.row, self.t.col, self.t.bits, self.t.n_cols,
                         self.t.byte_fallback, self.t.byte_ids) < 0:
                raise MemoryError()

    @property
    def scan_max(self) -> int:
        return self.t.scan_max

    @property
    def buckets_from(self) -> int:
        return self.t.buckets_from

    cdef int dense_joins(self, joins, dict vocab) except -1:
        """``HFTables.bits`` (see ``_hf_spm.pxd``) when the matrix is small."""
        cdef Py_ssize_t bit
        rows = {a: r for r, a in enumerate(sorted({a for a, _ in joins}))}
        cols = {b: c for c, b in enumerate(sorted({b for _, b in joins}))}
        if len(rows) * len(cols) > DENSE_MAX_BITS or len(rows) >= 0xFFFF or len(cols) >= 0xFFFF:
            return 0
        self.t.row = <uint16_t*>calloc(self.t.n_ids + 1, sizeof(uint16_t))
        self.t.col = <uint16_t*>calloc(self.t.n_ids + 1, sizeof(uint16_t))
        self.t.bits = <uint8_t*>calloc(len(rows) * len(cols) // 8 + 1, 1)
        if self.t.row == NULL or self.t.col == NULL or self.t.bits == NULL:
            raise MemoryError()
        self.t.n_cols = len(cols)
        for text, tid in vocab.items():
            if text:
                self.t.row[tid] = rows.get(text[len(text) - 1], -1) + 1
                self.t.col[tid] = cols.get(text[0], -1) + 1
        for a, b in joins:
            bit = rows[a] * len(cols) + cols[b]
            self.t.bits[bit >> 3] |= 1 << (bit & 7)
        self.t.dense = True
        return 0

    def __dealloc__(self):
        cdef int k
        free(self.t.bmp)
        free(self.t.astral.slots)
        free(self.t.merges.slots)
        free(self.t.pair_filter)
        free(self.t.joins.slots)
        free(self.t.first)
        free(self.t.last)
        free(self.t.row)
        free(self.t.col)
        free(self.t.bits)
        scan_free(&self.t.chars)
        ctx_free(&self.one)
        for k in range(POOL):
            ctx_free(&self.pool[k])

    # ------------------------------------------------------------------ contexts
    cdef HFCtx* acquire(self) except NULL:
        """A context for one call (under the GIL): the kernel's own, or a fresh one when
        another call holds it (a Python thread on the same tokenizer)."""
        cdef HFCtx* c
        if not self.one_busy:
            self.one_busy = True
            c = &self.one
        else:
            c = <HFCtx*>calloc(1, sizeof(HFCtx))
            if c == NULL:
                raise MemoryError()
        if ctx_ready(&self.t, c) < 0:
            self.release(c)
            raise MemoryError()
        return c

    cdef void release(self, HFCtx* c):
        if c == &self.one:
            ctx_trim(c)
            self.one_busy = False
        else:
            ctx_free(c)
            free(c)

    cdef AddedTokens added_for(self, allowed):
        """The ``AddedTokens`` of ``reference.hf_spm.pieces``: the added tokens and the
        allowed special ones (kept per allowed set)."""
        if not allowed and self.plain is not None:
            return self.plain
        key = frozenset(s for s in allowed if s in self.special)
        found = self.added_sets.get(key)
        if found is None:
            tokens = dict(self.added)
            tokens.update({s: i for s, i in self.special.items() if s in key})
            if len(self.added_sets) >= MAX_ADDED_SETS:
                self.added_sets.clear()
            found = self.added_sets[key] = AddedTokens(tokens)
            if not key:
                self.plain = found
        return found

    cdef list take(self, HFCtx* c):
        """The ids in c.out as a list of the process's shared int objects
        (``fastbpe._idlists``: no int made per id)."""
        cdef OutBuf view
        out_init(&view, <uint32_t*>c.out, c.out_cap)   # ids are >= 0: the same bits as uint32
        view.size = c.out_len
        return outbuf_to_list(&view, self.n_shared)

    # ------------------------------------------------------------------ words
    cdef int word(self, HFCtx* c, str word) except -1:
        """All three steps for one word (``bpe_word``), its ids appended to c.out."""
        if self.ignore_merges and word in self.vocab:
            if reserve(c, 1) < 0:
                raise MemoryError()
            c.out[c.out_len] = self.vocab[word]
            c.out_len += 1
            return 0
        return self.run_str(c, word, False, False, False)

    cdef int run_str(self, HFCtx* c, str text, bint lead, bint escape, bint split) except -1:
        if run(&self.t, c, PyUnicode_KIND(text), PyUnicode_DATA(text), 0, PyUnicode_GET_LENGTH(text),
               lead, escape, split) < 0:
            raise MemoryError()
        return 0

    def bpe(self, str word) -> list:
        """The ids of ``reference.hf_spm.bpe_word(word, spec)``."""
        cdef HFCtx* c = self.acquire()
        try:
            self.word(c, word)
            return self.take(c)
        finally:
            self.release(c)

    def encode_words(self, list words) -> list:
        """The ids of every word of ``words`` (str), in order."""
        cdef HFCtx* c = self.acquire()
        try:
            for w in words:
                self.word(c, w)
            return self.take(c)
        finally:
            self.release(c)

    def encode_pieces(self, list pieces) -> list:
        """The ids of ``reference.hf_spm.pieces``' list: an int is an added token's id,
        a ``(piece, lead)`` pair the ids of ``bpe_word`` of each of ``words(piece, lead,
        spec)`` (the caller takes the words' path when ``ignore_merges``, which looks up
        each word whole)."""
        cdef HFCtx* c
        self.check_merges()
        c = self.acquire()
        try:
            for p in pieces:
                if isinstance(p, int):
                    if reserve(c, 1) < 0:
                        raise MemoryError()
                    c.out[c.out_len] = p
                    c.out_len += 1
                else:
                    self.run_str(c, p[0], p[1], self.t.escape, self.t.split)
            return self.take(c)
        finally:
            self.release(c)

    cdef int check_merges(self) except -1:
        if self.ignore_merges:
            raise ValueError("this kernel path cannot run a model with ignore_merges: use encode_words")
        return 0

    # ------------------------------------------------------------------ texts
    cdef int encode_one(self, HFCtx* c, str text, AddedTokens added) except -1:
        """text's ids (``reference.hf_spm.encode``) into c.out; long texts without the GIL."""
        cdef int rc
        cdef int kind = PyUnicode_KIND(text)
        cdef const void* data = PyUnicode_DATA(text)
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
        if n > NOGIL_TEXT:
            with nogil:
                rc = encode_text(&self.t, &added.a, c, kind, data, n)
        else:
            rc = encode_text(&self.t, &added.a, c, kind, data, n)
        if rc < 0:
            raise MemoryError("out of memory while encoding")
        return 0

    def encode(self, str text, allowed=frozenset()) -> list:
        """``reference.hf_spm.encode(text, spec, allowed)`` (``allowed``: the special
        tokens matched); lone surrogates as U+FFFD."""
        cdef HFCtx* c
        cdef AddedTokens added = self.added_for(allowed)
        self.check_merges()
        text = valid(text)
        c = self.acquire()
        try:
            self.encode_one(c, text, added)
            return self.take(c)
        finally:
            self.release(c)

    def encode_to_numpy(self, str text, allowed, dtype):
        """``encode`` as a numpy array of dtype (uint16 or uint32: the caller checks
        that every id fits), written from the native buffer."""
        cdef HFCtx* c
        cdef AddedTokens added = self.added_for(allowed)
        cdef cnp.ndarray ids
        self.check_merges()
        text = valid(text)
        c = self.acquire()
        try:
            self.encode_one(c, text, added)
            ids = id_array(c.out_len, dtype)
            write_ids(c.out, c.out_len, cnp.PyArray_DATA(ids), 0, dtype.itemsize == 2)
            return ids
        finally:
            self.release(c)

    def encode_batch(self, list texts, allowed, int num_threads) -> list:
        """``encode`` of each text, on up to num_threads native threads (the policy of
        ``fastbpe._runner``), as lists."""
        return self.batch(texts, allowed, num_threads, None)

    def encode_batch_to_numpy(self, list texts, allowed, int num_threads, dtype):
        """``encode_batch`` as (ids, offsets): one flat array of dtype (uint16 or uint32,
        checked by the caller) and int64 offsets, text i being ids[offsets[i]:offsets[i + 1]];
        written from the native buffers, no lists."""
        return self.batch(texts, allowed, num_threads, dtype)

    cdef object batch(self, list texts, allowed, int num_threads, object dtype):
        """Each text's ids on up to num_threads threads (``Batch``); lists (dtype None)
        or arrays."""
        cdef AddedTokens added = self.added_for(allowed)
        cdef Py_ssize_t n = len(texts), i, k, total = 0
        cdef int n_thr = 1
        cdef Batch b
        cdef Runner runner
        cdef bint use_pool = False
        cdef HFCtx* c
        cdef TextRef* refs = NULL
        self.check_merges()
        if any(has_surrogate(s) for s in texts):
            texts = [valid(s) for s in texts]   # kept alive here while the threads read them
        memset(&b, 0, sizeof(Batch))
        try:
            refs = <TextRef*>calloc(n + 1, sizeof(TextRef))
            b.texts = refs
            b.owner = <HFCtx**>calloc(n + 1, sizeof(HFCtx*))
            b.begins = <Py_ssize_t*>calloc(n + 1, sizeof(Py_ssize_t))
            b.ends = <Py_ssize_t*>calloc(n + 1, sizeof(Py_ssize_t))
            if b.texts == NULL or b.owner == NULL or b.begins == NULL or b.ends == NULL:
                raise MemoryError()
            for i in range(n):
                s = texts[i]
                refs[i].kind = PyUnicode_KIND(s)
                refs[i].data = PyUnicode_DATA(s)
                refs[i].n = PyUnicode_GET_LENGTH(s)
                total += refs[i].n
            n_thr = <int>min(<Py_ssize_t>_batch_threads(num_threads, total), max(n, 1))
            b.ctxs = <HFCtx**>calloc(n_thr, sizeof(HFCtx*))
            if b.ctxs == NULL:
                raise MemoryError()
            b.t = &self.t
            b.added = &added.a
            use_pool = not self.pool_busy   # under the GIL: one batch at a time uses the pool
            self.pool_busy = True
            b.pool = self.pool if use_pool else NULL
            runner.payload = &b
            runner.begin = batch_begin
            runner.run = batch_text
            runner.end = NULL
            runner.n_jobs = n
            runner.notify = False
            with nogil:
                run_jobs(&runner, n_thr)
            if b.error:
                raise MemoryError("out of memory while encoding")
            return self.lists(&b, n) if dtype is None else self.arrays(&b, n, dtype)
        finally:
            for k in range(b.n_ctxs):
                c = b.ctxs[k]
                if b.pool != NULL and k < POOL:
                    ctx_trim(c)
                elif c != NULL:
                    ctx_free(c)
                    free(c)
            if use_pool:
                self.pool_busy = False
            free(b.ctxs)
            free(refs)
            free(b.owner)
            free(b.begins)
            free(b.ends)

    cdef list lists(self, const Batch* b, Py_ssize_t n):
        cdef OutBuf view
        cdef Py_ssize_t i
        cdef list out = []
        collect_young_if_due()
        for i in range(n):
            out_init(&view, <uint32_t*>b.owner[i].out + b.begins[i], b.ends[i] - b.begins[i])
            view.size = b.ends[i] - b.begins[i]
            out.append(outbuf_to_list(&view, self.n_shared, True))
        track_lists(out)
        return out

    cdef tuple arrays(self, const Batch* b, Py_ssize_t n, object dtype):
        cdef Py_ssize_t i, total = 0
        cdef bint u16 = dtype.itemsize == 2
        cdef cnp.npy_intp n_off = n + 1
        for i in range(n):
            total += b.ends[i] - b.begins[i]
        cdef cnp.ndarray ids = id_array(total, dtype)
        cdef cnp.ndarray offsets = cnp.PyArray_EMPTY(1, &n_off, cnp.NPY_INT64, 0)
        cdef void* w = cnp.PyArray_DATA(ids)
        cdef int64_t* off = <int64_t*>cnp.PyArray_DATA(offsets)
        with nogil:
            off[0] = 0
            for i in range(n):
                write_ids(b.owner[i].out + b.begins[i], b.ends[i] - b.begins[i], w, off[i], u16)
                off[i + 1] = off[i] + b.ends[i] - b.begins[i]
        return ids, offsets
