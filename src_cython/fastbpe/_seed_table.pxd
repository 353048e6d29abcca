"""The seeded table (issue 41, item 2): one per encoder, shared by every call and
thread, holding the ids of chunks of 3..8 bytes: seeded at load with every token of
that length, then every chunk of at most 3 tokens that a call merged. Bounded: its size
is fixed when it is built (``Tuning.seed_table_kb``, see ``seed_table_build``), and a
chunk that finds its bucket full replaces one that is not a seed.

Entries are 16 bytes, four to a 64-byte bucket (``include/fbe_seed_table.h``: the
layout, the atomic accesses and why they make every read exact under concurrent
writes, threads or ``fork``). The block loop (``_chunk_block``) prefetches a chunk's
bucket in its first phase and asks it in the second, before the thread's chunk cache
and in place of the vocabulary's lookup.

Other cores can pre-seed their own (bytes -> ids) entries with ``seed_table_put``
(seed=True) after ``seed_table_build``: e.g. pieces whose ids are not their own token
under a pipeline's rules. A seed is never replaced by a chunk seen later.
"""
from libc.stdint cimport int64_t, uint32_t, uint64_t

cdef extern from "fbe_seed_table.h" nogil:
    ctypedef struct fbe_seed_entry:
        uint64_t k
        uint64_t v
    const int SEED_WAYS "FBE_SEED_WAYS"
    int fbe_seed_cpu_ok() noexcept
    uint64_t fbe_seed_find(const fbe_seed_entry* b, uint64_t w, uint64_t n) noexcept
    uint64_t fbe_seed_emit(uint64_t r, uint32_t* out) noexcept
    uint64_t fbe_seed_value(const uint32_t* ids, uint64_t count, uint64_t n, int seed) noexcept
    int fbe_seed_put(fbe_seed_entry* b, uint64_t w, uint64_t v, unsigned start) noexcept

cdef enum:
    SEED_MIN_LEN = 3          # shorter chunks take bpe_chunk_short
    SEED_MAX_LEN = 8          # the key is the chunk's zero-padded word


cdef struct SeedTable:
    fbe_seed_entry* entries   # n_buckets * SEED_WAYS entries; NULL: no table
    uint64_t mask             # n_buckets - 1
    Py_ssize_t n_seeds        # tokens seeded at load


cdef inline fbe_seed_entry* seed_bucket(const SeedTable* t, uint64_t h) noexcept nogil:
    """The bucket of a chunk of hash h (chunk_key's): a prefetch target."""
    return &t.entries[((h >> 32) & t.mask) * SEED_WAYS]


cdef inline bint seed_len_ok(Py_ssize_t n) noexcept nogil:
    return SEED_MIN_LEN <= n <= SEED_MAX_LEN


cdef inline void seed_admit(const SeedTable* t, uint64_t w, uint64_t h, Py_ssize_t n,
                            const uint32_t* ids, Py_ssize_t count) noexcept nogil:
    """Remember ids[:count] as the ids of the chunk (word w, hash h, n bytes), if they
    fit an entry (at most 3 ids under 2^19); never over a seed."""
    cdef uint64_t v = fbe_seed_value(ids, count, n, 0)
    if v != 0:
        fbe_seed_put(seed_bucket(t, h), w, v, <unsigned>(h >> 28))


cdef int seed_table_build(SeedTable* t, const unsigned char* arena, Py_ssize_t n_tokens,
                          const uint32_t* lengths, const uint32_t* ids,
                          const int64_t* offsets, Py_ssize_t max_kb) noexcept nogil
    # Build t for these tokens (arena order; offsets from the decode table): 4 entries
    # per seed, a power of two, at most max_kb KiB. 0 (t.entries NULL:
    # no table when max_kb is 0, the CPU lacks the atomic 16-byte accesses, or there are
    # no seeds), or -1 out of memory.
cdef void seed_table_free(SeedTable* t) noexcept nogil
cdef bint seed_table_put(const SeedTable* t, const unsigned char* p, Py_ssize_t n,
                         const uint32_t* ids, Py_ssize_t count, bint seed) noexcept nogil
    # Put (p[:n] -> ids[:count]) in the table; False if it does not fit an entry or the
    # bucket holds only other seeds.
