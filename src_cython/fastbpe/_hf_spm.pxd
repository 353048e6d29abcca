"""Native BPE of a sentencepiece-style tokenizer.json: the declarations of ``fastbpe._hf_spm``.

The rules are ``fastbpe.reference.hf_spm``'s (the specification: ``pieces``, ``prefix``,
``words``, ``initial_symbols``, ``merge_symbols``, ``segments``); ``_hf_spm.pyx`` makes
``pieces`` + ``words`` + ``bpe_word`` fast. The added tokens (and the allowed special
ones: an ``AddedSet``) are cut out of the text first, leftmost then longest, as
``reference.sentencepiece.split_specials`` decides; ``prefix`` says whether a ``▁`` goes in
front of each piece between them. A piece is encoded in three linear steps (its ``▁`` in
front, spaces escaped and Metaspace's word starts, as forced cuts, made on the fly while
the symbols are):

1. **symbols**: each code point's id (``HFTables.bmp``, a dense array for U+0000-U+FFFF,
   else the open-addressing ``HFTables.astral``), else its UTF-8 bytes' ``<0xXX>`` ids
   with ``byte_fallback`` when every byte has one, else the unknown id (a run fused with
   ``fuse_unk``), else dropped (no ``unk_token``);
2. **segments**: a cut between two symbols whose junction pair (last code point of the
   left one's text, first of the right one's: ``HFTables.first`` / ``last``) is no
   merge's (``HFTables.joins``, or its dense bit matrix ``HFTables.bits`` when the
   junctions' characters are few): no merge ever crosses it (the corollary in
   ``reference.hf_spm.segments``), so each segment merges alone;
3. **merge** per segment: the lowest (rank, position) pair of ``HFTables.merges``
   (keyed by ``left id << 32 | right id``) first: up to ``scan_max`` symbols by a scan
   of the pairs' ranks, longer ones by a binary min-heap of ``rank << 32 | position``
   with stale entries skipped when popped (O(n log n), no quadratic case).

**The segment cache.** A segment of 2 to ``CACHE_SYMS`` symbols merges to the same ids
wherever it occurs (the corollary), so its result is kept in a direct-mapped table of
``CACHE_SLOTS`` ``CacheEntry``s (``HFCtx.cache``: a context's own) keyed by its symbol ids (an
entry is overwritten by the next segment hashing to its slot; the key is compared
whole, so a hit is exact). Words repeat in text: most segments are found there, not
merged. That table serves models whose ids need more than 16 bits; the others use the
compact one of ``_hf_spm_cache.pxd`` (16-bit entries in 2-way sets of a cache line,
segments up to 30 symbols), and a piece's segments of characters that are each one
symbol of its own are found, keyed and looked up in one pass over the text, before
any symbol is made (``_hf_spm_scan.pxd``; the three steps take the rest). The compact
cache is a context's (``HFCtx.seg``: each batch thread has its own); the scan's
character table is read only (``HFTables.chars``).

**Threads.** Everything a call mutates (``Scratch``, the segment cache, the output) is
an ``HFCtx``; the tables (``HFTables``, ``AddedSet``) are read only. So the hot path is
``nogil`` functions over ``(const HFTables*, HFCtx*)``: a batch runs each thread's block
of texts on a context of its own (kept warm in the kernel's pool), and a single call
takes the kernel's own context unless another call holds it (then a fresh one).
"""
from libc.stdint cimport int32_t, uint8_t, uint16_t, uint32_t, uint64_t

from fastbpe._hf_spm_cache cimport SegCache
from fastbpe._hf_spm_scan cimport ScanChars


cdef struct Slot:
    # an open-addressing slot: key EMPTY_KEY when free
    uint64_t key
    int32_t rank      # merges: the pair's rank; joins: unused; astral: the id
    int32_t merged    # merges: the merged id


cdef struct Table:
    Slot* slots
    uint64_t mask
    int shift         # 64 - log2(slots): a key's slot is the top bits of key * odd constant


