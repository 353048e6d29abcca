"""Issue 39's HF column: fastbpe against HF ``tokenizers`` on the same sentencepiece-style
tokenizer.json (HF is the judge of that file; the ``.model`` files are ``spm_peers.py``'s).

    python benchmarks/spm_json_speed.py [--model PATH ...] [--kind english ...] [--mb 1]
    python benchmarks/spm_json_speed.py --batch 500 [--threads 1 2]
    python benchmarks/spm_json_speed.py --long [--model PATH]

For each Mistral ``.model`` (``$FASTBPE_TEST_VOCAB_DIR`` or ``../shared/vocab``, or
``--model``), the tokenizer.json transformers' spm-proto conversion makes from it
(``spm_peers.hf_from_model``) is saved to a temporary file; ``fastbpe.load`` reads that
file and HF runs the same object. One core (pinned), ~2 KB documents of
``benchmarks/corpus.py``'s kinds; ids are compared on every document first (a differing
document is reported, and the kind gets no ratio). Times are CPU time, best of
``--repeat``: **cold** is a fresh fastbpe tokenizer's first pass over text it never saw,
**steady** the best of the passes after it.

``--batch N``: instead, the wall time of ``encode_batch`` of N ~2 KB documents (the kinds
in turn) on each of ``--threads`` native threads (not pinned), a fresh tokenizer's first
call (cold) and the best of ``--repeat`` after it; HF's ``encode_batch`` (its own thread
pool) on the same documents for scale. Ids are compared with HF's first.

``--long``: instead, the issue's linearity bound on ``spm_peers.long_lines`` (10 MB lines
without spaces, ``random`` letters and the ``uncut`` walk): CPU seconds of
``encode_ordinary`` of the first 1 MB (best of 2) and of the whole 10 MB (one run), and
their ratio (the bound: <= 12). Ids are compared with HF's on a 20,000-character prefix.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if any((HERE.parent / "fastbpe").glob("_encode*.so")) and str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import corpus  # noqa: E402
import fastbpe  # noqa: E402
from spm_peers import MODELS, VOCAB_DIR, hf_from_model, long_lines, pin_one_core  # noqa: E402


def documents(kind: str, mb: float) -> list[str]:
    text = corpus.corpus(kind)[: int(mb * 1_000_000)]
    return [text[i:i + 2000] for i in range(0, len(text), 2000)]


def cpu_pass(encode, docs) -> float:
    t0 = time.process_time()
    for d in docs:
        encode(d)
    return time.process_time() - t0


def wall(call) -> float:
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def batch_run(json_path: Path, tok, name: str, docs: list[str], threads: list[int], repeat: int) -> None:
    """``--batch``: see the module docstring."""
    mb = sum(len(d.encode("utf-8")) for d in docs) / 1e6
    hf_ids = [e.ids for e in tok.encode_batch(docs, add_special_tokens=False)]
    for n in threads:
        fresh = fastbpe.load(json_path)
        cold = wall(lambda: fresh.encode_batch(docs, num_threads=n))
        steady = min(wall(lambda: fresh.encode_batch(docs, num_threads=n)) for _ in range(repeat))
        differ = sum(a != b for a, b in zip(fresh.encode_batch(docs, num_threads=n), hf_ids))
        print(f"{name:44} batch of {len(docs)} docs, {n} thread(s): fastbpe cold {mb / cold:6.1f} steady"
              f" {mb / steady:6.1f} MB/s ({steady * 1e3:.1f} ms)" + (f" ids differ on {differ}" if differ else ""),
              flush=True)
    hf = min(wall(lambda: tok.encode_batch(docs, add_special_tokens=False)) for _ in range(repeat))
    print(f"{name:44} batch of {len(docs)} docs, HF encode_batch (its own threads): {mb / hf:6.1f} MB/s", flush=True)


def long_run(json_path: Path, tok, path: Path) -> None:
    """``--long``: see the module docstring."""
    fresh = fastbpe.load(json_path)
    for kind, text in long_lines(path).items():
        if fresh.encode_ordinary(text[:20_000]) != tok.encode(text[:20_000], add_special_tokens=False).ids:
            print(f"{path.name:44} {kind:8} ids differ from HF's on the 20,000-character prefix", flush=True)
            continue
        one = min(cpu_pass(fresh.encode_ordinary, [text[:1_000_000]]) for _ in range(2))
        ten = cpu_pass(fresh.encode_ordinary, [text])
        print(f"{path.name:44} {kind:8} 1 MB {one:.3f} s, 10 MB {ten:.3f} s: {ten / one:.1f}x", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", nargs="*", type=Path, default=None)
    ap.add_argument("--kind", nargs="*", default=list(corpus.LANGUAGES))
    ap.add_argument("--mb", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", type=int, default=0, metavar="N", help="wall time of batches of N documents")
    ap.add_argument("--threads", nargs="*", type=int, default=[1, 2])
    ap.add_argument("--long", action="store_true", help="1 MB / 10 MB lines without spaces (linearity)")
    args = ap.parse_args(argv)
    if not args.batch:
        pin_one_core()
    paths = args.model or [VOCAB_DIR / m for m in MODELS]
    for path in paths:
        tok = hf_from_model(path)
        if tok is None:
            sys.exit("needs transformers and protobuf (the test extra) to convert the .model")
        with tempfile.TemporaryDirectory() as tmp:
            json_path = Path(tmp) / "tokenizer.json"
            tok.save(str(json_path))
            if args.long:
                long_run(json_path, tok, path)
                continue
            if args.batch:
                by_kind = [documents(kind, args.mb) for kind in args.kind]
                docs = [d for group in zip(*by_kind) for d in group][:args.batch]
                batch_run(json_path, tok, path.name, docs, args.threads, args.repeat)
                continue
            for kind in args.kind:
                docs = documents(kind, args.mb)
                mb = sum(len(d.encode("utf-8")) for d in docs) / 1e6
                fresh = fastbpe.load(json_path)
                cold = cpu_pass(fresh.encode_ordinary, docs)
                steady = min(cpu_pass(fresh.encode_ordinary, docs) for _ in range(args.repeat))
                hf = min(cpu_pass(lambda d: tok.encode(d, add_special_tokens=False).ids, docs)
                         for _ in range(args.repeat))
                differ = sum(fresh.encode_ordinary(d) != tok.encode(d, add_special_tokens=False).ids for d in docs)
                ratio = (f"x HF {hf / cold:.1f} / {hf / steady:.1f}" if not differ
                         else f"ids differ on {differ}/{len(docs)} documents")
                print(f"{path.name:44} {kind:8} fastbpe cold {mb / cold:6.1f} steady {mb / steady:6.1f} MB/s"
                      f" | HF {mb / hf:5.1f} MB/s | {ratio}", flush=True)


if __name__ == "__main__":
    main()
