"""Training inputs: files or documents, never one taken for the other, read as documents.

Decisions (each written down once, here; the trainers and the Dask path all use this module):

* **Files or documents, said by the caller.** ``train_bpe``, ``train_wordpiece``,
  ``count_chunks`` and the other readers take ``files`` (positional or ``files=``: a
  path — str or ``os.PathLike`` — or a list of them) or ``documents=`` (any iterable of
  str: a list, a generator, a HF ``datasets`` column; one document per item), never a
  guess from the values. A path that does not exist raises FileNotFoundError naming it
  (so a list of texts passed as files fails, and a text that happens to be a path is
  never read from disk); a non-str item of ``documents`` raises TypeError naming its
  index. Passing both, or neither, is an error. (``Corpus`` is the resolved form; a
  later, richer corpus model — other document rules, ``.jsonl``/``.parquet`` fields —
  is meant to extend it.)
* **What a document is.** An item of ``documents`` is one document; in a file, every
  line (split on ``"\n"`` only, the ``"\n"`` kept) is one document, as HF
  ``tokenizers`` and sentencepiece read text files. Pre-tokenizer chunks never cross a
  document boundary, so training on a file equals training on an iterator of its lines,
  however the file is cut into blocks or spread over threads and machines.
* **Directories** stand for the regular files under them, recursively, in sorted order
  of their path components; names starting with ``"."`` are skipped (as shell globs do)
  and symlinks to directories are not followed. A directory with no such file is an
  error. **Devices, FIFOs and sockets** are rejected (ValueError): they have no end or
  can't be read twice (sniffing gzip, then counting); stream them as ``documents=``
  (e.g. ``documents=sys.stdin``).
* **Line length.** A line longer than ``MAX_LINE_BYTES`` (256 MiB, its newline not
  counted) raises ValueError naming the file and the line's byte offset, so an input
  without newlines can't grow memory without bound.
* **Encoding.** Files are UTF-8: invalid bytes raise ValueError naming the file and the
  byte offset, unless ``errors="replace"`` (U+FFFD for each invalid sequence); only
  ``"strict"`` and ``"replace"`` are accepted. ``.gz`` files (detected by their magic
  bytes) are decompressed on the fly; corrupt or truncated gzip data raises ValueError
  naming the file. A document (str) with no UTF-8 form — lone surrogates — is trained
  on as tiktoken encodes it (``reference.bpe``'s "Documents" rule): lone surrogates
  become U+FFFD, surrogate pairs their character.

Files are streamed in blocks of whole lines (never the whole corpus in memory).

>>> Corpus.resolve(documents=["one document", "another"]).documents
['one document', 'another']
"""
from __future__ import annotations

import gzip
import os
import stat
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

#: Bytes read from a file per block; blocks end at a line boundary.
BLOCK_SIZE = 1 << 20

#: Longest line (document) of a file, in bytes, its newline not counted; a longer one
#: raises ValueError. Lines are checked as they outgrow a block: keep it >= BLOCK_SIZE.
MAX_LINE_BYTES = 1 << 28

#: The values ``errors=`` accepts.
ERRORS = ("strict", "replace")


def check_errors(errors) -> str:
    """The ``errors`` argument of every reader, checked before any work.

    >>> check_errors("bogus")
    Traceback (most recent call last):
    ...
    ValueError: errors must be one of 'strict', 'replace'; got 'bogus'
    """
    if not isinstance(errors, str) or errors not in ERRORS:
        raise ValueError(f"errors must be one of {', '.join(map(repr, ERRORS))}; got {errors!r}")
    return errors


_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def _not_regular(path, mode) -> ValueError:
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return ValueError(
        f"{path}: is {kind}, not a regular file; fastbpe reads regular files and directories "
        "of them (pass a stream as documents=..., e.g. documents=sys.stdin)"
    )


