"""Native sentencepiece BPE: the declarations of ``fastbpe._spm``.

The rules are ``fastbpe.reference.sentencepiece``'s (the specification); ``_spm.pyx``
makes them fast and runs batches on the threads of ``fastbpe._runner``. One text is
encoded by ``spm_encode`` in four linear steps, each a loop over bytes:

1. ``normalize``: the identity normalizer (the only one reproduced): spaces escaped as
   ``▁``, the dummy prefix, ``remove_extra_whitespaces``, user-defined pieces whole
   (eight bytes at a time up to the next space or first byte of a user-defined piece);
2. ``symbolize``: code points, and user-defined pieces as frozen symbols;
3. ``merge``: for a piece of up to ``SCAN_MAX`` symbols, a scan for the lowest
   (rank, position) pair per merge, each symbol keeping the rank of its pair with the
   next (tiktoken's way: no heap to fill for a word); for longer ones an 8-ary heap of
   candidate pairs (score, then leftmost), stale entries skipped when popped
   (``Scratch.heap``); a segment of ``run_min`` symbols or more (a long line no cut
   shortens) merges through buckets by rank (``merge_buckets``: the initial pairs in
   one run sorted by key, a counting sort on the rank; the pairs merges push in a
   bucket per rank, radix-sorted by position when their rank's turn comes; the heap
   only for pairs pushed with a rank at or below the one being read), read in position
   order with the symbols and text prefetched ahead. All pick the same pair: the
   lowest key among the current pairs (``reference.sentencepiece.bucket_queue``).
   A doubly linked list of
   symbols: O(n log n) for n symbols, never a rescan;
4. ``emit``: each symbol's id (a control/unknown/byte piece with that text first, then a
   normal/user-defined piece, else unknown), unknown symbols as their ``<0xXX>`` bytes
   with ``byte_fallback``, runs of unknown symbols as one unknown id without.

**Segments and the cache.** The normalized text is cut between two adjacent characters
that appear next to each other in no piece merges may make (``joinable_pairs``; the
proof that no merge crosses such a cut, and that each segment merges as it would in the
whole text, is ``fastbpe.reference.sentencepiece.segments``'). Llama 2's and Mistral's
vocabularies cut before every ``▁`` that follows another character, around the newline,
digits and most CJK characters, and inside words at pairs no piece holds. Each segment
is merged on its own, and one of up to ``LONG_KEY`` bytes keeps its ids in a two-way
set-associative cache per thread (``SlotHead``: 64-byte slots for short segments,
128-byte ones for longer), so a segment seen before costs a hash and a compare (one of up to 16 bytes and 7 ids is
looked up first in a 256 KiB first level of 32-byte entries that stays in L2: ``Near``
in ``_spm.pyx``); the
next segment's set is prefetched while one is looked up (a set is a miss to L3 or DRAM:
the tables are megabytes). Pairs of
characters below U+0600 or ``▁`` are one bit in ``pair_bits``; other pairs are a code
point ``wall`` test (a character in no piece of two or more characters joins nothing),
then a probe in ``pair_table``. Without ``byte_fallback`` a run of unknown symbols
spanning segments still gives one unknown id: a segment's leading unknown id is dropped
after one (an unknown id in the output comes only from an unknown symbol). The segments are
found and the one-character ones written in one pass over the normalized characters
(``scan``; the dividing line is ``fastbpe.reference.sentencepiece.fused_scan``'s): a
wall character (in no piece of two or more characters) is a segment by itself, so it
needs no pair test, and with an id in ``char_ids`` (``reference.sentencepiece.one_char_id``:
BMP, not unknown: most CJK text, punctuation; with byte fallback a one-byte character
that is no piece, the newline and tab, as its ``<0xXX>`` id) it is written at once, as is any other one-character
segment that is a piece: each character decoded once, no segment record, no hash, no
cache. Only the other segments wait (one turn, their cache set prefetched) for
``encode_segment``, the one-character ids found meanwhile held behind them. On a cache miss, a segment that is exactly a piece
whose text merges into itself (``Entry.whole``: most words of a fresh text) is one
lookup, not a merge.

**Pairs on ids.** ``merge_scan`` (a segment of up to ``SCAN_MAX`` symbols: nearly all of
them) gives each symbol an id (``fastbpe.reference.sentencepiece.symbol_ids``: a piece's
id, or an id past the vocabulary for a character that is no piece but is inside one) and
looks a pair up by its two ids in ``pairs`` (``reference.sentencepiece.merge_pairs``:
(a, b) -> the piece a + b), 8-byte slots, 1 MiB for Mistral's 59k pairs, instead of
hashing the pair's text and comparing it in the 2 MiB piece table; ``emit`` gives a
symbol's id without a lookup. ``merge``'s heap (up to ``run_min`` symbols) keeps the text
path; a long segment (``merge_buckets``) merges on ids too, each symbol's id in its
``Sym.length`` while it merges, a push asking ``Model.pair_filter`` (64 KiB) before the
pairs table.

Models with unused pieces are not run here (``SentencePieceBPE`` keeps them on the
reference): resegmenting an unused piece needs the per-call ``rev_merge`` map.
"""
from libc.stdint cimport int32_t, uint8_t, uint16_t, uint32_t, uint64_t

