"""Jobs (see ``_jobs.pxd``): encoding one text without the GIL, and cutting long texts
into pieces."""
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memchr, memcpy

from fastbpe._chunk cimport bpe_chunk, encode_chunk
from fastbpe._chunk_block cimport encode_blocks
from fastbpe._chunk_cache cimport new_chunk_cache, return_chunk_cache
from fastbpe._common cimport (ERR_BYTE, ERR_DISALLOWED, ERR_NOMEM, ERR_NONE, ERR_SURROGATE,
                              ERR_TOO_LONG, ERR_UTF8)
from fastbpe._out cimport out_free, out_init, out_push
from fastbpe._pretokenize cimport FbpeWin, fbpe_win_reset, split_next
from fastbpe._specials cimport find_special

# fix_surrogates: one copy, the spec's; only the rare retry of a text with a lone
# surrogate calls it, under the GIL
from fastbpe.reference.core import fix_surrogates

import numpy as np
cimport numpy as cnp

cnp.import_array()

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL
    object PyBytes_FromStringAndSize(const char* s, Py_ssize_t n)
    char* PyBytes_AS_STRING(object b)

cdef extern from "fbe_pyunicode.h":
    int FBE_UNICODE_READY(object o) except -1
    bint PyUnicode_IS_ASCII(object o)
    int PyUnicode_KIND(object o)
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    uint32_t PyUnicode_READ(int kind, const void* data, Py_ssize_t index) nogil

cdef extern from "fbe_utf8.h" nogil:
    Py_ssize_t fbe_to_utf8(const void* src, int kind, Py_ssize_t n, unsigned char* dst,
                           int simd) noexcept
    void fbe_utf8_init() noexcept
    int fbe_utf8_cpu
    Py_ssize_t fbe_utf8_skip_valid(const uint8_t* t, Py_ssize_t n) noexcept

fbe_utf8_init()     # the conversion's shuffle tables, and whether this CPU has SSSE3

#: Whether this CPU has the SSSE3 conversion (Tuning.utf8_simd only matters if so).
UTF8_SIMD_CPU = bool(fbe_utf8_cpu)


def _utf8_of(str text, bint simd=True):
    """Testing hook: the UTF-8 conversion that workers run on a str (fbe_to_utf8), as
    bytes; ValueError at a lone surrogate."""
    FBE_UNICODE_READY(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef int kind = PyUnicode_KIND(text)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, n * (kind + 1) + 1)
    cdef Py_ssize_t size = fbe_to_utf8(PyUnicode_DATA(text), kind, n,
                                       <unsigned char*>PyBytes_AS_STRING(out), simd)
    if size < 0:
        raise ValueError("lone surrogate")
    return out[:size]


cdef void* thread_begin(void* payload) noexcept nogil:
    return new_chunk_cache((<Context*>payload).cache_pool)


cdef void thread_run(void* payload, Py_ssize_t j, Py_ssize_t slot, void* state) noexcept nogil:
    cdef Context* ctx = <Context*>payload
    run_job(ctx, &ctx.jobs[j], <CacheEntry*>state, &ctx.arenas[slot])


cdef void thread_end(void* payload, void* state) noexcept nogil:
    return_chunk_cache((<Context*>payload).cache_pool, <CacheEntry*>state,
                       (<Context*>payload).tuning.kept_chunk_caches)


cdef void context_bind(Context* ctx) noexcept nogil:
    ctx.runner.payload = ctx
    ctx.runner.begin = thread_begin
    ctx.runner.run = thread_run
    ctx.runner.end = thread_end


cdef int encode_segment(const Context* ctx, Job* job, OutBuf* out, Py_ssize_t start,
                        Py_ssize_t end, Py_ssize_t* span_i, CacheEntry* cache) noexcept nogil:
    cdef const unsigned char* text = job.text
    cdef Py_ssize_t s, e, local
    cdef int rc
    cdef FbpeWin win
    if ctx.pattern >= 0 and ctx.tuning.block_chunks > 0:
        rc = encode_blocks(ctx.vocab, ctx.pattern, text, start, end, out, &local, cache,
                           ctx.seeds, ctx.tuning)
        if rc != ERR_NONE:
            job.err_pos = local
        return rc
    if ctx.pattern >= 0:
        fbpe_win_reset(&win)
        s = start
        while s < end:
            e = split_next(&win, ctx.pattern, text, s, end)
            rc = bpe_chunk(ctx.vocab, text + s, e - s, out, &local, cache, ctx.tuning)
            if rc != ERR_NONE:
                job.err_pos = s + local
                return rc
            s = e
        return ERR_NONE
    while span_i[0] < job.n_spans and job.spans[2 * span_i[0]] < end:
        s = job.spans[2 * span_i[0]]
        e = job.spans[2 * span_i[0] + 1]
        span_i[0] += 1
        if e <= s:
            continue
        # the regex path: a call (keeping bpe_chunk's one call site above, in the hot
        # loop, where the compiler then inlines it whole)
        rc = encode_chunk(ctx.vocab, text + s, e - s, out, &local, cache, ctx.tuning)
        if rc != ERR_NONE:
            job.err_pos = s + local
            return rc
    return ERR_NONE


