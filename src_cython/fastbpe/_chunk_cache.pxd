"""The chunk cache: a direct-mapped table of merged chunks of up to 24 bytes, one per
thread of a call (no locking).

Words recur (Zipf), and a hit replaces a whole merge loop of rank lookups, most of them
cache misses in a large vocabulary, by one compare. An encoder keeps up to
``Tuning.kept_chunk_caches`` caches (default and most CACHE_POOL, 512 KiB each) between
calls, warm (``new_chunk_cache``): a cache maps chunk bytes to that encoder's tokens,
which never change, so calls on short texts share what earlier calls merged. Lookups
are inline: they run for every chunk.

Decisions, measured (benchmarks/PERFORMANCE_NOTES.md, "Chunk cache"):

- One table per thread, not one shared by all: three shared designs (seqlocked lines
  with hit-count admission, gigatoken's open addressing, a table seeded with every
  token) were built and lost on distinct text when probed in the fused loop; their
  lines come from L3 or DRAM. Since issue 41 the block loop (``_chunk_block``)
  prefetches a block's lines before it probes any, and chunks of 3..8 bytes go to the
  encoder's seeded table (``_seed_table``) instead; this cache keeps the longer ones.
- Direct-mapped, and a miss always takes the line (no admission rule): simulated on
  ~2 KB documents, a second-chance bit raises the misses (cl100k English: whole-token
  misses 9.4% -> 9.6%, merges 3.9% -> 4.5%). Two ways per line, or 16-byte entries
  for chunks of up to 8 bytes (4x as many in the same memory: 9.4% -> 6.1%), cut the
  misses but measured within noise or worse in time.
"""
from libc.stdint cimport uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

from fastbpe._common cimport ERR_NOMEM, ERR_NONE, fbe_equal_short, fbe_load64, fbe_word
from fastbpe._out cimport OutBuf, out_grow

cdef extern from "fbe_util.h":
    # Entries of pure BPE results (merge_cached) hash with this salt: for the same bytes
    # their tag differs from bpe_chunk's, whose results can differ (whole-chunk lookup).
    const uint64_t PURE_SALT "FBE_PURE_SALT"

cdef enum:
    CACHE_KEY_MAX = 24
    CACHE_TOK_MAX = 8
    CACHE_ENTRIES = 8192
    CACHE_POOL = 16           # chunk caches an encoder keeps between calls


cdef struct CacheEntry:       # one 64-byte cache line
    uint32_t tag              # low half of the chunk's hash
    uint16_t length           # 0: empty
    uint16_t n_tokens
    unsigned char key[CACHE_KEY_MAX]
    uint32_t tokens[CACHE_TOK_MAX]


cdef inline CacheEntry* cache_line(CacheEntry* cache, uint64_t h) noexcept nogil:
    """The one line of the cache that may hold a chunk of hash h (a prefetch target:
    it depends on the hash alone)."""
    return &cache[(h >> 24) & (CACHE_ENTRIES - 1)]


cdef inline bint cache_get(CacheEntry* e, const unsigned char* p, Py_ssize_t n, uint64_t h,
                           OutBuf* out, int* rc) noexcept nogil:
    """On a hit in entry e, append its tokens to out (rc: ERR_NONE or ERR_NOMEM)."""
    if not (e.length == n and e.tag == <uint32_t>h and fbe_equal_short(e.key, p, n)):
        return False
    return cache_copy_out(e, out, rc)


cdef inline bint cache_get_word(CacheEntry* e, uint64_t w, Py_ssize_t n, uint64_t h,
                                OutBuf* out, int* rc) noexcept nogil:
    """cache_get for n <= 8 given w = fbe_word(p, n): keys that short are stored as
    that zero-padded word, so one compare decides, whatever the length."""
    if not (e.length == n and e.tag == <uint32_t>h and fbe_load64(e.key) == w):
        return False
    return cache_copy_out(e, out, rc)


cdef inline bint cache_copy_out(CacheEntry* e, OutBuf* out, int* rc) noexcept nogil:
    # copy all CACHE_TOK_MAX slots (a fixed size: two vector moves, no libc call) and
    # keep the first n_tokens
    if out.size + CACHE_TOK_MAX > out.cap and out_grow(out, out.size + CACHE_TOK_MAX) < 0:
        rc[0] = ERR_NOMEM
        return True
    memcpy(out.data + out.size, e.tokens, CACHE_TOK_MAX * sizeof(uint32_t))
    out.size += e.n_tokens
    rc[0] = ERR_NONE
    return True


cdef inline void cache_put(CacheEntry* e, const unsigned char* p, Py_ssize_t n, uint64_t h,
                           const OutBuf* out, Py_ssize_t before) noexcept nogil:
    """Remember out.data[before:out.size] as the tokens of p[:n] (if they fit)."""
    cdef uint64_t w
    if out.size - before > CACHE_TOK_MAX:
        return
    e.tag = <uint32_t>h
    e.length = <uint16_t>n
    e.n_tokens = <uint16_t>(out.size - before)
    if n <= 8:
        w = fbe_word(p, n)        # zero-padded: what cache_get_word compares
        memcpy(e.key, &w, 8)
    else:
        memcpy(e.key, p, n)
    memcpy(e.tokens, out.data + before, e.n_tokens * sizeof(uint32_t))


cdef CacheEntry* new_chunk_cache(void** pool) noexcept nogil
    # A cache for one thread (one from the encoder's pool of CACHE_POOL slots, else a
    # new one), or NULL if calloc failed, which just means no cache.
cdef void return_chunk_cache(void** pool, CacheEntry* c, Py_ssize_t kept) noexcept nogil
    # Give it back to the first `kept` slots of the pool (Tuning.kept_chunk_caches), or
    # free it when they are full.
