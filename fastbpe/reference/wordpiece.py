"""WordPiece as BERT / Hugging Face ``tokenizers`` do it, in plain Python (the specification).

Pipeline for one text (each step is a small function below)::

    split_special_tokens -> normalize -> pre_tokenize -> wordpiece_word (per word)

Decisions, written down once (the native core must follow every one of them):

* Unicode: character classes come from Python's ``unicodedata`` (Unicode 14 on Python
  3.11). HF ``tokenizers`` uses Rust crates whose tables are older for a few classes; the
  tests list the code points where the two disagree (unassigned or recently assigned
  characters) and keep them out of the parity comparison.
* Order of normalisation is HF's ``BertNormalizer`` order (not the original Python BERT
  order): clean text, pad CJK characters with spaces, strip accents, lowercase.
* Clean text drops U+0000, U+FFFD and every "other" character (general category Cc, Cf,
  Cs, Co; unassigned Cn code points are kept, as in HF) except tab, newline and carriage return, then maps whitespace to " ".
  Whitespace is the Unicode White_Space property (Rust's ``char::is_whitespace``), which is
  not the same set as ``str.isspace``.
* Lowercasing is done per character (``c.lower()`` for each ``c``), like HF; so there is no
  Greek final-sigma rule and "İ" becomes "i̇" (two characters).
* ``turkish_lowercase`` (off by default; HF has no such option) maps İ -> i and I -> ı
  before accent stripping and lowercasing.
* Accent stripping is NFD followed by dropping non-spacing marks (category Mn).
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

import unicodedata
from collections import Counter

from .bpe import merge

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

# Unicode White_Space property (what Rust's char::is_whitespace uses).
WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)

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


def is_whitespace(ch: str) -> bool:
    """True for White_Space characters. ``is_whitespace("\\u3000") -> True``"""
    return ch in WHITESPACE


def is_control(ch: str) -> bool:
    """True for characters clean-text drops: Cc, Cf, Cs, Co except tab/newline/CR.

    Unassigned code points (Cn) are kept, as HF keeps them.
    ``is_control("\\x00") -> True``, ``is_control("\\n") -> False``
    """
    if ch in "\t\n\r":
        return False  # these are whitespace and become " " instead
    return unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co")


def is_punctuation(ch: str) -> bool:
    """BERT punctuation: P* categories plus all ASCII non-alphanumeric symbols. ``"$" -> True``"""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


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
    return "".join(ch for ch in unicodedata.normalize("NFD", text) if unicodedata.category(ch) != "Mn")


def lowercase(text: str) -> str:
    """Per-character lowercase, as HF does (no final-sigma context). ``"ΟΔΟΣ" -> "οδοσ"``"""
    return "".join(ch.lower() for ch in text)


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
