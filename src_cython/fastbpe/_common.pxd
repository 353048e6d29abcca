"""What every encoding kernel shares: the "no token" rank, the error codes that nogil
code returns (turned into exceptions by ``CoreBPE``), and the small C helpers of
``include/fbe_util.h`` (loads, hashing, short compares), all inline."""
from libc.stdint cimport uint32_t, uint64_t

cdef extern from "fbe_util.h" nogil:
    # "No such token": larger than every rank, so the min-scans skip it for free.
    const uint32_t NO_RANK "FBE_NO_RANK"
    uint64_t fbe_hash(const unsigned char* p, size_t n) noexcept
    uint64_t fbe_word(const unsigned char* p, size_t n) noexcept
    uint64_t fbe_word_padded(const unsigned char* p, size_t n) noexcept
    uint64_t fbe_hash_word(uint64_t w, size_t n) noexcept
    uint64_t fbe_load64(const unsigned char* p) noexcept
    uint32_t fbe_min_u32(const uint32_t* a, size_t n) noexcept
    void fbe_prefetch(const void* p) noexcept
    bint fbe_equal_short(const unsigned char* a, const unsigned char* b, size_t n) noexcept
    void* table_alloc "fbe_table_alloc"(size_t size) noexcept

cdef enum:
    # Errors reported from nogil code, turned into exceptions afterwards.
    ERR_NONE = 0
    ERR_NOMEM = 1
    ERR_BYTE = 2       # a byte that is not a token (tiktoken would panic)
    ERR_SURROGATE = 3  # the str holds a lone surrogate: the caller fixes it up and retries
    ERR_TOO_LONG = 4   # a single pre-tokenized chunk of 4 GiB or more
    ERR_DISALLOWED = 5 # the text holds a disallowed special token (see NeedleSet)
    ERR_UTF8 = 6       # a job's bytes are not valid UTF-8 (Job.check_utf8)
