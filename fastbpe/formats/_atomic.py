"""Atomic saves: write a temporary file beside the target, fsync, then rename over it.

A crash (or Ctrl-C) at any point leaves either the old file or the new one, never a
truncated mix, and never a stray temporary file once the writer has returned or raised.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically and return the path."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """``atomic_write_bytes`` for text, always UTF-8 with ``\\n`` line ends."""
    return atomic_write_bytes(path, text.encode("utf-8"))
