"""Write a corpus as token shards that GPT training scripts memory-map.

Layout of ``DIR`` (one token stream cut into shards)::

    shard_000000.npy | .bin   token ids, uint16 or uint32, little-endian
    shard_000001.npy | .bin   ...
    index.json                format, dtype, separator id, tokenizer, per-shard token counts,
                              documents, tokens, bytes
    doc_offsets.npy           int64, start of each document in the stream (token position)

The stream is ``doc0 SEP doc1 SEP doc2 ...``: exactly one separator (``<|endoftext|>`` for
BPE, ``[SEP]`` for WordPiece unless ``--eot`` says otherwise) *between* documents, none
before the first or after the last. Every shard holds ``shard_tokens`` tokens except the
last; a document may continue in the next shard (training samples windows from the whole
stream, as nanoGPT does). ``.npy`` files load with ``np.load(path, mmap_mode="r")``;
``.bin`` files are raw arrays with no header: ``np.memmap(path, dtype="<u2", mode="r")``
(the dtype is in ``index.json``).

Decisions:

- **What a document is.** Each input file is one document (source files, books, web
  pages saved one per file). With ``jsonl_field=NAME`` each line of a file is a JSON object
  whose field ``NAME`` is a document (the usual dump of a web corpus); with
  ``doc_sep_lines=True`` each line (without its ``"\\n"``) is a document. Empty documents
  are kept (they still get a separator), so ``documents`` counts what was read.
- **Special-token text inside a document** (BPE) follows the library's rule, as
  ``Encoding.encode`` and every other command do (``fastbpe.special``): by default it
  raises ``DisallowedSpecialInDocument`` (a ValueError naming the document), because a
  web page that holds the string ``<|endoftext|>`` must not end a document silently,
  nor be rewritten silently. ``disallowed_special=()`` (``--special-as-text``) encodes
  it as ordinary text, as nanoGPT's ``encode_ordinary`` does; ``allowed_special``
  (``--allow-special``) writes its id, for corpora whose documents already carry
  markers. The separator between documents is the writer's, not the text's: it is
  always written, whatever the rule. WordPiece documents are the text alone: no
  ``[CLS]``/``[SEP]`` of their own and none of a tokenizer.json's truncation or padding.
- Files may be gzip-compressed (``.gz``); invalid UTF-8 raises ValueError naming the
  file and where, unless ``errors="replace"``.
- Every shard is written to a temporary name and renamed, so a shard that exists is whole.

>>> import tempfile, numpy as np
>>> from fastbpe.encoding import get_toy_encoding
>>> d = tempfile.mkdtemp()
>>> s = write_shards(get_toy_encoding(), ["hi", "hi hi"], d, eot_token="<|eot|>", progress=False)
>>> np.load(d + "/shard_000000.npy").tolist()
[256, 257, 256, 32, 256]
"""
from __future__ import annotations

import gzip
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import _data
from .show import is_wordpiece
from .special import find_disallowed, resolve_special_sets

FORMATS = ("npy", "bin")
DTYPES = {"uint16": np.dtype("<u2"), "uint32": np.dtype("<u4")}
#: Documents encoded per batch call (the native core spreads a batch over threads).
BATCH_DOCS = 256
BATCH_BYTES = 8 << 20


@dataclass
class ShardSummary:
    documents: int = 0
    tokens: int = 0
    bytes: int = 0
    seconds: float = 0.0
    shards: list[dict] = field(default_factory=list)

    @property
    def bytes_per_token(self) -> float:
        # Separators are not text: leave them out of the compression figure.
        text_tokens = self.tokens - max(0, self.documents - 1)
        return self.bytes / text_tokens if text_tokens > 0 else float("nan")

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else float("nan")

    def line(self) -> str:
        return (f"{self.documents:,} documents, {self.tokens:,} tokens in {len(self.shards)} shard(s), "
                f"{self.bytes:,} bytes, {self.bytes_per_token:.2f} bytes/token, "
                f"{self.seconds:.2f} s ({self.mb_per_s:.2f} MB/s)")


# --------------------------------------------------------------------------- documents
def iter_documents(files: list[str], *, jsonl_field: str | None = None, doc_sep_lines: bool = False,
                   errors: str = "strict") -> Iterator[str]:
    """Documents of ``files`` by the rule in the module docstring; errors name file and line."""
    for _, _, doc in iter_sourced_documents(files, jsonl_field=jsonl_field, doc_sep_lines=doc_sep_lines,
                                            errors=errors):
        yield doc


