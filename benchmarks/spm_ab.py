"""A/B of two builds of ``fastbpe._spm`` in one process, per ~2 KB document.

    python benchmarks/spm_ab.py OLD_SO [--model PATH] [--kind turkish ...] [--mb 1] [--rounds 6]
        [--set-old NAME=N] [--set-new NAME=N]

OLD_SO is a copy of an earlier build's ``_spm*.so`` (e.g. main's, copied aside before
rebuilding); NEW is this checkout's ``fastbpe._spm``. Both ``SpmCore`` classes are built
from the same tables and time ``encode`` over the second half of the documents,
document by document in one process pinned to one CPU (each document encoded by both
in turn, who goes first alternating, each timed in its thread's CPU time), so both see
the same machine load (one build against a copy of itself: 0.97-1.05 per round, medians
within 2%, at a load average of 5 on 2 cores): **cold** (a fresh core: text it has not
seen) and **steady** (a fresh core after three passes over the first half). Ids are
compared first. ``--set-old/--set-new run_min=64`` call a side's ``_set_run_min(64)``
(a tuning hook; OLD_SO may be a copy of this very build, to compare two settings of it).
Prints the medians of each side's MB/s (and the best round's) and NEW/OLD with the range
of the per-round ratios.
"""
from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
if any((HERE.parent / "fastbpe").glob("_encode*.so")) and str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))   # a checkout built in place; never an unbuilt tree

import corpus as bench_corpus  # noqa: E402

from fastbpe import _spm as new_spm  # noqa: E402
from fastbpe.formats.sentencepiece_model import read_model  # noqa: E402
from fastbpe.reference.sentencepiece import build_tables  # noqa: E402

VOCAB_DIR = Path(os.environ.get("FASTBPE_TEST_VOCAB_DIR", HERE.parent.parent / "shared" / "vocab"))


def load_old(path: str):
    """The module of another build of ``fastbpe._spm`` (same name, another file)."""
    loader = importlib.machinery.ExtensionFileLoader("fastbpe._spm", path)
    spec = importlib.util.spec_from_file_location("fastbpe._spm", path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def interleaved(cores: dict, docs: list[str], flip: int) -> dict:
    """Seconds each core spends on the documents, both encoding each document in turn
    (which goes first alternates), so that the machine's drift hits both alike."""
    spent = dict.fromkeys(cores, 0)
    names = list(cores)
    clock = time.thread_time_ns     # CPU time: a preempted document is not charged
    for i, d in enumerate(docs):
        for name in (names if (i + flip) % 2 == 0 else names[::-1]):
            core = cores[name]
            t = clock()
            core.encode(d)
            spent[name] += clock() - t
    return {name: ns / 1e9 for name, ns in spent.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old")
    p.add_argument("--model", default=str(VOCAB_DIR / "mistral" / "tokenizer.model.v1"))
    p.add_argument("--kind", action="append", choices=bench_corpus.LANGUAGES)
    p.add_argument("--mb", type=float, default=1.0)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--set-old", action="append", default=[])
    p.add_argument("--set-new", action="append", default=[])
    args = p.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    old_spm = load_old(args.old)
    for module, settings in ((old_spm, args.set_old), (new_spm, args.set_new)):
        for item in settings:
            name, value = item.split("=")
            getattr(module, "_set_" + name)(int(value))
    tables = build_tables(read_model(args.model), args.model)
    sides = {"old": old_spm.SpmCore, "new": new_spm.SpmCore}
    for kind in args.kind or bench_corpus.LANGUAGES:
        docs = bench_corpus.cut(bench_corpus.corpus(kind)[: int(args.mb * 1e6)])
        warm, test = docs[: len(docs) // 2], docs[len(docs) // 2:]
        mb = sum(len(d.encode("utf-8")) for d in test) / 1e6
        a, b = sides["old"](tables), sides["new"](tables)
        bad = sum(a.encode(d) != b.encode(d) for d in docs)
        assert bad == 0, f"{kind}: ids differ on {bad} documents"
        speed = {(s, m): [] for s in sides for m in ("cold", "steady")}
        for r in range(args.rounds):
            for mode in ("cold", "steady"):
                cores = {side: sides[side](tables) for side in sides}
                if mode == "steady":
                    for core in cores.values():
                        for _ in range(3):
                            for d in warm:
                                core.encode(d)
                spent = interleaved(cores, test, r)
                for side in sides:
                    speed[side, mode].append(mb / spent[side])
        cells = []
        for m in ("cold", "steady"):
            ratios = [n / o for n, o in zip(speed["new", m], speed["old", m])]
            cells.append(f"{m}: old {statistics.median(speed['old', m]):.1f} new "
                         f"{statistics.median(speed['new', m]):.1f} MB/s (best {max(speed['old', m]):.1f} / "
                         f"{max(speed['new', m]):.1f}), new/old {statistics.median(ratios):.3f} "
                         f"({min(ratios):.3f}-{max(ratios):.3f})")
        print(f"{Path(args.model).name} {kind:8s} " + " | ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
