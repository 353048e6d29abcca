/* The seeded table's entries and their atomic 16-byte accesses (see _seed_table.pxd).

   An entry is 16 bytes: the chunk's zero-padded word (chunks of 3..8 bytes) and a value
   word: up to 3 ids of 19 bits (bits 0-56), their count (57-58), the chunk's length
   (59-62) and a "seed" flag (63: written at load, never replaced). An empty entry is
   all zeros: its length field is 0, so it matches no chunk.

   Exact under concurrency: every read and write of an entry is ONE aligned 16-byte
   access (movdqa, forced by inline asm so that the compiler cannot split it into two
   8-byte ones), which Intel and AMD guarantee atomic on CPUs that have AVX (Intel SDM
   vol. 3A, 9.1.1; AMD APM vol. 2, 7.3.2). So a reader sees an entry as some writer
   wrote it, never half of two, and every entry ever written maps a chunk to its own
   ids. fbe_seed_cpu_ok() says whether this CPU gives that guarantee; without it the
   table is not built. */
#ifndef FBE_SEED_TABLE_H
#define FBE_SEED_TABLE_H
#include <stdint.h>

#define FBE_SEED_WAYS 4                       /* entries per 64-byte bucket */
#define FBE_SEED_ID_BITS 19
#define FBE_SEED_ID_MASK ((1ull << FBE_SEED_ID_BITS) - 1)
#define FBE_SEED_COUNT_SHIFT 57
#define FBE_SEED_LEN_SHIFT 59
#define FBE_SEED_LEN_MASK (15ull << FBE_SEED_LEN_SHIFT)
#define FBE_SEED_FLAG (1ull << 63)

typedef struct { uint64_t k, v; } __attribute__((aligned(16))) fbe_seed_entry;

static inline int fbe_seed_cpu_ok(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx");
#else
    return 0;
#endif
}

#if defined(__x86_64__)
#include <emmintrin.h>
typedef __m128i fbe_seed_word;        /* one entry as loaded: a 16-byte register */

static inline fbe_seed_word fbe_seed_load(const fbe_seed_entry* e) {
    fbe_seed_word r;
    __asm__ volatile("movdqa %1, %0" : "=x"(r) : "m"(*e));
    return r;
}

static inline void fbe_seed_store(fbe_seed_entry* e, uint64_t k, uint64_t v) {
    __m128i x = _mm_set_epi64x((long long)v, (long long)k);
    __asm__ volatile("movdqa %1, %0" : "=m"(*e) : "x"(x));
}

static inline uint64_t fbe_seed_lo(fbe_seed_word x) { return (uint64_t)_mm_cvtsi128_si64(x); }
static inline uint64_t fbe_seed_hi(fbe_seed_word x) {
    return (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(x, x));
}
#else
/* Other CPUs: no 16-byte atomicity is known, fbe_seed_cpu_ok() is 0 and no table is
   built, so these never run; they let the module compile (aarch64 and the rest). */
typedef fbe_seed_entry fbe_seed_word;
static inline fbe_seed_word fbe_seed_load(const fbe_seed_entry* e) { return *e; }
static inline void fbe_seed_store(fbe_seed_entry* e, uint64_t k, uint64_t v) { e->k = k; e->v = v; }
static inline uint64_t fbe_seed_lo(fbe_seed_word x) { return x.k; }
static inline uint64_t fbe_seed_hi(fbe_seed_word x) { return x.v; }
#endif

/* The value of the bucket's entry for word w of a chunk of n bytes, or 0. Branch-free:
   all four entries are loaded and compared, and the match selected by masks (two
   entries of one key hold the same ids, so OR-ing them is harmless). */
static inline uint64_t fbe_seed_find(const fbe_seed_entry* b, uint64_t w, uint64_t n) {
    uint64_t len = n << FBE_SEED_LEN_SHIFT, r = 0;
    for (int j = 0; j < FBE_SEED_WAYS; j++) {
        fbe_seed_word x = fbe_seed_load(&b[j]);
        uint64_t k = fbe_seed_lo(x), v = fbe_seed_hi(x);
        uint64_t hit = (uint64_t)0 - (uint64_t)((k == w) & ((v & FBE_SEED_LEN_MASK) == len));
        r |= v & hit;
    }
    return r;
}

/* Append the ids of value r (a hit) at out[0..3): three stores whatever the count (the
   caller has room for 3), returns the count. */
static inline uint64_t fbe_seed_emit(uint64_t r, uint32_t* out) {
    out[0] = (uint32_t)(r & FBE_SEED_ID_MASK);
    out[1] = (uint32_t)((r >> FBE_SEED_ID_BITS) & FBE_SEED_ID_MASK);
    out[2] = (uint32_t)((r >> (2 * FBE_SEED_ID_BITS)) & FBE_SEED_ID_MASK);
    return (r >> FBE_SEED_COUNT_SHIFT) & 3;
}

/* The value word of ids[0:count] (1 <= count <= 3, each id < 2^19) for a chunk of n
   bytes (3..8), or 0 if they do not fit. */
static inline uint64_t fbe_seed_value(const uint32_t* ids, uint64_t count, uint64_t n,
                                      int seed) {
    uint64_t v = 0;
    if (count < 1 || count > 3 || n < 3 || n > 8) return 0;
    for (uint64_t i = 0; i < count; i++) {
        if (ids[i] > FBE_SEED_ID_MASK) return 0;
        v |= (uint64_t)ids[i] << (FBE_SEED_ID_BITS * i);
    }
    return v | (count << FBE_SEED_COUNT_SHIFT) | (n << FBE_SEED_LEN_SHIFT)
             | (seed ? FBE_SEED_FLAG : 0);
}

/* Put (w, v) in bucket b: over an entry of the same chunk (a seed only if v is one),
   else in an empty entry, else over a chunk that is not a seed, starting at way
   `start` (the caller's hash bits: random replacement). Returns 0 if every entry is
   a seed of another chunk. Racing writers may pick the same entry or write one chunk
   twice: every state an entry can be in is a whole entry of some writer. */
static inline int fbe_seed_put(fbe_seed_entry* b, uint64_t w, uint64_t v, unsigned start) {
    int empty = -1, same = -1, other = -1;
    uint64_t len = v & FBE_SEED_LEN_MASK;
    for (int j = 0; j < FBE_SEED_WAYS; j++) {
        fbe_seed_word x = fbe_seed_load(&b[j]);
        uint64_t k = fbe_seed_lo(x), ev = fbe_seed_hi(x);
        if (ev == 0) { if (empty < 0) empty = j; }
        else if (k == w && (ev & FBE_SEED_LEN_MASK) == len) same = j;
    }
    if (same >= 0) {
        fbe_seed_word x = fbe_seed_load(&b[same]);
        if ((fbe_seed_hi(x) & FBE_SEED_FLAG) && !(v & FBE_SEED_FLAG)) return 1;
        fbe_seed_store(&b[same], w, v);
        return 1;
    }
    if (empty >= 0) { fbe_seed_store(&b[empty], w, v); return 1; }
    for (unsigned i = 0; i < FBE_SEED_WAYS; i++) {
        unsigned j = (start + i) & (FBE_SEED_WAYS - 1);
        if (!(fbe_seed_hi(fbe_seed_load(&b[j])) & FBE_SEED_FLAG)) { other = (int)j; break; }
    }
    if (other < 0) return 0;
    fbe_seed_store(&b[other], w, v);
    return 1;
}
#endif
