"""Native BERT WordPiece: normalisation, pre-tokenisation and LinMaxMatch in one pass.

The rules are those of ``fastbpe.reference.wordpiece`` (the specification); this module
only makes them fast:

* Character classes, NFD decompositions, canonical combining classes and lowercase
  mappings are expanded once per process from the reference's generated Unicode data
  (``fastbpe.reference._bert_unicode``: HF tokenizers' versions, see the reference) into
  flat tables indexed by code point, so the kernel never calls back into Python.
* The text is streamed once: each input character is cleaned, mapped (accents stripped,
  lowercased) and fed to the pre-tokeniser; each finished word goes straight to WordPiece.
  Only the current word is buffered, and at most ``max_input_chars_per_word + 1`` of its
  characters, so memory is O(word) and every step is linear. Accent stripping also holds
  the current run of combining marks, which NFD reorders (stable counting sort for long
  runs, so still linear) before the Mn marks are dropped.
* WordPiece is LinMaxMatch (Song et al. 2021, "Fast WordPiece Tokenization"): a trie of all
  tokens (the word-start trie) plus a trie of continuation tokens without their prefix
  (rooted at the "suffix root"), with Aho-Corasick-like failure links and failure pops.
  Each character is consumed once and each failure link followed is paid for by a popped
  token, so a word of n characters costs O(n) and the result equals greedy
  longest-match-first (MaxMatch), as HF computes it.
* ``encode_batch`` runs the kernel without the GIL on the threads of ``fastbpe._runner``
  (the BPE encoder's runner: one job per run of consecutive texts); each job writes into
  its texts' own growable buffers.
"""
cimport cython
import numpy as np
cimport numpy as cnp
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memchr, memcpy

from fastbpe._vec cimport I32Vec, I64Vec, i32_push, i64_push

from fastbpe._runner cimport Runner, run_jobs

from fastbpe._runner import _batch_threads
from fastbpe.special import raise_disallowed_special_token

cdef enum:
    OUT_FIRST_CAP = 64      # output buffers start with room for 64 ids

cnp.import_array()

cdef extern from "Python.h":
    int PyUnicode_KIND(object o)
    void* PyUnicode_DATA(object o)
    # raw-pointer forms for filling result lists (no reference counting by Cython)
    ctypedef struct PyObject
    void incref_raw "Py_INCREF"(PyObject* o)
    void set_item_raw "PyList_SET_ITEM"(object lst, Py_ssize_t i, PyObject* o)
    PyObject* get_item_raw "PyList_GET_ITEM"(object lst, Py_ssize_t i)
    PyObject* long_raw "PyLong_FromLong"(long v)

cdef enum:
    N_CODEPOINTS = 0x110000
    SHORT_TEXT = 4096     # code points: shorter texts keep the GIL and the core's buffers

# What special-token text in the input does (``fastbpe.special`` decides; see wordpiece.py)
cdef enum:
    MODE_ORDINARY = 0     # it is ordinary text
    MODE_SPLIT = 1        # it becomes the token's id (HF's behaviour)
    MODE_CHECK = 2        # finding it is an error: report where, encode nothing

# Flags per code point (input and normalised characters both use them).
cdef enum:
    F_DROP = 1      # clean_text removes it (NUL, U+FFFD, Cc/Cf/Cs/Co except \t\n\r)
    F_WS = 2        # Unicode White_Space
    F_PUNCT = 4     # BERT punctuation
    F_CJK = 8       # padded with spaces (HF's CJK ranges)
    F_MN = 16       # non-spacing mark: dropped by accent stripping
    F_DECOMP = 32   # has a canonical decomposition (NFD differs)
    F_LOWER = 64    # lower() differs


# ---------------------------------------------------------------------------------------
# Unicode tables (built once per process)
# ---------------------------------------------------------------------------------------

_TABLES = None


def _build_tables():
    """Flags, combining classes, NFD and lowercase mappings as flat per-code-point arrays.

    Expanded from the runs and maps of ``fastbpe.reference._bert_unicode`` (HF's Unicode
    data); the rules that are not data (ASCII punctuation, NUL/U+FFFD, surrogates, CJK
    ranges) come from the reference's own functions and constants.
    """
    from .reference import _bert_unicode as U
    from .reference import wordpiece as ref

    flags = np.zeros(N_CODEPOINTS, dtype=np.uint8)
    ccc = np.zeros(N_CODEPOINTS, dtype=np.uint8)
    nfd_index = np.full(N_CODEPOINTS, -1, dtype=np.int32)
    lower_index = np.full(N_CODEPOINTS, -1, dtype=np.int32)
    data = [0]  # mappings: [length, cp, cp, ...] runs; index 0 unused
    for lo, hi in U.OTHER:
        flags[lo:hi + 1] |= F_DROP
    flags[0xD800:0xE000] |= F_DROP  # lone surrogates cannot come from valid text; drop them
    flags[0xFFFD] |= F_DROP  # clean text drops U+FFFD (and NUL, which is Cc) as well
    for ch in "\t\n\r":  # Cc, but clean text maps them to " " (reference.is_control)
        flags[ord(ch)] = 0
    for lo, hi in U.PUNCTUATION:
        flags[lo:hi + 1] |= F_PUNCT
    for cp in range(128):
        if ref.is_punctuation(chr(cp)):
            flags[cp] |= F_PUNCT
    for lo, hi in U.NONSPACING_MARK:
        flags[lo:hi + 1] |= F_MN
    for lo, hi, c in U.COMBINING_CLASS:
        ccc[lo:hi + 1] = c
    for cp in [*U.NFD, *range(ref.HANGUL_FIRST, ref.HANGUL_LAST + 1)]:
        flags[cp] |= F_DECOMP
        nfd_index[cp] = len(data)
        d = ref.decompose(chr(cp))
        data.append(len(d))
        data.extend(ord(x) for x in d)
    for cp, lo in U.LOWERCASE.items():
        flags[cp] |= F_LOWER
        lower_index[cp] = len(data)
        data.append(len(lo))
        data.extend(lo)
    for ch in ref.WHITESPACE:
        flags[ord(ch)] |= F_WS
    for lo, hi in ref.CJK_RANGES:
        flags[lo:hi + 1] |= F_CJK
    return flags, ccc, nfd_index, lower_index, np.array(data, dtype=np.uint32)


def unicode_tables():
    """The (flags, ccc, nfd_index, lower_index, data) tables, built on first use."""
    global _TABLES
    if _TABLES is None:
        _TABLES = _build_tables()
    return _TABLES


