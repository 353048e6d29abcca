"""Random search for texts that a window splitter splits unlike ``regex``.

    python tools/fuzz_windows.py [--pattern o200k] [--seconds 120] [--seed 0] [--simd sse2]

The hypothesis tests in tests/test_pretokenize.py cover the window rules
(src_cython/fastbpe/_split_<pattern>.h) with a few thousand texts; run this for
minutes after changing them. Texts are 10-400 pieces drawn from a random subset of the tests'
WINDOW_PIECES (so that some windows are dense in one kind of char), then random code
points from a few scripts. A text that splits differently is written to
fuzz_<pattern>_failure.txt and the script exits with 1.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import regex  # noqa: E402

from fastbpe import _pretokenize as P  # noqa: E402
from fastbpe.reference import patterns as R  # noqa: E402
from test_pretokenize import WINDOW_PIECES  # noqa: E402

RANGES = [(0x20, 0x7E)] * 6 + [(0x0, 0x20), (0x80, 0x7FF), (0x80, 0x17F), (0x370, 0x3FF),
                               (0x400, 0x4FF), (0x590, 0x6FF), (0x2000, 0x206F),
                               (0x3000, 0x303F), (0x4E00, 0x4E80), (0x1F300, 0x1F600),
                               (0xD800, 0xDFFF), (0x800, 0xFFFF), (0x1E00, 0x1FFF),
                               (0x900, 0x97F), (0xFF00, 0xFF65), (0x2070, 0x218F)]


def pieces_text(rng: random.Random) -> str:
    subset = rng.sample(WINDOW_PIECES, rng.randint(3, len(WINDOW_PIECES)))
    return "".join(rng.choice(subset) for _ in range(rng.randint(10, 400)))


def code_point_text(rng: random.Random) -> str:
    ranges = rng.sample(RANGES, rng.randint(1, 5))
    out = []
    for _ in range(rng.randint(60, 600)):
        if rng.random() < 0.3:
            out.append(rng.choice([" ", "\n", "'", "a", "A", "1", ".", "\t", "\r\n", "  "]))
        else:
            lo, hi = rng.choice(ranges)
            out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pattern", default="o200k", choices=["gpt2", "cl100k", "o200k", "cl100k_digit1"])
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--simd", choices=["sse2", "avx2"], default=None,
                    help="the window classifier's build (default: the best the CPU runs)")
    args = ap.parse_args()
    if args.simd:
        P._set_win_simd(args.simd)
    print(f"windows classified by the {P.win_simd()} build")
    rng = random.Random(args.seed)
    exact = {"gpt2": R.GPT2, "cl100k": R.CL100K, "o200k": R.O200K, "cl100k_digit1": R.CL100K_DIGIT1}[args.pattern]
    pattern = regex.compile(exact)
    failure = Path(f"fuzz_{args.pattern}_failure.txt")
    start, count = time.time(), 0
    while time.time() - start < args.seconds:
        text = pieces_text(rng) if count % 2 == 0 else code_point_text(rng)
        count += 1
        if P.split(text, args.pattern) != pattern.findall(text):
            failure.write_text(text, encoding="utf-8", errors="surrogatepass", newline="")
            print(f"text {count} splits unlike regex: saved to {failure}")
            return 1
    print(f"{count} texts split as regex splits them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
