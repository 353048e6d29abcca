"""fastbpe.distributed on a real 2-worker LocalCluster: counts, vocab and token shards
equal the single-machine results; a worker killed mid-shard loses and duplicates nothing."""
from __future__ import annotations

import gzip
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import fastbpe

distributed = pytest.importorskip("distributed")
pytest.importorskip("fsspec")
cloudpickle = pytest.importorskip("cloudpickle")

from fastbpe import shards  # noqa: E402
from fastbpe.bpe import counting  # noqa: E402
from fastbpe.trainers import bpe as train  # noqa: E402
from fastbpe.io import Corpus  # noqa: E402
from fastbpe import distributed as D  # noqa: E402
from fastbpe.bpe.encoding import Encoding  # noqa: E402
from fastbpe.reference import patterns  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPECIALS = ["<|endoftext|>"]

# The workers can't import this test module (pytest imports it by path), so classes
# defined here travel to them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])
sys.path.insert(0, str(Path(__file__).parent))
import io_stub  # noqa: E402

cloudpickle.register_pickle_by_value(io_stub)


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def client(tmp_path_factory):
    # Workers unpickle test helpers (functions, classes) nested in task arguments by
    # reference, as `tests.test_distributed.*`. Spawned workers start with this process's
    # sys.path, so put a folder holding only a `tests` link on it (at the end: it must
    # not shadow the installed fastbpe with the unbuilt source tree).
    link_dir = tmp_path_factory.mktemp("importable")
    (link_dir / "tests").symlink_to(ROOT / "tests", target_is_directory=True)
    sys.path.append(str(link_dir))
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()
        sys.path.remove(str(link_dir))


def _stdlib_text(name: str) -> str:
    import sysconfig

    return (Path(sysconfig.get_paths()["stdlib"]) / name).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[Path]:
    """Several files: plain ones (one without a final newline, one with special-token
    text, blank lines, non-ASCII, \\r), and one gzip."""
    d = tmp_path_factory.mktemp("corpus")
    a = d / "a.txt"
    a.write_text(_stdlib_text("textwrap.py")[:12000], encoding="utf-8")
    b = d / "b.txt"
    b.write_text("héllo wörld  \n\n\r\nline <|endoftext|> inside\n" * 40 + "日本語のテキスト\tend", encoding="utf-8")
    c = d / "c.txt.gz"
    with gzip.open(c, "wt", encoding="utf-8") as fh:
        fh.write(_stdlib_text("json/decoder.py")[:8000])
    e = d / "empty.txt"
    e.write_text("")
    f = d / "f.txt"
    f.write_text(_stdlib_text("shlex.py")[:9000], encoding="utf-8")
    return [a, b, c, e, f]


@pytest.fixture(scope="module")
def encoding(corpus) -> Encoding:
    return fastbpe.train_bpe(corpus, 300, special_tokens=SPECIALS, progress=False)


def _tmp_files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if "tmp" in p.name)


# ----------------------------------------------------------------------------- training
def _docs(paths, docs=None) -> list[str]:
    return list(Corpus.resolve(paths, docs=docs).documents())


def test_plan_tasks_cover_files_exactly(corpus):
    plan = D.plan_tasks(corpus, ranges_per_file=4, docs="lines")
    for p in corpus:
        cuts = [(t.start, t.end) for t in plan if t.source.path.name == p.name]
        assert cuts[0][0] == 0 and cuts[-1][1] is None
        assert all(x[1] == y[0] for x, y in zip(cuts, cuts[1:]))
        assert all(t.source.path.is_absolute() for t in plan)
    gz = [t for t in plan if t.source.path.suffix == ".gz"]
    assert len(gz) == 1  # a gzip file can't be entered in the middle
    assert len([t for t in plan if t.source.path.name == "a.txt"]) == 4
    assert len(D.plan_tasks(corpus, ranges_per_file=4)) == len(corpus)   # docs="file": a file is one task


