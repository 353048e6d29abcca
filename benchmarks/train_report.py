"""Training benchmark report: fastbpe vs rustbpe vs HF tokenizers, side by side.

    python benchmarks/train_report.py                 # 250 MB corpus, vocab 32000, 2 threads
    python benchmarks/train_report.py --size-mb 20    # quicker
    python benchmarks/train_report.py --linearity     # also fastbpe on a 4x corpus and on
                                                      # the 1x corpus with its lines shuffled

Each trainer runs in its own subprocess (a fresh "measure" process that starts the
trainer as its only child and reads ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``),
so peak RSS is per trainer. All get the same documents (each line of the corpus file),
the cl100k split pattern, the same vocab size and the same number of threads.

The corpus is built from text on this machine, repeated and shuffled (by line) to size:
* English: plain-text files of /usr/share/doc (README, changelogs, copyright; .gz
  decompressed), lines that decode as UTF-8;
* Turkish and Chinese: the translated messages (msgstr) of the gettext catalogs
  /usr/share/locale/{tr,zh_CN}/LC_MESSAGES/*.mo, read with Python's gettext module, plus
  CPython's test/cjkencodings/*-utf8.txt samples (Chinese, Japanese, Korean);
* code: the .py files of the Python standard library.
Weights: 40% English, 15% Turkish, 15% CJK, 30% code (by bytes).
"""
from __future__ import annotations

import argparse
import gettext
import glob
import gzip
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A checkout built in place (python setup.py build_ext --inplace) is measured; an unbuilt
# source tree must not shadow the installed package (nor reach Dask's spawned workers).
if any((ROOT / "fastbpe").glob("_encode*.so")) and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(ROOT / "benchmarks") not in sys.path:   # train_corpus, beside this file
    sys.path.insert(0, str(ROOT / "benchmarks"))
STDLIB = Path(os.__file__).parent
CACHE = Path(os.environ.get("FASTBPE_BENCH_DIR", "/tmp/fastbpe_bench"))
CL100K = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
WEIGHTS = {"english": 0.40, "turkish": 0.15, "cjk": 0.15, "code": 0.30}


# ----------------------------------------------------------------------------- corpus
def _lines_of(data: bytes) -> list[str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return []
    if "\x00" in text:
        return []
    return [ln + "\n" for ln in text.split("\n") if ln.strip()]


def _english(limit: int) -> list[str]:
    out, total = [], 0
    for path in sorted(glob.glob("/usr/share/doc/**/*", recursive=True)):
        p = Path(path)
        if not p.is_file() or p.suffix in (".html", ".png", ".svg", ".pdf", ".js", ".css"):
            continue
        try:
            data = p.read_bytes()
            if p.suffix == ".gz":
                data = gzip.decompress(data)
        except Exception:
            continue
        lines = _lines_of(data)
        out += lines
        total += sum(len(x) for x in lines)
        if total >= limit:
            break
    return out


def _catalog(lang: str) -> list[str]:
    out = []
    for path in sorted(glob.glob(f"/usr/share/locale/{lang}/LC_MESSAGES/*.mo")):
        try:
            with open(path, "rb") as fh:
                cat = gettext.GNUTranslations(fh)
        except Exception:
            continue
        for key, val in cat._catalog.items():
            if key and isinstance(val, str) and val.strip():
                out += [ln + "\n" for ln in val.split("\n") if ln.strip()]
    return out


def _cjk() -> list[str]:
    out = _catalog("zh_CN")
    for path in sorted(glob.glob(str(STDLIB / "test" / "cjkencodings" / "*-utf8.txt"))):
        out += _lines_of(Path(path).read_bytes())
    return out


def _code(limit: int) -> list[str]:
    out, total = [], 0
    for path in sorted(STDLIB.rglob("*.py")):
        if "site-packages" in path.parts:
            continue
        lines = _lines_of(path.read_bytes())
        out += lines
        total += sum(len(x) for x in lines)
        if total >= limit:
            break
    return out


def source_lines() -> dict[str, list[str]]:
    return {
        "english": _english(60 << 20),
        "turkish": _catalog("tr"),
        "cjk": _cjk(),
        "code": _code(60 << 20),
    }


def build_corpus(path: Path, size_bytes: int, seed: int = 0, sources=None) -> Path:
    """Write a corpus of about size_bytes UTF-8 bytes (whole lines) to path, reproducibly."""
    if path.exists() and path.stat().st_size >= size_bytes:
        return path
    sources = sources or source_lines()
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    written = {k: 0 for k in sources}
    total = 0
    with open(tmp, "wb") as fh:
        while total < size_bytes:
            # the source furthest below its share writes the next batch of lines
            kind = min(WEIGHTS, key=lambda k: written[k] / WEIGHTS[k])
            lines = sources[kind]
            start = rng.randrange(len(lines))
            batch = "".join(lines[(start + i) % len(lines)] for i in range(2000)).encode()
            fh.write(batch)
            written[kind] += len(batch)
            total += len(batch)
    os.replace(tmp, path)
    return path


def corpus(size_mb: float, copies: int = 1) -> Path:
    """The benchmark corpus of size_mb MB; with copies=k, a corpus k times as large built
    the same way (same sources, weights and batching), for the linearity check."""
    if copies == 1:
        return build_corpus(CACHE / f"corpus_{size_mb:g}mb.txt", int(size_mb * (1 << 20)))
    return build_corpus(CACHE / f"corpus_{size_mb:g}mb_x{copies}b.txt", int(copies * size_mb * (1 << 20)))


def shuffled(path: Path) -> Path:
    """The same lines in random order (worst case for cache locality while counting)."""
    out = path.with_name(path.stem + "_shuffled.txt")
    if not out.exists():
        with open(path, "rb") as fh:
            lines = fh.readlines()
        random.Random(0).shuffle(lines)
        tmp = out.with_suffix(".part")
        with open(tmp, "wb") as fh:
            fh.writelines(lines)
        os.replace(tmp, out)
    return out


# ----------------------------------------------------------------------------- trainers
def run_fastbpe(path: str, vocab_size: int, threads: int) -> dict:
    """fastbpe.train_bpe end to end; its two phases timed by wrapping the native calls."""
    import fastbpe
    from train_corpus import timed_phases

    with timed_phases({}) as info:
        enc = fastbpe.train_bpe(path, vocab_size, pattern="cl100k", num_threads=threads, progress=False)
    info["vocab"] = enc.n_vocab
    return info


def run_rustbpe(path: str, vocab_size: int, threads: int) -> dict:
    import rustbpe

    tok = rustbpe.Tokenizer()
    with open(path, encoding="utf-8") as fh:
        tok.train_from_iterator(fh, vocab_size, pattern=CL100K)
    return {"vocab": tok.vocab_size}


def run_hf(path: str, vocab_size: int, threads: int) -> dict:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(CL100K), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[],
    )
    tok.train([path], trainer)
    return {"vocab": tok.get_vocab_size()}


