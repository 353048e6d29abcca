"""fastbpe against HF ``tokenizers`` on the open models' files, one thread, ~2 KB documents.

The documents are distinct text: the standard library's sources cut in 2,000-character
pieces, plus the multilingual test corpus (``tests/open_corpus.py``). Ids are checked
equal first (50 documents). "cold" is the first pass (every word merged once), "warm"
the second (words cached). HF runs ``encode`` per document and ``encode_batch`` with
``RAYON_NUM_THREADS=1``; gigatoken (when installed, a peer; its ids checked first too)
``encode`` per document. The issue's targets are printed per file: fastbpe warm over HF
per-doc (>= 10x) and over fastbpe's own cl100k_base on the same text (>= 0.9x).
A tokenizer.json the rank engine runs is also timed on the pipeline engine
(``HFEncoding(..., engine="pipeline")``, "pipe warm"); "batch2" is
``encode_ordinary_batch`` on 2 native threads (warm, wall clock); "load" is
``fastbpe.load`` against HF's ``Tokenizer.from_file`` (wall clock, each file once).
Single-thread rates are by CPU time, best of 3 (stable on a shared machine).

    FASTBPE_TEST_VOCAB_DIR=../shared/vocab python benchmarks/hf_pipeline_speed.py

Options (issue 38):

* ``--speed``: only the CPU-time speed loop per model on the same documents, one line
  each: "fresh" is the first pass of a tokenizer loaded in a new process (every word
  merged once, the chunk caches empty), "warm" the best of ``--rounds`` passes after it;
  and the ratio to fastbpe's own cl100k_base, loaded and timed the same way.
  ``--models`` picks files by the labels below (default: cl100k, llama-3.2, qwen3,
  deepseek-v4).
* ``--load``: the CPU time of ``fastbpe.load`` against HF ``Tokenizer.from_file`` on
  each tokenizer.json (and gpt2.tokenizer.json; Mistral's Tekken file against
  mistral-common's ``Tekkenizer.from_file``), in fresh processes (best of ``--rounds``), with the libraries
  and numpy imported before the clock starts: "load" excludes fastbpe's lazily imported
  modules (a loader that has made one tokenizer), "first" includes them (the first
  load in a process). Byte code is cached for the children (``PYTHONPYCACHEPREFIX`` in
  a temporary folder, written once before timing), as an installed package has it, even
  when ``PYTHONDONTWRITEBYTECODE`` is set.

    FASTBPE_TEST_VOCAB_DIR=../shared/vocab python benchmarks/hf_pipeline_speed.py --speed
    FASTBPE_TEST_VOCAB_DIR=../shared/vocab python benchmarks/hf_pipeline_speed.py --load

``--where deepseek-v4/tokenizer.json`` (any file under the vocabulary folder) says
instead where one file's time goes, on the same documents, CPU time, best of 3: the
file's split alone (its Isolated Splits by the native split program:
``split_offsets``), the split and the merges with no Python per piece (the native
rank core's ``encode_ordinary`` on the rank engine; on the pipeline engine
``MergeList.encode_split`` on the split), and the whole ``encode_ordinary``; cl100k's
split and encode alongside. What is left between two columns is what the later one
adds (merging; Python and added-token matching).
"""
import argparse
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import fastbpe  # noqa: E402
from fastbpe.bpe.hf import HFEncoding  # noqa: E402
import tokenizers  # noqa: E402

try:
    import gigatoken  # noqa: E402
except ImportError:  # the peer is optional
    gigatoken = None
from open_corpus import documents  # noqa: E402

VOCAB = Path(os.environ.get("FASTBPE_TEST_VOCAB_DIR", ROOT.parent / "shared" / "vocab"))
FILES = [("cl100k (native)", "cl100k_base.tiktoken"), ("llama-4 .model", "llama-4/tokenizer.model"),
         ("gpt2 tokenizer.json", "gpt2.tokenizer.json"), ("llama-3.2 tokenizer.json", "llama-3.2/tokenizer.json"),
         ("qwen3 tokenizer.json", "qwen3/tokenizer.json"), ("deepseek-v4 tokenizer.json", "deepseek-v4/tokenizer.json"),
         ("tekken", "mistral/tekken_240911.json")]


