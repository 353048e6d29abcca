"""The native trainer (fastbpe._train) must give the reference's merges and vocab exactly."""
from __future__ import annotations

import gettext
import glob
import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe._train import train_merges
from fastbpe.reference import bpe, patterns

STDLIB = Path(random.__file__).parent


# ----------------------------------------------------------------------------- samples
def _mo_messages(lang: str, limit: int) -> list[str]:
    """Translated messages of the gettext catalogs of this machine (Turkish, Chinese)."""
    out: list[str] = []
    for path in sorted(glob.glob(f"/usr/share/locale/{lang}/LC_MESSAGES/*.mo")):
        try:
            with open(path, "rb") as fh:
                catalog = gettext.GNUTranslations(fh)
        except Exception:  # a catalog we cannot parse is simply not used
            continue
        out.extend(v for k, v in catalog._catalog.items() if k and isinstance(v, str))
        if len(out) >= limit:
            break
    return out[:limit]


def _sample(kind: str) -> list[str]:
    if kind == "english":
        text = (STDLIB / "this.py").read_text()  # the Zen is rot13: decode it
        import codecs

        zen = codecs.decode(text.split('"""')[1], "rot13")
        doc = (STDLIB / "textwrap.py").read_text().split('"""')[1]
        return (zen + doc).splitlines(True)
    if kind == "turkish":
        msgs = _mo_messages("tr", 150)
        if not msgs:
            msgs = ["Dosya bulunamadı: %s\n", "Bağlantı kuruluyor…\n", "Şifreyi değiştir\n"] * 20
        return msgs
    if kind == "chinese":
        path = STDLIB / "test" / "cjkencodings" / "gb2312-utf8.txt"
        msgs = path.read_text().splitlines(True) if path.exists() else []
        return msgs + _mo_messages("zh_CN", 100)
    if kind == "code":
        return (STDLIB / "heapq.py").read_text().splitlines(True)[:250]
    raise AssertionError(kind)


def _assert_same(chunk_counts, n_tokens, **kw):
    expected = bpe.train_on_chunks(chunk_counts, n_tokens, **kw)
    got = train_merges(chunk_counts, n_tokens, **kw)
    assert got[0] == expected[0]
    assert got[1] == expected[1]
    return got


# ----------------------------------------------------------------------------- merges
def test_course_example():
    merges, vocab = _assert_same({b"aaabdaaabac": 1}, 259)
    assert merges == [(97, 97), (97, 98), (256, 257)]
    ranks = {tok: i for i, tok in enumerate(vocab)}
    assert bpe.encode_ordinary("aaabdaaabac", ranks, r"[\s\S]+") == [258, 100, 258, 97, 99]


@pytest.mark.parametrize("kind", ["english", "turkish", "chinese", "code"])
def test_samples_match_reference(kind):
    counts = bpe.count_chunks(_sample(kind), patterns.CL100K)
    _assert_same(counts, 256 + 120)


def test_mixed_sample_all_patterns():
    docs = _sample("english")[:30] + _sample("turkish")[:30] + _sample("chinese")[:20] + _sample("code")[:40]
    for pat in (patterns.GPT2, patterns.CL100K, patterns.O200K, r"\S+|\s+"):
        _assert_same(bpe.count_chunks(docs, pat), 256 + 80)


@pytest.mark.parametrize("char", [b"a", b" ", b"\t", b"\n", "é".encode()])
def test_runs_of_one_character(char):
    # overlapping pairs: the incremental update must equal a recount for every length
    for n in list(range(1, 70)) + [129, 200, 257]:
        for n_tokens in (257, 259, 264, 280):
            _assert_same({char * n: 1}, n_tokens)


@pytest.mark.parametrize("lengths", [[16, 33, 64, 129], [33], [2, 3, 5, 8, 13, 21], list(range(1, 40))])
def test_mixed_runs(lengths):
    counts = Counter()
    for i, n in enumerate(lengths):
        counts[b" " * n] += i + 1
        counts[b"\t" * n] += 1
        counts[b"x" + b"a" * n + b"y"] += 2
    _assert_same(dict(counts), 256 + 60)


