"""Decoding: token id -> its bytes, for every token of a core, mergeable and special.

Entry ``e`` (mergeable tokens in arena order, then the special tokens) has the bytes
``arena[entry_off[e] : entry_off[e] + entry_len[e]]``. An id finds its entry in a dense
array when the ids are dense enough to index (every real vocabulary), else by binary
search in the ids sorted; a mergeable token wins over a special token with the same id,
as in tiktoken. Built once per ``CoreBPE`` (``decode_build``), read-only after.
"""
from libc.stdint cimport int64_t, uint32_t


cdef struct DecodeTable:
    const unsigned char* arena
    int64_t* entry_off
    uint32_t* entry_len
    Py_ssize_t n_entries
    int64_t* dense_entry      # id -> entry or -1 (NULL when the ids are too sparse)
    Py_ssize_t dense_size
    uint32_t* sorted_ids      # sparse fallback: ids ascending, with their entries
    int64_t* sorted_entry


cdef void decode_clear(DecodeTable* d) noexcept nogil
    # Every array NULL (a table not built, or freed).
cdef void decode_free(DecodeTable* d) noexcept nogil
cdef int decode_build(DecodeTable* d, const unsigned char* arena, object lens,
                      object ids) except -1
    # The table of the entries with lengths lens (uint32) and ids ids (int64), laid end
    # to end in arena from offset 0; MemoryError (decode_free releases what was made).
cdef int64_t decode_entry(const DecodeTable* d, int64_t token) noexcept nogil
    # Entry of a token id (the mergeable one first), or -1.
cdef bytes decode_ids(const DecodeTable* d, int64_t* ids, Py_ssize_t n, object given,
                      bint scratch)
    # Bytes of ids[0:n]; KeyError(int(given[i])) for the first unknown id (-1 in ids
    # stands for an id out of range). scratch: ids is the caller's to overwrite (with
    # entries, so that the copy does not look them up again).
cdef object decode_exact_ints(const DecodeTable* d, object tokens)
    # decode_ids of a list or tuple read in place, or None as soon as an item is not an
    # exact int (the caller then converts item by item, so that the error names it).
cdef bytes entry_bytes(const DecodeTable* d, int64_t e)
cdef list entries_sorted(const DecodeTable* d, Py_ssize_t n)
    # The bytes of entries 0..n-1, sorted.
