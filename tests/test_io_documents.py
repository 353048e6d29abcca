"""fastbpe.io's streaming readers against reference.documents (the specification):
every rule, every source kind, every block size, cuts, tasks, bad input."""
from __future__ import annotations

import gzip
import json
import lzma
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe import io as fio
from fastbpe.io import BPECut, Corpus, WordPieceCut
from fastbpe.reference import documents as spec

ALPHABET = ["a", "b", "Z", " ", "\n", "\t", "\r", "<|e|>", "é", "中", "'", ".", "1", "\n\n", " \n", "aa", "😀"]
RULES = ["file", "lines", "blank-line", "sep:<|e|>", "sep:aa", "sep:\n", "sep:é"]
texts = st.lists(st.sampled_from(ALPHABET), max_size=40).map("".join)


def _write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def _documents(blocks) -> list[str]:
    """Whole documents from blocks, pieces joined; checks the block invariants."""
    docs, pending = [], []
    for b in blocks:
        assert len(b.ends) and b.ends[-1] == len(b.data)
        assert (np.diff(b.ends, prepend=0) > 0).all(), "pieces are never empty"
        pieces = b.pieces()
        for k, piece in enumerate(pieces):
            pending.append(piece)
            if not (b.last_open and k == len(pieces) - 1):
                docs.append("".join(pending))
                pending = []
    assert not pending, "the last block is never open"
    return docs


def _cut_positions_ok(blocks, rule_check):
    """Every cut (a piece boundary inside a document) satisfies the rule."""
    doc, cuts = b"", []
    for b in blocks:
        for k, piece in enumerate(b.piece_bytes()):
            if doc:
                cuts.append(len(doc))
            doc += piece
            if not (b.last_open and k == len(b.ends) - 1):
                assert all(rule_check(doc, i) for i in cuts), (doc, cuts)
                doc, cuts = b"", []


@settings(max_examples=300, deadline=None)
@given(text=texts, rule=st.sampled_from(RULES), block=st.integers(1, 16),
       cut=st.sampled_from([None, "bpe", "bpe-special", "wordpiece"]))
def test_text_file_streams_like_the_reference(tmp_path_factory, text, rule, block, cut):
    path = _write(tmp_path_factory.mktemp("t"), "x.txt", text.encode())
    cutter = {None: None, "bpe": BPECut(), "bpe-special": BPECut(["<|e|>"]), "wordpiece": WordPieceCut()}[cut]
    blocks = list(Corpus.resolve(path, docs=rule).sources[0].blocks(cut=cutter, block_bytes=block))
    assert _documents(blocks) == spec.split_documents(text, rule)
    if cut is not None:
        check = {"bpe": spec.bpe_cut, "wordpiece": spec.wordpiece_cut,
                 "bpe-special": lambda b, i: spec.bpe_cut(b, i, [b"<|e|>"])}[cut]
        _cut_positions_ok(blocks, check)


@settings(max_examples=100, deadline=None)
@given(text=texts, rule=st.sampled_from(["lines", "blank-line", "sep:<|e|>", "sep:\n"]),
       n=st.integers(1, 6))
def test_tasks_concatenate_to_the_corpus(tmp_path_factory, text, rule, n):
    path = _write(tmp_path_factory.mktemp("t"), "x.txt", text.encode())
    corpus = Corpus.resolve(path, docs=rule)
    tasks = corpus.plan(n_parts=n, min_bytes=1)
    got = [d for t in tasks for d in _documents(t.blocks(block_bytes=5))]
    assert got == spec.split_documents(text, rule)
    if len(tasks) > 1:
        assert [t.start for t in tasks][0] == 0 and tasks[-1].end is None


def test_self_overlapping_separator_is_one_task(tmp_path):
    path = _write(tmp_path, "x.txt", b"xaaay" * 1000)
    assert len(Corpus.resolve(path, docs="sep:aa").plan(n_parts=4, min_bytes=1)) == 1


@pytest.mark.parametrize("compress", ["gzip", "xz", "zstd", None])
def test_compressed_files_read_by_magic(tmp_path, compress):
    text = "doc one\n\ndoc two\n" * 50
    data = text.encode()
    if compress == "gzip":
        data = gzip.compress(data)
    elif compress == "xz":
        data = lzma.compress(data)
    elif compress == "zstd":
        zstd = pytest.importorskip("zstandard")
        data = zstd.ZstdCompressor().compress(data)
    path = _write(tmp_path, "corpus.bin", data)   # no telling name
    assert list(Corpus.resolve(path, docs="blank-line").documents()) == spec.split_documents(text, "blank-line")


def test_corrupt_gzip_names_the_file(tmp_path):
    data = gzip.compress(b"hello world\n" * 1000)
    path = _write(tmp_path, "bad.txt.gz", data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"bad\.txt\.gz: corrupt or truncated gzip data"):
        list(Corpus.resolve(path).documents())


