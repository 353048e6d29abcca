"""The end of a text, as tiktoken treats it: its last piece, unstable tokens, bytes that
are not UTF-8.

``Encoding.encode_with_unstable`` and ``Encoding._encode_bytes`` follow tiktoken 0.14
(``_encode_unstable_native`` and ``_encode_bytes`` in its ``src/``) exactly; they are
built here from a core's primitives (``encode``, ``encode_ordinary``,
``encode_single_piece``, ``byte_pair_encode``, ``decode_single_token_bytes``), so both
cores run the same code and give the same result.

Decisions (each written down once, here):

* **The last piece** of a text is the last chunk of the pattern after the last allowed
  special token; its tokens are the last ``n`` ids of ``encode`` (0 if the text ends
  with an allowed special token or is empty). As in tiktoken, ``n`` then grows backwards
  over the ids before it while the first id of the piece and each one added is an
  ordinary token made only of spaces, tabs and newlines (a whitespace run may split
  differently once more text comes).
* **Unstable tokens.** ``encode_with_unstable(text)`` returns ``(stable, completions)``:
  ``stable`` is ``encode(text)`` without the last piece; ``completions`` holds every id
  sequence that could continue ``stable`` when more text follows, found by tiktoken's
  brute force (every token that starts with the piece's bytes; for every cut of the
  piece, every token that starts with the part after the cut, re-encoded with the part
  before it; the split before a trailing whitespace character). tiktoken builds them in
  a hash set, so its order changes from run to run; ours come in the order they are
  found (the single tokens first, by their bytes), the same on every run, and a test
  compares them with tiktoken's as sets.
* **Lone surrogates** get ``encode``'s treatment (``reference.bpe.fix_surrogates``) in
  every method that takes text, where tiktoken's ``encode_with_unstable`` and
  ``_encode_only_native_bpe`` raise UnicodeEncodeError. The methods that take one token
  or piece as text (``encode_single_token``, ``_encode_single_piece``) raise it, as
  tiktoken does: a replaced character would silently look up another token.
* **Bytes that are not UTF-8** (``_encode_bytes``): the longest valid prefix is encoded
  as text; its last piece (grown over whitespace as above) is joined with all bytes from
  the first invalid one on and encoded as one piece. With no valid prefix, all bytes
  are that piece. (tiktoken: "this likely matches what models see better, if the bytes
  are truncated UTF-8".)

>>> from fastbpe.bpe.encoding import get_toy_encoding
>>> enc = get_toy_encoding()
>>> enc.encode_with_unstable("hi h")
([256, 32], [[104], [256]])
>>> enc._encode_bytes(b"hi \\xff")
[256, 32, 255]
"""
from __future__ import annotations

import bisect

import regex

from ..reference.bpe import fix_surrogates
from ..special import special_token_regex

_SPACE_BYTES = frozenset(b" \n\t")
_WHITE_SPACE = regex.compile(r"\p{White_Space}")   # Rust's char::is_whitespace


def utf8_text(text: str) -> str:
    """text, or the text tiktoken's ``encode`` encodes when it has no UTF-8 form."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return fix_surrogates(text)
    return text


def last_piece(enc, text: str, allowed: frozenset[str]) -> str:
    """The last chunk of the pattern after the last allowed special token ("" if none).

    >>> from fastbpe.bpe.encoding import get_toy_encoding
    >>> last_piece(get_toy_encoding(), "hi there", frozenset())
    'there'
    """
    start = 0
    if allowed:
        for m in special_token_regex(allowed).finditer(text):
            start = m.end()
    tail = text[start:]
    if not tail:
        return ""
    if _native_split(enc):
        from .._pretokenize import split_offsets

        data = tail.encode("utf-8")
        ends = split_offsets(data, enc._pat_str)
        return data[ends[-2] if len(ends) > 1 else 0 :].decode("utf-8") if len(ends) else ""
    found = ""
    for m in enc._pat.finditer(tail):
        found = m.group()
    return found


def _native_split(enc) -> bool:
    # the native splitter only for the native core: the reference runs on regex alone.
    # Imported here: the native modules load numpy, which ``import fastbpe`` must not
    if type(enc._core_bpe).__module__ != "fastbpe._encode":
        return False
    from .._pretokenize import pattern_id

    return pattern_id(enc._pat_str) >= 0


def last_piece_token_len(enc, text: str, allowed: frozenset[str], tokens: list[int]) -> int:
    """How many of tokens (``encode(text)``) belong to the last piece, grown backwards
    over whitespace-only tokens as tiktoken's ``_increase_last_piece_token_len``."""
    piece = last_piece(enc, text, allowed)
    n = len(enc._core_bpe.encode_single_piece(piece.encode("utf-8"))) if piece else 0
    if n and _all_space(enc, tokens[-n]):
        while n < len(tokens) and _all_space(enc, tokens[-n - 1]):
            n += 1
    return n


def _all_space(enc, token: int) -> bool:
    if token in enc._special_token_ids:
        return False
    return all(b in _SPACE_BYTES for b in enc._core_bpe.decode_single_token_bytes(token))


