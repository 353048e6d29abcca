"""Native byte-level BPE encoder: ``CoreBPE``, the core behind ``fastbpe.Encoding``.

``CoreBPE`` mirrors tiktoken's Rust ``CoreBPE``: the same constructor arguments, the
same ids for every input, and the same merge rule (repeatedly merge the adjacent pair
whose concatenated bytes have the lowest rank, leftmost on ties). Policy (special-token
checks, argument defaults) lives in the Python ``Encoding``; this class converts inputs
once, releases the GIL, and hands the work to the kernels, one idea per module:

- ``_vocab``: the vocabulary tables (byte string -> rank; id -> bytes is here);
- ``_chunk``: one pre-tokenized chunk (fast paths, then ``_chunk_cache``, then a merge:
  ``_merge`` picks ``_merge_scan`` or ``_merge_heap``; ``_merge_chars`` merges CJK-like
  chunks by characters, see docs/merge_rules.md);
- ``_specials``: the special-token scan; ``_jobs``: one text without the GIL, and
  cutting long texts into pieces; ``_runner``: the pthread batch runner;
- ``_batch``: a batch's results while it encodes (lists streamed from the runner, or
  one flat array); ``_out``: output buffers and their slab pool; ``_idlists``: Python
  lists of ids;
- ``_tuning``: the knobs (``Tuning``), passed to the kernels, never read from globals.

An encoder is immutable after construction, so one object is safe to share between
threads; the only state that changes is the pool of chunk caches, handed out whole, one
thread at a time, through atomic slots. Batch calls start plain pthreads for the call
and join them before returning: no pool survives a call, so processes forked later
(multiprocessing "fork") are safe.
"""
import os as _os

# fix_surrogates: one copy, the spec's; only the rare retry of a text with a lone
# surrogate calls it, under the GIL
from fastbpe.reference.core import DisallowedSpecial, fix_surrogates, holds_any

import numpy as np
cimport numpy as cnp

from cpython.ref cimport PyObject
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memchr, memcmp, memcpy, memmove, memset

from fastbpe._batch cimport run_streaming, to_numpy
from fastbpe._chunk cimport encode_chunk
from fastbpe._chunk_cache cimport CACHE_POOL, CacheEntry
from fastbpe._common cimport (ERR_BYTE, ERR_DISALLOWED, ERR_NOMEM, ERR_NONE, ERR_SURROGATE,
                              ERR_TOO_LONG, NO_RANK)
from fastbpe._chunk_cache cimport new_chunk_cache
from fastbpe._idlists cimport collect_young_if_due, outbuf_to_list, shared_id_ints, track_lists
from fastbpe._jobs cimport (Context, Job, context_bind, cut_job, job_free, pieces_failed,
                            run_job)
from fastbpe._merge cimport bpe_merge
from fastbpe._merge_chars cimport (UNITS_MAX, bigram_may_join, bpe_by_chars, cross_bit,
                                   no_token_spans)
from fastbpe._out cimport OutArena, OutBuf, arena_release
from fastbpe._runner cimport batch_threads, run_jobs
from fastbpe._specials cimport (NeedleSet, Special, SpecialSet, find_special,
                                special_set_index, specials_hold_newline)
from fastbpe._tuning cimport Tuning, tuning_default, tuning_fields, tuning_update
from fastbpe._vocab cimport (Vocab, decode_char, vocab_build, vocab_clear, vocab_free,
                             vocab_rank)

# Testing hooks of the kernel modules, re-exported where the tests look for them.
from fastbpe._chunk_cache import _equal_short
from fastbpe._idlists import _IMMORTAL_REFCNT, _set_id_int_top_up, _shared_int_address
from fastbpe._jobs import _cut_points
from fastbpe._jobs import _utf8_of as _jobs_utf8_of
from fastbpe._out import _output_pool_bytes
from fastbpe._runner import MAX_THREADS, _batch_threads
from fastbpe._specials import _find_pair
from fastbpe._tuning import default_tuning
from fastbpe._vocab import first_duplicate, ranks_are_plain

cnp.import_array()

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL
    PyObject** PySequence_Fast_ITEMS(object o)
    bint fbe_long_check_exact "PyLong_CheckExact"(PyObject* o) noexcept
    long long fbe_long_as_ll "PyLong_AsLongLongAndOverflow"(PyObject* o, int* overflow) noexcept
    PyObject* PyLong_FromUnsignedLong(unsigned long v)
    void PyList_SET_ITEM(object lst, Py_ssize_t i, PyObject* item)
    object PyBytes_FromStringAndSize(const char* s, Py_ssize_t n)
    char* PyBytes_AS_STRING(object b)

cdef extern from "fbe_pyunicode.h":
    int FBE_UNICODE_READY(object o) except -1
    bint PyUnicode_IS_ASCII(object o)
    int PyUnicode_KIND(object o)
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)

cdef extern from "fbe_atomic.h" nogil:
    void* fbe_slot_take(void** slots, int n) noexcept

cdef enum Result:
    # What CoreBPE.run returns.
    LISTS = 0                 # a list of ids per text (batch calls)
    ONE_LIST = 1              # the list of ids of its only text (single-text calls)
    ARRAYS = 2                # (flat ids, offsets) as numpy arrays

def _utf8_of(str text):
    """Testing hook: the UTF-8 conversion that workers run on a str, as bytes (with the
    default tuning's utf8_simd; ``fastbpe._jobs._utf8_of`` takes it as an argument)."""
    return _jobs_utf8_of(text, tuning_default().utf8_simd)


# --------------------------------------------------------------------------------------
# Python-facing helpers
# --------------------------------------------------------------------------------------

