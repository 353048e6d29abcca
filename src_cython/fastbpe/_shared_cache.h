/* A pretoken cache shared by every call and every thread of one encoder: chunk bytes
   (up to FBSC_KEY_MAX) -> the chunk's token ids (up to FBSC_TOK_MAX).

   It sits behind each thread's small private chunk cache (8192 lines, in L2): a chunk
   that misses there, and is not a whole token, is looked up here before it is merged.
   The private caches hold what one call (or one data-loader stream) repeats; this one
   holds the long tail that they evict, for as long as the process lives.

   Layout: a power-of-two array of 64-byte lines, direct-mapped by the chunk's hash.
   Concurrency, without locks on the hot path (a seqlock per line):
   - a reader loads the line's seq (acquire), skips the line if it is odd (being
     written), compares and copies, then loads seq again: a change means a writer came
     in between, and the copy is thrown away (a miss). Readers never write, except the
     admission counter below, by a relaxed single-byte store that no check depends on.
   - a writer moves seq from even to odd with a compare-and-swap, writes, and stores
     seq + 2 (release). A writer that loses the race skips its write: nothing waits.
   A line whose seq stayed odd (a process forked while another thread was writing it)
   is dead for the child's lifetime: it is never read, never written again. Nothing
   else is lost: the table holds only a pure function of the vocabulary.
   Formally the copies race with writers (as in every seqlock); the seq check throws
   every torn copy away.

   Admission (long-tailed text): each line counts its hits (freq, saturating at
   FBSC_FREQ_MAX). A chunk that missed may take the line only when freq is 0; otherwise
   it only lowers freq by one. So a word seen once cannot push out a word that keeps
   being hit: it must come back as often as the resident was used (CLOCK-like aging,
   per line). Empty lines are free to take.

   Doorkeeper (cold text): most chunks that miss the private cache in fresh text are a
   word's first occurrence, and probing a table of megabytes for them costs a memory
   read (and, the first time, a page) for nothing. So a bitmap of 2 bits per line
   (64 KiB for the default table, small enough to stay in the core's L2) records the
   hashes of chunks that missed; the table is probed, and written, only for a chunk
   whose bit was already set: the second miss of a word fills its line, the third one
   hits. When half of the bits are set, the bitmap is cleared (the table is not), so
   it keeps telling recent words from new ones. */
#ifndef FASTBPE_SHARED_CACHE_H
#define FASTBPE_SHARED_CACHE_H

#include <stdint.h>
#include <string.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/mman.h>

#define FBSC_KEY_MAX 24
#define FBSC_TOK_MAX 8
#define FBSC_FREQ_MAX 7

typedef struct {
    uint32_t seq;                 /* even: stable; odd: being written */
    uint8_t length;               /* 0: empty */
    uint8_t n_tokens;
    uint8_t freq;                 /* hits, saturating (admission) */
    uint8_t gen;                  /* the table's generation when written: an older one
                                     is an empty line (so a clear writes nothing) */
    unsigned char key[FBSC_KEY_MAX];
    uint32_t tokens[FBSC_TOK_MAX];
} FbscLine;

typedef struct {
    FbscLine* lines;
    uint64_t mask;                /* lines - 1 */
    size_t mapped;                /* bytes mapped (munmap) */
    void* base;
    uint64_t* seen;               /* doorkeeper: 2 bits per line */
    uint64_t seen_mask;           /* bits - 1 */
    uint64_t seen_set;            /* bits set since the last clear (atomic) */
    uint8_t gen;                  /* 1..255; fbsc_clear moves it on */
} FbscTable;

/* A table of `bytes` rounded down to a power of two of lines (>= 64 lines), or NULL
   (fewer bytes, or no memory: the encoder then runs without it).

   The pages are faulted in here, once, on huge pages where the kernel gives them. A
   direct-mapped table touches its pages at random, so left to fault on first use,
   nearly every page of it faults within the first megabytes of text: measured on
   o200k/cl100k Turkish, ~2 KB documents, that put 4-8 ms of page faults (zeroing
   16 MiB) into the first 1.6 MB encoded, 10-25% of its time. Here it is part of
   building the encoder, which takes 100 ms or more anyway. */
