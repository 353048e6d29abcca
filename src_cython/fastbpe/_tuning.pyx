"""The process default ``Tuning`` (see ``_tuning.pxd``), and the one way to read or change
one: ``tuning_fields`` / ``tuning_update`` (behind ``CoreBPE.tuning``,
``CoreBPE.set_tuning`` and ``default_tuning``)."""
from fastbpe._chunk_cache cimport CACHE_POOL
from fastbpe._chunk_block cimport BLOCK_MAX

#: The largest block_chunks (the two-phase loop keeps a block on the stack).
BLOCK_MAX_CHUNKS = BLOCK_MAX

cdef Tuning _default
# Chunks longer than this (in bytes) are merged with the heap; shorter ones by the
# simple lowest-rank scan, which is faster when n is small. Both give identical output.
# Measured: from ~20 bytes on the heap wins (CJK runs); words in alphabetic scripts are
# shorter.
_default.heap_threshold = 24
# Longer chunks than this take the bucket merge (_merge_buckets.pyx): its queues are read
# front to back where the heap's levels are read at random, which wins once the heap
# outgrows the caches; below, its tables cost more than they save.
_default.bucket_threshold = 1 << 12
_default.by_chars = True
_default.utf8_simd = True          # where the CPU has SSSE3 (fbe_utf8.h checks)
# see fastbpe/_runner.pyx (batch_threads)
_default.points_per_thread = 1 << 14
_default.cap_to_cpus = True
# Pieces are about (all text of the call) / (threads * pieces_per_thread) code points
# long, and at least piece_min (but the last one of a text). Enough pieces per thread
# that the threads finish together and the lists of all but the last few are built
# while the rest encodes; long enough that a piece costs far more than handing it out.
_default.piece_min = 1 << 14
_default.pieces_per_thread = 16
# All that fit the pool (16 x 512 KiB = 8 MiB per encoder at most, when 16 threads or
# calls ran at once; one cache for a single-threaded data loader): kept caches are what
# makes encode() on short documents fast (see fastbpe/_chunk_cache.pyx).
_default.kept_chunk_caches = CACHE_POOL
# Blocks of 64 chunks with the seeded table (benchmarks/PERFORMANCE_NOTES.md, "Issue 41:
# the two-phase block loop and the seeded table"): per ~2 KB document, ab_duel.py on
# over off, Turkish 1.39-1.52x, English 1.11-1.17x, gpt2 Python 0.92-0.93x; 256 lost
# 18% on o200k Turkish, 16 lost 3-6%. 0 runs the fused loop (no table).
_default.block_chunks = 64
# A bound, not a size: the table takes 4 entries of 16 bytes per token of 3..8 bytes,
# rounded up to a power of two (gpt2 4 MiB, cl100k_base 8 MiB, o200k_base 16 MiB: 37k,
# 76k and 143k seeds), and at most this.
_default.seed_table_kb = 64 << 10

# name -> (lowest, highest) for the int fields; None for the bools
_RANGES = {
    "heap_threshold": (0, 1 << 20),
    "bucket_threshold": (0, None),
    "by_chars": None,
    "utf8_simd": None,
    "points_per_thread": (0, None),
    "cap_to_cpus": None,
    "piece_min": (1, None),
    "pieces_per_thread": (1, None),
    "kept_chunk_caches": (0, CACHE_POOL),
    "block_chunks": (0, BLOCK_MAX),
    "seed_table_kb": (0, 1 << 22),
}


cdef Tuning tuning_default() noexcept:
    return _default


cdef dict tuning_fields(const Tuning* t):
    return {
        "heap_threshold": t.heap_threshold,
        "bucket_threshold": t.bucket_threshold,
        "by_chars": bool(t.by_chars),
        "utf8_simd": bool(t.utf8_simd),
        "points_per_thread": t.points_per_thread,
        "cap_to_cpus": bool(t.cap_to_cpus),
        "piece_min": t.piece_min,
        "pieces_per_thread": t.pieces_per_thread,
        "kept_chunk_caches": t.kept_chunk_caches,
        "block_chunks": t.block_chunks,
        "seed_table_kb": t.seed_table_kb,
    }


cdef int tuning_update(Tuning* t, dict fields) except -1:
    cdef Tuning new = t[0]
    for name, value in fields.items():
        if name not in _RANGES:
            raise TypeError(f"unknown tuning field {name!r}; the fields are {', '.join(_RANGES)}")
        bounds = _RANGES[name]
        if bounds is None:
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
        else:
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
            low, high = bounds
            if value < low or (high is not None and value > high):
                span = f"in [{low}, {high}]" if high is not None else f"at least {low}"
                raise ValueError(f"{name} must be {span}, got {value}")
        if name == "heap_threshold":
            new.heap_threshold = value
        elif name == "bucket_threshold":
            new.bucket_threshold = value
        elif name == "by_chars":
            new.by_chars = value
        elif name == "utf8_simd":
            new.utf8_simd = value
        elif name == "points_per_thread":
            new.points_per_thread = value
        elif name == "cap_to_cpus":
            new.cap_to_cpus = value
        elif name == "piece_min":
            new.piece_min = value
        elif name == "pieces_per_thread":
            new.pieces_per_thread = value
        elif name == "kept_chunk_caches":
            new.kept_chunk_caches = value
        elif name == "block_chunks":
            new.block_chunks = value
        else:
            new.seed_table_kb = value
    t[0] = new
    return 0


def default_tuning(**fields):
    """The process default tuning, which every new ``CoreBPE`` copies: with no
    arguments, its fields as a dict; with some, set them and return the previous values
    of those fields (so ``default_tuning(**old)`` restores them).

    None of the fields changes an id. Tests use them to reach every path (the buckets,
    the heap and the scan, merging by characters or not, the plain UTF-8 loop, tiny
    pieces) and run with the thread rule off (``tests/conftest.py``) so that small
    batches use threads.

    >>> old = default_tuning(heap_threshold=0)
    >>> default_tuning()["heap_threshold"], old
    (0, {'heap_threshold': 24})
    >>> _ = default_tuning(**old)
    """
    before = tuning_fields(&_default)
    tuning_update(&_default, fields)
    if not fields:
        return before
    return {name: before[name] for name in fields}
