# JSON Lines: find one top-level string field of a line's JSON object, without the GIL.
#
# The scanner is a strict *subset* of json.loads: a line it calls LINE_DOC is one that
# json.loads accepts, and the value it writes is json.loads(line)[field] as UTF-8.
# Whatever it is not sure of is LINE_BAD (invalid JSON, no such field, a value that is not
# a string, NaN/Infinity, numbers longer than JSONL_MAX_NUMBER, nesting deeper than
# JSONL_MAX_DEPTH, invalid UTF-8, raw control characters in strings, a BOM); the caller
# re-reads those lines with json.loads for the exact value or error. fastbpe.reference.jsonl
# is the specification.

cdef enum:
    JSONL_MAX_DEPTH = 256     # deeper nesting is left to json.loads (its recursion limit)
    JSONL_MAX_NUMBER = 600    # longer numbers too (int() refuses > 640 digits at its lowest limit)

cdef enum:
    LINE_BAD = -1             # not sure: ask json.loads
    LINE_BLANK = 0            # only JSON whitespace: no document
    LINE_DOC = 1              # an object whose field (the last one, if repeated) is a string


# Kind of the line s[p:e] (which holds no "\n"). field[:flen] is the key as UTF-8 (keys
# are compared after decoding their escapes). The field's value is written to `out` as it
# is checked (UTF-8, escapes decoded); for LINE_DOC, *length is its size in bytes (0 for
# ""). `out` needs room for e - p bytes (whole words are stored ahead, never past what
# has been read; decoding never makes a string longer); its bytes past *length, and all
# of it for other kinds, are garbage. Linear in e - p, no allocation, thread-safe.
cdef int scan_line(const unsigned char* s, Py_ssize_t p, Py_ssize_t e,
                   const unsigned char* field, Py_ssize_t flen, unsigned char* out,
                   Py_ssize_t* length) noexcept nogil
