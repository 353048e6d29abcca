/* cl100k's window rules: fbpe_cl100k_starts, included by _split_fill.h only.
 *
 *   '(?i:[sdmt]|ll|ve|re)            (1)     \s++$          (5)
 *  |[^\r\n\p{L}\p{N}]?+\p{L}++       (2)    |\s*[\r\n]      (6)
 *  |\p{N}{1,3}+                      (3)    |\s+(?!\S)      (7)
 *  | ?[^\s\p{L}\p{N}]++[\r\n]*+      (4)    |\s             (8)
 *
 * A window is t[base : base + 64], inside the segment, with a chunk starting at base.
 * Its bytes are classified at once (fbpe_win_bytes: SSE2 or AVX2 compares, then a table
 * lookup per char of two or three bytes), and every chunk start follows from bit masks
 * of the classes.
 *
 * The masks handle chars of one, two and three bytes. Anything else makes the window
 * end FBPE_MARGIN bytes before it, so that no start is decided from a char past the end
 * (a start depends on the char at it and the one after it, so on at most the five bytes
 * after it, all of a handled char's bytes being classified at once; an unhandled char
 * within three bytes after a start cuts it): chars of four bytes, or cut by the
 * window's end; numbers of two or three bytes, or four digits in a row (cl100k's; with
 * one digit a chunk every ASCII digit run is decided); an apostrophe that starts a chunk and
 * is followed by U+017F (the one char beyond ASCII that (?i) folds to a suffix letter);
 * whitespace runs with \r or \n, then other whitespace, then \r or \n again.
 *
 * After changing the rules, run tools/fuzz_windows.py --pattern cl100k for some minutes
 * as well as the tests.
 *
 * Why these are the chunk starts. L = \p{L} (letters; marks are not letters here, they
 * are O), N = digits, O = [^\s\p{L}\p{N}], CR = [\r\n], WS = \s, SP = " ", OWS = WS
 * but not SP or CR, P = [^\r\n\p{L}\p{N}] (O, SP or OWS). No alternative looks at a
 * char before the place where its match starts, and a window starts at a chunk start,
 * so a window splits as if it were the whole text. Every run below is maximal.
 * - Corollary W (the last char of a whitespace run starts a chunk, when it is not CR
 *   and a char that is not whitespace follows). A chunk that starts in the run before
 *   its last char c cannot be (2) or (4) (the char after its start is whitespace), nor
 *   (5) (the run does not reach the end); (6) ends after a CR char, so before c; (7)
 *   ends right before c. So no chunk crosses into c.
 * - Letter runs. \p{L}++ takes the whole run, and the char after it starts a chunk.
 *   The run's first char starts a chunk unless the char before it is a P char that
 *   starts a chunk: then (2) takes that char as the prefix, or (1) first a contraction.
 *   Such a P char is OWS or SP (the last of its run: corollary W), or an O char
 *   standing alone (no O char on either side) that no SP comes before (after SP, the
 *   SP's chunk is (4): " (" then the letters). An O char in a longer run never starts
 *   a chunk inside it: (4) from the run's start is possessive.
 * - Contractions. An apostrophe starts a chunk exactly when an O run starts with it and
 *   no SP comes before it (the rules for O runs). Then, if the next one or two bytes
 *   are a suffix, (1) takes it and the byte after it starts a chunk ("don't": "don",
 *   "'t"; "'sam": "'s", "am"); otherwise it is an O char like any other. An apostrophe
 *   that starts no chunk is inside its O run's chunk (" 's": " '", "s").
 * - Digits: \p{N}{1,3}+; a run of up to three is one chunk. No P char can prefix it.
 *   With digits == 1 (\p{N}, SPLIT_CL100K_DIGIT1) every digit is a chunk, and a run
 *   of any length is decided; no other rule looks at digits.
 * - O runs. (4) takes the run, with the SP before it if there is one (that SP is the
 *   last char of its whitespace run, so it starts the chunk), and the CR chars after
 *   it; the char after those starts a chunk. Without a SP before it the run's first
 *   char starts the chunk (which is (2)'s instead when it is a lone O char and a letter
 *   follows, or (1)'s for a contraction).
 * - Whitespace runs (without the CR chars that (4) took): their first char starts a
 *   chunk. (6) \s*[\r\n] takes the run up to its last CR char; of the rest, which has
 *   no CR char, (7) \s+(?!\S) takes all but the last char, which starts a chunk of its
 *   own: (8), or a prefix of a letter run, or (4)'s SP before O chars. (5) \s++$ would
 *   take a run that reaches the end of the segment: a window never decides the chars
 *   of such a run past its first, since the run then reaches the window's end too.
 */
