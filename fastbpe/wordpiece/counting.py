"""WordPiece word counting: phase 1 of ``train_wordpiece`` on the native BERT pre-tokeniser.

The words (normalised, pre-tokenised) and their counts equal
``fastbpe.reference.wordpiece.count_words``; ``fastbpe.distributed`` runs the same counter
per task on a Dask worker.

>>> from fastbpe.reference.wordpiece import BertOptions
>>> sorted(_count_words_native(["Hello, hello!"], BertOptions(), 1).items())
[('!', 1), (',', 1), ('hello', 2)]
"""
from __future__ import annotations

from .._wordpiece import WordPieceCore as _WordPieceCore, words_text as _words_text
from ..reference import wordpiece as _ref

#: Texts are handed to the native pre-tokeniser in batches of about this many characters.
_TRAIN_BATCH_CHARS = 1 << 23


def _count_words_native(texts, opts: "_ref.BertOptions", num_threads: int):
    """Word counts from the native BERT pre-tokeniser (same words as ``_ref.count_words``)."""
    from collections import Counter

    core = _WordPieceCore(
        {"[UNK]": 0}, unk_token="[UNK]", prefix="##", max_chars=100,
        lowercase=opts.lowercase,
        strip_accents=opts.lowercase if opts.strip_accents is None else opts.strip_accents,
        clean_text=opts.clean_text, cjk=opts.tokenize_chinese_chars, turkish=opts.turkish_lowercase,
        words_only=True,
    )
    counts: Counter = Counter()
    batch: list[str] = []
    size = 0

    def flush():
        if batch:
            words = _words_text(core, batch, num_threads)
            counts.update(words.split(" "))
            batch.clear()

    for text in texts:
        batch.append(text)
        size += len(text)
        if size >= _TRAIN_BATCH_CHARS:
            flush()
            size = 0
    flush()
    counts.pop("", None)
    return counts
