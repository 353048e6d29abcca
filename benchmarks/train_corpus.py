"""Training on a real corpus of distinct documents: fastbpe vs rustbpe vs gigatoken.

    python benchmarks/debian_corpus.py --out /work/corpus     # once: builds the corpus
    python benchmarks/train_corpus.py --corpus /work/corpus   # 1x and 4x, .txt and .jsonl
    python benchmarks/train_corpus.py --corpus /work/corpus --sizes 1x --trainers fastbpe

The corpus directory holds ``quarter.txt`` / ``quarter.jsonl`` (the "1x") and
``docs.txt`` / ``docs.jsonl`` (the "4x"): the same documents, in the ``.txt`` files
joined by ``--sep`` (``<|endoftext|>``), in the ``.jsonl`` files one ``{"text": ...}``
per line (``benchmarks/debian_corpus.py`` writes them). Give other files with
``--files 1x=a.txt,4x=b.txt,1x=a.jsonl,...``.

Every trainer gets the same documents, vocab 32768 (``--vocab-size``), two threads:

* **fastbpe**: with the document model (issue 23) ``train_bpe(path, vocab,
  docs="sep:<|endoftext|>")`` or ``train_bpe(path, vocab, field="text")``; on a
  checkout without it (``train_bpe`` takes no ``docs=``) the documents are streamed
  from the file in Python as ``train_bpe(documents=...)`` (the "api" column says
  which). Phase times come from wrapping ``count_chunk_table`` (count) and
  ``train_merges`` (merge), where ``train_bpe`` looks them up, while it runs; "-" if a
  build calls others.
* **rustbpe**: ``Tokenizer().train_from_iterator(documents, vocab, pattern=cl100k)``,
  the documents streamed from the file in Python the same way.
* **gigatoken**: ``train_bpe(path, vocab, [], separator=b"<|endoftext|>")`` on the
  ``.txt`` (it reads the file itself) and ``train_bpe(JsonlFileSource([path]), ...)``
  on the ``.jsonl``. Its trainer has no pattern argument: it splits with the GPT-2
  pattern, not cl100k's, so its vocabulary differs (and its chunk table is a little
  smaller: GPT-2 keeps digit runs whole but never joins a newline to punctuation).

Each run is a fresh process under a tiny launcher (``peak_rss.py``): peak RSS is that
process's ``ru_maxrss``; seconds are timed in the child around the training call (the
imports are not in it; reading the file is). The table gives seconds, MB/s, CPU
seconds, peak RSS, the ratio of each peer's seconds to fastbpe's on the same file
(> 1: fastbpe is faster), 4x/1x for linearity and .jsonl/.txt. The "vocab" column is
a hash of the learned tokens in rank order, so equal hashes mean equal vocabularies
(fastbpe on .txt and .jsonl must agree: same documents).

On a 2-core machine shared with other jobs the numbers move by 5-10% between runs:
quote the ratios of one run.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import inspect
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if any((ROOT / "fastbpe").glob("_encode*.so")) and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from peak_rss import env_with_checkout, last_json, measure  # noqa: E402

SEP = "<|endoftext|>"
CL100K = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)


# ----------------------------------------------------------------------------- documents
def iter_separated(path: str, sep: str, block_chars: int = 1 << 22):
    """The non-empty documents of a file joined by ``sep``, streamed (one block and one
    document in memory at a time).

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    ...     _ = f.write("a<|e>bb<|e><|e>c")
    >>> list(iter_separated(f.name, "<|e>", block_chars=3))
    ['a', 'bb', 'c']
    """
    pending = ""
    with open(path, encoding="utf-8", newline="") as fh:
        while True:
            block = fh.read(block_chars)
            if not block:
                break
            parts = (pending + block).split(sep)
            pending = parts.pop()
            yield from (p for p in parts if p)
    if pending:
        yield pending


def iter_jsonl(path: str, field: str = "text"):
    """The non-empty ``field`` strings of a JSON Lines file, one per line."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                text = json.loads(line)[field]
                if text:
                    yield text


def documents(path: str, sep: str, field: str):
    return iter_jsonl(path, field) if kind_of(path) == "jsonl" else iter_separated(path, sep)


def kind_of(path: str) -> str:
    """``"jsonl"`` or ``"txt"``, by the file name.

    >>> kind_of("a/docs.jsonl"), kind_of("docs.txt")
    ('jsonl', 'txt')
    """
    return "jsonl" if ".jsonl" in Path(path).name or ".json." in Path(path).name else "txt"