# ---------------------------------------------------------------------------------------
# The kernel state: read-only after construction, shared by all threads
# ---------------------------------------------------------------------------------------

cdef struct Model:
    # unicode tables
    const uint8_t* flags
    const uint8_t* ccc
    const int32_t* nfd_index
    const int32_t* lower_index
    const uint32_t* map_data
    # options
    bint clean_text
    bint cjk
    bint strip_accents
    bint lowercase
    bint turkish
    int32_t max_chars
    int32_t unk_id
    # trie: node v has edges edge_start[v] .. edge_start[v+1]-1, sorted by edge_char
    const int64_t* edge_start
    const uint64_t* edges        # (char << 32) | child, so one edge is one load
    const int32_t* fail          # failure link, -1 = none
    const int64_t* pop_start     # failure pops of v: pop_ids[pop_start[v] .. pop_start[v+1]-1]
    const int32_t* pop_ids
    const int32_t* tok_chars     # characters a continuation token covers (prefix excluded)
    const int32_t* tok_full_chars  # characters a token covers at the word start (spelled in full)
    const int32_t* tok_id        # the trie numbers tokens densely 0..n-1; this maps to vocab ids
    # direct child tables of the two roots for code points < 0x10000 (the hot lookups:
    # every word starts at the word-start root, every continuation at the suffix root)
    const int32_t* root_child_bmp
    const int32_t* suffix_child_bmp
    int32_t suffix_root
    # training: emit the normalised words (code points, each word followed by a space)
    # instead of token ids; the word buffer then grows instead of stopping at max_chars
    bint words_only
    # special tokens matched in raw text, longest first: characters of token k are
    # sp_chars[sp_start[k] : sp_start[k] + sp_len[k]]; sp_first[c] says whether some token
    # starts with the BMP character c (sp_astral: some token starts outside the BMP)
    Py_ssize_t n_specials
    const int64_t* sp_start
    const int32_t* sp_len
    const uint32_t* sp_chars
    const int32_t* sp_id
    const uint8_t* sp_first
    bint sp_astral
    int sp_lead       # the first character of every special token when they share one (< 256), else -1


cdef struct Output:
    I32Vec ids
    I64Vec starts    # character offsets in the input text
    I64Vec ends
    bint want_offsets
    int error


cdef struct Mark:
    uint32_t ch
    uint8_t ccc
    bint first          # the first character of its input character's decomposition
    int64_t orig


cdef struct Scratch:
    uint32_t* word      # normalised characters of the current word (<= max_chars + 1 kept)
    int64_t* orig       # input index of each kept character
    Py_ssize_t n        # characters in the word so far (may exceed what is kept)
    Py_ssize_t cap
    # accent stripping: NFD's pending run of combining marks (class != 0), see flush_marks
    Mark* marks
    int64_t* mark_q
    Py_ssize_t n_marks
    Py_ssize_t marks_cap
    int64_t consumed    # input index of the last input character NFD has consumed
    int64_t first_orig
    int64_t last_orig
    bint growable
    bint oom


cdef inline int32_t child_of(const Model* m, int32_t v, uint32_t c) noexcept nogil:
    """Trie edge lookup: binary search in the node's sorted edge list; -1 if none."""
    if v <= 1 and c < 0x10000:
        return m.root_child_bmp[c] if v == 0 else m.suffix_child_bmp[c]
    cdef int64_t lo = m.edge_start[v], hi = m.edge_start[v + 1] - 1, mid
    cdef uint32_t x
    while lo <= hi:
        mid = (lo + hi) >> 1
        x = <uint32_t>(m.edges[mid] >> 32)
        if x == c:
            return <int32_t><uint32_t>m.edges[mid]   # the low half
        if x < c:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1


cdef inline int emit(Output* out, int32_t tid, int64_t start, int64_t end) noexcept nogil:
    if i32_push(&out.ids, tid, OUT_FIRST_CAP) != 0:
        return -1
    if out.want_offsets:
        if (i64_push(&out.starts, start, OUT_FIRST_CAP) != 0
                or i64_push(&out.ends, end, OUT_FIRST_CAP) != 0):
            return -1
    return 0


cdef inline int pop_state(const Model* m, Scratch* s, Output* out, int32_t v,
                          Py_ssize_t mark, Py_ssize_t* pos) noexcept nogil:
    """Emit the tokens recognised at state v and move *pos past them: 0. When v has no
    failure link the word has no WordPiece form: its tokens so far (from mark) are
    dropped and [UNK] stands for the whole word: 1. -1 when out of memory."""
    cdef int64_t k
    cdef int32_t tid
    cdef Py_ssize_t width
    if m.fail[v] < 0:
        out.ids.size = mark
        if out.want_offsets:
            out.starts.size = mark
            out.ends.size = mark
        return 1 if emit(out, m.unk_id, s.first_orig, s.last_orig + 1) == 0 else -1
    for k in range(m.pop_start[v], m.pop_start[v + 1]):
        tid = m.pop_ids[k]
        width = m.tok_full_chars[tid] if pos[0] == 0 else m.tok_chars[tid]
        if emit(out, m.tok_id[tid], s.orig[pos[0]], s.orig[pos[0] + width - 1] + 1) != 0:
            return -1
        pos[0] += width
    return 0


cdef int flush_word(const Model* m, Scratch* s, Output* out) noexcept nogil:
    """WordPiece on the buffered word (LinMaxMatch), then reset the buffer."""
    cdef Py_ssize_t n = s.n, i, base
    cdef int32_t v, nxt
    cdef int r
    cdef Py_ssize_t mark = out.ids.size, pos = 0
    if s.n_marks:  # pending marks belong to this word (or end it, if punctuation)
        if flush_marks(m, s, out) != 0:
            return -1
        n = s.n
    s.n = 0
    if n == 0:
        return 0
    if s.oom:
        return -1
    if m.words_only:
        for i in range(n):
            if i32_push(&out.ids, <int32_t>s.word[i], OUT_FIRST_CAP) != 0:
                return -1
        return i32_push(&out.ids, 0x20, OUT_FIRST_CAP)
    if n > m.max_chars:
        return emit(out, m.unk_id, s.first_orig, s.last_orig + 1)
    v = 0
    i = 0
    while i < n:
        nxt = child_of(m, v, s.word[i])
        if nxt >= 0:
            v = nxt
            i += 1
            continue
        # no edge: pop the tokens recognised so far and follow the failure link
        r = pop_state(m, s, out, v, mark, &pos)
        if r != 0:
            return 0 if r == 1 else -1
        v = m.fail[v]
    while v != m.suffix_root:
        # the same at the word's end (the root has no failure link either: an empty
        # remainder cannot happen)
        r = pop_state(m, s, out, v, mark, &pos)
        if r != 0:
            return 0 if r == 1 else -1
        v = m.fail[v]
    return 0


