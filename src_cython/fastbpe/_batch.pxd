"""A batch's results while it encodes (see ``_batch.pyx``): lists streamed from the
runner, or one flat array."""
from fastbpe._jobs cimport Context, Job


cdef list run_streaming(Context* ctx, int num_threads, const Py_ssize_t* first,
                        Py_ssize_t n_texts, Py_ssize_t n_shared_ints)
    # Run ctx's jobs on num_threads threads (this one included when there are many) and
    # return a list of ids per text, built as jobs finish; None for a text with a failed
    # job (the caller redoes it). Text t is jobs[first[t]:first[t + 1]].

cdef object to_numpy(Job* jobs, const Py_ssize_t* first, Py_ssize_t n_texts, bint u16)
    # (flat ids as uint32, or uint16 (already checked to fit), int64 offsets per text)

cdef object to_array(Job* jobs, Py_ssize_t n_jobs, bint u16)
    # The ids of jobs[0:n_jobs] as one uint32 (or uint16) array, without offsets: a
    # single text's call
