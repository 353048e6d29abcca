"""Benchmark report: fastbpe and the installed peers side by side, in one run.

    python benchmarks/report.py --out report/            # about 5-10 minutes on 2 cores
    python benchmarks/report.py --out report/ --quick    # a smoke run (about a minute)

Writes ``DIR/report.md`` (Markdown tables with ratios; machine, versions and corpus
stated), ``DIR/results.json`` (every number) and PNG charts (when matplotlib is
installed: ``pip install 'fastbpe[bench]'``).

What is measured (every peer that is installed is measured; the others are listed as
absent):

- **encode throughput** per vocabulary (gpt2, cl100k_base, o200k_base read from
  ``$FASTBPE_VOCAB_DIR`` or ``../shared/vocab``) and language: fastbpe, tiktoken, HF
  ``tokenizers``, tokie; one thread, the corpus cut into ~2000-character documents, best
  of ``--repeat`` runs; MB/s of UTF-8 input and the ratio to tiktoken (>1 is faster).
  Ids are compared with tiktoken's (a speedup that changes one id is a bug).
- **batch scaling**: ``encode_ordinary_batch`` at 1..cores threads, fastbpe vs tiktoken.
- **training time and peak memory**: fastbpe, rustbpe, HF ``tokenizers`` BPE,
  sentencepiece BPE, on the same file and vocabulary size; each trainer runs in its own
  subprocess and its peak RSS is that child's ``ru_maxrss`` (``os.wait4``).
- **WordPiece** (when ``fastbpe.wordpiece`` is present): BERT-uncased encode vs HF and
  tokie, and training vs HF's WordPiece trainer.
- **course plots**: vocabulary size vs sequence length (every prefix of one training run
  is the vocabulary of that size, so one run gives the whole curve), the first 20 merges
  learned, and token counts of the same messages in English, Turkish and Chinese.

The corpus is ``benchmarks/corpus.py`` (its docstring says where each language's text
comes from); the parallel text is the gettext catalogs' messages (``corpus.parallel``).
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # corpus modules beside this script
# A checkout built in place (python setup.py build_ext --inplace) is measured; an unbuilt
# source tree must not shadow the installed package.
if any((ROOT / "fastbpe").glob("_encode*.so")) or any((ROOT / "fastbpe").glob("_encode*.pyd")):
    sys.path.insert(0, str(ROOT))

import fastbpe  # noqa: E402

#: The folder holding the fastbpe measured here; trainer subprocesses import it from there.
PKG_PARENT = str(Path(fastbpe.__file__).resolve().parents[1])
from fastbpe import stats as fstats  # noqa: E402

import corpus as corpus_mod  # noqa: E402

CORPUS_NAME = "benchmarks/corpus.py"

VOCABS = ("gpt2", "cl100k_base", "o200k_base")
PEERS = ("tiktoken", "tokenizers", "tokie", "sentencepiece", "rustbpe", "matplotlib", "psutil", "numpy")


def _vocab_dir() -> Path:
    env = os.environ.get("FASTBPE_VOCAB_DIR")
    return Path(env) if env else ROOT.parent / "shared" / "vocab"


def _optional(name):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


# --------------------------------------------------------------------------- machine
def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {"python": platform.python_version(), "fastbpe": fastbpe.__version__}
    for name in PEERS:
        mod = _optional(name)
        versions[name] = getattr(mod, "__version__", "installed") if mod else None
        if mod and versions[name] == "installed":
            try:
                from importlib.metadata import version

                versions[name] = version(name)
            except Exception:
                pass
    # the native core is always built (import fastbpe fails otherwise); this variable swaps it
    core = "reference (pure Python)" if os.environ.get("FASTBPE_REFERENCE_CORE") == "1" else "native"
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(), "versions": versions,
            "fastbpe_core": core, "load_average_1min": load}


# --------------------------------------------------------------------------- timing
def cold(enc):
    """Run before each timed fastbpe call (untimed): drops the chunk caches the encoder
    keeps between calls, so that repeats of the same documents are not timed warm."""
    return getattr(getattr(enc, "_core_bpe", None), "_clear_chunk_caches", None)


def best_time(fn, repeat: int, setup=None) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        if setup is not None:
            setup()      # untimed
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def take_docs(lang: str, mb: float) -> list[str]:
    docs, size = [], 0
    for d in corpus_mod.documents(lang):
        docs.append(d)
        size += len(d.encode("utf-8"))
        if size >= mb * 1e6:
            break
    return docs


# --------------------------------------------------------------------------- encoders
def encoders_for(vocab: str, tmp: Path) -> dict:
    """name -> function(list of docs) -> list of ids (concatenated) for one vocabulary."""
    out = {}
    enc = fastbpe.get_encoding(vocab)
    out["fastbpe"] = lambda docs: [i for d in docs for i in enc.encode_ordinary(d)]
    out["fastbpe"].setup = cold(enc)
    tk = _optional("tiktoken")
    if tk:
        t = tk.Encoding(vocab, pat_str=enc.pat_str, mergeable_ranks=enc.mergeable_ranks, special_tokens=enc.special_tokens)
        out["tiktoken"] = lambda docs: [i for d in docs for i in t.encode_ordinary(d)]
    json_path = _vocab_dir() / "gpt2.tokenizer.json" if vocab == "gpt2" else tmp / f"{vocab}.tokenizer.json"
    if vocab != "gpt2" or not json_path.exists():
        json_path = tmp / f"{vocab}.tokenizer.json"
        enc.save(json_path)
    hf = _optional("tokenizers")
    if hf:
        h = hf.Tokenizer.from_file(str(json_path))
        h.no_truncation()
        h.no_padding()
        out["HF tokenizers"] = lambda docs: [i for d in docs for i in h.encode(d, add_special_tokens=False).ids]
    tokie = _optional("tokie")
    if tokie:
        try:
            k = tokie.Tokenizer.from_json(str(json_path))
            k.no_truncation()
            k.no_padding()
            out["tokie"] = lambda docs: [i for d in docs for i in k.encode(d, add_special_tokens=False).ids]
        except Exception as exc:  # a peer that cannot read the file is reported, not fatal
            print(f"  tokie cannot load {json_path.name}: {exc}", file=sys.stderr)
    return out


def bench_encode(args, tmp: Path) -> list[dict]:
    rows = []
    langs = list(corpus_mod.LANGUAGES)
    docs = {lang: take_docs(lang, args.mb) for lang in langs}
    for vocab in VOCABS:
        try:
            encs = encoders_for(vocab, tmp)
        except (FileNotFoundError, ValueError) as exc:
            print(f"  skipping {vocab}: {str(exc).splitlines()[0]}", file=sys.stderr)
            continue
        for lang in langs:
            n_bytes = sum(len(d.encode("utf-8")) for d in docs[lang])
            row = {"vocab": vocab, "language": lang, "bytes": n_bytes, "mbps": {}, "tokens": {}, "same_ids": {}}
            ref_ids = None
            for name, fn in encs.items():
                secs, ids = best_time(lambda: fn(docs[lang]), args.repeat, getattr(fn, "setup", None))
                row["mbps"][name] = n_bytes / 1e6 / secs
                row["tokens"][name] = len(ids)
                if name == "tiktoken":
                    ref_ids = ids
                row.setdefault("_ids", {})[name] = ids
            for name, ids in row.pop("_ids").items():
                row["same_ids"][name] = None if ref_ids is None else ids == ref_ids
            rows.append(row)
            print(f"  encode {vocab:12} {lang:8} " + "  ".join(f"{k} {v:.2f}" for k, v in row["mbps"].items()) + " MB/s",
                  file=sys.stderr)
    return rows


def bench_batch(args) -> list[dict]:
    try:
        enc = fastbpe.get_encoding("cl100k_base")
    except (FileNotFoundError, ValueError):
        return []
    docs = take_docs("english", args.mb) + take_docs("python", args.mb)
    n_bytes = sum(len(d.encode("utf-8")) for d in docs)
    tk = _optional("tiktoken")
    t = tk.Encoding("cl100k_base", pat_str=enc.pat_str, mergeable_ranks=enc.mergeable_ranks,
                    special_tokens=enc.special_tokens) if tk else None
    rows = []
    threads = sorted({1, 2, os.cpu_count() or 1})
    for n in threads:
        row = {"threads": n, "bytes": n_bytes, "mbps": {}}
        secs, _ = best_time(lambda: enc.encode_ordinary_batch(docs, num_threads=n), args.repeat, cold(enc))
        row["mbps"]["fastbpe"] = n_bytes / 1e6 / secs
        if t:
            secs, _ = best_time(lambda: t.encode_ordinary_batch(docs, num_threads=n), args.repeat)
            row["mbps"]["tiktoken"] = n_bytes / 1e6 / secs
        rows.append(row)
        print(f"  batch threads={n} " + "  ".join(f"{k} {v:.2f}" for k, v in row["mbps"].items()) + " MB/s", file=sys.stderr)
    return rows


# --------------------------------------------------------------------------- training
CL100K = fastbpe.CL100K

TRAINERS = {
    "fastbpe": """
