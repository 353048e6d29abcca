"""Hugging Face ``tokenizers``' BPE pipeline, the plain way: the specification fastbpe's
``HFEncoding`` must match, id for id (``tests/test_reference_hf.py`` compares each step
with ``tokenizers`` itself).

HF encodes a text in five steps; each has its functions here, taking the component's
JSON object as ``tokenizer.json`` holds it (``fastbpe.formats.hf_pipeline`` checks the
objects and refuses what is not implemented here, naming the JSON path):

1. **Added tokens** (``split_added``): the added tokens with ``normalized: false`` are
   cut out of the raw text first, leftmost-longest; the rest is normalized piece by
   piece; then those with ``normalized: true`` are cut out of the normalized pieces.
   ``single_word`` skips a match with a word character (``\\w``) right before or after
   it; ``lstrip`` / ``rstrip`` make the match swallow the whitespace before / after it.
2. **Normalizer** (``normalize``): NFC, NFD, NFKC, NFKD, Lowercase, Strip, Replace,
   Prepend, BertNormalizer (``reference.wordpiece.normalize``), Sequence.
3. **Pre-tokenizer** (``pre_tokenize``): Split, ByteLevel, Digits, Punctuation,
   Whitespace, WhitespaceSplit, Sequence; each step splits every piece further.
4. **Model** (``bpe_word``): the BPE merge list, as HF runs it.
5. **Post-processor** (``post_process``), only when the caller asks for special tokens:
   TemplateProcessing, Bert, Roberta, ByteLevel (ids unchanged), Sequence.

``decode`` runs the decoder (ByteLevel, Replace, Strip, Fuse, ByteFallback, Sequence) on
the tokens' strings, dropping special added tokens unless asked to keep them.

Decisions (written once, here):

* **The merge rule.** A word starts as its characters (each with
  ``continuing_subword_prefix`` when not first, ``end_of_word_suffix`` when last) looked
  up in the vocabulary; then the adjacent pair that comes first in the merge list is
  merged, leftmost among equal ones, until no adjacent pair is in the list. Rank =
  position in ``model.merges`` (a pair listed twice takes its last position, as HF's
  map keeps the last). A token that no merge builds is unreachable from text, even when
  a word equals it, unless ``ignore_merges`` is true: then a word that is a token is
  taken whole first (tiktoken's rule). This is not tiktoken's rank rule: tiktoken merges
  any adjacent pair whose bytes are a token, HF only the listed pairs.
* **Unknown characters.** A character not in the vocabulary becomes its ``<0xXX>``
  byte tokens with ``byte_fallback`` (when all exist), else ``unk_token`` (consecutive
  ones fused into one with ``fuse_unk``), else it is dropped, as HF drops it.
* **Characters.** ``Lowercase`` maps each character alone (no final-sigma rule, as
  Rust's per-character ``to_lowercase``); ``Strip`` and the whitespace tests use Unicode
  ``White_Space``.
* **Unicode versions of the normalizers.** HF runs NFC, NFD, NFKC and NFKD with the
  Rust crate ``unicode-normalization-alignments`` 0.1.12 (tokenizers 0.22), whose tables
  are **Unicode 9.0**; Python's ``unicodedata`` has its build's version (14.0 in 3.11,
  15.0 in 3.12, ...). Normalization data never changes for an assigned character (UAX
  #15's stability policy: combining classes, decompositions and composition exclusions
  are fixed, and a new composite of old characters is always excluded), so the two
  differ only on characters assigned after 9.0 that ``unicodedata`` gives a combining
  class, a decomposition or a part in a composition (173 in Unicode 14.0, in 43 ranges:
  U+1DF6..U+1DFA, U+1ABF..U+1ACE, ...): to HF each is an unassigned starter that
  composes with nothing, so ``"a\\u1df6\\u0301"`` stays as it is, where ``unicodedata``
  reorders and composes it to ``"\\xe1\\u1df6"``. Such a character (and every code point
  unassigned in the table's Unicode 14.0, so a newer Python changes nothing) is
  *frozen* (``is_frozen``): ``unicode_normalize`` cuts the text at each one, keeps it,
  and normalizes the pieces between with ``unicodedata``, which then agrees with HF
  (*Corollary F*: an unassigned starter is a normalization boundary before and after
  it in all four forms, as it decomposes, reorders and composes with nothing). The
  frozen code points and the NFC classes are generated data (``_nfc_table``, made by
  ``tools/gen_nfc_table.py`` from ``unicodedata`` and HF's normalizer; tests check
  both against them for every code point).
* **Regexes** are run by the ``regex`` module; HF runs Oniguruma. They agree on the
  patterns open models use (``fastbpe.formats.hf_bpe`` maps the one known difference,
  possessive ``{1,3}+``).
"""
from __future__ import annotations

import bisect
import functools
import unicodedata

import regex

from .wordpiece import normalize as bert_normalize

#: Unicode White_Space (Rust's ``char::is_whitespace``).
WHITE_SPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" + "".join(map(chr, range(0x2000, 0x200B))))


