"""The two-phase block loop (``fastbpe._chunk_block``, ``Tuning.block_chunks``): the same
ids as tiktoken and as the fused loop, for every block size, on fixed and generated
texts, with warm and cold chunk caches, on threads, through pickling, and with errors
reported at the same byte."""
from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe._tuning import BLOCK_MAX_CHUNKS as BLOCK_MAX
from fastbpe._encode import CoreBPE, default_tuning
from fastbpe.reference import patterns

VOCABS = ["gpt2", "cl100k_base", "o200k_base"]
# 1: every block one chunk; 2, 3: blocks that end inside short runs; 64 and BLOCK_MAX:
# blocks longer than most ~2 KB documents' segments.
SIZES = [1, 2, 3, 64, BLOCK_MAX]

_CORES: dict = {}


@pytest.fixture(scope="module")
def pair(tiktoken_encoding):
    """pair(name) -> (a CoreBPE kept for the module, tiktoken's Encoding)."""
    tks = {n: tiktoken_encoding(n) for n in VOCABS}
    for n, tk in tks.items():
        _CORES.setdefault(n, CoreBPE(tk._mergeable_ranks, tk._special_tokens, tk._pat_str))
    return lambda name: (_CORES[name], tks[name])


TEXTS = [
    "",
    "a",
    "ab",
    "Hello, world! This is a test of the emergency broadcast system.",
    "The quick brown fox jumps over the lazy dog. " * 40,
    "def f(x):\n    return x ** 2  # square\n\nclass A(B):\n\tpass\r\n" * 10,
    "İstanbul'da ığdır ŞEHİR ÇOK güzel, öğrenciler ülkeyi görüyor. Iı İi " * 10,
    "我们今天去公园散步，天气非常好！机器学习和自然语言处理。" * 10,
    "I'm you're he's 'S 'T 'RE DON'T ’s ‘quoted’ 12345 ١٢٣ " * 10,
    "a<|endoftext|>b <|endoftext|><|endoftext|>\n<|endofprompt|> c" * 5,
    " " * 50 + "x" + "\t" * 30 + "\n" * 20 + "y" + " \n" * 10,
    "x" * 3000,
    # chunks longer than the chunk cache's keys (24 bytes) inside blocks
    ("supercalifragilisticexpialidocious " * 3 + "a" * 40 + " ") * 8,
]


def _with_block(core, size):
    return core.set_tuning(block_chunks=size)


@pytest.mark.parametrize("name", VOCABS)
@pytest.mark.parametrize("size", SIZES)
def test_block_loop_matches_tiktoken(pair, name, size):
    core, tk = pair(name)
    old = _with_block(core, size)
    try:
        for cold in (True, False):          # cold caches, then the same texts warm
            if cold:
                core._clear_chunk_caches()
            for text in TEXTS:
                assert core.encode_ordinary(text) == tk.encode_ordinary(text), text[:40]
                assert core.encode(text, tk.special_tokens_set) == tk.encode(
                    text, allowed_special="all"), text[:40]
    finally:
        core.set_tuning(**old)


@pytest.mark.parametrize("name", VOCABS)
def test_block_loop_equals_fused_loop_on_real_text(pair, name):
    core, _ = pair(name)
    import inspect
    import json

    text = inspect.getsource(json) + open("/usr/share/common-licenses/GPL-3").read()
    want = core.encode_ordinary(text)
    for size in SIZES:
        old = _with_block(core, size)
        try:
            core._clear_chunk_caches()
            assert core.encode_ordinary(text) == want
            assert core.encode_to_numpy(text).tolist() == want
        finally:
            core.set_tuning(**old)


_WORDS = st.sampled_from(
    ["word", " word", " Word", "WORD", "camelCase", " ", "  ", "\n", "\n\n", " \n ", "\t",
     ".", ",", "!\n", "(", "'s", "'ll", "12", "1234", "ç", " şu", "İ", "ı", "é", "“",
     "中文", "👍", "\u0301", "<|endoftext|>", "x" * 30, " antidisestablishment"])


@pytest.mark.parametrize("name", VOCABS)
@settings(max_examples=200, deadline=None)
@given(words=st.lists(_WORDS, max_size=120), size=st.sampled_from(SIZES),
       other=st.text(max_size=30))
def test_block_loop_hypothesis(pair, name, words, size, other):
    core, tk = pair(name)
    text = "".join(words) + other
    text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    old = _with_block(core, size)
    try:
        assert core.encode_ordinary(text) == tk.encode_ordinary(text)
        assert core.encode(text, tk.special_tokens_set) == tk.encode(text, allowed_special="all")
    finally:
        core.set_tuning(**old)


@pytest.mark.parametrize("threads", [2, 3])
def test_block_loop_in_batches_and_files(pair, threads):
    core, tk = pair("cl100k_base")
    texts = [TEXTS[i % len(TEXTS)] + f" {i}" for i in range(60)]
    want = [tk.encode_ordinary(t) for t in texts]
    old = _with_block(core, 64)
    try:
        assert core.encode_ordinary_batch(texts, threads) == want
        flat, offsets = core.encode_batch_to_numpy(texts, frozenset(), threads)
        assert [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == want
        joined = "\n".join(texts)
        got = core.encode_utf8_to_numpy(joined.encode(), frozenset(), threads)
        assert got.tolist() == tk.encode_ordinary(joined)
    finally:
        core.set_tuning(**old)


def test_block_size_survives_pickling_as_the_default(pair):
    """An unpickled encoder copies the process default, as a new one does."""
    core, tk = pair("gpt2")
    old = default_tuning(block_chunks=3)
    try:
        clone = pickle.loads(pickle.dumps(core))
        assert clone.tuning["block_chunks"] == 3
        assert clone.encode_ordinary(TEXTS[4]) == tk.encode_ordinary(TEXTS[4])
    finally:
        default_tuning(**old)


@pytest.mark.parametrize("size", SIZES)
def test_block_loop_reports_the_failing_byte(size):
    """A byte that is not a token is reported at its offset, whichever block it is in."""
    ranks = {bytes([b]): b for b in range(256) if b != ord("q")}
    ranks[b"ab"] = 256
    core = CoreBPE(ranks, {}, patterns.GPT2)
    core.set_tuning(block_chunks=size)
    for text in ["ab ab q", "q", "ab " * 100 + "q ab", "ab" * 10 + " " + "ab " * 300 + "zq"]:
        fused = CoreBPE(ranks, {}, patterns.GPT2)
        fused.set_tuning(block_chunks=0)
        with pytest.raises(ValueError) as got:
            core.encode_ordinary(text)
        with pytest.raises(ValueError) as want:
            fused.encode_ordinary(text)
        assert str(got.value) == str(want.value)
        assert str(text.index("q")) in str(got.value)


def test_block_chunks_bounds():
    core = CoreBPE({bytes([b]): b for b in range(256)}, {}, patterns.GPT2)
    with pytest.raises(ValueError, match="block_chunks"):
        core.set_tuning(block_chunks=BLOCK_MAX + 1)
    with pytest.raises(ValueError, match="block_chunks"):
        core.set_tuning(block_chunks=-1)
    with pytest.raises(TypeError, match="block_chunks"):
        core.set_tuning(block_chunks=1.5)
