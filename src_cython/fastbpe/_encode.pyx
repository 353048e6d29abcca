"""Native byte-level BPE encoder: the core behind ``fastbpe.Encoding``.

``CoreBPE`` mirrors tiktoken's Rust ``CoreBPE``: the same constructor arguments, the
same ids for every input, and the same merge rule (repeatedly merge the adjacent pair
whose concatenated bytes have the lowest rank, leftmost on ties). Policy (special-token
checks, argument defaults) lives in the Python ``Encoding``; this class converts inputs
once, releases the GIL, and does the work in C over raw buffers.

Layout (immutable after construction, so one object is safe to share between threads;
the only state that changes is the pool of chunk caches, handed out whole, one thread
at a time, through atomic slots):
- every token's bytes live in one arena (a ``bytes`` object kept alive by the core);
- an open-addressing hash table maps a byte string to its rank; slots hold the first 8
  bytes of the token, so short strings compare without memcmp. In front of it: a table
  of every 2-byte string's rank and a Bloom filter, both small enough for L2, because
  most lookups while merging are of short non-tokens. Big tables sit on huge pages.
- an id -> (offset, length) table serves decoding (dense when ids are dense, otherwise
  a sorted id array searched by bisection);
- for merging by characters (when ranks are dense): rank -> bytes, per BMP code point
  its single token and largest own merge rank (or "wall"), per boundary byte pair
  whether (and from which rank on) a token that is not whole characters spans it, and
  a 64 KiB filter of the character pairs that occur whole inside some token.

Result lists hold int objects from one process-wide block (ids below 2**19, the int of
id v at a fixed stride from the first), made immortal as CPython 3.12+ does for small
ints, so filling a list reads no table and writes no refcounts.
Batch calls build their lists hidden from the cyclic garbage collector and track them
just before returning (``track_lists``), so the collector does not walk them mid-call.

Per thread of a call: a direct-mapped cache of merged chunks of up to 24 bytes, taken
from the encoder's pool of up to 16 (512 KiB each, so at most 8 MiB an encoder;
lock-free slots) and given back warm, so that calls on short texts share what earlier
calls merged; one thread uses a cache at a time. The seams of merging by characters
keep their pure-BPE results there too, under a salted tag. The
ids of each thread's jobs go to 1 MiB slabs from a process-wide pool (``OutArena``),
kept between calls up to 32 MiB, so that batches do not fault fresh pages every call.

Merging: chunks of up to ``heap_threshold`` bytes use tiktoken's simple scan; longer ones
a heap over a linked list (O(n log n), so "x" * 10**7 stays linear-ish). Both are
tested against each other and against ``fastbpe.reference``. CJK-like chunks are merged
by characters instead of bytes where the vocabulary allows it, and characters that are
several tokens are copied as walls (``bpe_by_chars``: exact, with the proofs next to
it); on the Chinese corpus that is 1.2x-1.5x faster. Before that, such a chunk is cut
where no token spans a character boundary (rule 4): the pieces, mostly one- and
two-character words, recur and come from the chunk cache (a further 1.25x-1.35x on the
Chinese corpus with cl100k and o200k).

Pre-tokenization: the three built-in patterns (tiktoken's exact pattern strings) use the
hand-written splitters of ``fastbpe._pretokenize`` without the GIL, and the UTF-8 is
made from the str's own buffer on the worker thread; any other pattern goes through
the ``regex`` module under the GIL, and only the merging runs without it.

Batch calls start plain pthreads for the call and join them before returning: no pool
survives a call, so processes forked later (multiprocessing "fork") are safe. Long texts
of a batch are cut into pieces where every built-in pattern splits anyway (a newline
between two non-space characters, ``next_cut``), so that a few long texts share the
threads as evenly as many short ones and their lists are built while the rest encodes.
"""
import gc as _gc
import os as _os

from fastbpe.reference.core import DisallowedSpecial, holds_any

import numpy as np
cimport numpy as cnp

from cpython.ref cimport PyObject
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memchr, memcmp, memcpy, memmove, memset

from fastbpe._pretokenize cimport FbpeWin, fbpe_win_reset, split_next

cnp.import_array()

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL
    PyObject** PySequence_Fast_ITEMS(object o)
    bint fbe_long_check_exact "PyLong_CheckExact"(PyObject* o) noexcept
    long long fbe_long_as_ll "PyLong_AsLongLongAndOverflow"(PyObject* o, int* overflow) noexcept
    PyObject* PyLong_FromUnsignedLong(unsigned long v)
    void PyList_SET_ITEM(object lst, Py_ssize_t i, PyObject* item)
    object PyBytes_FromStringAndSize(const char* s, Py_ssize_t n)
    char* PyBytes_AS_STRING(object b)

cdef extern from *:
    """
    #if PY_VERSION_HEX < 0x030C0000
    #define FBE_UNICODE_READY(o) PyUnicode_READY(o)
    #else
    #define FBE_UNICODE_READY(o) 0
    #endif
    """
    int FBE_UNICODE_READY(object o) except -1
    bint PyUnicode_IS_ASCII(object o)
    int PyUnicode_KIND(object o)
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    uint32_t PyUnicode_READ(int kind, const void* data, Py_ssize_t index) nogil

cdef extern from "<pthread.h>" nogil:
    ctypedef unsigned long pthread_t
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct pthread_cond_t:
        pass
    int pthread_mutex_init(pthread_mutex_t* m, const void* attr)
    int pthread_mutex_destroy(pthread_mutex_t* m)
    int pthread_mutex_lock(pthread_mutex_t* m)
    int pthread_mutex_unlock(pthread_mutex_t* m)
    int pthread_cond_init(pthread_cond_t* c, const void* attr)
    int pthread_cond_destroy(pthread_cond_t* c)
    int pthread_cond_wait(pthread_cond_t* c, pthread_mutex_t* m)
    int pthread_cond_signal(pthread_cond_t* c)
    int pthread_create(pthread_t* thread, const void* attr,
                       void* (*start)(void*) noexcept nogil, void* arg)
    int pthread_join(pthread_t thread, void** retval)

# Small C helpers that Cython cannot express directly: unaligned loads, a 64x64->128
# multiply for hashing, and an atomic counter for handing out batch items.
cdef extern from *:
    """
    #include <string.h>
    #include <stdint.h>
    static inline uint64_t fbe_load64(const unsigned char* p) { uint64_t v; memcpy(&v, p, 8); return v; }
    static inline uint64_t fbe_load32(const unsigned char* p) { uint32_t v; memcpy(&v, p, 4); return v; }
    static inline uint64_t fbe_fold(uint64_t a, uint64_t b) {
        __uint128_t r = (__uint128_t)a * b;
        return (uint64_t)r ^ (uint64_t)(r >> 64);
    }
    /* Hash of a short byte string: 8-byte words folded by multiplication, the tail read
       as (possibly overlapping) 4-byte or single-byte loads; the length is mixed in first
       so overlapping tail reads of different lengths cannot collide trivially. */
    static inline uint64_t fbe_hash(const unsigned char* p, size_t n) {
        uint64_t h = 0x6a09e667f3bcc909ull ^ ((uint64_t)n * 0x9e3779b97f4a7c15ull);
        while (n >= 8) {
            h = fbe_fold(h ^ fbe_load64(p), 0xbb67ae8584caa73bull);
            p += 8; n -= 8;
        }
        uint64_t t;
        if (n >= 4) t = fbe_load32(p) | (fbe_load32(p + n - 4) << 32);
        else if (n > 0) t = (uint64_t)p[0] | ((uint64_t)p[n >> 1] << 8) | ((uint64_t)p[n - 1] << 16);
        else t = 0;
        return fbe_fold(h ^ t ^ 0x3c6ef372fe94f82bull, 0xa54ff53a5f1d36f1ull);
    }
    /* The n <= 8 bytes at p as a little-endian word, zero-padded, never reading past
       p + n: two overlapping 4-byte loads cover 4..7 bytes. */
    static inline uint64_t fbe_word(const unsigned char* p, size_t n) {
        if (n >= 8) return fbe_load64(p);
        if (n >= 4) return fbe_load32(p) | (fbe_load32(p + n - 4) << ((n - 4) * 8));
        uint64_t w = p[0];
        if (n > 1) w |= (uint64_t)p[1] << 8;
        if (n > 2) w |= (uint64_t)p[2] << 16;
        return w;
    }
    /* a[:n] == b[:n] for 1 <= n <= 24 in at most three word compares, inline (a libc
       memcmp call costs more than the compare); loads stay inside both strings. */
    static inline int fbe_equal_short(const unsigned char* a, const unsigned char* b, size_t n) {
        if (n < 8) return fbe_word(a, n) == fbe_word(b, n);
        if (fbe_load64(a) != fbe_load64(b)) return 0;
        if (n > 16 && fbe_load64(a + 8) != fbe_load64(b + 8)) return 0;
        return fbe_load64(a + n - 8) == fbe_load64(b + n - 8);
    }
    /* fbe_word for 1 <= n <= 8 when at least 8 bytes can be read at p (a padded copy):
       one load and a mask instead of a branch on the length. */
    static inline uint64_t fbe_word_padded(const unsigned char* p, size_t n) {
        return fbe_load64(p) & (~0ull >> (64 - 8 * n));
    }
    static inline uint64_t fbe_hash_word(uint64_t w, size_t n) {
        return fbe_fold(w ^ 0x3c6ef372fe94f82bull, 0xa54ff53a5f1d36f1ull + 2 * (uint64_t)n);
    }
    #include <sys/mman.h>
    /* Zeroed memory for a lookup table. Tables of megabytes are read at random, so with
       4 KiB pages nearly every probe also misses the TLB: ask for transparent huge
       pages (a hint; harmless where unsupported). free() releases it. */
    static void* fbe_table_alloc(size_t size) {
        void* p = NULL;
        size_t huge = (size_t)1 << 21;
        if (size >= huge) {
            size_t rounded = (size + huge - 1) & ~(huge - 1);
            if (posix_memalign(&p, huge, rounded) != 0) return NULL;
    #ifdef MADV_HUGEPAGE
            madvise(p, rounded, MADV_HUGEPAGE);
    #endif
            memset(p, 0, rounded);
            return p;
        }
        return calloc(1, size ? size : 1);
    }
    /* Lowest value of a[0:n] (n >= 1): branch-free, so the compiler vectorizes it. */
    static inline uint32_t fbe_min_u32(const uint32_t* a, size_t n) {
        uint32_t m = 0xFFFFFFFFu;
        for (size_t i = 0; i < n; i++) m = a[i] < m ? a[i] : m;
        return m;
    }
    static inline void fbe_prefetch(const void* p) { __builtin_prefetch(p, 0, 3); }
    /* The UTF-8 of code point c >= 0x80 at d: the new end, or NULL for a surrogate. */
    static inline unsigned char* fbe_put_multibyte(unsigned char* d, uint32_t c) {
        if (c < 0x800) {
            d[0] = (unsigned char)(0xC0 | (c >> 6));
            d[1] = (unsigned char)(0x80 | (c & 0x3F));
            return d + 2;
        }
        if (c < 0x10000) {
            if ((c & 0xF800) == 0xD800) return NULL;
            d[0] = (unsigned char)(0xE0 | (c >> 12));
            d[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            d[2] = (unsigned char)(0x80 | (c & 0x3F));
            return d + 3;
        }
        d[0] = (unsigned char)(0xF0 | (c >> 18));
        d[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
        d[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        d[3] = (unsigned char)(0x80 | (c & 0x3F));
        return d + 4;
    }
    #define FBE_UTF8_SCALAR(T, from, to) \
        for (Py_ssize_t fbe_k = (from); fbe_k < (to); fbe_k++) { \
            uint32_t c = ((const T*)src)[fbe_k]; \
            if (c < 0x80) { *d++ = (unsigned char)c; continue; } \
            if ((d = fbe_put_multibyte(d, c)) == NULL) return NULL; \
        }
    /* Code points to UTF-8, 8 at a time with SSSE3 (checked at run time: every x86-64
       CPU since about 2008 has it). Text mixes ASCII with other characters at random
       (Turkish words, CJK punctuation), so branching per character mispredicts once or
       twice per non-ASCII character; instead each lane's bytes are made side by side in
       a vector and one byte shuffle, from a table indexed by the lanes' lengths, packs
       them together. Blocks of 1- and 2-byte characters take one shuffle of 8 lanes;
       blocks with 3-byte characters two of 4 lanes; blocks with a surrogate (an error)
       or an astral character go one character at a time. Every block is stored with
       full 16-byte stores, which the caller's buffer (kind + 1 bytes per code point)
       has room for while the loops' bounds hold. */
    #if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    #define FBE_UTF8_SSSE3 1
    #include <tmmintrin.h>
    static unsigned char fbe_utf8_shuf2[256][16];  /* bit j: lane j (of 8) is 2 bytes */
    static unsigned char fbe_utf8_len2[256];
    static unsigned char fbe_utf8_shuf3[256][16];  /* bit j: lane j (of 4) is 1 byte,
                                                      bit j + 4: it is 3 bytes */
    static unsigned char fbe_utf8_len3[256];
    static int fbe_utf8_cpu = 0;   /* this CPU has SSSE3 */
    static int fbe_utf8_simd = 0;  /* use it (the test hook can turn it off) */
    static void fbe_utf8_init(void) {
        for (int m = 0; m < 256; m++) {
            int k = 0;
            for (int j = 0; j < 8; j++) {
                fbe_utf8_shuf2[m][k++] = (unsigned char)(2 * j);
                if (m >> j & 1) fbe_utf8_shuf2[m][k++] = (unsigned char)(2 * j + 1);
            }
            fbe_utf8_len2[m] = (unsigned char)k;
            for (; k < 16; k++) fbe_utf8_shuf2[m][k] = 0x80;    /* zero fill */
            k = 0;
            for (int j = 0; j < 4; j++) {
                int len = (m >> j & 1) ? 1 : (m >> (j + 4) & 1) ? 3 : 2;
                for (int b = 0; b < len; b++) fbe_utf8_shuf3[m][k++] = (unsigned char)(4 * j + b);
            }
            fbe_utf8_len3[m] = (unsigned char)k;
            for (; k < 16; k++) fbe_utf8_shuf3[m][k] = 0x80;
        }
        __builtin_cpu_init();
        fbe_utf8_cpu = fbe_utf8_simd = __builtin_cpu_supports("ssse3");
    }
    /* 4 code points below 0x10000, no surrogates, one per 32-bit lane: at most 12 bytes. */
    __attribute__((target("ssse3")))
    static inline unsigned char* fbe_utf8_four(__m128i c, unsigned char* d) {
        const __m128i m3f = _mm_set1_epi32(0x3F), c80 = _mm_set1_epi32(0x80);
        __m128i is1 = _mm_cmplt_epi32(c, c80);
        __m128i is3 = _mm_cmpgt_epi32(c, _mm_set1_epi32(0x7FF));
        __m128i last = _mm_or_si128(_mm_and_si128(c, m3f), c80);
        __m128i middle = _mm_or_si128(_mm_and_si128(_mm_srli_epi32(c, 6), m3f), c80);
        __m128i two = _mm_or_si128(_mm_or_si128(_mm_srli_epi32(c, 6), _mm_set1_epi32(0xC0)),
                                   _mm_slli_epi32(last, 8));
        __m128i three = _mm_or_si128(_mm_or_si128(_mm_srli_epi32(c, 12), _mm_set1_epi32(0xE0)),
                                     _mm_or_si128(_mm_slli_epi32(middle, 8),
                                                  _mm_slli_epi32(last, 16)));
        __m128i bytes = _mm_or_si128(
            _mm_and_si128(is1, c),
            _mm_or_si128(_mm_and_si128(is3, three),
                         _mm_andnot_si128(_mm_or_si128(is1, is3), two)));
        unsigned m = (unsigned)_mm_movemask_ps(_mm_castsi128_ps(is1))
                   | ((unsigned)_mm_movemask_ps(_mm_castsi128_ps(is3)) << 4);
        _mm_storeu_si128((__m128i*)d, _mm_shuffle_epi8(
            bytes, _mm_loadu_si128((const __m128i*)fbe_utf8_shuf3[m])));
        return d + fbe_utf8_len3[m];
    }
    /* 8 code points below 0x10000, one per 16-bit lane (at most 24 bytes, written
       within 28): the new end, or NULL if a lane holds a surrogate. */
    __attribute__((target("ssse3")))
    static inline unsigned char* fbe_utf8_eight(__m128i v, unsigned char* d) {
        const __m128i zero = _mm_setzero_si128();
        __m128i top5 = _mm_and_si128(v, _mm_set1_epi16((short)0xF800));
        if (_mm_movemask_epi8(_mm_cmpeq_epi16(top5, zero)) != 0xFFFF) {
            if (_mm_movemask_epi8(_mm_cmpeq_epi16(top5, _mm_set1_epi16((short)0xD800))))
                return NULL;
            d = fbe_utf8_four(_mm_unpacklo_epi16(v, zero), d);
            return fbe_utf8_four(_mm_unpackhi_epi16(v, zero), d);
        }
        /* all below 0x800: lane = first byte | second byte << 8 */
        __m128i ascii = _mm_cmpeq_epi16(_mm_and_si128(v, _mm_set1_epi16((short)0xFF80)), zero);
        __m128i lead = _mm_or_si128(_mm_srli_epi16(v, 6), _mm_set1_epi16(0xC0));
        __m128i first = _mm_or_si128(_mm_and_si128(ascii, v), _mm_andnot_si128(ascii, lead));
        __m128i second = _mm_slli_epi16(_mm_and_si128(v, _mm_set1_epi16(0x3F)), 8);
        __m128i pairs = _mm_or_si128(_mm_or_si128(first, second),
                                     _mm_set1_epi16((short)0x8000));
        unsigned m = 0xFFu ^ (unsigned)_mm_movemask_epi8(_mm_packs_epi16(ascii, zero));
        _mm_storeu_si128((__m128i*)d, _mm_shuffle_epi8(
            pairs, _mm_loadu_si128((const __m128i*)fbe_utf8_shuf2[m])));
        return d + fbe_utf8_len2[m];
    }
    __attribute__((target("ssse3")))
    static unsigned char* fbe_utf8_simd1(const uint8_t* src, Py_ssize_t n, unsigned char* d) {
        Py_ssize_t i = 0;
        const __m128i zero = _mm_setzero_si128();
        for (; n - i >= 16; i += 16) {           /* room: 32 bytes, 32 written at most */
            __m128i v = _mm_loadu_si128((const __m128i*)(src + i));
            _mm_storeu_si128((__m128i*)d, v);
            if (!_mm_movemask_epi8(v)) { d += 16; continue; }    /* all ASCII */
            d = fbe_utf8_eight(_mm_unpacklo_epi8(v, zero), d);   /* Latin-1: never NULL */
            d = fbe_utf8_eight(_mm_unpackhi_epi8(v, zero), d);
        }
        FBE_UTF8_SCALAR(uint8_t, i, n)
        return d;
    }
    __attribute__((target("ssse3")))
    static unsigned char* fbe_utf8_simd2(const uint16_t* src, Py_ssize_t n, unsigned char* d) {
        Py_ssize_t i = 0;
        unsigned char* e;
        for (; n - i >= 16; i += 8) {            /* room: 48 bytes, 28 written at most */
            e = fbe_utf8_eight(_mm_loadu_si128((const __m128i*)(src + i)), d);
            if (e != NULL) { d = e; continue; }
            FBE_UTF8_SCALAR(uint16_t, i, i + 8)  /* returns NULL at the surrogate */
        }
        FBE_UTF8_SCALAR(uint16_t, i, n)
        return d;
    }
    __attribute__((target("ssse3")))
    static unsigned char* fbe_utf8_simd4(const uint32_t* src, Py_ssize_t n, unsigned char* d) {
        Py_ssize_t i = 0;
        unsigned char* e;
        const __m128i bias = _mm_set1_epi32(0x8000), bias16 = _mm_set1_epi16((short)0x8000);
        for (; n - i >= 8; i += 8) {             /* room: 40 bytes, 28 written at most */
            __m128i a = _mm_loadu_si128((const __m128i*)(src + i));
            __m128i b = _mm_loadu_si128((const __m128i*)(src + i + 4));
            e = NULL;
            if (_mm_movemask_epi8(_mm_cmpeq_epi32(_mm_srli_epi32(_mm_or_si128(a, b), 16),
                                                  _mm_setzero_si128())) == 0xFFFF) {
                /* all below 0x10000: narrow exactly (signed saturation never hits
                   after the shift down by 0x8000) */
                __m128i v = _mm_xor_si128(_mm_packs_epi32(_mm_sub_epi32(a, bias),
                                                          _mm_sub_epi32(b, bias)), bias16);
                e = fbe_utf8_eight(v, d);
            }
            if (e != NULL) { d = e; continue; }
            FBE_UTF8_SCALAR(uint32_t, i, i + 8)  /* astral characters, or a surrogate */
        }
        FBE_UTF8_SCALAR(uint32_t, i, n)
        return d;
    }
    #define FBE_UTF8_PICK(k) (fbe_utf8_simd ? fbe_utf8_simd##k : fbe_utf8_scalar##k)
    #else
    #define FBE_UTF8_SSSE3 0
    static int fbe_utf8_cpu = 0;
    static int fbe_utf8_simd = 0;
    static void fbe_utf8_init(void) {}
    #define FBE_UTF8_PICK(k) fbe_utf8_scalar##k
    #endif
    /* The plain loop per kind: other CPUs, and the twin the tests compare with. */
    #define FBE_UTF8_SCALAR_FN(k, T) \
        static unsigned char* fbe_utf8_scalar##k(const T* src, Py_ssize_t n, unsigned char* d) { \
            FBE_UTF8_SCALAR(T, 0, n) \
            return d; \
        }
    FBE_UTF8_SCALAR_FN(1, uint8_t)
    FBE_UTF8_SCALAR_FN(2, uint16_t)
    FBE_UTF8_SCALAR_FN(4, uint32_t)
    /* UTF-8 of n code points of a PEP 393 buffer of the given kind (1, 2 or 4 bytes
       each) into dst, which has room for kind + 1 bytes per code point. Returns the
       length, or -1 at a lone surrogate. */
    static Py_ssize_t fbe_to_utf8(const void* src, int kind, Py_ssize_t n, unsigned char* dst) {
        unsigned char* d;
        if (kind == 1) d = FBE_UTF8_PICK(1)((const uint8_t*)src, n, dst);
        else if (kind == 2) d = FBE_UTF8_PICK(2)((const uint16_t*)src, n, dst);
        else d = FBE_UTF8_PICK(4)((const uint32_t*)src, n, dst);
        return d == NULL ? -1 : d - dst;
    }
    static inline Py_ssize_t fbe_atomic_next(Py_ssize_t* counter) {
        return __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
    }
    static inline Py_ssize_t fbe_atomic_load(Py_ssize_t* counter) {
        return __atomic_load_n(counter, __ATOMIC_RELAXED);
    }
    /* Sequentially consistent flags: a worker's "job j is done" and the caller's "I am
       about to sleep" are a store then a load on each side, so at least one side sees
       the other's store (see mark_done). */
    static inline void fbe_flag_store(char* flag, char v) { __atomic_store_n(flag, v, __ATOMIC_SEQ_CST); }
    static inline char fbe_flag_load(const char* flag) { return __atomic_load_n(flag, __ATOMIC_SEQ_CST); }
    /* A pointer from one of n slots (emptying it), or NULL if all are empty. Lock-free,
       so a process forked at any moment inherits no held lock. */
    static inline void* fbe_slot_take(void** slots, int n) {
        for (int i = 0; i < n; i++) {
            void* p = __atomic_exchange_n(&slots[i], (void*)0, __ATOMIC_ACQ_REL);
            if (p) return p;
        }
        return (void*)0;
    }
    /* Put p into an empty slot; 0 if all n are full (the caller frees p). */
    static inline int fbe_slot_give(void** slots, int n, void* p) {
        for (int i = 0; i < n; i++) {
            void* expected = (void*)0;
            if (__atomic_compare_exchange_n(&slots[i], &expected, p, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_RELAXED))
                return 1;
        }
        return 0;
    }
    """
    uint64_t fbe_hash(const unsigned char* p, size_t n) noexcept nogil
    uint64_t fbe_word(const unsigned char* p, size_t n) noexcept nogil
    uint64_t fbe_word_padded(const unsigned char* p, size_t n) noexcept nogil
    uint64_t fbe_hash_word(uint64_t w, size_t n) noexcept nogil
    uint64_t fbe_load64(const unsigned char* p) noexcept nogil
    uint32_t fbe_min_u32(const uint32_t* a, size_t n) noexcept nogil
    void fbe_prefetch(const void* p) noexcept nogil
    Py_ssize_t fbe_to_utf8(const void* src, int kind, Py_ssize_t n, unsigned char* dst) noexcept nogil
    void fbe_utf8_init() noexcept nogil
    int fbe_utf8_cpu
    int fbe_utf8_simd
    bint fbe_equal_short(const unsigned char* a, const unsigned char* b, size_t n) noexcept nogil
    Py_ssize_t fbe_atomic_next(Py_ssize_t* counter) noexcept nogil
    Py_ssize_t fbe_atomic_load(Py_ssize_t* counter) noexcept nogil
    void fbe_flag_store(char* flag, char v) noexcept nogil
    char fbe_flag_load(const char* flag) noexcept nogil
    void* fbe_slot_take(void** slots, int n) noexcept nogil
    bint fbe_slot_give(void** slots, int n, void* p) noexcept nogil
    void* table_alloc "fbe_table_alloc"(size_t size) noexcept nogil