cdef int job_to_utf8(Job* job, const Tuning* tuning) noexcept nogil:
    """UTF-8 from the str's PEP 393 buffer, on the worker thread: converting many texts
    under the GIL would serialize batch encoding (and CPython's own conversion would
    also cache a UTF-8 copy inside every str). One pass into a buffer sized for the
    worst case (2, 3 or 4 bytes per code point for 1-, 2- and 4-byte kinds)."""
    cdef Py_ssize_t size
    cdef unsigned char* d = <unsigned char*>malloc(job.src_len * (job.src_kind + 1) + 1)
    cdef unsigned char* fit
    if d == NULL:
        return ERR_NOMEM
    size = fbe_to_utf8(job.src, job.src_kind, job.src_len, d, tuning.utf8_simd)
    if size < 0:
        free(d)
        return ERR_SURROGATE
    if size < job.src_len * job.src_kind:    # mostly narrower than the worst case
        fit = <unsigned char*>realloc(d, size + 1)
        if fit != NULL:
            d = fit
    job.owned = d
    job.text = d
    job.n = size
    return ERR_NONE


cdef void run_job(const Context* ctx, Job* job, CacheEntry* cache,
                  OutArena* arena) noexcept nogil:
    """Encode one job; its output comes from arena (NULL: malloc)."""
    # The output grows in a local copy, stored back once: neighbouring jobs' fields can
    # share a cache line, and another thread may be writing its job right next to it.
    cdef OutBuf out = job.out
    cdef Py_ssize_t s, e
    cdef uint32_t tok
    out.arena = arena
    if job.text == NULL:
        job.err = job_to_utf8(job, ctx.tuning)
        if job.err != ERR_NONE:
            return
    elif job.check_utf8:
        s = utf8_invalid_at(job.text, job.n)
        if s >= 0:
            job.err = ERR_UTF8
            job.err_pos = s
            return
    # tiktoken checks for disallowed special tokens before encoding. On valid UTF-8 a
    # byte match is a match of the str (no character's bytes start inside another's).
    if (ctx.disallowed != NULL and not job.no_check
            and find_special(ctx.disallowed, job.text, 0, job.n, &s, &e, &tok)):
        job.err = ERR_DISALLOWED
        job.err_pos = s
        return
    job.err = encode_job(ctx, job, &out, cache)
    job.out = out


cdef int encode_job(const Context* ctx, Job* job, OutBuf* out, CacheEntry* cache) noexcept nogil:
    cdef Py_ssize_t pos = 0, s = 0, e = 0, span_i = 0
    cdef uint32_t tok = 0
    cdef bint found
    cdef int rc
    while True:
        found = find_special(ctx.specials, job.text, pos, job.n, &s, &e, &tok)
        rc = encode_segment(ctx, job, out, pos, s if found else job.n, &span_i, cache)
        if rc != ERR_NONE:
            return rc
        if not found:
            return ERR_NONE
        if out_push(out, tok) < 0:
            return ERR_NOMEM
        pos = e


