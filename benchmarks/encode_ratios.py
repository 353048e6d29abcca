"""Throughput table: fastbpe's native CoreBPE vs tiktoken (and HF tokenizers for gpt2).

    python benchmarks/encode_ratios.py [--repeat 5] [--vocab gpt2 ...] [--lang english ...]

Single thread: tiktoken's ``encode_ordinary`` vs ``CoreBPE.encode_ordinary`` on each
corpus as one string (timed alternately, best of --repeat runs each, in CPU time of the
calling thread so that other load on the machine does not skew the ratio).

Per document: ``encode_ordinary`` called once per ~2 KB document (as a data loader
calls it), both encoders in CPU time; the ratio is tiktoken's time over ours.

fastbpe's encoder keeps chunk caches between calls; every timed fastbpe call or pass
starts with them dropped (untimed), so repeats of the same text are never timed warm.

Batch: ``fastbpe.Encoding.encode_batch`` (the public call, which also checks every
text for special tokens) on 2 threads vs 1 thread (wall time), over many short
documents (~2 KB each) and over 4 long ones; and ``CoreBPE.encode_batch_to_numpy``
over the short documents, which shows the native code's scaling without the Python
lists (built by the calling thread under the GIL). The CPU column is the process's CPU
time on 2 threads over that on 1 (short documents, lists): near 1.00 means threading
adds no work, so a batch ratio well under 2x then comes from the machine (the other
core busy, or two busy cores slowing each other), not from the encoder. A row whose CPU
column is over 1.08 is measured again (``--batch-attempts``, default 3); the table gives
the attempt with the lowest CPU column and the number of attempts made.

HF ``tokenizers`` (gpt2 only, from gpt2.tokenizer.json): ``encode_batch`` over the ~2 KB
documents on one thread. Ids are checked equal to tiktoken's before timing.
Corpora: see benchmarks/corpus.py. Vocabularies: ../shared/vocab (or
$FASTBPE_TEST_VOCAB_DIR).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A checkout built in place (python setup.py build_ext --inplace) is measured; an unbuilt
# source tree must not shadow the installed package (nor reach Dask's spawned workers).
if any((ROOT / "fastbpe").glob("_encode*.so")) and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAYON_NUM_THREADS", "1")

from corpus import LANGUAGES, corpus  # noqa: E402

VOCAB_DIR = Path(os.environ.get("FASTBPE_TEST_VOCAB_DIR", ROOT.parent / "shared" / "vocab"))
VOCABS = ("gpt2", "cl100k_base", "o200k_base")
SPECIALS = {
    "gpt2": {"<|endoftext|>": 50256},
    "cl100k_base": {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258,
                    "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260,
                    "<|endofprompt|>": 100276},
    "o200k_base": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
}


def build(name: str, encoding: bool = False, path: Path | None = None):
    """(fastbpe CoreBPE, tiktoken.Encoding) over the same ranks and pattern; with
    encoding=True, fastbpe's public Encoding instead of its core (which it holds as
    ``_core_bpe``). ``path``: the ``.tiktoken`` file (default: ``VOCAB_DIR``'s)."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    import fastbpe
    from fastbpe._encode import CoreBPE
    from fastbpe.reference import patterns

    pat = {"gpt2": patterns.GPT2, "cl100k_base": patterns.CL100K, "o200k_base": patterns.O200K}[name]
    ranks = load_tiktoken_bpe(str(path or VOCAB_DIR / f"{name}.tiktoken"))
    tk = tiktoken.Encoding(name, pat_str=pat, mergeable_ranks=ranks, special_tokens=SPECIALS[name])
    if encoding:
        enc = fastbpe.Encoding(name, pat_str=pat, mergeable_ranks=ranks, special_tokens=SPECIALS[name])
        assert isinstance(enc._core_bpe, CoreBPE), "the native core is not built"
        return enc, tk
    return CoreBPE(ranks, SPECIALS[name], pat), tk


def best_time(fn, repeat: int, clock=time.perf_counter, setup=None) -> float:
    best = float("inf")
    for _ in range(repeat):
        if setup is not None:
            setup()      # untimed
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best


def cold(core):
    """What to run before each timed call of core: drop the chunk caches the encoder
    keeps between calls, so that timing the same text again measures a first encounter
    (as tiktoken, which keeps none, always has), not a warm cache."""
    return getattr(core, "_clear_chunk_caches", None)


#: Single-thread runs are timed in CPU time of the calling thread: on a shared machine
#: wall time mostly measures the neighbours. Batch runs need wall time (threads).
CPU = time.thread_time


def long_documents(text: str, count: int = 4) -> list[str]:
    step = len(text) // count + 1
    return [text[i : i + step] for i in range(0, len(text), step)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--vocab", nargs="*", default=list(VOCABS))
    ap.add_argument("--lang", nargs="*", default=list(LANGUAGES))
    ap.add_argument("--batch-attempts", type=int, default=3,
                    help="measure a row's batches up to this many times while other load "
                    "shows in the CPU column (see batch_speedups)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from corpus import documents

    hf = None
    if "gpt2" in args.vocab and (VOCAB_DIR / "gpt2.tokenizer.json").exists():
        try:
            from tokenizers import Tokenizer

            hf = Tokenizer.from_file(str(VOCAB_DIR / "gpt2.tokenizer.json"))
        except ImportError:
            hf = None

    print("| vocab | corpus | MB | tiktoken MB/s | fastbpe MB/s | ratio | per-doc ratio "
          "| HF MB/s | batch2/1 short docs | batch2/1 4 long docs "
          "| numpy batch2/1 short docs | CPU 2 threads / 1, short docs | batch attempts |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.vocab:
        enc, tk = build(name, encoding=True)
        core = enc._core_bpe
        for lang in args.lang:
            text = corpus(lang)
            mb = len(text.encode()) / 1e6
            assert core.encode_ordinary(text) == tk.encode_ordinary(text), (name, lang)
            # alternating, best of --repeat: a burst of load elsewhere hits both sides
            t_tk = t_us = float("inf")
            for _ in range(args.repeat):
                t_tk = min(t_tk, best_time(lambda: tk.encode_ordinary(text), 1, CPU))
                t_us = min(t_us, best_time(lambda: core.encode_ordinary(text), 1, CPU,
                                           cold(core)))
            # per document: encode() once per ~2 KB document, as a data loader calls it
            # (caches dropped before each pass, so they warm within a pass only)
            per_doc = documents(lang, 2000)
            t_tk_doc = t_us_doc = float("inf")
            for _ in range(max(3, args.repeat // 2)):
                t_tk_doc = min(t_tk_doc, best_time(
                    lambda: [tk.encode_ordinary(d) for d in per_doc], 1, CPU))
                t_us_doc = min(t_us_doc, best_time(
                    lambda: [core.encode_ordinary(d) for d in per_doc], 1, CPU, cold(core)))
            hf_col = ""
            if hf is not None and name == "gpt2":
                # HF is slow on one multi-megabyte string; give it ~2 KB documents,
                # its usual input (one Rayon thread, see RAYON_NUM_THREADS above)
                docs = documents(lang, 2000)
                t_hf = best_time(lambda: hf.encode_batch(docs, add_special_tokens=False),
                                 args.repeat, time.process_time)
                hf_col = f"{mb / t_hf:.1f}"
            short = documents(lang, 2000)
            longs = long_documents(text)
            # the public encode_batch, with its default check for special tokens
            runs = [(short, lambda d, t: enc.encode_batch(d, num_threads=t)),
                    (longs, lambda d, t: enc.encode_batch(d, num_threads=t)),
                    (short, lambda d, t: core.encode_batch_to_numpy(d, frozenset(), t))]
            speedups, cpu_growth, attempts = batch_speedups(core, runs, args)
            print(f"| {name} | {lang} | {mb:.2f} | {mb / t_tk:.1f} | {mb / t_us:.1f} "
                  f"| {t_tk / t_us:.1f}x | {t_tk_doc / t_us_doc:.1f}x | {hf_col} | {speedups[0]:.2f}x | {speedups[1]:.2f}x "
                  f"| {speedups[2]:.2f}x | {cpu_growth:.2f} | {attempts} |",
                  flush=True)


#: Batch measurements whose CPU time grew more than this on 2 threads are repeated (see
#: batch_speedups).
CPU_GROWTH_MAX = 1.08


def batch_speedups(core, runs, args) -> tuple[list[float], float, int]:
    """2/1 speedups of runs [(docs, fn(docs, threads))], the CPU growth of the first,
    and how many attempts that took.

    The CPU growth is the process's CPU time on 2 threads over that on 1. Encoding adds
    no work on 2 threads (about 1.02-1.05 on a quiet machine), so growth above
    CPU_GROWTH_MAX means the cores were shared with other load while we measured (on a
    shared VM, time stolen from a running thread counts as its CPU time), and the
    speedup says more about the neighbours than about the encoder. Then all runs are
    measured again, up to --batch-attempts times; the attempt with the least growth is
    reported, with that growth and the number of attempts, so a busy table says so."""
    kept = None
    for attempt in range(1, max(1, args.batch_attempts) + 1):
        speedups, growth = [], None
        for docs, fn in runs:
            # interleaved, best of 5: a burst of load elsewhere hits both sides
            best = {1: float("inf"), 2: float("inf")}
            cpu = {1: float("inf"), 2: float("inf")}
            for _ in range(max(5, args.repeat)):
                for threads in (1, 2):
                    c0 = time.process_time()   # all threads of the process
                    best[threads] = min(best[threads], best_time(
                        lambda: fn(docs, threads), 1, setup=cold(core)))
                    cpu[threads] = min(cpu[threads], time.process_time() - c0)
            speedups.append(best[1] / best[2])
            if growth is None:
                growth = cpu[2] / cpu[1]
        if kept is None or growth < kept[1]:
            kept = (speedups, growth)
        if growth <= CPU_GROWTH_MAX:
            break
    return kept[0], kept[1], attempt


if __name__ == "__main__":
    main()
