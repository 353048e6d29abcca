"""Run one command in a fresh process and report its peak RSS, wall and CPU time.

Used by ``train_corpus.py``, ``memory_bounds.py`` and ``shards_speed.py``::

    from peak_rss import measure
    r = measure([sys.executable, "-m", "fastbpe", "count", "-t", "gpt2", "big.txt"])
    r["peak_rss_mb"], r["wall_s"], r["cpu_s"], r["rc"], r["stdout"], r["stderr"]

Why a launcher: the command runs as the only child of a tiny Python process, which
reads ``getrusage(RUSAGE_CHILDREN).ru_maxrss`` after it exits. On Linux a child's
``ru_maxrss`` starts at the RSS of the process it was forked from, so measuring from a
benchmark process that holds a corpus in memory would report that corpus too. The
launcher is a few MB, well under anything we measure.

The child's output goes to temporary files (a pipe would fill up and block it).
``wall_s`` is measured by the launcher around the child (interpreter start-up and
imports included: compare like with like, or have the child time itself and print it).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_LAUNCHER = r"""
import json, os, resource, subprocess, sys, tempfile, time
argv, timeout, cap_mb = json.loads(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
page_mb = os.sysconf("SC_PAGE_SIZE") / (1 << 20)
out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
t0 = time.perf_counter()
p = subprocess.Popen(argv, stdout=out, stderr=err)
rc, note = None, b""
while rc is None:
    try:
        rc = p.wait(0.2)
    except subprocess.TimeoutExpired:
        if timeout > 0 and time.perf_counter() - t0 > timeout:
            p.kill(); p.wait(); rc, note = "timeout", b"\n(timed out after %.0f s)" % timeout
        elif cap_mb > 0:
            try:
                with open(f"/proc/{p.pid}/statm") as fh:
                    rss = int(fh.read().split()[1]) * page_mb
            except (OSError, ValueError, IndexError):
                rss = 0
            if rss > cap_mb:
                p.kill(); p.wait(); rc, note = "rss cap", b"\n(killed at %.0f MB RSS, above the cap)" % rss
wall = time.perf_counter() - t0
u = resource.getrusage(resource.RUSAGE_CHILDREN)
out.seek(0); err.seek(0)
print(json.dumps({
    "rc": rc, "wall_s": wall, "cpu_s": u.ru_utime + u.ru_stime,
    "peak_rss_mb": u.ru_maxrss / 1024,  # KiB on Linux
    "stdout": out.read().decode("utf-8", "replace")[-200000:],
    "stderr": (err.read() + note).decode("utf-8", "replace")[-4000:],
}))
"""


def env_with_checkout(extra: dict | None = None) -> dict:
    """The environment for a child: this checkout's fastbpe first when it is built in
    place (as the benchmarks do: an unbuilt source tree must not shadow the installed
    package), and the shared vocabularies when nothing else is set."""
    env = dict(os.environ)
    if any((ROOT / "fastbpe").glob("_encode*.so")):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    shared = ROOT.parent / "shared" / "vocab"
    if "FASTBPE_VOCAB_DIR" not in env and shared.is_dir():
        env["FASTBPE_VOCAB_DIR"] = str(shared)
    env.update(extra or {})
    return env


def measure(argv: list[str], *, env: dict | None = None, timeout: float = 0, rss_cap_mb: float = 0,
            cwd=None) -> dict:
    """Run ``argv`` under the launcher; see the module docstring for the keys returned.

    ``timeout`` (seconds) and ``rss_cap_mb`` (polled every 0.2 s: a safety net on a
    shared machine, not the measurement) kill the command when passed (0: no limit);
    ``rc`` is then ``"timeout"`` or ``"rss cap"``.
    """
    proc = subprocess.run([sys.executable, "-c", _LAUNCHER, json.dumps(argv), str(timeout), str(rss_cap_mb)],
                          capture_output=True, env=env if env is not None else env_with_checkout(), cwd=cwd)
    try:
        return json.loads(proc.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"rc": "launcher failed", "wall_s": float("nan"), "cpu_s": float("nan"),
                "peak_rss_mb": float("nan"), "stdout": "", "stderr": proc.stderr.decode(errors="replace")[-4000:]}


def last_json(result: dict) -> dict:
    """The last stdout line of a child that prints its result as JSON, or {"error": ...}."""
    if result["rc"] != 0:
        lines = result["stderr"].strip().splitlines() or [f"exit status {result['rc']}"]
        return {"error": f"rc={result['rc']}: {lines[-1][:300]}"}
    try:
        return json.loads(result["stdout"].strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": "no JSON result on stdout"}