import fastbpe
t0 = time.perf_counter()
enc = fastbpe.train_bpe([CORPUS], VOCAB, pattern="cl100k", special_tokens=[], progress=False)
secs = time.perf_counter() - t0
enc.save(OUT + "/fastbpe_trained.tokenizer.json")
n = enc.n_vocab
""",
    "rustbpe": """
import rustbpe
tok = rustbpe.Tokenizer()
lines = open(CORPUS, encoding="utf-8").read().splitlines(keepends=True)
t0 = time.perf_counter()
tok.train_from_iterator(iter(lines), VOCAB, pattern=PATTERN)
secs = time.perf_counter() - t0
n = len(tok.get_mergeable_ranks())
""",
    "HF tokenizers": """
from tokenizers import Tokenizer, Regex, models, pre_tokenizers, trainers, decoders
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex(PATTERN.replace("{1,3}+", "{1,3}")), behavior="isolated"),  # Oniguruma form
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
trainer = trainers.BpeTrainer(vocab_size=VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                              show_progress=False, min_frequency=0)
t0 = time.perf_counter()
tok.train([CORPUS], trainer)
secs = time.perf_counter() - t0
n = tok.get_vocab_size()
""",
    "sentencepiece": """
import sentencepiece as spm
# sentencepiece keeps whole characters: a small vocabulary cannot hold every Chinese
# character, so lower the character coverage until it fits (the others back off to bytes).
for coverage in (0.9995, 0.995, 0.98, 0.95):
    t0 = time.perf_counter()
    try:
        spm.SentencePieceTrainer.train(input=CORPUS, model_prefix=OUT + "/spm", vocab_size=VOCAB, model_type="bpe",
            character_coverage=coverage, byte_fallback=True, input_sentence_size=0, num_threads=THREADS,
            max_sentence_length=100000, minloglevel=2)
        break
    except RuntimeError as exc:
        if "character_coverage" not in str(exc) and "required_chars" not in str(exc):
            raise
