/* PEP 393 code points to UTF-8 (SSSE3 where the CPU has it, a plain loop otherwise).
   Holds static tables: include it from one module only (fastbpe._jobs). */
#ifndef FASTBPE_FBE_UTF8_H
#define FASTBPE_FBE_UTF8_H
#include <Python.h>
#include <stdint.h>
/* The UTF-8 of code point c >= 0x80 at d: the new end, or NULL for a surrogate. */
static inline unsigned char* fbe_put_multibyte(unsigned char* d, uint32_t c) {
    if (c < 0x800) {
        d[0] = (unsigned char)(0xC0 | (c >> 6));
        d[1] = (unsigned char)(0x80 | (c & 0x3F));
        return d + 2;
    }
    if (c < 0x10000) {
        if ((c & 0xF800) == 0xD800) return NULL;
        d[0] = (unsigned char)(0xE0 | (c >> 12));
        d[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        d[2] = (unsigned char)(0x80 | (c & 0x3F));
        return d + 3;
    }
    d[0] = (unsigned char)(0xF0 | (c >> 18));
    d[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
    d[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
    d[3] = (unsigned char)(0x80 | (c & 0x3F));
    return d + 4;
}
#define FBE_UTF8_SCALAR(T, from, to) \
    for (Py_ssize_t fbe_k = (from); fbe_k < (to); fbe_k++) { \
        uint32_t c = ((const T*)src)[fbe_k]; \
        if (c < 0x80) { *d++ = (unsigned char)c; continue; } \
        if ((d = fbe_put_multibyte(d, c)) == NULL) return NULL; \
    }
/* Code points to UTF-8, 8 at a time with SSSE3 (checked at run time: every x86-64
   CPU since about 2008 has it). Text mixes ASCII with other characters at random
   (Turkish words, CJK punctuation), so branching per character mispredicts once or
   twice per non-ASCII character; instead each lane's bytes are made side by side in
   a vector and one byte shuffle, from a table indexed by the lanes' lengths, packs
   them together. Blocks of 1- and 2-byte characters take one shuffle of 8 lanes;
   blocks with 3-byte characters two of 4 lanes; blocks with a surrogate (an error)
   or an astral character go one character at a time. Every block is stored with
   full 16-byte stores, which the caller's buffer (kind + 1 bytes per code point)
   has room for while the loops' bounds hold. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define FBE_UTF8_SSSE3 1
#include <tmmintrin.h>
static unsigned char fbe_utf8_shuf2[256][16];  /* bit j: lane j (of 8) is 2 bytes */
static unsigned char fbe_utf8_len2[256];
static unsigned char fbe_utf8_shuf3[256][16];  /* bit j: lane j (of 4) is 1 byte,
                                                  bit j + 4: it is 3 bytes */
static unsigned char fbe_utf8_len3[256];
static int fbe_utf8_cpu = 0;   /* this CPU has SSSE3 */
static void fbe_utf8_init(void) {
    for (int m = 0; m < 256; m++) {
        int k = 0;
        for (int j = 0; j < 8; j++) {
            fbe_utf8_shuf2[m][k++] = (unsigned char)(2 * j);
            if (m >> j & 1) fbe_utf8_shuf2[m][k++] = (unsigned char)(2 * j + 1);
        }
        fbe_utf8_len2[m] = (unsigned char)k;
        for (; k < 16; k++) fbe_utf8_shuf2[m][k] = 0x80;    /* zero fill */
        k = 0;
        for (int j = 0; j < 4; j++) {
            int len = (m >> j & 1) ? 1 : (m >> (j + 4) & 1) ? 3 : 2;
            for (int b = 0; b < len; b++) fbe_utf8_shuf3[m][k++] = (unsigned char)(4 * j + b);
        }
        fbe_utf8_len3[m] = (unsigned char)k;
        for (; k < 16; k++) fbe_utf8_shuf3[m][k] = 0x80;
    }
    __builtin_cpu_init();
    fbe_utf8_cpu = __builtin_cpu_supports("ssse3");
}
/* 4 code points below 0x10000, no surrogates, one per 32-bit lane: at most 12 bytes. */
__attribute__((target("ssse3")))
static inline unsigned char* fbe_utf8_four(__m128i c, unsigned char* d) {
    const __m128i m3f = _mm_set1_epi32(0x3F), c80 = _mm_set1_epi32(0x80);
    __m128i is1 = _mm_cmplt_epi32(c, c80);
    __m128i is3 = _mm_cmpgt_epi32(c, _mm_set1_epi32(0x7FF));
    __m128i last = _mm_or_si128(_mm_and_si128(c, m3f), c80);
    __m128i middle = _mm_or_si128(_mm_and_si128(_mm_srli_epi32(c, 6), m3f), c80);
    __m128i two = _mm_or_si128(_mm_or_si128(_mm_srli_epi32(c, 6), _mm_set1_epi32(0xC0)),
                               _mm_slli_epi32(last, 8));
    __m128i three = _mm_or_si128(_mm_or_si128(_mm_srli_epi32(c, 12), _mm_set1_epi32(0xE0)),
                                 _mm_or_si128(_mm_slli_epi32(middle, 8),
                                              _mm_slli_epi32(last, 16)));
    __m128i bytes = _mm_or_si128(
        _mm_and_si128(is1, c),
        _mm_or_si128(_mm_and_si128(is3, three),
                     _mm_andnot_si128(_mm_or_si128(is1, is3), two)));
    unsigned m = (unsigned)_mm_movemask_ps(_mm_castsi128_ps(is1))
               | ((unsigned)_mm_movemask_ps(_mm_castsi128_ps(is3)) << 4);
    _mm_storeu_si128((__m128i*)d, _mm_shuffle_epi8(
        bytes, _mm_loadu_si128((const __m128i*)fbe_utf8_shuf3[m])));
    return d + fbe_utf8_len3[m];
}
/* 8 code points below 0x10000, one per 16-bit lane (at most 24 bytes, written
   within 28): the new end, or NULL if a lane holds a surrogate. */
__attribute__((target("ssse3")))
static inline unsigned char* fbe_utf8_eight(__m128i v, unsigned char* d) {
    const __m128i zero = _mm_setzero_si128();
    __m128i top5 = _mm_and_si128(v, _mm_set1_epi16((short)0xF800));
    if (_mm_movemask_epi8(_mm_cmpeq_epi16(top5, zero)) != 0xFFFF) {
        if (_mm_movemask_epi8(_mm_cmpeq_epi16(top5, _mm_set1_epi16((short)0xD800))))
            return NULL;
        d = fbe_utf8_four(_mm_unpacklo_epi16(v, zero), d);
        return fbe_utf8_four(_mm_unpackhi_epi16(v, zero), d);
    }
    /* all below 0x800: lane = first byte | second byte << 8 */
    __m128i ascii = _mm_cmpeq_epi16(_mm_and_si128(v, _mm_set1_epi16((short)0xFF80)), zero);
    __m128i lead = _mm_or_si128(_mm_srli_epi16(v, 6), _mm_set1_epi16(0xC0));
    __m128i first = _mm_or_si128(_mm_and_si128(ascii, v), _mm_andnot_si128(ascii, lead));
    __m128i second = _mm_slli_epi16(_mm_and_si128(v, _mm_set1_epi16(0x3F)), 8);
    __m128i pairs = _mm_or_si128(_mm_or_si128(first, second),
                                 _mm_set1_epi16((short)0x8000));
    unsigned m = 0xFFu ^ (unsigned)_mm_movemask_epi8(_mm_packs_epi16(ascii, zero));
    _mm_storeu_si128((__m128i*)d, _mm_shuffle_epi8(
        pairs, _mm_loadu_si128((const __m128i*)fbe_utf8_shuf2[m])));
    return d + fbe_utf8_len2[m];
}
__attribute__((target("ssse3")))
static unsigned char* fbe_utf8_simd1(const uint8_t* src, Py_ssize_t n, unsigned char* d) {
    Py_ssize_t i = 0;
    const __m128i zero = _mm_setzero_si128();
    for (; n - i >= 16; i += 16) {           /* room: 32 bytes, 32 written at most */
        __m128i v = _mm_loadu_si128((const __m128i*)(src + i));
        _mm_storeu_si128((__m128i*)d, v);
        if (!_mm_movemask_epi8(v)) { d += 16; continue; }    /* all ASCII */
        d = fbe_utf8_eight(_mm_unpacklo_epi8(v, zero), d);   /* Latin-1: never NULL */
        d = fbe_utf8_eight(_mm_unpackhi_epi8(v, zero), d);
    }
    FBE_UTF8_SCALAR(uint8_t, i, n)
    return d;
}
__attribute__((target("ssse3")))
static unsigned char* fbe_utf8_simd2(const uint16_t* src, Py_ssize_t n, unsigned char* d) {
    Py_ssize_t i = 0;
    unsigned char* e;
    for (; n - i >= 16; i += 8) {            /* room: 48 bytes, 28 written at most */
        e = fbe_utf8_eight(_mm_loadu_si128((const __m128i*)(src + i)), d);
        if (e != NULL) { d = e; continue; }
        FBE_UTF8_SCALAR(uint16_t, i, i + 8)  /* returns NULL at the surrogate */
    }
    FBE_UTF8_SCALAR(uint16_t, i, n)
    return d;
}
__attribute__((target("ssse3")))
static unsigned char* fbe_utf8_simd4(const uint32_t* src, Py_ssize_t n, unsigned char* d) {
    Py_ssize_t i = 0;
    unsigned char* e;
    const __m128i bias = _mm_set1_epi32(0x8000), bias16 = _mm_set1_epi16((short)0x8000);
    for (; n - i >= 8; i += 8) {             /* room: 40 bytes, 28 written at most */
        __m128i a = _mm_loadu_si128((const __m128i*)(src + i));
        __m128i b = _mm_loadu_si128((const __m128i*)(src + i + 4));
        e = NULL;
        if (_mm_movemask_epi8(_mm_cmpeq_epi32(_mm_srli_epi32(_mm_or_si128(a, b), 16),
                                              _mm_setzero_si128())) == 0xFFFF) {
            /* all below 0x10000: narrow exactly (signed saturation never hits
               after the shift down by 0x8000) */
            __m128i v = _mm_xor_si128(_mm_packs_epi32(_mm_sub_epi32(a, bias),
                                                      _mm_sub_epi32(b, bias)), bias16);
            e = fbe_utf8_eight(v, d);
        }
        if (e != NULL) { d = e; continue; }
        FBE_UTF8_SCALAR(uint32_t, i, i + 8)  /* astral characters, or a surrogate */
    }
    FBE_UTF8_SCALAR(uint32_t, i, n)
    return d;
}
#define FBE_UTF8_PICK(k) (simd && fbe_utf8_cpu ? fbe_utf8_simd##k : fbe_utf8_scalar##k)

/* Checking bytes for UTF-8 16 at a time: the "lookup" algorithm of Keiser and Lemire,
   "Validating UTF-8 In Less Than One Instruction Per Byte" (Software: Practice and
   Experience, 2021). Each byte is classified by three 16-entry tables, on the high
   and low nibble of the byte before it and the high nibble of itself; each table
   entry is a set of error bits, and a pair of bytes is wrong iff some bit is in all
   three. What pairs cannot tell (a third or fourth byte where a continuation must or
   must not be) is checked from the bytes two and three back. This only skips ahead:
   it returns an offset s such that t[:s] is whole valid characters, at or before the
   first block that showed an error (or the end of the whole blocks); the plain check
   goes on from s and finds the exact offset, so a false alarm costs speed, never a
   result. */
#define FBE_U8_TOO_SHORT 0x01   /* a lead or ASCII followed by a lead... */
#define FBE_U8_TOO_LONG 0x02    /* ASCII followed by a continuation */
#define FBE_U8_OVERLONG_3 0x04  /* E0 80..9F */
#define FBE_U8_TOO_LARGE 0x08   /* F4 90..BF, F5..FF */
#define FBE_U8_SURROGATE 0x10   /* ED A0..BF */
#define FBE_U8_OVERLONG_2 0x20  /* C0, C1 */
#define FBE_U8_TOO_LARGE_1000 0x40  /* F5..FF 80..8F; shares its bit with: */
#define FBE_U8_OVERLONG_4 0x40  /* F0 80..8F */
#define FBE_U8_TWO_CONTS 0x80   /* a continuation after a continuation (a pair alone
                                   cannot tell whether that is wrong: see must23) */
__attribute__((target("ssse3")))
static Py_ssize_t fbe_utf8_skip_valid(const uint8_t* t, Py_ssize_t n) {
    const char TS = FBE_U8_TOO_SHORT, TL = FBE_U8_TOO_LONG, O3 = FBE_U8_OVERLONG_3,
        LG = FBE_U8_TOO_LARGE, SG = FBE_U8_SURROGATE, O2 = FBE_U8_OVERLONG_2,
        L1 = FBE_U8_TOO_LARGE_1000, O4 = FBE_U8_OVERLONG_4, TC = FBE_U8_TWO_CONTS;
    const char CARRY = TS | TL | TC;   /* the errors that do not depend on the low nibble */
    const __m128i first_high = _mm_setr_epi8(
        TL, TL, TL, TL, TL, TL, TL, TL,       /* 0___: ASCII */
        TC, TC, TC, TC,                       /* 10__: continuation */
        TS | O2,                              /* 1100 */
        TS,                                   /* 1101 */
        TS | O3 | SG,                         /* 1110 */
        TS | LG | L1 | O4);                   /* 1111 */
    const __m128i first_low = _mm_setr_epi8(
        CARRY | O3 | O2 | O4,                 /* ____0000 */
        CARRY | O2,                           /* ____0001 */
        CARRY, CARRY,                         /* ____001_ */
        CARRY | LG,                           /* ____0100 */
        CARRY | LG | L1, CARRY | LG | L1, CARRY | LG | L1,   /* ____0101, ____011_ */
        CARRY | LG | L1, CARRY | LG | L1, CARRY | LG | L1, CARRY | LG | L1,
        CARRY | LG | L1,                      /* ____1000 .. ____1100 */
        CARRY | LG | L1 | SG,                 /* ____1101 */
        CARRY | LG | L1, CARRY | LG | L1);    /* ____111_ */
    const __m128i second_high = _mm_setr_epi8(
        TS, TS, TS, TS, TS, TS, TS, TS,       /* 0___: ASCII */
        TL | O2 | TC | O3 | L1 | O4,          /* 1000 */
        TL | O2 | TC | O3 | LG,               /* 1001 */
        TL | O2 | TC | SG | LG,               /* 101_ */
        TL | O2 | TC | SG | LG,
        TS, TS, TS, TS);                      /* 11__: a lead */
    const __m128i nibble = _mm_set1_epi8(0x0F), zero = _mm_setzero_si128();
    /* a lead in the last three bytes of a block that needs bytes past it */
    const __m128i tail_max = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                           -1, (char)(0xF0 - 1), (char)(0xE0 - 1),
                                           (char)(0xC0 - 1));
    __m128i prev = zero, pending = zero;
    Py_ssize_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i in = _mm_loadu_si128((const __m128i*)(t + i)), err;
        if (_mm_movemask_epi8(in) == 0) {            /* ASCII: only the last block's end */
            if (_mm_movemask_epi8(_mm_cmpeq_epi8(pending, zero)) != 0xFFFF) break;
            prev = in;
            continue;
        }
        __m128i prev1 = _mm_alignr_epi8(in, prev, 15);
        __m128i sc = _mm_and_si128(
            _mm_and_si128(
                _mm_shuffle_epi8(first_high, _mm_and_si128(_mm_srli_epi16(prev1, 4), nibble)),
                _mm_shuffle_epi8(first_low, _mm_and_si128(prev1, nibble))),
            _mm_shuffle_epi8(second_high, _mm_and_si128(_mm_srli_epi16(in, 4), nibble)));
        /* must23: this byte is the third of a 3- or 4-byte char, or the fourth of a
           4-byte one, so it must be a continuation (0x80 set) -- and such a byte is
           exactly where TWO_CONTS may be set legitimately */
        __m128i third = _mm_subs_epu8(_mm_alignr_epi8(in, prev, 14), _mm_set1_epi8((char)(0xE0 - 0x80)));
        __m128i fourth = _mm_subs_epu8(_mm_alignr_epi8(in, prev, 13), _mm_set1_epi8((char)(0xF0 - 0x80)));
        __m128i must23 = _mm_and_si128(_mm_or_si128(third, fourth), _mm_set1_epi8((char)0x80));
        err = _mm_xor_si128(must23, sc);
        if (_mm_movemask_epi8(_mm_cmpeq_epi8(err, zero)) != 0xFFFF) break;
        pending = _mm_subs_epu8(in, tail_max);
        prev = in;
    }
    /* t[:i] is valid but for a last char that may run on past i: back to its start */
    Py_ssize_t s = i >= 4 ? i - 4 : 0;
    while (s < i && (t[s] & 0xC0) == 0x80) s++;
    return s;
}
#else
#define FBE_UTF8_SSSE3 0
static int fbe_utf8_cpu = 0;
static void fbe_utf8_init(void) {}
#define FBE_UTF8_PICK(k) fbe_utf8_scalar##k
static Py_ssize_t fbe_utf8_skip_valid(const uint8_t* t, Py_ssize_t n) { (void)t; (void)n; return 0; }
#endif
/* The plain loop per kind: other CPUs, and the twin the tests compare with. */
#define FBE_UTF8_SCALAR_FN(k, T) \
    static unsigned char* fbe_utf8_scalar##k(const T* src, Py_ssize_t n, unsigned char* d) { \
        FBE_UTF8_SCALAR(T, 0, n) \
        return d; \
    }
FBE_UTF8_SCALAR_FN(1, uint8_t)
FBE_UTF8_SCALAR_FN(2, uint16_t)
FBE_UTF8_SCALAR_FN(4, uint32_t)
/* UTF-8 of n code points of a PEP 393 buffer of the given kind (1, 2 or 4 bytes
   each) into dst, which has room for kind + 1 bytes per code point. Returns the
   length, or -1 at a lone surrogate. simd: use SSSE3 where this CPU has it (a Tuning
   field, so that tests can compare it with the plain loop). */
static Py_ssize_t fbe_to_utf8(const void* src, int kind, Py_ssize_t n, unsigned char* dst,
                              int simd) {
    unsigned char* d;
    if (kind == 1) d = FBE_UTF8_PICK(1)((const uint8_t*)src, n, dst);
    else if (kind == 2) d = FBE_UTF8_PICK(2)((const uint16_t*)src, n, dst);
    else d = FBE_UTF8_PICK(4)((const uint32_t*)src, n, dst);
    return d == NULL ? -1 : d - dst;
}

#endif
