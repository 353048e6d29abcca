"""WordPiece as BERT / Hugging Face ``tokenizers`` do it, in plain Python (the specification).

Pipeline for one text (each step is a small function below)::

    split_special_tokens -> normalize -> pre_tokenize -> wordpiece_word (per word)

Decisions, written down once (the native core must follow every one of them):

* Unicode: every character class and mapping is the one HF ``tokenizers`` uses, so that
  every code point gets HF's result (parity is the point of this pipeline; Python's
  ``unicodedata`` is Unicode 14 on Python 3.11 and is not used). HF takes them from three
  places, each frozen at its own Unicode version, and so do we (the data is generated into
  ``_bert_unicode.py`` by ``tools/gen_bert_unicode.py`` from those versions' tables):

  - general categories (Cc/Cf/Co for clean text, Mn for accent stripping, P* for
    punctuation) from the ``unicode_categories`` crate: **Unicode 8.0**. So U+061D ARABIC
    END OF TEXT MARK (Po, Unicode 14) is not punctuation and U+07FD NKO DANTAYALAN (Mn,
    Unicode 11) is not stripped: both stay inside their word, as in HF;
  - NFD (decompositions, combining classes) from ``unicode-normalization-alignments``:
    **Unicode 9.0**. So U+1DFB (Mn, Unicode 9.0) is reordered by its class 230 but, not
    being Mn in Unicode 8.0, never stripped;
  - ``char::is_whitespace`` and ``char::to_lowercase`` from Rust's standard library:
    **Unicode 17.0** (rustc 1.99 built tokenizers 0.23.3). So U+1C89 CYRILLIC CAPITAL
    LETTER TJE (Unicode 16) lowercases to U+1C8A.

  A tokenizers wheel built by a rustc of another Unicode version changes only the
  lowercase data; tests/test_reference_bert_unicode.py checks every code point against the installed
  HF and names the ones that moved.
* Order of normalisation is HF's ``BertNormalizer`` order (not the original Python BERT
  order): clean text, pad CJK characters with spaces, strip accents, lowercase.
* Clean text drops U+0000, U+FFFD and every "other" character (general category Cc, Cf,
  Co; code points unassigned in Unicode 8.0 are kept, as in HF) except tab, newline and
  carriage return, then maps whitespace to " ". Lone surrogates (which a Rust string
  cannot hold, so HF never sees them) are dropped too.
  Whitespace is the Unicode White_Space property (Rust's ``char::is_whitespace``), which is
  not the same set as ``str.isspace``.
* Lowercasing is done per character (``c.lower()`` for each ``c``), like HF; so there is no
  Greek final-sigma rule and "İ" becomes "i̇" (two characters).
* ``turkish_lowercase`` (off by default; HF has no such option) maps İ -> i and I -> ı
  before accent stripping and lowercasing.
* Accent stripping is NFD (full canonical decomposition, then canonical reordering of
  combining marks) followed by dropping non-spacing marks (category Mn).
  ``strip_accents=None`` follows ``lowercase``, as in HF.
* CJK padding uses HF's ranges (see ``CJK_RANGES``).
* Punctuation is BERT's: any Unicode P* category, plus ASCII 33-47, 58-64, 91-96, 123-126
  (so "$", "+", "^", "`" are punctuation too). Each punctuation character is its own word.
* A word longer than ``max_input_chars_per_word`` characters (code points) is ``[UNK]``;
  otherwise greedy longest-match-first from the left, continuation pieces prefixed with
  ``##``; if any position has no match, the whole word becomes one ``[UNK]``.
* Special-token text in the input (``"x [SEP] y"``) follows tiktoken's rule, the one in
  ``fastbpe.special``, for every encode and tokenize call: by default it raises ValueError,
  because a user's text must not turn into a control id the model trusts, and no call
  silently gives other ids than HF. ``allowed_special="all"`` is HF's behaviour (and
  ``split_special_tokens=False`` in transformers): such text is cut out before
  normalisation, leftmost-longest, exactly like HF's added tokens with ``normalized=false``,
  and becomes the token's id. ``disallowed_special=()`` encodes it as ordinary text
  (``[``, ``sep``, ``]``), what shards, counts and statistics of documents use
  (``WordPiece.encode_ordinary``). Text without special-token text is unaffected.
* Decoding follows HF's WordPiece decoder: a ``##`` piece is glued to the previous token,
  any other token gets a leading space (except the first), and with ``cleanup=True`` each
  token goes through HF's ``cleanup`` replacements (" ." -> "." ...).

Training (``train``), the likelihood WordPiece of Schuster & Nakajima / the HF course:

* Words are normalised and pre-tokenised with the same pipeline and counted.
* Initial units: the first character of each word, and ``##`` + every later character.
  With ``limit_alphabet=k`` only the ``k`` most frequent characters (counted over all
  positions, weighted by word count; ties -> smaller code point) are kept and words with any
  other character are dropped from training (they would encode to ``[UNK]`` anyway).
* Score of an adjacent pair (A, B) = count(AB) / (count(A) * count(B)), counts weighted by
  word frequency over the current segmentation. Scores are compared exactly by integer
  cross-multiplication: ``p1 * a2 * b2`` vs ``p2 * a1 * b1``. Counts are unbounded Python
  ints here; the native trainer keeps 64-bit counts and 128-bit products (exact while each
  count is below 2**42).
* Tie-break among equal scores: the higher pair count wins, then the smaller A, then the
  smaller B (strings compared by code point). So the choice is total and deterministic.
* ``algorithm="frequency"`` (HF WordPieceTrainer style, i.e. BPE over ``##`` pieces) ranks
  pairs by count alone, then by the same string tie-break.
* Only pairs with count >= ``min_frequency`` are candidates. Merged token = A + B without
  B's ``##``. A merge whose token is already in the vocabulary re-segments words but adds
  no new entry.
* Vocabulary order: special tokens, then the alphabet (plain characters by code point, then
  ``##`` characters by code point), then merged tokens in the order they were made. The
  alphabet is always complete even if that exceeds ``vocab_size``; merging stops at
  ``vocab_size`` or when no candidate pair is left.
"""
from __future__ import annotations

