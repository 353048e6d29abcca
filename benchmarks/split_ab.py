"""The split alone, two builds in one process: another checkout's ``_pretokenize`` against
this one's (each classifier build of this one), interleaved.

    python benchmarks/split_ab.py OLD_TREE [--pattern gpt2 cl100k o200k]
        [--kind english turkish chinese python man typographic] [--rounds 11]

OLD_TREE is a checkout built in place (its other modules may be this one's copies:
only its ``fastbpe/_pretokenize*.so`` is loaded, under another module name). Both
run ``_count_chunks`` over the same ~2 MB per kind (``encode_peers.kind_text``;
``typographic`` is the English corpus with curly quotes, ’ and em dashes), best of
``--rounds``, ns per chunk, process CPU time. One process sees the same host load
for all sides, where separate processes differed by 20-50% at a load average of 4-5
(2026-12-04).
"""
from __future__ import annotations

import argparse
import glob
import importlib.util
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import encode_peers as ep  # noqa: E402
from fastbpe import _pretokenize as NEW  # noqa: E402


def load_other(tree: Path):
    path = glob.glob(str(tree / "fastbpe" / "_pretokenize*.so"))[0]
    spec = importlib.util.spec_from_file_location("old_build._pretokenize", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def text_of(kind: str) -> str:
    if kind != "typographic":
        return ep.kind_text(kind, 2_000_000, None)
    text = ep.kind_text("english", 2_000_000, None)
    text = re.sub(r'"([^"\n]*)"', "\u201c\\1\u201d", text)
    return text.replace("'", "\u2019").replace(" -- ", " \u2014 ")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("--pattern", nargs="*", default=["gpt2", "cl100k", "o200k"])
    ap.add_argument("--kind", nargs="*",
                    default=["english", "turkish", "chinese", "python", "man", "typographic"])
    ap.add_argument("--rounds", type=int, default=11)
    args = ap.parse_args(argv)
    old = load_other(args.old)
    sides = [("old", old, None)]
    for simd in ("sse2", "avx2"):
        NEW._set_win_simd(simd)
        if NEW.win_simd() == simd:
            sides.append((f"new {simd}", NEW, simd))
    print("| pattern, text | " + " | ".join(s[0] for s in sides) + " | old / best new |")
    print("|---" * (len(sides) + 2) + "|")
    for kind in args.kind:
        data = text_of(kind).encode()
        for pat in args.pattern:
            pid = NEW.pattern_id(pat)
            n = NEW._count_chunks(data, pid)
            best = {}
            for _ in range(args.rounds):
                for name, module, simd in sides:
                    if simd:
                        module._set_win_simd(simd)
                    t = time.process_time()
                    module._count_chunks(data, pid)
                    best[name] = min(best.get(name, float("inf")), time.process_time() - t)
            fastest = min(v for k, v in best.items() if k != "old")
            print(f"| {pat} {kind} | " + " | ".join(f"{best[s[0]] / n * 1e9:.2f}" for s in sides)
                  + f" | {best['old'] / fastest:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
