/* The plain-byte scan of the JSON Lines reader: finds the next byte of a JSON string
   that is not printable ASCII (a quote, a backslash, a control or non-ASCII byte), 16 or
   8 bytes at a time. */
#ifndef FASTBPE_FBE_JSON_PLAIN_H
#define FASTBPE_FBE_JSON_PLAIN_H
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#define FBPE_ONES 0x0101010101010101ULL
#define FBPE_HIGHS 0x8080808080808080ULL

/* The high bit of each byte of w that is not plain (printable ASCII other than '"'
   and '\'), and maybe of bytes after one (the borrows only run upwards from a true
   hit): zero iff all 8 bytes are plain, and the lowest bit set is exact. */
static inline uint64_t fbpe_special8(uint64_t w) {
    uint64_t q = w ^ (FBPE_ONES * 0x22), b = w ^ (FBPE_ONES * 0x5C);
    return (((w - FBPE_ONES * 0x20) & ~w) | ((q - FBPE_ONES) & ~q) | ((b - FBPE_ONES) & ~b) | w) & FBPE_HIGHS;
}

/* Index of the lowest marked byte of an 8-byte mask (loaded little-endian); 0 where
   that is not known to hold, so the caller's byte loop finds it. */
static inline int fbpe_first8(uint64_t m) {
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return __builtin_ctzll(m) >> 3;
#else
    (void)m;
    return 0;
#endif
}

/* The first index >= p of s[:e] that is not plain, or a later one with fewer than 8
   bytes left; with out != NULL the bytes passed are copied to out + *o (which moves
   on with p), whole blocks of 16 or 8 at a time, so out is written up to 15 bytes
   ahead, never past out + *o + (e - p). */
static inline Py_ssize_t fbpe_plain_run(const unsigned char* s, Py_ssize_t p, Py_ssize_t e,
                                        unsigned char* out, Py_ssize_t* o) {
    Py_ssize_t start = p;
    uint64_t w, m;
    int k = -1;
#if defined(__SSE2__) && defined(__GNUC__)
    const __m128i quote = _mm_set1_epi8(0x22), backslash = _mm_set1_epi8(0x5C);
    const __m128i space = _mm_set1_epi8(0x20);
    while (p + 16 <= e) {
        __m128i x = _mm_loadu_si128((const __m128i*)(s + p));
        /* signed: bytes >= 0x80 are negative, so one compare finds them and < 0x20 */
        __m128i bad = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)),
                                   _mm_cmplt_epi8(x, space));
        int mask = _mm_movemask_epi8(bad);
        if (out) _mm_storeu_si128((__m128i*)(out + *o + (p - start)), x);
        if (mask) { k = __builtin_ctz(mask); p += k; break; }
        p += 16;
    }
    if (k < 0)
#endif
    while (p + 8 <= e) {
        memcpy(&w, s + p, 8);
        m = fbpe_special8(w);
        if (out) memcpy(out + *o + (p - start), &w, 8);
        if (m) { p += fbpe_first8(m); break; }
        p += 8;
    }
    if (out) *o += p - start;
    return p;
}
#endif /* FASTBPE_FBE_JSON_PLAIN_H */
