"""A/B at the same time: two builds (or two tunings of one) encode at once, one per CPU.

    python benchmarks/ab_duel.py OLD NEW [--cases cl100k_base:english,...]
        [--tuning-old '{"by_chars": false}'] [--tuning-new '{}'] [--seconds 8] [--windows 4]
        [--env-old '{"FASTBPE_SIMD": "sse2"}'] [--env-new '{}']

Each case runs ``--windows`` windows. In a window, two fresh processes start together,
one per checkout, each pinned to its own CPU (swapped every window); once both are
ready, both time ``encode_to_numpy`` per ~2 KB document over the second half of the
corpus for ``--seconds``, over and over: **cold** (the encoder's caches dropped first)
and **steady** (dropped, then the first half encoded three times untimed), as
``ab_encode.py --docs`` does. A window gives each side its mean CPU time per pass; the
table gives NEW's speed over OLD's (the ratio of the sums of the window means) and the
range of the per-window ratios.

Why: on the shared 2-core machines we measure on, the speed of one process drifts by
10-20% within minutes (other tenants, memory bandwidth), so two processes timed one
after the other, even alternating, differ by that much (``ab_encode.py``: ±5-15%). Two
processes timed in the same seconds see the same drift, and swapping the CPUs cancels
a CPU's own bias. Checked with one build against itself (2026-12-03, the defaults):
cl100k English 0.974 cold / 0.967 steady, cl100k Turkish 1.029 / 1.032, o200k Turkish
1.006 / 1.004, gpt2 Python 0.970 / 0.986; so read under ~3% as noise. What it measures is each side while the other one loads
the shared caches and memory as much, as two threads of a batch do; a change that only
wins on an idle machine wins less here.

Needs Linux (CPU affinity) and two usable CPUs. Each checkout must be built in place
(``python setup.py build_ext --inplace``); OLD and NEW may be the same checkout with
different ``--tuning-*`` (fields of ``CoreBPE.set_tuning``) or ``--env-*`` (variables
added to a side's environment, e.g. ``FASTBPE_SIMD=sse2`` for the SSE2 window
classifier).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ab_encode import CHILD_IMPORTS, parse_cases

# Run in the child: pinned to CPU, import fastbpe from TREE (ab_encode's CHILD_IMPORTS),
# build the case's encoder, say "ready", wait for the start time on stdin, then time
# passes until SECONDS after it.
_CHILD = r"""
import json, os
os.sched_setaffinity(0, {CPU})
""" + CHILD_IMPORTS + r"""
core, _ = encode_ratios.build(VOCAB)
core.set_tuning(**TUNING)
docs = documents(LANG, 2000)
warm, timed = docs[: len(docs) // 2], docs[len(docs) // 2:]
none, u32 = frozenset(), np.dtype(np.uint32)
print("ready", flush=True)
start = float(sys.stdin.readline())
while time.time() < start:
    time.sleep(0.001)
times = {"cold": [], "steady": []}
while time.time() < start + SECONDS:
    for kind in ("cold", "steady"):
        core._clear_chunk_caches()
        if kind == "steady":
            for d in warm * 3:
                core.encode_to_numpy(d, none, u32, none)
        t = time.thread_time()
        for d in timed:
            core.encode_to_numpy(d, none, u32, none)
        times[kind].append(time.thread_time() - t)
print(json.dumps({k: sum(v) / len(v) for k, v in times.items()}))
"""


def window(trees: list[Path], tunings: list[dict], vocab: str, lang: str, cpus: list[int],
           seconds: float, envs: list[dict] | None = None) -> list[dict]:
    """One window: both sides at once, side i on cpus[i]; their mean pass times."""
    procs = []
    for tree, tuning, cpu, env in zip(trees, tunings, cpus, envs or [{}, {}]):
        prelude = (f"TREE = {str(tree.resolve())!r}; VOCAB = {vocab!r}; LANG = {lang!r}; "
                   f"TUNING = {tuning!r}; CPU = {cpu}; SECONDS = {seconds!r}\n")
        procs.append(subprocess.Popen([sys.executable, "-c", prelude + _CHILD], text=True,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, cwd=tree.parent,
                                      env={**os.environ, **env}))
    for tree, p in zip(trees, procs):
        if p.stdout.readline().strip() != "ready":
            raise SystemExit(f"{tree}: the timing process failed:\n{p.communicate()[1]}")
    start = time.time() + 0.5
    for p in procs:
        p.stdin.write(f"{start}\n")
        p.stdin.flush()
    results = []
    for tree, p in zip(trees, procs):
        out, err = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"{tree}: the timing process failed:\n{err}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--cases", default="cl100k_base:english,cl100k_base:turkish,"
                    "o200k_base:turkish,gpt2:python")
    ap.add_argument("--tuning-old", type=json.loads, default={})
    ap.add_argument("--tuning-new", type=json.loads, default={})
    ap.add_argument("--env-old", type=json.loads, default={})
    ap.add_argument("--env-new", type=json.loads, default={})
    ap.add_argument("--seconds", type=float, default=8.0, help="timed seconds per window")
    ap.add_argument("--windows", type=int, default=4, help="windows per case (CPUs swap each)")
    args = ap.parse_args()
    trees = [args.old, args.new]
    for tree in trees:
        if not any((tree / "fastbpe").glob("_encode*.so")):
            ap.error(f"{tree} is not built in place (python setup.py build_ext --inplace)")
    if not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2:
        ap.error("needs Linux and two usable CPUs")
    cpus = sorted(os.sched_getaffinity(0))[:2]
    tunings = [args.tuning_old, args.tuning_new]
    cases = parse_cases(args.cases)

    print(f"| case | new / old, cold (windows) | steady (windows) |")
    print("|---|---|---|")
    for vocab, lang in cases:
        sums = [{"cold": 0.0, "steady": 0.0}, {"cold": 0.0, "steady": 0.0}]
        ratios = {"cold": [], "steady": []}
        for w in range(args.windows):
            old, new = window(trees, tunings, vocab, lang, cpus if w % 2 == 0 else cpus[::-1],
                              args.seconds, [args.env_old, args.env_new])
            for kind in ratios:
                sums[0][kind] += old[kind]
                sums[1][kind] += new[kind]
                ratios[kind].append(old[kind] / new[kind])
        cells = [f"{sums[0][k] / sums[1][k]:.3f} ({min(ratios[k]):.3f}-{max(ratios[k]):.3f})"
                 for k in ("cold", "steady")]
        print(f"| {vocab} {lang} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
