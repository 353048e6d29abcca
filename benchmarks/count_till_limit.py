"""``Encoding.count_till_limit`` on a 10 MB text: it must cost what the prefix it reads
costs, not what the whole text costs.

    python benchmarks/count_till_limit.py [--encoding cl100k_base] [--mb 10]

Prints, for several limits, the time of ``count_till_limit(text, limit)`` next to
``count(text)`` (the whole text, natively) and their ratio; and the two strategies it
chooses between (counting whole vs walking piece by piece) on texts of
``_COUNT_WHOLE * limit`` characters, where they should cost about the same. Best of 5,
CPU time of this thread. The vocabulary comes from ``$FASTBPE_VOCAB_DIR`` (default
``../shared/vocab`` beside the project).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("FASTBPE_VOCAB_DIR", str(ROOT.parent / "shared" / "vocab"))

import fastbpe  # noqa: E402
from fastbpe.bpe import encoding  # noqa: E402
from corpus import corpus  # noqa: E402


def best(f, rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.thread_time()
        f()
        times.append(time.thread_time() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--encoding", default="cl100k_base")
    ap.add_argument("--mb", type=float, default=10)
    args = ap.parse_args()
    enc = fastbpe.get_encoding(args.encoding)
    base = corpus("english")
    text = (base * (int(args.mb * 2**20) // len(base) + 1))[: int(args.mb * 2**20)]
    whole = best(lambda: enc.count(text), 3)
    print(f"{args.encoding}, {len(text) / 2**20:.1f} M characters: count(text) {whole * 1e3:.1f} ms")
    print(f"{'limit':>10} {'count_till_limit':>17} {'ratio to count':>15}")
    for limit in (10, 100, 1_000, 10_000, 100_000):
        t = best(lambda: enc.count_till_limit(text, limit))
        assert enc.count_till_limit(text, limit) is None
        print(f"{limit:>10,} {t * 1e3:>14.3f} ms {t / whole:>15.5f}")
    print(f"\nthe two strategies at the switch (texts of {encoding._COUNT_WHOLE} characters per token of the limit):")
    for limit in (1_000, 10_000):
        part = text[: encoding._COUNT_WHOLE * (limit + 1) + 1]   # just long enough to walk
        walk = best(lambda: enc.count_till_limit(part, limit))
        native = best(lambda: enc.count(part))
        print(f"  limit {limit:>6,}: walk {walk * 1e3:.2f} ms, count whole {native * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
