"""Byte streams of corpus files: local paths or fsspec URLs, decompressed on the fly.

Decisions:

* **Local or remote.** A ``str`` containing ``"://"`` is an fsspec URL (``s3://``,
  ``gs://``, ``https://``, ``memory://``, …; ``fsspec`` and the backend must be
  installed); anything else (``str``, ``os.PathLike``) is a local path.
* **Compression is read from the data, not the name**: gzip (``1f 8b``), zstd
  (``28 b5 2f fd``, or a skippable frame's ``5? 2a 4d 18``; needs ``zstandard``) and xz
  (``fd 37 7a 58 5a 00``). A file named
  ``.gz``/``.zst``/``.zstd``/``.xz`` that is shorter than its format's magic number and
  begins it (an empty one too) is a download cut in its header, not a text file.
* **A compressed stream must end where its format says** (one rule, in ``Stream.read``,
  for every reader: trainers, ``encode_files`` local and Dask, the CLI): the data ends
  with its last frame, member or stream complete, with its checksum where the format has
  one; further frames must be whole; nothing follows but what the format allows (gzip:
  zero bytes; xz: stream padding, zero bytes in a multiple of 4; zstd: skippable frames).
  Otherwise ValueError naming the file and how many decompressed bytes were read before
  the fault (reads hand on each decoded piece before reading further, so the count is
  exact). gzip's own reader proves its members; xz's (``lzma.LZMAFile``) ignores a
  garbage tail, so xz is read stream by stream here (``_XzReader``); zstandard's
  ``stream_reader`` stops quietly inside a cut frame, so the frames are followed as the
  data passes to it (``_ZstdFrames``).
* **Progress counts the bytes of the file as stored** (compressed bytes for a compressed
  file), so a bar's total is the files' sizes on disk.

>>> import tempfile, gzip, os
>>> path = os.path.join(tempfile.mkdtemp(), "x.txt.gz")
>>> with gzip.open(path, "wb") as fh: _ = fh.write(b"hello")
>>> with open_stream(path) as s: (s.compression, s.read(10))
('gzip', b'hello')
"""
from __future__ import annotations

import gzip
import hashlib
import lzma
import os
import stat
import zlib
from pathlib import Path

MAGIC = ((b"\x1f\x8b", "gzip"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"\xfd7zXZ\x00", "xz")) + tuple(
    (bytes([0x50 + k]) + b"\x2a\x4d\x18", "zstd") for k in range(16))   # zstd may open with a skippable frame

_XZ_MAGIC = MAGIC[2][0]

#: Name endings of compressed files, and the format each promises.
SUFFIXES = ((".gz", "gzip"), (".zst", "zstd"), (".zstd", "zstd"), (".xz", "xz"))

#: Stored bytes read at a time by the xz reader.
_CHUNK = 1 << 16


def is_url(path) -> bool:
    """Whether ``path`` is an fsspec URL (a str with ``"://"``).

    >>> is_url("s3://bucket/x.jsonl"), is_url("data/x.jsonl")
    (True, False)
    """
    return isinstance(path, str) and "://" in path


def require_fsspec(url: str):
    try:
        import fsspec
    except ImportError:
        raise ImportError(f"{url}: reading URLs needs fsspec (pip install fsspec; with Dask: pip install fastbpe[dask])") from None
    return fsspec


class Unfinished(Exception):
    """A compressed stream that does not end where its format says (the reason)."""


def _zstd_reader(raw):
    try:
        import zstandard
    except ImportError:
        raise ImportError("reading zstd-compressed files needs zstandard (pip install zstandard)") from None
    return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)