# --------------------------------------------------------------------------- 2. normalizers
def normalize(spec: dict | None, text: str) -> str:
    """Apply a normalizer object to text.

    >>> normalize({"type": "Sequence", "normalizers": [{"type": "Lowercase"}, {"type": "Prepend", "prepend": "▁"}]}, "HΣ")
    '▁hσ'
    >>> normalize({"type": "Replace", "pattern": {"String": " "}, "content": "▁"}, "a b")
    'a▁b'
    >>> normalize({"type": "Strip", "strip_left": True, "strip_right": False}, " a ")
    'a '
    """
    if spec is None:
        return text
    kind = spec["type"]
    if kind in ("NFC", "NFD", "NFKC", "NFKD"):   # nfc(text) is the same, span by span
        return unicode_normalize(kind, text)
    if kind == "Sequence":
        for step in spec["normalizers"]:
            text = normalize(step, text)
        return text
    if kind == "Lowercase":
        return "".join(c.lower() for c in text) if not text.isascii() else text.lower()
    if kind == "Strip":
        start, stop = 0, len(text)
        if spec.get("strip_left", True):
            while start < stop and text[start] in WHITE_SPACE:
                start += 1
        if spec.get("strip_right", True):
            while stop > start and text[stop - 1] in WHITE_SPACE:
                stop -= 1
        return text[start:stop]
    if kind == "Replace":
        pattern = spec["pattern"]
        if "String" in pattern:
            return text.replace(pattern["String"], spec["content"]) if pattern["String"] else text
        return _compiled(pattern["Regex"]).sub(lambda m: spec["content"], text)
    if kind == "Prepend":
        return spec["prepend"] + text if text else text
    if kind == "BertNormalizer":   # the WordPiece reference's, which is HF's
        return bert_normalize(text, lowercase_text=spec["lowercase"], strip_accents_text=spec["strip_accents"],
                              clean=spec["clean_text"], tokenize_chinese_chars=spec["handle_chinese_chars"])
    raise ValueError(f"normalizer {kind!r} is not implemented")  # formats.hf_pipeline refuses it first


#: Every code point below U+0300 is NFC-stable: its NFC is itself (NFC_QC=Yes), its
#: canonical combining class is 0, and it is no character's second (or later) part in a
#: canonical decomposition, so composition never joins it to a char before it. The
#: Maybe-characters (those that may join a preceding one) start at U+0300, the
#: combining grave accent. ``tests/test_hf_rank_rule.py`` checks all three against
#: ``unicodedata`` for every code point. (The native NFC check takes a str of one byte a
#: char as NFC from this.)
NFC_STABLE_BELOW = 0x300

#: NFC classes of code points (``nfc_class``), as HF's Unicode 9.0 normalizer sees them.
#: STABLE: a normalization boundary before and after it (NFC_QC=Yes, combining class
#: 0, no decomposition, no part in a composition; also every frozen code point).
#: STARTER: a boundary before it only (NFC_QC=Yes and class 0, but it decomposes or
#: composes with a following char: "e", "é", a Hangul LV syllable). UNSAFE: NFC_QC=No
#: or Maybe, or a non-zero combining class (U+0301, U+212B, Hangul V and T jamo).
#: FROZEN: a frozen code point (``is_frozen``), a boundary before and after it like a
#: STABLE one, and never given to ``unicodedata`` (which may know it).
STABLE, STARTER, UNSAFE, FROZEN = 0, 1, 2, 3


def is_frozen(cp: int) -> bool:
    """Whether HF's Unicode 9.0 normalizer does not know code point ``cp`` while
    ``unicodedata`` may (the module docstring's *Unicode versions*).

    >>> is_frozen(0x1DF6), is_frozen(0x301), is_frozen(ord("a"))
    (True, False, False)
    """
    from ._nfc_table import FROZEN_STARTS

    return bisect.bisect_right(FROZEN_STARTS, cp) % 2 == 1


def nfc_class(cp: int) -> int:
    """The NFC class (STABLE, STARTER, UNSAFE, FROZEN) of code point ``cp``, from the
    generated table: FROZEN when frozen, else ``nfc_class_of_unicodedata`` (tests
    compare them).

    >>> [nfc_class(ord(c)) for c in "1e\\u0301\\u1df6"]
    [0, 1, 2, 3]
    """
    from ._nfc_table import CLASS_STARTS, CLASS_VALUES

    return CLASS_VALUES[bisect.bisect_right(CLASS_STARTS, cp) - 1]


@functools.lru_cache(maxsize=1)
def _composition_parts() -> tuple[frozenset[int], frozenset[int]]:
    """(first, second) parts of the canonical compositions in ``unicodedata``: each
    primary composite's two-char decomposition (NFC keeps the composite), and Hangul's
    algorithmic ones (L + V, LV + T)."""
    firsts, seconds = set(range(0x1100, 0x1113)) | set(range(0xAC00, 0xD7A4, 28)), set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))
    for cp in range(0x110000):
        d = unicodedata.decomposition(chr(cp))
        if d and not d.startswith("<") and " " in d and unicodedata.normalize("NFC", chr(cp)) == chr(cp):
            a, b = (int(x, 16) for x in d.split())
            firsts.add(a)
            seconds.add(b)
    return frozenset(firsts), frozenset(seconds)


