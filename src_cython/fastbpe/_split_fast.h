/* Shared by fastbpe._pretokenize and fastbpe._encode, as plain C so that the encoder's
 * chunk loop can inline it: the ASCII run skipper of the scalar splitter, and the part
 * of o200k's window splitter that a chunk loop runs for every chunk (fbpe_win_take).
 * Windows are filled in _split_fill.h, by _pretokenize only.
 */
#ifndef FASTBPE_SPLIT_FAST_H
#define FASTBPE_SPLIT_FAST_H

#include <string.h>
#include <stdint.h>
#include "_unicode_tables.h"

#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define FBPE_SWAR 1
#else
#define FBPE_SWAR 0
#endif
#define FBPE_ONES 0x0101010101010101ULL
#define FBPE_HIGH 0x8080808080808080ULL

/* Word-at-a-time skipping of ASCII letter runs: words are the most common chunks, and
   testing 8 bytes per step removes most per-byte branches (and their mispredictions at
   the end of every word). Byte-order dependent, so only on little-endian GCC/Clang; the
   byte loop after it finishes (or replaces) the job everywhere.
   End of the run from i of ASCII bytes b with lo <= (b | fold) <= hi (fold is 0 or
   0x20, the bit that makes ASCII letters lower case); stops at any byte >= 0x80. */
static inline Py_ssize_t fbpe_ascii_range_end(const unsigned char *t, Py_ssize_t i,
                                              Py_ssize_t end, unsigned lo, unsigned hi,
                                              unsigned fold) {
#if FBPE_SWAR
    while (end - i >= 8) {
        uint64_t x, y, ge_lo, gt_hi, stop;
        memcpy(&x, t + i, 8);
        /* 7-bit bytes, so the additions below never carry into the next byte. */
        y = (x & ~FBPE_HIGH) | (FBPE_ONES * fold);
        ge_lo = y + FBPE_ONES * (0x80u - lo);       /* high bit: y >= lo */
        gt_hi = y + FBPE_ONES * (0x7Fu - hi);       /* high bit: y > hi */
        stop = ~(ge_lo & ~gt_hi & ~x) & FBPE_HIGH;  /* high bit: byte ends the run */
        if (stop) return i + (__builtin_ctzll(stop) >> 3);
        i += 8;
    }
#endif
    while (i < end) {
        unsigned b = t[i];
        if (b >= 0x80u || (b | fold) < lo || (b | fold) > hi) break;
        i++;
    }
    return i;
}

/* ---------------------------------------------------------------------------------
 * o200k by window masks
 *
 * The scalar splitter (_o200k in _pretokenize.pyx) decides one chunk at a time, and
 * most of its time goes to branches that the predictor gets wrong: which kind of chunk
 * starts here, where the word ends. A window instead holds all chunk starts of the 64
 * bytes from a chunk start, computed at once as a bit mask (_split_fill.h says how and
 * why they are exact); a chunk loop reads them off with count-trailing-zeros, without
 * a branch on the text. Where a window decides nothing, the scalar splitter does.
 * -------------------------------------------------------------------------------- */

#define FBPE_MARGIN 4         /* bytes before an unhandled char that no start may use */
#define FBPE_SCALAR_LOG 8     /* after misses, up to 2**8 - 1 chunks go to the scalar splitter */
#define FBPE_WIN_GOOD 16      /* a window that decides fewer bytes is a miss */

typedef struct {
    Py_ssize_t base;          /* text offset of the window's byte 0 */
    uint64_t starts;          /* bit k: a chunk starts at base + k (all decided) */
    int scalar_left;          /* chunks to leave to the scalar splitter before refilling */
    int misses;               /* windows in a row that decided under FBPE_WIN_GOOD bytes */
} FbpeWin;

/* A window that holds nothing yet (call before a segment's first chunk). */
static inline void fbpe_win_reset(FbpeWin *win) {
    win->base = -64;
    win->starts = 0;
    win->scalar_left = 0;
    win->misses = 0;
}

/* The next chunk start after p in the window (p: a chunk start), or -1 if the window
   has decided none: then fbpe_o200k_refill (in _pretokenize) takes over. */
static inline Py_ssize_t fbpe_win_take(const FbpeWin *win, Py_ssize_t p) {
    uint64_t off = (uint64_t)(p - win->base), rest;
    if (off >= 63) return -1;
    rest = win->starts & ~((2ull << off) - 1);
    return rest ? win->base + __builtin_ctzll(rest) : -1;
}

#endif
