/* Shared by fastbpe._pretokenize, ._encode and ._train, as plain C so that their chunk
 * loops can inline it: the part of the window splitters that runs for every chunk
 * (fbpe_win_take). Windows are filled in _split_fill.h, by _pretokenize only.
 */
#ifndef FASTBPE_SPLIT_FAST_H
#define FASTBPE_SPLIT_FAST_H

#include <stdint.h>
#include "fbe_program_scan.h"

/* ---------------------------------------------------------------------------------
 * Splitting by window masks
 *
 * A scalar splitter (_o200k in _pretokenize.pyx, say) decides one chunk at a time, and
 * most of its time goes to branches that the predictor gets wrong: which kind of chunk
 * starts here, where the word ends. A window instead holds all chunk starts of the 64
 * bytes from a chunk start, computed at once as a bit mask (_split_fill.h says how and
 * why they are exact); a chunk loop reads them off with count-trailing-zeros, without
 * a branch on the text. Where a window decides nothing, the scalar splitter does.
 * -------------------------------------------------------------------------------- */

/* The patterns that have window rules, as bits of their SPLIT_* ids (_pretokenize.pxd:
   GPT-2 0, cl100k 1, o200k 2, cl100k with one digit a chunk 3). split_next takes the
   window only for these. */
#define FBPE_WIN_PATTERNS ((1u << 0) | (1u << 1) | (1u << 2) | (1u << 3))

static inline int fbpe_win_pattern(int pattern) {
    return (unsigned)pattern < 32u && ((FBPE_WIN_PATTERNS >> pattern) & 1u);
}

typedef struct {
    Py_ssize_t base;          /* text offset of the window's byte 0 */
    uint64_t starts;          /* bit k: a chunk starts at base + k (all decided) */
    int scalar_left;          /* chunks to leave to the scalar splitter before refilling */
    int misses;               /* windows in a row that decided too little */
    FbpeProgramScan prog;     /* a split program's outer pieces (fbe_program_scan.h) */
} FbpeWin;

/* A window that holds nothing yet (call before a segment's first chunk). */
static inline void fbpe_win_reset(FbpeWin *win) {
    win->base = -64;
    win->starts = 0;
    win->scalar_left = 0;
    win->misses = 0;
    fbpe_program_scan_reset(&win->prog);
}

/* The next chunk start after p in the window (p: a chunk start), or -1 if the window
   has decided none: then fbpe_win_refill (in _pretokenize) takes over. */
static inline Py_ssize_t fbpe_win_take(const FbpeWin *win, Py_ssize_t p) {
    uint64_t off = (uint64_t)(p - win->base), rest;
    if (off >= 63) return -1;
    rest = win->starts & ~((2ull << off) - 1);
    return rest ? win->base + __builtin_ctzll(rest) : -1;
}

#endif