def nfc_class_of_unicodedata(cp: int) -> int:
    """The NFC class of a code point by ``unicodedata``: UNSAFE for a non-zero
    combining class, NFC_QC=No (its NFC is not itself) or Maybe (a second part of a
    composition); STARTER for a char that decomposes or is a first part; STABLE
    otherwise. Slow (it derives the compositions once): for tests and
    ``tools/gen_nfc_table.py``."""
    c = chr(cp)
    firsts, seconds = _composition_parts()
    if unicodedata.combining(c) or unicodedata.normalize("NFC", c) != c or cp in seconds:
        return UNSAFE
    if cp in firsts or unicodedata.normalize("NFD", c) != c:
        return STARTER
    return STABLE


def nfc_spans(text: str) -> list[tuple[int, int]]:
    """The spans of text that NFC may change, each from a boundary to a boundary
    (*Corollary B*: a boundary is the place before a char that is not UNSAFE, and after
    a STABLE or FROZEN one; ``tests/test_nfc.py`` checks its premises for every code point), so
    ``nfc`` normalizes only them. A span starts at the last boundary before an UNSAFE
    char and ends before the next char that is not UNSAFE.

    *Corollary B.* NFC(x + y) == NFC(x) + NFC(y) when y starts with a char c that is
    STABLE or STARTER (NFC_QC=Yes, class 0: ICU's ``hasCompBoundaryBefore``): c's
    decomposition begins with a starter (a decomposition that begins with a non-starter
    makes its char NFC_QC=No) that is no second part of a composition (such a char is
    NFC_QC=Maybe), so canonical reordering, which moves only non-starters, does not
    cross it, and composition, which joins a char only to the last starter before it,
    joins nothing across it. After a STABLE char c the same holds: c composes with
    nothing after it and, a starter, blocks everything after it from the starters
    before it. So the text between two boundaries normalizes on its own, and a run of
    chars that are not UNSAFE is NFC already (the quick check's "yes").

    >>> nfc_spans("ae\\u0301 1\\u0301 \\u1df6\\u0301")   # "1" and U+1DF6 are STABLE
    [(1, 3), (5, 6), (8, 9)]
    """
    spans: list[tuple[int, int]] = []
    boundary, i, n = 0, 0, len(text)
    while i < n:
        k = nfc_class(ord(text[i]))
        if k == UNSAFE:
            j = i + 1
            while j < n and nfc_class(ord(text[j])) == UNSAFE:
                j += 1
            spans.append((boundary, j))
            boundary, i = j, j
            continue
        boundary = i + 1 if k in (STABLE, FROZEN) else i
        i += 1
    return spans


def nfc(text: str) -> str:
    """HF's NFC of text (Unicode 9.0, the module docstring's *Unicode versions*):
    ``unicodedata``'s NFC of each span of ``nfc_spans`` (their chars are all known to
    Unicode 9.0, where ``unicodedata`` agrees with HF), the rest kept. The same object
    when nothing changes.

    >>> nfc("e\\u0301"), nfc("a\\u1df6\\u0301") == "a\\u1df6\\u0301", nfc("\\u212b")
    ('é', True, 'Å')
    """
    spans = nfc_spans(text)
    if not spans:
        return text
    out, prev = [], 0
    for a, b in spans:
        out += [text[prev:a], unicodedata.normalize("NFC", text[a:b])]
        prev = b
    out.append(text[prev:])
    joined = "".join(out)
    return text if joined == text else joined


def unicode_normalize(form: str, text: str) -> str:
    """HF's NFC, NFD, NFKC or NFKD of text: cut at the frozen code points (*Corollary
    F*), each kept, the pieces between normalized by ``unicodedata`` (one search for a
    frozen code point, in C, then one call in the common case).

    >>> unicode_normalize("NFD", "a\\u1df6\\u0301") == "a\\u1df6\\u0301", unicode_normalize("NFKD", "ﬁ")
    (True, 'fi')
    """
    frozen = _frozen_regex()
    if frozen.search(text) is None:
        return unicodedata.normalize(form, text)
    pieces = frozen.split(text)   # text, a frozen char, text, ...
    return "".join(p if k % 2 else unicodedata.normalize(form, p) for k, p in enumerate(pieces))


@functools.lru_cache(maxsize=1)
def _frozen_regex() -> regex.Pattern:
    """A class of the frozen code points, captured (``split`` keeps them)."""
    from ._nfc_table import FROZEN_STARTS

    ends = FROZEN_STARTS[1:] + (0x110000,)
    ranges = "".join(f"\\U{a:08x}-\\U{b - 1:08x}" for a, b in zip(FROZEN_STARTS[::2], ends[::2]))
    return regex.compile(f"([{ranges}])")


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> regex.Pattern:
    return regex.compile(pattern)