cdef void grow_scratch(Scratch* s) noexcept nogil:
    cdef Py_ssize_t cap = s.cap * 2
    cdef uint32_t* w = <uint32_t*>realloc(s.word, cap * sizeof(uint32_t))
    if w == NULL:
        s.oom = True
        return
    s.word = w
    cdef int64_t* o = <int64_t*>realloc(s.orig, cap * sizeof(int64_t))
    if o == NULL:
        s.oom = True
        return
    s.orig = o
    s.cap = cap


cdef inline void word_append(const Model* m, Scratch* s, uint32_t c, int64_t orig) noexcept nogil:
    """Add one normalised character to the current word (keeps at most max_chars + 1)."""
    if s.n == 0:
        s.first_orig = orig
    s.last_orig = orig
    if s.n == s.cap and s.growable:
        grow_scratch(s)
    if s.n < s.cap:
        s.word[s.n] = c
        s.orig[s.n] = orig
    s.n += 1


cdef inline int feed_normalised(const Model* m, Scratch* s, Output* out, uint32_t c, int64_t orig) noexcept nogil:
    """Pre-tokenise: whitespace ends a word; punctuation is a word of its own."""
    cdef uint8_t f = m.flags[c]
    if f & F_WS:
        return flush_word(m, s, out)
    if f & F_PUNCT:
        if flush_word(m, s, out) != 0:
            return -1
        word_append(m, s, c, orig)
        return flush_word(m, s, out)
    word_append(m, s, c, orig)
    return 0


cdef inline int feed_lowered(const Model* m, Scratch* s, Output* out, uint32_t c, int64_t orig) noexcept nogil:
    cdef int32_t idx
    cdef uint32_t k
    if m.lowercase and (m.flags[c] & F_LOWER):
        idx = m.lower_index[c]
        for k in range(m.map_data[idx]):
            if feed_normalised(m, s, out, m.map_data[idx + 1 + k], orig) != 0:
                return -1
        return 0
    return feed_normalised(m, s, out, c, orig)


cdef int sort_marks(Mark* a, Py_ssize_t n) noexcept nogil:
    """Stable sort by combining class: insertion for short runs, counting sort for long ones."""
    cdef Py_ssize_t i, j
    cdef Mark x
    cdef Py_ssize_t counts[257]
    cdef Mark* tmp
    if n <= 32:
        for i in range(1, n):
            x = a[i]
            j = i
            while j > 0 and a[j - 1].ccc > x.ccc:
                a[j] = a[j - 1]
                j -= 1
            a[j] = x
        return 0
    tmp = <Mark*>malloc(n * sizeof(Mark))
    if tmp == NULL:
        return -1
    for i in range(257):
        counts[i] = 0
    for i in range(n):
        counts[a[i].ccc + 1] += 1
    for i in range(256):
        counts[i + 1] += counts[i]
    for i in range(n):
        tmp[counts[a[i].ccc]] = a[i]
        counts[a[i].ccc] += 1
    memcpy(a, tmp, n * sizeof(Mark))
    free(tmp)
    return 0


cdef int flush_marks(const Model* m, Scratch* s, Output* out) noexcept nogil:
    """Emit the pending run of marks the way HF's NFD + filter do.

    The run is stably sorted by combining class, and alignments follow positions, not
    characters (HF tracks changes per position): walking the sorted run, a mark that
    begins an input character's decomposition takes the next such character's index (in
    input order); any other mark takes the index last taken. Then Mn marks are dropped.
    So in "\u08d4\u0316\u0301" the kept U+08D4 sorts second and gets index 1, as in HF.
    """
    cdef Py_ssize_t n = s.n_marks, i, k = 0
    cdef uint32_t c
    s.n_marks = 0
    for i in range(n):
        if s.marks[i].first:
            s.mark_q[k] = s.marks[i].orig
            k += 1
    if sort_marks(s.marks, n) != 0:
        return -1
    k = 0
    for i in range(n):
        if s.marks[i].first:
            s.consumed = s.mark_q[k]
            k += 1
        c = s.marks[i].ch
        if not (m.flags[c] & F_MN):
            if feed_lowered(m, s, out, c, s.consumed) != 0:
                return -1
    return 0


cdef int push_mark(Scratch* s, uint32_t c, uint8_t cc, bint first, int64_t orig) noexcept nogil:
    cdef Py_ssize_t cap
    cdef Mark* a
    cdef int64_t* q
    if s.n_marks == s.marks_cap:
        cap = 16 if s.marks_cap == 0 else 2 * s.marks_cap
        a = <Mark*>realloc(s.marks, cap * sizeof(Mark))
        if a == NULL:
            s.oom = True
            return -1
        s.marks = a
        q = <int64_t*>realloc(s.mark_q, cap * sizeof(int64_t))
        if q == NULL:
            s.oom = True
            return -1
        s.mark_q = q
        s.marks_cap = cap
    s.marks[s.n_marks].ch = c
    s.marks[s.n_marks].ccc = cc
    s.marks[s.n_marks].first = first
    s.marks[s.n_marks].orig = orig
    s.n_marks += 1
    return 0


cdef inline int feed_decomposed(const Model* m, Scratch* s, Output* out, uint32_t d, bint first, int64_t orig) noexcept nogil:
    """One character of the NFD stream: a mark waits in the run; a starter emits the run first."""
    cdef uint8_t cc = m.ccc[d]
    if cc != 0:
        return push_mark(s, d, cc, first, orig)
    if s.n_marks and flush_marks(m, s, out) != 0:
        return -1
    if first:
        s.consumed = orig
    if m.flags[d] & F_MN:
        return 0
    return feed_lowered(m, s, out, d, s.consumed)


cdef inline int feed_mapped(const Model* m, Scratch* s, Output* out, uint32_t c, int64_t orig) noexcept nogil:
    """Accent stripping (NFD, drop Mn) then lowercasing of one input character."""
    cdef int32_t idx
    cdef uint32_t k
    if not m.strip_accents:
        return feed_lowered(m, s, out, c, orig)
    if m.flags[c] & F_DECOMP:
        idx = m.nfd_index[c]
        for k in range(m.map_data[idx]):
            if feed_decomposed(m, s, out, m.map_data[idx + 1 + k], k == 0, orig) != 0:
                return -1
        return 0
    return feed_decomposed(m, s, out, c, True, orig)


