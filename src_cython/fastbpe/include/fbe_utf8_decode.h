/* One UTF-8 sequence to its code point, for the pre-tokenizers (_pretokenize's
   hand-written splitters and _split_program's matcher). Never reads past `end`. */
#ifndef FASTBPE_FBE_UTF8_DECODE_H
#define FASTBPE_FBE_UTF8_DECODE_H
#include <Python.h>
#include <stdint.h>

/* Code point of the multi-byte sequence at t[i] (t[i] >= 0x80), its length to *width.
   A malformed or truncated lead is one byte decoding to 0xFFFFFFFF, which no class
   table holds (UTF-8 input never has one). Continuation bytes are not checked: the
   callers' input is valid UTF-8 (encoded from str, or checked by split_offsets). */
static inline uint32_t fbe_decode_multibyte(const unsigned char* t, Py_ssize_t i,
                                            Py_ssize_t end, Py_ssize_t* width) {
    unsigned char b = t[i];
    Py_ssize_t avail = end - i;
    if (b >= 0xC0 && b < 0xE0 && avail >= 2) {
        *width = 2;
        return ((uint32_t)(b & 0x1F) << 6) | (t[i + 1] & 0x3F);
    }
    if (b >= 0xE0 && b < 0xF0 && avail >= 3) {
        *width = 3;
        return ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(t[i + 1] & 0x3F) << 6)
               | (t[i + 2] & 0x3F);
    }
    if (b >= 0xF0 && b < 0xF8 && avail >= 4) {
        *width = 4;
        return ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(t[i + 1] & 0x3F) << 12)
               | ((uint32_t)(t[i + 2] & 0x3F) << 6) | (t[i + 3] & 0x3F);
    }
    *width = 1;
    return 0xFFFFFFFFu;
}
#endif
