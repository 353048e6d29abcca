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
from cpython.long cimport PyLong_FromUnsignedLong
from cpython.ref cimport Py_INCREF, PyObject
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy, memset

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL


cdef uint64_t LOW32 = 0xFFFFFFFFUL
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
        cdef Py_ssize_t i, n = len(lefts), size = 16
        cdef uint64_t key, h
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
        for i in range(n):
            key = ((<uint64_t><uint32_t>lefts[i]) << 32 | <uint32_t>rights[i]) + 1
            h = _mix(key) & self.mask
            while self.slots[h].key != 0 and self.slots[h].key != key:
                h = (h + 1) & self.mask
            self.slots[h].key = key
            self.slots[h].rank = <uint32_t>i
            self.slots[h].new_id = <uint32_t>new_ids[i]
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
        cdef Py_ssize_t i, j, k, p, size = 0, count = n
        cdef uint32_t rank, new_id
        cdef uint64_t item
        cdef list out
        cdef uint32_t* sym
        cdef Py_ssize_t* nxt
        cdef Py_ssize_t* prv
        cdef uint64_t* heap
        cdef char* block
        if n == 0:
            return []
        block = <char*>malloc(n * (sizeof(uint32_t) + 2 * sizeof(Py_ssize_t) + 3 * sizeof(uint64_t)))
        if block == NULL:
            raise MemoryError()
        heap = <uint64_t*>block
        nxt = <Py_ssize_t*>(block + n * 3 * sizeof(uint64_t))
        prv = nxt + n
        sym = <uint32_t*>(prv + n)
        with nogil:
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
