"""Training inputs: a path, a list of paths, or an iterable of str, read as documents.

Decision (what a document is): an item of an iterable of str is one document; in a file,
every line (split on ``"\n"`` only, the ``"\n"`` kept) is one document, as HF
``tokenizers`` and sentencepiece read text files. Pre-tokenizer chunks never cross a
document boundary, so training on a file equals training on an iterator of its lines,
however the file is cut into blocks or spread over threads and machines.

Files are streamed in blocks of whole lines (never the whole corpus in memory); ``.gz``
files are decompressed on the fly. Invalid UTF-8 raises ValueError naming the file and
the byte offset, unless ``errors="replace"``.
"""
from __future__ import annotations

import gzip
import io
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

#: Bytes read from a file per block; blocks end at a line boundary.
BLOCK_SIZE = 1 << 20


def _is_pathlike(x) -> bool:
    return isinstance(x, (str, os.PathLike))


def resolve_inputs(data) -> list[Path] | None:
    """Return the list of input files if ``data`` names files, else None (texts).

    Every file is checked before any work starts: a missing one raises
    FileNotFoundError naming it.

    >>> resolve_inputs(["some text"]) is None
    True
    """
    if isinstance(data, (bytes, bytearray)):
        raise TypeError("training data must be a path, a list of paths or an iterable of str, not bytes")
    if _is_pathlike(data):
        paths = [Path(data)]
    elif isinstance(data, (list, tuple)) and data and all(isinstance(x, os.PathLike) for x in data):
        paths = [Path(x) for x in data]
    elif isinstance(data, (list, tuple)) and data and all(isinstance(x, str) for x in data) and all(
        os.path.exists(x) for x in data
    ):
        paths = [Path(x) for x in data]
    else:
        return None
    for p in paths:
        if not p.exists():
            raise FileNotFoundError(f"training file not found: {p}")
        if p.is_dir():
            raise IsADirectoryError(f"training input is a directory, not a file: {p}")
    return paths


def utf8_error(source, offset: int, exc: UnicodeDecodeError) -> ValueError:
    """The error for bytes that are not UTF-8: names the file and the absolute offset."""
    return ValueError(
        f"{source}: not valid UTF-8 at byte offset {offset + exc.start} "
        f"({exc.reason}); pass errors='replace' to replace invalid bytes"
    )


def _open_binary(path: Path):
    fh = open(path, "rb")
    if fh.read(2) == b"\x1f\x8b":
        fh.seek(0)
        return gzip.GzipFile(fileobj=fh, mode="rb")
    fh.seek(0)
    return fh


def iter_file_blocks(path: Path, errors: str = "strict", block_size: int = BLOCK_SIZE) -> Iterator[str]:
    """Yield the file's text in blocks that end at a newline (or the end of the file)."""
    offset = 0  # byte offset of the start of `pending` in the (decompressed) file
    pending = b""
    with _open_binary(path) as fh:
        while True:
            raw = fh.read(block_size)
            buf = pending + raw
            if not raw:
                cut = len(buf)
            else:
                cut = buf.rfind(b"\n") + 1
                if cut == 0:  # one very long line: keep reading
                    pending = buf
                    continue
            block, pending = buf[:cut], buf[cut:]
            if block:
                try:
                    yield block.decode("utf-8", errors=errors)
                except UnicodeDecodeError as exc:
                    raise utf8_error(path, offset, exc) from None
            offset += len(block)
            if not raw:
                return


def iter_texts(data, errors: str = "strict") -> Iterator[str]:
    """Yield the text of ``data``: file blocks for paths, the items for an iterable of str."""
    paths = resolve_inputs(data)
    if paths is not None:
        for p in paths:
            yield from iter_file_blocks(p, errors=errors)
        return
    if isinstance(data, str):  # unreachable: str is handled as a path above
        raise FileNotFoundError(data)
    if not isinstance(data, Iterable):
        raise TypeError(
            f"training data must be a path, a list of paths or an iterable of str, not {type(data).__name__}"
        )
    for i, doc in enumerate(data):
        if not isinstance(doc, str):
            raise TypeError(f"training data item {i} is {type(doc).__name__}, expected str")
        yield doc


def split_lines(block: str) -> list[str]:
    """Split on ``"\n"`` only, keeping it (``str.splitlines`` also splits on ``\r``, ``\x0c``, …).

    >>> split_lines("a\\rb\\nc")
    ['a\\rb\\n', 'c']
    """
    parts = block.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def iter_documents(data, errors: str = "strict") -> Iterator[str]:
    """Yield documents: each line of each file, or each item of an iterable of str."""
    if resolve_inputs(data) is not None:
        for block in iter_texts(data, errors=errors):
            yield from split_lines(block)
    else:
        yield from iter_texts(data, errors=errors)


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def split_ranges(path: Path, n_parts: int) -> list[tuple[int, int]]:
    """Cut a plain file into about ``n_parts`` byte ranges ``[start, end)``; a range
    owns the lines that *start* inside it, so ranges can be read independently (a gzip
    file is one range: it can't be entered in the middle).

    >>> import tempfile, os; f = tempfile.NamedTemporaryFile(delete=False); _ = f.write(b"ab\\ncd\\n"); f.close()
    >>> split_ranges(Path(f.name), 2); os.unlink(f.name)
    [(0, 3), (3, 6)]
    """
    size = path.stat().st_size
    if n_parts <= 1 or size == 0 or is_gzip(path):
        return [(0, size)]
    cuts = [0]
    with open(path, "rb") as fh:
        for i in range(1, n_parts):
            fh.seek(max(size * i // n_parts - 1, cuts[-1]))
            fh.readline()  # move to the start of the next line
            pos = fh.tell()
            if cuts[-1] < pos < size:
                cuts.append(pos)
    cuts.append(size)
    return list(zip(cuts, cuts[1:]))


def iter_range_lines(path: Path, start: int, end: int, errors: str = "strict") -> Iterator[str]:
    """Yield the documents (lines) of a byte range made by ``split_ranges``."""
    path = Path(path)
    if is_gzip(path):
        if start != 0:
            raise ValueError(f"{path}: a gzip file can only be read as a whole")
        for block in iter_file_blocks(path, errors=errors):
            yield from split_lines(block)
        return
    with open(path, "rb") as fh:
        fh.seek(start)
        yield from iter_binary_lines(fh, path, start, end, errors)


def iter_binary_lines(fh, source, offset: int, end: int | None = None, errors: str = "strict") -> Iterator[str]:
    """Decode the lines of an open binary file from ``offset`` (where ``fh`` stands) while
    they start before ``end`` (None: to the end); errors name ``source`` and the offset."""
    while end is None or offset < end:
        line = fh.readline()
        if not line:
            return
        try:
            yield line.decode("utf-8", errors=errors)
        except UnicodeDecodeError as exc:
            raise utf8_error(source, offset, exc) from None
        offset += len(line)
