"""What the thread's chunk cache misses, simulated: the chunks of ~2 KB documents that
reach the cache, after the warm half three times, then counted over the timed half.

    python benchmarks/chunk_cache_sim.py [--vocab cl100k_base] [--kind english ...]
        [--lines 8192] [--policy direct second-chance]

A chunk reaches the cache when it is 2-24 bytes long and not a 2-byte token (the encoder
answers the others from small tables). A miss is a whole-token lookup in the vocabulary
or a merge; "first seen" merges are chunks the stream never had before, which no cache
can hold. Policies: ``direct`` (today: a miss always takes the line) and
``second-chance`` (a hit sets a bit; a miss on a line with the bit set clears it and
leaves the line). The index is Python's hash of the bytes, not the encoder's: the
counts are those of any well-mixed hash. No timing: for time, see ``ab_duel.py``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import corpus as corpus_mod  # noqa: E402
import encode_peers  # noqa: E402


def cache_chunks(docs, pattern, ranks):
    from fastbpe._pretokenize import split_offsets
    out = []
    for d in docs:
        b = d.encode()
        a = 0
        for e in split_offsets(b, pattern).tolist():
            c = b[a:e]
            a = e
            if 2 <= len(c) <= 24 and not (len(c) == 2 and c in ranks):
                out.append(c)
    return out


def simulate(warm, timed, ranks, lines, policy):
    keys = [None] * lines
    ref = [False] * lines
    seen = set()
    misses = {"token": 0, "merge": 0, "merge, first seen": 0}

    def probe(c):
        i = hash(c) & (lines - 1)
        if keys[i] == c:
            ref[i] = True
            return True
        if policy == "second-chance" and ref[i]:
            ref[i] = False
        else:
            keys[i], ref[i] = c, False
        return False

    for _ in range(3):
        for c in warm:
            probe(c)
            seen.add(c)
    for c in timed:
        if not probe(c):
            if c in ranks:
                misses["token"] += 1
            else:
                misses["merge"] += 1
                misses["merge, first seen"] += c not in seen
        seen.add(c)
    return {k: v / len(timed) for k, v in misses.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", default="cl100k_base", choices=encode_peers.VOCABS)
    ap.add_argument("--kind", nargs="*", default=["english", "turkish", "python"],
                    choices=encode_peers.KINDS)
    ap.add_argument("--mb", type=float, default=2.0)
    ap.add_argument("--lines", type=int, default=8192, help="a power of two")
    ap.add_argument("--policy", nargs="*", default=["direct", "second-chance"],
                    choices=["direct", "second-chance"])
    args = ap.parse_args(argv)
    if args.lines < 1 or args.lines & (args.lines - 1):
        ap.error("--lines must be a power of two")
    from tiktoken.load import load_tiktoken_bpe
    ranks = load_tiktoken_bpe(str(encode_peers.VOCAB_DIR / f"{args.vocab}.tiktoken"))
    print("| kind | policy | probes | token misses | merges | merges first seen |")
    print("|---|---|---|---|---|---|")
    for kind in args.kind:
        text = encode_peers.kind_text(kind, int(args.mb * 1e6), encode_peers.default_kernel_dir())
        if not text:
            print(f"no text for {kind}; skipped", file=sys.stderr)
            continue
        docs = corpus_mod.cut(text)
        warm = cache_chunks(docs[: len(docs) // 2], args.vocab, ranks)
        timed = cache_chunks(docs[len(docs) // 2:], args.vocab, ranks)
        for policy in args.policy:
            m = simulate(warm, timed, ranks, args.lines, policy)
            print(f"| {kind} | {policy} | {len(timed)} | {m['token']:.1%} | {m['merge']:.1%} "
                  f"| {m['merge, first seen']:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