static FbscTable* fbsc_new(size_t bytes) {
    size_t lines = 64, huge = (size_t)1 << 21, size, map;
    FbscTable* t;
    void* base;
    uintptr_t start;
    if (bytes < 64 * sizeof(FbscLine)) return NULL;
    while (lines * 2 * sizeof(FbscLine) <= bytes) lines *= 2;
    size = lines * sizeof(FbscLine);
    map = size >= huge ? size + huge : size;          /* room to align to a huge page */
    base = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return NULL;
    start = (uintptr_t)base;
    if (size >= huge) {
        start = (start + huge - 1) & ~(uintptr_t)(huge - 1);
#ifdef MADV_HUGEPAGE
        madvise((void*)start, size, MADV_HUGEPAGE);   /* random reads: spare the TLB */
#endif
    }
    /* write one byte per 4 KiB page: the kernel faults the (huge) page in, zeroed */
    for (size_t off = 0; off < size; off += 4096) ((volatile unsigned char*)start)[off] = 0;
    t = (FbscTable*)calloc(1, sizeof(FbscTable));
    if (t == NULL) { munmap(base, map); return NULL; }
    t->seen = (uint64_t*)calloc(lines * 2 / 64, sizeof(uint64_t));
    if (t->seen == NULL) { munmap(base, map); free(t); return NULL; }
    t->seen_mask = lines * 2 - 1;
    t->gen = 1;
    t->lines = (FbscLine*)start;
    t->mask = lines - 1;
    t->mapped = map;
    t->base = base;
    return t;
}

static void fbsc_free(FbscTable* t) {
    if (t == NULL) return;
    munmap(t->base, t->mapped);
    free(t->seen);
    free(t);
}

static inline size_t fbsc_bytes(const FbscTable* t) {
    return t == NULL ? 0 : (size_t)(t->mask + 1) * sizeof(FbscLine);
}

static inline FbscLine* fbsc_line(const FbscTable* t, uint64_t h) {
    /* the private caches index by bits 24..36 of the same hash: mix in the high half,
       so that the lines one private entry maps to spread over this table */
    return &t->lines[(h ^ (h >> 32) ^ (h >> 47)) & t->mask];
}

/* Whether a chunk of hash h missed before (since the last clear); records that it did.
   The bit comes from other hash bits than the line, so two words that share a line
   rarely share a bit. */
