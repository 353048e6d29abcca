"""Mistral's Tekken JSON (``tekken_*.json``: Nemo, Pixtral): tiktoken ranks in Mistral's layout.

The file holds ``vocab`` (``{"rank", "token_bytes" (base64), "token_str"}`` by rank),
``config`` (``pattern``, ``num_vocab_tokens``, ``default_vocab_size``,
``default_num_special_tokens``, ``version``) and optionally ``special_tokens``. The id
layout is mistral-common's ``Tekkenizer`` (the reference; ``tests/test_tekken.py``
compares ids with it when it is installed):

- ids ``0 .. n_special - 1`` are the special tokens: the file's ``special_tokens``
  (``{"rank", "token_str", "is_control"}``), or for files of version v7 and older, which
  have none, the twenty of ``DEFAULT_SPECIAL_TOKENS`` (``<unk>``, ``<s>``, ``</s>``,
  ``[INST]``, ...); the remaining slots are ``<SPECIAL_{id}>``;
- the first ``default_vocab_size - n_special`` ranks are the mergeable tokens, each at
  id ``rank + n_special`` (the file's later ranks are not used).

Tekkenizer encodes special-token text as text (``encode_ordinary``); as everywhere in
fastbpe, ``encode`` treats it by tiktoken's rules.

>>> doc = {"config": {"pattern": r"\\S+|\\s+", "num_vocab_tokens": 256, "default_vocab_size": 259,
...        "default_num_special_tokens": 3, "version": "v3"},
...        "vocab": [{"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": None} for i in range(256)],
...        "special_tokens": [{"rank": 0, "token_str": "<unk>", "is_control": True}, {"rank": 1, "token_str": "<s>", "is_control": True}]}
>>> ranks, pattern, specials = read_tekken_json(doc)
>>> ranks[b"a"], specials
(100, {'<unk>': 0, '<s>': 1, '<SPECIAL_2>': 2})
"""
from __future__ import annotations

import base64
import binascii

from ._hfjson import expect, field, show

#: mistral-common's ``Tekkenizer.DEPRECATED_SPECIAL_TOKENS``: the specials of files of
#: version v7 and older, which do not list them.
DEFAULT_SPECIAL_TOKENS = (
    "<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
    "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]",
)

_OLD_VERSIONS = {"v1", "v2", "v3", "v4", "v5", "v6", "v7"}


def is_tekken(data) -> bool:
    """Whether a parsed JSON document is a Tekken file (and not a tokenizer.json)."""
    return isinstance(data, dict) and "model" not in data and isinstance(data.get("config"), dict) and isinstance(data.get("vocab"), list)


def _count(config: dict, key: str, source: str) -> int:
    value = field(config, key, int, "config", source)
    if value < 0:
        raise ValueError(f"{source}: config.{key} must be >= 0, got {value}")
    return value


def read_tekken_json(data: dict, source: str = "<json>") -> tuple[dict[bytes, int], str, dict[str, int]]:
    """``(ranks, pattern, special_tokens)`` with mistral-common's ids (module docstring);
    a malformed file raises ValueError naming the JSON path."""
    config = field(data, "config", dict, "", source)
    pattern = field(config, "pattern", str, "config", source)
    n_special = _count(config, "default_num_special_tokens", source)
    vocab_size = _count(config, "default_vocab_size", source)
    version = field(config, "version", str, "config", source, default="v3")
    vocab = field(data, "vocab", list, "", source)
    n_inner = vocab_size - n_special
    if not 0 <= n_inner <= len(vocab):
        raise ValueError(f"{source}: config.default_vocab_size {vocab_size} - {n_special} special tokens "
                         f"needs {n_inner} ranks; vocab holds {len(vocab)}")
    ranks: dict[bytes, int] = {}
    for i, entry in enumerate(vocab[:n_inner]):
        where = f"vocab[{i}]"
        expect(entry, dict, where, source)
        if field(entry, "rank", int, where, source) != i:
            raise ValueError(f"{source}: {where}.rank is {show(entry['rank'])}, expected {i} (ranks in order)")
        try:
            token = base64.b64decode(field(entry, "token_bytes", str, where, source), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{source}: {where}.token_bytes is not base64: {show(entry['token_bytes'])}") from None
        if token in ranks:
            raise ValueError(f"{source}: {where} repeats the token of vocab[{ranks[token] - n_special}]")
        ranks[token] = i + n_special
    listed = field(data, "special_tokens", (list, None), "", source, default=None)
    if listed is None:
        if version not in _OLD_VERSIONS:
            raise ValueError(f"{source}: special_tokens is missing, which a version {version} file must list")
        names = list(DEFAULT_SPECIAL_TOKENS)
    else:
        names = []
        for i, entry in enumerate(listed):
            where = f"special_tokens[{i}]"
            expect(entry, dict, where, source)
            if field(entry, "rank", int, where, source) != i:
                raise ValueError(f"{source}: {where}.rank is {show(entry['rank'])}, expected {i}")
            names.append(field(entry, "token_str", str, where, source))
    if len(names) > n_special:
        raise ValueError(f"{source}: {len(names)} special tokens for {n_special} slots (config.default_num_special_tokens)")
    names += [f"<SPECIAL_{i}>" for i in range(len(names), n_special)]
    if len(set(names)) != len(names):
        raise ValueError(f"{source}: special_tokens lists a token twice")
    return ranks, pattern, {name: i for i, name in enumerate(names)}
