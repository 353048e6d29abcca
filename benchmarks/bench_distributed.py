"""Throughput of distributed training (count phase) and corpus encoding.

Compares, on the same corpus (Python standard library sources, concatenated into a few
files so that byte ranges matter):

* training, read-and-count phase: ``bpe.counting.count_documents`` in this process vs
  ``count_chunks_distributed`` on a ``LocalCluster`` of 1 and 2 single-threaded worker
  processes (the merge phase runs where the client is in every case, so it is not
  timed here);
* encoding: ``encode_files(num_threads=1)`` (this process), ``num_threads=2`` (this
  process, two native threads), and ``encode_files(client=...)`` with 1 and 2 Dask workers.

Cluster start-up is not timed (a cluster is started once and reused); shipping the
encoding to the workers is. Every variant's result is checked against the
single-process one. Usage::

    python benchmarks/bench_distributed.py --mb 50 [--encode-mb 20] [--files 8]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A checkout built in place (python setup.py build_ext --inplace) is measured; an unbuilt
# source tree must not shadow the installed package (nor reach Dask's spawned workers).
if any((ROOT / "fastbpe").glob("_encode*.so")) and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import fastbpe  # noqa: E402
from fastbpe import shards  # noqa: E402
from fastbpe.bpe import counting  # noqa: E402
from fastbpe import distributed as D  # noqa: E402
from fastbpe.cli import stdlib_sources  # noqa: E402
from fastbpe.reference import patterns  # noqa: E402


def build_corpus(out_dir: Path, n_bytes: int, n_files: int) -> list[Path]:
    """Standard-library sources, whole files, dealt into ``n_files`` files of about equal
    size; the sources are repeated if the standard library is smaller than ``n_bytes``."""
    sources = stdlib_sources(n_bytes)
    sources = sources * (1 + n_bytes // max(1, sum(s.stat().st_size for s in sources)))
    paths = [out_dir / f"part-{i:02d}.txt" for i in range(n_files)]
    handles = [open(p, "wb") for p in paths]
    sizes = [0] * n_files
    total = 0
    for src in sources:
        raw = src.read_bytes()
        if not raw.endswith(b"\n"):
            raw += b"\n"
        i = sizes.index(min(sizes))
        handles[i].write(raw)
        sizes[i] += len(raw)
        total += len(raw)
        if total >= n_bytes:
            break
    for h in handles:
        h.close()
    return paths


def load_encoding():
    vocab_dir = os.environ.get("FASTBPE_VOCAB_DIR")
    shared = Path(__file__).resolve().parents[2] / "shared" / "vocab"
    if not vocab_dir and (shared / "gpt2.tiktoken").exists():
        os.environ["FASTBPE_VOCAB_DIR"] = str(shared)
    try:
        return fastbpe.get_encoding("gpt2")
    except (FileNotFoundError, ValueError):
        print("(gpt2.tiktoken not found: encoding with a 1024-token BPE trained on the corpus)")
        return None


def _process_cpu() -> float:
    import psutil

    t = psutil.Process().cpu_times()
    return t.user + t.system


def _cpu_seconds(client) -> float:
    """CPU seconds used so far by this process, its reaped children and the Dask workers."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = time.process_time() + ru.ru_utime + ru.ru_stime
    if client is not None:
        total += sum(client.run(_process_cpu).values())
    return total


def _warm_worker() -> None:
    """Imports and the compiled pattern, once per worker (like cluster start-up, not timed)."""
    from fastbpe import distributed  # noqa: F401
    from fastbpe.bpe import counting  # noqa: F401
    from fastbpe.reference import patterns

    patterns.compile_pattern(patterns.resolve_pattern("cl100k"))


