"""One text file, whole: ``Encoding.encode_file`` on 1 and 2 threads against the peers.

    python benchmarks/encode_file_speed.py [--vocab gpt2 ...] [--kind english ...] [--mb 4]
        [--repeat 3] [--kernel-dir DIR]

The text kinds of ``encode_peers.py`` (about ``--mb`` MB each) are written to a
temporary file; each library then encodes that file's text, ids checked equal to
tiktoken's first. Every timed call uses a fresh tokenizer (built untimed): a file is
encoded once, cold. Wall time, reading the file included; best of ``--repeat``.

- ``fastbpe file 1T`` / ``2T``: ``encode_file(path, num_threads=1 / 2)`` (bytes to ids,
  no str).
- ``fastbpe str``: ``encode_to_numpy(path.read_bytes().decode())``, one thread (what a caller
  without ``encode_file`` does).
- ``gigatoken``: ``Tokenizer.encode(path.read_bytes())`` (RAYON_NUM_THREADS=1, as in
  ``encode_peers.py``, so one core).
- ``tiktoken``: ``encode_ordinary(path.read_bytes().decode())``.

The table gives MB/s and two ratios: 2 threads over 1 (the target is >= 1.8x on 2
cores) and fastbpe's 1 thread over gigatoken.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if any((ROOT / "fastbpe").glob("_encode*.so")) and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("RAYON_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import encode_peers as peers  # noqa: E402


def best_of(repeat: int, make, call) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        tok = make()
        t = time.perf_counter()
        out = call(tok)
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", nargs="*", default=list(peers.VOCABS), choices=peers.VOCABS)
    ap.add_argument("--kind", nargs="*", default=list(peers.KINDS), choices=peers.KINDS)
    ap.add_argument("--mb", type=float, default=4.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--kernel-dir", type=Path, default=None)
    args = ap.parse_args()
    kernel_dir = args.kernel_dir or peers.default_kernel_dir()
    cols = ["fastbpe file 1T", "fastbpe file 2T", "fastbpe str", "gigatoken", "tiktoken"]
    print("| vocab | kind | MB | " + " | ".join(cols) + " | 2T/1T | 1T / gigatoken |")
    print("|---" * (len(cols) + 5) + "|")
    with tempfile.TemporaryDirectory() as tmp:
        for vocab in args.vocab:
            p = peers.Peers(vocab)
            for kind in args.kind:
                text = peers.kind_text(kind, int(args.mb * 1e6), kernel_dir)
                if not text:
                    print(f"| {vocab} | {kind} | (no text) |")
                    continue
                path = Path(tmp) / f"{kind}.txt"
                path.write_bytes(text.encode("utf-8"))
                mb = path.stat().st_size / 1e6
                want = np.array(p.tiktoken.encode_ordinary(text), dtype=np.uint32)
                calls = {
                    "fastbpe file 1T": (p.fresh_fastbpe, lambda e: e.encode_file(path, num_threads=1,
                                                                                 disallowed_special=())),
                    "fastbpe file 2T": (p.fresh_fastbpe, lambda e: e.encode_file(path, num_threads=2,
                                                                                 disallowed_special=())),
                    "fastbpe str": (p.fresh_fastbpe, lambda e: e.encode_to_numpy(path.read_bytes().decode("utf-8"),
                                                                                 disallowed_special=())),
                    "tiktoken": (lambda: p.tiktoken, lambda e: e.encode_ordinary(path.read_bytes().decode("utf-8"))),
                }
                if p.giga is not None:
                    calls["gigatoken"] = (p.fresh_giga, lambda e: e.encode(path.read_bytes()))
                speed = {}
                for name, (make, call) in calls.items():
                    secs, out = best_of(1 if name == "tiktoken" else args.repeat, make, call)
                    if not np.array_equal(np.asarray(out, dtype=np.uint32), want):
                        speed[name] = None
                        continue
                    speed[name] = mb / secs

                def cell(name):
                    v = speed.get(name)
                    return "differs" if name in speed and v is None else ("-" if v is None else f"{v:.0f}")

                def ratio(a, b):
                    return f"{speed[a] / speed[b]:.2f}x" if speed.get(a) and speed.get(b) else "-"

                print(f"| {vocab} | {kind} | {mb:.1f} | " + " | ".join(cell(c) for c in cols)
                      + f" | {ratio('fastbpe file 2T', 'fastbpe file 1T')} | {ratio('fastbpe file 1T', 'gigatoken')} |",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