class _ZstdFrames:
    """The stored bytes of a zstd file, passed on unchanged to the decoder, with its frames
    followed on the way (RFC 8878: header, blocks up to the last one, checksum; skippable
    frames), so that ``unfinished()`` can tell a stream cut anywhere from a whole one.

    zstandard's ``stream_reader`` decodes and checks the contents but ends quietly when
    its input ends inside a frame; following the frame layout costs a few operations
    per block (a block is up to 128 KiB of text).

    >>> import io
    >>> frame = bytes.fromhex("28b52ffd" "2002" "110000") + b"hi"   # magic, header, a last raw block
    >>> frames = _ZstdFrames(io.BytesIO(frame))
    >>> frames.read(100) == frame, frames.unfinished()
    (True, None)
    >>> frames = _ZstdFrames(io.BytesIO(frame[:-1]))
    >>> _ = frames.read(100); frames.unfinished()
    'the data ends inside a block of a frame (at stored byte 10)'
    """

    def __init__(self, raw):
        self.raw = raw
        self.item = "magic"   # the header item being collected: magic, header, block, size
        self.need = 4         # its length
        self.head = b""       # its bytes so far
        self.skip = 0         # bytes to pass over before it (a header's rest, a block, a checksum)
        self.inside = ""      # what the skipped bytes are, for the message
        self.checksum = False
        self.fault = None     # bytes that begin no frame (the decoder reports them too)
        self.seen = 0         # stored bytes passed on
        self.at_eof = False

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        if not data:
            self.at_eof = True
        elif self.fault is None:
            self._follow(data)
        self.seen += len(data)
        return data

    def close(self) -> None:
        self.raw.close()

    def _follow(self, data: bytes) -> None:
        pos, n = 0, len(data)
        while True:
            if self.skip:
                take = min(self.skip, n - pos)
                self.skip -= take
                pos += take
            if pos >= n:
                return
            take = min(self.need - len(self.head), n - pos)
            self.head += data[pos:pos + take]
            pos += take
            if len(self.head) == self.need:
                self._item(int.from_bytes(self.head, "little"), self.seen + pos)
                self.head = b""
                if self.fault is not None:
                    return

    def _item(self, value: int, at: int) -> None:
        """The next item once ``value`` (the current item's bytes, little-endian) is read."""
        if self.item == "magic":
            if value == 0xFD2FB528:
                self.item, self.need = "header", 1
            elif value & 0xFFFFFFF0 == 0x184D2A50:
                self.item, self.need = "size", 4
            else:
                self.fault = f"bytes that begin no zstd frame at stored byte {at - 4}"
        elif self.item == "header":   # Frame_Header_Descriptor: the header's rest, then blocks
            single = value >> 5 & 1
            self.checksum = bool(value & 4)
            self.skip = (1 - single) + (0, 1, 2, 4)[value & 3] + (single, 2, 4, 8)[value >> 6]
            self.item, self.need, self.inside = "block", 3, "a frame header"
        elif self.item == "block":    # Block_Header: Last_Block, Block_Type, Block_Size
            last, kind, size = value & 1, value >> 1 & 3, value >> 3
            self.skip = 1 if kind == 1 else size      # an RLE block stores one byte
            self.inside = "a block of a frame"
            if last:
                self.skip += 4 * self.checksum
                self.item, self.need = "magic", 4
                self.inside = "the last block of a frame or its checksum" if self.checksum else self.inside
        else:                         # a skippable frame's size, then its bytes
            self.skip, self.inside = value, "a skippable frame"
            self.item, self.need = "magic", 4

    def unfinished(self) -> str | None:
        """Why the bytes passed on so far are not whole frames, or None."""
        if self.fault is not None:
            return self.fault
        if self.skip:
            where = self.inside
        elif self.item == "magic" and not self.head:
            return None
        else:
            where = {"magic": "the magic number of a further frame", "header": "a frame header",
                     "block": "a frame, before its last block", "size": "a skippable frame's header"}[self.item]
        return f"the data ends inside {where} (at stored byte {self.seen})"


class _XzReader:
    """xz streams one after another, as ``lzma.LZMAFile`` reads them but for its one
    leniency: it stops quietly at bytes after a stream that begin no stream; here they
    are an error. Between streams only stream padding may stand: zero bytes, a multiple
    of 4 of them (the xz format, 2.2)."""

    def __init__(self, raw):
        self.raw = raw
        self.dec = None      # the decoder of the stream being read; None between streams
        self.rest = b""      # bytes read after the last stream's end
        self.padding = 0     # zero bytes since the last stream's end

    def read1(self, n: int) -> bytes:
        while True:
            if self.dec is None:
                data = self.rest or self.raw.read(_CHUNK)
                self.rest = b""
                body = data.lstrip(b"\0")
                self.padding += len(data) - len(body)
                if self.padding % 4 and (body or not data):
                    raise Unfinished(f"{self.padding} zero bytes after an xz stream, not a multiple of 4")
                if not data:
                    return b""
                if not body:
                    continue
                if not _XZ_MAGIC.startswith(body[:len(_XZ_MAGIC)]):
                    raise Unfinished(f"bytes after an xz stream that begin no xz stream "
                                     f"(at stored byte {self.raw.tell() - len(body)})")
                self.padding = 0
                self.dec = lzma.LZMADecompressor(lzma.FORMAT_XZ)
                out = self.dec.decompress(body, n)
            elif self.dec.needs_input:
                data = self.raw.read(_CHUNK)
                if not data:
                    raise Unfinished("the data ends inside an xz stream")
                out = self.dec.decompress(data, n)
            else:
                out = self.dec.decompress(b"", n)
            if self.dec.eof:
                self.rest, self.dec = self.dec.unused_data, None
            if out:
                return out

    def close(self) -> None:
        pass