def _dir_files(root: Path) -> list[Path]:
    """The regular files under ``root`` (see the module docstring for the rule)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):  # does not follow dir symlinks
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            p = Path(dirpath, name)
            if not name.startswith(".") and p.is_file():
                found.append(p)
    if not found:
        raise ValueError(f"{root}: directory holds no files to train on")
    return sorted(found, key=lambda p: p.relative_to(root).parts)


def local_files(path) -> list[Path]:
    """The file(s) one local path stands for: itself, or a directory's files; checked.

    >>> local_files("/nonexistent/corpus.txt")
    Traceback (most recent call last):
    ...
    FileNotFoundError: training file not found: '/nonexistent/corpus.txt' (to train on text, pass documents=[...])
    """
    p = Path(path)
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise FileNotFoundError(
            f"training file not found: {str(path)!r} (to train on text, pass documents=[...])"
        ) from None
    if stat.S_ISDIR(mode):
        return _dir_files(p)
    if not stat.S_ISREG(mode):
        raise _not_regular(p, mode)
    return [p]


def file_list(files) -> list:
    """``files`` (a path or a list of paths) as a list of its items, types checked."""
    if isinstance(files, (str, os.PathLike)):
        return [files]
    if isinstance(files, (bytes, bytearray)) or not isinstance(files, Iterable):
        raise TypeError(f"files must be a path or a list of paths, not {type(files).__name__}")
    items = list(files)
    for i, f in enumerate(items):
        if not isinstance(f, (str, os.PathLike)):
            raise TypeError(
                f"files[{i}] is {type(f).__name__}, not a path (documents go in documents=...)"
            )
    return items


class Corpus:
    """What a reader reads, resolved: ``files`` (local, checked, directories expanded)
    or ``documents`` (an iterable of str, read once, lazily). Exactly one is not None."""

    __slots__ = ("files", "documents")

    def __init__(self, files: list[Path] | None = None, documents: Iterable[str] | None = None):
        self.files = files
        self.documents = documents

    @classmethod
    def resolve(cls, files=None, documents=None) -> "Corpus":
        """Check the caller's ``files``/``documents`` (see the module docstring)."""
        if isinstance(files, Corpus) and documents is None:
            return files
        if files is not None and documents is not None:
            raise TypeError("pass files or documents=, not both")
        if documents is not None:
            if isinstance(documents, (str, bytes, bytearray)):
                raise TypeError(
                    f"documents must be an iterable of str (one document per item), not one "
                    f"{type(documents).__name__}: wrap it in a list"
                )
            if not isinstance(documents, Iterable):
                raise TypeError(f"documents must be an iterable of str, not {type(documents).__name__}")
            return cls(documents=documents)
        if files is None:
            raise TypeError("no training data: pass files (a path or a list of paths) or documents=[...]")
        paths = [p for f in file_list(files) for p in local_files(f)]
        if not paths:
            raise ValueError("no training files given (an empty list)")
        return cls(files=paths)

    def iter_documents(self, errors: str = "strict") -> Iterator[str]:
        """Each document: every line of every file, or every item (see the rules)."""
        if self.files is not None:
            for p in self.files:
                for block in iter_file_blocks(p, errors=errors):
                    yield from split_lines(block)
        else:
            yield from self.iter_items()

    def iter_texts(self, errors: str = "strict") -> Iterator[str]:
        """The text in pieces that never cut a document: file blocks of whole lines, or
        the documents (for readers to which a line end is whitespace anyway)."""
        if self.files is not None:
            for p in self.files:
                yield from iter_file_blocks(p, errors=errors)
        else:
            yield from self.iter_items()

    def iter_items(self) -> Iterator[str]:
        """The documents of ``documents=``, type-checked, surrogates fixed."""
        for i, doc in enumerate(self.documents):
            if not isinstance(doc, str):
                raise not_a_document(i, doc)
            yield fix_document(doc)

    def total_bytes(self) -> int | None:
        """Size of the input files (for a progress bar); None if unknown (gzip, documents)."""
        if self.files is None or any(is_gzip(p) for p in self.files):
            return None
        return sum(p.stat().st_size for p in self.files)


