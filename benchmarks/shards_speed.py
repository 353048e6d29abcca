"""Encoding a corpus to token shards: end to end vs the encoder on documents in memory.

    python benchmarks/shards_speed.py                    # all of /work/corpus/docs.jsonl (1.1 GB)
    python benchmarks/shards_speed.py --mb 100           # the first 100 MB of its documents
    python benchmarks/shards_speed.py --mb 100 --only mem,cli,tiktoken

Issue 23's target: writing shards adds almost nothing to the encoder. End-to-end MB/s
of ``fastbpe encode --shards`` (and of ``encode_files``) at least 0.9x of
``encode_batch_to_numpy`` on the same documents already in memory, two threads at
least 1.8x one, the tokens identical. Measured, one after another in one run (MB/s of
the documents' UTF-8 bytes, not counting the JSON syntax), each at 1 and 2 threads
(``--threads``):

* ``mem``: ``enc.encode_batch_to_numpy(docs, num_threads=N)`` on the documents in this
  process's memory, in batches of ``--batch-mb`` (the arrays of one batch are dropped
  before the next, as a writer would);
* ``cli``: ``fastbpe encode -t TOK corpus.jsonl --field text --shards DIR --threads N
  -q`` (``--jsonl-field`` on builds before the document model), a fresh process; its
  wall time minus the start-up of a process that only imports fastbpe and loads the
  tokenizer (measured too, and printed);
* ``api``: the Python writer in a fresh process that times the call itself:
  ``fastbpe.encode_files([path], enc, DIR, field="text", num_threads=N)`` where
  ``encode_files`` takes ``field=``, else ``fastbpe.shards.write_shards(enc, <the
  documents read in Python>, DIR, num_threads=N)`` (today's ``encode --shards``);
* ``tiktoken``: ``encode_ordinary_batch(docs, num_threads=N)`` in batches as ``mem``;
* ``gigatoken``: ``Tokenizer.encode_files(JsonlFileSource([path], field="text"))`` in
  a fresh process with ``RAYON_NUM_THREADS=N``, timing the call itself (its result is
  all tokens in memory, not shards).

Before timing, tokens are checked: the shards that ``cli`` and ``api`` write for the
first ``--check-mb`` of documents, with the end-of-text ids removed, must equal the
in-memory ids concatenated, and hold one end-of-text id per document or one between
documents. Then every timed run's token total is compared with ``mem``'s. The
corpus is ``--corpus`` (``.jsonl`` with field ``text``; ``debian_corpus.py`` builds
one); with ``--mb`` its first documents are copied to a temporary file first.

The machine is shared: quote the ratios of one run.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if any((ROOT / "fastbpe").glob("_encode*.so")) and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

from peak_rss import env_with_checkout, last_json, measure  # noqa: E402
from train_corpus import iter_jsonl  # noqa: E402

VARIANTS = ("mem", "cli", "api", "tiktoken", "gigatoken")

_STARTUP = """
import fastbpe, fastbpe.cli, sys
fastbpe.get_encoding(sys.argv[1])
"""

# The Python shard writer, timed inside the child (imports and tokenizer load not in it).
_API = r"""
import inspect, json, sys, time
sys.path.insert(0, HERE)
import fastbpe, fastbpe.shards
from train_corpus import iter_jsonl
name, path, out, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
enc = fastbpe.get_encoding(name)
params = inspect.signature(fastbpe.encode_files).parameters
t0 = time.perf_counter()
if "field" in params:
    kw = {"num_threads": threads} if "num_threads" in params else {"num_workers": threads}
    fastbpe.encode_files([path], enc, out, field="text", **kw)
    api = "encode_files(field=)"
else:
    fastbpe.shards.write_shards(enc, iter_jsonl(path), out, num_threads=threads, progress=False,
                                eot_token="<|endoftext|>")
    api = "shards.write_shards"
