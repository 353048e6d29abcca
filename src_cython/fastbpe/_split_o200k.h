/* o200k's window rules: fbpe_o200k_starts, included by _split_fill.h only.
 *
 * A window is t[base : base + 64], inside the segment, with a chunk starting at base.
 * Its chars are classified at once (fbpe_win_bytes: SSE2 or AVX2 compares, then a table
 * lookup per char of two or three bytes), and every chunk start follows from bit masks
 * of the classes.
 *
 * The masks handle chars of one, two and three bytes. Anything else makes the window
 * end FBPE_MARGIN bytes before it, so that no start is decided from a char past the end
 * (a start depends on the char at it and the one after it, all of a handled char's
 * bytes being classified at once): chars of four bytes, or cut by the window's end;
 * letters that are both U and W (Lm, Lo, M); numbers of two or three bytes, or four
 * digits in a row; an apostrophe after a letter that is followed by a byte that is not ASCII, or
 * that follows a contraction suffix; "/" after \r or \n; whitespace runs with \r or \n,
 * then other whitespace, then \r or \n again.
 *
 * After changing the rules, run tools/fuzz_windows.py --pattern o200k for some minutes
 * as well as the tests: it found the one rule above that reaches further than two bytes (the
 * whitespace after a CR char, whose start depends on where its run ends).
 *
 * Why these are the chunk starts (alternatives (1)-(7) as numbered in _pretokenize.pyx;
 * W, U as there, PU = U but not W; O = [^\s\p{L}\p{N}], CR = [\r\n], WS = \s). A
 * window starts at a chunk start, and no alternative looks at a char before the place
 * where its match starts, so a window splits as if it were the whole text.
 * - Letters (W or PU). A run of letters is cut where PU follows W: (1) U*W+ takes the
 *   PU chars, then the W chars, and stops at the first char that is not W; if no W
 *   char follows the PU chars, (1) fails and (2) U+W* takes them alone.
 * - After the run, the suffix (?i:'s|'t|'re|'ve|'m|'ll|'d) belongs to its chunk, and
 *   the char after it starts a chunk, a letter too ("Ankara'da": "Ankara'd", "a").
 * - A run of letters starts its chunk, unless the char before it is a prefix
 *   [^\r\n\p{L}\p{N}] that starts a chunk: a space or other whitespace that is not CR
 *   (the last char of its whitespace run: see below), or an O char standing alone (no
 *   O char on either side) that no space comes before (" (" would be (4)'s). The chunk
 *   then starts at that char, and (1) or (2) take it as the prefix.
 * - Digits: \p{N}{1,3}; a run of up to three is one chunk.
 * - A run of O chars is one chunk, (4), with the space before it if there is one (that
 *   space is the last char of its whitespace run) and the CR chars after it ([\r\n/]*;
 *   "/" is O already).
 * - Whitespace runs (without those CR chars): (5) \s*[\r\n]+ takes the run up to its
 *   last CR char; of the rest, (6) \s+(?!\S) takes all but the last char, which starts
 *   a chunk of its own: (7), or a prefix of a letter run, or (4)'s space before O chars.
 */
#ifndef FASTBPE_SPLIT_O200K_H
#define FASTBPE_SPLIT_O200K_H

