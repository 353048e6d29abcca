"""Native byte-level BPE encoder: ``CoreBPE``, the core behind ``fastbpe.Encoding``.

``CoreBPE`` mirrors tiktoken's Rust ``CoreBPE``: the same constructor arguments, the
same ids for every input, and the same merge rule (repeatedly merge the adjacent pair
whose concatenated bytes have the lowest rank, leftmost on ties). Policy (special-token
checks, argument defaults) lives in the Python ``Encoding``; this class converts inputs
once, releases the GIL, and hands the work to the kernels, one idea per module:

- ``_vocab``: the vocabulary tables (byte string -> rank), and the checks of a
  vocabulary given; ``_decode``: id -> bytes, and the decode loops;
- ``_chunk_block``: the chunk loop of native patterns in two phases (split, key and
  prefetch a block of chunks, then encode them); ``_seed_table``: the encoder's table of
  short tokens and chunks seen, bounded, that the block loop asks first;
- ``_chunk``: one pre-tokenized chunk (fast paths, then ``_chunk_cache``, then a merge:
  ``_merge`` picks ``_merge_scan``, ``_merge_heap`` or ``_merge_buckets``;
  ``_merge_chars`` merges CJK-like chunks by characters, see docs/merge_rules.md);
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
# surrogate calls it, under the GIL. check_num_threads: the one rule for num_threads.
from fastbpe.checks import check_num_threads
from fastbpe.reference.core import DisallowedSpecial, fix_surrogates, holds_any

import numpy as np
cimport numpy as cnp

from libc.stdint cimport int64_t, uint32_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy

from fastbpe._batch cimport run_streaming, to_array, to_numpy
from fastbpe._chunk cimport piece_ids
from fastbpe._chunk_cache cimport CACHE_POOL, CacheEntry
from fastbpe._common cimport ERR_DISALLOWED, ERR_NONE, ERR_SURROGATE, ERR_UTF8, NO_RANK
from fastbpe._decode cimport (DecodeTable, decode_build, decode_clear, decode_entry,
                              decode_exact_ints, decode_free, decode_ids, entries_sorted,
                              entry_bytes)
from fastbpe._idlists cimport collect_young_if_due, outbuf_to_list, shared_id_ints, track_lists
from fastbpe._jobs cimport (Context, Job, context_bind, cut_job, job_free, job_prepare,
                            job_points, job_prepare_utf8,
                            job_raise, pieces_failed, raise_not_utf8, run_job)
from fastbpe._merge_chars cimport bigram_filter, chars_ids, split_points
from fastbpe._out cimport OutArena, arena_release
from fastbpe._runner cimport batch_threads, run_jobs
from fastbpe._seed_table cimport (SEED_WAYS, SeedTable, seed_table_build, seed_table_free,
                                  seed_table_put)
from fastbpe._specials cimport (NeedleSet, SpecialSet, needle_set_cached, special_set_fill,
                                specials_hold_newline)
from fastbpe._tuning cimport Tuning, tuning_default, tuning_fields, tuning_update
from fastbpe._vocab cimport Vocab, vocab_build, vocab_clear, vocab_free, vocab_rank

# Testing hooks of the kernel modules, re-exported where the tests look for them.
from fastbpe._chunk_cache import _equal_short
from fastbpe._idlists import _IMMORTAL_REFCNT, _set_id_int_top_up, _shared_int_address
from fastbpe._jobs import _cut_points
from fastbpe._pretokenize import cuts_hold as _cuts_hold
from fastbpe._jobs import _utf8_of as _jobs_utf8_of
from fastbpe._out import _output_pool_bytes
from fastbpe._runner import MAX_THREADS, _batch_threads
from fastbpe._specials import _find_pair
from fastbpe._tuning import default_tuning
from fastbpe._vocab import check_lengths, check_packed, pack_ranks, ranks_are_plain

cnp.import_array()

cdef extern from "Python.h":
    char* PyBytes_AS_STRING(object b)
    object PyBytes_FromStringAndSize(const char* s, Py_ssize_t n)
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)

cdef extern from "fbe_atomic.h" nogil:
    void* fbe_slot_take(void** slots, int n) noexcept

cdef enum Result:
    # What CoreBPE.run returns.
    LISTS = 0                 # a list of ids per text (batch calls)
    ONE_LIST = 1              # the list of ids of its only text (single-text calls)
    ARRAYS = 2                # (flat ids, offsets) as numpy arrays
    ONE_ARRAY = 3             # the ids of its only text as a numpy array

# The two dtypes the core writes; check_dtype answers the default by identity (np.dtype()
# and a dtype comparison cost about 0.5 us, a tenth of a ~2 KB document's encode).
cdef object _U32 = np.dtype(np.uint32)
cdef object _U16 = np.dtype(np.uint16)

def _utf8_of(str text):
    """Testing hook: the UTF-8 conversion that workers run on a str, as bytes (with the
    default tuning's utf8_simd; ``fastbpe._jobs._utf8_of`` takes it as an argument)."""
    return _jobs_utf8_of(text, tuning_default().utf8_simd)


# --------------------------------------------------------------------------------------
# Python-facing helpers
# --------------------------------------------------------------------------------------

cdef inline int thread_count(object num_threads) except -1:
    """num_threads checked by ``fastbpe.checks.check_num_threads`` (the one rule and
    message, for callers of the core itself; ``Encoding`` has checked it already), as a
    C int. What protects memory is native and separate: the runners clamp to the
    MAX_THREADS_C thread ids their arrays hold (run_jobs, run_streaming)."""
    return check_num_threads(num_threads)


cdef object check_str(object text):
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    return text


def _rebuild_core(bytes arena, bytes lengths, bytes ids, dict special_tokens, pat_str,
                  Py_ssize_t n_encoded=-1):
    """Unpickle a CoreBPE from its packed vocabulary (see ``CoreBPE.__reduce__``)."""
    cdef CoreBPE core = CoreBPE.__new__(CoreBPE)
    core._init_packed(arena, np.frombuffer(lengths, dtype=np.uint32),
                      np.frombuffer(ids, dtype=np.uint32), special_tokens, pat_str, n_encoded)
    return core


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
    cdef readonly object pat_str    # a str, or a tuple: HF's Isolated Splits in sequence
    cdef object regex_pat
    cdef int pattern_id             # native pre-tokenizer, or -1 for the regex module
    cdef bint may_cut               # long texts may be cut at newlines (_pretokenize.cuts_hold)
    cdef Py_ssize_t n_mergeable
    cdef Py_ssize_t n_encoded        # the first n_encoded tokens (arena order) encode; see __init__
    cdef uint32_t max_token_id
    cdef DecodeTable table          # id -> bytes (mergeable tokens, then specials)
    cdef dict special_bytes         # special text -> (offset in arena, length, id)
    cdef dict needle_sets           # frozenset -> NeedleSet (see needle_set_cached)
    cdef dict allowed_sets          # frozenset -> (SpecialSet bytes, keep) (see allowed_set)
    cdef Py_ssize_t n_shared_ints   # ids below this have a shared int (see _id_block)
    cdef void* cache_pool[CACHE_POOL]   # chunk caches kept between calls (new_chunk_cache)
    cdef Tuning knobs               # its tuning: a copy of the process default (default_tuning)
    cdef SeedTable seeds            # tokens of 3..8 bytes and chunks seen (_seed_table)

    def __cinit__(self):
        cdef int i
        self.knobs = tuning_default()
        vocab_clear(&self.vocab)
        decode_clear(&self.table)
        self.pattern_id = -1
        self.needle_sets = {}
        self.allowed_sets = {}
        self.seeds.entries = NULL
        for i in range(CACHE_POOL):
            self.cache_pool[i] = NULL

    def __dealloc__(self):
        self.free_chunk_caches()
        vocab_free(&self.vocab)
        decode_free(&self.table)
        seed_table_free(&self.seeds)

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
        cdef Py_ssize_t i
        before = tuning_fields(&self.knobs)
        tuning_update(&self.knobs, fields)
        for i in range(self.knobs.kept_chunk_caches, CACHE_POOL):   # keep no more than that
            free(fbe_slot_take(&self.cache_pool[i], 1))
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

    def __init__(self, mergeable_ranks, special_tokens, pat_str, unreachable=()):
        """``unreachable``: tokens (bytes, in ``mergeable_ranks``) that encoding never
        produces: they decode, but the encode table leaves them out, so a piece that is
        one of them is merged from its bytes (no whole-piece lookup) and no merge makes
        one. The hook of HF's ``ignore_merges: false`` on the rank rule
        (``fastbpe.bpe.hf``, whose docstring proves it exact for the tokens it passes:
        those that merging from their own bytes never reaches).

        ``pat_str`` is a split pattern (str), or a tuple of them: HF's Sequence of
        Isolated Splits (the text between matches kept), which must run as one native
        split program (``fastbpe.reference.split_program.compile_sequence``), else
        ValueError: no ``regex`` fallback splits a sequence."""
        cdef Py_ssize_t n_encoded = -1
        if unreachable:
            skip = set(unreachable)
            if not isinstance(mergeable_ranks, dict):
                raise TypeError(f"mergeable_ranks must be a dict[bytes, int], not "
                                f"{type(mergeable_ranks).__name__}")
            missing = [t for t in skip if t not in mergeable_ranks]
            if missing:
                raise ValueError(f"unreachable token {missing[0]!r} is not in mergeable_ranks")
            # arena order: the encoded tokens first, then the unreachable ones
            ordered = {t: r for t, r in mergeable_ranks.items() if t not in skip}
            n_encoded = len(ordered)
            ordered.update({t: r for t, r in mergeable_ranks.items() if t in skip})
            mergeable_ranks = ordered
        arena, lengths, ids = pack_ranks(mergeable_ranks)
        self._init_packed(arena, lengths, ids, special_tokens, pat_str, n_encoded)

    def _init_packed(self, bytes arena, lengths, ids, special_tokens, pat_str,
                     Py_ssize_t n_encoded=-1):
        if self.vocab.slots != NULL:
            raise RuntimeError("CoreBPE is immutable")
        check_packed(arena, ids, special_tokens)
        if isinstance(pat_str, tuple):
            self.regex_pat = None
            self.pattern_id = _sequence_pattern_id(pat_str)
        elif isinstance(pat_str, str):
            self.regex_pat = _compile_pattern(pat_str)
            self.pattern_id = _native_pattern_id(pat_str)
        else:
            raise TypeError(f"pat_str must be a str or a tuple of str, not {type(pat_str).__name__}")
        self.pat_str = pat_str
        self.may_cut = _cuts_hold(self.pattern_id)
        self.special_tokens = dict(special_tokens)
        cdef Py_ssize_t n = len(lengths), i
        self.n_mergeable = n
        self.n_encoded = n if n_encoded < 0 or n_encoded > n else n_encoded
        self.lengths_arr = np.ascontiguousarray(lengths, dtype=np.uint32)
        self.ids_arr = np.ascontiguousarray(ids, dtype=np.uint32)
        check_lengths(arena, self.lengths_arr)

        # Arena: mergeable tokens, then the UTF-8 bytes of each special token.
        special_items = list(self.special_tokens.items())
        special_utf8 = [s.encode("utf-8", "surrogatepass") for s, _ in special_items]
        self.arena_obj = arena + b"".join(special_utf8)
        self.vocab.arena = <const unsigned char*>PyBytes_AS_STRING(self.arena_obj)
        entry_lens = np.concatenate([self.lengths_arr, np.array([len(b) for b in special_utf8],
                                                                dtype=np.uint32)])
        entry_ids = np.concatenate([self.ids_arr.astype(np.int64),
                                    np.array([t for _, t in special_items], dtype=np.int64)])
        decode_build(&self.table, self.vocab.arena, entry_lens, entry_ids)
        self.special_bytes = {s: (self.table.entry_off[n + i], len(b), t)
                              for i, ((s, t), b) in enumerate(zip(special_items, special_utf8))}
        self.max_token_id = <uint32_t>(entry_ids.max() if self.table.n_entries else 0)
        if self.table.dense_entry != NULL:
            self.n_shared_ints = shared_id_ints(self.table.dense_size)

        # The lookup tables (fastbpe._vocab).
        cdef const uint32_t[::1] lens_v = self.lengths_arr
        cdef const uint32_t[::1] ids_v = self.ids_arr
        cdef const uint32_t* lens_p = &lens_v[0] if n else NULL
        cdef const uint32_t* ids_p = &ids_v[0] if n else NULL
        cdef int rc_tables
        with nogil:
            rc_tables = vocab_build(&self.vocab, self.n_encoded, lens_p, ids_p, self.table.entry_off)
        if rc_tables < 0:
            raise MemoryError()
        # Seeds are the tokens that encode (the first n_encoded, as vocab_build's): an
        # unreachable token seeded whole would be returned for its own bytes.
        with nogil:
            rc_tables = seed_table_build(&self.seeds, self.vocab.arena, self.n_encoded, lens_p, ids_p,
                                         self.table.entry_off, self.knobs.seed_table_kb)
        if rc_tables < 0:
            raise MemoryError()

    def _seed_table_info(self):
        """Testing hook: the seeded table's size in bytes, its entries and how many
        tokens were seeded (zeros when it was not built)."""
        cdef Py_ssize_t entries = (self.seeds.mask + 1) * SEED_WAYS if self.seeds.entries else 0
        return {"bytes": entries * 16, "entries": entries, "seeds": self.seeds.n_seeds}

    def _seed_table_put(self, bytes piece, ids):
        """Testing hook: pre-seed piece -> ids (seed_table_put with seed=True); whether
        it was stored."""
        cdef uint32_t buf[3]
        if len(ids) > 3:
            return False
        for i, t in enumerate(ids):
            buf[i] = t
        return bool(seed_table_put(&self.seeds, <const unsigned char*>PyBytes_AS_STRING(piece),
                                   len(piece), buf, len(ids), True))

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
            self.arena_obj[:self.table.entry_off[self.n_mergeable]
                           if self.n_mergeable < self.table.n_entries else len(self.arena_obj)],
            self.lengths_arr.tobytes(), self.ids_arr.tobytes(),
            dict(self.special_tokens), self.pat_str, self.n_encoded))

    # ---- encoding --------------------------------------------------------------------

    cdef int allowed_set(self, SpecialSet* ss, object allowed_special, list keep) except -1:
        """special_set_fill, kept by set: an Encoding passes the same frozenset every call
        (its added tokens, "all"), and building the set of an HF file's dozens of added
        tokens per call cost ~15% of encoding its ~2 KB documents (DeepSeek V4: 53).
        The entry goes to keep too: the items stay alive for the call even if another
        thread clears the cache."""
        if type(allowed_special) is not frozenset or not allowed_special:
            return special_set_fill(ss, self.special_bytes, self.vocab.arena, allowed_special, keep)
        entry = self.allowed_sets.get(allowed_special)
        if entry is None:
            items = []
            special_set_fill(ss, self.special_bytes, self.vocab.arena, allowed_special, items)
            entry = (PyBytes_FromStringAndSize(<const char*>ss, sizeof(SpecialSet)), items)
            if len(self.allowed_sets) >= 64:
                self.allowed_sets.clear()
            self.allowed_sets[allowed_special] = entry
        else:
            memcpy(ss, PyBytes_AS_STRING(entry[0]), sizeof(SpecialSet))
        keep.append(entry)
        return 0

    cdef int check_ready(self) except -1:
        if self.vocab.slots == NULL:
            raise RuntimeError("CoreBPE was not initialised (use CoreBPE(ranks, specials, pattern))")
        return 0

    cdef object run(self, list texts, object allowed_special, int num_threads, Result result,
                    object dtype, object disallowed_special=None,
                    const unsigned char* utf8=NULL, Py_ssize_t utf8_len=0):
        """Encode texts; returns what `result` names (LISTS, ONE_LIST, ARRAYS or
        ONE_ARRAY).

        disallowed_special: strings no text may hold, as tiktoken checks before encoding;
        the first text (in order) that holds one raises DisallowedSpecial(index).

        utf8: instead of texts ([None]), the one text is utf8[:utf8_len], bytes that
        the caller keeps alive (native pre-tokenizers only); its length and cuts are in
        bytes. They are checked to be UTF-8 by the jobs, piece by piece, on all threads
        (a cut follows an ASCII newline, so the pieces are valid iff the whole is), and
        ValueError (raise_not_utf8) comes before any other error."""
        self.check_ready()
        cdef NeedleSet needles = needle_set_cached(self.needle_sets, disallowed_special)
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
        self.allowed_set(&ss, allowed_special, keep)
        if num_threads > 1 and result != ONE_LIST:
            for t in range(n_texts):
                total += utf8_len if utf8 != NULL else len(<str>texts[t])
            num_threads = <int>batch_threads(num_threads, total, &tuning)
        if (num_threads > 1 and result != ONE_LIST and self.may_cut
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
                if utf8 != NULL:
                    job_prepare_utf8(&jobs[n_jobs], utf8, utf8_len, True)
                else:
                    job_prepare(&jobs[n_jobs], texts[t], self.pattern_id, self.regex_pat,
                                &ss, keep)
                if target and job_points(&jobs[n_jobs]) >= 2 * target:
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
            ctx.seeds = (&self.seeds if self.seeds.entries != NULL and tuning.seed_table_kb > 0
                         else NULL)
            ctx.runner.notify = False
            # 3. encode
            if result == LISTS and n_jobs > 1 and num_threads > 1:
                results = run_streaming(&ctx, num_threads, first, n_texts, self.n_shared_ints)
            else:
                results = None
                with nogil:
                    run_jobs(&ctx.runner, num_threads)
            # 4. bytes that are not UTF-8 first (as if decoded before anything else);
            #    then disallowed special tokens, text by text, as tiktoken checks every
            #    text before it encodes any. A text with lone surrogates (its job failed
            #    or was fixed up) is checked here, as given.
            if utf8 != NULL:
                for k in range(n_jobs):
                    if jobs[k].err == ERR_UTF8:
                        raise_not_utf8(utf8, utf8_len)
            if needles is not None:
                for t in range(n_texts):
                    surrogates = False    # a piece met one, or the regex path fixed it up
                    for k in range(first[t], first[t + 1]):
                        if jobs[k].err == ERR_DISALLOWED:
                            raise DisallowedSpecial(t)
                        surrogates = surrogates or jobs[k].err == ERR_SURROGATE or jobs[k].no_check
                    if surrogates and utf8 == NULL and holds_any(texts[t], needles.strings):
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
                    if utf8 != NULL:       # UTF-8, as step 4 found
                        job_prepare_utf8(&jobs[first[t]], utf8, utf8_len, False)
                    else:
                        job_prepare(&jobs[first[t]], texts[t], self.pattern_id,
                                    self.regex_pat, &ss, keep)
                    jobs[first[t]].no_check = True     # checked in step 4
                    with nogil:
                        run_job(&ctx, &jobs[first[t]], no_cache, NULL)
                i = first[t]
                if jobs[i].err == ERR_SURROGATE and utf8 == NULL:
                    # rare: redo this text after tiktoken's fix-up
                    fixed = fix_surrogates(texts[t])
                    keep.append(fixed)
                    job_free(&jobs[i])
                    job_prepare(&jobs[i], fixed, self.pattern_id, self.regex_pat, &ss, keep)
                    jobs[i].no_check = True
                    with nogil:
                        run_job(&ctx, &jobs[i], no_cache, NULL)
                job_raise(&jobs[i])
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
            if result == ONE_ARRAY:
                return to_array(jobs, n_jobs, dtype is _U16)
            return to_numpy(jobs, first, n_texts, dtype is _U16)
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
        """_U32 or _U16 (those objects: callers test them by identity)."""
        if dtype is np.uint32 or dtype is _U32:
            return _U32
        dt = np.dtype(dtype)
        if dt == _U32:
            return _U32
        if dt == _U16:
            if self.max_token_id >= 65536:
                raise ValueError(f"dtype uint16 cannot hold this vocabulary's ids (max id "
                                 f"{self.max_token_id} >= 65536); use uint32")
            return _U16
        raise ValueError(f"dtype must be uint32 or uint16, got {dt}")

    def encode_ordinary(self, text):
        """Token ids of text, with special-token text encoded as ordinary text."""
        return self.run([check_str(text)], None, 1, ONE_LIST, None)

    def encode(self, text, allowed_special, disallowed_special=frozenset()):
        """Token ids of text; occurrences of allowed special tokens become their ids.
        DisallowedSpecial(0) if text holds one of disallowed_special (strings)."""
        return self.run([check_str(text)], allowed_special, 1, ONE_LIST, None, disallowed_special)

    def encode_ordinary_batch(self, texts, num_threads=8):
        cdef int threads = thread_count(num_threads)
        return self.run(_texts_list(texts), None, threads, LISTS, None)

    def encode_batch(self, texts, allowed_special, num_threads=8,
                     disallowed_special=frozenset()):
        """encode of each text, on num_threads threads; DisallowedSpecial(i) for the
        first text i that holds one of disallowed_special."""
        cdef int threads = thread_count(num_threads)
        return self.run(_texts_list(texts), allowed_special, threads, LISTS, None,
                        disallowed_special)

    def encode_to_numpy(self, text, allowed_special=frozenset(), dtype=np.uint32,
                        disallowed_special=frozenset()):
        """Token ids as a 1-D numpy array (uint32, or uint16 when every id fits)."""
        dt = self.check_dtype(dtype)
        return self.run([check_str(text)], allowed_special, 1, ONE_ARRAY, dt, disallowed_special)

    def encode_batch_to_numpy(self, texts, allowed_special=frozenset(), num_threads=8,
                              dtype=np.uint32, disallowed_special=frozenset()):
        """(flat ids, offsets): text i is flat[offsets[i]:offsets[i + 1]]."""
        cdef int threads = thread_count(num_threads)
        dt = self.check_dtype(dtype)
        return self.run(_texts_list(texts), allowed_special, threads, ARRAYS, dt,
                        disallowed_special)

    def encode_utf8_to_numpy(self, const unsigned char[::1] data, allowed_special=frozenset(),
                             num_threads=8, dtype=np.uint32, disallowed_special=frozenset()):
        """encode_to_numpy(bytes(data).decode("utf-8"), ...) of a buffer of UTF-8 bytes,
        without a str: on num_threads threads, the text cut as a batch cuts a long text.
        ValueError naming the byte offset if data is not valid (strict) UTF-8."""
        cdef int threads = thread_count(num_threads)
        dt = self.check_dtype(dtype)
        cdef Py_ssize_t n = data.shape[0]
        cdef const unsigned char* t = &data[0] if n else NULL
        if n == 0:
            return self.run([""], allowed_special, 1, ONE_ARRAY, dt, disallowed_special)
        if self.pattern_id < 0:     # the regex path splits a str
            text = None
            try:
                text = PyUnicode_DecodeUTF8(<const char*>t, n, NULL)
            except UnicodeDecodeError:
                pass
            if text is None:        # our message, not the decoder's
                raise_not_utf8(t, n)
            return self.run([text], allowed_special, 1, ONE_ARRAY, dt, disallowed_special)
        return self.run([None], allowed_special, threads, ONE_ARRAY, dt, disallowed_special,
                        t, n)

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
        return piece_ids(&self.vocab, <bytes>piece, whole_first, &self.knobs, self.n_shared_ints)

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
        self.check_ready()
        return piece_ids(&self.vocab, piece, True, &self.knobs, self.n_shared_ints)

    def _encode_chunk_by_chars(self, bytes piece):
        """Testing hook: bpe_by_chars on one chunk of UTF-8 (no pre-tokenization, no
        whole-chunk lookup); None when that path gives up (the encoder then merges from
        bytes)."""
        self.check_ready()
        return chars_ids(&self.vocab, piece, &self.knobs, self.n_shared_ints)

    def _split_points(self, bytes piece):
        """Testing hook: the byte offsets inside piece (UTF-8 of 1- to 3-byte characters)
        where Corollary 4 (split) of docs/merge_rules.md may cut (no token spans them); None when
        merging by characters is off for this vocabulary or the piece does not qualify."""
        self.check_ready()
        return split_points(&self.vocab, piece)

    def _bigram_may_join(self, a, b):
        """Testing hook: Corollary 4 (split)'s filter for the characters a, b (False: no token holds
        a followed by b)."""
        self.check_ready()
        return bigram_filter(&self.vocab, a, b)

    # ---- decoding --------------------------------------------------------------------

    cdef bytes decode_any(self, object tokens):
        """A list or tuple of exact ints is read in place (decode_exact_ints); anything
        else, or one with another item, goes through _ids_array, which names the first
        item that is not an int (before any unknown id, and before check_ready)."""
        if type(tokens) is list or type(tokens) is tuple:
            if not tokens:
                return b""
            if self.vocab.slots != NULL:
                out = decode_exact_ints(&self.table, tokens)
                if out is not None:
                    return out
        cdef cnp.ndarray arr = _ids_array(tokens)
        self.check_ready()
        return decode_ids(&self.table, <int64_t*>cnp.PyArray_DATA(arr), arr.shape[0], tokens,
                          False)

    def decode_bytes(self, tokens):
        """Bytes of a sequence of ids (list, tuple or integer numpy array); KeyError names
        the first unknown id, TypeError the first item that is not an int."""
        return self.decode_any(tokens)

    def decode_batch_bytes(self, batch, num_threads=8):
        """decode_bytes of each sequence. num_threads is checked and otherwise unused:
        decoding is a copy per token, and the time goes to reading the Python ints, which
        needs the GIL."""
        thread_count(num_threads)
        if isinstance(batch, (str, bytes)) or not hasattr(batch, "__iter__"):
            raise TypeError(f"batch must be a sequence of token sequences, not "
                            f"{type(batch).__name__}")
        return [self.decode_any(t) for t in batch]

    def decode_single_token_bytes(self, token):
        self.check_ready()
        if isinstance(token, bool) or not isinstance(token, (int, np.integer)):
            raise TypeError(f"token must be an int, not {type(token).__name__}")
        t = int(token)
        cdef int64_t e = decode_entry(&self.table, t) if 0 <= t < NO_RANK else -1
        if e < 0:
            raise KeyError(t)
        return entry_bytes(&self.table, e)

    def token_byte_values(self):
        """Bytes of every mergeable token, sorted (as tiktoken returns them)."""
        self.check_ready()
        return entries_sorted(&self.table, self.n_mergeable)


def _compile_pattern(str pat_str):
    import regex
    try:
        return regex.compile(pat_str)
    except regex.error as exc:
        raise ValueError(f"invalid split pattern {pat_str!r}: {exc}") from None


def _sequence_pattern_id(tuple patterns):
    """The split program of a sequence of Isolated Splits; ValueError naming the
    patterns when there is none (a sequence has no ``regex`` fallback here)."""
    from fastbpe._pretokenize import pattern_id
    if not patterns or not all(isinstance(p, str) for p in patterns):
        raise TypeError("a sequence of split patterns must be a non-empty tuple of str")
    for p in patterns:
        _compile_pattern(p)
    pid = pattern_id(patterns)
    if pid < 0:
        raise ValueError(f"the split sequence {patterns!r} does not compile to a native split "
                         "program (fastbpe.reference.split_program.compile_sequence says why)")
    return pid


def _native_pattern_id(str pat_str):
    """The native pre-tokenizer of a pattern string, else -1 (the regex module).

    tiktoken's exact pattern strings (and cl100k's with one digit a chunk, Qwen's after
    its cut) have hand-written splitters; any other pattern that
    fastbpe.reference.split_program compiles (and that matches every character, as
    tiktoken drops what it does not match) runs as a split program. Only exact strings:
    a short name such as "gpt2" is a (silly) custom regex here, as in tiktoken.
    """
    from fastbpe._pretokenize import SPLIT_PROGRAM, pattern_id
    from fastbpe.reference import patterns
    if pat_str in (patterns.GPT2, patterns.CL100K, patterns.O200K, patterns.CL100K_DIGIT1):
        return pattern_id(pat_str)
    pid = pattern_id(pat_str)
    return pid if pid >= SPLIT_PROGRAM else -1


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
    # Lists and tuples of exact ints take decode_exact_ints; what comes here has
    # other items (numpy ints, bools, anything): check one by one so that the error
    # names the culprit (numpy's conversion would take True as 1).
    out = np.empty(len(tokens), dtype=np.int64)
    for i, t in enumerate(tokens):
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise TypeError(f"token ids must be ints, got {t!r} at index {i}")
        out[i] = t if 0 <= t < NO_RANK else -1     # unknown ids are reported after
    return out
