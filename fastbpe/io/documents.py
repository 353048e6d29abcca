"""The corpus model: sources → documents → blocks, streamed in bounded memory.

The rules (what a document is, where one may be cut) are written down once, in
``fastbpe.reference.documents``; this module reads them from files and iterables in
blocks and is tested against it. Every reader of a corpus uses ``Corpus``: the trainers,
``count``, ``stats``, ``encode``, the shard writer and the Dask path.

A ``Block`` holds pieces of documents, packed: ``data`` (UTF-8), ``ends`` (piece ``k`` is
``data[ends[k-1]:ends[k]]``) and ``last_open``. Every piece is a whole document, except
that a document longer than a block is cut into pieces at positions where the consumer's
*cutter* says the tokenizer gives the same result for both sides
(``reference.documents.bpe_cut``/``wordpiece_cut``): its pieces come one after another,
each block but the last with ``last_open`` set. Counters may take pieces for documents;
the shard writer joins them. Without a cutter, a document longer than
``MAX_DOCUMENT_BYTES`` raises ValueError naming where it starts.

Memory: a reader holds one block of input plus, at most, the unfinished document at its
end (up to ``MAX_DOCUMENT_BYTES`` when it can't be cut); time is linear in the input
(the pending text is never rescanned: each search resumes where the last one stopped).

>>> corpus = Corpus.resolve(documents=["one", "", "two"])
>>> [b.pieces() for b in corpus.blocks()]
[['one', 'two']]
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from ..reference import documents as spec
from . import streams

#: Bytes read per block (a block of documents is about this long).
BLOCK_BYTES = 1 << 20

#: A document longer than this with no place to cut it raises ValueError.
MAX_DOCUMENT_BYTES = 1 << 28

#: The values ``errors=`` accepts.
ERRORS = ("strict", "replace")

_JSONL_NAMES = (".jsonl", ".json", ".ndjson")


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


# --------------------------------------------------------------------------- blocks
@dataclass
class Block:
    """Pieces of documents, packed (see the module docstring)."""

    data: bytes
    ends: np.ndarray
    last_open: bool = False
    #: ``(first piece index, description)`` of each run of pieces, for error messages
    wheres: list = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ends)

    def pieces(self) -> list[str]:
        """The pieces as str (decoded once, then kept)."""
        cached = self.__dict__.get("_pieces")
        if cached is not None:
            return list(cached)
        data, out, start = self.data, [], 0
        for end in self.ends.tolist():
            out.append(data[start:end].decode("utf-8"))
            start = end
        self.__dict__["_pieces"] = out
        return list(out)

    def piece_bytes(self) -> list[bytes]:
        data, out, start = self.data, [], 0
        for end in self.ends.tolist():
            out.append(data[start:end])
            start = end
        return out

    def where(self, k: int = 0) -> str:
        """Where piece ``k`` comes from (file and offset or line, or item number)."""
        best = "?"
        for first, desc in self.wheres:
            if first > k:
                break
            best = desc if first == k else f"{desc} (+{k - first} documents)"
        return best


def _join(blocks: list[Block]) -> Block:
    if len(blocks) == 1:
        return blocks[0]
    ends, wheres, base, n = [], [], 0, 0
    for b in blocks:
        ends.append(b.ends + base)
        wheres.extend((first + n, desc) for first, desc in b.wheres)
        base += len(b.data)
        n += len(b.ends)
    return Block(b"".join(b.data for b in blocks), np.concatenate(ends), blocks[-1].last_open, wheres)


def _validated(part: bytes, name: str, offset: int, errors: str) -> bytes:
    """``part`` if it is UTF-8; else ValueError naming the byte offset, or (``replace``)
    the part with U+FFFD for each invalid sequence."""
    try:
        part.decode("utf-8")
        return part
    except UnicodeDecodeError as exc:
        if errors == "replace":
            return part.decode("utf-8", errors="replace").encode("utf-8")
        raise ValueError(
            f"{name}: not valid UTF-8 at byte offset {offset + exc.start} ({exc.reason}); "
            "pass errors='replace' to replace invalid bytes"
        ) from None


#: ``_nonempty`` joins slices up to this many documents per block, else builds a byte mask
#: (lines: tens of thousands of documents per block, where a slice each costs more).
JOIN_MAX_SPANS = 4096


def _nonempty(data: bytes, starts: np.ndarray, stops: np.ndarray) -> tuple[bytes, np.ndarray]:
    """Pack ``data[starts[k]:stops[k]]`` for the non-empty spans: ``(data, ends)``."""
    keep = stops > starts
    starts, stops = starts[keep], stops[keep]
    if not len(starts):
        return b"", np.zeros(0, np.int64)
    lengths = stops - starts
    ends = np.cumsum(lengths)
    if len(starts) == 1 or (starts[1:] == stops[:-1]).all():
        return data[int(starts[0]):int(stops[-1])], ends
    if len(starts) <= JOIN_MAX_SPANS:  # few documents (files, sep:): copy the spans
        view = memoryview(data)
        return b"".join([view[a:b] for a, b in zip(starts.tolist(), stops.tolist())]), ends
    # keep[i]: byte i lies in a kept span. Built as runs (gap, span, gap, span, ..., tail)
    # by np.repeat, one pass over the block: a +1/-1 mask summed by np.cumsum made an
    # int64 per byte and took ~half of the reading thread's time on 1 MB blocks.
    arr = np.frombuffer(data, np.uint8)
    runs = np.empty(2 * len(starts) + 1, np.int64)
    runs[0:-1:2] = starts - np.concatenate(([0], stops[:-1]))
    runs[1::2] = lengths
    runs[-1] = len(arr) - stops[-1]
    flags = np.zeros(len(runs), np.bool_)
    flags[1::2] = True
    return arr[np.repeat(flags, runs)].tobytes(), ends


def split_part(part: bytes, kind: str, sep: bytes | None) -> tuple[bytes, np.ndarray]:
    """The documents of ``part`` (whole documents and their separators) by the rule,
    packed: ``(data, ends)``, empty documents dropped.

    >>> split_part(b"a\\n\\nbc\\n", "lines", None)
    (b'abc', array([1, 3]))
    """
    n = len(part)
    if kind == "file":
        return (part, np.array([n], np.int64)) if n else (b"", np.zeros(0, np.int64))
    if kind == "lines" or (kind == "sep" and len(sep) == 1):
        byte = 10 if kind == "lines" else sep[0]
        pos = np.flatnonzero(np.frombuffer(part, np.uint8) == byte)
        starts = np.concatenate(([0], pos + 1)).astype(np.int64)
        stops = np.concatenate((pos, [n])).astype(np.int64)
        return _nonempty(part, starts, stops)
    if kind == "blank-line":
        spans = [(m.start(), m.end()) for m in _BLANK_LINE_B.finditer(part)]
    else:
        spans, pos = [], 0
        while True:
            j = part.find(sep, pos)
            if j < 0:
                break
            spans.append((j, j + len(sep)))
            pos = j + len(sep)
    starts = np.array([0] + [e for _, e in spans], np.int64)
    stops = np.array([s for s, _ in spans] + [n], np.int64)
    return _nonempty(part, starts, stops)


_BLANK_LINE_B = re.compile(spec.BLANK_LINE.pattern.encode())
_NOT_BLANK_OR_NL = re.compile(rb"[^ \t\r]")


# --------------------------------------------------------------------------- text files
class _Boundaries:
    """Where the last complete separator of a growing buffer ends, found without
    rescanning (each call resumes where the previous one stopped)."""

    def __init__(self, kind: str, sep: bytes | None):
        self.kind, self.sep = kind, sep
        self.scan = 0        # no separator starts before this that was not seen
        self.ws_start = 0    # blank-line: start of the buffer's trailing whitespace run

    def reset(self, buf: bytearray) -> None:
        self.scan = 0
        self.ws_start = 0
        if self.kind == "blank-line":
            self.grew(buf, 0)

    def grew(self, buf: bytearray, old_len: int) -> None:
        """The buffer grew from ``old_len`` (blank-line keeps its trailing-run start)."""
        if self.kind != "blank-line":
            return
        # the last non-whitespace byte of the new bytes, searched from their end
        tail = bytes(buf[old_len:]).rstrip(b" \t\r\n")
        if tail:
            self.ws_start = old_len + len(tail)

    def last(self, buf: bytearray) -> int:
        """End of the last complete separator in ``buf`` (a document starts there), or -1."""
        n = len(buf)
        if self.kind == "file":
            return -1
        if self.kind == "lines":
            j = buf.rfind(b"\n", self.scan)
            self.scan = n
            return j + 1 if j >= 0 else -1
        if self.kind == "sep":
            sep, pos, last = self.sep, self.scan, -1
            while True:
                j = buf.find(sep, pos)
                if j < 0:
                    break
                pos = last = j + len(sep)
            self.scan = max(pos, n - len(sep) + 1)
            return last
        # blank-line: matches lie in whitespace runs; one that ends before the trailing
        # run is complete (a non-blank byte follows it)
        last = -1
        for m in _BLANK_LINE_B.finditer(buf, self.scan, self.ws_start):
            last = m.end()
        self.scan = max(self.scan, self.ws_start - 1, 0)
        return last

    def cut_limit(self, buf: bytearray) -> int:
        """The largest cut position after which the buffer's document surely goes on."""
        if self.kind == "blank-line":
            return self.ws_start - 1
        if self.kind == "sep":
            return len(buf) - len(self.sep)
        return len(buf) - 1