def not_a_document(i: int, doc) -> TypeError:
    """The error for item ``i`` of ``documents=`` that is not a str."""
    hint = " (a datasets row? pass the column, e.g. ds['text'])" if isinstance(doc, dict) else ""
    return TypeError(f"documents item {i} is {type(doc).__name__}, expected str{hint}")


def fix_document(doc: str) -> str:
    """``doc`` as training sees it: unchanged if it has a UTF-8 form, else with
    tiktoken's surrogate rule (``reference.bpe``'s "Documents" decision).

    >>> fix_document("a\\ud800b")
    'a\\ufffdb'
    """
    try:
        doc.encode("utf-8")
    except UnicodeEncodeError:
        from .reference.core import fix_surrogates

        return fix_surrogates(doc)
    return doc


def iter_documents(files=None, *, documents=None, errors: str = "strict") -> Iterator[str]:
    """Yield the documents of ``files`` or ``documents=`` (see the module docstring)."""
    corpus = Corpus.resolve(files, documents)
    return corpus.iter_documents(check_errors(errors))


def iter_texts(files=None, *, documents=None, errors: str = "strict") -> Iterator[str]:
    """Yield the text of ``files`` (blocks of whole lines) or ``documents=`` (the items)."""
    corpus = Corpus.resolve(files, documents)
    return corpus.iter_texts(check_errors(errors))


def utf8_error(source, offset: int, exc: UnicodeDecodeError) -> ValueError:
    """The error for bytes that are not UTF-8: names the file and the absolute offset."""
    return ValueError(
        f"{source}: not valid UTF-8 at byte offset {offset + exc.start} "
        f"({exc.reason}); pass errors='replace' to replace invalid bytes"
    )


def gzip_error(source, offset: int, exc: Exception) -> ValueError:
    """The error for gzip data that can't be decompressed: names the file and how far
    the decompressed text got (the compressed offset of a deflate error is not known)."""
    return ValueError(
        f"{source}: corrupt or truncated gzip data after {offset} decompressed bytes "
        f"({type(exc).__name__}: {exc})"
    )


def line_too_long(source, offset: int) -> ValueError:
    return ValueError(
        f"{source}: the line at byte offset {offset} is longer than {MAX_LINE_BYTES} bytes "
        "(fastbpe._data.MAX_LINE_BYTES): a document must fit in memory; is this a text file "
        "with newlines?"
    )


_GZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)


def _open_binary(path: Path):
    fh = open(path, "rb")
    if fh.read(2) == b"\x1f\x8b":
        fh.seek(0)
        return gzip.GzipFile(fileobj=fh, mode="rb")
    fh.seek(0)
    return fh


def _read(fh, n: int, path, offset: int) -> bytes:
    try:
        return fh.read(n)
    except _GZIP_ERRORS as exc:
        raise gzip_error(path, offset, exc) from None


