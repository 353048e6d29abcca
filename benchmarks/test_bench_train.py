"""pytest-benchmark: BPE training, fastbpe vs rustbpe vs HF tokenizers, same documents.

Quick check (tiny corpus, no timing):
    python -m pytest benchmarks/test_bench_train.py --benchmark-disable -q
Timed (FASTBPE_BENCH_MB sets the corpus size, default 8 MB):
    FASTBPE_BENCH_MB=50 python -m pytest benchmarks/test_bench_train.py -q
The full side-by-side report with peak RSS is benchmarks/train_report.py.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("train_report", Path(__file__).with_name("train_report.py"))
report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)

VOCAB = int(os.environ.get("FASTBPE_BENCH_VOCAB", "4000"))
THREADS = int(os.environ.get("FASTBPE_BENCH_THREADS", "2"))


@pytest.fixture(scope="module")
def corpus(request):
    disabled = request.config.getoption("benchmark_disable", default=False)
    size_mb = 0.25 if disabled else float(os.environ.get("FASTBPE_BENCH_MB", "8"))
    return str(report.corpus(size_mb))


@pytest.mark.parametrize("trainer", ["fastbpe", "rustbpe", "hf"])
def test_train(benchmark, corpus, trainer):
    if trainer == "rustbpe":
        pytest.importorskip("rustbpe")
    if trainer == "hf":
        pytest.importorskip("tokenizers")
    result = benchmark.pedantic(report.TRAINERS[trainer], args=(corpus, VOCAB, THREADS),
                                rounds=1, iterations=1)
    assert result["vocab"] <= VOCAB


def test_fastbpe_phases_match_train_bpe(corpus):
    """The benchmarked path is the public one, and gives the same tokens as the phases."""
    import fastbpe
    from fastbpe import _train
    from fastbpe.bpe import counting

    enc = fastbpe.train_bpe(corpus, 600, num_threads=THREADS, progress=False)
    table = counting.count_chunk_table(corpus, "cl100k", num_threads=1)
    _, vocab = _train.train_merges(table, 600)
    assert enc.mergeable_ranks == {tok: i for i, tok in enumerate(vocab)}
