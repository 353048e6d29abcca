"""HF's NFC natively, and the search for added tokens in a str: the per-document route
of ``fastbpe.bpe.hf`` in front of the rank core.

``nfc`` is ``fastbpe.reference.hf.nfc``: one pass over the str's code points finds the
spans NFC may change (``reference.hf.nfc_spans``, *Corollary B*: from the boundary
before an UNSAFE char to the next char that is not UNSAFE), from the class table of
``reference._nfc_table`` (HF's Unicode 9.0 view; one byte a code point, built from its
runs at import, ~1 ms); only those spans go to ``unicodedata.normalize``. A str of one
byte a char is below U+0300, NFC-stable (``reference.hf.NFC_STABLE_BELOW``), and returns
at once; a two-byte str is first scanned for a char from U+0300 on with no branch in
the loop (vectorized). Spans closer than ``MERGE_GAP`` chars are normalized as one (a
span from a boundary to a boundary may hold other boundaries), so a text with a mark
every few chars costs one call, not one a mark; never across a FROZEN char, which
``unicodedata`` may know and HF does not.

``Needles`` answers whether a str holds any of some strings (the added tokens a call
matches) without a regex: candidates are the places of the strings' first chars
(memchr for one shared first char in a str of one byte a char), each compared in place.
"""
from libc.stdint cimport uint8_t, uint16_t, uint32_t
from libc.string cimport memchr
import unicodedata

import numpy as np

from fastbpe.reference import _nfc_table

cdef extern from "Python.h":
    int PyUnicode_KIND(object o)
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    Py_ssize_t PyUnicode_Tailmatch(object s, object sub, Py_ssize_t start, Py_ssize_t end, int direction) except -1

DEF STARTER = 1
DEF UNSAFE = 2
DEF FROZEN = 3
#: spans closer than this many chars are normalized as one
DEF MERGE_GAP = 16


def _class_array():
    """The NFC class of every code point, from the runs of ``_nfc_table``."""
    starts = np.asarray(_nfc_table.CLASS_STARTS + (0x110000,), dtype=np.int64)
    return np.repeat(np.asarray(_nfc_table.CLASS_VALUES, dtype=np.uint8), np.diff(starts))


_CLASSES = _class_array()
cdef const uint8_t[::1] _classes_view = _CLASSES
cdef const uint8_t* _cls = &_classes_view[0]
_normalize = unicodedata.normalize


cdef inline uint32_t _at(int kind, const void* data, Py_ssize_t i) noexcept nogil:
    if kind == 1:
        return (<const uint8_t*>data)[i]
    if kind == 2:
        return (<const uint16_t*>data)[i]
    return (<const uint32_t*>data)[i]


cdef bint _below_u0300(str text) noexcept:
    """Whether every char of text is below U+0300 (NFC-stable), from its kind."""
    cdef int kind = PyUnicode_KIND(text)
    cdef Py_ssize_t i, n
    cdef const uint16_t* u
    cdef uint16_t high = 0
    if kind == 1:
        return True
    if kind != 2:
        return False
    n = PyUnicode_GET_LENGTH(text)
    u = <const uint16_t*>PyUnicode_DATA(text)
    for i in range(n):
        high |= u[i] >= 0x300
    return not high


ctypedef fused char_t:
    uint8_t
    uint16_t
    uint32_t


