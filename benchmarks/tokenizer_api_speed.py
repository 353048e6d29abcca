"""``fastbpe.Tokenizer`` (HF ``tokenizers.Tokenizer``'s API) against HF on the same files:
``encode`` per document and ``encode_batch``, reading ``.ids`` only and reading
``.ids`` + ``.tokens`` + ``.offsets`` (fastbpe makes the last two when first read; HF
converts them from Rust when read). Ids, tokens and offsets are compared on every
document first. CPU time (``process_time``), best of ``--repeat``, one process.

    FASTBPE_TEST_VOCAB_DIR=../shared/vocab python benchmarks/tokenizer_api_speed.py
    python benchmarks/tokenizer_api_speed.py --files path/to/tokenizer.json --kinds english
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import corpus  # noqa: E402

import fastbpe  # noqa: E402

DEFAULT = ["llama-3.2/tokenizer.json", "qwen3/tokenizer.json", "bert-base-uncased/tokenizer.json"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", nargs="*", help="tokenizer.json files (default: three under $FASTBPE_TEST_VOCAB_DIR)")
    ap.add_argument("--kinds", nargs="*", default=["english", "chinese"])
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    import tokenizers

    files = args.files or [str(Path(os.environ.get("FASTBPE_TEST_VOCAB_DIR", "../shared/vocab")) / f) for f in DEFAULT]
    print(f"{'file':<28} {'kind':<8} {'mode':<14} {'fastbpe MB/s':>12} {'HF MB/s':>8} {'ratio':>6}")
    for path in files:
        ours, hf = fastbpe.Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)
        for kind in args.kinds:
            docs = corpus.documents(kind)[:args.docs]
            size = sum(len(d.encode("utf-8")) for d in docs)
            for a, b in zip(ours.encode_batch(docs), hf.encode_batch(docs)):
                if a.ids != b.ids or a.tokens != b.tokens or a.offsets != b.offsets:
                    print(f"{path}: {kind}: fastbpe differs from HF: no timing", file=sys.stderr)
                    return 1
            for mode, read in (("ids", lambda e: e.ids), ("ids+offsets", lambda e: (e.ids, e.tokens, e.offsets))):
                rates = []
                for tok in (ours, hf):
                    best = float("inf")
                    for _ in range(args.repeat):
                        t = time.process_time()
                        for d in docs:
                            read(tok.encode(d))
                        best = min(best, time.process_time() - t)
                    rates.append(size / best / 1e6)
                name = Path(path).parent.name if Path(path).name == "tokenizer.json" else Path(path).stem
                print(f"{name[:28]:<28} {kind:<8} {mode:<14} {rates[0]:>12.1f} {rates[1]:>8.1f} {rates[0] / rates[1]:>5.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