print(json.dumps({"seconds": time.perf_counter() - t0, "api": api}))
"""

_GIGATOKEN = r"""
import json, sys, time
import gigatoken
vocab_file, pretok, path = sys.argv[1], sys.argv[2], sys.argv[3]
specials = json.loads(sys.argv[4])
tok = gigatoken.Tokenizer.from_tiktoken(vocab_file, pretokenizer=pretok or None, special_tokens=specials)
t0 = time.perf_counter()
out = tok.encode_files(gigatoken.JsonlFileSource([path], field="text"))
secs = time.perf_counter() - t0
import awkward as ak
print(json.dumps({"seconds": secs, "tokens": int(ak.sum(ak.num(out, axis=1))), "documents": len(out)}))
"""


# ----------------------------------------------------------------------------- helpers
def subset(corpus: str, mb: float | None, out: Path, stem: str = "subset") -> tuple[str, list[str]]:
    """(path of a .jsonl holding the first ``mb`` MB of documents, those documents)."""
    docs, n = [], 0
    for text in iter_jsonl(corpus):
        docs.append(text)
        n += len(text.encode("utf-8"))
        if mb is not None and n >= mb * 1e6:
            break
    if mb is None:
        return corpus, docs
    path = out / f"{stem}-{mb:g}mb.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for text in docs:
            fh.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
    return str(path), docs


def batches(docs: list[str], batch_bytes: int):
    """Consecutive runs of documents of about ``batch_bytes`` UTF-8 bytes each.

    >>> [len(b) for b in batches(["ab", "cd", "e"], 3)]
    [2, 1]
    """
    batch, n = [], 0
    for d in docs:
        batch.append(d)
        n += len(d.encode("utf-8")) if not d.isascii() else len(d)
        if n >= batch_bytes:
            yield batch
            batch, n = [], 0
    if batch:
        yield batch


def read_tokens(out_dir: Path) -> np.ndarray:
    """All tokens of a shard folder (``fastbpe.shards.open``)."""
    import fastbpe.shards as S

    return S.open(out_dir).read()


def compare(label: str, shards: np.ndarray, ids: list[np.ndarray], eot: int) -> str:
    """'ok' or what differs between a shard folder's tokens and the in-memory ids."""
    body = shards[shards != eot]
    want = np.concatenate(ids) if ids else np.zeros(0, np.uint32)
    n_eot = int((shards == eot).sum())
    if len(body) != len(want) or not np.array_equal(body.astype(np.int64), want.astype(np.int64)):
        at = next((i for i, (a, b) in enumerate(zip(body, want)) if a != b), min(len(body), len(want)))
        return f"{label}: TOKENS DIFFER ({len(body):,} vs {len(want):,} ids, first difference at {at:,})"
    if n_eot not in (len(ids), len(ids) - 1):
        return f"{label}: {n_eot} end-of-text ids for {len(ids)} documents"
    return f"{label}: ok ({len(body):,} ids, {n_eot:,} end-of-text for {len(ids):,} documents)"


def cli_flags(env: dict) -> tuple[str, list[str]]:
    """(the JSONL field flag, extra flags) that this build's ``fastbpe encode`` takes."""
    help_text = subprocess.run([sys.executable, "-m", "fastbpe", "encode", "--help"], env=env,
                               capture_output=True, text=True).stdout
    field = "--field" if "--field " in help_text or "--field=" in help_text else "--jsonl-field"
    return field, (["-q"] if "-q" in help_text else [])


def cli_argv(name: str, path: str, out: Path, threads: int, flags) -> list[str]:
    field, extra = flags
    return [sys.executable, "-m", "fastbpe", "encode", "-t", name, path, field, "text",
            "--shards", str(out), "--threads", str(threads), *extra]