def _stream_errors():
    errors = [Unfinished, EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError]
    try:
        import zstandard

        errors.append(zstandard.ZstdError)
    except ImportError:
        pass
    return tuple(errors)


def _not_regular(path, mode) -> ValueError:
    kinds = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))
    kind = next((name for test, name in kinds if test(mode)), "not a regular file")
    return ValueError(
        f"{path}: is {kind}, not a regular file; fastbpe reads regular files and directories "
        "of them (pass a stream as documents=..., e.g. documents=sys.stdin)"
    )


def file_info(path) -> dict:
    """Identity of a source for resume checks: ``{"path", "size", "version"}`` (mtime and
    inode locally, the backend's etag or mtime remotely); FileNotFoundError naming it."""
    if is_url(path):
        fs, p = require_fsspec(path).core.url_to_fs(path)
        try:
            info = fs.info(p)
        except FileNotFoundError:
            raise FileNotFoundError(f"input file not found: {path}") from None
        version = next((str(info[k]) for k in ("ETag", "etag", "md5", "mtime", "LastModified", "created")
                        if info.get(k) is not None), "")
        return {"path": path, "size": int(info.get("size") or 0), "version": version}
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"input file not found: {os.fspath(path)!r}") from None
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(path, st.st_mode)
    return {"path": os.fspath(path), "size": st.st_size, "version": f"{st.st_mtime_ns}:{st.st_ino}"}


#: ``content_sample`` hashes this many bytes at each of three places of a file.
SAMPLE_BLOCK = 64 << 10


