"""``Tuning``: every knob of the encoder in one struct, passed to the kernels as a
``const Tuning*`` instead of read from globals.

None of them changes an id: they choose between equivalent strategies (the tests set
them to reach every path and compare) or say how a batch is shared among threads. The
defaults are the measured best; ``fastbpe._encode`` documents each field's choice and
holds the process default that every new ``CoreBPE`` copies."""

cdef struct Tuning:
    # Merging (fastbpe._merge): chunks longer than this (bytes) take the heap, others the
    # scan; both give identical output.
    Py_ssize_t heap_threshold
    # Chunks longer than this take the bucket merge instead of the heap (identical output
    # too; only for vocabularies with dense ranks).
    Py_ssize_t bucket_threshold
    # Merging by characters (fastbpe._merge_chars) on; off merges every chunk by bytes.
    bint by_chars
    # The SSSE3 UTF-8 conversion (where the CPU has it) instead of the plain loop.
    bint utf8_simd
    # Batch threads (fastbpe._runner): at most one per points_per_thread code points
    # (0: no limit from the text's size), and no more than the usable CPUs if
    # cap_to_cpus.
    Py_ssize_t points_per_thread
    bint cap_to_cpus
    # Pieces (fastbpe._jobs.cut_job): about total / (threads * pieces_per_thread) code
    # points long, at least piece_min.
    Py_ssize_t piece_min
    Py_ssize_t pieces_per_thread
    # Chunk caches (fastbpe._chunk_cache) the encoder keeps between calls, warm: at most
    # this many (0..CACHE_POOL), each 512 KiB; 0 keeps none, so every call starts cold.
    # Lowering it frees the extra ones at once (CoreBPE.set_tuning); a call running then
    # gives its cache back under the bound it started with.
    Py_ssize_t kept_chunk_caches
    # The chunk loop of native patterns (fastbpe._chunk_block): 0 runs the fused loop
    # (split a chunk, probe its cache line, encode it, next); K > 0 runs blocks of K
    # chunks in two phases: split all K and hash them, prefetching their cache lines,
    # then probe and encode them in order (at most BLOCK_MAX).
    Py_ssize_t block_chunks
    # The seeded table (fastbpe._seed_table) of an encoder is built with at most this
    # many KiB when the encoder is built (0: none); a call's block loop uses it when the
    # call's value is not 0 (set_tuning does not resize a built table).
    Py_ssize_t seed_table_kb


cdef Tuning tuning_default() noexcept
    # A copy of the process default (what a new CoreBPE starts with).
cdef dict tuning_fields(const Tuning* t)
    # The fields as a dict (field name -> value).
cdef int tuning_update(Tuning* t, dict fields) except -1
    # Set the named fields; TypeError/ValueError (nothing changed) for an unknown name or
    # a value out of range.
