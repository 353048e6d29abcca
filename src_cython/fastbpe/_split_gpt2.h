/* GPT-2's window rules (also r50k's and p50k's pattern): fbpe_gpt2_starts, included by
 * _split_fill.h only.
 *
 *   '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s
 *
 * A window is t[base : base + 64], inside the segment, with a chunk starting at base.
 * Its chars are classified at once (fbpe_win_bytes: SSE2 or AVX2 compares; then a table
 * lookup per char of two bytes, bits 32 and 64 of fbpe_kind2 for \p{L} and \p{N}, or of
 * three bytes, fbpe_win_three), and every chunk start follows from bit masks of the
 * classes.
 *
 * The masks handle chars of one, two and three bytes, every one of them: each is L =
 * \p{L}, N = \p{N}, WS = \s or O = the rest ([^\s\p{L}\p{N}], marks \p{M} and lone
 * surrogates included), and nothing else matters here. Anything else (chars of four
 * bytes, a char cut by the window's end, bytes that are not UTF-8) makes the window end
 * FBPE_GPT2_MARGIN bytes before it: a chunk start at k, or its absence, depends on the
 * char before k, the char at k and the char after it only (a whitespace char at k is
 * the last of its run when the char after it is not whitespace), so on bytes up to
 * k + 5; no start is decided from a byte at or past the first unhandled one, nor past
 * the window's end.
 *
 * After changing the rules, run tools/fuzz_windows.py --pattern gpt2 for some minutes as
 * well as the tests.
 *
 * Why these are the chunk starts. A window starts at a chunk start, and no alternative
 * looks at a char before the place where its match starts (the only lookaround is
 * (?!\S), ahead), so a window splits as if it were the whole text. SP is the space
 * " " alone, the one char that " ?" takes; other whitespace is never a prefix.
 * - Contractions, '(?:[sdmt]|ll|ve|re): tried first wherever a chunk starts, and only
 *   there; case-sensitive, ASCII letters only, so two bytes after the apostrophe say
 *   it. An apostrophe starts a chunk exactly when any O char does (below): not after O
 *   (inside a run of O chars, which [^\s\p{L}\p{N}]++ takes whole, apostrophes
 *   included: "(('s" is "(('", "s"), not after SP (" 's" is " '", "s"). So after a
 *   letter, a digit, other whitespace, or at base ("x's": "x", "'s"; "don't": "don",
 *   "'t"; "\n's": "\n", "'s"). Its letters then start no chunk, and the char after
 *   them starts one, whatever it is ("'sa": "'s", "a"; "'s's": "'s", "'s").
 * - Runs of L, of N, of O: each of ?\p{L}++, ?\p{N}++, ?[^\s\p{L}\p{N}]++ takes a
 *   whole run (possessive, and digit runs are unbounded here), so a char of these
 *   classes starts a chunk exactly when the char before it is of another class and is
 *   not SP; after SP, the chunk starts at the SP, which " ?" takes. (A char before it
 *   that ends a contraction is a letter: the same rule.)
 * - Whitespace runs, from a to b (t[b] not whitespace). A non-whitespace chunk never
 *   ends in whitespace, so a starts a chunk. The alternatives before \s++$ do not match
 *   at a, unless the run is one SP followed by a char (then the chunk is SP and that
 *   char's run, as said). If the run reaches the end of the text, \s++$ takes it whole.
 *   Otherwise \s+(?!\S) takes a .. b-1 (the last char left out) when that is not empty,
 *   and the last char starts a chunk: as the SP prefix of what follows, or alone by \s
 *   (any other whitespace char), and then b starts a chunk too (the rule above: the char
 *   before b is not SP). No other char of the run starts a chunk.
 *   \s++$ never shows in a window: the window lies inside the segment, so a run that
 *   reaches the end of the text reaches the window's end at least, its last char is at
 *   byte 61 or later, beyond every start kept (fbpe_win_keep below), and the run's inner chars
 *   start no chunk either way. A run that reaches an unhandled byte or the window's end
 *   has its last char unknown (what follows may be whitespace), and that char lies
 *   within FBPE_GPT2_MARGIN bytes of it.
 */