/* The decided chunk starts of t[base : base + 64] (all inside the segment), bit 0 set. */
static inline uint64_t fbpe_o200k_starts(const unsigned char *t, Py_ssize_t base) {
    FbpeWinBytes b;
    uint64_t letter, digit, sp, crm, wsa, apos, slash, hi, b6, b5, lower, upper, tabs, lead2, cont;
    uint64_t ap, s1 = 0, s2 = 0, sfx, sfx_end;
    uint64_t ok2, m, w2 = 0, pu2 = 0, o2 = 0, ows2 = 0, odd2 = 0, ok3, ok3b;
    FbpeWinThree th;
    uint64_t cs, one, W, PU, L, N, O, OWS, WS, A, T, E0, absorbed, WSx, unhandled;
    uint64_t Ls, Os, Oe, single, singlep, spn, p1, pref, wse, last, starts;
    fbpe_win_bytes(t + base, &b);
    letter = b.letter; digit = b.digit; sp = b.sp; crm = b.crm; wsa = b.wsa;
    apos = b.apos; slash = b.slash; hi = b.hi; b6 = b.b6; b5 = b.b5;
    lower = letter & b5;
    upper = letter & ~b5;
    tabs = wsa & ~sp & ~crm;                                     /* \t \v \f */
    cont = hi & ~b6;                                             /* 10xxxxxx */
    lead2 = hi & b6 & ~b5;                                       /* 110xxxxx */
    /* 1. Two-byte chars (second byte inside the window): their class on both bytes. */
    ok2 = lead2 & (cont >> 1) & ~(1ull << 63);
    for (m = ok2; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        const unsigned char *q = t + base + i;
        unsigned c = fbpe_kind2[((q[0] & 0x1Fu) << 6) | (q[1] & 0x3Fu)];
        uint64_t two = 3ull << i;
        w2 |= two * (c & 1);
        pu2 |= two * ((c >> 1) & 1);
        o2 |= two * ((c >> 2) & 1);
        ows2 |= two * ((c >> 3) & 1);
        odd2 |= two * ((c >> 4) & 1);
    }
    /*    Three-byte chars (all bytes inside the window): their class on all three. */
    ok3 = FBPE_LEAD3(b) & (cont >> 1) & (cont >> 2) & ~(3ull << 62);
    ok3b = ok3 | (ok3 << 1) | (ok3 << 2);
    fbpe_win_three(t + base, ok3, &th);
    cs = ~cont;                           /* char starts */
    one = ~hi;                            /* one-byte chars */
    W = lower | w2 | (th.w & ~th.u);
    PU = upper | pu2 | (th.u & ~th.w);
    L = W | PU;
    N = digit;
    OWS = tabs | ows2 | th.ws;
    WS = sp | crm | OWS;
    O = (one & ~(lower | upper | digit | sp | crm | tabs)) | o2
      | (ok3b & ~(th.l | th.n | th.ws | th.u | th.w));
    /* 2. What the masks do not handle, from the first such byte on. */
    unhandled = (hi & ~(ok2 | (ok2 << 1))) | odd2
              | (N & (N << 1) & (N << 2) & (N << 3))          /* a fourth digit in a row */
              | (slash & (crm << 1));                         /* [\r\n/]* after \r, \n */
    /* three-byte chars but numbers and letters that are both U and W (as odd2) */
    unhandled = (unhandled & ~ok3b) | th.n | (th.u & th.w);
    /* other whitespace between CR chars of one run (fbpe_win_cr_runs) */
    unhandled = fbpe_win_cr_runs(WS, crm, unhandled);
    A = WS & ~crm;                      /* whitespace but CR chars */
    /* The suffix (?i:'s|'t|'re|'ve|'m|'ll|'d) after a letter run (ap: its apostrophe;
       2 or 3 bytes). An apostrophe right after a suffix is left to the scalar splitter:
       that one starts a new chunk as a prefix, not as a suffix. A letter after the
       apostrophe that is not ASCII (say U+017F, which folds to s) is unhandled too. */
    ap = apos & (L << 1) & ~(1ull << 63) & ~(1ull << 62);
    for (m = ap; m; m &= m - 1) {         /* about one in a few hundred bytes */
        int i = __builtin_ctzll(m);
        unsigned f1 = fbpe_fold_ascii[t[base + i + 1] & 0x7F];
        unsigned f2 = fbpe_fold_ascii[t[base + i + 2] & 0x7F];
        if (f1 == 's' || f1 == 't' || f1 == 'm' || f1 == 'd')
            s1 |= 1ull << i;
        else if ((f1 == 'l' && f2 == 'l') || ((f1 == 'r' || f1 == 'v') && f2 == 'e'))
            s2 |= 1ull << i;
    }
    /* a suffix letter that is not ASCII (0x80 and up folded above) is unhandled */
    s1 &= ~(hi >> 1);
    s2 &= ~(hi >> 1) & ~(hi >> 2);
    sfx = s1 | (s1 << 1) | s2 | (s2 << 1) | (s2 << 2);
    sfx_end = (s1 << 2) | (s2 << 3);
    unhandled |= (sfx_end & apos) | (ap & (hi >> 1));
    /* 3. CR chars that (4) takes after a run of O chars; the rest of WS forms runs. */
    E0 = cs & ~O & (O << 1);              /* the char after a run of O chars */
    T = E0 & crm;
    absorbed = ((crm + T) ^ crm) & crm;
    WSx = WS & ~absorbed;
    /* 4. Prefixes of letter runs. */
    Ls = L & ~(L << 1) & cs;              /* first char of a letter run */
    Os = O & ~(O << 1) & cs;              /* first char of a run of O chars */
    Oe = O & ~(O >> 1);                   /* last byte of it */
    single = Os & ((one & Oe) | (ok2 & (Oe >> 1)) | (ok3 & (Oe >> 2)));
    singlep = single & ~(sp << 1);
    spn = ((singlep & one) << 1) | ((singlep & ok2) << 2) | ((singlep & ok3) << 3);
    p1 = Ls & (((sp | OWS) << 1) | spn);  /* letter runs with a prefix */
    pref = fbpe_win_char_first(p1 >> 1, cs);                 /* the prefix's first byte */
    /* 5. Last chars of whitespace runs (not CR). */
    wse = WSx & ~(WSx >> 1);
    last = fbpe_win_char_first(wse, cs) & ~crm;
    /* 6. All starts. */
    starts = 1
        | (Ls & ~p1) | pref                                  /* letter runs */
        | (PU & (W << 1) & cs)                               /* PU after W */
        | (cs & ~L & (L << 1))                               /* after a letter run */
        | (N & ~(N << 1)) | (cs & ~N & (N << 1))             /* digit runs */
        | (Os & ~(sp << 1))                                  /* O runs without a space */
        | (E0 & ~crm & ~p1)                                  /* after them */
        | (cs & ~absorbed & (absorbed << 1))                 /* after their CR chars */
        | (WSx & ~(WSx << 1) & cs)                           /* whitespace runs */
        | (cs & A & (crm << 1))                              /* after (5)'s CR chars */
        | last                                               /* (6) leaves the last */
        | (cs & ~WSx & (WSx << 1) & ~p1 & ~(O & (sp << 1))); /* after a whitespace run */
    /* The suffix is part of its letter run's chunk, and a chunk starts after it. */
    starts = (starts & ~sfx) | sfx_end;
    /* 7. Keep the starts that no unhandled byte (nor the window's end) can change. */
    return fbpe_win_keep(starts & cs, unhandled, FBPE_MARGIN, 64 - 2 * FBPE_MARGIN);
}

#endif
