"""The special-token scan alone (``_specials.find_special``), by token set and text.

    python benchmarks/bench_find_special.py [--bytes 400000] [--repeat 5] [--module M [--path DIR]]

Sets: tiktoken's (cl100k_base's 5 special tokens, one shared first pair "<|"), DeepSeek
V4's 53 non-special added tokens (first bytes "<" and 0xEF: what its encode_ordinary
scans in every document) and its 1,230 special tokens (the default disallowed check of
``encode``), read from ../shared/vocab (or $FASTBPE_TEST_VOCAB_DIR; skipped when absent).
Texts: benchmarks/corpus.py's English, Python source and Chinese, and HTML (pydoc's pages
of a few standard-library modules: a "<" every few bytes). Each cell: GB/s of repeated
passes of the scan over the text (the matches found are skipped as encoding does), CPU
time, best of --repeat. ``--module``/``--path``: another build's module with a
``_TestSet`` class (a before/after on the same text).
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import pydoc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if any((ROOT / "fastbpe").glob("_encode*.so")) and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))   # a checkout built in place; never an unbuilt tree
sys.path.insert(0, str(ROOT / "benchmarks"))

from corpus import corpus  # noqa: E402

VOCAB = Path(os.environ.get("FASTBPE_TEST_VOCAB_DIR", ROOT.parent / "shared" / "vocab"))


def html(n: int) -> str:
    """pydoc's HTML of standard-library modules, up to n characters."""
    doc = pydoc.HTMLDoc()
    out, size = [], 0
    for name in ("collections", "json", "email", "argparse", "pathlib", "typing", "logging"):
        m = importlib.import_module(name)
        page = doc.page(m.__name__, doc.document(m))
        out.append(page)
        size += len(page)
        if size >= n:
            break
    return "".join(out)[:n]


def token_sets() -> dict[str, list[bytes]]:
    import fastbpe

    sets = {"tiktoken (cl100k, 5)": [t.encode() for t in fastbpe.get_encoding("cl100k_base").special_tokens_set]}
    path = VOCAB / "deepseek-v4" / "tokenizer.json"
    if path.exists():
        added = json.loads(path.read_text(encoding="utf-8"))["added_tokens"]
        sets["DeepSeek V4 added (53)"] = [a["content"].encode() for a in added if not a["special"]]
        sets["DeepSeek V4 special (1230)"] = [a["content"].encode() for a in added if a["special"]]
    else:
        print(f"({path} is absent: DeepSeek's sets skipped)")
    return sets


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bytes", type=int, default=400_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--module", default="fastbpe._specials")
    ap.add_argument("--path", help="a folder to import --module from")
    args = ap.parse_args()
    if args.path:
        sys.path.insert(0, args.path)
    TestSet = importlib.import_module(args.module)._TestSet
    texts = {lang: corpus(lang)[:args.bytes].encode() for lang in ("english", "python", "chinese")}
    texts["html"] = html(args.bytes).encode()
    print(f"{args.module}: find_special GB/s (1 core, CPU time, best of {args.repeat})")
    print("| set | " + " | ".join(texts) + " |")
    print("|---|" + "---|" * len(texts))
    for name, tokens in token_sets().items():
        ts = TestSet(tokens)
        cells = []
        for text in texts.values():
            passes = max(1, 40_000_000 // len(text))
            best = float("inf")
            for _ in range(args.repeat):
                t = time.process_time()
                ts.count_passes(text, passes)
                best = min(best, time.process_time() - t)
            cells.append(f"{len(text) * passes / best / 1e9:.2f}")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
