"""How training reads its input (issue 22): files or documents, never confused; odd files;
errors that say what and where; capacity limits named; buffers sized by the corpus."""
from __future__ import annotations

import gzip
import os
import subprocess
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path

import pytest

import fastbpe
from fastbpe import _train
from fastbpe.bpe import counting
from fastbpe import io as fio
from fastbpe.io import Corpus
from fastbpe.reference import bpe as ref
from fastbpe.reference import patterns
from fastbpe import train_wordpiece

ROOT = Path(__file__).resolve().parents[1]


def _quiet_train(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # tiny corpora stop early
        return fastbpe.train_bpe(*args, progress=False, **kwargs)


def _run_child(code: str, timeout: float = 120):
    """Run ``code`` in a fresh interpreter that imports the same fastbpe as this test run
    (installed or in-tree), from outside the source tree; return (rc, peak RSS MiB, output)."""
    wrapper = textwrap.dedent("""
        import resource, subprocess, sys
        proc = subprocess.run([sys.executable, "-c", sys.argv[1]], capture_output=True, text=True,
                              timeout=float(sys.argv[2]))
        print(proc.returncode)
        print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
        sys.stdout.write(proc.stdout + "\\n---\\n" + proc.stderr)
    """)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(fastbpe.__file__)))
    out = subprocess.run([sys.executable, "-c", wrapper, code, str(timeout)], cwd=tempfile.gettempdir(), env=env,
                         capture_output=True,
                         text=True, timeout=timeout + 30, check=True).stdout
    rc, rss_kb, rest = out.split("\n", 2)
    return int(rc), int(rss_kb) / 1024, rest


# ----------------------------------------------------------------------------- 1. files or documents
def test_documents_that_are_paths_stay_text(tmp_path):
    # before: a list of str whose items all existed was read from disk (learning '/nologin')
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("root:x:0:0:root:/root:/usr/sbin/nologin\n" * 50)
    b.write_text("daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n" * 50)
    docs = [str(a), str(b)]
    enc = _quiet_train(documents=docs, vocab_size=300, pattern="gpt2")
    ranks, _ = ref.train(docs, 300, pattern=patterns.GPT2)
    assert enc.mergeable_ranks == ranks
    assert b"nologin" not in enc.mergeable_ranks and b"/nologin" not in enc.mergeable_ranks
    # and as files they are files
    assert b"nologin" in _quiet_train(docs, vocab_size=300, pattern="gpt2").mergeable_ranks


def test_a_missing_file_is_never_trained_on_as_text(tmp_path):
    # before: one missing path made the whole list documents (first merges '/t', '.t')
    real = tmp_path / "real.txt"
    real.write_text("hello world\n")
    missing = str(tmp_path / "missing.txt")
    for call in (lambda: fastbpe.train_bpe([str(real), missing], 300, progress=False),
                 lambda: fastbpe.train_bpe(files=[real, missing], vocab_size=300, progress=False),
                 lambda: train_wordpiece([str(real), missing], 100),
                 lambda: counting.count_chunks([str(real), missing]),
                 lambda: list(Corpus.resolve([str(real), missing]).documents())):
        with pytest.raises(FileNotFoundError, match=r"input file not found: '.*missing.txt'.*documents="):
            call()
    with pytest.raises(FileNotFoundError, match="'some text'"):
        fastbpe.train_bpe(["some text"], 300, progress=False)


def test_files_accept_str_pathlike_and_lists(tmp_path):
    f = tmp_path / "c.txt"
    f.write_text("low lower lowest\n" * 20)
    want = _quiet_train(documents=["low lower lowest\n"] * 20, vocab_size=270).mergeable_ranks
    for files in (f, str(f), [f], (str(f),), iter([f])):
        assert _quiet_train(files, vocab_size=270).mergeable_ranks == want
    assert _quiet_train(files=f, vocab_size=270).mergeable_ranks == want


class _Column:
    """Like a HF ``datasets`` column: indexable and iterable, not a list."""

    def __init__(self, rows):
        self._rows = rows

    def __len__(self):
        return len(self._rows)

    def __getitem__(self, i):
        return self._rows[i]

    def __iter__(self):
        return iter(self._rows)