cdef inline uint32_t read_cp(int kind, const char* data, Py_ssize_t i) noexcept nogil:
    """Code point i of a str's canonical buffer (1, 2 or 4 bytes per character)."""
    if kind == 1:
        return (<const uint8_t*>data)[i]
    if kind == 2:
        return (<const uint16_t*>data)[i]
    return (<const uint32_t*>data)[i]


cdef int scratch_open(const Model* m, Scratch* s) noexcept nogil:
    """Allocate the word buffer of one encoding thread; -1 when memory runs out."""
    s.cap = 256 if m.words_only else m.max_chars + 1
    s.growable = m.words_only
    s.oom = False
    s.n = 0
    s.marks = NULL
    s.mark_q = NULL
    s.n_marks = 0
    s.marks_cap = 0
    s.consumed = 0
    s.word = <uint32_t*>malloc(s.cap * sizeof(uint32_t))
    s.orig = <int64_t*>malloc(s.cap * sizeof(int64_t))
    if s.word == NULL or s.orig == NULL:
        free(s.word)
        free(s.orig)
        s.word = NULL
        s.orig = NULL
        return -1
    return 0


cdef void scratch_close(Scratch* s) noexcept nogil:
    free(s.word)
    free(s.orig)
    free(s.marks)
    free(s.mark_q)
    s.word = NULL
    s.orig = NULL
    s.marks = NULL
    s.mark_q = NULL
    s.marks_cap = 0


cdef int encode_text(const Model* m, Scratch* s, int kind, const char* text, Py_ssize_t n, int64_t base,
                     Output* out) noexcept nogil:
    """The whole pipeline over ``text[:n]`` (a str buffer of ``kind`` bytes per character);
    offsets are ``base`` + input index. 0, or -1 when memory runs out."""
    cdef Py_ssize_t i
    cdef uint32_t c
    cdef uint8_t f
    cdef int rc = 0
    s.n = 0
    s.n_marks = 0
    s.consumed = 0
    s.oom = False
    for i in range(n):
        c = read_cp(kind, text, i)
        if c >= N_CODEPOINTS:
            c = 0xFFFD
        f = m.flags[c]
        if m.clean_text:
            if f & F_DROP:
                continue
            if f & F_WS:
                rc = flush_word(m, s, out)
                if rc != 0:
                    break
                continue
        if c < 0x80 and not m.turkish:
            # ASCII: no decomposition, no combining mark, lowercase is A-Z + 32
            if m.lowercase and 0x41 <= c <= 0x5A:
                c += 0x20
            if s.n_marks:  # a starter ends NFD's pending run of marks (feed_decomposed's rule)
                rc = flush_marks(m, s, out)
                if rc != 0:
                    break
            s.consumed = base + i
            rc = feed_normalised(m, s, out, c, base + i)
            if rc != 0:
                break
            continue
        if m.turkish and m.lowercase:
            if c == 0x130:
                c = 0x69      # İ -> i
                f = m.flags[c]
            elif c == 0x49:
                c = 0x131     # I -> ı
                f = m.flags[c]
        if m.cjk and (f & F_CJK):
            rc = flush_word(m, s, out)
            if rc == 0:
                rc = feed_mapped(m, s, out, c, base + i)
            if rc == 0:
                rc = flush_word(m, s, out)
        else:
            rc = feed_mapped(m, s, out, c, base + i)
        if rc != 0:
            break
    if rc == 0:
        rc = flush_word(m, s, out)
    return rc


cdef inline Py_ssize_t match_special(const Model* m, int kind, const char* text, Py_ssize_t i,
                                     Py_ssize_t n) noexcept nogil:
    """The special token spelled at ``text[i:]`` (the longest, as they are sorted), or -1."""
    cdef uint32_t c = read_cp(kind, text, i)
    cdef Py_ssize_t k, j, length
    cdef int64_t at
    if c < 0x10000:
        if not m.sp_first[c]:
            return -1
    elif not m.sp_astral:
        return -1
    for k in range(m.n_specials):
        length = m.sp_len[k]
        if length > n - i:
            continue
        at = m.sp_start[k]
        for j in range(length):
            if read_cp(kind, text, i + j) != m.sp_chars[at + j]:
                break
        else:
            return k
    return -1


cdef int encode_segments(const Model* m, Scratch* s, int kind, const char* text, Py_ssize_t n, int mode,
                         Output* out, Py_ssize_t* found) noexcept nogil:
    """``encode_text`` with special-token text handled by ``mode``, leftmost-longest (as
    ``reference.wordpiece.split_special_tokens``). 0; -1 when memory runs out; 1 when
    ``mode`` is MODE_CHECK and a special token is at ``found[0]`` (nothing encoded)."""
    cdef Py_ssize_t i = 0, start = 0, k
    cdef const char* hit
    if mode != MODE_ORDINARY and m.n_specials:
        while i < n:
            if kind == 1 and m.sp_lead >= 0:   # jump to the next possible start ("[" for BERT)
                hit = <const char*>memchr(text + i, m.sp_lead, n - i)
                if hit == NULL:
                    break
                i = hit - text
            k = match_special(m, kind, text, i, n)
            if k < 0:
                i += 1
                continue
            if mode == MODE_CHECK:
                found[0] = i
                return 1
            if i > start and encode_text(m, s, kind, text + start * kind, i - start, start, out) != 0:
                return -1
            if emit(out, m.sp_id[k], i, i + m.sp_len[k]) != 0:
                return -1
            i += m.sp_len[k]
            start = i
    if start < n:
        return encode_text(m, s, kind, text + start * kind, n - start, start, out)
    return 0


cdef int encode_fresh(const Model* m, int kind, const char* text, Py_ssize_t n, int mode, Output* out,
                      Py_ssize_t* found) noexcept nogil:
    """``encode_segments`` with a scratch buffer of its own (for calls that cannot use
    the core's shared one); -1 when memory runs out."""
    cdef Scratch s
    cdef int rc = scratch_open(m, &s)
    if rc == 0:
        rc = encode_segments(m, &s, kind, text, n, mode, out, found)
        scratch_close(&s)
    return rc


cdef inline void output_init(Output* o, bint offsets) noexcept nogil:
    o.ids.data = NULL; o.ids.size = 0; o.ids.cap = 0
    o.starts.data = NULL; o.starts.size = 0; o.starts.cap = 0
    o.ends.data = NULL; o.ends.size = 0; o.ends.cap = 0
    o.want_offsets = offsets
    o.error = 0


# ---------------------------------------------------------------------------------------
# Threads
# ---------------------------------------------------------------------------------------

