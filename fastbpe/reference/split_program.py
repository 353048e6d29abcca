"""Split programs: the GPT family of split regexes compiled to data a small matcher runs.

A model's pre-tokenizer is a regex such as Llama 3's
``(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|...``.
``compile_program`` turns such a pattern into a *program*: a list of branches, each a
sequence of items over *atoms* (the single-character classes the pattern names), and
``class_tables`` gives every code point its set of atoms. ``fastbpe._split_program``
runs programs natively; ``split`` below is the same matcher in Python, its twin.
A pattern the compiler cannot prove it handles raises ``Unsupported`` (callers then
stay on ``regex``: never wrong).

What the compiler accepts (everything else is refused, with the reason):

- a top-level alternation; a branch that is one unquantified group is replaced by the
  group's own branches (``A|(?:B|C)|D`` is ``A|B|C|D`` under leftmost-first);
- single-character atoms: a literal (escaped or not), a set ``[...]`` (not nested),
  ``\\p{..}``, ``\\P{..}``, ``\\s \\S \\d \\D \\w \\W``, ``\\r \\n \\t \\f \\v``, ``\\xhh``,
  ``\\uhhhh``, ``\\Uhhhhhhhh``; inside ``(?i:...)`` the atom is case-insensitive;
- quantifiers ``? * + {n} {n,} {n,m}``, greedy or possessive (``?+``, ``++``, ...), on an
  atom: an item RUN;
- an unquantified or ``?``-quantified group whose branches are strings of atoms (the
  contractions ``(?i:'s|'t|'re|'ve|'m|'ll|'d)``): an item LITS; an unquantified group
  of one branch is spliced in place;
- ``(?=X)`` / ``(?!X)`` with X one atom (``\\s+(?!\\S)``), and ``$``.

Refused: lazy quantifiers, capturing groups, backreferences, lookbehind, ``.``, ``^``,
``\\b`` and other anchors, global flags, quantified groups other than the above, a
branch that can match the empty string, and a branch whose backtracking is not
provably bounded (Corollary 3).

Why a program equals ``regex.finditer`` (the argument, as named corollaries):

Corollary 1 (class exactness). An atom's members are computed by ``regex`` itself: the
runs of ``atom+`` over a string holding every code point 0..0x10FFFF (lone surrogates
included). So a code point is in an atom iff ``regex`` matches it there; there is no
second Unicode table to drift. (Case-insensitive atoms use ``regex``'s default, simple
case folding, which maps one code point to one: ``(?i:s)`` is {s, S, U+017F}.) The
native programs take the *primitives* (``\\s``, a general category ``\\p{Lu}`` or a
one-letter class ``\\p{P}``) from the compiled tables instead (``primitive`` below:
``_split_program.table_primitive``), which ``tools/gen_unicode_tables.py`` reads out of
``regex`` and tests compare with it on every code point: the same Unicode version as
the hand-written splitters, decided once in ``reference.patterns``.

Corollary 2 (leftmost-first). For a sequence of items, ``regex``'s backtracking tries,
depth first: for a greedy RUN{lo,hi}, counts from the longest available down to lo; for
a possessive one, only the longest; for LITS, each alternative that matches, in order,
then (if optional) none, a possessive one only its first choice; an assertion is tried
once and consumes nothing. ``split`` and the native matcher enumerate the same
candidates in the same order and return the first complete match, so they return the
match ``regex`` returns at that position; branches are tried in pattern order, which is
leftmost-first alternation. No item looks behind its start, so a match at p depends
only on text[p:end] (``$`` and lookaheads see the segment end as ``regex`` does; ``$``
also matches before a final "\\n", as in ``regex`` without MULTILINE).

Corollary 3 (bounded work). Every item with unboundedly many candidates (a greedy run
without a maximum) must be followed by a *decisive* rest: nothing, or items that cannot
fail (min 0, not assertions), or one item that decides from O(1) characters (a run or
LITS with a minimum, or an assertion) followed by items that cannot fail. Each
candidate then costs O(1) to reject and the first accepted candidate completes the
match, so one attempt at p costs O(length of the class runs from p) times a constant
of the pattern. ``regex`` explores the same tree; the matcher never does more work.

Corollary 4 (tiling). tiktoken's ``find_iter`` drops text no branch matches; a split
that tiles its input is needed for the native chunk interface (every chunk starts
where the last one ended). The compiler proves tiling when every code point c is
*covered*: some branch matches at any position holding c, whatever follows: its
leading optional items can all be skipped (greedy ones by backtracking; a possessive
one only if c is not in its atom), and then a RUN with min 1 containing c is followed
only by items that cannot fail. A pattern that does not tile (DeepSeek's ``\\p{N}{1,3}``
split) still compiles; it runs natively only where unmatched text is kept as chunks
(``split(..., gaps=True)``, HF's Split with behaviour Isolated).

>>> prog = compile_program(r"\\p{L}+| ?\\p{N}{1,3}|\\s+(?!\\S)|\\s+|[^\\s\\p{L}\\p{N}]+")
>>> split(prog, "Hello  42000!")
['Hello', ' ', ' 420', '00', '!']
>>> prog.tiles
True
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import regex

from .patterns import compile_pattern

#: Item kinds (the native matcher uses the same numbers).
RUN, LITS, AHEAD, NOT_AHEAD, DOLLAR = range(5)
#: ``Item.hi`` for an unbounded repetition.
UNBOUNDED = -1
#: At most this many atoms (bits of a uint32 mask) and distinct atom sets (class ids).
MAX_ATOMS = 32
MAX_CLASSES = 256
#: At most this many branches (the native matcher indexes them with a byte).
MAX_BRANCHES = 255
#: Code points per block of the two-level class table.
BLOCK = 128


class Unsupported(ValueError):
    """The pattern is outside what the compiler can prove equal to ``regex``."""


@dataclass(frozen=True)
class Item:
    """One step of a branch.

    RUN: ``lo..hi`` chars of atom ``atom`` (``hi`` UNBOUNDED: no maximum);
    LITS: one of ``lits`` (tuples of atoms, one per char), optional when ``lo`` is 0;
    AHEAD / NOT_AHEAD: the next char is / is not in ``atom`` (end of text: not);
    DOLLAR: end of text, or before a final "\\n".
    """
    kind: int
    atom: int = -1
    lo: int = 1
    hi: int = 1
    possessive: bool = False
    lits: tuple = ()

    @property
    def never_fails(self) -> bool:
        """Consumes, and may consume nothing: a later failure is never its doing."""
        return self.kind in (RUN, LITS) and self.lo == 0

    @property
    def many_candidates(self) -> bool:
        """Backtracking may try unboundedly many ends (Corollary 3)."""
        return self.kind == RUN and self.hi == UNBOUNDED and not self.possessive


@dataclass(frozen=True)
class Program:
    """A compiled split pattern: see the module docstring."""
    pattern: str
    atoms: tuple  # regex text of each atom (a one-character class)
    branches: tuple  # tuples of Item
    tiles: bool  # Corollary 4 holds: every code point starts a match

    def first_masks(self) -> list[int]:
        """Per branch, the atoms its first consumed char may be in (a branch is tried
        at p only when the char at p has one of them).

        >>> compile_program(r"a?b|c").first_masks()
        [3, 4]
        """
        out = []
        for items in self.branches:
            mask = 0
            for it in items:
                if it.kind == RUN:
                    mask |= 1 << it.atom
                elif it.kind == LITS:
                    for lit in it.lits:
                        mask |= 1 << lit[0]
                if it.kind in (RUN, LITS) and it.lo >= 1:
                    break
            out.append(mask)
        return out


# ---------------------------------------------------------------------------------------
# Parsing: pattern text -> branches of nodes. A node is ("atom", text, q), ("group",
# branches, q), ("ahead"|"not_ahead", atom_text) or ("dollar",), q = (lo, hi, possessive).

_CLASS_ESCAPES = set("sSdDwW")
_CHAR_ESCAPES = {"r": "\\r", "n": "\\n", "t": "\\t", "f": "\\f", "v": "\\v"}
_HEX_LEN = {"x": 2, "u": 4, "U": 8}


class _Parser:
    def __init__(self, pattern: str):
        self.s = pattern
        self.i = 0

    def fail(self, what: str):
        raise Unsupported(f"split pattern {self.s!r}: {what} at offset {self.i}")

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def alternation(self, ci: bool) -> list:
        branches = [self.sequence(ci)]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.sequence(ci))
        return branches

    def sequence(self, ci: bool) -> list:
        nodes = []
        while self.i < len(self.s) and self.peek() not in "|)":
            c = self.peek()
            if c == "(":
                node = self.group(ci)
            elif c == "$":
                self.i += 1
                node = ("dollar",)
            elif c in "*+?{":
                self.fail("a quantifier with nothing to repeat")
            elif c in ".^":
                self.fail(f"{c!r} is not supported")
            else:
                node = ("atom", self.atom(ci), None)
            if node[0] in ("atom", "group"):
                node = (node[0], node[1], self.quantifier())
            nodes.append(node)
        return nodes

    def group(self, ci: bool):
        s = self.s
        if s.startswith("(?:", self.i):
            self.i += 3
        elif s.startswith("(?i:", self.i):
            self.i += 4
            ci = True
        elif s.startswith("(?=", self.i) or s.startswith("(?!", self.i):
            kind = "ahead" if s[self.i + 2] == "=" else "not_ahead"
            self.i += 3
            text = self.atom(ci)
            if self.peek() != ")":
                self.fail("a lookahead other than one character class")
            self.i += 1
            return (kind, text)
        else:
            self.fail("a group other than (?:...), (?i:...), (?=X), (?!X)")
        branches = self.alternation(ci)
        if self.peek() != ")":
            self.fail("an unclosed group")
        self.i += 1
        return ("group", branches)

    def atom(self, ci: bool) -> str:
        s, i = self.s, self.i
        c = self.peek()
        if c == "[":
            j = i + 1
            if j < len(s) and s[j] == "^":
                j += 1
            if j < len(s) and s[j] == "]":
                j += 1
            while j < len(s) and s[j] != "]":
                if s[j] == "[":
                    self.i = j
                    self.fail("a nested set or POSIX class")
                j += self._escape_len(j) if s[j] == "\\" else 1
            if j >= len(s):
                self.fail("an unclosed set")
            text = s[i:j + 1]
        elif c == "\\":
            text = s[i:i + self._escape_len(i)]
            e = text[1:2]
            if not (e in "pP" or e in _CLASS_ESCAPES or e in _CHAR_ESCAPES or e in _HEX_LEN
                    or not e.isalnum()):
                self.fail(f"the escape \\{e}")
        elif c in "()|":
            self.fail(f"unexpected {c!r}")
        else:
            self.i = i + 1
            return f"(?i:{regex.escape(c)})" if ci else regex.escape(c)
        self.i = i + len(text)
        return f"(?i:{text})" if ci else text

    def _escape_len(self, j: int) -> int:
        """Length of the escape at s[j] == "\\" (inside or outside a set)."""
        s = self.s
        e = s[j + 1:j + 2]
        if not e:
            self.i = j
            self.fail("a trailing backslash")
        if e in "pP":
            if s[j + 2:j + 3] == "{":
                k = s.find("}", j + 3)
                if k < 0:
                    self.i = j
                    self.fail("an unclosed \\p{")
                return k + 1 - j
            return 3
        if e in _HEX_LEN:
            return 2 + _HEX_LEN[e]
        if e.isdigit() or e == "N":
            self.i = j
            self.fail(f"the escape \\{e}")
        return 2

    def quantifier(self):
        c = self.peek()
        if c == "?":
            lo, hi, self.i = 0, 1, self.i + 1
        elif c == "*":
            lo, hi, self.i = 0, UNBOUNDED, self.i + 1
        elif c == "+":
            lo, hi, self.i = 1, UNBOUNDED, self.i + 1
        elif c == "{":
            m = regex.compile(r"\{(\d+)(?:(,)(\d*))?\}").match(self.s, self.i)
            if not m:
                self.fail("a '{' that is not a quantifier")
            lo = int(m.group(1))
            hi = lo if not m.group(2) else (int(m.group(3)) if m.group(3) else UNBOUNDED)
            if hi != UNBOUNDED and hi < lo:
                self.fail("a quantifier {n,m} with m < n")
            self.i = m.end()
        else:
            return None
        if self.peek() == "?":
            self.fail("a lazy quantifier")
        possessive = self.peek() == "+"
        if possessive:
            self.i += 1
        if self.peek() in ("*", "+", "?", "{"):
            self.fail("a repeated quantifier")
        return (lo, hi, possessive)


# ---------------------------------------------------------------------------------------
# Nodes -> items.

def _flatten_top(branches: list) -> list:
    """A top-level branch that is one unquantified group becomes the group's branches."""
    out = []
    for nodes in branches:
        if len(nodes) == 1 and nodes[0][0] == "group" and nodes[0][2] is None:
            out.extend(_flatten_top(nodes[0][1]))
        else:
            out.append(nodes)
    return out


