"""The ``.tiktoken`` format: one ``base64(token bytes) rank`` pair per line.

It holds only the mergeable ranks. The split pattern and special tokens of the four
public OpenAI files are recognised by the file's sha256 (the hashes tiktoken checks), and
so are Meta's Llama 3 and Llama 4 ``tokenizer.model`` (``open_models``).
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import os
from pathlib import Path

from .._openai_public import ENCODINGS, RANKS_FILES
from ..io.atomic import atomic_write_bytes
from .open_models import META_FILES, OPEN_MODELS

#: sha256 of the public files -> (name, pattern, special tokens) of the encoding a bare
#: file loads as (the definitions live in ``fastbpe._openai_public``).
KNOWN_FILES = {
    f.sha256: (f.loads_as, ENCODINGS[f.loads_as].pat_str, dict(ENCODINGS[f.loads_as].special_tokens))
    for f in RANKS_FILES.values()
}


def parse_tiktoken_bpe(contents: bytes, source: str = "<bytes>") -> dict[bytes, int]:
    """Parse ``.tiktoken`` contents; malformed lines raise ValueError naming source and line.

    >>> parse_tiktoken_bpe(b"YQ== 0\\nYg== 1\\n")
    {b'a': 0, b'b': 1}
    """
    ranks: dict[bytes, int] = {}
    seen_ranks: dict[int, int] = {}
    for lineno, line in enumerate(contents.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 2:
            raise ValueError(f"{source}, line {lineno}: expected 'base64-token rank', got {line[:80]!r}")
        try:
            token = base64.b64decode(fields[0], validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{source}, line {lineno}: invalid base64 token {fields[0][:80].decode('ascii', 'replace')!r}") from None
        try:
            rank = int(fields[1])
        except ValueError:
            raise ValueError(
                f"{source}, line {lineno}: rank {fields[1][:40].decode('ascii', 'replace')!r} is not an integer"
            ) from None
        if rank < 0:
            raise ValueError(f"{source}, line {lineno}: negative rank {rank}")
        if token in ranks:
            raise ValueError(f"{source}, line {lineno}: duplicate token {token!r} (first at rank {ranks[token]})")
        if rank in seen_ranks:
            raise ValueError(f"{source}, line {lineno}: duplicate rank {rank} (first on line {seen_ranks[rank]})")
        ranks[token] = rank
        seen_ranks[rank] = lineno
    if not ranks:
        raise ValueError(f"{source}: no tokens found; is this a .tiktoken file?")
    return ranks


def known_meaning(contents: bytes, n_ranks: int) -> tuple[str, str, dict[str, int]] | None:
    """``(name, pattern, special_tokens)`` of a rank file we recognise by its sha256
    (``n_ranks``: how many ranks it holds, where Meta's special ids start), else None."""
    digest = hashlib.sha256(contents).hexdigest()
    if digest in KNOWN_FILES:
        return KNOWN_FILES[digest]
    if digest in META_FILES:
        model = OPEN_MODELS[META_FILES[digest]]
        return META_FILES[digest], model.pat_str, model.special_tokens(n_ranks)
    return None


def read_tiktoken(path: str | os.PathLike) -> tuple[dict[bytes, int], tuple | None]:
    """Read a ``.tiktoken`` file: ``(ranks, known)`` where ``known`` is
    ``(name, pattern, special_tokens)`` for a file ``known_meaning`` recognises, else None."""
    path = Path(path)
    contents = path.read_bytes()
    ranks = parse_tiktoken_bpe(contents, str(path))
    return ranks, known_meaning(contents, len(ranks))


def dump_tiktoken_bpe(ranks: dict[bytes, int]) -> bytes:
    """Serialise ranks in rank order, the way tiktoken writes them."""
    lines = [base64.b64encode(tok) + b" " + str(rank).encode() for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1])]
    return b"\n".join(lines) + b"\n"


def write_tiktoken(path: str | os.PathLike, ranks: dict[bytes, int]) -> Path:
    """Save ranks as a ``.tiktoken`` file (atomically)."""
    return atomic_write_bytes(path, dump_tiktoken_bpe(ranks))
