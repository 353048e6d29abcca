"""Native likelihood WordPiece trainer: the same vocabulary as ``fastbpe.reference.wordpiece.train``.

Selection rule (from the reference): the adjacent pair (A, B) with the highest
count(AB) / (count(A) * count(B)); ties -> higher count(AB), then smaller A, then smaller B
(strings by code point). Scores are compared exactly by cross-multiplication in unsigned
128-bit integers; the Python layer checks that every count is below 2**42 so the products
(< 2**126) cannot overflow.

Why a plain lazy heap is not enough: merging (A, B) lowers count(A) and count(B), so the
score of every *other* pair that contains A or B goes **up**. The heap is kept as an upper
bound of every live pair's key: entries may be stale but never below the pair's current key.
Falling keys are handled lazily (a popped entry whose counts changed is re-pushed with
current counts); rising keys get a fresh entry at once: after each merge every pair that
contains A or B (found through the token -> pairs index) and every pair whose count changed
in a re-segmented word is pushed again with its current counts. A popped entry whose stored
counts equal the current ones is therefore the true maximum.

Word segmentations are updated only for words that contain (A, B) (pair -> words index),
by removing the word's old pairs and adding its new ones, weighted by the word's count.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc

from fastbpe._train_tuning cimport WordPieceTrainTuning
from fastbpe._vec cimport I32Vec, i32_push

cdef enum:
    LIST_FIRST_CAP = 4      # many small lists (per unit, per pair): start small

cnp.import_array()

cdef extern from *:
    ctypedef unsigned long long u128 "unsigned __int128"

# The trainer's capacity limits (fastbpe._train_tuning documents each field): pair ids,
# word ids and units are int32, and pair ids are never reused (every pair ever made
# keeps its id), so a long run on a big corpus can reach 2**31. This is the process
# default; every Trainer copies it when it is made and reads only its copy. Tests lower
# it (a 2**31-pair corpus can't be built in a test).
cdef WordPieceTrainTuning _default_tuning
_default_tuning.max_pairs = 0x7FFFFFFF
_default_tuning.max_words = 0x7FFFFFFF - 1


def _set_limits(max_pairs=None, max_words=None):
    """Lower (or restore, with the old values) the capacity limits of the trainers made
    from now on; return the old ones."""
    old = (_default_tuning.max_pairs, _default_tuning.max_words)
    _default_tuning.max_pairs = 0x7FFFFFFF if max_pairs is None else min(int(max_pairs), 0x7FFFFFFF)
    _default_tuning.max_words = (0x7FFFFFFF - 1 if max_words is None
                                 else min(int(max_words), 0x7FFFFFFF - 1))
    return old


cdef struct Entry:
    int64_t p
    int64_t ca
    int64_t cb
    int32_t a
    int32_t b


cdef class Trainer:
    """State of one training run; ``run`` does the merges and returns them."""

    # units (tokens): count, pairs that contain them, spelling (code points, prefix included)
    cdef int64_t* unit_count
    cdef I32Vec* unit_pairs
    cdef int64_t* unit_str_start
    cdef int32_t* unit_str_len
    cdef uint32_t* unit_chars
    cdef int64_t n_units, cap_units, n_chars, cap_chars
    # pairs
    cdef int32_t* pair_left
    cdef int32_t* pair_right
    cdef int64_t* pair_count
    cdef I32Vec* pair_words
    cdef int64_t n_pairs, cap_pairs
    # hash map (left, right) -> pair id, open addressing
    cdef uint64_t* hkeys
    cdef int32_t* hvals
    cdef int64_t hcap, hused
    # words
    cdef int32_t* sym
    cdef int64_t* w_start
    cdef int32_t* w_len
    cdef int64_t* w_freq
    cdef int64_t* w_stamp
    cdef int64_t n_words
    # heap
    cdef Entry* heap
    cdef int64_t heap_size, heap_cap
    # scratch
    cdef int64_t* pair_stamp
    cdef int32_t* touched
    cdef int64_t n_touched, touched_cap
    cdef int64_t step
    cdef int64_t min_count
    cdef bint oom
    cdef bint at_limit           # oom was set because a capacity limit was reached
    cdef int prefix_len
    cdef bint by_frequency
    cdef WordPieceTrainTuning tuning   # the process default when made: the limits

    def __cinit__(self):
        self.tuning = _default_tuning
        self.hcap = 0
        self.prefix_len = 2

    def __dealloc__(self):
        cdef int64_t i
        if self.unit_pairs != NULL:
            for i in range(self.n_units):
                free(self.unit_pairs[i].data)
        if self.pair_words != NULL:
            for i in range(self.n_pairs):
                free(self.pair_words[i].data)
        free(self.unit_count); free(self.unit_pairs); free(self.unit_str_start); free(self.unit_str_len)
        free(self.unit_chars); free(self.pair_left); free(self.pair_right); free(self.pair_count)
        free(self.pair_words); free(self.hkeys); free(self.hvals); free(self.sym); free(self.w_start)
        free(self.w_len); free(self.w_freq); free(self.w_stamp); free(self.heap); free(self.pair_stamp)
        free(self.touched)

    # -- units -------------------------------------------------------------------------
    cdef int add_unit(self, const uint32_t* chars, int32_t n) noexcept nogil:
        """New unit spelled chars[:n]; returns its id or -1 (out of memory)."""
        cdef int64_t cap
        cdef int32_t i
        if self.n_units == self.cap_units:
            cap = self.cap_units * 2 if self.cap_units else 256
            self.unit_count = <int64_t*>realloc(self.unit_count, cap * sizeof(int64_t))
            self.unit_pairs = <I32Vec*>realloc(self.unit_pairs, cap * sizeof(I32Vec))
            self.unit_str_start = <int64_t*>realloc(self.unit_str_start, cap * sizeof(int64_t))
            self.unit_str_len = <int32_t*>realloc(self.unit_str_len, cap * sizeof(int32_t))
            if self.unit_count == NULL or self.unit_pairs == NULL or self.unit_str_start == NULL or self.unit_str_len == NULL:
                return -1
            self.cap_units = cap
        while self.n_chars + n > self.cap_chars:
            cap = self.cap_chars * 2 if self.cap_chars else 4096
            self.unit_chars = <uint32_t*>realloc(self.unit_chars, cap * sizeof(uint32_t))
            if self.unit_chars == NULL:
                return -1
            self.cap_chars = cap
        for i in range(n):
            self.unit_chars[self.n_chars + i] = chars[i]
        self.unit_str_start[self.n_units] = self.n_chars
        self.unit_str_len[self.n_units] = n
        self.n_chars += n
        self.unit_count[self.n_units] = 0
        self.unit_pairs[self.n_units].data = NULL
        self.unit_pairs[self.n_units].size = 0
        self.unit_pairs[self.n_units].cap = 0
        self.n_units += 1
        return <int>(self.n_units - 1)

    cdef inline int cmp_units(self, int32_t x, int32_t y) noexcept nogil:
        """Compare unit spellings by code point: -1, 0 or 1."""
        cdef const uint32_t* s = self.unit_chars + self.unit_str_start[x]
        cdef const uint32_t* t = self.unit_chars + self.unit_str_start[y]
        cdef int32_t n = self.unit_str_len[x], m = self.unit_str_len[y], i
        for i in range(n if n < m else m):
            if s[i] != t[i]:
                return -1 if s[i] < t[i] else 1
        if n == m:
            return 0
        return -1 if n < m else 1

    # -- pairs -------------------------------------------------------------------------
    cdef int64_t find_pair(self, int32_t a, int32_t b) noexcept nogil:
        cdef uint64_t key = (<uint64_t><uint32_t>a << 32) | <uint32_t>b
        cdef uint64_t h = (key * <uint64_t>0x9E3779B97F4A7C15) >> 20
        cdef int64_t mask = self.hcap - 1, i = <int64_t>(h & <uint64_t>mask)
        while self.hvals[i] >= 0:
            if self.hkeys[i] == key:
                return self.hvals[i]
            i = (i + 1) & mask
        return -1

    cdef int grow_hash(self) noexcept nogil:
        cdef int64_t old_cap = self.hcap, cap = old_cap * 2 if old_cap else 1 << 16, i, j, mask
        cdef uint64_t* old_keys = self.hkeys
        cdef int32_t* old_vals = self.hvals
        cdef uint64_t h
        self.hkeys = <uint64_t*>malloc(cap * sizeof(uint64_t))
        self.hvals = <int32_t*>malloc(cap * sizeof(int32_t))
        if self.hkeys == NULL or self.hvals == NULL:
            return -1
        for i in range(cap):
            self.hvals[i] = -1
        self.hcap = cap
        mask = cap - 1
        for i in range(old_cap):
            if old_vals[i] >= 0:
                h = (old_keys[i] * <uint64_t>0x9E3779B97F4A7C15) >> 20
                j = <int64_t>(h & <uint64_t>mask)
                while self.hvals[j] >= 0:
                    j = (j + 1) & mask
                self.hkeys[j] = old_keys[i]
                self.hvals[j] = old_vals[i]
        free(old_keys)
        free(old_vals)
        return 0

    cdef int64_t get_pair(self, int32_t a, int32_t b) noexcept nogil:
        """Pair id of (a, b), created (count 0) if new; -1 if out of memory."""
        cdef int64_t pid = self.find_pair(a, b), cap, i
        cdef uint64_t key, h
        if pid >= 0:
            return pid
        if self.n_pairs >= self.tuning.max_pairs:
            self.at_limit = True
            return -1
        if (self.hused + 1) * 2 > self.hcap:
            if self.grow_hash() != 0:
                return -1
        if self.n_pairs == self.cap_pairs:
            cap = self.cap_pairs * 2 if self.cap_pairs else 1 << 14
            self.pair_left = <int32_t*>realloc(self.pair_left, cap * sizeof(int32_t))
            self.pair_right = <int32_t*>realloc(self.pair_right, cap * sizeof(int32_t))
            self.pair_count = <int64_t*>realloc(self.pair_count, cap * sizeof(int64_t))
            self.pair_words = <I32Vec*>realloc(self.pair_words, cap * sizeof(I32Vec))
            self.pair_stamp = <int64_t*>realloc(self.pair_stamp, cap * sizeof(int64_t))
            if (self.pair_left == NULL or self.pair_right == NULL or self.pair_count == NULL
                    or self.pair_words == NULL or self.pair_stamp == NULL):
                return -1
            self.cap_pairs = cap
        pid = self.n_pairs
        self.n_pairs += 1
        self.pair_left[pid] = a
        self.pair_right[pid] = b
        self.pair_count[pid] = 0
        self.pair_words[pid].data = NULL
        self.pair_words[pid].size = 0
        self.pair_words[pid].cap = 0
        self.pair_stamp[pid] = -1
        key = (<uint64_t><uint32_t>a << 32) | <uint32_t>b
        h = (key * <uint64_t>0x9E3779B97F4A7C15) >> 20
        i = <int64_t>(h & <uint64_t>(self.hcap - 1))
        while self.hvals[i] >= 0:
            i = (i + 1) & (self.hcap - 1)
        self.hkeys[i] = key
        self.hvals[i] = <int32_t>pid
        self.hused += 1
        if i32_push(&self.unit_pairs[a], <int32_t>pid, LIST_FIRST_CAP) != 0:
            return -1
        if b != a and i32_push(&self.unit_pairs[b], <int32_t>pid, LIST_FIRST_CAP) != 0:
            return -1
        return pid

    cdef int touch(self, int64_t pid) noexcept nogil:
        cdef int64_t cap
        if self.pair_stamp[pid] == self.step:
            return 0
        self.pair_stamp[pid] = self.step
        if self.n_touched == self.touched_cap:
            cap = self.touched_cap * 2 if self.touched_cap else 1024
            self.touched = <int32_t*>realloc(self.touched, cap * sizeof(int32_t))
            if self.touched == NULL:
                return -1
            self.touched_cap = cap
        self.touched[self.n_touched] = <int32_t>pid
        self.n_touched += 1
        return 0

    cdef int add_to_pair(self, int32_t a, int32_t b, int64_t delta, int32_t word) noexcept nogil:
        cdef int64_t pid = self.get_pair(a, b)
        if pid < 0:
            return -1
        self.pair_count[pid] += delta
        if word >= 0 and i32_push(&self.pair_words[pid], word, LIST_FIRST_CAP) != 0:
            return -1
        return self.touch(pid)

    # -- heap --------------------------------------------------------------------------
    cdef inline bint better(self, const Entry* x, const Entry* y) noexcept nogil:
        """x strictly before y: higher p/(ca*cb), then higher p, then smaller a, then smaller b."""
        cdef u128 lhs, rhs
        cdef int c
        if not self.by_frequency:
            lhs = <u128>x.p * <u128>y.ca * <u128>y.cb
            rhs = <u128>y.p * <u128>x.ca * <u128>x.cb
            if lhs != rhs:
                return lhs > rhs
        if x.p != y.p:
            return x.p > y.p
        c = self.cmp_units(x.a, y.a)
        if c != 0:
            return c < 0
        return self.cmp_units(x.b, y.b) < 0

    cdef int push(self, int64_t pid) noexcept nogil:
        cdef Entry e
        cdef int64_t i, parent, cap
        if self.pair_count[pid] < self.min_count:
            return 0
        e.p = self.pair_count[pid]
        e.a = self.pair_left[pid]
        e.b = self.pair_right[pid]
        e.ca = self.unit_count[e.a]
        e.cb = self.unit_count[e.b]
        if self.heap_size == self.heap_cap:
            cap = self.heap_cap * 2 if self.heap_cap else 1 << 16
            self.heap = <Entry*>realloc(self.heap, cap * sizeof(Entry))
            if self.heap == NULL:
                return -1
            self.heap_cap = cap
        i = self.heap_size
        self.heap_size += 1
        while i > 0:
            parent = (i - 1) >> 1
            if not self.better(&e, &self.heap[parent]):
                break
            self.heap[i] = self.heap[parent]
            i = parent
        self.heap[i] = e
        return 0

    cdef Entry pop(self) noexcept nogil:
        cdef Entry top = self.heap[0], last
        cdef int64_t i = 0, child, n
        self.heap_size -= 1
        n = self.heap_size
        if n > 0:
            last = self.heap[n]
            while True:
                child = 2 * i + 1
                if child >= n:
                    break
                if child + 1 < n and self.better(&self.heap[child + 1], &self.heap[child]):
                    child += 1
                if not self.better(&self.heap[child], &last):
                    break
                self.heap[i] = self.heap[child]
                i = child
            self.heap[i] = last
        return top

    # -- setup -------------------------------------------------------------------------
    def setup(self, list unit_strings, cnp.int64_t[::1] word_start, cnp.int32_t[::1] symbols,
              cnp.int64_t[::1] freqs, int64_t min_count):
        """Units (their spellings), words as unit-id sequences, and word counts."""
        cdef int64_t w, j, n_sym = symbols.shape[0]
        if freqs.shape[0] > self.tuning.max_words:
            raise ValueError(f"the corpus has {freqs.shape[0]:,} unique words: more than {self.tuning.max_words:,}, "
                             "the native WordPiece trainer's limit (word ids are int32)")
        cdef const uint32_t* chars
        cdef cnp.uint32_t[::1] arr
        cdef int32_t a, b
        for s in unit_strings:
            arr = np.frombuffer(s.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).copy()
            if self.add_unit(&arr[0] if arr.shape[0] else NULL, arr.shape[0]) < 0:
                raise MemoryError()
        self.n_words = freqs.shape[0]
        self.sym = <int32_t*>malloc((n_sym + 1) * sizeof(int32_t))
        self.w_start = <int64_t*>malloc((self.n_words + 1) * sizeof(int64_t))
        self.w_len = <int32_t*>malloc((self.n_words + 1) * sizeof(int32_t))
        self.w_freq = <int64_t*>malloc((self.n_words + 1) * sizeof(int64_t))
        self.w_stamp = <int64_t*>malloc((self.n_words + 1) * sizeof(int64_t))
        if self.sym == NULL or self.w_start == NULL or self.w_len == NULL or self.w_freq == NULL or self.w_stamp == NULL:
            raise MemoryError()
        self.min_count = min_count
        self.step = 0
        if self.grow_hash() != 0:
            raise MemoryError()
        with nogil:
            for j in range(n_sym):
                self.sym[j] = symbols[j]
            for w in range(self.n_words):
                self.w_start[w] = word_start[w]
                self.w_len[w] = <int32_t>(word_start[w + 1] - word_start[w])
                self.w_freq[w] = freqs[w]
                self.w_stamp[w] = -1
                for j in range(word_start[w], word_start[w + 1]):
                    self.unit_count[self.sym[j]] += freqs[w]
                    if j + 1 < word_start[w + 1]:
                        if self.add_to_pair(self.sym[j], self.sym[j + 1], freqs[w], <int32_t>w) != 0:
                            self.oom = True
            for j in range(self.n_pairs):
                if self.push(j) != 0:
                    self.oom = True
            self.n_touched = 0
        if self.oom:
            raise self.failure("counting the pairs of the words")

    def max_count(self):
        """Largest unit count (the caller checks it fits the 128-bit products)."""
        cdef int64_t i, m = 0
        for i in range(self.n_units):
            if self.unit_count[i] > m:
                m = self.unit_count[i]
        return m

    # -- the loop ----------------------------------------------------------------------
    cdef int64_t best_pair(self) noexcept nogil:
        """Pop until a current entry is found; its pair id, or -1 when none is left."""
        cdef Entry e
        cdef int64_t pid
        while self.heap_size > 0:
            e = self.pop()
            pid = self.find_pair(e.a, e.b)
            if pid < 0:
                continue
            if (self.pair_count[pid] == e.p and self.unit_count[e.a] == e.ca
                    and self.unit_count[e.b] == e.cb):
                return pid
            # stale: its key can only have fallen since (rises are pushed eagerly)
            if self.push(pid) != 0:
                self.oom = True
                return -1
        return -1

    cdef int apply_merge(self, int64_t pid, int32_t new_unit) noexcept nogil:
        """Re-segment every word containing the pair and update all counts."""
        cdef int32_t a = self.pair_left[pid], b = self.pair_right[pid]
        cdef I32Vec words = self.pair_words[pid]
        cdef int64_t k, j, start, f, merged
        cdef int32_t w, n, out, i
        cdef int32_t* s
        self.step += 1
        self.n_touched = 0
        # the pair's word list is replaced: words keep it only while they contain the pair
        self.pair_words[pid].data = NULL
        self.pair_words[pid].size = 0
        self.pair_words[pid].cap = 0
        for k in range(words.size):
            w = words.data[k]
            if self.w_stamp[w] == self.step:
                continue
            self.w_stamp[w] = self.step
            start = self.w_start[w]
            n = self.w_len[w]
            s = self.sym + start
            f = self.w_freq[w]
            # does the word still contain the pair?
            merged = 0
            for i in range(n - 1):
                if s[i] == a and s[i + 1] == b:
                    merged = 1
                    break
            if not merged:
                continue
            for i in range(n - 1):
                if self.add_to_pair(s[i], s[i + 1], -f, -1) != 0:
                    free(words.data)
                    return -1
            out = 0
            i = 0
            merged = 0
            while i < n:
                if i + 1 < n and s[i] == a and s[i + 1] == b:
                    s[out] = new_unit
                    i += 2
                    merged += 1
                else:
                    s[out] = s[i]
                    i += 1
                out += 1
            self.w_len[w] = out
            self.unit_count[a] -= merged * f
            self.unit_count[b] -= merged * f
            self.unit_count[new_unit] += merged * f
            for i in range(out - 1):
                # only pairs with the new unit are new to this word's list
                if self.add_to_pair(s[i], s[i + 1], f,
                                    w if (s[i] == new_unit or s[i + 1] == new_unit) else -1) != 0:
                    free(words.data)
                    return -1
        free(words.data)
        # keys that rose: every pair with a or b (their unit counts fell)
        for k in range(self.unit_pairs[a].size):
            if self.touch(self.unit_pairs[a].data[k]) != 0:
                return -1
        for k in range(self.unit_pairs[b].size):
            if self.touch(self.unit_pairs[b].data[k]) != 0:
                return -1
        for k in range(self.n_touched):
            if self.push(self.touched[k]) != 0:
                return -1
        return 0

    def run(self, merged_ids, int64_t max_merges, progress=None):
        """Do up to ``max_merges`` merges. ``merged_ids`` maps a merged spelling to an
        existing unit id (a merge whose token already exists reuses it, as the reference).

        Returns the list of (a, b, new_unit) merges.
        """
        merges = []
        cdef int64_t pid, done = 0
        cdef int32_t a, b, new_unit
        while done < max_merges:
            with nogil:
                pid = self.best_pair()
            if self.oom:
                raise self.failure(f"at merge {len(merges) + 1}")
            if pid < 0:
                break
            a = self.pair_left[pid]
            b = self.pair_right[pid]
            spelling = self.merged_spelling(a, b)
            existing = merged_ids.get(spelling)
            if existing is None:
                arr = np.frombuffer(spelling.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).copy()
                new_unit = self._add_unit_arr(arr)
                merged_ids[spelling] = new_unit
                done += 1
                if progress is not None:
                    progress.update(1)
            else:
                new_unit = existing
            with nogil:
                if self.apply_merge(pid, new_unit) != 0:
                    self.oom = True
            if self.oom:
                raise self.failure(f"at merge {len(merges) + 1}")
            merges.append((a, b, new_unit))
        return merges

    def failure(self, where):
        """The exception for a failed step: ValueError at a capacity limit, else MemoryError."""
        if self.at_limit:
            return ValueError(f"{where}: more than {self.tuning.max_pairs:,} distinct pairs, the native WordPiece "
                              "trainer's limit (pair ids are int32 and never reused)")
        return MemoryError(f"{where}: out of memory")

    cdef int32_t _add_unit_arr(self, cnp.uint32_t[::1] arr) except -1:
        cdef int r = self.add_unit(&arr[0], arr.shape[0])
        if r < 0:
            raise MemoryError()
        return r

    def spelling(self, int32_t u):
        cdef int64_t s = self.unit_str_start[u]
        return "".join([chr(self.unit_chars[s + i]) for i in range(self.unit_str_len[u])])

    def merged_spelling(self, int32_t a, int32_t b):
        """A + B without B's continuation prefix."""
        return self.spelling(a) + self.spelling(b)[self.prefix_len:]

    def set_prefix_len(self, int n):
        self.prefix_len = n

    def set_by_frequency(self, bint flag):
        """Rank pairs by count alone (HF WordPieceTrainer style) instead of the likelihood."""
        self.by_frequency = flag
