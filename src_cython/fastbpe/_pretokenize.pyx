"""Native pre-tokenizers: tiktoken's split patterns without a regex engine.

``next_chunk_end`` splits UTF-8 text exactly as ``regex.finditer(pattern, text)`` does
for the GPT-2 (r50k/p50k), cl100k_base and o200k_base patterns of
``fastbpe.reference.patterns``, in one forward pass over the bytes. Each pattern is
hand-compiled below into the decisions its alternatives make, in their order; the
comments quote the alternative each branch implements. Character classes come from
``_unicode_tables.h``, which tools/gen_unicode_tables.py reads out of the installed
``regex`` module, so the Unicode version is always the one ``regex`` uses.

Why every pattern tiles its input (no skipped characters): every code point is in
exactly one of \\p{L}, \\p{N}, \\s or "other", and each pattern has an alternative that
matches one char of each (\\p{L}++, \\p{N}, [^\\s\\p{L}\\p{N}]++, and a bare \\s / \\s+).

Patterns with window rules (``fbpe_win_pattern``: all three) also have a faster path
(``split_next`` in the .pxd; ``_split_fast.h``, ``_split_fill.h`` and one
``_split_<pattern>.h`` per pattern): every chunk start of 64 bytes at once, from bit
masks of the chars' classes, for text of chars of one to three bytes (o200k's: but
letters both U and W); what it does not handle goes through ``next_chunk_end``. The
classifier has an SSE2 and an AVX2 build, chosen at import (``win_simd``; the
environment variable FASTBPE_SIMD=sse2 forces SSE2). Tests compare every path with
``regex``: ``_set_window_split`` turns the window off for ``split``, ``split_offsets``
and ``_count_chunks`` (the encoder and the trainer always take it; they call the same
``split_next``), ``_set_win_simd`` picks the build. On the benchmark corpora (SSE2
build, 2026-12-03) o200k's split Turkish in 9 ns per chunk instead of 15, English and
Python source in 6 instead of 10-11; cl100k's split English and Python source 1.5x as
fast as its scalar splitter, Turkish 1.7x; GPT-2's English and Python source in 4
instead of 7-8, Turkish in 8 instead of 15; the AVX2 build splits 1.14-1.22x faster
again. Chinese stays at the scalar splitter's speed: a window with a char from U+3000
on (lead byte 0xE3) in its first 20 bytes is told from one compare of 32 bytes and
left to the scalar splitter (``FBPE_WIDE_LEAD`` in ``_split_fill.h`` says why).

Any other pattern that ``fastbpe.reference.split_program`` compiles (Llama 3's, Qwen's,
Tekken's, DeepSeek's splits, ...) runs as a split program (``_split_program``) behind
the same ``next_chunk_end``, with id ``SPLIT_PROGRAM + slot`` from ``pattern_id``; a
tuple of patterns is a sequence of Isolated splits. ``split_engine`` names the engine.
Only the hand-written patterns' texts may be cut at newlines (``cuts_hold``).

Lone surrogates: ``split`` encodes with "surrogatepass", so a lone surrogate is one
"other" code point (category Cs), split exactly as ``regex`` splits it; chunks decode
back with "surrogatepass". No error is raised.
"""
from libc.stdint cimport uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy
cimport numpy as cnp
import numpy as np

from fastbpe._split_program cimport ProgramScan, program_chunk_end_scan
from fastbpe._split_program import program_slot as _program_slot
from fastbpe._split_program import sequence_slot as _sequence_slot
from fastbpe.reference import patterns as _patterns

cnp.import_array()

cdef extern from "_unicode_tables.h" nogil:
    const char* FBPE_UNICODE_SOURCE
    const uint16_t FBPE_L, FBPE_N, FBPE_WS, FBPE_U, FBPE_W, FBPE_M
    const uint16_t FBPE_LU, FBPE_LL, FBPE_LT, FBPE_LM, FBPE_LO, FBPE_CRLF
    const uint16_t* fbpe_ascii_flags
    uint16_t fbpe_class_of(uint32_t cp)
    int fbpe_fold_letter(uint32_t cp)

# Word-at-a-time skipping of ASCII letter runs: words are the most common chunks, and
# testing 8 bytes per step removes most per-byte branches (and their mispredictions at
# the end of every word). Byte-order dependent, so only on little-endian GCC/Clang; the
# byte loop after it finishes (or replaces) the job everywhere.
cdef extern from "fbe_ascii_run.h":
    Py_ssize_t fbpe_ascii_range_end(const unsigned char* t, Py_ssize_t i, Py_ssize_t end,
                                    unsigned lo, unsigned hi, unsigned fold) nogil

# Windows are filled here only (split_refill); the part that chunk loops run for
# every chunk is in _split_fast.h, which split_next in the .pxd inlines into the encoder
# and the trainer too.
cdef extern from "_split_fill.h" nogil:
    void fbpe_win_init()
    int fbpe_win_set_simd(int want)
    uint64_t fbpe_win_starts(int pattern, const unsigned char* t, Py_ssize_t base, int three)
    Py_ssize_t fbpe_win_refill(FbpeWin* win, int pattern, const unsigned char* t,
                               Py_ssize_t p, Py_ssize_t end)

