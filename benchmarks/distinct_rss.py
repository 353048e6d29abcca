"""Memory and speed of one encoder over a stream of text it never saw before.

    python benchmarks/distinct_rss.py fastbpe|gigatoken [--vocab cl100k_base] [--mb 64]
        [--kind words|english|...] [--doc 2000]

One library per process, so that its RSS is its own: build the tokenizer, then encode
``--mb`` MB of ~``--doc``-byte documents one call each (fastbpe ``encode_to_numpy``,
gigatoken ``Tokenizer.encode``) and print one JSON line: MB/s (process CPU time), the
RSS after loading and at the end (``VmRSS``), and the peak (``VmHWM``).

``words`` (the default) is made-up high-entropy words (random lower-case letters,
3-12 per word, a space before each), generated as the stream goes, so that every
document is new and a table that admits every chunk seen grows with the input;
issue 41's "20.7 MB of high-entropy words raised gigatoken's RSS from 45 to 228 MB" is
this kind. The other kinds repeat the corpora of ``benchmarks/corpus.py`` as many
times as ``--mb`` needs (so they are distinct only up to the corpus's size).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if any((ROOT / "fastbpe").glob("_encode*.so")) and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

VOCAB_DIR = Path(os.environ.get("FASTBPE_TEST_VOCAB_DIR", ROOT.parent / "shared" / "vocab"))


def rss_mb(field: str) -> float:
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def word_docs(mb: float, size: int, seed: int = 41):
    """Documents of made-up words, generated lazily (~size bytes each)."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    made = 0
    while made < mb * 1e6:
        parts, n = [], 0
        while n < size:
            w = " " + "".join(rng.choices(letters, k=rng.randint(3, 12)))
            parts.append(w)
            n += len(w)
        made += n
        yield "".join(parts)


def corpus_docs(kind: str, mb: float, size: int):
    from corpus import documents

    docs = documents(kind, size)
    made = 0
    while made < mb * 1e6:
        for d in docs:
            made += len(d.encode())
            yield d
            if made >= mb * 1e6:
                return


def build(lib: str, vocab: str):
    path = VOCAB_DIR / f"{vocab}.tiktoken"
    if lib == "fastbpe":
        import fastbpe

        enc = fastbpe.get_encoding(vocab)
        return lambda d: enc.encode_to_numpy(d), fastbpe.__file__
    import gigatoken

    from encode_peers import SPECIALS

    pre = {"gpt2": "gpt2", "cl100k_base": "gpt4", "o200k_base": "o200k"}[vocab]
    tok = gigatoken.Tokenizer.from_tiktoken(str(path), pretokenizer=pre,
                                            special_tokens=SPECIALS[vocab])
    return lambda d: tok.encode(d), gigatoken.__file__


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lib", choices=["fastbpe", "gigatoken"])
    ap.add_argument("--vocab", default="cl100k_base")
    ap.add_argument("--mb", type=float, default=64.0)
    ap.add_argument("--kind", default="words")
    ap.add_argument("--doc", type=int, default=2000)
    args = ap.parse_args()
    encode, where = build(args.lib, args.vocab)
    encode("warm up the call path")
    rss_loaded = rss_mb("VmRSS")
    docs = (word_docs(args.mb, args.doc) if args.kind == "words"
            else corpus_docs(args.kind, args.mb, args.doc))
    total = 0
    cpu = 0.0
    for d in docs:
        t = time.process_time()
        encode(d)
        cpu += time.process_time() - t
        total += len(d.encode())
    print(json.dumps({"lib": args.lib, "from": where, "vocab": args.vocab, "kind": args.kind,
                      "mb": round(total / 1e6, 1), "mb_per_s": round(total / 1e6 / cpu, 1),
                      "rss_loaded_mb": round(rss_loaded, 1), "rss_end_mb": round(rss_mb("VmRSS"), 1),
                      "rss_peak_mb": round(rss_mb("VmHWM"), 1)}))


if __name__ == "__main__":
    main()
