"""Atomic saves: write a temporary file beside the target, fsync, rename over it, fsync
the directory.

A crash (or Ctrl-C) at any point leaves either the old file or the new one, never a
truncated mix. The saved file behaves as if it had been overwritten in place:

- an existing file keeps its permission bits (a 0644 file stays 0644); a new file gets
  the umask's default (0666 & ~umask), as ``open(path, "w")`` would give it;
- a symlink stays a symlink: the file it points to is replaced (a dangling link gets
  its target created), so a link into a shared vocabulary folder keeps working.

Owner and group are not copied (that needs privileges); the new file is the saver's.

Temporaries are named ``.<name>.<pid>.<random>.fastbpe-tmp`` in the target's folder, so
a stray one is recognisable. A writer that returns or raises removes its own; one killed
outright (SIGKILL, power loss) cannot, so every save first removes the stale temporaries
*of the same target*: those whose pid is not a live process on this machine, or that
are older than ``STALE_SECONDS`` (one hour; a live pid that old is a reused pid or a
hung writer, and no save takes an hour). A temporary of a save still running in another
process is younger and has a live pid, so it is left alone. ``clean_stale_temps_in``
applies the same rule to every temporary of a folder (the shard writer's start of a run).

``atomic_open`` is the streaming form (a file written piece by piece, e.g. a token shard
of gigabytes); ``atomic_write_bytes`` is ``atomic_open`` with one write.

>>> import tempfile, os
>>> d = tempfile.mkdtemp()
>>> p = atomic_write_text(os.path.join(d, "t.json"), "{}")
>>> sorted(os.listdir(d)), p.read_text()
(['t.json'], '{}')
"""
from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

TMP_SUFFIX = ".fastbpe-tmp"

#: A temporary older than this is stale whatever its pid says.
STALE_SECONDS = 3600


def temp_name(target: Path, pid: int | None = None) -> str:
    """The name of a temporary for ``target``: ``.<name>.<pid>.<random>.fastbpe-tmp``."""
    return f".{target.name}.{os.getpid() if pid is None else pid}.{secrets.token_hex(4)}{TMP_SUFFIX}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def _temp_pid(target: Path, name: str) -> int | None:
    """The pid in the name of a temporary of ``target``, or None if ``name`` is not one
    (``.a.b.<pid>...`` belongs to ``a.b``, not to ``a``)."""
    match = re.fullmatch(re.escape(f".{target.name}.") + r"(\d+)\.[0-9a-f]{8}" + re.escape(TMP_SUFFIX), name)
    return int(match.group(1)) if match else None


_ANY_TEMP = re.compile(r"\.(.+)\.(\d+)\.[0-9a-f]{8}" + re.escape(TMP_SUFFIX))


def _is_stale(tmp: Path, pid: int, now: float) -> bool:
    try:
        age = now - tmp.lstat().st_mtime
    except FileNotFoundError:
        return False
    return age > STALE_SECONDS or (pid != os.getpid() and not _pid_alive(pid))


def clean_stale_temps(target: Path) -> list[Path]:
    """Remove the stale temporaries of ``target`` (see the module docstring); returns them."""
    now = time.time()
    removed = []
    try:
        names = os.listdir(target.parent)
    except FileNotFoundError:
        return removed
    for name in names:
        pid = _temp_pid(target, name)
        if pid is not None and _is_stale(target.parent / name, pid, now):
            try:
                os.unlink(target.parent / name)
                removed.append(target.parent / name)
            except FileNotFoundError:  # another saver cleaned it first
                pass
    return removed


def clean_stale_temps_in(folder: Path, keep: Callable[[str], bool] = lambda target_name: False) -> list[Path]:
    """Remove the stale temporaries of every target in ``folder`` (the module's rule),
    except those whose target name ``keep`` accepts; returns the removed paths."""
    now = time.time()
    removed = []
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return removed
    for name in names:
        match = _ANY_TEMP.fullmatch(name)
        if match is None or keep(match.group(1)):
            continue
        path = Path(folder) / name
        if _is_stale(path, int(match.group(2)), now):
            try:
                os.unlink(path)
                removed.append(path)
            except FileNotFoundError:  # another cleaner was first
                pass
    return removed


def fsync_dir(folder: Path) -> None:
    """Make the rename durable (POSIX); platforms that cannot open a folder skip it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some filesystems refuse fsync on a folder
        pass
    finally:
        os.close(fd)


def _open_temp(target: Path) -> tuple[int, Path]:
    """A new temporary beside ``target``, with the mode the saved file must have."""
    try:
        keep_mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        keep_mode = None
    while True:
        tmp = target.parent / temp_name(target)
        try:
            # 0o666 & ~umask for a new file, like open(path, "w")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
            break
        except FileExistsError:  # pragma: no cover - 32 random bits collided
            continue
    if keep_mode is not None:
        os.fchmod(fd, keep_mode)  # exact, whatever the umask
    return fd, tmp


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, *, clean: bool = True, sync_dir: bool = True) -> Iterator[BinaryIO]:
    """A binary file to write that appears at ``path`` only when the block ends without an
    exception (flushed, fsynced, renamed over ``path``, folder fsynced); on an exception
    the temporary is removed and ``path`` is untouched.

    ``clean=False`` skips removing the target's stale temporaries (a writer of many files
    in one folder cleans the folder once, with ``clean_stale_temps_in``, instead of
    listing it per file). ``sync_dir=False`` leaves the folder's fsync to the caller
    (after several renames, one fsync makes them all durable).

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with atomic_open(os.path.join(d, "t.bin")) as fh:
    ...     _ = fh.write(b"ab")
    ...     "t.bin" in os.listdir(d)          # not under its name until the block ends
    False
    >>> open(os.path.join(d, "t.bin"), "rb").read()
    b'ab'
    """
    target = Path(os.path.realpath(Path(path)))  # through symlinks, to the file they name
    if clean:
        clean_stale_temps(target)
    fd, tmp = _open_temp(target)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if sync_dir:
        fsync_dir(target.parent)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically and return the path (as given: a symlink's
    target is what gets replaced)."""
    with atomic_open(path) as fh:
        fh.write(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """``atomic_write_bytes`` for text, always UTF-8 with ``\\n`` line ends."""
    return atomic_write_bytes(path, text.encode("utf-8"))
