# Native pre-tokenizers: split UTF-8 text exactly as regex.finditer(pattern) does for
# tiktoken's GPT-2, cl100k_base and o200k_base split patterns, without a regex engine.

cdef enum:
    SPLIT_GPT2 = 0
    SPLIT_CL100K = 1
    SPLIT_O200K = 2

# text[start:end] is valid UTF-8; `end` is the end of the segment (regex `$`).
# Returns the end (> start) of the chunk that starts at `start`. Thread-safe.
cdef Py_ssize_t next_chunk_end(int pattern, const unsigned char* text, Py_ssize_t start,
                               Py_ssize_t end) noexcept nogil
