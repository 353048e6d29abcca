"""A batch's results, built while it encodes: Python lists of ids streamed out of the
pthread runner as jobs finish (``run_streaming``), or one flat numpy array with offsets
(``to_numpy``). ``CoreBPE.run`` prepares the jobs and maps errors; this is what runs
between. The calling thread holds the GIL only to build lists; every other step is
``nogil``."""
cimport numpy as cnp

from libc.stdint cimport int64_t, uint16_t, uint32_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy

from fastbpe._chunk_cache cimport CacheEntry, new_chunk_cache, return_chunk_cache
from fastbpe._common cimport ERR_NONE
from fastbpe._idlists cimport _gc_untrack, _new_list, list_extend_ids, list_trim
from fastbpe._jobs cimport Context, Job, job_points, run_job
from fastbpe._out cimport out_free
from fastbpe._runner cimport (MANY_JOBS, MAX_BLOCKS, MAX_THREADS_C, WorkerArg, claim_job,
                              deal_blocks, finished_runs, mark_done, pthread_cond_destroy,
                              pthread_cond_init, pthread_join, pthread_mutex_destroy,
                              pthread_mutex_init, pthread_t, start_workers)

cnp.import_array()

cdef enum:
    LIST_RUN = 16             # streaming: own jobs run between two rounds of list
                              # building (see run_streaming)