cdef int check_threads(object num_threads) except -1:
    if isinstance(num_threads, bool) or not isinstance(num_threads, int):
        raise TypeError(f"num_threads must be an int, not {type(num_threads).__name__}")
    if num_threads < 1 or num_threads > MAX_THREADS:
        raise ValueError(f"num_threads must be between 1 and {MAX_THREADS}, got {num_threads}")
    return 0


cdef object check_str(object text):
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    return text


cdef object as_valid_str(object text):
    """The text itself if it encodes to UTF-8; otherwise tiktoken's surrogate fix-up."""
    check_str(text)
    cdef Py_ssize_t size
    try:
        PyUnicode_AsUTF8AndSize(text, &size)
        return text
    except UnicodeEncodeError:
        return fix_surrogates(text)


def _rebuild_core(bytes arena, bytes lengths, bytes ids, dict special_tokens, str pat_str):
    """Unpickle a CoreBPE from its packed vocabulary (see ``CoreBPE.__reduce__``)."""
    cdef CoreBPE core = CoreBPE.__new__(CoreBPE)
    core._init_packed(arena, np.frombuffer(lengths, dtype=np.uint32),
                      np.frombuffer(ids, dtype=np.uint32), special_tokens, pat_str)
    return core


#: NeedleSets a CoreBPE keeps, by set (an Encoding passes the same few sets every call)
cdef Py_ssize_t NEEDLE_CACHE_MAX = 64


