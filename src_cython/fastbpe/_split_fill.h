/* Filling windows (see _split_fast.h); used by fastbpe._pretokenize only, which fills
 * the tables below once, at import (fbpe_win_init).
 *
 * What is shared by the patterns: the SSE2 helpers, the class table of two-byte chars,
 * the classes of three-byte chars (fbpe_win_three), and fbpe_win_refill (a new window at a chunk start, with the back-off for text that
 * windows decide little of). Each pattern's rules, and why they are exact, are in a
 * file of their own: _split_gpt2.h (fbpe_gpt2_starts), _split_cl100k.h
 * (fbpe_cl100k_starts), _split_o200k.h (fbpe_o200k_starts). A pattern has windows when
 * fbpe_win_pattern (_split_fast.h) says so and fbpe_win_starts below has its case.
 *
 * Every starts function keeps the same contract: t[base : base + 64] lies inside the
 * segment and a chunk starts at base; it returns a mask with bit 0 set and bit k set
 * only where a chunk starts at base + k for certain, whatever follows the window. A
 * start may depend on at most the two bytes after it, except where a file says why not
 * (so FBPE_MARGIN bytes before anything unhandled, or before the window's end, are cut).
 *
 * After changing any rules, run tools/fuzz_windows.py --pattern NAME for some minutes as
 * well as the tests.
 *
 * Two builds of every starts function, chosen at run time (never a global -march): the
 * SSE2 one (x86-64's baseline, compiled as the module is) and, on GCC/Clang for x86, one
 * compiled for AVX2 + BMI1/2 (`#pragma GCC target` / `clang attribute` around a second
 * inclusion of the pattern files, with fbpe_win_bytes classifying 32 bytes per compare).
 * fbpe_win_set_simd picks one once, at import, from what the CPU says it has
 * (__builtin_cpu_supports); both compute the same masks, bit for bit, so the rules and
 * their proofs are written once. There is no AVX-512 build: no machine we test on has
 * it, and untested code does not ship.
 */
#ifndef FASTBPE_SPLIT_FILL_H
#define FASTBPE_SPLIT_FILL_H

#include <stdint.h>
#include "_unicode_tables.h"
#include "_split_fast.h"

#define FBPE_MARGIN 4         /* bytes before an unhandled char that no start may use */
#define FBPE_SCALAR_LOG 8     /* after misses, up to 2**8 - 1 chunks go to the scalar splitter */
#define FBPE_WIN_GOOD 16      /* a window that decides fewer bytes is a miss */

/* SSE2 is part of x86-64 (little-endian, as the masks assume); elsewhere, or without
   GCC/Clang builtins, there are no windows and every chunk goes to the scalar splitter. */
#if defined(__GNUC__) && defined(__SSE2__)
#define FBPE_WINDOWS 1
#include <emmintrin.h>
#else
#define FBPE_WINDOWS 0
#endif

#if FBPE_WINDOWS

/* For every code point below U+0800, the masks its chars go to: 1 W only, 2 U only,
   4 O (no letter, number, space or mark), 8 whitespace, 16 unhandled (both U and W,
   or a number) -- o200k's classes -- and 32 \p{L}, 64 \p{N} (GPT-2's and cl100k's:
   marks are O there). Filled once by fbpe_win_init. */
static unsigned char fbpe_kind2[2048];

static void fbpe_win_init(void) {
    uint32_t cp;
    for (cp = 0; cp < 2048; cp++) {
        uint16_t c = fbpe_class_of(cp);
        unsigned uw = c & (FBPE_U | FBPE_W), k = 0;
        if (uw == FBPE_W) k |= 1;
        if (uw == FBPE_U) k |= 2;
        if (!(c & (FBPE_L | FBPE_N | FBPE_WS | FBPE_U | FBPE_W))) k |= 4;
        if (c & FBPE_WS) k |= 8;
        if (uw == (FBPE_U | FBPE_W) || (c & FBPE_N)) k |= 16;
        k |= (c & FBPE_L ? 32u : 0u) | (c & FBPE_N ? 64u : 0u);   /* GPT-2's and cl100k's */
        fbpe_kind2[cp] = (unsigned char)k;
    }
}

