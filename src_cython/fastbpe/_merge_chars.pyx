"""Merging by characters: the same ids as merging by bytes, from about a third of the
work in CJK text (1.2x-1.5x faster on the Chinese corpus).

A chunk is first cut where no token spans a character boundary (Corollary 4, split):
the pieces, mostly one- and two-character words, recur and come from the chunk cache
(a further 1.25x-1.35x with cl100k and o200k). Otherwise it is cut into runs of
characters that are each one token, merged at character level (Corollary 2,
characters); characters that are several tokens are copied as walls (Corollary 3,
walls); the rest is merged from bytes; the pieces are joined by Corollary 1
(junctions). The rules and their proofs are in docs/merge_rules.md. Work per chunk is
capped, so the worst case stays linear; anything unusual falls back to merging by bytes
(``bpe_by_chars`` returns -1). Tests compare both paths everywhere.
"""
from libc.stdint cimport uint32_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memcmp, memcpy, memmove

from fastbpe._chunk_cache cimport (CACHE_KEY_MAX, PURE_SALT, CacheEntry, cache_get,
                                   cache_line, cache_put)
from fastbpe._common cimport ERR_NONE, NO_RANK, fbe_hash, fbe_hash_word, fbe_min_u32, fbe_word
from fastbpe._idlists cimport outbuf_to_list
from fastbpe._merge cimport bpe_merge
from fastbpe._out cimport OutBuf, out_grow, out_init
from fastbpe._tuning cimport Tuning
from fastbpe._vocab cimport CHAR_WALL, Vocab, bigram_bits, decode_char, vocab_rank


cdef int merge_cached(const Vocab* v, const unsigned char* p, Py_ssize_t n, OutBuf* out,
                      Py_ssize_t* err_pos, CacheEntry* cache,
                      const Tuning* tuning) noexcept nogil:
    """bpe_merge through the thread's chunk cache (cache may be NULL). The joins of
    bpe_by_chars ask about the same few token pairs again and again."""
    cdef uint64_t h
    cdef CacheEntry* e
    cdef Py_ssize_t before = out.size
    cdef int rc = ERR_NONE
    if cache == NULL or n > CACHE_KEY_MAX:
        return bpe_merge(v, p, n, out, err_pos, tuning)
    h = (fbe_hash_word(fbe_word(p, n), n) if n <= 8 else fbe_hash(p, n)) ^ PURE_SALT
    e = cache_line(cache, h)
    if cache_get(e, p, n, h, out, &rc):
        return rc
    rc = bpe_merge(v, p, n, out, err_pos, tuning)
    if rc == ERR_NONE:
        cache_put(e, p, n, h, out, before)
    return rc


cdef int merge_units(const Vocab* v, const unsigned char* p, const uint32_t* start,
                     uint32_t* token, Py_ssize_t m, OutBuf* out) noexcept nogil:
    """Character-level BPE of units [start[i], start[i + 1]) with tokens token[i]
    (start[m] is the end): tiktoken's scan over units instead of bytes. Appends the
    result to out (which has room)."""
    cdef uint32_t rank[UNITS_MAX]
    cdef uint32_t nxt[UNITS_MAX]
    cdef uint32_t prv[UNITS_MAX]
    cdef Py_ssize_t i, j, k, h
    cdef uint32_t best
    for i in range(m):
        nxt[i] = <uint32_t>(i + 1)
        prv[i] = <uint32_t>(i - 1)
        rank[i] = (vocab_rank(v, p + start[i], start[i + 2] - start[i]) if i + 1 < m
                   else NO_RANK)
    while True:
        best = fbe_min_u32(rank, m)
        if best == NO_RANK:
            break
        i = 0
        while rank[i] != best:
            i += 1
        j = nxt[i]
        k = nxt[j]
        token[i] = best
        rank[j] = NO_RANK
        nxt[i] = <uint32_t>k
        if k < m:
            prv[k] = <uint32_t>i
            rank[i] = vocab_rank(v, p + start[i], start[nxt[k]] - start[i])
        else:
            rank[i] = NO_RANK
        if i > 0:
            h = prv[i]
            rank[h] = vocab_rank(v, p + start[h], start[k] - start[h])
    i = 0
    while i < m:
        out.data[out.size] = token[i]
        out.size += 1
        i = nxt[i]
    return ERR_NONE


