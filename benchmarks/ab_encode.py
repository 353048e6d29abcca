"""A/B: single-thread ``encode_ordinary`` speed of two (or more) built checkouts.

    python benchmarks/ab_encode.py /path/to/old-checkout /path/to/new-checkout \
        [--cases o200k_base:turkish,cl100k_base:english] [--rounds 8] [--batch | --docs]

With ``--batch`` it times ``encode_ordinary_batch`` instead, on the corpus cut into ~2 KB
documents, on 1 and then 2 threads (wall time, best of 9, alternating; freeing the
returned lists is inside the timing, as in any loop that drops them), and gives each
checkout's best 2-thread time, its 2/1 speedup, and the range of the 2/1 speedups of its
rounds.

With ``--docs`` it times ``encode_to_numpy`` called once per ~2 KB document (as a data
loader calls it) over the second half of the corpus, twice: **cold** (the caches dropped
first) and **steady** (the caches dropped, then the first half encoded three times,
untimed: a stand-in for a long run over text of the same kind, whose caches have seen
its common words more than once), so that the timed text is never text the encoder has
seen; best of 7 each. The table gives
both MB/s per checkout.

Each checkout must be built in place (``python setup.py build_ext --inplace``) and is
timed with its own ``benchmarks/`` helpers (the child process checks that it imported
that checkout's fastbpe, not another one on the path). Every
round starts one fresh process per checkout; a process warms up once, then times 7 calls
per case in CPU time of its thread and reports the best. The table gives each checkout's
best MB/s over all rounds and the last one's ratio to the first.

Why fresh processes, and why the order alternates: on the 2-core shared machines we
measure on, a process started right after another one ran up to ~5% faster or slower
than one started first, so always starting the baseline first favoured one side (a
change once measured +7% one way round and -5% the other). The order of the checkouts
is reversed every other round. Differences under ~3% are noise on such machines; repeat
with more rounds before believing one.
"""
from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

# Run in the child: import fastbpe from the checkout given as TREE, time the cases. The
# checkout's own benchmarks/ helpers are used, so that encode_ratios puts that checkout
# (not this one) first on sys.path; the child then checks where fastbpe came from.
# CHILD_IMPORTS is also the start of ab_duel.py's child.
CHILD_IMPORTS = r"""
import os, sys, time
import numpy as np
sys.path.insert(0, TREE)
sys.path.insert(0, os.path.join(TREE, "benchmarks"))
import encode_ratios
from corpus import corpus, documents
import fastbpe._encode
where = os.path.realpath(fastbpe._encode.__file__)
if not where.startswith(os.path.realpath(TREE) + os.sep):
    sys.exit(f"imported {where}, not the checkout {TREE}")
"""
_CHILD = CHILD_IMPORTS + r"""
speeds = []
for name, lang in CASES:
    core, _ = encode_ratios.build(name)
    cold = getattr(core, "_clear_chunk_caches", lambda: None)   # untimed, before each call
    if DOCS:
        docs = documents(lang, 2000)
        warm, timed = docs[: len(docs) // 2], docs[len(docs) // 2:]
        mb = sum(len(d.encode()) for d in timed) / 1e6
        none, u32 = frozenset(), np.dtype(np.uint32)
        best = [float("inf"), float("inf")]
        for _ in range(7):
            for k in (0, 1):
                cold()
                if k:
                    for d in warm * 3:
                        core.encode_to_numpy(d, none, u32, none)
                t = time.thread_time()
                for d in timed:
                    core.encode_to_numpy(d, none, u32, none)
                best[k] = min(best[k], time.thread_time() - t)
        speeds.append((mb / best[0], mb / best[1]))
        continue
    if BATCH:
        docs = documents(lang, 2000)
        best = {1: float("inf"), 2: float("inf")}
        for _ in range(9):
            for threads in (1, 2):
                cold()
                t = time.perf_counter()
                core.encode_ordinary_batch(docs, threads)
                best[threads] = min(best[threads], time.perf_counter() - t)
        speeds.append((best[1] * 1e3, best[2] * 1e3))
        continue
    text = corpus(lang)
    mb = len(text.encode()) / 1e6
    core.encode_ordinary(text)
    best = float("inf")
    for _ in range(7):
        cold()
        t = time.thread_time()
        core.encode_ordinary(text)
        best = min(best, time.thread_time() - t)
    speeds.append(mb / best)
print(repr(speeds))
"""


