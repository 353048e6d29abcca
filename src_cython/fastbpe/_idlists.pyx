"""Python lists of ids: built in place from an ``OutBuf``, from one process-wide block of
int objects.

Result lists hold int objects from one block (ids below 2**19, the int of id v at a
fixed stride from the first), made immortal as CPython 3.12+ does for small ints, so
filling a list reads no table and writes no refcounts. Batch calls build their lists
hidden from the cyclic garbage collector and track them just before returning
(``track_lists``), so the collector does not walk them mid-call.
"""
import gc as _gc

from cpython.ref cimport PyObject
from libc.stdint cimport uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport malloc
from libc.string cimport memcpy, memset

cdef extern from "Python.h":
    PyObject* PyLong_FromUnsignedLong(unsigned long v)

cdef extern from "Python.h":
    void _gc_track "PyObject_GC_Track"(object o)
    int _gc_is_tracked "PyObject_GC_IsTracked"(object o)
    void _set_size "Py_SET_SIZE"(object o, Py_ssize_t n)


cdef extern from "fbe_pylist.h":
    PyObject** fbe_list_reserve(object lst, Py_ssize_t need, Py_ssize_t want)


cdef extern from "fbe_pylist.h":
    # see fbe_pylist.h: the shared ints are immortal (64-bit builds with a GIL); before
    # 3.12 their counts drift down and are topped up (top_up_id_ints)
    const bint IMMORTAL_INTS "FBE_IMMORTAL_INTS"
    const bint REFCNT_DRIFTS "FBE_REFCNT_DRIFTS"
    const Py_ssize_t IMMORTAL_REFCNT "FBE_IMMORTAL_REFCNT"
    Py_ssize_t _refcnt "Py_REFCNT"(PyObject* o)
    void Py_SET_REFCNT(PyObject* o, Py_ssize_t n)


cdef enum:
    ID_INTS_MAX = 1 << 19   # ids with a shared int object: 0 .. ID_INTS_MAX - 1
    ID_INT_STRIDE = 32      # bytes per shared int: an int of one 30-bit digit fits

#: int objects for ids 0, 1, 2, ..., shared by every encoder in the process and never
#: freed (they are immortal), side by side in one block: the int of id v is at
#: _id_block + v * ID_INT_STRIDE, so filling a list costs no table lookup (a cache
#: miss per token into a table of 8 bytes per id: measured, a table made list building
#: cost 2.5-3.5 ms of a 24 ms o200k Turkish call, arithmetic about nothing). The block
#: is address space for ID_INTS_MAX ints, committed by the OS as ints are made, up to
#: the largest dense vocabulary loaded (_id_block_len). Each int is a byte copy of one
#: CPython made (an int is its header, size and digits; nothing in it points at
#: itself), with an immortal reference count. Not on builds without IMMORTAL_INTS:
#: there every token gets a new int.
cdef char* _id_block = NULL
cdef Py_ssize_t _id_block_len = 0


#: References to shared ints handed out since the last top_up_id_ints, and how many
#: trigger the next one (changed only by tests, through _set_id_int_top_up).
#: Process state on purpose, not a knob of an encoder's Tuning: the counts they guard
#: belong to the one block of ints that every encoder in the process shares, and the
#: references of all encoders add up to its drift, so the period must be one per
#: process (a per-encoder period would bound nothing). Only code holding the GIL reads
#: them (note_handed_out, from building the lists), never a nogil kernel.
cdef uint64_t _handed_out = 0
cdef uint64_t _top_up_every = 1ULL << 36


cdef void top_up_id_ints() noexcept:
    """Before Python 3.12, give the shared ints back the count they drifted down by.

    Each reference outbuf_to_list hands out is decremented once when its list is freed,
    with no increment to match. Left alone, an int's count would reach zero after about
    2**40 tokens of that id had been freed (days of nonstop encoding for the commonest
    token), and CPython would free an object the table still holds. Run every
    _top_up_every references handed out (about 7e10), it keeps every count within
    2**38 of its start: what was handed out since, plus what live lists can hold.
    The GIL is held, so no decrement races with it."""
    cdef Py_ssize_t i
    cdef PyObject* item
    for i in range(_id_block_len):
        item = <PyObject*>(_id_block + i * ID_INT_STRIDE)
        if _refcnt(item) < IMMORTAL_REFCNT:
            Py_SET_REFCNT(item, IMMORTAL_REFCNT)


cdef inline void note_handed_out(Py_ssize_t count) noexcept:
    global _handed_out
    if not REFCNT_DRIFTS:
        return
    _handed_out += <uint64_t>count
    if _handed_out >= _top_up_every:
        _handed_out = 0
        top_up_id_ints()


def _set_id_int_top_up(every):
    """Testing hook: top up the shared ints' counts every `every` references handed out
    (default 2**36); returns the previous value."""
    global _top_up_every
    if every < 1:
        raise ValueError(f"every must be at least 1, got {every}")
    old = _top_up_every
    _top_up_every = every
    return old


