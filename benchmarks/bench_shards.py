"""What the shard writer adds to the encoder (issue 23): ``shards.write_shards`` vs
``Encoding.encode_batch_to_numpy`` on the same documents, already in memory.

The documents are the first ``--mb`` MB of a corpus (``/work/corpus/docs.jsonl`` if it
exists: kernel sources and man pages, one document per file; else the Python standard
library's sources, one per file). They are packed into blocks of ``--block-mb`` MB as
``fastbpe.io`` hands them to the writer, before the clock starts, in two forms: with the
pieces already decoded (the writer's own cost: encode, EOT insertion, .bin/.idx writes,
sha256, fsync, manifest) and as UTF-8 bytes that ``pieces()`` decodes on each call (what a
block reader adds). The baseline encodes the same documents, in the same batches, with
``encode_batch_to_numpy`` and keeps nothing. Ids are checked identical first.

    python benchmarks/bench_shards.py --mb 50 --threads 1 2 [--encoding gpt2] [--repeat 3]

One run's numbers; the machine may be shared, so compare the ratios of one run.
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if any((ROOT / "fastbpe").glob("_encode*.so")) and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import fastbpe  # noqa: E402
from fastbpe import shards  # noqa: E402

CORPUS = Path("/work/corpus/docs.jsonl")


def load_documents(mb: float) -> tuple[list[str], str]:
    limit = int(mb * 1e6)
    docs, n = [], 0
    if CORPUS.exists():
        with open(CORPUS, encoding="utf-8") as fh:
            for line in fh:
                d = json.loads(line)["text"]
                docs.append(d)
                n += len(d.encode("utf-8"))
                if n >= limit:
                    break
        return docs, str(CORPUS)
    import sysconfig

    for p in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        try:
            d = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if d:
            docs.append(d)
            n += len(d.encode("utf-8"))
            if n >= limit:
                break
    return docs, "the Python standard library"


class Block:
    """A block as ``fastbpe.io`` yields it."""

    def __init__(self, pieces: list[str], decoded: bool):
        raw = [p.encode("utf-8") for p in pieces]
        self.data = b"".join(raw)
        self.ends = np.cumsum([len(r) for r in raw], dtype=np.int64)
        self.last_open, self.where = False, "memory"
        self._pieces = pieces if decoded else None

    def pieces(self) -> list[str]:
        if self._pieces is not None:
            return self._pieces
        ends = self.ends.tolist()
        data = self.data
        return [data[a:b].decode("utf-8") for a, b in zip([0] + ends[:-1], ends)]


class MemoryTask:
    def __init__(self, blocks):
        self._blocks = blocks

    def key(self) -> dict:
        return {"memory": id(self)}

    def blocks(self, **how):
        return iter(self._blocks)


def batches(docs: list[str], block_bytes: int) -> list[list[str]]:
    out, cur, n = [], [], 0
    for d in docs:
        cur.append(d)
        n += len(d.encode("utf-8"))
        if n >= block_bytes:
            out.append(cur)
            cur, n = [], 0
    if cur:
        out.append(cur)
    return out


def best(fn, repeat: int) -> tuple[float, float]:
    """The best wall time of ``repeat`` runs, and the CPU seconds of that run (this
    process's, all threads: on a shared machine the steadier measure of added work)."""
    runs = []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        runs.append((time.perf_counter() - t0, time.process_time() - c0))
    return min(runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=50)
    ap.add_argument("--block-mb", type=float, default=shards.BLOCK_BYTES / (1 << 20))
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--encoding", default="gpt2")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    enc = fastbpe.get_encoding(args.encoding)
    docs, source = load_documents(args.mb)
    mb = sum(len(d.encode("utf-8")) for d in docs) / 1e6
    groups = batches(docs, int(args.block_mb * (1 << 20)))
    print(f"{len(docs)} documents, {mb:.1f} MB from {source}; {len(groups)} blocks of ~{args.block_mb:g} MiB; "
          f"{args.encoding}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    tmp = Path(tempfile.mkdtemp(prefix="bench-shards-"))
    rows = []
    try:
        for t in args.threads:
            def baseline():
                for g in groups:
                    enc.encode_batch_to_numpy(g, num_threads=t, disallowed_special=(), dtype=np.uint16)

            def writer(decoded: bool):
                task = MemoryTask([Block(g, decoded) for g in groups])
                out = tmp / f"out-{t}-{decoded}"

                def run():
                    shutil.rmtree(out, ignore_errors=True)  # else it resumes
                    shards.write_shards(enc, [task], out, num_threads=t, disallowed_special=(), progress=False)
                return run

            # ids first: the writer's stream minus its EOTs is the baseline's
            writer(True)()
            got = shards.open(tmp / f"out-{t}-True")
            eot = enc.eot_token
            for i in (0, len(docs) // 2, len(docs) - 1):
                assert got.doc(i)[:-1].tolist() == enc.encode_ordinary(docs[i]), i
            ids = np.concatenate([enc.encode_batch_to_numpy(g, num_threads=t, disallowed_special=(),
                                                            dtype=np.uint16)[0] for g in groups])
            stream = got.read()
            assert (stream[stream != eot] == ids).all() and (stream == eot).sum() == len(docs)
            (base, base_cpu), (ready, ready_cpu), (decode, decode_cpu) = (
                best(baseline, args.repeat), best(writer(True), args.repeat), best(writer(False), args.repeat))
            rows.append((t, mb / base, mb / ready, base / ready, mb / decode, base / decode,
                         base_cpu, ready_cpu, decode_cpu))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{'threads':>7} {'encode_batch_to_numpy':>22} {'write_shards':>13} {'ratio':>6} "
          f"{'+ pieces()':>11} {'ratio':>6}   (MB/s; CPU seconds: encode / write / + pieces())")
    for t, b, r, rr, d, dr, bc, rc, dc in rows:
        print(f"{t:>7} {b:>22.1f} {r:>13.1f} {rr:>5.2f}x {d:>11.1f} {dr:>5.2f}x   {bc:.2f} / {rc:.2f} / {dc:.2f} "
              f"(CPU ratio {bc / rc:.2f}x, {bc / dc:.2f}x)")
    if len(rows) > 1:
        print(f"\nwrite_shards {rows[-1][0]} threads vs 1: {rows[-1][2] / rows[0][2]:.2f}x "
              f"(encode_batch_to_numpy: {rows[-1][1] / rows[0][1]:.2f}x)")
    print(json.dumps([dict(zip(("threads", "encode_MBps", "write_MBps", "ratio", "write_decode_MBps",
                                "ratio_decode", "encode_cpu_s", "write_cpu_s", "write_decode_cpu_s"), r))
                      for r in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
