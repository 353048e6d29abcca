"""A/B of two builds of ``fastbpe._spm`` on ``spm_peers.py --long``'s lines, in one process.

    python benchmarks/spm_long_ab.py OLD_SO [--model PATH] [--kind uncut|random] [--rounds 6]

OLD_SO is a copy of an earlier build's ``_spm*.so`` (e.g. main's, copied aside before
rebuilding; ``spm_ab.py`` loads it); NEW is this checkout's ``fastbpe._spm``. Each round
builds a fresh ``SpmCore`` of each build (who goes first alternating) and times, in
process CPU time, 1 MB of the line (best of 2) and then the 10 MB line once, as
``spm_peers.py --long`` does with a fresh tokenizer, so a long text's scratch is
allocated and faulted in inside the timing. Ids are compared first (300k characters).
The lines are ``spm_peers.long_lines``' (built once, ~15 s, kept in a pickle under
the system's temporary directory).
"""
from __future__ import annotations

import argparse
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
if any((HERE.parent / "fastbpe").glob("_encode*.so")) and str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))   # a checkout built in place; never an unbuilt tree

from spm_ab import load_old  # noqa: E402
from spm_peers import long_lines  # noqa: E402

from fastbpe import _spm as new_spm  # noqa: E402
from fastbpe.formats.sentencepiece_model import read_model  # noqa: E402
from fastbpe.reference.sentencepiece import build_tables  # noqa: E402

VOCAB_DIR = Path(os.environ.get("FASTBPE_TEST_VOCAB_DIR", HERE.parent.parent / "shared" / "vocab"))


def lines_of(path: Path) -> dict[str, str]:
    """``long_lines(path)``, from a pickle beside the temporary files once made."""
    cache = Path(tempfile.gettempdir()) / f"fastbpe_long_lines_{path.name}.pkl"
    if cache.exists():
        return pickle.loads(cache.read_bytes())
    lines = long_lines(path)
    cache.write_bytes(pickle.dumps(lines))
    return lines


def timed(core, text: str) -> tuple[float, float]:
    """CPU seconds of 1 MB of text (best of 2) and of all of it (once)."""
    clock = time.process_time
    one = float("inf")
    for _ in range(2):
        t = clock()
        core.encode(text[:1_000_000])
        one = min(one, clock() - t)
    t = clock()
    core.encode(text)
    return one, clock() - t


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old_so")
    p.add_argument("--model", type=Path, default=VOCAB_DIR / "mistral" / "tokenizer.model.v1")
    p.add_argument("--kind", choices=["uncut", "random"], default="uncut")
    p.add_argument("--rounds", type=int, default=6)
    args = p.parse_args(argv)
    text = lines_of(args.model)[args.kind]
    tables = build_tables(read_model(args.model), args.model)
    modules = {"new": new_spm, "old": load_old(args.old_so)}
    head = text[:300_000]
    assert modules["new"].SpmCore(tables).encode(head) == modules["old"].SpmCore(tables).encode(head)
    for rnd in range(args.rounds):
        for name in (["new", "old"] if rnd % 2 == 0 else ["old", "new"]):
            one, ten = timed(modules[name].SpmCore(tables), text)
            print(f"round {rnd} {name}: 1 MB {one:.3f} s, 10 MB {ten:.3f} s, ratio {ten / one:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
