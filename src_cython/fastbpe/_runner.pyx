"""The batch runner (see ``_runner.pxd``): shared by every native encoder."""
import os as _os

from libc.stdlib cimport free, malloc

from fastbpe._tuning cimport tuning_default

cdef extern from "<pthread.h>" nogil:
    int pthread_mutex_lock(pthread_mutex_t* m)
    int pthread_mutex_unlock(pthread_mutex_t* m)
    int pthread_cond_wait(pthread_cond_t* c, pthread_mutex_t* m)
    int pthread_cond_signal(pthread_cond_t* c)
    int pthread_create(pthread_t* thread, const void* attr,
                       void* (*start)(void*) noexcept nogil, void* arg)

cdef extern from "fbe_atomic.h" nogil:
    Py_ssize_t fbe_atomic_next(Py_ssize_t* counter) noexcept
    Py_ssize_t fbe_atomic_load(Py_ssize_t* counter) noexcept
    void fbe_flag_store(char* flag, char v) noexcept
    char fbe_flag_load(const char* flag) noexcept

MAX_THREADS = MAX_THREADS_C


cdef void deal_blocks(Runner* r, Py_ssize_t threads) noexcept nogil:
    """Many jobs (MANY_JOBS per thread or more): cut them into one contiguous block per
    thread (up to MAX_BLOCKS), thread slot t starting on block t % n_blocks. Few: one
    block that all threads share.

    Why blocks: each thread has its own chunk cache, and neighbouring texts of a batch
    share words (documents cut from one file, pages of one book). Dealt one by one,
    both threads meet those words and both merge them; dealt in halves, one does.
    Measured on ~2 KB documents, single thread: the even and the odd documents encoded
    as two calls cost 1.04-1.10x one call over all of them, the first and the second
    half 0.98-1.06x. Why not with few jobs: blocks of one or two long texts cannot even
    out their lengths (4 long Turkish documents on 2 threads: 12.4-13.7 ms shared,
    13.8-15.1 ms in blocks)."""
    cdef Py_ssize_t b, n_blocks = 1
    if r.n_jobs >= MANY_JOBS * threads:
        n_blocks = min(threads, <Py_ssize_t>MAX_BLOCKS)
    r.n_blocks = n_blocks
    for b in range(n_blocks):
        r.block_start[b] = r.n_jobs * b // n_blocks
        r.block_end[b] = r.n_jobs * (b + 1) // n_blocks
        r.block_next[b * CURSOR_STRIDE] = r.block_start[b]


cdef Py_ssize_t claim_job(Runner* r, Py_ssize_t slot) noexcept nogil:
    """The next job for the thread in `slot`: from its own block while that lasts, then
    from the others (so no thread idles while jobs remain); n_jobs when none is left."""
    cdef Py_ssize_t k, b, j
    for k in range(r.n_blocks):
        b = (slot + k) % r.n_blocks
        # a block whose cursor is past its end is skipped without an atomic add
        if fbe_atomic_load(&r.block_next[b * CURSOR_STRIDE]) < r.block_end[b]:
            j = fbe_atomic_next(&r.block_next[b * CURSOR_STRIDE])
            if j < r.block_end[b]:
                return j
    return r.n_jobs


cdef void mark_done(Runner* r, Py_ssize_t j) noexcept nogil:
    """Streaming mode: flag job j finished, waking the caller if it waits for j.

    Without a lock while the caller is awake: a lock taken at every job moved its cache
    line between the cores 2,000 times a call. The flag is stored before `waiting` is
    read, and the caller stores `waiting` before it reads the flags (all sequentially
    consistent), so either this thread sees the caller waiting or the caller sees the
    job done. The signal is sent under the lock, which the caller holds until it
    sleeps, so it cannot come between the caller's last look and its sleep."""
    fbe_flag_store(&r.done[j], 1)
    if fbe_flag_load(&r.waiting):
        pthread_mutex_lock(&r.lock)
        if r.waiting and (j == r.wait_first or j == r.wait_last):
            pthread_cond_signal(&r.cond)
        pthread_mutex_unlock(&r.lock)


cdef void* worker_main(void* arg) noexcept nogil:
    cdef Runner* r = (<WorkerArg*>arg).r
    cdef Py_ssize_t slot = (<WorkerArg*>arg).slot
    cdef Py_ssize_t i
    cdef void* state = r.begin(r.payload) if r.begin != NULL else NULL
    while True:
        i = claim_job(r, slot)
        if i >= r.n_jobs:
            break
        r.run(r.payload, i, slot, state)
        if r.notify:
            mark_done(r, i)
    if r.end != NULL:
        r.end(r.payload, state)
    return NULL


