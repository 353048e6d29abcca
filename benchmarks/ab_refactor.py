"""Before -> after of a refactor (issue 24): the same bytes out, the same speed and size.

    python benchmarks/ab_refactor.py BEFORE AFTER [--rounds 5] [--train-mb 20]
        [--corpus /work/corpus/quarter.txt] [--vocab-dir ../shared/vocab] [--json out.json]

BEFORE and AFTER are two checkouts, each built in place (``python setup.py build_ext
--inplace``). Everything runs in fresh child processes with ``PYTHONPATH`` set to one
checkout and the working directory outside both (each child checks that it imported
that checkout's fastbpe), and uses only what a user can call: the public names of
``fastbpe`` and the ``fastbpe`` command line, because a refactor moves the modules
inside the package. Correctness first, then speed:

**Outputs** (sha256; equal or the refactor changed behaviour):

- ``tokenizer.json`` of ``train_bpe`` on the first ``--train-mb`` MB of the corpus
  (vocab 32001, ``<|endoftext|>``, ``docs="sep:<|endoftext|>"``), and the ``.tiktoken``
  save of it; ``tokenizer.json`` of ``train_wordpiece`` on the first ``--wp-mb`` MB
  (vocab 8000);
- the ids of ``encode_ordinary``, ``encode(allowed_special="all")`` and
  ``encode_ordinary_batch`` on 1 MB of the corpus, for gpt2, cl100k_base and o200k_base
  (``get_encoding``), and of the bert-base-uncased WordPiece (``load`` of
  ``tokenizer.json``) on its lines;
- the shards that ``fastbpe encode -t gpt2 --shards`` and ``fastbpe.encode_files`` write
  for the first ``--shards-mb`` MB of the ``.jsonl`` corpus (every file: name and bytes;
  the manifest names the input file, which both checkouts read from the same path).

**Speed and size** (each a fresh process per checkout per round; the order of the two
checkouts is reversed every other round, as in ``ab_encode.py``, because on a shared
2-core machine the process started second runs at a different speed; best over the
rounds):

- ``import fastbpe`` (wall time in the child, and how many ``fastbpe`` modules it loads);
- ``get_encoding`` (first call of the process: read, check, build) and ``Encoding(...)``
  (the constructor alone, on ranks already in memory) for cl100k_base and o200k_base;
  these two and the import in ``--procs`` fresh processes per checkout per round;
- ``train_bpe``, its ``tokenizer.json`` save and their sum (seconds timed in the
  child) and the child's peak RSS (``ru_maxrss`` read by a launcher, ``peak_rss.py``);
- ``train_wordpiece`` seconds;
- WordPiece encode MB/s, bert-base-uncased, thread CPU time, best of 5 in the child:
  ``encode`` per line and ``encode_batch(lines, num_threads=1)``;
- the total size of the compiled extensions (``fastbpe/**/*.so``).

Encode throughput of the BPE kernels is ``ab_encode.py`` (every vocabulary x language,
with and without ``--batch``), not repeated here. The run takes 2-4 minutes with
the defaults on 2 cores. Ratios are AFTER / BEFORE: quote those of one run, never
absolute numbers from separate runs.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peak_rss import last_json, measure  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# One script for every child; argv[1] says what to do. Public API only.
CHILD = r"""
import hashlib, json, os, sys, time
tree = os.environ["AB_TREE"]
t0 = time.perf_counter()
import fastbpe
import_s = time.perf_counter() - t0
if not os.path.realpath(fastbpe.__file__).startswith(os.path.realpath(tree) + os.sep):
    sys.exit(f"imported {fastbpe.__file__}, not the checkout {tree}")

def sha(data):
    return hashlib.sha256(data).hexdigest()

def ids_sha(ids):
    return sha(json.dumps([list(map(int, x)) for x in ids] if ids and not isinstance(ids[0], int) else list(map(int, ids))).encode())

job, args = sys.argv[1], sys.argv[2:]
out = {}
if job == "import":
    out = {"import_s": import_s, "modules": sum(1 for m in sys.modules if m == "fastbpe" or m.startswith("fastbpe."))}
