"""Native sentencepiece BPE (see ``_spm.pxd`` for the steps and ``fastbpe.reference.sentencepiece``
for the rules): ``SpmCore`` encodes one text or a batch, the batch without the GIL on the
threads of ``fastbpe._runner`` (one job per run of consecutive texts, as WordPiece does).
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc

cdef extern from "<stdlib.h>" nogil:
    int posix_memalign(void** memptr, size_t alignment, size_t size)
cdef extern from *:
    int __builtin_ctzll(unsigned long long x) nogil
from libc.string cimport memcmp, memcpy, memmove, memset

cimport numpy as cnp

from fastbpe._common cimport NO_RANK as NO_PAIR, fbe_hash, fbe_load64, fbe_prefetch, fbe_word, fbe_word_padded, table_alloc
from fastbpe._idlists cimport collect_young_if_due, outbuf_to_list, shared_id_ints, track_lists
from fastbpe._out cimport OutBuf, out_init
from fastbpe._runner cimport Runner, run_jobs
from fastbpe._vec cimport I32Vec, i32_push

from fastbpe._runner import _batch_threads

cnp.import_array()

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL

cdef enum:
    OUT_FIRST = 64
    # a normalized text of up to 3 bytes per input byte must index with int32/uint32
    MAX_TEXT_BYTES = 600000000

# the layouts the cache and the merge loops count on (internal invariants)
assert sizeof(SlotHead) + SHORT_KEY + SHORT_IDS * sizeof(int32_t) == 64
assert sizeof(SlotHead) + LONG_KEY + LONG_IDS * sizeof(int32_t) == 128
assert sizeof(Sym) == 16
assert PAIR_BYTES * 8 >= SMALL_CHARS * SMALL_CHARS and SMALL_CHARS == SMALL_LIMIT + 1


# --------------------------------------------------------------------------- lookups
cdef inline const Entry* lookup(const Model* m, const unsigned char* p, uint32_t n) noexcept nogil:
    """The table entry of the n bytes at p, or NULL."""
    return lookup_at(m, p, n, fbe_hash(p, n) & m.mask)


cdef inline const Entry* lookup_at(const Model* m, const unsigned char* p, uint32_t n, uint64_t i) noexcept nogil:
    """``lookup`` from slot i = fbe_hash(p, n) & m.mask (a caller that has the hash, or
    prefetched the slot)."""
    cdef uint64_t w = fbe_word(p, n if n < 8 else 8)
    cdef const Entry* e
    while True:
        e = &m.table[i]
        if e.len == 0:
            return NULL
        if e.len == n and e.word == w and (n <= 8 or memcmp(m.arena + e.off + 8, p + 8, n - 8) == 0):
            return e
        i = (i + 1) & m.mask


cdef inline uint32_t user_match(const Model* m, const unsigned char* p, Py_ssize_t avail) noexcept nogil:
    """Length of the longest user-defined piece at p (avail bytes there), 0 if none."""
    cdef int32_t k
    cdef uint32_t n
    if not m.user_start[p[0]]:     # most bytes start none: one load
        return 0
    for k in range(m.user_first[p[0]], m.user_first[p[0] + 1]):
        n = m.user_len[k]
        if n <= avail and memcmp(m.arena + m.user_off[k], p, n) == 0:
            return n
    return 0


cdef inline uint32_t char_len(unsigned char b) noexcept nogil:
    # the text is valid UTF-8 (a str's UTF-8 form)
    if b < 0x80:
        return 1
    if b < 0xE0:
        return 2
    if b < 0xF0:
        return 3
    return 4


# --------------------------------------------------------------------------- scratch
cdef int scratch_reserve(Scratch* s, Py_ssize_t n) noexcept nogil:
    """Room for a text of n input bytes: 3n + 3 normalized bytes, as many symbols, all in
    one block (its contents need not survive: a text fills it from the start)."""
    cdef Py_ssize_t want, sym
    cdef unsigned char* mem
    if n <= s.cap and s.mem != NULL:
        return 0
    want = 3 * n + 8            # bytes of norm, and symbols at most
    sym = (want + 15) & ~15     # 16-aligned arrays after norm
    mem = <unsigned char*>malloc(sym + want * (sizeof(Sym) + 2 * sizeof(uint32_t)))
    if mem == NULL:
        return -1
    free(s.mem)
    s.mem = mem
    s.cap = n
    s.norm = mem
    s.sym = <Sym*>(mem + sym)
    s.pair_rank = <uint32_t*>(s.sym + want)
    s.sid = s.pair_rank + want
    return 0


cdef void scratch_free(Scratch* s) noexcept nogil:
    free(s.mem)
    free(s.heap_mem)
    free(s.slots)
    memset(s, 0, sizeof(Scratch))


# --------------------------------------------------------------------------- 1. normalize
cdef inline Py_ssize_t put_space(const Model* m, unsigned char* out, Py_ssize_t k) noexcept nogil:
    if m.escape_whitespaces:
        out[k] = 0xE2
        out[k + 1] = 0x96
        out[k + 2] = 0x81
        return k + 3
    out[k] = 32
    return k + 1


cdef enum:
    WORD_FIRSTS = 4       # normalize's 8-byte steps look for at most this many distinct
                          # first bytes of user-defined pieces (more: byte by byte)
    WORD_PIECES = 32      # ... among at most this many user-defined pieces


cdef inline uint64_t bytes_equal(uint64_t w, uint64_t spread) noexcept nogil:
    """A mask whose lowest set bit is the top bit of the first byte of w equal to the
    byte repeated in spread (0: none); bits above it may be false."""
    cdef uint64_t x = w ^ spread
    return (x - 0x0101010101010101ULL) & ~x & 0x8080808080808080ULL


cdef inline int word_firsts(const Model* m, uint64_t* firsts) noexcept nogil:
    """The distinct first bytes of the user-defined pieces, each repeated 8 times, in
    firsts; their count, or -1 when there are too many for ``normalize``'s 8-byte steps
    (the pieces are grouped by first byte: ``Model.user_first``)."""
    cdef int32_t k, count = m.user_first[256]
    cdef int n_firsts = 0
    cdef unsigned char b, last = 0
    if count > WORD_PIECES:
        return -1
    for k in range(count):
        b = m.arena[m.user_off[k]]
        if n_firsts and b == last:
            continue
        if n_firsts == WORD_FIRSTS:
            return -1
        firsts[n_firsts] = b * 0x0101010101010101ULL
        n_firsts += 1
        last = b
    return n_firsts


cdef Py_ssize_t normalize(const Model* m, const unsigned char* s, Py_ssize_t n, unsigned char* out) noexcept nogil:
    """The normalized text's length in out (reference: ``normalize``). Eight bytes at a
    time while none is a space or starts a user-defined piece: those bytes are copied as
    they are (what the byte loop below does with each of them)."""
    cdef Py_ssize_t pos = 0, k = 0, size, i
    cdef uint32_t u
    cdef unsigned char b
    cdef bint prev_space = m.remove_extra_whitespaces
    cdef Py_ssize_t space_len = 3 if m.escape_whitespaces else 1
    cdef uint64_t firsts[WORD_FIRSTS]
    cdef int n_firsts = word_firsts(m, firsts), f
    cdef uint64_t w, hit
    if m.remove_extra_whitespaces:
        # the normalizer's chunk is " " (a space, or a user-defined piece " ")
        while pos < n and s[pos] == 32 and user_match(m, s + pos, n - pos) <= 1:
            pos += 1
    if pos == n:
        return 0
    if m.add_dummy_prefix and not m.treat_whitespace_as_suffix:
        k = put_space(m, out, k)
    while pos < n:
        if n_firsts >= 0 and pos + 8 <= n:
            w = fbe_load64(s + pos)
            hit = bytes_equal(w, 0x2020202020202020ULL)
            for f in range(n_firsts):
                hit |= bytes_equal(w, firsts[f])
            if hit != 0:    # the bytes before the first space or piece start: copied
                hit = <uint64_t>__builtin_ctzll(hit) >> 3
            else:
                hit = 8
            if hit:
                memcpy(out + k, &w, 8)      # norm has room: 3 bytes per input byte + 8
                pos += <Py_ssize_t>hit
                k += <Py_ssize_t>hit
                prev_space = False
                continue
        b = s[pos]
        if not m.user_start[b]:     # the common case, byte by byte: no user-defined piece
            pos += 1                # starts here (nor at a UTF-8 continuation byte)
            if b != 32:
                out[k] = b
                k += 1
                prev_space = False
            elif not prev_space:
                k = put_space(m, out, k)
                prev_space = m.remove_extra_whitespaces
            continue
        u = user_match(m, s + pos, n - pos)
        size = u if u else char_len(s[pos])
        i = pos
        pos += size
        if prev_space:
            while i < pos and s[i] == 32:   # squeezed spaces
                i += 1
        if i < pos:
            while i < pos:
                if s[i] == 32:
                    k = put_space(m, out, k)
                else:
                    out[k] = s[i]
                    k += 1
                i += 1
            prev_space = m.remove_extra_whitespaces and s[pos - 1] == 32
    if m.remove_extra_whitespaces:
        while k >= space_len and (
                (space_len == 3 and out[k - 3] == 0xE2 and out[k - 2] == 0x96 and out[k - 1] == 0x81)
                or (space_len == 1 and out[k - 1] == 32)):
            k -= space_len
    if m.add_dummy_prefix and m.treat_whitespace_as_suffix:
        k = put_space(m, out, k)
    return k


# --------------------------------------------------------------------------- 2. symbolize
cdef Py_ssize_t symbolize(const Model* m, Scratch* s, const unsigned char* base, Py_ssize_t n) noexcept nogil:
    """Cut base[:n] (inside s.norm) into symbols; their count. Offsets are from s.norm."""
    cdef Py_ssize_t pos = 0, count = 0, origin = base - s.norm
    cdef uint32_t u
    while pos < n:
        u = user_match(m, base + pos, n - pos)
        s.sym[count].start = <uint32_t>(origin + pos)
        s.sym[count].length = (u | FROZEN) if u else char_len(base[pos])
        s.sym[count].prev = <int32_t>count - 1
        s.sym[count].next = <int32_t>count + 1
        pos += u if u else char_len(base[pos])
        count += 1
    if count:
        s.sym[count - 1].next = -1
    return count


# --------------------------------------------------------------------------- 3. merge
cdef int heap_grow(Scratch* s) noexcept nogil:
    """Double the heap's room, in a 64-byte-aligned block with the root 7 slots in."""
    cdef Py_ssize_t cap = s.heap_cap * 2 + 512
    cdef void* mem = NULL
    if posix_memalign(&mem, 64, (cap + 7) * sizeof(uint64_t)) != 0:
        return -1
    if s.heap_size:
        memcpy(<uint64_t*>mem + 7, s.heap, s.heap_size * sizeof(uint64_t))
    free(s.heap_mem)
    s.heap_mem = mem
    s.heap = <uint64_t*>mem + 7
    s.heap_cap = cap
    return 0


