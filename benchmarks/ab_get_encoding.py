"""A/B: how long the first ``get_encoding(name)`` of a process takes, for checkouts.

    python benchmarks/ab_get_encoding.py /path/to/old-checkout /path/to/new-checkout \
        [--names o200k_base,cl100k_base] [--rounds 7] [--vocab-dir ../shared/vocab]

Each round starts one fresh process per checkout and source (order reversed every other
round, as in ``ab_encode.py``, because on shared 2-core machines the process started
second runs at a different speed) and times one ``get_encoding`` in wall time. Sources:
``dir`` sets ``FASTBPE_VOCAB_DIR`` to the plain ``.tiktoken`` files (the only way a
checkout without shipped vocabularies finds them); ``shipped`` sets no variable, so a
checkout with ``fastbpe/vocab/`` unpacks its own copy (and one without fails: shown as
``-``). tiktoken's cache is pointed at an empty folder for both. The table gives the best
time over the rounds and the ratio to the first checkout's ``dir`` time.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = r"""
import sys, time
sys.path.insert(0, TREE)
import fastbpe
assert fastbpe.__file__.startswith(TREE), fastbpe.__file__
t = time.perf_counter()
fastbpe.get_encoding(NAME)
print(time.perf_counter() - t)
"""


def _time_once(tree: str, name: str, vocab_dir: str | None, empty: str) -> float | None:
    env = {k: v for k, v in os.environ.items() if k not in ("FASTBPE_VOCAB_DIR", "DATA_GYM_CACHE_DIR")}
    env["TIKTOKEN_CACHE_DIR"] = empty
    if vocab_dir:
        env["FASTBPE_VOCAB_DIR"] = vocab_dir
    code = _CHILD.replace("TREE", repr(tree)).replace("NAME", repr(name))
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=empty, capture_output=True, text=True)
    return float(proc.stdout) if proc.returncode == 0 else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--names", default="o200k_base,cl100k_base")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--vocab-dir", default=str(Path(__file__).resolve().parents[2] / "shared" / "vocab"))
    args = ap.parse_args()
    trees = [str(Path(t).resolve()) for t in args.trees]
    runs = [(t, src) for t in trees for src in ("dir", "shipped")]
    with tempfile.TemporaryDirectory() as empty:
        for name in args.names.split(","):
            best: dict[tuple[str, str], float] = {}
            for r in range(args.rounds):
                for tree, src in runs if r % 2 == 0 else runs[::-1]:
                    got = _time_once(tree, name, args.vocab_dir if src == "dir" else None, empty)
                    if got is not None:
                        best[tree, src] = min(best.get((tree, src), got), got)
            base = best.get((trees[0], "dir"))
            print(f"{name}: best of {args.rounds}, first get_encoding in a fresh process")
            for tree, src in runs:
                t = best.get((tree, src))
                shown = f"{t * 1000:7.0f} ms  x{t / base:.2f}" if t and base else "      -"
                print(f"  {Path(tree).name:>24} {src:>8} {shown}")


if __name__ == "__main__":
    main()
