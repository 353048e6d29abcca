"""Jobs: one text (or one piece of a long text) each, encoded without the GIL, possibly
on a worker thread of ``fastbpe._runner``.

A job's text is UTF-8, or the str's own PEP 393 buffer, converted on the worker thread
(converting many texts under the GIL would serialize a batch). It is pre-tokenized by
the hand-written splitters of ``fastbpe._pretokenize`` (or given as regex spans), its
allowed special tokens are found by ``fastbpe._specials``, and each chunk goes to
``bpe_chunk``. Long texts of a batch are cut into pieces where every built-in pattern
splits anyway (``next_cut``), so that a few long texts share the threads as evenly as
many short ones and their lists are built while the rest encodes. A job is prepared
(``job_prepare``) and its error turned into an exception (``job_raise``) under the GIL,
by the caller.
"""
from libc.stdint cimport int64_t, uint8_t

from fastbpe._chunk_cache cimport CacheEntry
from fastbpe._out cimport OutArena, OutBuf
from fastbpe._runner cimport Runner
from fastbpe._seed_table cimport SeedTable
from fastbpe._specials cimport SpecialSet
from fastbpe._tuning cimport Tuning
from fastbpe._vocab cimport Vocab


cdef struct Job:
    const unsigned char* text # UTF-8; NULL until the worker converts src
    Py_ssize_t n
    const void* src           # the str's own PEP 393 buffer (when text is NULL)
    int src_kind              # 1, 2 or 4 bytes per code point
    Py_ssize_t src_len        # in code points
    unsigned char* owned      # UTF-8 buffer this job allocated (freed by the caller)
    const int64_t* spans      # regex path: chunk [start, end) byte pairs; NULL otherwise
    Py_ssize_t n_spans
    OutBuf out
    int err
    Py_ssize_t err_pos        # byte offset in text for ERR_BYTE
    bint no_check             # the disallowed check is not this job's: its text is a
                              # surrogate fix-up (the caller checks the text as given),
                              # or the caller has checked it already
    bint check_utf8           # text is bytes from a caller, not yet known to be UTF-8:
                              # run_job checks them first (ERR_UTF8), so that the check
                              # of a long buffer runs on every thread, piece by piece


cdef struct Context:
    const Vocab* vocab
    const Tuning* tuning
    const SpecialSet* specials
    const SpecialSet* disallowed  # no text may hold one of these (NULL: no check)
    int pattern               # native pre-tokenizer id, or -1 when spans are given
    Job* jobs
    void** cache_pool         # the encoder's chunk caches (see new_chunk_cache)
    const SeedTable* seeds    # the encoder's seeded table, for the block loop (NULL: none)
    OutArena* arenas          # per thread slot: where its jobs' ids go (see OutArena)
    # Last: the caller writes its lock, cond and waiting flag while workers run; in front
    # of the fields above they shared a cache line with what every chunk reads (measured:
    # 2-thread batches 6-11% slower).
    Runner runner             # its payload is this Context (context_bind)


cdef void context_bind(Context* ctx) noexcept nogil
    # Point ctx.runner at this Context's jobs (set every other field, and
    # runner.n_jobs, yourself).
cdef void run_job(const Context* ctx, Job* job, CacheEntry* cache,
                  OutArena* arena) noexcept nogil
    # Encode one job; its output comes from arena (NULL: malloc).
cdef Py_ssize_t cut_job(Job* jobs, Py_ssize_t target) noexcept nogil
cdef void job_free(Job* job) noexcept nogil
cdef bint pieces_failed(const Job* jobs, Py_ssize_t a, Py_ssize_t b) noexcept nogil
cdef int job_prepare(Job* job, object text, int pattern, object regex_pat,
                     const SpecialSet* specials, list keep) except -1
    # Point a job at the str text (the objects it needs alive go to keep): at its PEP 393
    # buffer when pattern >= 0 (a native pre-tokenizer), else at its UTF-8 (tiktoken's
    # surrogate fix-up first, if it has a lone one) with regex_pat's chunk spans,
    # found between the allowed special tokens.
cdef Py_ssize_t utf8_invalid_at(const uint8_t* t, Py_ssize_t n) noexcept nogil
    # Offset of the first byte that makes t[:n] invalid UTF-8 as CPython's strict
    # decoder sees it, or -1 (8 ASCII bytes per step).
cdef void job_prepare_utf8(Job* job, const unsigned char* text, Py_ssize_t n,
                           bint check) noexcept nogil
    # Point a job at n bytes of UTF-8 that the caller keeps alive (native pre-tokenizers
    # only); check: they may be invalid, and run_job checks them (Job.check_utf8).
cdef int raise_not_utf8(const uint8_t* t, Py_ssize_t n) except -1
    # ValueError naming the first invalid byte of t[:n] and its offset (t[:n] must be
    # invalid): the one message for bytes that are not UTF-8.
cdef int job_raise(const Job* job) except -1
    # The exception of a failed job's error (after the caller has handled
    # ERR_DISALLOWED and ERR_SURROGATE): MemoryError or ValueError; 0 if none.


cdef inline Py_ssize_t job_points(const Job* job) noexcept nogil:
    """A prepared job's length in code points."""
    return job.src_len if job.src != NULL else job.n
