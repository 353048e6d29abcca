/* Lists of ids filled in place, and the immortal shared id ints (see fastbpe/_idlists.pyx). */
#ifndef FASTBPE_FBE_PYLIST_H
#define FASTBPE_FBE_PYLIST_H
#include <Python.h>
/* Room in list op for `need` items, growing its item array to `want` (at least
   need) items if it must: lists of ids are filled in place, a few large pieces at
   a time, without list.extend's reference counting. Returns the item array, or
   NULL (the caller raises MemoryError). */
static PyObject** fbe_list_reserve(PyObject* op, Py_ssize_t need, Py_ssize_t want) {
    PyListObject* l = (PyListObject*)op;
    PyObject** items;
    if (need <= l->allocated)
        return l->ob_item;
    if (want < need)
        want = need;
    if ((size_t)want > (size_t)PY_SSIZE_T_MAX / sizeof(PyObject*))
        return NULL;
    items = (PyObject**)PyMem_Realloc(l->ob_item, (size_t)want * sizeof(PyObject*));
    if (items == NULL)
        return NULL;
    l->ob_item = items;
    l->allocated = want;
    return items;
}
/* Give back a list's spare room when it is more than an eighth of its size. */
static void fbe_list_trim(PyObject* op) {
    PyListObject* l = (PyListObject*)op;
    Py_ssize_t size = Py_SIZE(l);
    PyObject** items;
    if (size == 0 || l->allocated - size <= size / 8)
        return;
    items = (PyObject**)PyMem_Realloc(l->ob_item, (size_t)size * sizeof(PyObject*));
    if (items != NULL) {        /* if not, the list just keeps its room */
        l->ob_item = items;
        l->allocated = size;
    }
}
/* The shared id ints are made immortal, as CPython 3.12+ does for its small ints
   (PEP 683): a reference count of about 2**40, with bit 31 set, which 3.12+ reads
   as "immortal" and then leaves alone. Lists of them are then filled without
   writing to every object (a cache miss per token). Only on 64-bit builds with a
   GIL: free-threaded builds split the count, and 32 bits leave too little headroom.
   Before 3.12 the count is not frozen: each list freed decrements it once per
   token, with no increment to match, so it drifts down (see top_up_id_ints). */
#define FBE_IMMORTAL_REFCNT ((Py_ssize_t)((1ull << 40) | 0xC0000000ull))
#if defined(Py_GIL_DISABLED) || SIZEOF_VOID_P < 8
#define FBE_IMMORTAL_INTS 0
#else
#define FBE_IMMORTAL_INTS 1
#endif
#define FBE_REFCNT_DRIFTS (FBE_IMMORTAL_INTS && PY_VERSION_HEX < 0x030C0000)

#endif
