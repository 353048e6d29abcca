"""Special tokens: the scan for the allowed ones in a text, and the sets of disallowed
ones (see ``_specials.pxd``).

tiktoken's special tokens all start with "<|": when every token of a set shares its
first two bytes, the scan looks for that pair 16 positions a step
(``include/fbe_find_pair.h``; memchr for "<" alone would stop at every tag of HTML)."""
from libc.stdint cimport int64_t, uint32_t
from libc.string cimport memchr, memcmp, memset

cdef extern from "Python.h":
    object PyBytes_FromStringAndSize(const char* s, Py_ssize_t n)
    char* PyBytes_AS_STRING(object b)

cdef extern from "fbe_find_pair.h" nogil:
    Py_ssize_t fbe_find_pair(const unsigned char* p, Py_ssize_t start, Py_ssize_t n,
                             int b0, int b1) noexcept


def _find_pair(bytes text, Py_ssize_t start, int b0, int b1):
    """Testing hook: fbe_find_pair over text (the first i >= start with text[i:i + 2] ==
    bytes([b0, b1]), or len(text))."""
    return fbe_find_pair(<const unsigned char*>PyBytes_AS_STRING(text), start, len(text), b0, b1)


cdef void special_set_index(SpecialSet* ss) noexcept nogil:
    """Fill first_byte, common_first and common_second from the items."""
    cdef Py_ssize_t k
    memset(ss.first_byte, 0, sizeof(ss.first_byte))
    ss.common_first = ss.items[0].text[0] if ss.count else -1
    ss.common_second = ss.items[0].text[1] if ss.count and ss.items[0].length >= 2 else -1
    for k in range(ss.count):
        ss.first_byte[ss.items[k].text[0]] = True
        if ss.items[k].text[0] != ss.common_first:
            ss.common_first = -1
        if ss.items[k].length < 2 or ss.items[k].text[1] != ss.common_second:
            ss.common_second = -1
    if ss.common_first < 0:
        ss.common_second = -1


cdef bint find_special(const SpecialSet* ss, const unsigned char* text, Py_ssize_t start,
                       Py_ssize_t n, Py_ssize_t* found_start, Py_ssize_t* found_end,
                       uint32_t* found_token) noexcept nogil:
    """Leftmost item of ss in text[start:n] (longest one if several start at the same
    place); False if there is none. When all items start with the same byte (tiktoken's
    all start with "<"), libc's memchr finds the candidates: a pass over the text costs
    a fraction of a byte-by-byte loop; and when they share the second byte too ("|"),
    fbe_find_pair looks for both (HTML has a "<" every few bytes)."""
    cdef Py_ssize_t i = start, k, best_len
    cdef uint32_t best_tok = 0
    cdef const unsigned char* q
    if ss == NULL or ss.count == 0:
        return False
    while i < n:
        if ss.common_second >= 0:
            i = fbe_find_pair(text, i, n, ss.common_first, ss.common_second)
            if i >= n:
                return False
        elif ss.common_first >= 0:
            q = <const unsigned char*>memchr(text + i, ss.common_first, n - i)
            if q == NULL:
                return False
            i = q - text
        elif not ss.first_byte[text[i]]:
            i += 1
            continue
        best_len = 0
        for k in range(ss.count):
            if (ss.items[k].length > best_len and ss.items[k].length <= n - i
                    and memcmp(ss.items[k].text, text + i, ss.items[k].length) == 0):
                best_len = ss.items[k].length
                best_tok = ss.items[k].token
        if best_len:
            found_start[0] = i
            found_end[0] = i + best_len
            found_token[0] = best_tok
            return True
        i += 1
    return False


cdef bint specials_hold_newline(const SpecialSet* ss) noexcept nogil:
    """Whether a special token of ss (allowed or disallowed) contains "\\n": then no text
    is cut (see next_cut), as the token could span a cut."""
    cdef Py_ssize_t k
    for k in range(ss.count):
        if memchr(ss.items[k].text, 10, ss.items[k].length) != NULL:
            return True
    return False


cdef class NeedleSet:
    """Strings that no text of a call may hold (the disallowed special tokens), as a
    SpecialSet over their UTF-8 for the jobs' check (find_special). Built once per set
    and kept by the CoreBPE (needle_set_cached), so a call pays no set-up."""

    def __cinit__(self, frozenset strings):
        cdef Py_ssize_t k = 0
        cdef bytes b
        self.strings = strings
        self.utf8 = []
        for text in strings:
            if not isinstance(text, str):
                raise TypeError(f"disallowed special tokens must be str, got {text!r}")
            if not text:
                self.has_empty = True
                continue
            try:
                b = text.encode("utf-8")
            except UnicodeEncodeError:
                continue     # a lone surrogate: only a text with one can hold it
            self.utf8.append(b)
        self.items_buf = PyBytes_FromStringAndSize(NULL, max(1, len(self.utf8)) * sizeof(Special))
        self.ss.items = <Special*>PyBytes_AS_STRING(self.items_buf)
        for b in self.utf8:
            self.ss.items[k].text = <const unsigned char*>PyBytes_AS_STRING(b)
            self.ss.items[k].length = len(b)
            self.ss.items[k].token = 0
            k += 1
        self.ss.count = k
        special_set_index(&self.ss)


cdef int special_set_fill(SpecialSet* ss, dict special_bytes, const unsigned char* arena,
                          object allowed_special, list keep) except -1:
    cdef int i
    ss.count = 0
    ss.items = NULL
    ss.common_first = -1
    ss.common_second = -1
    for i in range(256):
        ss.first_byte[i] = False
    if not allowed_special:
        return 0
    if isinstance(allowed_special, str):
        raise TypeError("allowed_special must be a set of str (the Python layer maps 'all')")
    chosen = [special_bytes[s] for s in allowed_special if s in special_bytes]
    if not chosen:
        return 0
    cdef bytes buf = PyBytes_FromStringAndSize(NULL, len(chosen) * sizeof(Special))
    keep.append(buf)
    ss.items = <Special*>PyBytes_AS_STRING(buf)
    cdef Py_ssize_t k = 0
    for off, length, tok in chosen:
        if length == 0:
            continue
        ss.items[k].text = arena + <int64_t>off
        ss.items[k].length = length
        ss.items[k].token = <uint32_t>tok
        k += 1
    ss.count = k
    special_set_index(ss)
    return 0


#: NeedleSets a core keeps, by set (an Encoding passes the same few sets every call)
cdef Py_ssize_t NEEDLE_CACHE_MAX = 64


cdef NeedleSet needle_set_cached(dict cache, object disallowed_special):
    if not disallowed_special:
        return None
    if isinstance(disallowed_special, str):
        raise TypeError("disallowed_special must be a collection of str (the Python "
                        "layer maps 'all')")
    key = (disallowed_special if type(disallowed_special) is frozenset
           else frozenset(disallowed_special))
    needles = cache.get(key)
    if needles is None:
        needles = NeedleSet(key)
        if len(cache) >= NEEDLE_CACHE_MAX:
            cache.clear()
        cache[key] = needles
    return needles