class _Atoms:
    def __init__(self):
        self.texts: list[str] = []

    def __call__(self, text: str) -> int:
        if text not in self.texts:
            if len(self.texts) == MAX_ATOMS:
                raise Unsupported(f"more than {MAX_ATOMS} distinct character classes")
            self.texts.append(text)
        return self.texts.index(text)


def _items(nodes: list, atoms: _Atoms, pattern: str) -> list[Item]:
    items: list[Item] = []
    for node in nodes:
        kind = node[0]
        if kind == "atom":
            lo, hi, poss = node[2] or (1, 1, False)
            items.append(Item(RUN, atoms(node[1]), lo, hi, poss))
        elif kind in ("ahead", "not_ahead"):
            items.append(Item(AHEAD if kind == "ahead" else NOT_AHEAD, atoms(node[1])))
        elif kind == "dollar":
            items.append(Item(DOLLAR))
        else:
            branches, q = node[1], node[2]
            if q is None and len(branches) == 1:
                items.extend(_items(branches[0], atoms, pattern))  # (?:abc) is abc
                continue
            if not all(b and all(n[0] == "atom" and n[2] is None for n in b) for b in branches):
                raise Unsupported(f"split pattern {pattern!r}: a group of alternatives "
                                  "other than strings of single characters")
            lo, hi, poss = q or (1, 1, False)
            if hi != 1:
                raise Unsupported(f"split pattern {pattern!r}: a group repeated other "
                                  "than by '?'")
            lits = tuple(tuple(atoms(n[1]) for n in b) for b in branches)
            items.append(Item(LITS, lo=lo, hi=1, possessive=poss, lits=lits))
    return items


