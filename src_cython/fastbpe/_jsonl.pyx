"""Native JSON Lines reading: one top-level string field of every line, without the GIL.

The rules are those of ``fastbpe.reference.jsonl`` (the specification, json.loads based);
``fastbpe.io.jsonl`` puts this kernel and the reference together. This module only makes
the common case fast:

* Each line is validated completely (nested objects and arrays, strings with their
  escapes and UTF-8, numbers, literals) by a small iterative parser with an explicit
  stack, and the span of its field's value is remembered (the *last* one if the key
  repeats, as json.loads keeps in its dict). Keys are compared after decoding their
  escapes, so ``"te\\u0078t"`` is ``"text"``.
* Strings are scanned eight bytes at a time (a word holds no quote, backslash, control
  byte or non-ASCII byte) and byte by byte otherwise, UTF-8 checked as strictly as
  Python's decoder (no overlongs, surrogates or code points past U+10FFFF).
* The value is copied (no escapes) or decoded (escapes, surrogate pairs) straight into the
  result ``bytes``, allocated once at the block's size and shrunk at the end: decoding
  never makes a string longer.
* The scanner accepts a strict subset of what json.loads accepts; anything else is
  reported as a bad line (see ``_jsonl.pxd``) and left to json.loads by the caller.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memchr, memcmp, memcpy

from fastbpe._vec cimport I64Vec, i64_push

cnp.import_array()

cdef extern from "Python.h":
    ctypedef struct PyObject
    PyObject* bytes_new_raw "PyBytes_FromStringAndSize"(const char* s, Py_ssize_t n)
    char* bytes_data_raw "PyBytes_AS_STRING"(PyObject* o)
    int bytes_resize_raw "_PyBytes_Resize"(PyObject** o, Py_ssize_t n)
    void decref_raw "Py_DECREF"(PyObject* o)

cdef enum:
    C_PLAIN = 0       # printable ASCII other than '"' and '\\'
    C_QUOTE = 1
    C_BACKSLASH = 2
    C_CONTROL = 3     # < 0x20: json.loads (strict) refuses it raw in a string
    C_HIGH = 4        # >= 0x80: a UTF-8 sequence to check
    LIST_FIRST = 64   # output lists start with room for 64 items

cdef unsigned char CLS[256]
cdef int _i
for _i in range(256):
    CLS[_i] = C_CONTROL if _i < 0x20 else C_HIGH if _i >= 0x80 else C_PLAIN
CLS[ord('"')] = C_QUOTE
CLS[ord('\\')] = C_BACKSLASH

cdef uint64_t ONES = 0x0101010101010101ULL
cdef uint64_t HIGHS = 0x8080808080808080ULL


cdef inline bint word_is_plain(uint64_t w) noexcept nogil:
    """Whether all 8 bytes of w are C_PLAIN (the bit tricks are exact for 'any byte')."""
    cdef uint64_t q = w ^ (ONES * 0x22)
    cdef uint64_t b = w ^ (ONES * 0x5C)
    cdef uint64_t hit = ((w - ONES * 0x20) & ~w) | ((q - ONES) & ~q) | ((b - ONES) & ~b) | w
    return (hit & HIGHS) == 0


cdef inline Py_ssize_t skip_ws(const unsigned char* s, Py_ssize_t p, Py_ssize_t e) noexcept nogil:
    cdef unsigned char c
    while p < e:
        c = s[p]
        if c != 32 and c != 9 and c != 13 and c != 10:
            break
        p += 1
    return p


cdef inline int hex_value(unsigned char c) noexcept nogil:
    if 48 <= c <= 57:
        return c - 48
    c |= 0x20
    if 97 <= c <= 102:
        return c - 87
    return -1


cdef inline int hex4(const unsigned char* s) noexcept nogil:
    """The value of 4 hex digits (checked by scan_string)."""
    return (hex_value(s[0]) << 12) | (hex_value(s[1]) << 8) | (hex_value(s[2]) << 4) | hex_value(s[3])


cdef inline Py_ssize_t utf8_length(const unsigned char* s, Py_ssize_t p, Py_ssize_t e) noexcept nogil:
    """Length of the valid UTF-8 sequence at s[p] (a byte >= 0x80), 0 if invalid."""
    cdef unsigned char c = s[p]
    cdef unsigned char lo = 0x80
    cdef unsigned char hi = 0xBF
    cdef Py_ssize_t n, i
    if c < 0xC2:
        return 0
    if c < 0xE0:
        n = 1
    elif c < 0xF0:
        n = 2
        if c == 0xE0:
            lo = 0xA0         # overlong
        elif c == 0xED:
            hi = 0x9F         # surrogates
    elif c < 0xF5:
        n = 3
        if c == 0xF0:
            lo = 0x90         # overlong
        elif c == 0xF4:
            hi = 0x8F         # past U+10FFFF
    else:
        return 0
    if p + n >= e or not (lo <= s[p + 1] <= hi):
        return 0
    for i in range(2, n + 1):
        if not (0x80 <= s[p + i] <= 0xBF):
            return 0
    return n + 1


cdef Py_ssize_t scan_string(const unsigned char* s, Py_ssize_t p, Py_ssize_t e,
                            bint* escaped) noexcept nogil:
    """Check the string whose content starts at p (after its quote): the index after its
    closing quote, or -1. Sets *escaped if it holds a backslash escape."""
    cdef uint64_t w
    cdef unsigned char c
    cdef int k
    cdef Py_ssize_t n
    while True:
        while p + 8 <= e:
            memcpy(&w, s + p, 8)
            if not word_is_plain(w):
                break
            p += 8
        if p >= e:
            return -1
        c = s[p]
        k = CLS[c]
        if k == C_PLAIN:
            p += 1
        elif k == C_QUOTE:
            return p + 1
        elif k == C_BACKSLASH:
            escaped[0] = True
            if p + 1 >= e:
                return -1
            c = s[p + 1]
            if c == 117:  # u
                if p + 6 > e:
                    return -1
                if (hex_value(s[p + 2]) < 0 or hex_value(s[p + 3]) < 0
                        or hex_value(s[p + 4]) < 0 or hex_value(s[p + 5]) < 0):
                    return -1
                p += 6
            elif c == 34 or c == 92 or c == 47 or c == 98 or c == 102 or c == 110 or c == 114 or c == 116:
                p += 2
            else:
                return -1
        elif k == C_CONTROL:
            return -1
        else:
            n = utf8_length(s, p, e)
            if n == 0:
                return -1
            p += n


cdef Py_ssize_t scan_scalar(const unsigned char* s, Py_ssize_t p, Py_ssize_t e) noexcept nogil:
    """The index after the number or literal at p, or -1 (NaN, Infinity: left to json)."""
    cdef Py_ssize_t start = p
    cdef unsigned char c = s[p]
    if c == 116:  # t
        return p + 4 if p + 4 <= e and memcmp(s + p, b"true", 4) == 0 else -1
    if c == 102:  # f
        return p + 5 if p + 5 <= e and memcmp(s + p, b"false", 5) == 0 else -1
    if c == 110:  # n
        return p + 4 if p + 4 <= e and memcmp(s + p, b"null", 4) == 0 else -1
    if c == 45:  # -
        p += 1
        if p >= e:
            return -1
    if s[p] == 48:  # a leading 0 stands alone
        p += 1
    elif 49 <= s[p] <= 57:
        p += 1
        while p < e and 48 <= s[p] <= 57:
            p += 1
    else:
        return -1
    if p < e and s[p] == 46:  # .
        p += 1
        if p >= e or not (48 <= s[p] <= 57):
            return -1
        while p < e and 48 <= s[p] <= 57:
            p += 1
    if p < e and (s[p] | 0x20) == 101:  # e E
        p += 1
        if p < e and (s[p] == 43 or s[p] == 45):
            p += 1
        if p >= e or not (48 <= s[p] <= 57):
            return -1
        while p < e and 48 <= s[p] <= 57:
            p += 1
    if p - start > JSONL_MAX_NUMBER:
        return -1
    return p


cdef inline Py_ssize_t decode_escape(const unsigned char* s, Py_ssize_t p, Py_ssize_t e,
                                     unsigned char* out, Py_ssize_t* n) noexcept nogil:
    """Decode the (checked) escape at s[p] == '\\' into out (*n bytes, at most 4): the
    index after it, or -1 for a lone surrogate."""
    cdef unsigned char c = s[p + 1]
    cdef int cp, lo
    if c != 117:  # not \u
        out[0] = (8 if c == 98 else 12 if c == 102 else 10 if c == 110
                  else 13 if c == 114 else 9 if c == 116 else c)
        n[0] = 1
        return p + 2
    cp = hex4(s + p + 2)
    p += 6
    if 0xD800 <= cp < 0xDC00:  # a high surrogate: joined with a low one that follows at once
        if p + 6 > e or s[p] != 92 or s[p + 1] != 117:
            return -1
        lo = hex4(s + p + 2)
        if not (0xDC00 <= lo < 0xE000):
            return -1
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
        p += 6
    elif 0xDC00 <= cp < 0xE000:
        return -1
    if cp < 0x80:
        out[0] = cp
        n[0] = 1
    elif cp < 0x800:
        out[0] = 0xC0 | (cp >> 6)
        out[1] = 0x80 | (cp & 0x3F)
        n[0] = 2
    elif cp < 0x10000:
        out[0] = 0xE0 | (cp >> 12)
        out[1] = 0x80 | ((cp >> 6) & 0x3F)
        out[2] = 0x80 | (cp & 0x3F)
        n[0] = 3
    else:
        out[0] = 0xF0 | (cp >> 18)
        out[1] = 0x80 | ((cp >> 12) & 0x3F)
        out[2] = 0x80 | ((cp >> 6) & 0x3F)
        out[3] = 0x80 | (cp & 0x3F)
        n[0] = 4
    return p


cdef Py_ssize_t decode_string(const unsigned char* s, Py_ssize_t p, Py_ssize_t e,
                              unsigned char* out) noexcept nogil:
    cdef Py_ssize_t o = 0
    cdef Py_ssize_t n, run
    cdef const unsigned char* q
    while p < e:
        q = <const unsigned char*>memchr(s + p, 92, e - p)
        run = (q - s if q != NULL else e) - p
        memcpy(out + o, s + p, run)
        o += run
        p += run
        if p < e:
            p = decode_escape(s, p, e, out + o, &n)
            if p < 0:
                return -1
            o += n
    return o


cdef bint key_equals(const unsigned char* s, Py_ssize_t p, Py_ssize_t e, bint escaped,
                     const unsigned char* field, Py_ssize_t flen) noexcept nogil:
    """Whether the (checked) key s[p:e] decodes to field[:flen]."""
    cdef unsigned char buf[4]
    cdef Py_ssize_t i = 0
    cdef Py_ssize_t n
    if not escaped:
        return e - p == flen and memcmp(s + p, field, flen) == 0
    while p < e:
        if s[p] != 92:
            if i >= flen or s[p] != field[i]:
                return False
            p += 1
            i += 1
        else:
            p = decode_escape(s, p, e, buf, &n)
            if p < 0 or i + n > flen or memcmp(buf, field + i, n) != 0:
                return False  # a lone surrogate is no UTF-8 field; json decides
            i += n
    return i == flen


cdef int scan_line(const unsigned char* s, Py_ssize_t p, Py_ssize_t e,
                   const unsigned char* field, Py_ssize_t flen, FieldSpan* span) noexcept nogil:
    cdef unsigned char closer[JSONL_MAX_DEPTH]  # what closes each open container
    cdef int depth = 1
    cdef int found = 0   # 1: the field's (last) value is a string; 2: it is not
    cdef bint first = True  # just after "{" or "[" (so the closer may follow)
    cdef bint is_field, esc
    cdef unsigned char c
    cdef Py_ssize_t k
    p = skip_ws(s, p, e)
    if p == e:
        return LINE_BLANK
    if s[p] != 123:  # {
        return LINE_BAD
    closer[0] = 125
    p += 1
    while depth > 0:
        p = skip_ws(s, p, e)
        if p >= e:
            return LINE_BAD
        c = s[p]
        if first and c == closer[depth - 1]:  # an empty container
            p += 1
            depth -= 1
        else:
            is_field = False
            if closer[depth - 1] == 125:  # in an object: a key and ":" first
                if c != 34:
                    return LINE_BAD
                esc = False
                k = p + 1
                p = scan_string(s, k, e, &esc)
                if p < 0:
                    return LINE_BAD
                is_field = depth == 1 and key_equals(s, k, p - 1, esc, field, flen)
                p = skip_ws(s, p, e)
                if p >= e or s[p] != 58:  # :
                    return LINE_BAD
                p = skip_ws(s, p + 1, e)
                if p >= e:
                    return LINE_BAD
                c = s[p]
            if c == 123 or c == 91:  # { [
                if is_field:
                    found = 2
                if depth == JSONL_MAX_DEPTH:
                    return LINE_BAD
                closer[depth] = 125 if c == 123 else 93
                depth += 1
                p += 1
                first = True
                continue
            if c == 34:
                esc = False
                k = p + 1
                p = scan_string(s, k, e, &esc)
                if p < 0:
                    return LINE_BAD
                if is_field:
                    found = 1
                    span.start = k
                    span.end = p - 1
                    span.escaped = esc
            else:
                p = scan_scalar(s, p, e)
                if p < 0:
                    return LINE_BAD
                if is_field:
                    found = 2
        # after a value: "," goes on to the next one, closers end containers
        while depth > 0:
            p = skip_ws(s, p, e)
            if p >= e:
                return LINE_BAD
            c = s[p]
            if c == 44:  # ,
                p += 1
                first = False
                break
            if c != closer[depth - 1]:
                return LINE_BAD
            p += 1
            depth -= 1
    if skip_ws(s, p, e) != e:
        return LINE_BAD
    return LINE_DOC if found == 1 else LINE_BAD


cdef struct Found:
    unsigned char* data  # the documents, back to back (room for the whole block)
    Py_ssize_t size
    I64Vec ends
    I64Vec lines
    I64Vec bad           # (line, start, end) per bad line
    bint no_memory


cdef void scan_block(const unsigned char* s, Py_ssize_t n, const unsigned char* field,
                     Py_ssize_t flen, Found* out) noexcept nogil:
    cdef Py_ssize_t p = 0
    cdef Py_ssize_t e, w
    cdef int64_t line = 0
    cdef int kind
    cdef FieldSpan span
    cdef const unsigned char* q
    cdef int err = 0
    while p < n:
        q = <const unsigned char*>memchr(s + p, 10, n - p)
        e = q - s if q != NULL else n
        kind = scan_line(s, p, e, field, flen, &span)
        if kind == LINE_DOC:
            if span.escaped:
                w = decode_string(s, span.start, span.end, out.data + out.size)
                if w < 0:
                    kind = LINE_BAD  # a lone surrogate: json.loads and the surrogate rule decide
            else:
                w = span.end - span.start
                memcpy(out.data + out.size, s + span.start, w)
            if kind == LINE_DOC and w > 0:
                out.size += w
                err |= i64_push(&out.ends, out.size, LIST_FIRST)
                err |= i64_push(&out.lines, line, LIST_FIRST)
        if kind == LINE_BAD:
            err |= i64_push(&out.bad, line, LIST_FIRST)
            err |= i64_push(&out.bad, p, LIST_FIRST)
            err |= i64_push(&out.bad, e, LIST_FIRST)
        if err:
            out.no_memory = True
            return
        p = e + 1
        line += 1


cdef object int64_array(const I64Vec* v):
    cdef cnp.ndarray a = np.empty(v.size, dtype=np.int64)
    if v.size:
        memcpy(cnp.PyArray_DATA(a), v.data, v.size * sizeof(int64_t))
    return a


def extract_field(block, str field):
    """The ``field`` strings of the JSON objects on the lines of ``block``.

    ``block`` (bytes-like) holds whole lines, each ended by ``"\\n"`` or the end of the
    block. Returns ``(data, ends, lines, bad)``: ``data`` the UTF-8 of the non-empty
    values back to back, ``ends[k]`` the end of value k in ``data``, ``lines[k]`` its
    0-based line in the block (int64 arrays), and ``bad`` a list of ``(line, start,
    end)`` for the lines left to json.loads (``block[start:end]``, no ``"\\n"``), in order.
    Blank lines and empty values are in neither. The GIL is released during the scan.

    >>> data, ends, lines, bad = extract_field(b'{"text": "a\\\\u00e9"}\\n\\n[1]\\n{"text": "b"}', "text")
    >>> data, ends.tolist(), lines.tolist(), bad
    (b'a\\xc3\\xa9b', [3, 4], [0, 3], [(2, 21, 24)])
    """
    if isinstance(block, str):
        raise TypeError("block must be bytes (UTF-8 JSON Lines), not str")
    cdef const unsigned char[::1] view = block
    cdef bytes key = field.encode("utf-8", "surrogatepass")  # a lone surrogate matches no key here
    cdef Py_ssize_t n = view.shape[0]
    cdef const unsigned char* s = &view[0] if n else <const unsigned char*>b""
    cdef const unsigned char* f = key
    cdef Py_ssize_t flen = len(key)
    cdef Found out
    cdef PyObject* raw = bytes_new_raw(NULL, n)
    cdef Py_ssize_t i
    if raw == NULL:
        raise MemoryError()
    out.data = <unsigned char*>bytes_data_raw(raw)
    out.size = 0
    out.ends.data = out.lines.data = out.bad.data = NULL
    out.ends.size = out.lines.size = out.bad.size = 0
    out.ends.cap = out.lines.cap = out.bad.cap = 0
    out.no_memory = False
    try:
        with nogil:
            scan_block(s, n, f, flen, &out)
        if out.no_memory:
            raise MemoryError()
        if bytes_resize_raw(&raw, out.size) < 0:  # frees raw on failure
            raise MemoryError()
        data = <object>raw
        ends = int64_array(&out.ends)
        lines = int64_array(&out.lines)
        bad = [(out.bad.data[i], out.bad.data[i + 1], out.bad.data[i + 2])
               for i in range(0, out.bad.size, 3)]
    finally:
        if raw != NULL:
            decref_raw(raw)
        free(out.ends.data)
        free(out.lines.data)
        free(out.bad.data)
    return data, ends, lines, bad