from fastbpe._vec cimport I32Vec


cdef struct Entry:
    uint64_t word         # fbe_word of the first min(len, 8) bytes: a piece of up to 8
                          # bytes compares without reading the arena; 0 len: a free slot
    uint32_t off          # the bytes, in Model.arena
    uint32_t len
    int32_t merge_id      # the normal/user-defined piece with this text (what merges may
                          # make), or -1
    int32_t id            # what sentencepiece's PieceToId gives: a control/unknown/byte
                          # piece first, else merge_id
    uint32_t whole        # 1: a segment that is exactly this text merges into this one
                          # piece (decided at load by merging the text alone), so a cache
                          # miss on it costs one lookup, not a merge
    uint32_t rank         # merge_id's place among the distinct scores, best first: the
                          # heap orders by (rank, left), which is (score desc, left)


cdef enum:
    SCAN_MAX = 48         # pieces of up to this many symbols merge by scanning
    SHORT_KEY = 32        # segments of up to 32 bytes ("▁" * 8 + "return") and 6 ids: a
    SHORT_IDS = 6         # 64-byte slot (one cache line: one miss per lookup) ...
    SHORT_SLOTS = 65536   # ... 4 MiB of them: ~15k distinct segments per MB of English
    LONG_KEY = 88         # longer ones, up to 88 bytes and 8 ids (Python's "▁" * 16 +
    LONG_IDS = 8          # "return"): 128-byte slots ...
    LONG_SLOTS = 4096     # ... 512 KiB (indentation + keyword: few distinct)
    SMALL_LIMIT = 0x600   # pair_bits' characters: U+0000-U+05FF (Latin, Greek, Cyrillic,
    SMALL_CHARS = 0x601   # Armenian, Hebrew), then the space mark
    PAIR_BYTES = 295297   # (SMALL_CHARS * SMALL_CHARS + 7) / 8
    DIRECT_CHARS = 0x10000  # char_ids covers the BMP
    POOL = 8              # scratches (with their caches) an SpmCore keeps for batches
    NO_SID = 0xFFFF       # a symbol that is in no pair (frozen, or a character in no piece
    MAX_SIDS = 0xFFFF     # of two or more); pairs on ids need fewer symbol ids than this


cdef struct SlotHead:     # 8 bytes: a cache slot starts so; its key follows (SHORT_KEY or
    uint32_t tag          # LONG_KEY bytes), then its ids (SHORT_IDS or LONG_IDS int32).
    uint16_t key_len      # tag: the low half of the key's hash; key_len 0: empty
    uint16_t n_ids


cdef struct Sym:          # a symbol: 16 bytes, so that merging touches one line per symbol
    uint32_t start        # byte offset in norm
    uint32_t length       # bytes, | FROZEN for a user-defined piece (never merged); 0 once
                          # merged into its left neighbour
    int32_t prev
    int32_t next


cdef enum:
    FROZEN = 0x80000000


