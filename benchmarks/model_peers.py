"""Issue 38's peer table: fastbpe against every installed peer on the open models' files.

    FASTBPE_TEST_VOCAB_DIR=../shared/vocab python benchmarks/model_peers.py \
        [--model llama-3.2 ...] [--kind english ...] [--mb 1] [--warm-passes 3] [--repeat 2]

One core (pinned), ~2 KB documents (``benchmarks/corpus.py``'s kinds, about ``--mb`` MB
each, cut at line ends), each kind cut in two halves as ``spm_peers.py`` does (the same
``measure``): **cold** is a fresh tokenizer (built untimed) over the timed half, text it
never saw (after one short untimed encode: lazy set-up is loading, not text);
**steady** a fresh tokenizer that encoded the warm-up half ``--warm-passes``
times, then the timed half. Best of ``--repeat``; MB/s of UTF-8 input in process CPU time.

The judge of a tokenizer.json is HF ``tokenizers``. Peers differ in what their plain
``encode`` does with special-token text (matched or text) and with the file's template
(``<|begin_of_text|>`` added or not), so each library's ids are compared with HF's four
forms (``encode_special_tokens`` x ``add_special_tokens``) on every document, and the
form it gives is named; a library equal to none is reported with the count of documents
where it differs from the nearest form, timed for scale, with no ratio. Libraries
(each when installed and when it reads the file): fastbpe (``encode_ordinary``), HF
(``encode(...).ids``, one document a call), gigatoken (``Tokenizer``: its numpy array),
splintr (``from_json``: ``encode_ordinary``), fastokens (``Tokenizer.from_file``:
``encode_ordinary(...).ids``), kitoken (``from_tokenizers_file``: ``encode(d, False)``).

"x cl100k" is fastbpe on the file over fastbpe's built-in cl100k_base on the same text,
timed the same way (the issue's bound: >= 0.9x); "x NAME" is fastbpe over that peer.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
if any((HERE.parent / "fastbpe").glob("_encode*.so")) and str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))   # a checkout built in place; never an unbuilt tree
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAYON_NUM_THREADS", "1")

import corpus as bench_corpus  # noqa: E402
from spm_peers import measure, pin_one_core, primed  # noqa: E402  (one way of timing both tables)

import fastbpe  # noqa: E402

VOCAB_DIR = Path(os.environ.get("FASTBPE_TEST_VOCAB_DIR", HERE.parent.parent / "shared" / "vocab"))
MODELS = {"llama-3.2": "llama-3.2/tokenizer.json", "qwen3": "qwen3/tokenizer.json",
          "deepseek-v4": "deepseek-v4/tokenizer.json", "gpt2": "gpt2.tokenizer.json"}
#: HF's forms of a document's ids: (special-token text matched, template added)
FORMS = [(False, False), (True, False), (False, True), (True, True)]


def _optional(name: str):
    try:
        return __import__(name)
    except ImportError:
        return None


def encoders(path: Path) -> tuple[dict, dict]:
    """(name -> (make a fresh encoder, encode one document with it), name -> why absent)."""
    import tokenizers

    def hf():
        t = tokenizers.Tokenizer.from_file(str(path))
        t.encode_special_tokens = True
        return t

    out = {
        "fastbpe": (lambda: fastbpe.load(path), lambda t, d: t.encode_ordinary(d)),
        "hf tokenizers": (hf, lambda t, d: t.encode(d, add_special_tokens=False).ids),
    }
    peers = {
        "gigatoken": ("gigatoken", lambda m: m.Tokenizer(str(path)), lambda t, d: t.encode(d)),
        "splintr": ("splintr", lambda m: m.from_json(str(path)), lambda t, d: t.encode_ordinary(d)),
        "fastokens": ("fastokens", lambda m: m.Tokenizer.from_file(str(path)), lambda t, d: t.encode_ordinary(d).ids),
        "kitoken": ("kitoken", lambda m: m.Kitoken.from_tokenizers_file(str(path)), lambda t, d: t.encode(d, False)),
    }
    absent = {}
    for name, (module, make, run) in peers.items():
        m = _optional(module)
        if m is None:
            absent[name] = "not installed"
            continue
        try:
            make(m)
        except Exception as e:  # noqa: BLE001 - a peer that refuses the file is reported
            absent[name] = f"refuses the file ({str(e).splitlines()[0][:60]})"
            continue
        out[name] = (lambda make=make, m=m: make(m), run)
    return {name: (primed(make, run), run) for name, (make, run) in out.items()}, absent


def hf_forms(path: Path, docs: list[str]) -> dict[tuple[bool, bool], list[list[int]]]:
    """HF's ids of every document in each of its four forms (see ``FORMS``)."""
    import tokenizers

    t = tokenizers.Tokenizer.from_file(str(path))
    out = {}
    for matched, template in FORMS:
        t.encode_special_tokens = not matched
        out[matched, template] = [t.encode(d, add_special_tokens=template).ids for d in docs]
    return out