from bisect import bisect_right
from collections import Counter

from ..special import check_no_disallowed, resolve_special_sets
from . import _bert_unicode as _U
from .bpe import merge

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

# Unicode White_Space property (what Rust's char::is_whitespace uses).
WHITESPACE = frozenset(map(chr, _U.WHITE_SPACE))

# Hangul syllables decompose by algorithm (Unicode 3.12), not by table.
HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3
_NFD = {cp: "".join(map(chr, d)) for cp, d in _U.NFD.items()}
_LOWER = {cp: "".join(map(chr, lo)) for cp, lo in _U.LOWERCASE.items()}

# BERT's CJK ranges (_is_chinese_char): CJK Unified Ideographs and extensions, compatibility
# ideographs. Hangul, kana etc. are not included, on purpose (they are space-separated).
# The fifth range starts at 0x2B920 as in HF tokenizers (original BERT says 0x2B820); we
# follow HF so that ids match, which leaves U+2B820..U+2B91F unpadded.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _in_runs(runs, starts):
    """Membership test for sorted inclusive (first, last, ...) code point runs."""

    def contains(cp: int) -> bool:
        i = bisect_right(starts, cp) - 1
        return i >= 0 and cp <= runs[i][1]

    return contains


_is_other = _in_runs(_U.OTHER, [r[0] for r in _U.OTHER])
_is_mn = _in_runs(_U.NONSPACING_MARK, [r[0] for r in _U.NONSPACING_MARK])
_is_p = _in_runs(_U.PUNCTUATION, [r[0] for r in _U.PUNCTUATION])
_CCC_STARTS = [r[0] for r in _U.COMBINING_CLASS]


def is_whitespace(ch: str) -> bool:
    """True for White_Space characters. ``is_whitespace("\\u3000") -> True``"""
    return ch in WHITESPACE


def is_control(ch: str) -> bool:
    """True for characters clean-text drops: Cc, Cf, Co (Unicode 8.0) except tab/newline/CR.

    Unassigned code points (Cn) are kept, as HF keeps them; lone surrogates are dropped.
    ``is_control("\\x00") -> True``, ``is_control("\\n") -> False``,
    ``is_control("\\u0890") -> False`` (a Cf character only since Unicode 14)
    """
    if ch in "\t\n\r":
        return False  # these are whitespace and become " " instead
    cp = ord(ch)
    return 0xD800 <= cp <= 0xDFFF or _is_other(cp)


def is_punctuation(ch: str) -> bool:
    """BERT punctuation: P* categories (Unicode 8.0) plus all ASCII non-alphanumeric symbols.

    ``"$" -> True``, ``"\\u061d" -> False`` (punctuation only since Unicode 14)
    """
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return _is_p(cp)


def is_nonspacing_mark(ch: str) -> bool:
    """General category Mn in Unicode 8.0. ``"\\u0301" -> True``, ``"\\u07fd" -> False``"""
    return _is_mn(ord(ch))


def combining_class(ch: str) -> int:
    """Canonical combining class (Unicode 9.0). ``"\\u0301" -> 230``, ``"a" -> 0``"""
    cp = ord(ch)
    i = bisect_right(_CCC_STARTS, cp) - 1
    if i >= 0 and cp <= _U.COMBINING_CLASS[i][1]:
        return _U.COMBINING_CLASS[i][2]
    return 0