elif job == "build":
    name = args[0]
    t = time.perf_counter(); enc = fastbpe.get_encoding(name); out["get_encoding_s"] = time.perf_counter() - t
    ranks, specials = enc.mergeable_ranks, enc.special_tokens
    t = time.perf_counter()
    fastbpe.Encoding(name, pat_str=enc.pat_str, mergeable_ranks=ranks, special_tokens=specials)
    out["Encoding_s"] = time.perf_counter() - t
elif job == "train":
    import warnings
    corpus, d = args
    train_bpe = fastbpe.train_bpe  # a lazy attribute since issue 24: its import is not training
    t = time.perf_counter()
    enc = train_bpe(corpus, 32001, special_tokens=["<|endoftext|>"], docs="sep:<|endoftext|>", progress=False)
    out["train_s"] = time.perf_counter() - t
    t = time.perf_counter(); enc.save(os.path.join(d, "tokenizer.json")); out["save_s"] = time.perf_counter() - t
    out["train+save_s"] = out["train_s"] + out["save_s"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        enc.save(os.path.join(d, "bpe.tiktoken"), lossy=True)
    for f in ("tokenizer.json", "bpe.tiktoken"):
        out["sha:bpe " + f] = sha(open(os.path.join(d, f), "rb").read())
elif job == "wordpiece_train":
    corpus, d = args
    train_wordpiece = fastbpe.train_wordpiece  # lazy, as train_bpe
    t = time.perf_counter(); wp = train_wordpiece(corpus, 8000, docs="sep:<|endoftext|>"); out["wp_train_s"] = time.perf_counter() - t
    wp.save(os.path.join(d, "wordpiece.json"))
    out["sha:wordpiece tokenizer.json"] = sha(open(os.path.join(d, "wordpiece.json"), "rb").read())
elif job == "ids":
    text = open(args[0], encoding="utf-8").read()
    docs = text.split("<|endoftext|>")
    for name in ("gpt2", "cl100k_base", "o200k_base"):
        enc = fastbpe.get_encoding(name)
        out[f"sha:ids {name} encode_ordinary"] = ids_sha(enc.encode_ordinary(text))
        out[f"sha:ids {name} encode(all)"] = ids_sha(enc.encode(text, allowed_special="all"))
        out[f"sha:ids {name} encode_ordinary_batch"] = ids_sha(enc.encode_ordinary_batch(docs, num_threads=2))
    wp = fastbpe.load(os.path.join(args[1], "bert-base-uncased", "tokenizer.json"))
    out["sha:ids bert WordPiece encode_batch"] = ids_sha(wp.encode_batch(text.splitlines()[:20000], num_threads=2))
elif job == "wordpiece_encode":
    text = open(args[0], encoding="utf-8").read()
    lines = [ln for ln in text.splitlines() if ln.strip()][:5000]
    mb = sum(len(ln.encode()) for ln in lines) / 1e6
    wp = fastbpe.load(os.path.join(args[1], "bert-base-uncased", "tokenizer.json"))
    wp.encode_batch(lines[:500], num_threads=1)
    best_line = best_batch = float("inf")
    for _ in range(5):
        t = time.thread_time()
        for ln in lines:
            wp.encode(ln)
        best_line = min(best_line, time.thread_time() - t)
        t = time.thread_time(); wp.encode_batch(lines, num_threads=1); best_batch = min(best_batch, time.thread_time() - t)
    out = {"wp_line_MBps": mb / best_line, "wp_batch_MBps": mb / best_batch}
elif job == "encode_files":
    jsonl, d = args
    fastbpe.encode_files([jsonl], fastbpe.get_encoding("gpt2"), d, num_threads=2, progress=False)
print(json.dumps(out))
"""


def child_env(tree: Path, vocab_dir: Path) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.update(PYTHONPATH=str(tree), AB_TREE=str(tree), FASTBPE_VOCAB_DIR=str(vocab_dir), TIKTOKEN_CACHE_DIR="")
    return env


def run_child(tree: Path, job: str, *args, vocab_dir: Path, cwd: Path, rss: bool = False) -> dict:
    argv = [sys.executable, "-c", CHILD, job, *map(str, args)]
    env = child_env(tree, vocab_dir)
    if rss:
        r = measure(argv, env=env, cwd=cwd, timeout=600)
        out = last_json(r)
        out["peak_rss_mb"] = r["peak_rss_mb"]
    else:
        p = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
        try:
            out = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {}
        except (ValueError, IndexError):
            out = {}
        if p.returncode != 0 or not out and job != "encode_files":
            out = {"error": f"{job}: rc={p.returncode}: {(p.stderr.strip().splitlines() or [''])[-1][:300]}"}
    if "error" in out:
        raise SystemExit(f"{tree}: {out['error']}")
    return out


def dir_sha(folder: Path) -> str:
    """One hash of every file under ``folder``: relative names and bytes."""
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(f"{p.relative_to(folder)}\0{hashlib.sha256(p.read_bytes()).hexdigest()}\n".encode())
    return h.hexdigest()


def so_size(tree: Path) -> int:
    return sum(p.stat().st_size for p in (tree / "fastbpe").rglob("*.so"))


def head_file(src: Path, dst: Path, mb: float) -> Path:
    """The first ``mb`` MB of ``src``, cut after its last line end (never inside a
    character or a JSON line)."""
    with open(src, "rb") as f:
        data = f.read(int(mb * 1e6))
    dst.write_bytes(data[: data.rfind(b"\n") + 1] if len(data) == int(mb * 1e6) else data)
    return dst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--procs", type=int, default=3, help="fresh processes per round for import and build times")
    ap.add_argument("--corpus", type=Path, default=Path("/work/corpus/quarter.txt"),
                    help="text whose documents are joined by <|endoftext|> (benchmarks/debian_corpus.py)")
    ap.add_argument("--jsonl", type=Path, default=None, help="default: the corpus with .jsonl")
    ap.add_argument("--train-mb", type=float, default=20)
    ap.add_argument("--wp-mb", type=float, default=5)
    ap.add_argument("--shards-mb", type=float, default=5)
    ap.add_argument("--vocab-dir", type=Path, default=ROOT.parent / "shared" / "vocab")
    ap.add_argument("--json", type=Path, default=None, help="write every number here too")
    a = ap.parse_args(argv)
    trees = {"before": a.before.resolve(), "after": a.after.resolve()}
    vocab_dir = a.vocab_dir.resolve()
    jsonl = a.jsonl or a.corpus.with_suffix(".jsonl")
    for tree in trees.values():
        if not any((tree / "fastbpe").rglob("*.so")):
            raise SystemExit(f"{tree}: no built extensions under fastbpe/ (python setup.py build_ext --inplace)")
    for path in (a.corpus, jsonl, vocab_dir / "bert-base-uncased" / "tokenizer.json"):
        if not path.exists():
            raise SystemExit(f"missing {path}")
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ab_refactor_") as tmp:
        tmp = Path(tmp)
        train_txt = head_file(a.corpus, tmp / "train.txt", a.train_mb)
        wp_txt = head_file(a.corpus, tmp / "wp.txt", a.wp_mb)
        ids_txt = head_file(a.corpus, tmp / "ids.txt", 1)
        shards_jsonl = head_file(jsonl, tmp / "shards.jsonl", a.shards_mb)
        shas: dict[str, dict[str, str]] = {k: {} for k in trees}
        times: dict[str, dict[str, list[float]]] = {k: {} for k in trees}

        def note(side, out):
            for key, value in out.items():
                if key.startswith("sha:"):
                    old = shas[side].setdefault(key[4:], value)
                    if old != value:  # the same checkout gave two answers: not deterministic
                        shas[side][key[4:]] = "NOT DETERMINISTIC"
                else:
                    times[side].setdefault(key, []).append(value)

        # 1. outputs that need one run each (training's are collected with its timing below)
        for side, tree in trees.items():
            work = tmp / side
            work.mkdir()
            note(side, run_child(tree, "ids", ids_txt, vocab_dir, vocab_dir=vocab_dir, cwd=work))
            cli = subprocess.run([sys.executable, "-m", "fastbpe", "encode", "-t", "gpt2", "--shards", str(work / "cli"),
                                  "--threads", "2", "-q", str(shards_jsonl)],
                                 env=child_env(tree, vocab_dir), cwd=work, capture_output=True, text=True)
            if cli.returncode != 0:
                raise SystemExit(f"{tree}: fastbpe encode --shards: {cli.stderr.strip()[-300:]}")
            shas[side]["shards fastbpe encode --shards"] = dir_sha(work / "cli")
            run_child(tree, "encode_files", shards_jsonl, work / "api", vocab_dir=vocab_dir, cwd=work)
            shas[side]["shards encode_files"] = dir_sha(work / "api")
            times[side]["so_bytes"] = [so_size(tree)]
        # 2. timings, alternating the order of the checkouts every round
        for r in range(a.rounds):
            order = list(trees.items()) if r % 2 == 0 else list(trees.items())[::-1]
            for side, tree in order:
                work = tmp / side
                for _ in range(a.procs):
                    note(side, run_child(tree, "import", vocab_dir=vocab_dir, cwd=work))
                    for name in ("cl100k_base", "o200k_base"):
                        out = run_child(tree, "build", name, vocab_dir=vocab_dir, cwd=work)
                        note(side, {f"{k} {name}": v for k, v in out.items()})
                note(side, run_child(tree, "train", train_txt, work, vocab_dir=vocab_dir, cwd=work, rss=True))
                note(side, run_child(tree, "wordpiece_train", wp_txt, work, vocab_dir=vocab_dir, cwd=work))
                note(side, run_child(tree, "wordpiece_encode", wp_txt, vocab_dir, vocab_dir=vocab_dir, cwd=work))
            print(f"round {r + 1}/{a.rounds} done ({time.perf_counter() - t_start:.0f} s)", file=sys.stderr, flush=True)

    # 3. the tables
    print(f"# before -> after\n\nbefore: {trees['before']}\nafter:  {trees['after']}\n"
          f"corpus: {a.corpus} (train {a.train_mb:g} MB, WordPiece {a.wp_mb:g} MB, shards {a.shards_mb:g} MB of {jsonl.name}); "
          f"{a.rounds} rounds, alternating; {time.perf_counter() - t_start:.0f} s\n")
    print("## outputs (sha256, first 16 hex)\n\n| output | before | after | |\n|---|---|---|---|")
    n_diff = 0
    for key in sorted(set(shas["before"]) | set(shas["after"])):
        b, af = shas["before"].get(key, "-"), shas["after"].get(key, "-")
        same = b == af and b != "NOT DETERMINISTIC"
        n_diff += not same
        print(f"| {key} | {b[:16]} | {af[:16]} | {'same' if same else '**DIFFERENT**'} |")
    higher_is_better = {"wp_line_MBps", "wp_batch_MBps"}
    print("\n## speed and size (best over the rounds; ratio after / before)\n\n| measure | before | after | after/before |\n|---|---|---|---|")
    for key in times["before"]:
        if key not in times["after"]:
            continue
        pick = max if key in higher_is_better else min
        b, af = pick(times["before"][key]), pick(times["after"][key])
        fmt = (lambda v: f"{v / 1e6:.2f} MB") if key == "so_bytes" else (lambda v: f"{v:.0f}") if key in ("modules",) \
            else (lambda v: f"{v:.0f} MB") if key == "peak_rss_mb" else (lambda v: f"{v:.1f}") if key in higher_is_better \
            else (lambda v: f"{v:.3f} s")
        print(f"| {key} | {fmt(b)} | {fmt(af)} | {af / b:.2f} |" if b else f"| {key} | {fmt(b)} | {fmt(af)} | - |")
    print(f"\n{'all outputs identical' if not n_diff else f'{n_diff} outputs DIFFER'}")
    if a.json:
        a.json.write_text(json.dumps({"trees": {k: str(v) for k, v in trees.items()}, "sha256": shas, "times": times}, indent=1))
    return 1 if n_diff else 0


if __name__ == "__main__":
    sys.exit(main())