def content_sample(path, size: int) -> str:
    """sha256 of the stored bytes of local file ``path`` at three fixed places: the
    first, the middle and the last ``SAMPLE_BLOCK`` bytes of its ``size`` (the whole file
    when it is at most three blocks). The cheap content check of a resume key (the rule
    and its cost: ``fastbpe.shards``); a file that is not ``size`` bytes long is a
    ValueError naming it (it changed since it was measured).

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "x.txt")
    >>> with open(path, "wb") as fh: _ = fh.write(b"hello")
    >>> content_sample(path, 5)[:12]
    '2cf24dba5fb0'
    """
    if size <= 3 * SAMPLE_BLOCK:
        places = [(0, size)]
    else:
        places = [(0, SAMPLE_BLOCK), ((size - SAMPLE_BLOCK) // 2, SAMPLE_BLOCK), (size - SAMPLE_BLOCK, SAMPLE_BLOCK)]
    h = hashlib.sha256()
    with open(path, "rb") as raw:
        for start, n in places:
            raw.seek(start)
            data = raw.read(n)
            if len(data) != n:
                raise ValueError(f"{os.fspath(path)}: {start + len(data)} bytes where it had {size}: "
                                 "it changed since the corpus was planned")
            h.update(data)
    return h.hexdigest()


class Stream:
    """A decompressed binary stream of one file: ``read(n)``, ``tell()`` (decompressed
    bytes read), ``raw_tell()`` (stored bytes consumed, for progress), ``seekable``.

    ``read`` of a compressed file returns b"" only where the stream provably ends (see
    the module docstring); a fault is raised as ValueError once the bytes decoded before
    it have been handed on, so its offset is exact.
    """

    def __init__(self, name: str, raw, compression: str | None):
        self.name, self.raw, self.compression = name, raw, compression
        self.frames = None
        if compression == "gzip":
            self.fh = gzip.GzipFile(fileobj=raw, mode="rb")
        elif compression == "xz":
            self.fh = _XzReader(raw)
        elif compression == "zstd":
            self.frames = _ZstdFrames(raw)
            self.fh = _zstd_reader(self.frames)
        else:
            self.fh = raw
        self.pos = 0
        self._errors = _stream_errors() if compression else ()
        self._fault = None   # raised by the next read: the bytes before it went first

    @property
    def seekable(self) -> bool:
        return self.compression is None

    def seek(self, pos: int) -> None:
        if self.compression is not None:
            raise ValueError(f"{self.name}: a compressed file can only be read from its start")
        self.raw.seek(pos)
        self.pos = pos

    def read(self, n: int) -> bytes:
        if self.compression is None:
            data = self.fh.read(n)
            self.pos += len(data)
            return data
        parts, got = [], 0
        while got < n and self._fault is None:
            try:
                # read1: one decoded piece at a time, so that none is lost to a later fault
                data = self.fh.read1(n - got)
                if not data:
                    self._check_end()
            except self._errors as exc:
                why = str(exc) if isinstance(exc, Unfinished) else f"{type(exc).__name__}: {exc}"
                self._fault = ValueError(f"{self.name}: corrupt or truncated {self.compression} data "
                                         f"after {self.pos + got} decompressed bytes ({why})")
                break
            if not data:
                break
            parts.append(data)
            got += len(data)
        if not parts and self._fault is not None:
            raise self._fault
        self.pos += got
        return b"".join(parts)

    def _check_end(self) -> None:
        """Unfinished unless the decoder stopped at the end of whole frames (zstd; gzip's
        and the xz reader check their own ends) and of the stored bytes."""
        frames = self.frames
        if frames is None:
            return
        why = frames.unfinished()
        if why is None and not frames.at_eof and frames.read(1):
            why = f"bytes after the last zstd frame that the decoder left (at stored byte {frames.seen - 1})"
        if why is not None:
            raise Unfinished(why)

    def tell(self) -> int:
        return self.pos

    def raw_tell(self) -> int:
        try:
            return self.raw.tell()
        except (OSError, ValueError):
            return 0

    def close(self) -> None:
        try:
            if self.fh is not self.raw:
                self.fh.close()
        finally:
            self.raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_raw(path):
    """The file as stored (no decompression), binary, from its start."""
    if is_url(path):
        return require_fsspec(path).open(path, "rb").open()
    return open(path, "rb")


def open_stream(path) -> Stream:
    """Open ``path`` (local or URL) as a ``Stream``, compression read from its first bytes."""
    raw = open_raw(path)
    try:
        head = raw.read(6)
        raw.seek(0)
    except BaseException:
        raw.close()
        raise
    name = os.fspath(path) if not is_url(path) else path
    compression = next((fmt for magic, fmt in MAGIC if head.startswith(magic)), None)
    try:
        if compression is None:
            _check_not_cut(name, head)
        return Stream(name, raw, compression)
    except BaseException:
        raw.close()
        raise


def named_compression(name: str) -> str | None:
    """The format a file's name promises (``.gz``, ``.zst``/``.zstd``, ``.xz``), or None.

    >>> named_compression("a/train.jsonl.zst"), named_compression("notes.txt")
    ('zstd', None)
    """
    lower = name.lower()
    return next((fmt for suffix, fmt in SUFFIXES if lower.endswith(suffix)), None)


def _check_not_cut(name: str, head: bytes) -> None:
    """ValueError for a file named as compressed whose whole content is a beginning of
    its format's magic number (an empty file too): a download cut in its header. A
    longer file without the magic is read as it is (compression is read from the data).

    >>> _check_not_cut("x.txt.zst", bytes.fromhex("28b5"))
    Traceback (most recent call last):
    ...
    ValueError: x.txt.zst: corrupt or truncated zstd data after 0 decompressed bytes (the file is 2 bytes long, cut inside the magic number 28 b5 2f fd)
    """
    fmt = named_compression(name)
    magic = next((m for m, f in MAGIC if f == fmt and len(head) < len(m) and m.startswith(head)), None)
    if magic is not None:
        raise ValueError(f"{name}: corrupt or truncated {fmt} data after 0 decompressed bytes (the file is "
                         f"{len(head)} bytes long, cut inside the magic number {magic.hex(' ')})")


def compression_of(path) -> str | None:
    with open_raw(path) as raw:
        head = raw.read(6)
    return next((name for magic, name in MAGIC if head.startswith(magic)), None)


def expand(path) -> list:
    """The files one path stands for: itself, or a local directory's regular files,
    recursively, in sorted order of their path components (names starting with ``"."``
    skipped; symlinks to directories not followed); URLs stand for themselves."""
    if is_url(path):
        return [path]
    p = Path(path)
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise FileNotFoundError(
            f"input file not found: {os.fspath(path)!r} (to pass text, use documents=[...])"
        ) from None
    if stat.S_ISDIR(mode):
        found = []
        for dirpath, dirnames, filenames in os.walk(p):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                f = Path(dirpath, name)
                if not name.startswith(".") and f.is_file():
                    found.append(f)
        if not found:
            raise ValueError(f"{p}: directory holds no files")
        return sorted(found, key=lambda f: f.relative_to(p).parts)
    if not stat.S_ISREG(mode):
        raise _not_regular(p, mode)
    return [p]
