"""The two-phase block loop: the chunk loop of a segment under a native pattern, run in
blocks of up to ``Tuning.block_chunks`` chunks (issue 41, item 1).

The fused loop (``_jobs.encode_segment`` with ``block_chunks == 0``) splits one chunk,
hashes it and probes its chunk-cache line at once, so every probe that misses L1/L2
stalls the loop (perf, 2026-11-30: 53% of ``run_job``'s samples on the first load of
the cache entry). Here phase A splits a block of chunks, computes each one's key
(``chunk_key``) and prefetches its cache line; phase B then encodes the block in order
(``bpe_chunk_short``, else ``bpe_chunk_keyed``: the probe, then the miss path out of
line), by which time the lines have had a block's worth of splitting to arrive.
gigatoken's ``memoized_encode_flat`` (``src/bpe/tiktoken.rs``) runs the same two
phases over 256 pre-tokens.

Exactness does not depend on the block: phase B encodes the same chunks, in the same
order, through the same functions as the fused loop; a block only changes when the
cache lines are loaded. A chunk needs its hash only if it is not short
(``bpe_chunk_short``), so phase A keys chunks of 3 bytes or more; a 2-byte chunk
that is not a token (rare) is keyed in phase B.

With the encoder's seeded table (``_seed_table``, item 2), phase A prefetches the
table's bucket for chunks of 3..8 bytes instead of their chunk-cache line, and phase B
asks it (``seed_chunk``): its entries are written whole and read whole, so a hit is
the chunk's ids whatever other threads write meanwhile.
"""
from libc.stdint cimport uint64_t

from fastbpe._chunk cimport bpe_chunk_keyed, bpe_chunk_miss, bpe_chunk_short, chunk_key
from fastbpe._chunk_cache cimport CacheEntry, cache_line
from fastbpe._common cimport ERR_NOMEM, ERR_NONE, fbe_prefetch
from fastbpe._out cimport OutBuf, out_grow
from fastbpe._seed_table cimport (SeedTable, fbe_seed_emit, fbe_seed_find, seed_admit,
                                  seed_bucket, seed_len_ok)
from fastbpe._pretokenize cimport FbpeWin, fbpe_win_reset, split_next
from fastbpe._tuning cimport Tuning
from fastbpe._vocab cimport Vocab

cdef enum:
    BLOCK_MAX = 256           # the largest Tuning.block_chunks (the block is on the stack)


cdef struct BlockChunk:
    Py_ssize_t s              # offset of the chunk in the text
    Py_ssize_t n              # its length
    uint64_t w                # chunk_key's word and hash (unset for n <= 2)
    uint64_t h


cdef inline int seed_chunk(const Vocab* v, const SeedTable* seeds, const unsigned char* p,
                           Py_ssize_t n, uint64_t w, uint64_t h, OutBuf* out,
                           Py_ssize_t* err_pos, CacheEntry* cache,
                           const Tuning* tuning) noexcept nogil:
    """A chunk of 3..8 bytes through the seeded table: a hit is one bucket compared
    without branches and three unconditional stores (item 3); a miss is the chunk
    cache's miss path (the whole chunk as a token, else a merge) without the chunk
    cache, whose lines are left to longer chunks, and its ids are admitted."""
    cdef uint64_t r = fbe_seed_find(seed_bucket(seeds, h), w, n)
    cdef Py_ssize_t before = out.size
    cdef int rc
    if r != 0:
        if out.size + 3 > out.cap and out_grow(out, out.size + 3) < 0:
            return ERR_NOMEM
        out.size += fbe_seed_emit(r, out.data + out.size)
        return ERR_NONE
    rc = bpe_chunk_miss(v, p, n, out, err_pos, cache, NULL, w, h, tuning)
    if rc == ERR_NONE:
        seed_admit(seeds, w, h, n, out.data + before, out.size - before)
    return rc


cdef inline int encode_blocks(const Vocab* v, int pattern, const unsigned char* text,
                              Py_ssize_t start, Py_ssize_t end, OutBuf* out,
                              Py_ssize_t* err_pos, CacheEntry* cache,
                              const SeedTable* seeds, const Tuning* tuning) noexcept nogil:
    """Encode text[start:end] (one segment, split by native pattern `pattern`) in
    blocks of tuning.block_chunks (1..BLOCK_MAX) chunks; on an error, err_pos is its
    byte offset in text. With seeds (a built table, or NULL), chunks of 3..8 bytes ask
    it (seed_chunk) instead of the chunk cache."""
    cdef BlockChunk blk[BLOCK_MAX]
    cdef Py_ssize_t k, i, s = start, e, local, size = tuning.block_chunks
    cdef int rc
    cdef FbpeWin win
    fbpe_win_reset(&win)
    while s < end:
        # phase A: split, key and prefetch
        k = 0
        while k < size and s < end:
            e = split_next(&win, pattern, text, s, end)
            blk[k].s = s
            blk[k].n = e - s
            if e - s > 2:
                chunk_key(text + s, e - s, &blk[k].w, &blk[k].h)
                if seeds != NULL and seed_len_ok(e - s):
                    fbe_prefetch(seed_bucket(seeds, blk[k].h))
                elif cache != NULL:
                    fbe_prefetch(cache_line(cache, blk[k].h))
            k += 1
            s = e
        # phase B: encode in order
        for i in range(k):
            if bpe_chunk_short(v, text + blk[i].s, blk[i].n, out, &local, &rc):
                pass
            elif seeds != NULL and seed_len_ok(blk[i].n):
                rc = seed_chunk(v, seeds, text + blk[i].s, blk[i].n, blk[i].w, blk[i].h,
                                out, &local, cache, tuning)
            else:
                if blk[i].n == 2:     # a pair that is no token (rare): keyed here
                    chunk_key(text + blk[i].s, 2, &blk[i].w, &blk[i].h)
                rc = bpe_chunk_keyed(v, text + blk[i].s, blk[i].n, blk[i].w, blk[i].h,
                                     out, &local, cache, tuning)
            if rc != ERR_NONE:
                err_pos[0] = blk[i].s + local
                return rc
    return ERR_NONE