@pytest.mark.parametrize("pattern", ["cl100k", "gpt2"])
def test_counts_equal_single_machine(client, corpus, pattern):
    pat = patterns.resolve_pattern(pattern)
    want = counting.count_documents(_docs(corpus, "lines"), pat, SPECIALS)
    got = D.count_chunks_distributed(client, corpus, pat, SPECIALS, ranges_per_file=3, split_every=2, docs="lines")
    assert got == want
    assert D.count_chunks_distributed(client, [str(p) for p in corpus], pat, SPECIALS, docs="lines") == want
    whole = counting.count_documents(_docs(corpus), pat, SPECIALS)
    assert D.count_chunks_distributed(client, corpus, pat, SPECIALS, ranges_per_file=3) == whole


def test_vocab_equals_train_bpe(client, corpus, encoding):
    pat = patterns.resolve_pattern("cl100k")
    counts = D.count_chunks_distributed(client, corpus, pat, SPECIALS, ranges_per_file=2)
    vocab = train.learn_merges(counts, 300 - len(SPECIALS))
    assert {tok: i for i, tok in enumerate(vocab)} == encoding.mergeable_ranks


def test_train_bpe_with_client_equals_one_machine(client, corpus, encoding):
    enc = fastbpe.train_bpe(corpus, 300, pattern="cl100k", special_tokens=SPECIALS, progress=False, client=client)
    local = fastbpe.train_bpe(corpus, 300, pattern="cl100k", special_tokens=SPECIALS, progress=False)
    assert enc.mergeable_ranks == local.mergeable_ranks and enc.special_tokens == local.special_tokens


def test_train_wordpiece_with_client_equals_one_machine(client, corpus):
    got = fastbpe.train_wordpiece(corpus, 400, client=client)
    assert got.vocab == fastbpe.train_wordpiece(corpus, 400).vocab


def test_fsspec_url_input(client, corpus):
    """file:// URLs go through the same path as local ones; memory:// through fsspec
    (the in-memory filesystem lives in the client process, so count it locally by
    running the task function directly)."""
    pat = patterns.resolve_pattern("cl100k")
    want = counting.count_documents(_docs(corpus, "lines"), pat, SPECIALS)
    urls = ["file://" + str(p) for p in corpus]
    assert D.count_chunks_distributed(client, urls, pat, SPECIALS, ranges_per_file=2, docs="lines") == want

    import fsspec

    fs = fsspec.filesystem("memory")
    plan_urls = []
    for p in corpus:
        fs.pipe(f"/fastbpe-test/{p.name}", p.read_bytes())
        plan_urls.append(f"memory://fastbpe-test/{p.name}")
    plan = D.plan_tasks(plan_urls, ranges_per_file=3, docs="lines")
    assert len(plan) > len(corpus)  # plain remote files are cut at line starts
    got = D.merge_counts(*(D._count_bpe_task(t, pat, SPECIALS, "strict") for t in plan))
    assert got == want


def test_relative_paths_reach_the_workers(client, corpus, encoding, tmp_path, monkeypatch):
    monkeypatch.chdir(corpus[0].parent)
    pat = patterns.resolve_pattern("cl100k")
    rel = [p.name for p in corpus]
    want = counting.count_documents(_docs(corpus), pat, SPECIALS)
    assert D.count_chunks_distributed(client, rel, pat, SPECIALS) == want


def test_relative_paths_reach_the_workers_when_encoding(client, corpus, encoding, tmp_path, monkeypatch, io_model):
    monkeypatch.chdir(corpus[0].parent)
    D.encode_files([p.name for p in corpus], encoding, os.path.relpath(tmp_path / "rel"), client, docs="lines",
                   **AS_TEXT)
    assert shards.read_shards(tmp_path / "rel").tolist() == _encode_docs(corpus, encoding)


def test_a_directory_counts_as_its_files(client, corpus, tmp_path):
    # fastbpe.io's rule on the cluster too: a directory is its regular files, sorted
    pat = patterns.resolve_pattern("cl100k")
    (tmp_path / "d" / "sub").mkdir(parents=True)
    for i, p in enumerate(corpus):
        (tmp_path / "d" / ("sub" if i % 2 else "") / p.name).write_bytes(p.read_bytes())
    want = counting.count_documents(_docs(tmp_path / "d"), pat, SPECIALS)
    assert D.count_chunks_distributed(client, tmp_path / "d", pat, SPECIALS, ranges_per_file=2) == want