def _check_branch(items: list[Item], pattern: str) -> None:
    """Refuse empty-matching branches and unbounded backtracking (Corollary 3)."""
    where = f"split pattern {pattern!r}"
    if not any(it.kind in (RUN, LITS) and it.lo >= 1 for it in items):
        raise Unsupported(f"{where}: a branch that can match the empty string")
    for k, it in enumerate(items):
        if not it.many_candidates:
            continue
        rest = items[k + 1:]
        if rest and not rest[0].never_fails:
            rest = rest[1:]  # the one deciding item
        if not all(r.never_fails for r in rest):
            raise Unsupported(f"{where}: backtracking into an unbounded run whose rest "
                              "is not decided by its first item")


def _covers(items: tuple, class_atoms: int) -> bool:
    """Corollary 4: does the branch match at any position holding a char whose atom set
    is class_atoms, whatever follows?"""
    for k, it in enumerate(items):
        if it.never_fails:
            if it.possessive and it.kind == RUN and class_atoms >> it.atom & 1:
                return False  # takes the char and cannot give it back
            if it.possessive and it.kind == LITS:
                return False  # would need the following text
            continue
        return (it.kind == RUN and it.lo == 1 and bool(class_atoms >> it.atom & 1)
                and all(r.never_fails for r in items[k + 1:]))
    return False