else:
    raise SystemExit(f"vocab_size {VOCAB} is too small for sentencepiece: it keeps more "
                     "characters than that even at 95% character coverage")
secs = time.perf_counter() - t0
n = spm.SentencePieceProcessor(model_file=OUT + "/spm.model").get_piece_size()
""",
    "fastbpe WordPiece": """
from fastbpe import train_wordpiece
t0 = time.perf_counter()
wp = train_wordpiece([CORPUS], VOCAB)
secs = time.perf_counter() - t0
n = len(wp)
""",
    "HF WordPiece": """
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
tok.normalizer = normalizers.BertNormalizer(lowercase=True)
tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
trainer = trainers.WordPieceTrainer(vocab_size=VOCAB, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                    show_progress=False)
t0 = time.perf_counter()
tok.train([CORPUS], trainer)
secs = time.perf_counter() - t0
n = tok.get_vocab_size()
""",
}
TRAINER_NEEDS = {"fastbpe": "fastbpe", "rustbpe": "rustbpe", "HF tokenizers": "tokenizers",
                 "sentencepiece": "sentencepiece", "fastbpe WordPiece": "fastbpe.wordpiece", "HF WordPiece": "tokenizers"}


#: A tiny launcher: it starts the trainer as its only child and reports that child's peak
#: RSS. Measuring from the (big) report process would not do: on Linux a child's
#: ``ru_maxrss`` starts at the RSS of the process it was forked from.
_LAUNCHER = """
import json, os, resource, subprocess, sys
code, timeout = sys.argv[1], float(sys.argv[2])
try:
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=timeout)
except subprocess.TimeoutExpired:
    print(json.dumps({"error": "timed out after %.0f s" % timeout})); sys.exit(0)
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
if p.returncode != 0:
    last = (p.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
    print(json.dumps({"error": last[:200]})); sys.exit(0)
r = json.loads(p.stdout.decode().strip().splitlines()[-1])
r["peak_rss_mb"] = rss / 1024  # KiB on Linux
print(json.dumps(r))
"""


def run_trainer(name: str, corpus_file: Path, vocab: int, out: Path, timeout: float) -> dict:
    """Run one trainer in a fresh process of its own; time excludes imports and reading."""
    code = (
        "import json, sys, time\n"
        f"sys.path.insert(0, {PKG_PARENT!r})\n"
        f"CORPUS, VOCAB, OUT, PATTERN, THREADS = {str(corpus_file)!r}, {vocab}, {str(out)!r}, {CL100K!r}, {os.cpu_count() or 1}\n"
        + TRAINERS[name]
        + "print(json.dumps({'seconds': secs, 'vocab': n}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", _LAUNCHER, code, str(timeout)], capture_output=True)
    try:
        return json.loads(proc.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": (proc.stderr.decode(errors="replace").strip().splitlines() or ["launcher failed"])[-1][:200]}


def training_corpus(path: Path, mb: float) -> dict:
    """A mix of the four languages (a quarter each, by bytes), one file."""
    per = mb * 1e6 / len(corpus_mod.LANGUAGES)
    parts, sizes = [], {}
    for lang in corpus_mod.LANGUAGES:
        docs = take_docs(lang, per / 1e6)
        parts.extend(docs)
        sizes[lang] = sum(len(d.encode("utf-8")) for d in docs)
    path.write_text("".join(d if d.endswith("\n") else d + "\n" for d in parts), encoding="utf-8")
    return sizes


def bench_train(args, out: Path) -> dict:
    corpus_file = out / "train_corpus.txt"
    sizes = training_corpus(corpus_file, args.train_mb)
    results = {"corpus_bytes": corpus_file.stat().st_size, "by_language": sizes, "vocab": args.train_vocab, "trainers": {}}
    for name in TRAINERS:
        if not _optional(TRAINER_NEEDS[name]):
            results["trainers"][name] = {"error": "not installed"}
            continue
        r = run_trainer(name, corpus_file, args.train_vocab, out, args.train_timeout)
        results["trainers"][name] = r
        print(f"  train {name:18} {r}", file=sys.stderr)
    return results


# --------------------------------------------------------------------------- WordPiece encode
def bench_wordpiece_encode(args) -> list[dict]:
    wpmod = _optional("fastbpe.wordpiece")
    folder = _vocab_dir() / "bert-base-uncased"
    if not wpmod or not folder.exists():
        return []
    wp = fastbpe.load(folder / "vocab.txt")
    docs = take_docs("english", args.mb)
    n_bytes = sum(len(d.encode("utf-8")) for d in docs)
    encs = {"fastbpe": lambda: [i for d in docs for i in wp.encode(d, add_special_tokens=False)]}
    hf = _optional("tokenizers")
    if hf:
        h = hf.Tokenizer.from_file(str(folder / "tokenizer.json"))
        h.no_truncation()  # the shipped file truncates: compare whole documents
        h.no_padding()
        encs["HF tokenizers"] = lambda: [i for d in docs for i in h.encode(d, add_special_tokens=False).ids]
    tokie = _optional("tokie")
    if tokie:
        try:
            k = tokie.Tokenizer.from_json(str(folder / "tokenizer.json"))
            k.no_truncation()
            k.no_padding()
            encs["tokie"] = lambda: [i for d in docs for i in k.encode(d, add_special_tokens=False).ids]
        except Exception:
            pass
    row = {"language": "english", "bytes": n_bytes, "mbps": {}, "same_ids": {}}
    ref = None
    for name, fn in encs.items():
        secs, ids = best_time(fn, args.repeat)
        row["mbps"][name] = n_bytes / 1e6 / secs
        if name == "HF tokenizers":
            ref = ids
        row.setdefault("_ids", {})[name] = ids
    for name, ids in row.pop("_ids").items():
        row["same_ids"][name] = None if ref is None else ids == ref
    return [row]


# --------------------------------------------------------------------------- course
def course(args, out: Path, train: dict) -> dict:
    """Vocabulary size vs tokens, the first merges, and tokens per language."""
    res: dict = {}
    trained_path = out / "fastbpe_trained.tokenizer.json"
    held_out = "".join(d for lang in ("english", "python") for d in corpus_mod.documents(lang)[-args.held_out_docs:])
    res["held_out_bytes"] = len(held_out.encode("utf-8"))
    if trained_path.exists():
        trained = fastbpe.load(trained_path)
        ranks = trained.mergeable_ranks
        by_id = sorted(ranks.items(), key=lambda kv: kv[1])
        sizes = sorted({s for s in (256, 300, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192) if s <= len(by_id)}
                       | {len(by_id)})
        curve = []
        for size in sizes:
            enc = fastbpe.Encoding(f"prefix{size}", pat_str=trained.pat_str, mergeable_ranks=dict(by_id[:size]),
                                   special_tokens={})
            curve.append({"vocab_size": size, "tokens": len(enc.encode_ordinary(held_out))})
        res["vocab_curve"] = curve
        res["first_merges"] = {"fastbpe (this corpus)": [tok for tok, _ in by_id[256:276]]}
    res["reference_points"] = []
    for vocab in VOCABS:
        try:
            enc = fastbpe.get_encoding(vocab)
        except (FileNotFoundError, ValueError):
            continue
        res["reference_points"].append({"name": vocab, "vocab_size": enc.n_vocab,
                                        "tokens": len(enc.encode_ordinary(held_out))})
        if vocab == "gpt2":
            by_rank = sorted(enc.mergeable_ranks.items(), key=lambda kv: kv[1])
            res.setdefault("first_merges", {})["gpt2"] = [tok for tok, _ in by_rank[256:276]]
    res["first_merges"] = {k: [t.decode("utf-8", "replace") for t in v] for k, v in res.get("first_merges", {}).items()}

    # Token counts of the same messages across languages, and the token tax.
    par = corpus_mod.parallel(args.parallel_chars)
    toks = {}
    for vocab in VOCABS:
        try:
            toks[vocab] = fastbpe.get_encoding(vocab)
        except (FileNotFoundError, ValueError):
            pass
    if trained_path.exists():
        toks[f"fastbpe {train['vocab']}"] = fastbpe.load(trained_path)
    bert = _vocab_dir() / "bert-base-uncased" / "vocab.txt"
    if _optional("fastbpe.wordpiece") and bert.exists():
        toks["bert-base-uncased"] = fastbpe.load(bert)
    res["languages"] = {}
    for name, tok in toks.items():
        res["languages"][name] = {}
        for lang, text in par.items():
            s = fstats.text_stats(tok, text)
            res["languages"][name][lang] = {"tokens": s.tokens, "bytes": s.bytes, "unk_rate": s.unk_rate}
    res["parallel_bytes"] = {lang: len(t.encode("utf-8")) for lang, t in par.items()}
    res["parallel_lines"] = par["english"].count("\n")
    return res


# --------------------------------------------------------------------------- markdown
def _f(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def _ratio(x) -> str:
    return f"{x:,.0f}x" if x >= 100 else f"{x:.3g}x"


def _md_table(header, rows) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(out)


def markdown(res: dict, charts: list[Path]) -> str:
    m = res["machine"]
    lines = ["# fastbpe benchmark report", "",
             f"Run {res['date']} with `{res['command']}`.", "",
             "## Machine and versions", "",
             f"- CPU: {m['cpu']}, {m['cores']} cores; {m['platform']}; load average (1 min) at start: {_f(m['load_average_1min'])}",
             f"- fastbpe core: {m['fastbpe_core']}",
             "- versions: " + ", ".join(f"{k} {v}" if v else f"{k} (not installed)" for k, v in m["versions"].items()),
             f"- corpus: {res['corpus']['source']}; " + ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in res["corpus"]["sizes"].items())
             + f" (the first {res['args']['mb']} MB of each language is encoded)", ""]
    charts_by = {p.name: p for p in charts}

    def img(name, alt):
        if name in charts_by:
            lines.extend([f"![{alt}]({name})", ""])

    if res["encode"]:
        peers = sorted({k for r in res["encode"] for k in r["mbps"]}, key=lambda k: (k != "fastbpe", k != "tiktoken", k))
        lines += ["## Encode throughput (one thread)", "",
                  "MB/s of UTF-8 input, best of the repeats; `x tiktoken` is fastbpe's speed / tiktoken's (>1 is faster); "
                  "`ids` says whether each encoder gave exactly tiktoken's ids.", ""]
        rows = []
        for r in res["encode"]:
            tk = r["mbps"].get("tiktoken")
            rows.append([r["vocab"], r["language"], *(_f(r["mbps"].get(p)) for p in peers),
                         _f(r["mbps"]["fastbpe"] / tk if tk else None) + "x",
                         ", ".join(f"{p} {'✓' if ok else '✗'}" for p, ok in r["same_ids"].items() if ok is not None and p != "tiktoken")])
        lines += [_md_table(["vocabulary", "language", *peers, "x tiktoken", "ids"], rows), ""]
        img("encode_throughput.png", "encode throughput")
    if res["batch"]:
        lines += ["## Batch scaling (cl100k_base, English + Python)", ""]
        peers = list(res["batch"][0]["mbps"])
        lines += [_md_table(["threads", *(f"{p} MB/s" for p in peers), "x tiktoken"],
                            [[r["threads"], *(_f(r["mbps"][p]) for p in peers),
                              _f(r["mbps"]["fastbpe"] / r["mbps"]["tiktoken"] if "tiktoken" in r["mbps"] else None) + "x"]
                             for r in res["batch"]]), ""]
        img("batch_scaling.png", "batch scaling")
    t = res["train"]
    if t:
        lines += [f"## Training (vocabulary {t['vocab']}, {t['corpus_bytes'] / 1e6:.2f} MB mixed corpus, "
                  "each trainer in its own process)", ""]
        fb = t["trainers"].get("fastbpe", {}).get("seconds")
        rows = []
        for name, r in t["trainers"].items():
            if "error" in r:
                rows.append([name, "-", "-", "-", "-", r["error"]])
            else:
                ratio = fb / r["seconds"] if fb and r["seconds"] and not name.endswith("WordPiece") else None
                rows.append([name, _f(r["seconds"]), _ratio(ratio) if ratio else "-", _f(r["peak_rss_mb"], ".0f"), r["vocab"], ""])
        wp_fb, wp_hf = (t["trainers"].get(k, {}).get("seconds") for k in ("fastbpe WordPiece", "HF WordPiece"))
        for row in rows:
            if row[0] == "HF WordPiece" and wp_fb and wp_hf:
                row[2] = _ratio(wp_fb / wp_hf) + " (vs fastbpe WordPiece)"
        lines += ["`speed-up` = fastbpe's time / this trainer's time (>1: this trainer is faster than fastbpe).", "",
                  _md_table(["trainer", "seconds", "speed-up", "peak RSS MB", "vocab", "note"], rows), ""]
        img("training.png", "training time and memory")
    if res["wordpiece_encode"]:
        lines += ["## WordPiece encode (bert-base-uncased, English, one thread)", ""]
        r = res["wordpiece_encode"][0]
        lines += [_md_table(["encoder", "MB/s", "same ids as HF"],
                            [[p, _f(v), {True: "✓", False: "✗", None: "-"}[r["same_ids"][p]]] for p, v in r["mbps"].items()]), ""]
    c = res["course"]
    if c.get("vocab_curve"):
        lines += ["## Vocabulary size vs sequence length", "",
                  f"Tokens of {c['held_out_bytes'] / 1e6:.2f} MB of held-out English and Python for every prefix of the "
                  "trained vocabulary (a BPE vocabulary of size k is the first k tokens of a bigger run), and the OpenAI "
                  "vocabularies on the same text. Each doubling buys less: diminishing returns.", ""]
        rows = [[p["vocab_size"], f"{p['tokens']:,}", _f(c["held_out_bytes"] / p["tokens"])] for p in c["vocab_curve"]]
        rows += [[f"{p['vocab_size']} ({p['name']})", f"{p['tokens']:,}", _f(c["held_out_bytes"] / p["tokens"])]
                 for p in c["reference_points"]]
        lines += [_md_table(["vocabulary size", "tokens", "bytes/token"], rows), ""]
        img("vocab_size_vs_tokens.png", "vocabulary size vs tokens")
    if c.get("first_merges"):
        lines += ["## The first 20 merges", ""]
        names = list(c["first_merges"])
        cell = lambda t: "`" + repr(t).replace("|", "\\|").replace("`", "\\`") + "`"  # noqa: E731
        rows = [[i + 1, *(cell(c["first_merges"][n][i]) if i < len(c["first_merges"][n]) else "" for n in names)]
                for i in range(20)]
        lines += [_md_table(["#", *names], rows), ""]
    if c.get("languages"):
        lines += ["## The same text in three languages", "",
                  f"{c['parallel_lines']:,} messages that both the Turkish and the Chinese gettext catalogs translate "
                  "(English = the msgid). Token tax = tokens / English tokens.", ""]
        langs = list(c["parallel_bytes"])
        rows = []
        for name, per in c["languages"].items():
            en = per[langs[0]]["tokens"]
            rows.append([name, *(f"{per[lang]['tokens']:,} ({per[lang]['tokens'] / en:.2f}x)" for lang in langs)])
        lines += [_md_table(["tokenizer", *(f"{lang} ({c['parallel_bytes'][lang] / 1e3:.0f} KB)" for lang in langs)], rows), ""]
        img("tokens_by_language.png", "tokens by language")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for report.md, results.json and the PNG charts")
    ap.add_argument("--mb", type=float, default=0.5, help="MB of each language to encode")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--train-mb", type=float, default=1.0, help="MB of the mixed training corpus")
    ap.add_argument("--train-vocab", type=int, default=2048)
    ap.add_argument("--train-timeout", type=float, default=900)
    ap.add_argument("--parallel-chars", type=int, default=200_000)
    ap.add_argument("--held-out-docs", type=int, default=200, help="documents per language for the vocabulary curve")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    ap.add_argument("--skip", nargs="*", default=[], choices=["encode", "batch", "train", "wordpiece", "course"])
    args = ap.parse_args(argv)
    if args.quick:
        args.mb, args.repeat, args.train_mb, args.train_vocab, args.parallel_chars = 0.05, 1, 0.1, 300, 20_000
        args.held_out_docs = 10
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("FASTBPE_VOCAB_DIR", str(_vocab_dir()))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    res = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "command": "python benchmarks/report.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "args": vars(args), "machine": machine()}
    res["corpus"] = {"source": CORPUS_NAME, "sizes": {lang: len(corpus_mod.corpus(lang).encode("utf-8")) for lang in corpus_mod.LANGUAGES}}
    print(f"machine: {res['machine']['cpu']}, {res['machine']['cores']} cores; core {res['machine']['fastbpe_core']}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        res["encode"] = bench_encode(args, Path(tmp)) if "encode" not in args.skip else []
    res["batch"] = bench_batch(args) if "batch" not in args.skip else []
    res["train"] = bench_train(args, out) if "train" not in args.skip else {}
    res["wordpiece_encode"] = bench_wordpiece_encode(args) if "wordpiece" not in args.skip else []
    res["course"] = course(args, out, res["train"] or {"vocab": args.train_vocab}) if "course" not in args.skip else {}

    charts: list[Path] = []
    try:
        import plots

        charts = plots.save_all(res, out)
    except ImportError as exc:
        print(f"no charts: {exc} (pip install matplotlib)", file=sys.stderr)
    (out / "results.json").write_text(json.dumps(res, indent=1, default=str) + "\n", encoding="utf-8")
    (out / "report.md").write_text(markdown(res, charts), encoding="utf-8")
    print(f"wrote {out / 'report.md'}, {out / 'results.json'} and {len(charts)} charts", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
