"""``fastbpe.train_wordpiece``: learn a WordPiece vocabulary from files or from ``documents=``.

Two phases: count words (``fastbpe.wordpiece.counting``, native, on ``num_threads``
threads; or on a Dask cluster, ``fastbpe.distributed``), then merge on the native
likelihood trainer (``fastbpe._wordpiece_train``); ``fastbpe.reference.wordpiece`` holds
the rules both follow.

>>> wp = train_wordpiece(documents=["hug hugs hugging"] * 5, vocab_size=40)
>>> wp.tokenize("hugging"), "##u" in wp.vocab
(['hugging'], True)
"""
from __future__ import annotations

import os

import numpy as np

from .. import checks
from ..reference import wordpiece as _ref
from ..wordpiece.counting import _count_words_native
from ..wordpiece.model import DEFAULT_SPECIAL_TOKENS, WordPiece, _check_text
from . import empty_corpus

#: Counts must stay below this so that count(AB)*count(A)*count(B) fits 128 bits exactly.
_MAX_TRAIN_COUNT = 1 << 42


def _train_native(word_counts, vocab_size, opts, *, min_frequency, limit_alphabet, special_tokens,
                  progress, algorithm="likelihood"):
    """The reference's training rules on the native trainer, from ``word_counts`` (word ->
    count: phase 1, here or on Dask); returns token -> id."""
    from .._wordpiece_train import Trainer

    prefix = opts.prefix
    keep = _ref.choose_alphabet(word_counts, limit_alphabet)
    words = [w for w in word_counts if all(ch in keep for ch in w)]
    vocab: dict[str, int] = {}
    for tok in special_tokens:
        vocab.setdefault(tok, len(vocab))
    firsts = sorted({w[0] for w in words})
    inners = sorted({prefix + ch for w in words for ch in w[1:]})
    for unit in firsts + inners:
        vocab.setdefault(unit, len(vocab))
    total = sum(word_counts[w] * len(w) for w in words)
    if total >= _MAX_TRAIN_COUNT:
        raise ValueError(f"corpus too large for exact 128-bit scores ({total} characters >= 2**42)")
    starts = np.zeros(len(words) + 1, dtype=np.int64)
    starts[1:] = np.cumsum([len(w) for w in words])
    symbols = np.empty(int(starts[-1]), dtype=np.int32)
    pos = 0
    for w in words:
        symbols[pos] = vocab[w[0]]
        pos += 1
        for ch in w[1:]:
            symbols[pos] = vocab[prefix + ch]
            pos += 1
    freqs = np.array([word_counts[w] for w in words], dtype=np.int64)
    trainer = Trainer()
    trainer.set_prefix_len(len(prefix))
    trainer.set_by_frequency(algorithm == "frequency")
    trainer.setup(list(vocab), starts, symbols, freqs, max(min_frequency, 1))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=max(0, vocab_size - len(vocab)), desc="merges", unit="tok")
    try:
        trainer.run(vocab, max(0, vocab_size - len(vocab)), bar)
    finally:
        if bar is not None:
            bar.close()
    return vocab


def train_wordpiece(
    files=None,
    vocab_size: int | None = None,
    *,
    documents=None,
    docs: str | None = None,
    field: str | None = None,
    column: str | None = None,
    errors: str = "strict",
    lowercase: bool = True,
    strip_accents: bool | None = None,
    min_frequency: int = 0,
    limit_alphabet: int | None = None,
    special_tokens=DEFAULT_SPECIAL_TOKENS,
    turkish_lowercase: bool = False,
    algorithm: str = "likelihood",
    num_threads: int | None = None,
    progress: bool = False,
    client=None,
) -> WordPiece:
    """Train a likelihood WordPiece vocabulary on ``files`` (a path or a list of paths) or
    ``documents=`` (an iterable of str), read as ``fastbpe.reference.documents`` says:
    ``docs``, ``field``, ``column`` and ``errors`` as in ``fastbpe.train_bpe``.

    Scores are count(AB)/(count(A)count(B)), compared exactly; see
    ``fastbpe.reference.wordpiece`` for the tie-break and every other rule. The result is
    the same vocabulary as ``fastbpe.reference.wordpiece.train`` for any ``num_threads``
    (threads only split the pre-tokenisation of the input). ``algorithm="frequency"`` merges
    the most frequent pair instead, like HF's WordPieceTrainer (BPE over ``##`` pieces).
    With a ``dask.distributed`` ``client``, word counting runs on the cluster over byte
    ranges of the input files (see ``fastbpe.distributed``).
    """
    from .. import io as _io

    if vocab_size is None:
        raise TypeError("train_wordpiece() needs vocab_size")
    _io.check_errors(errors)
    vocab_size = checks.check_int("vocab_size", vocab_size, low=1, high=checks.MAX_VOCAB_SIZE)
    min_frequency = checks.check_int("min_frequency", min_frequency, low=0)
    limit_alphabet = checks.check_int("limit_alphabet", limit_alphabet, low=0, allow_none=True)
    num_threads = checks.check_num_threads(num_threads, allow_none=True) or os.cpu_count() or 1
    if algorithm not in ("likelihood", "frequency"):
        raise ValueError(f"algorithm must be 'likelihood' or 'frequency', not {algorithm!r}")
    special_tokens = tuple(special_tokens)
    if "[UNK]" not in special_tokens:
        raise ValueError("special_tokens must include '[UNK]'")
    for t in special_tokens:
        _check_text(t, "special token")
    opts = _ref.BertOptions(lowercase=lowercase, strip_accents=strip_accents, special_tokens=special_tokens,
                            turkish_lowercase=turkish_lowercase)
    if client is not None:  # phase 1 on a Dask cluster
        from ..distributed import count_words_distributed

        if documents is not None:
            raise TypeError("train_wordpiece(client=...) reads files on the workers: pass files, "
                            "not documents= (an iterable can't be shipped to them)")
        word_counts = count_words_distributed(client, files, opts, errors=errors, docs=docs,
                                              field=field, column=column)
    else:
        # documents, long ones in pieces cut before whitespace (Corollary 4 of
        # reference.documents): words never span two of them
        corpus = _io.Corpus.resolve(files, documents, docs=docs, field=field, column=column)
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=corpus.total_bytes(), desc="reading", unit="B", unit_scale=True)
        blocks = corpus.blocks(cut=_io.WordPieceCut(special_tokens), errors=errors, progress=bar)
        texts = (piece for block in blocks for piece in block.pieces())
        try:
            word_counts = _count_words_native(texts, opts, num_threads)
        finally:
            if bar is not None:
                bar.close()
    if not word_counts:
        raise empty_corpus(files, documents, "words")
    vocab = _train_native(word_counts, vocab_size, opts, min_frequency=min_frequency,
                          limit_alphabet=limit_alphabet, special_tokens=special_tokens, progress=progress,
                          algorithm=algorithm)
    return WordPiece(vocab, lowercase=lowercase, strip_accents=strip_accents, special_tokens=special_tokens,
                     turkish_lowercase=turkish_lowercase)
