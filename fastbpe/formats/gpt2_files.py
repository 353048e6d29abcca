"""GPT-2's original pair of files: ``encoder.json`` (token text -> id) and ``vocab.bpe``
(``#version`` line, then one merge ``"left right"`` per line, in priority order).

Token text uses GPT-2's byte-to-unicode table (see ``hf_bpe``). Ids in encoder.json
become ranks; entries that no merge or byte produces (``<|endoftext|>``) are special
tokens.

>>> import tempfile, os
>>> d = tempfile.mkdtemp()
>>> enc_json, vocab_bpe = os.path.join(d, "encoder.json"), os.path.join(d, "vocab.bpe")
>>> write_gpt2_files(enc_json, vocab_bpe, {bytes([i]): i for i in range(256)} | {b"hi": 256}, {"<|endoftext|>": 257})
>>> ranks, specials = read_gpt2_files(enc_json, vocab_bpe)
>>> ranks[b"hi"], specials
(256, {'<|endoftext|>': 257})
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..io.atomic import atomic_write_text
from ..reference.jsonl import json_error
from .hf_bpe import hf_vocab, str_to_token, token_to_str


def read_gpt2_files(encoder_json: str | os.PathLike, vocab_bpe: str | os.PathLike) -> tuple[dict[bytes, int], dict[str, int]]:
    """``(ranks, special_tokens)`` from encoder.json + vocab.bpe."""
    encoder_json, vocab_bpe = Path(encoder_json), Path(vocab_bpe)
    try:
        encoder = json.loads(encoder_json.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{encoder_json}: not valid JSON ({json_error(exc)})") from None
    if not isinstance(encoder, dict):
        raise ValueError(f"{encoder_json}: expected a JSON object of token -> id")
    # 1. the tokens that bytes and merges produce
    produced: set[bytes] = {bytes([b]) for b in range(256)}
    for lineno, line in enumerate(vocab_bpe.read_text(encoding="utf-8").split("\n"), start=1):
        if not line or line.startswith("#version"):
            continue
        parts = line.split(" ")
        if len(parts) != 2:
            raise ValueError(f"{vocab_bpe}, line {lineno}: expected 'left right', got {line[:80]!r}")
        produced.add(str_to_token(parts[0], f"{vocab_bpe}, line {lineno}") + str_to_token(parts[1], f"{vocab_bpe}, line {lineno}"))
    # 2. ids from encoder.json; whatever nothing produces is a special token
    ranks: dict[bytes, int] = {}
    specials: dict[str, int] = {}
    for text, idx in encoder.items():
        if not isinstance(idx, int):
            raise ValueError(f"{encoder_json}: id of {text!r} is not an integer")
        try:
            tok = str_to_token(text, str(encoder_json))
        except ValueError:
            tok = None
        if tok is not None and tok in produced:
            ranks[tok] = idx
        else:
            specials[text] = idx
    missing = produced - ranks.keys()
    if missing:
        raise ValueError(f"{vocab_bpe}: {len(missing)} merged tokens are missing from {encoder_json.name} (e.g. {next(iter(missing))!r})")
    return ranks, specials


def write_gpt2_files(
    encoder_json: str | os.PathLike, vocab_bpe: str | os.PathLike, ranks: dict[bytes, int], special_tokens: dict[str, int]
) -> None:
    """Save encoder.json + vocab.bpe (each atomically): one merge per multi-byte token,
    in rank order, so merge priority equals rank."""
    encoder = hf_vocab(ranks, special_tokens)  # the same token -> id object, clashes refused
    lines = ["#version: 0.2"]
    for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(tok) < 2:
            continue
        splits = [
            (max(ranks[tok[:i]], ranks[tok[i:]]), ranks[tok[:i]], i)
            for i in range(1, len(tok))
            if tok[:i] in ranks and tok[i:] in ranks
        ]
        if not splits:
            raise ValueError(f"token {tok!r} (rank {rank}) cannot be written as a merge of two tokens")
        i = min(splits)[2]
        lines.append(f"{token_to_str(tok[:i])} {token_to_str(tok[i:])}")
    atomic_write_text(encoder_json, json.dumps(encoder, ensure_ascii=False))
    atomic_write_text(vocab_bpe, "\n".join(lines) + "\n")
