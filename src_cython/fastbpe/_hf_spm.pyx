"""Native BPE of a sentencepiece-style tokenizer.json (HF's BPE by merge rank): the twin
of ``fastbpe.reference.hf_spm.words`` + ``bpe_word``; the steps are in ``_hf_spm.pxd``.

``HFSpmKernel(spec)`` builds its tables once from an ``HFSpmSpec``; ``encode_pieces``
gives a text's ids from ``reference.hf_spm.pieces`` (one call per text: the model's
path), ``encode_words`` those of a list of words (``ignore_merges`` models), ``bpe(word)``
one word's. All hold the GIL (the scratch buffers and the cache are the kernel's own).
"""
from libc.stdint cimport int32_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy, memmove

from fastbpe._idlists cimport outbuf_to_list, shared_id_ints
from fastbpe._out cimport OutBuf, out_init

from fastbpe._hf_spm cimport CACHE_BITS, CACHE_SLOTS, CACHE_SYMS, CacheEntry, HFTables, Scratch, Slot, Table
from fastbpe._hf_spm_cache cimport (SEG_CHARS, SEG_IDS, SEG_LONG_SYMS, SegCache, seg_find, seg_free, seg_hash,
                                    seg_init, seg_store)
from fastbpe._hf_spm_scan cimport ScanChars, scan_free, scan_init, scan_resume, scan_segment

cdef extern from "Python.h":
    int PyUnicode_KIND(object text)
    void* PyUnicode_DATA(object text)
    uint32_t PyUnicode_READ(int kind, void* data, Py_ssize_t index) nogil
    Py_ssize_t PyUnicode_GET_LENGTH(object text)

cdef enum:
    NO_RANK = 0x7FFFFFFF
    DENSE_MAX_BITS = 1 << 23    # the largest junction bit matrix (1 MiB); past it, the hash table

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


