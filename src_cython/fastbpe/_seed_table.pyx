"""Building the seeded table (see ``_seed_table.pxd``), and its testing hooks."""
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memset
from posix.stdlib cimport posix_memalign

from fastbpe._common cimport fbe_hash_word, fbe_word, table_alloc

#: Whether this CPU makes aligned 16-byte loads and stores atomic (AVX): without it no
#: encoder builds a seeded table.
SEED_CPU_OK = bool(fbe_seed_cpu_ok())


cdef int seed_table_build(SeedTable* t, const unsigned char* arena, Py_ssize_t n_tokens,
                          const uint32_t* lengths, const uint32_t* ids,
                          const int64_t* offsets, Py_ssize_t max_kb) noexcept nogil:
    """Seed every token of SEED_MIN_LEN..SEED_MAX_LEN bytes. Sized at 4 entries per seed
    (a bucket of 4 then holds one seed on average, and 3 ways for chunks seen), a power
    of two, at most max_kb KiB (at least one bucket). Tests build tables of a few
    buckets, where most seeds find no room and chunks seen replace each other at every
    turn: the ids must not change."""
    cdef Py_ssize_t i, n_seeds = 0
    cdef uint64_t entries = SEED_WAYS, cap
    t.entries = NULL
    t.mask = 0
    t.n_seeds = 0
    if max_kb <= 0 or not fbe_seed_cpu_ok():
        return 0
    for i in range(n_tokens):
        n_seeds += seed_len_ok(lengths[i])
    if n_seeds == 0:
        return 0
    cap = (<uint64_t>max_kb << 10) // sizeof(fbe_seed_entry)
    while entries < 4 * <uint64_t>n_seeds and entries * 2 <= cap:
        entries *= 2
    while entries > cap and entries > SEED_WAYS:
        entries //= 2
    # a bucket is one 64-byte line (table_alloc aligns tables of 2 MiB or more to their
    # huge pages; smaller ones are aligned here)
    cdef void* mem = NULL
    if entries * sizeof(fbe_seed_entry) >= (1 << 21):
        mem = table_alloc(entries * sizeof(fbe_seed_entry))
    elif posix_memalign(&mem, 64, entries * sizeof(fbe_seed_entry)) == 0:
        memset(mem, 0, entries * sizeof(fbe_seed_entry))
    else:
        mem = NULL
    t.entries = <fbe_seed_entry*>mem
    if t.entries == NULL:
        return -1
    t.mask = entries // SEED_WAYS - 1
    for i in range(n_tokens):
        if seed_len_ok(lengths[i]):
            t.n_seeds += seed_table_put(t, arena + offsets[i], lengths[i], &ids[i], 1, True)
    return 0


cdef void seed_table_free(SeedTable* t) noexcept nogil:
    free(t.entries)
    t.entries = NULL
    t.mask = 0
    t.n_seeds = 0


cdef bint seed_table_put(const SeedTable* t, const unsigned char* p, Py_ssize_t n,
                         const uint32_t* ids, Py_ssize_t count, bint seed) noexcept nogil:
    cdef uint64_t w, h, v
    if t.entries == NULL or not seed_len_ok(n):
        return False
    v = fbe_seed_value(ids, count, n, seed)
    if v == 0:
        return False
    w = fbe_word(p, n)
    h = fbe_hash_word(w, n)
    return fbe_seed_put(seed_bucket(t, h), w, v, <unsigned>(h >> 28)) != 0