static inline uint64_t fbpe_mm(__m128i m) { return (uint64_t)(unsigned)_mm_movemask_epi8(m); }

/* x in [lo, hi] for unsigned bytes (lo <= hi < 0x80) */
static inline __m128i fbpe_in_range(__m128i x, int lo, int hi) {
    __m128i xs = _mm_xor_si128(x, _mm_set1_epi8((char)0x80));
    return _mm_and_si128(_mm_cmpgt_epi8(xs, _mm_set1_epi8((char)((lo - 1) ^ 0x80))),
                         _mm_cmplt_epi8(xs, _mm_set1_epi8((char)((hi + 1) ^ 0x80))));
}

static inline __m128i fbpe_eq(__m128i x, int c) { return _mm_cmpeq_epi8(x, _mm_set1_epi8((char)c)); }

/* The byte classes of a window that every pattern's rules start from, bit k for byte k
   of w[0 : 64]. */
typedef struct {
    uint64_t letter, digit, sp, crm, wsa, apos, slash, hi, b6, b5, b4;
} FbpeWinBytes;

static inline void fbpe_win_bytes(const unsigned char *w, FbpeWinBytes *b) {
    int k;
    b->letter = b->digit = b->sp = b->crm = b->wsa = b->apos = b->slash = b->hi = b->b6 = b->b5 = b->b4 = 0;
    for (k = 0; k < 4; k++) {
        __m128i x = _mm_loadu_si128((const __m128i *)(w + 16 * k));
        int sh = 16 * k;
        /* ASCII letters are the bytes that fall in a..z with the case bit (0x20) set */
        b->letter |= fbpe_mm(fbpe_in_range(_mm_or_si128(x, _mm_set1_epi8(0x20)), 97, 122)) << sh;
        b->digit |= fbpe_mm(fbpe_in_range(x, 48, 57)) << sh;
        b->sp |= fbpe_mm(fbpe_eq(x, 32)) << sh;
        b->crm |= fbpe_mm(_mm_or_si128(fbpe_eq(x, 10), fbpe_eq(x, 13))) << sh;
        b->wsa |= fbpe_mm(_mm_or_si128(fbpe_eq(x, 32), fbpe_in_range(x, 9, 13))) << sh;
        b->apos |= fbpe_mm(fbpe_eq(x, 39)) << sh;
        b->slash |= fbpe_mm(fbpe_eq(x, 47)) << sh;
        b->hi |= fbpe_mm(x) << sh;                               /* bit 7 of each byte */
        b->b6 |= fbpe_mm(_mm_slli_epi16(x, 1)) << sh;            /* bit 6 */
        b->b5 |= fbpe_mm(_mm_slli_epi16(x, 2)) << sh;            /* bit 5 */
        b->b4 |= fbpe_mm(_mm_slli_epi16(x, 3)) << sh;            /* bit 4 */
    }
}

/* \p{L}, \p{N} and \s of the two-byte chars whose lead bytes are the bits of ok2 (both
   of their bits in each mask), from fbpe_kind2: GPT-2's and cl100k's classes. */
static inline void fbpe_win_two_lnw(const unsigned char *w, uint64_t ok2, uint64_t *l2,
                                    uint64_t *n2, uint64_t *ws2) {
    uint64_t m, l = 0, n = 0, ws = 0;
    for (m = ok2; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        unsigned c = fbpe_kind2[((w[i] & 0x1Fu) << 6) | (w[i + 1] & 0x3Fu)];
        uint64_t two = 3ull << i;
        l |= two * ((c >> 5) & 1);
        n |= two * ((c >> 6) & 1);
        ws |= two * ((c >> 3) & 1);
    }
    *l2 = l; *n2 = n; *ws2 = ws;
}

