"""Native BPE trainer: learn merges identical to ``fastbpe.reference.bpe.train_on_chunks``.

Why it is fast: the reference recounts every pair of every chunk after each merge. Here
the unique chunks live once, as int32 token ids in one flat buffer, and

* pair counts are kept *incrementally* in an open-addressing hash map
  ``(left, right) -> pair slot`` whose slot holds the int64 count and the list of chunks
  (words) that contained the pair when it was created (lists may hold stale ids; a word
  that no longer holds the pair is simply scanned without effect);
* the next merge comes from a max-heap of ``(count, left, right)`` with lazy
  invalidation: a popped entry is checked against the live count, and re-pushed with the
  live count when it was stale;
* a merge rewrites only the words listed for the pair, and adjusts only the pairs that
  the merge destroyed or created (the neighbours), which equals recounting the word.

Exactness (see the reference's docstring for each rule): overlapping pair counts,
leftmost non-overlapping merging, tie-break by highest count then smallest
``(left, right)``, ``max_token_length`` (ineligible pairs keep correct counts but are
never chosen), ``min_frequency``, and id reuse when the merged bytes already are a token.

Heap invariant (why the lazy heap is exact): every pair with a live count ``c > 0`` has
at least one heap entry with count ``>= c``. Decreases keep it; every increase pushes the
new live count at the end of the merge. So when the top entry equals the live count, no
other pair can beat it (its entry would be above the top).
"""
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.exc cimport PyErr_CheckSignals
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy, memmove, memset

from fastbpe._train_tuning cimport TrainTuning

cdef extern from "fbe_bigalloc.h":
    void* fbpe_realloc(void* p, size_t n) nogil
    void* fbpe_malloc(size_t n) nogil
    void fbpe_free(void* p) nogil
    void fbpe_trim_memory() nogil


cdef extern from "stdlib.h" nogil:
    void qsort(void* base, size_t nmemb, size_t size, int (*compar)(const void*, const void*))


cdef int cmp_uint64(const void* a, const void* b) noexcept nogil:
    cdef uint64_t x = (<const uint64_t*>a)[0], y = (<const uint64_t*>b)[0]
    return (x > y) - (x < y)


cdef struct IdList:
    # a list of word ids inside _Merger.pool: pool[off : off + n], room for cap
    uint32_t off
    int32_t n
    int32_t cap

cdef struct MapEntry:
    # a bucket of _Merger's pair map: the key beside the slot, so a probe reads one
    # line (keys only in p_key cost a second, dependent miss per lookup: perf put ~15%
    # of the merge loop's samples on it at 1 GB)
    uint64_t key       # pair_key(left, right); unused while slot < 0
    int32_t slot       # pair slot, -1: empty
    int32_t unused

cdef packed struct HeapEntry:
    int64_t count
    int32_t left
    int32_t right

# Status codes of _Merger.run
cdef enum:
    RUN_MORE = 0        # did the requested number of merges, more may follow
    RUN_FULL = 1        # the vocabulary reached n_tokens
    RUN_NO_PAIR = 2     # no eligible pair left
    RUN_BELOW_MIN = 3   # best eligible count below max(min_frequency, 1)

# Failures (negative: every nogil function passes them up unchanged); limit_message
# says what each means
cdef enum:
    ERR_OOM = -1        # malloc/mmap failed
    ERR_PAIRS = -2      # more distinct pairs than TrainTuning.max_pairs
    ERR_POOL = -3       # word lists beyond TrainTuning.max_pool entries
    ERR_CHUNKS = -4     # more unique chunks than TrainTuning.max_chunks
    ERR_CHUNK_LEN = -5  # a chunk longer than TrainTuning.max_chunk_bytes


cdef inline uint64_t mix64(uint64_t x) noexcept nogil:
    # murmur3 finalizer: pair keys are highly structured (small ids), spread them out
    x ^= x >> 33
    x *= 0xff51afd7ed558ccdULL
    x ^= x >> 33
    x *= 0xc4ceb9fe1a85ec53ULL
    x ^= x >> 33
    return x


# The trainer's knobs (limits, housekeeping thresholds): fastbpe._train_tuning
# documents each field. This is the process default; every _ChunkTable and _Merger
# copies it when it is made and reads only its copy.
cdef TrainTuning _default_tuning
_default_tuning.max_chunks = 0x7FFFFFFF - 1      # int32 entry numbers and word ids
_default_tuning.max_chunk_bytes = 0x7FFFFFFF - 1 # int32 word lengths
_default_tuning.max_pairs = 0x7FFFFFFF           # int32 pair slots
_default_tuning.max_pool = 0xFFFFFFFF - 1        # uint32 offsets into the word-list pool
_default_tuning.pool_min_waste = 4096
_default_tuning.heap_slack = 4096
_LIMIT_DEFAULTS = (_default_tuning.max_chunks, _default_tuning.max_chunk_bytes,
                   _default_tuning.max_pairs, _default_tuning.max_pool)


def _set_limits(max_chunks=None, max_chunk_bytes=None, max_pairs=None, max_pool=None):
    """Lower (or restore) the capacity limits of the trainers made from now on; return
    the old ones (for tests: a corpus of 2**31 unique chunks can't be built in a test,
    a limit of 10 can)."""
    cdef TrainTuning* t = &_default_tuning
    old = (t.max_chunks, t.max_chunk_bytes, t.max_pairs, t.max_pool)
    new = [d if v is None else min(int(v), d) for v, d in
           zip((max_chunks, max_chunk_bytes, max_pairs, max_pool), _LIMIT_DEFAULTS)]
    t.max_chunks = new[0]
    t.max_chunk_bytes = new[1]
    t.max_pairs = new[2]
    t.max_pool = new[3]
    return old


cdef str limit_message(int status, const TrainTuning* t):
    """What an ERR_* status means, with the limit (of t, the one checked) that was hit."""
    if status == ERR_PAIRS:
        return (f"more than {t.max_pairs:,} distinct pairs of tokens at once, the native trainer's "
                "limit (pair slots are int32)")
    if status == ERR_POOL:
        return (f"more than {t.max_pool:,} (pair, chunk) entries in the pair-to-chunk lists, the "
                "native trainer's limit (uint32 offsets)")
    if status == ERR_CHUNKS:
        return (f"more than {t.max_chunks:,} unique chunks, the native trainer's limit (chunk "
                "numbers are int32); train on a sample, or with a pattern that makes fewer "
                "distinct chunks")
    if status == ERR_CHUNK_LEN:
        return (f"a chunk longer than {t.max_chunk_bytes:,} bytes, the native trainer's limit "
                "(chunk lengths are int32)")
    return "out of memory"


cdef status_error(int status, where, const TrainTuning* t):
    """The exception for an ERR_* status: MemoryError, or ValueError for a limit of t."""
    msg = f"{where}: {limit_message(status, t)}"
    return MemoryError(msg) if status == ERR_OOM else ValueError(msg)


def _set_housekeeping(pool_min_waste, heap_slack):
    """Set the housekeeping thresholds of the trainers made from now on; return the old
    ones (for tests)."""
    old = (_default_tuning.pool_min_waste, _default_tuning.heap_slack)
    _default_tuning.pool_min_waste = pool_min_waste
    _default_tuning.heap_slack = heap_slack
    return old


# p_key of a recycled slot: (-1, -1) is no pair
cdef uint64_t DEAD_KEY = 0xFFFFFFFFFFFFFFFFULL


cdef inline uint64_t pair_key(int32_t left, int32_t right) noexcept nogil:
    return ((<uint64_t><uint32_t>left) << 32) | <uint64_t><uint32_t>right