fbpe_win_init()

#: The builds of the window classifier (_split_fill.h), by the level fbpe_win_set_simd
#: takes and returns; "none": this build has no windows (not x86-64 / GCC / Clang).
_SIMD_LEVELS = {"none": -1, "sse2": 0, "avx2": 1}


def _simd_level(name, where):
    """The level of a classifier name (ValueError naming it and where it came from)."""
    if name not in ("sse2", "avx2"):
        raise ValueError(f"{where}: unknown window classifier {name!r}; expected 'sse2' or 'avx2'")
    return _SIMD_LEVELS[name]


def _simd_name(int level):
    return next(k for k, v in _SIMD_LEVELS.items() if v == level)


def win_simd():
    """The build of the window classifier in use: "avx2", "sse2" or "none".

    Chosen once at import: AVX2 when the CPU has AVX2 and BMI2, else SSE2; the
    environment variable FASTBPE_SIMD=sse2 forces the SSE2 build (for A/B runs; "avx2",
    the default, takes AVX2 only where the CPU has it). Both split every text alike.
    """
    return _simd_in_force


def _set_win_simd(name):
    """Testing hook: run the window classifier's `name` build ("sse2" or "avx2", taken
    only where the CPU has it); returns the name of the build in force before. Not
    thread-safe: call while nothing splits."""
    global _simd_in_force
    cdef int want = _simd_level(name, "_set_win_simd")
    old = _simd_in_force
    _simd_in_force = _simd_name(fbpe_win_set_simd(want))
    return old


import os as _os
_simd_in_force = _simd_name(fbpe_win_set_simd(
    _simd_level(_os.environ.get("FASTBPE_SIMD", "avx2"), "environment variable FASTBPE_SIMD")))

#: The process default of the windows for split, split_offsets and _count_chunks
#: (False: the scalar splitter alone, so tests can compare both against regex). Read
#: by those Python functions and passed to the kernel (_split_into's `window`), never
#: read by a kernel; changed only by tests, through _set_window_split.
cdef bint _window_default = True


#: Where the Unicode tables came from (regex version, Unicode version).
UNICODE_SOURCE = FBPE_UNICODE_SOURCE.decode("ascii")

#: Bit names of the class flags returned by ``_class_table``.
CLASS_BITS = {
    "L": FBPE_L, "N": FBPE_N, "WS": FBPE_WS, "U": FBPE_U, "W": FBPE_W, "M": FBPE_M,
    "Lu": FBPE_LU, "Ll": FBPE_LL, "Lt": FBPE_LT, "Lm": FBPE_LM, "Lo": FBPE_LO,
    "CRLF": FBPE_CRLF,
}

# "Other" in the patterns' sense: [^\s\p{L}\p{N}].
cdef enum:
    NOT_OTHER = FBPE_L | FBPE_N | FBPE_WS
    LETTERISH = FBPE_U | FBPE_W  # every \p{L} and \p{M}: what o200k's letter alts start on


# ---------------------------------------------------------------------------------------
# Decoding. text[start:end] is UTF-8 by contract; still, no read ever goes past `end`
# even on malformed bytes (a bad byte is one "other" char), so bad input cannot crash.

cdef extern from "fbe_utf8_decode.h":
    # Code point of the multi-byte sequence at i (t[i] >= 0x80), its length to width;
    # a malformed lead is one byte decoding to 0xFFFFFFFF (no class bits, no fold).
    uint32_t _decode_multibyte "fbe_decode_multibyte"(
        const unsigned char* t, Py_ssize_t i, Py_ssize_t end, Py_ssize_t* width) noexcept nogil


cdef uint16_t _class_multibyte(const unsigned char* t, Py_ssize_t i, Py_ssize_t end,
                               Py_ssize_t* width) noexcept nogil:
    return fbpe_class_of(_decode_multibyte(t, i, end, width))  # 0 beyond U+10FFFF


cdef inline uint16_t _class_at(const unsigned char* t, Py_ssize_t i, Py_ssize_t end,
                               Py_ssize_t* width) noexcept nogil:
    """Class bits of the code point at byte i; its byte length goes to width."""
    cdef unsigned char b = t[i]
    if b < 0x80:
        width[0] = 1
        return fbpe_ascii_flags[b]
    return _class_multibyte(t, i, end, width)


cdef inline int _fold_at(const unsigned char* t, Py_ssize_t i, Py_ssize_t end,
                         Py_ssize_t* width) noexcept nogil:
    """The contraction letter (lower-case ASCII) the char at i matches under (?i), or 0."""
    cdef unsigned char b = t[i]
    if b < 0x80:
        width[0] = 1
        return fbpe_fold_letter(b)
    return fbpe_fold_letter(_decode_multibyte(t, i, end, width))


# ---------------------------------------------------------------------------------------
# Runs.

cdef inline Py_ssize_t _run_any(const unsigned char* t, Py_ssize_t i, Py_ssize_t end,
                                uint16_t mask) noexcept nogil:
    """End of the run of chars from i whose class has a bit of mask."""
    cdef unsigned char b
    cdef Py_ssize_t w
    while i < end:
        b = t[i]
        if b < 0x80:
            if not (fbpe_ascii_flags[b] & mask):
                break
            i += 1
        else:
            if not (_class_multibyte(t, i, end, &w) & mask):
                break
            i += w
    return i