/* The classes of the three-byte chars whose lead bytes are the bits of ok3 (all three
   of their bits in each mask): \p{L}, \p{N}, \s and the U and W bits of
   _unicode_tables.h (o200k's), from fbpe_class_of per char. */
typedef struct { uint64_t l, n, ws, u, w; } FbpeWinThree;

static inline void fbpe_win_three(const unsigned char *w, uint64_t ok3, FbpeWinThree *r) {
    uint64_t m;
    r->l = r->n = r->ws = r->u = r->w = 0;
    for (m = ok3; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        const unsigned char *q = w + i;
        unsigned c = fbpe_class_of(((q[0] & 0x0Fu) << 12) | ((q[1] & 0x3Fu) << 6)
                                   | (q[2] & 0x3Fu));
        uint64_t three = 7ull << i;
        r->l |= three * ((c & FBPE_L) != 0);
        r->n |= three * ((c & FBPE_N) != 0);
        r->ws |= three * ((c & FBPE_WS) != 0);
        r->u |= three * ((c & FBPE_U) != 0);
        r->w |= three * ((c & FBPE_W) != 0);
    }
}

/* Bits at the first byte of the chars whose last byte is a bit of x (chars of one, two
   or three bytes; cs: the char starts). */
static inline uint64_t fbpe_win_char_first(uint64_t x, uint64_t cs) {
    return (x & cs) | ((x & ~cs & (cs << 1)) >> 1) | ((x & ~cs & ~(cs << 1)) >> 2);
}

/* Whitespace runs with CR chars, then other whitespace, then CR chars again: \s*[\r\n]
   (cl100k's (6), o200k's \s*[\r\n]+) takes a run up to its last CR char, so the other
   whitespace after the first CR chars starts no chunk. So a run of other whitespace
   after a CR char (T: its first byte; the carry of A + T runs to the char after it) is
   unhandled from its start when what follows it is a CR char, or may be one: an
   unhandled byte (U+3000 is whitespace), or the end of the window. Returns unhandled
   with those first bytes added; WS and crm are the whitespace and CR bytes. */
static inline uint64_t fbpe_win_cr_runs(uint64_t WS, uint64_t crm, uint64_t unhandled) {
    uint64_t A = WS & ~crm, T = A & (crm << 1);
    uint64_t Z = (A + T) & ~A & (crm | unhandled);   /* the byte after such a run */
    if (((A + T) ^ A) & A & (1ull << 63))            /* the last such run reaches the end */
        unhandled |= 1ull << (63 - __builtin_clzll(T));
    while (Z) {                                      /* rare: mark the run's first byte */
        int e = __builtin_ctzll(Z);
        uint64_t below = T & ((1ull << e) - 1);      /* never empty: a T run ends at e */
        if (below) unhandled |= 1ull << (63 - __builtin_clzll(below));
        Z &= Z - 1;
    }
    return unhandled;
}

/* The starts a window keeps: at most bit `last`, and at least `margin` bytes before the
   first unhandled byte (bit 0, the window's own start, always). */
static inline uint64_t fbpe_win_keep(uint64_t starts, uint64_t unhandled, int margin, int last) {
    int lim = (unhandled ? __builtin_ctzll(unhandled) : 64) - margin;
    if (lim > last) lim = last;
    return starts & (lim >= 0 ? (2ull << lim) - 1 : 1);
}

/* Bit k: byte k of the window leads a char of three bytes (1110xxxx). The "plain"
   builds below define it as 0, and the compiler folds every three-byte term away. */
#define FBPE_LEAD3(b) ((b).hi & (b).b6 & (b).b5 & ~(b).b4)

#include "_split_o200k.h"
#include "_split_cl100k.h"
#include "_split_gpt2.h"

