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
  lowercase data; tests/test_bert_unicode.py checks every code point against the installed
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
* Special tokens (``[CLS]`` etc.) written in the input text are recognised before
  normalisation, leftmost-longest, exactly like HF's added tokens with ``normalized=false``.
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


def tokenize(text: str, vocab, opts: BertOptions | None = None) -> list[str]:
    """The token strings of ``text`` (no [CLS]/[SEP]).

    ``tokenize("Oyuncular", {"oyun":0, "##cu":1, "##lar":2, "[UNK]":3}) -> ["oyun","##cu","##lar"]``
    """
    opts = opts or BertOptions()
    specials = [s for s in opts.special_tokens if s in vocab]
    tokens: list[str] = []
    for segment, is_special in split_special_tokens(text, specials):
        if is_special:
            tokens.append(segment)
            continue
        for word in pre_tokenize(opts.normalize(segment)):
            tokens.extend(wordpiece_word(word, vocab, opts.unk_token, opts.max_input_chars_per_word, opts.prefix))
    return tokens


def encode(text: str, vocab: dict, opts: BertOptions | None = None, add_special_tokens: bool = True) -> list[int]:
    """Ids of ``[CLS] text [SEP]`` (or of text alone). Needs "[CLS]"/"[SEP]" in vocab when adding them."""
    ids = [vocab[t] for t in tokenize(text, vocab, opts)]
    if add_special_tokens:
        ids = [vocab["[CLS]"]] + ids + [vocab["[SEP]"]]
    return ids


def encode_pair(
    a: str, b: str, vocab: dict, opts: BertOptions | None = None, add_special_tokens: bool = True
) -> tuple[list[int], list[int]]:
    """Ids and type ids of ``[CLS] A [SEP] B [SEP]``: type 0 up to the first [SEP], then 1."""
    ids_a = encode(a, vocab, opts, add_special_tokens)
    ids_b = [vocab[t] for t in tokenize(b, vocab, opts)]
    if add_special_tokens:
        ids_b.append(vocab["[SEP]"])
    return ids_a + ids_b, [0] * len(ids_a) + [1] * len(ids_b)


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
