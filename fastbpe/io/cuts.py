"""Cutters: where a long document may be handed on in pieces (``reference.documents``'s
``bpe_cut`` and ``wordpiece_cut``, found with byte regexes over a window).

A cutter's ``find(data, lo, hi)`` is the largest cut ``i`` with ``lo <= i <= hi``, and
``find_first(data, lo, hi)`` the smallest, or -1; both scan only ``data[lo-2:hi+1]``
(plus a special token's length), so a reader that moves ``lo`` on never rescans.

>>> cut = BPECut()
>>> cut.find(b"Hi, it's 2", 1, 9), cut.find_first(b"Hi, it's 2", 1, 9)
(8, 2)
"""
from __future__ import annotations

import re

from ..reference import documents as spec

# Corollary 1: an ASCII letter, then an ASCII byte that is no letter and not "'";
# Corollary 2: a plain byte, "\n", then a plain byte other than "/". The match ends at the cut.
_BPE = re.compile(rb"[A-Za-z](?=[\x00-\x26\x28-\x40\x5b-\x60\x7b-\x7f])|[\x21-\x7e]\n(?=[\x21-\x2e\x30-\x7e])")
# Corollary 4: the cut is before an ASCII space, tab, "\r" or "\n".
_WORDPIECE = re.compile(rb"[\s\S](?=[ \t\r\n])")

_WINDOW = 1 << 16


class _Cutter:
    regex: re.Pattern

    def __init__(self, specials=()):
        self.specials = sorted({s.encode("utf-8") if isinstance(s, str) else bytes(s) for s in specials if s},
                               key=len, reverse=True)
        self.margin = max((len(s) for s in self.specials), default=1)

    def _ok(self, data, i: int) -> bool:
        return not self.specials or not spec._spans_special(bytes(data[max(0, i - self.margin): i + self.margin]),
                                                           min(i, self.margin), self.specials)

    def find(self, data, lo: int, hi: int) -> int:
        lo = max(lo, 1)
        hi = min(hi, len(data) - 1)
        top, window = hi, 512
        while top >= lo:
            bottom = max(lo, top - window)
            found = [m.end() for m in self.regex.finditer(data, max(bottom - 2, 0), top + 1)]
            # the candidates from the top down: the special-token check only where needed
            for i in reversed(found):
                if bottom <= i <= top and self._ok(data, i):
                    return i
            top = bottom - 1
            window = min(window * 4, _WINDOW)
        return -1

    def find_first(self, data, lo: int, hi: int) -> int:
        lo = max(lo, 1)
        hi = min(hi, len(data) - 1)
        for m in self.regex.finditer(data, max(lo - 2, 0), hi + 1):
            i = m.end()
            if lo <= i <= hi and self._ok(data, i):
                return i
        return -1


class BPECut(_Cutter):
    """Cuts for the built-in byte-level patterns (gpt2, cl100k, o200k), never inside one
    of ``specials``."""

    regex = _BPE


class WordPieceCut(_Cutter):
    """Cuts for BERT's WordPiece, never inside one of ``specials``."""

    regex = _WORDPIECE