#: ``--speed`` / ``--load`` models: label -> file under VOCAB (cl100k: the built-in encoding)
MODELS = {"cl100k": "cl100k_base", "llama-3.2": "llama-3.2/tokenizer.json", "qwen3": "qwen3/tokenizer.json",
          "deepseek-v4": "deepseek-v4/tokenizer.json"}
#: more files ``--load`` times (its default: all): HF's column for Tekken is mistral-common's
#: ``Tekkenizer.from_file`` (its reference reader; HF ``tokenizers`` does not read the format)
LOAD_ONLY = {"gpt2": "gpt2.tokenizer.json", "tekken": "mistral/tekken_240911.json"}


def corpus() -> list[str]:
    """The ~2 KB documents: standard-library sources, then the multilingual corpus."""
    stdlib = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:120]
    text = "".join(p.read_text(encoding="utf-8", errors="replace") for p in stdlib)
    docs = [text[i:i + 2000] for i in range(0, min(len(text), 1_600_000), 2000)]
    multi = "\n".join(documents(400))
    return docs + [multi[i:i + 2000] for i in range(0, len(multi), 2000)]


# A child process: load one model, then time (CPU) the passes over the documents.
_SPEED_CHILD = """
import sys, time
sys.path[:0] = [CHECKOUT, HERE + "/tests", HERE + "/benchmarks"]
import fastbpe
from hf_pipeline_speed import corpus, VOCAB
label, rel, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
docs = corpus()
n = sum(len(d.encode()) for d in docs)
enc = fastbpe.get_encoding(rel) if label == "cl100k" else fastbpe.load(VOCAB / rel)
times = []
for _ in range(rounds + 1):
    t = time.process_time()
    for d in docs:
        enc.encode_ordinary(d)
    times.append(time.process_time() - t)
print(n / times[0] / 1e6, n / min(times[1:]) / 1e6, getattr(enc, "engine", "builtin"), getattr(enc, "_split_engine", ""))
"""

# A child process: the CPU time of one load (imports first; "first" = with fastbpe's lazy modules).
_LOAD_CHILD = """
import sys, time
sys.path.insert(0, CHECKOUT)
import numpy, regex
which, path, first = sys.argv[1], sys.argv[2], sys.argv[3] == "first"
if which == "hf" and path.endswith("tekken_240911.json"):
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer
    load = Tekkenizer.from_file
elif which == "hf":
    import tokenizers
    load = tokenizers.Tokenizer.from_file
else:
    import fastbpe
    if not first:
        import fastbpe.loader, fastbpe.bpe.hf
    load = fastbpe.load
t = time.process_time()
load(path)
print(time.process_time() - t)
"""


#: the checkout whose fastbpe the children import (``--checkout``: a before/after on the
#: same documents with this script)
CHECKOUT = ROOT


def _child(code: str, *args, env=None) -> str:
    code = code.replace("CHECKOUT", repr(str(CHECKOUT))).replace("HERE", repr(str(ROOT)))
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], check=True, capture_output=True, text=True, env=env)
    return out.stdout.strip()


