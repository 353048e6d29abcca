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

>>> from fastbpe.bpe.encoding import get_toy_encoding
>>> from fastbpe.io import Corpus
>>> enc = get_toy_encoding()
>>> [block_ids(enc, b)[0].tolist() for b in Corpus.resolve(documents=["hi", "hi hi"]).blocks(cut=cutter(enc))]
[[256, 256, 32, 256]]
"""
from __future__ import annotations

import numpy as np

from . import io as _io
from .checks import is_wordpiece
from .special import find_disallowed, resolve_special_sets


class DisallowedSpecialInDocument(ValueError):
    """Special-token text that the rule refuses: in ``where`` (the block's source and
    position, from ``fastbpe.io``), document ``document`` (of shard ``shard`` when a
    shard writer raises it: the index into its ``.idx``), at character ``position``."""

    def __init__(self, document: int, token: str, position: int, where: str | None = None,
                 shard: int | None = None):
        place = f"{where}: " if where else ""
        of = f" of shard {shard}" if shard is not None else ""
        super().__init__(
            f"{place}document {document}{of}: special-token text {token!r} at character {position}; pass "
            f"allowed_special={{{token!r}}} to write its id, or disallowed_special=() to encode it as text"
        )
        self.document, self.token, self.position, self.where, self.shard = document, token, position, where, shard

    def __reduce__(self):  # travels back from a Dask worker whole
        return type(self), (self.document, self.token, self.position, self.where, self.shard)


def cutter(tok):
    """The cutter of ``tok``'s documents, or None when they can't be cut."""
    if is_wordpiece(tok):
        return _io.WordPieceCut(tok.special_tokens_set)
    from ._encode import _native_pattern_id
    from ._pretokenize import cuts_hold

    # a sentencepiece model has no pattern: a document is one sequence, never cut
    pat_str = getattr(tok, "_pat_str", None)
    if pat_str is not None and cuts_hold(_native_pattern_id(pat_str)):
        return _io.BPECut(tok.special_tokens_set)
    return None


def encode_pieces(tok, pieces: list[str], num_threads: int = 1, *, allowed_special=frozenset(),
                  disallowed_special="all", dtype=np.uint32) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, offsets)`` of ``pieces`` as ``Encoding.encode_batch_to_numpy`` gives them
    (piece ``k`` is ``ids[offsets[k]:offsets[k+1]]``), under the special-token rule;
    WordPiece encodes the text alone (``document_ids_batch``)."""
    if not is_wordpiece(tok):
        ids, offsets = tok.encode_batch_to_numpy(pieces, num_threads=num_threads, allowed_special=allowed_special,
                                                 disallowed_special=disallowed_special, dtype=dtype)
        return ids.astype(dtype, copy=False), offsets
    allowed, disallowed = resolve_special_sets(allowed_special, disallowed_special,
                                               frozenset(tok.special_tokens_set))
    mode, allowed, disallowed = tok._special_mode(allowed, disallowed)
    if mode is not None:  # one native batch call, no offsets
        ids, _, _, offsets = tok._core.encode_batch(tok._check_batch(pieces), tok._threads(num_threads), False, mode)
        return ids.astype(dtype), offsets
    rows = [tok.encode_text(p, allowed_special=allowed, disallowed_special=disallowed) for p in pieces]
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    return np.fromiter((i for r in rows for i in r), dtype=dtype, count=int(offsets[-1])), offsets


def refused(tok, pieces: list[str], where, allowed_special, disallowed_special, first_doc: int = 0,
            open_chars: int = 0, shard: int | None = None):
    """The ``DisallowedSpecialInDocument`` for the first piece holding refused text, or
    None (``where(k)``: where piece ``k`` comes from; ``open_chars``: characters of the
    first piece's document that came in earlier blocks)."""
    _, disallowed = resolve_special_sets(allowed_special, disallowed_special, frozenset(tok.special_tokens_set))
    for k, piece in enumerate(pieces):
        found = find_disallowed(piece, disallowed)
        if found is not None:
            token, pos = found
            return DisallowedSpecialInDocument(first_doc + k, token, pos + (open_chars if k == 0 else 0),
                                               where(k), shard)
    return None


def block_ids(tok, block, num_threads: int = 1, *, allowed_special=frozenset(), disallowed_special="all",
              dtype=np.uint32) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, offsets)``: piece ``k`` of ``block`` is ``ids[offsets[k]:offsets[k+1]]``;
    refused special-token text raises ``DisallowedSpecialInDocument`` naming where."""
    pieces = block.pieces()
    try:
        return encode_pieces(tok, pieces, num_threads, allowed_special=allowed_special,
                             disallowed_special=disallowed_special, dtype=dtype)
    except ValueError:
        found = refused(tok, pieces, block.where, allowed_special, disallowed_special)
        if found is None:
            raise
        raise found from None


def document_ids_batch(tok, texts: list[str], num_threads: int = 1, *, allowed_special=frozenset(),
                       disallowed_special="all") -> list[list[int]]:
    """The ids each text contributes as a document, under the special-token rule: BPE
    ``encode_batch``; WordPiece the text alone (no ``[CLS]``/``[SEP]``, no truncation or
    padding: a BERT file's 128-token padding is not a document). ``stats`` counts these."""
    if not is_wordpiece(tok):
        return tok.encode_batch(texts, num_threads=num_threads, allowed_special=allowed_special,
                                disallowed_special=disallowed_special)
    allowed, disallowed = resolve_special_sets(allowed_special, disallowed_special,
                                               frozenset(tok.special_tokens_set))
    if not allowed and not disallowed:
        return tok.encode_ordinary_batch(texts, num_threads=num_threads)
    return [tok.encode_text(t, allowed_special=allowed, disallowed_special=disallowed) for t in texts]


def count_corpus(tok, corpus, *, num_threads: int = 1, errors: str = "strict", progress=None,
                 on_ids=None, **special) -> dict:
    """``{"documents", "tokens", "bytes", "chars", "words", "unknown"}`` of a corpus (the
    figures of ``count`` and ``stats``), streamed; ``on_ids(ids)`` sees each block's ids
    (``audit`` counts every token with it)."""
    unk_id = None
    if is_wordpiece(tok):
        unk_id = tok.token_to_id(getattr(tok, "unk_token", "[UNK]"))
    out = {"documents": 0, "tokens": 0, "bytes": 0, "chars": 0, "words": 0,
           "unknown": 0 if is_wordpiece(tok) else None}
    prev_tail_word = False   # the last piece was open and ended inside a word
    for block in _io.documents.prefetch(corpus.blocks(cut=cutter(tok), errors=errors, progress=progress)):
        ids, _ = block_ids(tok, block, num_threads, **special)
        if on_ids is not None:
            on_ids(ids)
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
