/* The scan for special-token candidates (see fastbpe/_specials.pyx). */
#ifndef FASTBPE_FBE_FIND_PAIR_H
#define FASTBPE_FBE_FIND_PAIR_H
#include <Python.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
/* The first i >= start with p[i] == b0 and p[i + 1] == b1 (i + 1 < n), or n: the
   candidates for special tokens, which all start with the same two bytes in
   tiktoken's encodings ("<|"). 16 positions a step; memchr for "<" alone stops at
   every tag of HTML or XML. */
static Py_ssize_t fbe_find_pair(const unsigned char* p, Py_ssize_t start, Py_ssize_t n,
                                int b0, int b1) {
    Py_ssize_t i = start;
#ifdef __SSE2__
    const __m128i v0 = _mm_set1_epi8((char)b0), v1 = _mm_set1_epi8((char)b1);
    while (i + 17 <= n) {      /* reads p[i .. i + 16] */
        __m128i a = _mm_loadu_si128((const __m128i*)(p + i));
        __m128i b = _mm_loadu_si128((const __m128i*)(p + i + 1));
        unsigned m = (unsigned)_mm_movemask_epi8(
            _mm_and_si128(_mm_cmpeq_epi8(a, v0), _mm_cmpeq_epi8(b, v1)));
        if (m)
            return i + __builtin_ctz(m);
        i += 16;
    }
#endif
    for (; i + 1 < n; i++)
        if (p[i] == b0 && p[i + 1] == b1)
            return i;
    return n;
}

#endif