def test_count_documents_distributed_generic(client, corpus):
    got = D.count_documents_distributed(client, corpus, _count_words, ranges_per_file=2, docs="lines")
    want = _count_words(_docs(corpus, "lines"))
    assert got == want


def _count_words(lines) -> Counter:
    c: Counter = Counter()
    for line in lines:
        c.update(line.split())
    return c


def test_count_errors(client, corpus, tmp_path):
    pat = patterns.resolve_pattern("cl100k")
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        D.count_chunks_distributed(client, [tmp_path / "nope.txt"], pat, SPECIALS)
    with pytest.raises(TypeError, match="Client"):
        D.count_chunks_distributed(object(), corpus, pat, SPECIALS)
    with pytest.raises(TypeError, match=r"files\[1\] is list, not a path"):
        D.count_chunks_distributed(client, [corpus[0], ["text"]], pat, SPECIALS)
    # a text is never read as a file, nor a file as text (fastbpe.io's rule)
    with pytest.raises(FileNotFoundError, match="'some text'.*documents="):
        D.count_chunks_distributed(client, [corpus[0], "some text"], pat, SPECIALS)
    with pytest.raises(ValueError, match="errors must be one of 'strict', 'replace'"):
        D.count_chunks_distributed(client, corpus, pat, SPECIALS, errors="bogus")
    with pytest.raises(ValueError, match="ranges_per_file"):
        D.count_chunks_distributed(client, corpus, pat, SPECIALS, ranges_per_file=0)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\nbad \xff here\n")
    with pytest.raises(ValueError, match=r"bad.txt: not valid UTF-8 at byte offset 7"):
        D.count_chunks_distributed(client, [bad], pat, SPECIALS)