def vocab_hash(tokens_in_rank_order) -> str:
    h = hashlib.sha256()
    for tok in tokens_in_rank_order:
        h.update(len(tok).to_bytes(4, "little") + tok)
    return h.hexdigest()[:12]


# ----------------------------------------------------------------------------- trainers
@contextlib.contextmanager
def timed_phases(info: dict):
    """While open, train_bpe's two native phases are wrapped so that their seconds land
    in info["count_s"] and info["merge_s"] (and the unique chunks counted in
    info["unique_chunks"]); the originals are put back on leaving."""
    import importlib

    # where train_bpe looks the two phases up: the layered package (issue 24), else _train
    try:
        homes = {"count_chunk_table": importlib.import_module("fastbpe.bpe.counting"),
                 "train_merges": importlib.import_module("fastbpe.trainers.bpe")}
    except ImportError:
        homes = dict.fromkeys(("count_chunk_table", "train_merges"), importlib.import_module("fastbpe._train"))

    def timed(fn, key):
        def wrapper(*args, **kw):
            t0 = time.perf_counter()
            out = fn(*args, **kw)
            info[key] = time.perf_counter() - t0
            if key == "count_s":
                info["unique_chunks"] = len(out)
            return out
        return wrapper

    saved = {n: getattr(m, n) for n, m in homes.items() if hasattr(m, n)}
    for name, key in (("count_chunk_table", "count_s"), ("train_merges", "merge_s")):
        if name in saved:
            setattr(homes[name], name, timed(saved[name], key))
    try:
        yield info
    finally:
        for name, fn in saved.items():
            setattr(homes[name], name, fn)


def run_fastbpe(path: str, vocab: int, threads: int, sep: str, field: str) -> dict:
    import fastbpe

    info: dict = {}
    params = inspect.signature(fastbpe.train_bpe).parameters
    common = dict(pattern="cl100k", num_threads=threads, progress=False)
    with timed_phases(info):
        t0 = time.perf_counter()
        if kind_of(path) == "jsonl" and "field" in params:
            info["api"] = f"field={field!r}"
            enc = fastbpe.train_bpe(path, vocab, field=field, **common)
        elif kind_of(path) == "txt" and "docs" in params:
            info["api"] = f"docs='sep:{sep}'"
            enc = fastbpe.train_bpe(path, vocab, docs=f"sep:{sep}", **common)
        else:
            info["api"] = "documents="
            enc = fastbpe.train_bpe(documents=documents(path, sep, field), vocab_size=vocab, **common)
        info["seconds"] = time.perf_counter() - t0
    ranks = enc.mergeable_ranks
    info["vocab"] = vocab_hash(sorted(ranks, key=ranks.get))
    info["n_vocab"] = len(ranks)
    return info


def run_rustbpe(path: str, vocab: int, threads: int, sep: str, field: str) -> dict:
    import rustbpe

    tok = rustbpe.Tokenizer()
    t0 = time.perf_counter()
    tok.train_from_iterator(documents(path, sep, field), vocab, pattern=CL100K)
    secs = time.perf_counter() - t0
    ranks = tok.get_mergeable_ranks()
    ranks = dict(ranks) if not isinstance(ranks, dict) else ranks
    ranks = {bytes(k): v for k, v in ranks.items()}
    return {"seconds": secs, "api": "train_from_iterator", "n_vocab": tok.vocab_size,
            "vocab": vocab_hash(sorted(ranks, key=ranks.get))}


def run_gigatoken(path: str, vocab: int, threads: int, sep: str, field: str) -> dict:
    import gigatoken

    t0 = time.perf_counter()
    if kind_of(path) == "jsonl":
        api = f"JsonlFileSource(field={field!r})"
        got, _merges = gigatoken.train_bpe(gigatoken.JsonlFileSource([path], field=field), vocab, [])
    else:
        api = "path, separator="
        got, _merges = gigatoken.train_bpe(path, vocab, [], separator=sep.encode())
    secs = time.perf_counter() - t0
    return {"seconds": secs, "api": api, "n_vocab": len(got),
            "vocab": vocab_hash(got[i] for i in sorted(got))}


TRAINERS = {"fastbpe": run_fastbpe, "rustbpe": run_rustbpe, "gigatoken": run_gigatoken}


def _child(argv: list[str]) -> None:
    name, path, vocab, threads, sep, field = argv
    info = TRAINERS[name](path, int(vocab), int(threads), sep, field)
    print(json.dumps(info))


def run(name: str, path: str, vocab: int, threads: int, sep: str, field: str, timeout: float) -> dict:
    env = env_with_checkout({"RAYON_NUM_THREADS": str(threads)})
    r = measure([sys.executable, __file__, "--child", name, path, str(vocab), str(threads), sep, field],
                env=env, timeout=timeout)
    info = last_json(r)
    info.update(peak_rss_mb=r["peak_rss_mb"], cpu_s=r["cpu_s"], process_s=r["wall_s"])
    return info


