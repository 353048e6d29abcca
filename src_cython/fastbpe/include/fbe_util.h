/* Small C helpers the kernels share: unaligned loads, the hash of short byte strings
   (a 64x64->128 multiply folded), short compares, table allocation on huge pages,
   a vectorizable min and a prefetch. All static inline: every module that includes
   this gets its own copy, so calls across modules cost nothing. */
#ifndef FASTBPE_FBE_UTIL_H
#define FASTBPE_FBE_UTIL_H
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
static inline uint64_t fbe_load64(const unsigned char* p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint64_t fbe_load32(const unsigned char* p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t fbe_fold(uint64_t a, uint64_t b) {
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}
/* Hash of a short byte string: 8-byte words folded by multiplication, the tail read
   as (possibly overlapping) 4-byte or single-byte loads; the length is mixed in first
   so overlapping tail reads of different lengths cannot collide trivially. */
static inline uint64_t fbe_hash(const unsigned char* p, size_t n) {
    uint64_t h = 0x6a09e667f3bcc909ull ^ ((uint64_t)n * 0x9e3779b97f4a7c15ull);
    while (n >= 8) {
        h = fbe_fold(h ^ fbe_load64(p), 0xbb67ae8584caa73bull);
        p += 8; n -= 8;
    }
    uint64_t t;
    if (n >= 4) t = fbe_load32(p) | (fbe_load32(p + n - 4) << 32);
    else if (n > 0) t = (uint64_t)p[0] | ((uint64_t)p[n >> 1] << 8) | ((uint64_t)p[n - 1] << 16);
    else t = 0;
    return fbe_fold(h ^ t ^ 0x3c6ef372fe94f82bull, 0xa54ff53a5f1d36f1ull);
}
/* The n <= 8 bytes at p as a little-endian word, zero-padded, never reading past
   p + n: two overlapping 4-byte loads cover 4..7 bytes. */
static inline uint64_t fbe_word(const unsigned char* p, size_t n) {
    if (n >= 8) return fbe_load64(p);
    if (n >= 4) return fbe_load32(p) | (fbe_load32(p + n - 4) << ((n - 4) * 8));
    uint64_t w = p[0];
    if (n > 1) w |= (uint64_t)p[1] << 8;
    if (n > 2) w |= (uint64_t)p[2] << 16;
    return w;
}
/* a[:n] == b[:n] for 1 <= n <= 24 in at most three word compares, inline (a libc
   memcmp call costs more than the compare); loads stay inside both strings. */
static inline int fbe_equal_short(const unsigned char* a, const unsigned char* b, size_t n) {
    if (n < 8) return fbe_word(a, n) == fbe_word(b, n);
    if (fbe_load64(a) != fbe_load64(b)) return 0;
    if (n > 16 && fbe_load64(a + 8) != fbe_load64(b + 8)) return 0;
    return fbe_load64(a + n - 8) == fbe_load64(b + n - 8);
}
/* fbe_word for 1 <= n <= 8 when at least 8 bytes can be read at p (a padded copy):
   one load and a mask instead of a branch on the length. */
static inline uint64_t fbe_word_padded(const unsigned char* p, size_t n) {
    return fbe_load64(p) & (~0ull >> (64 - 8 * n));
}
static inline uint64_t fbe_hash_word(uint64_t w, size_t n) {
    return fbe_fold(w ^ 0x3c6ef372fe94f82bull, 0xa54ff53a5f1d36f1ull + 2 * (uint64_t)n);
}
#include <sys/mman.h>
/* Zeroed memory for a lookup table. Tables of megabytes are read at random, so with
   4 KiB pages nearly every probe also misses the TLB: ask for transparent huge
   pages (a hint; harmless where unsupported). free() releases it. */
static void* fbe_table_alloc(size_t size) {
    void* p = NULL;
    size_t huge = (size_t)1 << 21;
    if (size >= huge) {
        size_t rounded = (size + huge - 1) & ~(huge - 1);
        if (posix_memalign(&p, huge, rounded) != 0) return NULL;
#ifdef MADV_HUGEPAGE
        madvise(p, rounded, MADV_HUGEPAGE);/* A heap slot past the heap's size (fastbpe._merge_heap): never the least. */
#define FBE_HEAP_EMPTY 0xFFFFFFFFFFFFFFFFull
/* Chunk-cache entries of pure BPE results (merge_cached) hash with this salt: for the
   same bytes their tag differs from bpe_chunk's, whose results can differ. */
#define FBE_PURE_SALT 0x9ddfea08eb382d69ull

#endif
        memset(p, 0, rounded);
        return p;
    }
    return calloc(1, size ? size : 1);
}
/* Lowest value of a[0:n] (n >= 1): branch-free, so the compiler vectorizes it. */
static inline uint32_t fbe_min_u32(const uint32_t* a, size_t n) {
    uint32_t m = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) m = a[i] < m ? a[i] : m;
    return m;
}
static inline void fbe_prefetch(const void* p) { __builtin_prefetch(p, 0, 3); }

/* "No such token": larger than every rank, so the min-scans skip it for free. */
#define FBE_NO_RANK 0xFFFFFFFFu
/* A heap slot past the heap's size (fastbpe._merge_heap): never the least. */
#define FBE_HEAP_EMPTY 0xFFFFFFFFFFFFFFFFull
/* Chunk-cache entries of pure BPE results (merge_cached) hash with this salt: for the
   same bytes their tag differs from bpe_chunk's, whose results can differ. */
#define FBE_PURE_SALT 0x9ddfea08eb382d69ull

#endif
