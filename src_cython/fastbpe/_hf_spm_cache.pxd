"""The compact segment cache of ``fastbpe._hf_spm`` (issue 39, branch jsc39).

A segment (``_hf_spm.pxd``, step 2) merges to the same ids wherever it occurs
(``reference.hf_spm.segments``' corollary), so its ids are kept, keyed by its symbol
ids. The profile of the first cache (direct-mapped, 120-byte entries of up to 14
symbols, 3.75 MiB) put half its time on the load of the entry (a miss to L3), and the
segments it could not hold (longer than 14 symbols: Python's indentation runs before a
word, 4% of its segments) were merged on every occurrence, by far the dearest ones.

* **Entries of 16-bit words**: ``w[0]`` is the key's length | the result's << 8, then
  the key's ids and after them the result's. So only a model whose ids fit 16 bits uses
  it (``n_ids <= 65536``: Llama 2, Mistral, Phi-3, Yi; a larger one keeps the first
  cache), and a segment is kept when key and result fit the entry together. The key
  is compared whole: a hit is exact, never a hash match.
* **short** table (segments of up to ``SEG_SHORT_SYMS`` symbols): 32-byte entries (15
  slots: every segment of up to 7 symbols, a 14-symbol word merged to one id) in 2-way
  sets of one 64-byte cache line, 32,768 sets (2 MiB; 1 MB of English has ~15,000
  distinct segments; 16,384 sets, 1 MiB, lost ~4% of lookups to conflicts, 5% slower
  steady). A lookup reads one line; a new segment goes to way 0 and way 0's
  entry moves to way 1, so two hot segments hashing alike both stay.
* **long** table (up to ``SEG_LONG_SYMS``): 64-byte entries (31 slots), direct-mapped,
  2,048 of them (128 KiB; 1 MB of Python has ~1,800 distinct long segments).
* **Two kinds of key** share the tables: a segment's symbol ids (``SEG_IDS``) or,
  from the fused scan (``_hf_spm_scan.pxd``), its characters (``SEG_CHARS``, when each
  is one symbol: its own id); the kind is a bit of the length byte, so an id sequence
  never matches a character sequence.
* A miss keeps the key aside before merging (the merge rewrites the symbols), then
  ``seg_put`` stores key and result when they fit an entry; one that does not evicts
  nothing.

Functions are ``nogil`` over a ``SegCache*`` (no kernel object), so a thread with its
own cache can run them.
"""
from libc.stdint cimport int32_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy, memmove

cdef enum:
    SEG_SHORT_SYMS = 14       # the longest segment of the short table
    SEG_LONG_SYMS = 30        # the longest segment cached
    SEG_SHORT_WIDTH = 16      # 16-bit words of a short entry (32 bytes)
    SEG_LONG_WIDTH = 32       # of a long entry (64 bytes)
    SEG_SHORT_BITS = 15       # 32,768 sets of 2 short entries: 2 MiB
    SEG_LONG_BITS = 11        # 2,048 long entries: 128 KiB
    SEG_MAX_ID = 0xFFFF       # the largest id an entry holds
    SEG_IDS = 0               # an entry keyed by the segment's symbol ids
    SEG_CHARS = 0x80          # by its characters (_hf_spm_scan.pxd: one symbol each)


cdef struct SegCache:
    uint16_t* short_          # 64-byte aligned; NULL when the model's ids need more than 16 bits
    uint16_t* long_
    void* mem


cdef inline int seg_init(SegCache* c, Py_ssize_t n_ids) noexcept nogil:
    """The cache for a model of ``n_ids`` ids: none (``short_`` NULL) past 16-bit ids;
    -1 when out of memory."""
    cdef size_t short_bytes = (<size_t>2 * SEG_SHORT_WIDTH * 2) << SEG_SHORT_BITS
    c.mem = NULL
    c.short_ = c.long_ = NULL
    if n_ids > SEG_MAX_ID + 1:
        return 0
    c.mem = calloc(short_bytes + ((<size_t>SEG_LONG_WIDTH * 2) << SEG_LONG_BITS) + 64, 1)  # pages touched as used
    if c.mem == NULL:
        return -1
    c.short_ = <uint16_t*>((<uintptr_t>c.mem + 63) & ~(<uintptr_t>63))
    c.long_ = c.short_ + short_bytes // 2
    return 0


cdef inline void seg_free(SegCache* c) noexcept nogil:
    free(c.mem)
    c.mem = NULL
    c.short_ = c.long_ = NULL


