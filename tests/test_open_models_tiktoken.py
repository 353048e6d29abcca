"""Rank files of open models (issue 38, row 4): no silent default pattern, and Meta's
Llama 3 / Llama 4 ``tokenizer.model`` load with their published pattern and special
tokens, with ids equal to tiktoken built from the same file."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastbpe
from fastbpe.formats.open_models import OPEN_MODELS, llama3_special_tokens, llama4_special_tokens
from fastbpe.reference import patterns

sys.path.insert(0, str(Path(__file__).parent))
from open_corpus import documents  # noqa: E402

tiktoken = pytest.importorskip("tiktoken")

_CACHE: dict = {}


def _pair(vocab_file, name: str):
    """(fastbpe.load of Meta's file, tiktoken built from its ranks as Meta's code does)."""
    if name not in _CACHE:
        from tiktoken.load import load_tiktoken_bpe

        path = vocab_file(f"{name}/tokenizer.model")
        ranks = load_tiktoken_bpe(str(path))
        specials = (llama3_special_tokens if name == "llama-3.2" else llama4_special_tokens)(len(ranks))
        pat = patterns.LLAMA3 if name == "llama-3.2" else patterns.LLAMA4
        _CACHE[name] = fastbpe.load(path), tiktoken.Encoding(name, pat_str=pat, mergeable_ranks=ranks, special_tokens=specials)
    return _CACHE[name]


@pytest.fixture(scope="module", params=["llama-3.2", "llama-4"])
def meta(request, vocab_file):
    return _pair(vocab_file, request.param)


def test_meta_files_are_recognised(meta):
    ours, theirs = meta
    assert ours.pat_str == theirs._pat_str
    assert ours.special_tokens == theirs._special_tokens
    assert ours.n_vocab == theirs.n_vocab


def test_meta_files_encode_as_tiktoken(meta):
    ours, theirs = meta
    docs = documents(300)
    assert ours.encode_ordinary_batch(docs) == theirs.encode_ordinary_batch(docs)
    for doc in docs[:60]:
        assert ours.encode(doc, allowed_special="all") == theirs.encode(doc, allowed_special="all")
        assert ours.decode(ours.encode_ordinary(doc)) == doc


@settings(max_examples=150)
@given(text=st.text(max_size=200))
def test_meta_files_encode_as_tiktoken_hypothesis(vocab_file, text):
    for name in ("llama-3.2", "llama-4"):
        ours, theirs = _pair(vocab_file, name)
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)


def test_llama3_published_specials():
    specials = llama3_special_tokens(128000)
    assert len(specials) == 256
    assert [specials[t] for t in ("<|begin_of_text|>", "<|end_of_text|>", "<|python_tag|>", "<|reserved_special_token_2|>")] == [
        128000, 128001, 128010, 128011]


# ----------------------------------------------------------------- unknown rank files
@pytest.fixture
def unknown_file(tmp_path):
    """A rank file no one publishes: its bytes and a few merged tokens."""
    from fastbpe.formats.tiktoken_bpe import write_tiktoken

    ranks = {bytes([i]): i for i in range(256)} | {b"10": 256, "１".encode(): 257, "０".encode(): 258}
    return write_tiktoken(tmp_path / "mine.tiktoken", ranks)


def test_unknown_rank_file_needs_a_pattern(unknown_file):
    """Row 4: it used to load with cl100k's pattern, no warning."""
    with pytest.raises(ValueError, match=r"mine\.tiktoken.*pass pat_str=.*model= one of \['llama3', 'llama4', 'qwen'\]"):
        fastbpe.load(unknown_file)


def test_unknown_rank_file_with_a_pattern_or_a_model(unknown_file):
    enc = fastbpe.load(unknown_file, pat_str="cl100k")
    assert enc.pat_str == patterns.CL100K and enc.special_tokens == {}
    qwen = fastbpe.load(unknown_file, model="qwen")
    assert qwen.pat_str == patterns.QWEN
    assert qwen.special_tokens == OPEN_MODELS["qwen"].special_tokens(259)
    # Qwen splits every digit: "１０" is two chunks (cl100k's pattern keeps it one)
    assert len(qwen.encode_ordinary("１０")) == 2
    assert qwen.encode_ordinary("10") == [ord("1"), ord("0")]
    with pytest.raises(ValueError, match="unknown model 'llama5'"):
        fastbpe.load(unknown_file, model="llama5")
    with pytest.raises(TypeError, match="model must be a str"):
        fastbpe.load(unknown_file, model=3)


def test_model_is_only_for_rank_files(vocab_file):
    with pytest.raises(ValueError, match="model= names the meaning of a rank file"):
        fastbpe.load(vocab_file("gpt2.tokenizer.json"), model="llama3")
