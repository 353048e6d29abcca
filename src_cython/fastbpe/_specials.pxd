"""Special tokens: the scan for the allowed ones in a text (``find_special``), the set
of them a call allows (``special_set_fill``), and the sets of disallowed ones a call
checks (``NeedleSet``, kept by the core through ``needle_set_cached``)."""
from libc.stdint cimport uint32_t

cdef struct Special:
    const unsigned char* text
    Py_ssize_t length
    uint32_t token


cdef struct SpecialSet:
    Special* items
    Py_ssize_t count
    bint first_byte[256]
    int common_first          # the first byte of every item, or -1 if they differ
    int common_second         # with common_first: the second byte of every item (all
                              # are 2 bytes or longer), or -1




cdef void special_set_index(SpecialSet* ss) noexcept nogil
    # Fill first_byte, common_first and common_second from the items.
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
    cdef frozenset strings    # as given: the check of texts with lone surrogates
    cdef bint has_empty       # "" is in the set: every text holds it (as in tiktoken)


cdef NeedleSet needle_set_cached(dict cache, object disallowed_special)
    # The NeedleSet of disallowed_special (any collection of str), or None if it is
    # empty; cache (frozenset -> NeedleSet, a core's own) keeps it for the next call
    # with an equal set. TypeError for a str (the Python layer maps "all").
