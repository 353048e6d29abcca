"""The atomic writer keeps modes and symlinks and cleans the temporaries of killed saves
(issue 22)."""
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import fastbpe
from fastbpe.io import atomic as _atomic
from fastbpe.io.atomic import TMP_SUFFIX, atomic_write_text, clean_stale_temps, temp_name

ROOT = Path(__file__).resolve().parents[1]
posix_only = pytest.mark.skipif(os.name != "posix", reason="modes, symlinks and signals are POSIX")


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask():
    """Set the umask for one test and put it back."""
    old = os.umask(0o022)
    os.umask(old)
    yield lambda mask: os.umask(mask)
    os.umask(old)


@posix_only
@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_file_gets_the_umask_default(tmp_path, umask, mask, mode):
    umask(mask)
    atomic_write_text(tmp_path / "t.json", "{}")
    assert _mode(tmp_path / "t.json") == mode


@posix_only
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600, 0o664])
def test_an_existing_file_keeps_its_mode(tmp_path, umask, mode):
    path = tmp_path / "t.json"
    path.write_text("old")
    os.chmod(path, mode)
    umask(0o077)
    atomic_write_text(path, "new")
    assert path.read_text() == "new" and _mode(path) == mode


@posix_only
def test_saving_through_a_symlink_replaces_its_target(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "real.json").write_text("old")
    os.chmod(shared / "real.json", 0o644)
    link = tmp_path / "tok.json"
    link.symlink_to(os.path.join("shared", "real.json"))  # relative, as people make them
    assert atomic_write_text(link, "new") == link
    assert link.is_symlink() and link.read_text() == "new"
    assert (shared / "real.json").read_text() == "new" and _mode(shared / "real.json") == 0o644
    assert sorted(os.listdir(shared)) == ["real.json"] and sorted(os.listdir(tmp_path)) == ["shared", "tok.json"]


@posix_only
def test_a_dangling_symlink_gets_its_target_created(tmp_path):
    link = tmp_path / "tok.json"
    link.symlink_to(tmp_path / "later.json")
    atomic_write_text(link, "x")
    assert link.is_symlink() and (tmp_path / "later.json").read_text() == "x"


@posix_only
def test_an_encoding_save_keeps_mode_and_link(tmp_path):
    ranks = {bytes([b]): b for b in range(256)}
    enc = fastbpe.Encoding("t", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={})
    real = tmp_path / "real.json"
    enc.save(real)
    os.chmod(real, 0o644)
    (tmp_path / "link.json").symlink_to(real)
    enc.save(tmp_path / "link.json")
    assert (tmp_path / "link.json").is_symlink() and _mode(real) == 0o644
    assert fastbpe.load(tmp_path / "link.json").mergeable_ranks == ranks


def test_temporaries_are_named_after_their_target():
    name = temp_name(Path("/x/tok.json"), pid=123)
    assert name.startswith(".tok.json.123.") and name.endswith(TMP_SUFFIX)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_temporaries_of_the_same_target_are_removed(tmp_path):
    target = tmp_path / "tok.json"
    dead = tmp_path / temp_name(target, pid=_dead_pid())
    live_fresh = tmp_path / temp_name(target, pid=os.getppid())
    live_old = tmp_path / temp_name(target, pid=os.getppid())
    other_target = tmp_path / temp_name(tmp_path / "tok.json.bak", pid=_dead_pid())
    not_ours = tmp_path / ".tok.json.notes"
    for p in (dead, live_fresh, live_old, other_target, not_ours):
        p.write_text("partial")
    hours_ago = time.time() - 2 * _atomic.STALE_SECONDS
    os.utime(live_old, (hours_ago, hours_ago))
    atomic_write_text(target, "{}")
    assert sorted(os.listdir(tmp_path)) == sorted(["tok.json", live_fresh.name, other_target.name, not_ours.name])
    assert clean_stale_temps(target) == []


@posix_only
def test_a_save_killed_by_sigkill_leaves_a_temp_the_next_save_removes(tmp_path):
    """A writer killed between writing and renaming cannot clean up; the next save does."""
    target = tmp_path / "tok.json"
    target.write_text("old")
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {os.path.dirname(os.path.dirname(fastbpe.__file__))!r})  # the fastbpe under test
        from fastbpe.io import atomic as _atomic
        def killed(*args):
            os.kill(os.getpid(), signal.SIGKILL)
        _atomic.os.replace = killed
        _atomic.atomic_write_text({str(target)!r}, "new")
    """)
    proc = subprocess.run([sys.executable, "-c", script], timeout=120)
    assert proc.returncode == -signal.SIGKILL
    strays = [n for n in os.listdir(tmp_path) if n.endswith(TMP_SUFFIX)]
    assert len(strays) == 1 and strays[0].startswith(".tok.json.") and target.read_text() == "old"
    atomic_write_text(target, "newer")
    assert sorted(os.listdir(tmp_path)) == ["tok.json"] and target.read_text() == "newer"


def test_an_interrupted_save_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "tok.json"
    target.write_text("old")

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(_atomic.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_text(target, "new")
    assert target.read_text() == "old" and sorted(os.listdir(tmp_path)) == ["tok.json"]


def test_clean_stale_temps_in_a_folder(tmp_path):
    """The folder-wide form (a shard run's start): every target's stale temporaries, the
    same rule; ``keep`` spares some targets."""
    dead = [tmp_path / temp_name(tmp_path / n, pid=_dead_pid()) for n in ("a.bin", "b.idx", "manifest.json")]
    live = tmp_path / temp_name(tmp_path / "c.bin", pid=os.getppid())
    kept = tmp_path / temp_name(tmp_path / "keep.bin", pid=_dead_pid())
    not_ours = tmp_path / ".a.bin.notes"
    for p in (*dead, live, kept, not_ours):
        p.write_text("partial")
    removed = _atomic.clean_stale_temps_in(tmp_path, keep=lambda name: name == "keep.bin")
    assert sorted(removed) == sorted(dead)
    assert sorted(os.listdir(tmp_path)) == sorted([live.name, kept.name, not_ours.name])


def test_atomic_open_streams_and_removes_its_temp_on_error(tmp_path):
    target = tmp_path / "t.bin"
    with _atomic.atomic_open(target) as fh:
        for k in range(3):
            fh.write(bytes([k]) * 10)
    assert target.read_bytes() == b"\0" * 10 + b"\1" * 10 + b"\2" * 10
    with pytest.raises(RuntimeError):
        with _atomic.atomic_open(target) as fh:
            fh.write(b"partial")
            raise RuntimeError("stop")
    assert sorted(os.listdir(tmp_path)) == ["t.bin"] and target.read_bytes()[:1] == b"\0"
