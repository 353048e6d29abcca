"""Byte-level BPE, the plain way: the specification the native code must match.

Small pure functions in the style of minbpe. No speed tricks: every native path in
fastbpe has a twin here and a test that compares them.

Decisions (each written down once, here):

* **Documents.** Training reads documents (str; what a document is in a file is
  ``fastbpe.reference.documents``). A document with no UTF-8 form (lone surrogates, e.g.
  from a broken JSON escape) is trained on as tiktoken encodes it: lone surrogates
  become U+FFFD and surrogate pairs their character (``fix_surrogates``), so
  training sees the text the trained encoding will see; text with a UTF-8 form is
  unchanged.
* **Chunks.** Text is split into chunks by a regex pattern (``patterns.GPT2``,
  ``CL100K``, ``O200K`` or a custom one, via the ``regex`` module): its matches, as
  ``findall`` gives them. A tuple of patterns is HF's Sequence of Isolated Splits
  instead (DeepSeek's three): each pattern splits every piece of the one before into
  its matches and the text between them (``split_program.split_sequence``). BPE never
  merges across a chunk, a special token or a document boundary.
* **Pair counting.** Every adjacent pair inside a chunk counts, overlapping ones
  included: ``b"aaa"`` holds two ``(97, 97)`` pairs. A chunk that occurs ``n`` times
  adds ``n`` per pair. Counts are Python ints here; the native trainer uses 64-bit
  signed counts (a corpus would need 2**63 pairs to overflow them).
* **Merging.** A merge replaces occurrences of a pair leftmost first, without overlap:
  ``merge([97, 97, 97], (97, 97), 256) == [256, 97]``.
* **Choice of the next merge.** The pair with the highest count; among equal counts the
  smallest ``(left_id, right_id)`` wins. Pairs whose merged token would be longer than
  ``max_token_length`` bytes are not candidates. Training stops early (with a warning
  from the public API) when no candidate is left or the best count is below
  ``min_frequency``.
* **Ids.** Ids 0..255 are the single bytes (id ``b`` is ``bytes([b])``); each merge
  that makes new bytes gets the next id, 256, 257, … . If a merge makes bytes that are
  already a token (``(ab, c)`` after ``(a, bc)``), the existing id is reused and no id
  is spent, so every token's bytes are unique and ranks are tiktoken's ``bytes -> rank``.
* **Special tokens** are never learned: their text is cut out of the training text
  (it splits the document there) and they get the ids right after the last merge, in
  the order given.
* **Encoding** follows tiktoken, not the training order: per chunk, if the chunk's bytes
  are a token, that id; else start from single bytes and repeatedly merge the adjacent
  pair whose concatenated bytes have the lowest rank (leftmost among equal ranks) until
  no adjacent pair is a token.
* **Decoding** joins the token bytes; ``decode`` uses ``errors="replace"`` by default.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import regex

from .patterns import CL100K, compile_pattern


# --------------------------------------------------------------------------- training
def get_stats(ids: list[int], counts: dict | None = None, weight: int = 1) -> dict:
    """Count adjacent pairs (overlapping), adding ``weight`` per occurrence.

    >>> get_stats([97, 97, 97, 98])
    {(97, 97): 2, (97, 98): 1}
    """
    counts = {} if counts is None else counts
    for pair in zip(ids, ids[1:]):
        counts[pair] = counts.get(pair, 0) + weight
    return counts


def merge(ids: list, pair: tuple, idx) -> list:
    """Replace each leftmost, non-overlapping occurrence of ``pair`` by ``idx``. Any
    items compare: ids here, WordPiece pieces in ``wordpiece.merge_in_word``.

    >>> merge([97, 97, 97, 98], (97, 97), 256)
    [256, 97, 98]
    """
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(idx)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def find_special(text: bytes, tokens: Iterable[bytes], start: int = 0) -> tuple[int, int, bytes] | None:
    """The first special (or added) token in ``text[start:]``: ``(start, end, token)``,
    or None.

    The rule, one for every encode (tiktoken's longest-first alternation, HF's
    leftmost-longest added-token matcher): the *leftmost* position where a token starts,
    and of the tokens that start there the *longest*. Encoding resumes after the match,
    so overlapping tokens never both match. The native scan (``_specials.find_special``)
    must find the same; it skips ahead only past positions whose first two bytes start
    no token, which cannot change the answer.

    >>> find_special(b"a<|x|><|xy|>", [b"<|x|>", b"<|xy|>"])
    (1, 6, b'<|x|>')
    >>> find_special(b"x<ab", [b"<a", b"<ab", b"ab"])
    (1, 4, b'<ab')
    >>> find_special(b"<a", [b"<ab"]) is None
    True
    """
    tokens = [t for t in tokens if t]
    for i in range(start, len(text)):
        best = max((t for t in tokens if text.startswith(t, i)), key=len, default=None)
        if best is not None:
            return i, i + len(best), best
    return None


def special_token_regex(tokens: Iterable[str]) -> regex.Pattern | None:
    """A regex matching any of the given special tokens, longest first (None if empty):
    the rule of ``find_special`` on str.

    >>> special_token_regex(["<|a|>"]).split("x<|a|>y")
    ['x', 'y']
    """
    tokens = sorted(set(tokens), key=lambda t: (-len(t), t))
    if not tokens:
        return None
    return regex.compile("|".join(regex.escape(t) for t in tokens))


def fix_surrogates(text: str) -> str:
    """What tiktoken does with text that has no UTF-8 form: lone surrogates become
    U+FFFD and surrogate *pairs* are joined into their character (see "Documents"
    above; ``reference.core.CoreBPE`` encodes such text this way too).

    >>> fix_surrogates("a\\ud83d\\ude42\\ud800")
    'a🙂\ufffd'
    """
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def count_chunks(
    documents: Iterable[str], pattern: str = CL100K, special_tokens: Iterable[str] = ()
) -> Counter:
    """Count the UTF-8 bytes of every chunk over all documents (lone surrogates fixed
    first: see "Documents" above).

    >>> count_chunks(["ab ab"], r"\\w+| ")
    Counter({b'ab': 2, b' ': 1})
    >>> count_chunks(["a\\ud800"], r"\\w+|\\W")
    Counter({b'a': 1, b'\\xef\\xbf\\xbd': 1})
    """
    pat = compile_pattern(pattern)
    special = special_token_regex(special_tokens)
    counts: Counter = Counter()
    for doc in map(fix_surrogates, documents):
        pieces = special.split(doc) if special is not None else [doc]
        for piece in pieces:
            counts.update(chunk.encode("utf-8") for chunk in pat.findall(piece))
    return counts


def train_on_chunks(
    chunk_counts: dict[bytes, int],
    n_tokens: int,
    *,
    min_frequency: int = 0,
    max_token_length: int | None = None,
) -> tuple[list[tuple[int, int]], list[bytes]]:
    """Learn merges until the vocabulary holds ``n_tokens`` tokens (bytes included).

    Returns ``(merges, vocab)``: ``merges[i]`` is the pair merged at step ``i`` and
    ``vocab[id]`` the bytes of each token.

    >>> train_on_chunks({b"aaabdaaabac": 1}, 259)[0]
    [(97, 97), (97, 98), (256, 257)]
    """
    # 1. every unique chunk as a list of byte ids, with its count
    words = [(list(chunk), count) for chunk, count in chunk_counts.items()]
    vocab = [bytes([b]) for b in range(256)]
    id_of = {tok: i for i, tok in enumerate(vocab)}
    merges: list[tuple[int, int]] = []
    while len(vocab) < n_tokens:
        # 2. count pairs from scratch (the native trainer updates them incrementally)
        stats: dict[tuple[int, int], int] = {}
        for ids, count in words:
            get_stats(ids, stats, count)
        # 3. the candidates: pairs short enough; best = highest count, smallest pair
        candidates = [
            (-c, p)
            for p, c in stats.items()
            if max_token_length is None or len(vocab[p[0]]) + len(vocab[p[1]]) <= max_token_length
        ]
        if not candidates:
            break
        neg_count, pair = min(candidates)
        if -neg_count < max(min_frequency, 1):
            break
        # 4. the merged bytes get a new id, or the id they already have
        new_bytes = vocab[pair[0]] + vocab[pair[1]]
        idx = id_of.get(new_bytes)
        if idx is None:
            idx = len(vocab)
            vocab.append(new_bytes)
            id_of[new_bytes] = idx
        merges.append(pair)
        words = [(merge(ids, pair, idx), count) for ids, count in words]
    return merges, vocab


def train(
    documents: Iterable[str],
    vocab_size: int,
    pattern: str = CL100K,
    special_tokens: Iterable[str] = (),
    *,
    min_frequency: int = 0,
    max_token_length: int | None = None,
) -> tuple[dict[bytes, int], dict[str, int]]:
    """Train byte-level BPE; return ``(mergeable_ranks, special_tokens)``.

    ``vocab_size`` counts the 256 bytes, the merges and the special tokens.

    >>> ranks, _ = train(["aaabdaaabac"], 259, pattern=r"[\\s\\S]+")
    >>> encode_ordinary("aaabdaaabac", ranks, r"[\\s\\S]+")
    [258, 100, 258, 97, 99]
    """
    special_tokens = list(special_tokens)
    n_tokens = vocab_size - len(special_tokens)
    if n_tokens < 256:
        raise ValueError(
            f"vocab_size={vocab_size} is too small: it must be at least 256 + "
            f"{len(special_tokens)} special tokens = {256 + len(special_tokens)}"
        )
    counts = count_chunks(documents, pattern, special_tokens)
    _, vocab = train_on_chunks(
        counts, n_tokens, min_frequency=min_frequency, max_token_length=max_token_length
    )
    ranks = {tok: i for i, tok in enumerate(vocab)}
    specials = {tok: len(vocab) + i for i, tok in enumerate(special_tokens)}
    return ranks, specials


# --------------------------------------------------------------------------- encoding
def bpe_encode_chunk(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """Encode one chunk's bytes with tiktoken's rule (lowest-rank pair first).

    >>> bpe_encode_chunk(b"aab", {b"a": 0, b"b": 1, b"aa": 2, b"ab": 3})
    [2, 1]
    """
    if piece in ranks:
        return [ranks[piece]]
    return merge_bytes(piece, ranks)


def merge_bytes(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """BPE from single bytes, without the whole-chunk lookup (which can return a token
    that merging would never reach).

    >>> merge_bytes(b"abc", {b"a": 0, b"b": 1, b"c": 2, b"bc": 3, b"abc": 4, b"ab": 5})
    [4]
    """
    parts = [piece[i : i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        best_rank, best_i = None, -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best_rank is None or rank < best_rank):
                best_rank, best_i = rank, i
        if best_rank is None:
            break
        parts[best_i : best_i + 2] = [parts[best_i] + parts[best_i + 1]]
    try:
        return [ranks[p] for p in parts]
    except KeyError as exc:
        raise KeyError(f"byte {exc.args[0]!r} has no token; the ranks must hold all 256 bytes") from None


def encode_ordinary(text: str, ranks: dict[bytes, int], pattern: str = CL100K) -> list[int]:
    """Encode text with no special-token handling at all.

    >>> encode_ordinary("aa", {b"a": 0, b"aa": 1}, r".+")
    [1]
    """
    out: list[int] = []
    for chunk in chunks(text, pattern):
        out.extend(bpe_encode_chunk(chunk.encode("utf-8"), ranks))
    return out


def chunks(text: str, pattern: str | tuple[str, ...]) -> list[str]:
    """The chunks of text (the module docstring's *Chunks*): a pattern's matches, or a
    tuple's Isolated Splits in sequence, the text between matches kept.

    >>> chunks("ab 12345", r"\\p{L}+|\\p{N}+| ")
    ['ab', ' ', '12345']
    >>> chunks("ab 12345", (r"\\p{N}{1,3}", r"\\p{L}+"))
    ['ab', ' ', '123', '45']
    """
    if isinstance(pattern, tuple):
        from .split_program import split_sequence  # numpy only when a sequence is used

        return split_sequence(pattern, text)
    return compile_pattern(pattern).findall(text)


def encode(
    text: str,
    ranks: dict[bytes, int],
    pattern: str = CL100K,
    special_tokens: dict[str, int] | None = None,
    allowed_special: Iterable[str] = (),
) -> list[int]:
    """Encode text; occurrences of *allowed* special tokens become their ids.

    Other special-token text is encoded as ordinary text (rejecting it is policy, and
    lives in ``fastbpe.Encoding``).

    >>> encode("a<|x|>a", {b"a": 0, b"<": 1}, r".", {"<|x|>": 9}, {"<|x|>"})
    [0, 9, 0]
    """
    special_tokens = special_tokens or {}
    allowed = [t for t in allowed_special if t in special_tokens]
    special = special_token_regex(allowed)
    if special is None:
        return encode_ordinary(text, ranks, pattern)
    out: list[int] = []
    start = 0
    for m in special.finditer(text):
        out.extend(encode_ordinary(text[start : m.start()], ranks, pattern))
        out.append(special_tokens[m.group()])
        start = m.end()
    out.extend(encode_ordinary(text[start:], ranks, pattern))
    return out


def decode_bytes(ids: Iterable[int], vocab: dict[int, bytes]) -> bytes:
    """Join the bytes of the tokens.

    >>> decode_bytes([1, 0], {0: b"a", 1: b"b"})
    b'ba'
    """
    try:
        return b"".join(vocab[i] for i in ids)
    except KeyError as exc:
        raise KeyError(f"unknown token id {exc.args[0]!r}") from None


def decode(ids: Iterable[int], vocab: dict[int, bytes], errors: str = "replace") -> str:
    """Decode to str; bytes that are not valid UTF-8 become U+FFFD by default.

    >>> decode([0], {0: b"\\xe2\\x82"})
    '\\ufffd'
    """
    return decode_bytes(ids, vocab).decode("utf-8", errors=errors)
