"""What share of the encode is the split, and where windows stop (issue 41, item 4).

    python benchmarks/split_share.py [--vocab gpt2 ...] [--kind english ...] [--mb 2]
        [--repeat 5]

Per vocabulary x text kind (``encode_peers.kind_text``, ~2 KB documents): the split
alone (``_pretokenize._count_chunks`` over the whole text, windows on, best of
``--repeat``), the whole ``encode_to_numpy`` per document, steady (a tokenizer that
has encoded the same documents once, best of ``--repeat``), both in ns per chunk, the
split's share of the encode, and the chunks the windows left to the scalar splitter
(``_pretokenize._win_stats``). Process CPU time; one core.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import encode_peers as ep  # noqa: E402
from corpus import cut  # noqa: E402
from fastbpe import _pretokenize as P  # noqa: E402

SHORT = {"gpt2": "gpt2", "cl100k_base": "cl100k", "o200k_base": "o200k"}


def best(fn, repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        out.append(time.process_time() - t)
    return min(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", nargs="*", default=list(ep.VOCABS), choices=ep.VOCABS)
    ap.add_argument("--kind", nargs="*", default=["english", "turkish", "chinese", "python"])
    ap.add_argument("--mb", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    texts = {k: ep.kind_text(k, int(args.mb * 1e6), None) for k in args.kind}
    print("| vocab | kind | chunks | split ns/chunk | encode ns/chunk | split share | scalar chunks |")
    print("|---|---|---|---|---|---|---|")
    for vocab in args.vocab:
        peers = ep.Peers(vocab)
        pat = SHORT[vocab]
        for kind, text in texts.items():
            data = text.encode()
            docs = cut(text)
            chunks, scalar = P._win_stats(data, pat)
            split = best(lambda: P._count_chunks(data, P.pattern_id(pat)), args.repeat)
            enc = peers.fresh_fastbpe()
            for d in docs:
                enc.encode_to_numpy(d)
            whole = best(lambda: [enc.encode_to_numpy(d) for d in docs], args.repeat)
            print(f"| {pat} | {kind} | {chunks} | {split / chunks * 1e9:.1f} | "
                  f"{whole / chunks * 1e9:.1f} | {split / whole:.0%} | {scalar / chunks:.1%} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
