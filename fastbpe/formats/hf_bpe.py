"""Hugging Face ``tokenizer.json`` for byte-level BPE (GPT-2 style).

HF stores token bytes as text through GPT-2's byte-to-unicode table, and merges as
pairs of such strings. What we write is what ``transformers``' TikTokenConverter
writes: a ``Split`` pre-tokenizer with the pattern, then ``ByteLevel`` without its own
regex, ``ignore_merges=True`` (a chunk that is a whole token is taken as is, as
tiktoken does) and the special tokens as added tokens.
"""
from __future__ import annotations

import json
import os
import re
import warnings
from functools import lru_cache
from pathlib import Path

from ..reference import patterns
from ._atomic import atomic_write_text

# HF's ByteLevel pre-tokenizer regex (GPT-2's original pattern) splits like GPT2.
_HF_BYTELEVEL_PATTERN = patterns.GPT2


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
    """Token bytes as HF's byte-level text (``b" the"`` -> ``"Ġthe"``)."""
    table = bytes_to_unicode()
    return "".join(table[b] for b in token)


def str_to_token(text: str, source: str = "<json>") -> bytes:
    table = unicode_to_bytes()
    try:
        return bytes(table[c] for c in text)
    except KeyError as exc:
        raise ValueError(f"{source}: token {text!r} has character {exc.args[0]!r} outside the byte-level alphabet") from None


def _merges_of(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """Every split of every multi-byte token into two tokens, ordered by the token's
    rank (then by the parts' ranks), so HF's merge priority equals tiktoken's rank."""
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


def to_hf_json(ranks: dict[bytes, int], pattern: str, special_tokens: dict[str, int]) -> dict:
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
             "normalized": False, "special": True}
            for s, i in sorted(special_tokens.items(), key=lambda kv: kv[1])
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": pretok},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
            "vocab": {token_to_str(t): r for t, r in sorted(ranks.items(), key=lambda kv: kv[1])},
            "merges": [[token_to_str(a), token_to_str(b)] for a, b in _merges_of(ranks)],
        },
    }


def write_hf_bpe(path: str | os.PathLike, ranks: dict[bytes, int], pattern: str, special_tokens: dict[str, int]) -> Path:
    """Save as ``tokenizer.json`` (atomically); ``tokenizers.Tokenizer.from_file`` loads it."""
    return atomic_write_text(path, json.dumps(to_hf_json(ranks, pattern, special_tokens), ensure_ascii=False, indent=2))


def _find_pattern(pre_tokenizer: dict | None, source: str) -> str:
    """The split pattern of a GPT-2 style pre-tokenizer (Split regex, or ByteLevel's own)."""
    if not pre_tokenizer:
        raise ValueError(f"{source}: no pre_tokenizer; a byte-level BPE needs a split pattern")
    kind = pre_tokenizer.get("type")
    if kind == "Sequence":
        found = None
        for p in pre_tokenizer.get("pretokenizers", []):
            if p.get("type") == "Split":
                pat = p.get("pattern", {})
                if "Regex" not in pat:
                    raise ValueError(f"{source}: Split pre-tokenizer with a plain string pattern is not supported")
                if p.get("behavior") != "Isolated" or p.get("invert"):
                    raise ValueError(f"{source}: only Split(behavior='Isolated', invert=false) is supported")
                found = _ONIGURUMA_FORMS.get(pat["Regex"], pat["Regex"])
            elif p.get("type") == "ByteLevel":
                if p.get("use_regex", True):
                    found = found or _HF_BYTELEVEL_PATTERN
                if p.get("add_prefix_space"):
                    raise ValueError(f"{source}: ByteLevel add_prefix_space=true is not supported")
            else:
                raise ValueError(f"{source}: unsupported pre-tokenizer {p.get('type')!r}")
        if found is None:
            raise ValueError(f"{source}: no split pattern found in the pre_tokenizer")
        return found
    if kind == "ByteLevel":
        if pre_tokenizer.get("add_prefix_space"):
            raise ValueError(f"{source}: ByteLevel add_prefix_space=true is not supported")
        return _HF_BYTELEVEL_PATTERN
    raise ValueError(f"{source}: unsupported pre-tokenizer {kind!r} for byte-level BPE")


def from_hf_json(data: dict, source: str = "<json>") -> tuple[dict[bytes, int], str, dict[str, int]]:
    """``(ranks, pattern, special_tokens)`` from a parsed byte-level BPE tokenizer.json.

    The vocabulary ids become tiktoken ranks, which is exact only when the merge list is
    in the order of the merged tokens' ids (true for GPT-2, for files HF trains and for
    files fastbpe writes); otherwise ValueError explains why it can't be represented.
    """
    model = data.get("model") or {}
    if model.get("type") != "BPE":
        raise ValueError(f"{source}: model type {model.get('type')!r} is not BPE")
    if data.get("normalizer") not in (None, {}):
        raise ValueError(f"{source}: normalizers are not supported for byte-level BPE")
    specials = {t["content"]: int(t["id"]) for t in data.get("added_tokens", []) if t.get("special", False)}
    ranks: dict[bytes, int] = {}
    for text, idx in model.get("vocab", {}).items():
        if text in specials:
            continue
        tok = str_to_token(text, source)
        if tok in ranks:
            raise ValueError(f"{source}: duplicate token {text!r}")
        ranks[tok] = int(idx)
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise ValueError(f"{source}: the vocabulary lacks {len(missing)} single-byte tokens (e.g. byte {missing[0]}); not a byte-level BPE")
    last = -1
    for n, merge in enumerate(model.get("merges", []), start=1):
        a, b = merge.split(" ") if isinstance(merge, str) else merge
        merged = str_to_token(a, source) + str_to_token(b, source)
        rank = ranks.get(merged)
        if rank is None:
            raise ValueError(f"{source}: merge {n} ({a!r}, {b!r}) makes a token that is not in the vocabulary")
        if rank < last:
            raise ValueError(
                f"{source}: merge {n} ({a!r}, {b!r}) is out of id order; merge priorities that differ "
                "from token ids cannot be represented as tiktoken ranks"
            )
        last = rank
    return ranks, _find_pattern(data.get("pre_tokenizer"), source), specials


def read_hf_bpe(path: str | os.PathLike) -> tuple[dict[bytes, int], str, dict[str, int]]:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    return from_hf_json(data, str(path))