cdef struct HFTables:
    int32_t* bmp          # code point < 0x10000 -> id, -1 when none
    Table astral          # code point (>= 0x10000) -> id (in Slot.rank)
    int32_t byte_ids[256]  # <0xXX> -> id, -1 when none
    int32_t unk_id        # -1 when the model has none (unknown characters dropped)
    bint byte_fallback
    bint fuse_unk
    bint escape           # Replace(" ", "▁") or Metaspace: a space is ▁
    bint split            # Metaspace split: a word starts at every ▁ but the first character
    bint cut              # False when reference.hf_spm.junctions is None (no cut is safe)
    Table merges          # (left << 32 | right) -> (rank, merged id)
    Table joins           # (last code point << 32 | first code point) of every merge's junction
    uint32_t* first       # id -> first code point of its text
    uint32_t* last        # id -> last code point of its text
    # the junctions as a dense bit matrix when small (Mistral: 206 left x 246 right
    # characters, 6 KiB): id -> 1 + row of its last character (0: in no junction), id ->
    # 1 + column of its first character; bit row * n_cols + column set for a junction
    bint dense
    uint16_t* row
    uint16_t* col
    uint8_t* bits
    uint32_t n_cols
    int32_t n_ids
    int32_t n_ranks       # 1 + the highest merge rank (merge_buckets' buckets)
    uint64_t* pair_filter # PAIR_FILTER_BITS bits, one per merge's pair (_hf_spm.filter_bit): a clear
                          # bit tells a pair is no merge in 64 KiB (L2), where the merge table misses
    int scan_max          # the longest segment merged by a scan; longer ones by the heap
    Py_ssize_t buckets_from  # the shortest segment merged by buckets (_hf_spm.merge_buckets)
    bint prepend          # normalizer Prepend("▁"): reference.hf_spm.prefix
    int scheme            # Metaspace prepend_scheme: SCHEME_NEVER, SCHEME_FIRST or SCHEME_ALWAYS
    int cache_syms        # the longest segment cached: SEG_LONG_SYMS (compact cache) or CACHE_SYMS
    ScanChars chars       # the fused scan's tables (_hf_spm_scan.pxd); info NULL when it cannot run


cdef enum:
    SCHEME_NEVER = 0
    SCHEME_FIRST = 1
    SCHEME_ALWAYS = 2


cdef struct AddedSet:
    # the tokens one call cuts out first (reference.hf_spm.pieces: the added tokens and
    # the allowed special ones), as code points, sorted by them (a token comes before
    # those it is a prefix of): the tokens sharing a prefix are a range (_hf_spm.added_at)
    uint32_t* cps         # every token's code points, one after the other
    Py_ssize_t* at        # token k is cps[at[k]:at[k] + length[k]] (length >= 1)
    Py_ssize_t* length
    int32_t* ids
    Py_ssize_t count
    uint64_t firsts[1024]  # bit (c & 0xFFFF) set when some token starts with a c of those low bits
    Table by_first        # first code point -> rank: index of its first token, merged: how many


cdef enum:
    CACHE_SYMS = 14           # the longest segment cached (symbols)
    CACHE_BITS = 15
    CACHE_SLOTS = 1 << CACHE_BITS   # 3.75 MiB of 120-byte entries (pages touched as used)


cdef struct CacheEntry:
    uint32_t n_in             # symbols of the key; 0 when the slot is free
    uint32_t n_out            # ids of the result
    int32_t key[CACHE_SYMS]
    int32_t ids[CACHE_SYMS]


cdef struct Scratch:
    # per-word buffers, grown as needed (an HFCtx's: one thread uses them): memory is
    # O(symbols of the longest word), not 4x its characters
    int32_t* ids
    int32_t* nxt
    int32_t* prv
    int32_t* rank    # scan: rank of the pair (i, next); heap: merged id scratch
    uint64_t* heap
    Py_ssize_t cap       # of nxt, prv, rank (symbols of a word) and heap (3 per symbol)
    Py_ssize_t ids_cap   # of ids, grown while the symbols are made (a character may give 4)
    int32_t* cuts        # Metaspace split: the symbol positions where a word starts (cut there)
    Py_ssize_t cuts_cap
    # merge_buckets (a long segment: _hf_spm.merge_buckets), made at the first one.
    # Per rank (HFTables.n_ranks), left as found (zero / -1) after each segment:
    uint32_t* rank_count  # the counting sort of the initial pairs by rank (then each rank's end in run)
    int32_t* rank_head    # each bucket's last pushed pool entry, -1: empty
    uint64_t* rank_filled # bit r: bucket r holds entries
    # per symbol (bq_cap):
    uint32_t* run         # the initial pairs' positions, by rank then position (bq_cap)
    uint32_t* pool_pos    # the pairs merges pushed above the current rank (2 x bq_cap) ...
    int32_t* pool_link    # ... and the entry pushed before each into the same bucket, or -1
    uint32_t* gather      # the current rank's bucket and the radix sort's other half (4 x bq_cap)
    Py_ssize_t bq_cap


cdef struct HFCtx:
    # what a call mutates (see "Threads"): one thread's at a time
    Scratch s
    CacheEntry* cache     # CACHE_SLOTS entries, calloc'd when first used (pages touched as used) ...
    SegCache seg          # ... or, when the ids fit 16 bits, the compact cache (_hf_spm_cache.pxd)
    int32_t* out          # the ids so far (a batch thread's: its block's texts, one after the other)
    Py_ssize_t out_len
    Py_ssize_t out_cap
    Py_ssize_t n_cuts     # Metaspace split: how many word starts s.cuts holds