# --------------------------------------------------------------------------- 3. pre-tokenizers
def segments(text: str, matches: list[tuple[int, int]]) -> list[tuple[int, int, bool]]:
    """The whole text as ``(start, end, is_match)`` runs, from the matches' spans
    (HF's ``find_matches``: the gaps between matches are runs too).

    >>> segments("a1b", [(1, 2)])
    [(0, 1, False), (1, 2, True), (2, 3, False)]
    """
    if not text:
        return [(0, 0, False)]
    out, prev = [], 0
    for start, end in matches:
        if prev != start:
            out.append((prev, start, False))
        out.append((start, end, True))
        prev = end
    if prev != len(text):
        out.append((prev, len(text), False))
    return out


def split_by_behavior(text: str, runs: list[tuple[int, int, bool]], behavior: str) -> list[str]:
    """Pieces of text from its runs, as HF's ``SplitDelimiterBehavior`` says; empty
    pieces are dropped.

    >>> runs = segments("a,,b,c", [(1, 2), (2, 3), (4, 5)])
    >>> [split_by_behavior("a,,b,c", runs, b) for b in ("Isolated", "Removed", "Contiguous")]
    [['a', ',', ',', 'b', ',', 'c'], ['a', 'b', 'c'], ['a', ',,', 'b', ',', 'c']]
    >>> [split_by_behavior("a,,b,c", runs, b) for b in ("MergedWithPrevious", "MergedWithNext")]
    [['a,', ',', 'b,', 'c'], ['a', ',', ',b', ',c']]
    """
    spans: list[list[int]] = []
    if behavior in ("Isolated", "Removed"):
        spans = [[s, e] for s, e, m in runs if not (m and behavior == "Removed")]
    elif behavior == "Contiguous":
        previous = False
        for s, e, m in runs:
            if m == previous and spans:
                spans[-1][1] = e
            else:
                spans.append([s, e])
            previous = m
    elif behavior in ("MergedWithPrevious", "MergedWithNext"):
        # a match that follows a gap joins the piece before it (or, walking backwards,
        # after it); a match after a match stands alone, as in HF's fold
        forward = behavior == "MergedWithPrevious"
        previous = False
        for s, e, m in (runs if forward else reversed(runs)):
            if m and not previous and spans:
                spans[-1][1 if forward else 0] = e if forward else s
            else:
                spans.append([s, e])
            previous = m
        if not forward:
            spans.reverse()
    else:
        raise ValueError(f"split behavior {behavior!r} is not implemented")
    return [text[s:e] for s, e in spans if e > s]


def _char_matches(text: str, test) -> list[tuple[int, int]]:
    """Each character for which ``test`` holds is a match of its own (HF's char patterns)."""
    return [(i, i + 1) for i, c in enumerate(text) if test(c)]


def _is_numeric(c: str) -> bool:
    # Rust's char::is_numeric: general categories Nd, Nl, No
    return unicodedata.category(c) in ("Nd", "Nl", "No")


def _is_punctuation(c: str) -> bool:
    # HF's is_punc: ASCII punctuation (which includes symbols such as $ + < = > ^ ` | ~) or P*
    return (c.isascii() and not c.isalnum() and c.isprintable() and c != " ") or unicodedata.category(c).startswith("P")


def pattern_matches(pattern: dict, text: str) -> list[tuple[int, int]]:
    """Spans of a Split pattern (``{"Regex": ...}`` or ``{"String": ...}``) in text."""
    if "Regex" in pattern:
        return [m.span() for m in _compiled(pattern["Regex"]).finditer(text)]
    literal, out, start = pattern["String"], [], 0
    if not literal:
        return []
    while (i := text.find(literal, start)) >= 0:
        out.append((i, i + len(literal)))
        start = i + len(literal)
    return out


def invert(text: str, matches: list[tuple[int, int]]) -> list[tuple[int, int, bool]]:
    """``segments`` with matches and gaps swapped (Split's ``invert``)."""
    return [(s, e, not m) for s, e, m in segments(text, matches)]


#: HF's ByteLevel regex (GPT-2's pattern), as the regex module runs it identically.
BYTELEVEL_REGEX = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