def text_blocks(stream, kind: str, sep: bytes | None, *, cut=None, errors: str = "strict",
                block_bytes: int = BLOCK_BYTES, end: int | None = None, progress=None) -> Iterator[Block]:
    """The blocks of a text stream under a rule (``kind``, ``sep``), read from where the
    stream stands up to ``end`` (a document start, or None: the end of the stream)."""
    name = stream.name
    buf = bytearray()
    base = stream.tell()          # stream offset of buf[0]
    bounds = _Boundaries(kind, sep)
    nocut = 1                     # no cut was found before this position of buf
    open_doc = False              # buf starts inside a document (a piece went before)
    raw_seen = stream.raw_tell()

    def emit(part: bytes, offset: int, last_open: bool) -> Block:
        part = _validated(part, name, offset, errors)
        if last_open:   # a piece of the document at the start of buf (no separator in it)
            data, ends = part, np.array([len(part)], np.int64)
        else:
            data, ends = split_part(part, kind, sep)
        return Block(data, ends, last_open, [(0, f"{name}: byte {offset}")])

    while True:
        want = block_bytes if end is None else min(block_bytes, end - (base + len(buf)))
        raw = stream.read(want) if want > 0 else b""
        eof = not raw
        if progress is not None:
            now = stream.raw_tell()
            progress.update(max(now - raw_seen, 0) if now else len(raw))
            raw_seen = now or raw_seen
        old = len(buf)
        buf += raw
        bounds.grew(buf, old)
        if eof:
            if buf:
                block = emit(bytes(buf), base, False)
                assert len(block.ends) or not open_doc, "an open document ended with an empty piece"
                if len(block.ends):
                    yield block
            return
        cut_at = bounds.last(buf)
        if cut_at > 0:
            block = emit(bytes(buf[:cut_at]), base, False)
            open_doc = False
            del buf[:cut_at]
            base += cut_at
            bounds.reset(buf)
            nocut = 1
            if len(block.ends):
                yield block
        if len(buf) < block_bytes:
            continue
        # the document at the start of buf is long: cut it, or compact a blank-line run
        if kind == "blank-line" and len(buf) - bounds.ws_start > block_bytes:
            run = bytes(buf[bounds.ws_start:])
            first, last = run.find(b"\n"), run.rfind(b"\n")
            if first != last:   # two newlines or more: a separator, still growing
                keep = bounds.ws_start + first
                if keep or open_doc:
                    block = emit(bytes(buf[:keep]), base, False) if keep else None
                    if block is not None and len(block.ends):
                        yield block
                open_doc = False
                base += bounds.ws_start + last - 1   # the kept "\n\n" stands for the run
                del buf[:bounds.ws_start + last - 1]
                buf[0:2] = b"\n\n"
                bounds.reset(buf)
                nocut = 1
                continue
        # a special token across the cut must be wholly in buf to be seen
        limit = bounds.cut_limit(buf) - (cut.margin if cut is not None else 0)
        c = cut.find(buf, nocut, limit) if cut is not None and limit >= nocut else -1
        if c > 0:
            block = emit(bytes(buf[:c]), base, True)
            open_doc = True
            del buf[:c]
            base += c
            bounds.reset(buf)
            nocut = 1
            yield block
        else:
            nocut = max(nocut, limit - 64)
            if len(buf) > MAX_DOCUMENT_BYTES:
                how = ("with no place where the tokenizer allows a cut" if cut is not None
                       else "and this tokenizer's documents can't be cut")
                raise ValueError(
                    f"{name}: the document at byte offset {base} is longer than "
                    f"{MAX_DOCUMENT_BYTES} bytes (fastbpe.io.MAX_DOCUMENT_BYTES) {how}; "
                    "is the document rule right (docs=lines | blank-line | file | sep:STR)?"
                )


