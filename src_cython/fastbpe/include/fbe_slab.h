/* The process-wide pool of output slabs (see fastbpe/_out.pyx). Holds static state:
   include it from fastbpe._out only. */
#ifndef FASTBPE_FBE_SLAB_H
#define FASTBPE_FBE_SLAB_H
#include <stdlib.h>
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

#endif