cdef inline bint _is_ascii_letter(unsigned char b) noexcept nogil:
    return 97 <= (b | 0x20) <= 122


cdef inline Py_ssize_t _run_letters(const unsigned char* t, Py_ssize_t i,
                                    Py_ssize_t end) noexcept nogil:
    """End of the \\p{L} run from i (ASCII letters are exactly A-Z and a-z)."""
    cdef Py_ssize_t w
    while i < end:
        if t[i] < 0x80:
            i = fbpe_ascii_range_end(t, i, end, 97, 122, 0x20)
            if i >= end or t[i] < 0x80:
                return i
        if not (_class_multibyte(t, i, end, &w) & FBPE_L):
            return i
        i += w
    return i


cdef inline Py_ssize_t _run_lower(const unsigned char* t, Py_ssize_t i,
                                  Py_ssize_t end) noexcept nogil:
    """End of the run from i of o200k's W = [\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}] (ASCII: a-z).

    A twin of _run_letters with other constants, as _run_none is of _run_any: shared
    loops with the constants as arguments measured 2-5% slower splitting."""
    cdef Py_ssize_t w
    while i < end:
        if t[i] < 0x80:
            i = fbpe_ascii_range_end(t, i, end, 97, 122, 0)
            if i >= end or t[i] < 0x80:
                return i
        if not (_class_multibyte(t, i, end, &w) & FBPE_W):
            return i
        i += w
    return i


cdef inline Py_ssize_t _run_none(const unsigned char* t, Py_ssize_t i, Py_ssize_t end,
                                 uint16_t mask) noexcept nogil:
    """End of the run of chars from i whose class has no bit of mask."""
    cdef unsigned char b
    cdef Py_ssize_t w
    while i < end:
        b = t[i]
        if b < 0x80:
            if fbpe_ascii_flags[b] & mask:
                break
            i += 1
        else:
            if _class_multibyte(t, i, end, &w) & mask:
                break
            i += w
    return i


cdef inline Py_ssize_t _run_crlf(const unsigned char* t, Py_ssize_t i,
                                 Py_ssize_t end) noexcept nogil:
    while i < end and (t[i] == 13 or t[i] == 10):
        i += 1
    return i


cdef inline Py_ssize_t _run_crlf_slash(const unsigned char* t, Py_ssize_t i,
                                       Py_ssize_t end) noexcept nogil:
    while i < end and (t[i] == 13 or t[i] == 10 or t[i] == 47):
        i += 1
    return i


cdef inline Py_ssize_t _run_numbers_upto(const unsigned char* t, Py_ssize_t i,
                                         Py_ssize_t end, int most) noexcept nogil:
    """\\p{N}{1,most}: i is on a number; at most ``most`` of them."""
    cdef int count = 0
    cdef Py_ssize_t w
    while count < most and i < end and (_class_at(t, i, end, &w) & FBPE_N):
        i += w
        count += 1
    return i


cdef inline Py_ssize_t _whitespace(const unsigned char* t, Py_ssize_t p, Py_ssize_t end,
                                   bint dollar, bint crlf) noexcept nogil:
    """The whitespace alternatives, for a whitespace char at p, in pattern order:

    dollar: ``\\s++$`` -- the whole run if it reaches the end. (regex's ``$`` also
        matches before a final "\\n", but that "\\n" is whitespace, so a run stopping
        there does not exist.)
    crlf: ``\\s*[\\r\\n]`` (cl100k) / ``\\s*[\\r\\n]+`` (o200k) -- \\s* backtracks to the
        last \\r or \\n of the run; the [\\r\\n]+ run from there is that one char.
    ``\\s+(?!\\S)`` -- the run to the end of text, else the run minus its last char
        (left to lead the next word), if that is not empty.
    ``\\s`` / ``\\s+`` -- else the single char.
    """
    cdef Py_ssize_t i = p, last_start = p, last_crlf = -1, w, j
    cdef unsigned char b
    while i < end:
        b = t[i]
        if b == 32:  # runs of spaces (indentation) a word at a time
            j = fbpe_ascii_range_end(t, i + 1, end, 32, 32, 0)
            last_start = j - 1
            i = j
        elif b < 0x80:
            if not (fbpe_ascii_flags[b] & FBPE_WS):
                break
            if b == 10 or b == 13:
                last_crlf = i
            last_start = i
            i += 1
        else:
            if not (_class_multibyte(t, i, end, &w) & FBPE_WS):
                break
            last_start = i
            i += w
    if i == end and dollar:
        return end
    if crlf and last_crlf >= 0:
        return last_crlf + 1
    if i == end or last_start == p:
        return i
    return last_start


# ---------------------------------------------------------------------------------------
# GPT-2: '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s