# --------------------------------------------------------------------------- sources
def _strip_compression(name: str) -> str:
    lower = name.lower()
    for suffix, _ in streams.SUFFIXES:
        if lower.endswith(suffix):
            return lower[: -len(suffix)]
    return lower


def kind_of(path) -> str:
    """``"jsonl"``, ``"parquet"`` or ``"text"``, from the file's name.

    >>> kind_of("data/train-00001.jsonl.zst"), kind_of("x.parquet"), kind_of("notes.txt.gz")
    ('jsonl', 'parquet', 'text')
    """
    name = _strip_compression(os.fspath(path) if not isinstance(path, str) else path)
    if name.endswith(_JSONL_NAMES):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    return "text"


class TextSource:
    """A text file read by a document rule."""

    kind = "text"

    def __init__(self, path, rule: str = spec.DEFAULT_RULE):
        self.path = path
        self.rule = rule
        self.rule_kind, sep = spec.parse_rule(rule)
        self.sep = sep.encode("utf-8") if sep is not None else None

    def describe(self) -> dict:
        return {"kind": "text", "docs": self.rule}

    def splittable(self) -> bool:
        """Whether byte ranges can start at document starts found by a forward scan."""
        if self.rule_kind == "file":
            return False
        if self.rule_kind == "sep":
            s = self.sep   # a separator that overlaps itself needs the scan from the start
            return not any(s[:k] == s[-k:] for k in range(1, len(s)))
        return True

    def next_start(self, pos: int) -> int:
        """The first document start at or after byte ``pos`` of a plain file (its size if
        none), scanning forward in blocks."""
        sep = b"\n" if self.rule_kind == "lines" else self.sep
        with streams.open_stream(self.path) as st:
            st.seek(pos)
            off, carry = pos, b""
            while True:
                raw = st.read(BLOCK_BYTES)
                if not raw:
                    return off + len(carry)
                buf = carry + raw
                if self.rule_kind == "blank-line":
                    for m in _BLANK_LINE_B.finditer(buf):
                        if _NOT_BLANK_OR_NL.search(buf, m.end()):   # the run ends there
                            return off + m.end()
                    tail = len(buf.rstrip(b" \t\r\n"))
                    keep = max(tail - 1, 0)
                else:
                    j = buf.find(sep)
                    if j >= 0:
                        return off + j + len(sep)
                    keep = max(len(buf) - len(sep) + 1, 0)
                carry = buf[keep:]
                off += keep

    def blocks(self, *, cut=None, errors="strict", block_bytes=BLOCK_BYTES, start=0, end=None,
               progress=None) -> Iterator[Block]:
        with streams.open_stream(self.path) as st:
            if start:
                st.seek(start)
            yield from text_blocks(st, self.rule_kind, self.sep, cut=cut, errors=errors,
                                   block_bytes=block_bytes, end=end, progress=progress)