cdef inline Py_ssize_t token_bytes(const Vocab* v, const uint32_t* toks, Py_ssize_t count) noexcept nogil:
    cdef Py_ssize_t i, total = 0
    for i in range(count):
        total += <uint32_t>(v.rank_span[toks[i]] >> 32)
    return total


cdef int join_runs(const Vocab* v, const unsigned char* p, OutBuf* out, Py_ssize_t base,
                   Py_ssize_t left, Py_ssize_t left_end, Py_ssize_t* budget,
                   CacheEntry* cache, const Tuning* tuning) noexcept nogil:
    """out[base:base+left] encodes p[0:left_end]; out[base+left:] encodes the next run.
    Makes out[base:] the encoding of both (Corollary 1, junctions). Returns 0, or -1 to give up."""
    cdef Py_ssize_t right = out.size - base - left, k = 1, mr = 1, s, e, w
    cdef uint32_t* t = out.data + base
    cdef uint32_t tmp[JOIN_BYTES_MAX]
    cdef OutBuf o
    cdef Py_ssize_t err = 0
    cdef bint ok_left, ok_right
    if left == 0 or right == 0:
        return 0
    while True:
        # window: the last k tokens on the left and the first mr on the right
        s = left_end - token_bytes(v, t + left - k, k)
        e = left_end + token_bytes(v, t + left, mr)
        budget[0] -= e - s
        if budget[0] < 0 or e - s > JOIN_BYTES_MAX:
            return -1
        out_init(&o, tmp, JOIN_BYTES_MAX)
        if merge_cached(v, p + s, e - s, &o, &err, cache, tuning) != ERR_NONE:
            return -1
        w = o.size
        if w == k + mr and memcmp(tmp, t + left - k, w * sizeof(uint32_t)) == 0:
            return 0   # unchanged: the junction was compatible all along
        ok_left = k == left or pair_compatible(v, t[left - k - 1], tmp[0], cache, tuning)
        ok_right = mr == right or pair_compatible(v, tmp[w - 1], t[left + mr], cache, tuning)
        if ok_left and ok_right:
            # t[left-k : left+mr] becomes tmp[0:w]
            memmove(t + left - k + w, t + left + mr, (right - mr) * sizeof(uint32_t))
            memcpy(t + left - k, tmp, w * sizeof(uint32_t))
            out.size = base + left - k + w + right - mr
            return 0
        if not ok_left:
            k = min(2 * k, left)
        if not ok_right:
            mr = min(2 * mr, right)


cdef bint pair_compatible(const Vocab* v, uint32_t a, uint32_t b,
                          CacheEntry* cache, const Tuning* tuning) noexcept nogil:
    """enc(bytes(a) + bytes(b)) == [a, b]."""
    cdef unsigned char buf[JOIN_BYTES_MAX]
    cdef uint32_t toks[JOIN_BYTES_MAX]
    cdef OutBuf o
    cdef Py_ssize_t err = 0
    cdef uint64_t sa = v.rank_span[a], sb = v.rank_span[b]
    cdef uint32_t la = <uint32_t>(sa >> 32), lb = <uint32_t>(sb >> 32)
    if la + lb > JOIN_BYTES_MAX:
        return False    # treated as incompatible: only costs a wider re-encoding
    memcpy(buf, v.arena + <uint32_t>sa, la)
    memcpy(buf + la, v.arena + <uint32_t>sb, lb)
    out_init(&o, toks, JOIN_BYTES_MAX)
    if merge_cached(v, buf, la + lb, &o, &err, cache, tuning) != ERR_NONE:
        return False
    return o.size == 2 and toks[0] == a and toks[1] == b