cdef inline Py_ssize_t _gpt2(const unsigned char* t, Py_ssize_t p,
                             Py_ssize_t end) noexcept nogil:
    cdef unsigned char b = t[p], b1, b2
    cdef Py_ssize_t w, q = p
    cdef uint16_t c
    # Fast path for the most common chunks: "word" and " word" in ASCII.
    if _is_ascii_letter(b):
        return _run_letters(t, p + 1, end)
    if b == 32 and p + 1 < end and _is_ascii_letter(t[p + 1]):
        return _run_letters(t, p + 2, end)
    if b == 39 and p + 1 < end:  # '(?:[sdmt]|ll|ve|re), case-sensitive
        b1 = t[p + 1]
        if b1 == 115 or b1 == 100 or b1 == 109 or b1 == 116:
            return p + 2
        if p + 2 < end:
            b2 = t[p + 2]
            if (b1 == 108 and b2 == 108) or (b2 == 101 and (b1 == 118 or b1 == 114)):
                return p + 3
    if b == 32 and p + 1 < end:  # " ?" joins a following non-space to its run
        q = p + 1
        c = _class_at(t, q, end, &w)
        if c & FBPE_WS:
            return _whitespace(t, p, end, True, False)
    else:
        c = _class_at(t, p, end, &w)
    if c & FBPE_L:
        return _run_letters(t, q + w, end)  # ?\p{L}++
    if c & FBPE_N:
        return _run_any(t, q + w, end, FBPE_N)  # ?\p{N}++
    if not (c & FBPE_WS):
        return _run_none(t, q + w, end, NOT_OTHER)  # ?[^\s\p{L}\p{N}]++
    return _whitespace(t, p, end, True, False)


# ---------------------------------------------------------------------------------------
# cl100k: '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+
#         | ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s
# and the same with \p{N} for \p{N}{1,3}+ (SPLIT_CL100K_DIGIT1): ``digits`` is the
# longest digit run one chunk takes, 3 or 1; nothing else in the pattern looks at
# digits (\p{N} is outside the letter-prefix and "other" classes), so it is the one
# parameter between the two.

cdef inline Py_ssize_t _contraction_ci(const unsigned char* t, Py_ssize_t p,
                                       Py_ssize_t end) noexcept nogil:
    """'(?i:[sdmt]|ll|ve|re) at p (t[p] is the apostrophe): its end, or -1."""
    cdef Py_ssize_t w1, w2, i = p + 1
    cdef int f1, f2
    if i >= end:
        return -1
    f1 = _fold_at(t, i, end, &w1)
    if f1 == 115 or f1 == 100 or f1 == 109 or f1 == 116:  # s d m t
        return i + w1
    if (f1 == 108 or f1 == 118 or f1 == 114) and i + w1 < end:  # l v r
        f2 = _fold_at(t, i + w1, end, &w2)
        if (f1 == 108 and f2 == 108) or (f1 != 108 and f2 == 101):  # ll ve re
            return i + w1 + w2
    return -1


cdef inline Py_ssize_t _cl100k(const unsigned char* t, Py_ssize_t p,
                               Py_ssize_t end, int digits) noexcept nogil:
    cdef unsigned char b = t[p]
    cdef Py_ssize_t w, w2, r
    cdef uint16_t c
    # Fast path for the most common chunks: "word" and " word" in ASCII.
    if _is_ascii_letter(b):
        return _run_letters(t, p + 1, end)
    if b == 32 and p + 1 < end and _is_ascii_letter(t[p + 1]):
        return _run_letters(t, p + 2, end)
    if b == 39:
        r = _contraction_ci(t, p, end)
        if r >= 0:
            return r
    c = _class_at(t, p, end, &w)
    if c & FBPE_L:
        return _run_letters(t, p + w, end)  # \p{L}++
    if c & FBPE_N:
        return _run_numbers_upto(t, p, end, digits)  # \p{N}{1,3}+ (or \p{N})
    # [^\r\n\p{L}\p{N}]?+\p{L}++ with the prefix taken. Possessive, and without the
    # prefix \p{L} cannot match here, so no second try.
    if b != 13 and b != 10 and p + w < end:
        if _class_at(t, p + w, end, &w2) & FBPE_L:
            return _run_letters(t, p + w + w2, end)
    if b == 32 and p + 1 < end and not (_class_at(t, p + 1, end, &w2) & NOT_OTHER):
        return _run_crlf(t, _run_none(t, p + 1, end, NOT_OTHER), end)  # " ?[^...]++[\r\n]*+"
    if not (c & FBPE_WS):
        return _run_crlf(t, _run_none(t, p, end, NOT_OTHER), end)
    return _whitespace(t, p, end, True, True)


# ---------------------------------------------------------------------------------------
# o200k:
#   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+SUFFIX?  (1)
#  |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*SUFFIX?  (2)
#  |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
# with SUFFIX = (?i:'s|'t|'re|'ve|'m|'ll|'d). U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and
# W = [\p{Ll}\p{Lm}\p{Lo}\p{M}] overlap (Lm, Lo, M), and nothing here is possessive, so
# regex backtracks: (1) with and then without the optional prefix before trying (2).