def test_cut_compressed_files_fail_on_workers(client, encoding, tmp_path):
    """Issue 37: a .zst cut short (one frame or the second of two) fails the Dask paths
    as it fails locally, naming the file and the decompressed offset (the reader's rule,
    fastbpe.io.streams; test_io_truncated.py cuts every format at many offsets)."""
    zstandard = pytest.importorskip("zstandard")
    lines = [f"line {i} of a corpus cut short" for i in range(6000)]
    text = "".join(line + "\n" for line in lines).encode()
    jsonl = [f'{{"text": "{line}"}}\n'.encode() for line in lines]
    one_frame = zstandard.ZstdCompressor().compress(text)
    two_frames = (zstandard.ZstdCompressor().compress(b"".join(jsonl[:300]))
                  + zstandard.ZstdCompressor().compress(b"".join(jsonl[300:])))
    pat = patterns.resolve_pattern("cl100k")
    for name, data in (("one.txt.zst", one_frame), ("two.jsonl.zst", two_frames)):
        path = tmp_path / name
        for n in (len(data) // 2, len(data) - 3):
            path.write_bytes(data[:n])
            match = rf"{name}: corrupt or truncated zstd data after \d+ decompressed bytes"
            with pytest.raises(ValueError, match=match):
                D.encode_files([path], encoding, tmp_path / f"out{n}", client, progress=False)
            with pytest.raises(ValueError, match=match):
                D.count_chunks_distributed(client, [path], pat, SPECIALS)


def test_wordpiece_counts_and_vocab_equal_train_wordpiece(client, corpus, monkeypatch):
    from fastbpe.reference import wordpiece as ref_wp
    from fastbpe import train_wordpiece

    opts = ref_wp.BertOptions()
    got = D.count_words_distributed(client, corpus, opts, ranges_per_file=3)
    assert got == ref_wp.count_words(_docs(corpus), opts)
    # the merge phase on the distributed counts gives train_wordpiece's vocabulary
    want = train_wordpiece(corpus, 200).vocab
    monkeypatch.setattr(ref_wp, "count_words", lambda texts, opts=None: got)
    assert ref_wp.train([], 200, opts, special_tokens=opts.special_tokens) == want


# ----------------------------------------------------------------------------- encoding
@pytest.fixture
def io_model():
    import fastbpe.io as real

    return real


def _doc_list(paths, docs="lines") -> list[str]:
    """The documents of the files by the document model's rule, read the obvious way."""
    out = []
    for p in paths:
        raw = gzip.open(p, "rb").read() if p.suffix == ".gz" else p.read_bytes()
        out += io_stub.split_documents(raw.decode("utf-8"), docs)
    return out


def _encode_docs(paths, enc, docs="lines", eot=True) -> list[int]:
    ids = []
    for doc in _doc_list(paths, docs):
        ids.extend(enc.encode_ordinary(doc))
        if eot:
            ids.append(enc.special_tokens["<|endoftext|>"])
    return ids


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


AS_TEXT = {"disallowed_special": ()}  # the corpus holds '<|endoftext|>' as text (b.txt)


def test_encode_files_on_cluster_equals_local(client, corpus, encoding, tmp_path, io_model):
    manifest = D.encode_files(corpus, encoding, tmp_path / "c", client, docs="lines", n_parts=3, **AS_TEXT)
    s = shards.open(tmp_path / "c")
    s.verify()
    want = _encode_docs(corpus, encoding)
    assert s.dtype == np.uint16 and s.read().tolist() == want
    docs = _doc_list(corpus)
    assert s.documents == len(docs) == manifest["documents"]
    eot = encoding.special_tokens["<|endoftext|>"]
    for i in (0, 7, len(docs) - 1):
        assert s.doc(i).tolist() == encoding.encode_ordinary(docs[i]) + [eot]
    assert manifest["document_rule"] == {"docs": "lines", "field": None, "column": None}
    assert _tmp_files(tmp_path / "c") == []
    # one machine writes the same bytes
    D.encode_files(corpus, encoding, tmp_path / "l", docs="lines", n_parts=3, num_threads=2, **AS_TEXT)
    assert _files(tmp_path / "c") == _files(tmp_path / "l")
    # a rerun verifies every shard and skips it
    again = D.encode_files(corpus, encoding, tmp_path / "c", client, docs="lines", n_parts=3, **AS_TEXT)
    assert again["skipped"] == len(again["shards"]) == len(manifest["shards"])
    assert _files(tmp_path / "c") == _files(tmp_path / "l")


def test_encode_files_special_token_rule_on_the_cluster(client, corpus, encoding, tmp_path, io_model):
    # the library's rule by default: refused, the error names the place, whole from the worker
    with pytest.raises(shards.DisallowedSpecialInDocument, match=r"b.txt: .*special-token text '<\|endoftext\|>'"):
        D.encode_files(corpus, encoding, tmp_path, client, docs="lines")
    assert not (tmp_path / "manifest.json").exists() and _tmp_files(tmp_path) == []
    D.encode_files(corpus, encoding, tmp_path, client, docs="lines", allowed_special={"<|endoftext|>"})
    eot = encoding.special_tokens["<|endoftext|>"]
    want = []
    for d in _doc_list(corpus):
        want += encoding.encode(d, allowed_special="all") + [eot]
    assert shards.read_shards(tmp_path).tolist() == want


def test_encode_files_modes(corpus, encoding, tmp_path, io_model):
    m = D.encode_files(corpus, encoding, tmp_path / "file", num_threads=1, docs="file", eot=None, dtype="uint32",
                       **AS_TEXT)
    s = shards.open(tmp_path / "file")
    assert s.dtype == np.uint32 and m["dtype"] == "uint32" and m["eot"]["id"] is None
    assert s.read().tolist() == _encode_docs(corpus, encoding, docs="file", eot=False)
    assert s.documents == len(corpus) - 1  # the empty file has no document


def test_encode_files_uint32_and_eot(tmp_path, io_model):
    ranks = {bytes([i]): i for i in range(256)}
    big = Encoding("big", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 70000})
    f = tmp_path / "x.txt"
    f.write_text("ab c\nd\n")
    D.encode_files([f], big, tmp_path / "o", docs="lines")
    got = shards.open(tmp_path / "o")
    assert got.dtype == np.uint32 and got.read().tolist() == [97, 98, 32, 99, 70000, 100, 70000]
    plain = Encoding("plain", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={})
    with pytest.raises(ValueError, match="pass eot=TOKEN"):
        D.encode_files([f], plain, tmp_path / "p")
    m = D.encode_files([f], plain, tmp_path / "p", eot=None)
    assert m["eot"]["id"] is None and shards.read_shards(tmp_path / "p").tolist() == list(b"ab c\nd\n")
    with pytest.raises(ValueError, match="uint16 cannot hold"):
        D.encode_files([f], big, tmp_path / "q", dtype=np.uint16)