def test_many_ties():
    # every pair occurs exactly once: all counts tie, order = smallest (left, right)
    counts = {bytes([a, b]): 1 for a in range(97, 107) for b in range(97, 107)}
    counts.update({bytes([c, c + 1, c + 2]): 2 for c in range(65, 80)})
    _assert_same(counts, 256 + 150)


def test_min_frequency():
    counts = bpe.count_chunks(_sample("english"), patterns.CL100K)
    for mf in (0, 1, 2, 3, 5, 10, 1000):
        _assert_same(counts, 256 + 100, min_frequency=mf)


def test_max_token_length():
    counts = bpe.count_chunks(_sample("code") + _sample("chinese"), patterns.CL100K)
    for ml in (1, 2, 3, 4, 7):
        _assert_same(counts, 256 + 100, max_token_length=ml)
    _assert_same({b"a" * 40: 3, b"ab" * 7: 2}, 280, max_token_length=3)


def test_vocab_larger_than_reachable_stops_early():
    merges, vocab = _assert_same({b"abcd": 5, b"xy": 1}, 1000)
    assert len(merges) == 4


def test_small_n_tokens_and_empty_input():
    assert train_merges({}, 300) == ([], [bytes([i]) for i in range(256)])
    assert train_merges({b"ab": 3}, 256)[0] == []
    assert train_merges({b"ab": 3}, 100)[0] == []
    assert train_merges({b"ab": 0, b"c": 5}, 300)[0] == []


def test_counter_and_bad_input():
    assert train_merges(Counter({b"ab": 2}), 257)[0] == [(97, 98)]
    with pytest.raises(TypeError):
        train_merges({"ab": 2}, 257)
    with pytest.raises(TypeError):
        train_merges({b"ab": 2.0}, 257)
    with pytest.raises(ValueError, match="-1"):
        train_merges({b"ab": -1}, 257)
    with pytest.raises(TypeError):
        train_merges([b"ab"], 257)
    with pytest.raises(ValueError):
        train_merges({b"ab": 1}, 257, max_token_length=0)


def test_large_counts_are_64_bit():
    big = 2**40
    merges, _ = _assert_same({b"ab": big, b"cd": big - 1, b"cdcd": 1}, 258)
    assert merges == [(97, 98), (99, 100)] or merges[0] == (99, 100)


def test_progress_callable_and_tqdm_like():
    counts = bpe.count_chunks(_sample("english"), patterns.CL100K)
    seen = []
    merges, _ = train_merges(counts, 256 + 300, progress=seen.append)
    assert seen and seen[-1] == len(merges) and seen == sorted(seen)

    class Bar:
        n = 0

        def update(self, k):
            self.n += k

    bar = Bar()
    merges, _ = train_merges(counts, 256 + 300, progress=bar)
    assert bar.n == len(merges)


_words = st.lists(
    st.tuples(st.binary(min_size=1, max_size=12).map(lambda b: bytes(x % 4 + 97 for x in b)),
              st.integers(1, 6)),
    min_size=1, max_size=12,
)


@settings(max_examples=300)
@given(_words, st.integers(256, 300), st.sampled_from([None, 2, 3]), st.sampled_from([0, 2]))
def test_hypothesis_small_alphabet(words, n_tokens, max_len, min_freq):
    counts: dict[bytes, int] = {}
    for w, c in words:
        counts[w] = counts.get(w, 0) + c
    _assert_same(counts, n_tokens, max_token_length=max_len, min_frequency=min_freq)


@settings(max_examples=200)
@given(st.lists(st.text(alphabet="ab cğış中文\t\n1.", max_size=40), min_size=1, max_size=8),
       st.integers(256, 290))
def test_hypothesis_random_text(docs, n_tokens):
    counts = bpe.count_chunks(docs, patterns.CL100K)
    _assert_same(counts, n_tokens)


# ----------------------------------------------------------------------------- counting
from fastbpe.io import Corpus  # noqa: E402
from fastbpe.reference import documents as docspec  # noqa: E402
from fastbpe.bpe.counting import count_chunks  # noqa: E402

SPECIALS = ("<|endoftext|>", "<|fim_prefix|>", "<|end", "ş")
ALL_PATTERNS = ["gpt2", "cl100k", "o200k", patterns.CL100K, r"\p{L}+|\p{N}|[^\p{L}\p{N}]+"]


