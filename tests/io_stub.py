"""A stand-in for ``fastbpe.io`` (the document model, being built in parallel) with the
shape the shard writer consumes (see the API contract): ``Block``, tasks with ``key()``
and ``blocks(cut=, errors=, block_bytes=)``, ``Corpus.resolve(files=, documents=, docs=)``
and ``Corpus.plan(n)``. Test-only and deliberately plain: whole ranges are read into
memory and documents are never cut (``cut`` is ignored); ``PiecesTask`` hands the writer
explicit pieces to test how it joins the pieces of one document.

``corpus()`` returns the real ``fastbpe.io.Corpus`` once it exists, else this one.
"""
from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class Block:
    data: bytes
    ends: np.ndarray
    last_open: bool
    where: str

    def pieces(self) -> list[str]:
        text_ends = self.ends.tolist()
        return [self.data[a:b].decode("utf-8") for a, b in zip([0] + text_ends[:-1], text_ends)]

    @classmethod
    def of(cls, pieces: list[str], last_open: bool = False, where: str = "stub") -> "Block":
        raw = [p.encode("utf-8") for p in pieces]
        return cls(b"".join(raw), np.cumsum([len(r) for r in raw], dtype=np.int64), last_open, where)


def _pack(docs, block_bytes: int, where: str):
    """Whole documents packed into blocks of about ``block_bytes``."""
    batch, size, first = [], 0, 0
    for i, d in enumerate(docs):
        batch.append(d)
        size += len(d.encode("utf-8"))
        if size >= block_bytes:
            yield Block.of(batch, where=f"{where} {first}")
            batch, size, first = [], 0, i + 1
    if batch:
        yield Block.of(batch, where=f"{where} {first}")


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
            yield Block.of(pieces, last_open, f"{self.name}: block {k}")


def hash_docs(docs) -> str:
    import hashlib

    h = hashlib.sha256()
    for d in docs:
        h.update(d.encode("utf-8") + b"\0")
    return h.hexdigest()


def _read(path: Path, errors: str) -> str:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8", errors=errors)


def split_documents(text: str, docs: str) -> list[str]:
    if docs == "file":
        parts = [text]
    elif docs == "lines":
        parts = text.split("\n")
    elif docs == "blank-line":
        parts = re.split(r"\n(?:[ \t\r]*\n)+", text)
    elif docs.startswith("sep:"):
        parts = text.split(docs[4:])
    else:
        raise ValueError(f"unknown document rule {docs!r}")
    return [p for p in parts if p]


class FileTask:
    """The documents of one file (the stub never splits a file into ranges)."""

    def __init__(self, path: Path, docs: str):
        self.path, self.docs = Path(path).absolute(), docs

    @property
    def nbytes(self) -> int:
        return self.path.stat().st_size

    def key(self) -> dict:
        st = self.path.stat()
        return {"path": str(self.path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "start": 0,
                "end": st.st_size, "docs": self.docs}

    def blocks(self, cut=None, errors="strict", block_bytes=1 << 20):
        yield from _pack(split_documents(_read(self.path, errors), self.docs), block_bytes, f"{self.path}: document")


class Corpus:
    def __init__(self, tasks):
        self.tasks = tasks

    @classmethod
    def resolve(cls, files=None, documents=None, *, docs=None, field=None, column=None):
        if documents is not None:
            return cls([ListTask(list(documents))])
        if isinstance(files, (str, Path)):
            files = [files]
        out = []
        for f in files:
            p = Path(f)
            if not p.is_file():
                raise FileNotFoundError(f"input file not found: {f}")
            out.append(FileTask(p, docs or "file"))
        return cls(out)

    def plan(self, n_parts: int = 1):
        return list(self.tasks)

    def documents(self, errors="strict") -> list[str]:
        return [p for t in self.tasks for b in t.blocks(errors=errors) for p in b.pieces()]


def corpus_class():
    try:
        from fastbpe.io import Corpus as Real

        return Real
    except ImportError:
        return Corpus