/* The plain builds, for windows without a byte of 0xE0 or more (fbpe_win_refill tells):
   the same rules with FBPE_LEAD3 0, so the three-byte terms cost nothing in ASCII and
   Latin text (they cost ~10% of the split of English when computed: 2026-12-04). */
#undef FBPE_LEAD3
#define FBPE_LEAD3(b) 0ull
#define FBPE_O200K_NAME fbpe_o200k_starts_plain
#define FBPE_CL100K_NAME fbpe_cl100k_starts_plain
#define FBPE_GPT2_NAME fbpe_gpt2_starts_plain
#include "_split_builds.h"
#undef FBPE_LEAD3
#define FBPE_LEAD3(b) ((b).hi & (b).b6 & (b).b5 & ~(b).b4)

/* The AVX2 build (see the top of this file). Needs the target attribute/pragma of GCC >= 5
   or Clang, on x86; everywhere else only the SSE2 build exists. */
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__clang__) || __GNUC__ >= 5)
#define FBPE_AVX2 1
#include <immintrin.h>
#if defined(__clang__)
#pragma clang attribute push (__attribute__((target("avx2,bmi,bmi2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,bmi,bmi2")
#endif

static inline uint64_t fbpe_mm256(__m256i m) {
    return (uint64_t)(uint32_t)_mm256_movemask_epi8(m);
}

/* fbpe_in_range, 32 bytes at a time */
static inline __m256i fbpe_in_range256(__m256i x, int lo, int hi) {
    __m256i xs = _mm256_xor_si256(x, _mm256_set1_epi8((char)0x80));
    return _mm256_and_si256(_mm256_cmpgt_epi8(xs, _mm256_set1_epi8((char)((lo - 1) ^ 0x80))),
                            _mm256_cmpgt_epi8(_mm256_set1_epi8((char)((hi + 1) ^ 0x80)), xs));
}

static inline __m256i fbpe_eq256(__m256i x, int c) {
    return _mm256_cmpeq_epi8(x, _mm256_set1_epi8((char)c));
}

/* fbpe_win_bytes with two 32-byte halves: the same masks, bit for bit. */
static inline void fbpe_win_bytes_avx2(const unsigned char *w, FbpeWinBytes *b) {
    int k;
    b->letter = b->digit = b->sp = b->crm = b->wsa = b->apos = b->slash = b->hi = b->b6 = b->b5 = b->b4 = 0;
    for (k = 0; k < 2; k++) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(w + 32 * k));
        int sh = 32 * k;
        b->letter |= fbpe_mm256(fbpe_in_range256(_mm256_or_si256(x, _mm256_set1_epi8(0x20)), 97, 122)) << sh;
        b->digit |= fbpe_mm256(fbpe_in_range256(x, 48, 57)) << sh;
        b->sp |= fbpe_mm256(fbpe_eq256(x, 32)) << sh;
        b->crm |= fbpe_mm256(_mm256_or_si256(fbpe_eq256(x, 10), fbpe_eq256(x, 13))) << sh;
        b->wsa |= fbpe_mm256(_mm256_or_si256(fbpe_eq256(x, 32), fbpe_in_range256(x, 9, 13))) << sh;
        b->apos |= fbpe_mm256(fbpe_eq256(x, 39)) << sh;
        b->slash |= fbpe_mm256(fbpe_eq256(x, 47)) << sh;
        b->hi |= fbpe_mm256(x) << sh;
        b->b6 |= fbpe_mm256(_mm256_slli_epi16(x, 1)) << sh;
        b->b5 |= fbpe_mm256(_mm256_slli_epi16(x, 2)) << sh;
        b->b4 |= fbpe_mm256(_mm256_slli_epi16(x, 3)) << sh;
    }
}

/* The pattern files twice more, their functions renamed *_avx2 and *_avx2_plain and
   compiled for AVX2 (the helpers above this block inline into them as they are). */