@functools.lru_cache(maxsize=64)
def compile_program(pattern: str, primitive=None) -> Program:
    """The program of a split pattern, or ``Unsupported`` naming what is outside it.
    ``primitive``: where the atoms' primitives come from (``_atom_bits``).

    >>> [len(b) for b in compile_program(r"(?i:'s|'t)|\\p{L}+").branches]
    [2, 2, 1]
    >>> compile_program(r"\\p{L}+?")
    Traceback (most recent call last):
    ...
    fastbpe.reference.split_program.Unsupported: split pattern '\\\\p{L}+?': a lazy quantifier at offset 6
    """
    compile_pattern(pattern)  # TypeError / ValueError naming the pattern
    parser = _Parser(pattern)
    branches = parser.alternation(False)
    if parser.i != len(pattern):
        parser.fail("an unbalanced ')'")
    atoms = _Atoms()
    compiled = []
    for nodes in _flatten_top(branches):
        items = _items(nodes, atoms, pattern)
        _check_branch(items, pattern)
        compiled.append(tuple(items))
    if len(compiled) > MAX_BRANCHES:
        raise Unsupported(f"split pattern {pattern!r}: more than {MAX_BRANCHES} branches")
    _, _, class_atoms, _ = class_tables(tuple(atoms.texts), primitive)
    tiles = all(any(_covers(b, int(m)) for b in compiled) for m in class_atoms)
    return Program(pattern, tuple(atoms.texts), tuple(compiled), tiles)


