/* PyUnicode_READY where it still exists (before 3.12; a no-op since). */
#ifndef FASTBPE_FBE_PYUNICODE_H
#define FASTBPE_FBE_PYUNICODE_H
#include <Python.h>
#if PY_VERSION_HEX < 0x030C0000
#define FBE_UNICODE_READY(o) PyUnicode_READY(o)
#else
#define FBE_UNICODE_READY(o) 0
#endif
#endif