#define fbpe_win_bytes fbpe_win_bytes_avx2
#define FBPE_O200K_NAME fbpe_o200k_starts_avx2
#define FBPE_CL100K_NAME fbpe_cl100k_starts_avx2
#define FBPE_GPT2_NAME fbpe_gpt2_starts_avx2
#include "_split_builds.h"
#undef FBPE_LEAD3
#define FBPE_LEAD3(b) 0ull
#define FBPE_O200K_NAME fbpe_o200k_starts_avx2_plain
#define FBPE_CL100K_NAME fbpe_cl100k_starts_avx2_plain
#define FBPE_GPT2_NAME fbpe_gpt2_starts_avx2_plain
#include "_split_builds.h"
#undef FBPE_LEAD3
#define FBPE_LEAD3(b) ((b).hi & (b).b6 & (b).b5 & ~(b).b4)
#undef fbpe_win_bytes
#undef fbpe_o200k_starts
#undef fbpe_cl100k_starts
#undef fbpe_gpt2_starts

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#else
#define FBPE_AVX2 0
#endif

/* Which build fbpe_win_starts runs: 0 SSE2, 1 AVX2. Set by fbpe_win_set_simd only. */
static int fbpe_win_simd = 0;

/* Run the AVX2 build (want = 1) if this build has it and the CPU runs it, else the SSE2
   one (want = 0, or no AVX2 here); returns the level now in force (-1: no windows in
   this build at all). Called at import and by tests, while no window is being filled. */
static int fbpe_win_set_simd(int want) {
#if FBPE_AVX2
    __builtin_cpu_init();
    fbpe_win_simd = want == 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2");
#else
    (void)want;
    fbpe_win_simd = 0;
#endif
    return fbpe_win_simd;
}

/* Bit k: byte k of w[0 : 64] is 0xE0 or more (leads a char of three or four bytes). */
static inline uint64_t fbpe_wide64(const unsigned char *w) {
    __m128i lead3 = _mm_set1_epi8((char)0xE0);
    uint64_t m = 0;
    int k;
    for (k = 0; k < 4; k++) {
        __m128i x = _mm_loadu_si128((const __m128i *)(w + 16 * k));
        m |= fbpe_mm(_mm_cmpeq_epi8(_mm_max_epu8(x, lead3), x)) << (16 * k);
    }
    return m;
}

/* The decided chunk starts of the window at base, for a pattern with windows; `three`:
   the window has a byte of 0xE0 or more (else its plain build runs: the same masks).
   Patterns: SPLIT_GPT2 0, CL100K 1, O200K 2, CL100K_DIGIT1 3 (cl100k's rules with one
   digit a chunk); the digit run is a constant at each call, so each inlined copy keeps one. */
#define FBPE_WIN_CASES(GPT2, CL100K, O200K)            \
    switch (pattern) {                                  \
    case 0: return GPT2(t, base);                       \
    case 1: return CL100K(t, base, 3);                  \
    case 3: return CL100K(t, base, 1);                  \
    case 2: return O200K(t, base);                      \
    default: return 1;   /* decides nothing: scalar splitter */ \
    }
static inline uint64_t fbpe_win_starts(int pattern, const unsigned char *t, Py_ssize_t base,
                                       int three) {
#if FBPE_AVX2
    if (fbpe_win_simd) {                            /* the same value for every window */
        if (three)
            FBPE_WIN_CASES(fbpe_gpt2_starts_avx2, fbpe_cl100k_starts_avx2, fbpe_o200k_starts_avx2)
        FBPE_WIN_CASES(fbpe_gpt2_starts_avx2_plain, fbpe_cl100k_starts_avx2_plain, fbpe_o200k_starts_avx2_plain)
    }
#endif
    if (three)
        FBPE_WIN_CASES(fbpe_gpt2_starts, fbpe_cl100k_starts, fbpe_o200k_starts)
    FBPE_WIN_CASES(fbpe_gpt2_starts_plain, fbpe_cl100k_starts_plain, fbpe_o200k_starts_plain)
}
#undef FBPE_WIN_CASES

