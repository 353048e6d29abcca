"""Python lists of ids (see ``_idlists.pyx``)."""
from fastbpe._out cimport OutBuf

cdef extern from "Python.h":
    list _new_list "PyList_New"(Py_ssize_t n)
    void _gc_untrack "PyObject_GC_UnTrack"(object o)

cdef extern from "fbe_pylist.h":
    void list_trim "fbe_list_trim"(object lst)
    # Give back a list's spare room when it is more than an eighth of its size.

cdef Py_ssize_t shared_id_ints(Py_ssize_t n) except -1
    # Make the shared ints of ids below n; returns how many ids have one.
cdef list outbuf_to_list(const OutBuf* o, Py_ssize_t n_shared, bint untracked=*)
cdef int list_extend_ids(list lst, const OutBuf* o, Py_ssize_t n_shared,
                         Py_ssize_t reserve) except -1
cdef int collect_young_if_due() except -1
cdef void track_lists(list lists)
