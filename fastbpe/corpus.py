"""Tokenizing a corpus: ``fastbpe.io`` blocks through a tokenizer, in bounded memory.

The one place where a document meets a tokenizer for ``count``, ``stats``, ``encode``
and the shard writer:

* ``cutter(tok)``: where this tokenizer lets a long document be cut
  (``reference.documents``: Corollaries 1-3 for the built-in byte-level patterns, 4 for
  WordPiece; a custom regex is never cut).
* ``block_ids(tok, block, ...)``: ``(ids, offsets)`` of a block's pieces, under the
  special-token rule of ``fastbpe.special`` (special-token text raises
  ``DisallowedSpecialInDocument`` naming the file and document unless allowed or
  declared text). A document's ids are the concatenation of its pieces' ids.
  WordPiece documents are the text alone: no ``[CLS]``/``[SEP]`` and none of a
  tokenizer.json's truncation or padding.

>>> from fastbpe.encoding import get_toy_encoding
>>> from fastbpe.io import Corpus
>>> enc = get_toy_encoding()
>>> [block_ids(enc, b)[0].tolist() for b in Corpus.resolve(documents=["hi", "hi hi"]).blocks(cut=cutter(enc))]
[[256, 256, 32, 256]]
"""
from __future__ import annotations

import numpy as np

from . import io as _io
from .show import is_wordpiece
from .special import find_disallowed, resolve_special_sets


class DisallowedSpecialInDocument(ValueError):
    """Special-token text that the rule refuses, in a document (``where``: file and
    offset, line or item) at character ``position`` of its piece."""

    def __init__(self, where: str, token: str, position: int, document: int | None = None):
        super().__init__(
            f"{where}: special-token text {token!r} at character {position}; pass "
            f"allowed_special={{{token!r}}} to write its id, or disallowed_special=() to encode it as text"
        )
        self.where, self.token, self.position, self.document = where, token, position, document


def cutter(tok):
    """The cutter of ``tok``'s documents, or None when they can't be cut."""
    if is_wordpiece(tok):
        return _io.WordPieceCut(tok.special_tokens_set)
    from ._encode import _native_pattern_id

    if _native_pattern_id(tok._pat_str) >= 0:
        return _io.BPECut(tok.special_tokens_set)
    return None


def max_id(tok) -> int:
    return max(tok.vocab.values(), default=0) if is_wordpiece(tok) else tok.max_token_value


def block_ids(tok, block, num_threads: int = 1, *, allowed_special=frozenset(), disallowed_special="all",
              dtype=np.uint32) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, offsets)``: piece ``k`` of ``block`` is ``ids[offsets[k]:offsets[k+1]]``."""
    pieces = block.pieces()
    try:
        if not is_wordpiece(tok):
            return tok.encode_batch_to_numpy(pieces, num_threads=num_threads, allowed_special=allowed_special,
                                             disallowed_special=disallowed_special, dtype=dtype)
        lists = document_ids_batch(tok, pieces, num_threads, allowed_special=allowed_special,
                                   disallowed_special=disallowed_special)
    except ValueError:
        _, disallowed = resolve_special_sets(allowed_special, disallowed_special, frozenset(tok.special_tokens_set))
        for k, piece in enumerate(pieces):
            found = find_disallowed(piece, disallowed)
            if found is not None:
                raise DisallowedSpecialInDocument(block.where(k), *found) from None
        raise
    offsets = np.zeros(len(lists) + 1, np.int64)
    np.cumsum([len(x) for x in lists], out=offsets[1:])
    ids = np.fromiter((i for x in lists for i in x), dtype=dtype, count=int(offsets[-1]))
    return ids, offsets


def document_ids_batch(tok, texts: list[str], num_threads: int = 1, *, allowed_special=frozenset(),
                       disallowed_special="all") -> list[list[int]]:
    """The ids each text contributes as a document, under the special-token rule: BPE
    ``encode_batch``; WordPiece the text alone (no ``[CLS]``/``[SEP]``, no truncation or
    padding: a BERT file's 128-token padding is not a document)."""
    if not is_wordpiece(tok):
        return tok.encode_batch(texts, num_threads=num_threads, allowed_special=allowed_special,
                                disallowed_special=disallowed_special)
    allowed, disallowed = resolve_special_sets(allowed_special, disallowed_special,
                                               frozenset(tok.special_tokens_set))
    if not allowed and not disallowed:
        return tok.encode_ordinary_batch(texts, num_threads=num_threads)
    return [tok.encode_text(t, allowed_special=allowed, disallowed_special=disallowed) for t in texts]


def count_corpus(tok, corpus, *, num_threads: int = 1, errors: str = "strict", progress=None,
                 **special) -> dict:
    """``{"documents", "tokens", "bytes", "chars", "words", "unknown"}`` of a corpus (the
    figures of ``count`` and ``stats``), streamed."""
    unk_id = None
    if is_wordpiece(tok):
        unk_id = tok.token_to_id(getattr(tok, "unk_token", "[UNK]"))
    out = {"documents": 0, "tokens": 0, "bytes": 0, "chars": 0, "words": 0,
           "unknown": 0 if is_wordpiece(tok) else None}
    prev_tail_word = False   # the last piece was open and ended inside a word
    for block in corpus.blocks(cut=cutter(tok), errors=errors, progress=progress):
        ids, _ = block_ids(tok, block, num_threads, **special)
        pieces = block.pieces()
        out["tokens"] += len(ids)
        out["bytes"] += len(block.data)
        out["chars"] += sum(map(len, pieces))
        out["words"] += sum(len(p.split()) for p in pieces)
        if prev_tail_word and pieces and pieces[0][:1] and not pieces[0][:1].isspace():
            out["words"] -= 1   # one word cut in two
        out["documents"] += len(pieces) - (1 if block.last_open else 0)
        prev_tail_word = bool(block.last_open and pieces and pieces[-1][-1:] and not pieces[-1][-1:].isspace())
        if unk_id is not None:
            out["unknown"] += int(np.count_nonzero(ids == unk_id))
    return out