def test_invalid_utf8_names_file_and_offset(tmp_path):
    path = _write(tmp_path, "bad.txt", b"ok line\nbad \xff byte\n")
    with pytest.raises(ValueError, match=r"bad\.txt: not valid UTF-8 at byte offset 12"):
        list(Corpus.resolve(path, docs="lines").documents())
    assert list(Corpus.resolve(path, docs="lines").documents(errors="replace")) == ["ok line", "bad \ufffd byte"]
    with pytest.raises(ValueError, match="errors must be one of"):
        list(Corpus.resolve(path).blocks(errors="ignore"))


def test_invalid_utf8_offset_is_absolute_across_blocks(tmp_path):
    path = _write(tmp_path, "bad.txt", b"a\n" * 5000 + b"\xc3(")
    with pytest.raises(ValueError, match="byte offset 10000"):
        list(Corpus.resolve(path, docs="lines").sources[0].blocks(block_bytes=64))


def test_long_document_without_cut_is_an_error_not_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(fio.documents, "MAX_DOCUMENT_BYTES", 1000)
    path = _write(tmp_path, "one.txt", ("中" * 2000).encode())
    with pytest.raises(ValueError, match=r"one\.txt: the document at byte offset 0 is longer than 1000"):
        list(Corpus.resolve(path).sources[0].blocks(cut=BPECut(), block_bytes=100))
    prose = _write(tmp_path, "prose.txt", b"word " * 10000)
    blocks = list(Corpus.resolve(prose).sources[0].blocks(cut=BPECut(), block_bytes=100))
    assert max(len(b.data) for b in blocks) < 400 and _documents(blocks) == [prose.read_text()]


def test_blank_line_run_longer_than_a_block(tmp_path):
    text = "first\n" + "\n \n" * 5000 + "second"
    path = _write(tmp_path, "p.txt", text.encode())
    blocks = list(Corpus.resolve(path, docs="blank-line").sources[0].blocks(block_bytes=64))
    assert _documents(blocks) == ["first", "second"] == spec.split_documents(text, "blank-line")
    assert max(len(b.data) for b in blocks) < 100


# --------------------------------------------------------------------------- JSON Lines
def test_jsonl_documents(tmp_path):
    rows = [{"text": "a\nb", "id": 1}, {"text": ""}, {"id": 2, "text": "é 中 😀"}, {"text": "x", "meta": {"text": 5}}]
    data = "\n".join(json.dumps(r, ensure_ascii=i % 2 == 0) for i, r in enumerate(rows)) + "\n\n"
    for name, raw in (("c.jsonl", data.encode()), ("c.jsonl.gz", gzip.compress(data.encode()))):
        path = _write(tmp_path, name, raw)
        assert list(Corpus.resolve(path).documents()) == ["a\nb", "é 中 😀", "x"]
    path = _write(tmp_path, "f.jsonl", b'{"body": "z"}\n')
    assert list(Corpus.resolve(path, field="body").documents()) == ["z"]


@pytest.mark.parametrize("line, message", [
    (b'{"text": "ok"}\n{"text": 5}\n', r"c\.jsonl, line 2: field 'text' is int, not a string"),
    (b'{"text": "ok"}\n\n{"other": 1}\n', r"c\.jsonl, line 3: no field 'text'"),
    (b'{"text": "ok"\n', r"c\.jsonl, line 1: not valid JSON"),
    (b'[1, 2]\n', r"c\.jsonl, line 1: not a JSON object"),
    (b'{"text": "\xff"}\n', r"c\.jsonl, line 1: not valid UTF-8"),
])
def test_jsonl_bad_input_names_line(tmp_path, line, message):
    path = _write(tmp_path, "c.jsonl", line)
    with pytest.raises(ValueError, match=message):
        list(Corpus.resolve(path).documents())


def test_jsonl_lone_surrogate_follows_tiktoken(tmp_path):
    path = _write(tmp_path, "c.jsonl", b'{"text": "a\\ud800b"}\n')
    assert list(Corpus.resolve(path).documents()) == ["a\ufffdb"]


def test_jsonl_ranges(tmp_path):
    rows = [json.dumps({"text": f"doc {i} " * (i % 7 + 1)}) for i in range(3000)]
    path = _write(tmp_path, "c.jsonl", ("\n".join(rows) + "\n").encode())
    corpus = Corpus.resolve(path)
    tasks = corpus.plan(n_parts=5, min_bytes=1)
    assert len(tasks) == 5
    assert [d for t in tasks for d in _documents(t.blocks(block_bytes=1000))] == list(corpus.documents())


