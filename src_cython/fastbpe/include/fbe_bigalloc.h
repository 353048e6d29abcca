/* Big growing arrays (pair tables, word lists, heap) get their own mappings on
   Linux: growing is mremap (no copy, no hole left in the malloc heap) and freeing
   gives the pages back at once, so peak RSS stays close to the live data. Small
   arrays and other systems use malloc. A 16-byte header records which is which. */
#ifndef FASTBPE_FBE_BIGALLOC_H
#define FASTBPE_FBE_BIGALLOC_H
#include <stdlib.h>
#include <string.h>
typedef struct { size_t size; size_t mapped; } fbpe_hdr;
#if defined(__linux__)
#include <sys/mman.h>
#define FBPE_MMAP_MIN ((size_t)1 << 20)
#endif
static void* fbpe_realloc(void* p, size_t n) {
    fbpe_hdr* h = p ? ((fbpe_hdr*)p) - 1 : NULL;
    size_t total = n + sizeof(fbpe_hdr);
#if defined(__linux__)
    if (total >= FBPE_MMAP_MIN || (h && h->mapped)) {
        size_t len = (total + 4095) & ~(size_t)4095;
        fbpe_hdr* q;
        if (h && h->mapped) {
            if (len == h->size) return p;
            q = (fbpe_hdr*)mremap(h, h->size, len, MREMAP_MAYMOVE);
            if ((void*)q == MAP_FAILED) return NULL;
        } else {
            q = (fbpe_hdr*)mmap(NULL, len, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if ((void*)q == MAP_FAILED) return NULL;
            if (h) { memcpy(q + 1, h + 1, h->size); free(h); }
        }
        q->size = len;
        q->mapped = 1;
        return q + 1;
    }
#endif
    h = (fbpe_hdr*)realloc(h, total);
    if (!h) return NULL;
    h->size = n;
    h->mapped = 0;
    return h + 1;
}
static void* fbpe_malloc(size_t n) { return fbpe_realloc(NULL, n); }
static void fbpe_free(void* p) {
    fbpe_hdr* h;
    if (!p) return;
    h = ((fbpe_hdr*)p) - 1;
#if defined(__linux__)
    if (h->mapped) { munmap(h, h->size); return; }
#endif
    free(h);
}
#if defined(__GLIBC__)
#include <malloc.h>
/* give freed memory back to the OS (thread arenas keep it otherwise) */
static void fbpe_trim_memory(void) { malloc_trim(0); }
#else
static void fbpe_trim_memory(void) { }
#endif
#endif /* FASTBPE_FBE_BIGALLOC_H */