cdef class CoreBPE:
    """Immutable byte-level BPE encoder/decoder (tiktoken's ``CoreBPE`` semantics).

    >>> core = CoreBPE({bytes([b]): b for b in range(256)} | {b"ab": 256}, {"<|e|>": 257}, r"\\w+|\\W")
    >>> core.encode_ordinary("abc ab")
    [256, 99, 32, 256]
    """
    cdef Vocab vocab
    cdef bytes arena_obj            # token bytes: mergeable tokens, then special tokens
    cdef object lengths_arr         # uint32 per mergeable token, arena order
    cdef object ids_arr             # uint32 per mergeable token, arena order
    cdef readonly dict special_tokens
    cdef readonly str pat_str
    cdef object regex_pat
    cdef int pattern_id             # native pre-tokenizer, or -1 for the regex module
    cdef Py_ssize_t n_mergeable
    cdef uint32_t max_token_id
    # decoding: entry e has bytes arena[entry_off[e] : entry_off[e] + entry_len[e]]
    cdef int64_t* entry_off
    cdef uint32_t* entry_len
    cdef Py_ssize_t n_entries
    cdef int64_t* dense_entry      # id -> entry or -1 (NULL when ids are too sparse)
    cdef Py_ssize_t dense_size
    cdef uint32_t* sorted_ids      # sparse fallback: ids ascending, with their entries
    cdef int64_t* sorted_entry
    cdef dict special_bytes         # special text -> (offset in arena, length, id)
    cdef dict needle_sets           # frozenset -> NeedleSet (see needle_set)
    cdef Py_ssize_t n_shared_ints   # ids below this have a shared int (see _id_block)
    cdef void* cache_pool[CACHE_POOL]   # chunk caches kept between calls (new_chunk_cache)
    cdef Tuning knobs               # its tuning: a copy of the process default (default_tuning)

    def __cinit__(self):
        cdef int i
        self.knobs = tuning_default()
        vocab_clear(&self.vocab)
        self.entry_off = NULL
        self.entry_len = NULL
        self.dense_entry = NULL
        self.sorted_ids = NULL
        self.sorted_entry = NULL
        self.pattern_id = -1
        self.needle_sets = {}
        for i in range(CACHE_POOL):
            self.cache_pool[i] = NULL

    def __dealloc__(self):
        self.free_chunk_caches()
        vocab_free(&self.vocab)
        free(self.entry_off)
        free(self.entry_len)
        free(self.dense_entry)
        free(self.sorted_ids)
        free(self.sorted_entry)

    cdef void free_chunk_caches(self) noexcept nogil:
        cdef void* c
        c = fbe_slot_take(self.cache_pool, CACHE_POOL)
        while c != NULL:
            free(c)
            c = fbe_slot_take(self.cache_pool, CACHE_POOL)

    @property
    def tuning(self):
        """This encoder's tuning (``fastbpe._tuning``), as a dict: knobs that choose
        between equivalent strategies or share a batch among threads; none changes an
        id. A new encoder (and an unpickled one) copies ``default_tuning()``."""
        return tuning_fields(&self.knobs)

    def set_tuning(self, **fields):
        """Set some of this encoder's tuning fields; returns their previous values, so
        ``core.set_tuning(**old)`` restores them. Calls already running keep the tuning
        they started with."""
        before = tuning_fields(&self.knobs)
        tuning_update(&self.knobs, fields)
        return {name: before[name] for name in fields}

    def _chunk_caches_kept(self):
        """Testing hook: how many chunk caches the encoder keeps between calls."""
        cdef Py_ssize_t i, n = 0
        for i in range(CACHE_POOL):
            n += self.cache_pool[i] != NULL
        return n

    def _clear_chunk_caches(self):
        """Drop the chunk caches kept between calls, so that the next call starts cold,
        as the first call does. For benchmarks that time the same text repeatedly,
        where a warm cache would measure a text the encoder has already seen."""
        self.free_chunk_caches()

    def __init__(self, mergeable_ranks, special_tokens, str pat_str):
        if not isinstance(mergeable_ranks, dict):
            raise TypeError(f"mergeable_ranks must be a dict[bytes, int], not "
                            f"{type(mergeable_ranks).__name__}")
        keys = list(mergeable_ranks.keys())
        values = list(mergeable_ranks.values())
        for k in keys:
            if not isinstance(k, bytes):
                raise TypeError(f"mergeable_ranks keys must be bytes, got {k!r}")
        for k, v in zip(keys, values):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"rank of {k!r} must be an int, got {v!r}")
            if v < 0 or v >= NO_RANK:
                raise ValueError(f"rank of {k!r} must be in [0, 2**32 - 1), got {v}")
        lengths = np.fromiter((len(k) for k in keys), dtype=np.uint32, count=len(keys))
        ids = np.array(values, dtype=np.uint32) if values else np.zeros(0, dtype=np.uint32)
        self._init_packed(b"".join(keys), lengths, ids, special_tokens, pat_str)

    def _init_packed(self, bytes arena, lengths, ids, special_tokens, str pat_str):
        if self.vocab.slots != NULL:
            raise RuntimeError("CoreBPE is immutable")
        if not isinstance(special_tokens, dict):
            raise TypeError(f"special_tokens must be a dict[str, int], not "
                            f"{type(special_tokens).__name__}")
        cdef Py_ssize_t n = len(lengths), i, total_special = 0
        for s, t in special_tokens.items():
            if not isinstance(s, str):
                raise TypeError(f"special token must be a str, got {s!r}")
            if isinstance(t, bool) or not isinstance(t, int):
                raise TypeError(f"id of special token {s!r} must be an int, got {t!r}")
            if t < 0 or t >= NO_RANK:
                raise ValueError(f"id of special token {s!r} must be in [0, 2**32 - 1), got {t}")
        dup = first_duplicate(ids)
        if dup is not None:
            raise ValueError(f"duplicate rank {dup} in mergeable_ranks")
        if len(arena) >= (1 << 32) - (1 << 20):
            raise ValueError("vocabulary too large (token bytes must total under 4 GiB)")

        self.pat_str = pat_str
        self.regex_pat = _compile_pattern(pat_str)
        self.pattern_id = _native_pattern_id(pat_str)
        self.special_tokens = dict(special_tokens)
        self.n_mergeable = n
        self.lengths_arr = np.ascontiguousarray(lengths, dtype=np.uint32)
        self.ids_arr = np.ascontiguousarray(ids, dtype=np.uint32)

        # Arena: mergeable tokens, then the UTF-8 bytes of each special token.
        special_items = list(self.special_tokens.items())
        special_utf8 = [s.encode("utf-8", "surrogatepass") for s, _ in special_items]
        self.arena_obj = arena + b"".join(special_utf8)
        self.vocab.arena = <const unsigned char*>PyBytes_AS_STRING(self.arena_obj)
        self.special_bytes = {}

        self.n_entries = n + len(special_items)
        self.entry_off = <int64_t*>malloc(max(self.n_entries, 1) * sizeof(int64_t))
        self.entry_len = <uint32_t*>malloc(max(self.n_entries, 1) * sizeof(uint32_t))
        if self.entry_off == NULL or self.entry_len == NULL:
            raise MemoryError()
        cdef const uint32_t[::1] lens_v = self.lengths_arr
        cdef const uint32_t[::1] ids_v = self.ids_arr
        cdef int64_t off = 0
        for i in range(n):
            self.entry_off[i] = off
            self.entry_len[i] = lens_v[i]
            off += lens_v[i]
        if off != len(arena):
            raise ValueError("token lengths do not add up to the arena size")
        entry_ids = np.empty(self.n_entries, dtype=np.int64)
        entry_ids[:n] = ids
        for i, ((s, t), b) in enumerate(zip(special_items, special_utf8)):
            self.entry_off[n + i] = off
            self.entry_len[n + i] = len(b)
            self.special_bytes[s] = (off, len(b), t)
            entry_ids[n + i] = t
            off += len(b)
        self.max_token_id = <uint32_t>(entry_ids.max() if self.n_entries else 0)

        # The lookup tables (fastbpe._vocab).
        cdef const uint32_t* lens_p = &lens_v[0] if n else NULL
        cdef const uint32_t* ids_p = &ids_v[0] if n else NULL
        cdef int rc_tables
        with nogil:
            rc_tables = vocab_build(&self.vocab, n, lens_p, ids_p, self.entry_off)
        if rc_tables < 0:
            raise MemoryError()

        # Decoding table: mergeable tokens win over specials sharing an id, as in tiktoken.
        order = np.argsort(entry_ids, kind="stable")
        cdef Py_ssize_t e
        cdef int64_t tid
        if self.n_entries and int(self.max_token_id) < 4 * self.n_entries + 65536:
            self.dense_size = <Py_ssize_t>self.max_token_id + 1
            self.dense_entry = <int64_t*>malloc(self.dense_size * sizeof(int64_t))
            if self.dense_entry == NULL:
                raise MemoryError()
            for i in range(self.dense_size):
                self.dense_entry[i] = -1
            for e in range(self.n_entries - 1, -1, -1):
                self.dense_entry[<Py_ssize_t>entry_ids[e]] = e
            self.n_shared_ints = shared_id_ints(self.dense_size)
        else:
            self.dense_size = 0
            self.sorted_ids = <uint32_t*>malloc(max(self.n_entries, 1) * sizeof(uint32_t))
            self.sorted_entry = <int64_t*>malloc(max(self.n_entries, 1) * sizeof(int64_t))
            if self.sorted_ids == NULL or self.sorted_entry == NULL:
                raise MemoryError()
            for i in range(self.n_entries):
                e = order[i]
                self.sorted_ids[i] = <uint32_t>entry_ids[e]
                self.sorted_entry[i] = e

    # ---- small lookups ---------------------------------------------------------------

    cdef int64_t entry_of(self, int64_t token) noexcept nogil:
        """Entry index of a token id (mergeable first), or -1."""
        cdef Py_ssize_t lo, hi, mid
        if token < 0:
            return -1
        if self.dense_entry != NULL:
            return self.dense_entry[token] if token < self.dense_size else -1
        lo = 0
        hi = self.n_entries
        while lo < hi:
            mid = (lo + hi) >> 1
            if self.sorted_ids[mid] < token:
                lo = mid + 1
            else:
                hi = mid
        if lo < self.n_entries and self.sorted_ids[lo] == token:
            # several entries can share an id (a special equal to a mergeable id);
            # the stable sort put the mergeable one first
            return self.sorted_entry[lo]
        return -1

    @property
    def max_token_value(self):
        return int(self.max_token_id)

    @property
    def n_vocab(self):
        return int(self.max_token_id) + 1

    def __reduce__(self):
        self.check_ready()
        # Packed vocabulary: one bytes arena plus two uint32 arrays; unpickling rebuilds
        # the tables natively without a 200k-entry dict.
        return (_rebuild_core, (
            self.arena_obj[:self.entry_off[self.n_mergeable] if self.n_mergeable < self.n_entries
                           else len(self.arena_obj)],
            self.lengths_arr.tobytes(), self.ids_arr.tobytes(),
            dict(self.special_tokens), self.pat_str))

    # ---- encoding --------------------------------------------------------------------

    cdef int fill_specials(self, SpecialSet* ss, object allowed_special, list keep) except -1:
        """Build the C view of the allowed special tokens that exist in this vocabulary."""
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
        chosen = [self.special_bytes[s] for s in allowed_special if s in self.special_bytes]
        if not chosen:
            return 0
        cdef bytes buf = PyBytes_FromStringAndSize(NULL, len(chosen) * sizeof(Special))
        keep.append(buf)
        ss.items = <Special*>PyBytes_AS_STRING(buf)
        cdef Py_ssize_t k = 0
        for off, length, tok in chosen:
            if length == 0:
                continue
            ss.items[k].text = self.vocab.arena + <int64_t>off
            ss.items[k].length = length
            ss.items[k].token = <uint32_t>tok
            k += 1
        ss.count = k
        special_set_index(ss)
        return 0

    cdef int prepare_job(self, Job* job, object text, const SpecialSet* ss, list keep) except -1:
        """Point a job at the text's UTF-8 buffer; on the regex path, pre-tokenize now."""
        cdef Py_ssize_t size
        job.owned = NULL
        job.no_check = False
        job.src = NULL
        job.src_kind = 0
        job.src_len = 0
        if self.pattern_id >= 0:
            FBE_UNICODE_READY(text)
            if PyUnicode_IS_ASCII(text):
                job.text = <const unsigned char*>PyUnicode_DATA(text)
                job.n = PyUnicode_GET_LENGTH(text)
            else:
                job.text = NULL    # converted by the worker
                job.n = 0
                job.src = PyUnicode_DATA(text)
                job.src_kind = PyUnicode_KIND(text)
                job.src_len = PyUnicode_GET_LENGTH(text)
        else:
            valid = as_valid_str(text)
            job.no_check = valid is not text
            text = valid
            keep.append(text)
            job.text = <const unsigned char*>PyUnicode_AsUTF8AndSize(text, &size)
            job.n = size
        job.spans = NULL
        job.n_spans = 0
        job.out.data = NULL
        job.out.size = 0
        job.out.cap = 0
        job.out.arena = NULL
        job.err = ERR_NONE
        job.err_pos = 0
        if self.pattern_id < 0:
            spans = _regex_spans(self.regex_pat, text, job.text, job.n, ss)
            keep.append(spans)
            job.spans = <const int64_t*>cnp.PyArray_DATA(spans)
            job.n_spans = len(spans) // 2
        return 0

    cdef int raise_job_error(self, Job* job) except -1:
        if job.err == ERR_NOMEM:
            raise MemoryError()
        if job.err == ERR_TOO_LONG:
            raise ValueError(f"a single pre-tokenized chunk at UTF-8 offset {job.err_pos} is "
                             f"4 GiB or longer; such chunks are not supported")
        if job.err == ERR_BYTE:
            raise ValueError(f"byte {job.text[job.err_pos]:#04x} at UTF-8 offset {job.err_pos} "
                             f"is not a token of this vocabulary, so it cannot be encoded")
        return 0

    cdef int check_ready(self) except -1:
        if self.vocab.slots == NULL:
            raise RuntimeError("CoreBPE was not initialised (use CoreBPE(ranks, specials, pattern))")
        return 0

    cdef NeedleSet needle_set(self, object disallowed_special):
        """The NeedleSet of disallowed_special (any collection of str), or None if it is
        empty; kept for the next call with an equal set."""
        if not disallowed_special:
            return None
        if isinstance(disallowed_special, str):
            raise TypeError("disallowed_special must be a collection of str (the Python "
                            "layer maps 'all')")
        key = (disallowed_special if type(disallowed_special) is frozenset
               else frozenset(disallowed_special))
        needles = self.needle_sets.get(key)
        if needles is None:
            needles = NeedleSet(key)
            if len(self.needle_sets) >= NEEDLE_CACHE_MAX:
                self.needle_sets.clear()
            self.needle_sets[key] = needles
        return needles

    cdef object run(self, list texts, object allowed_special, int num_threads, Result result,
                    object dtype, object disallowed_special=None):
        """Encode texts; returns what `result` names (LISTS, ONE_LIST or ARRAYS).

        disallowed_special: strings no text may hold, as tiktoken checks before encoding;
        the first text (in order) that holds one raises DisallowedSpecial(index)."""
        self.check_ready()
        cdef NeedleSet needles = self.needle_set(disallowed_special)
        cdef Py_ssize_t n_texts = len(texts), n_jobs = 0, cap, i, t, k, total = 0
        cdef Py_ssize_t target = 0
        cdef bint surrogates
        cdef list keep = []
        cdef CacheEntry* no_cache = NULL
        cdef SpecialSet ss
        cdef Context ctx
        cdef Job* jobs = NULL
        cdef Py_ssize_t* first = NULL     # text t is jobs[first[t]:first[t + 1]]
        cdef Tuning tuning = self.knobs   # this call's (set_tuning may run meanwhile)
        cdef Py_ssize_t n_arenas = 0
        ctx.arenas = NULL
        ctx.disallowed = NULL
        if needles is not None:
            if needles.has_empty and n_texts:
                raise DisallowedSpecial(0)
            if needles.ss.count:
                ctx.disallowed = &needles.ss
        # 1. the allowed special tokens, and whether long texts may be cut into pieces:
        #    only where threads can share them, and where the cut rule holds (next_cut;
        #    a special token, allowed or not, could span a cut only if it holds "\n")
        self.fill_specials(&ss, allowed_special, keep)
        if num_threads > 1 and result != ONE_LIST:
            for t in range(n_texts):
                total += len(<str>texts[t])
            num_threads = <int>batch_threads(num_threads, total, &tuning)
        if (num_threads > 1 and result != ONE_LIST and self.pattern_id >= 0
                and not specials_hold_newline(&ss)
                and not (needles is not None and specials_hold_newline(&needles.ss))):
            target = max(tuning.piece_min, total // (num_threads * tuning.pieces_per_thread))
        cap = n_texts + (total // target if target else 0)
        jobs = <Job*>malloc(max(cap, 1) * sizeof(Job))
        first = <Py_ssize_t*>malloc((n_texts + 1) * sizeof(Py_ssize_t))
        if jobs == NULL or first == NULL:
            free(jobs)
            free(first)
            raise MemoryError()
        for i in range(cap):
            jobs[i].out.data = NULL
            jobs[i].owned = NULL
        try:
            # 2. a job per text, or per piece of a long one
            for t in range(n_texts):
                first[t] = n_jobs
                self.prepare_job(&jobs[n_jobs], texts[t], &ss, keep)
                if target and len(<str>texts[t]) >= 2 * target:
                    with nogil:     # a scan of up to the whole text (no cut found)
                        k = cut_job(&jobs[n_jobs], target)
                    n_jobs += k
                else:
                    n_jobs += 1
            first[n_texts] = n_jobs
            n_arenas = max(1, min(<Py_ssize_t>num_threads, n_jobs))   # one per thread slot
            ctx.arenas = <OutArena*>calloc(n_arenas, sizeof(OutArena))
            if ctx.arenas == NULL:
                raise MemoryError()
            context_bind(&ctx)
            ctx.vocab = &self.vocab
            ctx.tuning = &tuning
            ctx.specials = &ss
            ctx.pattern = self.pattern_id
            ctx.jobs = jobs
            ctx.runner.n_jobs = n_jobs
            ctx.cache_pool = self.cache_pool
            ctx.runner.notify = False
            # 3. encode
            if result == LISTS and n_jobs > 1 and num_threads > 1:
                results = run_streaming(&ctx, num_threads, first, n_texts, self.n_shared_ints)
            else:
                results = None
                with nogil:
                    run_jobs(&ctx.runner, num_threads)
            # 4. disallowed special tokens first, text by text, as tiktoken checks every
            #    text before it encodes any. A text with lone surrogates (its job failed
            #    or was fixed up) is checked here, as given.
            if needles is not None:
                for t in range(n_texts):
                    surrogates = False    # a piece met one, or the regex path fixed it up
                    for k in range(first[t], first[t + 1]):
                        if jobs[k].err == ERR_DISALLOWED:
                            raise DisallowedSpecial(t)
                        surrogates = surrogates or jobs[k].err == ERR_SURROGATE or jobs[k].no_check
                    if surrogates and holds_any(texts[t], needles.strings):
                        raise DisallowedSpecial(t)
            # 5. other errors: a cut text with a failed piece is redone whole (so that
            #    the error, or tiktoken's surrogate fix-up, is about the whole text);
            #    then the job of each text holds its only possible error
            for t in range(n_texts):
                if first[t + 1] - first[t] > 1 and pieces_failed(jobs, first[t], first[t + 1]):
                    for k in range(first[t], first[t + 1]):
                        job_free(&jobs[k])
                        jobs[k].err = ERR_NONE
                    if results is not None:
                        results[t] = None
                    self.prepare_job(&jobs[first[t]], texts[t], &ss, keep)
                    jobs[first[t]].no_check = True     # checked in step 4
                    with nogil:
                        run_job(&ctx, &jobs[first[t]], no_cache, NULL)
                i = first[t]
                if jobs[i].err == ERR_SURROGATE:
                    # rare: redo this text after tiktoken's fix-up
                    fixed = fix_surrogates(texts[t])
                    keep.append(fixed)
                    job_free(&jobs[i])
                    self.prepare_job(&jobs[i], fixed, &ss, keep)
                    jobs[i].no_check = True
                    with nogil:
                        run_job(&ctx, &jobs[i], no_cache, NULL)
                self.raise_job_error(&jobs[i])
            # 6. results, one per text
            if result == ONE_LIST:
                return outbuf_to_list(&jobs[0].out, self.n_shared_ints)
            if result == LISTS:
                if results is None:
                    results = [None] * n_texts
                for t in range(n_texts):
                    if results[t] is None:      # not streamed, or redone above
                        results[t] = outbuf_to_list(&jobs[first[t]].out, self.n_shared_ints, True)
                collect_young_if_due()
                track_lists(results)
                return results
            return to_numpy(jobs, first, n_texts, dtype)
        finally:
            for i in range(n_jobs):
                job_free(&jobs[i])
            free(jobs)
            free(first)
            if ctx.arenas != NULL:
                # every list and array is built: the slabs go back to the pool
                for i in range(n_arenas):
                    arena_release(&ctx.arenas[i])
                free(ctx.arenas)

    cdef object check_dtype(self, object dtype):
        dt = np.dtype(dtype)
        if dt == np.uint32:
            return dt
        if dt == np.uint16:
            if self.max_token_id >= 65536:
                raise ValueError(f"dtype uint16 cannot hold this vocabulary's ids (max id "
                                 f"{self.max_token_id} >= 65536); use uint32")
            return dt
        raise ValueError(f"dtype must be uint32 or uint16, got {dt}")

    def encode_ordinary(self, text):
        """Token ids of text, with special-token text encoded as ordinary text."""
        return self.run([check_str(text)], None, 1, ONE_LIST, None)

    def encode(self, text, allowed_special, disallowed_special=frozenset()):
        """Token ids of text; occurrences of allowed special tokens become their ids.
        DisallowedSpecial(0) if text holds one of disallowed_special (strings)."""
        return self.run([check_str(text)], allowed_special, 1, ONE_LIST, None, disallowed_special)

    def encode_ordinary_batch(self, texts, num_threads=8):
        check_threads(num_threads)
        return self.run(_texts_list(texts), None, num_threads, LISTS, None)

    def encode_batch(self, texts, allowed_special, num_threads=8,
                     disallowed_special=frozenset()):
        """encode of each text, on num_threads threads; DisallowedSpecial(i) for the
        first text i that holds one of disallowed_special."""
        check_threads(num_threads)
        return self.run(_texts_list(texts), allowed_special, num_threads, LISTS, None,
                        disallowed_special)

    def encode_to_numpy(self, text, allowed_special=frozenset(), dtype=np.uint32,
                        disallowed_special=frozenset()):
        """Token ids as a 1-D numpy array (uint32, or uint16 when every id fits)."""
        dt = self.check_dtype(dtype)
        flat, _ = self.run([check_str(text)], allowed_special, 1, ARRAYS, dt, disallowed_special)
        return flat

    def encode_batch_to_numpy(self, texts, allowed_special=frozenset(), num_threads=8,
                              dtype=np.uint32, disallowed_special=frozenset()):
        """(flat ids, offsets): text i is flat[offsets[i]:offsets[i + 1]]."""
        check_threads(num_threads)
        dt = self.check_dtype(dtype)
        return self.run(_texts_list(texts), allowed_special, num_threads, ARRAYS, dt,
                        disallowed_special)

    def encode_single_token(self, piece):
        """Id of a token given its bytes (or a special token's text/bytes); KeyError if none."""
        self.check_ready()
        if isinstance(piece, str):
            if piece in self.special_tokens:
                return self.special_tokens[piece]
            piece = piece.encode("utf-8")
        if not isinstance(piece, (bytes, bytearray)):
            raise TypeError(f"piece must be bytes, not {type(piece).__name__}")
        cdef bytes b = bytes(piece)
        cdef uint32_t r = NO_RANK
        if len(b):
            r = vocab_rank(&self.vocab, <const unsigned char*>PyBytes_AS_STRING(b), len(b))
        if r != NO_RANK:
            return r
        try:
            s = b.decode("utf-8")
        except UnicodeDecodeError:
            raise KeyError(piece) from None
        if s in self.special_tokens:
            return self.special_tokens[s]
        raise KeyError(piece)

    cdef list encode_piece(self, piece, bint whole_first):
        """BPE of one piece of raw bytes, no pre-tokenization: the whole piece's id if
        it is a token and whole_first, else merged from single bytes (tiktoken's
        byte_pair_encode, which never looks the whole piece up)."""
        self.check_ready()
        if isinstance(piece, bytearray):
            piece = bytes(piece)
        elif not isinstance(piece, bytes):
            raise TypeError(f"piece must be bytes, not {type(piece).__name__}")
        cdef bytes b = <bytes>piece
        cdef OutBuf out
        cdef Py_ssize_t err_pos = 0
        cdef int rc
        cdef Tuning tuning = self.knobs
        out.data = NULL
        out.size = 0
        out.cap = 0
        out.arena = NULL
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(b)
        cdef Py_ssize_t n = len(b)
        if n == 0:
            return []
        try:
            with nogil:
                rc = (encode_chunk(&self.vocab, p, n, &out, &err_pos, NULL, &tuning)
                      if whole_first
                      else bpe_merge(&self.vocab, p, n, &out, &err_pos, &tuning))
            if rc == ERR_NOMEM:
                raise MemoryError()
            if rc == ERR_BYTE:
                raise ValueError(f"byte at {err_pos} is not a token")
            if rc != ERR_NONE:
                raise ValueError(f"piece of {n} bytes is too long to merge")
            return outbuf_to_list(&out, self.n_shared_ints)
        finally:
            free(out.data)

    def encode_single_piece(self, piece):
        """Ids of one piece of bytes (tiktoken's CoreBPE.encode_single_piece): its id if
        it is a token, else merged from single bytes; [] for b""."""
        return self.encode_piece(piece, True)

    def byte_pair_encode(self, piece):
        """Ids of one piece of bytes merged from single bytes, without looking the
        whole piece up first (tiktoken's byte_pair_encode; a token that merging never
        reaches stays split)."""
        return self.encode_piece(piece, False)

    def _encode_chunk_bytes(self, bytes piece):
        """Testing hook: BPE-merge one chunk of raw bytes (no pre-tokenization)."""
        return self.encode_piece(piece, True)

    def _encode_chunk_by_chars(self, bytes piece):
        """Testing hook: bpe_by_chars on one chunk of UTF-8 (no pre-tokenization, no
        whole-chunk lookup); None when that path gives up (the encoder then merges from
        bytes)."""
        self.check_ready()
        if self.vocab.char_info == NULL or not 1 <= len(piece) <= UNITS_MAX:
            return None
        cdef OutBuf out
        cdef int rc
        cdef Tuning tuning = self.knobs
        out.data = NULL
        out.size = 0
        out.cap = 0
        out.arena = NULL
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(piece)
        cdef Py_ssize_t n = len(piece)
        try:
            with nogil:
                rc = bpe_by_chars(&self.vocab, p, n, &out, NULL, &tuning)
            if rc != ERR_NONE:
                return None
            return outbuf_to_list(&out, self.n_shared_ints)
        finally:
            free(out.data)

    def _split_points(self, bytes piece):
        """Testing hook: the byte offsets inside piece (UTF-8 of 1- to 3-byte characters)
        where Corollary 4 (split) of docs/merge_rules.md may cut (no token spans them); None when
        merging by characters is off for this vocabulary or the piece does not qualify."""
        self.check_ready()
        if self.vocab.bigram_bloom == NULL:
            return None
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(piece)
        cdef Py_ssize_t n = len(piece), pos = 0, q = 0
        cdef uint32_t cp, prev = NO_RANK
        cuts = []
        while pos < n:
            cp = decode_char(p + pos, n - pos, &q)
            if cp == NO_RANK:
                return None
            if pos > 0 and no_token_spans(&self.vocab,
                                          not cross_bit(&self.vocab, p[pos - 1], p[pos]),
                                          prev, cp):
                cuts.append(pos)
            prev = cp
            pos += q
        return cuts

    def _bigram_may_join(self, a, b):
        """Testing hook: Corollary 4 (split)'s filter for the characters a, b (False: no token holds
        a followed by b)."""
        self.check_ready()
        if self.vocab.bigram_bloom == NULL:
            return None
        return bool(bigram_may_join(&self.vocab, ord(a), ord(b)))

    # ---- decoding --------------------------------------------------------------------

    cdef bytes decode_ids(self, int64_t* ids, Py_ssize_t n, object given, bint scratch):
        """Bytes of ids[0:n]; KeyError names the first unknown id as given[i], the
        sequence the ids were read from (ids out of range are -1 there). scratch: ids is
        the caller's own buffer, and the first pass replaces each id by its entry, which
        the copy then reads instead of looking it up again."""
        self.check_ready()
        cdef Py_ssize_t i, total = 0, bad = -1
        cdef int64_t e
        with nogil:
            for i in range(n):
                e = self.entry_of(ids[i])
                if e < 0:
                    bad = i
                    break
                if scratch:
                    ids[i] = e
                total += self.entry_len[e]
        if bad >= 0:
            raise KeyError(int(given[bad]))
        cdef bytes out = PyBytes_FromStringAndSize(NULL, total)
        cdef char* dst = PyBytes_AS_STRING(out)
        cdef const char* src = <const char*>self.vocab.arena
        with nogil:
            for i in range(n):
                e = ids[i] if scratch else self.entry_of(ids[i])
                memcpy(dst, src + self.entry_off[e], self.entry_len[e])
                dst += self.entry_len[e]
        return out

    cdef object decode_sequence(self, object tokens):
        """decode_ids of a list or tuple whose items are all exact ints, reading them in
        place: numpy's conversion of a list costs about 30 ns an item, which made decode
        slower than tiktoken's. None as soon as an item is anything else (then the caller
        checks the items one by one, so that the error names the culprit: a non-int
        before any unknown id, see _ids_array)."""
        cdef Py_ssize_t n = len(tokens), i
        cdef PyObject** items = PySequence_Fast_ITEMS(tokens)
        cdef int64_t* ids
        cdef long long v
        cdef int overflow = 0
        if n == 0:
            return b""
        ids = <int64_t*>malloc(n * sizeof(int64_t))
        if ids == NULL:
            raise MemoryError()
        try:
            for i in range(n):
                if not fbe_long_check_exact(items[i]):
                    return None
                v = fbe_long_as_ll(items[i], &overflow)
                ids[i] = v if overflow == 0 and 0 <= v < NO_RANK else -1
            return self.decode_ids(ids, n, tokens, True)
        finally:
            free(ids)

    cdef bytes decode_any(self, object tokens):
        if type(tokens) is list or type(tokens) is tuple:
            out = self.decode_sequence(tokens)
            if out is not None:
                return out
        cdef cnp.ndarray arr = _ids_array(tokens)
        return self.decode_ids(<int64_t*>cnp.PyArray_DATA(arr), arr.shape[0], tokens, False)

    def decode_bytes(self, tokens):
        """Bytes of a sequence of ids (list, tuple or integer numpy array); KeyError names
        the first unknown id, TypeError the first item that is not an int."""
        return self.decode_any(tokens)

    def decode_batch_bytes(self, batch, num_threads=8):
        """decode_bytes of each sequence. num_threads is checked and otherwise unused:
        decoding is a copy per token, and the time goes to reading the Python ints, which
        needs the GIL."""
        check_threads(num_threads)
        if isinstance(batch, (str, bytes)) or not hasattr(batch, "__iter__"):
            raise TypeError(f"batch must be a sequence of token sequences, not "
                            f"{type(batch).__name__}")
        return [self.decode_any(t) for t in batch]

    def decode_single_token_bytes(self, token):
        self.check_ready()
        if isinstance(token, bool) or not isinstance(token, (int, np.integer)):
            raise TypeError(f"token must be an int, not {type(token).__name__}")
        t = int(token)
        cdef int64_t e = self.entry_of(t) if 0 <= t < NO_RANK else -1
        if e < 0:
            raise KeyError(t)
        return self.arena_obj[self.entry_off[e]:self.entry_off[e] + self.entry_len[e]]

    def token_byte_values(self):
        """Bytes of every mergeable token, sorted (as tiktoken returns them)."""
        self.check_ready()
        arena = self.arena_obj
        out = []
        cdef Py_ssize_t i
        for i in range(self.n_mergeable):
            out.append(arena[self.entry_off[i]:self.entry_off[i] + self.entry_len[i]])
        out.sort()
        return out


def _compile_pattern(str pat_str):
    import regex
    try:
        return regex.compile(pat_str)
    except regex.error as exc:
        raise ValueError(f"invalid split pattern {pat_str!r}: {exc}") from None


def _native_pattern_id(str pat_str):
    """The hand-written pre-tokenizer for tiktoken's exact pattern strings, else -1.

    Only exact strings: a short name such as "gpt2" is a (silly) custom regex here, as in
    tiktoken.
    """
    from fastbpe._pretokenize import pattern_id
    from fastbpe.reference import patterns
    if pat_str in (patterns.GPT2, patterns.CL100K, patterns.O200K):
        return pattern_id(pat_str)
    return -1


cdef list _texts_list(object texts):
    """A new list of the texts (the caller's may change while the GIL is released), each
    checked to be a str."""
    if isinstance(texts, (str, bytes)) or not hasattr(texts, "__iter__"):
        raise TypeError(f"texts must be a list of str, not {type(texts).__name__}")
    cdef list out = list(texts)
    cdef Py_ssize_t i
    for i in range(len(out)):
        if not isinstance(out[i], str):
            raise TypeError(f"text {i} of the batch is {type(out[i]).__name__}, expected str")
    return out


cdef cnp.ndarray _ids_array(object tokens):
    """Token ids as a contiguous int64 array, ids out of range as -1 (unknown, like an id
    in range that is no token). TypeError names the first item that is not an int; only
    when all are ints does decoding report an unknown id (KeyError): one order for both
    cores, whatever the items' positions."""
    if isinstance(tokens, np.ndarray):
        arr = tokens
        if arr.dtype.kind not in "iu":
            raise TypeError(f"token ids must be integers, got an array of {arr.dtype}")
        if arr.ndim != 1:
            raise ValueError(f"token ids must be a 1-D array, got shape {arr.shape}")
        if arr.dtype == np.uint64 and arr.size and arr.max() > np.iinfo(np.int64).max:
            arr = np.where(arr > np.iinfo(np.int64).max, np.uint64(NO_RANK), arr)
        return np.ascontiguousarray(arr, dtype=np.int64)
    if not isinstance(tokens, (list, tuple)):
        raise TypeError(f"tokens must be a list, tuple or numpy array of ints, not "
                        f"{type(tokens).__name__}")
    # Lists and tuples of exact ints take CoreBPE.decode_sequence; what comes here has
    # other items (numpy ints, bools, anything): check one by one so that the error
    # names the culprit (numpy's conversion would take True as 1).
    out = np.empty(len(tokens), dtype=np.int64)
    for i, t in enumerate(tokens):
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise TypeError(f"token ids must be ints, got {t!r} at index {i}")
        out[i] = t if 0 <= t < NO_RANK else -1     # unknown ids are reported after
    return out


cdef cnp.ndarray _regex_spans(object pat, str text, const unsigned char* utf8, Py_ssize_t n,
                              const SpecialSet* ss):
    """Chunk spans (UTF-8 byte offsets, flattened start/end pairs) from the regex module.

    Like tiktoken, the pattern runs on each segment between allowed special tokens
    separately, so ``$`` and lookaheads stop at a special token.
    """
    cdef Py_ssize_t pos = 0, s = 0, e = 0, cs, ce
    cdef uint32_t tok
    cdef bint found
    ascii = text.isascii()
    if not ascii:
        cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        widths = (1 + (cps >= 0x80).astype(np.int64) + (cps >= 0x800) + (cps >= 0x10000))
        byte_of_cp = np.zeros(len(cps) + 1, dtype=np.int64)
        np.cumsum(widths, out=byte_of_cp[1:])
    pieces = []
    while True:
        found = find_special(ss, utf8, pos, n, &s, &e, &tok)
        seg_end = s if found else n
        if seg_end > pos:
            if ascii:
                cs, ce = pos, seg_end
            else:
                cs = int(np.searchsorted(byte_of_cp, pos))
                ce = int(np.searchsorted(byte_of_cp, seg_end))
            segment = text[cs:ce]
            spans = [m.span() for m in pat.finditer(segment)]
            if spans:
                arr = np.array(spans, dtype=np.int64).reshape(-1) + cs
                if not ascii:
                    arr = byte_of_cp[arr]
                pieces.append(arr)
        if not found:
            break
        pos = e
    if not pieces:
        return np.zeros(0, dtype=np.int64)
    return np.ascontiguousarray(np.concatenate(pieces), dtype=np.int64)
