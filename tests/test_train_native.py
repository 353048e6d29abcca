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