@functools.lru_cache(maxsize=1)
def _byte_chars() -> tuple[str, ...]:
    """GPT-2's byte -> printable character table (the ByteLevel alphabet)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = [], 0
    for b in range(256):
        if b in printable:
            table.append(chr(b))
        else:
            table.append(chr(256 + extra))
            extra += 1
    return tuple(table)


def byte_level(piece: str) -> str:
    """A piece's UTF-8 bytes as ByteLevel characters.

    >>> byte_level(" é")
    'ĠÃ©'
    """
    table = _byte_chars()
    return "".join(table[b] for b in piece.encode("utf-8"))


def pre_tokenize_piece(spec: dict, piece: str) -> list[str]:
    """One pre-tokenizer step on one piece.

    >>> pre_tokenize_piece({"type": "Digits", "individual_digits": False}, "ab123c")
    ['ab', '123', 'c']
    >>> pre_tokenize_piece({"type": "Whitespace"}, "hi, you!")
    ['hi', ',', 'you', '!']
    >>> pre_tokenize_piece({"type": "ByteLevel", "add_prefix_space": True, "use_regex": True}, "hi you")
    ['Ġhi', 'Ġyou']
    """
    kind = spec["type"]
    if kind == "Split":
        matches = pattern_matches(spec["pattern"], piece)
        runs = invert(piece, matches) if spec.get("invert", False) else segments(piece, matches)
        return split_by_behavior(piece, runs, spec["behavior"])
    if kind == "ByteLevel":
        if spec.get("add_prefix_space", True) and not piece.startswith(" "):
            piece = " " + piece
        parts = _compiled(BYTELEVEL_REGEX).findall(piece) if spec.get("use_regex", True) else [piece]
        # the regex matches every character, so Isolated keeps exactly its matches
        return [byte_level(p) for p in parts if p]
    if kind == "Digits":
        behavior = "Isolated" if spec.get("individual_digits", False) else "Contiguous"
        return split_by_behavior(piece, segments(piece, _char_matches(piece, _is_numeric)), behavior)
    if kind == "Punctuation":
        return split_by_behavior(piece, segments(piece, _char_matches(piece, _is_punctuation)), spec.get("behavior", "Isolated"))
    if kind == "Whitespace":
        return _compiled(r"\w+|[^\w\s]+").findall(piece)
    if kind == "WhitespaceSplit":
        return split_by_behavior(piece, segments(piece, _char_matches(piece, WHITE_SPACE.__contains__)), "Removed")
    if kind == "Sequence":
        pieces = [piece]
        for step in spec["pretokenizers"]:
            pieces = [out for p in pieces for out in pre_tokenize_piece(step, p)]
        return pieces
    raise ValueError(f"pre-tokenizer {kind!r} is not implemented")


def pre_tokenize(spec: dict | None, text: str) -> list[str]:
    """The pieces a pre-tokenizer (or none: the text whole) makes of text.

    DeepSeek's three Splits in a Sequence: every step splits each piece of the one
    before, and the runs a step's regex does not match stay pieces too.

    >>> seq = {"type": "Sequence", "pretokenizers": [
    ...     {"type": "Split", "pattern": {"Regex": r"\\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
    ...     {"type": "Split", "pattern": {"Regex": r"[a-z]+"}, "behavior": "Isolated", "invert": False}]}
    >>> pre_tokenize(seq, "Hello 2024")
    ['H', 'ello', ' ', '202', '4']
    """
    if spec is None:
        return [text] if text else []
    return [p for p in pre_tokenize_piece(spec, text) if p]


# --------------------------------------------------------------------------- 4. the BPE model
def word_symbols(word: str, model: dict, vocab: dict[str, int]) -> list[int]:
    """The ids a word starts from (HF's ``merge_word`` before merging; see the module
    docstring for unknown characters). As in HF, an unk waiting to be added (it may
    fuse with the next) is added only before the next character found in the
    vocabulary or at the end, so byte-fallback tokens right after it come first:

    >>> vocab = {"a": 0, "b": 1, "<unk>": 2, "<0x63>": 3}
    >>> word_symbols("abxyc", {"unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True}, vocab)
    [0, 1, 3, 2]
    """
    prefix = model.get("continuing_subword_prefix") or None
    suffix = model.get("end_of_word_suffix") or None
    unk = model.get("unk_token")
    out: list[int] = []
    pending_unk = False   # an unk not yet added (fuse_unk extends it)
    for i, c in enumerate(word):
        s = c
        if i and prefix is not None:
            s = prefix + s
        if i == len(word) - 1 and suffix is not None:
            s = s + suffix
        if s in vocab:
            if pending_unk:
                out.append(vocab[unk])
                pending_unk = False
            out.append(vocab[s])
            continue
        if model.get("byte_fallback"):
            codes = [f"<0x{b:02X}>" for b in s.encode("utf-8")]
            if all(code in vocab for code in codes):
                out.extend(vocab[code] for code in codes)
                continue
        if unk is not None:
            if pending_unk and not model.get("fuse_unk"):
                out.append(vocab[unk])
            pending_unk = True
    if pending_unk:
        out.append(vocab[unk])
    return out


def merge_by_list(ids: list[int], merges: dict[tuple[int, int], tuple[int, int]]) -> list[int]:
    """Merge ``ids`` by the merge list: ``merges[(a, b)] = (rank, new_id)``; the pair of
    lowest rank first, leftmost among equal ranks (HF's ``Word::merge_all``).

    >>> merge_by_list([0, 1, 2], {(0, 1): (1, 3), (1, 2): (0, 4)})
    [0, 4]
    >>> merge_by_list([0, 0, 0], {(0, 0): (0, 5)})
    [5, 0]
    """
    ids = list(ids)
    while len(ids) > 1:
        best = None
        for i in range(len(ids) - 1):
            found = merges.get((ids[i], ids[i + 1]))
            if found is not None and (best is None or found[0] < best[0]):
                best = (found[0], i, found[1])
        if best is None:
            break
        _, i, new_id = best
        ids[i:i + 2] = [new_id]
    return ids


def bpe_word(word: str, model: dict, vocab: dict[str, int], merges: dict[tuple[int, int], tuple[int, int]]) -> list[int]:
    """The ids of one pre-tokenized word under HF's BPE (the module docstring's rule).

    >>> vocab = {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "bc": 5}
    >>> merges = {(0, 1): (0, 3), (1, 2): (1, 5)}           # nothing builds "abc"
    >>> bpe_word("abc", {"ignore_merges": False}, vocab, merges), bpe_word("abc", {"ignore_merges": True}, vocab, merges)
    ([3, 2], [4])
    """
    if not word:
        return []
    if model.get("ignore_merges") and word in vocab:
        return [vocab[word]]
    return merge_by_list(word_symbols(word, model, vocab), merges)


def rank_rule_unreachable(token_ids, merged_counts, merge_new_ids) -> frozenset[int] | None:
    """When HF's merge-list rule is tiktoken's rank rule: the ids of the tokens that
    merging never reaches (``U``), or None when the two rules may differ.

    ``token_ids``: the byte-level tokens' ids, which are their ranks (``fastbpe.bpe.hf``
    gives the rank rule the vocabulary's ids); ``merged_counts``: for each, how many
    ids the merge list (``merge_by_list``, no whole-word lookup) makes of the token's
    own bytes; ``merge_new_ids``: the id each merge makes, in list order.

    Write ``T(p)`` for the rank rule on bytes ``p`` without tiktoken's whole-piece
    lookup (join the adjacent pair whose concatenation has the lowest rank, leftmost
    among equal ones), ``H(p)`` for the merge list (join the adjacent *listed* pair
    listed first, leftmost among equal ones; HF's heap never takes a stale entry here,
    since the pair at a position only ever grows, so it never makes the same token
    twice). Both are "join the adjacent candidate of least key, leftmost on ties".

    * **Lemma 1 (subtrees).** If a run of either process makes a token ``t`` out of a
      span of the input, the joins inside that span were exactly those of the process
      on ``t``'s bytes alone, and its last join is the last join of that run. (No join
      crosses the span's ends before ``t`` is made, or ``t`` could not be made; each
      join inside was the least candidate of the whole text, so of the span.) So every
      token either process ever makes ``t`` satisfies ``X(t) = [t]``, made by the one
      pair ``last_X(t)``.
    * **Lemma 2 (removal).** Taking away candidates a process never joins changes none
      of its runs (the least candidate, leftmost, is never one of them).
    * **Theorem.** Suppose (1) no token's own bytes merge by the list to exactly two
      ids and (2) the merges whose token the list reaches (``H(t) = [t]``) come in
      non-decreasing id order. Then ``T(p) = H(p)`` for every ``p``. By Lemmas 1-2 each
      process equals itself restricted to the pairs ``J_X = {last_X(t)}``. By induction
      on ``len(t)``: while a run on ``t``'s bytes has three or more symbols, every
      candidate makes a shorter token, the shorter tokens' pairs agree
      (``J_T = J_H`` below ``len(t)``), and their keys order alike (rank = id, and (2)
      orders list positions by id; one pair per token, so equal keys are the same pair):
      the two runs are the same. They end on the same state; if it is two symbols
      ``[x, y]``, ``T`` joins them (``x + y = t`` is a token), and by (1) so does ``H``,
      so ``last_T(t) = last_H(t)``. Hence ``J_T = J_H``, the same process.
    * **Corollary A (rank engine, ``ignore_merges: false``).** ``H(p)`` is tiktoken's
      rule on the ranks without ``U = {t : H(t) != [t]}``: a piece in the smaller table
      is a reached token, whole, as ``T`` makes it; ``T`` never joins into a token of
      ``U`` (Lemma 1), so dropping them changes no merge (Lemma 2).
    * **Corollary B (``ignore_merges: true``).** HF takes a word that is a token whole,
      else ``H``: tiktoken's rule on all the ranks; ``U`` is not needed.

    (1) holding means every count is 1 or at least 3: ``U`` is those of 3 or more.

    >>> rank_rule_unreachable([0, 1, 2, 3], [1, 1, 1, 1], [2, 3])       # "ab", "abc" listed
    frozenset()
    >>> rank_rule_unreachable([0, 1, 2, 3, 4], [1, 1, 1, 3, 1], [2, 4])  # 3 is never made
    frozenset({3})
    >>> rank_rule_unreachable([0, 1, 2], [1, 1, 2], []) is None           # "ab" unlisted
    True
    >>> rank_rule_unreachable([0, 1, 2, 3], [1, 1, 1, 1], [3, 2]) is None # out of order
    True
    """
    reached, unreachable = set(), set()
    for token, count in zip(token_ids, merged_counts):
        if count == 2:
            return None          # (1): the rank rule joins the two, the list does not
        (reached if count == 1 else unreachable).add(token)
    last = -1
    for new in merge_new_ids:
        if new in reached:
            if new < last:
                return None      # (2)
            last = new
    return frozenset(unreachable)


def merge_table(merge_pairs: list[tuple[str, str]], vocab: dict[str, int], prefix: str | None = None) -> dict:
    """``{(left id, right id): (rank, new id)}`` from the merge list (rank = position;
    the later of a pair listed twice wins). The new token is ``a + b`` without ``b``'s
    ``continuing_subword_prefix``.

    >>> merge_table([("a", "b"), ("ab", "c")], {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4})
    {(0, 1): (0, 3), (3, 2): (1, 4)}
    """
    cut = len(prefix) if prefix else 0
    return {(vocab[a], vocab[b]): (rank, vocab[a + b[cut:]]) for rank, (a, b) in enumerate(merge_pairs)}


# --------------------------------------------------------------------------- 1. added tokens
def find_added(text: str, tokens: dict[str, dict]) -> list[tuple[int, int, str]]:
    """Matches of added tokens in text: ``(start, end, content)``, leftmost-longest, with
    each token's ``single_word`` / ``lstrip`` / ``rstrip`` (HF's ``find_matches``);
    ``tokens`` maps the text to match to the token's entry.

    >>> find_added("a <x> b<x>c", {"<x>": {"content": "<x>", "lstrip": True, "rstrip": False, "single_word": False}})
    [(1, 5, '<x>'), (7, 10, '<x>')]
    """
    if not tokens or not text:
        return []
    alternation, firsts = _alternation(tokens)
    if len(firsts) <= 8 and not any(c in text for c in firsts):
        return []   # no token can start anywhere (cheaper than the search of many alternatives)
    out, taken = [], 0
    pos = 0
    while (m := alternation.search(text, pos)) is not None:
        start, stop = m.span()
        entry = tokens[m.group()]
        pos = stop
        if entry["single_word"]:
            if (start > 0 and _WORD_END.search(text[:start])) or (stop < len(text) and _WORD_START.match(text, stop)):
                continue   # not a word of its own; the search goes on after it, as HF's
        if entry["lstrip"]:
            left = start
            while left > 0 and text[left - 1] in WHITE_SPACE:
                left -= 1
            start = max(left, taken)
        if entry["rstrip"]:
            while stop < len(text) and text[stop] in WHITE_SPACE:
                stop += 1
        out.append((start, stop, entry["content"]))
        taken = stop   # the next search starts after the match itself, rstrip or not (HF's)
    return out


_WORD_END = regex.compile(r"\w$")
_WORD_START = regex.compile(r"\w")


class AddedTokens(dict):
    """Added tokens to match (text to match -> entry), keeping the regex that finds
    them: leftmost, then longest (alternatives longest first), and the set of their
    first characters (a text holding none of them holds no token)."""

    @functools.cached_property
    def alternation(self) -> tuple[regex.Pattern, frozenset[str]]:
        ordered = sorted(self, key=lambda t: (-len(t), t))
        return regex.compile("|".join(regex.escape(t) for t in ordered)), frozenset(t[0] for t in self)


def _alternation(tokens: dict) -> tuple[regex.Pattern, frozenset[str]]:
    return (tokens if isinstance(tokens, AddedTokens) else AddedTokens(tokens)).alternation


def split_added(text: str, raw_tokens: dict[str, dict], normalized_tokens: dict[str, dict], normalizer: dict | None) -> list[tuple[str, str | None]]:
    """Text as ``(piece, added token content or None)``: added tokens matched on the raw
    text, the rest normalized, then tokens matched on the normalized text (step 1 of the
    module docstring). Pieces that are not tokens come out normalized.

    >>> split_added("A<s>B", {"<s>": {"content": "<s>", "lstrip": False, "rstrip": False, "single_word": False}},
    ...             {}, {"type": "Lowercase"})
    [('a', None), ('<s>', '<s>'), ('b', None)]
    """
    out: list[tuple[str, str | None]] = []
    for piece, token in _cut(text, find_added(text, raw_tokens)):
        if token is not None:
            out.append((piece, token))
            continue
        piece = normalize(normalizer, piece)
        out.extend(_cut(piece, find_added(piece, normalized_tokens)))
    return [(p, t) for p, t in out if p or t is not None]


def _cut(text: str, matches: list[tuple[int, int, str]]) -> list[tuple[str, str | None]]:
    out, prev = [], 0
    for start, stop, content in matches:
        if prev < start:
            out.append((text[prev:start], None))
        out.append((text[start:stop], content))
        prev = stop
    if prev < len(text) or not out:
        out.append((text[prev:], None))
    return out


# --------------------------------------------------------------------------- 5. post-processors
def post_process(spec: dict | None, ids: list[int]) -> list[int]:
    """The ids of one sequence with the special tokens the post-processor adds (HF's
    ``add_special_tokens=True``); ByteLevel changes offsets only.

    >>> template = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
    ...     {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    >>> post_process({"type": "Sequence", "processors": [{"type": "ByteLevel"}, template]}, [7, 8])
    [1, 7, 8]
    >>> post_process({"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0]}, [7])
    [0, 7, 2]
    """
    if spec is None:
        return ids
    kind = spec["type"]
    if kind == "ByteLevel":
        return ids
    if kind == "Sequence":
        for step in spec["processors"]:
            ids = post_process(step, ids)
        return ids
    if kind in ("BertProcessing", "RobertaProcessing"):
        return [spec["cls"][1], *ids, spec["sep"][1]]
    if kind == "TemplateProcessing":
        out: list[int] = []
        for item in spec["single"]:
            if "Sequence" in item:
                out.extend(ids)
            else:
                out.extend(spec["special_tokens"][item["SpecialToken"]["id"]]["ids"])
        return out
    raise ValueError(f"post-processor {kind!r} is not implemented")


# --------------------------------------------------------------------------- decoders
def decode_chain(spec: dict | None, tokens: list[str]) -> list[str]:
    """A decoder on the tokens' strings (HF's ``decode_chain``); ``decode`` joins them.

    >>> decode_chain({"type": "ByteLevel"}, ["Ġh", "Ã©"])
    [' hé']
    >>> decode_chain({"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    ...     {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    ...     ["▁a", "<0xC3>", "<0xA9>"])
    ['aé']
    """
    if spec is None:
        return tokens
    kind = spec["type"]
    if kind == "ByteLevel":
        table = {c: b for b, c in enumerate(_byte_chars())}
        data = bytearray()
        for t in tokens:
            if all(c in table for c in t):
                data.extend(table[c] for c in t)
            else:
                data.extend(t.encode("utf-8"))
        return [data.decode("utf-8", "replace")]
    if kind == "Sequence":
        for step in spec["decoders"]:
            tokens = decode_chain(step, tokens)
        return tokens
    if kind == "Replace":
        pattern = spec["pattern"]
        if "String" in pattern:
            return [t.replace(pattern["String"], spec["content"]) if pattern["String"] else t for t in tokens]
        return [_compiled(pattern["Regex"]).sub(lambda m: spec["content"], t) for t in tokens]
    if kind == "Fuse":
        return ["".join(tokens)]
    if kind == "Strip":
        content, start, stop = spec["content"], spec["start"], spec["stop"]
        out = []
        for t in tokens:
            chars = list(t)
            begin = 0
            while begin < min(start, len(chars)) and chars[begin] == content:
                begin += 1
            end = len(chars)
            while end > begin and len(chars) - end < stop and chars[end - 1] == content:
                end -= 1
            out.append("".join(chars[begin:end]))
        return out
    if kind == "ByteFallback":
        return _byte_fallback(tokens)
    raise ValueError(f"decoder {kind!r} is not implemented")


_BYTE_TOKEN = regex.compile(r"<0x(\+?[0-9A-Fa-f]+)>")   # Rust's u8::from_str_radix of t[3:5]


def _byte_fallback(tokens: list[str]) -> list[str]:
    """``<0xXX>`` runs become the text of their bytes; a run that is not UTF-8 becomes
    one U+FFFD per byte (HF's ByteFallback decoder)."""
    out, pending = [], bytearray()

    def flush():
        if pending:
            try:
                out.append(pending.decode("utf-8"))
            except UnicodeDecodeError:
                out.extend("\ufffd" for _ in pending)
            pending.clear()

    for t in tokens:
        m = _BYTE_TOKEN.fullmatch(t) if len(t) == 6 else None
        if m:
            pending.append(int(m.group(1), 16))
        else:
            flush()
            out.append(t)
    flush()
    return out


def decode(spec: dict | None, tokens: list[str]) -> str:
    """The decoder's text of the tokens (without a decoder HF joins them with spaces)."""
    if spec is None:
        return " ".join(tokens)
    return "".join(decode_chain(spec, tokens))


# --------------------------------------------------------------------------- the whole way
def encode(text: str, pipeline: dict, vocab: dict[str, int], merges: dict, added: dict[str, tuple[dict, int]],
           add_special_tokens: bool = False) -> list[int]:
    """HF's ``Tokenizer.encode(text, add_special_tokens).ids``, step by step.

    ``pipeline`` holds the file's ``normalizer``, ``pre_tokenizer``, ``model`` and
    ``post_processor`` objects; ``added`` maps each added token's content to ``(entry,
    id)``.

    >>> vocab = {"a": 0, "b": 1, "ab": 2}
    >>> encode("ab<s>a", {"normalizer": None, "pre_tokenizer": None, "model": {}, "post_processor": None},
    ...        vocab, {(0, 1): (0, 2)}, {"<s>": ({"content": "<s>", "normalized": False, "lstrip": False,
    ...        "rstrip": False, "single_word": False}, 3)})
    [2, 3, 0]
    """
    raw = AddedTokens((c, e) for c, (e, _) in added.items() if not e["normalized"])
    normalized = AddedTokens((normalize(pipeline["normalizer"], c), e) for c, (e, _) in added.items() if e["normalized"])
    ids: list[int] = []
    for piece, token in split_added(text, raw, normalized, pipeline["normalizer"]):
        if token is not None:
            ids.append(added[token][1])
            continue
        for word in pre_tokenize(pipeline["pre_tokenizer"], piece):
            ids.extend(bpe_word(word, pipeline["model"], vocab, merges))
    return post_process(pipeline["post_processor"], ids) if add_special_tokens else ids