cdef extern from *:
    """
    #define FBE_NO_RANK 0xFFFFFFFFu
    """
    # "No such token": larger than every rank, so the min-scans skip it for free.
    const uint32_t NO_RANK "FBE_NO_RANK"

cdef enum:
    # Chunks up to this many bytes use stack buffers in the scan merge.
    SCAN_STACK = 256
    HEAP_STACK_WORDS = 1024   # 8 KiB: the heap merge of a 256-byte chunk without malloc
    # Errors reported from nogil code, turned into exceptions afterwards.
    ERR_NONE = 0
    ERR_NOMEM = 1
    ERR_BYTE = 2       # a byte that is not a token (tiktoken would panic)
    ERR_SURROGATE = 3  # the str holds a lone surrogate: the caller fixes it up and retries
    ERR_TOO_LONG = 4   # a single pre-tokenized chunk of 4 GiB or more
    ERR_DISALLOWED = 5 # the text holds a disallowed special token (see NeedleSet)
    MAX_THREADS_C = 1024
    MAX_BLOCKS = 64           # blocks of jobs at most; more threads than that share them
    MANY_JOBS = 8             # jobs per thread from which a batch counts as many texts
    CURSOR_STRIDE = 8         # Py_ssize_t per 64-byte line (see Context.block_next)
    LIST_RUN = 16             # streaming: own jobs run between two rounds of list
                              # building (see run_streaming)

#: Chunks longer than this (in bytes) are merged with the heap; shorter ones by the simple
#: lowest-rank scan, which is faster when n is small. Both give identical output. Measured:
#: from ~20 bytes on the heap wins (CJK runs); words in alphabetic scripts are shorter.
cdef Py_ssize_t heap_threshold = 24
#: Merging by characters on (testing hook: _set_by_chars turns it off to compare).
cdef bint by_chars_enabled = True

MAX_THREADS = MAX_THREADS_C


def _set_by_chars(bint on):
    """Testing hook: turn merging by characters on or off; returns the old setting."""
    global by_chars_enabled
    old = by_chars_enabled
    by_chars_enabled = on
    return old


def _set_heap_threshold(Py_ssize_t n):
    """Testing hook: set the scan/heap cut-over (bytes); returns the old value.

    Not thread-safe; only tests use it, to check both merge paths against each other.
    """
    global heap_threshold
    if n < 0 or n > (1 << 20):
        raise ValueError(f"heap threshold must be in [0, 2**20], got {n}")
    old = heap_threshold
    heap_threshold = n
    return old


def _equal_short(bytes a, bytes b):
    """Testing hook: the chunk cache's key compare, for equal-length keys of 1..24 bytes."""
    if len(a) != len(b) or not 1 <= len(a) <= CACHE_KEY_MAX:
        raise ValueError(f"keys must have equal lengths in [1, {CACHE_KEY_MAX}]")
    return bool(fbe_equal_short(<const unsigned char*>PyBytes_AS_STRING(a),
                                <const unsigned char*>PyBytes_AS_STRING(b), len(a)))


fbe_utf8_init()     # the conversion's shuffle tables, and whether this CPU has SSSE3


def _set_utf8_simd(bint on):
    """Testing hook: use the SSSE3 UTF-8 conversion (where the CPU has it) or the plain
    loop; returns the old setting. Not thread-safe; only tests use it."""
    global fbe_utf8_simd
    old = bool(fbe_utf8_simd)
    fbe_utf8_simd = fbe_utf8_cpu if on else 0
    return old


def _utf8_of(str text):
    """Testing hook: the UTF-8 conversion that workers run on a str (fbe_to_utf8), as
    bytes; ValueError at a lone surrogate."""
    FBE_UNICODE_READY(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef int kind = PyUnicode_KIND(text)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, n * (kind + 1) + 1)
    cdef Py_ssize_t size = fbe_to_utf8(PyUnicode_DATA(text), kind, n,
                                       <unsigned char*>PyBytes_AS_STRING(out))
    if size < 0:
        raise ValueError("lone surrogate")
    return out[:size]


# --------------------------------------------------------------------------------------
# Vocabulary tables
# --------------------------------------------------------------------------------------

cdef struct Slot:
    uint64_t word     # the first 8 bytes of the token, zero-padded: compared before memcmp
    uint32_t length   # 0 marks an empty slot (empty tokens are never looked up)
    uint32_t rank


cdef struct Vocab:
    const unsigned char* arena
    Slot* slots
    uint32_t* long_offset   # per slot: arena offset of tokens longer than 8 bytes
    uint64_t mask
    uint32_t* pair_rank2    # rank of every 2-byte string, indexed by b0 | b1 << 8
    uint64_t* bloom         # 2 bits per token in one word: rejects most non-tokens
    uint64_t bloom_mask     # without touching the (much larger) slot table
    uint32_t byte_rank[256]
    # Merging by characters (see bpe_by_chars); NULL tables turn it off.
    uint64_t* rank_span     # rank -> arena offset | length << 32 (0 length: no token)
    uint64_t n_ranks
    uint64_t* char_info     # code point < 0x10000 -> token | (M + 1) << 32, or NO_RANK
                            # (| CHAR_WALL << 32 when its bytes merge into several tokens)
    uint64_t* cross_bits    # bit x | y << 8: a token that is not whole characters has
                            # byte x followed by a character's first byte y
    uint32_t* cross_min     # x | y << 8 -> the lowest rank among those tokens
    uint64_t* bigram_bloom  # filter of the code point pairs (a, b) that occur as adjacent
                            # whole characters inside some token (see bigram_may_join)


cdef inline uint64_t slot_hash(const unsigned char* p, size_t n, uint64_t word) noexcept nogil:
    # Short strings (almost every lookup during merging) hash their zero-padded word;
    # the length is mixed in so b"a" and b"a\0" differ.
    if n <= 8:
        return fbe_hash_word(word, n)
    return fbe_hash(p, n)


cdef inline bint bloom_may_contain(const Vocab* v, uint64_t h) noexcept nogil:
    cdef uint64_t bits = (1ULL << ((h >> 52) & 63)) | (1ULL << (h >> 58))
    return (v.bloom[(h >> 32) & v.bloom_mask] & bits) == bits


cdef inline void bloom_add(Vocab* v, uint64_t h) noexcept nogil:
    v.bloom[(h >> 32) & v.bloom_mask] |= (1ULL << ((h >> 52) & 63)) | (1ULL << (h >> 58))


cdef inline uint32_t slot_probe(const Vocab* v, uint64_t i, uint64_t w, size_t n) noexcept nogil:
    """Linear probing from slot i for the string of n <= 8 bytes whose word is w."""
    cdef const Slot* sl
    while True:
        sl = &v.slots[i]
        if sl.word == w and sl.length == n:
            return sl.rank
        if sl.length == 0:
            return NO_RANK
        i = (i + 1) & v.mask


cdef inline uint32_t vocab_rank_hashed(const Vocab* v, const unsigned char* p, size_t n,
                                       uint64_t w, uint64_t h) noexcept nogil:
    """Rank of p[:n] given w = its first-word (fbe_word, or the first 8 bytes when n > 8)
    and h = slot_hash(p, n, w); NO_RANK if it is not a token."""
    cdef uint64_t i
    cdef const Slot* s
    if not bloom_may_contain(v, h):
        return NO_RANK
    i = h & v.mask
    if n <= 8:
        return slot_probe(v, i, w, n)
    while True:
        s = &v.slots[i]
        if (s.length == n and s.word == w
                and memcmp(v.arena + v.long_offset[i] + 8, p + 8, n - 8) == 0):
            return s.rank
        if s.length == 0:
            return NO_RANK
        i = (i + 1) & v.mask


cdef inline uint64_t short_word(const unsigned char* p, size_t n, bint padded) noexcept nogil:
    """fbe_word(p, n) for 1 <= n <= 8; padded: 8 bytes are readable at p (the scan's
    padded copy of its chunk), so one masked load does it without branches."""
    return fbe_word_padded(p, n) if padded else fbe_word(p, n)


cdef inline uint32_t vocab_rank(const Vocab* v, const unsigned char* p, size_t n) noexcept nogil:
    """Rank of the byte string p[:n] (n >= 1), or NO_RANK."""
    return vocab_rank_in(v, p, n, False)


cdef inline uint32_t vocab_rank_in(const Vocab* v, const unsigned char* p, size_t n,
                                   bint padded) noexcept nogil:
    """vocab_rank, reading words as short_word(padded) does.

    Merging asks mostly about short strings, many of which are not tokens: the 2-byte
    table and the Bloom filter answer those from L2-sized memory; only likely hits probe
    the slot table (megabytes for a 200k vocabulary, so each probe is a cache miss).
    """
    cdef uint64_t w, h
    if n == 2:
        return v.pair_rank2[p[0] | (<uint32_t>p[1] << 8)]
    if n > 8:
        return vocab_rank_long(v, p, n)
    # short strings: kept small so that the compiler inlines it into the merge loops
    w = short_word(p, n, padded)
    h = fbe_hash_word(w, n)
    if not bloom_may_contain(v, h):
        return NO_RANK
    return slot_probe(v, h & v.mask, w, n)


cdef uint32_t vocab_rank_long(const Vocab* v, const unsigned char* p, size_t n) noexcept nogil:
    return vocab_rank_hashed(v, p, n, fbe_load64(p), fbe_hash(p, n))


cdef inline void vocab_rank_two(const Vocab* v, const unsigned char* pa, size_t na,
                                const unsigned char* pb, size_t nb, uint32_t* ra,
                                uint32_t* rb, bint padded) noexcept nogil:
    """vocab_rank of two strings (a merge re-ranks both of its neighbours) with the loads
    of both issued before either answer is needed: their cache misses overlap instead
    of queueing behind each other."""
    cdef uint64_t wa, ha, wb, hb, fa, fb, bits_a, bits_b
    if na < 3 or na > 8 or nb < 3 or nb > 8:
        ra[0] = vocab_rank_in(v, pa, na, padded)
        rb[0] = vocab_rank_in(v, pb, nb, padded)
        return
    wa = short_word(pa, na, padded)
    ha = fbe_hash_word(wa, na)
    wb = short_word(pb, nb, padded)
    hb = fbe_hash_word(wb, nb)
    fa = v.bloom[(ha >> 32) & v.bloom_mask]
    fb = v.bloom[(hb >> 32) & v.bloom_mask]
    fbe_prefetch(&v.slots[ha & v.mask])
    fbe_prefetch(&v.slots[hb & v.mask])
    bits_a = (1ULL << ((ha >> 52) & 63)) | (1ULL << (ha >> 58))
    bits_b = (1ULL << ((hb >> 52) & 63)) | (1ULL << (hb >> 58))
    ra[0] = slot_probe(v, ha & v.mask, wa, na) if (fa & bits_a) == bits_a else NO_RANK
    rb[0] = slot_probe(v, hb & v.mask, wb, nb) if (fb & bits_b) == bits_b else NO_RANK


# --------------------------------------------------------------------------------------
# Output buffers
# --------------------------------------------------------------------------------------

# A job's ids are written to memory from its thread's OutArena: slabs of at least 1 MiB
# taken from a process-wide pool and given back when the call ends, so that a batch
# writes to memory the process already has. Allocated and freed per job, the output
# buffers of a batch (megabytes, all alive until the lists are built) went back to the
# OS at the end of every call and were faulted in again by the next: measured, gpt2
# Python in ~2 KB documents on one thread took 29-33 ms per call with 3.1k-6.1k page
# faults, and 22-24 ms with an arena kept across calls.
cdef extern from *:
    """
    #include <pthread.h>
    typedef struct FbeSlab {
        struct FbeSlab* next;
        size_t size;          /* usable bytes after the header */
        size_t used;
        size_t pad;           /* a 32-byte header: the data is as aligned as malloc's */
    } FbeSlab;
    #define FBE_SLAB_BYTES ((size_t)1 << 20)
    #define FBE_POOL_MAX ((size_t)32 << 20)   /* bytes of slabs kept between calls */
    static FbeSlab* fbe_pool = NULL;
    static size_t fbe_pool_bytes = 0;
    static pthread_mutex_t fbe_pool_lock = PTHREAD_MUTEX_INITIALIZER;
    static inline unsigned char* fbe_slab_data(FbeSlab* s) { return (unsigned char*)(s + 1); }
    /* A slab of at least min_bytes: the first big enough in the pool, or a new one. */
    static FbeSlab* fbe_slab_take(size_t min_bytes) {
        FbeSlab *s, **link;
        pthread_mutex_lock(&fbe_pool_lock);
        for (link = &fbe_pool; (s = *link) != NULL; link = &s->next) {
            if (s->size >= min_bytes) {
                *link = s->next;
                fbe_pool_bytes -= s->size;
                break;
            }
        }
        pthread_mutex_unlock(&fbe_pool_lock);
        if (s == NULL) {
            size_t size = min_bytes > FBE_SLAB_BYTES ? min_bytes : FBE_SLAB_BYTES;
            s = (FbeSlab*)malloc(sizeof(FbeSlab) + size);
            if (s == NULL)
                return NULL;
            s->size = size;
        }
        s->used = 0;
        s->next = NULL;
        return s;
    }
    /* Give a list of slabs back: kept in the pool up to FBE_POOL_MAX bytes, freed past it. */
    static void fbe_slabs_give(FbeSlab* s) {
        FbeSlab* next;
        pthread_mutex_lock(&fbe_pool_lock);
        for (; s != NULL; s = next) {
            next = s->next;
            if (fbe_pool_bytes + s->size <= FBE_POOL_MAX) {
                s->next = fbe_pool;
                fbe_pool = s;
                fbe_pool_bytes += s->size;
            } else {
                free(s);
            }
        }
        pthread_mutex_unlock(&fbe_pool_lock);
    }
    /* In a child forked while another thread held the lock, the lock and the pool may
       be half-updated: start the child with an empty pool (the slabs leak). */
    static void fbe_pool_after_fork(void) {
        pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
        fbe_pool_lock = fresh;
        fbe_pool = NULL;
        fbe_pool_bytes = 0;
    }
    static size_t fbe_pool_size(void) { return fbe_pool_bytes; }
    """
    ctypedef struct FbeSlab:
        FbeSlab* next
        size_t size
        size_t used
    unsigned char* fbe_slab_data(FbeSlab* s) noexcept nogil
    const size_t FBE_SLAB_BYTES
    FbeSlab* fbe_slab_take(size_t min_bytes) noexcept nogil
    void fbe_slabs_give(FbeSlab* s) noexcept nogil
    void fbe_pool_after_fork() noexcept nogil
    size_t fbe_pool_size() noexcept nogil
    int pthread_atfork(void (*prepare)() noexcept nogil, void (*parent)() noexcept nogil,
                       void (*child)() noexcept nogil) nogil

