/* The scan for special-token candidates when the tokens do not share one first pair
   of bytes (see fastbpe/_specials.pyx; fbe_find_pair.h is the shared-pair case). */
#ifndef FASTBPE_FBE_FIND_FIRSTS_H
#define FASTBPE_FBE_FIND_FIRSTS_H
#include <Python.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* Whether bit (b0 << 8 | b1) of the 65536-bit table is set. */
static inline int fbe_pair_bit(const unsigned long long* pairs, unsigned b0, unsigned b1) {
    unsigned k = (b0 << 8) | b1;
    return (int)((pairs[k >> 6] >> (k & 63)) & 1);
}

/* Whether a token may start at p[i]: its pair bit (p[i], p[i + 1]); at the last byte
   any first byte of a token is a candidate (the comparison decides). The filter only
   drops positions where no token starts. */
static inline int fbe_pair_ok(const unsigned char* p, Py_ssize_t i, Py_ssize_t n,
                              const unsigned long long* pairs, const int* bucket) {
    if (i + 1 < n)
        return fbe_pair_bit(pairs, p[i], p[i + 1]);
    return bucket[p[i] + 1] > bucket[p[i]];
}

/* The first i >= start (i < n) where p[i] is one of the k (1..4) bytes f and the pair
   filter passes, or n. 16 positions a step: one compare per byte of f, OR, movemask;
   then the filter for each set bit (in HTML a "<" every few bytes: the bits, not a
   call per "<"). */
static Py_ssize_t fbe_find_firsts(const unsigned char* p, Py_ssize_t start, Py_ssize_t n,
                                  const unsigned char* f, int k,
                                  const unsigned long long* pairs, const int* bucket) {
    Py_ssize_t i = start;
#ifdef __SSE2__
    const __m128i v0 = _mm_set1_epi8((char)f[0]);
    const __m128i v1 = _mm_set1_epi8((char)f[k > 1 ? 1 : 0]);
    const __m128i v2 = _mm_set1_epi8((char)f[k > 2 ? 2 : 0]);
    const __m128i v3 = _mm_set1_epi8((char)f[k > 3 ? 3 : 0]);
    while (i + 16 <= n) {
        __m128i a = _mm_loadu_si128((const __m128i*)(p + i));
        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(a, v0), _mm_cmpeq_epi8(a, v1)),
                                 _mm_or_si128(_mm_cmpeq_epi8(a, v2), _mm_cmpeq_epi8(a, v3)));
        unsigned bits = (unsigned)_mm_movemask_epi8(m);
        while (bits) {
            Py_ssize_t j = i + __builtin_ctz(bits);
            if (fbe_pair_ok(p, j, n, pairs, bucket))
                return j;
            bits &= bits - 1;
        }
        i += 16;
    }
#endif
    for (; i < n; i++) {
        unsigned char c = p[i];
        if ((c == f[0] || c == f[k > 1 ? 1 : 0] || c == f[k > 2 ? 2 : 0] || c == f[k > 3 ? 3 : 0])
                && fbe_pair_ok(p, i, n, pairs, bucket))
            return i;
    }
    return n;
}

/* The same for any number of first bytes: the pair table alone, byte by byte. */
static Py_ssize_t fbe_find_pairs(const unsigned char* p, Py_ssize_t start, Py_ssize_t n,
                                 const unsigned long long* pairs, const int* bucket) {
    Py_ssize_t i = start;
    for (; i + 1 < n; i++)
        if (fbe_pair_bit(pairs, p[i], p[i + 1]))
            return i;
    if (i < n && bucket[p[i] + 1] > bucket[p[i]])
        return i;
    return n;
}

#endif
