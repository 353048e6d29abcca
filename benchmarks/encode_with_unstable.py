"""``encode_with_unstable``: fastbpe's (composed in Python from native primitives, see
``fastbpe/unstable.py``) against tiktoken's (all in Rust), on a few endings.

    python benchmarks/encode_with_unstable.py [--encoding o200k_base]

A text that ends in whitespace is the worst case for both: every token that starts with
a space (~100,000 in o200k_base) is re-encoded. Best of 5 wall-clock runs each, the two
alternating; prints milliseconds and the ratio fastbpe / tiktoken. The vocabulary comes
from ``$FASTBPE_VOCAB_DIR`` (default ``../shared/vocab`` beside the project).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("FASTBPE_VOCAB_DIR", str(ROOT.parent / "shared" / "vocab"))

import tiktoken  # noqa: E402

import fastbpe  # noqa: E402

TEXTS = ["hello fanta", "def f(x):\n    return x  ", "中文文本", "a" * 300]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--encoding", default="o200k_base")
    args = ap.parse_args()
    ours = fastbpe.get_encoding(args.encoding)
    tk = tiktoken.Encoding(args.encoding, pat_str=ours._pat_str, mergeable_ranks=ours._mergeable_ranks,
                           special_tokens=ours._special_tokens)
    ours.encode_with_unstable("warm up the caches")
    print(f"{args.encoding}: {'text':<28} {'fastbpe':>10} {'tiktoken':>10} {'ratio':>6}")
    for text in TEXTS:
        best = {"ours": float("inf"), "tk": float("inf")}
        for _ in range(5):
            for key, enc in (("ours", ours), ("tk", tk)):
                t0 = time.perf_counter()
                enc.encode_with_unstable(text)
                best[key] = min(best[key], time.perf_counter() - t0)
        print(f"  {text[:26]!r:<28} {best['ours'] * 1e3:>7.1f} ms {best['tk'] * 1e3:>7.1f} ms "
              f"{best['ours'] / best['tk']:>6.2f}")


if __name__ == "__main__":
    main()