class JsonlSource:
    """A JSON Lines file: every non-blank line an object whose ``field`` is a document."""

    kind = "jsonl"

    def __init__(self, path, field: str = "text"):
        self.path, self.field = path, field

    def describe(self) -> dict:
        return {"kind": "jsonl", "field": self.field}

    def splittable(self) -> bool:
        return True

    def next_start(self, pos: int) -> int:
        return TextSource(self.path, "lines").next_start(pos)

    def blocks(self, *, cut=None, errors="strict", block_bytes=BLOCK_BYTES, start=0, end=None,
               progress=None) -> Iterator[Block]:
        from . import jsonl

        name = os.fspath(self.path) if not isinstance(self.path, str) else self.path
        line = 0
        if start:   # a range of the file: its lines are counted from the range's start
            name = f"{name} (the range from byte {start})"
        with streams.open_stream(self.path) as st:
            if start:
                st.seek(start)
            # whole lines, never cut: a JSON value is parsed whole
            for offset, part in _line_parts(st, block_bytes, end, progress):
                data, ends = jsonl.documents_of_block(part, self.field, name, line, errors)
                line += part.count(b"\n") + (not part.endswith(b"\n"))
                if len(ends):
                    block = Block(data, ends, False, [(0, f"{name}: line {line_of(part, line)}")])
                    yield from _cut_long(block, cut, block_bytes, name)


