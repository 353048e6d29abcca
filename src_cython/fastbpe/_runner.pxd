"""The batch runner: jobs run on plain pthreads started for one call and joined before it
returns, dealt in contiguous blocks, one per thread, with an optional "job j is done"
stream so that the caller can build results (under the GIL) while workers go on.

It knows nothing of what a job is: the owner fills a ``Runner`` with its payload and
three callbacks (a thread's set-up, one job, its tear-down). One indirect call per job.
No pool survives a call, so processes forked later (multiprocessing "fork") are safe.
"""
from fastbpe._tuning cimport Tuning

cdef extern from "<pthread.h>" nogil:
    ctypedef unsigned long pthread_t
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct pthread_cond_t:
        pass
    int pthread_mutex_init(pthread_mutex_t* m, const void* attr)
    int pthread_mutex_destroy(pthread_mutex_t* m)
    int pthread_cond_init(pthread_cond_t* c, const void* attr)
    int pthread_cond_destroy(pthread_cond_t* c)
    int pthread_join(pthread_t thread, void** retval)

cdef enum:
    MAX_THREADS_C = 1024
    MAX_BLOCKS = 64           # blocks of jobs at most; more threads than that share them
    MANY_JOBS = 8             # jobs per thread from which a batch counts as many texts
    CURSOR_STRIDE = 8         # Py_ssize_t per 64-byte line (see Runner.block_next)

# A thread's state for its jobs (the BPE chunk cache), made when it starts.
ctypedef void* (*thread_begin_fn)(void* payload) noexcept nogil
# Run job j on the thread in `slot` with its state.
ctypedef void (*run_job_fn)(void* payload, Py_ssize_t j, Py_ssize_t slot, void* state) noexcept nogil
ctypedef void (*thread_end_fn)(void* payload, void* state) noexcept nogil


cdef struct Runner:
    void* payload
    thread_begin_fn begin     # may be NULL (state NULL)
    run_job_fn run
    thread_end_fn end         # may be NULL
    Py_ssize_t n_jobs
    # The jobs are dealt in n_blocks contiguous blocks, one per thread (see deal_blocks):
    # block b is jobs [block_start[b], block_end[b]), handed out from block_next[b].
    Py_ssize_t n_blocks
    Py_ssize_t block_start[MAX_BLOCKS]
    Py_ssize_t block_end[MAX_BLOCKS]
    # atomic cursor of block b at block_next[b * CURSOR_STRIDE]: a cache line each, as
    # every thread moves its own at every job
    Py_ssize_t block_next[MAX_BLOCKS * CURSOR_STRIDE]
    # Streaming mode: workers flag each finished job so that the caller can build its
    # results (which needs the GIL, so only one thread can) while they go on.
    bint notify
    char* done                # per job: fbe_flag_store once it is finished
    char waiting              # fbe_flag: the caller sleeps on `cond` (under `lock`)
    Py_ssize_t wait_first     # until jobs wait_first and wait_last are both done
    Py_ssize_t wait_last
    pthread_mutex_t lock
    pthread_cond_t cond


cdef struct WorkerArg:
    Runner* r
    Py_ssize_t slot


cdef void run_jobs(Runner* r, int num_threads) noexcept nogil
    # Every job on up to num_threads threads (the caller is one of them).
cdef void deal_blocks(Runner* r, Py_ssize_t threads) noexcept nogil
cdef Py_ssize_t claim_job(Runner* r, Py_ssize_t slot) noexcept nogil
    # The next job for the thread in `slot`, or n_jobs when none is left.
cdef void mark_done(Runner* r, Py_ssize_t j) noexcept nogil
cdef Py_ssize_t start_workers(Runner* r, Py_ssize_t count, Py_ssize_t first_slot,
                              pthread_t* tids, WorkerArg* args) noexcept nogil
cdef void finished_runs(Runner* r, const Py_ssize_t* built, Py_ssize_t* upto,
                        Py_ssize_t wait_first, Py_ssize_t wait_last) noexcept nogil
cdef Py_ssize_t batch_threads(Py_ssize_t num_threads, Py_ssize_t total_points,
                              const Tuning* tuning)
    # How many threads a batch of total_points code points runs on (Tuning's policy).