cdef struct Job:
    const Model* model
    const char* const* texts    # each text's str buffer, read in place (no copy)
    const int* kinds
    const Py_ssize_t* lengths
    Py_ssize_t first
    Py_ssize_t last
    Output* outs
    int mode
    Py_ssize_t found_text       # MODE_CHECK: the first text of the job holding a special token
    Py_ssize_t found_pos
    int error


cdef void* run_job(void* arg) noexcept nogil:
    cdef Job* job = <Job*>arg
    cdef Py_ssize_t t, pos = 0
    cdef Scratch s
    cdef int rc
    if scratch_open(job.model, &s) != 0:
        job.error = 1
        return NULL
    for t in range(job.first, job.last):
        rc = encode_segments(job.model, &s, job.kinds[t], job.texts[t], job.lengths[t], job.mode,
                             &job.outs[t], &pos)
        if rc == 1:
            job.found_text = t
            job.found_pos = pos
            break
        if rc != 0:
            job.error = 1
            break
    scratch_close(&s)
    return NULL


cdef void run_one(void* payload, Py_ssize_t j, Py_ssize_t slot, void* state) noexcept nogil:
    """The shared runner's callback: job j of the Job array payload."""
    run_job(&(<Job*>payload)[j])


cdef void free_output(Output* o) noexcept nogil:
    free(o.ids.data)
    free(o.starts.data)
    free(o.ends.data)
    o.ids.data = NULL
    o.starts.data = NULL
    o.ends.data = NULL


