"""Throughput of the native pre-tokenizers against regex.findall.

Script (prints a MB/s table)::

    python benchmarks/bench_pretokenize.py [--no-regex]

pytest-benchmark::

    python -m pytest benchmarks/bench_pretokenize.py --benchmark-only

Corpora come from the running Python's standard library, so nothing is downloaded:
ASCII-heavy source (stdlib *.py files), English prose (pydoc topics) and CJK text
(test/cjkencodings/*-utf8.txt), each repeated to a few MB.
"""
from __future__ import annotations

import ast
import sys
import sysconfig
import time
from pathlib import Path

import regex

from fastbpe import _pretokenize as P
from fastbpe.reference import patterns as R

LIB = Path(sysconfig.get_paths()["stdlib"])
PATTERNS = {"gpt2": R.GPT2, "cl100k": R.CL100K, "o200k": R.O200K}


def _repeat_to(text: str, n_bytes: int) -> str:
    if not text:
        return text
    return text * (n_bytes // len(text.encode()) + 1)


def corpora(n_bytes: int = 4_000_000) -> dict[str, str]:
    source = []
    size = 0
    for path in sorted(LIB.glob("*.py")):
        source.append(path.read_text(encoding="utf-8", errors="replace"))
        size += len(source[-1])
        if size > n_bytes:
            break
    out = {"stdlib-py": "".join(source)}
    topics = LIB / "pydoc_data" / "topics.py"
    if topics.exists():
        table = ast.literal_eval(topics.read_text(encoding="utf-8").split("=", 1)[1])
        out["english"] = _repeat_to("\n".join(table.values()), n_bytes)
    cjk = "".join(p.read_text(encoding="utf-8")
                  for p in sorted((LIB / "test" / "cjkencodings").glob("*-utf8.txt")))
    if cjk:
        out["cjk"] = _repeat_to(cjk, n_bytes // 2)
    return out


def _best_seconds(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str]) -> None:
    with_regex = "--no-regex" not in argv
    for cname, text in corpora().items():
        data = text.encode("utf-8")
        mb = len(data) / 1e6
        for pname, pid in [("gpt2", P.SPLIT_GPT2), ("cl100k", P.SPLIT_CL100K),
                           ("o200k", P.SPLIT_O200K)]:
            kernel = _best_seconds(lambda: P._count_chunks(data, pid), 20)
            offsets = _best_seconds(lambda: P.split_offsets(data, pname), 5)
            line = (f"{cname:10s} {mb:5.2f} MB {pname:7s} kernel {mb / kernel:7.1f} MB/s  "
                    f"split_offsets {mb / offsets:7.1f} MB/s")
            if with_regex:
                compiled = regex.compile(PATTERNS[pname])
                slow = _best_seconds(lambda: compiled.findall(text), 1)
                line += f"  regex.findall {mb / slow:5.1f} MB/s  ({slow / kernel:4.0f}x)"
            print(line, flush=True)


# ---- pytest-benchmark -----------------------------------------------------------------

try:
    import pytest
except ImportError:  # pragma: no cover
    pytest = None

if pytest is not None:
    _CORPORA = None

    def _data(name: str) -> bytes:
        global _CORPORA
        if _CORPORA is None:
            _CORPORA = {k: v.encode() for k, v in corpora(2_000_000).items()}
        if name not in _CORPORA:
            pytest.skip(f"corpus {name} not available in this Python install")
        return _CORPORA[name]

    @pytest.mark.parametrize("corpus", ["stdlib-py", "english", "cjk"])
    @pytest.mark.parametrize("pattern", ["gpt2", "cl100k", "o200k"])
    def test_native_kernel(benchmark, corpus, pattern):
        data = _data(corpus)
        benchmark.extra_info["MB"] = len(data) / 1e6
        benchmark(P._count_chunks, data, P.pattern_id(pattern))


if __name__ == "__main__":
    main(sys.argv[1:])