cdef Py_ssize_t start_workers(Runner* r, Py_ssize_t count, Py_ssize_t first_slot,
                              pthread_t* tids, WorkerArg* args) noexcept nogil:
    """Start up to count worker threads in slots first_slot, first_slot + 1, ...;
    returns how many started."""
    cdef Py_ssize_t started = 0, t
    for t in range(count):
        args[started].r = r
        args[started].slot = first_slot + started
        if pthread_create(&tids[started], NULL, worker_main, &args[started]) == 0:
            started += 1
    return started


cdef void finished_runs(Runner* r, const Py_ssize_t* built, Py_ssize_t* upto,
                        Py_ssize_t wait_first, Py_ssize_t wait_last) noexcept nogil:
    """Streaming mode: upto[b] = end of the run of finished jobs from built[b] in each
    block b. With wait_first >= 0, first block until jobs wait_first and wait_last are
    both finished: waiting for a stretch of jobs, not each one, keeps the number of
    wake-ups (and GIL hand-overs) small."""
    cdef Py_ssize_t b, i
    if wait_first >= 0:
        pthread_mutex_lock(&r.lock)
        r.wait_first = wait_first
        r.wait_last = wait_last
        fbe_flag_store(&r.waiting, 1)
        while not (fbe_flag_load(&r.done[wait_first]) and fbe_flag_load(&r.done[wait_last])):
            pthread_cond_wait(&r.cond, &r.lock)
        fbe_flag_store(&r.waiting, 0)
        pthread_mutex_unlock(&r.lock)
    for b in range(r.n_blocks):
        i = built[b]
        while i < r.block_end[b] and fbe_flag_load(&r.done[i]):
            i += 1
        upto[b] = i


cdef void run_jobs(Runner* r, int num_threads) noexcept nogil:
    """Run every job on up to num_threads threads (the caller is one of them).

    Threads are created for this call and joined before returning: no pool outlives the
    call, so a process forked afterwards inherits no threads in a half-known state.
    """
    cdef pthread_t tids[MAX_THREADS_C]
    cdef WorkerArg* args
    cdef WorkerArg mine
    cdef Py_ssize_t started = 0, t
    cdef Py_ssize_t want = num_threads
    if want > r.n_jobs:
        want = r.n_jobs
    if want > MAX_THREADS_C:     # memory safety: tids holds MAX_THREADS_C (callers check
        want = MAX_THREADS_C     # num_threads with fastbpe.checks.check_num_threads)
    if want < 1:
        want = 1
    deal_blocks(r, want)
    args = <WorkerArg*>malloc(want * sizeof(WorkerArg))   # NULL: this thread does all
    if args != NULL:
        started = start_workers(r, want - 1, 1, tids, args)
    mine.r = r
    mine.slot = 0
    worker_main(&mine)
    for t in range(started):
        pthread_join(tids[t], NULL)
    free(args)


# A batch call runs on at most one thread per Tuning.points_per_thread code points of
# text, and (Tuning.cap_to_cpus) on no more threads than the CPUs this process may run on. Starting
# a thread and waking a core costs 20-50 us on the 2-core VMs we measure on, so a
# thread must get a few hundred microseconds of work to pay for itself. Measured
# before this rule (o200k, English, ~2 KB documents, warm caches, best of 200): 8
# documents took 34 us on one thread, 95 on 2 and 247 on 8; 32 documents 151 us on one
# thread and 120 on 2. Threads past the CPU count only take turns: 128 documents took
# 588 us on 2 threads and 757 on 8, on 2 CPUs. With it, num_threads=8 took 34, 117 and
# 600 us. Tests run with the rule off (tests/conftest.py), to reach the threaded paths.


cdef Py_ssize_t usable_cpus():
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(_os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, _os.cpu_count() or 1)


cdef Py_ssize_t batch_threads(Py_ssize_t num_threads, Py_ssize_t total_points,
                              const Tuning* tuning):
    """How many threads a batch of total_points code points runs on, given num_threads
    (see points_per_thread)."""
    cdef Py_ssize_t want = num_threads
    if want > 1 and tuning.points_per_thread > 0:
        want = min(want, max(1, total_points // tuning.points_per_thread))
    if want > 1 and tuning.cap_to_cpus:
        want = min(want, usable_cpus())
    return want


def _batch_threads(Py_ssize_t num_threads, Py_ssize_t total_points):
    """How many threads a batch of total_points code points runs on under the process
    default tuning (``default_tuning``): the rule of BPE and WordPiece batches alike."""
    cdef Tuning t = tuning_default()
    return batch_threads(num_threads, total_points, &t)