def _line_parts(st, block_bytes: int, end: int | None, progress) -> Iterator[tuple[int, bytes]]:
    """``(offset, bytes)`` parts of whole lines (the last may lack its newline)."""
    buf = bytearray()
    base = st.tell()
    scan = 0
    raw_seen = st.raw_tell()
    while True:
        want = block_bytes if end is None else min(block_bytes, end - (base + len(buf)))
        raw = st.read(want) if want > 0 else b""
        if progress is not None:
            now = st.raw_tell()
            progress.update(max(now - raw_seen, 0) if now else len(raw))
            raw_seen = now or raw_seen
        if not raw:
            if buf:
                yield base, bytes(buf)
            return
        buf += raw
        j = buf.rfind(b"\n", scan)
        if j < 0:
            scan = len(buf)
            if len(buf) > MAX_DOCUMENT_BYTES:
                raise ValueError(f"{st.name}: the line at byte offset {base} is longer than "
                                 f"{MAX_DOCUMENT_BYTES} bytes (fastbpe.io.MAX_DOCUMENT_BYTES)")
            continue
        yield base, bytes(buf[: j + 1])
        del buf[: j + 1]
        base += j + 1
        scan = 0


def line_of(part: bytes, line: int) -> int:
    """The 1-based number of the first line of a part that starts at 0-based ``line``."""
    return line - part.count(b"\n") - (not part.endswith(b"\n")) + 1


def _cut_long(block: Block, cut, block_bytes: int, name: str) -> Iterator[Block]:
    """``block`` as is, or with documents longer than ``2 * block_bytes`` cut into
    pieces (each piece but the last of a document ends a block with ``last_open``)."""
    lengths = np.diff(block.ends, prepend=0)
    if cut is None or not len(lengths) or lengths.max() <= 2 * block_bytes:
        yield block
        return
    data, start, first = block.data, 0, 0
    ends = block.ends.tolist()
    for k, stop in enumerate(ends):
        if stop - start <= 2 * block_bytes:
            start = stop
            continue
        if k > first:   # the whole documents before the long one
            base = ends[first - 1] if first else 0
            yield Block(data[base:start], np.asarray(ends[first:k], np.int64) - base, False,
                        [(0, block.where(first))])
        doc, pos = data[start:stop], 0
        while len(doc) - pos > 2 * block_bytes:
            c = cut.find(doc, pos + block_bytes, pos + 2 * block_bytes)
            if c <= pos:   # none near: the first one further on, or the rest whole
                c = cut.find_first(doc, pos + 2 * block_bytes, len(doc) - 1)
                if c <= pos:
                    break
            yield Block(doc[pos:c], np.array([c - pos], np.int64), True, [(0, block.where(k))])
            pos = c
        yield Block(doc[pos:], np.array([len(doc) - pos], np.int64), False, [(0, block.where(k))])
        start, first = stop, k + 1
    if first < len(ends):
        base = ends[first - 1] if first else 0
        yield Block(data[base:], np.asarray(ends[first:], np.int64) - base, False, [(0, block.where(first))])


class ParquetSource:
    """A Parquet file's ``column`` of str, streamed by row group (needs pyarrow)."""

    kind = "parquet"

    def __init__(self, path, column: str = "text"):
        self.path, self.column = path, column

    def describe(self) -> dict:
        return {"kind": "parquet", "column": self.column}

    def _open(self):
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ImportError(f"{self.path}: reading Parquet needs pyarrow (pip install pyarrow)") from None
        raw = streams.open_raw(self.path)
        try:
            return pq.ParquetFile(raw), raw
        except Exception as exc:
            raw.close()
            raise ValueError(f"{self.path}: not a readable Parquet file ({exc})") from None

    def row_groups(self) -> int:
        pf, raw = self._open()
        with raw:
            return pf.metadata.num_row_groups

    def blocks(self, *, cut=None, errors="strict", block_bytes=BLOCK_BYTES, start=0, end=None,
               progress=None) -> Iterator[Block]:
        import pyarrow as pa

        pf, raw = self._open()
        name = os.fspath(self.path) if not isinstance(self.path, str) else self.path
        with raw:
            schema = pf.schema_arrow
            if self.column not in schema.names:
                raise ValueError(f"{name}: no column {self.column!r} (columns: {', '.join(schema.names)})")
            typ = schema.field(self.column).type
            if not (pa.types.is_string(typ) or pa.types.is_large_string(typ)
                    or getattr(pa.types, "is_string_view", lambda t: False)(typ)):
                raise ValueError(f"{name}: column {self.column!r} is {typ}, not strings")
            n_groups = pf.metadata.num_row_groups
            groups = list(range(start, n_groups if end is None else min(end, n_groups)))
            row = sum(pf.metadata.row_group(g).num_rows for g in range(start))
            for g in groups:
                size = pf.metadata.row_group(g).total_byte_size
                for batch in pf.iter_batches(batch_size=max(1, 4096), row_groups=[g], columns=[self.column]):
                    arr = batch.column(0)
                    if arr.null_count:
                        bad = arr.is_null().to_numpy(zero_copy_only=False).argmax()
                        raise ValueError(f"{name}: row {row + int(bad)}: column {self.column!r} is null")
                    arr = arr.cast(pa.large_string())
                    offsets = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset: arr.offset + len(arr) + 1]
                    lo, hi = int(offsets[0]), int(offsets[-1])
                    data = arr.buffers()[2].to_pybytes()[lo:hi] if hi > lo else b""
                    data = _validated(data, f"{name}: column {self.column!r} from row {row}", 0, errors)
                    stops = offsets[1:] - lo
                    starts = offsets[:-1] - lo
                    if len(data) != hi - lo:   # replaced bytes: decode row by row
                        docs = [d for d in arr.to_pylist() if d]
                        packed = [d.encode("utf-8", "replace") for d in docs]
                        data = b"".join(packed)
                        ends = np.cumsum([len(p) for p in packed]).astype(np.int64)
                    else:
                        data, ends = _nonempty(data, starts, stops)
                    if len(ends):
                        yield from _cut_long(Block(data, ends, False, [(0, f"{name}: row {row}")]),
                                             cut, block_bytes, name)
                    row += len(arr)
                if progress is not None:
                    progress.update(size)