def decompose(ch: str) -> str:
    """Full canonical decomposition of one character (Unicode 9.0). ``"ǖ" -> "u\\u0308\\u0304"``"""
    cp = ord(ch)
    if HANGUL_FIRST <= cp <= HANGUL_LAST:
        s = cp - HANGUL_FIRST
        lv = chr(0x1100 + s // 588) + chr(0x1161 + s % 588 // 28)
        return lv + chr(0x11A7 + s % 28) if s % 28 else lv
    return _NFD.get(cp, ch)


def nfd(text: str) -> str:
    """NFD: decompose, then stably sort each run of combining marks by class.

    ``nfd("a\\u0301\\u0316") -> "a\\u0316\\u0301"`` (class 220 before 230)
    """
    chars = [d for ch in text for d in decompose(ch)]
    i = 0
    while i < len(chars):
        if combining_class(chars[i]) == 0:
            i += 1
            continue
        j = i
        while j < len(chars) and combining_class(chars[j]) != 0:
            j += 1
        chars[i:j] = sorted(chars[i:j], key=combining_class)  # sorted() is stable
        i = j
    return "".join(chars)


def is_cjk(ch: str) -> bool:
    """True for BERT's CJK ideographs. ``is_cjk("中") -> True``, ``is_cjk("ア") -> False``"""
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def clean_text(text: str) -> str:
    """Drop NUL, U+FFFD and control chars; whitespace -> " ". ``"a\\tb\\x00c" -> "a bc"``"""
    out = []
    for ch in text:
        if ch == "\x00" or ch == "\ufffd" or is_control(ch):
            continue
        out.append(" " if is_whitespace(ch) else ch)
    return "".join(out)


def pad_cjk(text: str) -> str:
    """Put spaces around each CJK ideograph so it becomes its own word. ``"a中b" -> "a 中 b"``"""
    return "".join(f" {ch} " if is_cjk(ch) else ch for ch in text)


def strip_accents(text: str) -> str:
    """NFD, then drop non-spacing marks (Mn). ``"Çok güzel" -> "Cok guzel"``"""
    return "".join(ch for ch in nfd(text) if not is_nonspacing_mark(ch))


def lowercase(text: str) -> str:
    """Per-character full lowercase (Unicode 17.0), as HF does (no final-sigma context).

    ``"ΟΔΟΣ" -> "οδοσ"``, ``"İ" -> "i\\u0307"``, ``"\\u1c89" -> "\\u1c8a"``
    """
    return "".join(_LOWER.get(ord(ch), ch) for ch in text)


def turkish_dotted_i(text: str) -> str:
    """Turkish case pairs before lowercasing: İ -> i and I -> ı. ``"İSTANBUL" -> "iSTANBUL"``"""
    return text.replace("İ", "i").replace("I", "ı")


def normalize(
    text: str,
    *,
    lowercase_text: bool = True,
    strip_accents_text: bool | None = None,
    clean: bool = True,
    tokenize_chinese_chars: bool = True,
    turkish: bool = False,
) -> str:
    """HF BertNormalizer. ``normalize("Héllo\\tWORLD") -> "hello world"``

    ``turkish=True`` (only with lowercasing) maps İ -> i and I -> ı first, so that accent
    stripping cannot turn İ into "I" -> "i"-without-dot mistakes; BERT/HF never do this.
    """
    if clean:
        text = clean_text(text)
    if tokenize_chinese_chars:
        text = pad_cjk(text)
    if lowercase_text and turkish:
        text = turkish_dotted_i(text)
    if lowercase_text if strip_accents_text is None else strip_accents_text:
        text = strip_accents(text)
    if lowercase_text:
        text = lowercase(text)
    return text


def pre_tokenize(text: str) -> list[str]:
    """Split on whitespace, then make every punctuation char its own word.

    ``pre_tokenize("Hi, you!") -> ["Hi", ",", "you", "!"]``
    """
    words: list[str] = []
    current: list[str] = []
    for ch in text:
        if is_whitespace(ch) or is_punctuation(ch):
            if current:
                words.append("".join(current))
                current = []
            if not is_whitespace(ch):
                words.append(ch)
        else:
            current.append(ch)
    if current:
        words.append("".join(current))
    return words


def wordpiece_word(
    word: str, vocab, unk_token: str = "[UNK]", max_input_chars_per_word: int = 100, prefix: str = "##"
) -> list[str]:
    """Greedy longest-match-first pieces of one word; any gap -> [unk_token].

    ``wordpiece_word("oyuncular", {"oyun", "##cu", "##lar"}) -> ["oyun", "##cu", "##lar"]``
    """
    if len(word) > max_input_chars_per_word:
        return [unk_token]
    pieces = []
    start = 0
    while start < len(word):
        end = len(word)
        piece = None
        while start < end:  # try the longest candidate first, shrink by one character
            candidate = word[start:end] if start == 0 else prefix + word[start:end]
            if candidate in vocab:
                piece = candidate
                break
            end -= 1
        if piece is None:
            return [unk_token]  # one unmatched part makes the whole word unknown
        pieces.append(piece)
        start = end
    return pieces


def split_special_tokens(text: str, special_tokens) -> list[tuple[str, bool]]:
    """Cut special tokens out of raw text, leftmost-longest. Returns (segment, is_special).

    ``split_special_tokens("a[SEP]b", ["[SEP]"]) -> [("a", False), ("[SEP]", True), ("b", False)]``
    """
    specials = sorted((s for s in special_tokens if s), key=len, reverse=True)
    out: list[tuple[str, bool]] = []
    start = i = 0
    while i < len(text) and specials:
        match = next((s for s in specials if text.startswith(s, i)), None)
        if match is None:
            i += 1
            continue
        if start < i:
            out.append((text[start:i], False))
        out.append((match, True))
        i += len(match)
        start = i
    if start < len(text):
        out.append((text[start:], False))
    return out


class BertOptions:
    """The knobs of the pipeline, with HF's defaults; ``strip_accents=None`` follows lowercase."""

    def __init__(
        self,
        *,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        clean_text: bool = True,
        tokenize_chinese_chars: bool = True,
        unk_token: str = "[UNK]",
        max_input_chars_per_word: int = 100,
        continuing_subword_prefix: str = "##",
        special_tokens=SPECIAL_TOKENS,
        turkish_lowercase: bool = False,
    ):
        self.turkish_lowercase = turkish_lowercase
        self.lowercase = lowercase
        self.strip_accents = strip_accents
        self.clean_text = clean_text
        self.tokenize_chinese_chars = tokenize_chinese_chars
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word
        self.prefix = continuing_subword_prefix
        self.special_tokens = tuple(special_tokens)

    def normalize(self, text: str) -> str:
        return normalize(
            text,
            lowercase_text=self.lowercase,
            strip_accents_text=self.strip_accents,
            clean=self.clean_text,
            tokenize_chinese_chars=self.tokenize_chinese_chars,
            turkish=self.turkish_lowercase,
        )


def tokenize(
    text: str,
    vocab,
    opts: BertOptions | None = None,
    *,
    allowed_special=frozenset(),
    disallowed_special="all",
) -> list[str]:
    """The token strings of ``text`` (no [CLS]/[SEP]), HF's ``encode(...).tokens``.

    ``tokenize("Oyuncular", {"oyun":0, "##cu":1, "##lar":2, "[UNK]":3}) -> ["oyun","##cu","##lar"]``

    ``allowed_special`` / ``disallowed_special``: the special-token rule of ``encode_full``.
    """
    opts = opts or BertOptions()
    specials = frozenset(s for s in opts.special_tokens if s in vocab)
    allowed, disallowed = resolve_special_sets(allowed_special, disallowed_special, specials)
    check_no_disallowed(text, disallowed)
    tokens: list[str] = []
    for segment, is_special in split_special_tokens(text, allowed):
        if is_special:
            tokens.append(segment)
            continue
        for word in pre_tokenize(opts.normalize(segment)):
            tokens.extend(wordpiece_word(word, vocab, opts.unk_token, opts.max_input_chars_per_word, opts.prefix))
    return tokens


# ---------------------------------------------------------------------------------------
# Around the ids: post-processor, truncation, padding (HF's ``Tokenizer.post_process``)
# ---------------------------------------------------------------------------------------
#
# Decisions (each follows HF ``tokenizers``; a tokenizer.json's ``post_processor``,
# ``truncation`` and ``padding`` sections say which apply, and ``encode`` gives exactly
# HF's ``Tokenizer.encode(...).ids`` for them):
#
# * Order: truncate the model's ids, then add the post-processor's special tokens, then pad.
# * Every post-processor is a template (HF's ``TemplateProcessing``): ``post_processor:
#   null`` is ``$A:0`` / ``$A:0 $B:1`` (nothing added; the pair's ids get type 1);
#   ``BertProcessing`` is ``[CLS] $A [SEP]`` / ``[CLS] $A [SEP] $B:1 [SEP]:1``;
#   ``RobertaProcessing`` is ``<s> $A </s>`` / ``<s> $A </s> </s> $B </s>``, all type 0.
#   Without ``add_special_tokens`` only the sequences remain, with the template's type ids.
# * Truncation budget: ``max_length`` minus the special tokens the template adds (only when
#   they are added). ``longest_first`` cuts the longer side first and leaves an odd
#   leftover to the longer one (to the pair when both are as long); ``only_first`` /
#   ``only_second`` cut one side and fail (ValueError) when it is too short, or, for
#   ``only_second``, when there is no pair to cut. ``direction="left"`` keeps the end.
#   ``stride`` only shapes HF's overflowing windows, which fastbpe does not produce.
# * Padding: to ``length`` (HF's ``Fixed``) or, with ``length=None`` (``BatchLongest``), to
#   the longest row of the batch (a single text: its own length); then up to a multiple of
#   ``pad_to_multiple_of``. Rows already long enough are left alone. Pads get
#   ``pad_type_id`` and attention 0, and go on the ``direction`` side.

SEQUENCE_A, SEQUENCE_B = "$A", "$B"


class PostProcessor:
    """What ``add_special_tokens=True`` puts around the ids, as an HF template.

    ``single`` / ``pair`` are tuples of ``(piece, type_id)``; a piece is ``"$A"``, ``"$B"``
    or the name of an entry of ``special_tokens`` (name -> tuple of ids).

    >>> bert = PostProcessor.bert(101, 102)
    >>> bert.apply([7, 8], [9])
    ([101, 7, 8, 102, 9, 102], [0, 0, 0, 0, 1, 1], [1, 0, 0, 1, 0, 1])
    >>> bert.apply([7, 8], [9], add_special_tokens=False)[:2]
    ([7, 8, 9], [0, 0, 1])
    >>> PostProcessor.none().apply([7, 8])[0]        # post_processor: null adds nothing
    [7, 8]
    >>> bert.added_tokens(is_pair=False), bert.added_tokens(is_pair=True)
    (2, 3)
    """

    def __init__(self, single, pair, special_tokens, hf=None):
        self.single = tuple((str(p), int(t)) for p, t in single)
        self.pair = tuple((str(p), int(t)) for p, t in pair)
        self.special_tokens = {str(k): tuple(int(i) for i in v) for k, v in special_tokens.items()}
        for template, name in ((self.single, "single"), (self.pair, "pair")):
            for piece, _ in template:
                if piece not in (SEQUENCE_A, SEQUENCE_B) and piece not in self.special_tokens:
                    raise ValueError(f"post-processor {name} template names {piece!r}, which is not one of its special tokens")
        if [p for p, _ in self.single if p in (SEQUENCE_A, SEQUENCE_B)] != [SEQUENCE_A]:
            raise ValueError("post-processor single template must hold $A once (and no $B)")
        if sorted(p for p, _ in self.pair if p in (SEQUENCE_A, SEQUENCE_B)) != [SEQUENCE_A, SEQUENCE_B]:
            raise ValueError("post-processor pair template must hold $A and $B once each")
        self.hf = hf  # the tokenizer.json object it came from, written back unchanged

    # -- the HF shapes -------------------------------------------------------------------
    @classmethod
    def none(cls) -> "PostProcessor":
        """``post_processor: null``: nothing added; the pair's ids get type id 1."""
        return cls([(SEQUENCE_A, 0)], [(SEQUENCE_A, 0), (SEQUENCE_B, 1)], {})

    @classmethod
    def bert(cls, cls_id: int, sep_id: int, cls_token: str = "[CLS]", sep_token: str = "[SEP]") -> "PostProcessor":
        """HF's ``BertProcessing``: ``[CLS] $A [SEP]`` / ``[CLS] $A [SEP] $B:1 [SEP]:1``."""
        return cls(
            [(cls_token, 0), (SEQUENCE_A, 0), (sep_token, 0)],
            [(cls_token, 0), (SEQUENCE_A, 0), (sep_token, 0), (SEQUENCE_B, 1), (sep_token, 1)],
            {cls_token: (cls_id,), sep_token: (sep_id,)},
        )

    @classmethod
    def roberta(cls, cls_id: int, sep_id: int, cls_token: str = "<s>", sep_token: str = "</s>") -> "PostProcessor":
        """HF's ``RobertaProcessing``: ``<s> $A </s>`` / ``<s> $A </s> </s> $B </s>``, all type 0."""
        return cls(
            [(cls_token, 0), (SEQUENCE_A, 0), (sep_token, 0)],
            [(cls_token, 0), (SEQUENCE_A, 0), (sep_token, 0), (sep_token, 0), (SEQUENCE_B, 0), (sep_token, 0)],
            {cls_token: (cls_id,), sep_token: (sep_id,)},
        )

    @classmethod
    def from_hf(cls, data) -> "PostProcessor":
        """From a tokenizer.json ``post_processor`` value (None, Bert-, Roberta- or
        TemplateProcessing); ValueError for others (their ids would differ from HF's).

        >>> PostProcessor.from_hf({"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]}).apply([5])[0]
        [2, 5, 3]
        """
        if data is None:
            return cls.none()
        kind = data.get("type") if isinstance(data, dict) else None
        try:
            if kind in ("BertProcessing", "RobertaProcessing"):
                (sep_token, sep_id), (cls_token, cls_id) = data["sep"], data["cls"]
                make = cls.bert if kind == "BertProcessing" else cls.roberta
                out = make(int(cls_id), int(sep_id), str(cls_token), str(sep_token))
            elif kind == "TemplateProcessing":
                specials = {name: tuple(v["ids"]) for name, v in data.get("special_tokens", {}).items()}
                out = cls(_template(data["single"]), _template(data["pair"]), specials)
            else:
                raise ValueError(f"post_processor {kind or data!r} is not supported "
                                 "(need null, BertProcessing, RobertaProcessing or TemplateProcessing)")
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed {kind} post_processor ({exc!r})") from None
        out.hf = data
        return out

    def to_hf(self):
        """The tokenizer.json value (what it was read from, else a TemplateProcessing)."""
        if self.hf is not None or self == PostProcessor.none():
            return self.hf

        def pieces(template):
            return [{"Sequence": {"id": p[1:], "type_id": t}} if p in (SEQUENCE_A, SEQUENCE_B)
                    else {"SpecialToken": {"id": p, "type_id": t}} for p, t in template]

        return {
            "type": "TemplateProcessing", "single": pieces(self.single), "pair": pieces(self.pair),
            "special_tokens": {name: {"id": name, "ids": list(ids), "tokens": [name] * len(ids)}
                               for name, ids in self.special_tokens.items()},
        }

    def __eq__(self, other) -> bool:
        return isinstance(other, PostProcessor) and (self.single, self.pair, self.special_tokens) == (
            other.single, other.pair, other.special_tokens)

    def __repr__(self) -> str:
        return f"PostProcessor(single={self.single!r}, pair={self.pair!r})"

    # -- applying it -----------------------------------------------------------------------
    def added_tokens(self, is_pair: bool) -> int:
        """How many ids ``apply`` adds (HF's ``added_tokens``), for the truncation budget."""
        template = self.pair if is_pair else self.single
        return sum(len(self.special_tokens[p]) for p, _ in template if p not in (SEQUENCE_A, SEQUENCE_B))

    def apply(self, a: list[int], b: list[int] | None = None, add_special_tokens: bool = True):
        """``(ids, type_ids, special_tokens_mask)`` of the template filled with ``a`` (and ``b``)."""
        ids: list[int] = []
        types: list[int] = []
        mask: list[int] = []
        for piece, type_id in (self.single if b is None else self.pair):
            if piece in (SEQUENCE_A, SEQUENCE_B):
                seq = a if piece == SEQUENCE_A else b
                special = 0
            elif add_special_tokens:
                seq = self.special_tokens[piece]
                special = 1
            else:
                continue
            ids += seq
            types += [type_id] * len(seq)
            mask += [special] * len(seq)
        return ids, types, mask

    def wrap(self, add_special_tokens: bool = True) -> tuple[list[int], list[int]]:
        """The ids before and after ``$A`` in the single template (what ``encode`` adds)."""
        ids, _, mask = self.apply([-1], None, add_special_tokens)
        cut = ids.index(-1)
        return ids[:cut], ids[cut + 1:]


def _template(pieces) -> list[tuple[str, int]]:
    """HF template pieces (``{"Sequence": {"id": "A", "type_id": 0}}`` ...) as (piece, type_id)."""
    out = []
    for item in pieces:
        if "Sequence" in item:
            out.append(("$" + item["Sequence"]["id"], item["Sequence"].get("type_id", 0)))
        else:
            out.append((item["SpecialToken"]["id"], item["SpecialToken"].get("type_id", 0)))
    return out


TRUNCATION_STRATEGIES = ("longest_first", "only_first", "only_second")
DIRECTIONS = ("right", "left")


class Truncation:
    """HF's ``TruncationParams``: at most ``max_length`` ids per text (or pair), specials included.

    >>> t = Truncation(5)
    >>> t.lengths(8, None, n_added=2)
    (3, None)
    >>> t.lengths(4, 6, n_added=0)          # longest first; both cut to 2 + 3
    (2, 3)
    >>> Truncation(3, direction="left").cut([1, 2, 3, 4, 5], 3)
    [3, 4, 5]
    """

    def __init__(self, max_length: int, strategy: str = "longest_first", stride: int = 0, direction: str = "right"):
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 0:
            raise ValueError(f"truncation max_length must be an int >= 0, not {max_length!r}")
        if strategy not in TRUNCATION_STRATEGIES:
            raise ValueError(f"truncation strategy must be one of {TRUNCATION_STRATEGIES}, not {strategy!r}")
        if isinstance(stride, bool) or not isinstance(stride, int) or stride < 0:
            raise ValueError(f"truncation stride must be an int >= 0, not {stride!r}")
        if direction not in DIRECTIONS:
            raise ValueError(f"truncation direction must be 'right' or 'left', not {direction!r}")
        self.max_length, self.strategy, self.stride, self.direction = max_length, strategy, stride, direction

    @classmethod
    def from_hf(cls, data) -> "Truncation | None":
        """From a tokenizer.json ``truncation`` value (None or ``{"max_length": ...}``)."""
        if data is None:
            return None
        try:
            strategy = {"LongestFirst": "longest_first", "OnlyFirst": "only_first",
                        "OnlySecond": "only_second"}.get(data.get("strategy", "LongestFirst"), data.get("strategy"))
            return cls(data["max_length"], strategy, data.get("stride", 0), str(data.get("direction", "Right")).lower())
        except (KeyError, AttributeError) as exc:
            raise ValueError(f"malformed truncation {data!r} ({exc!r})") from None

    def to_hf(self) -> dict:
        strategy = "".join(w.title() for w in self.strategy.split("_"))
        return {"direction": self.direction.title(), "max_length": self.max_length, "strategy": strategy,
                "stride": self.stride}

    def __eq__(self, other) -> bool:
        return isinstance(other, Truncation) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return f"Truncation({self.max_length}, {self.strategy!r}, stride={self.stride}, direction={self.direction!r})"

    def budget(self, n_added: int) -> int:
        """Ids left for the text(s) once ``n_added`` special tokens are counted."""
        if n_added > self.max_length:
            raise ValueError(f"truncation max_length={self.max_length} leaves no room for the {n_added} special tokens")
        return self.max_length - n_added

    def lengths(self, n1: int, n2: int | None, n_added: int = 0) -> tuple[int, int | None]:
        """How many ids of each side to keep (HF's ``truncate_encodings``)."""
        limit = self.budget(n_added)
        total = n1 + (n2 or 0)
        if total <= limit:
            return n1, n2
        if self.strategy == "longest_first":
            if n2 is None:
                return limit, None
            short, long_ = min(n1, n2), max(n1, n2)
            keep_long = long_ if short > limit else max(short, limit - short)
            keep_short = short
            if keep_short + keep_long > limit:
                keep_short = limit // 2
                keep_long = keep_short + limit % 2
            return (keep_long, keep_short) if n1 > n2 else (keep_short, keep_long)
        if self.strategy == "only_second" and n2 is None:
            raise ValueError("truncation strategy 'only_second' needs a pair of texts")
        target = n1 if self.strategy == "only_first" else n2
        excess = total - limit
        if target <= excess:
            raise ValueError(f"truncation: the {'first' if self.strategy == 'only_first' else 'second'} text has "
                             f"{target} ids, too few to cut {excess} (max_length={self.max_length})")
        return (n1 - excess, n2) if self.strategy == "only_first" else (n1, n2 - excess)

    def cut(self, seq: list, keep: int) -> list:
        """The ``keep`` items of ``seq`` that survive, from the ``direction`` end."""
        if keep >= len(seq):
            return list(seq)
        return list(seq[len(seq) - keep:]) if self.direction == "left" else list(seq[:keep])


class Padding:
    """HF's ``PaddingParams``: rows padded to ``length`` (None: the longest of the batch).

    >>> p = Padding(length=None, pad_to_multiple_of=4, pad_id=0)
    >>> p.target([3, 6])
    8
    >>> p.pad([5, 6, 7], 8)
    ([5, 6, 7, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0, 0, 0])
    """

    def __init__(self, length: int | None = None, direction: str = "right", pad_id: int = 0, pad_type_id: int = 0,
                 pad_token: str = "[PAD]", pad_to_multiple_of: int | None = None):
        for name, v in (("length", length), ("pad_to_multiple_of", pad_to_multiple_of)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ValueError(f"padding {name} must be None or an int >= 0, not {v!r}")
        for name, v in (("pad_id", pad_id), ("pad_type_id", pad_type_id)):
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**31:
                raise ValueError(f"padding {name} must be an int in [0, 2**31), not {v!r}")
        if direction not in DIRECTIONS:
            raise ValueError(f"padding direction must be 'right' or 'left', not {direction!r}")
        if not isinstance(pad_token, str):
            raise TypeError(f"padding pad_token must be str, not {type(pad_token).__name__}")
        self.length, self.direction, self.pad_id, self.pad_type_id = length, direction, pad_id, pad_type_id
        self.pad_token, self.pad_to_multiple_of = pad_token, pad_to_multiple_of

    @classmethod
    def from_hf(cls, data) -> "Padding | None":
        """From a tokenizer.json ``padding`` value (None, ``{"strategy": "BatchLongest" | {"Fixed": n}, ...}``)."""
        if data is None:
            return None
        try:
            strategy = data.get("strategy", "BatchLongest")
            if strategy == "BatchLongest":
                length = None
            elif isinstance(strategy, dict) and set(strategy) == {"Fixed"}:
                length = strategy["Fixed"]
            else:
                raise ValueError(f"padding strategy {strategy!r} is not BatchLongest or Fixed")
            return cls(length, str(data.get("direction", "Right")).lower(), data.get("pad_id", 0),
                       data.get("pad_type_id", 0), data.get("pad_token", "[PAD]"), data.get("pad_to_multiple_of"))
        except AttributeError as exc:
            raise ValueError(f"malformed padding {data!r} ({exc!r})") from None

    def to_hf(self) -> dict:
        return {"strategy": "BatchLongest" if self.length is None else {"Fixed": self.length},
                "direction": self.direction.title(), "pad_to_multiple_of": self.pad_to_multiple_of,
                "pad_id": self.pad_id, "pad_type_id": self.pad_type_id, "pad_token": self.pad_token}

    def __eq__(self, other) -> bool:
        return isinstance(other, Padding) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return f"Padding({self.to_hf()!r})"

    def target(self, lengths) -> int:
        """The padded length of rows of these ``lengths`` (one batch)."""
        n = self.length if self.length is not None else max(lengths, default=0)
        m = self.pad_to_multiple_of
        if m and n % m:
            n += m - n % m
        return n

    def pad(self, ids: list[int], target: int, fill=None):
        """``(ids, attention_mask)`` padded to ``target``; ``fill`` replaces ``pad_id``
        (e.g. ``pad_type_id`` for type ids)."""
        n = max(0, target - len(ids))
        fill = self.pad_id if fill is None else fill
        mask = [1] * len(ids)
        if self.direction == "left":
            return [fill] * n + list(ids), [0] * n + mask
        return list(ids) + [fill] * n, mask + [0] * n


def default_post_processor(vocab) -> PostProcessor | None:
    """fastbpe's default for a vocabulary without a tokenizer.json: BERT's ``[CLS] $A [SEP]``
    when both tokens are in it, else None (then asking for special tokens is an error)."""
    if "[CLS]" in vocab and "[SEP]" in vocab:
        return PostProcessor.bert(vocab["[CLS]"], vocab["[SEP]"])
    return None


BERT = "bert"  # the ``post_processor`` default: ``default_post_processor(vocab)``


def encode_full(
    text: str,
    pair: str | None,
    vocab: dict,
    opts: BertOptions | None = None,
    add_special_tokens: bool = True,
    *,
    post_processor=BERT,
    truncation: Truncation | None = None,
    padding: Padding | None = None,
    allowed_special=frozenset(),
    disallowed_special="all",
) -> dict:
    """HF's ``Tokenizer.encode(text, pair)`` as lists: ``input_ids``, ``token_type_ids``,
    ``attention_mask``, ``special_tokens_mask``. The special-token rule is tiktoken's
    (``fastbpe.special``): by default special-token text in ``text`` raises ValueError;
    ``allowed_special="all"`` is HF's behaviour (it becomes the control id),
    ``disallowed_special=()`` makes it ordinary text.

    >>> v = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "[PAD]": 3, "a": 4}
    >>> encode_full("a a a", None, v, truncation=Truncation(4), padding=Padding(6, pad_id=3))["input_ids"]
    [1, 4, 4, 2, 3, 3]
    >>> encode_full("a", "a", v, post_processor=None)["token_type_ids"]
    [0, 1]
    """
    if post_processor == BERT:
        post_processor = default_post_processor(vocab)
        if post_processor is None and add_special_tokens:
            raise ValueError("add_special_tokens=True needs '[CLS]' and '[SEP]' in the vocabulary")
    post = post_processor if post_processor is not None else PostProcessor.none()

    def ids_of(s):
        toks = tokenize(s, vocab, opts, allowed_special=allowed_special, disallowed_special=disallowed_special)
        return [vocab[t] for t in toks]

    a = ids_of(text)
    b = ids_of(pair) if pair is not None else None
    if truncation is not None:
        n_added = post.added_tokens(b is not None) if add_special_tokens else 0
        keep_a, keep_b = truncation.lengths(len(a), None if b is None else len(b), n_added)
        a = truncation.cut(a, keep_a)
        if b is not None:
            b = truncation.cut(b, keep_b)
    ids, types, special = post.apply(a, b, add_special_tokens)
    mask = [1] * len(ids)
    if padding is not None:
        target = padding.target([len(ids)])
        ids, mask = padding.pad(ids, target)
        types, _ = padding.pad(types, target, padding.pad_type_id)
        special, _ = padding.pad(special, target, 1)
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask, "special_tokens_mask": special}


def pad_batch(rows: list[list[int]], padding: Padding | None) -> list[list[int]]:
    """HF's ``encode_batch`` padding: every row to ``padding.target`` of the batch's lengths."""
    if padding is None:
        return rows
    target = padding.target([len(r) for r in rows])
    return [padding.pad(r, target)[0] for r in rows]


def encode(text: str, vocab: dict, opts: BertOptions | None = None, add_special_tokens: bool = True,
           **options) -> list[int]:
    """Ids of ``[CLS] text [SEP]`` (or of text alone); ``options`` as ``encode_full``.

    ``encode("a [SEP] a", v)`` raises ValueError (special-token text in the input);
    ``allowed_special="all"`` gives ``[1, 4, 2, 4, 2]``, ``disallowed_special=()`` encodes
    ``[SEP]`` as the three words ``[``, ``sep``, ``]``.
    """
    return encode_full(text, None, vocab, opts, add_special_tokens, **options)["input_ids"]


def encode_pair(
    a: str, b: str, vocab: dict, opts: BertOptions | None = None, add_special_tokens: bool = True, **options
) -> tuple[list[int], list[int]]:
    """Ids and type ids of ``[CLS] A [SEP] B [SEP]``: type 0 up to the first [SEP], then 1."""
    out = encode_full(a, b, vocab, opts, add_special_tokens, **options)
    return out["input_ids"], out["token_type_ids"]


def cleanup(token: str) -> str:
    """HF's WordPiece decoder cleanup, applied to one token. ``" ." -> "."``, ``" n't" -> "n't"``"""
    for old, new in (
        (" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
        (" 'm", "'m"), (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"),
    ):
        token = token.replace(old, new)
    return token


def decode_tokens(tokens: list[str], prefix: str = "##", clean_up: bool = True) -> str:
    """Join pieces: ``##x`` glues on, others get a space. ``["un", "##fair", "!"] -> "unfair!"``"""
    out = []
    for i, token in enumerate(tokens):
        if i != 0:
            token = token[len(prefix):] if token.startswith(prefix) else " " + token
        out.append(cleanup(token) if clean_up else token)
    return "".join(out)


def decode(ids, vocab: dict, opts: BertOptions | None = None, skip_special_tokens: bool = True) -> str:
    """Text of ``ids``; special tokens are dropped unless ``skip_special_tokens=False``."""
    opts = opts or BertOptions()
    id_to_token = {i: t for t, i in vocab.items()}
    specials = set(opts.special_tokens)
    tokens = [id_to_token[i] for i in ids]
    if skip_special_tokens:
        tokens = [t for t in tokens if t not in specials]
    return decode_tokens(tokens, opts.prefix)


# ---------------------------------------------------------------------------------------
# Training (likelihood WordPiece)
# ---------------------------------------------------------------------------------------


def count_words(texts, opts: BertOptions | None = None) -> Counter:
    """Count pre-tokenised words. ``count_words(["a b a"]) -> Counter({"a": 2, "b": 1})``"""
    opts = opts or BertOptions()
    counts: Counter = Counter()
    for text in texts:
        counts.update(pre_tokenize(opts.normalize(text)))
    return counts


def initial_units(word: str, prefix: str = "##") -> list[str]:
    """First char plain, later chars prefixed. ``initial_units("cat") -> ["c", "##a", "##t"]``"""
    return [word[0]] + [prefix + ch for ch in word[1:]]


def merged_token(a: str, b: str, prefix: str = "##") -> str:
    """A + B without B's prefix. ``merged_token("##u", "##n") -> "##un"``"""
    return a + b[len(prefix):]


def better(cand, best, algorithm: str = "likelihood") -> bool:
    """Is candidate (pair_count, count_a, count_b, a, b) strictly better than ``best``?

    Higher score p/(ca*cb) by exact cross-multiplication; then higher p; then smaller a, b.
    ``better((2, 2, 2, "x", "##y"), (4, 4, 4, "a", "##b")) -> True`` (2/4 beats 4/16).
    With ``algorithm="frequency"`` the score is skipped: higher p, then smaller a, b.
    """
    if best is None:
        return True
    p1, a1, b1, x1, y1 = cand
    p2, a2, b2, x2, y2 = best
    lhs, rhs = p1 * a2 * b2, p2 * a1 * b1
    if algorithm == "likelihood" and lhs != rhs:
        return lhs > rhs
    if p1 != p2:
        return p1 > p2
    return (x1, y1) < (x2, y2)


def pair_and_unit_counts(segmented: dict[str, list[str]], word_counts) -> tuple[Counter, Counter]:
    """Counts of adjacent pairs and of units over the current segmentation, weighted by word count."""
    pairs: Counter = Counter()
    units: Counter = Counter()
    for word, pieces in segmented.items():
        n = word_counts[word]
        for i, piece in enumerate(pieces):
            units[piece] += n
            if i + 1 < len(pieces):
                pairs[(piece, pieces[i + 1])] += n
    return pairs, units


def merge_in_word(pieces: list[str], a: str, b: str, new: str) -> list[str]:
    """Replace each leftmost non-overlapping (a, b) by new, as BPE's ``merge`` does.
    ``(["a","##a","##a"], "a","##a") -> ["aa","##a"]``"""
    return merge(pieces, (a, b), new)


def choose_alphabet(word_counts, limit_alphabet: int | None) -> set[str]:
    """Characters kept: all, or the ``limit_alphabet`` most frequent (ties -> smaller code point)."""
    char_counts: Counter = Counter()
    for word, n in word_counts.items():
        for ch in word:
            char_counts[ch] += n
    if limit_alphabet is None or limit_alphabet >= len(char_counts):
        return set(char_counts)
    ranked = sorted(char_counts, key=lambda ch: (-char_counts[ch], ord(ch)))
    return set(ranked[:limit_alphabet])


def train(
    texts,
    vocab_size: int,
    opts: BertOptions | None = None,
    *,
    min_frequency: int = 0,
    limit_alphabet: int | None = None,
    special_tokens=SPECIAL_TOKENS,
    return_merges: bool = False,
    algorithm: str = "likelihood",
):
    """Train a likelihood WordPiece vocabulary (token -> id). See the module docstring.

    ``train(["hug hug pug pun bun hugs"], 20)`` gives the special tokens, the alphabet, then
    merges chosen by count(AB)/(count(A)count(B)). ``algorithm="frequency"`` picks the most
    frequent pair instead (BPE with ``##`` pieces, the way HF's WordPieceTrainer works), with
    the same tie-break after the count.
    """
    if algorithm not in ("likelihood", "frequency"):
        raise ValueError(f"algorithm must be 'likelihood' or 'frequency', not {algorithm!r}")
    opts = opts or BertOptions()
    prefix = opts.prefix
    word_counts = count_words(texts, opts)
    keep = choose_alphabet(word_counts, limit_alphabet)
    word_counts = Counter({w: n for w, n in word_counts.items() if all(ch in keep for ch in w)})

    vocab: dict[str, int] = {}
    for tok in special_tokens:
        vocab.setdefault(tok, len(vocab))
    segmented = {w: initial_units(w, prefix) for w in word_counts}
    firsts = sorted({p[0] for p in segmented.values()})
    inners = sorted({u for p in segmented.values() for u in p[1:]})
    for unit in firsts + inners:
        vocab.setdefault(unit, len(vocab))

    merges = []
    while len(vocab) < vocab_size:
        pairs, units = pair_and_unit_counts(segmented, word_counts)
        best = None
        for (a, b), p in pairs.items():
            if p < max(min_frequency, 1):
                continue
            cand = (p, units[a], units[b], a, b)
            if better(cand, best, algorithm):
                best = cand
        if best is None:
            break
        _, _, _, a, b = best
        new = merged_token(a, b, prefix)
        merges.append((a, b))
        for word, pieces in segmented.items():
            if len(pieces) > 1:
                segmented[word] = merge_in_word(pieces, a, b, new)
        vocab.setdefault(new, len(vocab))
    return (vocab, merges) if return_merges else vocab
