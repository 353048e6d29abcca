"""A byte-level BPE tokenizer.json's two big members read natively from the file's bytes.

The twin of ``fastbpe.reference.tokenizer_json.model_parts`` (its docstring holds the
rule and the decisions: which files take this path, duplicate keys, escapes, the merge
forms). ``model_parts(raw)`` finds ``model.vocab`` and ``model.merges`` in the UTF-8 bytes
of the file with a scan that skips every other value, parses those two strictly (JSON
strings with every escape, ids as plain non-negative integers) and returns the
vocabulary (the ``dict`` ``json`` would give), each byte-level token's bytes
(the ByteLevel alphabet decoded) and the merges' id columns, looked up by bytes in one
native table: no Python object per merge part, no ``json`` object for either member.
The rest of the file (small: normalizer, pre-tokenizer, added tokens...) is left to
``json.loads`` with the two members cut out (their byte spans are returned). Anything
else (an escaped key on the way, a member twice, a number that is not a plain id, a
merge part outside the alphabet or not in the vocabulary, invalid UTF-8...) returns
None, and the caller reads the file the ordinary way, which decides and names the error.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_SetItem
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.long cimport PyLong_FromLongLong
from libc.stdint cimport int16_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy

cdef extern from "Python.h":
    object PyUnicode_FromKindAndData(int kind, const void* buffer, Py_ssize_t size)
    enum: PyUnicode_4BYTE_KIND


cdef enum:
    BAD = -1         # not the plain form: the caller reads the file the ordinary way
    NOT_BYTE = 0x7FFFFFFF


cdef struct Buf:
    # a growable array of code points (one JSON string) or of bytes
    void* data
    Py_ssize_t size, cap, item


cdef int _grow(Buf* b, Py_ssize_t need) except -1:
    cdef Py_ssize_t cap = b.cap if b.cap else 256
    cdef void* data
    while cap < need:
        cap *= 2
    data = realloc(b.data, cap * b.item)
    if data == NULL:
        raise MemoryError()
    b.data, b.cap = data, cap
    return 0


cdef inline int _push32(Buf* b, uint32_t v) except -1:
    """Append a uint32 to a Buf of them."""
    if b.size + 1 > b.cap:
        _grow(b, b.size + 1)
    (<uint32_t*>b.data)[b.size] = v
    b.size += 1
    return 0


cdef struct Slot:
    # one byte-level token in the lookup table by bytes; hash 0: empty
    uint64_t hash
    uint32_t index     # its entry's position in the file (the vocabulary's keys list)
    uint32_t length
    uint64_t key       # up to 8 bytes: the bytes themselves (zero-padded); else the
                       # offset into the blob of all tokens' bytes


cdef inline uint64_t _hash(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    cdef uint64_t h = <uint64_t>0xcbf29ce484222325
    cdef Py_ssize_t i
    for i in range(n):
        h = (h ^ p[i]) * <uint64_t>0x100000001b3
    # FNV-1a's low bits are weak for short keys: mixed (murmur3's finalizer), since the
    # table's index is the low bits; | 1 keeps 0 for an empty slot
    h ^= h >> 33
    h *= <uint64_t>0xff51afd7ed558ccd
    h ^= h >> 33
    return h | 1


cdef struct Scan:
    const uint8_t* s
    Py_ssize_t n
    Py_ssize_t i
    Buf cps          # uint32 code points of the string just read
    int16_t* alphabet  # code point (< 0x144) -> byte, -1 outside the ByteLevel alphabet



cdef inline void _ws(Scan* c) noexcept nogil:
    while c.i < c.n and (c.s[c.i] == 32 or c.s[c.i] == 10 or c.s[c.i] == 13 or c.s[c.i] == 9):
        c.i += 1


cdef inline int _after_item(Scan* c, uint8_t close) noexcept nogil:
    """After a member or element: 1 past the container's ``close``, 0 past a comma
    (another item follows), or BAD."""
    _ws(c)
    if c.i >= c.n:
        return BAD
    if c.s[c.i] == close:
        c.i += 1
        return 1
    if c.s[c.i] != 44:
        return BAD
    c.i += 1
    return 0


cdef inline int _hex4(Scan* c) noexcept nogil:
    """The 4 hex digits at c.i as a number (c.i moved past them), or -1."""
    cdef int v = 0, k, d
    if c.i + 4 > c.n:
        return -1
    for k in range(4):
        d = c.s[c.i + k]
        if 48 <= d <= 57:
            d -= 48
        elif 97 <= d <= 102:
            d -= 87
        elif 65 <= d <= 70:
            d -= 55
        else:
            return -1
        v = v * 16 + d
    c.i += 4
    return v


cdef int _string(Scan* c) except -2:
    """The JSON string at c.i (its opening quote) into c.cps, c.i past its closing quote:
    0, or BAD (an invalid escape or UTF-8 sequence, a control character, a lone
    surrogate, the end of the file)."""
    cdef uint32_t cp, lo
    cdef uint32_t* out
    cdef int v
    cdef uint8_t b, b1, b2, b3
    c.cps.size = 0
    c.i += 1
    while True:
        if c.i >= c.n:
            return BAD
        if c.cps.size + 1 > c.cps.cap:
            _grow(&c.cps, c.cps.size + 1)
        out = <uint32_t*>c.cps.data
        b = c.s[c.i]
        if b == 34:     # "
            c.i += 1
            return 0
        if b == 92:     # backslash
            if c.i + 1 >= c.n:
                return BAD
            b = c.s[c.i + 1]
            c.i += 2
            if b == 34 or b == 92 or b == 47:
                cp = b
            elif b == 98:
                cp = 8
            elif b == 102:
                cp = 12
            elif b == 110:
                cp = 10
            elif b == 114:
                cp = 13
            elif b == 116:
                cp = 9
            elif b == 117:  # \uXXXX, a surrogate pair as two of them
                v = _hex4(c)
                if v < 0:
                    return BAD
                cp = v
                if 0xDC00 <= cp <= 0xDFFF:
                    return BAD      # a lone low surrogate: json keeps it; the ordinary way decides
                if 0xD800 <= cp <= 0xDBFF:
                    if c.i + 2 > c.n or c.s[c.i] != 92 or c.s[c.i + 1] != 117:
                        return BAD
                    c.i += 2
                    v = _hex4(c)
                    if v < 0xDC00 or v > 0xDFFF:
                        return BAD
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (<uint32_t>v - 0xDC00)
            else:
                return BAD
        elif b < 0x20:
            return BAD          # json (strict) refuses control characters in strings
        elif b < 0x80:
            cp = b
            c.i += 1
        elif 0xC2 <= b <= 0xDF:
            if c.i + 1 >= c.n or (c.s[c.i + 1] & 0xC0) != 0x80:
                return BAD
            cp = ((b & 0x1F) << 6) | (c.s[c.i + 1] & 0x3F)
            c.i += 2
        elif 0xE0 <= b <= 0xEF:
            if c.i + 2 >= c.n:
                return BAD
            b1, b2 = c.s[c.i + 1], c.s[c.i + 2]
            if (b1 & 0xC0) != 0x80 or (b2 & 0xC0) != 0x80:
                return BAD
            cp = ((b & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F)
            if cp < 0x800 or 0xD800 <= cp <= 0xDFFF:
                return BAD      # overlong, or a surrogate: not UTF-8
            c.i += 3
        elif 0xF0 <= b <= 0xF4:
            if c.i + 3 >= c.n:
                return BAD
            b1, b2, b3 = c.s[c.i + 1], c.s[c.i + 2], c.s[c.i + 3]
            if (b1 & 0xC0) != 0x80 or (b2 & 0xC0) != 0x80 or (b3 & 0xC0) != 0x80:
                return BAD
            cp = ((b & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
            if cp < 0x10000 or cp > 0x10FFFF:
                return BAD
            c.i += 4
        else:
            return BAD
        out[c.cps.size] = cp
        c.cps.size += 1


cdef int _skip_string(Scan* c) noexcept nogil:
    """c.i past the string at c.i (escapes skipped, nothing checked: json checks the rest)."""
    c.i += 1
    while c.i < c.n:
        if c.s[c.i] == 92:
            c.i += 2
        elif c.s[c.i] == 34:
            c.i += 1
            return 0
        else:
            c.i += 1
    return BAD


cdef int _skip_value(Scan* c) noexcept nogil:
    """c.i past the value at c.i, by brackets and strings only (json checks the rest)."""
    cdef int depth = 0
    cdef uint8_t b
    if c.i >= c.n:
        return BAD
    b = c.s[c.i]
    if b == 34:
        return _skip_string(c)
    if b != 123 and b != 91:     # a number or literal: up to a delimiter
        while c.i < c.n:
            b = c.s[c.i]
            if b == 44 or b == 125 or b == 93 or b == 32 or b == 9 or b == 10 or b == 13:
                break
            c.i += 1
        return 0
    while c.i < c.n:
        b = c.s[c.i]
        if b == 34:
            if _skip_string(c) < 0:
                return BAD
            continue
        if b == 123 or b == 91:
            depth += 1
        elif b == 125 or b == 93:
            depth -= 1
            if depth == 0:
                c.i += 1
                return 0
        c.i += 1
    return BAD


cdef inline bint _is_key(Scan* c, const char* key, Py_ssize_t length) noexcept nogil:
    cdef uint32_t* cps = <uint32_t*>c.cps.data
    cdef Py_ssize_t k
    if c.cps.size != length:
        return False
    for k in range(length):
        if cps[k] != <uint8_t>key[k]:
            return False
    return True


cdef int _find_members(Scan* c, const char** keys, Py_ssize_t* spans, int nkeys) except -2:
    """In the object at c.i, the value spans [start, end) of the members named ``keys``
    (each must occur exactly once, no key written with an escape): 0, or BAD."""
    cdef int k, found, closed
    cdef Py_ssize_t start
    cdef bint escaped
    for k in range(2 * nkeys):
        spans[k] = -1
    _ws(c)
    if c.i >= c.n or c.s[c.i] != 123:
        return BAD
    c.i += 1
    _ws(c)
    if c.i < c.n and c.s[c.i] == 125:
        return BAD
    while True:
        _ws(c)
        if c.i >= c.n or c.s[c.i] != 34:
            return BAD
        start = c.i
        if _string(c) < 0:
            return BAD
        escaped = memchr_range(c.s, start, c.i)
        _ws(c)
        if c.i >= c.n or c.s[c.i] != 58:
            return BAD
        c.i += 1
        _ws(c)
        if escaped:
            return BAD     # "mod\\u0065l" is "model" too: the ordinary way reads it
        found = -1
        for k in range(nkeys):
            if _is_key(c, keys[k], len(keys[k])):
                found = k
        start = c.i
        if _skip_value(c) < 0:
            return BAD
        if found >= 0:
            if spans[2 * found] >= 0:
                return BAD     # the member twice: json keeps the last, the ordinary way reads it
            spans[2 * found], spans[2 * found + 1] = start, c.i
        closed = _after_item(c, 125)
        if closed < 0:
            return BAD
        if closed:
            break
    for k in range(2 * nkeys):
        if spans[k] < 0:
            return BAD
    return 0


cdef inline bint memchr_range(const uint8_t* s, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(a, b):
        if s[k] == 92:
            return True
    return False


cdef inline int64_t _to_bytes(Scan* c, Py_ssize_t first, Py_ssize_t last, uint8_t* out) noexcept nogil:
    """The code points [first, last) of c.cps through the ByteLevel alphabet into out:
    how many, or -1 when one is outside the alphabet."""
    cdef uint32_t* cps = <uint32_t*>c.cps.data
    cdef Py_ssize_t k
    cdef int16_t v
    for k in range(first, last):
        if cps[k] >= 0x144:
            return -1
        v = c.alphabet[cps[k]]
        if v < 0:
            return -1
        out[k - first] = <uint8_t>v
    return last - first


cdef inline uint64_t _word(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """Up to 8 bytes as one zero-padded word (a short key kept in its slot)."""
    cdef uint64_t w = 0
    memcpy(&w, p, n)
    return w


cdef inline int64_t _lookup(Slot* slots, uint64_t mask, const uint8_t* blob, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """The slot index of the token with bytes p[:n], or -1 (one memory line a lookup
    for a key of up to 8 bytes)."""
    cdef uint64_t h = _hash(p, n)
    cdef uint64_t k = (h >> 1) & mask
    cdef uint64_t w = _word(p, n) if n <= 8 else 0
    while slots[k].hash:
        if slots[k].hash == h and slots[k].length == n:
            if n <= 8:
                if slots[k].key == w:
                    return <int64_t>k
            elif memcmp(blob + slots[k].key, p, n) == 0:
                return <int64_t>k
        k = (k + 1) & mask
    return -1


cdef inline void _set(list column, Py_ssize_t i, object item):
    """column[i] = item in a list from PyList_New (its slot still empty)."""
    Py_INCREF(item)
    PyList_SET_ITEM(column, i, item)


def model_parts(bytes raw, alphabet):
    """``(vocab_span, merges_span, vocab, not_byte_level, ranks, merge_ids, merge_texts,
    arena, lengths, ids, merge_triples)`` of a tokenizer.json's bytes, or None (see the module docstring and
    ``reference.tokenizer_json.model_parts``, its twin, for every part). ``alphabet``:
    the ByteLevel characters, byte by byte (``reference.hf._byte_chars()``).

    >>> from fastbpe.reference.hf import _byte_chars
    >>> raw = b'{"model": {"vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}}'
    >>> parts = model_parts(raw, _byte_chars())
    >>> parts[2], parts[4], parts[5]
    ({'a': 0, 'b': 1, 'ab': 2}, {b'a': 0, b'b': 1, b'ab': 2}, ([0], [1], [2]))
    """
    cdef Scan c
    cdef const char* top_keys[1]
    cdef const char* model_keys[2]
    cdef Py_ssize_t top[2]
    cdef Py_ssize_t model[4]
    cdef int16_t table[0x144]
    cdef Buf blob, scratch
    cdef Slot* slots = NULL
    cdef uint8_t* seen = NULL
    cdef uint64_t size = 16, mask, h, k
    cdef Py_ssize_t entries = 0, nbyte = 0, i, space, nl, nr, nmerges = 0
    cdef int closed
    cdef int64_t idx, a, b, m, nb, max_id = -1, value
    cdef uint32_t* cps
    cdef uint64_t* ends
    cdef uint32_t* ids
    cdef Buf ends_buf, ids_buf, index_buf, merge_buf
    cdef uint32_t* trio
    cdef uint32_t* index_of
    cdef dict vocab = {}, ranks = {}
    cdef list keys = [], nums = [], strange = [], columns, texts
    cdef object text, token, num, lengths, packed_ids, triples
    cdef const char* KEY_MODEL = b"model"
    cdef const char* KEY_VOCAB = b"vocab"
    cdef const char* KEY_MERGES = b"merges"
    if len(alphabet) != 256:
        raise ValueError("alphabet must be the 256 ByteLevel characters")
    for i in range(0x144):
        table[i] = -1
    for i in range(256):
        k = ord(alphabet[i])
        if k >= 0x144:
            raise ValueError("alphabet must be the 256 ByteLevel characters")
        table[k] = <int16_t>i
    c.s = <const uint8_t*>PyBytes_AS_STRING(raw)
    c.n = PyBytes_GET_SIZE(raw)
    c.i = 0
    c.alphabet = table
    c.cps.data, c.cps.size, c.cps.cap, c.cps.item = NULL, 0, 0, 4
    blob.data, blob.size, blob.cap, blob.item = NULL, 0, 0, 1
    scratch.data, scratch.size, scratch.cap, scratch.item = NULL, 0, 0, 1
    ends_buf.data, ends_buf.size, ends_buf.cap, ends_buf.item = NULL, 0, 0, 8
    ids_buf.data, ids_buf.size, ids_buf.cap, ids_buf.item = NULL, 0, 0, 4
    index_buf.data, index_buf.size, index_buf.cap, index_buf.item = NULL, 0, 0, 4
    merge_buf.data, merge_buf.size, merge_buf.cap, merge_buf.item = NULL, 0, 0, 4
    top_keys[0] = KEY_MODEL
    model_keys[0], model_keys[1] = KEY_VOCAB, KEY_MERGES
    try:
        if c.n >= 3 and c.s[0] == 0xEF and c.s[1] == 0xBB and c.s[2] == 0xBF:
            return None     # a BOM: json.loads refuses it; the ordinary way says so
        if _find_members(&c, top_keys, top, 1) < 0:
            return None
        _ws(&c)
        if c.i != c.n:
            return None
        c.i = top[0]
        if _find_members(&c, model_keys, model, 2) < 0 or c.i != top[1]:
            return None
        # ---- model.vocab: "text": id, ...
        c.i = model[0]
        if c.s[c.i] != 123:
            return None
        c.i += 1
        _ws(&c)
        if c.i < c.n and c.s[c.i] == 125:
            return None     # empty: the ordinary way says what is missing
        while True:
            _ws(&c)
            if c.i >= c.n or c.s[c.i] != 34 or _string(&c) < 0:
                return None
            _ws(&c)
            if c.i >= c.n or c.s[c.i] != 58:
                return None
            c.i += 1
            _ws(&c)
            # a plain id: 0 or [1-9][0-9]*, at most 0xFFFFFFFF (anything else: json's numbers)
            if c.i >= c.n or not 48 <= c.s[c.i] <= 57 or (c.s[c.i] == 48 and c.i + 1 < c.n and 48 <= c.s[c.i + 1] <= 57):
                return None
            value = 0
            while c.i < c.n and 48 <= c.s[c.i] <= 57:
                value = value * 10 + (c.s[c.i] - 48)
                if value > 0xFFFFFFFF:
                    return None
                c.i += 1
            if c.i < c.n and (c.s[c.i] == 46 or c.s[c.i] == 101 or c.s[c.i] == 69):
                return None     # a fraction or exponent: json's float, the ordinary way decides
            cps = <uint32_t*>c.cps.data
            text = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, cps, c.cps.size)
            num = PyLong_FromLongLong(value)
            PyDict_SetItem(vocab, text, num)
            keys.append(text)
            nums.append(num)
            if value > max_id:
                max_id = value
            _push32(&ids_buf, <uint32_t>value)
            if blob.size + c.cps.size > blob.cap:
                _grow(&blob, blob.size + c.cps.size)
            nb = _to_bytes(&c, 0, c.cps.size, <uint8_t*>blob.data + blob.size)
            if c.cps.size == 0:
                return None     # an empty key: the ordinary way decides
            if nb < 0:
                strange.append(text)
                _push32(&index_buf, NOT_BYTE)
            else:
                token = PyBytes_FromStringAndSize(<char*>blob.data + blob.size, nb)
                PyDict_SetItem(ranks, token, num)
                blob.size += nb
                if ends_buf.size + 1 > ends_buf.cap:
                    _grow(&ends_buf, ends_buf.size + 1)
                (<uint64_t*>ends_buf.data)[ends_buf.size] = blob.size
                ends_buf.size += 1
                _push32(&index_buf, <uint32_t>entries)
                nbyte += 1
            entries += 1
            closed = _after_item(&c, 125)
            if closed < 0:
                return None
            if closed:
                break
        if c.i != model[1] or len(vocab) != entries or max_id >= (1 << 26):
            return None     # a key twice (json keeps the last), or ids too sparse to check here
        seen = <uint8_t*>calloc(max_id + 1, 1)
        if seen == NULL:
            raise MemoryError()
        ids = <uint32_t*>ids_buf.data
        for i in range(entries):
            if seen[ids[i]]:
                return None     # an id twice: the ordinary way names it
            seen[ids[i]] = 1
        # ---- the byte-level tokens by bytes
        while size < <uint64_t>(2 * nbyte + 2):
            size <<= 1
        mask = size - 1
        slots = <Slot*>calloc(size, sizeof(Slot))
        if slots == NULL:
            raise MemoryError()
        ends = <uint64_t*>ends_buf.data
        index_of = <uint32_t*>index_buf.data
        m = 0
        a = 0
        for i in range(entries):
            if index_of[i] == NOT_BYTE:
                continue
            nb = <int64_t>ends[m] - a
            h = _hash(<uint8_t*>blob.data + a, nb)
            k = (h >> 1) & mask
            while slots[k].hash:
                k = (k + 1) & mask
            slots[k].hash, slots[k].index, slots[k].length = h, <uint32_t>i, <uint32_t>nb
            slots[k].key = _word(<uint8_t*>blob.data + a, nb) if nb <= 8 else <uint64_t>a
            a = <int64_t>ends[m]
            m += 1
        # ---- model.merges: "a b" or ["a", "b"], each part and the whole a byte-level token
        c.i = model[2]
        if c.s[c.i] != 91:
            return None
        c.i += 1
        _ws(&c)
        if c.i < c.n and c.s[c.i] == 93:
            c.i += 1
        else:
            while True:
                _ws(&c)
                if c.i >= c.n:
                    return None
                if c.s[c.i] == 34:
                    if _string(&c) < 0:
                        return None
                    cps = <uint32_t*>c.cps.data
                    space = -1
                    for i in range(c.cps.size):
                        if cps[i] == 32:
                            if space >= 0:
                                return None
                            space = i
                    if space < 0:
                        return None
                    nl = space
                    if scratch.cap < c.cps.size:
                        _grow(&scratch, c.cps.size)
                    if _to_bytes(&c, 0, space, <uint8_t*>scratch.data) < 0:
                        return None
                    if _to_bytes(&c, space + 1, c.cps.size, <uint8_t*>scratch.data + nl) < 0:
                        return None
                    nr = c.cps.size - space - 1
                elif c.s[c.i] == 91:
                    c.i += 1
                    _ws(&c)
                    if c.i >= c.n or c.s[c.i] != 34 or _string(&c) < 0:
                        return None
                    nl = c.cps.size
                    if scratch.cap < nl:
                        _grow(&scratch, nl)
                    if _to_bytes(&c, 0, nl, <uint8_t*>scratch.data) < 0:
                        return None
                    _ws(&c)
                    if c.i >= c.n or c.s[c.i] != 44:
                        return None
                    c.i += 1
                    _ws(&c)
                    if c.i >= c.n or c.s[c.i] != 34 or _string(&c) < 0:
                        return None
                    nr = c.cps.size
                    if scratch.cap < nl + nr:
                        _grow(&scratch, nl + nr)
                    if _to_bytes(&c, 0, nr, <uint8_t*>scratch.data + nl) < 0:
                        return None
                    _ws(&c)
                    if c.i >= c.n or c.s[c.i] != 93:
                        return None
                    c.i += 1
                else:
                    return None
                if nl == 0 or nr == 0:
                    return None
                a = _lookup(slots, mask, <uint8_t*>blob.data, <uint8_t*>scratch.data, nl)
                b = _lookup(slots, mask, <uint8_t*>blob.data, <uint8_t*>scratch.data + nl, nr)
                m = _lookup(slots, mask, <uint8_t*>blob.data, <uint8_t*>scratch.data, nl + nr)
                if a < 0 or b < 0 or m < 0:
                    return None
                _push32(&merge_buf, slots[a].index)
                _push32(&merge_buf, slots[b].index)
                _push32(&merge_buf, slots[m].index)
                nmerges += 1
                closed = _after_item(&c, 93)
                if closed < 0:
                    return None
                if closed:
                    break
        if c.i != model[3]:
            return None
        # the columns: the entries' own int and str objects, as json's lists would hold
        columns = [PyList_New(nmerges), PyList_New(nmerges), PyList_New(nmerges)]
        texts = [PyList_New(nmerges), PyList_New(nmerges)]
        trio = <uint32_t*>merge_buf.data
        for i in range(nmerges):
            _set(columns[0], i, PyLong_FromLongLong(ids[trio[3 * i]]))
            _set(columns[1], i, PyLong_FromLongLong(ids[trio[3 * i + 1]]))
            _set(columns[2], i, PyLong_FromLongLong(ids[trio[3 * i + 2]]))
        for i in range(nmerges):
            _set(texts[0], i, keys[trio[3 * i]])
            _set(texts[1], i, keys[trio[3 * i + 1]])
        # the byte-level tokens packed as the core takes them (bytes end to end, uint32
        # lengths and ids, file order), and the merges' ids as uint32 (left, right, new)
        lengths = PyBytes_FromStringAndSize(NULL, 4 * nbyte)
        packed_ids = PyBytes_FromStringAndSize(NULL, 4 * nbyte)
        a = 0
        m = 0
        for i in range(entries):
            if index_of[i] == NOT_BYTE:
                continue
            (<uint32_t*>PyBytes_AS_STRING(lengths))[m] = <uint32_t>(<int64_t>ends[m] - a)
            (<uint32_t*>PyBytes_AS_STRING(packed_ids))[m] = ids[i]
            a = <int64_t>ends[m]
            m += 1
        triples = PyBytes_FromStringAndSize(NULL, 4 * 3 * nmerges)
        for i in range(3 * nmerges):
            (<uint32_t*>PyBytes_AS_STRING(triples))[i] = ids[trio[i]]
        return ((model[0], model[1]), (model[2], model[3]), vocab, strange, ranks,
                (columns[0], columns[1], columns[2]), (texts[0], texts[1]),
                PyBytes_FromStringAndSize(<char*>blob.data, blob.size), lengths, packed_ids, triples)
    finally:
        free(c.cps.data)
        free(blob.data)
        free(scratch.data)
        free(ends_buf.data)
        free(ids_buf.data)
        free(index_buf.data)
        free(merge_buf.data)
        free(slots)
        free(seen)