cdef inline uint64_t hash_bytes(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    # FNV-1a, then mixed: token bytes are short, this is only for id reuse detection
    cdef uint64_t h = 1469598103934665603ULL
    cdef Py_ssize_t i
    for i in range(n):
        h = (h ^ s[i]) * 1099511628211ULL
    return mix64(h)


cdef int grow(void** ptr, Py_ssize_t* cap, Py_ssize_t need, size_t elem) noexcept nogil:
    """Make room for ``need`` elements (amortized, x1.5: memory matters as much as
    speed here); -1 when out of memory."""
    cdef Py_ssize_t new_cap
    cdef void* p
    if need <= cap[0]:
        return 0
    new_cap = cap[0] + (cap[0] >> 1) if cap[0] >= 16 else 16
    while new_cap < need:
        new_cap += new_cap >> 1
    p = fbpe_realloc(ptr[0], <size_t>new_cap * elem)
    if p == NULL:
        return -1
    ptr[0] = p
    cap[0] = new_cap
    return 0


cdef inline bint heap_before(const HeapEntry* x, const HeapEntry* y) noexcept nogil:
    """True when x should be merged before y: higher count, then smaller (left, right)."""
    if x.count != y.count:
        return x.count > y.count
    if x.left != y.left:
        return x.left < y.left
    return x.right < y.right


# Chunk counts of the counting phase; defined here because the merger reads them.
cdef struct ChunkEntry:
    # chunks of <= 16 bytes (nearly all) live inline, zero padded, so a lookup touches
    # one cache line; longer ones keep their arena offset in w0
    uint64_t w0
    uint64_t w1
    int64_t count
    uint32_t hash      # low bits of the 64-bit hash: a cheap filter
    uint32_t len


cdef struct PendingChunk:
    const uint8_t* s
    Py_ssize_t n
    uint64_t h
    uint64_t hm        # mix64 of the low 32 bits of h: the bucket, before the mask


cdef extern from "fbe_util.h":
    void fbpe_prefetch "fbe_prefetch"(const void* p) nogil
    # s[:n] (n <= 8) as a zero-padded little-endian word, never reading past s + n:
    # what memcpy into a zeroed word gives, without the libc call and the stall of
    # reading 8 bytes back right after storing them one by one (perf: ~35% of the
    # counting loop's samples sat on that reload)
    uint64_t fbe_word(const uint8_t* p, size_t n) nogil


# Chunks queued per table before their lookups run: their hash buckets and entries are
# prefetched first, so the cache misses of a batch overlap instead of adding up.
cdef enum:
    BATCH = 32

# Prefetch distances of a merge's walk over its word list (in words): the fields of a
# word, then its ids, which need the word's wstart to be in cache already.
cdef enum:
    WORD_AHEAD = 16
    IDS_AHEAD = 8


cdef inline uint64_t hash_chunk(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    # 8 bytes at a time, then the murmur finalizer; chunks are short but many
    cdef uint64_t h = 0x9E3779B97F4A7C15ULL ^ <uint64_t>n
    cdef uint64_t w
    cdef Py_ssize_t i = 0
    while i + 8 <= n:
        memcpy(&w, s + i, 8)
        h = (h ^ w) * 0xff51afd7ed558ccdULL
        h ^= h >> 29
        i += 8
    if i < n:
        h = (h ^ fbe_word(s + i, <size_t>(n - i))) * 0xc4ceb9fe1a85ec53ULL
    return mix64(h)


cdef class _ChunkTable:
    """Chunk bytes -> int64 count.

    Dense entries (24 bytes each, in insertion order) plus an open-addressing index of
    int32 entry numbers, so empty hash slots cost 4 bytes, not a whole entry; chunk bytes
    live in one arena. Memory grows with the number of unique chunks only.
    """
    cdef ChunkEntry* entries
    cdef Py_ssize_t used, entries_cap
    cdef int32_t* index        # -1: empty
    cdef Py_ssize_t cap
    cdef uint8_t* arena
    cdef Py_ssize_t arena_n, arena_cap
    cdef PendingChunk pending[BATCH]
    cdef int n_pending
    cdef TrainTuning tuning    # the process default when made (limits of add)

    def __cinit__(self):
        self.tuning = _default_tuning
        self.n_pending = 0
        self.entries = NULL
        self.used = self.entries_cap = 0
        self.arena = NULL
        self.arena_n = self.arena_cap = 0
        self.cap = 1 << 12
        self.index = <int32_t*>fbpe_malloc(<size_t>self.cap * sizeof(int32_t))
        if self.index == NULL:
            raise MemoryError()
        memset(self.index, 0xff, <size_t>self.cap * sizeof(int32_t))

    def __dealloc__(self):
        fbpe_free(self.entries)
        fbpe_free(self.index)
        fbpe_free(self.arena)

    def __len__(self):
        return self.used

    cdef void release(self) noexcept nogil:
        """Free everything; the table is empty afterwards (and still usable)."""
        fbpe_free(self.entries); fbpe_free(self.arena)
        self.entries = NULL
        self.arena = NULL
        self.used = self.entries_cap = self.arena_n = self.arena_cap = 0
        memset(self.index, 0xff, <size_t>self.cap * sizeof(int32_t))

    cdef int rehash(self, Py_ssize_t new_cap) noexcept nogil:
        cdef Py_ssize_t i, s, mask = new_cap - 1
        cdef int32_t* fresh = <int32_t*>fbpe_malloc(<size_t>new_cap * sizeof(int32_t))
        if fresh == NULL:
            return -1
        memset(fresh, 0xff, <size_t>new_cap * sizeof(int32_t))
        for i in range(self.used):
            s = <Py_ssize_t>(mix64(self.entries[i].hash) & <uint64_t>mask)
            while fresh[s] >= 0:
                s = (s + 1) & mask
            fresh[s] = <int32_t>i
        fbpe_free(self.index)
        self.index = fresh
        self.cap = new_cap
        return 0

    cdef inline const uint8_t* key_bytes(self, const ChunkEntry* e) noexcept nogil:
        return <const uint8_t*>&e.w0 if e.len <= 16 else self.arena + e.w0

    cdef inline int add(self, const uint8_t* s, Py_ssize_t n, uint64_t h, int64_t by) noexcept nogil:
        """Add ``by`` to the count of chunk s[:n] (hash h); an ERR_* status on failure."""
        return self.add_mixed(s, n, <uint32_t>h, mix64(<uint32_t>h), by)

    cdef int add_mixed(self, const uint8_t* s, Py_ssize_t n, uint32_t h32, uint64_t hm,
                       int64_t by) noexcept nogil:
        """add() with the bucket hash hm = mix64(h32) already known (push computes it
        once for its prefetches, flush and this)."""
        cdef Py_ssize_t mask = self.cap - 1
        cdef Py_ssize_t i = <Py_ssize_t>(hm & <uint64_t>mask)
        cdef int32_t e
        cdef ChunkEntry* entry
        cdef uint64_t w[2]
        cdef bint short = n <= 16
        if short:  # the zero-padded words of the key, as a memcpy into zeros
            if n > 8:
                w[0] = fbe_word(s, 8)
                w[1] = fbe_word(s + 8, <size_t>(n - 8))
            else:
                w[0] = fbe_word(s, <size_t>n) if n > 0 else 0
                w[1] = 0
        while True:
            e = self.index[i]
            if e < 0:
                break
            entry = &self.entries[e]
            if entry.hash == h32 and entry.len == n:
                if short:
                    if entry.w0 == w[0] and entry.w1 == w[1]:
                        entry.count += by
                        return 0
                elif memcmp(self.arena + entry.w0, s, <size_t>n) == 0:
                    entry.count += by
                    return 0
            i = (i + 1) & mask
        if n > self.tuning.max_chunk_bytes:
            return ERR_CHUNK_LEN
        if self.used >= self.tuning.max_chunks:
            return ERR_CHUNKS
        if grow(<void**>&self.entries, &self.entries_cap, self.used + 1, sizeof(ChunkEntry)) < 0:
            return -1
        entry = &self.entries[self.used]
        if short:
            entry.w0 = w[0]
            entry.w1 = w[1]
        else:
            if grow(<void**>&self.arena, &self.arena_cap, self.arena_n + n, 1) < 0:
                return -1
            memcpy(self.arena + self.arena_n, s, <size_t>n)
            entry.w0 = <uint64_t>self.arena_n
            entry.w1 = 0
            self.arena_n += n
        entry.hash = h32
        entry.len = <uint32_t>n
        entry.count = by
        self.index[i] = <int32_t>self.used
        self.used += 1
        if self.used * 2 > self.cap:
            return self.rehash(self.cap * 2)
        return 0

    cdef inline int push(self, const uint8_t* s, Py_ssize_t n) noexcept nogil:
        """Queue chunk s[:n] for counting (once); s must stay valid until flush()."""
        cdef uint64_t h = hash_chunk(s, n)
        cdef PendingChunk* c = &self.pending[self.n_pending]
        c.s = s
        c.n = n
        c.h = h
        c.hm = mix64(<uint32_t>h)
        fbpe_prefetch(&self.index[<Py_ssize_t>(c.hm & <uint64_t>(self.cap - 1))])
        self.n_pending += 1
        if self.n_pending == BATCH:
            return self.flush()
        return 0

    cdef int flush(self) noexcept nogil:
        cdef int k, status, n = self.n_pending
        cdef int32_t e
        self.n_pending = 0
        for k in range(n):
            e = self.index[<Py_ssize_t>(self.pending[k].hm & <uint64_t>(self.cap - 1))]
            if e >= 0:
                fbpe_prefetch(&self.entries[e])
        for k in range(n):
            status = self.add_mixed(self.pending[k].s, self.pending[k].n, <uint32_t>self.pending[k].h,
                                    self.pending[k].hm, 1)
            if status < 0:
                return status
        return 0

    cdef int merge_from(self, _ChunkTable other) noexcept nogil:
        cdef Py_ssize_t i
        cdef ChunkEntry* e
        cdef int status
        for i in range(other.used):
            e = &other.entries[i]
            # the stored hash is 32-bit; add() only uses those bits
            status = self.add(other.key_bytes(e), e.len, e.hash, e.count)
            if status < 0:
                return status
        return 0

    def to_dict(self):
        """The counts as a dict bytes -> int."""
        cdef Py_ssize_t i
        cdef dict out = {}
        for i in range(self.used):
            out[PyBytes_FromStringAndSize(<const char*>self.key_bytes(&self.entries[i]),
                                          self.entries[i].len)] = self.entries[i].count
        return out


cdef class _Merger:
    """All state of one training run; every buffer is malloc'd and freed in __dealloc__."""
    # words (unique chunks of >= 2 bytes): ids in one flat buffer
    cdef void* tokens             # uint16 ids while n_tokens <= 65536 (half the memory), else int32
    cdef bint wide
    cdef int64_t* wstart
    cdef int32_t* wlen
    cdef int64_t* wcount
    cdef int32_t* wstamp          # merge number that last rewrote the word (dedup of lists)
    cdef Py_ssize_t n_words
    # pair map: key -> pair slot, open addressing with linear probing
    cdef MapEntry* map_vals       # slot -1 = empty
    cdef Py_ssize_t map_cap
    # pair slots
    cdef uint64_t* p_key          # pair_key(left, right): the map compares these
    cdef int64_t* p_count
    cdef int32_t* p_stamp         # merge number that last increased the count
    cdef IdList* p_words
    # all word lists live in one pool (no malloc per pair); a list that outgrows its
    # room moves to the end, and the pool is compacted when a third of it is abandoned
    cdef int32_t* pool
    cdef Py_ssize_t pool_n, pool_cap, pool_waste
    cdef int32_t merging        # pair slot being merged: its list must stay put
    # slots of pairs whose count fell to 0 (deleted from the map), reused by new pairs:
    # about half of all pairs ever seen are dead by the end of a run
    cdef int32_t* free_slots
    cdef Py_ssize_t n_free, free_cap
    cdef Py_ssize_t n_pairs, pairs_cap
    # pairs whose count grew during the current merge (pushed at its end)
    cdef int32_t* touched
    cdef Py_ssize_t n_touched, touched_cap
    # max-heap
    cdef HeapEntry* heap
    cdef Py_ssize_t heap_n, heap_cap
    # vocabulary: token bytes in one flat buffer, and bytes -> id for reuse
    cdef uint8_t* tok_bytes
    cdef Py_ssize_t tok_bytes_n, tok_bytes_cap
    cdef int64_t* tok_off
    cdef int32_t* tok_len
    cdef int32_t n_vocab, n_tokens
    # room for tokens: n_tokens, or fewer when the corpus can't make that many (a merge
    # shortens a word by >= 1, so there are at most sum(len(word) - 1) merges)
    cdef int32_t vocab_cap
    cdef int32_t* vmap
    cdef uint64_t* vmap_hash
    cdef Py_ssize_t vmap_cap
    # merges done
    cdef int32_t* m_left
    cdef int32_t* m_right
    cdef Py_ssize_t n_merges, merges_cap
    # options
    cdef int64_t threshold
    cdef int64_t max_len         # 0: no limit
    cdef TrainTuning tuning      # the process default when made: limits, housekeeping

    def __cinit__(self):
        self.tuning = _default_tuning
        self.pool_n = self.pool_cap = self.pool_waste = 0
        self.merging = -1
        self.n_free = self.free_cap = 0
        self.map_cap = 0
        self.n_pairs = self.pairs_cap = 0
        self.n_touched = self.touched_cap = 0
        self.heap_n = self.heap_cap = 0
        self.tok_bytes_n = self.tok_bytes_cap = 0
        self.n_merges = self.merges_cap = 0
        self.n_words = 0
        self.n_tokens = self.vocab_cap = 256

    def __dealloc__(self):
        cdef Py_ssize_t i
        fbpe_free(self.pool); fbpe_free(self.free_slots)
        fbpe_free(self.tokens); fbpe_free(self.wstart); fbpe_free(self.wlen); fbpe_free(self.wcount)
        fbpe_free(self.wstamp); fbpe_free(self.map_vals)
        fbpe_free(self.p_key); fbpe_free(self.p_count); fbpe_free(self.p_stamp)
        fbpe_free(self.p_words); fbpe_free(self.touched); fbpe_free(self.heap); fbpe_free(self.tok_bytes)
        fbpe_free(self.tok_off); fbpe_free(self.tok_len); fbpe_free(self.vmap); fbpe_free(self.vmap_hash)
        fbpe_free(self.m_left); fbpe_free(self.m_right)

    # ------------------------------------------------------------------ pair map
    cdef int map_rehash(self, Py_ssize_t new_cap) noexcept nogil:
        # the map holds only slot numbers (4 bytes per bucket); keys are read from p_key
        cdef MapEntry* vals = <MapEntry*>fbpe_malloc(<size_t>new_cap * sizeof(MapEntry))
        cdef Py_ssize_t i, s, mask = new_cap - 1
        if vals == NULL:
            return -1
        memset(vals, 0xff, <size_t>new_cap * sizeof(MapEntry))
        for i in range(self.n_pairs):
            if self.p_key[i] == DEAD_KEY:
                continue
            s = <Py_ssize_t>(mix64(self.p_key[i]) & <uint64_t>mask)
            while vals[s].slot >= 0:
                s = (s + 1) & mask
            vals[s].key = self.p_key[i]
            vals[s].slot = <int32_t>i
        fbpe_free(self.map_vals)
        self.map_vals = vals
        self.map_cap = new_cap
        return 0

    cdef inline int32_t pair_find(self, int32_t left, int32_t right) noexcept nogil:
        cdef uint64_t key = pair_key(left, right)
        cdef Py_ssize_t mask = self.map_cap - 1
        cdef Py_ssize_t s = <Py_ssize_t>(mix64(key) & <uint64_t>mask)
        cdef MapEntry* m
        while True:
            m = &self.map_vals[s]
            if m.slot < 0 or m.key == key:
                return m.slot
            s = (s + 1) & mask

    cdef int32_t pair_get_or_add(self, int32_t left, int32_t right) noexcept nogil:
        """Slot of the pair, created with count 0 if new; an ERR_* status on failure."""
        cdef uint64_t key = pair_key(left, right)
        cdef Py_ssize_t mask = self.map_cap - 1
        cdef Py_ssize_t s = <Py_ssize_t>(mix64(key) & <uint64_t>mask)
        cdef int32_t v
        cdef MapEntry* m
        while True:
            m = &self.map_vals[s]
            if m.slot < 0:
                break
            if m.key == key:
                return m.slot
            s = (s + 1) & mask
        if self.n_free > 0:
            self.n_free -= 1
            v = self.free_slots[self.n_free]
        else:
            v = self.new_slot()
            if v < 0:
                return v
        self.p_key[v] = key
        self.p_count[v] = 0
        self.p_stamp[v] = -1
        self.p_words[v].off = 0
        self.p_words[v].n = 0
        self.p_words[v].cap = 0
        self.map_vals[s].key = key
        self.map_vals[s].slot = v
        if (self.n_pairs - self.n_free) * 4 > self.map_cap * 3:
            if self.map_rehash(self.map_cap * 2) < 0:
                return ERR_OOM
        return v

    cdef int32_t new_slot(self) noexcept nogil:
        """A fresh slot at the end of the slot arrays (all share pairs_cap)."""
        cdef Py_ssize_t cap
        cdef int32_t v
        if self.n_pairs >= self.tuning.max_pairs:
            return ERR_PAIRS
        if self.n_pairs + 1 > self.pairs_cap:
            cap = self.pairs_cap
            if grow(<void**>&self.p_key, &cap, self.n_pairs + 1, sizeof(uint64_t)) < 0:
                return -1
            cap = self.pairs_cap
            if grow(<void**>&self.p_count, &cap, self.n_pairs + 1, sizeof(int64_t)) < 0:
                return -1
            cap = self.pairs_cap
            if grow(<void**>&self.p_stamp, &cap, self.n_pairs + 1, sizeof(int32_t)) < 0:
                return -1
            cap = self.pairs_cap
            if grow(<void**>&self.p_words, &cap, self.n_pairs + 1, sizeof(IdList)) < 0:
                return -1
            self.pairs_cap = cap
        v = <int32_t>self.n_pairs
        self.n_pairs += 1
        return v

    cdef int pair_delete(self, int32_t v) noexcept nogil:
        """Remove a dead pair (count 0) from the map and recycle its slot.

        Linear probing with backward-shift deletion: later entries of the probe run
        move into the hole unless their home bucket lies cyclically in (hole, entry].
        """
        cdef Py_ssize_t mask = self.map_cap - 1
        cdef Py_ssize_t i = <Py_ssize_t>(mix64(self.p_key[v]) & <uint64_t>mask), j, home
        while self.map_vals[i].slot != v:
            i = (i + 1) & mask
        j = i
        while True:
            j = (j + 1) & mask
            if self.map_vals[j].slot < 0:
                break
            home = <Py_ssize_t>(mix64(self.map_vals[j].key) & <uint64_t>mask)
            if (i < home <= j) if i <= j else (home > i or home <= j):
                continue
            self.map_vals[i] = self.map_vals[j]
            i = j
        self.map_vals[i].slot = -1
        self.list_free(v)
        self.p_key[v] = DEAD_KEY
        self.p_count[v] = 0
        if grow(<void**>&self.free_slots, &self.free_cap, self.n_free + 1, sizeof(int32_t)) < 0:
            return -1
        self.free_slots[self.n_free] = v
        self.n_free += 1
        return 0

    cdef inline int list_add(self, int32_t p, int32_t word) noexcept nogil:
        cdef IdList* lst = &self.p_words[p]
        cdef Py_ssize_t new_cap
        if lst.n > 0 and self.pool[lst.off + lst.n - 1] == word:
            return 0
        if lst.n == lst.cap:
            new_cap = 2 * lst.cap if lst.cap > 0 else 2
            if self.pool_n + new_cap > self.tuning.max_pool:
                return ERR_POOL  # offsets are 32-bit: 16 GB of word lists
            if grow(<void**>&self.pool, &self.pool_cap, self.pool_n + new_cap, sizeof(int32_t)) < 0:
                return -1
            if lst.n > 0:
                memcpy(self.pool + self.pool_n, self.pool + lst.off, <size_t>lst.n * sizeof(int32_t))
            self.pool_waste += lst.cap
            lst.off = <uint32_t>self.pool_n
            lst.cap = <int32_t>new_cap
            self.pool_n += new_cap
        self.pool[lst.off + lst.n] = word
        lst.n += 1
        return 0

    cdef inline void list_free(self, int32_t p) noexcept nogil:
        self.pool_waste += self.p_words[p].cap
        self.p_words[p].n = 0
        self.p_words[p].cap = 0

    cdef int pool_compact(self) noexcept nogil:
        """Slide the live lists down to the start of the pool, in place, in order of
        their offsets (each move goes to a lower address), then give back the tail.
        Not while a list is being iterated."""
        cdef Py_ssize_t i, n_lists = 0, pos = 0
        cdef uint64_t* order
        cdef int32_t p
        cdef void* shrunk
        for i in range(self.n_pairs):
            if self.p_words[i].n > 0:
                n_lists += 1
        order = <uint64_t*>fbpe_malloc(<size_t>(n_lists + 1) * sizeof(uint64_t))
        if order == NULL:
            return -1
        n_lists = 0
        for i in range(self.n_pairs):
            if self.p_words[i].n > 0:
                order[n_lists] = ((<uint64_t>self.p_words[i].off) << 32) | <uint64_t>i
                n_lists += 1
            else:
                self.p_words[i].cap = 0
        qsort(order, <size_t>n_lists, sizeof(uint64_t), cmp_uint64)
        for i in range(n_lists):
            p = <int32_t>(order[i] & 0xFFFFFFFFU)
            memmove(self.pool + pos, self.pool + self.p_words[p].off,
                    <size_t>self.p_words[p].n * sizeof(int32_t))
            self.p_words[p].off = <uint32_t>pos
            self.p_words[p].cap = self.p_words[p].n
            pos += self.p_words[p].n
        fbpe_free(order)
        self.pool_n = pos
        self.pool_waste = 0
        if pos + (pos >> 2) + 16 < self.pool_cap:
            shrunk = fbpe_realloc(self.pool, <size_t>(pos + (pos >> 2) + 16) * sizeof(int32_t))
            if shrunk != NULL:
                self.pool = <int32_t*>shrunk
                self.pool_cap = pos + (pos >> 2) + 16
        return 0

    # ------------------------------------------------------------------ heap
    cdef int heap_push(self, int64_t count, int32_t left, int32_t right) noexcept nogil:
        cdef Py_ssize_t i, parent
        cdef HeapEntry e
        if grow(<void**>&self.heap, &self.heap_cap, self.heap_n + 1, sizeof(HeapEntry)) < 0:
            return -1
        e.count = count
        e.left = left
        e.right = right
        i = self.heap_n
        self.heap_n += 1
        while i > 0:
            parent = (i - 1) >> 1
            if not heap_before(&e, &self.heap[parent]):
                break
            self.heap[i] = self.heap[parent]
            i = parent
        self.heap[i] = e
        return 0

    cdef void heap_sift_down(self, Py_ssize_t i) noexcept nogil:
        cdef HeapEntry e = self.heap[i]
        cdef Py_ssize_t n = self.heap_n, child
        while True:
            child = 2 * i + 1
            if child >= n:
                break
            if child + 1 < n and heap_before(&self.heap[child + 1], &self.heap[child]):
                child += 1
            if not heap_before(&self.heap[child], &e):
                break
            self.heap[i] = self.heap[child]
            i = child
        self.heap[i] = e

    cdef HeapEntry heap_pop(self) noexcept nogil:
        cdef HeapEntry top = self.heap[0]
        self.heap_n -= 1
        if self.heap_n > 0:
            self.heap[0] = self.heap[self.heap_n]
            self.heap_sift_down(0)
        return top

    # ------------------------------------------------------------------ vocabulary
    cdef int32_t vocab_find_or_add(self, int32_t left, int32_t right) noexcept nogil:
        """Id of bytes(left) + bytes(right): the existing one, or the next new id."""
        cdef Py_ssize_t n = <Py_ssize_t>self.tok_len[left] + self.tok_len[right]
        cdef Py_ssize_t mask = self.vmap_cap - 1, s
        cdef uint8_t* dst
        cdef uint64_t h
        cdef int32_t v
        if grow(<void**>&self.tok_bytes, &self.tok_bytes_cap, self.tok_bytes_n + n, 1) < 0:
            return -1
        dst = self.tok_bytes + self.tok_bytes_n
        memcpy(dst, self.tok_bytes + self.tok_off[left], <size_t>self.tok_len[left])
        memcpy(dst + self.tok_len[left], self.tok_bytes + self.tok_off[right], <size_t>self.tok_len[right])
        h = hash_bytes(dst, n)
        s = <Py_ssize_t>(h & <uint64_t>mask)
        while True:
            v = self.vmap[s]
            if v < 0:
                break
            if (self.vmap_hash[s] == h and self.tok_len[v] == n
                    and memcmp(self.tok_bytes + self.tok_off[v], dst, <size_t>n) == 0):
                return v   # the bytes already are a token: reuse its id
            s = (s + 1) & mask
        v = self.n_vocab
        if v >= self.vocab_cap:
            return ERR_OOM  # never: vocab_cap bounds the merges (see its comment)
        self.tok_off[v] = self.tok_bytes_n
        self.tok_len[v] = <int32_t>n
        self.tok_bytes_n += n
        self.vmap[s] = v
        self.vmap_hash[s] = h
        self.n_vocab += 1
        return v

    # ------------------------------------------------------------------ merging
    cdef inline int pair_inc(self, int32_t left, int32_t right, int32_t word, int64_t by,
                             int32_t stamp) noexcept nogil:
        cdef int32_t p = self.pair_get_or_add(left, right)
        cdef int status
        if p < 0:
            return p
        self.p_count[p] += by
        status = self.list_add(p, word)
        if status < 0:
            return status
        if self.p_stamp[p] != stamp:
            self.p_stamp[p] = stamp
            if grow(<void**>&self.touched, &self.touched_cap, self.n_touched + 1, sizeof(int32_t)) < 0:
                return -1
            self.touched[self.n_touched] = p
            self.n_touched += 1
        return 0

    cdef inline int pair_dec(self, int32_t left, int32_t right, int64_t by) noexcept nogil:
        # every destroyed pair was counted before, so it is in the map
        cdef int32_t p = self.pair_find(left, right)
        self.p_count[p] -= by
        if self.p_count[p] == 0 and p != self.merging:
            # no word holds the pair any more: drop it (heap entries for it go stale)
            return self.pair_delete(p)
        return 0

    cdef inline void prefetch_word(self, int32_t w) noexcept nogil:
        fbpe_prefetch(&self.wstamp[w])
        fbpe_prefetch(&self.wstart[w])
        fbpe_prefetch(&self.wlen[w])
        fbpe_prefetch(&self.wcount[w])

    cdef int run(self, Py_ssize_t max_merges) noexcept nogil:
        """Do up to max_merges merges; return a RUN_* status."""
        cdef Py_ssize_t done = 0, k, n
        cdef HeapEntry top
        cdef int32_t p, a, b, c, w, q, stamp
        cdef int status
        cdef int64_t live
        cdef int64_t words_off
        cdef bint found
        while done < max_merges:
            if self.n_vocab >= self.n_tokens:
                return RUN_FULL
            found = False
            while self.heap_n > 0:
                top = self.heap_pop()
                p = self.pair_find(top.left, top.right)
                if p < 0:
                    continue  # the pair died since this entry was pushed
                live = self.p_count[p]
                if live != top.count:
                    # stale: a smaller live count gets its own entry again; a larger
                    # one already has an entry (pushed when it grew)
                    if 0 < live < top.count:
                        if self.heap_push(live, top.left, top.right) < 0:
                            return ERR_OOM
                    continue
                if self.max_len > 0 and <int64_t>self.tok_len[top.left] + self.tok_len[top.right] > self.max_len:
                    continue  # never eligible: token lengths never change
                found = True
                break
            if not found:
                return RUN_NO_PAIR
            if live < self.threshold:
                return RUN_BELOW_MIN
            a = top.left
            b = top.right
            c = self.vocab_find_or_add(a, b)
            if c < 0:
                return c
            if self.n_merges + 1 > self.merges_cap:
                # m_left and m_right share merges_cap: grow both from the same value
                k = self.merges_cap
                if grow(<void**>&self.m_left, &k, self.n_merges + 1, sizeof(int32_t)) < 0:
                    return ERR_OOM
                k = self.merges_cap
                if grow(<void**>&self.m_right, &k, self.n_merges + 1, sizeof(int32_t)) < 0:
                    return ERR_OOM
                self.merges_cap = k
            self.m_left[self.n_merges] = a
            self.m_right[self.n_merges] = b
            stamp = <int32_t>self.n_merges
            self.n_merges += 1
            # rewrite the words that held the pair; the list of p never grows meanwhile
            # (created pairs contain c, and c differs from a and b)
            # index, not pointer: appends to other lists may move the pool
            words_off = self.p_words[p].off
            n = self.p_words[p].n
            self.merging = p
            self.n_touched = 0
            for k in range(n):
                # the listed words lie anywhere in tens of MB: fetch each one's fields
                # WORD_AHEAD words ahead and its ids IDS_AHEAD ahead (that needs the
                # fetched wstart), so the misses overlap instead of adding up
                if k + WORD_AHEAD < n:
                    self.prefetch_word(self.pool[words_off + k + WORD_AHEAD])
                if k + IDS_AHEAD < n:
                    q = self.pool[words_off + k + IDS_AHEAD]
                    fbpe_prefetch(<char*>self.tokens + self.wstart[q] * (4 if self.wide else 2))
                w = self.pool[words_off + k]
                if self.wstamp[w] == stamp:
                    continue
                self.wstamp[w] = stamp
                if self.wide:
                    status = merge_word(self, <int32_t*>self.tokens, w, a, b, c, stamp)
                else:
                    status = merge_word(self, <uint16_t*>self.tokens, w, a, b, c, stamp)
                if status < 0:
                    return status
            # no (a, b) is left anywhere after a leftmost merge
            self.p_count[p] = 0
            self.merging = -1
            if self.pair_delete(p) < 0:
                return ERR_OOM
            if self.pool_waste > self.tuning.pool_min_waste and 3 * self.pool_waste > self.pool_n:
                if self.pool_compact() < 0:
                    return ERR_OOM
            for k in range(self.n_touched):
                q = self.touched[k]
                if self.p_count[q] > 0:
                    if self.heap_push(self.p_count[q], <int32_t>(self.p_key[q] >> 32),
                                      <int32_t>(self.p_key[q] & 0xFFFFFFFFU)) < 0:
                        return ERR_OOM
            if self.heap_n > 2 * (self.n_pairs - self.n_free) + self.tuning.heap_slack:
                self.heap_rebuild()
            done += 1
        return RUN_MORE

    cdef void heap_rebuild(self) noexcept nogil:
        """One entry per live pair, with its live count: drops the stale entries."""
        cdef Py_ssize_t i
        self.heap_n = 0
        for i in range(self.n_pairs):
            if self.p_count[i] > 0:   # the heap holds at least this many entries
                self.heap[self.heap_n].count = self.p_count[i]
                self.heap[self.heap_n].left = <int32_t>(self.p_key[i] >> 32)
                self.heap[self.heap_n].right = <int32_t>(self.p_key[i] & 0xFFFFFFFFU)
                self.heap_n += 1
        i = self.heap_n // 2 - 1
        while i >= 0:
            self.heap_sift_down(i)
            i -= 1

    # ------------------------------------------------------------------ setup
    cdef int setup(self, int32_t n_tokens) noexcept nogil:
        """Byte tokens, vocabulary map, pair counts of every word, and the heap."""
        cdef Py_ssize_t i, k, s, cap, total
        cdef int32_t p, w
        cdef int status
        cdef int32_t* ids
        cdef uint8_t byte
        self.n_tokens = n_tokens
        self.tok_off = <int64_t*>fbpe_malloc(<size_t>self.vocab_cap * sizeof(int64_t))
        self.tok_len = <int32_t*>fbpe_malloc(<size_t>self.vocab_cap * sizeof(int32_t))
        cap = 1
        while cap < 2 * <Py_ssize_t>self.vocab_cap:
            cap *= 2
        self.vmap_cap = cap
        self.vmap = <int32_t*>fbpe_malloc(<size_t>cap * sizeof(int32_t))
        self.vmap_hash = <uint64_t*>fbpe_malloc(<size_t>cap * sizeof(uint64_t))
        if self.tok_off == NULL or self.tok_len == NULL or self.vmap == NULL or self.vmap_hash == NULL:
            return -1
        memset(self.vmap, 0xff, <size_t>cap * sizeof(int32_t))
        if grow(<void**>&self.tok_bytes, &self.tok_bytes_cap, 256 * 8, 1) < 0:
            return -1
        # the 256 byte tokens, inserted directly
        for i in range(256):
            self.tok_bytes[i] = <uint8_t>i
            self.tok_off[i] = i
            self.tok_len[i] = 1
            byte = <uint8_t>i
            s = <Py_ssize_t>(hash_bytes(&byte, 1) & <uint64_t>(cap - 1))
            while self.vmap[s] >= 0:
                s = (s + 1) & (cap - 1)
            self.vmap[s] = <int32_t>i
            self.vmap_hash[s] = hash_bytes(&byte, 1)
        self.tok_bytes_n = 256
        self.n_vocab = 256
        # pair map sized for a guess, grown as needed
        if self.map_rehash(1 << 16) < 0:
            return -1
        if self.wide:
            status = count_initial_pairs(self, <int32_t*>self.tokens)
        else:
            status = count_initial_pairs(self, <uint16_t*>self.tokens)
        if status < 0:
            return status
        # pass 2: the word lists, packed exactly in the pool
        total = 0
        for i in range(self.n_pairs):
            self.p_words[i].off = <uint32_t>total
            total += self.p_words[i].cap
            self.p_stamp[i] = -1
        if total > self.tuning.max_pool:
            return ERR_POOL
        if grow(<void**>&self.pool, &self.pool_cap, total + 16, sizeof(int32_t)) < 0:
            return -1
        self.pool_n = total
        if self.wide:
            status = fill_initial_lists(self, <int32_t*>self.tokens)
        else:
            status = fill_initial_lists(self, <uint16_t*>self.tokens)
        if status < 0:
            return status
        # heap of all pairs: fill then heapify bottom-up
        if grow(<void**>&self.heap, &self.heap_cap, self.n_pairs + 1, sizeof(HeapEntry)) < 0:
            return -1
        self.heap_rebuild()
        return 0

    cdef alloc_words(self, Py_ssize_t n_words, Py_ssize_t total):
        """Room for n_words words of total ids; sizes the vocabulary by the corpus."""
        if n_words > self.tuning.max_chunks:
            raise status_error(ERR_CHUNKS, f"the corpus has {n_words:,} unique chunks", &self.tuning)
        # the bound of vocab_cap's comment: a vocabulary of 10**8 asked of a small corpus
        # costs what the corpus can make, not 10**8 slots
        self.vocab_cap = <int32_t>min(<Py_ssize_t>self.n_tokens, 256 + total - n_words)
        self.wide = self.vocab_cap > 65536   # ids stay below vocab_cap
        self.tokens = fbpe_malloc(<size_t>max(total, 1) * (sizeof(int32_t) if self.wide else sizeof(uint16_t)))
        self.wstart = <int64_t*>fbpe_malloc(<size_t>max(n_words, 1) * sizeof(int64_t))
        self.wlen = <int32_t*>fbpe_malloc(<size_t>max(n_words, 1) * sizeof(int32_t))
        self.wcount = <int64_t*>fbpe_malloc(<size_t>max(n_words, 1) * sizeof(int64_t))
        self.wstamp = <int32_t*>fbpe_malloc(<size_t>max(n_words, 1) * sizeof(int32_t))
        if (self.tokens == NULL or self.wstart == NULL or self.wlen == NULL
                or self.wcount == NULL or self.wstamp == NULL):
            raise MemoryError("out of memory while loading the chunks")

    cdef load_words(self, chunk_counts):
        """Copy the chunks of >= 2 bytes with a positive count into the flat buffers."""
        cdef Py_ssize_t n_words = 0, total = 0, n
        for chunk, cnt in chunk_counts.items():
            if not isinstance(chunk, bytes):
                raise TypeError(f"chunk_counts keys must be bytes, not {type(chunk).__name__} ({chunk!r})")
            if not isinstance(cnt, int):
                raise TypeError(f"chunk_counts[{chunk!r}] must be an int, not {type(cnt).__name__}")
            if cnt < 0:
                raise ValueError(f"chunk_counts[{chunk!r}] = {cnt} is negative")
            if len(<bytes>chunk) >= 2 and cnt > 0:
                if len(<bytes>chunk) > self.tuning.max_chunk_bytes:
                    raise status_error(ERR_CHUNK_LEN, f"chunk_counts holds a chunk of {len(<bytes>chunk):,} bytes",
                                  &self.tuning)
                n_words += 1
                total += len(<bytes>chunk)
        self.alloc_words(n_words, total)
        cdef Py_ssize_t w = 0, pos = 0
        for chunk, cnt in chunk_counts.items():
            n = len(<bytes>chunk)
            if n < 2 or cnt <= 0:
                continue
            self.put_word(w, pos, <const unsigned char*>(<bytes>chunk), n,
                          <int64_t>cnt)   # OverflowError beyond 2**63 - 1
            pos += n
            w += 1
        self.n_words = n_words

    cdef inline void put_word(self, Py_ssize_t w, Py_ssize_t pos, const uint8_t* s,
                              Py_ssize_t n, int64_t count) noexcept nogil:
        """Word w: the n bytes at s as its first tokens, at pos of the token buffer."""
        cdef Py_ssize_t k
        self.wstart[w] = pos
        self.wlen[w] = <int32_t>n
        self.wcount[w] = count
        self.wstamp[w] = -1
        if self.wide:
            for k in range(n):
                (<int32_t*>self.tokens)[pos + k] = s[k]
        else:
            for k in range(n):
                (<uint16_t*>self.tokens)[pos + k] = s[k]

    cdef load_table(self, _ChunkTable table, bint consume):
        """Copy the chunks of a counting table (no Python objects per chunk)."""
        cdef Py_ssize_t i, n, w = 0, pos = 0, n_words = 0, total = 0
        cdef ChunkEntry* e
        for i in range(table.used):
            if table.entries[i].count > 0 and table.entries[i].len >= 2:
                if table.entries[i].len > self.tuning.max_chunk_bytes:
                    raise status_error(ERR_CHUNK_LEN, f"the counted chunks hold one of {table.entries[i].len:,} bytes",
                                  &self.tuning)
                n_words += 1
                total += table.entries[i].len
        self.alloc_words(n_words, total)
        with nogil:
            for i in range(table.used):
                e = &table.entries[i]
                n = e.len
                if e.count <= 0 or n < 2:
                    continue
                self.put_word(w, pos, table.key_bytes(e), n, e.count)
                pos += n
                w += 1
            if consume:
                table.release()
                fbpe_trim_memory()
        self.n_words = n_words

    def stats(self):
        """Sizes of the internal tables (for benchmarks and memory tuning)."""
        cdef Py_ssize_t i, list_cap = 0
        for i in range(self.n_pairs):
            list_cap += self.p_words[i].cap
        list_cap = self.pool_cap
        live = 0
        for i in range(self.n_pairs):
            live += self.p_count[i] > 0
        return {"words": self.n_words, "pairs": self.n_pairs, "vocab_cap": self.vocab_cap,
                "wide": bool(self.wide), "map_cap": self.map_cap,
                "heap_n": self.heap_n, "heap_cap": self.heap_cap, "list_cap": list_cap,
                "pairs_cap": self.pairs_cap, "live_pairs": live, "pool_n": self.pool_n, "pool_waste": self.pool_waste,
                "bytes": (self.pairs_cap * (8 + 8 + 4 + sizeof(IdList)) + self.map_cap * sizeof(MapEntry)
                          + self.heap_cap * sizeof(HeapEntry) + self.pool_cap * 4
                          + self.n_words * 24 + (self.wstart[self.n_words - 1] + self.wlen[self.n_words - 1] if self.n_words else 0) * 4),
                "tokens": int(self.wstart[self.n_words - 1] + self.wlen[self.n_words - 1]) if self.n_words else 0}

    def results(self):
        merges = [(self.m_left[i], self.m_right[i]) for i in range(self.n_merges)]
        vocab = [PyBytes_FromStringAndSize(<char*>self.tok_bytes + self.tok_off[i], self.tok_len[i])
                 for i in range(self.n_vocab)]
        return merges, vocab


ctypedef fused tok_t:
    uint16_t
    int32_t


cdef int merge_word(_Merger self, tok_t* tokens, int32_t w, int32_t a, int32_t b, int32_t c,
                    int32_t stamp) noexcept nogil:
    """Merge (a, b) -> c in word w, in place, and apply the pair-count deltas.

    Destroyed pairs are those of the old sequence that touch a merged position; an
    occurrence at i destroys (i-1, i) unless the previous occurrence ended at i-1
    (then (i-1, i) was already destroyed as that occurrence's right neighbour),
    (i, i+1) = (a, b) itself (zeroed in bulk by the caller) and (i+1, i+2). Created
    pairs are those of the new sequence with a new c on either side. This equals
    recounting the word from scratch, overlapping runs like "aaaa" included.
    """
    cdef tok_t* ids = tokens + self.wstart[w]
    cdef Py_ssize_t n = self.wlen[w]
    cdef int64_t wc = self.wcount[w]
    cdef Py_ssize_t i = 0, j = 0, last_end = -2
    cdef bint prev_new = False, cur_new
    cdef int status
    while i < n:
        if i + 1 < n and ids[i] == a and ids[i + 1] == b:
            # ids[i-1] and ids[i+2] are still the original values: writes go to
            # indices < j <= i, and index i-1 is rewritten only with its own value
            if i > 0 and last_end != i - 1:
                if self.pair_dec(ids[i - 1], a, wc) < 0:
                    return ERR_OOM
            if i + 2 < n:
                if self.pair_dec(b, ids[i + 2], wc) < 0:
                    return ERR_OOM
            ids[j] = <tok_t>c
            cur_new = True
            last_end = i + 1
            i += 2
        else:
            ids[j] = ids[i]
            cur_new = False
            i += 1
        if j > 0 and (prev_new or cur_new):
            status = self.pair_inc(ids[j - 1], ids[j], w, wc, stamp)
            if status < 0:
                return status
        prev_new = cur_new
        j += 1
    self.wlen[w] = <int32_t>j
    return 0


cdef int count_initial_pairs(_Merger self, tok_t* tokens) noexcept nogil:
    """Setup pass 1: pair counts, and how many words hold each pair (p_stamp = last word)."""
    cdef int32_t w, p
    cdef Py_ssize_t k
    cdef tok_t* ids
    for w in range(<int32_t>self.n_words):
        ids = tokens + self.wstart[w]
        for k in range(self.wlen[w] - 1):
            p = self.pair_get_or_add(ids[k], ids[k + 1])
            if p < 0:
                return p
            self.p_count[p] += self.wcount[w]
            if self.p_stamp[p] != w:
                self.p_stamp[p] = w
                self.p_words[p].cap += 1
    return 0


cdef int fill_initial_lists(_Merger self, tok_t* tokens) noexcept nogil:
    """Setup pass 2: the word lists, into the room pass 1 counted."""
    cdef int32_t w, p
    cdef Py_ssize_t k
    cdef tok_t* ids
    cdef int status
    for w in range(<int32_t>self.n_words):
        ids = tokens + self.wstart[w]
        for k in range(self.wlen[w] - 1):
            p = self.pair_find(ids[k], ids[k + 1])
            status = self.list_add(p, w)
            if status < 0:
                return status
    return 0


#: Merges done per nogil run between two progress callbacks.
PROGRESS_EVERY = 128


def train_merges(chunk_counts, n_tokens, *, min_frequency=0, max_token_length=None,
                 progress=None, consume=False, _stats=None):
    """Learn merges until the vocabulary holds ``n_tokens`` tokens (bytes included).

    Native twin of ``fastbpe.reference.bpe.train_on_chunks``: returns ``(merges, vocab)``
    where ``merges[i]`` is the pair merged at step ``i`` and ``vocab[id]`` the bytes of
    each token. ``progress`` is None, a callable called with the number of merges done,
    or a tqdm-like object whose ``update(n)`` is called; both every few merges.
    ``chunk_counts`` may also be the table of ``count_chunk_table``; with
    ``consume=True`` its memory is freed as soon as it is loaded (it is empty after).

    >>> train_merges({b"aaabdaaabac": 1}, 259)[0]
    [(97, 97), (97, 98), (256, 257)]
    """
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, int):
        raise TypeError(f"n_tokens must be an int, not {type(n_tokens).__name__}")
    if n_tokens > 2**31 - 1:
        raise ValueError(f"n_tokens={n_tokens} is too large")
    if isinstance(min_frequency, bool) or not isinstance(min_frequency, int):
        raise TypeError(f"min_frequency must be an int, not {type(min_frequency).__name__}")
    if max_token_length is not None and (
        isinstance(max_token_length, bool) or not isinstance(max_token_length, int)
    ):
        raise TypeError(f"max_token_length must be an int or None, not {type(max_token_length).__name__}")
    if max_token_length is not None and max_token_length < 1:
        raise ValueError(f"max_token_length={max_token_length} must be at least 1")
    cdef _Merger m = _Merger()
    cdef int32_t n_tok = <int32_t>max(n_tokens, 256)
    m.n_tokens = n_tok   # load_* sizes the buffers by it and by the corpus
    if isinstance(chunk_counts, _ChunkTable):
        m.load_table(<_ChunkTable>chunk_counts, consume)
    elif hasattr(chunk_counts, "items"):
        m.load_words(chunk_counts)
    else:
        raise TypeError(f"chunk_counts must be a mapping bytes -> int, not {type(chunk_counts).__name__}")
    m.threshold = max(min(min_frequency, 2**63 - 1), 1)
    m.max_len = 0 if max_token_length is None else min(max_token_length, 2**62)
    cdef int status
    with nogil:
        status = m.setup(n_tok)
    if status < 0:
        raise status_error(status, "counting the pairs of the unique chunks", &m.tuning)
    update = None
    if progress is not None:
        update = getattr(progress, "update", None)
        if update is None and not callable(progress):
            raise TypeError("progress must be None, a callable or an object with update()")
    # nogil runs of a few merges; between them: progress, and Ctrl-C (KeyboardInterrupt)
    cdef Py_ssize_t step = PROGRESS_EVERY
    cdef Py_ssize_t reported = 0
    while True:
        with nogil:
            status = m.run(step)
        if status < 0:
            raise status_error(status, f"at merge {m.n_merges + 1} ({m.n_vocab:,} tokens so far)", &m.tuning)
        PyErr_CheckSignals()
        if progress is not None and m.n_merges != reported:
            if update is not None:
                update(m.n_merges - reported)
            else:
                progress(m.n_merges)
            reported = m.n_merges
        if status != RUN_MORE:
            break
    if _stats is not None:
        _stats.update(m.stats())
    return m.results()


# =========================================================================== counting
# Phase 1: pre-tokenize every document and count the UTF-8 bytes of each chunk.
#
# Built-in patterns use the native pre-tokenizer (fastbpe._pretokenize) without the GIL:
# the main thread reads blocks (file blocks of whole lines, or batches of documents),
# worker threads each count into their own hash table, and the tables are merged at the
# end, so memory grows with the number of unique chunks, not with the corpus. Custom
# patterns go through the ``regex`` module, in worker processes when num_threads > 1.

from fastbpe._pretokenize cimport FbpeWin, fbpe_win_reset, split_next
from fastbpe._pretokenize import pattern_id as _pattern_id

cdef extern from "string.h" nogil:
    void* memmem(const void* haystack, size_t haystacklen, const void* needle, size_t needlelen)
    void* memchr(const void* s, int c, size_t n)


cdef int count_piece(_ChunkTable table, int pid, const uint8_t* t, Py_ssize_t start,
                     Py_ssize_t end) noexcept nogil:
    """Pre-tokenize t[start:end] (one document, or the text between special tokens)."""
    cdef Py_ssize_t pos = start, stop
    cdef const uint8_t* seg = t + start
    cdef Py_ssize_t n = end - start
    cdef FbpeWin win
    cdef int status
    # the pre-tokenizer sees the piece as its whole text: `$` is the piece's end
    pos = 0
    fbpe_win_reset(&win)
    while pos < n:
        stop = split_next(&win, pid, seg, pos, n)
        status = table.push(seg + pos, stop - pos)
        if status < 0:
            return status
        pos = stop
    return 0


cdef int count_document(_ChunkTable table, int pid, const uint8_t* t, Py_ssize_t start,
                        Py_ssize_t end, const uint8_t** sp, const Py_ssize_t* sp_len,
                        Py_ssize_t n_sp, Py_ssize_t* sp_next) noexcept nogil:
    """Count one document: split at special tokens (leftmost, longest first), then chunks.

    ``sp`` is sorted longest first, as the reference's alternation, so at equal start
    the first found wins; sp_next caches each token's next occurrence (-1: none left).
    """
    cdef Py_ssize_t pos = start, best, best_k, k
    cdef void* hit
    cdef int status
    if n_sp == 0:
        return count_piece(table, pid, t, start, end)
    for k in range(n_sp):
        sp_next[k] = -2   # not searched yet
    while True:
        best = -1
        best_k = -1
        for k in range(n_sp):
            if sp_next[k] == -2 or (sp_next[k] >= 0 and sp_next[k] < pos):
                hit = memmem(t + pos, <size_t>(end - pos), sp[k], <size_t>sp_len[k])
                sp_next[k] = -1 if hit == NULL else <Py_ssize_t>(<const uint8_t*>hit - t)
            if sp_next[k] >= 0 and (best < 0 or sp_next[k] < best):
                best = sp_next[k]
                best_k = k
        if best < 0:
            return count_piece(table, pid, t, pos, end)
        status = count_piece(table, pid, t, pos, best)
        if status < 0:
            return status
        pos = best + sp_len[best_k]


cdef class _NativeCounter:
    """Counts blocks into one _ChunkTable; one per worker thread."""
    cdef public _ChunkTable table
    cdef int pid
    cdef list specials          # keeps the bytes alive
    cdef const uint8_t** sp
    cdef Py_ssize_t* sp_len
    cdef Py_ssize_t* sp_next
    cdef Py_ssize_t n_sp

    def __cinit__(self, int pid, specials):
        cdef Py_ssize_t k
        self.table = _ChunkTable()
        self.pid = pid
        self.specials = list(specials)
        self.n_sp = len(self.specials)
        self.sp = <const uint8_t**>fbpe_malloc(<size_t>(self.n_sp + 1) * sizeof(uint8_t*))
        self.sp_len = <Py_ssize_t*>fbpe_malloc(<size_t>(self.n_sp + 1) * sizeof(Py_ssize_t))
        self.sp_next = <Py_ssize_t*>fbpe_malloc(<size_t>(self.n_sp + 1) * sizeof(Py_ssize_t))
        if self.sp == NULL or self.sp_len == NULL or self.sp_next == NULL:
            raise MemoryError()
        for k in range(self.n_sp):
            self.sp[k] = <const uint8_t*>(<bytes>self.specials[k])
            self.sp_len[k] = len(<bytes>self.specials[k])

    def __dealloc__(self):
        fbpe_free(self.sp); fbpe_free(self.sp_len); fbpe_free(self.sp_next)

    def error(self, int status, where):
        """The exception for an ERR_* status of count_lines or count_documents, naming
        the limit of this counter's table."""
        return status_error(status, where, &self.table.tuning)

    def count_lines(self, bytes block):
        """Count a block of whole lines; each line (with its "\\n") is a document.
        Returns 0, or an ERR_* status (the caller names the block in the error)."""
        cdef const uint8_t* t = <const uint8_t*>block
        cdef Py_ssize_t n = len(block), pos = 0, stop
        cdef const void* nl
        cdef int status = 0
        with nogil:
            while pos < n:
                nl = memchr(t + pos, 10, <size_t>(n - pos))
                stop = n if nl == NULL else <Py_ssize_t>(<const uint8_t*>nl - t) + 1
                status = count_document(self.table, self.pid, t, pos, stop, self.sp, self.sp_len,
                                        self.n_sp, self.sp_next)
                if status < 0:
                    break
                pos = stop
            # the queued chunks point into this block: count them before returning
            if status == 0:
                status = self.table.flush()
            self.table.n_pending = 0
        return status

    def count_documents(self, bytes block, const int64_t[::1] ends):
        """Count documents packed in block; document i ends at ends[i]. Returns 0 or an
        ERR_* status."""
        cdef const uint8_t* t = <const uint8_t*>block
        cdef Py_ssize_t i, pos = 0, n_docs = ends.shape[0]
        cdef int status = 0
        with nogil:
            for i in range(n_docs):
                status = count_document(self.table, self.pid, t, pos, ends[i], self.sp, self.sp_len,
                                        self.n_sp, self.sp_next)
                if status < 0:
                    break
                pos = ends[i]
            if status == 0:
                status = self.table.flush()
            self.table.n_pending = 0
        return status


def _merge_tables(tables):
    """Merge the tables into the largest one, freeing each other as soon as it is merged."""
    tables = sorted(tables, key=len, reverse=True)
    cdef _ChunkTable first = tables[0], other
    cdef int status = 0
    for other in tables[1:]:
        with nogil:
            status = first.merge_from(other)
            other.release()
        if status < 0:
            raise status_error(status, "adding up the chunk counts of the reading threads", &first.tuning)
    with nogil:
        fbpe_trim_memory()
    return first


# --------------------------------------------------------------------------- Python face
# The plain-Python drivers (reading, threads, the regex process pool) are in
# fastbpe.bpe.counting; what stays here touches C memory.

def _table_from_counts(counts):
    """A ``_ChunkTable`` holding ``counts`` (``{chunk bytes: count}``, e.g. the regex
    path's), which ``train_merges`` takes like the native counter's table."""
    cdef _ChunkTable table = _ChunkTable()
    cdef bytes chunk
    cdef int64_t n
    cdef int status
    for chunk, n in counts.items():
        status = table.add(<const uint8_t*>chunk, len(chunk), hash_chunk(<const uint8_t*>chunk, len(chunk)), n)
        if status < 0:
            raise status_error(status, "loading the chunk counts of the regex pattern", &table.tuning)
    return table
