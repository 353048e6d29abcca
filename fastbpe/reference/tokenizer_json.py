"""A byte-level BPE tokenizer.json's vocabulary and merges, read once into what a load needs.

The twin of the native ``fastbpe._hf_json.model_parts``, which reads the two big members
(``model.vocab``: 128k-200k entries, ``model.merges``: up to 280k) straight from the
file's bytes, so that a load makes no ``json`` object for them, and hands the rest of the
file (a few KB) to ``json.loads`` with the two cut out. ``model_parts`` here states what
it returns, from ``json.loads`` of the whole file:

* ``vocab``: ``model.vocab`` as ``json`` gives it (a dict in file order);
* ``not_byte_level``: its texts with a character outside the ByteLevel alphabet (added
  tokens' entries, like DeepSeek's ``<｜begin▁of▁sentence｜>``), in file order;
* ``ranks``: every other text's bytes (the alphabet decoded) -> its id, in file order;
* ``merge_ids``: the merges' (left, right, new) id columns, the new token being left +
  right (so no ``continuing_subword_prefix``: the caller takes this path only without one);
* ``merge_texts``: the merges' (left, right) text columns;
* ``arena``, ``lengths``, ``ids``: ``ranks`` packed as the native core takes it (the
  tokens' bytes end to end; each one's length and id, uint32), and ``merge_triples``
  the merge ids as uint32 (left, right, new, left, ...): what the load builds the core
  and the rank-rule check from, with no int object per id.

Decisions, written once here:

* **Which files.** Only the plain form takes this path: ``model`` once at the top level,
  ``vocab`` and ``merges`` once in it, none of those keys written with an escape; ids
  written as plain non-negative integers below 2**26 (``0``, ``17``; not ``1.0``,
  ``1e3``, ``-1``), no id and no text twice, no empty text; every merge part a non-empty
  ByteLevel text in the vocabulary whose concatenation is too; merges as ``"a b"`` (one
  space) or ``["a", "b"]`` (both forms exist; a list may mix them, as the Python reader
  accepts); strings with any JSON escape (``\\uXXXX``, surrogate pairs, ``\\"``,
  ``\\\\``, ``\\/``, ``\\n`` ...) but no lone surrogate; valid UTF-8 without a BOM.
  Anything else makes ``model_parts`` return None and the caller reads the file the
  ordinary way (``formats._hfjson.read_json``, ``formats.hf_pipeline.check_model``),
  which decides what it means or names what is wrong (file, JSON path): so a malformed
  file gets exactly the message it got before, and a file the fast path does not take
  still loads.
* **Duplicate keys.** ``json`` keeps the last value of a key given twice (HF's
  serde_json fills its map by insertion too, so the last wins there as well); the
  ordinary path therefore decides every file with a duplicate key on the way to, or
  inside, ``model.vocab`` (a text twice): the fast path never has to.

>>> raw = b'{"model": {"vocab": {"a": 0, "b": 1, "ab": 2, "<s>\\\\u2581": 3}, "merges": ["a b"]}}'
>>> parts = model_parts(raw)
>>> parts.not_byte_level, parts.ranks, parts.merge_ids, parts.merge_texts
(['<s>▁'], {b'a': 0, b'b': 1, b'ab': 2}, ([0], [1], [2]), (['a'], ['b']))
"""
from __future__ import annotations

import array
import json
from typing import NamedTuple

from .hf import _byte_chars


class ModelParts(NamedTuple):
    """What ``model_parts`` returns (see the module docstring)."""

    vocab_span: tuple[int, int]       # byte offsets [start, end) of model.vocab's value
    merges_span: tuple[int, int]      # ... of model.merges' value
    vocab: dict[str, int]
    not_byte_level: list[str]
    ranks: dict[bytes, int]
    merge_ids: tuple[list[int], list[int], list[int]]
    merge_texts: tuple[list[str], list[str]]
    arena: bytes
    lengths: bytes                    # uint32 per token
    ids: bytes                        # uint32 per token
    merge_triples: bytes              # uint32 (left, right, new) per merge


def byte_level_bytes(text: str) -> bytes | None:
    """A text's bytes through the ByteLevel alphabet, or None when a character is
    outside it.

    >>> byte_level_bytes("Ġthe"), byte_level_bytes("▁")
    (b' the', None)
    """
    table = {c: b for b, c in enumerate(_byte_chars())}
    try:
        return bytes(table[c] for c in text)
    except KeyError:
        return None


def parts_of(vocab: dict[str, int], merges: list) -> ModelParts:
    """The parts (spans aside, left as (-1, -1)) of a parsed vocabulary and merge list
    of the plain form (the module docstring).

    >>> parts_of({"a": 0, "b": 1, "ab": 2}, [["a", "b"]]).merge_ids
    ([0], [1], [2])
    """
    not_byte_level, ranks = [], {}
    for text, idx in vocab.items():
        token = byte_level_bytes(text)
        if token is None:
            not_byte_level.append(text)
        else:
            ranks[token] = idx
    pairs = [m.split(" ") if isinstance(m, str) else m for m in merges]
    lefts, rights = [a for a, _ in pairs], [b for _, b in pairs]
    ids = ([vocab[a] for a in lefts], [vocab[b] for b in rights], [vocab[a + b] for a, b in pairs])
    triples = [i for trio in zip(*ids) for i in trio]
    return ModelParts((-1, -1), (-1, -1), vocab, not_byte_level, ranks, ids, (lefts, rights), b"".join(ranks),
                      _uint32(map(len, ranks)), _uint32(ranks.values()), _uint32(triples))


def _uint32(values) -> bytes:
    """Native-endian uint32s, as the native reader packs them."""
    return array.array("I", values).tobytes()


def model_parts(raw: bytes) -> ModelParts | None:
    """The parts of a tokenizer.json of the plain form, from ``json.loads`` of the whole
    file (spans aside); None for a file that is not valid JSON or has no object
    ``model`` with ``vocab`` and ``merges``. The native twin also returns None for the
    other forms the module docstring names; where both return parts they are equal."""
    try:
        data = json.loads(raw)
        model = data["model"]
        return parts_of(model["vocab"], model["merges"])
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
