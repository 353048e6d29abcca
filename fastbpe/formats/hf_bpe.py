"""Hugging Face ``tokenizer.json`` for byte-level BPE (GPT-2 style).

HF stores token bytes as text through GPT-2's byte-to-unicode table, and merges as
pairs of such strings. What we write is what ``transformers``' TikTokenConverter
writes: a ``Split`` pre-tokenizer with the pattern, then ``ByteLevel`` without its own
regex, ``ignore_merges=True`` (a chunk that is a whole token is taken as is, as
tiktoken does) and the special tokens as added tokens.

Decision: ``model.merges`` holds **every split of every token** into two tokens, not the
merges a trainer learned (about twice as many lines). tiktoken joins any two adjacent
tokens whose bytes are a token, at that token's rank, whichever split it was learned
from; HF applies only the merges it is given, so only the full list makes HF give
tiktoken's ids, for ranks from any source (a ``.tiktoken`` file holds no merges). It
also makes ``save()`` byte-identical however the ``Encoding`` was made (trained,
loaded, converted), so an ``Encoding`` keeps no merge list (``_merges_of``).
"""
from __future__ import annotations

import json
import os
import re
import warnings
from functools import lru_cache
from itertools import chain
from operator import itemgetter
from pathlib import Path

from ..reference import patterns
from ..io.atomic import atomic_write_text
from ._hfjson import expect, show


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from each byte to a printable character.

    >>> bytes_to_unicode()[ord(" ")]
    'Ġ'
    """
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    mapping, extra = {}, 0
    for b in range(256):
        if b in printable:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


@lru_cache(maxsize=1)
def unicode_to_bytes() -> dict[str, int]:
    return {c: b for b, c in bytes_to_unicode().items()}


def token_to_str(token: bytes) -> str:
    """Token bytes as HF's byte-level text (``b" the"`` -> ``"Ġthe"``).

    >>> token_to_str(b" the")
    'Ġthe'
    """
    # latin-1 decodes byte b to chr(b), which the table (keyed by b) maps to b's
    # printable character: one C call per token (a save converts ~100k of them)
    return token.decode("latin-1").translate(bytes_to_unicode())


def str_to_token(text: str, source: str = "<json>") -> bytes:
    table = unicode_to_bytes()
    try:
        return bytes(table[c] for c in text)
    except KeyError as exc:
        raise ValueError(f"{source}: token {text!r} has character {exc.args[0]!r} outside the byte-level alphabet") from None


def _merges_of(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """Every split of every multi-byte token into two tokens, ordered by the token's
    rank (then by the parts' ranks), so HF's merge priority equals tiktoken's rank.

    Why every split and not the merges a trainer learned (about half as many): tiktoken
    (and ``Encoding``) joins any two adjacent tokens that make a token, whichever split
    it was learned from; this list lets HF do the same, for ranks from any source
    (``.tiktoken`` files hold no merges). A trained ``Encoding`` therefore keeps no merge
    list, and a save writes the same bytes however the ``Encoding`` was made."""
    merges = []
    for token, rank in ranks.items():
        if len(token) < 2:
            continue
        for i in range(1, len(token)):
            left, right = token[:i], token[i:]
            if left in ranks and right in ranks:
                merges.append((rank, ranks[left], ranks[right], left, right))
    merges.sort()
    return [(m[3], m[4]) for m in merges]


# HF runs Oniguruma, where ``X{1,3}+`` is not possessive but means ``(?:X{1,3})+``. In the
# built-in patterns the possessive counter ends its alternative, so plain greedy ``{1,3}``
# splits identically; these are the forms HF files carry (as transformers writes them).
_ONIGURUMA_FORMS = {pat.replace("{1,3}+", "{1,3}"): pat for pat in set(patterns.PATTERNS.values())}


def to_oniguruma(pattern: str) -> str:
    """The pattern as HF must see it to split like the ``regex`` module.

    >>> to_oniguruma(patterns.CL100K) == patterns.CL100K.replace("{1,3}+", "{1,3}")
    True
    """
    if pattern in patterns.PATTERNS.values():
        return pattern.replace("{1,3}+", "{1,3}")
    if re.search(r"\}\+", pattern):
        warnings.warn(
            f"pattern {pattern!r} has a possessive counted repeat '{{n,m}}+', which HF tokenizers "
            "(Oniguruma) read as a repeated group; the saved tokenizer.json may split differently",
            stacklevel=3,
        )
    return pattern


def hf_vocab(ranks: dict[bytes, int], special_tokens: dict[str, int], added_tokens: dict[str, int] | None = None) -> dict[str, int]:
    """``model.vocab`` as we write it: every rank's byte-level text, and every special
    token (and non-special added token) at its own id.

    HF gives an added token the id of the same string in ``model.vocab`` and otherwise
    numbers it from ``len(model.vocab)`` on, ignoring the id the file states (see
    ``_hfjson``). Special ids are rarely contiguous after the ranks (cl100k's start at
    100257, one past a gap, and ``<|endofprompt|>`` is 100276), so they must be in the
    vocabulary for HF to keep them, as GPT-2's own file has ``<|endoftext|>`` there.

    >>> hf_vocab({b"a": 0, b" b": 1}, {"<|eot|>": 7})
    {'a': 0, 'Ġb': 1, '<|eot|>': 7}
    """
    vocab = {token_to_str(t): r for t, r in sorted(ranks.items(), key=lambda kv: kv[1])}
    for text, idx in sorted({**special_tokens, **(added_tokens or {})}.items(), key=lambda kv: kv[1]):
        if text in (added_tokens or {}) and vocab.get(text) == idx and ranks.get(text.encode("utf-8")) == idx:
            continue  # an added token that is also that very token ("ing"): one entry
        if text in vocab:
            raise ValueError(
                f"{'special' if text in special_tokens else 'added'} token {text!r} is also the byte-level text of the token with rank {vocab[text]}; "
                "tokenizer.json has one vocabulary for both, so it cannot hold them apart"
            )
        vocab[text] = idx
    return vocab


def to_hf_json(ranks: dict[bytes, int], pattern: str, special_tokens: dict[str, int],
               added_tokens: dict[str, int] | None = None) -> dict:
    added_tokens = added_tokens or {}
    pretok = [
        {"type": "Split", "pattern": {"Regex": to_oniguruma(pattern)}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": s in special_tokens}
            for s, i in sorted({**special_tokens, **added_tokens}.items(), key=lambda kv: kv[1])
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": pretok},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
            "vocab": hf_vocab(ranks, special_tokens, added_tokens),
            "merges": _merge_texts(ranks),
        },
    }


def write_hf_bpe(path: str | os.PathLike, ranks: dict[bytes, int], pattern: str, special_tokens: dict[str, int],
                 added_tokens: dict[str, int] | None = None) -> Path:
    """Save as ``tokenizer.json`` (atomically); ``tokenizers.Tokenizer.from_file`` loads it.

    The merges are every split of every token (the module docstring's decision): the
    same bytes for the same ranks, and HF's ids equal tiktoken's."""
    doc = to_hf_json(ranks, pattern, special_tokens, added_tokens)
    return atomic_write_text(path, dumps_tokenizer_json(doc))


def _merge_texts(ranks: dict[bytes, int]) -> list[list[str]]:
    """``model.merges``: ``_merges_of`` as byte-level text pairs, built in its order
    without its sort of every merge.

    With unique ranks (an ``Encoding``'s always are) that order is: by the token's rank,
    then by the left part's rank (two splits of one token have distinct left parts, so
    distinct ranks, and never tie further), so walking the tokens in rank order and
    sorting each token's few splits gives it. Each token's text is made once, not once
    per merge it is a part of.

    >>> ranks = {bytes([i]): i for i in range(256)} | {b"ab": 256, b"bc": 257, b"abc": 258}
    >>> _merge_texts(ranks)
    [['a', 'b'], ['b', 'c'], ['a', 'bc'], ['ab', 'c']]
    """
    if len(set(ranks.values())) != len(ranks):  # shared ranks: the general rule
        return [[token_to_str(a), token_to_str(b)] for a, b in _merges_of(ranks)]
    text = {tok: token_to_str(tok) for tok in ranks}
    merges = []
    for tok, _ in sorted(ranks.items(), key=itemgetter(1)):
        if len(tok) < 2:
            continue
        splits = [(ranks[tok[:i]], i) for i in range(1, len(tok)) if tok[:i] in ranks and tok[i:] in ranks]
        if len(splits) > 1:
            splits.sort()
        for _, i in splits:
            merges.append([text[tok[:i]], text[tok[i:]]])
    return merges


# stand-ins for the two big members while the json module writes the rest of the file
# (NUL is written as \u0000, and ``dumps_tokenizer_json`` checks each occurs once)
_VOCAB_MARK, _MERGES_MARK = "\0fastbpe:vocab\0", "\0fastbpe:merges\0"


def dumps_tokenizer_json(doc: dict) -> str:
    """``json.dumps(doc, ensure_ascii=False, indent=2)``, character for character, faster.

    The json module writes indented JSON in pure Python (its C encoder has no indent):
    ~0.17 s for a 32k-token tokenizer.json, most of it in ``model.vocab`` (str -> int)
    and ``model.merges`` (pairs of str). Those two are formatted here with the json
    module's own string encoder, at the depth and with the separators ``indent=2``
    gives them; the rest goes through ``json.dumps``. Anything else in their place
    (another value type, a tokenizer.json without them) takes plain ``json.dumps``.
    ``tests/test_formats_save.py`` pins the equality.

    >>> doc = {"model": {"vocab": {"a": 0, "Ġb": 1}, "merges": [["a", "Ġb"]]}}
    >>> dumps_tokenizer_json(doc) == json.dumps(doc, ensure_ascii=False, indent=2)
    True
    """
    model = doc.get("model") if type(doc) is dict else None
    vocab = model.get("vocab") if type(model) is dict else None
    merges = model.get("merges") if type(model) is dict else None
    if (
        type(vocab) is not dict or type(merges) is not list
        or set(map(type, vocab)) - {str} or set(map(type, vocab.values())) - {int}
        or set(map(type, merges)) - {list} or set(map(len, merges)) - {2}
        or set(map(type, chain.from_iterable(merges))) - {str}
    ):
        return json.dumps(doc, ensure_ascii=False, indent=2)
    shell = {**doc, "model": {**model, "vocab": _VOCAB_MARK, "merges": _MERGES_MARK}}
    text = json.dumps(shell, ensure_ascii=False, indent=2)
    marks = [json.dumps(mark, ensure_ascii=False) for mark in (_VOCAB_MARK, _MERGES_MARK)]
    if any(text.count(mark) != 1 for mark in marks):  # a special token spelled like a mark
        return json.dumps(doc, ensure_ascii=False, indent=2)
    # "model" is at depth 1: its members' values open at depth 2, their items at depth 3
    quote, item, inner = json.encoder.encode_basestring, "\n" + " " * 6, "\n" + " " * 8
    vocab_text = "{" + ",".join(f"{item}{quote(k)}: {int.__repr__(v)}" for k, v in vocab.items()) + "\n    }" if vocab else "{}"
    merges_text = "[" + ",".join(
        f"{item}[{inner}{quote(a)},{inner}{quote(b)}{item}]" for a, b in merges
    ) + "\n    ]" if merges else "[]"
    # spliced by position, so nothing inside the two texts is searched again
    (i, first), (j, second) = sorted([(text.index(marks[0]), vocab_text), (text.index(marks[1]), merges_text)])
    return text[:i] + first + text[i + len(marks[0]):j] + second + text[j + len(marks[1]):]


def _merge_parts(merge, where: str, source: str) -> tuple[str, str]:
    """A merge as HF accepts it: ``"a b"`` (exactly one space) or ``["a", "b"]``."""
    if isinstance(merge, str):
        parts = merge.split(" ")
        if len(parts) != 2:
            raise ValueError(f"{source}: {where} must be two tokens separated by one space, got {show(merge)}")
        return parts[0], parts[1]
    expect(merge, (str, list), where, source)
    if len(merge) != 2 or not all(isinstance(part, str) for part in merge):
        raise ValueError(f"{source}: {where} must be a pair of two token strings, got {show(merge)}")
    return merge[0], merge[1]


def _may_overlap(a: str, b: str) -> bool:
    """Whether one string can share characters with the other in some text."""
    return a in b or b in a or any(a.endswith(b[:k]) or b.endswith(a[:k]) for k in range(1, min(len(a), len(b))))
