"""Small shared kernels of the native core.

Kernels here are pure algorithm over typed memoryviews and run without the GIL; the
Python layer converts inputs once and holds the policy.
"""
import numpy as np
cimport numpy as cnp

cnp.import_array()

#: Bumped whenever the layout of native objects changes.
NATIVE_ABI = 1


cdef Py_ssize_t merge_pair_inplace(int[::1] ids, Py_ssize_t n, int left, int right,
                                   int new_id) noexcept nogil:
    """Replace every leftmost non-overlapping (left, right) in ids[:n] by new_id.

    Returns the new length; works in place because the output never outruns the input.
    """
    cdef Py_ssize_t i = 0, j = 0
    while i < n:
        if i + 1 < n and ids[i] == left and ids[i + 1] == right:
            ids[j] = new_id
            i += 2
        else:
            ids[j] = ids[i]
            i += 1
        j += 1
    return j


def merge_pair(ids, int left, int right, int new_id):
    """Native twin of ``fastbpe.reference.bpe.merge`` on an int32 array.

    >>> merge_pair(np.array([1, 2, 3, 1, 2], dtype=np.int32), 1, 2, 4).tolist()
    [4, 3, 4]
    """
    cdef int[::1] buf = np.ascontiguousarray(ids, dtype=np.int32).copy()
    cdef Py_ssize_t n = buf.shape[0], m
    with nogil:
        m = merge_pair_inplace(buf, n, left, right, new_id)
    return np.asarray(buf)[:m].copy()
