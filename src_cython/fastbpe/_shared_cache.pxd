from libc.stdint cimport uint32_t, uint64_t

# The encoder's shared pretoken cache (_shared_cache.h has the design: a seqlock per
# 64-byte line, lock-free reads, an admission rule for long-tailed text). One table per
# encoder, used by every call and thread; a pure function of the vocabulary, so it needs
# nothing on fork or pickle (a pickled encoder starts with an empty one).

cdef extern from "_shared_cache.h" nogil:
    enum:
        FBSC_KEY_MAX
        FBSC_TOK_MAX
    ctypedef struct FbscTable:
        pass
    FbscTable* fbsc_new(size_t bytes)
    void fbsc_free(FbscTable* t)
    size_t fbsc_bytes(const FbscTable* t)
    bint fbsc_seen(FbscTable* t, uint64_t h)
    void fbsc_prefetch(const FbscTable* t, uint64_t h)
    int fbsc_get(FbscTable* t, const unsigned char* p, size_t n, uint64_t h, uint32_t* dst)
    void fbsc_put(FbscTable* t, const unsigned char* p, size_t n, uint64_t h,
                  const uint32_t* toks, size_t k)
    size_t fbsc_count(const FbscTable* t)
    void fbsc_clear(FbscTable* t)

# Bytes of a new encoder's table: $FASTBPE_SHARED_CACHE_MB (0 turns it off), else
# DEFAULT_MB, as set_default_bytes left it.
cpdef size_t default_bytes()