cdef class _Batch:
    """The native side of one batch call: text buffers, outputs, and the threads' run.

    Threads follow the BPE rule (``fastbpe._runner.batch_threads``): ``num_threads`` is an
    upper bound, about one thread per 16,384 code points, no more than the usable CPUs;
    each thread takes a run of consecutive texts holding about the same number of
    code points."""

    cdef const char** texts
    cdef int* kinds
    cdef Py_ssize_t* lengths
    cdef Output* outs
    cdef Py_ssize_t n
    cdef list _refs

    def __cinit__(self, list texts, bint offsets):
        cdef Py_ssize_t i, n = len(texts)
        self.n = 0
        self.texts = <const char**>malloc((n + 1) * sizeof(char*))
        self.kinds = <int*>malloc((n + 1) * sizeof(int))
        self.lengths = <Py_ssize_t*>malloc((n + 1) * sizeof(Py_ssize_t))
        self.outs = <Output*>malloc((n + 1) * sizeof(Output))
        if self.texts == NULL or self.kinds == NULL or self.lengths == NULL or self.outs == NULL:
            raise MemoryError()
        self._refs = texts     # keeps every str (and its buffer) alive
        for i in range(n):
            x = texts[i]
            if type(x) is not str and not isinstance(x, str):
                raise TypeError(f"texts[{i}] is {type(x).__name__}, expected str")
            self.texts[i] = <const char*>PyUnicode_DATA(x)
            self.kinds[i] = PyUnicode_KIND(x)
            self.lengths[i] = len(<str>x)
            output_init(&self.outs[i], offsets)
            self.n = i + 1

    def __dealloc__(self):
        cdef Py_ssize_t i
        if self.outs != NULL:
            for i in range(self.n):
                free_output(&self.outs[i])
        free(self.texts)
        free(self.kinds)
        free(self.lengths)
        free(self.outs)

    cdef int run(self, const Model* model, int num_threads, int mode, Py_ssize_t* found_text,
                 Py_ssize_t* found_pos) except -1:
        cdef Py_ssize_t total = 0, t, acc = 0, k
        cdef int n_thr
        for t in range(self.n):
            total += self.lengths[t]
        n_thr = <int>min(<Py_ssize_t>_batch_threads(num_threads, total), max(self.n, 1))
        cdef Job* jobs = <Job*>malloc(n_thr * sizeof(Job))
        if jobs == NULL:
            raise MemoryError()
        t = 0
        for k in range(n_thr):
            jobs[k].model = model
            jobs[k].texts = self.texts
            jobs[k].kinds = self.kinds
            jobs[k].lengths = self.lengths
            jobs[k].outs = self.outs
            jobs[k].mode = mode
            jobs[k].found_text = -1
            jobs[k].found_pos = 0
            jobs[k].error = 0
            jobs[k].first = t
            if k == n_thr - 1:
                t = self.n
            else:   # up to about (k + 1) / n_thr of the code points, at least one text
                while t < self.n and (t == jobs[k].first or acc + self.lengths[t] <= total * (k + 1) // n_thr):
                    acc += self.lengths[t]
                    t += 1
            jobs[k].last = t
        cdef Runner runner
        runner.payload = jobs
        runner.begin = NULL
        runner.run = run_one
        runner.end = NULL
        runner.n_jobs = n_thr
        runner.notify = False
        with nogil:
            run_jobs(&runner, n_thr)    # fastbpe._runner: this thread is one of n_thr
        found_text[0] = -1
        failed = False
        for k in range(n_thr):
            failed = failed or jobs[k].error
            if jobs[k].found_text >= 0 and found_text[0] < 0:
                found_text[0] = jobs[k].found_text   # jobs are in text order: the first is the first
                found_pos[0] = jobs[k].found_pos
        free(jobs)
        if failed:
            raise MemoryError("out of memory while encoding")
        return 0


# ---------------------------------------------------------------------------------------
# Python-facing core
# ---------------------------------------------------------------------------------------

def build_linmaxmatch(vocab, str prefix):
    """Trie, failure links and failure pops (Song et al. 2021, Algorithm 2) as flat arrays.

    Node 0 is the word-start root (all tokens, spelled in full); node 1 the suffix root
    (tokens starting with ``prefix``, spelled without it). For a node v reached from u by c:
    a token node gets fail(v) = suffix root and pops [token]; otherwise it inherits u's pops
    and walks u's failure chain, collecting pops, until some node has an edge c.
    """
    children = [{}, {}]
    token_at = [-1, -1]
    parent = [-1, -1]
    edge = [0, 0]

    def insert(root, s, tid):
        v = root
        for ch in s:
            c = ord(ch)
            nxt = children[v].get(c)
            if nxt is None:
                nxt = len(children)
                children.append({})
                token_at.append(-1)
                parent.append(v)
                edge.append(c)
                children[v][c] = nxt
            v = nxt
        token_at[v] = tid

    # tokens are numbered densely in the vocabulary's iteration order (ids may be sparse)
    for tid, tok in enumerate(vocab):
        if tok:
            insert(0, tok, tid)
        if prefix and tok.startswith(prefix) and len(tok) > len(prefix):
            insert(1, tok[len(prefix):], tid)
    n = len(children)
    fail = [-1] * n
    pops = [()] * n
    order = []
    queue = [0, 1]
    head = 0
    while head < len(queue):  # BFS, so a node's failure target is finished before it
        v = queue[head]
        head += 1
        order.append(v)
        queue.extend(children[v].values())
    for v in order:
        if v < 2:
            continue
        if token_at[v] >= 0:
            fail[v] = 1
            pops[v] = (token_at[v],)
            continue
        u = parent[v]
        c = edge[v]
        z = fail[u]
        collected = list(pops[u])
        while z >= 0 and c not in children[z]:
            collected.extend(pops[z])
            z = fail[z]
        if z >= 0:
            fail[v] = children[z][c]
        pops[v] = tuple(collected)
    edge_start = np.zeros(n + 1, dtype=np.int64)
    for v in range(n):
        edge_start[v + 1] = edge_start[v] + len(children[v])
    edge_char = np.empty(edge_start[n], dtype=np.uint32)
    edge_child = np.empty(edge_start[n], dtype=np.int32)
    pop_start = np.zeros(n + 1, dtype=np.int64)
    pop_list = []
    for v in range(n):
        items = sorted(children[v].items())
        s0 = edge_start[v]
        for j, (c, w) in enumerate(items):
            edge_char[s0 + j] = c
            edge_child[s0 + j] = w
        pop_list.extend(pops[v])
        pop_start[v + 1] = len(pop_list)
    root_bmp = np.full(0x10000, -1, dtype=np.int32)
    suffix_bmp = np.full(0x10000, -1, dtype=np.int32)
    for table, root in ((root_bmp, 0), (suffix_bmp, 1)):
        for c, w in children[root].items():
            if c < 0x10000:
                table[c] = w
    return dict(
        edge_start=edge_start, edge_char=edge_char, edge_child=edge_child,
        edges=(edge_char.astype(np.uint64) << np.uint64(32)) | edge_child.astype(np.uint32).astype(np.uint64),
        fail=np.array(fail, dtype=np.int32), pop_start=pop_start,
        pop_ids=np.array(pop_list, dtype=np.int32), root_child_bmp=root_bmp, suffix_child_bmp=suffix_bmp,
    )


@cython.final
cdef class WordPieceCore:
    """Native tokenizer state. Built once from a validated vocabulary and options."""

    cdef Model model
    cdef object _keep   # numpy arrays the Model points into
    cdef readonly int32_t unk_id
    cdef list _special_names   # special token k's text, for the error message
    # what ``encode_ids`` / ``encode_batch_ids`` do around the ids (see ``configure``)
    cdef object _wrap          # int32 array: prefix ids then suffix ids
    cdef const int32_t* prefix
    cdef const int32_t* suffix
    cdef Py_ssize_t n_prefix, n_suffix
    cdef Py_ssize_t budget_special, budget_plain   # ids kept of the text; -1: all
    cdef bint trunc_left, trunc_only_second
    cdef int pad_mode                              # -1 none, 0 longest of the batch, 1 fixed
    cdef Py_ssize_t pad_length, pad_multiple
    cdef bint pad_left
    cdef int32_t pad_id
    cdef list _ints           # the int object of each id below n_ints: no allocation per id
    cdef Py_ssize_t n_ints
    # the buffers of one short text, reused while the GIL is held (no malloc per call);
    # ``busy`` while they are in use: building the list may run the garbage collector,
    # whose finalizers (or a thread they let run) could encode with this core again
    cdef Scratch scratch
    cdef Output out
    cdef bint busy

    def __cinit__(self, dict vocab, *, str unk_token, str prefix, int max_chars, bint lowercase,
                  bint strip_accents, bint clean_text, bint cjk, bint turkish=False,
                  bint words_only=False, specials=()):
        flags, ccc, nfd_index, lower_index, data = unicode_tables()
        trie = build_linmaxmatch(vocab, prefix)
        # The first token of a word comes from the word-start trie, which spells every
        # token in full (prefix included); later ones come from the suffix trie, which
        # spells continuation tokens without the prefix. Offsets need both widths.
        tok_chars = np.zeros(len(vocab) + 1, dtype=np.int32)
        tok_full_chars = np.zeros(len(vocab) + 1, dtype=np.int32)
        tok_id = np.zeros(len(vocab) + 1, dtype=np.int32)
        for dense, (tok, tid) in enumerate(vocab.items()):
            tok_id[dense] = tid
            tok_full_chars[dense] = len(tok)
            is_cont = prefix and tok.startswith(prefix) and len(tok) > len(prefix)
            tok_chars[dense] = len(tok) - len(prefix) if is_cont else len(tok)
        self._keep = (flags, ccc, nfd_index, lower_index, data, trie, tok_chars, tok_full_chars, tok_id)
        self.unk_id = vocab[unk_token]
        cdef cnp.uint8_t[::1] fl = flags
        cdef cnp.uint8_t[::1] cc = ccc
        cdef cnp.int32_t[::1] ni = nfd_index
        cdef cnp.int32_t[::1] li = lower_index
        cdef cnp.uint32_t[::1] md = data
        cdef cnp.int64_t[::1] es = trie["edge_start"]
        cdef cnp.uint64_t[::1] eg = trie["edges"]
        cdef cnp.int32_t[::1] fa = trie["fail"]
        cdef cnp.int64_t[::1] ps = trie["pop_start"]
        cdef cnp.int32_t[::1] pi = trie["pop_ids"]
        cdef cnp.int32_t[::1] rb = trie["root_child_bmp"]
        cdef cnp.int32_t[::1] sb = trie["suffix_child_bmp"]
        cdef cnp.int32_t[::1] tc = tok_chars
        cdef cnp.int32_t[::1] tf = tok_full_chars
        cdef cnp.int32_t[::1] ti = tok_id
        self.model.flags = &fl[0]
        self.model.ccc = &cc[0]
        self.model.nfd_index = &ni[0]
        self.model.lower_index = &li[0]
        self.model.map_data = &md[0]
        self.model.edge_start = <const int64_t*>&es[0]
        self.model.edges = <const uint64_t*>&eg[0] if eg.shape[0] else NULL
        self.model.fail = &fa[0]
        self.model.pop_start = <const int64_t*>&ps[0]
        self.model.pop_ids = &pi[0] if pi.shape[0] else NULL
        self.model.root_child_bmp = &rb[0]
        self.model.suffix_child_bmp = &sb[0]
        self.model.tok_chars = &tc[0]
        self.model.tok_full_chars = &tf[0]
        self.model.tok_id = &ti[0]
        self.model.suffix_root = 1
        self.model.clean_text = clean_text
        self.model.cjk = cjk
        self.model.strip_accents = strip_accents
        self.model.lowercase = lowercase
        self.model.turkish = turkish
        self.model.max_chars = max_chars
        self.model.unk_id = self.unk_id
        self.model.words_only = words_only
        self._set_specials(specials)
        output_init(&self.out, False)
        if scratch_open(&self.model, &self.scratch) != 0:
            raise MemoryError()
        self.configure([], [], -1, -1)
        top = max(vocab.values(), default=0) + 1
        self._ints = list(range(top)) if top <= (1 << 20) else []
        self.n_ints = len(self._ints)

    def __dealloc__(self):
        scratch_close(&self.scratch)
        free_output(&self.out)

    def _set_specials(self, specials):
        """Special tokens matched in raw text: (text, id) pairs, tried longest first."""
        items = sorted(((str(t), int(i)) for t, i in specials if t), key=lambda x: (-len(x[0]), x[0]))
        self._special_names = [t for t, _ in items]
        starts = np.zeros(len(items) + 1, dtype=np.int64)
        lens = np.zeros(len(items) + 1, dtype=np.int32)
        ids = np.zeros(len(items) + 1, dtype=np.int32)
        first = np.zeros(0x10000, dtype=np.uint8)
        astral = False
        for k, (t, i) in enumerate(items):
            starts[k + 1] = starts[k] + len(t)
            lens[k] = len(t)
            ids[k] = i
            if ord(t[0]) < 0x10000:
                first[ord(t[0])] = 1
            else:
                astral = True
        chars = np.array([ord(ch) for t, _ in items for ch in t] + [0], dtype=np.uint32)
        self._keep = self._keep + (starts, lens, ids, chars, first)
        cdef cnp.int64_t[::1] st = starts
        cdef cnp.int32_t[::1] ln = lens
        cdef cnp.int32_t[::1] di = ids
        cdef cnp.uint32_t[::1] cv = chars
        cdef cnp.uint8_t[::1] fi = first
        self.model.n_specials = len(items)
        self.model.sp_start = <const int64_t*>&st[0]
        self.model.sp_len = &ln[0]
        self.model.sp_id = &di[0]
        self.model.sp_chars = &cv[0]
        self.model.sp_first = &fi[0]
        self.model.sp_astral = astral
        leads = {t[0] for t, _ in items}
        lead = ord(leads.pop()) if len(leads) == 1 else -1
        self.model.sp_lead = lead if lead < 256 else -1   # memchr finds one byte

    def configure(self, prefix, suffix, Py_ssize_t budget_special, Py_ssize_t budget_plain, *,
                  bint trunc_left=False, bint trunc_only_second=False, int pad_mode=-1,
                  Py_ssize_t pad_length=0, Py_ssize_t pad_multiple=0, bint pad_left=False, int32_t pad_id=0):
        """What ``encode_ids`` adds and cuts, checked by the caller (``fastbpe.WordPiece``):
        ``prefix`` / ``suffix`` ids around the text with special tokens; at most
        ``budget_*`` ids of the text itself (-1: no limit), cut on the left with
        ``trunc_left``; ``trunc_only_second``: a single text that needs cutting is an
        error (HF's only_second strategy); then padding (``reference.wordpiece.Padding``)."""
        wrap = np.array(list(prefix) + list(suffix) + [0], dtype=np.int32)
        cdef cnp.int32_t[::1] w = wrap
        self._wrap = wrap
        self.n_prefix = len(prefix)
        self.n_suffix = len(suffix)
        self.prefix = &w[0]
        self.suffix = &w[0] + self.n_prefix
        self.budget_special = budget_special
        self.budget_plain = budget_plain
        self.trunc_left = trunc_left
        self.trunc_only_second = trunc_only_second
        self.pad_mode = pad_mode
        self.pad_length = pad_length
        self.pad_multiple = pad_multiple
        self.pad_left = pad_left
        self.pad_id = pad_id

    # -- building the Python lists ---------------------------------------------------------
    cdef inline int put(self, list out, Py_ssize_t pos, int32_t x) except -1:
        """out[pos] = the int x (a new reference; the cached object when there is one)."""
        cdef PyObject* o
        if 0 <= x < self.n_ints:
            o = get_item_raw(self._ints, x)
            incref_raw(o)
        else:
            o = long_raw(x)
            if o == NULL:
                raise MemoryError()
        set_item_raw(out, pos, o)
        return 0

    cdef Py_ssize_t kept(self, Py_ssize_t n, bint add_special, Py_ssize_t budget) except -1:
        """How many of the text's n ids survive truncation."""
        if budget == -2:
            budget = self.budget_special if add_special else self.budget_plain
        if budget < 0 or n <= budget:
            return n
        if self.trunc_only_second:
            raise ValueError("truncation strategy 'only_second' needs a pair of texts")
        return budget

    cdef Py_ssize_t padded(self, Py_ssize_t longest):
        """The length rows are padded to, given the longest row of the batch; 0: none."""
        cdef Py_ssize_t n
        if self.pad_mode < 0:
            return 0
        n = self.pad_length if self.pad_mode == 1 else longest
        if self.pad_multiple > 0 and n % self.pad_multiple:
            n += self.pad_multiple - n % self.pad_multiple
        return n

    cdef inline void pad_run(self, list out, Py_ssize_t pos, Py_ssize_t stop) except *:
        """out[pos:stop] = the pad id."""
        if pos >= stop:
            return
        self.put(out, pos, self.pad_id)
        cdef PyObject* o = get_item_raw(out, pos)
        for pos in range(pos + 1, stop):
            incref_raw(o)
            set_item_raw(out, pos, o)

    cdef list row(self, const int32_t* ids, Py_ssize_t n, Py_ssize_t keep, bint add_special, Py_ssize_t target):
        """[prefix] + the kept ids + [suffix], padded to ``target``, as a new list."""
        cdef Py_ssize_t wrap = (self.n_prefix + self.n_suffix) if add_special else 0
        cdef Py_ssize_t total = keep + wrap, size = max(total, target), pos = 0, i
        cdef Py_ssize_t start = (n - keep) if self.trunc_left else 0
        cdef list out = PyList_New(size)
        if self.pad_left:
            self.pad_run(out, 0, size - total)
            pos = size - total
        if add_special:
            for i in range(self.n_prefix):
                self.put(out, pos, self.prefix[i])
                pos += 1
        for i in range(start, start + keep):
            self.put(out, pos, ids[i])
            pos += 1
        if add_special:
            for i in range(self.n_suffix):
                self.put(out, pos, self.suffix[i])
                pos += 1
        self.pad_run(out, pos, size)
        return out

    cdef int raise_found(self, str text, Py_ssize_t pos, index) except -1:
        """tiktoken's error for the special token the kernel found at ``pos``."""
        cdef Py_ssize_t k = match_special(&self.model, PyUnicode_KIND(text), <const char*>PyUnicode_DATA(text),
                                          pos, len(text))
        raise_disallowed_special_token(self._special_names[k], pos, index)
        return -1

    # -- encoding ----------------------------------------------------------------------------
    def encode_ids(self, str text, int mode, bint add_special, Py_ssize_t budget=-2):
        """The ids ``fastbpe.WordPiece.encode`` returns, in one call: special-token text by
        ``mode`` (0 ordinary, 1 split, 2 error), truncation to ``budget`` ids (-2: as
        configured, -1: none), the special tokens around, padding. Short texts keep the
        GIL and reuse the core's buffers; long ones release it."""
        cdef Py_ssize_t n = len(text), found = 0, keep
        cdef int kind = PyUnicode_KIND(text)
        cdef const char* data = <const char*>PyUnicode_DATA(text)
        cdef Py_ssize_t wrap = (self.n_prefix + self.n_suffix) if add_special else 0
        cdef int rc
        cdef Output local
        if n <= SHORT_TEXT and not self.busy:
            self.busy = True
            try:
                self.out.ids.size = 0
                rc = encode_segments(&self.model, &self.scratch, kind, data, n, mode, &self.out, &found)
                if rc == 0:
                    keep = self.kept(self.out.ids.size, add_special, budget)
                    return self.row(self.out.ids.data, self.out.ids.size, keep, add_special, self.padded(keep + wrap))
            finally:
                self.busy = False
        else:
            output_init(&local, False)
            try:
                with nogil:
                    rc = encode_fresh(&self.model, kind, data, n, mode, &local, &found)
                if rc == 0:
                    keep = self.kept(local.ids.size, add_special, budget)
                    return self.row(local.ids.data, local.ids.size, keep, add_special, self.padded(keep + wrap))
            finally:
                free_output(&local)
        if rc == 1:
            self.raise_found(text, found, None)
        raise MemoryError("out of memory while encoding")

    def encode_batch_ids(self, list texts, int num_threads, int mode, bint add_special, Py_ssize_t budget=-2):
        """``encode_ids`` of every text, on native threads (``_Batch``); padding to the
        longest row of the batch when so configured, as HF's ``encode_batch``."""
        cdef _Batch batch = _Batch(texts, False)
        cdef Py_ssize_t found_text = -1, found_pos = 0, t, longest = 0, target
        cdef Py_ssize_t wrap = (self.n_prefix + self.n_suffix) if add_special else 0
        batch.run(&self.model, num_threads, mode, &found_text, &found_pos)
        if found_text >= 0:
            self.raise_found(texts[found_text], found_pos, found_text)
        keeps = np.empty(batch.n, dtype=np.intp)
        cdef Py_ssize_t[::1] kv = keeps
        for t in range(batch.n):
            kv[t] = self.kept(batch.outs[t].ids.size, add_special, budget)
            longest = max(longest, kv[t] + wrap)
        target = self.padded(longest)
        return [self.row(batch.outs[t].ids.data, batch.outs[t].ids.size, kv[t], add_special, target)
                for t in range(batch.n)]

    def encode(self, str text, bint offsets=False, int64_t base=0, int mode=MODE_ORDINARY):
        """Ids (list) of ``text``, or (ids, starts, ends) lists with ``offsets=True``;
        offsets are ``base`` + character index."""
        cdef Output out
        cdef int rc
        cdef Py_ssize_t n = len(text), found = 0, i
        cdef int kind = PyUnicode_KIND(text)
        cdef const char* data = <const char*>PyUnicode_DATA(text)
        output_init(&out, offsets)
        try:
            with nogil:
                rc = encode_fresh(&self.model, kind, data, n, mode, &out, &found)
            if rc == 1:
                self.raise_found(text, found, None)
            if rc != 0:
                raise MemoryError("out of memory while encoding")
            ids = [out.ids.data[i] for i in range(out.ids.size)]
            if not offsets:
                return ids
            return (ids, [out.starts.data[i] + base for i in range(out.starts.size)],
                    [out.ends.data[i] + base for i in range(out.ends.size)])
        finally:
            free_output(&out)

    def encode_batch(self, list texts, int num_threads=1, bint offsets=False, int mode=MODE_ORDINARY):
        """Encode many texts on native threads (``_Batch``).

        Returns (ids int32, starts int64, ends int64, row_splits int64[len+1]); text t's
        tokens are ids[row_splits[t]:row_splits[t+1]]. Offsets are empty unless asked for.
        """
        cdef _Batch batch = _Batch(texts, offsets)
        cdef Py_ssize_t found_text = -1, found_pos = 0, t, total = 0
        batch.run(&self.model, num_threads, mode, &found_text, &found_pos)
        if found_text >= 0:
            self.raise_found(texts[found_text], found_pos, found_text)
        row_splits = np.zeros(batch.n + 1, dtype=np.int64)
        for t in range(batch.n):
            total += batch.outs[t].ids.size
            row_splits[t + 1] = total
        ids = np.empty(total, dtype=np.int32)
        starts = np.empty(total if offsets else 0, dtype=np.int64)
        ends = np.empty(total if offsets else 0, dtype=np.int64)
        _fill(ids, starts, ends, batch.outs, batch.n, offsets)
        return ids, starts, ends, row_splits


def words_text(self_core, list texts, int num_threads=1):
    """Normalised, pre-tokenised words of ``texts`` as one str, each word followed by " ".

    Needs a core built with ``words_only=True``; used to count words for training.
    """
    ids, _, _, _ = self_core.encode_batch(texts, num_threads, False)
    return ids.astype(np.uint32).tobytes().decode("utf-32-le", "surrogatepass")


cdef _fill(cnp.int32_t[::1] ids, cnp.int64_t[::1] starts, cnp.int64_t[::1] ends,
           Output* outs, Py_ssize_t n_texts, bint offsets):
    cdef Py_ssize_t t, pos = 0, m
    with nogil:
        for t in range(n_texts):
            m = outs[t].ids.size
            if m:
                memcpy(&ids[pos], outs[t].ids.data, m * sizeof(int32_t))
                if offsets:
                    memcpy(&starts[pos], outs[t].starts.data, m * sizeof(int64_t))
                    memcpy(&ends[pos], outs[t].ends.data, m * sizeof(int64_t))
            pos += m
