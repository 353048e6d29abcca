"""The fused scan of ``fastbpe._hf_spm`` (issue 39, branch jsc39): segments found on the
characters, before any symbol is made.

``_hf_spm.pyx`` made a piece's symbols (step 1) into a buffer, then walked them again
for the cuts (step 2), then hashed each segment for the cache. When every character of
a segment is in the vocabulary as itself (one symbol, its own id: ``▁``, letters,
digits, punctuation, CJK of the vocabulary), the three are one pass over the text:

* a character's symbol is its id, and the text of that symbol is the character, so
  the junction between two such symbols (``reference.hf_spm.segments``: last character
  of the left one's text, first of the right one's) is the pair of characters itself;
  ``ScanChars.info`` holds, per BMP character, its row and column of the junctions' bit
  matrix (``HFTables.bits``), so a cut costs one load per character;
* the segment's characters (after ``▁`` in front and spaces escaped) are its key in
  the segment cache (``SEG_CHARS``): a hit gives the ids without one symbol made; a
  miss makes the symbols (``HFTables.bmp``) and merges them as before.

Any other character (astral, byte fallback, unknown, dropped; ``\n`` in Mistral's
vocabulary) is ``HARD``: the scan stops at the start of the segment holding it, the
kernel's three steps take the text from there to the next cut between two characters
that are not ``HARD`` (``scan_resume``), and the scan goes on. A cut between two
such characters is one whatever lies around it, and no unknown run or byte sequence is
open across it, so the pieces merge alone: the same rules, so the same ids (the
kernel's parity tests and HF's are the judge; no new rule).
"""
from libc.stdint cimport int32_t, uint16_t, uint32_t
from libc.stdlib cimport calloc, free

cdef extern from "Python.h":
    uint32_t PyUnicode_READ(int kind, const void* data, Py_ssize_t index) nogil

cdef enum:
    SCAN_HARD = 0xFFFFFFFF    # info of a character that is not one symbol of its own


cdef struct ScanChars:
    uint32_t* info            # BMP character -> row | column << 16 (1-based, 0: in no junction); SCAN_HARD
    const unsigned char* bits  # HFTables.bits
    uint32_t n_cols
    bint bytes_ok             # byte fallback with all 256 <0xXX> ids: a BMP HARD character is its bytes
    uint16_t byte_row[256]    # byte -> row of its <0xXX> id (1-based, 0: in no junction)


cdef inline int scan_init(ScanChars* c, const int32_t* bmp, const uint16_t* row, const uint16_t* col,
                          const unsigned char* bits, uint32_t n_cols, bint byte_fallback,
                          const int32_t* byte_ids) noexcept nogil:
    """``info`` from the kernel's tables (``row``/``col``: id -> 1 + its last / first
    character's row / column); -1 when out of memory."""
    cdef uint32_t cp
    c.bytes_ok = byte_fallback
    for cp in range(256):
        if byte_ids[cp] < 0:
            c.bytes_ok = False
        c.byte_row[cp] = row[byte_ids[cp]] if byte_ids[cp] >= 0 else 0
    c.info = <uint32_t*>calloc(0x10000, sizeof(uint32_t))
    if c.info == NULL:
        return -1
    c.bits = bits
    c.n_cols = n_cols
    for cp in range(0x10000):
        c.info[cp] = SCAN_HARD if bmp[cp] < 0 else (<uint32_t>row[bmp[cp]] | (<uint32_t>col[bmp[cp]] << 16))
    return 0


cdef inline void scan_free(ScanChars* c) noexcept nogil:
    free(c.info)
    c.info = NULL


cdef inline bint scan_joins(const ScanChars* c, uint32_t left, uint32_t right) noexcept nogil:
    """Whether a merge may cross between characters whose infos are ``left``, ``right``."""
    cdef uint32_t r = left & 0xFFFF, col = right >> 16, bit
    if r == 0 or col == 0:
        return False
    bit = (r - 1) * c.n_cols + (col - 1)
    return (c.bits[bit >> 3] >> (bit & 7)) & 1


cdef inline uint32_t scan_char(const ScanChars* c, int kind, const void* data, Py_ssize_t k, bint escape,
                               uint32_t* cp) noexcept nogil:
    """Character ``k`` of the text (-1: the ``▁`` in front; a space as ``▁`` when
    ``escape``) into ``*cp``, and its info (``SCAN_HARD`` for an astral one)."""
    cp[0] = 0x2581 if k < 0 else PyUnicode_READ(kind, data, k)
    if escape and cp[0] == 0x20:
        cp[0] = 0x2581
    return SCAN_HARD if cp[0] >= 0x10000 else c.info[cp[0]]


cdef inline Py_ssize_t scan_segment(const ScanChars* c, int kind, const void* data, Py_ssize_t n, Py_ssize_t k,
                                    bint escape, bint split, int32_t* key, Py_ssize_t* n_key) noexcept nogil:
    """The segment starting at character ``k`` of the text (-1: the ``▁`` in front):
    its characters into ``key`` (``*n_key`` of them, spaces as ``▁`` when ``escape``)
    and the position after it; ``-2 - p`` when character ``p`` in it is ``HARD``.
    ``split`` cuts before every ``▁`` (Metaspace's words: never the piece's first
    character, which starts a segment anyway)."""
    cdef uint32_t cp, info
    cdef uint32_t prev = scan_char(c, kind, data, k, escape, &cp)
    cdef Py_ssize_t m = 1
    if prev == SCAN_HARD:
        return -2 - k
    key[0] = <int32_t>cp
    k += 1
    while k < n:
        info = scan_char(c, kind, data, k, escape, &cp)
        if info == SCAN_HARD:
            return -2 - k
        if (split and cp == 0x2581) or not scan_joins(c, prev, info):
            break
        key[m] = <int32_t>cp
        m += 1
        prev = info
        k += 1
    n_key[0] = m
    return k


cdef inline Py_ssize_t scan_resume(const ScanChars* c, int kind, const void* data, Py_ssize_t n, Py_ssize_t hard,
                                   bint escape, bint split) noexcept nogil:
    """The first cut after the ``HARD`` character at ``hard`` before a character that
    is not (a junction no merge crosses, or a ``▁`` with ``split``), where the scan can
    go on; ``n`` when there is none. The left side of the junction is the character
    before, or when that is a BMP ``HARD`` one and ``bytes_ok``, the ``<0xXX>`` symbol
    of its last UTF-8 byte (``\n`` before an indentation); other ``HARD`` characters
    (astral, unknown: a fused run, a dropped character) give no cut after them."""
    cdef Py_ssize_t k = hard
    cdef uint32_t prev = SCAN_HARD, info, cp
    while k < n:
        info = scan_char(c, kind, data, k, escape, &cp)
        if k > hard and prev != SCAN_HARD and info != SCAN_HARD and (
                (split and cp == 0x2581) or not scan_joins(c, prev, info)):
            return k
        if info == SCAN_HARD and c.bytes_ok and cp < 0x10000:
            prev = c.byte_row[cp if cp < 0x80 else 0x80 | (cp & 0x3F)]   # the row of its last byte's id
        else:
            prev = info
        k += 1
    return n
