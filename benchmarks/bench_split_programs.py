"""Split programs against the hand-written splitters of the same family, same text.

    python benchmarks/bench_split_programs.py [--bytes 2000000] [--repeat 3]

Two tables, one core:

- split: MB/s of the pre-tokenizer alone (``_pretokenize._count_chunks``, CPU time of
  this thread, best of --repeat) for cl100k (hand-written) vs Llama 3's pattern (a program: cl100k's
  semantics, another string), Qwen's and DeepSeek's three Splits (one sequence program), and
  o200k (hand-written) vs Tekken's (program);
- encode: ``Encoding.encode_ordinary`` once per ~2 KB document (CPU time of this
  thread, chunk caches dropped before each pass), cl100k's ranks with cl100k's pattern
  vs with Llama 3's, and o200k's ranks with o200k's pattern vs with Tekken's; the ratio
  is the program's speed over the built-in's (the issue's target: >= 0.9). Ids are
  checked equal to tiktoken's (same ranks and pattern) first.

Corpora: benchmarks/corpus.py. Vocabularies: ../shared/vocab (or $FASTBPE_TEST_VOCAB_DIR).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from corpus import LANGUAGES, corpus  # noqa: E402

import fastbpe  # noqa: E402
from fastbpe import _pretokenize as P  # noqa: E402
from fastbpe.reference import patterns as R  # noqa: E402

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")
TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
          r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
          r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
#: DeepSeek V3/V4's three Isolated Splits in a Sequence: one sequence program
DEEPSEEK = (r"\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
            "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
            "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+")
#: (family, built-in pattern, [(name, program pattern)]); only the first program of a
#: family is timed in the encode table
FAMILIES = [("cl100k", R.CL100K, [("llama3", LLAMA3), ("qwen", QWEN), ("deepseek", DEEPSEEK)]),
            ("o200k", R.O200K, [("tekken", TEKKEN)])]
VOCAB = Path(os.environ.get("FASTBPE_TEST_VOCAB_DIR", ROOT.parent / "shared" / "vocab"))


def split_rate(data: bytes, pattern: str, repeat: int) -> float:
    pid = P.pattern_id(pattern)
    best = float("inf")
    for _ in range(repeat):
        t = time.thread_time()
        P._count_chunks(data, pid, 1)
        best = min(best, time.thread_time() - t)
    return len(data) / best / 1e6


def encoding(family: str, pattern: str):
    import tiktoken.load
    ranks = tiktoken.load.load_tiktoken_bpe(str(VOCAB / f"{family}_base.tiktoken"))
    return fastbpe.Encoding(f"{family}-bench", pat_str=pattern, mergeable_ranks=ranks,
                            special_tokens={}), ranks


def encode_rate(enc, docs: list[str], repeat: int) -> float:
    core = enc._core_bpe
    best = float("inf")
    for _ in range(repeat):
        getattr(core, "_clear_chunk_caches", lambda: None)()
        t = time.thread_time()
        for d in docs:
            enc.encode_ordinary(d)
        best = min(best, time.thread_time() - t)
    return sum(len(d.encode()) for d in docs) / best / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bytes", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--lang", nargs="*", default=list(LANGUAGES))
    args = ap.parse_args()
    import tiktoken
    texts = {lang: corpus(lang)[:args.bytes] for lang in args.lang}
    print("split MB/s (1 core)")
    for family, builtin, programs in FAMILIES:
        for lang, text in texts.items():
            data = text.encode()
            base = split_rate(data, builtin, args.repeat)
            cells = [f"{family} {base:6.1f}"]
            for name, pat in programs:
                r = split_rate(data, pat, args.repeat)
                cells.append(f"{name} {r:6.1f} ({r / base:.2f}x)")
            print(f"  {lang:8s} " + " | ".join(cells))
    print("encode_ordinary per ~2 KB document, MB/s (1 core)")
    for family, builtin, programs in FAMILIES:
        base_enc, ranks = encoding(family, builtin)
        for name, pat in programs[:1]:
            enc, _ = encoding(family, pat)
            assert enc._split_engine == "program", enc._split_engine
            ref = tiktoken.Encoding(name, pat_str=pat, mergeable_ranks=ranks, special_tokens={})
            for lang, text in texts.items():
                docs = [text[i:i + 2000] for i in range(0, len(text), 2000)]
                assert all(enc.encode_ordinary(d) == ref.encode_ordinary(d) for d in docs[:300])
                a = encode_rate(base_enc, docs, args.repeat)
                b = encode_rate(enc, docs, args.repeat)
                print(f"  {lang:8s} {family} {a:6.1f} | {name} {b:6.1f} ({b / a:.2f}x)")


if __name__ == "__main__":
    main()
