"""One corpus through every entry point (issue 23): the same documents give the same
tokens in ``count``, ``stats``, ``encode --shards``, ``write_shards``, ``encode_files``
(here and on Dask), and the same counts and merges in training, whatever the source kind
(text under each rule, JSON Lines, Parquet, compressed) and however long a document is."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import pytest

import fastbpe
from fastbpe import corpus as fcorpus
from fastbpe import shards, stats
from fastbpe.io import Corpus
from fastbpe.reference import bpe as ref
from fastbpe.reference import documents as spec
from fastbpe.reference import patterns

PROSE = "The quick brown fox jumps over the lazy dog.\n\ndef f(x):\n    return x + 1\n\n"
LONG = ("Ein langer Absatz ohne Ende, " * 40 + "\n") * 2500   # ~3 MB: read in exact pieces


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    """A folder: a long text file, a gzip text file, a zstd JSONL file, a Parquet file."""
    d = tmp_path_factory.mktemp("pipeline")
    (d / "a-long.txt").write_text(LONG, encoding="utf-8")
    (d / "b.txt.gz").write_bytes(gzip.compress((PROSE * 30 + "çok güzel 中文\n").encode()))
    rows = [PROSE[i:] + f" row {i}" for i in range(len(PROSE))] + ["", "  indented\n\n\n"]
    jsonl = "".join(json.dumps({"text": r, "n": i}, ensure_ascii=i % 2 == 0) + "\n" for i, r in enumerate(rows))
    try:
        import zstandard

        (d / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(jsonl.encode()))
    except ImportError:
        (d / "c.jsonl").write_text(jsonl, encoding="utf-8")
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"text": rows[::-1]}), d / "d.parquet", row_group_size=7)
    except ImportError:
        pass
    return d


def expected_documents(d) -> list[str]:
    """The corpus's documents by the specification, read the obvious way."""
    docs = spec.split_documents(LONG, "file") + spec.split_documents(PROSE * 30 + "çok güzel 中文\n", "file")
    rows = [PROSE[i:] + f" row {i}" for i in range(len(PROSE))] + ["", "  indented\n\n\n"]
    docs += [r for r in rows if r]
    if (d / "d.parquet").exists():
        docs += [r for r in rows[::-1] if r]
    return docs


@pytest.fixture(scope="module")
def enc():
    return fastbpe.get_encoding("gpt2")


def _stream(enc, docs) -> list[int]:
    eot = enc.eot_token
    return [t for doc in docs for t in enc.encode_ordinary(doc) + [eot]]


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(fastbpe.__file__)))
    # from outside the source tree: an unbuilt fastbpe/ in the cwd must not shadow the one under test
    proc = subprocess.run([sys.executable, "-m", "fastbpe", *args], capture_output=True, text=True, env=env,
                          cwd=tempfile.gettempdir(), timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_documents_are_the_specifications(corpus_dir):
    assert list(Corpus.resolve(corpus_dir).documents()) == expected_documents(corpus_dir)


def test_every_encoding_entry_point_gives_the_same_tokens(corpus_dir, enc, tmp_path):
    docs = expected_documents(corpus_dir)
    want = _stream(enc, docs)
    n_text = len(want) - len(docs)
    corpus = Corpus.resolve(corpus_dir)
    # the long document really came in pieces
    assert any(b.last_open for b in corpus.blocks(cut=fcorpus.cutter(enc)))
    # count and stats (no EOT: text tokens)
    assert fcorpus.count_corpus(enc, corpus)["tokens"] == n_text
    assert fcorpus.count_corpus(enc, corpus)["documents"] == len(docs)
    table = stats.file_stats({"gpt2": enc}, [str(corpus_dir)])
    assert table[str(corpus_dir)]["gpt2"].tokens == n_text
    out = _cli("count", "-t", "gpt2", "-q", str(corpus_dir))
    assert int(out.split()[0].replace(",", "")) == n_text
    # shards: the library writer, encode_files (this process, 1 and 2 threads), the CLI
    tasks = Corpus.resolve(corpus_dir).plan(n_parts=3, min_bytes=1)
    shards.write_shards(enc, tasks, tmp_path / "w", progress=False)
    assert shards.open(tmp_path / "w").read().tolist() == want
    for threads in (1, 2):
        fastbpe.encode_files([corpus_dir], enc, tmp_path / f"e{threads}", num_threads=threads, progress=False)
        assert shards.open(tmp_path / f"e{threads}").read().tolist() == want
    _cli("encode", "-t", "gpt2", "-q", str(corpus_dir), "--shards", str(tmp_path / "cli"))
    s = shards.open(tmp_path / "cli")
    assert s.read().tolist() == want and s.documents == len(docs)
    assert s.doc(0).tolist() == enc.encode_ordinary(docs[0]) + [enc.eot_token]
    # the same bytes whichever writer made them (names and manifests aside)
    for other in ("w", "e1"):
        assert [t.tobytes() for t, _ in shards.open(tmp_path / other)] != [] and \
            np.concatenate([t for t, _ in shards.open(tmp_path / other)]).tobytes() == s.read().tobytes()


def test_dask_writes_the_same_shards(corpus_dir, enc, tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        fastbpe.encode_files([corpus_dir], enc, tmp_path / "dask", client=client, progress=False)
        counts = fastbpe.distributed.count_chunks_distributed(client, [corpus_dir], patterns.GPT2, [])
    assert shards.open(tmp_path / "dask").read().tolist() == _stream(enc, expected_documents(corpus_dir))
    assert counts == ref.count_chunks(expected_documents(corpus_dir), patterns.GPT2)


def test_training_counts_chunks_within_documents(corpus_dir):
    docs = expected_documents(corpus_dir)
    from fastbpe.bpe import counting

    want = ref.count_chunks(docs, patterns.CL100K)
    assert counting.count_chunks(corpus_dir, "cl100k", num_threads=2) == want
    assert counting.count_chunks(documents=docs, pattern="cl100k", num_threads=2) == want
    assert b"\n\n" in want and b"   " in want     # newlines and indentation live inside documents
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        a = fastbpe.train_bpe(corpus_dir, 400, progress=False)
        b = fastbpe.train_bpe(documents=docs, vocab_size=400, progress=False)
    assert a.mergeable_ranks == b.mergeable_ranks
    wa = fastbpe.train_wordpiece(corpus_dir, 300)
    wb = fastbpe.train_wordpiece(documents=docs, vocab_size=300)
    assert wa.vocab == wb.vocab