def test_encode_files_errors(corpus, encoding, tmp_path, io_model):
    with pytest.raises(TypeError, match="Encoding or WordPiece"):
        D.encode_files(corpus, "cl100k_base", tmp_path)
    with pytest.raises(ValueError, match="dtype must be"):
        D.encode_files(corpus, encoding, tmp_path, dtype="int64")
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        D.encode_files([tmp_path / "missing.txt"], encoding, tmp_path)
    with pytest.raises(TypeError, match="Client"):
        D.encode_files(corpus, encoding, tmp_path, client="tcp://127.0.0.1:8786")
    with pytest.raises(ValueError, match="num_threads"):
        D.encode_files(corpus, encoding, tmp_path, num_threads=0)
    with pytest.raises(shards.DisallowedSpecialInDocument, match="b.txt"):
        D.encode_files(corpus, encoding, tmp_path, docs="lines")


def test_resume_redoes_only_damaged_shards(corpus, encoding, tmp_path, io_model):
    first = D.encode_files(corpus, encoding, tmp_path, num_threads=1, docs="lines", **AS_TEXT)
    before = _files(tmp_path)
    victim = tmp_path / first["shards"][1]["bin"]
    raw = bytearray(victim.read_bytes())
    raw[0] ^= 1
    victim.write_bytes(bytes(raw))
    shards.open(tmp_path)   # the sizes are right: open passes, verify reads the bytes
    with pytest.raises(ValueError, match="sha256"):
        shards.open(tmp_path).verify()
    (tmp_path / first["shards"][2]["idx"]).unlink()
    with pytest.raises(ValueError, match=r"\.idx: missing; manifest.json lists it"):
        shards.open(tmp_path)
    again = D.encode_files(corpus, encoding, tmp_path, num_threads=1, docs="lines", **AS_TEXT)
    assert again["skipped"] == len(again["shards"]) - 2
    assert _files(tmp_path) == before  # byte-identical
    # a changed source file: its shard is redone, the others are kept
    changed = tmp_path / "changed"
    changed.mkdir()
    src = [changed / p.name for p in corpus]
    for p, q in zip(corpus, src):
        q.write_bytes(p.read_bytes())
    D.encode_files(src, encoding, tmp_path / "c", docs="lines", **AS_TEXT)
    st = src[0].stat()
    src[0].write_bytes(src[0].read_bytes().replace(b"the", b"THE"))  # same size
    os.utime(src[0], ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    redo = D.encode_files(src, encoding, tmp_path / "c", docs="lines", **AS_TEXT)
    assert redo["skipped"] == len(redo["shards"]) - 1
    assert shards.read_shards(tmp_path / "c").tolist() == _encode_docs(src, encoding)
    # different options: nothing may be reused
    other = D.encode_files(corpus, encoding, tmp_path, docs="lines", eot=None, **AS_TEXT)
    assert other["skipped"] == 0
    assert shards.read_shards(tmp_path).tolist() == _encode_docs(corpus, encoding, eot=False)


class CrashingEncoding(Encoding):
    """Dies (os._exit, like an OOM kill) in the middle of the shard that holds the
    trigger line, the first time only (a marker file remembers)."""

    TRIGGER = "CRASH-TRIGGER"

    def set_marker(self, marker: str) -> "CrashingEncoding":
        self.marker = marker
        return self

    def __getstate__(self):
        return {**super().__getstate__(), "marker": self.marker}

    def __setstate__(self, state):
        state = dict(state)
        marker = state.pop("marker")
        super().__setstate__(state)
        self.marker = marker

    def encode_batch_to_numpy(self, text, **kwargs):
        if any(self.TRIGGER in t for t in text) and not os.path.exists(self.marker):
            Path(self.marker).write_text(str(os.getpid()))
            os._exit(17)
        return super().encode_batch_to_numpy(text, **kwargs)


def _crash_corpus(corpus, tmp_path) -> list[Path]:
    """The corpus with a long file whose trigger line sits after the first encode block."""
    long = tmp_path / "long.txt"
    body = _stdlib_text("textwrap.py")[:6000]
    long.write_text(body + "\n" + CrashingEncoding.TRIGGER + " here\n" + body, encoding="utf-8")
    return [corpus[0], long, corpus[2], corpus[4]]


def _crashing(encoding, tmp_path) -> CrashingEncoding:
    return CrashingEncoding("crash", pat_str=encoding.pat_str, mergeable_ranks=encoding.mergeable_ranks,
                            special_tokens=encoding.special_tokens).set_marker(str(tmp_path / "crashed"))


def test_worker_killed_mid_shard_then_rerun(client, corpus, encoding, tmp_path, io_model):
    paths = _crash_corpus(corpus, tmp_path)
    out = tmp_path / "out"
    crashing = _crashing(encoding, tmp_path)
    old = client.run_on_scheduler(_set_allowed_failures, 0)
    try:
        with pytest.raises(distributed.KilledWorker):
            # small blocks: the death comes after part of the shard was written
            D.encode_files(paths, crashing, out, client, docs="lines", block_bytes=2000, **AS_TEXT)
    finally:
        client.run_on_scheduler(_set_allowed_failures, old)
    assert (tmp_path / "crashed").exists()
    assert not (out / "manifest.json").exists()
    # the dying shard exists only as temporaries, never under a final name
    assert any(n.startswith(".shard-000001-") for n in _tmp_files(out))
    assert not [n for n in os.listdir(out) if n.startswith("shard-000001-")]
    finished_before = {p.name for p in out.glob("shard-*.json")}
    # tasks on other workers finished before the call raised (tasks queued on the dead
    # worker may have failed with it: allowed_failures=0)
    assert len(finished_before) >= 1

    client.wait_for_workers(2, timeout=60)
    again = D.encode_files(paths, crashing, out, client, docs="lines", block_bytes=2000, **AS_TEXT)
    assert again["skipped"] == len(finished_before)  # finished shards were kept
    s = shards.open(out)
    s.verify()
    assert s.read().tolist() == _encode_docs(paths, encoding)
    assert s.documents == len(_doc_list(paths))
    assert _tmp_files(out) == []


def _set_allowed_failures(n, dask_scheduler=None):
    old = dask_scheduler.allowed_failures
    dask_scheduler.allowed_failures = n
    return old


def test_worker_killed_mid_shard_is_retried_by_dask(client, corpus, encoding, tmp_path, io_model):
    """With Dask's own retries the same run finishes; the dead attempt's temporaries are
    cleaned up and nothing is duplicated."""
    paths = _crash_corpus(corpus, tmp_path)
    out = tmp_path / "out"
    client.wait_for_workers(2, timeout=60)
    m = D.encode_files(paths, _crashing(encoding, tmp_path), out, client, docs="lines", block_bytes=2000, **AS_TEXT)
    assert (tmp_path / "crashed").exists()
    assert shards.read_shards(out).tolist() == _encode_docs(paths, encoding)
    assert m["tokens"] == len(_encode_docs(paths, encoding))
    assert _tmp_files(out) == []


# ----------------------------------------------------------------------------- optional extra
def test_import_error_without_dask(tmp_path):
    script = textwrap.dedent(
        """
        import sys
        sys.modules["distributed"] = None  # as if dask.distributed and fsspec were not installed
        sys.modules["fsspec"] = None
        from fastbpe import distributed as D
        from fastbpe.reference import patterns
        for call in (
            lambda: D.count_chunks_distributed(object(), ["x"], patterns.CL100K, []),
            lambda: D.encode_files(["x"], __import__("fastbpe.bpe.encoding").bpe.encoding.get_toy_encoding(), "out", client=object()),
            lambda: D.plan_tasks(["s3://bucket/x.txt"]),
        ):
            try:
                call()
            except ImportError as exc:
                print("IMPORTERROR", exc)
        """
    )
    # Same fastbpe as this test (installed or built in place); never the source tree's cwd.
    env = dict(os.environ, PYTHONPATH=str(Path(fastbpe.__file__).parents[1]))
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if line.startswith("IMPORTERROR")]
    assert len(lines) == 3
    assert all("pip install fastbpe[dask]" in line for line in lines)

