"""HF's BPE merge-list rule, natively: the twin of ``fastbpe.reference.hf.merge_by_list``.

A word's bytes start as the ids of their ByteLevel characters; then the adjacent pair
that comes first in the merge list is merged, leftmost among equal ranks, until no
adjacent pair is listed (HF's ``Word::merge_all``; the rule and its decisions are written
in ``fastbpe.reference.hf``). The pairs live in an open-addressing table
``(left id, right id) -> (rank, new id)``; a word is merged with a binary heap of
``rank << 32 | position`` over a linked list of its symbols, so a long word costs
O(n log n), never quadratic time. Each word's ids are cached (a dict keyed by the
piece), as HF caches them, so recurring words cost one lookup. ``encode_split`` (a
text's split offsets -> ids) looks short words up first in a direct-mapped native table
(65,536 slots, ~3.4 MB, made at its first call; a word's bytes are compared in full, a
new word overwrites the slot), which saves a bytes object and a dict lookup per word.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_FromLongLong, PyLong_FromUnsignedLong
from cpython.ref cimport Py_INCREF, PyObject
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy, memset

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL


cdef uint64_t LOW32 = 0xFFFFFFFFUL
# scratch bytes a merged byte needs: a 3-entry share of the heap, next, previous, symbol
cdef Py_ssize_t MERGE_SCRATCH = sizeof(uint32_t) + 2 * sizeof(Py_ssize_t) + 3 * sizeof(uint64_t)
cdef uint32_t REMOVED = 0xFFFFFFFFUL     # a symbol merged into its left neighbour


cdef enum:
    WORD_BYTES = 22      # words up to this many bytes are kept in the native word table
    WORD_IDS = 7         # ... when they merge to at most this many ids
    WORD_SLOTS = 1 << 16 # direct-mapped: a word overwrites the one in its slot


cdef struct WordSlot:
    # One cached short word (``encode_split``'s table, in front of the dict cache):
    # its bytes and ids, found by hash, the bytes compared in full.
    uint8_t nbytes      # 0: empty (an empty piece is never cached)
    uint8_t nids
    unsigned char key[WORD_BYTES]
    uint32_t ids[WORD_IDS]


cdef struct PairSlot:
    uint64_t key        # (left << 32 | right) + 1; 0 marks an empty slot
    uint32_t rank
    uint32_t new_id


cdef inline uint64_t _mix(uint64_t x) noexcept nogil:
    x ^= x >> 33
    x *= <uint64_t>0xff51afd7ed558ccd
    x ^= x >> 33
    return x


cdef inline void _sift_up(uint64_t* h, Py_ssize_t i) noexcept nogil:
    cdef uint64_t item = h[i]
    cdef Py_ssize_t parent
    while i > 0:
        parent = (i - 1) >> 1
        if h[parent] <= item:
            break
        h[i] = h[parent]
        i = parent
    h[i] = item


cdef inline uint64_t _pop(uint64_t* h, Py_ssize_t* size) noexcept nogil:
    cdef uint64_t top = h[0], item
    cdef Py_ssize_t n, i = 0, child
    size[0] -= 1
    n = size[0]
    if n == 0:
        return top
    item = h[n]
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and h[child + 1] < h[child]:
            child += 1
        if h[child] >= item:
            break
        h[i] = h[child]
        i = child
    h[i] = item
    return top


cdef class MergeList:
    """A merge list for byte-level words: ``MergeList(byte_ids, lefts, rights, new_ids,
    whole=None)`` with ``byte_ids[b]`` the id of byte ``b``'s ByteLevel character and
    merge ``i`` (rank ``i``) joining ``lefts[i]`` and ``rights[i]`` into ``new_ids[i]``
    (a pair listed twice keeps its last rank, as HF's). ``whole``: a dict of token bytes
    -> id, given when ``ignore_merges`` is true (a word that is a token is taken whole).

    >>> m = MergeList(list(range(256)), [97, 256], [98, 99], [256, 257])
    >>> m.encode_pieces([b"abc", "ab", "ca"])
    [257, 256, 99, 97]
    """

    cdef PairSlot* slots
    cdef uint64_t mask
    cdef uint32_t byte_ids[256]
    cdef dict cache
    cdef object whole
    cdef Py_ssize_t cache_limit
    cdef WordSlot* words

    def __cinit__(self):
        self.slots = NULL
        self.words = NULL

    def __dealloc__(self):
        free(self.slots)
        free(self.words)

    def __init__(self, byte_ids, lefts, rights, new_ids, whole=None, Py_ssize_t cache_limit=200_000):
        """``lefts``, ``rights``, ``new_ids``: the merges' id columns, as sequences of
        ints, or as three uint32 buffers (read without an int object per id: the load's
        rank-rule check, from ``_hf_json.model_parts``)."""
        cdef Py_ssize_t i, n = len(lefts), size = 16
        cdef uint64_t key, h
        cdef const uint32_t[::1] lv
        cdef const uint32_t[::1] rv
        cdef const uint32_t[::1] nv
        cdef bint typed = False
        cdef uint32_t a, b, new_id
        if len(byte_ids) != 256:
            raise ValueError(f"byte_ids must hold 256 ids, got {len(byte_ids)}")
        if len(rights) != n or len(new_ids) != n:
            raise ValueError("lefts, rights and new_ids must have the same length")
        if n >= 2**32 - 1:
            raise ValueError("too many merges")
        for i in range(256):
            self.byte_ids[i] = byte_ids[i]
        while size < 2 * n + 16:
            size *= 2
        free(self.slots)
        self.slots = <PairSlot*>malloc(size * sizeof(PairSlot))
        if self.slots == NULL:
            raise MemoryError()
        memset(self.slots, 0, size * sizeof(PairSlot))
        self.mask = size - 1
        if type(lefts) is not list:
            try:
                lv, rv, nv = lefts, rights, new_ids
                typed = True
            except (TypeError, ValueError, BufferError):
                typed = False
        for i in range(n):
            if typed:
                a, b, new_id = lv[i], rv[i], nv[i]
            else:
                a, b, new_id = <uint32_t>lefts[i], <uint32_t>rights[i], <uint32_t>new_ids[i]
            key = ((<uint64_t>a) << 32 | b) + 1
            h = _mix(key) & self.mask
            while self.slots[h].key != 0 and self.slots[h].key != key:
                h = (h + 1) & self.mask
            self.slots[h].key = key
            self.slots[h].rank = <uint32_t>i
            self.slots[h].new_id = new_id
        self.cache = {}
        self.whole = whole
        self.cache_limit = cache_limit

    cdef inline bint find(self, uint32_t a, uint32_t b, uint32_t* rank, uint32_t* new_id) noexcept nogil:
        cdef uint64_t key = ((<uint64_t>a) << 32 | b) + 1
        cdef uint64_t h = _mix(key) & self.mask
        while self.slots[h].key != 0:
            if self.slots[h].key == key:
                rank[0] = self.slots[h].rank
                new_id[0] = self.slots[h].new_id
                return True
            h = (h + 1) & self.mask
        return False

    cdef list merge(self, const unsigned char* s, Py_ssize_t n):
        """The ids of one word's bytes by the merge list."""
        cdef Py_ssize_t i, j, count
        cdef list out
        cdef uint32_t* sym
        cdef Py_ssize_t* nxt
        cdef char* block
        if n == 0:
            return []
        block = <char*>malloc(n * MERGE_SCRATCH)
        if block == NULL:
            raise MemoryError()
        with nogil:
            count = self._merge(s, n, block)
        nxt = <Py_ssize_t*>(block + n * 3 * sizeof(uint64_t))
        sym = <uint32_t*>(nxt + 2 * n)
        out = PyList_New(count)
        j = 0
        i = 0
        while i < n:
            obj = PyLong_FromUnsignedLong(sym[i])
            Py_INCREF(obj)
            PyList_SET_ITEM(out, j, obj)
            j += 1
            i = nxt[i]
        free(block)
        return out

    cdef Py_ssize_t _merge(self, const unsigned char* s, Py_ssize_t n, char* block) noexcept nogil:
        """Merge s[:n] (n >= 1) in ``block`` (n * MERGE_SCRATCH bytes): the symbols
        linked by ``nxt`` from 0 hold the ids; returns how many."""
        cdef Py_ssize_t i, j, k, p, size = 0, count = n
        cdef uint32_t rank, new_id
        cdef uint64_t item
        cdef uint64_t* heap = <uint64_t*>block
        cdef Py_ssize_t* nxt = <Py_ssize_t*>(block + n * 3 * sizeof(uint64_t))
        cdef Py_ssize_t* prv = nxt + n
        cdef uint32_t* sym = <uint32_t*>(prv + n)
        for i in range(n):
            sym[i] = self.byte_ids[s[i]]
            nxt[i] = i + 1
            prv[i] = i - 1
        for i in range(n - 1):
            if self.find(sym[i], sym[i + 1], &rank, &new_id):
                heap[size] = (<uint64_t>rank) << 32 | <uint64_t>i
                size += 1
                _sift_up(heap, size - 1)
        while size > 0:
            item = _pop(heap, &size)
            i = <Py_ssize_t>(item & LOW32)
            j = nxt[i]
            if sym[i] == REMOVED or j >= n:
                continue
            if not self.find(sym[i], sym[j], &rank, &new_id) or rank != <uint32_t>(item >> 32):
                continue   # the pair changed since it was queued
            sym[i] = new_id
            sym[j] = REMOVED
            count -= 1
            k = nxt[j]
            nxt[i] = k
            if k < n:
                prv[k] = i
            p = prv[i]
            if p >= 0 and self.find(sym[p], new_id, &rank, &new_id):
                heap[size] = (<uint64_t>rank) << 32 | <uint64_t>p
                size += 1
                _sift_up(heap, size - 1)
            new_id = sym[i]
            if k < n and self.find(new_id, sym[k], &rank, &new_id):
                heap[size] = (<uint64_t>rank) << 32 | <uint64_t>i
                size += 1
                _sift_up(heap, size - 1)
        return count

    def piece_counts(self, bytes data, const int64_t[::1] ends):
        """For each piece ``data[ends[i - 1]:ends[i]]``, how many ids the merge list makes
        of it, as one byte each, 3 for three or more: the counts the rank-rule check
        (``reference.hf.rank_rule_unreachable``) tells apart (1, 2, more), for every
        token of a vocabulary at load without a list or an int per token. ``ends`` as
        ``encode_split`` takes them; an empty piece counts 0.

        >>> import numpy as np
        >>> m = MergeList(list(range(256)), [97, 256], [98, 99], [256, 257])
        >>> list(m.piece_counts(b"abcacbcaaaa", np.array([3, 5, 7, 11])))
        [1, 2, 2, 3]
        """
        cdef Py_ssize_t i, a = 0, b, n = PyBytes_GET_SIZE(data), longest = 1, count
        cdef const unsigned char* s = <const unsigned char*>PyBytes_AS_STRING(data)
        cdef bytearray out = bytearray(ends.shape[0])
        cdef unsigned char* o = out
        cdef char* block
        for i in range(ends.shape[0]):
            b = <Py_ssize_t>ends[i]
            if b < a or b > n:
                raise ValueError(f"ends[{i}] = {b} is not in [{a}, {n}]: the ends must rise within the data")
            longest = max(longest, b - a)
            a = b
        block = <char*>malloc(longest * MERGE_SCRATCH)
        if block == NULL:
            raise MemoryError()
        a = 0
        with nogil:
            for i in range(ends.shape[0]):
                b = <Py_ssize_t>ends[i]
                count = self._merge(s + a, b - a, block) if b > a else 0
                o[i] = <unsigned char>(count if count < 3 else 3)
                a = b
        free(block)
        return bytes(out)

    cdef list word(self, object piece):
        cdef const char* s
        cdef Py_ssize_t n
        cdef PyObject* hit = PyDict_GetItem(self.cache, piece)
        if hit != NULL:
            return <list>hit
        if type(piece) is str:
            s = PyUnicode_AsUTF8AndSize(piece, &n)
        else:
            s = PyBytes_AS_STRING(piece)
            n = PyBytes_GET_SIZE(piece)
        found = None
        if self.whole is not None:
            found = self.whole.get(s[:n])
        ids = [found] if found is not None else self.merge(<const unsigned char*>s, n)
        if len(self.cache) >= self.cache_limit:
            self.cache.clear()
        self.cache[piece] = ids
        return ids

    def encode_pieces(self, list pieces, list out=None):
        """The ids of each piece (a str, as its UTF-8 bytes, or bytes), appended to
        ``out`` (a new list by default)."""
        if out is None:
            out = []
        for piece in pieces:
            if type(piece) is not str and type(piece) is not bytes:
                raise TypeError(f"pieces must be str or bytes, not {type(piece).__name__}")
            out.extend(self.word(piece))
        return out

    cdef int _cached_ids(self, const unsigned char* s, Py_ssize_t n, list out) except -1:
        """Append the ids of the word s[:n] to out: from the native word table when it
        is there, else by ``word`` (dict cache, merges), kept in the table when short."""
        cdef uint64_t h = 0xcbf29ce484222325UL
        cdef Py_ssize_t i
        cdef WordSlot* w
        cdef list ids
        for i in range(n):
            h = (h ^ s[i]) * <uint64_t>0x100000001b3UL
        w = &self.words[_mix(h) & (WORD_SLOTS - 1)]
        if w.nbytes == n and memcmp(w.key, s, n) == 0:
            for i in range(w.nids):
                out.append(PyLong_FromUnsignedLong(w.ids[i]))
            return 0
        ids = self.word(PyBytes_FromStringAndSize(<const char*>s, n))
        out += ids
        if n <= WORD_BYTES and len(ids) <= WORD_IDS:
            w.nbytes = <uint8_t>n
            memcpy(w.key, s, n)
            w.nids = <uint8_t>len(ids)
            for i in range(w.nids):
                w.ids[i] = <uint32_t>ids[i]
        return 0

    def encode_split(self, bytes data, const int64_t[::1] ends, list out=None):
        """The ids of the pieces ``data[ends[i - 1]:ends[i]]`` (the end offsets
        ``_pretokenize.split_offsets`` returns), appended to ``out``: ``encode_pieces``
        without a Python list of pieces between the splitter and the merges, short
        words looked up in a native table before the dict. ``ends`` must rise from 0
        to at most ``len(data)`` (ValueError naming the position).

        >>> import numpy as np
        >>> m = MergeList(list(range(256)), [97, 256], [98, 99], [256, 257])
        >>> m.encode_split(b"abcca", np.array([3, 4, 5]))
        [257, 99, 97]
        """
        cdef Py_ssize_t i, a = 0, b, n = PyBytes_GET_SIZE(data)
        cdef const unsigned char* s = <const unsigned char*>PyBytes_AS_STRING(data)
        if out is None:
            out = []
        if self.words == NULL:
            self.words = <WordSlot*>calloc(WORD_SLOTS, sizeof(WordSlot))
            if self.words == NULL:
                raise MemoryError()
        for i in range(ends.shape[0]):
            b = <Py_ssize_t>ends[i]
            if b < a or b > n:
                raise ValueError(f"ends[{i}] = {b} is not in [{a}, {n}]: the ends must rise within the data")
            if b > a:
                self._cached_ids(s + a, b - a, out)
            a = b
        return out


# ---------------------------------------------------------------------------------------
# The merges' ids at load: ``merge_id_columns``

cdef extern from "Python.h":
    int PyUnicode_KIND(object o)
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    uint32_t PyUnicode_READ(int kind, void* data, Py_ssize_t index) nogil


cdef struct Span:
    # code points [start, end) of a str's data
    int kind
    void* data
    Py_ssize_t start, end


cdef enum:
    INLINE_CHARS = 8    # a key of up to 8 code points below U+10000 is kept in its slot


cdef struct VocabSlot:
    uint64_t hash       # 0: empty
    uint32_t id
    uint32_t index      # into the vocabulary's keys (a list the caller keeps alive)
    uint16_t length     # code points, when inline
    uint16_t inline     # whether chars holds the key (one memory line a lookup)
    uint16_t chars[INLINE_CHARS]


cdef inline uint64_t _hash_span(uint64_t h, const Span* s) noexcept nogil:
    """FNV-1a over code points (not bytes: one text may be stored in one, two or four
    bytes a char, and a part of one merge string must find a key stored otherwise)."""
    cdef Py_ssize_t i
    for i in range(s.start, s.end):
        h = (h ^ PyUnicode_READ(s.kind, s.data, i)) * <uint64_t>0x100000001b3
    return h


cdef inline bint _key_is(object key, const Span* a, const Span* b) noexcept:
    """Whether key's code points are a's, then b's (b may be empty)."""
    cdef int kind = PyUnicode_KIND(key)
    cdef void* data = PyUnicode_DATA(key)
    cdef Py_ssize_t i, k = 0, la = a.end - a.start, lb = b.end - b.start
    if PyUnicode_GET_LENGTH(key) != la + lb:
        return False
    for i in range(la):
        if PyUnicode_READ(kind, data, k) != PyUnicode_READ(a.kind, a.data, a.start + i):
            return False
        k += 1
    for i in range(lb):
        if PyUnicode_READ(kind, data, k) != PyUnicode_READ(b.kind, b.data, b.start + i):
            return False
        k += 1
    return True


cdef inline bint _inline_is(const VocabSlot* slot, const Span* a, const Span* b) noexcept nogil:
    """Whether the slot's inline key is a's code points, then b's."""
    cdef Py_ssize_t i, k = 0, la = a.end - a.start, lb = b.end - b.start
    if slot.length != la + lb:
        return False
    for i in range(la):
        if slot.chars[k] != PyUnicode_READ(a.kind, a.data, a.start + i):
            return False
        k += 1
    for i in range(lb):
        if slot.chars[k] != PyUnicode_READ(b.kind, b.data, b.start + i):
            return False
        k += 1
    return True


cdef inline int64_t _find(VocabSlot* slots, uint64_t mask, list keys, const Span* a, const Span* b):
    """The id of the vocabulary key a + b, or -1."""
    cdef uint64_t h = _hash_span(_hash_span(<uint64_t>0xcbf29ce484222325, a), b) | 1
    cdef uint64_t i = h & mask
    while slots[i].hash:
        if slots[i].hash == h:
            if slots[i].inline:
                if _inline_is(&slots[i], a, b):
                    return slots[i].id
            elif _key_is(keys[slots[i].index], a, b):
                return slots[i].id
        i = (i + 1) & mask
    return -1


cdef inline bint _span_of(object part, Span* s):
    if type(part) is not str:
        return False
    s.kind = PyUnicode_KIND(part)
    s.data = PyUnicode_DATA(part)
    s.start = 0
    s.end = PyUnicode_GET_LENGTH(part)
    return True


def merge_id_columns(dict vocab, list merges, str prefix=""):
    """``(left ids, right ids, new ids)`` (lists, in the file's order) of a tokenizer.json's
    merges ("a b" strings, or [a, b] lists), each part and each merged text ``a +
    b[len(prefix):]`` looked up in ``vocab`` without making a str or a Python hash: one
    native table of the keys' code points (FNV-1a), the parts read where they are in the
    merge strings. The same ids as ``vocab[a]``, ``vocab[b]``, ``vocab[a + b[cut:]]``
    (``formats.hf_pipeline.check_model``'s bulk path); None for anything not of that
    common form (a merge without exactly one space, a part or merged text not in vocab,
    a right part without the prefix, a key that is no str): the caller's Python path
    then checks each merge and names the first bad one. ~10x faster than three dict
    lookups of new strings per merge (Llama 3.2's 280k merges).

    >>> merge_id_columns({"a": 0, "b": 1, "ab": 2, "abb": 3}, ["a b", "ab b"])
    ([0, 2], [1, 1], [2, 3])
    >>> merge_id_columns({"a": 0, "b": 1, "ab": 2}, [["a", "b"]]), merge_id_columns({"a": 0}, ["a a"])
    (([0], [1], [2]), None)
    """
    cdef Py_ssize_t n = len(merges), nkeys = len(vocab), i, j, length, space, cut = len(prefix)
    cdef uint64_t size = 16, mask, h, k
    cdef VocabSlot* slots
    cdef list keys = list(vocab)
    cdef Span a, b, empty, pre
    cdef int64_t idx
    cdef uint32_t c
    cdef object merge, key, value
    cdef list out = [PyList_New(n), PyList_New(n), PyList_New(n)]
    while size < <uint64_t>(2 * nkeys + 2):
        size <<= 1
    mask = size - 1
    slots = <VocabSlot*>calloc(size, sizeof(VocabSlot))
    if slots == NULL:
        raise MemoryError()
    empty.kind, empty.data, empty.start, empty.end = 1, NULL, 0, 0
    _span_of(prefix, &pre)
    try:
        for j in range(nkeys):
            key = keys[j]
            if not _span_of(key, &a):
                return None
            value = vocab[key]
            if type(value) is not int or not 0 <= value <= 0xFFFFFFFF:
                return None
            h = _hash_span(<uint64_t>0xcbf29ce484222325, &a) | 1
            k = h & mask
            while slots[k].hash:
                k = (k + 1) & mask
            slots[k].hash, slots[k].index, slots[k].id = h, j, value
            slots[k].inline = a.end <= INLINE_CHARS
            for i in range(a.end):
                if not slots[k].inline:
                    break
                c = PyUnicode_READ(a.kind, a.data, i)
                slots[k].inline = c < 0x10000
                slots[k].chars[i] = <uint16_t>c
            slots[k].length = <uint16_t>a.end if slots[k].inline else 0
        for i in range(n):
            merge = merges[i]
            if type(merge) is str:
                _span_of(merge, &a)
                length = a.end
                space = -1
                for j in range(length):
                    if PyUnicode_READ(a.kind, a.data, j) == 32:
                        if space >= 0:
                            return None
                        space = j
                if space < 0:
                    return None
                b = a
                a.end = space
                b.start = space + 1
            elif type(merge) is list and len(<list>merge) == 2:
                if not (_span_of((<list>merge)[0], &a) and _span_of((<list>merge)[1], &b)):
                    return None
            else:
                return None
            idx = _find(slots, mask, keys, &a, &empty)
            if idx < 0:
                return None
            _set(out[0], i, idx)
            idx = _find(slots, mask, keys, &b, &empty)
            if idx < 0:
                return None
            _set(out[1], i, idx)
            if cut:   # the right part starts with the prefix, which the merged text drops
                if b.end - b.start < cut:
                    return None
                for j in range(cut):
                    if PyUnicode_READ(b.kind, b.data, b.start + j) != PyUnicode_READ(pre.kind, pre.data, j):
                        return None
                b.start += cut
            idx = _find(slots, mask, keys, &a, &b)
            if idx < 0:
                return None
            _set(out[2], i, idx)
        return out[0], out[1], out[2]
    finally:
        free(slots)


cdef inline void _set(list column, Py_ssize_t i, int64_t value):
    """column[i] = value in a list from PyList_New (its slot still empty)."""
    cdef object item = PyLong_FromLongLong(value)
    Py_INCREF(item)
    PyList_SET_ITEM(column, i, item)
