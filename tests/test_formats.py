"""BPE file formats: round trips, what peers load, malformed files, atomic saves."""
import json
import os

import pytest

import fastbpe
from fastbpe.io import atomic as _atomic
from fastbpe.formats.gpt2_files import read_gpt2_files, write_gpt2_files
from fastbpe.formats.tiktoken_bpe import parse_tiktoken_bpe, read_tiktoken

TEXT = "Hello world! It's 2024.\n\tdef f(x): return x  # çok güzel 中文 🙂 <|endoftext|>"


@pytest.fixture(scope="module")
def trained():
    docs = ["the quick brown fox jumps over the lazy dog. " * 3, "def f(x):\n    return x * 2\n", "çok güzel, İyi günler 中文"] * 5
    # the tiny corpus runs out of pairs before 400 tokens: the trainer says so and stops
    with pytest.warns(RuntimeWarning, match="stopped early"):
        return fastbpe.train_bpe(documents=docs, vocab_size=400, pattern="cl100k", special_tokens=["<|endoftext|>", "<|pad|>"], progress=False)


def test_load_real_tiktoken_files(vocab_file, tiktoken_encoding):
    for name in ["gpt2", "cl100k_base", "o200k_base"]:
        enc = fastbpe.load(vocab_file(f"{name}.tiktoken"))
        tk = tiktoken_encoding(name)
        assert enc.name == name and enc.pat_str == tk._pat_str
        assert enc.special_tokens == tk._special_tokens
        assert enc.encode(TEXT, allowed_special="all") == tk.encode(TEXT, allowed_special="all")


def test_tiktoken_round_trip_and_tiktoken_loads_ours(trained, tmp_path):
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    path = tmp_path / "ours.tiktoken"
    with pytest.warns(UserWarning, match="holds only ranks"):
        trained.save(path)
    assert load_tiktoken_bpe(str(path)) == trained.mergeable_ranks
    back = fastbpe.load(path, pat_str=trained.pat_str, special_tokens=trained.special_tokens)
    assert back.encode(TEXT, allowed_special="all") == trained.encode(TEXT, allowed_special="all")
    tk = tiktoken.Encoding("ours", pat_str=trained.pat_str, mergeable_ranks=load_tiktoken_bpe(str(path)),
                           special_tokens=trained.special_tokens)
    assert tk.encode(TEXT, allowed_special="all") == trained.encode(TEXT, allowed_special="all")


def test_hf_json_round_trip_and_hf_encodes_the_same(trained, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    path = tmp_path / "tokenizer.json"
    trained.save(path)
    back = fastbpe.load(path)
    assert back.mergeable_ranks == trained.mergeable_ranks
    assert back.pat_str == trained.pat_str and back.special_tokens == trained.special_tokens
    hf = tokenizers.Tokenizer.from_file(str(path))
    for text in [TEXT.replace("<|endoftext|>", ""), "ab abab  \n\n x", "İstanbul'da 123456"]:
        assert hf.encode(text).ids == trained.encode_ordinary(text)
    assert hf.encode("a<|endoftext|>b").ids == trained.encode("a<|endoftext|>b", allowed_special="all")


def test_real_gpt2_tokenizer_json_loads_and_equals_tiktoken(vocab_file, tiktoken_encoding):
    enc = fastbpe.load(vocab_file("gpt2.tokenizer.json"))
    tk = tiktoken_encoding("gpt2")
    assert enc.mergeable_ranks == tk._mergeable_ranks
    text = TEXT.replace("<|endoftext|>", "")
    assert enc.encode(text) == tk.encode(text)


def test_real_cl100k_saved_as_hf_json_equals_hf(vocab_file, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    enc = fastbpe.load(vocab_file("cl100k_base.tiktoken"))
    enc.save(tmp_path / "cl100k.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "cl100k.json"))
    text = TEXT.replace("<|endoftext|>", "")
    assert hf.encode(text).ids == enc.encode(text)


def test_gpt2_files_round_trip_and_tiktoken_reads_them(trained, tmp_path, vocab_file):
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks

    enc = fastbpe.load(vocab_file("gpt2.tiktoken"))
    enc.save(tmp_path / "vocab.bpe", format="gpt2")
    ranks, specials = read_gpt2_files(tmp_path / "encoder.json", tmp_path / "vocab.bpe")
    assert ranks == enc.mergeable_ranks and specials == {"<|endoftext|>": 50256}
    assert data_gym_to_mergeable_bpe_ranks(str(tmp_path / "vocab.bpe"), str(tmp_path / "encoder.json")) == ranks
    write_gpt2_files(tmp_path / "e2.json", tmp_path / "v2.bpe", trained.mergeable_ranks, trained.special_tokens)
    assert read_gpt2_files(tmp_path / "e2.json", tmp_path / "v2.bpe") == (trained.mergeable_ranks, trained.special_tokens)
    assert fastbpe.load(tmp_path).encode("hello") == enc.encode("hello")


@pytest.mark.parametrize(
    "content, message",
    [
        (b"YQ== 0\nYg==\n", "line 2: expected"),
        (b"YQ== 0\n!!!! 1\n", "line 2: invalid base64"),
        (b"YQ== zero\n", "line 1: rank 'zero'"),
        (b"YQ== 0\nYQ== 1\n", "line 2: duplicate token"),
        (b"YQ== 0\nYg== 0\n", "line 2: duplicate rank 0"),
        (b"\n\n", "no tokens"),
    ],
)
def test_malformed_tiktoken_files_name_the_line(content, message, tmp_path):
    path = tmp_path / "bad.tiktoken"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message) as info:
        read_tiktoken(path)
    assert str(path) in str(info.value)


def test_malformed_json_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        fastbpe.load(bad)
    bad.write_text(json.dumps({"model": {"type": "Unigram"}}))
    with pytest.raises(ValueError, match="Unigram"):
        fastbpe.load(bad)
    bad.write_text(json.dumps({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}}))
    with pytest.raises(ValueError, match="lacks 255 byte-level characters"):
        fastbpe.load(bad)


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.tiktoken"):
        fastbpe.load(tmp_path / "nope.tiktoken")
    (tmp_path / "x.weird").write_text("x")
    with pytest.raises(ValueError, match="cannot tell the format"):
        fastbpe.load(tmp_path / "x.weird")
    with pytest.raises(TypeError):
        fastbpe.load(123)


def test_save_is_atomic(trained, tmp_path, monkeypatch):
    path = tmp_path / "tok.json"
    trained.save(path)
    before = path.read_bytes()

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(_atomic.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        trained.save(path)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["tok.json"]  # no temporary file left behind


def test_parse_tiktoken_doc():
    assert parse_tiktoken_bpe(b"YQ== 0\n") == {b"a": 0}
