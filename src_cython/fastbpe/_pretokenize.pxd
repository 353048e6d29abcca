from libc.stdint cimport uint64_t

from fastbpe._split_program cimport ProgramScan

# Native pre-tokenizers: split UTF-8 text exactly as regex.finditer(pattern) does for
# tiktoken's GPT-2, cl100k_base and o200k_base split patterns, without a regex engine.

cdef enum:
    SPLIT_GPT2 = 0
    SPLIT_CL100K = 1
    SPLIT_O200K = 2
    # cl100k's splitter with at most one digit a chunk (\p{N} for \p{N}{1,3}+:
    # patterns.CL100K_DIGIT1, Qwen's pattern after llama3_cut): the same splitter, its
    # digit-run parameter 1 instead of 3.
    SPLIT_CL100K_DIGIT1 = 3
    # SPLIT_PROGRAM + slot: a compiled split program (_split_program.pxd), for any other
    # pattern the compiler of fastbpe.reference.split_program proves it handles.
    SPLIT_PROGRAM = 16

# text[start:end] is valid UTF-8; `end` is the end of the segment (regex `$`).
# Returns the end (> start) of the chunk that starts at `start`. Thread-safe.
cdef Py_ssize_t next_chunk_end(int pattern, const unsigned char* text, Py_ssize_t start,
                               Py_ssize_t end) noexcept nogil
# The same in a loop over one segment (rising starts): a split program keeps its outer
# pieces in `scan` (program_chunk_end_scan); the other splitters ignore it.
cdef Py_ssize_t next_chunk_end_scan(int pattern, const unsigned char* text, Py_ssize_t start,
                                    Py_ssize_t end, ProgramScan* scan) noexcept nogil


# Window masks (_split_fast.h): a stateful fast path in front of next_chunk_end, for
# the patterns fbpe_win_pattern names. A loop over one segment keeps an FbpeWin, resets
# it with fbpe_win_reset, and calls split_next instead of next_chunk_end: the same
# chunk ends.
cdef extern from "_split_fast.h" nogil:
    ctypedef struct FbpeWin:
        Py_ssize_t base     # text offset of the window's byte 0
        uint64_t starts     # bit k: a chunk starts at base + k
        int scalar_left     # chunks to leave to the scalar splitter before a new window
        ProgramScan prog    # a split program's outer pieces (next_chunk_end_scan)
    bint fbpe_win_pattern(int pattern)
    void fbpe_win_reset(FbpeWin* win)
    Py_ssize_t fbpe_win_take(const FbpeWin* win, Py_ssize_t p)

# The chunk end at start when the window has none: from a new window, or the scalar
# splitter. Thread-safe (win is the caller's).
cdef Py_ssize_t split_refill(FbpeWin* win, int pattern, const unsigned char* text,
                             Py_ssize_t start, Py_ssize_t end) noexcept nogil

cdef inline Py_ssize_t split_next(FbpeWin* win, int pattern, const unsigned char* text,
                                  Py_ssize_t start, Py_ssize_t end) noexcept nogil:
    """next_chunk_end(pattern, text, start, end), through the window for the patterns
    that have one (always: the scalar splitter alone is next_chunk_end, which split()
    reaches through its `window` switch, _set_window_split)."""
    cdef Py_ssize_t e
    if fbpe_win_pattern(pattern):
        e = fbpe_win_take(win, start)
        if e >= 0:
            return e
        if win.scalar_left > 0:
            win.scalar_left -= 1
            return next_chunk_end(pattern, text, start, end)
        return split_refill(win, pattern, text, start, end)
    return next_chunk_end_scan(pattern, text, start, end, &win.prog)