cdef inline void push_wall(const Vocab* v, const unsigned char* p, Py_ssize_t q,
                           OutBuf* out) noexcept nogil:
    """enc() of a wall character of q = 2 or 3 bytes: its bytes, after the one merge
    (the lower-ranked pair) that can happen; a second would make it one token."""
    cdef uint32_t r1, r2
    cdef uint32_t* d = out.data + out.size
    if q == 2:
        d[0] = v.byte_rank[p[0]]
        d[1] = v.byte_rank[p[1]]
        out.size += 2
        return
    r1 = v.pair_rank2[p[0] | (<uint32_t>p[1] << 8)]
    r2 = v.pair_rank2[p[1] | (<uint32_t>p[2] << 8)]
    if r1 == NO_RANK and r2 == NO_RANK:
        d[0] = v.byte_rank[p[0]]
        d[1] = v.byte_rank[p[1]]
        d[2] = v.byte_rank[p[2]]
        out.size += 3
    elif r1 < r2:
        d[0] = r1
        d[1] = v.byte_rank[p[2]]
        out.size += 2
    else:
        d[0] = v.byte_rank[p[0]]
        d[1] = r2
        out.size += 2


cdef int encode_split(const Vocab* v, const unsigned char* p, const uint32_t* start,
                      const uint32_t* token, const unsigned char* clean, const uint32_t* cps,
                      unsigned char* split, Py_ssize_t m, OutBuf* out,
                      CacheEntry* cache, const Tuning* tuning) noexcept nogil:
    """Corollary 4 (split) for units [0, m): append enc() of each piece between boundaries that no
    token spans. Returns 0, or 1 with out unchanged when there is no such boundary, or
    -1 on error (out may hold part of the result: the caller drops it)."""
    cdef Py_ssize_t i, j, pieces = 1
    cdef Py_ssize_t err = 0
    for i in range(1, m):
        split[i] = no_token_spans(v, clean[i], cps[i - 1], cps[i])
        pieces += split[i]
    if pieces == 1:
        return 1
    split[m] = 1
    i = 0
    while i < m:
        j = i + 1
        while not split[j]:
            j += 1
        if j - i == 1 and token[i] != NO_RANK:
            out.data[out.size] = token[i]    # a character that is one token (room: n)
            out.size += 1
        elif merge_cached(v, p + start[i], start[j] - start[i], out, &err, cache, tuning) != ERR_NONE:
            return -1
        i = j
    return 0