TRAINERS = {"fastbpe": run_fastbpe, "rustbpe": run_rustbpe, "hf": run_hf}


def _child(name: str, path: str, vocab_size: int, threads: int) -> None:
    """Innermost process: run one trainer, print its JSON result."""
    os.environ["RAYON_NUM_THREADS"] = str(threads)
    t0 = time.perf_counter()
    info = TRAINERS[name](path, vocab_size, threads)
    info["wall_s"] = time.perf_counter() - t0
    print(json.dumps(info))


def _measure(name: str, path: str, vocab_size: int, threads: int) -> None:
    """Middle process: start the trainer as its only child; report its peak RSS."""
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    proc = subprocess.run(
        [sys.executable, __file__, "--child", name, path, str(vocab_size), str(threads)],
        capture_output=True, text=True, env=env,
    )
    if proc.returncode != 0:
        print(json.dumps({"error": proc.stderr[-2000:]}))
        return
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    info["peak_rss_mb"] = usage.ru_maxrss / 1024
    info["cpu_s"] = usage.ru_utime + usage.ru_stime  # robust to a busy shared machine
    print(json.dumps(info))


def measure(name: str, path: Path, vocab_size: int, threads: int) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--measure", name, str(path), str(vocab_size), str(threads)],
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=float, default=250)
    ap.add_argument("--vocab-size", type=int, default=32000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--trainers", default="fastbpe,rustbpe,hf")
    ap.add_argument("--linearity", action="store_true", help="also fastbpe on the 4x corpus")
    args = ap.parse_args(argv)

    path = corpus(args.size_mb)
    mb = path.stat().st_size / 1e6
    print(f"corpus {path} ({mb:.1f} MB), vocab {args.vocab_size}, cl100k, {args.threads} threads,"
          f" {os.cpu_count()} cores")
    results = {}
    for name in args.trainers.split(","):
        r = results[name] = measure(name, path, args.vocab_size, args.threads)
        if "error" in r:
            print(f"{name:8s} FAILED: {r['error']}")
            continue
        line = (f"{name:8s} wall {r['wall_s']:8.2f} s  {mb / r['wall_s']:7.2f} MB/s  cpu {r['cpu_s']:7.2f} s"
                f"  peak RSS {r['peak_rss_mb']:8.1f} MB")
        if name == "fastbpe":
            line += (f"  | count {r['count_s']:.2f} s ({mb / r['count_s']:.1f} MB/s),"
                     f" merge {r['merge_s']:.2f} s, {r['unique_chunks']} unique chunks")
        print(line, flush=True)
    fb = results.get("fastbpe", {})
    for peer, need in (("rustbpe", 5), ("hf", 8)):
        r = results.get(peer, {})
        if "wall_s" in r and "wall_s" in fb:
            speed = r["wall_s"] / fb["wall_s"]
            mem = fb["peak_rss_mb"] / r["peak_rss_mb"]
            cpu = r["cpu_s"] / fb["cpu_s"]
            print(f"fastbpe vs {peer:8s}: {speed:5.2f}x faster wall, {cpu:5.2f}x less cpu (target >= {need}x: "
                  f"{'met' if speed >= need else 'NOT met'}), peak RSS {mem:.2f} of theirs "
                  f"(target <= 0.5: {'met' if mem <= 0.5 else 'NOT met'})")
    if args.linearity:
        path4 = corpus(args.size_mb, copies=4)
        for label, p in (("4x", path4), ("1x shuffled", shuffled(path))):
            r4 = measure("fastbpe", p, args.vocab_size, args.threads)
            mb4 = p.stat().st_size / 1e6
            print(f"fastbpe {label}: {mb4:.1f} MB wall {r4['wall_s']:.2f} s (count {r4['count_s']:.2f} s, "
                  f"{mb4 / r4['count_s']:.1f} MB/s; merge {r4['merge_s']:.2f} s), cpu {r4['cpu_s']:.2f} s, "
                  f"peak RSS {r4['peak_rss_mb']:.1f} MB; ratio to 1x: wall "
                  f"{r4['wall_s'] / fb.get('wall_s', float('nan')):.2f}, cpu "
                  f"{r4['cpu_s'] / fb.get('cpu_s', float('nan')):.2f}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif len(sys.argv) > 1 and sys.argv[1] == "--measure":
        _measure(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        main()