# ----------------------------------------------------------------------------- main
def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="/work/corpus/docs.jsonl")
    ap.add_argument("--mb", type=float, help="only the first MB of documents (default: all)")
    ap.add_argument("--tokenizer", "-t", default="gpt2", choices=("gpt2", "cl100k_base", "o200k_base"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--only", default=",".join(VARIANTS))
    ap.add_argument("--batch-mb", type=float, default=64)
    ap.add_argument("--check-mb", type=float, default=32, help="MB of documents for the token check")
    ap.add_argument("--tmp", help="directory for the subset and the shards (default: a temporary one)")
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    only = args.only.split(",")

    import encode_ratios

    enc, tk = encode_ratios.build(args.tokenizer, encoding=True)
    eot = enc.eot_token
    env = env_with_checkout()
    work = Path(args.tmp) if args.tmp else Path(tempfile.mkdtemp(prefix="fastbpe_shards_speed_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        path, docs = subset(args.corpus, args.mb, work)
        mb = sum(len(d.encode("utf-8")) for d in docs) / 1e6
        print(f"{len(docs):,} documents, {mb:.1f} MB of text ({Path(path).stat().st_size / 1e6:.1f} MB"
              f" of .jsonl), {args.tokenizer}, {os.cpu_count()} cores")
        flags = cli_flags(env)

        # 1. tokens identical, before any timing
        check_path, check_docs = subset(path, args.check_mb, work, "check")
        want = []
        for b in batches(check_docs, 1 << 26):
            ids, off = enc.encode_batch_to_numpy(b, num_threads=2)
            want += [ids[off[i]:off[i + 1]] for i in range(len(b))]
        ok = True
        for label in ("cli", "api"):
            out = work / f"check-{label}"
            shutil.rmtree(out, ignore_errors=True)
            if label == "cli":
                r = measure(cli_argv(args.tokenizer, check_path, out, 2, flags), env=env)
            else:
                r = measure([sys.executable, "-c", _API.replace("HERE", repr(str(HERE))), args.tokenizer,
                             check_path, str(out), "2"], env=env)
            if r["rc"] != 0:
                print(f"check {label}: FAILED to run: {r['stderr'].strip().splitlines()[-1:]}")
                ok = False
                continue
            verdict = compare(f"check {label} ({args.check_mb:g} MB)", read_tokens(out), want, eot)
            ok &= verdict.endswith(")") and ": ok" in verdict
            print(verdict)
            shutil.rmtree(out, ignore_errors=True)
        if not ok:
            print("token check FAILED: the timings below compare different outputs")

        # 2. timings
        start = measure([sys.executable, "-c", _STARTUP, args.tokenizer], env=env)["wall_s"]
        print(f"(cli start-up: {start:.2f} s, subtracted from its wall time)")
        print(f"{'variant':<12} {'threads':>7} {'seconds':>8} {'MB/s':>8} {'tokens':>14}  note")
        res: dict = {}
        n_tokens = None
        for n in threads:
            if "mem" in only:
                t0, total = time.perf_counter(), 0
                for b in batches(docs, int(args.batch_mb * 1e6)):
                    ids, _ = enc.encode_batch_to_numpy(b, num_threads=n)
                    total += len(ids)
                    del ids
                res["mem", n] = (time.perf_counter() - t0, total, "encode_batch_to_numpy")
                n_tokens = total
            if "cli" in only:
                out = work / "out-cli"
                shutil.rmtree(out, ignore_errors=True)
                r = measure(cli_argv(args.tokenizer, path, out, n, flags), env=env)
                total = int((read_tokens(out) != eot).sum()) if r["rc"] == 0 else None
                shutil.rmtree(out, ignore_errors=True)
                res["cli", n] = ((r["wall_s"] - start) if r["rc"] == 0 else None, total,
                                 f"fastbpe encode {flags[0]} text --shards" if r["rc"] == 0
                                 else f"FAILED {r['stderr'].strip().splitlines()[-1:]}")
            if "api" in only:
                out = work / "out-api"
                shutil.rmtree(out, ignore_errors=True)
                r = measure([sys.executable, "-c", _API.replace("HERE", repr(str(HERE))), args.tokenizer,
                             path, str(out), str(n)], env=env)
                got = last_json(r)
                total = int((read_tokens(out) != eot).sum()) if "seconds" in got else None
                shutil.rmtree(out, ignore_errors=True)
                res["api", n] = (got.get("seconds"), total, got.get("api", got.get("error")))
            if "tiktoken" in only:
                t0, total = time.perf_counter(), 0
                for b in batches(docs, int(args.batch_mb * 1e6)):
                    out_lists = tk.encode_ordinary_batch(b, num_threads=n)
                    total += sum(map(len, out_lists))
                    del out_lists
                res["tiktoken", n] = (time.perf_counter() - t0, total, "encode_ordinary_batch")
            if "gigatoken" in only:
                vocab_file = str(encode_ratios.VOCAB_DIR / f"{args.tokenizer}.tiktoken")
                pretok = "gpt2" if args.tokenizer == "gpt2" else ""
                r = measure([sys.executable, "-c", _GIGATOKEN, vocab_file, pretok, path,
                             json.dumps(encode_ratios.SPECIALS[args.tokenizer])],
                            env=env_with_checkout({"RAYON_NUM_THREADS": str(n)}))
                got = last_json(r)
                res["gigatoken", n] = (got.get("seconds"), got.get("tokens"),
                                       "encode_files(JsonlFileSource)" if "seconds" in got else got.get("error"))
        for (name, n), (secs, total, note) in sorted(res.items(), key=lambda kv: (VARIANTS.index(kv[0][0]), kv[0][1])):
            same = "" if total is None or n_tokens is None else ("" if total == n_tokens else "  TOKEN COUNT DIFFERS from mem")
            shown = f"{secs:8.2f} {mb / secs:8.1f}" if secs else f"{'-':>8} {'-':>8}"
            print(f"{name:<12} {n:>7} {shown} {total if total is not None else '-':>14}  {note}{same}")

        print("\nratios (same run):")
        for name in ("cli", "api", "tiktoken", "gigatoken"):
            for n in threads:
                a, m = res.get((name, n), (None,))[0], res.get(("mem", n), (None,))[0]
                if a and m:
                    print(f"  {name}/mem at {n} thread(s): {m / a:.2f} of in-memory speed")
        for name in ("mem", "cli", "api", "tiktoken", "gigatoken"):
            one, two = res.get((name, 1), (None,))[0], res.get((name, 2), (None,))[0]
            if one and two:
                print(f"  {name}: 2 threads {one / two:.2f}x one")
    finally:
        if not args.tmp:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