pthread_atfork(NULL, NULL, fbe_pool_after_fork)


def _output_pool_bytes():
    """Testing hook: bytes of output slabs kept between calls."""
    return fbe_pool_size()


cdef struct OutArena:
    FbeSlab* head             # the slab being filled; earlier ones follow through next


cdef struct OutBuf:
    uint32_t* data
    Py_ssize_t size
    Py_ssize_t cap
    OutArena* arena           # NULL: data is malloc'd (free it with out_free)


cdef inline void out_free(OutBuf* o) noexcept nogil:
    if o.arena == NULL:
        free(o.data)
    o.data = NULL


cdef int out_grow(OutBuf* o, Py_ssize_t need) noexcept nogil:
    cdef Py_ssize_t cap = o.cap * 2 if o.cap else 256
    while cap < need:
        cap *= 2
    cdef uint32_t* d
    cdef FbeSlab* s
    cdef size_t extra
    if o.arena != NULL and cap * sizeof(uint32_t) > FBE_SLAB_BYTES // 2:
        # a big output leaves the arena for malloc, whose realloc grows it in place (a
        # chain of ever larger slabs would hold twice the memory until the call ends)
        d = <uint32_t*>malloc(cap * sizeof(uint32_t))
        if d == NULL:
            return -1
        if o.size:
            memcpy(d, o.data, o.size * sizeof(uint32_t))
        o.arena = NULL
    elif o.arena == NULL:
        d = <uint32_t*>realloc(o.data, cap * sizeof(uint32_t))
        if d == NULL:
            return -1
    else:
        s = o.arena.head
        extra = (cap - o.cap) * sizeof(uint32_t)
        if (s != NULL and o.data != NULL
                and <unsigned char*>(o.data + o.cap) == fbe_slab_data(s) + s.used
                and s.used + extra <= s.size):
            s.used += extra       # the buffer ends the slab's used part: grow in place
            o.cap = cap
            return 0
        if s == NULL or s.used + cap * sizeof(uint32_t) > s.size:
            s = fbe_slab_take(cap * sizeof(uint32_t))
            if s == NULL:
                return -1
            s.next = o.arena.head
            o.arena.head = s
        d = <uint32_t*>(fbe_slab_data(s) + s.used)
        s.used += cap * sizeof(uint32_t)
        if o.size:
            memcpy(d, o.data, o.size * sizeof(uint32_t))
    o.data = d
    o.cap = cap
    return 0


cdef inline int out_push(OutBuf* o, uint32_t v) noexcept nogil:
    if o.size == o.cap:
        if out_grow(o, o.size + 1) < 0:
            return -1
    o.data[o.size] = v
    o.size += 1
    return 0


# --------------------------------------------------------------------------------------
# BPE merging of one chunk
# --------------------------------------------------------------------------------------

cdef struct ScanPart:
    uint32_t start
    uint32_t rank     # rank of merging this part with the next one
    uint32_t token    # this part's own token (NO_RANK for a byte that is not a token)


cdef int bpe_scan(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                  Py_ssize_t* err_pos) noexcept nogil:
    """tiktoken's merge loop: find the lowest pair rank (leftmost on ties), merge, repeat.

    O(n^2) in the worst case, but the fastest choice for the short chunks that make up
    almost all text. parts[m-1] is a sentinel holding the end offset.
    """
    cdef ScanPart stack_parts[SCAN_STACK + 1 + 8]
    cdef ScanPart tmp_parts[8]
    cdef ScanPart* parts = stack_parts
    cdef unsigned char stack_text[SCAN_STACK + 8]
    cdef unsigned char* text = stack_text
    cdef Py_ssize_t m = n + 1, i
    cdef uint32_t best
    cdef uint64_t key, cand, zero = 0
    cdef int rc = ERR_NONE
    if n > SCAN_STACK:
        parts = <ScanPart*>malloc((n + 1) * sizeof(ScanPart) + n + 8)
        if parts == NULL:
            return ERR_NOMEM
        text = <unsigned char*>(parts + n + 1)
    # A copy of the chunk with 8 zero bytes after it: every word the merges look up
    # is then one load and a mask (short_word, padded) instead of a branchy read.
    memcpy(text, p, n)
    memcpy(text + n, &zero, 8)
    p = text
    for i in range(n):
        parts[i].start = <uint32_t>i
        parts[i].token = v.byte_rank[p[i]]
        parts[i].rank = vocab_rank(v, p + i, 2) if i + 1 < n else NO_RANK
    parts[n].start = <uint32_t>n
    parts[n].rank = NO_RANK
    parts[n].token = NO_RANK
    while True:
        # argmin as the min of rank << 32 | index: branch-free (cmov), and the lowest
        # index wins ties as the scan requires
        key = <uint64_t>NO_RANK << 32
        for i in range(m - 2):
            cand = (<uint64_t>parts[i].rank << 32) | <uint64_t>i
            key = cand if cand < key else key
        best = <uint32_t>(key >> 32)
        if best == NO_RANK:
            break
        i = <Py_ssize_t>(key & 0xFFFFFFFFULL)
        parts[i].token = best
        if m - i - 2 <= 8 and parts == stack_parts:
            # two fixed-size copies through a buffer compile to a few vector moves; a
            # libc memmove of varying small sizes mispredicts its size dispatch. Past
            # the sentinel it copies stale entries, inside the padded stack array.
            memcpy(tmp_parts, &parts[i + 2], 8 * sizeof(ScanPart))
            memcpy(&parts[i + 1], tmp_parts, 8 * sizeof(ScanPart))
        else:
            memmove(&parts[i + 1], &parts[i + 2], (m - i - 2) * sizeof(ScanPart))
        m -= 1
        # Part i now ends at parts[i + 1].start; re-rank its pairs with both neighbours.
        if i > 0 and i + 2 < m:
            vocab_rank_two(v, p + parts[i].start, parts[i + 2].start - parts[i].start,
                           p + parts[i - 1].start, parts[i + 1].start - parts[i - 1].start,
                           &parts[i].rank, &parts[i - 1].rank, True)
        elif i + 2 < m:
            parts[i].rank = vocab_rank_in(v, p + parts[i].start,
                                          parts[i + 2].start - parts[i].start, True)
        else:
            parts[i].rank = NO_RANK
            if i > 0:
                parts[i - 1].rank = vocab_rank_in(v, p + parts[i - 1].start,
                                                  parts[i + 1].start - parts[i - 1].start,
                                                  True)
    for i in range(m - 1):
        if parts[i].token == NO_RANK:
            err_pos[0] = parts[i].start
            rc = ERR_BYTE
            break
        if out_push(out, parts[i].token) < 0:
            rc = ERR_NOMEM
            break
    if parts != stack_parts:
        free(parts)
    return rc


# A heap entry is one word, rank << 32 | position: lowest rank first and, on equal
# ranks, the leftmost pair, exactly as the scan chooses. (Positions fit in 32 bits:
# longer chunks are refused before merging.)
ctypedef uint64_t HeapItem

# The heap is 8-ary: the children of entry k are 8k + 1 .. 8k + 8, and the array starts
# 7 entries past a 64-byte boundary, so each set of children is one cache line. A long
# chunk's heap is megabytes read at random, and a binary heap's sift-down reads a new
# line at each of its log2(size) levels; this one reads log8(size) lines, three times
# fewer. Entries from `size` to the end of the last set of children hold HEAP_EMPTY, so
# the minimum of a set takes no bounds checks.
cdef enum:
    HEAP_PAD_FRONT = 7      # entries before entry 0, to align the sets of children
    HEAP_PAD_BACK = 8       # HEAP_EMPTY entries past the largest size, for the last set

cdef extern from *:
    """
    #define FBE_HEAP_EMPTY 0xFFFFFFFFFFFFFFFFull
    """
    const uint64_t HEAP_EMPTY "FBE_HEAP_EMPTY"


cdef inline void heap_sift_down(HeapItem* h, Py_ssize_t size, Py_ssize_t i) noexcept nogil:
    cdef HeapItem item = h[i], least, x
    cdef Py_ssize_t first, child, k
    while True:
        first = 8 * i + 1
        if first >= size:
            break
        # the least of the 8 children, branch-free (cmov); the empty ones never win
        least = h[first]
        child = first
        for k in range(1, 8):
            x = h[first + k]
            child = first + k if x < least else child
            least = x if x < least else least
        if least >= item:
            break
        h[i] = least
        i = child
    h[i] = item


cdef inline void heap_push(HeapItem* h, Py_ssize_t* size, uint32_t rank, Py_ssize_t pos) noexcept nogil:
    cdef Py_ssize_t i = size[0], parent
    cdef HeapItem item = (<uint64_t>rank << 32) | <uint64_t>pos
    size[0] += 1
    while i > 0:
        parent = (i - 1) >> 3
        if item >= h[parent]:
            break
        h[i] = h[parent]
        i = parent
    h[i] = item


cdef int push_byte_tokens(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                          Py_ssize_t* err_pos) noexcept nogil:
    """Append the token of each byte of p[:n] (ERR_BYTE at the first that has none)."""
    cdef Py_ssize_t i
    cdef uint32_t r
    if out.size + n > out.cap and out_grow(out, out.size + n) < 0:
        return ERR_NOMEM
    for i in range(n):
        r = v.byte_rank[p[i]]
        if r == NO_RANK:
            err_pos[0] = i
            return ERR_BYTE
        out.data[out.size] = r
        out.size += 1
    return ERR_NONE


cdef int bpe_heap(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                  Py_ssize_t* err_pos) noexcept nogil:
    """Same merges as ``bpe_scan`` in O(n log n): a min-heap of (rank, position) over a
    doubly linked list of parts, with lazy invalidation.

    Parts are named by their start offset. pair_rank[i] is the current rank of merging
    part i with its successor (NO_RANK if none, or if part i was absorbed). A heap entry
    is live iff it still equals pair_rank[i]: a pair's bytes only ever grow, so a given
    part never sees the same rank twice and a stale entry can never look live.

    Memory: 32 bytes per byte of the chunk (none when no pair can merge). The heap never
    holds more than 2n entries: n - 1 at the start, and each merge pops one entry
    before pushing at most two.
    """
    cdef Py_ssize_t i, j, k, h, after, heap_size = 0
    cdef uint32_t r
    cdef HeapItem top
    cdef int rc = ERR_NONE
    # Chunks of up to SCAN_STACK bytes (the common case) need no malloc.
    cdef uint64_t stack_block[HEAP_STACK_WORDS]
    cdef size_t heap_words = 2 * n + HEAP_PAD_FRONT + HEAP_PAD_BACK + 8   # + 8: alignment
    cdef size_t need = heap_words * sizeof(HeapItem) + n * 4 * sizeof(uint32_t)
    cdef char* block = <char*>stack_block
    # Every merge sequence starts by joining two single bytes, so a chunk in which no two
    # adjacent bytes form a token never merges: its tokens are its bytes. Long runs of
    # such a pair (" " * 10**7 in GPT-2) then cost a table lookup per byte instead of
    # 32 bytes of fresh scratch memory per byte.
    for i in range(n - 1):
        if v.pair_rank2[p[i] | (<uint32_t>p[i + 1] << 8)] != NO_RANK:
            break
    else:
        return push_byte_tokens(v, p, n, out, err_pos)
    if need > sizeof(stack_block):
        block = <char*>malloc(need)
        if block == NULL:
            return ERR_NOMEM
    # positions fit in 32 bits (bpe_merge refuses longer chunks); prv of part 0 is NO_RANK
    cdef HeapItem* heap = <HeapItem*>((<uintptr_t>block + 63) & ~(<uintptr_t>63)) + HEAP_PAD_FRONT
    cdef uint32_t* nxt = <uint32_t*>(<HeapItem*>block + heap_words)
    cdef uint32_t* prv = nxt + n
    cdef uint32_t* token = prv + n
    cdef uint32_t* pair_rank = token + n

    for i in range(n):
        nxt[i] = <uint32_t>(i + 1)
        prv[i] = <uint32_t>(i - 1) if i > 0 else NO_RANK
        token[i] = v.byte_rank[p[i]]
        r = vocab_rank(v, p + i, 2) if i + 1 < n else NO_RANK
        pair_rank[i] = r
        if r != NO_RANK:
            heap[heap_size] = (<uint64_t>r << 32) | <uint64_t>i
            heap_size += 1
    for i in range(heap_size, 2 * n + HEAP_PAD_BACK):
        heap[i] = HEAP_EMPTY
    i = (heap_size + 6) // 8     # the entries with children: 0 .. (heap_size - 2) // 8
    while i > 0:
        i -= 1
        heap_sift_down(heap, heap_size, i)

    while heap_size > 0:
        top = heap[0]
        heap_size -= 1
        heap[0] = heap[heap_size]
        heap[heap_size] = HEAP_EMPTY
        if heap_size > 0:
            heap_sift_down(heap, heap_size, 0)
        i = <Py_ssize_t>(top & <uint64_t>NO_RANK)
        r = <uint32_t>(top >> 32)
        if pair_rank[i] != r:
            continue  # stale
        # Merge part i with its successor j.
        j = nxt[i]
        k = nxt[j]
        token[i] = r
        pair_rank[j] = NO_RANK
        nxt[i] = <uint32_t>k
        if k < n:
            prv[k] = <uint32_t>i
            after = nxt[k]
            r = vocab_rank(v, p + i, after - i)
        else:
            r = NO_RANK
        pair_rank[i] = r
        if r != NO_RANK:
            heap_push(heap, &heap_size, r, i)
        if prv[i] != NO_RANK:
            h = prv[i]
            r = vocab_rank(v, p + h, k - h)
            pair_rank[h] = r
            if r != NO_RANK:
                heap_push(heap, &heap_size, r, h)

    i = 0
    while i < n:
        if token[i] == NO_RANK:
            err_pos[0] = i
            rc = ERR_BYTE
            break
        if out_push(out, token[i]) < 0:
            rc = ERR_NOMEM
            break
        i = nxt[i]
    if block != <char*>stack_block:
        free(block)
    return rc


# A small direct-mapped cache of merged chunks, owned by one thread for one call (so no
# locking and nothing shared): words recur (Zipf), and a hit replaces a whole merge loop
# of rank lookups, most of them cache misses in a large vocabulary, by one memcmp.
cdef enum:
    CACHE_KEY_MAX = 24
    CACHE_TOK_MAX = 8
    CACHE_ENTRIES = 8192
    CACHE_POOL = 16           # chunk caches an encoder keeps between calls


cdef struct CacheEntry:       # one 64-byte cache line
    uint32_t tag              # low half of the chunk's hash
    uint16_t length           # 0: empty
    uint16_t n_tokens
    unsigned char key[CACHE_KEY_MAX]
    uint32_t tokens[CACHE_TOK_MAX]


cdef inline int bpe_merge(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                          Py_ssize_t* err_pos) noexcept nogil:
    if <uint64_t>n >= <uint64_t>NO_RANK:   # positions must fit in 32 bits
        err_pos[0] = 0
        return ERR_TOO_LONG
    if n > heap_threshold:
        return bpe_heap(v, p, n, out, err_pos)
    return bpe_scan(v, p, n, out, err_pos)

cdef inline bint cache_get(CacheEntry* e, const unsigned char* p, Py_ssize_t n, uint64_t h,
                           OutBuf* out, int* rc) noexcept nogil:
    """On a hit in entry e, append its tokens to out (rc: ERR_NONE or ERR_NOMEM)."""
    if not (e.length == n and e.tag == <uint32_t>h and fbe_equal_short(e.key, p, n)):
        return False
    return cache_copy_out(e, out, rc)


cdef inline bint cache_get_word(CacheEntry* e, uint64_t w, Py_ssize_t n, uint64_t h,
                                OutBuf* out, int* rc) noexcept nogil:
    """cache_get for n <= 8 given w = fbe_word(p, n): keys that short are stored as
    that zero-padded word, so one compare decides, whatever the length."""
    if not (e.length == n and e.tag == <uint32_t>h and fbe_load64(e.key) == w):
        return False
    return cache_copy_out(e, out, rc)


cdef inline bint cache_copy_out(CacheEntry* e, OutBuf* out, int* rc) noexcept nogil:
    # copy all CACHE_TOK_MAX slots (a fixed size: two vector moves, no libc call) and
    # keep the first n_tokens
    if out.size + CACHE_TOK_MAX > out.cap and out_grow(out, out.size + CACHE_TOK_MAX) < 0:
        rc[0] = ERR_NOMEM
        return True
    memcpy(out.data + out.size, e.tokens, CACHE_TOK_MAX * sizeof(uint32_t))
    out.size += e.n_tokens
    rc[0] = ERR_NONE
    return True


cdef inline void cache_put(CacheEntry* e, const unsigned char* p, Py_ssize_t n, uint64_t h,
                           const OutBuf* out, Py_ssize_t before) noexcept nogil:
    """Remember out.data[before:out.size] as the tokens of p[:n] (if they fit)."""
    cdef uint64_t w
    if out.size - before > CACHE_TOK_MAX:
        return
    e.tag = <uint32_t>h
    e.length = <uint16_t>n
    e.n_tokens = <uint16_t>(out.size - before)
    if n <= 8:
        w = fbe_word(p, n)        # zero-padded: what cache_get_word compares
        memcpy(e.key, &w, 8)
    else:
        memcpy(e.key, p, n)
    memcpy(e.tokens, out.data + before, e.n_tokens * sizeof(uint32_t))


cdef extern from *:
    """
    #define FBE_PURE_SALT 0x9ddfea08eb382d69ull
    """
    # Entries of pure BPE results (merge_cached) hash with this salt: for the same bytes
    # their tag differs from bpe_chunk's, whose results can differ (whole-chunk lookup).
    const uint64_t PURE_SALT "FBE_PURE_SALT"


cdef int merge_cached(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                      Py_ssize_t* err_pos, CacheEntry* cache) noexcept nogil:
    """bpe_merge through the thread's chunk cache (cache may be NULL). The joins of
    bpe_by_chars ask about the same few token pairs again and again."""
    cdef uint64_t h
    cdef CacheEntry* e
    cdef Py_ssize_t before = out.size
    cdef int rc = ERR_NONE
    if cache == NULL or n > CACHE_KEY_MAX:
        return bpe_merge(v, p, n, out, err_pos)
    h = (fbe_hash_word(fbe_word(p, n), n) if n <= 8 else fbe_hash(p, n)) ^ PURE_SALT
    e = &cache[(h >> 24) & (CACHE_ENTRIES - 1)]
    if cache_get(e, p, n, h, out, &rc):
        return rc
    rc = bpe_merge(v, p, n, out, err_pos)
    if rc == ERR_NONE:
        cache_put(e, p, n, h, out, before)
    return rc