# --------------------------------------------------------------------------- Parquet
def test_parquet_column_by_row_group(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    texts = [f"row {i} " * (i % 5) for i in range(1000)]
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": list(range(1000)), "content": texts}), path, row_group_size=128)
    corpus = Corpus.resolve(path, column="content")
    assert list(corpus.documents()) == [t for t in texts if t]
    tasks = corpus.plan(n_parts=3)
    assert len(tasks) == 3
    assert [d for t in tasks for d in _documents(t.blocks())] == [t for t in texts if t]
    with pytest.raises(ValueError, match=r"c\.parquet: no column 'text'"):
        list(Corpus.resolve(path).documents())
    with pytest.raises(ValueError, match="column 'id' is int64, not strings"):
        list(Corpus.resolve(path, column="id").documents())
    pq.write_table(pa.table({"text": ["a", None]}), tmp_path / "n.parquet")
    with pytest.raises(ValueError, match=r"n\.parquet: row 1: column 'text' is null"):
        list(Corpus.resolve(tmp_path / "n.parquet").documents())


# --------------------------------------------------------------------------- iterables, URLs
def test_iterables_and_dataset_like():
    assert list(Corpus.resolve(documents=iter(["a", "", "b\ud800"])).documents()) == ["a", "b\ufffd"]

    class FakeDataset:   # the part of datasets.Dataset / IterableDataset we use
        column_names = ["text", "id"]

        def iter(self, batch_size):
            yield {"text": ["x", "y"], "id": [1, 2]}
            yield {"text": ["z"], "id": [3]}

    assert list(Corpus.resolve(documents=FakeDataset(), column="text").documents()) == ["x", "y", "z"]
    with pytest.raises(TypeError, match="documents item 1 is int"):
        list(Corpus.resolve(documents=["a", 5]).documents())
    with pytest.raises(TypeError, match="pass column='text'"):
        list(Corpus.resolve(documents=[{"text": "a"}]).documents())


def test_fsspec_memory_urls():
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    fs.pipe("/fastbpe-test/a.txt", b"one\ntwo\n")
    fs.pipe("/fastbpe-test/b.jsonl.gz", gzip.compress(b'{"text": "three"}\n'))
    corpus = Corpus.resolve(["memory://fastbpe-test/a.txt", "memory://fastbpe-test/b.jsonl.gz"], docs="lines")
    assert list(corpus.documents()) == ["one", "two", "three"]
    with pytest.raises(FileNotFoundError, match="memory://fastbpe-test/nope.txt"):
        Corpus.resolve("memory://fastbpe-test/nope.txt").plan()


def test_resolve_checks(tmp_path):
    txt = _write(tmp_path, "a.txt", b"x")
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        Corpus.resolve(tmp_path / "nope.txt")
    with pytest.raises(ValueError, match="unknown document rule 'para'"):
        Corpus.resolve(txt, docs="para")
    with pytest.raises(ValueError, match="field='body' applies to JSON Lines"):
        Corpus.resolve(txt, field="body")
    with pytest.raises(ValueError, match="column='c' applies to Parquet"):
        Corpus.resolve(txt, column="c")
    with pytest.raises(TypeError, match="not both"):
        Corpus.resolve(txt, ["a"])
    with pytest.raises(TypeError, match="wrap it in a list"):
        Corpus.resolve(documents="text")
    if os.path.exists("/dev/null"):
        with pytest.raises(ValueError, match="character device"):
            Corpus.resolve("/dev/null")


def test_directory_files_sorted(tmp_path):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    _write(tmp_path, "d/b.txt", b"B")
    _write(tmp_path, "d/sub/a.txt", b"A")
    _write(tmp_path, "d/.hidden", b"H")
    assert list(Corpus.resolve(tmp_path / "d").documents()) == ["B", "A"]


def test_small_files_coalesce_into_blocks(tmp_path):
    paths = [_write(tmp_path, f"f{i:03d}.txt", f"file {i}".encode()) for i in range(300)]
    blocks = list(Corpus.resolve(paths).blocks(block_bytes=1000))
    assert len(blocks) < 10 and _documents(blocks) == [f"file {i}" for i in range(300)]
    assert blocks[0].where(3) == f"{paths[3]}: byte 0"


def test_prefetch_keeps_order_errors_and_stops():
    from fastbpe.io.documents import prefetch

    blocks = list(Corpus.resolve(documents=[f"doc {i}" for i in range(5000)]).blocks(block_bytes=100))
    assert [b.pieces() for b in prefetch(iter(blocks))] == [b.pieces() for b in blocks]

    def failing():
        yield blocks[0]
        raise ValueError("x.txt: broken at byte 7")

    with pytest.raises(ValueError, match="broken at byte 7"):
        list(prefetch(failing()))
    it = prefetch(iter(blocks))
    next(it)
    it.close()   # the reader thread stops; nothing hangs


@settings(max_examples=300, deadline=None)
@given(data=st.lists(st.sampled_from([b"a", b"b", b"\n", b"|", b"||", b"\xc3\xa9"]), max_size=60).map(b"".join),
       sep=st.sampled_from([None, b"|", b"||", b"a|"]), join_max=st.sampled_from([0, 1, 4096]))
def test_split_part_packs_like_split(data, sep, join_max):
    """Both packers of ``_nonempty`` (joined slices, byte mask) drop exactly the
    separators and the empty documents."""
    from fastbpe.io import documents as docs_mod

    kind = "lines" if sep is None else "sep"
    saved, docs_mod.JOIN_MAX_SPANS = docs_mod.JOIN_MAX_SPANS, join_max
    try:
        packed, ends = docs_mod.split_part(data, kind, sep)
    finally:
        docs_mod.JOIN_MAX_SPANS = saved
    parts = [p for p in data.split(sep or b"\n") if p]
    assert packed == b"".join(parts)
    assert ends.dtype == np.int64
    assert ends.tolist() == np.cumsum([len(p) for p in parts], dtype=np.int64).tolist()