cdef int bpe_by_chars(const Vocab* v, const unsigned char* p, Py_ssize_t n,
                      OutBuf* out, CacheEntry* cache, const Tuning* tuning) noexcept nogil:
    """enc(p[:n]) appended to out by the character rule; -1 (out unchanged) when the
    caller must merge from bytes instead."""
    cdef uint32_t start[UNITS_MAX + 1]
    cdef uint32_t token[UNITS_MAX]
    cdef unsigned char wall[UNITS_MAX + 1]    # wall[m] = 0: no unit past the end
    cdef unsigned char clean[UNITS_MAX + 1]   # clean[i]: the boundary before unit i
    cdef unsigned char joins[UNITS_MAX + 1]   # joins[i]: Corollary 2 (a) holds there
    cdef uint32_t m_plus_1[UNITS_MAX]         # M + 1 of good units (0: no merge)
    cdef uint32_t cps[UNITS_MAX]              # code point of each unit
    cdef unsigned char split[UNITS_MAX + 1]   # split[i]: Corollary 4 cuts before unit i
    cdef uint32_t cp
    cdef uint64_t info
    cdef Py_ssize_t base = out.size, pos = 0, q = 0, m = 0, i, j, done_end, left
    cdef Py_ssize_t budget = UNITS_BUDGET * n, err = 0, bad = 0, single = 0
    cdef bint seam_safe
    cdef int rc
    if out.cap < base + n + 1 and out_grow(out, base + n + 1) < 0:
        return -1
    # 1. characters -> units: start offset, token (NO_RANK unless one good token), wall
    while pos < n:
        cp = decode_char(p + pos, n - pos, &q)
        if cp == NO_RANK:
            return -1
        start[m] = <uint32_t>pos
        cps[m] = cp
        info = v.char_info[cp]
        token[m] = <uint32_t>info
        m_plus_1[m] = <uint32_t>(info >> 32)
        wall[m] = token[m] == NO_RANK and (info >> 32) == CHAR_WALL
        bad += token[m] == NO_RANK and not wall[m]
        single += q == 1
        m += 1
        pos += q
        if bad >= 2 and 4 * bad > m:
            return -1   # many characters that need merging from bytes
        if single >= 8 and 2 * single > m:
            return -1   # mostly ASCII: units are bytes anyway, and the heap scales better
    start[m] = <uint32_t>n
    wall[m] = 0
    clean[0] = 1
    clean[m] = 1
    for i in range(1, m):
        clean[i] = not cross_bit(v, p[start[i] - 1], p[start[i]])
        # between good units, a spanning token that ranks above both M is harmless
        joins[i] = clean[i] or (
            token[i] != NO_RANK and token[i - 1] != NO_RANK
            and v.cross_min[p[start[i] - 1] | (<uint32_t>p[start[i]] << 8)]
                >= max(m_plus_1[i], m_plus_1[i - 1]))
    # 2. Corollary 4 (split): cut where no token spans the boundary, and encode the pieces alone
    if v.bigram_bloom != NULL:
        rc = encode_split(v, p, start, token, clean, cps, split, m, out, cache, tuning)
        if rc == 0:
            return ERR_NONE
        if rc < 0:
            out.size = base
            return -1
    # 3. segments: runs of good units across clean boundaries (Corollary 2, characters), isolated walls
    #    (Corollary 3, walls), other characters alone from bytes; each joined to what came before
    #    by Corollary 1 (junctions) unless a wall makes the seam safe
    i = 0
    done_end = 0          # bytes of p already encoded into out[base:]
    while i < m:
        left = out.size - base
        j = i + 1
        if token[i] != NO_RANK:
            while j < m and token[j] != NO_RANK and joins[j]:
                j += 1
            merge_units(v, p, start + i, token + i, j - i, out)
        elif wall[i] and clean[i] and clean[i + 1]:
            push_wall(v, p + start[i], start[i + 1] - start[i], out)
        elif merge_cached(v, p + start[i], start[i + 1] - start[i], out, &err,
                          cache, tuning) != ERR_NONE:
            out.size = base
            return -1
        seam_safe = clean[i] and ((wall[i] and clean[i + 1])
                                  or (i > 0 and wall[i - 1] and clean[i - 1]))
        if not seam_safe and join_runs(v, p, out, base, left, done_end, &budget, cache, tuning) < 0:
            out.size = base
            return -1
        done_end = start[j]
        i = j
    return ERR_NONE


# --------------------------------------------------------------------------------------
# Testing hooks (under the GIL)
# --------------------------------------------------------------------------------------

cdef object chars_ids(const Vocab* v, bytes piece, const Tuning* tuning, Py_ssize_t n_shared):
    if v.char_info == NULL or not 1 <= len(piece) <= UNITS_MAX:
        return None
    cdef OutBuf out
    cdef int rc
    cdef Tuning knobs = tuning[0]     # a copy: set_tuning may run while the GIL is free
    out_init(&out, NULL, 0)
    cdef const unsigned char* p = <const unsigned char*>piece
    cdef Py_ssize_t n = len(piece)
    try:
        with nogil:
            rc = bpe_by_chars(v, p, n, &out, NULL, &knobs)
        if rc != ERR_NONE:
            return None
        return outbuf_to_list(&out, n_shared)
    finally:
        free(out.data)


cdef object split_points(const Vocab* v, bytes piece):
    if v.bigram_bloom == NULL:
        return None
    cdef const unsigned char* p = <const unsigned char*>piece
    cdef Py_ssize_t n = len(piece), pos = 0, q = 0
    cdef uint32_t cp, prev = NO_RANK
    cuts = []
    while pos < n:
        cp = decode_char(p + pos, n - pos, &q)
        if cp == NO_RANK:
            return None
        if pos > 0 and no_token_spans(v, not cross_bit(v, p[pos - 1], p[pos]), prev, cp):
            cuts.append(pos)
        prev = cp
        pos += q
    return cuts


cdef object bigram_filter(const Vocab* v, object a, object b):
    if v.bigram_bloom == NULL:
        return None
    return bool(bigram_may_join(v, ord(a), ord(b)))