cdef inline Py_ssize_t _o200k_suffix(const unsigned char* t, Py_ssize_t e,
                                     Py_ssize_t end) noexcept nogil:
    """SUFFIX? after a letter run ending at e: the end including the suffix if any."""
    cdef Py_ssize_t w1, w2, i = e + 1
    cdef int f1, f2
    if i >= end or t[e] != 39:
        return e
    f1 = _fold_at(t, i, end, &w1)
    if f1 == 115 or f1 == 116 or f1 == 109 or f1 == 100:  # 's 't 'm 'd
        return i + w1
    if (f1 == 114 or f1 == 118 or f1 == 108) and i + w1 < end:  # 're 've 'll
        f2 = _fold_at(t, i + w1, end, &w2)
        if (f1 == 108 and f2 == 108) or (f1 != 108 and f2 == 101):
            return i + w1 + w2
    return e


cdef inline Py_ssize_t _o200k_alt1(const unsigned char* t, Py_ssize_t s,
                                   Py_ssize_t end) noexcept nogil:
    """U*W+SUFFIX? from s: its end, or -1.

    U* greedily runs to u. If the char at u is in W, W+ runs greedily from there.
    Otherwise U* gives back chars one at a time until W+ can start: at the last char of
    the U run that is also in W; W+ then ends right after it (the next char is not in
    W). If no char of the run is in W, it fails.
    """
    cdef Py_ssize_t i = s, w, last_w_end = -1
    cdef uint16_t c
    while i < end:
        c = _class_at(t, i, end, &w)
        if not (c & FBPE_U):
            if c & FBPE_W:
                return _o200k_suffix(t, _run_lower(t, i + w, end), end)
            break
        i += w
        if c & FBPE_W:
            last_w_end = i
    if last_w_end < 0:
        return -1
    return _o200k_suffix(t, last_w_end, end)


cdef inline Py_ssize_t _o200k_alt2(const unsigned char* t, Py_ssize_t s,
                                   Py_ssize_t end) noexcept nogil:
    """U+W*SUFFIX? from s: its end, or -1. Greedy runs never need to give back here."""
    cdef Py_ssize_t u = _run_any(t, s, end, FBPE_U)
    if u == s:
        return -1
    return _o200k_suffix(t, _run_lower(t, u, end), end)


cdef inline Py_ssize_t _o200k(const unsigned char* t, Py_ssize_t p,
                              Py_ssize_t end) noexcept nogil:
    cdef unsigned char b = t[p]
    cdef Py_ssize_t w, w2, r
    cdef uint16_t c
    cdef bint prefix
    # Fast path for the most common chunks, "word" and " word" in lower case: (1) with
    # an empty U* (a-z is not in U) and W+ starting on the a-z char.
    if 97 <= b <= 122:
        return _o200k_suffix(t, _run_lower(t, p + 1, end), end)
    if b == 32 and p + 1 < end and 97 <= t[p + 1] <= 122:
        return _o200k_suffix(t, _run_lower(t, p + 2, end), end)
    # "Word" / " Word": U* takes A-Z; if a-z follows, U* has ended and W+ starts there.
    if b == 32 and p + 1 < end and 65 <= t[p + 1] <= 90:
        r = fbpe_ascii_range_end(t, p + 2, end, 65, 90, 0)
        if r < end and 97 <= t[r] <= 122:
            return _o200k_suffix(t, _run_lower(t, r + 1, end), end)
    elif 65 <= b <= 90:
        r = fbpe_ascii_range_end(t, p + 1, end, 65, 90, 0)
        if r < end and 97 <= t[r] <= 122:
            return _o200k_suffix(t, _run_lower(t, r + 1, end), end)
    c = _class_at(t, p, end, &w)
    if c & FBPE_N:
        return _run_numbers_upto(t, p, end, 3)  # (3); N is in no other alternative's start
    # [^\r\n\p{L}\p{N}]? can take the char at p (whitespace, symbols and marks M).
    prefix = not (c & (FBPE_L | FBPE_N)) and b != 13 and b != 10 and p + w < end
    if prefix and (_class_at(t, p + w, end, &w2) & LETTERISH):
        r = _o200k_alt1(t, p + w, end)  # (1) with the prefix
        if r >= 0:
            return r
        if c & LETTERISH:
            r = _o200k_alt1(t, p, end)  # (1) without it (p holds a mark M)
            if r >= 0:
                return r
        # (2) with the prefix: (1) failed, so the char after the prefix is in U.
        return _o200k_alt2(t, p + w, end)
    if c & LETTERISH:
        r = _o200k_alt1(t, p, end)
        if r >= 0:
            return r
        return _o200k_alt2(t, p, end)  # (1) failed, so the char at p is in U
    # (4) " ?[^\s\p{L}\p{N}]+[\r\n/]*": the symbol run stops at \r or \n, and then
    # [\r\n/]* takes any mix of \r, \n and "/" (so "!\r/" is one chunk).
    if b == 32 and p + 1 < end and not (_class_at(t, p + 1, end, &w2) & NOT_OTHER):
        return _run_crlf_slash(t, _run_none(t, p + 1, end, NOT_OTHER), end)
    if not (c & FBPE_WS):
        return _run_crlf_slash(t, _run_none(t, p, end, NOT_OTHER), end)
    return _whitespace(t, p, end, False, True)  # (5) (6) (7)


