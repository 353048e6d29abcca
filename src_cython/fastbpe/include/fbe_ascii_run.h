/* ASCII runs for the pre-tokenizers: the end of a run of bytes in one ASCII range,
   8 at a time (SWAR). */
#ifndef FASTBPE_FBE_ASCII_RUN_H
#define FASTBPE_FBE_ASCII_RUN_H
#include <string.h>
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define FBPE_SWAR 1
#else
#define FBPE_SWAR 0
#endif
#define FBPE_ONES 0x0101010101010101ULL
#define FBPE_HIGH 0x8080808080808080ULL

/* End of the run from i of ASCII bytes b with lo <= (b | fold) <= hi (fold is 0 or
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
#endif /* FASTBPE_FBE_ASCII_RUN_H */