# --------------------------------------------------------------------------------------
# Merging by characters: the same result from about a third of the work in CJK text
# --------------------------------------------------------------------------------------
#
# Write enc(s) for the BPE of a byte string s (bpe_merge: lowest rank, leftmost on ties).
#
# 1. Junction rule. If enc(P) = A, enc(Q) = B and the tokens (last of A, first of B) are
#    *compatible*, i.e. enc(bytes(a) + bytes(b)) == [a, b], then enc(P + Q) = A + B.
#    Why: until some merge crosses the P|Q junction, BPE of P + Q interleaves the merges
#    of enc(P) and enc(Q), and the tokens on either side of the junction grow exactly as
#    they do inside bytes(a) + bytes(b) (their merges are ordered by rank alone). A merge
#    across the junction at some point would happen at that point in bytes(a) + bytes(b)
#    too, so (a, b) would not be compatible. Also, each run of consecutive tokens of
#    enc(P) is the encoding of its own bytes. (The same facts drive the backtracking
#    encoder of github/rust-gems "bpe".)
#
# 2. Character rule. Take a string of characters c1..ck, each of whose bytes BPE-merge
#    into a single token t_i, the largest rank used on the way being M_i. Suppose
#    (a) every token that is not made of whole characters and spans a boundary ci|ci+1
#        ranks above M_i and M_i+1 (the vocabulary's cross_bits say where such tokens
#        can exist at all, from the two bytes at the boundary; cross_min holds the lowest
#        rank among them), and
#    (b) every token made of several whole characters ranks above M_c of each character
#        c in it (checked for the whole vocabulary at load; characters that fail are
#        marked and never take this path).
#    Then enc of the bytes equals BPE started from [t_1, ..., t_k] ("character-level").
#    Why: while a character is incomplete, its next own merge is always available and
#    ranks at most its M, so byte-level BPE only does merges ranked below that. A token
#    as in (a) could only form while one of its two characters is incomplete, and it
#    ranks above that character's M: it never forms. So every merge across a boundary
#    joins parts made of whole characters, and each character completes exactly as it
#    does alone. Now take the merge m* that the character level does next. If byte-level
#    BPE cannot do it yet, a character c in it is incomplete; by (b) m* ranks above M_c,
#    and every merge done until c completes ranks below M_c. So no other character-level
#    merge comes first (m* is the lowest of them), and m* follows once c is complete:
#    both pick the same merges in the same order.
#
# 3. Wall rule. A character whose bytes BPE-merge into several tokens (most CJK in GPT-2,
#    many in cl100k), with no token that is not whole characters spanning either of its
#    boundaries (cross_bits clear), encodes to exactly those tokens, and nothing merges
#    across it. Why: the first merge across one of its boundaries would make a token of
#    whole characters holding the whole character, so one of the two merged parts
#    would already hold it whole, which its own merges never produce.
#
# 4. Split rule. If no token spans a boundary between two characters, no merge can cross
#    it (every merge makes a token), and BPE of each side goes on as if alone (ties are
#    broken leftmost within each side too): enc(P + Q) = enc(P) + enc(Q). No token
#    spans it when cross_bits is clear there (no token that is not whole characters)
#    and no token holds the two characters whole (bigram_bloom, built from every
#    token's characters). In CJK text most boundaries between words are like that, so
#    a long unseen chunk falls apart into short words that recur: mostly chunk-cache
#    hits instead of a merge.
#
# So a chunk is first cut at such boundaries when it has any (rule 4); otherwise it is
# cut into runs where (a) and (b) hold, each run is merged at character
# level (a CJK character is one unit instead of three bytes and two merges), walls are
# copied, other characters are merged from bytes, and the pieces are joined by rule 1
# (no check is needed next to a wall). A junction
# that is not compatible is re-encoded from a few tokens on each side (doubling) until
# its own two junctions are. Work per chunk is capped, so the worst case stays linear;
# anything unusual falls back to bpe_merge. Tests compare the two paths everywhere.

cdef enum:
    CHAR_WALL = 1             # char_info high word of a character of several tokens
    UNITS_MIN = 7             # bytes; shorter chunks merge faster from bytes
    UNITS_MAX = 256           # bytes; longer chunks take the heap (bounded work)
    UNITS_BUDGET = 4          # bytes re-encoded at junctions, per byte of chunk
    BIGRAM_WORDS = 8192       # 64 KiB filter: ~25k pairs in o200k, ~1% false positives
    JOIN_BYTES_MAX = 512


cdef inline bint cross_bit(const Vocab* v, uint32_t x, uint32_t y) noexcept nogil:
    cdef uint32_t e = x | (y << 8)
    return (v.cross_bits[e >> 6] >> (e & 63)) & 1


cdef inline uint64_t bigram_bits(uint32_t a, uint32_t b, uint64_t* word) noexcept nogil:
    """The filter word index (to word[0]) and the two bits of the character pair a, b."""
    cdef uint64_t h = fbe_hash_word((<uint64_t>a << 32) | b, 8)
    word[0] = (h >> 32) & (BIGRAM_WORDS - 1)
    return (1ULL << ((h >> 52) & 63)) | (1ULL << (h >> 58))


cdef inline bint bigram_may_join(const Vocab* v, uint32_t a, uint32_t b) noexcept nogil:
    """False only if no token holds character a followed by character b (whole). A false
    True (about 1%) only costs a split not taken."""
    cdef uint64_t word
    cdef uint64_t bits = bigram_bits(a, b, &word)
    return (v.bigram_bloom[word] & bits) == bits


cdef inline bint no_token_spans(const Vocab* v, bint clean, uint32_t a,
                                uint32_t b) noexcept nogil:
    """Rule 4's test for the boundary between characters a and b, given clean = its
    cross bit is clear (no token that is not whole characters spans it)."""
    return clean and not bigram_may_join(v, a, b)


cdef inline uint32_t decode_char(const unsigned char* p, Py_ssize_t left,
                                 Py_ssize_t* q) noexcept nogil:
    """Code point of the 1..3-byte UTF-8 character at p and its length in q[0];
    NO_RANK for a 4-byte character or malformed bytes (the caller falls back)."""
    cdef uint32_t c = p[0]
    if c < 0x80:
        q[0] = 1
        return c
    if c >= 0xC2 and c < 0xE0 and left >= 2 and (p[1] & 0xC0) == 0x80:
        q[0] = 2
        return ((c & 0x1F) << 6) | (p[1] & 0x3F)
    if c >= 0xE0 and c < 0xF0 and left >= 3 and (p[1] & 0xC0) == 0x80 and (p[2] & 0xC0) == 0x80:
        q[0] = 3
        c = ((c & 0x0F) << 12) | ((<uint32_t>p[1] & 0x3F) << 6) | (p[2] & 0x3F)
        return c if c >= 0x800 else NO_RANK
    return NO_RANK


cdef int merge_units(const Vocab* v, const unsigned char* p, const uint32_t* start,
                     uint32_t* token, Py_ssize_t m, OutBuf* out) noexcept nogil:
    """Character-level BPE of units [start[i], start[i + 1]) with tokens token[i]
    (start[m] is the end): tiktoken's scan over units instead of bytes. Appends the
    result to out (which has room)."""
    cdef uint32_t rank[UNITS_MAX]
    cdef uint32_t nxt[UNITS_MAX]
    cdef uint32_t prv[UNITS_MAX]
    cdef Py_ssize_t i, j, k, h
    cdef uint32_t best
    for i in range(m):
        nxt[i] = <uint32_t>(i + 1)
        prv[i] = <uint32_t>(i - 1)
        rank[i] = (vocab_rank(v, p + start[i], start[i + 2] - start[i]) if i + 1 < m
                   else NO_RANK)
    while True:
        best = fbe_min_u32(rank, m)
        if best == NO_RANK:
            break
        i = 0
        while rank[i] != best:
            i += 1
        j = nxt[i]
        k = nxt[j]
        token[i] = best
        rank[j] = NO_RANK
        nxt[i] = <uint32_t>k
        if k < m:
            prv[k] = <uint32_t>i
            rank[i] = vocab_rank(v, p + start[i], start[nxt[k]] - start[i])
        else:
            rank[i] = NO_RANK
        if i > 0:
            h = prv[i]
            rank[h] = vocab_rank(v, p + start[h], start[k] - start[h])
    i = 0
    while i < m:
        out.data[out.size] = token[i]
        out.size += 1
        i = nxt[i]
    return ERR_NONE


cdef inline Py_ssize_t token_bytes(const Vocab* v, const uint32_t* toks, Py_ssize_t count) noexcept nogil:
    cdef Py_ssize_t i, total = 0
    for i in range(count):
        total += <uint32_t>(v.rank_span[toks[i]] >> 32)
    return total


cdef int join_runs(const Vocab* v, const unsigned char* p, OutBuf* out, Py_ssize_t base,
                   Py_ssize_t left, Py_ssize_t left_end, Py_ssize_t* budget,
                   CacheEntry* cache) noexcept nogil:
    """out[base:base+left] encodes p[0:left_end]; out[base+left:] encodes the next run.
    Makes out[base:] the encoding of both (rule 1). Returns 0, or -1 to give up."""
    cdef Py_ssize_t right = out.size - base - left, k = 1, mr = 1, s, e, w
    cdef uint32_t* t = out.data + base
    cdef uint32_t tmp[JOIN_BYTES_MAX]
    cdef OutBuf o
    cdef Py_ssize_t err = 0
    cdef bint ok_left, ok_right
    if left == 0 or right == 0:
        return 0
    while True:
        # window: the last k tokens on the left and the first mr on the right
        s = left_end - token_bytes(v, t + left - k, k)
        e = left_end + token_bytes(v, t + left, mr)
        budget[0] -= e - s
        if budget[0] < 0 or e - s > JOIN_BYTES_MAX:
            return -1
        o.data = tmp
        o.size = 0
        o.cap = JOIN_BYTES_MAX
        o.arena = NULL
        if merge_cached(v, p + s, e - s, &o, &err, cache) != ERR_NONE:
            return -1
        w = o.size
        if w == k + mr and memcmp(tmp, t + left - k, w * sizeof(uint32_t)) == 0:
            return 0   # unchanged: the junction was compatible all along
        ok_left = k == left or pair_compatible(v, t[left - k - 1], tmp[0], cache)
        ok_right = mr == right or pair_compatible(v, tmp[w - 1], t[left + mr], cache)
        if ok_left and ok_right:
            # t[left-k : left+mr] becomes tmp[0:w]
            memmove(t + left - k + w, t + left + mr, (right - mr) * sizeof(uint32_t))
            memcpy(t + left - k, tmp, w * sizeof(uint32_t))
            out.size = base + left - k + w + right - mr
            return 0
        if not ok_left:
            k = min(2 * k, left)
        if not ok_right:
            mr = min(2 * mr, right)


cdef bint pair_compatible(const Vocab* v, uint32_t a, uint32_t b,
                          CacheEntry* cache) noexcept nogil:
    """enc(bytes(a) + bytes(b)) == [a, b]."""
    cdef unsigned char buf[JOIN_BYTES_MAX]
    cdef uint32_t toks[JOIN_BYTES_MAX]
    cdef OutBuf o
    cdef Py_ssize_t err = 0
    cdef uint64_t sa = v.rank_span[a], sb = v.rank_span[b]
    cdef uint32_t la = <uint32_t>(sa >> 32), lb = <uint32_t>(sb >> 32)
    if la + lb > JOIN_BYTES_MAX:
        return False    # treated as incompatible: only costs a wider re-encoding
    memcpy(buf, v.arena + <uint32_t>sa, la)
    memcpy(buf + la, v.arena + <uint32_t>sb, lb)
    o.data = toks
    o.size = 0
    o.cap = JOIN_BYTES_MAX
    o.arena = NULL
    if merge_cached(v, buf, la + lb, &o, &err, cache) != ERR_NONE:
        return False
    return o.size == 2 and toks[0] == a and toks[1] == b


cdef inline void push_wall(const Vocab* v, const unsigned char* p, Py_ssize_t q,
                           OutBuf* out) noexcept nogil:
    """enc() of a wall character of q = 2 or 3 bytes: its bytes, after the one merge
    (the lower-ranked pair) that can happen; a second would make it one token."""
    cdef uint32_t r1, r2
    cdef uint32_t* d = out.data + out.size
    if q == 2:
        d[0] = v.byte_rank[p[0]]
        d[1] = v.byte_rank[p[1]]
        out.size += 2
        return
    r1 = v.pair_rank2[p[0] | (<uint32_t>p[1] << 8)]
    r2 = v.pair_rank2[p[1] | (<uint32_t>p[2] << 8)]
    if r1 == NO_RANK and r2 == NO_RANK:
        d[0] = v.byte_rank[p[0]]
        d[1] = v.byte_rank[p[1]]
        d[2] = v.byte_rank[p[2]]
        out.size += 3
    elif r1 < r2:
        d[0] = r1
        d[1] = v.byte_rank[p[2]]
        out.size += 2
    else:
        d[0] = v.byte_rank[p[0]]
        d[1] = r2
        out.size += 2


cdef int encode_split(const Vocab* v, const unsigned char* p, const uint32_t* start,
                      const uint32_t* token, const unsigned char* clean, const uint32_t* cps,
                      unsigned char* split, Py_ssize_t m, OutBuf* out,
                      CacheEntry* cache) noexcept nogil:
    """Rule 4 for units [0, m): append enc() of each piece between boundaries that no
    token spans. Returns 0, or 1 with out unchanged when there is no such boundary, or
    -1 on error (out may hold part of the result: the caller drops it)."""
    cdef Py_ssize_t i, j, pieces = 1
    cdef Py_ssize_t err = 0
    for i in range(1, m):
        split[i] = no_token_spans(v, clean[i], cps[i - 1], cps[i])
        pieces += split[i]
    if pieces == 1:
        return 1
    split[m] = 1
    i = 0
    while i < m:
        j = i + 1
        while not split[j]:
            j += 1
        if j - i == 1 and token[i] != NO_RANK:
            out.data[out.size] = token[i]    # a character that is one token (room: n)
            out.size += 1
        elif merge_cached(v, p + start[i], start[j] - start[i], out, &err, cache) != ERR_NONE:
            return -1
        i = j
    return 0


cdef int bpe_by_chars(const Vocab* v, const unsigned char* p, Py_ssize_t n,
                      OutBuf* out, CacheEntry* cache) noexcept nogil:
    """enc(p[:n]) appended to out by the character rule; -1 (out unchanged) when the
    caller must merge from bytes instead."""
    cdef uint32_t start[UNITS_MAX + 1]
    cdef uint32_t token[UNITS_MAX]
    cdef unsigned char wall[UNITS_MAX + 1]    # wall[m] = 0: no unit past the end
    cdef unsigned char clean[UNITS_MAX + 1]   # clean[i]: the boundary before unit i
    cdef unsigned char joins[UNITS_MAX + 1]   # joins[i]: rule 2 (a) holds there
    cdef uint32_t m_plus_1[UNITS_MAX]         # M + 1 of good units (0: no merge)
    cdef uint32_t cps[UNITS_MAX]              # code point of each unit
    cdef unsigned char split[UNITS_MAX + 1]   # split[i]: rule 4 cuts before unit i
    cdef uint32_t cp
    cdef uint64_t info
    cdef Py_ssize_t base = out.size, pos = 0, q = 0, m = 0, i, j, done_end, left
    cdef Py_ssize_t budget = UNITS_BUDGET * n, err = 0, bad = 0, single = 0
    cdef bint seam_safe
    cdef int rc
    if out.cap < base + n + 1 and out_grow(out, base + n + 1) < 0:
        return -1
    # 1. characters -> units: start offset, token (NO_RANK unless one good token), wall
    while pos < n:
        cp = decode_char(p + pos, n - pos, &q)
        if cp == NO_RANK:
            return -1
        start[m] = <uint32_t>pos
        cps[m] = cp
        info = v.char_info[cp]
        token[m] = <uint32_t>info
        m_plus_1[m] = <uint32_t>(info >> 32)
        wall[m] = token[m] == NO_RANK and (info >> 32) == CHAR_WALL
        bad += token[m] == NO_RANK and not wall[m]
        single += q == 1
        m += 1
        pos += q
        if bad >= 2 and 4 * bad > m:
            return -1   # many characters that need merging from bytes
        if single >= 8 and 2 * single > m:
            return -1   # mostly ASCII: units are bytes anyway, and the heap scales better
    start[m] = <uint32_t>n
    wall[m] = 0
    clean[0] = 1
    clean[m] = 1
    for i in range(1, m):
        clean[i] = not cross_bit(v, p[start[i] - 1], p[start[i]])
        # between good units, a spanning token that ranks above both M is harmless
        joins[i] = clean[i] or (
            token[i] != NO_RANK and token[i - 1] != NO_RANK
            and v.cross_min[p[start[i] - 1] | (<uint32_t>p[start[i]] << 8)]
                >= max(m_plus_1[i], m_plus_1[i - 1]))
    # 2. rule 4: cut where no token spans the boundary, and encode the pieces alone
    if v.bigram_bloom != NULL:
        rc = encode_split(v, p, start, token, clean, cps, split, m, out, cache)
        if rc == 0:
            return ERR_NONE
        if rc < 0:
            out.size = base
            return -1
    # 3. segments: runs of good units across clean boundaries (rule 2), isolated walls
    #    (rule 3), other characters alone from bytes; each joined to what came before
    #    by rule 1 unless a wall makes the seam safe
    i = 0
    done_end = 0          # bytes of p already encoded into out[base:]
    while i < m:
        left = out.size - base
        j = i + 1
        if token[i] != NO_RANK:
            while j < m and token[j] != NO_RANK and joins[j]:
                j += 1
            merge_units(v, p, start + i, token + i, j - i, out)
        elif wall[i] and clean[i] and clean[i + 1]:
            push_wall(v, p + start[i], start[i + 1] - start[i], out)
        elif merge_cached(v, p + start[i], start[i + 1] - start[i], out, &err,
                          cache) != ERR_NONE:
            out.size = base
            return -1
        seam_safe = clean[i] and ((wall[i] and clean[i + 1])
                                  or (i > 0 and wall[i - 1] and clean[i - 1]))
        if not seam_safe and join_runs(v, p, out, base, left, done_end, &budget, cache) < 0:
            out.size = base
            return -1
        done_end = start[j]
        i = j
    return ERR_NONE


cdef inline int bpe_chunk(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                          Py_ssize_t* err_pos, CacheEntry* cache) noexcept nogil:
    """Encode one pre-tokenized chunk: a whole-chunk hit first, as tiktoken does.

    With a cache, short chunks are looked up there first: one line of a small table,
    instead of the filter word and slot of a vocabulary table far bigger than L2.
    Only these common cases are inline in the chunk loop (most chunks end here, and a
    call would save and restore registers for each); the rest is bpe_chunk_miss.
    """
    cdef uint64_t w, h
    cdef uint32_t r
    cdef CacheEntry* e = NULL
    cdef int rc
    # A quarter of all chunks is one byte (punctuation, newlines): its token comes from
    # a 1 KiB table, cheaper than hashing it for the chunk cache.
    if n == 1:
        r = v.byte_rank[p[0]]
        if r == NO_RANK:
            err_pos[0] = 0
            return ERR_BYTE
        return ERR_NOMEM if out_push(out, r) < 0 else ERR_NONE
    if n == 2:
        r = v.pair_rank2[p[0] | (<uint32_t>p[1] << 8)]
        if r != NO_RANK:
            return ERR_NOMEM if out_push(out, r) < 0 else ERR_NONE
    if n <= 8:
        w = fbe_word(p, n)
        h = fbe_hash_word(w, n)
    else:
        w = fbe_load64(p)
        h = fbe_hash(p, n)
    if cache != NULL and n <= CACHE_KEY_MAX:
        e = &cache[(h >> 24) & (CACHE_ENTRIES - 1)]
        if (cache_get_word(e, w, n, h, out, &rc) if n <= 8
                else cache_get(e, p, n, h, out, &rc)):
            return rc
    return bpe_chunk_miss(v, p, n, out, err_pos, cache, e, w, h)


