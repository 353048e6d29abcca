"""pytest-benchmark: fastbpe's native encoder vs tiktoken, one thread, per vocab x corpus.

    python -m pytest benchmarks/test_bench_encode.py --benchmark-group-by=param:vocab,param:lang
    python -m pytest benchmarks/test_bench_encode.py --benchmark-disable   # quick smoke run

Each case encodes a whole corpus (benchmarks/corpus.py says where the text comes from)
as one string with ``encode_ordinary``; the batch cases encode ~2 KB documents with
``encode_ordinary_batch`` on 1 and 2 threads; the decode cases decode lists of ids
with ``decode`` and ``decode_batch``. For a side-by-side ratio table (CPU time,
robust to a busy machine) run ``python benchmarks/encode_ratios.py``.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from corpus import LANGUAGES, corpus, documents  # noqa: E402

VOCABS = ("gpt2", "cl100k_base", "o200k_base")

_BUILT: dict = {}


def _pair(name, vocab_file):
    """(fastbpe core, tiktoken) on ``name``'s ranks: the shared folder's file, else the
    copy fastbpe ships (``vocab_file``, as the tests find vocabularies)."""
    pytest.importorskip("tiktoken")
    if name not in _BUILT:
        from encode_ratios import build

        _BUILT[name] = build(name, path=vocab_file(f"{name}.tiktoken"))
    return _BUILT[name]


def _run(benchmark, fn, core=None):
    # A few rounds of a multi-megabyte input are plenty; calibration would take minutes.
    # fastbpe's chunk caches are dropped before each round (untimed): the same text
    # again would otherwise find every word already merged.
    setup = getattr(core, "_clear_chunk_caches", None)
    return benchmark.pedantic(fn, setup=setup, rounds=3, iterations=1, warmup_rounds=1)


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("impl", ["fastbpe", "tiktoken"])
def test_encode_ordinary(benchmark, impl, vocab, lang, vocab_file):
    core, tk = _pair(vocab, vocab_file)
    text = corpus(lang)
    benchmark.group = f"encode_ordinary {vocab} {lang}"
    benchmark.extra_info["mb"] = len(text.encode()) / 1e6
    fn = core.encode_ordinary if impl == "fastbpe" else tk.encode_ordinary
    ids = _run(benchmark, lambda: fn(text), core if impl == "fastbpe" else None)
    assert len(ids) > 0


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("lang", ["english", "chinese"])
def test_encode_batch(benchmark, threads, lang, vocab_file):
    core, _ = _pair("cl100k_base", vocab_file)
    docs = documents(lang, 2000)
    benchmark.group = f"encode_ordinary_batch cl100k_base {lang}"
    out = _run(benchmark, lambda: core.encode_ordinary_batch(docs, threads), core)
    assert len(out) == len(docs)


@pytest.mark.parametrize("call", ["decode", "decode_batch"])
@pytest.mark.parametrize("impl", ["fastbpe", "tiktoken"])
def test_decode(benchmark, impl, call, vocab_file):
    """Decoding Python lists of ids (what encode returns) through the public classes:
    one list of the English corpus, or one per ~2 KB document."""
    _, tk = _pair("o200k_base", vocab_file)
    if "enc" not in _BUILT:
        from encode_ratios import build

        _BUILT["enc"] = build("o200k_base", encoding=True, path=vocab_file("o200k_base.tiktoken"))[0]
    enc = _BUILT["enc"] if impl == "fastbpe" else tk
    benchmark.group = f"{call} o200k_base english"
    if call == "decode":
        ids = tk.encode_ordinary(corpus("english"))
        out = _run(benchmark, lambda: enc.decode(ids))
    else:
        batch = tk.encode_ordinary_batch(documents("english", 2000))
        out = _run(benchmark, lambda: enc.decode_batch(batch))
    assert len(out) > 0


def test_ab_encode_arguments(tmp_path):
    """ab_encode.py (the A/B script) parses its cases and refuses an unbuilt checkout."""
    from ab_encode import parse_cases

    assert parse_cases("o200k_base:turkish,gpt2:python") == [
        ("o200k_base", "turkish"), ("gpt2", "python")]
    with pytest.raises(SystemExit, match="'gpt2'"):
        parse_cases("gpt2")
    proc = subprocess.run([sys.executable, str(HERE / "ab_encode.py"), str(tmp_path),
                           str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "not built in place" in proc.stderr