def parse_cases(spec: str) -> list[tuple[str, str]]:
    cases = []
    for item in spec.split(","):
        vocab, sep, lang = item.partition(":")
        if not sep or not vocab or not lang:
            raise SystemExit(f"--cases: expected vocab:language items, got {item!r}")
        cases.append((vocab, lang))
    return cases


def run_child(tree: Path, cases: list[tuple[str, str]], batch: bool = False, docs: bool = False) -> list:
    prelude = f"TREE = {str(tree.resolve())!r}; CASES = {cases!r}; BATCH = {batch!r}; DOCS = {docs!r}\n"
    proc = subprocess.run([sys.executable, "-c", prelude + _CHILD], capture_output=True,
                          text=True, cwd=tree.parent)
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: the timing process failed:\n{proc.stderr}")
    return ast.literal_eval(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs="+", type=Path, help="built checkouts; the first is the baseline")
    ap.add_argument("--cases", default="o200k_base:turkish,o200k_base:english,"
                    "cl100k_base:turkish,gpt2:python")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--batch", action="store_true",
                    help="time encode_ordinary_batch on 1 and 2 threads instead")
    ap.add_argument("--docs", action="store_true",
                    help="time encode_to_numpy per ~2 KB document, cold and after a warm-up")
    args = ap.parse_args()
    if len(args.trees) < 2:
        ap.error("give at least two checkouts")
    for tree in args.trees:
        if not any((tree / "fastbpe").glob("_encode*.so")):
            ap.error(f"{tree} is not built in place (python setup.py build_ext --inplace)")
        if not (tree / "benchmarks" / "encode_ratios.py").exists():
            ap.error(f"{tree} has no benchmarks/encode_ratios.py to time with")
    cases = parse_cases(args.cases)

    # 1. alternate the order of the checkouts every round
    runs = {tree: [] for tree in args.trees}
    for r in range(args.rounds):
        order = args.trees if r % 2 == 0 else args.trees[::-1]
        for tree in order:
            runs[tree].append(run_child(tree, cases, args.batch, args.docs))

    # 2. per checkout the best over all rounds, and the last checkout against the first
    if args.batch:   # per case (1-thread ms, 2-thread ms): the lowest of each
        # the 2/1 speedup of each round (one process) too: both of its times come from
        # the same minutes, so it moves less with the host than the best-of-all ratio
        best = {t: [[min(x) for x in zip(*case)] for case in zip(*runs[t])] for t in args.trees}
        print("| case | " + " | ".join(f"{t}: 2 threads ms (2/1; 2/1 per round)"
                                      for t in args.trees) + " | first / last, 2 threads |")
        print("|---" * (len(args.trees) + 2) + "|")
        for i, (vocab, lang) in enumerate(cases):
            row = []
            for t in args.trees:
                per_round = sorted(one / two for one, two in (run[i] for run in runs[t]))
                row.append(f"{best[t][i][1]:.1f} ({best[t][i][0] / best[t][i][1]:.2f}x; "
                           f"{per_round[0]:.2f}-{per_round[-1]:.2f}x)")
            gain = best[args.trees[0]][i][1] / best[args.trees[-1]][i][1]
            print(f"| {vocab} {lang} | " + " | ".join(row) + f" | {gain:.3f} |")
        return
    if args.docs:   # per case (cold MB/s, steady MB/s): the highest of each
        best = {t: [[max(x) for x in zip(*case)] for case in zip(*runs[t])] for t in args.trees}
        print("| case | " + " | ".join(f"{t}: cold / steady MB/s" for t in args.trees)
              + " | last / first, cold | steady |")
        print("|---" * (len(args.trees) + 3) + "|")
        for i, (vocab, lang) in enumerate(cases):
            row = [f"{best[t][i][0]:.1f} / {best[t][i][1]:.1f}" for t in args.trees]
            a, b = best[args.trees[0]][i], best[args.trees[-1]][i]
            print(f"| {vocab} {lang} | " + " | ".join(row) + f" | {b[0] / a[0]:.3f} | {b[1] / a[1]:.3f} |")
        return
    best = {t: [max(case) for case in zip(*runs[t])] for t in args.trees}   # MB/s
    print("| case | " + " | ".join(str(t) for t in args.trees) + " | last / first |")
    print("|---" * (len(args.trees) + 2) + "|")
    for i, (vocab, lang) in enumerate(cases):
        row = [f"{best[t][i]:.1f}" for t in args.trees]
        ratio = best[args.trees[-1]][i] / best[args.trees[0]][i]
        print(f"| {vocab} {lang} | " + " | ".join(row) + f" | {ratio:.3f} |")


if __name__ == "__main__":
    main()