def test_documents_take_any_iterable_of_str():
    docs = ["the cat sat\n", "on the mat\n"] * 10
    want = _quiet_train(documents=docs, vocab_size=280).mergeable_ranks
    for given in ((d for d in docs), tuple(docs), _Column(docs), iter(docs)):
        assert _quiet_train(documents=given, vocab_size=280).mergeable_ranks == want
    assert train_wordpiece(documents=_Column(docs), vocab_size=60).vocab == train_wordpiece(
        documents=docs, vocab_size=60).vocab


@pytest.mark.parametrize("kwargs, exc, match", [
    ({}, TypeError, "pass files .* or documents="),
    ({"files": "a.txt", "documents": ["x"]}, TypeError, "not both"),
    ({"documents": "one text"}, TypeError, "not one str: wrap it in a list"),
    ({"documents": b"bytes"}, TypeError, "not one bytes"),
    ({"documents": 3}, TypeError, "iterable of str, not int"),
    ({"documents": ["ok", 3]}, TypeError, "documents item 1 is int"),
    ({"documents": [{"text": "a"}]}, TypeError, r"pass column='text'"),
    ({"files": [3]}, TypeError, r"files\[0\] is int, not a path"),
    ({"files": b"x.txt"}, TypeError, "files must be a path or a list of paths, not bytes"),
    ({"files": []}, ValueError, "no input files"),
])
def test_bad_inputs_everywhere(kwargs, exc, match):
    for call in (lambda: fastbpe.train_bpe(vocab_size=300, progress=False, **kwargs),
                 lambda: train_wordpiece(vocab_size=100, **kwargs),
                 lambda: counting.count_chunks(**kwargs),
                 lambda: list(Corpus.resolve(**kwargs).documents())):
        with pytest.raises(exc, match=match):
            call()


def test_vocab_size_is_required():
    with pytest.raises(TypeError, match="needs vocab_size"):
        fastbpe.train_bpe(documents=["a"])
    with pytest.raises(TypeError, match="needs vocab_size"):
        train_wordpiece(documents=["a"])


def test_dask_path_takes_files_only(tmp_path):
    from fastbpe import distributed as D

    with pytest.raises(TypeError, match="pass files, not documents="):
        fastbpe.train_bpe(documents=["a"], vocab_size=300, client=object(), progress=False)
    with pytest.raises(TypeError, match="pass files, not documents="):
        train_wordpiece(documents=["a"], vocab_size=100, client=object())
    # a text given as a file is a missing file there too, checked on the client
    with pytest.raises(FileNotFoundError, match="'some text'"):
        D.plan_tasks(["some text"])
    with pytest.raises(TypeError, match=r"files\[1\] is list"):
        D.plan_tasks([str(tmp_path), ["text"]])


# ----------------------------------------------------------------------------- 2. directories, devices
def _tree(root: Path) -> list[Path]:
    files = {"b.txt": "bee bee\n", "a/z.txt": "zed zed\n", "a/b/c.txt": "sea sea\n", "a-1.txt": "one\n",
             ".hidden.txt": "secret\n", ".git/objects/x": "\xff", "a/.cache/y.txt": "secret\n"}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="latin-1")
    return [root / "a" / "b" / "c.txt", root / "a" / "z.txt", root / "a-1.txt", root / "b.txt"]


def test_a_directory_is_its_regular_files_sorted(tmp_path):
    expected = _tree(tmp_path)
    os.symlink(tmp_path / "a", tmp_path / "link-to-dir")  # not followed
    os.symlink(tmp_path / "b.txt", tmp_path / "c-link.txt")  # a file: read
    expected.append(tmp_path / "c-link.txt")
    assert Corpus.resolve(tmp_path).files == expected
    assert _quiet_train(tmp_path, vocab_size=270).mergeable_ranks == _quiet_train(
        expected, vocab_size=270).mergeable_ranks
    (tmp_path / "empty" / ".only-hidden").mkdir(parents=True)
    with pytest.raises(ValueError, match="empty: directory holds no files"):
        fastbpe.train_bpe(tmp_path / "empty", 300, progress=False)


def test_devices_and_fifos_are_refused(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="pipe: is a FIFO, not a regular file.*documents="):
        fastbpe.train_bpe(fifo, 300, progress=False)
    with pytest.raises(ValueError, match="/dev/null: is a character device"):
        counting.count_chunks("/dev/null")