#: The count shared ints start with (tests compare against it).
_IMMORTAL_REFCNT = IMMORTAL_REFCNT


cdef Py_ssize_t shared_id_ints(Py_ssize_t n) except -1:
    """Make the shared ints of ids below min(n, ID_INTS_MAX); returns how many ids have
    one (0 where this build cannot share ints)."""
    global _id_block, _id_block_len
    cdef Py_ssize_t i, size
    cdef Py_ssize_t size0 = int.__sizeof__(0), size1 = int.__sizeof__(1)
    cdef object obj
    cdef char* slot
    if not IMMORTAL_INTS:
        return 0
    n = min(n, <Py_ssize_t>ID_INTS_MAX)
    if n <= _id_block_len:
        return n
    # every id from 1 up has one digit, so the size of 1; 0 may be smaller
    if max(size0, size1) > ID_INT_STRIDE or int.__sizeof__(ID_INTS_MAX - 1) != size1:
        return 0
    if _id_block == NULL:
        _id_block = <char*>malloc(<size_t>ID_INTS_MAX * ID_INT_STRIDE)   # never freed
        if _id_block == NULL:
            raise MemoryError()
    for i in range(_id_block_len, n):
        obj = i
        size = size0 if i == 0 else size1
        slot = _id_block + i * ID_INT_STRIDE
        memcpy(slot, <PyObject*>obj, size)
        memset(slot + size, 0, ID_INT_STRIDE - size)
        Py_SET_REFCNT(<PyObject*>slot, IMMORTAL_REFCNT)
    _id_block_len = n
    return n


def _shared_int_address(Py_ssize_t v):
    """Testing hook: where the shared int of id v lives (0 if it has none)."""
    return <uintptr_t>(_id_block + v * ID_INT_STRIDE) if 0 <= v < _id_block_len else 0


cdef list outbuf_to_list(const OutBuf* o, Py_ssize_t n_shared, bint untracked=False):
    """A list of the ids in o (see list_extend_ids).

    untracked: hide the list from the cyclic garbage collector until the caller hands
    it back with track_lists (see there)."""
    cdef list result = _new_list(0)
    list_extend_ids(result, o, n_shared, o.size)
    if untracked:
        _gc_untrack(result)
    return result


cdef int list_extend_ids(list lst, const OutBuf* o, Py_ssize_t n_shared,
                         Py_ssize_t reserve) except -1:
    """Append the ids in o to lst as Python ints, with room for `reserve` items in all
    if the list must grow. Ids below n_shared are the shared ints (see _id_block), which
    saves allocating (and later freeing) one int per token. Those are immortal, so
    filling the list does not touch them at all."""
    cdef Py_ssize_t i, size = len(lst)
    cdef PyObject** items
    cdef PyObject* item
    cdef uint32_t v
    if o.size == 0:
        return 0
    items = fbe_list_reserve(lst, size + o.size, reserve)
    if items == NULL:
        raise MemoryError()
    items += size
    for i in range(o.size):
        v = o.data[i]
        if v < n_shared:
            item = <PyObject*>(_id_block + <size_t>v * ID_INT_STRIDE)
        else:
            item = PyLong_FromUnsignedLong(v)
            if item == NULL:
                _set_size(lst, size + i)     # the items so far are the list's own
                raise MemoryError()
        items[i] = item
    _set_size(lst, size + o.size)
    if n_shared:
        note_handed_out(o.size)
    return 0


cdef int collect_young_if_due() except -1:
    """Run the young-generation collection now if one is due, before track_lists hands
    the batch's lists to the collector.

    Python 3.12 runs a collection that allocations have made due at the interpreter's
    next check, not inside the allocation. A batch allocates a list per text, so one is
    always due when the call returns, and it then walked every item of every returned
    list: measured on 3.12.1, gpt2, ~2 KB documents of Python source (1.6M tokens), a
    list batch took 33.1 ms on one thread and 27.3 ms on two, against 21.4 ms for one
    call on the whole text; collecting here, while the lists are still hidden, made it
    21.9 and 12.6 ms. On 3.11 the collections ran inside the call, so none is due here."""
    if _gc.isenabled() and _gc.get_count()[0] > _gc.get_threshold()[0]:
        _gc.collect(0)
    return 0


cdef void track_lists(list lists):
    """Hand lists made by outbuf_to_list(untracked=True) back to the cyclic garbage
    collector, as every list must be once Python code can reach it.

    Why they were hidden: a batch makes one list per text, and each allocation counts
    towards the next young-generation collection, which walks every item of every young
    list it finds: with thousands of lists of thousands of ints, the collector ran
    several times per call and took a third of the calling thread's time, serially,
    while worker threads waited. Hidden until the batch is done, the lists are walked
    only by collections after the call, as any other list would be."""
    cdef object item
    for item in lists:
        if item is not None and not _gc_is_tracked(item):
            _gc_track(item)