cdef list _spans(str text):
    """``reference.hf.nfc_spans`` (spans closer than MERGE_GAP merged), flat: [a0, b0,
    a1, b1, ...]; one loop per str kind (no kind switch a char)."""
    cdef int kind = PyUnicode_KIND(text)
    cdef const void* data = PyUnicode_DATA(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef list out = []
    if kind == 1:
        _scan(<const uint8_t*>data, n, out)
    elif kind == 2:
        _scan(<const uint16_t*>data, n, out)
    else:
        _scan(<const uint32_t*>data, n, out)
    return out


cdef int _scan(const char_t* u, Py_ssize_t n, list out) except -1:
    cdef Py_ssize_t i = 0, j, boundary = 0, last_end = -MERGE_GAP
    cdef uint8_t c
    while i < n:
        c = _cls[u[i]]
        if c != UNSAFE:
            boundary = i if c == STARTER else i + 1
            if c == FROZEN:   # unicodedata may know it: no merged span holds it
                last_end = -MERGE_GAP
            i += 1
            continue
        j = i + 1
        while j < n and _cls[u[j]] == UNSAFE:
            j += 1
        if boundary - last_end < MERGE_GAP and out:
            out[len(out) - 1] = j
        else:
            out.append(boundary)
            out.append(j)
        last_end = boundary = i = j
    return 0


def nfc_spans(str text):
    """``reference.hf.nfc_spans`` with spans closer than MERGE_GAP merged, as (start,
    end) pairs.

    >>> nfc_spans("e\\u0301" + "x" * 20 + "1\\u0301"), nfc_spans("e\\u0301 \\u1df6 \\u0301")
    ([(0, 2), (23, 24)], [(0, 2), (5, 6)])
    """
    flat = [] if _below_u0300(text) else _spans(text)
    return list(zip(flat[::2], flat[1::2]))


def nfc(str text):
    """``reference.hf.nfc``: HF's NFC of text, the same object when nothing changes.

    >>> nfc("e\\u0301"), nfc("\\u212b"), nfc("abc") is nfc("abc")
    ('é', 'Å', True)
    """
    if _below_u0300(text):
        return text
    cdef list flat = _spans(text)
    if not flat:
        return text
    cdef list out = []
    cdef Py_ssize_t k, prev = 0, a, b
    cdef bint changed = False
    for k in range(0, len(flat), 2):
        a, b = flat[k], flat[k + 1]
        span = text[a:b]
        done = _normalize("NFC", span)
        changed |= done != span
        out.append(text[prev:a])
        out.append(done)
        prev = b
    if not changed:
        return text
    out.append(text[prev:])
    return "".join(out)


cdef class Needles:
    """Whether a str holds any of ``strings`` (``needles(text)``), natively: the places of
    the strings' first chars are the candidates (up to 16 distinct first chars, compared
    in C; memchr when all share one below U+0100 and the str has one byte a char), each
    compared in place.

    >>> Needles(["<a>", "<b>"])("x <b> y"), Needles(["<a>"])("x <b"), Needles([])("x")
    (True, False, False)
    >>> Needles(["ab", "\\u0101"])("x\\u0101"), Needles([chr(c) + "!" for c in range(40, 60)])("5!")
    (True, True)
    """
    cdef tuple strings
    cdef uint32_t firsts[16]
    cdef int n_firsts                # 0: more than 16 first chars, every place a candidate
    cdef uint32_t seconds[64]        # each string's second char (0x110000: it has none)
    cdef bint by_second              # at most 64 strings: a candidate's second char first

    def __init__(self, strings):
        self.strings = tuple(sorted({s for s in strings if s}))
        if not all(isinstance(s, str) for s in self.strings):
            raise TypeError("Needles takes strs")
        found = sorted({ord(s[0]) for s in self.strings})
        self.n_firsts = len(found) if len(found) <= 16 else 0
        for k in range(self.n_firsts):
            self.firsts[k] = found[k]
        self.by_second = len(self.strings) <= 64
        for k in range(len(self.strings) if self.by_second else 0):
            self.seconds[k] = ord(self.strings[k][1]) if len(self.strings[k]) > 1 else 0x110000

    def __call__(self, str text):
        cdef int kind = PyUnicode_KIND(text)
        cdef const void* data = PyUnicode_DATA(text)
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0
        cdef const uint8_t* q
        cdef uint32_t c
        cdef int k
        cdef bint one_byte = kind == 1 and self.n_firsts == 1 and self.firsts[0] < 256
        if not self.strings:
            return False
        while i < n:
            if one_byte:
                q = <const uint8_t*>memchr(<const uint8_t*>data + i, self.firsts[0], n - i)
                if q == NULL:
                    return False
                i = q - <const uint8_t*>data
            elif self.n_firsts:
                c = _at(kind, data, i)
                k = 0
                while k < self.n_firsts and self.firsts[k] != c:
                    k += 1
                if k == self.n_firsts:
                    i += 1
                    continue
            c = _at(kind, data, i + 1) if i + 1 < n else 0x110000
            for k in range(len(self.strings)):
                if self.by_second and self.seconds[k] != c and self.seconds[k] != 0x110000:
                    continue
                if PyUnicode_Tailmatch(text, self.strings[k], i, n, -1):
                    return True
            i += 1
        return False


#: ``Route`` answers for a text that a token the call matches sends elsewhere
PIPELINE, OWN = 0, 1


cdef class Route:
    """The per-document route of ``fastbpe.bpe.hf`` (``NFCCore`` with ``Llama3Core``
    behind it, or ``Llama3Core`` alone) in one call: ``route(text, needles)`` is

    * the text (its HF NFC when ``nfc`` is set) for the native core to encode whole;
    * a pair of strs: the text cut by ``bpe.hf.llama3_cut`` (when ``cut`` is set), each
      part encoded alone;
    * ``PIPELINE``: NFC changes the text and ``needles`` (the tokens the call matches)
      are in it before or after: the pipeline engine cuts them as HF does;
    * ``OWN``: the (NFC) text holds one of ``needles``: the core with the file's own
      pattern as a split program.

    ``spaces`` are the chars ``regex``'s ``\\s`` matches (all below U+3001).

    >>> r = Route(True, True, " \\t\\n\\r")
    >>> r("e\\u0301", None), r("a \\n  ", None), r("a<b>", Needles(["<b>"])), r("e\\u0301<b>", Needles(["<b>"]))
    ('é', ('a \\n', '  '), 1, 0)
    """
    cdef bint nfc
    cdef bint cut
    cdef uint8_t spaces[0x3001]

    def __init__(self, bint nfc, bint cut, spaces):
        self.nfc = nfc
        self.cut = cut
        for k in range(0x3001):
            self.spaces[k] = False
        for c in spaces:
            if ord(c) >= 0x3001:
                raise ValueError(f"space {c!r} is not below U+3001")
            self.spaces[ord(c)] = True

    cdef inline bint _space(self, uint32_t c) noexcept:
        return c < 0x3001 and self.spaces[c]

    def __call__(self, str text, Needles needles):
        cdef str done = nfc(text) if self.nfc else text
        if done is not text:
            if needles is not None and (needles(text) or needles(done)):
                return PIPELINE
        elif needles is not None and needles(done):
            return OWN
        if not self.cut:
            return done
        cdef int kind = PyUnicode_KIND(done)
        cdef const void* data = PyUnicode_DATA(done)
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(done), i
        cdef uint32_t c
        if n == 0:
            return done
        c = _at(kind, data, n - 1)
        if c == 10 or c == 13 or not self._space(c):
            return done   # the common case: no trailing run after a newline
        i = n - 1
        while i >= 0:   # the trailing run of whitespace: its last \r or \n
            c = _at(kind, data, i)
            if c == 10 or c == 13:
                return (done[:i + 1], done[i + 1:])
            if not self._space(c):
                break
            i -= 1
        return done