#else

static void fbpe_win_init(void) {}
static int fbpe_win_set_simd(int want) { (void)want; return -1; }   /* no windows */
static inline uint64_t fbpe_win_starts(int pattern, const unsigned char *t, Py_ssize_t base,
                                       int three) {
    (void)pattern; (void)t; (void)base; (void)three;
    return 1;
}

#endif

#if FBPE_WINDOWS
/* The lead byte from which fbpe_win_refill leaves a window to the scalar splitter
   unclassified when such a byte is near its start. All three patterns' masks handle
   three-byte chars (o200k's but its letters that are both U and W: Lo, Lm and marks),
   so that curly quotes, dashes, ellipses, Latin Extended Additional and Indic letters
   no longer end a window; but the whole encode of ~2 KB Chinese documents did not
   gain from windows deciding CJK text, although the split alone did (2026-12-04,
   in-process A/B, steady, the test at 0xF0 over 0xE0: cl100k 0.97x, split 1.05x
   faster; GPT-2 0.92x, split 1.2x faster; when GPT-2's three-byte rules came in,
   0.955x). Why is not known. So lead bytes from 0xE3 on (U+3000 on: CJK, kana,
   Hangul, fullwidth forms) near a window's start send it to the scalar splitter;
   below are the general punctuation, Latin Extended Additional, Greek Extended and
   the Indic scripts. */
#define FBPE_WIDE_LEAD 0xE3
#endif

/* After fbpe_win_take found nothing at p and no chunks are left to the scalar splitter
   (split_next in _pretokenize.pxd counts those): the end of the chunk at p from a new
   window there, or -1 when the scalar splitter must decide it. */
static Py_ssize_t fbpe_win_refill(FbpeWin *win, int pattern, const unsigned char *t,
                                  Py_ssize_t p, Py_ssize_t end) {
#if FBPE_WINDOWS
    uint64_t rest, wide, near;
    if (end - p < 64) {
        /* the segment's last bytes: no window will fit again, so the rest of its
           chunks go to the scalar splitter without coming back here */
        win->scalar_left = 1 << 30;
        return -1;
    }
    win->base = p;
    /* A char from lead byte FBPE_WIDE_LEAD on (CJK and the like: see there) in the first
       FBPE_WIN_GOOD + FBPE_MARGIN bytes sends the window to the scalar splitter, told
       from the compares of fbpe_wide64 instead of classifying all 64 bytes: in CJK text
       most windows are such. Without any byte of 0xE0 or more, the plain build runs. */
    wide = fbpe_wide64(t + p);
    for (near = wide & ((1ull << (FBPE_WIN_GOOD + FBPE_MARGIN)) - 1); near; near &= near - 1)
        if (t[p + __builtin_ctzll(near)] >= FBPE_WIDE_LEAD) break;
    win->starts = near ? 1 : fbpe_win_starts(pattern, t, p, wide != 0);
    /* A window that decided less than FBPE_WIN_GOOD bytes (an unhandled char near its
       start) counts as a miss: after it, the next 0, 1, 3, 7, ... up to
       2**FBPE_SCALAR_LOG - 1 chunks go to the scalar splitter before the next try, so
       that text in another script does not pay for a window at every chunk. */
    if (63 - __builtin_clzll(win->starts) >= FBPE_WIN_GOOD) {
        win->misses = 0;
    } else {
        win->scalar_left = (1 << win->misses) - 1;
        if (win->misses < FBPE_SCALAR_LOG) win->misses++;
    }
    rest = win->starts & ~1ull;
    return rest ? p + __builtin_ctzll(rest) : -1;
#else
    (void)win; (void)pattern; (void)t; (void)p; (void)end;
    return -1;
#endif
}

#endif