cdef inline int heap_push(Scratch* s, uint64_t key) noexcept nogil:
    cdef Py_ssize_t i, parent
    if s.heap_size == s.heap_cap and heap_grow(s) < 0:
        return -1
    i = s.heap_size
    s.heap_size += 1
    while i > 0:
        parent = (i - 1) >> 3
        if s.heap[parent] <= key:
            break
        s.heap[i] = s.heap[parent]
        i = parent
    s.heap[i] = key
    return 0


cdef inline uint64_t heap_pop(Scratch* s) noexcept nogil:
    cdef uint64_t top = s.heap[0], last, x, small
    cdef Py_ssize_t i = 0, child, best, end, n
    s.heap_size -= 1
    n = s.heap_size
    if n:
        last = s.heap[n]
        while True:
            child = 8 * i + 1
            if child >= n:
                break
            end = child + 8 if child + 8 <= n else n
            best = child
            small = s.heap[child]
            child += 1
            while child < end:
                x = s.heap[child]
                if x < small:
                    small = x
                    best = child
                child += 1
            if last <= small:
                break
            s.heap[i] = small
            i = best
        s.heap[i] = last
    return top


cdef inline const Entry* pair_entry(const Model* m, const Scratch* s, int32_t left) noexcept nogil:
    """The piece merges may make of (left, next[left]), or NULL."""
    cdef int32_t right = s.sym[left].next
    cdef const Entry* e
    if right < 0 or (s.sym[left].length | s.sym[right].length) & FROZEN:
        return NULL
    e = lookup(m, s.norm + s.sym[left].start, s.sym[left].length + s.sym[right].length)
    return e if e != NULL and e.merge_id >= 0 else NULL


cdef inline int add_pair(const Model* m, Scratch* s, int32_t left) noexcept nogil:
    """Push the pair (left, next[left]) if its text is a piece merges may make."""
    cdef const Entry* e
    if left < 0:
        return 0
    e = pair_entry(m, s, left)
    if e == NULL:
        return 0
    return heap_push(s, (<uint64_t>e.rank << 32) | <uint32_t>left)


cdef inline uint32_t pair_rank_at(const Model* m, const Scratch* s, int32_t left, uint64_t slot) noexcept nogil:
    """``pair_rank`` of the pair (left, left + 1) of the initial symbols, its table slot given."""
    cdef int32_t right = left + 1
    cdef const Entry* e
    if (s.sym[left].length | s.sym[right].length) & FROZEN:
        return NO_PAIR
    e = lookup_at(m, s.norm + s.sym[left].start, s.sym[left].length + s.sym[right].length, slot)
    return e.rank if e != NULL and e.merge_id >= 0 else NO_PAIR


cdef inline uint32_t pair_rank(const Model* m, const Scratch* s, int32_t left) noexcept nogil:
    cdef const Entry* e
    if left < 0:
        return NO_PAIR
    e = pair_entry(m, s, left)
    return e.rank if e != NULL else NO_PAIR


cdef inline void join(Scratch* s, int32_t left) noexcept nogil:
    """Merge symbol left with the next one (which leaves the list)."""
    join_as(s, left, s.sym[left].length + s.sym[s.sym[left].next].length)


cdef inline void join_as(Scratch* s, int32_t left, uint32_t length) noexcept nogil:
    """``join``, the merged symbol's length field given (``merge_buckets`` on ids keeps
    the merged id + 1 there)."""
    cdef Sym* a = &s.sym[left]
    cdef Sym* b = &s.sym[a.next]
    a.length = length
    b.length = 0
    a.next = b.next
    if b.next >= 0:
        s.sym[b.next].prev = left


cdef void merge_scan(const Model* m, Scratch* s, Py_ssize_t count) noexcept nogil:
    """``merge`` for a short piece: scan for the lowest (rank, position) pair each time
    (strict ``<`` from the left: the leftmost of equal ranks)."""
    cdef Py_ssize_t i
    cdef int32_t j, best_j
    cdef uint32_t best
    if count == 0:
        return
    # the pairs' table slots first, prefetched, then their ranks: a word's lookups
    # overlap (the table is megabytes: each is a miss to L3 on a new word)
    for i in range(count - 1):
        if (s.sym[i].length | s.sym[i + 1].length) & FROZEN:
            s.pair_rank[i] = 0               # no pair (pair_rank_at looks at no slot)
            continue
        s.pair_rank[i] = <uint32_t>(fbe_hash(s.norm + s.sym[i].start, s.sym[i].length + s.sym[i + 1].length)
                                    & m.mask)
        fbe_prefetch(&m.table[s.pair_rank[i]])
    for i in range(count - 1):
        s.pair_rank[i] = pair_rank_at(m, s, <int32_t>i, s.pair_rank[i])
    s.pair_rank[count - 1] = NO_PAIR
    while True:
        best = NO_PAIR
        best_j = -1
        j = 0                       # symbol 0 is always alive: merges keep the left side
        while j >= 0:
            if s.pair_rank[j] < best:
                best = s.pair_rank[j]
                best_j = j
            j = s.sym[j].next
        if best_j < 0:
            return
        join(s, best_j)
        s.pair_rank[best_j] = pair_rank(m, s, best_j)
        if s.sym[best_j].prev >= 0:
            s.pair_rank[s.sym[best_j].prev] = pair_rank(m, s, s.sym[best_j].prev)


cdef inline uint32_t char_sid(const Model* m, uint32_t c) noexcept nogil:
    """The symbol id of the character c (``_spm.pxd``, "Pairs on ids"), or NO_SID."""
    cdef int32_t i = small_char(m, c)
    cdef uint64_t slot, x
    if i >= 0:
        return m.small_sid[i]
    slot = pair_slot(c + 1, m.char_mask)
    while True:
        x = m.char_sid[slot]
        if x == 0:
            return NO_SID
        if (x >> 32) == c + 1:
            return <uint32_t>x
        slot = (slot + 1) & m.char_mask


cdef inline uint64_t id_pair_key(uint32_t a, uint32_t b) noexcept nogil:
    return ((<uint64_t>a << 16) | b) + 1


cdef inline uint32_t id_pair_at(const Model* m, uint64_t key, uint64_t i) noexcept nogil:
    """rank << 16 | merged id of the pair with this key (``id_pair_key``), from slot i
    on; NO_PAIR if it is no pair."""
    cdef uint64_t x
    while True:
        x = m.pairs[i]
        if x == 0:
            return NO_PAIR
        if (x >> 32) == key:
            return <uint32_t>x
        i = (i + 1) & m.pairs_mask


cdef enum:
    ID_FILTER_SHIFT = 64 - 19     # Model.pair_filter: 2^19 bits
    ID_FILTER_BITS = 1 << 19


cdef inline uint64_t id_filter_bit(uint64_t key) noexcept nogil:
    """The bit of an ``id_pair_key`` in Model.pair_filter."""
    return (key * <uint64_t>0x9E3779B97F4A7C15) >> ID_FILTER_SHIFT


cdef inline uint32_t id_pair(const Model* m, const Scratch* s, int32_t left) noexcept nogil:
    """``id_pair_at`` of the symbols (left, next[left])."""
    cdef int32_t right
    cdef uint64_t key
    if left < 0:
        return NO_PAIR
    right = s.sym[left].next
    if right < 0 or s.sid[left] == NO_SID or s.sid[right] == NO_SID:
        return NO_PAIR
    key = id_pair_key(s.sid[left], s.sid[right])
    return id_pair_at(m, key, pair_slot(key, m.pairs_mask))


cdef void merge_scan_ids(const Model* m, Scratch* s, Py_ssize_t count) noexcept nogil:
    """``merge_scan`` on symbol ids (``_spm.pxd``, "Pairs on ids"): the same scan for
    the lowest (rank, position) pair, each pair looked up by its two ids; s.sid holds
    the symbols' ids after."""
    cdef Py_ssize_t i
    cdef int32_t j, best_j
    cdef uint32_t best, r, size
    cdef uint64_t key
    cdef bint lower
    if count == 0:
        return
    for i in range(count):
        if s.sym[i].length & FROZEN:
            s.sid[i] = NO_SID
        else:
            s.sid[i] = char_sid(m, code_point(s.norm + s.sym[i].start, &size))
    # the pairs' slots first, prefetched, then their values: a word's lookups overlap
    for i in range(count - 1):
        s.pair_rank[i] = NO_PAIR
        if s.sid[i] != NO_SID and s.sid[i + 1] != NO_SID:
            key = id_pair_key(s.sid[i], s.sid[i + 1])
            s.pair_rank[i] = <uint32_t>pair_slot(key, m.pairs_mask)
            fbe_prefetch(&m.pairs[s.pair_rank[i]])
    for i in range(count - 1):
        if s.pair_rank[i] != NO_PAIR:
            s.pair_rank[i] = id_pair_at(m, id_pair_key(s.sid[i], s.sid[i + 1]), s.pair_rank[i])
    s.pair_rank[count - 1] = NO_PAIR
    while True:
        # the lowest rank over the array, not the list: a symbol merged away keeps
        # NO_PAIR, and the array's order is the list's (merges keep the left side), so
        # the first lowest is the leftmost (compare ranks only), with no load waiting on
        # the one before
        best = NO_PAIR >> 16
        best_j = -1
        for j in range(<int32_t>count - 1):
            r = s.pair_rank[j] >> 16
            lower = r < best
            best = r if lower else best
            best_j = j if lower else best_j
        if best_j < 0:
            return
        s.sid[best_j] = s.pair_rank[best_j] & 0xFFFF
        s.pair_rank[s.sym[best_j].next] = NO_PAIR   # merged away below
        join(s, best_j)
        s.pair_rank[best_j] = id_pair(m, s, best_j)
        if s.sym[best_j].prev >= 0:
            s.pair_rank[s.sym[best_j].prev] = id_pair(m, s, s.sym[best_j].prev)


