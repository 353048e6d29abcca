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
import sys
import sysconfig
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


def corpus_docs() -> list[str]:
    stdlib = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:120]
    text = "".join(p.read_text(encoding="utf-8", errors="replace") for p in stdlib)
    docs = [text[i:i + 2000] for i in range(0, min(len(text), 1_600_000), 2000)]
    multi = "\n".join(documents(400))
    docs += [multi[i:i + 2000] for i in range(0, len(multi), 2000)]
    return docs


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

    docs = corpus_docs()
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
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--where", metavar="FILE", help="where one file's time goes (a path under the vocabulary folder)")
    args = ap.parse_args()
    if args.where:
        where(args.where)
        return
    docs = corpus_docs()
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