def test_dev_zero_fails_fast_in_bounded_memory():
    # before: train_bpe('/dev/zero', 300) read forever, memory growing without bound
    rc, rss_mib, out = _run_child(
        "import fastbpe\n"
        "try:\n    fastbpe.train_bpe('/dev/zero', 300, progress=False)\n"
        "except ValueError as e:\n    print('ValueError', e)\n", timeout=60)
    assert rc == 0 and "ValueError /dev/zero: is a character device" in out, out
    assert rss_mib < 400


def test_a_line_longer_than_the_cap_is_an_error_in_bounded_memory(tmp_path):
    # a regular file with no newline (sparse: 2 GiB of zero bytes that cost no disk)
    big = tmp_path / "no-newlines.bin"
    with open(big, "wb") as fh:
        fh.truncate(2 << 30)
    rc, rss_mib, out = _run_child(
        "import fastbpe\nfrom fastbpe.io import documents\ndocuments.MAX_DOCUMENT_BYTES = 16 << 20\n"
        f"for kw in ({{}}, {{'pattern': r'\\S+|\\s+', 'num_threads': 1}}):\n"
        "    try:\n"
        f"        fastbpe.train_bpe({str(big)!r}, 300, progress=False, **kw)\n"
        "    except ValueError as e:\n        print('ValueError', e)\n", timeout=120)
    assert rc == 0, out
    assert out.count("no-newlines.bin: the document at byte offset 0 is longer than 16777216 bytes") == 2, out
    assert rss_mib < 400


def test_document_cap_on_every_reader(tmp_path, monkeypatch):
    cap = fio.BLOCK_BYTES   # checked as the unfinished document outgrows the blocks read
    monkeypatch.setattr(fio.documents, "MAX_DOCUMENT_BYTES", cap)
    f = tmp_path / "f.txt"
    f.write_bytes(b"short\n" + b"x" * (3 * cap) + b"\nshort\n")   # no place to cut a run of letters
    for call in (lambda: list(Corpus.resolve(f, docs="lines").documents()),
                 lambda: counting.count_chunks(f, docs="lines", num_threads=2),
                 lambda: counting.count_chunks(f, docs="lines", pattern=r"\S+|\s+", num_threads=1)):
        with pytest.raises(ValueError, match=rf"f.txt: the document at byte offset 6 is longer than {cap} bytes"):
            call()
    f.write_bytes(b"short\n" + b"y" * (cap - 10) + b"\n")  # under the cap
    assert counting.count_chunks(f, docs="lines") == {b"short": 1, b"y" * (cap - 10): 1}
    f.write_bytes(b"short " * cap)   # long, but prose: read in pieces, counted exactly
    assert counting.count_chunks(f) == {b"short": 1, b" short": cap - 1, b" ": 1}


# ----------------------------------------------------------------------------- 3. errors say what and where
def _gz(path: Path, text: str) -> bytes:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(text)
    return path.read_bytes()


