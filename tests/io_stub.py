"""Hand-made tasks for the shard writer's tests, with the shape of ``fastbpe.io.Task``
(``key()``, ``blocks(cut=, errors=, block_bytes=)`` of real ``fastbpe.io.Block``s):
``ListTask`` (documents from a list, optionally failing mid-task) and ``PiecesTask``
(explicit pieces and ``last_open`` flags, to test how a cut document is joined)."""
from __future__ import annotations

import numpy as np

from fastbpe.io import Block
from fastbpe.reference import documents as spec


def block_of(pieces: list[str], last_open: bool = False, where: str = "stub") -> Block:
    """A real ``fastbpe.io.Block`` of explicit pieces."""
    raw = [p.encode("utf-8") for p in pieces]
    return Block(b"".join(raw), np.cumsum([len(r) for r in raw], dtype=np.int64), last_open, [(0, where)])


def _pack(docs, block_bytes: int, where: str):
    """Whole documents packed into blocks of about ``block_bytes``."""
    batch, size, first = [], 0, 0
    for i, d in enumerate(docs):
        batch.append(d)
        size += len(d.encode("utf-8"))
        if size >= block_bytes:
            yield block_of(batch, where=f"{where} {first}")
            batch, size, first = [], 0, i + 1
    if batch:
        yield block_of(batch, where=f"{where} {first}")


class ListTask:
    """Documents from a list of str (one per item, empty ones dropped)."""

    def __init__(self, docs: list[str], name: str = "documents", fail_after: int | None = None, hook=None):
        self.docs, self.name, self.fail_after, self.hook = list(docs), name, fail_after, hook

    @property
    def nbytes(self) -> int:
        return sum(len(d.encode("utf-8")) for d in self.docs)

    def key(self) -> dict:
        return {"documents": self.name, "n": len(self.docs), "sha": hash_docs(self.docs)}

    def blocks(self, cut=None, errors="strict", block_bytes=1 << 20):
        for k, b in enumerate(_pack([d for d in self.docs if d], block_bytes, f"{self.name}: from item")):
            if self.fail_after is not None and k >= self.fail_after:
                raise RuntimeError("simulated failure in the middle of a task")
            yield b
        if self.hook is not None:
            self.hook()


class PiecesTask:
    """Blocks given as lists of pieces with their ``last_open`` flags."""

    def __init__(self, blocks: list[tuple[list[str], bool]], name: str = "pieces"):
        self.spec, self.name = blocks, name

    def key(self) -> dict:
        return {"pieces": self.spec}

    def blocks(self, cut=None, errors="strict", block_bytes=1 << 20):
        for k, (pieces, last_open) in enumerate(self.spec):
            yield block_of(pieces, last_open, f"{self.name}: block {k}")


def hash_docs(docs) -> str:
    import hashlib

    h = hashlib.sha256()
    for d in docs:
        h.update(d.encode("utf-8") + b"\0")
    return h.hexdigest()


def split_documents(text: str, docs: str | None) -> list[str]:
    """The specification's split (``reference.documents``)."""
    return spec.split_documents(text, docs or spec.DEFAULT_RULE)
