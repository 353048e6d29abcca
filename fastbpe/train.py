"""``fastbpe.train_bpe``: learn a byte-level BPE from files or an iterable of str.

Two phases, each with a native core where one is built (see ``reference.bpe`` for the
rules both phases follow):

1. read and count: stream the documents (``fastbpe._data``), split them by the pattern
   and count unique chunks;
2. merge: learn merges over the unique chunks until ``vocab_size`` is reached.
"""
from __future__ import annotations

import warnings
from collections.abc import Iterable

from . import _data
from .encoding import Encoding
from .reference import bpe as ref
from .reference import patterns


def _validate(vocab_size, special_tokens, min_frequency, max_token_length, num_threads) -> list[str]:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise TypeError(f"vocab_size must be an int, not {type(vocab_size).__name__}")
    if isinstance(special_tokens, str) or not isinstance(special_tokens, Iterable):
        raise TypeError("special_tokens must be a list of str (e.g. ['<|endoftext|>'])")
    special_tokens = list(special_tokens)
    for tok in special_tokens:
        if not isinstance(tok, str) or not tok:
            raise ValueError(f"special tokens must be non-empty str, got {tok!r}")
    if len(set(special_tokens)) != len(special_tokens):
        raise ValueError(f"special_tokens has duplicates: {special_tokens}")
    if vocab_size < 256 + len(special_tokens):
        raise ValueError(
            f"vocab_size={vocab_size} is too small: it must be at least 256 (bytes) + "
            f"{len(special_tokens)} special tokens = {256 + len(special_tokens)}"
        )
    if isinstance(min_frequency, bool) or not isinstance(min_frequency, int) or min_frequency < 0:
        raise ValueError(f"min_frequency must be a non-negative int, got {min_frequency!r}")
    if max_token_length is not None and (
        isinstance(max_token_length, bool) or not isinstance(max_token_length, int) or max_token_length < 1
    ):
        raise ValueError(f"max_token_length must be a positive int or None, got {max_token_length!r}")
    if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int) or not 1 <= num_threads <= 1024):
        raise ValueError(f"num_threads must be None or an int from 1 to 1024, got {num_threads!r}")
    return special_tokens


def count_documents(documents: Iterable[str], pat_str: str, special_tokens: list[str],
                    num_threads: int | None = None) -> dict[bytes, int]:
    """Phase 1 over an iterable of documents: ``{chunk bytes: count}``."""
    return ref.count_chunks(documents, pat_str, special_tokens)


def count_file_range(path, start: int, end: int, pat_str: str, special_tokens: list[str],
                     errors: str = "strict") -> dict[bytes, int]:
    """Phase 1 over the lines of one byte range of a file (see ``_data.split_ranges``);
    the unit of work of distributed training."""
    return count_documents(_data.iter_range_lines(path, start, end, errors), pat_str, special_tokens, 1)


def learn_merges(chunk_counts: dict[bytes, int], n_tokens: int, *, min_frequency: int = 0,
                 max_token_length: int | None = None, progress: bool = False) -> list[bytes]:
    """Phase 2: the vocabulary (token bytes by id) learned from unique chunk counts."""
    _, vocab = ref.train_on_chunks(chunk_counts, n_tokens, min_frequency=min_frequency,
                                   max_token_length=max_token_length)
    return vocab


def train_bpe(
    data,
    vocab_size: int,
    *,
    pattern: str = "cl100k",
    special_tokens: Iterable[str] = (),
    min_frequency: int = 0,
    max_token_length: int | None = None,
    num_threads: int | None = None,
    progress: bool = True,
    errors: str = "strict",
    name: str = "fastbpe",
) -> Encoding:
    """Train a byte-level BPE tokenizer and return it as an ``Encoding``.

    ``data`` is a path, a list of paths (text or ``.gz``; each line is a document) or an
    iterable of str (each item is a document). ``vocab_size`` counts the 256 byte
    tokens, the merges and ``special_tokens`` (which get the last ids). ``pattern`` is
    ``"gpt2"``, ``"cl100k"``, ``"o200k"`` or a regex. If the corpus runs out of pairs
    before ``vocab_size``, training stops early with a warning.

    >>> enc = train_bpe(["aaabdaaabac"], 259, pattern=r"[\\s\\S]+", progress=False)
    >>> enc.encode_ordinary("aaabdaaabac")
    [258, 100, 258, 97, 99]
    """
    special_tokens = _validate(vocab_size, special_tokens, min_frequency, max_token_length, num_threads)
    pat_str = patterns.resolve_pattern(pattern)
    patterns.compile_pattern(pat_str)  # a bad pattern fails before any reading
    _data.resolve_inputs(data)  # a missing file fails before any work

    # 1. read and count unique chunks
    counts = count_documents(_data.iter_documents(data, errors=errors), pat_str, special_tokens, num_threads)
    if not counts:
        raise ValueError("the training corpus is empty (no text to learn from)")

    # 2. learn merges
    n_tokens = vocab_size - len(special_tokens)
    vocab = learn_merges(counts, n_tokens, min_frequency=min_frequency, max_token_length=max_token_length,
                         progress=progress)
    if len(vocab) < n_tokens:
        warnings.warn(
            f"training stopped early at {len(vocab)} tokens (+{len(special_tokens)} special) of the "
            f"{vocab_size} asked for: no pair left"
            + (f" with count >= {min_frequency}" if min_frequency > 1 else "")
            + (f" within max_token_length={max_token_length}" if max_token_length else ""),
            RuntimeWarning,
            stacklevel=2,
        )
    ranks = {tok: i for i, tok in enumerate(vocab)}
    specials = {tok: len(vocab) + i for i, tok in enumerate(special_tokens)}
    return Encoding(name, pat_str=pat_str, mergeable_ranks=ranks, special_tokens=specials)
