"""Special tokens: the scan for the allowed ones in a text (``find_special``), the set
of them a call allows (``special_set_fill``), and the sets of disallowed ones a call
checks (``NeedleSet``, kept by the core through ``needle_set_cached``)."""
from libc.stdint cimport uint32_t

cdef struct Special:
    const unsigned char* text
    Py_ssize_t length
    uint32_t token


cdef struct SpecialSet:
    Special* items            # sorted by special_set_index: by first byte, then second
                              # byte (a 1-byte item last), then longest first
    Py_ssize_t count
    int common_first          # the first byte of every item, or -1 if they differ
    int common_second         # with common_first: the second byte of every item (all
                              # are 2 bytes or longer), or -1
    int n_first               # how many distinct first bytes the items have
    unsigned char firsts[4]   # they, when n_first <= 4 (the SIMD scan's bytes)
    const unsigned long long* pairs  # 65536 bits: bit b0 << 8 | b1 is set iff an item
                              # starts with b0 b1, or is the 1 byte b0 (then for all b1)
    const int* bucket         # 257 ints: items[bucket[b]:bucket[b + 1]] start with b


cdef int special_set_index(SpecialSet* ss, list keep) except -1
    # Sort the items and fill the other fields from them; the tables live in a bytes
    # appended to keep.
cdef bint find_special(const SpecialSet* ss, const unsigned char* text, Py_ssize_t start,
                       Py_ssize_t n, Py_ssize_t* found_start, Py_ssize_t* found_end,
                       uint32_t* found_token) noexcept nogil
    # Leftmost item of ss in text[start:n] (the longest of those starting there).
cdef bint specials_hold_newline(const SpecialSet* ss) noexcept nogil
cdef int special_set_fill(SpecialSet* ss, dict special_bytes, const unsigned char* arena,
                          object allowed_special, list keep) except -1
    # ss over the allowed special tokens (any collection of str) that special_bytes
    # (text -> (arena offset, length, id)) holds; the items live in a bytes appended to
    # keep. TypeError for a str (the Python layer maps "all").


cdef class NeedleSet:
    cdef SpecialSet ss
    cdef bytes items_buf      # ss.items
    cdef list utf8            # the bytes ss.items point into
    cdef list keep            # the bytes of ss's tables
    cdef frozenset strings    # as given: the check of texts with lone surrogates
    cdef bint has_empty       # "" is in the set: every text holds it (as in tiktoken)


cdef NeedleSet needle_set_cached(dict cache, object disallowed_special)
    # The NeedleSet of disallowed_special (any collection of str), or None if it is
    # empty; cache (frozenset -> NeedleSet, a core's own) keeps it for the next call
    # with an equal set. TypeError for a str (the Python layer maps "all").