def _mixed_docs() -> list[str]:
    docs = _sample("english") + _sample("turkish") + _sample("chinese") + _sample("code")
    docs += ["a<|endoftext|>b<|endoftext|><|end", "  \n", "\r\n", "x   \t\n", "<|fim_prefix|>def f():\n"]
    docs += ["\t" * 33 + "\n", " " * 129, "a" * 70 + "\n", ""]
    return docs


SEP = "\x1d"   # the test files' document separator: docs="sep:\x1d"


def _write(tmp_path, name, docs, gz=False):
    """A file of ``docs`` read back with ``docs=RULE`` (documents keep their newlines)."""
    import gzip

    path = tmp_path / name
    data = SEP.join(docs).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@pytest.mark.parametrize("pattern", ALL_PATTERNS)
@pytest.mark.parametrize("specials", [(), SPECIALS])
def test_count_chunks_equals_reference(pattern, specials):
    docs = _mixed_docs()
    expected = dict(bpe.count_chunks(docs, patterns.resolve_pattern(pattern), specials))
    for nt in (1, 2, 3):
        assert count_chunks(documents=docs, pattern=pattern, special_tokens=specials, num_threads=nt) == expected
        assert count_chunks(documents=iter(docs), pattern=pattern, special_tokens=specials, num_threads=nt) == expected


RULE = "sep:" + SEP


def test_one_file_many_files_iterator_agree(tmp_path):
    docs = [d for d in _mixed_docs() if d]
    one = _write(tmp_path, "all.txt", docs)
    many = [_write(tmp_path, f"part{i}.txt", docs[i::3], gz=(i == 1)) for i in range(3)]
    expected = dict(bpe.count_chunks(docs, patterns.CL100K, SPECIALS))
    for pattern in ("cl100k", r"\S+|\s+"):
        exp = expected if pattern == "cl100k" else dict(bpe.count_chunks(docs, pattern, SPECIALS))
        for nt in (1, 2, 3):
            assert count_chunks(one, pattern, SPECIALS, docs=RULE, num_threads=nt) == exp
            assert count_chunks(many, pattern, SPECIALS, docs=RULE, num_threads=nt) == exp
            assert count_chunks(documents=iter(docs), pattern=pattern, special_tokens=SPECIALS, num_threads=nt) == exp


def test_small_blocks_and_long_documents(tmp_path):
    # documents longer than a block are counted in exact pieces, whatever the block size
    docs = ["x" * 5000 + " yy\n", "short\n", "é" * 3000 + "\n", "word " * 3000, "last doc"]
    path = _write(tmp_path, "long.txt", docs)
    expected = dict(bpe.count_chunks(docs, patterns.CL100K))
    from fastbpe.io import BPECut

    for size in (7, 100, 4096):
        blocks = list(Corpus.resolve(path, docs=RULE).sources[0].blocks(cut=BPECut(), block_bytes=size))
        assert b"".join(b.data for b in blocks) == "".join(docs).encode()
        assert max(len(b.data) for b in blocks) <= max(2 * size, 6100)
    assert count_chunks(path, "cl100k", docs=RULE, num_threads=2) == expected
    whole = dict(bpe.count_chunks(docspec.split_documents(path.read_text(), "file"), patterns.CL100K))
    assert count_chunks(path, "cl100k", num_threads=2) == whole


