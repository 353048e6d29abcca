# Split programs run natively: the matcher of fastbpe.reference.split_program (its twin
# in Python; the design and the argument that it equals regex are in that module's
# docstring and docs/kernels.md).
#
# A program is registered once per pattern string (program_slot, with the GIL held) in
# a process-wide table of at most PROGRAM_SLOTS programs, which are never changed or
# freed afterwards: a slot, once handed out, may be read from any thread without a lock.
# The pre-tokenizer ids of _pretokenize.pxd name a program as SPLIT_PROGRAM + slot.

cdef enum:
    PROGRAM_SLOTS = 256

# End (> start) of the chunk of text[start:end] that starts at start: the match of the
# program there, or, where no branch matches (a pattern that does not tile), the text up
# to the next match (HF's Split, Isolated). text[start:end] is UTF-8 and `end` is where
# regex's `$` matches. `slot` must come from program_slot. Thread-safe.
cdef Py_ssize_t program_chunk_end(int slot, const unsigned char* text, Py_ssize_t start,
                                  Py_ssize_t end) noexcept nogil


# The same, for a scan: the starts passed with one ProgramScan rise (a caller splitting
# one text front to back, program_scan_reset before it). The scan keeps each outer
# level's piece of a sequence program (HF's Splits in a Sequence), so a long piece is
# scanned once, not once per chunk in it (which was quadratic in its length).
cdef extern from "fbe_program_scan.h" nogil:
    ctypedef struct ProgramScan "FbpeProgramScan":
        Py_ssize_t bound[8]    # the end the level's piece was found within (-1: none)
        Py_ssize_t end[8]      # where that piece ends
    void program_scan_reset "fbpe_program_scan_reset"(ProgramScan* scan)

cdef Py_ssize_t program_chunk_end_scan(int slot, const unsigned char* text, Py_ssize_t start,
                                       Py_ssize_t end, ProgramScan* scan) noexcept nogil
