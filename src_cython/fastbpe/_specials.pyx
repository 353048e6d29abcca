"""Special tokens: the scan for the allowed ones in a text, and the sets of disallowed
ones (see ``_specials.pxd``).

The rule (``reference.bpe.find_special``): the leftmost item, the longest of those that
start there. The scan goes from candidate to candidate, where a candidate is a position
whose first two bytes begin an item (a 65536-bit table of pairs), found 16 positions a
step: tiktoken's special tokens all start with "<|", so ``include/fbe_find_pair.h``
looks for that pair (memchr for "<" alone would stop at every tag of HTML); a set with
up to 4 distinct first bytes (DeepSeek V4's 53 added tokens: "<" and the first byte of
"｜") compares 16 bytes with each of them (``include/fbe_find_firsts.h``) and filters the
hits by the pair table; more first bytes take the pair table byte by byte. A candidate
compares only the items with its first two bytes (sorted longest first: the first that
matches is the longest), never the whole set."""
from libc.stdint cimport int64_t, uint32_t
from libc.stdlib cimport qsort
from libc.string cimport memchr, memcmp, memset

cdef extern from "Python.h":
    object PyBytes_FromStringAndSize(const char* s, Py_ssize_t n)
    char* PyBytes_AS_STRING(object b)

cdef extern from "fbe_find_pair.h" nogil:
    Py_ssize_t fbe_find_pair(const unsigned char* p, Py_ssize_t start, Py_ssize_t n,
                             int b0, int b1) noexcept

cdef extern from "fbe_find_firsts.h" nogil:
    Py_ssize_t fbe_find_firsts(const unsigned char* p, Py_ssize_t start, Py_ssize_t n,
                               const unsigned char* f, int k,
                               const unsigned long long* pairs, const int* bucket) noexcept
    Py_ssize_t fbe_find_pairs(const unsigned char* p, Py_ssize_t start, Py_ssize_t n,
                              const unsigned long long* pairs, const int* bucket) noexcept


def _find_pair(bytes text, Py_ssize_t start, int b0, int b1):
    """Testing hook: fbe_find_pair over text (the first i >= start with text[i:i + 2] ==
    bytes([b0, b1]), or len(text))."""
    return fbe_find_pair(<const unsigned char*>PyBytes_AS_STRING(text), start, len(text), b0, b1)


cdef inline int second_key(const Special* it) noexcept nogil:
    """The second byte of an item, 256 for a 1-byte item (sorted after all others)."""
    return it.text[1] if it.length >= 2 else 256


cdef int compare_items(const void* a, const void* b) noexcept nogil:
    """The order of special_set_index: first byte, second byte, longest first, bytes
    (a set has no two equal items, so the order is total)."""
    cdef const Special* x = <const Special*>a
    cdef const Special* y = <const Special*>b
    cdef int d = <int>x.text[0] - <int>y.text[0]
    if d == 0:
        d = second_key(x) - second_key(y)
    if d == 0 and x.length != y.length:
        return -1 if x.length > y.length else 1
    if d == 0:
        d = memcmp(x.text, y.text, x.length)
    return d


cdef int special_set_index(SpecialSet* ss, list keep) except -1:
    """Sort the items and fill the other fields from them (see ``_specials.pxd``)."""
    cdef Py_ssize_t k
    cdef int b, b0, b1
    cdef bint seen[256]
    ss.common_first = ss.common_second = -1
    ss.n_first = 0
    ss.pairs = NULL
    ss.bucket = NULL
    if ss.count == 0:
        return 0
    cdef bytes tables = PyBytes_FromStringAndSize(NULL, 1024 * sizeof(unsigned long long)
                                                  + 257 * sizeof(int))
    keep.append(tables)
    cdef unsigned long long* pairs = <unsigned long long*>PyBytes_AS_STRING(tables)
    cdef int* bucket = <int*>(pairs + 1024)
    memset(pairs, 0, 1024 * sizeof(unsigned long long))
    memset(seen, 0, sizeof(seen))
    qsort(ss.items, ss.count, sizeof(Special), compare_items)
    ss.common_first = ss.items[0].text[0]
    ss.common_second = second_key(&ss.items[0])
    for k in range(ss.count):
        assert ss.items[k].length >= 1, "an empty special token reached the scan"
        b0 = ss.items[k].text[0]
        b1 = second_key(&ss.items[k])
        if b0 != ss.common_first or b1 != ss.common_second:
            ss.common_second = -1
        if b0 != ss.common_first:
            ss.common_first = -1
        if not seen[b0]:
            seen[b0] = True
            if ss.n_first < 4:
                ss.firsts[ss.n_first] = b0
            ss.n_first += 1
        if b1 == 256:       # a 1-byte item: every pair that starts with it
            for b in range(256):
                pairs[(b0 << 8 | b) >> 6] |= 1ULL << ((b0 << 8 | b) & 63)
        else:
            pairs[(b0 << 8 | b1) >> 6] |= 1ULL << ((b0 << 8 | b1) & 63)
    if ss.common_second == 256:
        ss.common_second = -1
    k = 0
    for b in range(257):    # bucket[b]: the first item whose first byte is >= b
        while k < ss.count and ss.items[k].text[0] < b:
            k += 1
        bucket[b] = <int>k
    ss.pairs = pairs
    ss.bucket = bucket
    return 0


