"""BERT ``vocab.txt``: one token per line, the line number (from 0) is the id.

Reading follows HF (trailing whitespace of a line is not part of the token) but is strict
where HF is silent: a duplicate token or an empty line raises ValueError naming the file and
the line (1-based), because either would silently shift or shadow ids.

>>> vocab_txt_text({"[UNK]": 0, "hi": 1}).splitlines()
['[UNK]', 'hi']
"""
from __future__ import annotations

import os
from pathlib import Path

from ..io.atomic import atomic_write_text


def read_vocab_txt(path: str | os.PathLike) -> dict[str, int]:
    """Token -> id from a vocab.txt. ``read_vocab_txt("vocab.txt")["[UNK]"] -> 100`` for BERT."""
    path = Path(path)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ValueError(f"{path}: line {line}: not valid UTF-8 ({exc.reason})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    vocab: dict[str, int] = {}
    for lineno, line in enumerate(lines, 1):
        token = line.rstrip()
        if not token:
            raise ValueError(f"{path}: line {lineno}: empty token (blank line)")
        if token in vocab:
            raise ValueError(
                f"{path}: line {lineno}: duplicate token {token!r} (first on line {vocab[token] + 1})"
            )
        vocab[token] = lineno - 1
    if not vocab:
        raise ValueError(f"{path}: empty vocabulary")
    return vocab


def vocab_txt_text(vocab: dict[str, int]) -> str:
    """The file text for ``vocab``; ids must be exactly 0..n-1. ``{"a": 0, "b": 1} -> "a\\nb\\n"``"""
    by_id = sorted((i, t) for t, i in vocab.items())
    for expected, (i, token) in enumerate(by_id):
        if i != expected:
            raise ValueError(f"vocab.txt needs ids 0..{len(by_id) - 1} without gaps; id {expected} is missing")
        if not token or token != token.strip() or "\n" in token or "\r" in token:
            raise ValueError(f"token {token!r} (id {i}) cannot be written to vocab.txt (whitespace at an end or a newline)")
    return "".join(t + "\n" for _, t in by_id)


def write_vocab_txt(path: str | os.PathLike, vocab: dict[str, int]) -> Path:
    """Write ``vocab`` atomically as vocab.txt and return the path."""
    return atomic_write_text(path, vocab_txt_text(vocab))