cdef int merge(const Model* m, Scratch* s, Py_ssize_t count, bint by_id) noexcept nogil:
    """Merge the count symbols by the lowest (rank, left) pair each time (``merge_scan``'s
    rule) through a priority queue of candidate pairs: the heap for a segment of fewer
    than ``run_min`` symbols, ``merge_buckets`` for a longer one. Both pop the same keys
    in the same order (``merge_buckets``' docstring), so they make the same merges.
    by_id (a model with pairs on ids): a long segment merges on symbol ids and leaves
    them in s.sid for ``emit`` (as ``merge_scan_ids`` does); the heap ignores it."""
    cdef Py_ssize_t i
    cdef int32_t left
    cdef uint64_t key
    if count >= run_min:
        return merge_buckets(m, s, count, by_id)
    s.heap_size = 0
    for i in range(count - 1):
        if add_pair(m, s, <int32_t>i) < 0:
            return -1
    while s.heap_size:
        key = heap_pop(s)
        left = <int32_t><uint32_t>key
        if merge_popped(m, s, left, <uint32_t>(key >> 32)):
            if add_pair(m, s, s.sym[left].prev) < 0 or add_pair(m, s, left) < 0:
                return -1
    return 0


cdef inline bint merge_popped(const Model* m, Scratch* s, int32_t left, uint32_t rank) noexcept nogil:
    """Merge the popped pair (rank, left) if it is still current; False if it went stale
    (a side merged since the push, or the pair's text changed)."""
    cdef const Entry* e
    if s.sym[left].length == 0:
        return False                        # merged into its left neighbour since
    e = pair_entry(m, s, left)
    if e == NULL or e.rank != rank:
        return False                        # stale: the pair changed since the push
    join(s, left)
    return True


# ------------------------------------------------------------ long segments: buckets by rank
cdef struct Bucket:       # the positions of the pairs of one rank pushed before their turn
    uint32_t* pos
    uint32_t size
    uint32_t cap


cdef enum:
    FILTER_BITS = 1 << 19     # the pieces merges may make as bits of their text's hash:
                              # 64 KiB (stays in L2, where the 2 MiB piece table misses),
                              # built at load for a model whose long segments merge on text


cdef struct Buckets:
    const uint64_t* filter  # bit (hash >> 40) % FILTER_BITS of each piece merges may make
                          # (Model.piece_filter), or NULL (on ids, and while loading): a
                          # pushed pair whose bit is clear is no piece
    Bucket* of_rank       # m.n_ranks of them
    uint64_t* filled      # bit r: of_rank[r] holds positions (only ranks above cur)
    uint32_t cur          # the rank being read: pairs of rank <= cur go to the heap
    uint32_t next         # the lowest filled rank above cur (m.n_ranks: none)


cdef inline uint32_t sym_id_pair(const Model* m, const Scratch* s, int32_t left) noexcept nogil:
    """``id_pair`` in a segment merging on ids (``merge_buckets``' by_id), where each
    symbol's length field holds its id + 1: rank << 16 | merged id of the pair (left,
    next[left]), or NO_PAIR."""
    cdef int32_t right = s.sym[left].next
    cdef uint32_t a, b
    cdef uint64_t key
    if right < 0:
        return NO_PAIR
    a = s.sym[left].length - 1
    b = s.sym[right].length - 1
    if a == NO_SID or b == NO_SID:
        return NO_PAIR
    key = id_pair_key(a, b)
    if not (m.pair_filter[id_filter_bit(key) >> 6] >> (id_filter_bit(key) & 63)) & 1:
        return NO_PAIR                      # no pair: the 64 KiB filter tells (in L2)
    return id_pair_at(m, key, pair_slot(key, m.pairs_mask))


cdef inline uint32_t text_pair_rank(const Model* m, const Scratch* s, const Buckets* q, int32_t left) noexcept nogil:
    """``pair_rank`` (left >= 0), the piece filter asked before the table when there is
    one: most pairs a merge makes are no piece (Mistral v1's uncut line: 1 in 9 is), and
    the table's slot is a miss."""
    cdef const Entry* e
    cdef uint32_t n
    cdef uint64_t h
    cdef int32_t right = s.sym[left].next
    if q.filter == NULL:
        return pair_rank(m, s, left)
    if right < 0 or (s.sym[left].length | s.sym[right].length) & FROZEN:
        return NO_PAIR
    n = s.sym[left].length + s.sym[right].length
    h = fbe_hash(s.norm + s.sym[left].start, n)
    if not (q.filter[(h >> 40) % FILTER_BITS >> 6] >> ((h >> 40) & 63)) & 1:
        return NO_PAIR
    e = lookup_at(m, s.norm + s.sym[left].start, n, h & m.mask)
    return e.rank if e != NULL and e.merge_id >= 0 else NO_PAIR


cdef int bucket_add(const Model* m, Scratch* s, Buckets* q, int32_t left, bint by_id) noexcept nogil:
    """Push the pair (left, next[left]) if it is a candidate: into its rank's bucket when
    that rank's turn is still to come, else (rank <= cur) into the heap. by_id: the
    symbols hold ids (``sym_id_pair``), else text."""
    cdef Bucket* b
    cdef uint32_t r, cap
    cdef uint32_t* grown
    if left < 0:
        return 0
    if by_id:
        r = sym_id_pair(m, s, left) >> 16
        if r == NO_PAIR >> 16:
            return 0
    else:
        r = text_pair_rank(m, s, q, left)
        if r == NO_PAIR:
            return 0
    if r <= q.cur:
        return heap_push(s, (<uint64_t>r << 32) | <uint32_t>left)
    b = &q.of_rank[r]
    if b.size == b.cap:
        cap = b.cap * 2 if b.cap else 16
        grown = <uint32_t*>realloc(b.pos, cap * sizeof(uint32_t))
        if grown == NULL:
            return -1
        b.pos = grown
        b.cap = cap
    if b.size == 0:
        q.filled[r >> 6] |= (<uint64_t>1) << (r & 63)
        if r < q.next:
            q.next = r
    b.pos[b.size] = <uint32_t>left
    b.size += 1
    return 0


cdef uint32_t next_filled(const Buckets* q, uint32_t r, uint32_t n_ranks) noexcept nogil:
    """The lowest rank >= r whose bucket is filled, or n_ranks."""
    cdef uint32_t w = r >> 6
    cdef uint32_t n_words = (n_ranks + 63) >> 6
    cdef uint64_t bits
    if r >= n_ranks:
        return n_ranks
    bits = q.filled[w] & (~(<uint64_t>0) << (r & 63))
    while bits == 0:
        w += 1
        if w >= n_words:
            return n_ranks
        bits = q.filled[w]
    return (w << 6) + <uint32_t>__builtin_ctzll(bits)


cdef int sort_positions(uint32_t* a, uint32_t n, Py_ssize_t count) noexcept nogil:
    """Sort a[:n] (positions below count) rising: insertion for a few, else an LSD radix
    sort on bytes (linear). -1 when memory runs out."""
    cdef uint32_t i, j, x, shift, total, c
    cdef uint32_t at[256]
    cdef uint32_t* tmp
    cdef uint32_t* src = a
    cdef uint32_t* dst
    cdef uint32_t* t
    if n <= 32:
        for i in range(1, n):
            x = a[i]
            j = i
            while j > 0 and a[j - 1] > x:
                a[j] = a[j - 1]
                j -= 1
            a[j] = x
        return 0
    tmp = <uint32_t*>malloc(n * sizeof(uint32_t))
    if tmp == NULL:
        return -1
    dst = tmp
    shift = 0
    while shift < 32 and (<uint64_t>(count - 1) >> shift) != 0:
        memset(at, 0, sizeof(at))
        for i in range(n):
            at[(src[i] >> shift) & 255] += 1
        total = 0
        for i in range(256):
            c = at[i]
            at[i] = total
            total += c
        for i in range(n):
            x = src[i]
            dst[at[(x >> shift) & 255]] = x
            at[(x >> shift) & 255] += 1
        t = src
        src = dst
        dst = t
        shift += 8
    if src != a:
        memcpy(a, src, n * sizeof(uint32_t))
    free(tmp)
    return 0


cdef inline bint unchanged(const Scratch* s, int32_t left, Py_ssize_t count) noexcept nogil:
    """True if the initial pair (left, left + 1) is as it was: neither symbol has merged
    since (left is not merged away, and both still have their initial next), so it is
    still a candidate of its initial rank and the run's pop needs no lookup (a changed
    one goes through ``merge_popped``'s check)."""
    cdef int32_t after = left + 2 if left + 2 < count else -1
    return s.sym[left].length != 0 and s.sym[left].next == left + 1 and s.sym[left + 1].next == after


cdef int merge_buckets(const Model* m, Scratch* s, Py_ssize_t count, bint by_id) noexcept nogil:
    """``merge`` for a long segment (a line no cut shortens): the queue of candidate pairs
    as buckets by rank, each read in position order, so that a pop costs O(1) amortized
    and the symbols are read in rising addresses, prefetched ahead (a global heap made
    each pop a log of scattered reads, DRAM misses past L3). The queue's parts, with cur
    the rank being read:

    - the initial pairs, in one run sorted by key (``sorted_run``: a counting sort);
    - per rank above cur, a bucket of the positions merges pushed with that rank before
      its turn (appended in any order; radix-sorted when cur reaches it);
    - the heap, for what merges push with a rank <= cur (a rank-cur pair left of the one
      just merged; a better rank, which a model may make: ``reference.sentencepiece.
      bucket_queue``'s corollary). It stays small: its keys are below every bucket's.

    Each pop takes the smallest of the run's next key, the heap's top and cur's bucket's
    next position; when all of them are above rank cur, cur moves to the lower of the
    run's next rank and the lowest filled bucket. That is the smallest key in the queue
    (the corollary), so the pops are the heap's, and so are the merges. On text, a push
    asks a 64 KiB bit filter of the pieces' hashes (``Model.piece_filter``, built at load)
    before the 2 MiB piece table (``Buckets.filter``): most pairs a merge makes
    are no piece.

    by_id (a model with pairs on ids): the symbols merge on ids, as ``merge_scan_ids``
    (``reference.sentencepiece.merge_pairs``: a pair is a candidate iff its two ids are
    a key, of the merged piece's rank): each symbol's length field holds its id + 1 (0
    once merged away, as with text) while merging, so a push or a pop reads the two
    symbols' lines and the 1 MiB pairs table, never the text (a line of norm) nor the
    2 MiB piece table; after, s.sid holds the live symbols' ids for ``emit`` and their
    lengths are bytes again (a symbol ends where the next one starts). The keys, and so
    the pops and merges, are the text path's."""
    cdef Py_ssize_t n_run = 0
    cdef Py_ssize_t* ends = NULL
    cdef uint32_t r, n_ranks = m.n_ranks
    cdef uint32_t end = s.sym[count - 1].start + (s.sym[count - 1].length & ~FROZEN)
    cdef int rc = -1
    cdef Buckets q
    q.of_rank = NULL
    q.filled = NULL
    q.filter = NULL
    s.heap_size = 0
    ends = sorted_run(m, s, count, &n_run, by_id)
    if ends == NULL:
        return -1
    if n_run == 0:
        free(ends)
        if by_id:
            ids_to_lengths(s, end)
        return 0
    q.of_rank = <Bucket*>calloc(n_ranks, sizeof(Bucket))
    q.filled = <uint64_t*>calloc((n_ranks + 63) >> 6, sizeof(uint64_t))
    if not by_id:
        q.filter = m.piece_filter
    if q.of_rank != NULL and q.filled != NULL:
        rc = bucket_loop(m, s, count, &q, s.pair_rank, ends, n_run, by_id)
        if rc == 0 and by_id:
            ids_to_lengths(s, end)
    free(ends)
    if q.of_rank != NULL:
        for r in range(n_ranks):
            free(q.of_rank[r].pos)
    free(q.of_rank)
    free(q.filled)
    return rc