class IterableSource:
    """Documents given as an iterable of str (one per item), or a ``datasets`` dataset
    with a ``column``."""

    kind = "documents"

    def __init__(self, documents, column: str | None = None):
        self.documents, self.column = documents, column

    def describe(self) -> dict:
        return {"kind": "documents"}

    def iter_items(self) -> Iterator[str]:
        docs = self.documents
        if self.column is not None:
            if hasattr(docs, "iter") and hasattr(docs, "column_names"):
                for batch in docs.iter(batch_size=1000):
                    yield from batch[self.column]
                return
            for i, row in enumerate(docs):
                if not isinstance(row, dict) or self.column not in row:
                    raise TypeError(f"documents item {i} has no column {self.column!r}")
                yield row[self.column]
            return
        yield from docs

    def blocks(self, *, cut=None, errors="strict", block_bytes=BLOCK_BYTES, start=0, end=None,
               progress=None) -> Iterator[Block]:
        parts, ends, total, first = [], [], 0, 0
        i = -1
        for i, doc in enumerate(self.iter_items()):
            if not isinstance(doc, str):
                raise not_a_document(i, doc)
            if not doc:
                continue
            try:
                b = doc.encode("utf-8")
            except UnicodeEncodeError:
                b = fix_document(doc).encode("utf-8")
            parts.append(b)
            total += len(b)
            ends.append(total)
            if total >= block_bytes:
                block = Block(b"".join(parts), np.array(ends, np.int64), False, [(0, f"documents from item {first}")])
                yield from _cut_long(block, cut, block_bytes, "documents")
                if progress is not None:
                    progress.update(total)
                parts, ends, total, first = [], [], 0, i + 1
        if parts:
            block = Block(b"".join(parts), np.array(ends, np.int64), False, [(0, f"documents from item {first}")])
            yield from _cut_long(block, cut, block_bytes, "documents")
            if progress is not None:
                progress.update(total)


def not_a_document(i: int, doc) -> TypeError:
    """The error for item ``i`` of ``documents=`` that is not a str."""
    hint = " (a datasets row? pass column='text', or the column itself)" if isinstance(doc, dict) else ""
    return TypeError(f"documents item {i} is {type(doc).__name__}, expected str{hint}")


def fix_document(doc: str) -> str:
    """``doc`` unchanged if it has a UTF-8 form, else with tiktoken's surrogate rule.

    >>> fix_document("a\\ud800b")
    'a\\ufffdb'
    """
    try:
        doc.encode("utf-8")
    except UnicodeEncodeError:
        from ..reference.bpe import fix_surrogates

        return fix_surrogates(doc)
    return doc