cdef list run_streaming(Context* ctx, int num_threads, const Py_ssize_t* first,
                        Py_ssize_t n_texts, Py_ssize_t n_shared_ints):
    """All jobs on num_threads threads while this thread turns finished ones into
    lists; returns a list per text (None for a text with a failed job, handled by
    the caller). The GIL is released while encoding or waiting. Finished jobs are
    taken in job order within each block of jobs (deal_blocks), whichever block
    finishes first; the pieces of a cut text go into its list in text order, each
    as soon as it and the pieces before it are finished.

    Many jobs (at least 8 per thread): this thread is one of the num_threads. It
    runs list_run jobs, then builds the lists of every job finished so far, and so
    on; no thread waits for the GIL, and no extra thread competes for the cores (on
    2 cores, that made short-document batches 4-34% faster). Lists are built in
    runs, not one job at a time, because the lists of each block then get item
    arrays side by side in memory: alternating between blocks at every list, the
    caller's later freeing of them (glibc merging each freed array with its
    neighbours) took 3.5 ms instead of 2.9 for 2,000 lists. Few jobs (a handful of
    long texts): num_threads workers encode and this thread only builds lists, so
    that a long job of its own does not hold back the lists of the others."""
    cdef pthread_t tids[MAX_THREADS_C]
    cdef WorkerArg* args = NULL
    cdef Py_ssize_t built[MAX_BLOCKS]         # per block: jobs taken up to here
    cdef Py_ssize_t upto[MAX_BLOCKS]
    cdef Py_ssize_t n_jobs = ctx.runner.n_jobs, started = 0, left = n_jobs, k, b, w, t
    cdef Py_ssize_t window = max(1, n_jobs // 64)
    # memory safety: tids holds MAX_THREADS_C (callers check num_threads with
    # fastbpe.checks.check_num_threads)
    cdef Py_ssize_t want = min(<Py_ssize_t>num_threads, n_jobs, <Py_ssize_t>MAX_THREADS_C)
    cdef list results = [None] * n_texts
    cdef CacheEntry* cache = NULL
    cdef Py_ssize_t j, since_build = 0
    cdef bint main_encodes = n_jobs >= MANY_JOBS * want
    # own jobs between two rounds of list building: up to LIST_RUN with many short
    # texts, down to 1 with few jobs per thread (pieces of long texts), whose lists
    # must be built as they finish or they are all built after the last job
    cdef Py_ssize_t list_run = max(1, min(<Py_ssize_t>LIST_RUN, n_jobs // (64 * want)))
    # per job: its text, and whether this thread has taken it as finished; per text:
    # its next piece to append
    cdef Py_ssize_t* text_of = <Py_ssize_t*>malloc(n_jobs * sizeof(Py_ssize_t))
    cdef Py_ssize_t* next_piece = <Py_ssize_t*>malloc(n_texts * sizeof(Py_ssize_t))
    cdef char* taken = <char*>calloc(n_jobs, 1)
    ctx.runner.done = <char*>calloc(n_jobs, 1)
    if text_of == NULL or next_piece == NULL or taken == NULL or ctx.runner.done == NULL:
        free(text_of)
        free(next_piece)
        free(taken)
        free(ctx.runner.done)
        ctx.runner.done = NULL
        raise MemoryError()
    for t in range(n_texts):
        next_piece[t] = first[t]
        for k in range(first[t], first[t + 1]):
            text_of[k] = t
    pthread_mutex_init(&ctx.runner.lock, NULL)
    pthread_cond_init(&ctx.runner.cond, NULL)
    ctx.runner.notify = True
    ctx.runner.waiting = 0
    deal_blocks(&ctx.runner, want)       # many jobs: a block per thread, this one's first
    for b in range(ctx.runner.n_blocks):
        built[b] = ctx.runner.block_start[b]
    try:
        with nogil:
            args = <WorkerArg*>malloc(want * sizeof(WorkerArg))
            if args != NULL:
                started = (start_workers(&ctx.runner, want - 1, 1, tids, args) if main_encodes
                           else start_workers(&ctx.runner, want, 0, tids, args))
            if started == 0:
                main_encodes = True    # no thread could start: all work is here
        if main_encodes:
            cache = new_chunk_cache(ctx.cache_pool)
        try:
            while left > 0:
                with nogil:
                    j = claim_job(&ctx.runner, 0) if main_encodes else n_jobs
                    if j < n_jobs:
                        run_job(ctx, &ctx.jobs[j], cache, &ctx.arenas[0])
                        mark_done(&ctx.runner, j)
                        since_build += 1
                        if since_build >= list_run:
                            since_build = 0
                            finished_runs(&ctx.runner, built, upto, -1, -1)
                        else:
                            for b in range(ctx.runner.n_blocks):
                                upto[b] = built[b]
                    else:
                        # nothing left to take: wait for a stretch of the first
                        # block that still has jobs to take
                        b = 0
                        while built[b] == ctx.runner.block_end[b]:
                            b += 1
                        w = min(built[b] + window, ctx.runner.block_end[b]) - 1
                        finished_runs(&ctx.runner, built, upto, built[b], w)
                for b in range(ctx.runner.n_blocks):
                    for k in range(built[b], upto[b]):
                        taken[k] = 1
                        append_pieces(ctx.jobs, first, text_of[k], next_piece,
                                      taken, results, n_shared_ints)
                    left -= upto[b] - built[b]
                    built[b] = upto[b]
        finally:
            # even on an exception (MemoryError) the threads must end before the
            # jobs they use are freed
            with nogil:
                for k in range(started):
                    pthread_join(tids[k], NULL)
    finally:
        ctx.runner.notify = False
        pthread_cond_destroy(&ctx.runner.cond)
        pthread_mutex_destroy(&ctx.runner.lock)
        free(ctx.runner.done)
        ctx.runner.done = NULL
        free(text_of)
        free(next_piece)
        free(taken)
        return_chunk_cache(ctx.cache_pool, cache, ctx.tuning.kept_chunk_caches)
        free(args)
    return results


cdef int append_pieces(Job* jobs, const Py_ssize_t* first, Py_ssize_t t,
                       Py_ssize_t* next_piece, const char* taken, list results,
                       Py_ssize_t n_shared_ints) except -1:
    """Streaming mode: append to text t's list its finished pieces from next_piece[t]
    on, in order, freeing their ids. A failed piece leaves results[t] None (the
    caller redoes the text) and stops the text."""
    cdef Py_ssize_t k = next_piece[t], end = first[t + 1], size
    cdef Py_ssize_t done_points = 0, all_points = 0, i
    cdef list lst
    while k < end and taken[k]:
        if jobs[k].err != ERR_NONE:
            results[t] = None
            next_piece[t] = end
            return 0
        lst = results[t]
        if lst is None:
            lst = _new_list(0)
            _gc_untrack(lst)
            results[t] = lst
        # a cut text's list is sized by the share of its code points encoded so far
        # (and trimmed after the last piece): growing piece by piece would copy it
        size = len(lst) + jobs[k].out.size
        if k + 1 < end:
            if all_points == 0:
                for i in range(first[t], end):
                    all_points += job_points(&jobs[i])
                for i in range(first[t], k + 1):
                    done_points += job_points(&jobs[i])
            else:
                done_points += job_points(&jobs[k])
            size = <Py_ssize_t>(<double>size * all_points / max(done_points, 1) * 1.0625)
        list_extend_ids(lst, &jobs[k].out, n_shared_ints, size)
        out_free(&jobs[k].out)
        k += 1
    next_piece[t] = k
    if k == end and results[t] is not None:
        list_trim(results[t])
    return 0


cdef object to_numpy(Job* jobs, const Py_ssize_t* first, Py_ssize_t n_texts, bint u16):
    cdef cnp.npy_intp n_off = n_texts + 1
    cdef cnp.ndarray offsets = cnp.PyArray_EMPTY(1, &n_off, cnp.NPY_INT64, 0)
    cdef int64_t* off = <int64_t*>cnp.PyArray_DATA(offsets)
    cdef Py_ssize_t total = 0, i, j
    off[0] = 0
    for i in range(n_texts):
        for j in range(first[i], first[i + 1]):
            total += jobs[j].out.size
        off[i + 1] = total
    return to_array(jobs, first[n_texts], u16), offsets


cdef object to_array(Job* jobs, Py_ssize_t n_jobs, bint u16):
    # The C API directly: np.empty and typed memoryviews cost about 1 us per call,
    # which is a fifth of a ~2 KB document's encode_to_numpy.
    cdef cnp.npy_intp total = 0
    cdef Py_ssize_t i, j, pos = 0
    for i in range(n_jobs):
        total += jobs[i].out.size
    cdef cnp.ndarray flat = cnp.PyArray_EMPTY(1, &total, cnp.NPY_UINT16 if u16 else cnp.NPY_UINT32, 0)
    cdef uint32_t* f32 = <uint32_t*>cnp.PyArray_DATA(flat)
    cdef uint16_t* f16 = <uint16_t*>f32
    with nogil:
        for i in range(n_jobs):
            if u16:
                for j in range(jobs[i].out.size):
                    f16[pos + j] = <uint16_t>jobs[i].out.data[j]
            elif jobs[i].out.size:
                memcpy(f32 + pos, jobs[i].out.data, jobs[i].out.size * sizeof(uint32_t))
            pos += jobs[i].out.size
    return flat