cdef Py_ssize_t next_chunk_end(int pattern, const unsigned char* text, Py_ssize_t start,
                               Py_ssize_t end) noexcept nogil:
    """End (> start) of the chunk of text[start:end] that starts at start.

    text[start:end] is UTF-8 and `end` is where regex's `$` matches (the end of the
    segment). pattern is SPLIT_GPT2, SPLIT_CL100K(_DIGIT1), SPLIT_O200K or SPLIT_PROGRAM + a slot
    of _split_program (any other value splits as GPT-2). Pure function of its arguments:
    safe to call from many threads.
    """
    return next_chunk_end_scan(pattern, text, start, end, NULL)


cdef Py_ssize_t next_chunk_end_scan(int pattern, const unsigned char* text, Py_ssize_t start,
                                    Py_ssize_t end, ProgramScan* scan) noexcept nogil:
    if start >= end:  # outside the contract; never read text[end]
        return end
    if pattern == SPLIT_CL100K:
        return _cl100k(text, start, end, 3)
    if pattern == SPLIT_CL100K_DIGIT1:
        return _cl100k(text, start, end, 1)
    if pattern == SPLIT_O200K:
        return _o200k(text, start, end)
    if pattern >= SPLIT_PROGRAM:
        return program_chunk_end_scan(pattern - SPLIT_PROGRAM, text, start, end, scan)
    return _gpt2(text, start, end)


cdef Py_ssize_t split_refill(FbpeWin* win, int pattern, const unsigned char* text,
                             Py_ssize_t start, Py_ssize_t end) noexcept nogil:
    cdef Py_ssize_t e = fbpe_win_refill(win, pattern, text, start, end)
    if e >= 0:
        return e
    return next_chunk_end(pattern, text, start, end)


# ---------------------------------------------------------------------------------------
# Python API.

# The SPLIT_* ids as Python ints too (the enum itself lives in the .pxd for cimport).
globals().update(SPLIT_GPT2=<int>SPLIT_GPT2, SPLIT_CL100K=<int>SPLIT_CL100K,
                 SPLIT_O200K=<int>SPLIT_O200K, SPLIT_CL100K_DIGIT1=<int>SPLIT_CL100K_DIGIT1,
                 SPLIT_PROGRAM=<int>SPLIT_PROGRAM)

_SHORT_NAMES = {
    "gpt2": SPLIT_GPT2, "r50k": SPLIT_GPT2, "r50k_base": SPLIT_GPT2,
    "cl100k": SPLIT_CL100K, "cl100k_base": SPLIT_CL100K, "gpt4": SPLIT_CL100K,
    "o200k": SPLIT_O200K, "o200k_base": SPLIT_O200K,
    "cl100k_digit1": SPLIT_CL100K_DIGIT1,
}
_EXACT = {_patterns.GPT2: SPLIT_GPT2, _patterns.CL100K: SPLIT_CL100K,
          _patterns.O200K: SPLIT_O200K, _patterns.CL100K_DIGIT1: SPLIT_CL100K_DIGIT1}


def pattern_id(pat_str, gaps=False):
    """The native pre-tokenizer of a pattern or short name, else -1 (``regex``).

    SPLIT_GPT2/SPLIT_CL100K/SPLIT_O200K for the hand-written ones (exact strings or
    short names); SPLIT_PROGRAM + a slot for a pattern that compiles to a split program
    (``fastbpe.reference.split_program``). A program that does not match every character
    is used only with ``gaps`` (unmatched text kept as chunks, HF's Isolated Split):
    tiktoken drops that text, which a native chunk end cannot express. A tuple of
    patterns is HF's Sequence of Isolated Splits (``compile_sequence``; gaps kept).

    >>> pattern_id("cl100k_base")
    1
    >>> pattern_id(r"\\p{N}+| ?[^\\p{N}]+") >= SPLIT_PROGRAM
    True
    """
    if isinstance(pat_str, tuple):
        slot = _sequence_slot(pat_str)
        return SPLIT_PROGRAM + slot if slot >= 0 else -1
    if not isinstance(pat_str, str):
        raise TypeError(f"pattern must be a str, not {type(pat_str).__name__}")
    pid = _EXACT.get(pat_str)
    if pid is None:
        pid = _SHORT_NAMES.get(pat_str)
    if pid is None:
        slot = _program_slot(pat_str, gaps)
        pid = SPLIT_PROGRAM + slot if slot >= 0 else -1
    return pid


def split_engine(int pid):
    """What splits for a pattern_id: "builtin:gpt2", "builtin:cl100k", "builtin:o200k",
    "program" or "regex" (pid -1), for tests and benchmarks.

    >>> split_engine(pattern_id("o200k"))
    'builtin:o200k'
    """
    if pid < 0:
        return "regex"
    if pid >= SPLIT_PROGRAM:
        return "program"
    return "builtin:" + {SPLIT_GPT2: "gpt2", SPLIT_CL100K: "cl100k", SPLIT_O200K: "o200k",
                         SPLIT_CL100K_DIGIT1: "cl100k_digit1"}[pid]