cdef int bpe_chunk_miss(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                        Py_ssize_t* err_pos, CacheEntry* cache, CacheEntry* e, uint64_t w,
                        uint64_t h) noexcept nogil:
    """bpe_chunk past the fast paths, given its word w and hash h (slot_hash) and the
    cache entry e to fill (NULL: none): the whole chunk is a token, or merge it."""
    cdef uint32_t r
    cdef Py_ssize_t before = out.size
    cdef int rc
    if n == 2:
        rc = bpe_merge(v, p, n, out, err_pos)
    else:
        r = vocab_rank_hashed(v, p, n, w, h)
        if r != NO_RANK:
            rc = ERR_NOMEM if out_push(out, r) < 0 else ERR_NONE
        elif (v.char_info != NULL and by_chars_enabled and UNITS_MIN <= n <= UNITS_MAX
              and (p[0] >= 0xE0 or p[1] >= 0xE0)
              and bpe_by_chars(v, p, n, out, cache) == ERR_NONE):
            rc = ERR_NONE
        else:
            rc = bpe_merge(v, p, n, out, err_pos)
    if e != NULL and rc == ERR_NONE:
        cache_put(e, p, n, h, out, before)
    return rc


# --------------------------------------------------------------------------------------
# Special tokens allowed in one call
# --------------------------------------------------------------------------------------

cdef struct Special:
    const unsigned char* text
    Py_ssize_t length
    uint32_t token


cdef struct SpecialSet:
    Special* items
    Py_ssize_t count
    bint first_byte[256]
    int common_first          # the first byte of every item, or -1 if they differ
    int common_second         # with common_first: the second byte of every item (all
                              # are 2 bytes or longer), or -1


cdef extern from *:
    """
    #ifdef __SSE2__
    #include <emmintrin.h>
    #endif
    /* The first i >= start with p[i] == b0 and p[i + 1] == b1 (i + 1 < n), or n: the
       candidates for special tokens, which all start with the same two bytes in
       tiktoken's encodings ("<|"). 16 positions a step; memchr for "<" alone stops at
       every tag of HTML or XML. */
    static Py_ssize_t fbe_find_pair(const unsigned char* p, Py_ssize_t start, Py_ssize_t n,
                                    int b0, int b1) {
        Py_ssize_t i = start;
    #ifdef __SSE2__
        const __m128i v0 = _mm_set1_epi8((char)b0), v1 = _mm_set1_epi8((char)b1);
        while (i + 17 <= n) {      /* reads p[i .. i + 16] */
            __m128i a = _mm_loadu_si128((const __m128i*)(p + i));
            __m128i b = _mm_loadu_si128((const __m128i*)(p + i + 1));
            unsigned m = (unsigned)_mm_movemask_epi8(
                _mm_and_si128(_mm_cmpeq_epi8(a, v0), _mm_cmpeq_epi8(b, v1)));
            if (m)
                return i + __builtin_ctz(m);
            i += 16;
        }
    #endif
        for (; i + 1 < n; i++)
            if (p[i] == b0 && p[i + 1] == b1)
                return i;
        return n;
    }
    """
    Py_ssize_t fbe_find_pair(const unsigned char* p, Py_ssize_t start, Py_ssize_t n,
                             int b0, int b1) noexcept nogil


def _find_pair(bytes text, Py_ssize_t start, int b0, int b1):
    """Testing hook: fbe_find_pair over text (the first i >= start with text[i:i + 2] ==
    bytes([b0, b1]), or len(text))."""
    return fbe_find_pair(<const unsigned char*>PyBytes_AS_STRING(text), start, len(text), b0, b1)


cdef void special_set_index(SpecialSet* ss) noexcept nogil:
    """Fill first_byte, common_first and common_second from the items."""
    cdef Py_ssize_t k
    memset(ss.first_byte, 0, sizeof(ss.first_byte))
    ss.common_first = ss.items[0].text[0] if ss.count else -1
    ss.common_second = ss.items[0].text[1] if ss.count and ss.items[0].length >= 2 else -1
    for k in range(ss.count):
        ss.first_byte[ss.items[k].text[0]] = True
        if ss.items[k].text[0] != ss.common_first:
            ss.common_first = -1
        if ss.items[k].length < 2 or ss.items[k].text[1] != ss.common_second:
            ss.common_second = -1
    if ss.common_first < 0:
        ss.common_second = -1


cdef bint find_special(const SpecialSet* ss, const unsigned char* text, Py_ssize_t start,
                       Py_ssize_t n, Py_ssize_t* found_start, Py_ssize_t* found_end,
                       uint32_t* found_token) noexcept nogil:
    """Leftmost item of ss in text[start:n] (longest one if several start at the same
    place); False if there is none. When all items start with the same byte (tiktoken's
    all start with "<"), libc's memchr finds the candidates: a pass over the text costs
    a fraction of a byte-by-byte loop; and when they share the second byte too ("|"),
    fbe_find_pair looks for both (HTML has a "<" every few bytes)."""
    cdef Py_ssize_t i = start, k, best_len
    cdef uint32_t best_tok = 0
    cdef const unsigned char* q
    if ss == NULL or ss.count == 0:
        return False
    while i < n:
        if ss.common_second >= 0:
            i = fbe_find_pair(text, i, n, ss.common_first, ss.common_second)
            if i >= n:
                return False
        elif ss.common_first >= 0:
            q = <const unsigned char*>memchr(text + i, ss.common_first, n - i)
            if q == NULL:
                return False
            i = q - text
        elif not ss.first_byte[text[i]]:
            i += 1
            continue
        best_len = 0
        for k in range(ss.count):
            if (ss.items[k].length > best_len and ss.items[k].length <= n - i
                    and memcmp(ss.items[k].text, text + i, ss.items[k].length) == 0):
                best_len = ss.items[k].length
                best_tok = ss.items[k].token
        if best_len:
            found_start[0] = i
            found_end[0] = i + best_len
            found_token[0] = best_tok
            return True
        i += 1
    return False


# --------------------------------------------------------------------------------------
# Jobs: one text each, run without the GIL (possibly on a worker thread)
# --------------------------------------------------------------------------------------

cdef struct Job:
    const unsigned char* text # UTF-8; NULL until the worker converts src
    Py_ssize_t n
    const void* src           # the str's own PEP 393 buffer (when text is NULL)
    int src_kind              # 1, 2 or 4 bytes per code point
    Py_ssize_t src_len        # in code points
    unsigned char* owned      # UTF-8 buffer this job allocated (freed by the caller)
    const int64_t* spans      # regex path: chunk [start, end) byte pairs; NULL otherwise
    Py_ssize_t n_spans
    OutBuf out
    int err
    Py_ssize_t err_pos        # byte offset in text for ERR_BYTE
    bint no_check             # the disallowed check is not this job's: its text is a
                              # surrogate fix-up (the caller checks the text as given),
                              # or the caller has checked it already


cdef struct Context:
    const Vocab* vocab
    const SpecialSet* specials
    const SpecialSet* disallowed  # no text may hold one of these (NULL: no check)
    int pattern               # native pre-tokenizer id, or -1 when spans are given
    Job* jobs
    Py_ssize_t n_jobs
    # The jobs are dealt in n_blocks contiguous blocks, one per thread (see deal_blocks):
    # block b is jobs [block_start[b], block_end[b]), handed out from block_next[b].
    Py_ssize_t n_blocks
    Py_ssize_t block_start[MAX_BLOCKS]
    Py_ssize_t block_end[MAX_BLOCKS]
    # atomic cursor of block b at block_next[b * CURSOR_STRIDE]: a cache line each, as
    # every thread moves its own at every job
    Py_ssize_t block_next[MAX_BLOCKS * CURSOR_STRIDE]
    void** cache_pool         # the encoder's chunk caches (see new_chunk_cache)
    OutArena* arenas          # per thread slot: where its jobs' ids go (see OutArena)
    # Streaming mode: workers flag each finished job so that the caller can build its
    # Python list (which needs the GIL, so only one thread can) while they go on.
    bint notify
    char* done                # per job: fbe_flag_store once it is finished
    char waiting              # fbe_flag: the caller sleeps on `cond` (under `lock`)
    Py_ssize_t wait_first     # until jobs wait_first and wait_last are both done
    Py_ssize_t wait_last
    pthread_mutex_t lock
    pthread_cond_t cond


cdef int encode_segment(const Context* ctx, Job* job, OutBuf* out, Py_ssize_t start,
                        Py_ssize_t end, Py_ssize_t* span_i, CacheEntry* cache) noexcept nogil:
    cdef const unsigned char* text = job.text
    cdef Py_ssize_t s, e, local
    cdef int rc
    cdef FbpeWin win
    if ctx.pattern >= 0:
        fbpe_win_reset(&win)
        s = start
        while s < end:
            e = split_next(&win, ctx.pattern, text, s, end)
            rc = bpe_chunk(ctx.vocab, text + s, e - s, out, &local, cache)
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
        rc = bpe_chunk(ctx.vocab, text + s, e - s, out, &local, cache)
        if rc != ERR_NONE:
            job.err_pos = s + local
            return rc
    return ERR_NONE


cdef int job_to_utf8(Job* job) noexcept nogil:
    """UTF-8 from the str's PEP 393 buffer, on the worker thread: converting many texts
    under the GIL would serialize batch encoding (and CPython's own conversion would
    also cache a UTF-8 copy inside every str). One pass into a buffer sized for the
    worst case (2, 3 or 4 bytes per code point for 1-, 2- and 4-byte kinds)."""
    cdef Py_ssize_t size
    cdef unsigned char* d = <unsigned char*>malloc(job.src_len * (job.src_kind + 1) + 1)
    cdef unsigned char* fit
    if d == NULL:
        return ERR_NOMEM
    size = fbe_to_utf8(job.src, job.src_kind, job.src_len, d)
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
        job.err = job_to_utf8(job)
        if job.err != ERR_NONE:
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


# --------------------------------------------------------------------------------------
# Pieces: a long text of a batch is cut into several jobs where every native pattern
# splits anyway, so that threads share it and its lists are built while it encodes
# --------------------------------------------------------------------------------------

#: Pieces are about (all text of the call) / (threads * pieces_per_thread) code points
#: long, and at least piece_min (but the last one of a text). Enough pieces per thread
#: that the threads finish together and the lists of all but the last few are built
#: while the rest encodes; long enough that a piece costs far more than handing it out.
cdef Py_ssize_t piece_min = 1 << 14
cdef Py_ssize_t pieces_per_thread = 16


def _set_piece_size(Py_ssize_t min_points, Py_ssize_t per_thread):
    """Testing hook: set piece_min and pieces_per_thread; returns the previous pair."""
    global piece_min, pieces_per_thread
    if min_points < 1 or per_thread < 1:
        raise ValueError(f"both must be at least 1, got {min_points}, {per_thread}")
    old = (piece_min, pieces_per_thread)
    piece_min = min_points
    pieces_per_thread = per_thread
    return old


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


cdef Py_ssize_t cut_job(Job* jobs, Py_ssize_t target) noexcept nogil:
    """Cut the text of jobs[0] (native pattern, prepared, not yet run) into pieces of
    about target code points at next_cut points, written to jobs[0], jobs[1], ...;
    returns how many (1: not cut). jobs must have room for n // target + 1 entries."""
    cdef Job whole = jobs[0]
    cdef const void* data = whole.text if whole.text != NULL else whole.src
    cdef int kind = 1 if whole.text != NULL else whole.src_kind
    cdef Py_ssize_t n = whole.n if whole.text != NULL else whole.src_len
    cdef Py_ssize_t start = 0, cut, count = 0
    while True:
        cut = next_cut(data, kind, start + target, n)
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


cdef bint specials_hold_newline(const SpecialSet* ss) noexcept nogil:
    """Whether a special token of ss (allowed or disallowed) contains "\\n": then no text
    is cut (see next_cut), as the token could span a cut."""
    cdef Py_ssize_t k
    for k in range(ss.count):
        if memchr(ss.items[k].text, 10, ss.items[k].length) != NULL:
            return True
    return False


cdef inline Py_ssize_t job_points(const Job* job) noexcept nogil:
    """A prepared job's length in code points."""
    return job.src_len if job.src != NULL else job.n


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


cdef CacheEntry* new_chunk_cache(const Context* ctx) noexcept nogil:
    """A chunk cache for one thread of this call (give it back with
    return_chunk_cache), or NULL if calloc failed, which just means no cache.

    The encoder keeps up to CACHE_POOL caches between calls, warm: a cache maps chunk
    bytes to that encoder's tokens, which never change. So a data loader calling
    encode() once per short document merges each word once, not once per document
    (measured, ~2 KB documents one call each: o200k Turkish 43.9 -> 65.5 MB/s, gpt2
    Python 85.5 -> 120.4). Each cache is used by one thread at a time."""
    cdef CacheEntry* c = <CacheEntry*>fbe_slot_take(ctx.cache_pool, CACHE_POOL)
    if c == NULL:
        c = <CacheEntry*>calloc(CACHE_ENTRIES, sizeof(CacheEntry))
    return c


cdef void return_chunk_cache(const Context* ctx, CacheEntry* c) noexcept nogil:
    if c != NULL and not fbe_slot_give(ctx.cache_pool, CACHE_POOL, c):
        free(c)


cdef void deal_blocks(Context* ctx, Py_ssize_t threads) noexcept nogil:
    """Many jobs (MANY_JOBS per thread or more): cut them into one contiguous block per
    thread (up to MAX_BLOCKS), thread slot t starting on block t % n_blocks. Few: one
    block that all threads share.

    Why blocks: each thread has its own chunk cache, and neighbouring texts of a batch
    share words (documents cut from one file, pages of one book). Dealt one by one,
    both threads meet those words and both merge them; dealt in halves, one does.
    Measured on ~2 KB documents, single thread: the even and the odd documents encoded
    as two calls cost 1.04-1.10x one call over all of them, the first and the second
    half 0.98-1.06x. Why not with few jobs: blocks of one or two long texts cannot even
    out their lengths (4 long Turkish documents on 2 threads: 12.4-13.7 ms shared,
    13.8-15.1 ms in blocks)."""
    cdef Py_ssize_t b, n_blocks = 1
    if ctx.n_jobs >= MANY_JOBS * threads:
        n_blocks = min(threads, <Py_ssize_t>MAX_BLOCKS)
    ctx.n_blocks = n_blocks
    for b in range(n_blocks):
        ctx.block_start[b] = ctx.n_jobs * b // n_blocks
        ctx.block_end[b] = ctx.n_jobs * (b + 1) // n_blocks
        ctx.block_next[b * CURSOR_STRIDE] = ctx.block_start[b]


cdef Py_ssize_t claim_job(Context* ctx, Py_ssize_t slot) noexcept nogil:
    """The next job for the thread in `slot`: from its own block while that lasts, then
    from the others (so no thread idles while jobs remain); n_jobs when none is left."""
    cdef Py_ssize_t k, b, j
    for k in range(ctx.n_blocks):
        b = (slot + k) % ctx.n_blocks
        # a block whose cursor is past its end is skipped without an atomic add
        if fbe_atomic_load(&ctx.block_next[b * CURSOR_STRIDE]) < ctx.block_end[b]:
            j = fbe_atomic_next(&ctx.block_next[b * CURSOR_STRIDE])
            if j < ctx.block_end[b]:
                return j
    return ctx.n_jobs


cdef struct WorkerArg:
    Context* ctx
    Py_ssize_t slot


cdef void mark_done(Context* ctx, Py_ssize_t j) noexcept nogil:
    """Streaming mode: flag job j finished, waking the caller if it waits for j.

    Without a lock while the caller is awake: a lock taken at every job moved its cache
    line between the cores 2,000 times a call. The flag is stored before `waiting` is
    read, and the caller stores `waiting` before it reads the flags (all sequentially
    consistent), so either this thread sees the caller waiting or the caller sees the
    job done. The signal is sent under the lock, which the caller holds until it
    sleeps, so it cannot come between the caller's last look and its sleep."""
    fbe_flag_store(&ctx.done[j], 1)
    if fbe_flag_load(&ctx.waiting):
        pthread_mutex_lock(&ctx.lock)
        if ctx.waiting and (j == ctx.wait_first or j == ctx.wait_last):
            pthread_cond_signal(&ctx.cond)
        pthread_mutex_unlock(&ctx.lock)


cdef void* worker_main(void* arg) noexcept nogil:
    cdef Context* ctx = (<WorkerArg*>arg).ctx
    cdef Py_ssize_t slot = (<WorkerArg*>arg).slot
    cdef Py_ssize_t i
    cdef CacheEntry* cache = new_chunk_cache(ctx)
    while True:
        i = claim_job(ctx, slot)
        if i >= ctx.n_jobs:
            break
        run_job(ctx, &ctx.jobs[i], cache, &ctx.arenas[slot])
        if ctx.notify:
            mark_done(ctx, i)
    return_chunk_cache(ctx, cache)
    return NULL


cdef Py_ssize_t start_workers(Context* ctx, Py_ssize_t count, Py_ssize_t first_slot,
                              pthread_t* tids, WorkerArg* args) noexcept nogil:
    """Start up to count worker threads in slots first_slot, first_slot + 1, ...;
    returns how many started."""
    cdef Py_ssize_t started = 0, t
    for t in range(count):
        args[started].ctx = ctx
        args[started].slot = first_slot + started
        if pthread_create(&tids[started], NULL, worker_main, &args[started]) == 0:
            started += 1
    return started


cdef void finished_runs(Context* ctx, const Py_ssize_t* built, Py_ssize_t* upto,
                        Py_ssize_t wait_first, Py_ssize_t wait_last) noexcept nogil:
    """Streaming mode: upto[b] = end of the run of finished jobs from built[b] in each
    block b. With wait_first >= 0, first block until jobs wait_first and wait_last are
    both finished: waiting for a stretch of jobs, not each one, keeps the number of
    wake-ups (and GIL hand-overs) small."""
    cdef Py_ssize_t b, i
    if wait_first >= 0:
        pthread_mutex_lock(&ctx.lock)
        ctx.wait_first = wait_first
        ctx.wait_last = wait_last
        fbe_flag_store(&ctx.waiting, 1)
        while not (fbe_flag_load(&ctx.done[wait_first]) and fbe_flag_load(&ctx.done[wait_last])):
            pthread_cond_wait(&ctx.cond, &ctx.lock)
        fbe_flag_store(&ctx.waiting, 0)
        pthread_mutex_unlock(&ctx.lock)
    for b in range(ctx.n_blocks):
        i = built[b]
        while i < ctx.block_end[b] and fbe_flag_load(&ctx.done[i]):
            i += 1
        upto[b] = i