cdef inline uint64_t seg_hash(const int32_t* key, uint32_t n) noexcept nogil:
    """A hash of the segment's ids, two at a time (half the multiply chain of one at a
    time); its top bits pick the set."""
    cdef uint64_t h = 0x9E3779B97F4A7C15ULL ^ n
    cdef uint64_t pair
    cdef uint32_t i = 0
    while i + 1 < n:
        memcpy(&pair, key + i, 8)
        h = (h ^ pair) * 0xBF58476D1CE4E5B9ULL
        i += 2
    if i < n:
        h = (h ^ <uint32_t>key[i]) * 0xBF58476D1CE4E5B9ULL
    return h ^ (h >> 31)


cdef inline uint16_t* seg_entries(SegCache* c, uint64_t h, uint32_t n, uint32_t* width, uint32_t* ways) noexcept nogil:
    """The set of a segment of ``n`` symbols (``2 <= n <= SEG_LONG_SYMS``) and hash
    ``h``: its first entry, the entries' width (16-bit words) and count; ``n`` past
    ``SEG_SHORT_SYMS`` (or a short one whose result does not fit, ``seg_store``): the
    long table's."""
    if n <= SEG_SHORT_SYMS:
        width[0] = SEG_SHORT_WIDTH
        ways[0] = 2
        return c.short_ + ((h >> (64 - SEG_SHORT_BITS)) * (2 * SEG_SHORT_WIDTH))
    width[0] = SEG_LONG_WIDTH
    ways[0] = 1
    return c.long_ + ((h >> (64 - SEG_LONG_BITS)) * SEG_LONG_WIDTH)


cdef inline bint seg_same(const uint16_t* e, const int32_t* key, uint32_t n, uint32_t tag) noexcept nogil:
    cdef uint32_t i
    if (e[0] & 0xFF) != (n | tag):
        return False
    for i in range(n):
        if e[1 + i] != <uint32_t>key[i]:
            return False
    return True


cdef inline int seg_get(const uint16_t* e, uint32_t width, uint32_t ways, const int32_t* key, uint32_t n,
                        uint32_t tag, int32_t* out) noexcept nogil:
    """The cached ids of segment ``key[:n]`` (keyed by ``tag``'s kind: ``SEG_IDS`` or
    ``SEG_CHARS``) from its set (``seg_entries``) written to ``out``: their count, -1
    when the set does not hold it."""
    cdef uint32_t i, w, n_out
    for w in range(ways):
        if seg_same(e, key, n, tag):
            n_out = e[0] >> 8
            for i in range(n_out):
                out[i] = e[1 + n + i]
            return <int>n_out
        e += width
    return -1


cdef inline void seg_put(uint16_t* e, uint32_t width, uint32_t ways, const int32_t* key, uint32_t n, uint32_t tag,
                         const int32_t* ids, uint32_t n_out) noexcept nogil:
    """Keep segment ``key[:n]`` (of kind ``tag``) -> ``ids[:n_out]`` in the set's first
    entry, the others moving one way down (the last is dropped), when key and result
    fit an entry together (else the set is left as it is: a segment that cannot be kept
    evicts nothing)."""
    cdef uint32_t i
    if 1 + n + n_out > width:
        return
    if ways > 1:
        memmove(e + width, e, (ways - 1) * width * sizeof(uint16_t))
    e[0] = <uint16_t>(n | tag | (n_out << 8))
    for i in range(n):
        e[1 + i] = <uint16_t>key[i]
    for i in range(n_out):
        e[1 + n + i] = <uint16_t>ids[i]


cdef inline int seg_find(SegCache* c, uint64_t h, const int32_t* key, uint32_t n, uint32_t tag,
                         int32_t* out) noexcept nogil:
    """``seg_get`` in the segment's table; a short segment that may not have fitted its
    entry (8+ symbols) is looked for in the long table too."""
    cdef uint32_t width, ways
    cdef uint16_t* e = seg_entries(c, h, n, &width, &ways)
    cdef int got = seg_get(e, width, ways, key, n, tag, out)
    if got < 0 and n <= SEG_SHORT_SYMS and 2 * n > SEG_SHORT_WIDTH - 1:
        e = seg_entries(c, h, SEG_LONG_SYMS, &width, &ways)
        got = seg_get(e, width, ways, key, n, tag, out)
    return got


cdef inline void seg_store(SegCache* c, uint64_t h, const int32_t* key, uint32_t n, uint32_t tag,
                           const int32_t* ids, uint32_t n_out) noexcept nogil:
    """``seg_put`` in the segment's table, or the long one when it does not fit a short entry."""
    cdef uint32_t width, ways
    cdef uint16_t* e = seg_entries(c, h, n, &width, &ways)
    if 1 + n + n_out > width:
        e = seg_entries(c, h, SEG_LONG_SYMS, &width, &ways)
    seg_put(e, width, ways, key, n, tag, ids, n_out)