def _cut_points(str text):
    """Testing hook: every position at which next_cut would cut text."""
    FBE_UNICODE_READY(text)
    cdef const void* data = PyUnicode_DATA(text)
    cdef int kind = PyUnicode_KIND(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0
    cuts = []
    while True:
        i = next_cut(data, kind, i + 1, n)
        if i >= n:
            return cuts
        cuts.append(i)


cdef inline bint plain_char(uint32_t c) noexcept nogil:
    """Surely not whitespace (\\s) in any Unicode version: printable ASCII other than the
    space, or above U+00A0 outside the other places Unicode puts spaces (U+1680, the
    General Punctuation block, U+3000, U+FEFF). Conservative on purpose: a false "no"
    only costs a cut."""
    if c < 0x80:
        return 0x21 <= c <= 0x7E
    return (c > 0xA0 and c != 0x1680 and not (0x2000 <= c <= 0x206F) and c != 0x3000
            and c != 0xFEFF)


cdef Py_ssize_t next_cut(const void* data, int kind, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    """The first cut at or after code point i of data[0:n], or n if there is none.

    A cut is a position i with data[i-1] == "\\n" and data[i-2], data[i] plain (see
    plain_char), data[i] not "/". Encoding text[:i] and text[i:] as two texts then gives
    exactly the ids of text, for the GPT-2, cl100k and o200k patterns:
    - i is a chunk boundary. The chunk holding the "\\n" is whitespace only or, in
      cl100k/o200k, punctuation followed by newlines (o200k: also "/"): none of them
      goes on past a newline into a plain character that is not "/".
    - That chunk is the same when the text ends at i: a lone "\\n" (data[i-2] is not
      whitespace) is one chunk both before a plain character and at the end, under
      "\\s+(?!\\S)", "\\s*[\\r\\n]+" and "\\s++$" alike; earlier chunks end before it.
    - Chunks from i on do not depend on what comes before (no lookbehind, no "^").
    Special tokens are found per piece, so a caller only cuts when no allowed special
    token contains "\\n" (a special token that spans i would hold data[i-1])."""
    cdef const uint8_t* p
    cdef const void* hit
    if i < 2:
        i = 2
    while i < n:
        if kind == 1:
            # newlines are rare next to the long runs in between: let memchr find them
            p = <const uint8_t*>data
            hit = memchr(p + i - 1, 10, n - i)          # data[i-1 .. n-2]
            if hit == NULL:
                return n
            i = <const uint8_t*>hit - p + 1
        elif PyUnicode_READ(kind, data, i - 1) != 10:
            i += 1
            continue
        if (plain_char(PyUnicode_READ(kind, data, i - 2)) and plain_char(PyUnicode_READ(kind, data, i))
                and PyUnicode_READ(kind, data, i) != 0x2F):
            return i
        i += 1
    return n


cdef Py_ssize_t utf8_invalid_at(const uint8_t* t, Py_ssize_t n) noexcept nogil:
    """Offset of the first byte that makes t[:n] invalid UTF-8 (as CPython's strict
    decoder sees it: no overlongs, no surrogates, nothing above U+10FFFF), or -1: the
    SSSE3 check skips what it finds valid (where the CPU has it), the plain one the
    rest."""
    return utf8_invalid_from(t, n, fbe_utf8_skip_valid(t, n) if fbe_utf8_cpu else 0)


cdef Py_ssize_t utf8_invalid_from(const uint8_t* t, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """utf8_invalid_at, given that t[:i] is whole valid characters: the plain check from
    i, 8 ASCII bytes a step."""
    cdef uint64_t w
    cdef uint8_t c, c1
    while i < n:
        if i + 8 <= n:
            memcpy(&w, t + i, 8)
            if (w & 0x8080808080808080ULL) == 0:
                i += 8
                continue
        c = t[i]
        if c < 0x80:
            i += 1
        elif 0xC2 <= c <= 0xDF:
            if i + 1 >= n or (t[i + 1] & 0xC0) != 0x80:
                return i
            i += 2
        elif 0xE0 <= c <= 0xEF:
            if i + 2 >= n:
                return i
            c1 = t[i + 1]
            if (c1 & 0xC0) != 0x80 or (t[i + 2] & 0xC0) != 0x80:
                return i
            if (c == 0xE0 and c1 < 0xA0) or (c == 0xED and c1 > 0x9F):
                return i
            i += 3
        elif 0xF0 <= c <= 0xF4:
            if i + 3 >= n:
                return i
            c1 = t[i + 1]
            if ((c1 & 0xC0) != 0x80 or (t[i + 2] & 0xC0) != 0x80
                    or (t[i + 3] & 0xC0) != 0x80):
                return i
            if (c == 0xF0 and c1 < 0x90) or (c == 0xF4 and c1 > 0x8F):
                return i
            i += 4
        else:
            return i
    return -1


def _utf8_invalid_at(bytes data, bint simd=True):
    """Testing hook: utf8_invalid_at of data (simd False: the plain check alone)."""
    cdef Py_ssize_t r, n = len(data)
    cdef const uint8_t* t = <const uint8_t*>data
    with nogil:
        r = utf8_invalid_at(t, n) if simd else utf8_invalid_from(t, n, 0)
    return r


cdef inline uint32_t utf8_char_at(const uint8_t* p, Py_ssize_t i) noexcept nogil:
    """The code point of the valid UTF-8 char that starts at p[i]."""
    cdef uint32_t c = p[i]
    if c < 0x80:
        return c
    if c < 0xE0:
        return ((c & 0x1F) << 6) | (p[i + 1] & 0x3F)
    if c < 0xF0:
        return ((c & 0x0F) << 12) | (<uint32_t>(p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F)
    return (((c & 0x07) << 18) | (<uint32_t>(p[i + 1] & 0x3F) << 12)
            | (<uint32_t>(p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F))


cdef inline uint32_t char_at_within(const uint8_t* p, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    """utf8_char_at for a char that must end by n: 0 (not plain, so no cut) where a
    malformed one would run past it. Cuts are made before the pieces' bytes are checked
    (Job.check_utf8); on valid UTF-8 this is utf8_char_at."""
    cdef uint8_t c = p[i]
    cdef Py_ssize_t need = 1 if c < 0xC0 else 2 if c < 0xE0 else 3 if c < 0xF0 else 4
    return utf8_char_at(p, i) if i + need <= n else 0


cdef Py_ssize_t next_cut_utf8(const uint8_t* p, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    """next_cut for UTF-8 p[0:n], in bytes: the first cut at or after byte i (a char
    boundary), or n. The same rule on the same chars: p[i-1] is "\n", the chars that
    end at i-1 and start at i are plain, and the latter is not "/".

    On bytes that are not UTF-8 it reads nothing past n, and a cut still splits them
    where they are valid UTF-8 only if both sides are: an ASCII "\n" ends every valid
    sequence that holds it, so checking the pieces is checking the whole."""
    cdef const void* hit
    cdef Py_ssize_t j
    if i < 2:
        i = 2
    while i < n:
        hit = memchr(p + i - 1, 10, n - i)              # p[i-1 .. n-2]
        if hit == NULL:
            return n
        i = <const uint8_t*>hit - p + 1
        j = i - 2                                       # the char before the "\n" ends here
        while j > 0 and (p[j] & 0xC0) == 0x80:
            j -= 1
        if (p[i] != 0x2F and plain_char(char_at_within(p, j, n))
                and plain_char(char_at_within(p, i, n))):
            return i
        i += 1
    return n


def _cut_points_utf8(const unsigned char[::1] data):
    """Testing hook: every byte offset at which next_cut_utf8 would cut valid UTF-8."""
    cdef Py_ssize_t n = data.shape[0], i = 0
    cuts = []
    if n == 0:
        return cuts
    while True:
        i = next_cut_utf8(&data[0], i + 1, n)
        if i >= n:
            return cuts
        cuts.append(i)


cdef Py_ssize_t cut_job(Job* jobs, Py_ssize_t target) noexcept nogil:
    """Cut the text of jobs[0] (native pattern, prepared, not yet run) into pieces of
    about target code points at next_cut points, written to jobs[0], jobs[1], ...;
    returns how many (1: not cut). jobs must have room for n // target + 1 entries.
    Units: bytes for a job on UTF-8 (an ASCII str, or a buffer), else code points."""
    cdef Job whole = jobs[0]
    cdef const void* data = whole.text if whole.text != NULL else whole.src
    cdef int kind = 1 if whole.text != NULL else whole.src_kind
    cdef Py_ssize_t n = whole.n if whole.text != NULL else whole.src_len
    cdef Py_ssize_t start = 0, cut, count = 0
    while True:
        cut = (next_cut_utf8(whole.text, start + target, n) if whole.text != NULL
               else next_cut(data, kind, start + target, n))
        if n - cut < target // 2:     # no cut, or only a stub would be left
            cut = n
        jobs[count] = whole
        if whole.text != NULL:
            jobs[count].text = whole.text + start
            jobs[count].n = cut - start
        else:
            jobs[count].src = <const char*>whole.src + start * kind
            jobs[count].src_len = cut - start
        count += 1
        if cut == n:
            return count
        start = cut


cdef void job_free(Job* job) noexcept nogil:
    """Release a job's ids and its UTF-8 copy, leaving it empty."""
    out_free(&job.out)
    job.out.size = 0
    job.out.cap = 0
    free(job.owned)
    job.owned = NULL


cdef bint pieces_failed(const Job* jobs, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(a, b):
        if jobs[k].err != ERR_NONE:
            return True
    return False


# --------------------------------------------------------------------------------------
# Preparing a job, and the exception of a failed one (under the GIL)
# --------------------------------------------------------------------------------------

cdef object as_valid_str(object text):
    """The text itself if it encodes to UTF-8; otherwise tiktoken's surrogate fix-up."""
    cdef Py_ssize_t size
    try:
        PyUnicode_AsUTF8AndSize(text, &size)
        return text
    except UnicodeEncodeError:
        return fix_surrogates(text)


cdef int job_prepare(Job* job, object text, int pattern, object regex_pat,
                     const SpecialSet* specials, list keep) except -1:
    cdef Py_ssize_t size
    job.owned = NULL
    job.no_check = False
    job.check_utf8 = False    # a str's own UTF-8 (or PEP 393 buffer) is valid
    job.src = NULL
    job.src_kind = 0
    job.src_len = 0
    if pattern >= 0:
        FBE_UNICODE_READY(text)
        if PyUnicode_IS_ASCII(text):
            job.text = <const unsigned char*>PyUnicode_DATA(text)
            job.n = PyUnicode_GET_LENGTH(text)
        else:
            job.text = NULL    # converted by the worker
            job.n = 0
            job.src = PyUnicode_DATA(text)
            job.src_kind = PyUnicode_KIND(text)
            job.src_len = PyUnicode_GET_LENGTH(text)
    else:
        valid = as_valid_str(text)
        job.no_check = valid is not text
        text = valid
        keep.append(text)
        job.text = <const unsigned char*>PyUnicode_AsUTF8AndSize(text, &size)
        job.n = size
    job.spans = NULL
    job.n_spans = 0
    out_init(&job.out, NULL, 0)
    job.err = ERR_NONE
    job.err_pos = 0
    if pattern < 0:
        spans = _regex_spans(regex_pat, text, job.text, job.n, specials)
        keep.append(spans)
        job.spans = <const int64_t*>cnp.PyArray_DATA(spans)
        job.n_spans = len(spans) // 2
    return 0


cdef void job_prepare_utf8(Job* job, const unsigned char* text, Py_ssize_t n,
                           bint check) noexcept nogil:
    job.text = text
    job.n = n
    job.owned = NULL
    job.no_check = False
    job.check_utf8 = check
    job.src = NULL
    job.src_kind = 0
    job.src_len = 0
    job.spans = NULL
    job.n_spans = 0
    out_init(&job.out, NULL, 0)
    job.err = ERR_NONE
    job.err_pos = 0


cdef int raise_not_utf8(const uint8_t* t, Py_ssize_t n) except -1:
    cdef Py_ssize_t bad
    with nogil:
        bad = utf8_invalid_at(t, n)
    assert bad >= 0, "raise_not_utf8 of valid UTF-8"
    raise ValueError(f"not UTF-8: invalid byte 0x{t[bad]:02x} at byte offset {bad}")


cdef int job_raise(const Job* job) except -1:
    if job.err == ERR_NOMEM:
        raise MemoryError()
    if job.err == ERR_TOO_LONG:
        raise ValueError(f"a single pre-tokenized chunk at UTF-8 offset {job.err_pos} is "
                         f"4 GiB or longer; such chunks are not supported")
    if job.err == ERR_BYTE:
        raise ValueError(f"byte {job.text[job.err_pos]:#04x} at UTF-8 offset {job.err_pos} "
                         f"is not a token of this vocabulary, so it cannot be encoded")
    return 0


cdef cnp.ndarray _regex_spans(object pat, str text, const unsigned char* utf8, Py_ssize_t n,
                              const SpecialSet* ss):
    """Chunk spans (UTF-8 byte offsets, flattened start/end pairs) from the regex module.

    Like tiktoken, the pattern runs on each segment between allowed special tokens
    separately, so ``$`` and lookaheads stop at a special token.
    """
    cdef Py_ssize_t pos = 0, s = 0, e = 0, cs, ce
    cdef uint32_t tok
    cdef bint found
    ascii = text.isascii()
    if not ascii:
        cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        widths = (1 + (cps >= 0x80).astype(np.int64) + (cps >= 0x800) + (cps >= 0x10000))
        byte_of_cp = np.zeros(len(cps) + 1, dtype=np.int64)
        np.cumsum(widths, out=byte_of_cp[1:])
    pieces = []
    while True:
        found = find_special(ss, utf8, pos, n, &s, &e, &tok)
        seg_end = s if found else n
        if seg_end > pos:
            if ascii:
                cs, ce = pos, seg_end
            else:
                cs = int(np.searchsorted(byte_of_cp, pos))
                ce = int(np.searchsorted(byte_of_cp, seg_end))
            segment = text[cs:ce]
            spans = [m.span() for m in pat.finditer(segment)]
            if spans:
                arr = np.array(spans, dtype=np.int64).reshape(-1) + cs
                if not ascii:
                    arr = byte_of_cp[arr]
                pieces.append(arr)
        if not found:
            break
        pos = e
    if not pieces:
        return np.zeros(0, dtype=np.int64)
    return np.ascontiguousarray(np.concatenate(pieces), dtype=np.int64)