def timed(fn, client=None, repeat: int = 1):
    """Best wall time of ``repeat`` runs, and the CPU seconds (all processes) of that run.

    The machine may be shared: wall time then depends on other load, CPU time much less."""
    best = None
    for _ in range(repeat):
        c0, t0 = _cpu_seconds(client), time.perf_counter()
        out = fn()
        wall, cpu = time.perf_counter() - t0, _cpu_seconds(client) - c0
        if best is None or wall < best[1]:
            best = (out, wall, cpu)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=50.0, help="MB of text for the training benchmark")
    ap.add_argument("--encode-mb", type=float, default=None, help="MB for encoding (default: --mb)")
    ap.add_argument("--files", type=int, default=8, help="files the corpus is dealt into")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=1, help="best of N runs")
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--skip-encode", action="store_true")
    args = ap.parse_args(argv)

    from distributed import Client, LocalCluster

    tmp = Path(tempfile.mkdtemp(prefix="fastbpe-bench-dist-"))
    rows = []
    try:
        paths = build_corpus(tmp, int(args.mb * 1e6), args.files)
        mb = sum(p.stat().st_size for p in paths) / 1e6
        enc_mb_target = args.encode_mb if args.encode_mb is not None else args.mb
        enc_paths = paths
        if enc_mb_target < args.mb:
            (tmp / "enc").mkdir()
            enc_paths = build_corpus(tmp / "enc", int(enc_mb_target * 1e6), args.files)
        enc_mb = sum(p.stat().st_size for p in enc_paths) / 1e6
        print(f"corpus: {mb:.1f} MB in {len(paths)} files ({tmp}); encoding corpus: {enc_mb:.1f} MB; "
              f"{os.cpu_count()} cores")

        pat = patterns.resolve_pattern("cl100k")
        specials = ["<|endoftext|>"]
        clusters = {}
        for w in args.workers:
            cluster = LocalCluster(n_workers=w, threads_per_worker=1, processes=True, dashboard_address=None)
            client = Client(cluster)
            client.run(_warm_worker)
            clusters[w] = (cluster, client)

        if not args.skip_train:
            want, base, cpu = timed(lambda: counting.count_chunks(paths, pat, specials, num_threads=1),
                                    repeat=args.repeat)
            rows.append(("train count", "single process", mb / base, 1.0, cpu))
            for w, (_, client) in clusters.items():
                got, dt, cpu = timed(lambda: D.count_chunks_distributed(client, paths, pat, specials), client,
                                     args.repeat)
                assert got == want, "distributed counts differ from the single-process counts"
                rows.append(("train count", f"dask {w} worker{'s' * (w > 1)}", mb / dt, base / dt, cpu))
            print(f"train count: {len(want)} unique chunks")

        if not args.skip_encode:
            enc = load_encoding()
            if enc is None:
                (tmp / "train").mkdir(exist_ok=True)
                small = build_corpus(tmp / "train", 1_000_000, 1)
                enc = fastbpe.train_bpe(small, 1024, special_tokens=specials, progress=False)
            print(f"encoding: {enc.name} ({enc.n_vocab} ids), core {type(enc._core_bpe).__module__}")

            def run(out, **kw):
                shutil.rmtree(out, ignore_errors=True)  # else the run would resume (skip everything)
                m = D.encode_files(enc_paths, enc, out, docs="lines", disallowed_special=(), **kw)
                return [s["sha256"] for s in m["shards"]], m["tokens"]

            (ref_sums, n_tok), base, cpu = timed(lambda: run(tmp / "out-1", num_threads=1), repeat=args.repeat)
            ref_tokens = shards.read_shards(tmp / "out-1")
            rows.append(("encode", "single process", enc_mb / base, 1.0, cpu))
            variants = [("local 2 threads", dict(num_threads=2), None)]
            variants += [(f"dask {w} worker{'s' * (w > 1)}", dict(client=c), c) for w, (_, c) in clusters.items()]
            for label, kw, client in variants:
                out = tmp / f"out-{label.replace(' ', '-')}"
                (sums, n), dt, cpu = timed(lambda: run(out, **kw), client, args.repeat)
                assert n == n_tok and (shards.read_shards(out) == ref_tokens).all(), label
                rows.append(("encode", label, enc_mb / dt, base / dt, cpu))
            print(f"encode: {n_tok} tokens ({enc_mb * 1e6 / n_tok:.2f} bytes/token)")

        for cluster, client in clusters.values():
            client.close()
            cluster.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\nload average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'phase':<12} {'path':<20} {'MB/s':>8} {'vs single':>10} {'CPU s':>8}")
    for phase, label, mbps, ratio, cpu in rows:
        print(f"{phase:<12} {label:<20} {mbps:8.2f} {ratio:9.2f}x {cpu:8.1f}")
    print(json.dumps([dict(zip(("phase", "path", "MB_per_s", "ratio", "cpu_s"), r)) for r in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