def test_count_bad_input(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok line\nbad \xff byte\n")
    with pytest.raises(ValueError, match=r"bad.txt.*offset 12"):
        count_chunks(bad, "cl100k")
    with pytest.raises(ValueError, match=r"offset 12"):
        count_chunks(bad, r"\S+")
    assert count_chunks(bad, "cl100k", errors="replace") == dict(
        bpe.count_chunks(["ok line\n", "bad \ufffd byte\n"], patterns.CL100K))
    with pytest.raises(FileNotFoundError):
        count_chunks([tmp_path / "missing.txt"], "cl100k")
    with pytest.raises(TypeError):
        count_chunks(documents=["a", 3], pattern="cl100k")
    with pytest.raises(TypeError):
        count_chunks(documents=["a"], pattern="cl100k", special_tokens="<|x|>")
    with pytest.raises(ValueError):
        count_chunks(documents=["a"], pattern="cl100k", special_tokens=[""])
    with pytest.raises(ValueError):
        count_chunks(documents=["a"], pattern="cl100k", num_threads=0)
    with pytest.raises(ValueError, match="pattern"):
        count_chunks(documents=["a"], pattern="(unclosed")


@settings(max_examples=300)
@given(st.lists(st.text(alphabet=st.sampled_from(list("ab AZ1'\t\r\n.,ğİş中😀<|>x\u0300")), max_size=30),
                max_size=6),
       st.sampled_from(["gpt2", "cl100k", "o200k"]),
       st.sampled_from([(), ("<|x|>",), ("<|x|>", "<|x", "a")]))
def test_count_hypothesis(docs, pattern, specials):
    expected = dict(bpe.count_chunks(docs, patterns.resolve_pattern(pattern), specials))
    assert count_chunks(documents=iter(docs), pattern=pattern, special_tokens=specials, num_threads=1) == expected


# ----------------------------------------------------------------------------- end to end
@pytest.mark.parametrize("pattern", ["cl100k", "gpt2", "o200k", r"\S+|\s+"])
@pytest.mark.parametrize("specials", [(), ("<|endoftext|>", "<|fim_prefix|>")])
def test_count_then_merge_equals_reference_train(pattern, specials):
    docs = _sample("turkish")[:60] + _sample("code")[:80] + _sample("chinese")[:20]
    docs += ["a<|endoftext|>b<|fim_prefix|>aaaa\n"] * 3
    vocab_size = 256 + 90 + len(specials)
    ranks, special_ids = bpe.train(docs, vocab_size, patterns.resolve_pattern(pattern), specials)
    counts = count_chunks(documents=docs, pattern=pattern, special_tokens=specials, num_threads=2)
    merges, vocab = train_merges(counts, vocab_size - len(specials))
    assert {tok: i for i, tok in enumerate(vocab)} == ranks
    # every training document round-trips through the trained ranks
    for doc in docs:
        for piece in bpe.special_token_regex(specials).split(doc) if specials else [doc]:
            ids = bpe.encode_ordinary(piece, ranks, patterns.resolve_pattern(pattern))
            assert bpe.decode(ids, {i: t for t, i in ranks.items()}, errors="strict") == piece


# ----------------------------------------------------------------------------- internals
@pytest.fixture
def eager_housekeeping():
    """Compact the word-list pool and rebuild the heap after every merge."""
    from fastbpe import _train

    old = _train._set_housekeeping(0, 0)
    yield
    _train._set_housekeeping(*old)


@pytest.mark.parametrize("kind", ["code", "chinese"])
def test_eager_housekeeping_matches_reference(kind, eager_housekeeping):
    counts = bpe.count_chunks(_sample(kind), patterns.CL100K)
    _assert_same(counts, 256 + 150)
    _assert_same(counts, 256 + 150, max_token_length=3)
    _assert_same({b"a" * n: n % 5 + 1 for n in range(1, 90)}, 256 + 40)


@settings(max_examples=150)
@given(_words, st.integers(256, 300))
def test_hypothesis_eager_housekeeping(words, n_tokens):
    from fastbpe import _train

    old = _train._set_housekeeping(0, 0)
    try:
        counts: dict[bytes, int] = {}
        for w, c in words:
            counts[w] = counts.get(w, 0) + c
        _assert_same(counts, n_tokens)
    finally:
        _train._set_housekeeping(*old)


def test_larger_corpus_housekeeping_does_not_change_result():
    # big enough for the default thresholds to compact and rebuild several times
    from fastbpe import _train

    docs = []
    for path in sorted(STDLIB.glob("*.py"))[:40]:
        docs += path.read_text(errors="replace").splitlines(True)
    counts = count_chunks(documents=iter(docs), pattern="cl100k", num_threads=2)
    default = train_merges(counts, 6000)
    old = _train._set_housekeeping(0, 0)
    try:
        eager = train_merges(counts, 6000)
    finally:
        _train._set_housekeeping(*old)
    assert default == eager
    # and the first merges agree with the reference (it is too slow for all of them)
    few = bpe.train_on_chunks(counts, 256 + 40)
    assert default[0][:40] == few[0] and default[1][:296] == few[1]


def test_chunk_table_feeds_train_merges(tmp_path):
    from fastbpe.bpe.counting import count_chunk_table

    docs = _mixed_docs()
    table = count_chunk_table(documents=iter(docs), pattern="o200k", special_tokens=SPECIALS, num_threads=2)
    expected = dict(bpe.count_chunks(docs, patterns.O200K, SPECIALS))
    assert len(table) == len(expected) and table.to_dict() == expected
    want = bpe.train_on_chunks(expected, 256 + 60)
    assert train_merges(table, 256 + 60) == want
    assert train_merges(table, 256 + 60, consume=True) == want
    assert len(table) == 0 and table.to_dict() == {}
    # custom patterns give a table too
    table = count_chunk_table(documents=iter(docs), pattern=r"\S+|\s+", num_threads=1)
    assert table.to_dict() == dict(bpe.count_chunks(docs, r"\S+|\s+"))


def test_count_task_equals_reference(tmp_path):
    from fastbpe.bpe.counting import count_task

    docs = [d for d in _mixed_docs() if d]
    path = _write(tmp_path, "ranges.txt", docs)
    for n_parts in (1, 2, 5, 13):
        total: Counter = Counter()
        tasks = Corpus.resolve(path, docs=RULE).plan(n_parts=n_parts, min_bytes=1)
        assert len(tasks) == min(n_parts, len(docs))
        for task in tasks:
            task_docs = [p for b in task.blocks() for p in b.pieces()]
            for pattern in ("cl100k", r"\S+|\s+"):
                expected = dict(bpe.count_chunks(task_docs, patterns.resolve_pattern(pattern), SPECIALS))
                assert count_task(task, pattern, SPECIALS) == expected
            total.update(count_task(task, "cl100k"))
        assert dict(total) == dict(bpe.count_chunks(docs, patterns.CL100K))
    gz = _write(tmp_path, "ranges.txt.gz", docs, gz=True)
    (task,) = Corpus.resolve(gz, docs=RULE).plan(n_parts=4, min_bytes=1)
    assert count_task(task, "gpt2") == dict(bpe.count_chunks(docs, patterns.GPT2))


def test_regex_path_streams_with_many_blocks(monkeypatch):
    # custom pattern on 3 processes over many small blocks: same counts, bounded in-flight
    from fastbpe.bpe import counting

    monkeypatch.setattr(counting, "DOC_BLOCK_BYTES", 200)
    docs = _mixed_docs() * 3
    expected = dict(bpe.count_chunks(docs, r"\w+|\W", SPECIALS))
    assert count_chunks(documents=iter(docs), pattern=r"\w+|\W", special_tokens=SPECIALS, num_threads=3) == expected
    assert count_chunks(documents=iter(docs), pattern="cl100k", special_tokens=SPECIALS, num_threads=3) == dict(
        bpe.count_chunks(docs, patterns.CL100K, SPECIALS))


@pytest.mark.parametrize("n_tokens", [65536, 65537, 100000])
def test_wide_and_narrow_token_storage(n_tokens):
    # ids are stored as uint16 up to 65536 tokens and as int32 beyond: same results
    counts = bpe.count_chunks(_sample("code")[:60] + ["a" * 300, " " * 129], patterns.CL100K)
    _assert_same(counts, n_tokens)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.binary(max_size=40).map(lambda b: b.rstrip(b"x")), st.integers(1, 5), max_size=60),
       st.dictionaries(st.binary(max_size=40), st.integers(1, 5), max_size=60))
def test_chunk_table_keys_of_every_length(a, b):
    """The chunk table's key words (tails read in place, zero-padded) tell apart chunks
    that differ only by trailing zero bytes or by length, across the 8- and 16-byte
    word boundaries, and tables add up like Counters."""
    from fastbpe import _train

    for n in range(0, 41):  # every length, and the zero-padding lookalikes
        a[b"\x00" * n] = a.get(b"\x00" * n, 0) + 1
        a[b"ab" * (n // 2) + b"\x00" * (n % 2)] = 2
    ta, tb = _train._table_from_counts(a), _train._table_from_counts(b)
    assert ta.to_dict() == a
    merged = _train._merge_tables([ta, tb])
    assert merged.to_dict() == dict(Counter(a) + Counter(b))
