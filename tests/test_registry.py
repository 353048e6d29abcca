"""get_encoding: offline, checked, and clear about where the file should be."""
import shutil

import pytest

import fastbpe
from fastbpe import registry


@pytest.fixture(autouse=True)
def _fresh(monkeypatch, tmp_path):
    registry.get_encoding.cache_clear()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "no-cache"))
    yield
    registry.get_encoding.cache_clear()


def test_finds_files_in_fastbpe_vocab_dir(vocab_file, monkeypatch, tiktoken_encoding):
    monkeypatch.setenv("FASTBPE_VOCAB_DIR", str(vocab_file("gpt2.tiktoken").parent))
    for name in ["gpt2", "r50k_base", "cl100k_base", "o200k_base"]:
        enc = fastbpe.get_encoding(name)
        tk = tiktoken_encoding("gpt2" if name == "r50k_base" else name)
        assert enc.special_tokens == tk._special_tokens
        assert enc.encode("hello <|endoftext|>", allowed_special="all") == tk.encode("hello <|endoftext|>", allowed_special="all")
    assert fastbpe.get_encoding("gpt2").n_vocab == 50257


def test_finds_files_in_tiktoken_cache(vocab_file, monkeypatch, tmp_path):
    import hashlib

    cache = tmp_path / "cache"
    cache.mkdir()
    key = hashlib.sha1(registry._URLS["cl100k_base"].encode()).hexdigest()
    shutil.copy(vocab_file("cl100k_base.tiktoken"), cache / key)
    monkeypatch.delenv("FASTBPE_VOCAB_DIR", raising=False)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    assert fastbpe.get_encoding("cl100k_base").encode("hi") == [6151]


def test_wrong_file_is_rejected(monkeypatch, tmp_path):
    (tmp_path / "gpt2.tiktoken").write_bytes(b"YQ== 0\n")
    monkeypatch.setenv("FASTBPE_VOCAB_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="sha256 mismatch"):
        fastbpe.get_encoding("gpt2")


def test_missing_file_says_where_to_put_it(monkeypatch, tmp_path):
    monkeypatch.setenv("FASTBPE_VOCAB_DIR", str(tmp_path))
    monkeypatch.setattr(registry, "_PACKAGES", {})
    with pytest.raises(FileNotFoundError, match="FASTBPE_VOCAB_DIR") as info:
        fastbpe.get_encoding("o200k_base")
    assert str(tmp_path) in str(info.value) and "never downloads" in str(info.value)


def test_unknown_name():
    with pytest.raises(ValueError, match="unknown encoding 'p50k'"):
        fastbpe.get_encoding("p50k")
    with pytest.raises(TypeError):
        fastbpe.get_encoding(None)