def encode_with_unstable(enc, text: str, allowed: frozenset[str]) -> tuple[list[int], list[list[int]]]:
    """``(stable, completions)`` for text already checked for disallowed specials."""
    text = utf8_text(text)
    core = enc._core_bpe
    tokens = core.encode(text, allowed)
    n = last_piece_token_len(enc, text, allowed, tokens)
    if n == 0:
        return tokens, []
    unstable = core.decode_bytes(tokens[-n:])
    stable = tokens[:-n]
    sorted_bytes = enc._sorted_token_bytes
    ranks = enc._mergeable_ranks
    # a dict as an ordered set: the completions in the order they are found
    completions: dict[tuple[int, ...], None] = {}
    # 1. every single token that starts with the unstable bytes
    for tok in _starting_with(sorted_bytes, unstable):
        completions[(ranks[tok],)] = None
    # 2. every cut of the unstable bytes, continued by every token that starts with the
    #    part after the cut: re-encoded (as text when it is UTF-8, so that the pattern
    #    may split it) and cut after the first ids that cover the unstable bytes
    texts: list[str] = []
    raw: list[bytes] = []
    token_texts = enc._sorted_token_texts
    for i in range(1, len(unstable)):
        prefix = unstable[:i]
        lo, hi = _range_starting_with(sorted_bytes, unstable[i:])
        try:
            prefix_text = prefix.decode("utf-8")
        except UnicodeDecodeError:   # a cut inside a character: the token may complete it
            for tok in sorted_bytes[lo:hi]:
                try:
                    texts.append((prefix + tok).decode("utf-8"))
                except UnicodeDecodeError:
                    raw.append(prefix + tok)
            continue
        # a cut between characters: prefix + token is UTF-8 exactly when the token is
        texts += [prefix_text + t for t in token_texts[lo:hi] if t is not None]
        raw += [prefix + b for b, t in zip(sorted_bytes[lo:hi], token_texts[lo:hi]) if t is None]
    lengths, need = enc._token_lengths, len(unstable)
    for ids in _covering_all(core, texts, lengths, need):
        completions[ids] = None
    for p in raw:
        completions[_covering(core.byte_pair_encode(p), lengths, need)] = None
    # 3. a trailing whitespace character may split off once more text comes (gpt2's
    #    "\s+(?!\S)": "\n\n" + "0" is "\n", "\n", "0")
    if len(unstable) > 1:
        last = _last_char(unstable)
        if last is not None and _WHITE_SPACE.match(last):
            cut = len(unstable) - len(last.encode("utf-8"))
            if cut > 0:
                completions[tuple(core.byte_pair_encode(unstable[:cut]) + core.byte_pair_encode(unstable[cut:]))] = None
    return stable, [list(c) for c in completions]


def _starting_with(sorted_bytes: list[bytes], prefix: bytes) -> list[bytes]:
    lo, hi = _range_starting_with(sorted_bytes, prefix)
    return sorted_bytes[lo:hi]


def _range_starting_with(sorted_bytes: list[bytes], prefix: bytes) -> tuple[int, int]:
    """The slice of sorted_bytes that starts with prefix."""
    lo = bisect.bisect_left(sorted_bytes, prefix)
    hi = lo
    while hi < len(sorted_bytes) and sorted_bytes[hi].startswith(prefix):
        hi += 1
    return lo, hi


def _covering_all(core, texts: list[str], lengths: np.ndarray, need: int) -> list[tuple[int, ...]]:
    """``_covering`` of the ids of each text, in one native batch and numpy: this loop
    runs for up to ~100,000 texts (every token that starts with a space)."""
    if not texts:
        return []
    import numpy as np   # here, not at import: ``import fastbpe`` loads no numpy

    flat, offsets = core.encode_batch_to_numpy(texts, frozenset(), 1)
    reached = np.zeros(len(flat) + 1, dtype=np.int64)      # bytes of flat[:j]
    np.cumsum(lengths[flat], out=reached[1:])
    starts, ends = offsets[:-1], offsets[1:]
    # ids are never empty, so reached rises: the first j past need is one binary search
    cut = np.minimum(np.searchsorted(reached, reached[starts] + need), ends)
    ids = flat.tolist()
    return [tuple(ids[a:b]) for a, b in zip(starts.tolist(), cut.tolist())]


def _covering(ids: list[int], lengths: np.ndarray, need: int) -> tuple[int, ...]:
    """The first ids whose bytes add up to need or more."""
    total = 0
    for k, t in enumerate(ids):
        total += lengths[t]
        if total >= need:
            return tuple(ids[: k + 1])
    return tuple(ids)


def _last_char(data: bytes) -> str | None:
    """The last character of data if data ends with a whole UTF-8 character."""
    for size in range(1, min(4, len(data)) + 1):
        try:
            char = data[-size:].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return char if len(char) == 1 else None
    return None


def encode_bytes(enc, data: bytes) -> list[int]:
    """tiktoken's ``_encode_bytes``: ids of bytes that need not be UTF-8."""
    core = enc._core_bpe
    try:
        return core.encode_ordinary(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        valid = exc.start
    text = data[:valid].decode("utf-8")
    tokens = core.encode_ordinary(text)
    n = last_piece_token_len(enc, text, frozenset(), tokens) if tokens else 0
    if n:
        piece = core.decode_bytes(tokens[-n:]) + data[valid:]
        tokens = tokens[:-n]
    else:
        piece = data[valid:]
    return tokens + core.encode_single_piece(piece)
