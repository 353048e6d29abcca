"""Native JSON Lines reading: one top-level string field of every line, without the GIL.

The rules are those of ``fastbpe.reference.jsonl`` (the specification, json.loads based);
``fastbpe.io.jsonl`` puts this kernel and the reference together. This module only makes
the common case fast:

* Each line is validated completely (nested objects and arrays, strings with their
  escapes and UTF-8, numbers, literals) by a small iterative parser with an explicit
  stack, and the span of its field's value is remembered (the *last* one if the key
  repeats, as json.loads keeps in its dict). Keys are compared after decoding their
  escapes, so ``"te\\u0078t"`` is ``"text"``.
* Strings are scanned 16 bytes at a time (SSE2; 8 with bit tricks elsewhere) while a
  block holds no quote, backslash, control byte or non-ASCII byte (the first such byte is
  found from the block's bit mask), and character by character otherwise, UTF-8 checked as strictly as
  Python's decoder (no overlongs, surrogates or code points past U+10FFFF).
* The field's value is written (escapes and surrogate pairs decoded) straight into the
  result ``bytes`` while it is checked, in the same pass; the result is allocated once
  at the block's size and shrunk at the end: decoding never makes a string longer.
* The scanner accepts a strict subset of what json.loads accepts; anything else is
  reported as a bad line (see ``_jsonl.pxd``) and left to json.loads by the caller.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t
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

cdef unsigned char CLS[256]    # C_* of each byte inside a string
cdef unsigned char ESC[256]    # the byte a one-letter escape stands for; 0: not an escape
cdef signed char HEX[256]      # value of a hex digit; -1: not one
cdef unsigned char U8LEN[256]  # length of the UTF-8 sequence a byte starts; 0: starts none
cdef unsigned char U8LO[256]   # the range of the sequence's second byte (Python's strict
cdef unsigned char U8HI[256]   # decoder: no overlongs, surrogates or past U+10FFFF)
cdef int _i
for _i in range(256):
    CLS[_i] = C_CONTROL if _i < 0x20 else C_HIGH if _i >= 0x80 else C_PLAIN
    ESC[_i] = 0
    HEX[_i] = -1
    U8LEN[_i] = 2 if 0xC2 <= _i <= 0xDF else 3 if 0xE0 <= _i <= 0xEF else 4 if 0xF0 <= _i <= 0xF4 else 0
    U8LO[_i] = 0xA0 if _i == 0xE0 else 0x90 if _i == 0xF0 else 0x80
    U8HI[_i] = 0x9F if _i == 0xED else 0x8F if _i == 0xF4 else 0xBF
CLS[ord('"')] = C_QUOTE
CLS[ord('\\')] = C_BACKSLASH
for _i, _c in enumerate('"\\/bfnrt'):
    ESC[ord(_c)] = ord('"\\/\b\f\n\r\t'[_i])
for _i in range(10):
    HEX[48 + _i] = _i
for _i in range(6):
    HEX[65 + _i] = HEX[97 + _i] = 10 + _i

cdef extern from "fbe_json_plain.h":
    Py_ssize_t plain_run "fbpe_plain_run"(const unsigned char* s, Py_ssize_t p, Py_ssize_t e,
                                          unsigned char* out, Py_ssize_t* o) noexcept nogil


cdef inline Py_ssize_t skip_ws(const unsigned char* s, Py_ssize_t p, Py_ssize_t e) noexcept nogil:
    cdef unsigned char c
    while p < e:
        c = s[p]
        if c != 32 and c != 9 and c != 13 and c != 10:
            break
        p += 1
    return p


cdef inline int hex4(const unsigned char* s) noexcept nogil:
    """The value of the 4 hex digits at s, or -1."""
    cdef int a = HEX[s[0]], b = HEX[s[1]], c = HEX[s[2]], d = HEX[s[3]]
    if (a | b | c | d) < 0:
        return -1
    return (a << 12) | (b << 8) | (c << 4) | d


cdef inline Py_ssize_t utf8_run(const unsigned char* s, Py_ssize_t p, Py_ssize_t e) noexcept nogil:
    """The end of the run of valid UTF-8 sequences at s[p] (a byte >= 0x80) up to the
    next ASCII byte, or -1 at an invalid one."""
    cdef unsigned char c
    cdef Py_ssize_t n
    while True:
        c = s[p]
        n = U8LEN[c]
        if n == 0 or p + n >= e:  # (a string's closing quote still follows)
            return -1
        if not (U8LO[c] <= s[p + 1] <= U8HI[c]):
            return -1
        if n >= 3 and (s[p + 2] & 0xC0) != 0x80:
            return -1
        if n == 4 and (s[p + 3] & 0xC0) != 0x80:
            return -1
        p += n
        if s[p] < 0x80:
            return p


cdef inline Py_ssize_t read_escape(const unsigned char* s, Py_ssize_t p, Py_ssize_t e,
                                   int* cp) noexcept nogil:
    """The escape at s[p] == '\\': the index after it, or -1 if it is not valid JSON.
    *cp is its code point (a surrogate pair's escapes joined, as json.loads joins them),
    or -1 for a lone surrogate."""
    cdef unsigned char c
    cdef int v, lo
    if p + 1 >= e:
        return -1
    c = s[p + 1]
    if c != 117:  # not \u
        cp[0] = ESC[c]
        return p + 2 if cp[0] else -1
    if p + 6 > e:
        return -1
    v = hex4(s + p + 2)
    if v < 0:
        return -1
    p += 6
    cp[0] = v
    if 0xD800 <= v < 0xDC00:  # a high surrogate: joined with a low one that follows at once
        if p + 6 <= e and s[p] == 92 and s[p + 1] == 117:
            lo = hex4(s + p + 2)
            if lo < 0:
                return -1     # the next escape is invalid: so is the line
            if 0xDC00 <= lo < 0xE000:
                cp[0] = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00)
                return p + 6
        cp[0] = -1
    elif 0xDC00 <= v < 0xE000:
        cp[0] = -1
    return p


cdef inline Py_ssize_t put_utf8(unsigned char* out, int cp) noexcept nogil:
    """Write the UTF-8 of cp (not a surrogate); its length."""
    if cp < 0x80:
        out[0] = cp
        return 1
    if cp < 0x800:
        out[0] = 0xC0 | (cp >> 6)
        out[1] = 0x80 | (cp & 0x3F)
        return 2
    if cp < 0x10000:
        out[0] = 0xE0 | (cp >> 12)
        out[1] = 0x80 | ((cp >> 6) & 0x3F)
        out[2] = 0x80 | (cp & 0x3F)
        return 3
    out[0] = 0xF0 | (cp >> 18)
    out[1] = 0x80 | ((cp >> 12) & 0x3F)
    out[2] = 0x80 | ((cp >> 6) & 0x3F)
    out[3] = 0x80 | (cp & 0x3F)
    return 4


cdef Py_ssize_t scan_string(const unsigned char* s, Py_ssize_t p, Py_ssize_t e,
                            bint* escaped) noexcept nogil:
    """Check the string whose content starts at p (after its quote): the index after its
    closing quote, or -1. Sets *escaped if it holds a backslash escape."""
    cdef int k, cp
    cdef Py_ssize_t n
    while True:
        p = plain_run(s, p, e, NULL, NULL)  # plain ASCII by blocks, to the first other byte
        if p >= e:
            return -1
        if s[p] >= 0x80:  # a run of non-ASCII characters (CJK text) in one loop
            p = utf8_run(s, p, e)
            if p < 0:
                return -1
            continue
        k = CLS[s[p]]
        if k == C_PLAIN:
            p += 1
        elif k == C_QUOTE:
            return p + 1
        elif k == C_BACKSLASH:
            escaped[0] = True
            while True:  # a run of escapes (ensure_ascii text) in one loop
                p = read_escape(s, p, e, &cp)  # a lone surrogate is fine outside the field
                if p < 0:
                    return -1
                if p >= e or s[p] != 92:
                    break
        else:  # C_CONTROL
            return -1


cdef Py_ssize_t copy_string(const unsigned char* s, Py_ssize_t p, Py_ssize_t e,
                            unsigned char* out, Py_ssize_t* length, bint* lone) noexcept nogil:
    """scan_string that also writes the string's value (UTF-8, escapes decoded) to out:
    *length bytes; *lone is set for a lone surrogate escape (no UTF-8 form: not written).

    Whole blocks are stored before they are known to be plain, so out is written up to
    15 bytes past the value, but never further than the input has been read: out needs
    room for e - p bytes (decoding never makes a string longer)."""
    cdef int k, cp
    cdef Py_ssize_t n
    cdef Py_ssize_t o = 0
    cdef unsigned char c
    while True:
        p = plain_run(s, p, e, out, &o)
        if p >= e:
            return -1
        c = s[p]
        if c >= 0x80:  # the most common stop in non-English text: test it first
            n = utf8_run(s, p, e)
            if n < 0:
                return -1
            if n - p <= 16 and p + 16 <= e:
                memcpy(out + o, s + p, 16)  # a fixed size: inline moves, no call (same bound)
            else:
                memcpy(out + o, s + p, n - p)
            o += n - p
            p = n
            continue
        k = CLS[c]
        if k == C_PLAIN:
            out[o] = c
            o += 1
            p += 1
        elif k == C_QUOTE:
            length[0] = o
            return p + 1
        elif k == C_BACKSLASH:
            while True:
                p = read_escape(s, p, e, &cp)
                if p < 0:
                    return -1
                if cp < 0:
                    lone[0] = True
                else:
                    o += put_utf8(out + o, cp)
                if p >= e or s[p] != 92:
                    break
        else:  # C_CONTROL
            return -1


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


cdef bint key_equals(const unsigned char* s, Py_ssize_t p, Py_ssize_t e, bint escaped,
                     const unsigned char* field, Py_ssize_t flen) noexcept nogil:
    """Whether the (checked) key s[p:e] decodes to field[:flen]."""
    cdef unsigned char buf[4]
    cdef Py_ssize_t i = 0
    cdef Py_ssize_t n
    cdef int cp
    if not escaped:
        return e - p == flen and memcmp(s + p, field, flen) == 0
    while p < e:
        if s[p] != 92:
            if i >= flen or s[p] != field[i]:
                return False
            p += 1
            i += 1
        else:
            p = read_escape(s, p, e, &cp)
            if p < 0 or cp < 0:
                return False  # a lone surrogate is no UTF-8 field; json.loads decides
            n = put_utf8(buf, cp)
            if i + n > flen or memcmp(buf, field + i, n) != 0:
                return False
            i += n
    return i == flen


cdef int scan_line(const unsigned char* s, Py_ssize_t p, Py_ssize_t e,
                   const unsigned char* field, Py_ssize_t flen, unsigned char* out,
                   Py_ssize_t* length) noexcept nogil:
    cdef unsigned char closer[JSONL_MAX_DEPTH]  # what closes each open container
    cdef int depth = 1
    cdef int found = 0   # 1: the field's (last) value is a string; 2: it is not; 3: lone surrogate
    cdef bint first = True  # just after "{" or "[" (so the closer may follow)
    cdef bint is_field, esc, lone
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
            if c == 34 and is_field:  # the value: written out as it is checked
                lone = False
                p = copy_string(s, p + 1, e, out, length, &lone)
                if p < 0:
                    return LINE_BAD
                found = 3 if lone else 1
            elif c == 34:
                esc = False
                p = scan_string(s, p + 1, e, &esc)
                if p < 0:
                    return LINE_BAD
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
    """Every line of s[:n] into out. out.data has room for n bytes, and out.size never
    passes the start of the current line, so scan_line has room for the line."""
    cdef Py_ssize_t p = 0
    cdef Py_ssize_t e, w
    cdef int64_t line = 0
    cdef int kind
    cdef const unsigned char* q
    cdef int err = 0
    while p < n:
        q = <const unsigned char*>memchr(s + p, 10, n - p)
        e = q - s if q != NULL else n
        kind = scan_line(s, p, e, field, flen, out.data + out.size, &w)
        if kind == LINE_DOC and w > 0:
            out.size += w
            err |= i64_push(&out.ends, out.size, LIST_FIRST)
            err |= i64_push(&out.lines, line, LIST_FIRST)
        elif kind == LINE_BAD:
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