# --------------------------------------------------------------------------- tasks
@dataclass
class Task:
    """One unit of parallel or distributed work: a range of one source (picklable for
    file sources). ``start``/``end``: bytes (text, JSONL) or row groups (Parquet)."""

    source: object
    start: int = 0
    end: int | None = None
    info: dict = field(default_factory=dict)

    def key(self) -> dict:
        """What the task's documents depend on: the source's identity and rule, the range;
        for a local file, also ``streams.content_sample`` of it, read now (the rule and its
        cost are ``fastbpe.shards``'; a remote file's version is its etag already)."""
        key = {**self.info, **self.source.describe(), "start": self.start, "end": self.end}
        if "size" in self.info and not streams.is_url(self.source.path):
            key["sample"] = streams.content_sample(self.source.path, self.info["size"])
        return key

    def blocks(self, *, cut=None, errors="strict", block_bytes=BLOCK_BYTES, progress=None) -> Iterator[Block]:
        return self.source.blocks(cut=cut, errors=errors, block_bytes=block_bytes, start=self.start,
                                  end=self.end, progress=progress)


# --------------------------------------------------------------------------- corpus
def _path_list(files) -> list:
    if isinstance(files, (str, os.PathLike)):
        return [files]
    if isinstance(files, (bytes, bytearray)) or not isinstance(files, Iterable):
        raise TypeError(f"files must be a path or a list of paths, not {type(files).__name__}")
    items = list(files)
    for i, f in enumerate(items):
        if not isinstance(f, (str, os.PathLike)):
            raise TypeError(f"files[{i}] is {type(f).__name__}, not a path (documents go in documents=...)")
    return items