# --------------------------------------------------------------------------- kernel
cdef class HFSpmKernel:
    """The native ``bpe_word`` of one ``HFSpmSpec``. ``scan_max``: the longest segment
    merged by a scan, longer ones by the heap; ``dense``: the junctions' bit matrix when
    small, else their hash table (tests set both to check every path)."""

    cdef HFTables t
    cdef Scratch s
    cdef CacheEntry* cache
    cdef SegCache seg       # the compact cache (_hf_spm_cache.pxd) when ids fit 16 bits, else cache
    cdef Py_ssize_t cache_syms   # the longest segment cached
    cdef ScanChars chars    # the fused scan's tables (_hf_spm_scan.pxd); info NULL when it cannot run
    cdef int32_t* out
    cdef Py_ssize_t out_len, out_cap
    cdef readonly int scan_max
    cdef Py_ssize_t n_shared
    cdef Py_ssize_t n_cuts
    cdef bint ignore_merges
    cdef object vocab

    def __cinit__(self):
        self.t.bmp = NULL
        self.t.astral.slots = NULL
        self.t.merges.slots = NULL
        self.t.joins.slots = NULL
        self.t.first = NULL
        self.t.last = NULL
        self.t.row = self.t.col = NULL
        self.t.bits = NULL
        self.t.dense = False
        self.s.ids = self.s.nxt = self.s.prv = self.s.rank = NULL
        self.s.heap = NULL
        self.s.cuts = NULL
        self.s.cap = self.s.ids_cap = self.s.cuts_cap = 0
        self.out = NULL
        self.out_len = self.out_cap = 0
        self.cache = NULL
        self.seg.mem = NULL
        self.seg.short_ = self.seg.long_ = NULL
        self.chars.info = NULL

    def __init__(self, spec, int scan_max=16, bint dense=True):
        from fastbpe.reference.hf_spm import junctions

        cdef int32_t i
        cdef Py_ssize_t k
        self.scan_max = scan_max
        self.ignore_merges = spec.ignore_merges
        self.vocab = spec.vocab
        n_ids = max(list(spec.vocab.values()) + [-1]) + 1
        self.t.n_ids = n_ids
        if seg_init(&self.seg, n_ids) < 0:
            raise MemoryError()
        self.cache_syms = SEG_LONG_SYMS if self.seg.short_ != NULL else CACHE_SYMS
        if self.seg.short_ == NULL:
            self.cache = <CacheEntry*>calloc(CACHE_SLOTS, sizeof(CacheEntry))
            if self.cache == NULL:
                raise MemoryError()
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
        for (left, right), (rank, merged) in spec.merges.items():
            table_put(&self.t.merges, pair_key(left, right), rank, merged)
        joins = junctions(spec)
        self.t.cut = joins is not None
        table_init(&self.t.joins, len(joins or ()))
        for a, b in joins or ():
            table_put(&self.t.joins, pair_key(ord(a), ord(b)), 0, 0)
        if dense:
            self.dense_joins(joins or frozenset(), spec.vocab)
        if self.t.dense and self.t.cut and self.seg.short_ != NULL:
            if scan_init(&self.chars, self.t.bmp, self.t.row, self.t.col, self.t.bits, self.t.n_cols,
                         self.t.byte_fallback, self.t.byte_ids) < 0:
                raise MemoryError()

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

    cdef inline bint joinable(self, int32_t left, int32_t right) noexcept nogil:
        """Whether a merge may ever cross between symbols ``left`` and ``right`` (step 2)."""
        cdef uint32_t r, c, bit
        if not self.t.cut:
            return True
        if self.t.dense:
            r = self.t.row[left]
            c = self.t.col[right]
            if r == 0 or c == 0:
                return False
            bit = (r - 1) * self.t.n_cols + (c - 1)
            return (self.t.bits[bit >> 3] >> (bit & 7)) & 1
        return table_get(&self.t.joins, pair_key(self.t.last[left], self.t.first[right])) != NULL

    def __dealloc__(self):
        free(self.t.bmp)
        free(self.t.astral.slots)
        free(self.t.merges.slots)
        free(self.t.joins.slots)
        free(self.t.first)
        free(self.t.last)
        free(self.t.row)
        free(self.t.col)
        free(self.t.bits)
        free(self.s.ids)
        free(self.s.nxt)
        free(self.s.prv)
        free(self.s.rank)
        free(self.s.heap)
        free(self.s.cuts)
        free(self.out)
        free(self.cache)
        seg_free(&self.seg)
        scan_free(&self.chars)

    # ------------------------------------------------------------------ buffers
    cdef int reserve(self, Py_ssize_t n) except -1:
        """Scratch for a word of n symbols, and room for n more output ids."""
        cdef Py_ssize_t cap
        if n > self.s.cap:
            cap = max(n, 2 * self.s.cap, 64)
            self.s.nxt = <int32_t*>realloc(self.s.nxt, cap * sizeof(int32_t))
            self.s.prv = <int32_t*>realloc(self.s.prv, cap * sizeof(int32_t))
            self.s.rank = <int32_t*>realloc(self.s.rank, cap * sizeof(int32_t))
            self.s.heap = <uint64_t*>realloc(self.s.heap, 3 * cap * sizeof(uint64_t))
            if self.s.nxt == NULL or self.s.prv == NULL or self.s.rank == NULL or self.s.heap == NULL:
                raise MemoryError()
            self.s.cap = cap
        if self.out_len + n > self.out_cap:
            cap = max(self.out_len + n, 2 * self.out_cap, 256)
            self.out = <int32_t*>realloc(self.out, cap * sizeof(int32_t))
            if self.out == NULL:
                raise MemoryError()
            self.out_cap = cap
        return 0

    cdef int grow_ids(self, Py_ssize_t n) except -1:
        """Room for n symbol ids."""
        cdef Py_ssize_t cap
        if n > self.s.ids_cap:
            cap = max(n, 2 * self.s.ids_cap, 64)
            self.s.ids = <int32_t*>realloc(self.s.ids, cap * sizeof(int32_t))
            if self.s.ids == NULL:
                raise MemoryError()
            self.s.ids_cap = cap
        return 0

    # ------------------------------------------------------------------ steps
    cdef Py_ssize_t symbols(self, str word, bint lead, bint escape, bint split, Py_ssize_t start=0,
                            Py_ssize_t end=-1) except -1:
        """Step 1 (``initial_symbols``): the symbol ids of ``word`` into s.ids; their
        count. For a piece (``reference.hf_spm.words``): a ``▁`` first when ``lead``,
        spaces as ``▁`` when ``escape``, and when ``split`` the position of each word's
        first symbol into s.cuts (``n_cuts``; a word's unknown run is its own). ``start``,
        ``end``: the characters to take (-1: to the end; the fused scan's hand-over, at
        cuts; ``lead`` only when ``start`` is 0)."""
        cdef int kind = PyUnicode_KIND(word)
        cdef void* data = PyUnicode_DATA(word)
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(word)
        cdef Py_ssize_t k, m = 0
        cdef uint32_t cp
        cdef int32_t tid
        cdef const Slot* slot
        cdef unsigned char b[4]
        cdef int nb, j
        cdef bint prev_unk = False, ok
        cdef int32_t* ids
        self.n_cuts = 0
        self.grow_ids(n + 8)
        if split and n + 2 > self.s.cuts_cap:
            self.s.cuts = <int32_t*>realloc(self.s.cuts, (n + 2) * sizeof(int32_t))
            if self.s.cuts == NULL:
                raise MemoryError()
            self.s.cuts_cap = n + 2
        ids = self.s.ids
        for k in range(-1 if lead else start, n if end < 0 else end):
            if m + 4 > self.s.ids_cap:     # byte fallback made more symbols than characters
                self.grow_ids(m + 8 + (n - k))
                ids = self.s.ids
            cp = 0x2581 if k < 0 else PyUnicode_READ(kind, data, k)
            if escape and cp == 0x20:
                cp = 0x2581
            if split and cp == 0x2581 and k > (-1 if lead else 0):
                self.s.cuts[self.n_cuts] = <int32_t>m   # a word starts here
                self.n_cuts += 1
                prev_unk = False
            if cp < 0x10000:
                tid = self.t.bmp[cp]
            else:
                slot = table_get(&self.t.astral, cp)
                tid = slot.rank if slot != NULL else -1
            if tid >= 0:
                ids[m] = tid
                m += 1
                prev_unk = False
                continue
            if self.t.byte_fallback:
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
                    if self.t.byte_ids[b[j]] < 0:
                        ok = False
                if ok:
                    for j in range(nb):
                        ids[m] = self.t.byte_ids[b[j]]
                        m += 1
                    prev_unk = False
                    continue
            if self.t.unk_id < 0:
                continue           # dropped (no unk_token)
            if not (self.t.fuse_unk and prev_unk):
                ids[m] = self.t.unk_id
                m += 1
            prev_unk = True
        return m

    cdef inline int32_t rank_of(self, int32_t left, int32_t right, int32_t* merged) noexcept nogil:
        cdef const Slot* slot = table_get(&self.t.merges, pair_key(left, right))
        if slot == NULL:
            return NO_RANK
        merged[0] = slot.merged
        return slot.rank

    cdef void merge_scan(self, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
        """Step 3 for a short segment s.ids[a:b]: rank[i] is the rank of pair (i, i + 1),
        nxt[i] its merged id; each merge takes the lowest rank (strict <: the leftmost),
        then drops the right symbol and refreshes the two pairs around it."""
        cdef int32_t* ids = self.s.ids
        cdef int32_t* rank = self.s.rank
        cdef int32_t* merged = self.s.nxt
        cdef Py_ssize_t m = b - a, i, best_i
        cdef int32_t best
        for i in range(a, b - 1):
            rank[i] = self.rank_of(ids[i], ids[i + 1], &merged[i])
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
                rank[best_i - 1] = self.rank_of(ids[best_i - 1], ids[best_i], &merged[best_i - 1])
            if best_i < a + m - 1:
                rank[best_i] = self.rank_of(ids[best_i], ids[best_i + 1], &merged[best_i])
        for i in range(a, a + m):
            self.out[self.out_len] = ids[i]
            self.out_len += 1

    cdef inline void push_pair(self, Py_ssize_t left, uint64_t* heap, Py_ssize_t* size) noexcept nogil:
        cdef int32_t merged
        cdef int32_t rank
        if left < 0 or self.s.nxt[left] < 0:
            return
        rank = self.rank_of(self.s.ids[left], self.s.ids[self.s.nxt[left]], &merged)
        if rank != NO_RANK:
            heap_push(heap, size, (<uint64_t>rank << 32) | <uint64_t>left)

    cdef void merge_heap(self, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
        """Step 3 for a long segment s.ids[a:b]: a linked list of symbols and a heap of
        ``rank << 32 | left position``; a popped pair whose left symbol is gone, has no
        right neighbour or another rank now is stale and skipped (ranks are distinct per
        pair, so an equal rank is the same pair)."""
        cdef int32_t* ids = self.s.ids
        cdef int32_t* nxt = self.s.nxt
        cdef int32_t* prv = self.s.prv
        cdef uint64_t* heap = self.s.heap
        cdef Py_ssize_t size = 0, i, left, right
        cdef uint64_t item
        cdef int32_t rank, merged = 0
        for i in range(a, b):
            nxt[i] = i + 1 if i + 1 < b else -1
            prv[i] = i - 1 if i > a else -1
        for i in range(a, b - 1):
            self.push_pair(i, heap, &size)
        while size > 0:
            item = heap_pop(heap, &size)
            left = <Py_ssize_t>(item & 0xFFFFFFFFULL)
            if ids[left] < 0 or nxt[left] < 0:
                continue
            right = nxt[left]
            rank = self.rank_of(ids[left], ids[right], &merged)
            if <uint64_t>rank != (item >> 32):
                continue                          # stale: the pair changed since the push
            ids[left] = merged
            ids[right] = -1
            nxt[left] = nxt[right]
            if nxt[right] >= 0:
                prv[nxt[right]] = left
            self.push_pair(prv[left], heap, &size)
            self.push_pair(left, heap, &size)
        i = a
        while i >= 0:
            self.out[self.out_len] = ids[i]
            self.out_len += 1
            i = nxt[i]

    cdef void merge_cached(self, Py_ssize_t a, Py_ssize_t b, uint32_t tag=SEG_IDS) noexcept nogil:
        """Step 3 through the segment cache (``_hf_spm.pxd``; ``_hf_spm_cache.pxd`` when
        ids fit 16 bits): a hit copies the ids, a miss merges (scan or heap as for any
        segment) and stores the result. ``tag`` ``SEG_CHARS``: s.ids[a:b] are the
        segment's characters (the fused scan), made symbols on a miss."""
        cdef const int32_t* key = self.s.ids + a
        cdef uint32_t n = <uint32_t>(b - a)
        cdef uint64_t h = 0xCBF29CE484222325ULL
        cdef uint32_t i
        cdef Py_ssize_t before
        cdef CacheEntry* e
        cdef int32_t saved[SEG_LONG_SYMS]
        cdef int got
        if self.seg.short_ != NULL:
            h = seg_hash(key, n)
            got = seg_find(&self.seg, h, key, n, tag, self.out + self.out_len)
            if got >= 0:
                self.out_len += got
                return
            memcpy(saved, key, n * sizeof(int32_t))   # the merge rewrites s.ids
            if tag == SEG_CHARS:
                self.char_symbols(a, b)
            before = self.out_len
            if n <= <uint32_t>self.scan_max:
                self.merge_scan(a, b)
            else:
                self.merge_heap(a, b)
            seg_store(&self.seg, h, saved, n, tag, self.out + before, <uint32_t>(self.out_len - before))
            return
        for i in range(n):
            h = (h ^ <uint32_t>key[i]) * 0x100000001B3ULL
        h ^= h >> 29
        h *= 0xBF58476D1CE4E5B9ULL
        e = &self.cache[h >> (64 - CACHE_BITS)]
        if e.n_in == n:
            i = 0
            while i < n and e.key[i] == key[i]:
                i += 1
            if i == n:
                for i in range(e.n_out):
                    self.out[self.out_len + i] = e.ids[i]
                self.out_len += e.n_out
                return
        e.n_in = n
        memcpy(e.key, key, n * sizeof(int32_t))   # before merging: the merge rewrites s.ids
        before = self.out_len
        if n <= <uint32_t>self.scan_max:
            self.merge_scan(a, b)
        else:
            self.merge_heap(a, b)
        e.n_out = <uint32_t>(self.out_len - before)
        memcpy(e.ids, self.out + before, e.n_out * sizeof(int32_t))

    cdef int word(self, str word) except -1:
        """All three steps for one word (``bpe_word``), its ids appended to ``out``."""
        if self.ignore_merges and word in self.vocab:
            self.reserve(1)
            self.out[self.out_len] = self.vocab[word]
            self.out_len += 1
            return 0
        return self.run(word, False, False, False)

    cdef int run(self, str text, bint lead, bint escape, bint split) except -1:
        """All three steps for a word, or a piece (``symbols``), its ids appended to ``out``."""
        cdef Py_ssize_t first = -1 if lead else 0, end = -1, n = PyUnicode_GET_LENGTH(text)
        while self.chars.info != NULL:      # the fused scan, the three steps where it stops
            first = self.run_chars(text, first, escape, split, &end)
            if first >= n:
                return 0
            self.steps(text, first < 0, escape, split, max(first, 0), end)
            first = end
            if first >= n:
                return 0
        return self.steps(text, lead, escape, split, 0, -1)

    cdef int steps(self, str text, bint lead, bint escape, bint split, Py_ssize_t begin, Py_ssize_t stop) except -1:
        """The three steps for characters ``begin:stop`` of a piece (``symbols``)."""
        cdef Py_ssize_t m, k, start = 0, ci = 0
        cdef const int32_t* ids
        cdef bint forced
        m = self.symbols(text, lead, escape, split, begin, stop)
        self.reserve(m + 1)
        ids = self.s.ids
        # the GIL is held throughout: the scratch, output and cache are the kernel's
        # own, so two Python threads on one tokenizer must not run this at once
        for k in range(1, m + 1):
            forced = False
            while ci < self.n_cuts and self.s.cuts[ci] <= k:
                forced = forced or self.s.cuts[ci] == k
                ci += 1
            if k < m and not forced and self.joinable(ids[k - 1], ids[k]):
                continue
            if k - start == 1:
                self.out[self.out_len] = ids[start]
                self.out_len += 1
            elif k - start <= self.cache_syms:
                self.merge_cached(start, k)
            elif k - start <= self.scan_max:
                self.merge_scan(start, k)
            else:
                self.merge_heap(start, k)
            start = k
        return 0

    cdef Py_ssize_t run_chars(self, str text, Py_ssize_t k, bint escape, bint split, Py_ssize_t* resume) except -2:
        """The fused scan (``_hf_spm_scan.pxd``) from character ``k`` (-1: the ``▁`` in
        front): each segment's ids appended to ``out``, through the cache by its
        characters; the start of the segment holding a character that is not one symbol
        of its own (the three steps take it to ``*resume``, ``scan_resume``), or the
        text's length."""
        cdef int kind = PyUnicode_KIND(text)
        cdef void* data = PyUnicode_DATA(text)
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), end, m = 0
        self.grow_ids(n + 2)
        self.reserve(n + 2)
        while k < n:
            end = scan_segment(&self.chars, kind, data, n, k, escape, split, self.s.ids, &m)
            if end < 0:
                resume[0] = scan_resume(&self.chars, kind, data, n, -2 - end, escape, split)
                return k
            if m == 1:
                self.out[self.out_len] = self.t.bmp[self.s.ids[0]]
                self.out_len += 1
            elif m <= self.cache_syms:
                self.merge_cached(0, m, SEG_CHARS)
            else:
                self.char_symbols(0, m)
                if m <= self.scan_max:
                    self.merge_scan(0, m)
                else:
                    self.merge_heap(0, m)
            k = end
        return n

    cdef inline void char_symbols(self, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
        """s.ids[a:b] from characters (each one symbol of its own) to their ids."""
        cdef Py_ssize_t i
        for i in range(a, b):
            self.s.ids[i] = self.t.bmp[self.s.ids[i]]

    cdef list take(self):
        """The ids in ``out`` as a list of the process's shared int objects
        (``fastbpe._idlists``: no int made per id)."""
        cdef OutBuf view
        out_init(&view, <uint32_t*>self.out, self.out_cap)   # ids are >= 0: the same bits as uint32
        view.size = self.out_len
        self.out_len = 0
        return outbuf_to_list(&view, self.n_shared)

    # ------------------------------------------------------------------ API
    def bpe(self, str word) -> list:
        """The ids of ``reference.hf_spm.bpe_word(word, spec)``."""
        self.out_len = 0
        self.word(word)
        return self.take()

    def encode_pieces(self, list pieces) -> list:
        """The ids of ``reference.hf_spm.pieces``' list: an int is an added token's id,
        a ``(piece, lead)`` pair the ids of ``bpe_word`` of each of ``words(piece, lead,
        spec)`` (the caller takes the words' path when ``ignore_merges``, which looks up
        each word whole)."""
        if self.ignore_merges:
            raise ValueError("encode_pieces cannot run a model with ignore_merges: use encode_words")
        self.out_len = 0
        for p in pieces:
            if isinstance(p, int):
                self.reserve(1)
                self.out[self.out_len] = p
                self.out_len += 1
            else:
                self.run(p[0], p[1], self.t.escape, self.t.split)
        return self.take()

    def encode_words(self, list words) -> list:
        """The ids of every word of ``words`` (str), in order."""
        self.out_len = 0
        for w in words:
            self.word(w)
        return self.take()