#ifndef FASTBPE_SPLIT_GPT2_H
#define FASTBPE_SPLIT_GPT2_H

#define FBPE_GPT2_MARGIN 6    /* no start is kept closer to an unhandled byte or the end */

/* The decided chunk starts of t[base : base + 64] (all inside the segment), bit 0 set. */
static inline uint64_t fbpe_gpt2_starts(const unsigned char *t, Py_ssize_t base) {
    FbpeWinBytes b;
    uint64_t letter, digit, sp, wsa, apos, hi, b6, b5;
    uint64_t cont, lead2, lead3, ok2, ok3, m, lmb, nmb, wsmb;
    uint64_t cs, handled, L, N, WS, O, same, ap, s1 = 0, s2 = 0, wse, last, starts;
    uint64_t unhandled;
    FbpeWinThree th;
    fbpe_win_bytes(t + base, &b);
    letter = b.letter; digit = b.digit; sp = b.sp; wsa = b.wsa; apos = b.apos;
    hi = b.hi; b6 = b.b6; b5 = b.b5;
    cont = hi & ~b6;                                             /* 10xxxxxx */
    lead2 = hi & b6 & ~b5;                                       /* 110xxxxx */
    lead3 = FBPE_LEAD3(b);                                       /* 1110xxxx */
    /* 1. Two- and three-byte chars (all bytes inside the window): their class on all
       their bytes (in text of three-byte chars, this loop is most of the time). */
    ok2 = lead2 & (cont >> 1);
    ok3 = lead3 & (cont >> 1) & (cont >> 2);
    fbpe_win_two_lnw(t + base, ok2, &lmb, &nmb, &wsmb);
    fbpe_win_three(t + base, ok3, &th);
    lmb |= th.l;
    nmb |= th.n;
    wsmb |= th.ws;
    cs = ~cont;                           /* char starts */
    handled = ~hi | ok2 | (ok2 << 1) | ok3 | (ok3 << 1) | (ok3 << 2);
    unhandled = ~handled;
    L = letter | lmb;
    N = digit | nmb;
    WS = wsa | wsmb;
    O = handled & ~(L | N | WS);
    /* 2. Runs of L, N, O: their first char, unless SP comes before it. */
    same = (L & (L << 1)) | (N & (N << 1)) | (O & (O << 1));
    starts = 1 | (cs & ~WS & ~same & ~(sp << 1));
    /* 3. Whitespace runs: the first char, and the last one (its last byte: no
       whitespace byte after it; back to the start of its char, of 1, 2 or 3 bytes). */
    wse = WS & ~(WS >> 1);
    last = fbpe_win_char_first(wse, cs);
    starts |= (cs & WS & ~(WS << 1)) | last;
    /* 4. Contractions, at apostrophes that start a chunk (as O chars do; bits 62 and 63
       are past every start kept, and their two bytes after would be past the window). */
    ap = apos & ~(O << 1) & ~(sp << 1) & ((1ull << 62) - 1);
    for (m = ap; m; m &= m - 1) {         /* about one in a few hundred bytes */
        int i = __builtin_ctzll(m);
        unsigned c1 = t[base + i + 1], c2 = t[base + i + 2];
        if (c1 == 's' || c1 == 'd' || c1 == 'm' || c1 == 't')
            s1 |= 1ull << i;
        else if ((c1 == 'l' && c2 == 'l') || (c2 == 'e' && (c1 == 'v' || c1 == 'r')))
            s2 |= 1ull << i;
    }
    starts = (starts & ~((s1 << 1) | (s2 << 1) | (s2 << 2))) | (s1 << 2) | (s2 << 3);
    /* 5. Keep the starts that no unhandled byte (nor the window's end) can change:
       those at least FBPE_GPT2_MARGIN bytes before either. */
    return fbpe_win_keep(starts & cs, unhandled, FBPE_GPT2_MARGIN, 64 - FBPE_GPT2_MARGIN);
}

#endif