class Corpus:
    """A list of sources, resolved and checked (see ``reference.documents`` for the rules).

    ``Corpus.resolve(files=..., docs=..., field=..., column=...)`` or
    ``Corpus.resolve(documents=..., column=...)``; a path that does not exist raises
    FileNotFoundError naming it before any work.
    """

    def __init__(self, sources: list):
        self.sources = sources

    @classmethod
    def resolve(cls, files=None, documents=None, *, docs: str | None = None, field: str | None = None,
                column: str | None = None) -> "Corpus":
        if isinstance(files, Corpus) and documents is None:
            return files
        if files is not None and documents is not None:
            raise TypeError("pass files or documents=, not both")
        for name, value in (("field", field), ("column", column), ("docs", docs)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} must be a str, not {type(value).__name__}")
        if docs is not None:
            spec.parse_rule(docs)
        if documents is not None:
            if isinstance(documents, (str, bytes, bytearray)):
                raise TypeError(
                    f"documents must be an iterable of str (one document per item), not one "
                    f"{type(documents).__name__}: wrap it in a list"
                )
            if not isinstance(documents, Iterable) and not hasattr(documents, "iter"):
                raise TypeError(f"documents must be an iterable of str, not {type(documents).__name__}")
            if docs is not None:
                raise ValueError("docs= is the rule for text files; each item of documents= is one document")
            return cls([IterableSource(documents, column or field)])
        if files is None:
            raise TypeError("no corpus: pass files (a path or a list of paths) or documents=[...]")
        paths = [p for f in _path_list(files) for p in streams.expand(f)]
        if not paths:
            raise ValueError("no input files given (an empty list)")
        sources = []
        for p in paths:
            kind = kind_of(p)
            if kind == "jsonl":
                sources.append(JsonlSource(p, field or "text"))
            elif kind == "parquet":
                sources.append(ParquetSource(p, column or field or "text"))
            else:
                sources.append(TextSource(p, docs or spec.DEFAULT_RULE))
        kinds = {s.kind for s in sources}
        if docs is not None and "text" not in kinds:
            raise ValueError(f"docs={docs!r} is the rule for text files; JSON Lines and Parquet "
                             "files hold their documents in a field (field=/column=)")
        if field is not None and not kinds & {"jsonl", "parquet"}:
            raise ValueError(f"field={field!r} applies to JSON Lines files (.jsonl, .jsonl.gz, "
                             ".jsonl.zst); for text files choose a document rule with docs=")
        if column is not None and "parquet" not in kinds:
            raise ValueError(f"column={column!r} applies to Parquet files (.parquet)")
        for s in sources:
            if not streams.is_url(s.path):
                streams.file_info(s.path)   # regular, readable: checked before any work
        return cls(sources)

    @property
    def files(self) -> list | None:
        """The paths, or None for documents= (compatibility with the old reader)."""
        if self.sources and isinstance(self.sources[0], IterableSource):
            return None
        return [s.path for s in self.sources]

    def total_bytes(self) -> int | None:
        """Bytes of the files as stored (the progress bar's total); None for documents=."""
        if self.files is None:
            return None
        try:
            return sum(streams.file_info(p)["size"] for p in self.files)
        except (OSError, ValueError, ImportError):
            return None

    def blocks(self, *, cut=None, errors: str = "strict", block_bytes: int = BLOCK_BYTES,
               progress=None) -> Iterator[Block]:
        """Every block of every source, in order, small ones joined (``coalesce``)."""
        check_errors(errors)

        def raw():
            for s in self.sources:
                yield from s.blocks(cut=cut, errors=errors, block_bytes=block_bytes, progress=progress)

        return coalesce(raw(), block_bytes)

    def documents(self, errors: str = "strict") -> Iterator[str]:
        """Every document as str, pieces joined (for small corpora and the tests)."""
        return whole_documents(self.blocks(cut=None, errors=errors))

    def plan(self, n_parts: int | None = None, target_bytes: int | None = None,
             min_bytes: int = 4 << 20) -> list[Task]:
        """Tasks that together read the corpus in order: ``documents=`` one task (to be run
        in this process: an iterable can't be shipped), each file one task, or, for plain
        (uncompressed) text and JSONL files under a rule that allows it, byte ranges that
        start at document starts: ``n_parts`` per file, or one per ``target_bytes``, each
        at least ``min_bytes``; Parquet files by row groups (``n_parts`` per file)."""
        tasks = []
        for s in self.sources:
            if isinstance(s, IterableSource):
                # one task, read here, once; its content can't be identified, so its key is
                # new every time (a rerun never takes it for a finished one)
                import uuid

                tasks.append(Task(s, 0, None, {"documents": uuid.uuid4().hex}))
                continue
            info = streams.file_info(s.path)
            info = {"path": info["path"], "size": info["size"], "version": info["version"]}
            if isinstance(s, ParquetSource):
                groups = s.row_groups()
                step = max(1, -(-groups // max(1, n_parts or 1)))
                for g in range(0, max(groups, 1), step):
                    tasks.append(Task(s, g, min(g + step, groups), info))
                continue
            size = info["size"]
            parts = n_parts if n_parts is not None else (-(-size // target_bytes) if target_bytes else 1)
            parts = min(parts, size // max(min_bytes, 1))
            if parts <= 1 or not s.splittable() or streams.compression_of(s.path) is not None:
                tasks.append(Task(s, 0, None, info))
                continue
            cuts = [0]
            for i in range(1, parts):
                pos = s.next_start(max(size * i // parts, cuts[-1]))
                if cuts[-1] < pos < size:
                    cuts.append(pos)
            cuts.append(None)
            tasks.extend(Task(s, a, b, info) for a, b in zip(cuts, cuts[1:]))
        return tasks


def whole_documents(blocks: Iterable[Block]) -> Iterator[str]:
    """The documents of ``blocks`` as str, the pieces of a cut document joined."""
    pending = []
    for block in blocks:
        pieces = block.pieces()
        if pending:
            pieces[0] = "".join(pending) + pieces[0]
            pending = []
        if block.last_open:
            pending.append(pieces.pop())
        yield from pieces
    if pending:
        yield "".join(pending)


def coalesce(blocks: Iterator[Block], block_bytes: int) -> Iterator[Block]:
    """Join consecutive small blocks into blocks of about ``block_bytes`` (a folder of
    small files gives one block per many files, which batch encoders need), never joining
    across an open piece (it must end its block)."""
    pending, size = [], 0
    for b in blocks:
        if not len(b.ends):
            continue
        pending.append(b)
        size += len(b.data)
        if size >= block_bytes or b.last_open:
            yield _join(pending)
            pending, size = [], 0
    if pending:
        yield _join(pending)


def prefetch(blocks: Iterable[Block], depth: int = 2) -> Iterator[Block]:
    """``blocks``, read ahead on a thread (at most ``depth`` blocks waiting), each with its
    pieces decoded: reading, decompressing and scanning JSON release the GIL, so they
    overlap the consumer's encoding instead of adding to it. An error of the reader is
    raised here, in order; closing the iterator stops the reader."""
    import queue
    import threading

    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def run():
        try:
            for b in blocks:
                b.pieces()          # decoded here, cached on the block
                while not stop.is_set():
                    try:
                        q.put(("block", b), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(("end", done))
        except BaseException as exc:  # handed to the consumer
            q.put(("error", exc))

    t = threading.Thread(target=run, daemon=True, name="fastbpe-prefetch")
    t.start()
    try:
        while True:
            kind, item = q.get()
            if kind == "end":
                return
            if kind == "error":
                raise item
            yield item
    finally:
        stop.set()
        while t.is_alive():
            try:
                q.get_nowait()
            except queue.Empty:
                t.join(0.05)