@functools.lru_cache(maxsize=1)
def _every_code_point() -> str:
    return np.arange(0x110000, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")


#: the primitives: the atoms ``_set_members`` composes the others of
_PRIMITIVE = regex.compile(r"\\s|\\p\{[A-Za-z]\w*\}")


@functools.lru_cache(maxsize=256)
def _atom_bits(text: str, primitive=None) -> np.ndarray:
    """The code points one atom matches (by ``regex``, over all of them: Corollary 1),
    packed 8 a byte. Kept per atom, not per atom tuple: one load builds the tables of
    several programs and pairs that share atoms (DeepSeek V4's three Splits: 20 atom
    scans of 0x110000 code points became 11). A set of literal characters, ranges and
    properties is composed from its parts (``_set_members``): ``regex`` spends 10-50 ms
    on a scan of ``[A-Za-z]`` or ``[^\\r\\n\\p{L}\\p{P}\\p{S}]``, and the properties'
    own scans are shared by every atom that names them.

    ``primitive`` (None: ``regex``) gives a primitive's members, or None for one it
    does not hold (then ``regex`` scans it): the native programs pass the compiled
    tables' (``_split_program.table_primitive``), which spares a load the scans.

    >>> table = lambda text: np.arange(0x110000) < 3 if text == r"\\p{L}" else None
    >>> np.flatnonzero(_atom_members(r"[\\p{L}x]", table)).tolist()
    [0, 1, 2, 120]
    """
    members = None
    if primitive is not None and _PRIMITIVE.fullmatch(text):
        members = primitive(text)
    if members is None:
        members = _set_members(text, primitive)
    if members is None:
        members = np.zeros(0x110000, dtype=bool)
        for m in regex.finditer(f"(?:{text})+", _every_code_point()):
            members[m.start():m.end()] = True
    return np.packbits(members)


#: escapes that stand for one character inside or outside a set
_ONE_CHAR_ESCAPES = {"r": "\r", "n": "\n", "t": "\t", "f": "\f", "v": "\v"}


def _set_members(text: str, primitive=None) -> np.ndarray | None:
    r"""The code points of an atom that is a property (``\\p{L}``), ``\\s``, ``\\S``,
    one literal or escaped character, or a set (``[...]``, ``[^...]``) of literal or
    escaped characters, ranges of them, properties and ``\\s``: the union of its
    parts (each property and ``\\s`` an atom of its own, from ``primitive`` or scanned
    by ``regex`` once), complemented over every code point for ``^`` / ``\\S``; None
    for any other form (case-insensitive groups, other escapes, nested sets, set
    operations), which the caller scans whole. ``tests/test_hf_load_path.py`` checks it against ``regex`` on
    every code point.

    >>> m = _set_members("[^a-c\\p{N}]"); bool(m[ord("b")]), bool(m[ord("1")]), bool(m[ord("d")])
    (False, False, True)
    >>> _set_members("(?i:s)") is None
    True
    """
    if text == "\\S":
        return ~_atom_members("\\s", primitive)
    if text == "\\s" or text.startswith("\\p{"):
        return None           # a primitive: from the caller's source, else regex
    if not (text.startswith("[") and text.endswith("]")):
        char = _one_char(text)
        if char is None:
            return None
        members = np.zeros(0x110000, dtype=bool)
        members[ord(char)] = True
        return members
    body, negate = text[1:-1], text.startswith("[^")
    if negate:
        body = body[1:]
    if not body or any(op in body for op in ("&&", "--", "||", "~~")):
        return None
    members = np.zeros(0x110000, dtype=bool)
    i = 0
    while i < len(body):
        c = body[i]
        if c == "[" or c == "]":
            return None       # a nested set or a stray bracket: regex decides
        if c == "\\":
            if body.startswith("\\p{", i):
                end = body.find("}", i)
                name = body[i + 3:end] if end > 0 else ""
                if not name.isalnum():
                    return None
                members |= _atom_members(body[i:end + 1], primitive)
                i = end + 1
                continue
            if body.startswith("\\s", i):
                members |= _atom_members("\\s", primitive)
                i += 2
                continue
            char = _one_char(body[i:i + 2])
            if char is None:
                return None
            i += 2
        else:
            char, i = c, i + 1
        if i < len(body) - 1 and body[i] == "-":     # a range char-char
            hi_text = body[i + 1:i + 3] if body[i + 1] == "\\" else body[i + 1]
            hi = _one_char(hi_text) if len(hi_text) == 2 else hi_text
            if hi is None or hi in "[]" or ord(hi) < ord(char):
                return None
            members[ord(char):ord(hi) + 1] = True
            i += len(hi_text) + 1
            continue
        members[ord(char)] = True
    return ~members if negate else members


def _one_char(text: str) -> str | None:
    r"""The one character a literal (``a``) or an escaped character (``\\-``, ``\\r``)
    stands for, or None.

    >>> _one_char("\\r"), _one_char("\\["), _one_char("\\d"), _one_char(".")
    ('\r', '[', None, None)
    """
    if len(text) == 1 and text not in "\\[]().*+?{}|^$":
        return text
    if len(text) == 2 and text[0] == "\\":
        if text[1] in _ONE_CHAR_ESCAPES:
            return _ONE_CHAR_ESCAPES[text[1]]
        if not text[1].isalnum() and text[1].isascii():
            return text[1]
    return None


def _atom_members(text: str, primitive=None) -> np.ndarray:
    """``_atom_bits`` unpacked: a bool per code point."""
    return np.unpackbits(_atom_bits(text, primitive)).view(bool)


@functools.lru_cache(maxsize=64)
def class_tables(atoms: tuple, primitive=None) -> tuple:
    """Every code point's atom set, as (stage1, stage2, class_atoms, ascii_atoms).

    ``class_atoms[stage2[stage1[cp >> 7] * 128 + (cp & 127)]]`` is the bit set of the
    atoms cp is in (Corollary 1: computed by ``regex``); ``ascii_atoms`` is the same for
    0..127, one lookup. stage1 is uint16, stage2 uint8, the others uint32.
    ``primitive``: as in ``_atom_bits``.

    >>> s1, s2, cls, asc = class_tables((r"\\p{L}", r"\\s"))
    >>> int(asc[ord("a")]), int(asc[ord(" ")]), int(asc[ord("1")])
    (1, 2, 0)
    """
    # Each block of 128 code points as its atoms' packed bits side by side (16 bytes an
    # atom): distinct rows are distinct blocks of atom sets, so the blocks are found
    # without an array of every code point's set (9 such passes over 4.4 MB were ~20 ms
    # of DeepSeek V4's load). Numbered in order of first appearance, by a dict of their
    # bytes (np.unique over rows is ~50x slower), looked up only for a block unlike the
    # one before it (most repeat their neighbour: ~300 of 8,704); then the distinct atom
    # sets among those few blocks, sorted (not np.unique either: its first call imports
    # numpy.ma, ~20 ms of a fresh process's load).
    packed = np.stack([_atom_bits(text, primitive).reshape(-1, BLOCK // 8) for text in atoms], axis=1) \
        if atoms else np.zeros((0x110000 // BLOCK, 0, BLOCK // 8), dtype=np.uint8)
    rows = packed.reshape(len(packed), -1)
    changed = np.flatnonzero(np.concatenate(([True], (rows[1:] != rows[:-1]).any(axis=1))))
    seen: dict = {}
    firsts = []
    ids = [seen.setdefault(rows[i].tobytes(), len(seen)) for i in changed.tolist()]
    for i, idx in zip(changed.tolist(), ids):
        if idx == len(firsts):
            firsts.append(i)
    stage1 = np.repeat(np.array(ids, dtype=np.uint16), np.diff(changed, append=len(rows)))
    bits = np.unpackbits(packed[firsts], axis=2).astype(np.uint32)     # (block, atom, code point)
    blocks = np.bitwise_or.reduce(bits << np.arange(len(atoms), dtype=np.uint32)[:, None], axis=1)
    values = np.sort(blocks, axis=None)
    class_atoms = values[np.concatenate(([True], values[1:] != values[:-1]))]
    if len(class_atoms) > MAX_CLASSES:
        raise Unsupported(f"more than {MAX_CLASSES} distinct combinations of classes")
    stage2 = np.searchsorted(class_atoms, blocks).astype(np.uint8).reshape(-1)
    return stage1, stage2, class_atoms.astype(np.uint32), np.ascontiguousarray(blocks[stage1[0]])


# ---------------------------------------------------------------------------------------
# The matcher (the native one in _split_program.pyx is its twin).

def _match(items: tuple, k: int, sets: list, text: str, p: int) -> int:
    """End of the first match of items[k:] at p in leftmost-first order, or -1."""
    if k == len(items):
        return p
    it, n = items[k], len(text)
    if it.kind == RUN:
        q = p
        while q < n and (it.hi == UNBOUNDED or q - p < it.hi) and sets[q] >> it.atom & 1:
            q += 1
        if q - p < it.lo:
            return -1
        for e in ([q] if it.possessive else range(q, p + it.lo - 1, -1)):
            r = _match(items, k + 1, sets, text, e)
            if r >= 0:
                return r
        return -1
    if it.kind == LITS:
        ends = [p + len(lit) for lit in it.lits
                if p + len(lit) <= n and all(sets[p + j] >> a & 1 for j, a in enumerate(lit))]
        if it.lo == 0:
            ends.append(p)
        for e in ends[:1] if it.possessive else ends:
            r = _match(items, k + 1, sets, text, e)
            if r >= 0:
                return r
        return -1
    if it.kind == DOLLAR:
        ok = p == n or (p == n - 1 and text[p] == "\n")
    else:
        ok = (p < n and bool(sets[p] >> it.atom & 1)) == (it.kind == AHEAD)
    return _match(items, k + 1, sets, text, p) if ok else -1


def chunk_end(prog: Program, sets: list, text: str, start: int) -> int:
    """End of the chunk at start: a match there, else the gap up to the next match
    (only a pattern that does not tile leaves gaps)."""
    firsts = prog.first_masks()
    for q in range(start, len(text)):
        for items, first in zip(prog.branches, firsts):
            if sets[q] & first:
                r = _match(items, 0, sets, text, q)
                if r > q:
                    return r if q == start else q
    return len(text)


def atom_sets(prog: Program, text: str) -> list[int]:
    """Each char's atom set (from the tables, as the native matcher reads them)."""
    stage1, stage2, class_atoms, _ = class_tables(prog.atoms)
    return [int(class_atoms[stage2[int(stage1[ord(c) >> 7]) * BLOCK + (ord(c) & 127)]])
            for c in text]


def split(prog: Program, text: str, gaps: bool = False) -> list[str]:
    """The chunks of text: ``regex.findall(prog.pattern, text)`` when the program
    tiles; with ``gaps`` the text between matches is a chunk too (HF's Isolated).

    >>> split(compile_program(r"\\p{N}{1,3}"), "ab12345", gaps=True)
    ['ab', '123', '45']
    """
    if not (prog.tiles or gaps):
        raise ValueError(f"split pattern {prog.pattern!r} does not match every "
                         "character; split(..., gaps=True) keeps the text between matches")
    sets = atom_sets(prog, text)
    out, p = [], 0
    while p < len(text):
        e = chunk_end(prog, sets, text, p)
        out.append(text[p:e])
        p = e
    return out


# ---------------------------------------------------------------------------------------
# Sequences of splits (HF's Sequence of Split pre-tokenizers, behaviour Isolated): each
# piece of one level is split by the next; unmatched text is kept (gaps).

def split_isolated(pattern: str, text: str) -> list[str]:
    """``regex.finditer``'s matches and the text between them (HF's Split, Isolated).

    >>> split_isolated(r"\\p{N}+", "ab12c")
    ['ab', '12', 'c']
    """
    out, last = [], 0
    for m in regex.finditer(pattern, text):
        if m.start() > last:
            out.append(text[last:m.start()])
        out.append(m.group())
        last = m.end()
    if last < len(text):
        out.append(text[last:])
    return out


def split_sequence(patterns: tuple, text: str) -> list[str]:
    """The definition: level by level, each piece split by the next pattern with its
    gaps kept (``regex`` per piece, as HF runs each Split on each piece).

    >>> split_sequence((r"\\p{N}{1,3}", r"\\p{L}+|\\s+"), "ab 12345c")
    ['ab', ' ', '123', '45', 'c']
    """
    pieces = [text]
    for pattern in patterns:
        pieces = [chunk for piece in pieces for chunk in split_isolated(pattern, piece)]
    return pieces


def outer_level(prog: Program) -> tuple[int, int]:
    """(atom, k) when prog is one run ``X+`` (k = UNBOUNDED) or ``X{1,k}``: a level
    whose piece around a position is found from that position alone (Corollary 5).

    >>> outer_level(compile_program(r"\\p{N}{1,3}"))
    (0, 3)
    """
    if len(prog.branches) == 1 and len(prog.branches[0]) == 1:
        it = prog.branches[0][0]
        if it.kind == RUN and it.lo == 1:
            return it.atom, it.hi
    raise Unsupported(f"split pattern {prog.pattern!r}: a level before the last of a "
                      "sequence must be one run X+ or X{1,k}")


def _never_inside(outer: Program, inner: Program, primitive=None) -> bool:
    """Can no branch of inner match inside a string of outer's run atom? (each branch
    needs a char of an atom that shares no code point with it)"""
    x = outer.atoms[0]
    for items in inner.branches:
        needed = [inner.atoms[it.atom] for it in items if it.kind == RUN and it.lo >= 1]
        # disjoint: no code point in both (what class_tables((x, a)) would show as a
        # class with both bits)
        if not any(not (_atom_bits(x, primitive) & _atom_bits(a, primitive)).any() for a in needed):
            return False
    return True


@functools.lru_cache(maxsize=64)
def compile_sequence(patterns: tuple, primitive=None) -> tuple:
    """The programs of a sequence of Isolated splits that runs natively from any chunk
    start alone, or ``Unsupported``.

    Corollary 5 (sequences). Let every level but the last be ``X+`` or ``X{1,k}``. A
    final chunk starting at p lies in one piece of each level. For ``X+`` that piece,
    from p on, is the rest of the run of X chars (p in X) or of non-X chars (p not in
    X): its end is found from p alone. For ``X{1,k}`` the same holds when p starts a
    group of k: true when k is 1, and true when no later level can match inside a string
    of X chars (each of its branches needs an atom disjoint from X), since then every
    group is one final chunk. The last level then runs from p to the innermost end (its
    ``$`` and lookaheads see the piece end, as ``regex`` on the piece does).

    >>> [p.pattern for p in compile_sequence((r"\\p{N}{1,3}", r"\\p{L}+|\\s+"))]
    ['\\\\p{N}{1,3}', '\\\\p{L}+|\\\\s+']
    """
    if not isinstance(patterns, tuple) or not patterns or \
            not all(isinstance(p, str) for p in patterns):
        raise TypeError("patterns must be a non-empty tuple of str")
    progs = tuple(compile_program(p, primitive) for p in patterns)
    for k, prog in enumerate(progs[:-1]):
        _, hi = outer_level(prog)
        if hi not in (1, UNBOUNDED) and not all(_never_inside(prog, q, primitive) for q in progs[k + 1:]):
            raise Unsupported(f"split pattern {prog.pattern!r}: a later split may match "
                              "inside its groups")
    return progs