@pytest.mark.parametrize("damage, what", [
    (lambda raw: raw[: len(raw) // 2], "EOFError"),                          # truncated
    (lambda raw: raw[:20] + bytes(b ^ 0x55 for b in raw[20:40]) + raw[40:], "error"),  # corrupt
    (lambda raw: raw[:-8] + bytes(4) + raw[-4:], "BadGzipFile"),             # bad CRC
])
def test_bad_gzip_names_the_file(tmp_path, damage, what):
    path = tmp_path / "corpus.txt.gz"
    text = "".join(f"line {i} of a compressed corpus\n" for i in range(4000))
    path.write_bytes(damage(_gz(path, text)))
    match = rf"corpus.txt.gz: corrupt or truncated gzip data after \d+ decompressed bytes \(.*{what}"
    for call in (lambda: fastbpe.train_bpe(path, 300, progress=False),
                 lambda: fastbpe.train_bpe(path, 300, pattern=r"\S+|\s+", num_threads=1, progress=False),
                 lambda: train_wordpiece(path, 100),
                 lambda: list(Corpus.resolve(path, docs="lines").documents())):
        with pytest.raises(ValueError, match=match):
            call()


@pytest.mark.parametrize("pattern, threads", [("cl100k", 1), ("cl100k", 2), (r"\w+|\W", 1), (r"\w+|\W", 2)])
def test_lone_surrogates_train_as_tiktoken_encodes_them(pattern, threads):
    # before: a raw UnicodeEncodeError; now the reference's "Documents" rule, on every path
    docs = ["caf\ud800 caf\ud800 caf\ud800\n", "pair \ud83d\ude42\ud83d\ude42 \udfff\n"] * 5
    fixed = ["caf\ufffd caf\ufffd caf\ufffd\n", "pair \U0001f642\U0001f642 \ufffd\n"] * 5
    want = ref.count_chunks(fixed, patterns.resolve_pattern(pattern))
    assert ref.count_chunks(docs, patterns.resolve_pattern(pattern)) == want
    assert counting.count_chunks(documents=docs, pattern=pattern, num_threads=threads) == want
    enc = _quiet_train(documents=docs, vocab_size=300, pattern=pattern, num_threads=threads)
    assert enc.mergeable_ranks == ref.train(fixed, 300, pattern=patterns.resolve_pattern(pattern))[0]
    assert enc.encode_ordinary(docs[0]) == enc.encode_ordinary(fixed[0])


def test_non_utf8_file_names_file_and_offset_everywhere(tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"good line\nbad: caf\xe9\n")
    match = r"latin1.txt: not valid UTF-8 at byte offset 18 .*errors='replace'"
    for call in (lambda: fastbpe.train_bpe(bad, 300, progress=False),
                 lambda: fastbpe.train_bpe(bad, 300, pattern=r"\S+", num_threads=2, progress=False),
                 lambda: train_wordpiece(bad, 100)):
        with pytest.raises(ValueError, match=match):
            call()
    assert "caf" in train_wordpiece(bad, 100, errors="replace").vocab


def test_bogus_errors_are_refused_up_front(tmp_path):
    match = r"errors must be one of 'strict', 'replace'; got 'bogus'"
    for call in (lambda: fastbpe.train_bpe(documents=["a"], vocab_size=300, errors="bogus", progress=False),
                 lambda: fastbpe.train_bpe(tmp_path / "missing", 300, errors="bogus", client=object()),
                 lambda: train_wordpiece(documents=["a"], vocab_size=100, errors="bogus"),
                 lambda: counting.count_chunks(documents=["a"], errors="bogus"),
                 lambda: Corpus.resolve(documents=["a"]).blocks(errors="bogus")):
        with pytest.raises(ValueError, match=match):
            call()


# ----------------------------------------------------------------------------- 4. capacity limits
@pytest.fixture
def limits():
    """Lower the trainer's capacity limits (a 2**31-chunk corpus can't be built in a test:
    the checks are the real ones, reached through the testing knob ``_set_limits``)."""
    old = _train._set_limits()
    yield _train._set_limits
    _train._set_limits(*old)


def test_too_many_unique_chunks_names_where(limits, tmp_path):
    limits(max_chunks=50)
    docs = [f"w{i} " for i in range(200)]
    with pytest.raises(ValueError, match=r"documents from item 0: more than 50 unique chunks, the native "
                                         r"trainer's limit \(chunk numbers are int32\)"):
        counting.count_chunks(documents=docs, num_threads=1)
    f = tmp_path / "many.txt"
    f.write_text("".join(d + "\n" for d in docs))
    with pytest.raises(ValueError, match=r"many.txt: byte 0: more than 50 unique"):
        fastbpe.train_bpe(f, 300, progress=False)
    # each thread's table under the limit, their sum over it
    limits(max_chunks=120)
    tables = [counting.count_chunk_table(documents=part, num_threads=1) for part in (docs[:100], docs[100:])]
    with pytest.raises(ValueError, match="adding up the chunk counts of the reading threads: more than 120"):
        _train._merge_tables(tables)
    with pytest.raises(ValueError, match=r"the corpus has 200 unique chunks: more than 120 unique chunks"):
        _train.train_merges({d.encode(): 1 for d in docs}, 300)


def test_too_long_a_chunk_names_where(limits):
    limits(max_chunk_bytes=1000)
    with pytest.raises(ValueError, match=r"documents from item 0: a chunk longer than 1,000 bytes"):
        counting.count_chunks(documents=["ok", "a" * 1001])
    with pytest.raises(ValueError, match=r"a chunk longer than 1,000 bytes"):
        _train.train_merges({b"a" * 1001: 1}, 300)


def test_pair_and_pool_limits_name_the_merge(limits):
    counts = {b"abcdefgh": 5, b"bcdefgha": 3, b"hgfedcba": 2}
    limits(max_pairs=10)  # 15 distinct pairs before any merge
    with pytest.raises(ValueError, match=r"counting the pairs of the unique chunks: more than 10 distinct pairs"):
        _train.train_merges(counts, 300)
    limits(max_pairs=15)  # the 15 initial pairs fit; merge 2 needs a 16th slot
    with pytest.raises(ValueError, match=r"at merge 2 \(257 tokens so far\): more than 15 distinct pairs "
                                         r"of tokens at once, the native trainer's limit \(pair slots are int32\)"):
        _train.train_merges(counts, 300)
    limits(max_pairs=2**31 - 1, max_pool=5)
    with pytest.raises(ValueError, match=r"more than 5 \(pair, chunk\) entries"):
        _train.train_merges(counts, 300)


def test_limits_are_copied_when_a_trainer_is_made(limits):
    # each counter reads its own copy of the process default (TrainTuning): lowering the
    # default reaches the counters made after, not one already counting
    import numpy as np
    from fastbpe._pretokenize import pattern_id

    block = "".join(f"w{i} " for i in range(50)).encode()
    ends = np.array([len(block)], dtype=np.int64)
    early = _train._NativeCounter(pattern_id("cl100k"), [])
    limits(max_chunks=5)
    late = _train._NativeCounter(pattern_id("cl100k"), [])
    assert early.count_documents(block, ends) == 0 and len(early.table) > 5
    status = late.count_documents(block, ends)
    assert status < 0
    assert str(late.error(status, "here")) == (
        "here: more than 5 unique chunks, the native trainer's limit (chunk numbers are "
        "int32); train on a sample, or with a pattern that makes fewer distinct chunks")
    assert str(early.error(status, "here")).startswith("here: more than 2,147,483,646 unique")


def test_limits_restored_give_the_reference_result(limits):
    counts = {b"abcdefgh": 5, b"bcdefgha": 3, b"hgfedcba": 2}
    assert _train.train_merges(counts, 300) == ref.train_on_chunks(counts, 300)


# ----------------------------------------------------------------------------- 5. buffers sized by the corpus
def test_huge_vocab_size_on_a_tiny_corpus_stays_small():
    # before: vocab_size=10**8 allocated (and touched) ~1 GiB of vocabulary tables first
    code = textwrap.dedent("""
        import sys, warnings
        import fastbpe
        docs = ["abracadabra simsalabim hocus pocus\\n"] * 50
        warnings.simplefilter("ignore")
        enc = fastbpe.train_bpe(documents=docs, vocab_size=int(sys.argv[1]) if len(sys.argv) > 1 else 10**8,
                                progress=False)
        sane = fastbpe.train_bpe(documents=docs, vocab_size=enc.n_vocab, progress=False)
        print("same", enc.mergeable_ranks == sane.mergeable_ranks, enc.n_vocab)
    """)
    rc, rss_mib, out = _run_child(code, timeout=120)
    assert rc == 0 and "same True" in out, out
    assert rss_mib < 200, f"peak RSS {rss_mib:.0f} MiB"  # 1061 MiB before, 39 after


def test_vocab_tables_are_sized_by_the_corpus():
    counts = {b"abcabc": 3, b"xy": 1}
    stats: dict = {}
    merges, vocab = _train.train_merges(counts, 10**8, _stats=stats)
    assert stats["vocab_cap"] == 256 + 5 + 1 and not stats["wide"]
    assert (merges, vocab) == ref.train_on_chunks(counts, 10**8)
    assert _train.train_merges(counts, len(vocab)) == (merges, vocab)


def test_wordpiece_trainer_limits_name_where():
    # before: pair ids past 2**31 were cast to int32 unchecked, and failures were a bare
    # MemoryError(); the real checks, reached through the testing knob
    from fastbpe import _wordpiece_train as W

    docs = ["hug pug pun bun hugs " * 10]
    old = W._set_limits()
    try:
        W._set_limits(max_pairs=5)
        with pytest.raises(ValueError, match=r"counting the pairs of the words: more than 5 distinct pairs, "
                                             r"the native WordPiece trainer's limit"):
            train_wordpiece(documents=docs, vocab_size=60)
        W._set_limits(max_pairs=8)
        with pytest.raises(ValueError, match=r"at merge 2: more than 8 distinct pairs"):
            train_wordpiece(documents=docs, vocab_size=60)
        W._set_limits(max_words=3)
        with pytest.raises(ValueError, match=r"the corpus has 5 unique words: more than 3"):
            train_wordpiece(documents=docs, vocab_size=60)
    finally:
        W._set_limits(*old)
    assert len(train_wordpiece(documents=docs, vocab_size=60)) == 21