#ifndef FASTBPE_SPLIT_CL100K_H
#define FASTBPE_SPLIT_CL100K_H

/* The decided chunk starts of t[base : base + 64] (all inside the segment), bit 0 set.
   digits: the longest digit run one chunk takes, 3 (cl100k) or 1 (\p{N}: Qwen's
   pattern after llama3_cut); a constant at each call, so each inlined copy keeps one. */
static inline uint64_t fbpe_cl100k_starts(const unsigned char *t, Py_ssize_t base, int digits) {
    FbpeWinBytes b;
    uint64_t tabs, cont, lead2, ok2, m, l2, n2, ws2, o2, ok3, ok3b, o3;
    FbpeWinThree th;
    uint64_t cs, one, L, N, O, OWS, WS, A, T, E0, absorbed, WSx, unhandled;
    uint64_t Ls, Os, Oe, single, singlep, spn, p1, pref, wse, last, starts;
    uint64_t ap, s1 = 0, s2 = 0, sfx, sfx_end;
    fbpe_win_bytes(t + base, &b);
    tabs = b.wsa & ~b.sp & ~b.crm;                               /* \t \v \f */
    cont = b.hi & ~b.b6;                                         /* 10xxxxxx */
    lead2 = b.hi & b.b6 & ~b.b5;                                 /* 110xxxxx */
    /* 1. Two-byte chars (second byte inside the window): their class on both bytes. */
    ok2 = lead2 & (cont >> 1) & ~(1ull << 63);
    fbpe_win_two_lnw(t + base, ok2, &l2, &n2, &ws2);
    o2 = (ok2 | (ok2 << 1)) & ~(l2 | n2 | ws2);   /* two-byte [^\s\p{L}\p{N}], marks too */
    /*    Three-byte chars (all bytes inside the window): their class on all three. */
    ok3 = FBPE_LEAD3(b) & (cont >> 1) & (cont >> 2) & ~(3ull << 62);
    ok3b = ok3 | (ok3 << 1) | (ok3 << 2);
    fbpe_win_three(t + base, ok3, &th);
    o3 = ok3b & ~(th.l | th.n | th.ws);
    cs = ~cont;                           /* char starts */
    one = ~b.hi;                          /* one-byte chars */
    L = b.letter | l2 | th.l;
    N = b.digit;
    OWS = tabs | ws2 | th.ws;
    WS = b.sp | b.crm | OWS;
    O = (one & ~(b.letter | b.digit | b.wsa)) | o2 | o3;
    /* 2. What the masks do not handle, from the first such byte on. */
    unhandled = (b.hi & ~(ok2 | (ok2 << 1))) | n2;
    if (digits != 1)
        unhandled |= N & (N << 1) & (N << 2) & (N << 3);      /* a fourth digit in a row */
    unhandled = (unhandled & ~ok3b) | th.n;       /* three-byte chars but numbers */
    /* other whitespace between CR chars of one run (fbpe_win_cr_runs) */
    unhandled = fbpe_win_cr_runs(WS, b.crm, unhandled);
    A = WS & ~b.crm;                      /* whitespace but CR chars */
    /* 3. O runs: their first chars, lone O chars, and the CR chars (4) takes after. */
    Os = O & ~(O << 1) & cs;              /* first char of a run of O chars */
    Oe = O & ~(O >> 1);                   /* last byte of it */
    single = Os & ((one & Oe) | (ok2 & (Oe >> 1)) | (ok3 & (Oe >> 2)));
    singlep = single & ~(b.sp << 1);      /* ... that starts a chunk */
    E0 = cs & ~O & (O << 1);              /* the char after a run of O chars */
    T = E0 & b.crm;
    absorbed = ((b.crm + T) ^ b.crm) & b.crm;
    WSx = WS & ~absorbed;
    /* 4. Contractions: (1) at an apostrophe that starts a chunk (it is ASCII, so the
       bytes after it are inside the window for bits below 62). */
    ap = b.apos & Os & ~(b.sp << 1) & ~(3ull << 62);
    for (m = ap; m; m &= m - 1) {         /* about one in a few hundred bytes */
        int i = __builtin_ctzll(m);
        const unsigned char *q = t + base + i;
        unsigned f1 = fbpe_fold_ascii[q[1] & 0x7F];
        unsigned f2 = fbpe_fold_ascii[q[2] & 0x7F];
        if (q[1] >= 0x80) {
            if (q[1] == 0xC5 && q[2] == 0xBF) unhandled |= 1ull << i;   /* U+017F */
        } else if (f1 == 's' || f1 == 't' || f1 == 'm' || f1 == 'd') {
            s1 |= 1ull << i;
        } else if (q[2] < 0x80 && ((f1 == 'l' && f2 == 'l') || ((f1 == 'r' || f1 == 'v') && f2 == 'e'))) {
            s2 |= 1ull << i;              /* no char beyond ASCII folds to l or e */
        }
    }
    sfx = (s1 << 1) | (s2 << 1) | (s2 << 2);        /* the suffix letters */
    sfx_end = (s1 << 2) | (s2 << 3);
    /* 5. Prefixes of letter runs: SP or OWS (the last of a whitespace run), or a lone O
       char that starts a chunk. */
    Ls = L & ~(L << 1) & cs;              /* first char of a letter run */
    spn = ((singlep & one) << 1) | ((singlep & ok2) << 2) | ((singlep & ok3) << 3);
    p1 = Ls & (((b.sp | OWS) << 1) | spn);                   /* letter runs with a prefix */
    pref = fbpe_win_char_first(p1 >> 1, cs);                 /* the prefix's first byte */
    /* 6. Last chars of whitespace runs (not CR). */
    wse = WSx & ~(WSx >> 1);
    last = fbpe_win_char_first(wse, cs) & ~b.crm;
    /* 7. All starts. */
    starts = 1
        | (Ls & ~p1) | pref                                  /* letter runs */
        | (cs & ~L & (L << 1))                               /* after a letter run */
        | (digits == 1 ? N : N & ~(N << 1))                  /* digit runs (or digits) */
        | (cs & ~N & (N << 1))                               /* after them */
        | (Os & ~(b.sp << 1))                                /* O runs without a SP */
        | (E0 & ~b.crm & ~p1)                                /* after them */
        | (cs & ~absorbed & (absorbed << 1))                 /* after their CR chars */
        | (WSx & ~(WSx << 1) & cs)                           /* whitespace runs */
        | (cs & A & (b.crm << 1))                            /* after (6)'s CR chars */
        | last                                               /* (7) leaves the last */
        | (cs & ~WSx & (WSx << 1) & ~p1 & ~(O & (b.sp << 1))); /* after a whitespace run */
    /* A contraction is one chunk, and a chunk starts after it. */
    starts = (starts & ~sfx) | sfx_end;
    /* 8. Keep the starts that no unhandled byte (nor the window's end) can change. */
    return fbpe_win_keep(starts & cs, unhandled, FBPE_MARGIN, 64 - 2 * FBPE_MARGIN);
}

#endif