def form_of(ids: list[list[int]], forms: dict) -> tuple[str, int]:
    """The HF form these ids equal ("" and the fewest differing documents if none)."""
    best = len(ids) + 1
    for (matched, template), want in forms.items():
        differ = sum(list(a) != b for a, b in zip(ids, want))
        if differ == 0:
            return ("specials matched" if matched else "specials as text") + (", template" if template else ""), 0
        best = min(best, differ)
    return "", best


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", action="append", choices=sorted(MODELS))
    p.add_argument("--kind", action="append", choices=bench_corpus.LANGUAGES)
    p.add_argument("--mb", type=float, default=1.0)
    p.add_argument("--warm-passes", type=int, default=3)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--json")
    args = p.parse_args(argv)
    pin_one_core()
    base = fastbpe.get_encoding("cl100k_base")   # the one instance get_encoding keeps

    def cl100k():   # a fresh copy for each measurement, as every library's is
        return fastbpe.Encoding("cl100k_base", pat_str=base.pat_str, mergeable_ranks=base.mergeable_ranks,
                                special_tokens=base.special_tokens)
    results = []
    for label in args.model or list(MODELS):
        path = VOCAB_DIR / MODELS[label]
        if not path.exists():
            print(f"skipped {label}: {path} not found")
            continue
        encs, absent = encoders(path)
        if absent:
            print(f"{label}: " + "; ".join(f"{k} {v}" for k, v in absent.items()))
        for kind in args.kind or bench_corpus.LANGUAGES:
            docs = bench_corpus.cut(bench_corpus.corpus(kind)[: int(args.mb * 1e6)])
            warm, timed = docs[: len(docs) // 2], docs[len(docs) // 2:]
            forms = hf_forms(path, docs)
            row = {"model": label, "kind": kind, "docs": len(timed),
                   "cl100k": measure(cl100k, lambda t, d: t.encode_ordinary(d), warm, timed,
                                     args.warm_passes, args.repeat)}
            for name, (make, run) in encs.items():
                tok = make()
                form, differ = form_of([run(tok, d) for d in docs], forms)
                row[name] = measure(make, run, warm, timed, args.warm_passes, args.repeat)
                row[name]["form"] = form or f"differs on {differ}/{len(docs)}"
            results.append(row)
            ours = row["fastbpe"]
            cells = [f"{n}: {row[n]['cold']:.1f}/{row[n]['steady']:.1f} ({row[n]['form']})" for n in encs]
            cells.append(f"x cl100k {ours['cold'] / row['cl100k']['cold']:.2f}/"
                         f"{ours['steady'] / row['cl100k']['steady']:.2f}")
            for n in encs:
                if n != "fastbpe" and not row[n]["form"].startswith("differs") and not ours["form"].startswith("differs"):
                    cells.append(f"x {n} {ours['cold'] / row[n]['cold']:.2f}/{ours['steady'] / row[n]['steady']:.2f}")
            print(f"{label:11s} {kind:8s} MB/s cold/steady: " + " | ".join(cells), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