cdef uint64_t* piece_filter(const Model* m) noexcept nogil:
    """``Buckets.filter`` for the model (a pass over the piece table), or NULL when memory
    runs out."""
    cdef uint64_t* bits = <uint64_t*>calloc(FILTER_BITS // 64, sizeof(uint64_t))
    cdef uint64_t i, h
    cdef const Entry* e
    if bits == NULL:
        return NULL
    for i in range(m.mask + 1):
        e = &m.table[i]
        if e.len and e.merge_id >= 0:
            h = fbe_hash(m.arena + e.off, e.len) >> 40
            bits[h % FILTER_BITS >> 6] |= (<uint64_t>1) << (h & 63)
    return bits


cdef void ids_to_lengths(Scratch* s, uint32_t end) noexcept nogil:
    """After ``merge_buckets`` on ids: s.sid[i] is live symbol i's id, its length field
    its bytes again (up to the next live symbol's start, or end, the segment's)."""
    cdef int32_t i = 0, after           # symbol 0 is always alive: merges keep the left side
    while i >= 0:
        after = s.sym[i].next
        s.sid[i] = s.sym[i].length - 1
        s.sym[i].length = (s.sym[after].start if after >= 0 else end) - s.sym[i].start
        i = after


cdef inline bint merge_popped_id(const Model* m, Scratch* s, int32_t left, uint32_t rank) noexcept nogil:
    """``merge_popped`` on ids (``merge_buckets``' by_id)."""
    cdef uint32_t v
    if s.sym[left].length == 0:
        return False                        # merged into its left neighbour since
    v = sym_id_pair(m, s, left)
    if v >> 16 != rank:
        return False                        # stale (NO_PAIR >> 16 is no rank)
    join_as(s, left, (v & 0xFFFF) + 1)
    return True


cdef enum:
    # how many pops ahead bucket_loop prefetches a symbol (and, merging on text, the
    # text it starts: the symbol is in cache by then). On ids a pop is less work and
    # measured fastest at 8 (uncut 10 MB line, one-process A/B: 16 0.87-0.96 s, 8
    # 0.83-0.90 s, 32 0.96-1.00 s, 4 0.88-0.96 s); text keeps its measured 16 / 8
    ID_AHEAD = 8
    TEXT_SYM_AHEAD = 16
    TEXT_AHEAD = 8


cdef int bucket_loop(const Model* m, Scratch* s, Py_ssize_t count, Buckets* q, const uint32_t* run,
                     const Py_ssize_t* ends, Py_ssize_t n_run, bint by_id) noexcept nogil:
    """``merge_buckets``' pops and merges; -1 when memory runs out (the caller frees).
    The run: ``sorted_run``'s lefts and rank ends; rr is the rank of run[ri]."""
    cdef Py_ssize_t ri = 0, pi = 0, pn = 0
    cdef Py_ssize_t ahead = ID_AHEAD if by_id else TEXT_SYM_AHEAD
    cdef uint32_t rr = 0
    cdef int32_t left
    cdef uint64_t key, kr, kp, INF = ~(<uint64_t>0)
    cdef uint32_t* pcur = NULL
    cdef uint32_t r, n_ranks = m.n_ranks
    cdef bint initial, merged
    while ends[rr] == 0:
        rr += 1                     # the first rank with initial pairs (n_run > 0)
    q.cur = rr
    q.next = n_ranks
    while True:
        if ri < n_run:
            while ends[rr] <= ri:
                rr += 1
            kr = (<uint64_t>rr << 32) | run[ri]
        else:
            kr = INF
        kp = ((<uint64_t>q.cur << 32) | pcur[pi]) if pi < pn else INF
        key = kr if kr < kp else kp
        initial = False
        if s.heap_size and s.heap[0] < key:
            key = heap_pop(s)
        elif key >> 32 > q.cur:
            # nothing of rank cur is left (the heap is empty: its keys have ranks <= cur)
            free(pcur)
            q.of_rank[q.cur].pos = NULL
            pcur = NULL
            pi = pn = 0
            r = <uint32_t>(kr >> 32) if ri < n_run else n_ranks
            if q.next < r:
                r = q.next
            if r >= n_ranks:
                break
            q.cur = r
            if r == q.next:
                q.filled[r >> 6] &= ~((<uint64_t>1) << (r & 63))
                q.next = next_filled(q, r + 1, n_ranks)
                pcur = q.of_rank[r].pos
                pn = q.of_rank[r].size
                if sort_positions(pcur, <uint32_t>pn, count) < 0:
                    return -1
            continue
        elif key == kr:
            # the run and the bucket are known ahead: their symbols (16 keys on) and then
            # their text (8 on, where the symbol is in cache by now) are prefetched
            if ri + ahead < n_run:
                fbe_prefetch(&s.sym[run[ri + ahead]])
            if ri + TEXT_AHEAD < n_run and not by_id:
                fbe_prefetch(s.norm + s.sym[run[ri + TEXT_AHEAD]].start)
            ri += 1
            initial = True
        else:
            if pi + ahead < pn:
                fbe_prefetch(&s.sym[pcur[pi + ahead]])
            if pi + TEXT_AHEAD < pn and not by_id:
                fbe_prefetch(s.norm + s.sym[pcur[pi + TEXT_AHEAD]].start)
            pi += 1
        left = <int32_t><uint32_t>key
        if by_id:
            merged = merge_popped_id(m, s, left, <uint32_t>(key >> 32))
        elif initial and unchanged(s, left, count):
            join(s, left)                   # current: no lookup needed to tell
            merged = True
        else:
            merged = merge_popped(m, s, left, <uint32_t>(key >> 32))
        if merged:
            if bucket_add(m, s, q, s.sym[left].prev, by_id) < 0 or bucket_add(m, s, q, left, by_id) < 0:
                return -1
    return 0


#: segments of at least this many symbols sort their initial pairs (``merge``); a
#: variable so that the tests can run short texts through the sorted run too
cdef Py_ssize_t run_min = 4096


def _set_run_min(Py_ssize_t n):
    """Testing hook: segments of at least n symbols (n >= 2) take ``merge``'s sorted run
    of initial pairs; returns the previous value."""
    global run_min
    if n < 2:
        raise ValueError(f"n must be at least 2, got {n}")
    old = run_min
    run_min = n
    return old


cdef Py_ssize_t* sorted_run(const Model* m, Scratch* s, Py_ssize_t count, Py_ssize_t* n_run,
                           bint by_id) noexcept nogil:
    """The initial pairs that are pieces, sorted by key (rank, then left): their lefts in
    s.pair_rank[:n_run], rank r's at [ends[r - 1], ends[r]) (ends[-1] = 0); returns ends
    (m.n_ranks entries, the caller frees), NULL when memory runs out. A counting sort on
    the rank, lefts rising within a rank as the pairs are visited left to right: linear,
    two sequential passes (pushing them into the heap was a random access per level),
    and in the scratch (warm from call to call; a fresh 8-byte key per pair was a new
    mapping of tens of MB per long line, whose page faults took ~10% of a 10 MB line).
    A pair's rank waits between the passes in its left symbol's prev (initially left -
    1, restored). by_id: first each symbol's length field becomes its id + 1
    (``merge_buckets``)."""
    cdef Py_ssize_t i
    cdef uint32_t r, size
    cdef uint32_t* run = s.pair_rank
    cdef Py_ssize_t* at = <Py_ssize_t*>calloc(m.n_ranks + 1, sizeof(Py_ssize_t))
    if at == NULL:
        return NULL
    n_run[0] = 0
    if by_id:
        for i in range(count):
            s.sym[i].length = 1 + (NO_SID if s.sym[i].length & FROZEN else
                                   char_sid(m, code_point(s.norm + s.sym[i].start, &size)))
    for i in range(count - 1):
        if by_id:
            r = sym_id_pair(m, s, <int32_t>i)
            r = r >> 16 if r != NO_PAIR else NO_PAIR
        else:
            r = pair_rank(m, s, <int32_t>i)
        s.sym[i].prev = <int32_t>r
        if r != NO_PAIR:
            at[r + 1] += 1
            n_run[0] += 1
    for i in range(m.n_ranks):
        at[i + 1] += at[i]
    for i in range(count - 1):
        r = <uint32_t>s.sym[i].prev
        s.sym[i].prev = <int32_t>i - 1
        if r != NO_PAIR:
            run[at[r]] = <uint32_t>i
            at[r] += 1
    return at                   # at[r] is now where rank r's lefts end


# --------------------------------------------------------------------------- 4. emit
cdef int emit(const Model* m, Scratch* s, Py_ssize_t count, I32Vec* out, bint by_id) noexcept nogil:
    """Append the symbols' ids (a run of unknown symbols as one id, without byte fallback);
    by_id: s.sid holds the symbols' ids (``merge_scan_ids``), most of them what to emit."""
    cdef int32_t i = 0 if count else -1, pid
    cdef uint32_t k, length, sid
    cdef const Entry* e
    cdef bint unk, prev_unk = False
    while i >= 0:
        if by_id:
            sid = s.sid[i]
            if sid < m.n_texts and (m.sid_plain[sid >> 3] >> (sid & 7)) & 1:
                if i32_push(out, <int32_t>sid, OUT_FIRST) < 0:
                    return -1
                prev_unk = False
                i = s.sym[i].next
                continue
        length = s.sym[i].length & ~FROZEN
        e = lookup(m, s.norm + s.sym[i].start, length)
        pid = e.id if e != NULL else m.unk_id
        unk = pid == m.unk_id
        if unk and m.byte_fallback:
            for k in range(length):
                if i32_push(out, m.byte_ids[s.norm[s.sym[i].start + k]], OUT_FIRST) < 0:
                    return -1
        elif not (unk and prev_unk):
            if i32_push(out, pid, OUT_FIRST) < 0:
                return -1
        prev_unk = unk
        i = s.sym[i].next
    return 0


cdef int encode_piece(const Model* m, Scratch* s, const unsigned char* base, Py_ssize_t n,
                      I32Vec* out) noexcept nogil:
    """Symbols, merges and ids of base[:n] (all of the normalized text, or a segment)."""
    cdef Py_ssize_t count = symbolize(m, s, base, n)
    cdef bint by_id = False
    if count <= SCAN_MAX and count < run_min:   # (run_min is only below SCAN_MAX in tests)
        by_id = m.pairs != NULL
        if by_id:
            merge_scan_ids(m, s, count)
        else:
            merge_scan(m, s, count)
    else:
        by_id = m.pairs != NULL and count >= run_min
        if merge(m, s, count, by_id) < 0:
            return -1
    return emit(m, s, count, out, by_id)


# --------------------------------------------------------------------------- segments
cdef inline uint32_t code_point(const unsigned char* p, uint32_t* size) noexcept nogil:
    """The code point of the (valid UTF-8) character at p; its length in *size."""
    cdef uint32_t c = p[0]
    if c < 0x80:
        size[0] = 1
        return c
    if c < 0xE0:
        size[0] = 2
        return (c & 0x1F) << 6 | (p[1] & 0x3F)
    if c < 0xF0:
        size[0] = 3
        return (c & 0x0F) << 12 | (p[1] & 0x3F) << 6 | (p[2] & 0x3F)
    size[0] = 4
    return (c & 0x07) << 18 | (p[1] & 0x3F) << 12 | (p[2] & 0x3F) << 6 | (p[3] & 0x3F)


cdef inline int32_t small_char(const Model* m, uint32_t c) noexcept nogil:
    """c's index in pair_bits, or -1."""
    if c < SMALL_LIMIT:
        return <int32_t>c
    return SMALL_LIMIT if c == m.space_mark else -1


cdef inline uint64_t pair_key(uint32_t a, uint32_t b) noexcept nogil:
    return ((<uint64_t>a << 21) | b) + 1


cdef inline uint64_t pair_slot(uint64_t key, uint64_t mask) noexcept nogil:
    return ((key * 0x9E3779B97F4A7C15ULL) >> 32) & mask


cdef inline bint joinable(const Model* m, uint32_t a, uint32_t b) noexcept nogil:
    """Whether the characters a, b stand next to each other in some piece merges may
    make (else the text is cut between them: ``_spm.pxd``, "Segments")."""
    cdef int32_t i = small_char(m, a), j = small_char(m, b)
    cdef uint64_t key, slot, k
    if i >= 0 and j >= 0:
        k = <uint64_t>(i * SMALL_CHARS + j)
        return (m.pair_bits[k >> 3] >> (k & 7)) & 1
    if (m.wall[a >> 3] >> (a & 7)) & 1 or (m.wall[b >> 3] >> (b & 7)) & 1:
        return False
    key = pair_key(a, b)
    slot = pair_slot(key, m.pair_mask)
    while m.pair_table[slot] != 0:
        if m.pair_table[slot] == key:
            return True
        slot = (slot + 1) & m.pair_mask
    return False


cdef int slots_alloc(Scratch* s) noexcept nogil:
    """Allocate s's segment cache (empty), and after it the first level of short
    segments (``Near``); -1 when memory runs out."""
    s.slots = <unsigned char*>table_alloc(SHORT_SLOTS * 64 + LONG_SLOTS * 128 + NEAR_SLOTS * sizeof(Near))
    return 0 if s.slots != NULL else -1


cdef struct Near:         # 32 bytes: a segment of up to 16 bytes and up to 7 ids (16 bits)
    uint64_t word         # its first 8 bytes, zero-padded (fbe_word_padded)
    uint64_t word2        # its bytes 8 to 15, zero-padded (0 for a segment of up to 8)
    uint8_t len           # 0: empty
    uint8_t n_ids
    uint16_t ids[7]


cdef enum:
    # the first level of the segment cache: a segment of up to NEAR_KEY bytes with up to
    # NEAR_IDS ids (nearly all of Turkish's and Chinese's multi-character segments,
    # English's words) is looked up first in a direct-mapped table of 32-byte entries, two
    # to a cache line, 256 KiB (stays in L2 beside the pairs on ids), then in its 64-byte
    # slot of the 4 MiB cache (prefetched too: the first level misses often enough that
    # not prefetching it measured slower); a segment found either way is kept in both
    NEAR_KEY = 16
    NEAR_IDS = 7
    NEAR_SLOTS = 8192


#: 1: the first level is used (0: not; a tuning hook for ``benchmarks/spm_ab.py``)
cdef int near_on = 1


def _set_near(Py_ssize_t n):
    """Tuning hook (``benchmarks/spm_ab.py OLD --set-old near=0``): 0 turns the first
    level of the segment cache off, 1 on; returns the previous setting."""
    global near_on
    old = near_on
    near_on = 1 if n else 0
    return old


cdef inline Near* near_entry(const Model* m, Scratch* s, Py_ssize_t n, uint64_t h) noexcept nogil:
    """The first-level entry of a segment of n bytes hashing to h, or NULL (not kept
    there: longer, ids past 16 bits, or no cache)."""
    if n > NEAR_KEY or not near_on or m.pairs == NULL or s.slots == NULL:
        return NULL
    return <Near*>(s.slots + SHORT_SLOTS * 64 + LONG_SLOTS * 128) + ((h >> 40) & (NEAR_SLOTS - 1))


cdef inline unsigned char* cache_slot(Scratch* s, Py_ssize_t n, uint64_t h) noexcept nogil:
    """The cache set (two slots side by side) of a segment of n bytes hashing to h; NULL
    when it is too long to be cached (or memory runs out: then nothing is cached)."""
    if n > LONG_KEY:
        return NULL
    if s.slots == NULL and slots_alloc(s) < 0:
        return NULL
    if n <= SHORT_KEY:
        return s.slots + ((h >> 20) & (SHORT_SLOTS - 2)) * 64
    return s.slots + SHORT_SLOTS * 64 + ((h >> 20) & (LONG_SLOTS - 2)) * 128


cdef inline bint slot_has(unsigned char* slot, const unsigned char* base, Py_ssize_t n, uint64_t h) noexcept nogil:
    cdef SlotHead* head = <SlotHead*>slot
    if head.tag != <uint32_t>h or head.key_len != n:
        return False
    return memcmp(slot + sizeof(SlotHead), base, n) == 0



cdef int encode_segment(const Model* m, Scratch* s, const unsigned char* base, Py_ssize_t n,
                        uint64_t h, unsigned char* slot, I32Vec* out) noexcept nogil:
    """A segment's ids, from its cache set (hash h; NULL: not cached) when it holds them
    (``_spm.pxd``, "Segments"). A set is two ways: a new segment goes first, the first
    moves second (the older of the two is evicted)."""
    cdef Py_ssize_t first = out.size, k, made
    cdef bint after_unk = first > 0 and out.data[first - 1] == m.unk_id and not m.byte_fallback
    cdef size_t size = 64 if n <= SHORT_KEY else 128
    cdef size_t ids_at = sizeof(SlotHead) + (SHORT_KEY if n <= SHORT_KEY else LONG_KEY)
    cdef unsigned char* hit = NULL
    cdef int32_t* ids
    cdef const Entry* whole
    cdef Near* near = near_entry(m, s, n, h)
    cdef uint64_t word = 0, word2 = 0
    if near != NULL:
        # norm has 8 readable bytes past any segment
        word = fbe_word_padded(base, n if n < 8 else 8)
        if n > 8:
            word2 = fbe_word_padded(base + 8, n - 8)
        if near.len == n and near.word == word and near.word2 == word2:
            for k in range(near.n_ids):
                if i32_push(out, near.ids[k], OUT_FIRST) < 0:
                    return -1
            return drop_fused_unk(m, out, first, after_unk)
    if slot != NULL:
        if slot_has(slot, base, n, h):
            hit = slot
        elif slot_has(slot + size, base, n, h):
            hit = slot + size
        if hit != NULL:
            ids = <int32_t*>(hit + ids_at)
            for k in range((<SlotHead*>hit).n_ids):
                if i32_push(out, ids[k], OUT_FIRST) < 0:
                    return -1
            near_keep(near, word, word2, n, out, first)
            return drop_fused_unk(m, out, first, after_unk)
    whole = lookup_at(m, base, <uint32_t>n, h & m.mask) if n <= m.max_whole else NULL
    if whole != NULL and whole.whole:
        if i32_push(out, whole.id, OUT_FIRST) < 0:
            return -1
    elif encode_piece(m, s, base, n, out) < 0:
        return -1
    made = out.size - first
    if slot != NULL and made <= (SHORT_IDS if n <= SHORT_KEY else LONG_IDS):
        memcpy(slot + size, slot, size)
        (<SlotHead*>slot).tag = <uint32_t>h
        (<SlotHead*>slot).key_len = <uint16_t>n
        (<SlotHead*>slot).n_ids = <uint16_t>made
        memcpy(slot + sizeof(SlotHead), base, n)
        memcpy(slot + ids_at, out.data + first, made * sizeof(int32_t))
    near_keep(near, word, word2, n, out, first)
    return drop_fused_unk(m, out, first, after_unk)


cdef inline void near_keep(Near* near, uint64_t word, uint64_t word2, Py_ssize_t n, const I32Vec* out,
                           Py_ssize_t first) noexcept nogil:
    """Keep the segment's ids (out.data[first:], before an unknown run's fusing) in its
    first-level entry when they fit (NULL: none)."""
    cdef Py_ssize_t made = out.size - first, k
    if near == NULL or made > NEAR_IDS:
        return
    near.word = word
    near.word2 = word2
    near.len = <uint8_t>n
    near.n_ids = <uint8_t>made
    for k in range(made):
        near.ids[k] = <uint16_t>out.data[first + k]


cdef inline int drop_fused_unk(const Model* m, I32Vec* out, Py_ssize_t first, bint after_unk) noexcept nogil:
    """Without byte fallback, an unknown id right after another is one run: drop it."""
    if after_unk and out.size > first and out.data[first] == m.unk_id:
        memmove(out.data + first, out.data + first + 1, (out.size - first - 1) * sizeof(int32_t))
        out.size -= 1
    return 0


cdef int spm_encode(const Model* m, Scratch* s, const unsigned char* text, Py_ssize_t n,
                    I32Vec* out) noexcept nogil:
    cdef Py_ssize_t norm_len
    if n == 0:
        return 0
    if scratch_reserve(s, n) < 0:
        return -1
    norm_len = normalize(m, text, n, s.norm)
    if norm_len == 0:
        return 0
    # room for every id now: a text gives at most one id per normalized byte (a piece
    # covers a byte or more, byte fallback one id per byte), so the one-character ids
    # of ``scan`` are plain stores
    if out.cap - out.size < norm_len and i32_reserve(out, out.size + norm_len) < 0:
        return -1
    return scan(m, s, norm_len, out)


cdef inline int i32_reserve(I32Vec* v, Py_ssize_t cap) noexcept nogil:
    """Grow v's room to at least cap ids; -1 (v unchanged) when memory runs out."""
    cdef int32_t* p = <int32_t*>realloc(v.data, cap * sizeof(int32_t))
    if p == NULL:
        return -1
    v.data = p
    v.cap = cap
    return 0


cdef inline bint is_wall(const Model* m, uint32_t c) noexcept nogil:
    return (m.wall[c >> 3] >> (c & 7)) & 1


cdef enum:
    HELD = 64             # one-character ids held back while a segment waits (``scan``)


cdef int scan(const Model* m, Scratch* s, Py_ssize_t n, I32Vec* out) noexcept nogil:
    """The ids of s.norm[:n], segment by segment, in one pass over its characters
    (``fastbpe.reference.sentencepiece.fused_scan``): each character is decoded once; a
    wall character (in no piece of two or more characters: a segment by itself, whatever
    its neighbours) or any other one-character segment with an id in ``char_ids`` is
    written out at once, no segment record, no hash; the other segments wait one turn
    in ``pending`` (their cache set prefetched) and go to ``encode_segment`` when the
    next one is found, the one-character ids found meanwhile held in ``held`` behind it
    (out's room is reserved by the caller: one id per byte)."""
    cdef const unsigned char* norm = s.norm
    cdef Py_ssize_t pos = 0, start, p_start = 0, p_len = 0, n_held = 0
    cdef uint32_t c, size, first, first_size, prev
    cdef uint64_t p_h = 0
    cdef unsigned char* p_slot = NULL
    cdef int32_t held[HELD]
    c = code_point(norm, &size)
    while True:         # c, size: the character at pos (pos < n)
        if is_wall(m, c) and c < DIRECT_CHARS and m.char_ids[c] != NO_SID:
            if p_len == 0:              # nothing waits: written at once
                out.data[out.size] = m.char_ids[c]
                out.size += 1
            elif hold(m, s, m.char_ids[c], p_start, &p_len, p_h, p_slot, held, &n_held, out) < 0:
                return -1
            pos += size
            if pos >= n:
                break
            c = code_point(norm + pos, &size)
            continue
        # a segment from pos: up to the first two characters that do not join
        start = pos
        first = c
        first_size = size
        prev = c
        pos += size
        if not is_wall(m, c):
            while pos < n:
                c = code_point(norm + pos, &size)
                if not joinable(m, prev, c):
                    break
                prev = c
                pos += size
        elif pos < n:
            c = code_point(norm + pos, &size)
        if pos - start == first_size and first < DIRECT_CHARS and m.char_ids[first] != NO_SID:
            if p_len == 0:              # a one-character segment that is a piece
                out.data[out.size] = m.char_ids[first]
                out.size += 1
            elif hold(m, s, m.char_ids[first], p_start, &p_len, p_h, p_slot, held, &n_held, out) < 0:
                return -1
        else:
            if p_len and flush(m, s, p_start, p_len, p_h, p_slot, held, n_held, out) < 0:
                return -1
            n_held = 0
            p_start = start
            p_len = pos - start
            p_slot = ahead(m, s, norm + start, p_len, &p_h)
        if pos >= n:
            break
    if p_len and flush(m, s, p_start, p_len, p_h, p_slot, held, n_held, out) < 0:
        return -1
    return 0


cdef inline int hold(const Model* m, Scratch* s, int32_t one, Py_ssize_t p_start, Py_ssize_t* p_len,
                     uint64_t p_h, unsigned char* p_slot, int32_t* held, Py_ssize_t* n_held, I32Vec* out) noexcept nogil:
    """A one-character id found while a segment waits: held behind it; when ``HELD`` are
    held, the segment and they are written (and nothing waits)."""
    held[n_held[0]] = one
    n_held[0] += 1
    if n_held[0] == HELD:
        if flush(m, s, p_start, p_len[0], p_h, p_slot, held, n_held[0], out) < 0:
            return -1
        p_len[0] = 0
        n_held[0] = 0
    return 0


cdef inline int flush(const Model* m, Scratch* s, Py_ssize_t start, Py_ssize_t length, uint64_t h,
                      unsigned char* slot, const int32_t* held, Py_ssize_t n_held, I32Vec* out) noexcept nogil:
    """The pending segment's ids, then the one-character ids held behind it."""
    if encode_segment(m, s, s.norm + start, length, h, slot, out) < 0:
        return -1
    if n_held:
        memcpy(out.data + out.size, held, n_held * sizeof(int32_t))
        out.size += n_held
    return 0


cdef inline unsigned char* ahead(const Model* m, Scratch* s, const unsigned char* p, Py_ssize_t n,
                                 uint64_t* h) noexcept nogil:
    """Look at the segment p[:n] (no one-character piece) before its turn: *h its hash;
    its cache set is returned (NULL: not cached) and prefetched, with the piece table's
    slot of its text."""
    cdef unsigned char* slot
    cdef Near* near
    h[0] = fbe_hash(p, n)
    slot = cache_slot(s, n, h[0])
    near = near_entry(m, s, n, h[0])
    if near != NULL:
        fbe_prefetch(near)
    if n <= m.max_whole:    # where a cache miss looks first (Entry.whole)
        fbe_prefetch(&m.table[h[0] & m.mask])
    if slot != NULL:
        fbe_prefetch(slot)          # both ways of a short set (the first of a long one)
        fbe_prefetch(slot + 64)
    return slot


# --------------------------------------------------------------------------- batches
cdef struct Job:
    const Model* model
    const unsigned char** texts
    const Py_ssize_t* lengths
    I32Vec* outs
    Py_ssize_t first
    Py_ssize_t last
    Scratch* kept         # a scratch of the core's pool, or NULL: one of the job's own
    int error


cdef enum:
    KEEP_TEXT = 1 << 20   # a pooled scratch keeps room for texts of up to 1 MB between calls


cdef void run_one(void* payload, Py_ssize_t j, Py_ssize_t slot, void* state) noexcept nogil:
    cdef Job* job = &(<Job*>payload)[j]
    cdef Scratch own
    cdef Scratch* s = job.kept
    cdef Py_ssize_t t
    if s == NULL:
        memset(&own, 0, sizeof(Scratch))
        s = &own
    for t in range(job.first, job.last):
        if spm_encode(job.model, s, job.texts[t], job.lengths[t], &job.outs[t]) < 0:
            job.error = 1
            break
    if s == &own:
        scratch_free(s)
    elif s.cap > KEEP_TEXT:     # keep the cache, not the room a huge text took
        free(s.mem)
        free(s.heap_mem)
        s.mem = s.heap_mem = s.heap = NULL
        s.cap = s.heap_cap = s.heap_size = 0


cdef list ids_list(const I32Vec* v, Py_ssize_t n_shared, bint untracked=False):
    """The ids as a list of the process's shared int objects (``fastbpe._idlists``: no
    int made per id, no reference count written); untracked: hidden from the cyclic
    collector until ``track_lists`` (a batch's lists)."""
    cdef OutBuf view
    out_init(&view, <uint32_t*>v.data, v.cap)   # ids are >= 0: the same bits as uint32
    view.size = v.size
    return outbuf_to_list(&view, n_shared, untracked)


cdef object ids_array(const I32Vec* outs, Py_ssize_t n, object dtype, bint with_offsets):
    """The ids of outs[:n] in one numpy array of dtype (uint16 or uint32, checked by the
    caller), written from the native buffers (no list between); with_offsets: also the
    int64 offsets (len n + 1) of each text's ids, as (ids, offsets). Through numpy's C
    API, as ``fastbpe._batch.to_array`` (np.empty and memoryviews cost ~1 us a call)."""
    cdef bint u16 = dtype.itemsize == 2
    cdef cnp.npy_intp total = 0, n_off = n + 1
    cdef Py_ssize_t i, k, at = 0
    for i in range(n):
        total += outs[i].size
    cdef cnp.ndarray ids = cnp.PyArray_EMPTY(1, &total, cnp.NPY_UINT16 if u16 else cnp.NPY_UINT32, 0)
    cdef uint32_t* w = <uint32_t*>cnp.PyArray_DATA(ids)
    cdef uint16_t* h = <uint16_t*>w
    cdef cnp.ndarray offsets
    cdef int64_t* off = NULL
    if with_offsets:
        offsets = cnp.PyArray_EMPTY(1, &n_off, cnp.NPY_INT64, 0)
        off = <int64_t*>cnp.PyArray_DATA(offsets)
    with nogil:
        for i in range(n):
            if off != NULL:
                off[i] = at
            if u16:
                for k in range(outs[i].size):
                    h[at + k] = <uint16_t>outs[i].data[k]
            elif outs[i].size:
                memcpy(w + at, outs[i].data, outs[i].size * sizeof(uint32_t))
            at += outs[i].size
        if off != NULL:
            off[n] = at
    return (ids, offsets) if with_offsets else ids


def joinable_pairs(tables):
    """``fastbpe.reference.sentencepiece.joinable_pairs`` as the native tables want
    them: (the ``pair_bits`` bitmap, the other pairs as ``a << 21 | b``).

    >>> from fastbpe.reference.sentencepiece import SpmModel, Piece, TrainerSpec, build_tables
    >>> bits, other = joinable_pairs(build_tables(SpmModel((Piece("<unk>", 0, 2), Piece("▁a", -1),
    ...                                                     Piece("a中", -1)), TrainerSpec(model_type=2))))
    >>> [k for k in range(0x601 * 0x601) if bits[k >> 3] >> (k & 7) & 1] == [0x600 * 0x601 + 97]   # ▁a (▁ is 0x600)
    True
    >>> other == [97 << 21 | 0x4E2D]
    True
    """
    from fastbpe.reference.sentencepiece import joinable_pairs as pairs_of

    space = 0x2581 if tables.escape_whitespaces else 0x20
    bits = bytearray(PAIR_BYTES)
    other = []

    def small(c):
        return c if c < SMALL_LIMIT else SMALL_LIMIT if c == space else -1

    for pair in sorted(pairs_of(tables)):
        a, b = ord(pair[0]), ord(pair[1])
        if small(a) >= 0 and small(b) >= 0:
            k = small(a) * SMALL_CHARS + small(b)
            bits[k >> 3] |= 1 << (k & 7)
        else:
            other.append(a << 21 | b)
    return bytes(bits), other


def walls(tables) -> bytes:
    """A bitmap of the code points in no piece of two or more characters (``_spm.pxd``):
    bit ``c % 8`` of byte ``c // 8``.

    >>> from fastbpe.reference.sentencepiece import SpmModel, Piece, TrainerSpec, build_tables
    >>> bits = walls(build_tables(SpmModel((Piece("<unk>", 0, 2), Piece("ab", -1), Piece("c", -1)),
    ...                                    TrainerSpec(model_type=2))))
    >>> [chr(c) for c in range(97, 101) if bits[c >> 3] >> (c & 7) & 1]
    ['c', 'd']
    """
    bits = bytearray(b"\xff" * (0x110000 // 8))
    for piece in tables.pieces:
        if len(piece) > 1:
            for ch in piece:
                c = ord(ch)
                bits[c >> 3] &= ~(1 << (c & 7)) & 0xFF
    return bytes(bits)


cdef inline uint32_t piece_sid(const Model* m, const unsigned char* p, uint32_t n) noexcept nogil:
    """The symbol id of the n bytes at p: a piece merges may make, else a single
    character's (``char_sid``), else NO_SID."""
    cdef const Entry* e = lookup(m, p, n)
    cdef uint32_t size
    if e != NULL and e.merge_id >= 0:
        return <uint32_t>e.merge_id
    if n == char_len(p[0]):
        return char_sid(m, code_point(p, &size))
    return NO_SID


cdef Py_ssize_t fill_pairs(Model* m) noexcept nogil:
    """``fastbpe.reference.sentencepiece.merge_pairs``: every split of every piece merges
    may make into two symbols with ids, put in m.pairs when it is allocated (empty);
    their count. Native (the reference's loop takes ~0.2 s of a Mistral load); the
    tests hold it to the reference (``SpmCore._id_pairs``)."""
    cdef Py_ssize_t count = 0
    cdef uint64_t i, key, slot
    cdef uint32_t k, a, b
    cdef const Entry* e
    cdef const unsigned char* p
    for i in range(m.mask + 1):
        e = &m.table[i]
        if e.len == 0 or e.merge_id < 0:
            continue
        p = m.arena + e.off
        k = char_len(p[0])
        while k < e.len:
            a = piece_sid(m, p, k)
            b = piece_sid(m, p + k, e.len - k)
            if a != NO_SID and b != NO_SID:
                count += 1
                if m.pairs != NULL:
                    key = id_pair_key(a, b)
                    slot = pair_slot(key, m.pairs_mask)
                    while m.pairs[slot] != 0:
                        slot = (slot + 1) & m.pairs_mask
                    m.pairs[slot] = key << 32 | <uint64_t>e.rank << 16 | <uint32_t>e.merge_id
            k += char_len(p[k])
    return count


cdef int mark_whole(Model* m, Scratch* s) noexcept nogil:
    """Set ``whole`` on each piece merges may make whose text, merged alone as a segment,
    is that one piece (``_spm.pxd``, ``Entry``); -1 when memory runs out."""
    cdef uint64_t i
    cdef Entry* e
    cdef Py_ssize_t count
    cdef const Entry* found
    for i in range(m.mask + 1):
        e = &m.table[i]
        if e.len == 0 or e.merge_id < 0 or e.id == m.unk_id:
            continue
        if scratch_reserve(s, e.len) < 0:
            return -1
        memcpy(s.norm, m.arena + e.off, e.len)
        count = symbolize(m, s, s.norm, e.len)
        if count <= SCAN_MAX:
            merge_scan(m, s, count)
        elif merge(m, s, count, False) < 0:
            return -1
        if s.sym[0].next == -1 and (s.sym[0].length & ~FROZEN) == e.len:
            found = lookup(m, s.norm, e.len)
            e.whole = found == e
    return 0


cdef class SpmCore:
    """The native core of ``SentencePieceBPE`` for a model without unused pieces.

    Built from ``fastbpe.reference.sentencepiece.SpmTables``; ``encode(text)`` and
    ``encode_batch(texts, num_threads)`` take str (valid UTF-8: the caller has fixed
    lone surrogates) and give what ``fastbpe.reference.sentencepiece.encode`` gives."""

    cdef Model m
    cdef Scratch scratch          # for encode(): calls hold the GIL, so one is enough
    cdef Scratch pool[POOL]       # for the jobs of encode_batch, warm from call to call
    cdef bint pool_busy           # a batch (without the GIL) is using the pool
    cdef Py_ssize_t n_shared      # ids below this have a shared int (fastbpe._idlists)
    cdef readonly object tables

    def __cinit__(self):
        memset(&self.m, 0, sizeof(Model))
        memset(&self.scratch, 0, sizeof(Scratch))
        memset(self.pool, 0, sizeof(self.pool))

    def __init__(self, tables):
        from fastbpe.reference.sentencepiece import BYTE, UNUSED, byte_piece, one_char_id, piece_id

        if any(kind == UNUSED for kind in tables.types):
            raise ValueError("the native core does not run models with unused pieces")
        merge_scores = {tables.scores[i] for i in tables.pieces.values()}
        if any(x != x for x in merge_scores):
            raise ValueError("the native core does not run models with NaN scores")
        ranks = {score: rank for rank, score in enumerate(sorted(merge_scores, reverse=True))}
        self.m.n_ranks = len(ranks)
        self.tables = tables
        texts = {}
        for piece in tables.pieces:
            texts[piece] = None
        for piece in tables.reserved:
            texts[piece] = None
        user = sorted(tables.user_defined, key=lambda p: (p.encode("utf-8")[0], -len(p.encode("utf-8"))))
        blobs = [p.encode("utf-8") for p in texts] + [p.encode("utf-8") for p in user]
        total = sum(len(b) for b in blobs)
        if total >= 2 ** 31:
            raise ValueError("the pieces' text is too large")
        cdef Py_ssize_t size = 1, i, n_pieces = len(texts)
        while size < 2 * n_pieces + 2:
            size *= 2
        self.m.arena = <unsigned char*>malloc(total + 1)
        self.m.table = <Entry*>table_alloc(size * sizeof(Entry))
        self.m.user_off = <uint32_t*>malloc((len(user) + 1) * sizeof(uint32_t))
        self.m.user_len = <uint32_t*>malloc((len(user) + 1) * sizeof(uint32_t))
        if self.m.arena == NULL or self.m.table == NULL or self.m.user_off == NULL or self.m.user_len == NULL:
            raise MemoryError()
        self.m.mask = size - 1
        self.m.max_whole = max((len(b) for b in blobs), default=0)
        cdef uint32_t off = 0
        cdef bytes b
        cdef uint64_t h, slot
        cdef int32_t merge_id
        for i, piece in enumerate(texts):
            b = blobs[i]
            memcpy(self.m.arena + off, <const char*>b, len(b))
            merge_id = tables.pieces.get(piece, -1)
            h = fbe_hash(self.m.arena + off, len(b))
            slot = h & self.m.mask
            while self.m.table[slot].len != 0:
                slot = (slot + 1) & self.m.mask
            self.m.table[slot].word = fbe_word(self.m.arena + off, len(b) if len(b) < 8 else 8)
            self.m.table[slot].off = off
            self.m.table[slot].len = len(b)
            self.m.table[slot].merge_id = merge_id
            self.m.table[slot].id = tables.reserved.get(piece, merge_id)
            self.m.table[slot].rank = ranks[tables.scores[merge_id]] if merge_id >= 0 else 0
            off += len(b)
        cdef int first = 0
        for i in range(257):
            self.m.user_first[i] = 0
        for i, piece in enumerate(user):
            b = blobs[n_pieces + i]
            memcpy(self.m.arena + off, <const char*>b, len(b))
            self.m.user_off[i] = off
            self.m.user_len[i] = len(b)
            self.m.user_first[b[0] + 1] += 1
            self.m.user_start[b[0]] = 1
            off += len(b)
        for i in range(256):   # counts -> starts
            self.m.user_first[i + 1] += self.m.user_first[i]
        self.m.unk_id = tables.unk_id
        for i in range(256):
            self.m.byte_ids[i] = piece_id(byte_piece(i), tables)
        self.m.byte_fallback = tables.byte_fallback
        self.m.add_dummy_prefix = tables.add_dummy_prefix
        self.m.remove_extra_whitespaces = tables.remove_extra_whitespaces
        self.m.escape_whitespaces = tables.escape_whitespaces
        self.m.treat_whitespace_as_suffix = tables.treat_whitespace_as_suffix
        self.m.space_mark = 0x2581 if tables.escape_whitespaces else 0x20
        wall_bits = walls(tables)
        self.m.wall = <uint8_t*>malloc(len(wall_bits))
        if self.m.wall == NULL:
            raise MemoryError()
        memcpy(self.m.wall, <const char*>wall_bits, len(wall_bits))
        pair_bits, other = joinable_pairs(tables)
        self.m.pair_bits = <uint8_t*>malloc(PAIR_BYTES)
        self.m.char_ids = <uint16_t*>malloc(DIRECT_CHARS * sizeof(uint16_t))
        if self.m.pair_bits == NULL or self.m.char_ids == NULL:
            raise MemoryError()
        memcpy(self.m.pair_bits, <const char*>pair_bits, PAIR_BYTES)
        for i in range(DIRECT_CHARS):
            self.m.char_ids[i] = NO_SID
        # the reference's ``one_char_id``: the one-character pieces, and with byte
        # fallback the one-byte characters that are no piece (their ``<0xXX>`` id)
        for piece in {*tables.pieces, *tables.reserved, *map(chr, range(0x80))}:
            one = one_char_id(piece, tables) if len(piece) == 1 else None
            if one is not None:     # else NO_SID (and beyond the BMP: not in the table)
                self.m.char_ids[ord(piece)] = one
        size = 1
        while size < 2 * len(other) + 2:
            size *= 2
        self.m.pair_table = <uint64_t*>calloc(size, sizeof(uint64_t))
        if self.m.pair_table == NULL:
            raise MemoryError()
        self.m.pair_mask = size - 1
        for packed in other:
            h = pair_key(packed >> 21, packed & 0x1FFFFF)
            slot = pair_slot(h, self.m.pair_mask)
            while self.m.pair_table[slot] != 0:
                slot = (slot + 1) & self.m.pair_mask
            self.m.pair_table[slot] = h
        self.id_pairs(tables)
        if self.m.pairs == NULL:    # long segments merge on text: their piece filter
            self.m.piece_filter = piece_filter(&self.m)
            if self.m.piece_filter == NULL:
                raise MemoryError()
        self.n_shared = shared_id_ints(len(tables.texts))
        if mark_whole(&self.m, &self.scratch) < 0:
            raise MemoryError()
        # encode()'s cache now, with the model: its megabytes are zeroed (and their pages
        # faulted in) at load, not inside the first call (measured on a fresh tokenizer:
        # 0.8 ms, ~20 ms when the process must take fresh pages from the OS)
        if slots_alloc(&self.scratch) < 0:
            raise MemoryError()

    cdef int id_pairs(self, tables) except -1:
        """The tables of merging on symbol ids (``_spm.pxd``, "Pairs on ids"), when the
        model's ids fit in 16 bits; else m.pairs stays NULL."""
        from fastbpe.reference.sentencepiece import symbol_ids

        sids = symbol_ids(tables)
        cdef Py_ssize_t n_sids = max(sids.values(), default=0) + 1, size, i
        cdef uint64_t key, slot
        if n_sids >= MAX_SIDS or len(tables.texts) >= MAX_SIDS:
            return 0
        singles = [(ord(ch), sid) for ch, sid in sids.items() if len(ch) == 1]
        size = 2
        while size < 2 * len(singles) + 2:
            size *= 2
        self.m.char_sid = <uint64_t*>calloc(size, sizeof(uint64_t))
        self.m.char_mask = size - 1
        self.m.small_sid = <uint16_t*>malloc(SMALL_CHARS * sizeof(uint16_t))
        self.m.sid_plain = <uint8_t*>calloc(len(tables.texts) // 8 + 1, 1)
        if self.m.char_sid == NULL or self.m.small_sid == NULL or self.m.sid_plain == NULL:
            raise MemoryError()
        self.m.n_texts = len(tables.texts)
        for i in range(SMALL_CHARS):
            self.m.small_sid[i] = NO_SID
        for c, sid in singles:
            i = small_char(&self.m, c)
            if i >= 0:
                self.m.small_sid[i] = sid
                continue
            slot = pair_slot(c + 1, self.m.char_mask)
            while self.m.char_sid[slot] != 0:
                slot = (slot + 1) & self.m.char_mask
            self.m.char_sid[slot] = <uint64_t>(c + 1) << 32 | <uint32_t>sid
        for piece, pid in tables.pieces.items():
            if piece not in tables.reserved:
                self.m.sid_plain[pid >> 3] |= 1 << (pid & 7)
        size = 2                    # the pairs (counted first), at a load of at most 1/2
        while size < 2 * fill_pairs(&self.m) + 2:
            size *= 2
        self.m.pairs = <uint64_t*>calloc(size, sizeof(uint64_t))
        if self.m.pairs == NULL:
            raise MemoryError()
        self.m.pairs_mask = size - 1
        fill_pairs(&self.m)
        self.m.pair_filter = <uint64_t*>calloc(ID_FILTER_BITS // 64, sizeof(uint64_t))
        if self.m.pair_filter == NULL:
            raise MemoryError()
        for i in range(size):
            if self.m.pairs[i]:
                key = id_filter_bit(self.m.pairs[i] >> 32)
                self.m.pair_filter[key >> 6] |= (<uint64_t>1) << (key & 63)
        return 0

    def _id_pairs(self):
        """Testing hook: the pairs on ids as ``{(id a, id b): merged id}`` (what
        ``fastbpe.reference.sentencepiece.merge_pairs`` gives), or None without them."""
        cdef uint64_t i, x, key
        if self.m.pairs == NULL:
            return None
        out = {}
        for i in range(self.m.pairs_mask + 1):
            x = self.m.pairs[i]
            if x:
                key = (x >> 32) - 1
                out[<uint32_t>(key >> 16), <uint32_t>(key & 0xFFFF)] = <uint32_t>(x & 0xFFFF)
        return out

    @property
    def merges_on_ids(self):
        """Whether short segments merge on symbol ids (``_spm.pxd``, "Pairs on ids"): the
        model's ids fit in 16 bits."""
        return self.m.pairs != NULL

    def __dealloc__(self):
        cdef int k
        free(self.m.wall)
        free(self.m.pair_table)
        free(self.m.pair_bits)
        free(self.m.char_ids)
        free(self.m.pairs)
        free(self.m.pair_filter)
        free(self.m.piece_filter)
        free(self.m.small_sid)
        free(self.m.char_sid)
        free(self.m.sid_plain)
        for k in range(POOL):
            scratch_free(&self.pool[k])
        free(self.m.arena)
        free(self.m.table)
        free(self.m.user_off)
        free(self.m.user_len)
        scratch_free(&self.scratch)

    cdef int encode_one(self, str text, I32Vec* out) except -1:
        """text's ids into out (the caller frees out.data)."""
        cdef Py_ssize_t n
        cdef const unsigned char* p = <const unsigned char*>PyUnicode_AsUTF8AndSize(text, &n)
        cdef int rc
        cdef Scratch own
        if n > MAX_TEXT_BYTES:
            raise ValueError(f"text of {n} UTF-8 bytes is too long (at most {MAX_TEXT_BYTES})")
        if n > 65536:   # without the GIL, so on a scratch of its own: another thread may call
            memset(&own, 0, sizeof(Scratch))
            with nogil:
                rc = spm_encode(&self.m, &own, p, n, out)
                scratch_free(&own)
        else:           # the shared scratch (and its cache of segments) is used under the GIL only
            rc = spm_encode(&self.m, &self.scratch, p, n, out)
        if rc < 0:
            raise MemoryError("out of memory while encoding")
        return 0

    def encode(self, str text):
        cdef I32Vec out
        memset(&out, 0, sizeof(I32Vec))
        try:
            self.encode_one(text, &out)
            return ids_list(&out, self.n_shared)
        finally:
            free(out.data)

    def encode_to_numpy(self, str text, dtype):
        """``encode(text)`` as a numpy array of dtype (uint16 or uint32: the caller checks
        that every id fits)."""
        cdef I32Vec out
        memset(&out, 0, sizeof(I32Vec))
        try:
            self.encode_one(text, &out)
            return ids_array(&out, 1, dtype, False)
        finally:
            free(out.data)

    def encode_batch(self, list texts, int num_threads):
        cdef Py_ssize_t n = len(texts), i
        cdef I32Vec* outs = <I32Vec*>calloc(n + 1, sizeof(I32Vec))
        cdef list lists
        if outs == NULL:
            raise MemoryError()
        try:
            self.run_batch(texts, num_threads, outs)
            collect_young_if_due()
            lists = [ids_list(&outs[i], self.n_shared, True) for i in range(n)]
            track_lists(lists)
            return lists
        finally:
            for i in range(n):
                free(outs[i].data)
            free(outs)

    def encode_batch_to_numpy(self, list texts, int num_threads, dtype):
        """``encode_batch`` as (ids, offsets): one flat numpy array of dtype (uint16 or
        uint32, checked by the caller) and int64 offsets, text i being
        ids[offsets[i]:offsets[i + 1]]; written from the native buffers, no lists."""
        cdef Py_ssize_t n = len(texts), i
        cdef I32Vec* outs = <I32Vec*>calloc(n + 1, sizeof(I32Vec))
        if outs == NULL:
            raise MemoryError()
        try:
            self.run_batch(texts, num_threads, outs)
            return ids_array(outs, n, dtype, True)
        finally:
            for i in range(n):
                free(outs[i].data)
            free(outs)

    cdef int run_batch(self, list texts, int num_threads, I32Vec* outs) except -1:
        """Each text's ids into outs[i], on up to num_threads threads (the caller frees
        each outs[i].data)."""
        cdef Py_ssize_t n = len(texts), i, total = 0, acc = 0, t
        cdef int k, n_thr
        cdef const unsigned char** ptrs = <const unsigned char**>malloc((n + 1) * sizeof(void*))
        cdef Py_ssize_t* lengths = <Py_ssize_t*>malloc((n + 1) * sizeof(Py_ssize_t))
        cdef Job* jobs = NULL
        cdef Runner runner
        cdef bint use_pool = False
        try:
            if ptrs == NULL or lengths == NULL:
                raise MemoryError()
            for i in range(n):
                ptrs[i] = <const unsigned char*>PyUnicode_AsUTF8AndSize(texts[i], &lengths[i])
                if lengths[i] > MAX_TEXT_BYTES:
                    raise ValueError(f"text {i} of the batch has {lengths[i]} UTF-8 bytes: too long "
                                     f"(at most {MAX_TEXT_BYTES})")
                total += lengths[i]
            n_thr = <int>min(<Py_ssize_t>_batch_threads(num_threads, total), max(n, 1))
            jobs = <Job*>calloc(n_thr, sizeof(Job))
            if jobs == NULL:
                raise MemoryError()
            t = 0
            use_pool = not self.pool_busy   # under the GIL: one batch at a time uses the pool
            self.pool_busy = self.pool_busy or use_pool
            for k in range(n_thr):
                jobs[k].kept = &self.pool[k] if use_pool and k < POOL else NULL
                jobs[k].model = &self.m
                jobs[k].texts = ptrs
                jobs[k].lengths = lengths
                jobs[k].outs = outs
                jobs[k].first = t
                if k == n_thr - 1:
                    t = n
                else:   # up to about (k + 1) / n_thr of the bytes, at least one text
                    while t < n and (t == jobs[k].first or acc + lengths[t] <= total * (k + 1) // n_thr):
                        acc += lengths[t]
                        t += 1
                jobs[k].last = t
            runner.payload = jobs
            runner.begin = NULL
            runner.run = run_one
            runner.end = NULL
            runner.n_jobs = n_thr
            runner.notify = False
            try:
                with nogil:
                    run_jobs(&runner, n_thr)
            finally:
                if use_pool:
                    self.pool_busy = False
            for k in range(n_thr):
                if jobs[k].error:
                    raise MemoryError("out of memory while encoding")
            return 0
        finally:
            free(ptrs)
            free(lengths)
            free(jobs)