cdef bint find_special(const SpecialSet* ss, const unsigned char* text, Py_ssize_t start,
                       Py_ssize_t n, Py_ssize_t* found_start, Py_ssize_t* found_end,
                       uint32_t* found_token) noexcept nogil:
    """Leftmost item of ss in text[start:n] (longest one if several start at the same
    place); False if there is none (see the module docstring for the scan)."""
    cdef Py_ssize_t i = start, k, lo, hi, mid
    cdef int b1
    cdef const Special* it
    if ss == NULL or ss.count == 0:
        return False
    while True:
        if ss.common_second >= 0:
            i = fbe_find_pair(text, i, n, ss.common_first, ss.common_second)
        elif ss.n_first <= 4:
            i = fbe_find_firsts(text, i, n, ss.firsts, ss.n_first, ss.pairs, ss.bucket)
        else:
            i = fbe_find_pairs(text, i, n, ss.pairs, ss.bucket)
        if i >= n:
            return False
        lo = ss.bucket[text[i]]
        hi = ss.bucket[text[i] + 1]
        if i + 1 < n:
            # the first item of the bucket whose second byte is text[i + 1]
            b1 = text[i + 1]
            k = hi
            while lo < k:
                mid = (lo + k) >> 1
                if second_key(&ss.items[mid]) < b1:
                    lo = mid + 1
                else:
                    k = mid
            while lo < hi and second_key(&ss.items[lo]) == b1:
                it = &ss.items[lo]
                # the third byte inline first: HTML's "<td" and "<div" share two bytes
                # with DeepSeek's "<think>" and "<dsml:", rarely three
                if it.length <= n - i and (it.length == 2 or (
                        it.text[2] == text[i + 2]
                        and memcmp(it.text + 3, text + i + 3, it.length - 3) == 0)):
                    found_start[0] = i
                    found_end[0] = i + it.length
                    found_token[0] = it.token
                    return True
                lo += 1
        if hi > lo and ss.items[hi - 1].length == 1:   # a 1-byte item: last of its bucket
            found_start[0] = i
            found_end[0] = i + 1
            found_token[0] = ss.items[hi - 1].token
            return True
        i += 1


cdef class _TestSet:
    """Testing and benchmark hook: a SpecialSet over tokens (a list of distinct,
    non-empty bytes), item k with token k."""
    cdef SpecialSet ss
    cdef list keep

    def __cinit__(self, list tokens):
        cdef Py_ssize_t k
        cdef bytes items = PyBytes_FromStringAndSize(NULL, max(1, len(tokens)) * sizeof(Special))
        self.keep = [items] + list(tokens)
        self.ss.items = <Special*>PyBytes_AS_STRING(items)
        for k, t in enumerate(tokens):
            if not isinstance(t, bytes) or not t:
                raise ValueError(f"token {k} must be non-empty bytes, got {t!r}")
            self.ss.items[k].text = <const unsigned char*>PyBytes_AS_STRING(t)
            self.ss.items[k].length = len(t)
            self.ss.items[k].token = <uint32_t>k
        self.ss.count = len(tokens)
        special_set_index(&self.ss, self.keep)

    @property
    def scan(self):
        """Which scan finds the candidates: "pair", "firsts" or "pairs"."""
        if self.ss.common_second >= 0:
            return "pair"
        return "firsts" if self.ss.n_first <= 4 else "pairs"

    def find_all(self, bytes text, Py_ssize_t start=0):
        """The matches (start, end, token index) from start on, each scan resuming at
        the last match's end, as encoding does."""
        cdef Py_ssize_t s, e, n = len(text)
        cdef uint32_t tok
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(text)
        out = []
        while find_special(&self.ss, p, start, n, &s, &e, &tok):
            out.append((s, e, tok))
            start = e
        return out

    def count_passes(self, bytes text, Py_ssize_t repeat):
        """repeat passes over text (find_all without the list), the number of matches."""
        cdef Py_ssize_t s, e, n = len(text), pos, r, found = 0
        cdef uint32_t tok
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(text)
        with nogil:
            for r in range(repeat):
                pos = 0
                while find_special(&self.ss, p, pos, n, &s, &e, &tok):
                    found += 1
                    pos = e
        return found


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
        self.keep = []
        special_set_index(&self.ss, self.keep)


cdef int special_set_fill(SpecialSet* ss, dict special_bytes, const unsigned char* arena,
                          object allowed_special, list keep) except -1:
    ss.count = 0
    ss.items = NULL
    special_set_index(ss, keep)
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
    special_set_index(ss, keep)
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
