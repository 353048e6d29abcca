"""Byte streams of corpus files: local paths or fsspec URLs, decompressed on the fly.

Decisions:

* **Local or remote.** A ``str`` containing ``"://"`` is an fsspec URL (``s3://``,
  ``gs://``, ``https://``, ``memory://``, …; ``fsspec`` and the backend must be
  installed); anything else (``str``, ``os.PathLike``) is a local path.
* **Compression is read from the data, not the name**: gzip (``1f 8b``), zstd
  (``28 b5 2f fd``, needs ``zstandard``) and xz (``fd 37 7a 58 5a 00``). Corrupt or
  truncated data raises ValueError naming the file and how many decompressed bytes were
  read before it.
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

MAGIC = ((b"\x1f\x8b", "gzip"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"\xfd7zXZ\x00", "xz"))


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


def _zstd_reader(raw):
    try:
        import zstandard
    except ImportError:
        raise ImportError("reading zstd-compressed files needs zstandard (pip install zstandard)") from None
    return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)


def _stream_errors():
    errors = [EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError]
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
    bytes read), ``raw_tell()`` (stored bytes consumed, for progress), ``seekable``."""

    def __init__(self, name: str, raw, compression: str | None):
        self.name, self.raw, self.compression = name, raw, compression
        if compression == "gzip":
            self.fh = gzip.GzipFile(fileobj=raw, mode="rb")
        elif compression == "xz":
            self.fh = lzma.LZMAFile(raw, mode="rb")
        elif compression == "zstd":
            self.fh = _zstd_reader(raw)
        else:
            self.fh = raw
        self.pos = 0
        self._errors = _stream_errors() if compression else ()

    @property
    def seekable(self) -> bool:
        return self.compression is None

    def seek(self, pos: int) -> None:
        if self.compression is not None:
            raise ValueError(f"{self.name}: a compressed file can only be read from its start")
        self.raw.seek(pos)
        self.pos = pos

    def read(self, n: int) -> bytes:
        try:
            data = self.fh.read(n)
        except self._errors as exc:
            raise ValueError(
                f"{self.name}: corrupt or truncated {self.compression} data after {self.pos} "
                f"decompressed bytes ({type(exc).__name__}: {exc})"
            ) from None
        self.pos += len(data)
        return data

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
    compression = next((name for magic, name in MAGIC if head.startswith(magic)), None)
    try:
        return Stream(os.fspath(path) if not is_url(path) else path, raw, compression)
    except BaseException:
        raw.close()
        raise


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