cdef struct Model:
    unsigned char* arena  # every piece's bytes, then every user-defined piece's
    Entry* table          # open addressing, linear probing, a power of two of slots
    uint64_t mask
    uint32_t max_whole    # the longest piece's bytes: no longer segment is a whole piece
    uint32_t n_ranks      # distinct scores of the pieces merges may make (Entry.rank < n_ranks)
    int32_t unk_id
    int32_t byte_ids[256] # PieceToId("<0xXX>") of each byte (the unknown id when absent)
    bint byte_fallback
    bint add_dummy_prefix
    bint remove_extra_whitespaces
    bint escape_whitespaces
    bint treat_whitespace_as_suffix
    uint8_t* wall         # bit c set: code point c is in no piece of two or more
                          # characters (Mistral's newline, digits, most CJK): joins
                          # nothing (0x110000 bits)
    uint32_t space_mark   # the code point a space becomes (U+2581, or U+0020 unescaped)
    uint8_t* pair_bits    # PAIR_BYTES: bit a * SMALL_CHARS + b: the pair
                          # of small characters a, b (module docstring) is in some piece
    uint64_t* pair_table  # the other pairs, a << 21 | b, + 1 (0: free), open addressing
    uint64_t pair_mask
    uint16_t* char_ids    # DIRECT_CHARS: the id of a one-character segment (what emit
                          # gives that symbol), or NO_SID where it is unknown or its id
                          # needs more than 16 bits (the general way); 128 KiB
    # merging on symbol ids ("Pairs on ids" in the module docstring); pairs NULL: the
    # model has too many ids for 16 bits, and merge_scan looks pairs up by text
    uint64_t* pairs       # (a << 16 | b) + 1 << 32 | rank << 16 | merged, 0: free; open
    uint64_t pairs_mask   # addressing, linear probing
    uint16_t* small_sid   # SMALL_CHARS: the symbol id of a small character (NO_SID: none)
    uint64_t* char_sid    # the other characters: (c + 1) << 32 | sid, 0: free
    uint64_t char_mask
    uint8_t* sid_plain    # bit sid: emit gives the id sid itself (a piece whose text no
                          # control/unknown/byte piece has); else emit looks the text up
    uint32_t n_texts      # sids below are piece ids; from n_texts on, characters in some
                          # piece that are no piece themselves
    # user-defined pieces, grouped by first byte and longest first within a group:
    # those starting with byte b are user_off/user_len[user_first[b]:user_first[b + 1]]
    uint8_t user_start[256]  # 1 for a byte that starts some user-defined piece
    int32_t user_first[257]
    uint32_t* user_off
    uint32_t* user_len
    # (long segments, branch long39b) bit (id_pair_key(a, b) * golden) >> (64 - 19) of
    # each of pairs' keys: 64 KiB that stays in L2 where the 1 MiB pairs table misses;
    # merge_buckets asks it first when it pushes (most pairs a merge makes are none).
    # NULL with pairs
    uint64_t* pair_filter
    # (long segments, branch long39b) a model without pairs on ids: merge_buckets' piece
    # filter (``Buckets.filter``), built at load instead of per long segment; else NULL
    uint64_t* piece_filter


cdef struct Scratch:
    # reused across the texts a thread encodes; grown on demand
    void* mem             # one block for norm and the per-symbol arrays below
    Py_ssize_t cap        # ... sized for texts of up to cap input bytes
    unsigned char* norm   # the normalized text
    Sym* sym              # the symbols of the segment being merged
    uint32_t* pair_rank   # short pieces (merge_scan): rank of (i, next[i]), NO_PAIR if none
                          # (with pairs: rank << 16 | the merged symbol's id)
    uint32_t* sid         # merge_scan on ids: symbol i's id (NO_SID: joins nothing)
    uint64_t* heap        # candidate pairs as rank << 32 | left, smallest first: an 8-ary
                          # heap (node i's children are 8i+1..8i+8) at heap_mem + 7, so
                          # that every group of children is one 64-byte line (long texts
                          # are bound by the heap's cache misses). A popped pair is merged
                          # iff its sides' text is still a piece of that rank: an entry
                          # whose pair changed is then stale, or has the key of the
                          # current pair's own entry, which merges it at the same turn
    void* heap_mem
    Py_ssize_t heap_size
    Py_ssize_t heap_cap
    unsigned char* slots  # the segment cache, allocated on first use: SHORT_SLOTS slots of
                          # 64 bytes, then LONG_SLOTS of 128


cdef int spm_encode(const Model* m, Scratch* s, const unsigned char* text, Py_ssize_t n,
                    I32Vec* out) noexcept nogil
    # Append the ids of the UTF-8 text[:n] to out; 0, or -1 when memory runs out.
cdef void scratch_free(Scratch* s) noexcept nogil