def iter_sourced_documents(files: list[str], *, jsonl_field: str | None = None, doc_sep_lines: bool = False,
                           errors: str = "strict") -> Iterator[tuple[str, int | None, str]]:
    """``(file, line, document)`` for each document (line is None for whole files)."""
    if jsonl_field is not None and doc_sep_lines:
        raise ValueError("choose one of --jsonl-field and --doc-sep-lines")
    for f in files:
        path = Path(f)
        if not path.is_file():
            raise FileNotFoundError(f"input file not found: {f}")
        if jsonl_field is None and not doc_sep_lines:
            yield f, None, "".join(_data.iter_file_blocks(path, errors=errors))
            continue
        with (gzip.open if _data.is_gzip(path) else open)(path, "rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                try:
                    line = raw.decode("utf-8", errors=errors)
                except UnicodeDecodeError as exc:
                    raise ValueError(f"{f}, line {lineno}: invalid UTF-8 at column {exc.start + 1}; "
                                     "pass errors='replace' to replace invalid bytes") from None
                if doc_sep_lines:
                    yield f, lineno, line[:-1] if line.endswith("\n") else line
                    continue
                if not line.strip():
                    continue  # blank lines between JSON objects are not documents
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{f}, line {lineno}: not JSON ({exc.msg})") from None
                if not isinstance(obj, dict) or jsonl_field not in obj:
                    raise ValueError(f"{f}, line {lineno}: no field {jsonl_field!r}")
                value = obj[jsonl_field]
                if not isinstance(value, str):
                    raise ValueError(f"{f}, line {lineno}: field {jsonl_field!r} is {type(value).__name__}, not a string")
                yield f, lineno, value


class DisallowedSpecialInDocument(ValueError):
    """Special-token text that the rule refuses, in document ``document`` (0-based, the
    index of ``doc_offsets.npy``) at character ``position``."""

    def __init__(self, document: int, token: str, position: int):
        super().__init__(
            f"document {document}: special-token text {token!r} at character {position}; pass "
            f"allowed_special={{{token!r}}} to write its id, or disallowed_special=() to encode it as text"
        )
        self.document, self.token, self.position = document, token, position


def _batches(docs: Iterable[str]) -> Iterator[list[str]]:
    batch, size = [], 0
    for d in docs:
        batch.append(d)
        size += len(d)
        if len(batch) >= BATCH_DOCS or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def separator_id(tok, eot_token: str | None) -> int:
    """The id put between documents; ValueError when the tokenizer lacks it."""
    if is_wordpiece(tok):
        name = eot_token or "[SEP]"
        idx = tok.token_to_id(name)
        if idx is None:
            raise ValueError(f"the tokenizer has no token {name!r} to put between documents; pass --eot TOKEN")
        return idx
    name = eot_token or "<|endoftext|>"
    specials = tok.special_tokens
    if name in specials:
        return specials[name]
    raise ValueError(
        f"the tokenizer has no special token {name!r} to put between documents "
        f"(it has {sorted(specials) or 'none'}); train with --special '<|endoftext|>' or pass --eot TOKEN"
    )


def document_ids_batch(tok, texts: list[str], num_threads: int = 1, *, allowed_special=frozenset(),
                       disallowed_special="all") -> list[list[int]]:
    """The ids each text contributes as a document, under the special-token rule
    (``fastbpe.special``): BPE ``encode_batch``; WordPiece the text alone, with no
    ``[CLS]``/``[SEP]`` and none of a tokenizer.json's truncation or padding (a BERT
    file's 128-token padding is not a document). ``stats`` and ``count`` count these.
    """
    if not is_wordpiece(tok):
        return tok.encode_batch(texts, num_threads=num_threads, allowed_special=allowed_special,
                                disallowed_special=disallowed_special)
    allowed, disallowed = resolve_special_sets(allowed_special, disallowed_special,
                                               frozenset(tok.special_tokens_set))
    if not allowed and not disallowed:
        return tok.encode_ordinary_batch(texts, num_threads=num_threads)
    return [tok.encode_text(t, allowed_special=allowed, disallowed_special=disallowed) for t in texts]


def _encode_documents(tok, batch: list[str], first: int, num_threads: int, allowed_special, disallowed_special):
    """``document_ids_batch`` under the rule; a refused document is named by its number."""
    try:
        return document_ids_batch(tok, batch, num_threads, allowed_special=allowed_special,
                                  disallowed_special=disallowed_special)
    except ValueError:
        _, disallowed = resolve_special_sets(allowed_special, disallowed_special, frozenset(tok.special_tokens_set))
        for i, doc in enumerate(batch):
            found = find_disallowed(doc, disallowed)
            if found is not None:
                raise DisallowedSpecialInDocument(first + i, *found) from None
        raise


# --------------------------------------------------------------------------- writing
class _ShardWriter:
    def __init__(self, out_dir: Path, fmt: str, dtype: np.dtype, shard_tokens: int):
        self.out_dir, self.fmt, self.dtype, self.shard_tokens = out_dir, fmt, dtype, shard_tokens
        self.parts: list[np.ndarray] = []
        self.filled = 0
        self.shards: list[dict] = []

    def add(self, ids: np.ndarray) -> None:
        while len(ids):
            take = min(len(ids), self.shard_tokens - self.filled)
            self.parts.append(ids[:take])
            self.filled += take
            ids = ids[take:]
            if self.filled == self.shard_tokens:
                self.flush()

    def flush(self) -> None:
        if not self.filled:
            return
        arr = np.concatenate(self.parts).astype(self.dtype, copy=False)
        name = f"shard_{len(self.shards):06d}.{self.fmt}"
        path = self.out_dir / name
        tmp = self.out_dir / f".{name}.tmp"
        with open(tmp, "wb") as fh:
            if self.fmt == "npy":
                np.lib.format.write_array(fh, arr, allow_pickle=False)
            else:
                fh.write(arr.tobytes())
        os.replace(tmp, path)
        self.shards.append({"file": name, "tokens": int(len(arr))})
        self.parts, self.filled = [], 0


def write_shards(
    tok,
    documents: Iterable[str],
    out_dir: str | os.PathLike,
    *,
    fmt: str = "npy",
    dtype: str = "uint16",
    shard_tokens: int = 100_000_000,
    eot_token: str | None = None,
    num_threads: int = 1,
    progress: bool = True,
    total_bytes: int | None = None,
    allowed_special=frozenset(),
    disallowed_special="all",
) -> ShardSummary:
    """Encode ``documents`` and write the shards, index and document offsets to ``out_dir``.

    ``allowed_special`` / ``disallowed_special``: the rule for special-token text inside
    documents (BPE; see the module docstring), as in ``Encoding.encode``."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown shard format {fmt!r}; choose one of {FORMATS}")
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose uint16 or uint32")
    if isinstance(shard_tokens, bool) or not isinstance(shard_tokens, int) or shard_tokens < 1:
        raise ValueError(f"shard_tokens must be a positive int, got {shard_tokens!r}")
    np_dtype = DTYPES[dtype]
    max_id = max(tok.vocab.values(), default=0) if is_wordpiece(tok) else tok.max_token_value
    if max_id > np.iinfo(np_dtype).max:
        raise ValueError(f"dtype {dtype} cannot hold ids up to {max_id} of this tokenizer; use --dtype uint32")
    sep = separator_id(tok, eot_token)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for old in list(out.glob("shard_*.npy")) + list(out.glob("shard_*.bin")):
        old.unlink()  # never mix shards of two runs

    writer = _ShardWriter(out, fmt, np_dtype, shard_tokens)
    summary = ShardSummary()
    offsets: list[int] = []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total_bytes, unit="B", unit_scale=True, desc="encoding", file=sys.stderr)
    sep_arr = np.array([sep], dtype=np.int64)
    t0 = time.perf_counter()
    try:
        for batch in _batches(documents):
            encoded = _encode_documents(tok, batch, summary.documents, num_threads,
                                        allowed_special, disallowed_special)
            n_bytes = 0
            for doc, ids in zip(batch, encoded):
                if summary.documents:
                    writer.add(sep_arr)
                    summary.tokens += 1
                offsets.append(summary.tokens)
                writer.add(np.asarray(ids, dtype=np.int64))
                summary.tokens += len(ids)
                summary.documents += 1
                n_bytes += len(doc.encode("utf-8"))
            summary.bytes += n_bytes
            if bar is not None:
                bar.update(n_bytes)
        writer.flush()
    finally:
        if bar is not None:
            bar.close()
    summary.seconds = time.perf_counter() - t0
    summary.shards = writer.shards

    np.save(out / "doc_offsets.npy", np.asarray(offsets, dtype=np.int64))
    index = {
        "format": fmt,
        "dtype": dtype,
        "byteorder": "little",
        "separator_id": sep,
        "separator": "between documents",
        "tokenizer": getattr(tok, "name", type(tok).__name__),
        "shard_tokens": shard_tokens,
        "documents": summary.documents,
        "tokens": summary.tokens,
        "bytes": summary.bytes,
        "shards": summary.shards,
        "doc_offsets": "doc_offsets.npy",
    }
    tmp = out / ".index.json.tmp"
    tmp.write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, out / "index.json")
    return summary


def read_shards(out_dir: str | os.PathLike) -> np.ndarray:
    """The whole token stream of a shard folder (memory-mapped pieces, concatenated)."""
    out = Path(out_dir)
    index = json.loads((out / "index.json").read_text(encoding="utf-8"))
    dtype = DTYPES[index["dtype"]]
    parts = []
    for s in index["shards"]:
        p = out / s["file"]
        parts.append(np.load(p, mmap_mode="r") if index["format"] == "npy" else np.memmap(p, dtype=dtype, mode="r"))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


__all__ = [
    "DisallowedSpecialInDocument", "ShardSummary", "iter_documents", "iter_sourced_documents", "read_shards",
    "separator_id", "write_shards",
]