def cuts_hold(int pid):
    """Whether text split by pid may be cut after a newline (``_jobs.next_cut``,
    ``fastbpe.io.BPECut``; Corollaries 1-3 of ``fastbpe.reference.documents``) with the
    same chunks: proved for the hand-written splitters' patterns only, so a split
    program (or regex) never has its texts cut.

    >>> cuts_hold(SPLIT_O200K), cuts_hold(pattern_id(r"\\S+|\\s+"))
    (True, False)
    """
    return 0 <= pid < SPLIT_PROGRAM


cdef int _require_pattern(pattern, bint gaps=False) except -1:
    cdef int pid = pattern_id(pattern, gaps)
    if pid < 0:
        raise ValueError(
            f"no native pre-tokenizer for pattern {pattern!r}: it is not one of the "
            "GPT-2, cl100k_base and o200k_base pattern strings or the names "
            f"{sorted(_SHORT_NAMES)}, and fastbpe.reference.split_program does not "
            "compile it (or it leaves text unmatched and gaps=False)"
        )
    return pid


cdef Py_ssize_t _utf8_error_offset(const unsigned char* t, Py_ssize_t n) noexcept nogil:
    """Offset of the first malformed UTF-8 sequence in t[:n], or -1 if there is none.

    Accepts what ``bytes.decode("utf-8", "surrogatepass")`` accepts (encoded lone
    surrogates included), which is what ``split`` feeds the kernel. Faster than decoding
    into a str just to validate.
    """
    cdef Py_ssize_t i = 0
    cdef unsigned char b, b1
    while i < n:
        i = fbpe_ascii_range_end(t, i, n, 0, 127, 0)
        if i >= n:
            break
        b = t[i]
        if b < 0xC2:
            return i
        if b < 0xE0:
            if i + 1 >= n or (t[i + 1] & 0xC0) != 0x80:
                return i
            i += 2
        elif b < 0xF0:
            if i + 2 >= n or (t[i + 1] & 0xC0) != 0x80 or (t[i + 2] & 0xC0) != 0x80:
                return i
            if b == 0xE0 and t[i + 1] < 0xA0:  # overlong
                return i
            i += 3
        elif b < 0xF5:
            if (i + 3 >= n or (t[i + 1] & 0xC0) != 0x80 or (t[i + 2] & 0xC0) != 0x80
                    or (t[i + 3] & 0xC0) != 0x80):
                return i
            b1 = t[i + 1]
            if (b == 0xF0 and b1 < 0x90) or (b == 0xF4 and b1 >= 0x90):  # overlong, > U+10FFFF
                return i
            i += 4
        else:
            return i
    return -1


cdef Py_ssize_t _split_into(int pid, const unsigned char* t, Py_ssize_t n,
                            cnp.int64_t** ends_ptr, Py_ssize_t* cap_ptr,
                            bint window) noexcept nogil:
    """Chunk ends of t[:n] into the malloc'd *ends_ptr, grown as needed; -1 if no memory.
    ``window``: through the window masks (split_next) if the pattern has them, else the
    scalar splitter alone; both give the same ends."""
    cdef Py_ssize_t pos = 0, count = 0, cap = cap_ptr[0]
    cdef cnp.int64_t* ends = ends_ptr[0]
    cdef cnp.int64_t* grown
    cdef FbpeWin win
    fbpe_win_reset(&win)
    while pos < n:
        if count == cap:
            cap = cap * 2 + 16
            grown = <cnp.int64_t*>realloc(ends, cap * sizeof(cnp.int64_t))
            if grown == NULL:
                return -1
            ends = ends_ptr[0] = grown
            cap_ptr[0] = cap
        # (the scalar splitter directly for the other patterns: a tighter loop)
        if window or not fbpe_win_pattern(pid):  # (a program keeps its scan in win)
            pos = split_next(&win, pid, t, pos, n)
        else:
            pos = next_chunk_end(pid, t, pos, n)
        ends[count] = pos
        count += 1
    return count


cdef cnp.ndarray _offsets(int pid, bytes data):
    cdef Py_ssize_t n = len(data), count
    cdef const unsigned char* t = data
    # About one chunk per 4 bytes in prose and code; grow from a quarter of the length.
    cdef Py_ssize_t cap = n // 4 + 16
    cdef cnp.int64_t* ends = <cnp.int64_t*>malloc(cap * sizeof(cnp.int64_t))
    cdef cnp.ndarray[cnp.int64_t, ndim=1] out
    cdef bint window = _window_default
    if ends == NULL:
        raise MemoryError()
    try:
        with nogil:
            count = _split_into(pid, t, n, &ends, &cap, window)
        if count < 0:
            raise MemoryError()
        out = np.empty(count, dtype=np.int64)
        if count:
            memcpy(out.data, ends, count * sizeof(cnp.int64_t))
        return out
    finally:
        free(ends)