def speed(labels: list[str], rounds: int) -> None:
    """``--speed``: fresh and warm MB/s per model, each in a new process."""
    docs = corpus()
    print(f"{len(docs)} documents, {sum(len(d.encode()) for d in docs) / 1e6:.2f} MB; CPU time, 1 thread, "
          f"fresh = first pass of a new process, warm = best of {rounds} after it")
    rows, own = [], None
    for label in ["cl100k"] + [x for x in labels if x != "cl100k"]:
        rel = MODELS[label]
        if label != "cl100k" and not (VOCAB / rel).exists():
            print(f"{label}: {VOCAB / rel} not found, skipped")
            continue
        fresh, warm, engine, *split = _child(_SPEED_CHILD, label, rel, rounds).split()
        split = " ".join(split)
        fresh, warm = float(fresh), float(warm)
        own = own or (fresh, warm)
        rows.append(f"| {label} | {engine} {split} | {fresh:.1f} | {warm:.1f} | {fresh / own[0]:.2f}x | {warm / own[1]:.2f}x |")
    print("| model | engine | fresh MB/s | warm MB/s | fresh / cl100k | warm / cl100k |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))


def load_times(labels: list[str], rounds: int) -> None:
    """``--load``: CPU seconds of fastbpe.load and HF's from_file in fresh processes."""
    env = {**os.environ, "PYTHONPYCACHEPREFIX": tempfile.mkdtemp(prefix="fastbpe_pyc_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    print(f"CPU seconds, best of {rounds} fresh processes; libraries imported first")
    print("| file | HF from_file | fastbpe.load | (first in a process) | fastbpe / HF |")
    print("|---|---|---|---|---|")
    for label in labels:
        path = VOCAB / {**MODELS, **LOAD_ONLY}[label]
        if label == "cl100k" or not path.exists():
            continue
        _child(_LOAD_CHILD, "fastbpe", path, "first", env=env)   # byte code written
        best = {}
        for _ in range(rounds):   # alternating, so load on the machine hits both alike
            for which, first in (("hf", "load"), ("fastbpe", "load"), ("fastbpe", "first")):
                t = float(_child(_LOAD_CHILD, which, path, first, env=env))
                best[which, first] = min(best.get((which, first), t), t)
        hf, ours = best["hf", "load"], best["fastbpe", "load"]
        print(f"| {label} | {hf:.3f} | {ours:.3f} | {best['fastbpe', 'first']:.3f} | {ours / hf:.2f}x |")


def rate_of(n: int):
    def rate(fn, clock=time.process_time, repeat=1) -> float:
        """MB/s of ``fn`` by CPU time (a machine shared with other jobs stalls the wall
        clock, not the CPU clock; one thread, so CPU time is its time), best of
        ``repeat``; batches on threads pass the wall clock."""
        best = float("inf")
        for _ in range(repeat):
            t = clock()
            fn()
            best = min(best, clock() - t)
        return n / best / 1e6
    return rate


def where(rel: str) -> None:
    """Where one file's time goes (see the module docstring)."""
    from fastbpe import _pretokenize as P
    from fastbpe.bpe.hf import _isolated_regexes

    docs = corpus()
    data = [d.encode("utf-8", "surrogatepass") for d in docs]
    rate = rate_of(sum(map(len, data)))
    print(f"{len(docs)} documents, {sum(map(len, data)) / 1e6:.2f} MB; MB/s, CPU time, best of 3")
    cl100k = fastbpe.get_encoding("cl100k_base")
    [cl100k.encode_ordinary(d) for d in docs]
    print(f"cl100k_base: split {rate(lambda: [P.split_offsets(b, 'cl100k') for b in data], repeat=3):6.1f}"
          f"  encode_ordinary {rate(lambda: [cl100k.encode_ordinary(d) for d in docs], repeat=3):6.1f}")
    enc = fastbpe.load(VOCAB / rel)
    pattern = _isolated_regexes(enc.pipeline.pre_tokenizer)
    if pattern is None or P.pattern_id(pattern, gaps=True) < 0:
        print(f"{rel}: its pre-tokenizer has no native split program")
        return
    split = rate(lambda: [P.split_offsets(b, pattern, gaps=True) for b in data], repeat=3)
    offsets = [P.split_offsets(b, pattern, gaps=True) for b in data]
    core = enc._core_bpe
    if enc.engine == "rank":
        native = getattr(core, "_native", core)
        [native.encode_ordinary(d) for d in docs]
        merged = rate(lambda: [native.encode_ordinary(d) for d in docs], repeat=3)
    else:
        words = core._native_words.encode_split
        [words(b, o, None) for b, o in zip(data, offsets)]
        merged = rate(lambda: [words(b, o, None) for b, o in zip(data, offsets)], repeat=3)
        merged = 1 / (1 / merged + 1 / split)
    [enc.encode_ordinary(d) for d in docs]
    total = rate(lambda: [enc.encode_ordinary(d) for d in docs], repeat=3)
    print(f"{rel} (engine {enc.engine}): split {split:6.1f}  split+merge {merged:6.1f}"
          f"  encode_ordinary {total:6.1f}")
    if enc.engine == "rank":   # the same file on the pipeline engine, for before/after
        pipe = HFEncoding(enc.name, enc.pipeline, engine="pipeline")
        [pipe.encode_ordinary(d) for d in docs]
        print(f"  on the pipeline engine: encode_ordinary "
              f"{rate(lambda: [pipe.encode_ordinary(d) for d in docs], repeat=3):6.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--speed", action="store_true", help="only the per-model speed loop (fresh processes)")
    ap.add_argument("--load", action="store_true", help="only the load times (fresh processes)")
    ap.add_argument("--models", nargs="+", choices=sorted(MODELS | LOAD_ONLY),
                    help="--speed: default all but gpt2 and tekken; --load: default all")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--where", metavar="FILE", help="where one file's time goes (a path under the vocabulary folder)")
    ap.add_argument("--checkout", type=Path, default=ROOT, help="the fastbpe checkout --speed/--load time")
    args = ap.parse_args()
    global CHECKOUT
    CHECKOUT = args.checkout.resolve()
    if args.where:
        where(args.where)
        return
    if args.speed or args.load:
        if args.speed:
            speed(args.models or list(MODELS), args.rounds)
        if args.load:
            load_times(args.models or list(MODELS) + list(LOAD_ONLY), args.rounds)
        return
    docs = corpus()
    n = sum(len(d.encode()) for d in docs)
    print(f"{len(docs)} documents, {n / 1e6:.2f} MB")

    rate = rate_of(n)

    cl100k = fastbpe.get_encoding("cl100k_base")
    [cl100k.encode_ordinary(d) for d in docs]
    own = rate(lambda: [cl100k.encode_ordinary(d) for d in docs], repeat=3)
    print(f"fastbpe cl100k_base on the same text (warm): {own:.1f} MB/s", flush=True)
    for name, rel in FILES:
        if not (VOCAB / rel).exists():
            print(f"{name}: {VOCAB / rel} not found, skipped")
            continue
        t = time.perf_counter()
        enc = fastbpe.load(VOCAB / rel)
        load = time.perf_counter() - t
        cold = rate(lambda: [enc.encode_ordinary(d) for d in docs])
        warm = rate(lambda: [enc.encode_ordinary(d) for d in docs], repeat=3)
        batch2 = rate(lambda: enc.encode_ordinary_batch(docs, num_threads=2), clock=time.perf_counter, repeat=3)
        line = (f"{name:28s} engine={getattr(enc, 'engine', 'rank'):8s} load {load:5.2f}s  "
                f"fastbpe cold {cold:6.1f} warm {warm:6.1f} batch2 {batch2:6.1f} MB/s")
        if getattr(enc, "engine", None) == "rank" and rel.endswith("tokenizer.json"):
            pipe = HFEncoding(enc.name, enc.pipeline, engine="pipeline")
            [pipe.encode_ordinary(d) for d in docs]
            line += f" pipe warm {rate(lambda: [pipe.encode_ordinary(d) for d in docs], repeat=2):6.1f}"
        if rel.endswith("tokenizer.json"):
            t = time.perf_counter()
            hf = tokenizers.Tokenizer.from_file(str(VOCAB / rel))
            hf_load = time.perf_counter() - t
            hf.encode_special_tokens = True
            assert [hf.encode(d, add_special_tokens=False).ids for d in docs[:50]] == [enc.encode_ordinary(d) for d in docs[:50]]
            per_doc = rate(lambda: [hf.encode(d, add_special_tokens=False).ids for d in docs])
            batch = rate(lambda: hf.encode_batch(docs, add_special_tokens=False), clock=time.perf_counter)
            line += f" | HF load {hf_load:4.2f}s per-doc {per_doc:5.1f} batch {batch:5.1f} MB/s"
            if gigatoken is not None:
                try:
                    giga = gigatoken.Tokenizer(str(VOCAB / rel))
                except Exception as e:  # noqa: BLE001 - a peer that refuses the file is reported
                    giga = None
                    line += f" | gigatoken refuses ({str(e).splitlines()[0][:40]})"
                if giga is None:
                    pass
                elif [list(giga.encode(d)) for d in docs[:50]] == [enc.encode_ordinary(d) for d in docs[:50]]:
                    [giga.encode(d) for d in docs]
                    line += f" | gigatoken warm {rate(lambda: [giga.encode(d) for d in docs], repeat=3):6.1f} MB/s"
                else:
                    line += " | gigatoken ids differ"
            line += f" | warm/HF {warm / per_doc:4.1f}x warm/cl100k {warm / own:4.2f}x"
        print(line, flush=True)


if __name__ == "__main__":
    main()
