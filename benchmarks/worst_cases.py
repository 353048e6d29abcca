"""Worst-case inputs: time must grow linearly with length (10x the input, about 10x the time).

    python benchmarks/worst_cases.py [--vocab o200k_base ...] [--sizes 1000000 10000000]
                                     [--repeat 5]

Inputs (issue 3): "x" * n, " " * n, "\\n" * n, one CJK character repeated to n bytes, and
n random bytes decoded as UTF-8 with replacement. Each is encoded --repeat times per
size with ``CoreBPE.encode_ordinary``, the sizes in turn within each round (CPU time of
the calling thread, the median of the rounds: one shot on a shared machine is often off
by 2x), round-tripped through ``decode_bytes``,
and the table gives the time per MB and the ratio between the largest and smallest size
relative to their length ratio (1.0 = exactly linear).
Vocabularies: ../shared/vocab (or $FASTBPE_TEST_VOCAB_DIR).
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A checkout built in place is measured; an unbuilt source tree must not shadow the
# installed package.
if any((ROOT / "fastbpe").glob("_encode*.so")) and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from encode_ratios import VOCABS, build  # noqa: E402


def inputs(n: int) -> dict[str, str]:
    """The five worst cases at about n bytes of UTF-8 each."""
    rng = random.Random(0)
    return {
        '"x" * n': "x" * n,
        '" " * n': " " * n,
        '"\\n" * n': "\n" * n,
        "CJK char * n/3": "中" * (n // 3),
        "random bytes": rng.randbytes(n).decode("utf-8", errors="replace"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", nargs="*", default=list(VOCABS))
    ap.add_argument("--sizes", nargs="*", type=int, default=[1_000_000, 10_000_000])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    sizes = sorted(args.sizes)
    print("| vocab | input | " + " | ".join(f"s/MB at {s / 1e6:g} MB" for s in sizes)
          + " | growth / length growth |")
    print("|---|---|" + "---|" * len(sizes) + "---|")
    for name in args.vocab:
        core, _ = build(name)
        per_size = {s: inputs(s) for s in sizes}
        for label in per_size[sizes[0]]:
            # the sizes interleaved, round by round, and the median per size: timed one
            # size after the other, the host's drift between them read as growth, and
            # the least of a few short calls is luckier than that of a few long ones
            runs = {s: [] for s in sizes}
            for _ in range(args.repeat):
                for s in sizes:
                    text = per_size[s][label]
                    t0 = time.thread_time()
                    ids = core.encode_ordinary(text)
                    runs[s].append(time.thread_time() - t0)
                    assert core.decode_bytes(ids) == text.encode("utf-8"), (name, label, s)
                    del ids
            times = [statistics.median(runs[s]) for s in sizes]
            mbs = [len(per_size[s][label].encode()) / 1e6 for s in sizes]
            growth = (times[-1] / times[0]) / (mbs[-1] / mbs[0])
            cells = " | ".join(f"{t / mb:.3f}" for t, mb in zip(times, mbs))
            print(f"| {name} | {label} | {cells} | {growth:.2f} |", flush=True)


if __name__ == "__main__":
    main()