def split_offsets(data, pattern, *, gaps=False):
    """Byte offsets where the chunks of UTF-8 ``data`` end (int64 array, last == len).

    ``data`` is bytes or bytearray holding UTF-8 (lone surrogates encoded with
    "surrogatepass" are accepted, as ``split`` produces them); malformed UTF-8 raises
    UnicodeDecodeError (a ValueError) naming the position. ``gaps``: see pattern_id.

    >>> split_offsets(b"Hello world", "gpt2").tolist()
    [5, 11]
    """
    if isinstance(data, bytearray):
        data = bytes(data)
    elif not isinstance(data, bytes):
        raise TypeError(f"data must be bytes, not {type(data).__name__}")
    cdef int pid = _require_pattern(pattern, gaps)
    cdef const unsigned char* t = <bytes>data
    cdef Py_ssize_t bad, n = len(data)
    with nogil:
        bad = _utf8_error_offset(t, n)
    if bad >= 0:  # the kernel trusts its input; let the codec word the error
        data.decode("utf-8", "surrogatepass")
        raise ValueError(f"data is not valid UTF-8 at byte offset {bad}")
    return _offsets(pid, data)


def split(text, pattern, *, gaps=False):
    """Split ``text`` into pre-tokenization chunks, exactly as ``regex.findall`` would.

    ``pattern`` is one of the exact pattern strings or a short name ("gpt2",
    "cl100k_base", "o200k_base", ...). Lone surrogates are kept and split like any
    other symbol, as regex does. Any other pattern that compiles to a split program
    (``pattern_id``) splits natively too; with ``gaps``, text no branch matches is kept
    as chunks, as HF's Split (Isolated) keeps it.

    >>> split("Hello world!!", "gpt2")
    ['Hello', ' world', '!!']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    cdef int pid = _require_pattern(pattern, gaps)
    cdef bytes data = (<str>text).encode("utf-8", "surrogatepass")
    cdef cnp.ndarray ends = _offsets(pid, data)
    cdef list out = []
    cdef Py_ssize_t a = 0, b
    for b in ends:
        out.append(data[a:b].decode("utf-8", "surrogatepass"))
        a = b
    return out


def _class_table():
    """Class bits (see CLASS_BITS) of every code point 0..0x10FFFF, from the C table."""
    cdef cnp.ndarray[cnp.uint16_t, ndim=1] out = np.empty(0x110000, dtype=np.uint16)
    cdef uint32_t cp
    for cp in range(0x110000):
        out[cp] = fbpe_class_of(cp)
    return out


def _fold_table():
    """Contraction letter (as a byte, 0 if none) of every code point, from the C table."""
    cdef cnp.ndarray[cnp.uint8_t, ndim=1] out = np.empty(0x110000, dtype=np.uint8)
    cdef uint32_t cp
    for cp in range(0x110000):
        out[cp] = fbpe_fold_letter(cp)
    return out


def _count_chunks(const unsigned char[::1] data, int pid, int repeat=1):
    """Benchmark helper: run the kernel `repeat` times over data; return the chunk count."""
    cdef Py_ssize_t pos, count = 0, n = data.shape[0]
    cdef const unsigned char* t = &data[0] if n else NULL
    cdef int r
    cdef FbpeWin win
    cdef bint window = _window_default
    with nogil:
        for r in range(repeat):
            pos = 0
            count = 0
            fbpe_win_reset(&win)
            if window or not fbpe_win_pattern(pid):
                while pos < n:
                    pos = split_next(&win, pid, t, pos, n)
                    count += 1
            else:
                while pos < n:
                    pos = next_chunk_end(pid, t, pos, n)
                    count += 1
    return count


def _set_window_split(bint on):
    """Testing hook: make ``split``, ``split_offsets`` and ``_count_chunks`` split
    through the window masks (for the patterns that have them) (the default) or with the scalar splitter alone; returns
    the old setting. The encoder and the trainer always take the window. Not
    thread-safe; only tests use it."""
    global _window_default
    old = bool(_window_default)
    _window_default = on
    return old


def _win_stats(const unsigned char[::1] data, pattern="o200k"):
    """Testing hook: (chunks, chunks the window left to the scalar splitter).

    A chunk came from the window when its end is one of the window's starts after its
    own start (split_next takes the scalar splitter only when there is none)."""
    cdef Py_ssize_t pos = 0, n = data.shape[0], e, fb = 0, count = 0
    cdef const unsigned char* t = &data[0] if n else NULL
    cdef FbpeWin win
    cdef int pid = _require_pattern(pattern)
    fbpe_win_reset(&win)
    while pos < n:
        e = split_next(&win, pid, t, pos, n)
        if not (win.base <= pos < e < win.base + 64 and (win.starts >> (e - win.base)) & 1):
            fb += 1
        pos = e
        count += 1
    return count, fb


def _window_starts(bytes data, pattern, Py_ssize_t base, bint three=True):
    """Testing hook: the starts mask of the window at data[base : base + 64] with the
    classifier build in force (_set_win_simd), the plain one if not ``three`` (for
    windows without a byte of 0xE0 or more); 1 where this build has no windows. Any
    bytes, any base with 64 bytes after it (the mask means something only where a
    chunk starts at base)."""
    cdef int pid = _require_pattern(pattern)
    if base < 0 or base + 64 > len(data):
        raise ValueError(f"base {base} leaves no 64 bytes of {len(data)}")
    if _simd_in_force == "none" or not fbpe_win_pattern(pid):
        return 1
    return fbpe_win_starts(pid, <const unsigned char*>data, base, three)