static inline int fbsc_seen(FbscTable* t, uint64_t h) {
    /* Plain (relaxed) loads and stores, no locked instruction: a lock-prefixed one
       waits for every load in flight, which here are the vocabulary's cache misses
       (measured: fetch_or and add_fetch made cold Turkish 7% slower). Two threads
       racing on one word can lose a bit or a count: one admission less, or a clear a
       little late, never a wrong id. */
    uint64_t b = (h >> 13 ^ h >> 41) & t->seen_mask, bit = 1ull << (b & 63), old, n;
    uint64_t* w = &t->seen[b >> 6];
    old = __atomic_load_n(w, __ATOMIC_RELAXED);
    if (old & bit) return 1;
    __atomic_store_n(w, old | bit, __ATOMIC_RELAXED);
    n = __atomic_load_n(&t->seen_set, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(&t->seen_set, n, __ATOMIC_RELAXED);
    if (n > (t->seen_mask + 1) / 2) {
        /* half full: start again (a racing thread's bit may be lost: one admission) */
        __atomic_store_n(&t->seen_set, 0, __ATOMIC_RELAXED);
        for (uint64_t i = 0; i <= t->seen_mask >> 6; i++) __atomic_store_n(&t->seen[i], 0, __ATOMIC_RELAXED);
    }
    return 0;
}

static inline void fbsc_prefetch(const FbscTable* t, uint64_t h) {
    __builtin_prefetch(fbsc_line(t, h), 0, 1);
}

static inline uint64_t fbsc_load64(const unsigned char* p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint64_t fbsc_load32(const unsigned char* p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* key[:n] == p[:n] for 1 <= n <= 24, never reading p past p + n (key has 24 bytes). */
static inline int fbsc_equal(const unsigned char* key, const unsigned char* p, size_t n) {
    if (n < 4) {
        return key[0] == p[0] && key[n >> 1] == p[n >> 1] && key[n - 1] == p[n - 1];
    }
    if (n < 8) {
        return fbsc_load32(key) == fbsc_load32(p) && fbsc_load32(key + n - 4) == fbsc_load32(p + n - 4);
    }
    if (fbsc_load64(key) != fbsc_load64(p)) return 0;
    if (n > 16 && fbsc_load64(key + 8) != fbsc_load64(p + 8)) return 0;
    return fbsc_load64(key + n - 8) == fbsc_load64(p + n - 8);
}

/* The tokens of p[:n] (hash h) copied to dst (room for FBSC_TOK_MAX), and their count;
   -1 on a miss. */
static inline int fbsc_get(FbscTable* t, const unsigned char* p, size_t n, uint64_t h, uint32_t* dst) {
    FbscLine* e = fbsc_line(t, h);
    uint32_t s = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
    int k;
    uint8_t f;
    if ((s & 1) || e->length != n || e->gen != t->gen || !fbsc_equal(e->key, p, n)) return -1;
    k = e->n_tokens;
    memcpy(dst, e->tokens, FBSC_TOK_MAX * sizeof(uint32_t));
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) != s) return -1;
    f = __atomic_load_n(&e->freq, __ATOMIC_RELAXED);
    if (f < FBSC_FREQ_MAX) __atomic_store_n(&e->freq, (uint8_t)(f + 1), __ATOMIC_RELAXED);
    return k;
}

/* Offer toks[0:k] as the tokens of p[:n] (hash h): written when the line is empty or
   its resident's hits have aged to zero, otherwise the resident ages by one. */
static inline void fbsc_put(FbscTable* t, const unsigned char* p, size_t n, uint64_t h,
                            const uint32_t* toks, size_t k) {
    FbscLine* e;
    uint32_t s;
    uint8_t f;
    if (n == 0 || n > FBSC_KEY_MAX || k == 0 || k > FBSC_TOK_MAX) return;
    e = fbsc_line(t, h);
    s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
    if (s & 1) return;
    f = __atomic_load_n(&e->freq, __ATOMIC_RELAXED);
    if (e->length != 0 && e->gen == t->gen && f > 0) {
        __atomic_store_n(&e->freq, (uint8_t)(f - 1), __ATOMIC_RELAXED);
        return;
    }
    if (!__atomic_compare_exchange_n(&e->seq, &s, s + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return;
    __atomic_thread_fence(__ATOMIC_RELEASE);   /* seq odd before any byte below */
    e->length = (uint8_t)n;
    e->n_tokens = (uint8_t)k;
    e->gen = t->gen;
    __atomic_store_n(&e->freq, 0, __ATOMIC_RELAXED);
    memset(e->key, 0, FBSC_KEY_MAX);
    memcpy(e->key, p, n);
    memset(e->tokens, 0, sizeof(e->tokens));
    memcpy(e->tokens, toks, k * sizeof(uint32_t));
    __atomic_store_n(&e->seq, s + 2, __ATOMIC_RELEASE);
}

/* Lines in use (a testing and stats hook; not for hot paths). */
static size_t fbsc_count(const FbscTable* t) {
    size_t i, n = 0;
    if (t == NULL) return 0;
    for (i = 0; i <= t->mask; i++) n += t->lines[i].length != 0 && t->lines[i].gen == t->gen;
    return n;
}

/* Empty every line (the caller makes sure that no call is running): a new generation,
   so nothing is written (a memset of the table would also push the vocabulary's
   tables out of the core's caches); every 255th time the lines are zeroed. */
static void fbsc_clear(FbscTable* t) {
    if (t == NULL) return;
    memset(t->seen, 0, (t->seen_mask + 1) / 8);
    t->seen_set = 0;
    if (t->gen == 255) {
        memset(t->lines, 0, fbsc_bytes(t));
        t->gen = 1;
    } else {
        t->gen++;
    }
}

#endif