cdef void run_jobs(Context* ctx, int num_threads) noexcept nogil:
    """Run every job on up to num_threads threads (the caller is one of them).

    Threads are created for this call and joined before returning: no pool outlives the
    call, so a process forked afterwards inherits no threads in a half-known state.
    """
    cdef pthread_t tids[MAX_THREADS_C]
    cdef WorkerArg* args
    cdef WorkerArg mine
    cdef Py_ssize_t started = 0, t
    cdef Py_ssize_t want = num_threads
    if want > ctx.n_jobs:
        want = ctx.n_jobs
    if want < 1:
        want = 1
    deal_blocks(ctx, want)
    args = <WorkerArg*>malloc(want * sizeof(WorkerArg))   # NULL: this thread does all
    if args != NULL:
        started = start_workers(ctx, want - 1, 1, tids, args)
    mine.ctx = ctx
    mine.slot = 0
    worker_main(&mine)
    for t in range(started):
        pthread_join(tids[t], NULL)
    free(args)


# --------------------------------------------------------------------------------------
# Python-facing helpers
# --------------------------------------------------------------------------------------

#: A batch call runs on at most one thread per points_per_thread code points of text,
#: and (cap_to_cpus) on no more threads than the CPUs this process may run on. Starting
#: a thread and waking a core costs 20-50 us on the 2-core VMs we measure on, so a
#: thread must get a few hundred microseconds of work to pay for itself. Measured
#: before this rule (o200k, English, ~2 KB documents, warm caches, best of 200): 8
#: documents took 34 us on one thread, 95 on 2 and 247 on 8; 32 documents 151 us on one
#: thread and 120 on 2. Threads past the CPU count only take turns: 128 documents took
#: 588 us on 2 threads and 757 on 8, on 2 CPUs. With it, num_threads=8 took 34, 117 and
#: 600 us. Tests run with the rule off (tests/conftest.py), to reach the threaded paths.
cdef Py_ssize_t points_per_thread = 1 << 14
cdef bint cap_to_cpus = True


def _set_thread_policy(Py_ssize_t min_points, bint to_cpus):
    """Testing hook: set points_per_thread (0: no limit from the text's size) and
    cap_to_cpus; returns the previous pair."""
    global points_per_thread, cap_to_cpus
    if min_points < 0:
        raise ValueError(f"min_points must be at least 0, got {min_points}")
    old = (points_per_thread, cap_to_cpus)
    points_per_thread = min_points
    cap_to_cpus = to_cpus
    return old


cdef Py_ssize_t usable_cpus():
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(_os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, _os.cpu_count() or 1)