# ----------------------------------------------------------------------------- table
def corpus_files(args) -> list[tuple[str, str]]:
    """(size label, path) pairs in run order."""
    if args.files:
        return [tuple(item.split("=", 1)) for item in args.files.split(",")]
    names = {"1x": "quarter", "4x": "docs"}
    out = []
    for size in args.sizes.split(","):
        for fmt in args.formats.split(","):
            out.append((size, str(Path(args.corpus) / f"{names[size]}.{fmt}")))
    return out


def fmt_row(label: str, r: dict, mb: float, ratio: str) -> str:
    if "error" in r:
        return f"{label:<34} FAILED {r['error']}"
    phases = (f"{r['count_s']:7.1f} {r['merge_s']:7.1f} {r.get('unique_chunks', 0) / 1e6:6.2f}M"
              if "count_s" in r and "merge_s" in r else f"{'-':>7} {'-':>7} {'-':>7}")
    return (f"{label:<34} {r['seconds']:8.1f} {mb / r['seconds']:7.1f} {r['cpu_s']:8.1f}"
            f" {r['peak_rss_mb']:8.0f} {ratio:>8} {phases}  {r['vocab']}  {r['api']}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="/work/corpus", help="directory with quarter.* and docs.*")
    ap.add_argument("--files", help="explicit SIZE=PATH,... instead of --corpus/--sizes/--formats")
    ap.add_argument("--sizes", default="1x,4x")
    ap.add_argument("--formats", default="txt,jsonl")
    ap.add_argument("--trainers", default="fastbpe,rustbpe,gigatoken")
    ap.add_argument("--vocab-size", type=int, default=32768)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sep", default=SEP)
    ap.add_argument("--field", default="text")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per run (0: none)")
    ap.add_argument("--json", help="also write every result here")
    args = ap.parse_args(argv)

    files = corpus_files(args)
    trainers = args.trainers.split(",")
    print(f"vocab {args.vocab_size}, cl100k pattern (gigatoken: GPT-2's), {args.threads} threads,"
          f" {os.cpu_count()} cores; sep {args.sep!r}, field {args.field!r}")
    print(f"{'trainer / file':<34} {'seconds':>8} {'MB/s':>7} {'cpu s':>8} {'RSS MB':>8}"
          f" {'x fast':>8} {'count s':>7} {'merge s':>7} {'chunks':>7}  vocab         api")
    results: dict = {}
    for size, path in files:
        mb = Path(path).stat().st_size / 1e6
        for name in trainers:
            r = results[name, size, kind_of(path)] = run(name, path, args.vocab_size, args.threads,
                                                         args.sep, args.field, args.timeout)
            r["mb"] = mb
            fb = results.get(("fastbpe", size, kind_of(path)), {})
            ratio = (f"{r['seconds'] / fb['seconds']:.2f}x" if name != "fastbpe" and "seconds" in r
                     and "seconds" in fb else "")
            print(fmt_row(f"{name} {size} {Path(path).name} ({mb:.0f} MB)", r, mb, ratio), flush=True)

    print("\nratios (same run):")
    for (name, size, kind), r in results.items():
        fb = results.get(("fastbpe", size, kind), {})
        if name != "fastbpe" and "seconds" in r and "seconds" in fb:
            print(f"  {size} .{kind}: {name}/fastbpe seconds {r['seconds'] / fb['seconds']:.2f},"
                  f" fastbpe RSS / {name} RSS {fb['peak_rss_mb'] / r['peak_rss_mb']:.2f}")
        one = results.get((name, "1x", kind), {})
        if size == "4x" and "seconds" in r and "seconds" in one:
            print(f"  {name} .{kind}: 4x/1x seconds {r['seconds'] / one['seconds']:.2f}"
                  f" (bytes {r['mb'] / one['mb']:.2f}), RSS {r['peak_rss_mb'] / one['peak_rss_mb']:.2f}")
        txt = results.get((name, size, "txt"), {})
        if kind == "jsonl" and "seconds" in r and "seconds" in txt:
            same = "same vocab" if r.get("vocab") == txt.get("vocab") else "VOCAB DIFFERS"
            print(f"  {name} {size}: .jsonl/.txt seconds {r['seconds'] / txt['seconds']:.2f} ({same})")
    if args.json:
        Path(args.json).write_text(json.dumps({"|".join(k): v for k, v in results.items()}, indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
    else:
        main()