def iter_raw_blocks(path: Path, block_size: int = BLOCK_SIZE, start: int = 0,
                    end: int | None = None) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset, bytes)`` blocks of whole lines of the (decompressed) file; with
    ``start``/``end``, only the lines that start in ``[start, end)`` (``start`` a line
    start, as ``split_ranges`` gives). Undecoded: see ``iter_file_byte_blocks``."""
    offset = start
    pending: list[bytes] = []  # the start of a line longer than a block, in pieces
    n_pending = 0
    with _open_binary(path) as fh:
        if isinstance(fh, gzip.GzipFile):
            # a gzip file is one range (split_ranges' end is its compressed size)
            if start:
                raise ValueError(f"{path}: a gzip file can only be read as a whole")
            end = None
        elif start:
            fh.seek(start)
        while True:
            raw = _read(fh, block_size, path, offset + n_pending)
            last = not raw
            cut = raw.rfind(b"\n") + 1
            if not last and cut == 0:  # no line ends in this block: keep reading
                pending.append(raw)
                n_pending += len(raw)
                if n_pending > MAX_LINE_BYTES:
                    raise line_too_long(path, offset)
                continue
            if pending:
                if not last and n_pending + raw.find(b"\n") > MAX_LINE_BYTES:
                    raise line_too_long(path, offset)
                pending.append(raw)
                buf = b"".join(pending)
                cut = len(buf) if last else n_pending + cut
                pending, n_pending = [], 0
            else:
                buf = raw
                if last:
                    cut = 0
            if end is not None and offset + cut >= end:
                # the range ends in this block: keep the line that holds byte end - 1
                if end <= offset:
                    return
                nl = buf.find(b"\n", end - 1 - offset)
                cut = len(buf) if nl < 0 else nl + 1
                last = True
            if cut == len(buf):
                block = buf
            else:
                block = buf[:cut]
                rest = buf[cut:]
                pending, n_pending = [rest], len(rest)
                if n_pending > MAX_LINE_BYTES:
                    raise line_too_long(path, offset + cut)
            if block:
                yield offset, block
            offset += len(block)
            if last:
                return


def iter_file_byte_blocks(path: Path, errors: str = "strict", block_size: int = BLOCK_SIZE,
                          start: int = 0, end: int | None = None) -> Iterator[tuple[int, bytes]]:
    """``iter_raw_blocks`` checked as UTF-8 (natively: valid text is never decoded); with
    ``errors="replace"``, invalid bytes become U+FFFD's UTF-8."""
    from ._train import _utf8_invalid_at

    for offset, block in iter_raw_blocks(path, block_size, start, end):
        if _utf8_invalid_at(block) >= 0:  # rare: let Python name the error
            try:
                block = block.decode("utf-8", errors=errors).encode("utf-8")
            except UnicodeDecodeError as exc:
                raise utf8_error(path, offset, exc) from None
        yield offset, block


def iter_file_blocks(path: Path, errors: str = "strict", block_size: int = BLOCK_SIZE) -> Iterator[str]:
    """Yield the file's text in blocks that end at a newline (or the end of the file)."""
    for offset, block in iter_raw_blocks(path, block_size):
        try:
            yield block.decode("utf-8", errors=errors)
        except UnicodeDecodeError as exc:
            raise utf8_error(path, offset, exc) from None


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
            skip_line(fh)  # move to the start of the next line
            pos = fh.tell()
            if cuts[-1] < pos < size:
                cuts.append(pos)
    cuts.append(size)
    return list(zip(cuts, cuts[1:]))


def skip_line(fh) -> None:
    """Move ``fh`` past the next newline, in bounded reads (a line may be huge)."""
    while True:
        part = fh.readline(BLOCK_SIZE)
        if not part or part.endswith(b"\n"):
            return


def iter_range_lines(path: Path, start: int, end: int, errors: str = "strict") -> Iterator[str]:
    """Yield the documents (lines) of a byte range made by ``split_ranges``."""
    path = Path(path)
    for offset, block in iter_raw_blocks(path, BLOCK_SIZE, start, end):
        try:
            text = block.decode("utf-8", errors=errors)
        except UnicodeDecodeError as exc:
            raise utf8_error(path, offset, exc) from None
        yield from split_lines(text)


def iter_binary_lines(fh, source, offset: int, end: int | None = None, errors: str = "strict") -> Iterator[str]:
    """Decode the lines of an open binary file from ``offset`` (where ``fh`` stands) while
    they start before ``end`` (None: to the end); errors name ``source`` and the offset."""
    while end is None or offset < end:
        try:
            line = fh.readline(MAX_LINE_BYTES + 2)
        except _GZIP_ERRORS as exc:
            raise gzip_error(source, offset, exc) from None
        if not line:
            return
        if len(line) - line.endswith(b"\n") > MAX_LINE_BYTES:
            raise line_too_long(source, offset)
        try:
            yield line.decode("utf-8", errors=errors)
        except UnicodeDecodeError as exc:
            raise utf8_error(source, offset, exc) from None
        offset += len(line)
