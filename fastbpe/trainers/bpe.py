"""``fastbpe.train_bpe``: learn a byte-level BPE from files or from ``documents=``.

Two phases, both native (``fastbpe._train``, driven by ``fastbpe.bpe.counting`` for
phase 1; ``reference.bpe`` holds the rules both follow and the tests compare them):

1. read and count: stream the documents (``fastbpe.io``) in blocks, split them by the
   pattern (native pre-tokenizers on ``num_threads`` threads: hand-written for the
   built-in patterns, a split program for any other that ``reference.split_program``
   compiles, such as Llama 3's or Qwen's; ``regex`` in worker processes for the rest)
   and count unique chunks;
2. merge: learn merges over the unique chunks until ``vocab_size`` is reached
   (incremental pair counts, lazy max-heap). Its tables are sized by the corpus, not by
   ``vocab_size``: a corpus makes at most sum(len(chunk) - 1) merges, so asking 10**8
   tokens of a small corpus costs what the corpus can make.

Capacity: the native tables use 32-bit fields (under 2**31 - 1 unique chunks, chunks
under 2 GiB, under 2**31 pairs alive at once, under 2**32 pair-to-chunk entries). Reaching
one raises ValueError naming the limit and where (the file and block, the documents, or
the merge), never a bare "out of memory".
"""
from __future__ import annotations

import warnings
from collections.abc import Iterable

from .._train import train_merges
from .. import checks
from .. import io as _io
from ..bpe import counting
from ..bpe.encoding import Encoding
from ..reference import patterns
from . import empty_corpus


def _validate(vocab_size, special_tokens, min_frequency, max_token_length, num_threads):
    """The arguments checked, as ``(vocab_size, special_tokens, min_frequency, max_token_length)``."""
    vocab_size = checks.check_int("vocab_size", vocab_size, high=checks.MAX_VOCAB_SIZE)
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
    min_frequency = checks.check_int("min_frequency", min_frequency, low=0)
    max_token_length = checks.check_int("max_token_length", max_token_length, low=1, allow_none=True)
    checks.check_num_threads(num_threads, allow_none=True)
    return vocab_size, special_tokens, min_frequency, max_token_length


def learn_merges(chunk_counts, n_tokens: int, *, min_frequency: int = 0,
                 max_token_length: int | None = None, progress: bool = False) -> list[bytes]:
    """Phase 2: the vocabulary (token bytes by id) learned from unique chunk counts
    (a dict, or the native table of phase 1, which is freed as soon as it is loaded)."""
    bar = _bar(progress, total=max(n_tokens - 256, 0), desc="merging", unit=" merges")
    try:
        _, vocab = train_merges(chunk_counts, n_tokens, min_frequency=min_frequency,
                                       max_token_length=max_token_length, progress=bar,
                                       consume=True)
    finally:
        if bar is not None:
            bar.close()
    return vocab


def _bar(progress: bool, **kw):
    """A tqdm bar, or None (nothing printed) when progress is off."""
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(**kw)


def train_bpe(
    files=None,
    vocab_size: int | None = None,
    *,
    documents=None,
    docs: str | None = None,
    field: str | None = None,
    column: str | None = None,
    pattern: str = "cl100k",
    special_tokens: Iterable[str] = (),
    min_frequency: int = 0,
    max_token_length: int | None = None,
    num_threads: int | None = None,
    progress: bool = True,
    errors: str = "strict",
    name: str = "fastbpe",
    client=None,
) -> Encoding:
    """Train a byte-level BPE tokenizer and return it as an ``Encoding``.

    The corpus is ``files`` (a path or a list of paths, or directories of them: text
    files, plain or gzip/zstd/xz, read by the document rule ``docs`` — ``"file"`` (the
    default: each file is one document), ``"lines"``, ``"blank-line"`` or ``"sep:STR"``;
    JSON Lines files by their ``field``, default ``"text"``; Parquet files by their
    ``column``; fsspec URLs) or ``documents=`` (any iterable of str: a list, a generator, a
    ``datasets`` column; each item is a document; a ``datasets`` dataset with
    ``column=``), never a guess between the two: see ``fastbpe.reference.documents`` for
    the rules. Chunks never span two documents. ``vocab_size`` counts the 256 byte
    tokens, the merges and ``special_tokens`` (which get the last ids). ``pattern`` is
    ``"gpt2"``, ``"cl100k"``, ``"o200k"`` or a regex. If the corpus runs out of pairs
    before ``vocab_size``, training stops early with a warning.

    With a ``dask.distributed`` ``client``, phase 1 runs on the cluster over byte ranges
    of the input files (local paths or fsspec URLs; see ``fastbpe.distributed``) and
    only the combined chunk table comes back; the result equals one machine's.

    >>> enc = train_bpe(documents=["aaabdaaabac"], vocab_size=259, pattern=r"[\\s\\S]+", progress=False)
    >>> enc.encode_ordinary("aaabdaaabac")
    [258, 100, 258, 97, 99]
    """
    if vocab_size is None:
        raise TypeError("train_bpe() needs vocab_size")
    vocab_size, special_tokens, min_frequency, max_token_length = _validate(
        vocab_size, special_tokens, min_frequency, max_token_length, num_threads)
    _io.check_errors(errors)
    pat_str = patterns.resolve_pattern(pattern)
    patterns.compile_pattern(pat_str)  # a bad pattern fails before any reading

    # 1. read and count unique chunks (a native table: no Python object per chunk)
    if client is not None:  # on a Dask cluster: the paths are checked there
        from ..distributed import count_chunks_distributed

        if documents is not None:
            raise TypeError("train_bpe(client=...) reads files on the workers: pass files, "
                            "not documents= (an iterable can't be shipped to them)")
        counts = count_chunks_distributed(client, files, pat_str, special_tokens, errors=errors,
                                          docs=docs, field=field, column=column)
    else:
        # every file checked before any work
        corpus = _io.Corpus.resolve(files, documents, docs=docs, field=field, column=column)
        bar = _bar(progress, total=corpus.total_bytes(), desc="reading", unit="B", unit_scale=True,
                   unit_divisor=1024)
        try:
            counts = counting.count_chunk_table(corpus, pat_str, special_tokens, num_threads=num_threads,
                                                errors=errors, progress=bar)
        finally:
            if bar is not None:
                bar.close()
    if not len(counts):
        raise empty_corpus(files, documents)

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