cdef Py_ssize_t batch_threads(Py_ssize_t num_threads, Py_ssize_t total_points):
    """How many threads a batch of total_points code points runs on, given num_threads
    (see points_per_thread)."""
    cdef Py_ssize_t want = num_threads
    if want > 1 and points_per_thread > 0:
        want = min(want, max(1, total_points // points_per_thread))
    if want > 1 and cap_to_cpus:
        want = min(want, usable_cpus())
    return want


def _batch_threads(Py_ssize_t num_threads, Py_ssize_t total_points):
    """Testing hook: batch_threads."""
    return batch_threads(num_threads, total_points)


cdef int check_threads(object num_threads) except -1:
    if isinstance(num_threads, bool) or not isinstance(num_threads, int):
        raise TypeError(f"num_threads must be an int, not {type(num_threads).__name__}")
    if num_threads < 1 or num_threads > MAX_THREADS:
        raise ValueError(f"num_threads must be between 1 and {MAX_THREADS}, got {num_threads}")
    return 0


cdef object check_str(object text):
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    return text


cdef object as_valid_str(object text):
    """The text itself if it encodes to UTF-8; otherwise tiktoken's surrogate fix-up."""
    check_str(text)
    cdef Py_ssize_t size
    try:
        PyUnicode_AsUTF8AndSize(text, &size)
        return text
    except UnicodeEncodeError:
        return fix_surrogates(text)


cdef object fix_surrogates(str text):
    # Exactly what tiktoken does: pairs of surrogates become their character, lone ones
    # become U+FFFD.
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


cdef extern from "Python.h":
    list _new_list "PyList_New"(Py_ssize_t n)
    void _gc_untrack "PyObject_GC_UnTrack"(object o)
    void _gc_track "PyObject_GC_Track"(object o)
    int _gc_is_tracked "PyObject_GC_IsTracked"(object o)
    void _set_size "Py_SET_SIZE"(object o, Py_ssize_t n)


cdef extern from *:
    """
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
    """
    PyObject** fbe_list_reserve(object lst, Py_ssize_t need, Py_ssize_t want)
    void list_trim "fbe_list_trim"(object lst)


cdef extern from *:
    """
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
    """
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


def _rebuild_core(bytes arena, bytes lengths, bytes ids, dict special_tokens, str pat_str):
    """Unpickle a CoreBPE from its packed vocabulary (see ``CoreBPE.__reduce__``)."""
    cdef CoreBPE core = CoreBPE.__new__(CoreBPE)
    core._init_packed(arena, np.frombuffer(lengths, dtype=np.uint32),
                      np.frombuffer(ids, dtype=np.uint32), special_tokens, pat_str)
    return core


cdef class NeedleSet:
    """Strings that no text of a call may hold (the disallowed special tokens), as a
    SpecialSet over their UTF-8 for the jobs' check (find_special). Built once per set
    and kept by the CoreBPE (needle_set), so a call pays no set-up."""
    cdef SpecialSet ss
    cdef bytes items_buf      # ss.items
    cdef list utf8            # the bytes ss.items point into
    cdef frozenset strings    # as given: the check of texts with lone surrogates
    cdef bint has_empty       # "" is in the set: every text holds it (as in tiktoken)

    def __cinit__(self, frozenset strings):
        cdef Py_ssize_t k = 0
        cdef bytes b
        self.strings = strings
        self.utf8 = []
        for text in strings:
            if not isinstance(text, str):
                raise TypeError(f"disallowed special tokens must be str, got {text!r}")
            if not text:
                self.has_empty = True
                continue
            try:
                b = text.encode("utf-8")
            except UnicodeEncodeError:
                continue     # a lone surrogate: only a text with one can hold it
            self.utf8.append(b)
        self.items_buf = PyBytes_FromStringAndSize(NULL, max(1, len(self.utf8)) * sizeof(Special))
        self.ss.items = <Special*>PyBytes_AS_STRING(self.items_buf)
        for b in self.utf8:
            self.ss.items[k].text = <const unsigned char*>PyBytes_AS_STRING(b)
            self.ss.items[k].length = len(b)
            self.ss.items[k].token = 0
            k += 1
        self.ss.count = k
        special_set_index(&self.ss)


#: NeedleSets a CoreBPE keeps, by set (an Encoding passes the same few sets every call)
cdef Py_ssize_t NEEDLE_CACHE_MAX = 64


cdef class CoreBPE:
    """Immutable byte-level BPE encoder/decoder (tiktoken's ``CoreBPE`` semantics).

    >>> core = CoreBPE({bytes([b]): b for b in range(256)} | {b"ab": 256}, {"<|e|>": 257}, r"\\w+|\\W")
    >>> core.encode_ordinary("abc ab")
    [256, 99, 32, 256]
    """
    cdef Vocab vocab
    cdef bytes arena_obj            # token bytes: mergeable tokens, then special tokens
    cdef object lengths_arr         # uint32 per mergeable token, arena order
    cdef object ids_arr             # uint32 per mergeable token, arena order
    cdef readonly dict special_tokens
    cdef readonly str pat_str
    cdef object regex_pat
    cdef int pattern_id             # native pre-tokenizer, or -1 for the regex module
    cdef Py_ssize_t n_mergeable
    cdef uint32_t max_token_id
    # decoding: entry e has bytes arena[entry_off[e] : entry_off[e] + entry_len[e]]
    cdef int64_t* entry_off
    cdef uint32_t* entry_len
    cdef Py_ssize_t n_entries
    cdef int64_t* dense_entry      # id -> entry or -1 (NULL when ids are too sparse)
    cdef Py_ssize_t dense_size
    cdef uint32_t* sorted_ids      # sparse fallback: ids ascending, with their entries
    cdef int64_t* sorted_entry
    cdef dict special_bytes         # special text -> (offset in arena, length, id)
    cdef dict needle_sets           # frozenset -> NeedleSet (see needle_set)
    cdef Py_ssize_t n_shared_ints   # ids below this have a shared int (see _id_block)
    cdef void* cache_pool[CACHE_POOL]   # chunk caches kept between calls (new_chunk_cache)

    def __cinit__(self):
        cdef int i
        self.vocab.slots = NULL
        self.vocab.long_offset = NULL
        self.vocab.pair_rank2 = NULL
        self.vocab.bloom = NULL
        self.vocab.rank_span = NULL
        self.vocab.char_info = NULL
        self.vocab.cross_bits = NULL
        self.vocab.cross_min = NULL
        self.vocab.bigram_bloom = NULL
        self.vocab.n_ranks = 0
        self.entry_off = NULL
        self.entry_len = NULL
        self.dense_entry = NULL
        self.sorted_ids = NULL
        self.sorted_entry = NULL
        self.pattern_id = -1
        self.needle_sets = {}
        for i in range(CACHE_POOL):
            self.cache_pool[i] = NULL

    def __dealloc__(self):
        self.free_chunk_caches()
        free(self.vocab.slots)
        free(self.vocab.long_offset)
        free(self.vocab.pair_rank2)
        free(self.vocab.bloom)
        free(self.vocab.rank_span)
        free(self.vocab.char_info)
        free(self.vocab.cross_bits)
        free(self.vocab.cross_min)
        free(self.vocab.bigram_bloom)
        free(self.entry_off)
        free(self.entry_len)
        free(self.dense_entry)
        free(self.sorted_ids)
        free(self.sorted_entry)

    cdef void free_chunk_caches(self) noexcept nogil:
        cdef void* c
        c = fbe_slot_take(self.cache_pool, CACHE_POOL)
        while c != NULL:
            free(c)
            c = fbe_slot_take(self.cache_pool, CACHE_POOL)

    def _chunk_caches_kept(self):
        """Testing hook: how many chunk caches the encoder keeps between calls."""
        cdef Py_ssize_t i, n = 0
        for i in range(CACHE_POOL):
            n += self.cache_pool[i] != NULL
        return n

    def _clear_chunk_caches(self):
        """Drop the chunk caches kept between calls, so that the next call starts cold,
        as the first call does. For benchmarks that time the same text repeatedly,
        where a warm cache would measure a text the encoder has already seen."""
        self.free_chunk_caches()

    def __init__(self, mergeable_ranks, special_tokens, str pat_str):
        if not isinstance(mergeable_ranks, dict):
            raise TypeError(f"mergeable_ranks must be a dict[bytes, int], not "
                            f"{type(mergeable_ranks).__name__}")
        keys = list(mergeable_ranks.keys())
        values = list(mergeable_ranks.values())
        for k in keys:
            if not isinstance(k, bytes):
                raise TypeError(f"mergeable_ranks keys must be bytes, got {k!r}")
        for k, v in zip(keys, values):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"rank of {k!r} must be an int, got {v!r}")
            if v < 0 or v >= NO_RANK:
                raise ValueError(f"rank of {k!r} must be in [0, 2**32 - 1), got {v}")
        lengths = np.fromiter((len(k) for k in keys), dtype=np.uint32, count=len(keys))
        ids = np.array(values, dtype=np.uint32) if values else np.zeros(0, dtype=np.uint32)
        self._init_packed(b"".join(keys), lengths, ids, special_tokens, pat_str)

    def _init_packed(self, bytes arena, lengths, ids, special_tokens, str pat_str):
        if self.vocab.slots != NULL:
            raise RuntimeError("CoreBPE is immutable")
        if not isinstance(special_tokens, dict):
            raise TypeError(f"special_tokens must be a dict[str, int], not "
                            f"{type(special_tokens).__name__}")
        cdef Py_ssize_t n = len(lengths), i, total_special = 0
        for s, t in special_tokens.items():
            if not isinstance(s, str):
                raise TypeError(f"special token must be a str, got {s!r}")
            if isinstance(t, bool) or not isinstance(t, int):
                raise TypeError(f"id of special token {s!r} must be an int, got {t!r}")
            if t < 0 or t >= NO_RANK:
                raise ValueError(f"id of special token {s!r} must be in [0, 2**32 - 1), got {t}")
        if len(np.unique(ids)) != n:
            uniq, counts = np.unique(ids, return_counts=True)
            raise ValueError(f"duplicate rank {int(uniq[counts > 1][0])} in mergeable_ranks")
        if len(arena) >= (1 << 32) - (1 << 20):
            raise ValueError("vocabulary too large (token bytes must total under 4 GiB)")

        self.pat_str = pat_str
        self.regex_pat = _compile_pattern(pat_str)
        self.pattern_id = _native_pattern_id(pat_str)
        self.special_tokens = dict(special_tokens)
        self.n_mergeable = n
        self.lengths_arr = np.ascontiguousarray(lengths, dtype=np.uint32)
        self.ids_arr = np.ascontiguousarray(ids, dtype=np.uint32)

        # Arena: mergeable tokens, then the UTF-8 bytes of each special token.
        special_items = list(self.special_tokens.items())
        special_utf8 = [s.encode("utf-8", "surrogatepass") for s, _ in special_items]
        self.arena_obj = arena + b"".join(special_utf8)
        self.vocab.arena = <const unsigned char*>PyBytes_AS_STRING(self.arena_obj)
        self.special_bytes = {}

        self.n_entries = n + len(special_items)
        self.entry_off = <int64_t*>malloc(max(self.n_entries, 1) * sizeof(int64_t))
        self.entry_len = <uint32_t*>malloc(max(self.n_entries, 1) * sizeof(uint32_t))
        if self.entry_off == NULL or self.entry_len == NULL:
            raise MemoryError()
        cdef const uint32_t[::1] lens_v = self.lengths_arr
        cdef const uint32_t[::1] ids_v = self.ids_arr
        cdef int64_t off = 0
        for i in range(n):
            self.entry_off[i] = off
            self.entry_len[i] = lens_v[i]
            off += lens_v[i]
        if off != len(arena):
            raise ValueError("token lengths do not add up to the arena size")
        entry_ids = np.empty(self.n_entries, dtype=np.int64)
        entry_ids[:n] = ids
        for i, ((s, t), b) in enumerate(zip(special_items, special_utf8)):
            self.entry_off[n + i] = off
            self.entry_len[n + i] = len(b)
            self.special_bytes[s] = (off, len(b), t)
            entry_ids[n + i] = t
            off += len(b)
        self.max_token_id = <uint32_t>(entry_ids.max() if self.n_entries else 0)

        # Hash table over mergeable tokens, load factor <= 1/2.
        cdef uint64_t cap = 16
        while cap < 2 * <uint64_t>n + 2:
            cap *= 2
        self.vocab.slots = <Slot*>table_alloc(cap * sizeof(Slot))
        self.vocab.long_offset = <uint32_t*>calloc(cap, sizeof(uint32_t))
        self.vocab.pair_rank2 = <uint32_t*>malloc(65536 * sizeof(uint32_t))
        # ~16 filter bits per token, 2 set per token: a few % false positives.
        cdef uint64_t bloom_words = 64
        while bloom_words * 4 < <uint64_t>n:
            bloom_words *= 2
        self.vocab.bloom = <uint64_t*>table_alloc(bloom_words * sizeof(uint64_t))
        self.vocab.bloom_mask = bloom_words - 1
        if (self.vocab.slots == NULL or self.vocab.long_offset == NULL
                or self.vocab.pair_rank2 == NULL or self.vocab.bloom == NULL):
            raise MemoryError()
        self.vocab.mask = cap - 1
        cdef unsigned char two[2]
        with nogil:
            for i in range(n):
                if lens_v[i] > 0:
                    insert_slot(&self.vocab, self.vocab.arena + self.entry_off[i], lens_v[i],
                                <uint32_t>self.entry_off[i], ids_v[i])
            for i in range(256):
                two[0] = <unsigned char>i
                self.vocab.byte_rank[i] = vocab_rank(&self.vocab, two, 1)
            for i in range(65536):
                two[0] = <unsigned char>(i & 0xFF)
                two[1] = <unsigned char>(i >> 8)
                self.vocab.pair_rank2[i] = slot_lookup(&self.vocab, two, 2)

        # Tables for merging by characters, when ranks are dense enough to index.
        cdef uint64_t max_rank = <uint64_t>self.ids_arr.max() if n else 0
        cdef int rc_tables = 0
        if n and max_rank < 4 * <uint64_t>n + 65536:
            self.vocab.rank_span = <uint64_t*>calloc(max_rank + 1, sizeof(uint64_t))
            if self.vocab.rank_span == NULL:
                raise MemoryError()
            self.vocab.n_ranks = max_rank + 1
            with nogil:
                rc_tables = build_char_tables(&self.vocab, n, &lens_v[0], &ids_v[0],
                                              self.entry_off)
            if rc_tables < 0:
                raise MemoryError()

        # Decoding table: mergeable tokens win over specials sharing an id, as in tiktoken.
        order = np.argsort(entry_ids, kind="stable")
        cdef Py_ssize_t e
        cdef int64_t tid
        if self.n_entries and int(self.max_token_id) < 4 * self.n_entries + 65536:
            self.dense_size = <Py_ssize_t>self.max_token_id + 1
            self.dense_entry = <int64_t*>malloc(self.dense_size * sizeof(int64_t))
            if self.dense_entry == NULL:
                raise MemoryError()
            for i in range(self.dense_size):
                self.dense_entry[i] = -1
            for e in range(self.n_entries - 1, -1, -1):
                self.dense_entry[<Py_ssize_t>entry_ids[e]] = e
            self.n_shared_ints = shared_id_ints(self.dense_size)
        else:
            self.dense_size = 0
            self.sorted_ids = <uint32_t*>malloc(max(self.n_entries, 1) * sizeof(uint32_t))
            self.sorted_entry = <int64_t*>malloc(max(self.n_entries, 1) * sizeof(int64_t))
            if self.sorted_ids == NULL or self.sorted_entry == NULL:
                raise MemoryError()
            for i in range(self.n_entries):
                e = order[i]
                self.sorted_ids[i] = <uint32_t>entry_ids[e]
                self.sorted_entry[i] = e

    # ---- small lookups ---------------------------------------------------------------

    cdef int64_t entry_of(self, int64_t token) noexcept nogil:
        """Entry index of a token id (mergeable first), or -1."""
        cdef Py_ssize_t lo, hi, mid
        if token < 0:
            return -1
        if self.dense_entry != NULL:
            return self.dense_entry[token] if token < self.dense_size else -1
        lo = 0
        hi = self.n_entries
        while lo < hi:
            mid = (lo + hi) >> 1
            if self.sorted_ids[mid] < token:
                lo = mid + 1
            else:
                hi = mid
        if lo < self.n_entries and self.sorted_ids[lo] == token:
            # several entries can share an id (a special equal to a mergeable id);
            # the stable sort put the mergeable one first
            return self.sorted_entry[lo]
        return -1

    @property
    def max_token_value(self):
        return int(self.max_token_id)

    @property
    def n_vocab(self):
        return int(self.max_token_id) + 1

    def __reduce__(self):
        self.check_ready()
        # Packed vocabulary: one bytes arena plus two uint32 arrays; unpickling rebuilds
        # the tables natively without a 200k-entry dict.
        return (_rebuild_core, (
            self.arena_obj[:self.entry_off[self.n_mergeable] if self.n_mergeable < self.n_entries
                           else len(self.arena_obj)],
            self.lengths_arr.tobytes(), self.ids_arr.tobytes(),
            dict(self.special_tokens), self.pat_str))

    # ---- encoding --------------------------------------------------------------------

    cdef int fill_specials(self, SpecialSet* ss, object allowed_special, list keep) except -1:
        """Build the C view of the allowed special tokens that exist in this vocabulary."""
        ss.count = 0
        ss.items = NULL
        ss.common_first = -1
        ss.common_second = -1
        for i in range(256):
            ss.first_byte[i] = False
        if not allowed_special:
            return 0
        if isinstance(allowed_special, str):
            raise TypeError("allowed_special must be a set of str (the Python layer maps 'all')")
        chosen = [self.special_bytes[s] for s in allowed_special if s in self.special_bytes]
        if not chosen:
            return 0
        cdef bytes buf = PyBytes_FromStringAndSize(NULL, len(chosen) * sizeof(Special))
        keep.append(buf)
        ss.items = <Special*>PyBytes_AS_STRING(buf)
        cdef Py_ssize_t k = 0
        for off, length, tok in chosen:
            if length == 0:
                continue
            ss.items[k].text = self.vocab.arena + <int64_t>off
            ss.items[k].length = length
            ss.items[k].token = <uint32_t>tok
            k += 1
        ss.count = k
        special_set_index(ss)
        return 0

    cdef int prepare_job(self, Job* job, object text, const SpecialSet* ss, list keep) except -1:
        """Point a job at the text's UTF-8 buffer; on the regex path, pre-tokenize now."""
        cdef Py_ssize_t size
        job.owned = NULL
        job.no_check = False
        job.src = NULL
        job.src_kind = 0
        job.src_len = 0
        if self.pattern_id >= 0:
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
        job.out.data = NULL
        job.out.size = 0
        job.out.cap = 0
        job.out.arena = NULL
        job.err = ERR_NONE
        job.err_pos = 0
        if self.pattern_id < 0:
            spans = _regex_spans(self.regex_pat, text, job.text, job.n, ss)
            keep.append(spans)
            job.spans = <const int64_t*>cnp.PyArray_DATA(spans)
            job.n_spans = len(spans) // 2
        return 0

    cdef int raise_job_error(self, Job* job) except -1:
        if job.err == ERR_NOMEM:
            raise MemoryError()
        if job.err == ERR_TOO_LONG:
            raise ValueError(f"a single pre-tokenized chunk at UTF-8 offset {job.err_pos} is "
                             f"4 GiB or longer; such chunks are not supported")
        if job.err == ERR_BYTE:
            raise ValueError(f"byte {job.text[job.err_pos]:#04x} at UTF-8 offset {job.err_pos} "
                             f"is not a token of this vocabulary, so it cannot be encoded")
        return 0

    cdef int check_ready(self) except -1:
        if self.vocab.slots == NULL:
            raise RuntimeError("CoreBPE was not initialised (use CoreBPE(ranks, specials, pattern))")
        return 0

    cdef NeedleSet needle_set(self, object disallowed_special):
        """The NeedleSet of disallowed_special (any collection of str), or None if it is
        empty; kept for the next call with an equal set."""
        if not disallowed_special:
            return None
        if isinstance(disallowed_special, str):
            raise TypeError("disallowed_special must be a collection of str (the Python "
                            "layer maps 'all')")
        key = (disallowed_special if type(disallowed_special) is frozenset
               else frozenset(disallowed_special))
        needles = self.needle_sets.get(key)
        if needles is None:
            needles = NeedleSet(key)
            if len(self.needle_sets) >= NEEDLE_CACHE_MAX:
                self.needle_sets.clear()
            self.needle_sets[key] = needles
        return needles

    cdef object run(self, list texts, object allowed_special, int num_threads, int mode,
                    object dtype, object disallowed_special=None):
        """mode 0: list of lists; 1: one list (single text); 2: numpy (flat, offsets).

        disallowed_special: strings no text may hold, as tiktoken checks before encoding;
        the first text (in order) that holds one raises DisallowedSpecial(index)."""
        self.check_ready()
        cdef NeedleSet needles = self.needle_set(disallowed_special)
        cdef Py_ssize_t n_texts = len(texts), n_jobs = 0, cap, i, t, k, total = 0
        cdef Py_ssize_t target = 0
        cdef bint surrogates
        cdef list keep = []
        cdef CacheEntry* no_cache = NULL
        cdef SpecialSet ss
        cdef Context ctx
        cdef Job* jobs = NULL
        cdef Py_ssize_t* first = NULL     # text t is jobs[first[t]:first[t + 1]]
        cdef Py_ssize_t n_arenas = 0
        ctx.arenas = NULL
        ctx.disallowed = NULL
        if needles is not None:
            if needles.has_empty and n_texts:
                raise DisallowedSpecial(0)
            if needles.ss.count:
                ctx.disallowed = &needles.ss
        # 1. the allowed special tokens, and whether long texts may be cut into pieces:
        #    only where threads can share them, and where the cut rule holds (next_cut;
        #    a special token, allowed or not, could span a cut only if it holds "\n")
        self.fill_specials(&ss, allowed_special, keep)
        if num_threads > 1 and mode != 1:
            for t in range(n_texts):
                total += len(<str>texts[t])
            num_threads = <int>batch_threads(num_threads, total)
        if (num_threads > 1 and mode != 1 and self.pattern_id >= 0
                and not specials_hold_newline(&ss)
                and not (needles is not None and specials_hold_newline(&needles.ss))):
            target = max(piece_min, total // (num_threads * pieces_per_thread))
        cap = n_texts + (total // target if target else 0)
        jobs = <Job*>malloc(max(cap, 1) * sizeof(Job))
        first = <Py_ssize_t*>malloc((n_texts + 1) * sizeof(Py_ssize_t))
        if jobs == NULL or first == NULL:
            free(jobs)
            free(first)
            raise MemoryError()
        for i in range(cap):
            jobs[i].out.data = NULL
            jobs[i].owned = NULL
        try:
            # 2. a job per text, or per piece of a long one
            for t in range(n_texts):
                first[t] = n_jobs
                self.prepare_job(&jobs[n_jobs], texts[t], &ss, keep)
                if target and len(<str>texts[t]) >= 2 * target:
                    with nogil:     # a scan of up to the whole text (no cut found)
                        k = cut_job(&jobs[n_jobs], target)
                    n_jobs += k
                else:
                    n_jobs += 1
            first[n_texts] = n_jobs
            n_arenas = max(1, min(<Py_ssize_t>num_threads, n_jobs))   # one per thread slot
            ctx.arenas = <OutArena*>calloc(n_arenas, sizeof(OutArena))
            if ctx.arenas == NULL:
                raise MemoryError()
            ctx.vocab = &self.vocab
            ctx.specials = &ss
            ctx.pattern = self.pattern_id
            ctx.jobs = jobs
            ctx.n_jobs = n_jobs
            ctx.cache_pool = self.cache_pool
            ctx.notify = False
            # 3. encode
            if mode == 0 and n_jobs > 1 and num_threads > 1:
                results = self.run_streaming(&ctx, num_threads, first, n_texts)
            else:
                results = None
                with nogil:
                    run_jobs(&ctx, num_threads)
            # 4. disallowed special tokens first, text by text, as tiktoken checks every
            #    text before it encodes any. A text with lone surrogates (its job failed
            #    or was fixed up) is checked here, as given.
            if needles is not None:
                for t in range(n_texts):
                    surrogates = False    # a piece met one, or the regex path fixed it up
                    for k in range(first[t], first[t + 1]):
                        if jobs[k].err == ERR_DISALLOWED:
                            raise DisallowedSpecial(t)
                        surrogates = surrogates or jobs[k].err == ERR_SURROGATE or jobs[k].no_check
                    if surrogates and holds_any(texts[t], needles.strings):
                        raise DisallowedSpecial(t)
            # 5. other errors: a cut text with a failed piece is redone whole (so that
            #    the error, or tiktoken's surrogate fix-up, is about the whole text);
            #    then the job of each text holds its only possible error
            for t in range(n_texts):
                if first[t + 1] - first[t] > 1 and pieces_failed(jobs, first[t], first[t + 1]):
                    for k in range(first[t], first[t + 1]):
                        job_free(&jobs[k])
                        jobs[k].err = ERR_NONE
                    if results is not None:
                        results[t] = None
                    self.prepare_job(&jobs[first[t]], texts[t], &ss, keep)
                    jobs[first[t]].no_check = True     # checked in step 4
                    with nogil:
                        run_job(&ctx, &jobs[first[t]], no_cache, NULL)
                i = first[t]
                if jobs[i].err == ERR_SURROGATE:
                    # rare: redo this text after tiktoken's fix-up
                    fixed = fix_surrogates(texts[t])
                    keep.append(fixed)
                    job_free(&jobs[i])
                    self.prepare_job(&jobs[i], fixed, &ss, keep)
                    jobs[i].no_check = True
                    with nogil:
                        run_job(&ctx, &jobs[i], no_cache, NULL)
                self.raise_job_error(&jobs[i])
            # 6. results, one per text
            if mode == 1:
                return outbuf_to_list(&jobs[0].out, self.n_shared_ints)
            if mode == 0:
                if results is None:
                    results = [None] * n_texts
                for t in range(n_texts):
                    if results[t] is None:      # not streamed, or redone above
                        results[t] = outbuf_to_list(&jobs[first[t]].out, self.n_shared_ints, True)
                collect_young_if_due()
                track_lists(results)
                return results
            return self.to_numpy(jobs, first, n_texts, dtype)
        finally:
            for i in range(n_jobs):
                job_free(&jobs[i])
            free(jobs)
            free(first)
            if ctx.arenas != NULL:
                # every list and array is built: the slabs go back to the pool
                for i in range(n_arenas):
                    fbe_slabs_give(ctx.arenas[i].head)
                free(ctx.arenas)

    cdef list run_streaming(self, Context* ctx, int num_threads, const Py_ssize_t* first,
                            Py_ssize_t n_texts):
        """All jobs on num_threads threads while this thread turns finished ones into
        lists; returns a list per text (None for a text with a failed job, handled by
        the caller). The GIL is released while encoding or waiting. Finished jobs are
        taken in job order within each block of jobs (deal_blocks), whichever block
        finishes first; the pieces of a cut text go into its list in text order, each
        as soon as it and the pieces before it are finished.

        Many jobs (at least 8 per thread): this thread is one of the num_threads. It
        runs list_run jobs, then builds the lists of every job finished so far, and so
        on; no thread waits for the GIL, and no extra thread competes for the cores (on
        2 cores, that made short-document batches 4-34% faster). Lists are built in
        runs, not one job at a time, because the lists of each block then get item
        arrays side by side in memory: alternating between blocks at every list, the
        caller's later freeing of them (glibc merging each freed array with its
        neighbours) took 3.5 ms instead of 2.9 for 2,000 lists. Few jobs (a handful of
        long texts): num_threads workers encode and this thread only builds lists, so
        that a long job of its own does not hold back the lists of the others."""
        cdef pthread_t tids[MAX_THREADS_C]
        cdef WorkerArg* args = NULL
        cdef Py_ssize_t built[MAX_BLOCKS]         # per block: jobs taken up to here
        cdef Py_ssize_t upto[MAX_BLOCKS]
        cdef Py_ssize_t n_jobs = ctx.n_jobs, started = 0, left = n_jobs, k, b, w, t
        cdef Py_ssize_t window = max(1, n_jobs // 64)
        cdef Py_ssize_t want = min(<Py_ssize_t>num_threads, n_jobs)
        cdef list results = [None] * n_texts
        cdef CacheEntry* cache = NULL
        cdef Py_ssize_t j, since_build = 0
        cdef bint main_encodes = n_jobs >= MANY_JOBS * want
        # own jobs between two rounds of list building: up to LIST_RUN with many short
        # texts, down to 1 with few jobs per thread (pieces of long texts), whose lists
        # must be built as they finish or they are all built after the last job
        cdef Py_ssize_t list_run = max(1, min(<Py_ssize_t>LIST_RUN, n_jobs // (64 * want)))
        # per job: its text, and whether this thread has taken it as finished; per text:
        # its next piece to append
        cdef Py_ssize_t* text_of = <Py_ssize_t*>malloc(n_jobs * sizeof(Py_ssize_t))
        cdef Py_ssize_t* next_piece = <Py_ssize_t*>malloc(n_texts * sizeof(Py_ssize_t))
        cdef char* taken = <char*>calloc(n_jobs, 1)
        ctx.done = <char*>calloc(n_jobs, 1)
        if text_of == NULL or next_piece == NULL or taken == NULL or ctx.done == NULL:
            free(text_of)
            free(next_piece)
            free(taken)
            free(ctx.done)
            ctx.done = NULL
            raise MemoryError()
        for t in range(n_texts):
            next_piece[t] = first[t]
            for k in range(first[t], first[t + 1]):
                text_of[k] = t
        pthread_mutex_init(&ctx.lock, NULL)
        pthread_cond_init(&ctx.cond, NULL)
        ctx.notify = True
        ctx.waiting = 0
        deal_blocks(ctx, want)       # many jobs: a block per thread, this one's first
        for b in range(ctx.n_blocks):
            built[b] = ctx.block_start[b]
        try:
            with nogil:
                args = <WorkerArg*>malloc(want * sizeof(WorkerArg))
                if args != NULL:
                    started = (start_workers(ctx, want - 1, 1, tids, args) if main_encodes
                               else start_workers(ctx, want, 0, tids, args))
                if started == 0:
                    main_encodes = True    # no thread could start: all work is here
            if main_encodes:
                cache = new_chunk_cache(ctx)
            try:
                while left > 0:
                    with nogil:
                        j = claim_job(ctx, 0) if main_encodes else n_jobs
                        if j < n_jobs:
                            run_job(ctx, &ctx.jobs[j], cache, &ctx.arenas[0])
                            mark_done(ctx, j)
                            since_build += 1
                            if since_build >= list_run:
                                since_build = 0
                                finished_runs(ctx, built, upto, -1, -1)
                            else:
                                for b in range(ctx.n_blocks):
                                    upto[b] = built[b]
                        else:
                            # nothing left to take: wait for a stretch of the first
                            # block that still has jobs to take
                            b = 0
                            while built[b] == ctx.block_end[b]:
                                b += 1
                            w = min(built[b] + window, ctx.block_end[b]) - 1
                            finished_runs(ctx, built, upto, built[b], w)
                    for b in range(ctx.n_blocks):
                        for k in range(built[b], upto[b]):
                            taken[k] = 1
                            self.append_pieces(ctx.jobs, first, text_of[k], next_piece,
                                               taken, results)
                        left -= upto[b] - built[b]
                        built[b] = upto[b]
            finally:
                # even on an exception (MemoryError) the threads must end before the
                # jobs they use are freed
                with nogil:
                    for k in range(started):
                        pthread_join(tids[k], NULL)
        finally:
            ctx.notify = False
            pthread_cond_destroy(&ctx.cond)
            pthread_mutex_destroy(&ctx.lock)
            free(ctx.done)
            ctx.done = NULL
            free(text_of)
            free(next_piece)
            free(taken)
            return_chunk_cache(ctx, cache)
            free(args)
        return results

    cdef int append_pieces(self, Job* jobs, const Py_ssize_t* first, Py_ssize_t t,
                           Py_ssize_t* next_piece, const char* taken, list results) except -1:
        """Streaming mode: append to text t's list its finished pieces from next_piece[t]
        on, in order, freeing their ids. A failed piece leaves results[t] None (the
        caller redoes the text) and stops the text."""
        cdef Py_ssize_t k = next_piece[t], end = first[t + 1], size
        cdef Py_ssize_t done_points = 0, all_points = 0, i
        cdef list lst
        while k < end and taken[k]:
            if jobs[k].err != ERR_NONE:
                results[t] = None
                next_piece[t] = end
                return 0
            lst = results[t]
            if lst is None:
                lst = _new_list(0)
                _gc_untrack(lst)
                results[t] = lst
            # a cut text's list is sized by the share of its code points encoded so far
            # (and trimmed after the last piece): growing piece by piece would copy it
            size = len(lst) + jobs[k].out.size
            if k + 1 < end:
                if all_points == 0:
                    for i in range(first[t], end):
                        all_points += job_points(&jobs[i])
                    for i in range(first[t], k + 1):
                        done_points += job_points(&jobs[i])
                else:
                    done_points += job_points(&jobs[k])
                size = <Py_ssize_t>(<double>size * all_points / max(done_points, 1) * 1.0625)
            list_extend_ids(lst, &jobs[k].out, self.n_shared_ints, size)
            out_free(&jobs[k].out)
            k += 1
        next_piece[t] = k
        if k == end and results[t] is not None:
            list_trim(results[t])
        return 0

    cdef object to_numpy(self, Job* jobs, const Py_ssize_t* first, Py_ssize_t n_texts,
                         object dtype):
        cdef Py_ssize_t n_jobs = first[n_texts], total = 0, i, j, pos
        offsets = np.empty(n_texts + 1, dtype=np.int64)
        cdef int64_t[::1] off_v = offsets
        off_v[0] = 0
        for i in range(n_texts):
            for j in range(first[i], first[i + 1]):
                total += jobs[j].out.size
            off_v[i + 1] = total
        flat = np.empty(total, dtype=dtype)
        cdef uint32_t[::1] f32
        cdef uint16_t[::1] f16
        pos = 0
        if flat.dtype == np.uint32:
            f32 = flat
            with nogil:
                for i in range(n_jobs):
                    if jobs[i].out.size:
                        memcpy(&f32[pos], jobs[i].out.data, jobs[i].out.size * sizeof(uint32_t))
                    pos += jobs[i].out.size
        else:
            f16 = flat
            with nogil:
                for i in range(n_jobs):
                    for j in range(jobs[i].out.size):
                        f16[pos + j] = <uint16_t>jobs[i].out.data[j]
                    pos += jobs[i].out.size
        return flat, offsets

    cdef object check_dtype(self, object dtype):
        dt = np.dtype(dtype)
        if dt == np.uint32:
            return dt
        if dt == np.uint16:
            if self.max_token_id >= 65536:
                raise ValueError(f"dtype uint16 cannot hold this vocabulary's ids (max id "
                                 f"{self.max_token_id} >= 65536); use uint32")
            return dt
        raise ValueError(f"dtype must be uint32 or uint16, got {dt}")

    def encode_ordinary(self, text):
        """Token ids of text, with special-token text encoded as ordinary text."""
        return self.run([check_str(text)], None, 1, 1, None)

    def encode(self, text, allowed_special, disallowed_special=frozenset()):
        """Token ids of text; occurrences of allowed special tokens become their ids.
        DisallowedSpecial(0) if text holds one of disallowed_special (strings)."""
        return self.run([check_str(text)], allowed_special, 1, 1, None, disallowed_special)

    def encode_ordinary_batch(self, texts, num_threads=8):
        check_threads(num_threads)
        return self.run(_texts_list(texts), None, num_threads, 0, None)

    def encode_batch(self, texts, allowed_special, num_threads=8,
                     disallowed_special=frozenset()):
        """encode of each text, on num_threads threads; DisallowedSpecial(i) for the
        first text i that holds one of disallowed_special."""
        check_threads(num_threads)
        return self.run(_texts_list(texts), allowed_special, num_threads, 0, None,
                        disallowed_special)

    def encode_to_numpy(self, text, allowed_special=frozenset(), dtype=np.uint32,
                        disallowed_special=frozenset()):
        """Token ids as a 1-D numpy array (uint32, or uint16 when every id fits)."""
        dt = self.check_dtype(dtype)
        flat, _ = self.run([check_str(text)], allowed_special, 1, 2, dt, disallowed_special)
        return flat

    def encode_batch_to_numpy(self, texts, allowed_special=frozenset(), num_threads=8,
                              dtype=np.uint32, disallowed_special=frozenset()):
        """(flat ids, offsets): text i is flat[offsets[i]:offsets[i + 1]]."""
        check_threads(num_threads)
        dt = self.check_dtype(dtype)
        return self.run(_texts_list(texts), allowed_special, num_threads, 2, dt,
                        disallowed_special)

    def encode_single_token(self, piece):
        """Id of a token given its bytes (or a special token's text/bytes); KeyError if none."""
        self.check_ready()
        if isinstance(piece, str):
            if piece in self.special_tokens:
                return self.special_tokens[piece]
            piece = piece.encode("utf-8")
        if not isinstance(piece, (bytes, bytearray)):
            raise TypeError(f"piece must be bytes, not {type(piece).__name__}")
        cdef bytes b = bytes(piece)
        cdef uint32_t r = NO_RANK
        if len(b):
            r = vocab_rank(&self.vocab, <const unsigned char*>PyBytes_AS_STRING(b), len(b))
        if r != NO_RANK:
            return r
        try:
            s = b.decode("utf-8")
        except UnicodeDecodeError:
            raise KeyError(piece) from None
        if s in self.special_tokens:
            return self.special_tokens[s]
        raise KeyError(piece)

    cdef list encode_piece(self, piece, bint whole_first):
        """BPE of one piece of raw bytes, no pre-tokenization: the whole piece's id if
        it is a token and whole_first, else merged from single bytes (tiktoken's
        byte_pair_encode, which never looks the whole piece up)."""
        self.check_ready()
        if isinstance(piece, bytearray):
            piece = bytes(piece)
        elif not isinstance(piece, bytes):
            raise TypeError(f"piece must be bytes, not {type(piece).__name__}")
        cdef bytes b = <bytes>piece
        cdef OutBuf out
        cdef Py_ssize_t err_pos = 0
        cdef int rc
        out.data = NULL
        out.size = 0
        out.cap = 0
        out.arena = NULL
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(b)
        cdef Py_ssize_t n = len(b)
        if n == 0:
            return []
        try:
            with nogil:
                rc = (bpe_chunk(&self.vocab, p, n, &out, &err_pos, NULL) if whole_first
                      else bpe_merge(&self.vocab, p, n, &out, &err_pos))
            if rc == ERR_NOMEM:
                raise MemoryError()
            if rc == ERR_BYTE:
                raise ValueError(f"byte at {err_pos} is not a token")
            if rc != ERR_NONE:
                raise ValueError(f"piece of {n} bytes is too long to merge")
            return outbuf_to_list(&out, self.n_shared_ints)
        finally:
            free(out.data)

    def encode_single_piece(self, piece):
        """Ids of one piece of bytes (tiktoken's CoreBPE.encode_single_piece): its id if
        it is a token, else merged from single bytes; [] for b""."""
        return self.encode_piece(piece, True)

    def byte_pair_encode(self, piece):
        """Ids of one piece of bytes merged from single bytes, without looking the
        whole piece up first (tiktoken's byte_pair_encode; a token that merging never
        reaches stays split)."""
        return self.encode_piece(piece, False)

    def _encode_chunk_bytes(self, bytes piece):
        """Testing hook: BPE-merge one chunk of raw bytes (no pre-tokenization)."""
        return self.encode_piece(piece, True)

    def _encode_chunk_by_chars(self, bytes piece):
        """Testing hook: bpe_by_chars on one chunk of UTF-8 (no pre-tokenization, no
        whole-chunk lookup); None when that path gives up (the encoder then merges from
        bytes)."""
        self.check_ready()
        if self.vocab.char_info == NULL or not 1 <= len(piece) <= UNITS_MAX:
            return None
        cdef OutBuf out
        cdef int rc
        out.data = NULL
        out.size = 0
        out.cap = 0
        out.arena = NULL
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(piece)
        cdef Py_ssize_t n = len(piece)
        try:
            with nogil:
                rc = bpe_by_chars(&self.vocab, p, n, &out, NULL)
            if rc != ERR_NONE:
                return None
            return outbuf_to_list(&out, self.n_shared_ints)
        finally:
            free(out.data)

    def _split_points(self, bytes piece):
        """Testing hook: the byte offsets inside piece (UTF-8 of 1- to 3-byte characters)
        where rule 4 of merging by characters may cut (no token spans them); None when
        merging by characters is off for this vocabulary or the piece does not qualify."""
        self.check_ready()
        if self.vocab.bigram_bloom == NULL:
            return None
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(piece)
        cdef Py_ssize_t n = len(piece), pos = 0, q = 0
        cdef uint32_t cp, prev = NO_RANK
        cuts = []
        while pos < n:
            cp = decode_char(p + pos, n - pos, &q)
            if cp == NO_RANK:
                return None
            if pos > 0 and no_token_spans(&self.vocab,
                                          not cross_bit(&self.vocab, p[pos - 1], p[pos]),
                                          prev, cp):
                cuts.append(pos)
            prev = cp
            pos += q
        return cuts

    def _bigram_may_join(self, a, b):
        """Testing hook: rule 4's filter for the characters a, b (False: no token holds
        a followed by b)."""
        self.check_ready()
        if self.vocab.bigram_bloom == NULL:
            return None
        return bool(bigram_may_join(&self.vocab, ord(a), ord(b)))

    # ---- decoding --------------------------------------------------------------------

    cdef bytes decode_ids(self, int64_t* ids, Py_ssize_t n, object given, bint scratch):
        """Bytes of ids[0:n]; KeyError names the first unknown id as given[i], the
        sequence the ids were read from (ids out of range are -1 there). scratch: ids is
        the caller's own buffer, and the first pass replaces each id by its entry, which
        the copy then reads instead of looking it up again."""
        self.check_ready()
        cdef Py_ssize_t i, total = 0, bad = -1
        cdef int64_t e
        with nogil:
            for i in range(n):
                e = self.entry_of(ids[i])
                if e < 0:
                    bad = i
                    break
                if scratch:
                    ids[i] = e
                total += self.entry_len[e]
        if bad >= 0:
            raise KeyError(int(given[bad]))
        cdef bytes out = PyBytes_FromStringAndSize(NULL, total)
        cdef char* dst = PyBytes_AS_STRING(out)
        cdef const char* src = <const char*>self.vocab.arena
        with nogil:
            for i in range(n):
                e = ids[i] if scratch else self.entry_of(ids[i])
                memcpy(dst, src + self.entry_off[e], self.entry_len[e])
                dst += self.entry_len[e]
        return out

    cdef object decode_sequence(self, object tokens):
        """decode_ids of a list or tuple whose items are all exact ints, reading them in
        place: numpy's conversion of a list costs about 30 ns an item, which made decode
        slower than tiktoken's. None as soon as an item is anything else (then the caller
        checks the items one by one, so that the error names the culprit: a non-int
        before any unknown id, see _ids_array)."""
        cdef Py_ssize_t n = len(tokens), i
        cdef PyObject** items = PySequence_Fast_ITEMS(tokens)
        cdef int64_t* ids
        cdef long long v
        cdef int overflow = 0
        if n == 0:
            return b""
        ids = <int64_t*>malloc(n * sizeof(int64_t))
        if ids == NULL:
            raise MemoryError()
        try:
            for i in range(n):
                if not fbe_long_check_exact(items[i]):
                    return None
                v = fbe_long_as_ll(items[i], &overflow)
                ids[i] = v if overflow == 0 and 0 <= v < NO_RANK else -1
            return self.decode_ids(ids, n, tokens, True)
        finally:
            free(ids)

    cdef bytes decode_any(self, object tokens):
        if type(tokens) is list or type(tokens) is tuple:
            out = self.decode_sequence(tokens)
            if out is not None:
                return out
        cdef cnp.ndarray arr = _ids_array(tokens)
        return self.decode_ids(<int64_t*>cnp.PyArray_DATA(arr), arr.shape[0], tokens, False)

    def decode_bytes(self, tokens):
        """Bytes of a sequence of ids (list, tuple or integer numpy array); KeyError names
        the first unknown id, TypeError the first item that is not an int."""
        return self.decode_any(tokens)

    def decode_batch_bytes(self, batch, num_threads=8):
        """decode_bytes of each sequence. num_threads is checked and otherwise unused:
        decoding is a copy per token, and the time goes to reading the Python ints, which
        needs the GIL."""
        check_threads(num_threads)
        if isinstance(batch, (str, bytes)) or not hasattr(batch, "__iter__"):
            raise TypeError(f"batch must be a sequence of token sequences, not "
                            f"{type(batch).__name__}")
        return [self.decode_any(t) for t in batch]

    def decode_single_token_bytes(self, token):
        self.check_ready()
        if isinstance(token, bool) or not isinstance(token, (int, np.integer)):
            raise TypeError(f"token must be an int, not {type(token).__name__}")
        t = int(token)
        cdef int64_t e = self.entry_of(t) if 0 <= t < NO_RANK else -1
        if e < 0:
            raise KeyError(t)
        return self.arena_obj[self.entry_off[e]:self.entry_off[e] + self.entry_len[e]]

    def token_byte_values(self):
        """Bytes of every mergeable token, sorted (as tiktoken returns them)."""
        self.check_ready()
        arena = self.arena_obj
        out = []
        cdef Py_ssize_t i
        for i in range(self.n_mergeable):
            out.append(arena[self.entry_off[i]:self.entry_off[i] + self.entry_len[i]])
        out.sort()
        return out


# --------------------------------------------------------------------------------------
# Construction helpers (plain Python, run once)
# --------------------------------------------------------------------------------------

cdef void insert_slot(Vocab* v, const unsigned char* p, uint32_t n, uint32_t offset,
                      uint32_t rank) noexcept nogil:
    cdef uint64_t w = fbe_word(p, n) if n <= 8 else fbe_load64(p)
    cdef uint64_t h = slot_hash(p, n, w)
    cdef uint64_t i = h & v.mask
    bloom_add(v, h)
    while v.slots[i].length != 0:
        i = (i + 1) & v.mask
    v.slots[i].word = w
    v.slots[i].length = n
    v.slots[i].rank = rank
    v.long_offset[i] = offset


cdef uint32_t slot_lookup(const Vocab* v, const unsigned char* p, size_t n) noexcept nogil:
    """Hash-table lookup without the 2-byte shortcut (used to fill that shortcut)."""
    cdef uint64_t w = fbe_word(p, n) if n <= 8 else fbe_load64(p)
    cdef uint64_t i = slot_hash(p, n, w) & v.mask
    while v.slots[i].length != 0:
        if (v.slots[i].length == n and v.slots[i].word == w
                and memcmp(v.arena + v.long_offset[i], p, n) == 0):
            return v.slots[i].rank
        i = (i + 1) & v.mask
    return NO_RANK


cdef bint valid_utf8_chars(const unsigned char* t, Py_ssize_t n, Py_ssize_t* chars) noexcept nogil:
    """t[:n] is whole, valid UTF-8 characters of 1..3 bytes (chars[0] = how many)."""
    cdef Py_ssize_t pos = 0, q = 0, k = 0
    cdef uint32_t cp
    while pos < n:
        cp = decode_char(t + pos, n - pos, &q)
        if cp == NO_RANK or 0xD800 <= cp <= 0xDFFF:
            return False
        pos += q
        k += 1
    chars[0] = k
    return True


cdef bint all_bytes_are_tokens(const Vocab* v, uint32_t cp) noexcept nogil:
    if cp < 0x800:
        return (v.byte_rank[0xC0 | (cp >> 6)] != NO_RANK
                and v.byte_rank[0x80 | (cp & 0x3F)] != NO_RANK)
    return (v.byte_rank[0xE0 | (cp >> 12)] != NO_RANK
            and v.byte_rank[0x80 | ((cp >> 6) & 0x3F)] != NO_RANK
            and v.byte_rank[0x80 | (cp & 0x3F)] != NO_RANK)


cdef int build_char_tables(Vocab* v, Py_ssize_t n, const uint32_t* lens,
                           const uint32_t* ids, const int64_t* offs) noexcept nogil:
    """rank_span, char_info and cross_bits for bpe_by_chars; -1 if out of memory."""
    cdef Py_ssize_t i, pos, q = 0, k = 0
    cdef uint32_t cp, r1, r2, r3, tok, m_rank, e
    cdef unsigned char b[3]
    cdef const unsigned char* t
    cdef uint64_t info
    cdef uint32_t prev
    cdef uint64_t word, bits
    v.char_info = <uint64_t*>malloc(65536 * sizeof(uint64_t))
    v.cross_bits = <uint64_t*>calloc(1024, sizeof(uint64_t))
    v.cross_min = <uint32_t*>malloc(65536 * sizeof(uint32_t))
    v.bigram_bloom = <uint64_t*>calloc(BIGRAM_WORDS, sizeof(uint64_t))
    if (v.char_info == NULL or v.cross_bits == NULL or v.cross_min == NULL
            or v.bigram_bloom == NULL):
        return -1
    for e in range(65536):
        v.cross_min[e] = NO_RANK
    for i in range(n):
        v.rank_span[ids[i]] = <uint64_t>offs[i] | (<uint64_t>lens[i] << 32)
    # 1. every code point below 0x10000: its single token and the largest merge rank on
    #    the way (M), or NO_RANK when its bytes do not merge into one token
    for cp in range(65536):
        tok = NO_RANK
        m_rank = 0
        if cp < 0x80:
            tok = v.byte_rank[cp]
            m_rank = 0                      # stored as M + 1: no merge at all
        elif cp < 0x800:
            b[0] = <unsigned char>(0xC0 | (cp >> 6))
            b[1] = <unsigned char>(0x80 | (cp & 0x3F))
            if v.byte_rank[b[0]] != NO_RANK and v.byte_rank[b[1]] != NO_RANK:
                tok = v.pair_rank2[b[0] | (<uint32_t>b[1] << 8)]
                m_rank = tok + 1
        elif not (0xD800 <= cp <= 0xDFFF):
            b[0] = <unsigned char>(0xE0 | (cp >> 12))
            b[1] = <unsigned char>(0x80 | ((cp >> 6) & 0x3F))
            b[2] = <unsigned char>(0x80 | (cp & 0x3F))
            r1 = v.pair_rank2[b[0] | (<uint32_t>b[1] << 8)]
            r2 = v.pair_rank2[b[1] | (<uint32_t>b[2] << 8)]
            r3 = slot_lookup(v, b, 3)
            # BPE of 3 bytes: merge the lower of the two pairs, then the rest
            if (v.byte_rank[b[0]] != NO_RANK and v.byte_rank[b[1]] != NO_RANK
                    and v.byte_rank[b[2]] != NO_RANK and r3 != NO_RANK
                    and (r1 != NO_RANK or r2 != NO_RANK)):
                tok = r3
                m_rank = (r1 if r1 < r2 else r2)
                if r3 > m_rank:
                    m_rank = r3
                m_rank += 1
        if tok != NO_RANK and tok < v.n_ranks:
            v.char_info[cp] = tok | (<uint64_t>m_rank << 32)
        elif cp >= 0x80 and not (0xD800 <= cp <= 0xDFFF) and all_bytes_are_tokens(v, cp):
            v.char_info[cp] = NO_RANK | (<uint64_t>CHAR_WALL << 32)   # several tokens
        else:
            v.char_info[cp] = NO_RANK
    # 2. rule (b) for every token of several whole characters; rule (a)'s cross bits for
    #    every token that is not whole characters
    for i in range(n):
        t = v.arena + offs[i]
        if lens[i] < 2:
            continue
        if valid_utf8_chars(t, lens[i], &k):
            if k < 2:
                continue
            pos = 0
            while pos < lens[i]:
                cp = decode_char(t + pos, lens[i] - pos, &q)
                info = v.char_info[cp]
                if <uint32_t>info != NO_RANK and ids[i] + 1 <= <uint32_t>(info >> 32):
                    v.char_info[cp] = NO_RANK   # rank(token) <= M: never a unit
                pos += q
        else:
            for pos in range(1, lens[i]):
                if (t[pos] & 0xC0) != 0x80:
                    e = t[pos - 1] | (<uint32_t>t[pos] << 8)
                    v.cross_bits[e >> 6] |= 1ULL << (e & 63)
                    if ids[i] < v.cross_min[e]:
                        v.cross_min[e] = ids[i]
    # 3. rule 4's filter: every pair of adjacent whole characters inside a token, valid
    #    UTF-8 or not (decoding resynchronizes at the next lead byte, as in the text)
    for i in range(n):
        t = v.arena + offs[i]
        pos = 0
        prev = NO_RANK
        while pos < lens[i]:
            cp = decode_char(t + pos, lens[i] - pos, &q)
            if cp == NO_RANK:
                prev = NO_RANK
                pos += 1
                continue
            if prev != NO_RANK:
                bits = bigram_bits(prev, cp, &word)
                v.bigram_bloom[word] |= bits
            prev = cp
            pos += q
    return 0


def _compile_pattern(str pat_str):
    import regex
    try:
        return regex.compile(pat_str)
    except regex.error as exc:
        raise ValueError(f"invalid split pattern {pat_str!r}: {exc}") from None


def _native_pattern_id(str pat_str):
    """The hand-written pre-tokenizer for tiktoken's exact pattern strings, else -1.

    Only exact strings: a short name such as "gpt2" is a (silly) custom regex here, as in
    tiktoken.
    """
    from fastbpe._pretokenize import pattern_id
    from fastbpe.reference import patterns
    if pat_str in (patterns.GPT2, patterns.CL100K, patterns.O200K):
        return pattern_id(pat_str)
    return -1


cdef list _texts_list(object texts):
    """A new list of the texts (the caller's may change while the GIL is released), each
    checked to be a str."""
    if isinstance(texts, (str, bytes)) or not hasattr(texts, "__iter__"):
        raise TypeError(f"texts must be a list of str, not {type(texts).__name__}")
    cdef list out = list(texts)
    cdef Py_ssize_t i
    for i in range(len(out)):
        if not isinstance(out[i], str):
            raise TypeError(f"text {i} of the batch is {type(out[i]).__name__}, expected str")
    return out


cdef cnp.ndarray _ids_array(object tokens):
    """Token ids as a contiguous int64 array, ids out of range as -1 (unknown, like an id
    in range that is no token). TypeError names the first item that is not an int; only
    when all are ints does decoding report an unknown id (KeyError): one order for both
    cores, whatever the items' positions."""
    if isinstance(tokens, np.ndarray):
        arr = tokens
        if arr.dtype.kind not in "iu":
            raise TypeError(f"token ids must be integers, got an array of {arr.dtype}")
        if arr.ndim != 1:
            raise ValueError(f"token ids must be a 1-D array, got shape {arr.shape}")
        if arr.dtype == np.uint64 and arr.size and arr.max() > np.iinfo(np.int64).max:
            arr = np.where(arr > np.iinfo(np.int64).max, np.uint64(NO_RANK), arr)
        return np.ascontiguousarray(arr, dtype=np.int64)
    if not isinstance(tokens, (list, tuple)):
        raise TypeError(f"tokens must be a list, tuple or numpy array of ints, not "
                        f"{type(tokens).__name__}")
    # Lists and tuples of exact ints take CoreBPE.decode_sequence; what comes here has
    # other items (numpy ints, bools, anything): check one by one so that the error
    # names the culprit (numpy's conversion would take True as 1).
    out = np.empty(len(tokens), dtype=np.int64)
    for i, t in enumerate(tokens):
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise TypeError(f"token ids must be ints, got {t!r} at index {i}")
        out[i] = t if 0 <= t < NO_RANK else -1     # unknown ids are reported after
    return out


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
