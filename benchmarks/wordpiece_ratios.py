"""WordPiece speed table: fastbpe vs HF ``tokenizers`` on BERT, single thread, one process.

    python benchmarks/wordpiece_ratios.py [--repeat 5] [--lines 2000]

BERT users encode sentences, so per-call overhead matters as much as the kernel. Rows:

- ``line``: one ``encode`` call per single line of 40-80 characters ([CLS]/[SEP] added),
  ``WordPiece.encode(line)`` vs ``Tokenizer.encode(line).ids``; with the tokenizer.json
  sections off (``no_truncation``/``no_padding``, ``truncation=None, padding=None``) and
  with the file as shipped (bert-base-uncased pads and truncates to 128).
- ``batch``: ``encode_batch`` of all those lines, ``num_threads=1`` vs HF's
  ``encode_batch`` with ``RAYON_NUM_THREADS=1`` and ``TOKENIZERS_PARALLELISM=false``.
- ``500 chars``: one call per ~500-character document; ``1 MB``: one call on 1 MB of text.

Times are CPU time of the calling thread (``time.thread_time``), best of ``--repeat``
runs, the two libraries timed alternately; ids are checked identical before timing. The
ratio is HF's time over fastbpe's. English text from benchmarks/corpus.py; the vocabulary
from ../shared/vocab (or $FASTBPE_TEST_VOCAB_DIR).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if any((ROOT / "fastbpe").glob("_wordpiece*.so")) and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))   # a checkout built in place is what is measured
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ["TOKENIZERS_PARALLELISM"] = "false"   # before tokenizers is imported
os.environ["RAYON_NUM_THREADS"] = "1"

from corpus import corpus, short_lines  # noqa: E402

VOCAB_DIR = Path(os.environ.get("FASTBPE_TEST_VOCAB_DIR", ROOT.parent / "shared" / "vocab"))


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t0)
    return best


def race(ours, theirs, repeat: int) -> tuple[float, float]:
    """Best CPU times of the two callables, timed alternately."""
    a = b = float("inf")
    for _ in range(repeat):
        a = min(a, best_of(ours, 1))
        b = min(b, best_of(theirs, 1))
    return a, b


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--lines", type=int, default=2000)
    args = p.parse_args(argv)

    from tokenizers import Tokenizer

    from fastbpe.wordpiece import WordPiece

    path = VOCAB_DIR / "bert-base-uncased" / "tokenizer.json"
    if not path.exists():
        print(f"{path} not found (../shared/vocab beside the project, or FASTBPE_TEST_VOCAB_DIR)")
        return 1
    shipped_hf, shipped = Tokenizer.from_file(str(path)), WordPiece.from_file(path)
    bare_hf = Tokenizer.from_file(str(path))
    bare_hf.no_truncation()
    bare_hf.no_padding()
    bare = WordPiece.from_file(path, truncation=None, padding=None)

    text = corpus("english")
    lines = short_lines(text, args.lines)
    docs = [text[i:i + 500] for i in range(0, 500 * 1000, 500)]
    big = text[:1_000_000]
    rows = []

    def per_call(wp, hf, items):
        assert [wp.encode(t) for t in items] == [hf.encode(t).ids for t in items], "ids differ"
        return race(lambda: [wp.encode(t) for t in items], lambda: [hf.encode(t).ids for t in items], args.repeat)

    a, b = per_call(bare, bare_hf, lines)
    rows.append(("line, encode", len(lines), a, b))
    a, b = per_call(shipped, shipped_hf, lines)
    rows.append(("line, encode, file's 128 padding", len(lines), a, b))
    for name, wp, hf in (("line, encode_batch", bare, bare_hf),
                         ("line, encode_batch, file's padding", shipped, shipped_hf)):
        assert wp.encode_batch(lines, num_threads=1) == [e.ids for e in hf.encode_batch(lines)], "ids differ"
        a, b = race(lambda: wp.encode_batch(lines, num_threads=1),
                    lambda: [e.ids for e in hf.encode_batch(lines)], args.repeat)
        rows.append((name, len(lines), a, b))
    a, b = per_call(bare, bare_hf, docs)
    rows.append(("500 chars, encode", len(docs), a, b))
    a, b = per_call(bare, bare_hf, [big])
    rows.append(("1 MB, encode", 1, a, b))

    print(f"WordPiece bert-base-uncased, single thread, best of {args.repeat} (CPU time)")
    print(f"{'case':36} {'calls':>6} {'fastbpe us/call':>16} {'HF us/call':>11} {'ratio':>7}")
    for name, n, a, b in rows:
        print(f"{name:36} {n:6d} {a / n * 1e6:16.2f} {b / n * 1e6:11.2f} {b / a:6.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
