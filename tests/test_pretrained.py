"""``fastbpe.from_pretrained`` (issue 38 section 3): a model folder, or a model name in
the local Hugging Face cache resolved offline as ``huggingface_hub`` does. No test uses
the network: the cache is a fake folder in tmp_path holding the small gpt2.tokenizer.json."""
from __future__ import annotations

import json
import shutil

import pytest

import fastbpe
from fastbpe.pretrained import TokenizerConfig, hub_cache, resolve

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture()
def fake_cache(tmp_path, vocab_file, monkeypatch):
    """``<cache>/models--org--tiny/{refs/main, snapshots/<commit>/tokenizer.json}``."""
    snap = tmp_path / "hub" / "models--org--tiny" / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    shutil.copy(vocab_file("gpt2.tokenizer.json"), snap / "tokenizer.json")
    (snap / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": {"__type": "AddedToken", "content": "<|endoftext|>"}, "eos_token": "<|endoftext|>",
        "add_bos_token": False, "chat_template": [{"name": "default", "template": "{{ x }}"}]}))
    (tmp_path / "hub" / "models--org--tiny" / "refs").mkdir()
    (tmp_path / "hub" / "models--org--tiny" / "refs" / "main").write_text(COMMIT + "\n")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return snap


def test_cached_name_resolves_through_refs_main(fake_cache, vocab_file):
    enc = fastbpe.from_pretrained("org/tiny")
    assert enc.name == "org/tiny"
    assert enc.encode("Hello world") == fastbpe.load(vocab_file("gpt2.tokenizer.json")).encode("Hello world")
    assert enc.config.bos_token == "<|endoftext|>" and enc.config.add_bos_token is False
    assert enc.config.chat_template == {"default": "{{ x }}"}
    assert resolve("org/tiny", revision=COMMIT) == fake_cache


def test_hub_cache_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hub_cache() == tmp_path / "home" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "c"))
    assert hub_cache() == tmp_path / "c"


def test_missing_name_says_where_it_looked(fake_cache):
    with pytest.raises(FileNotFoundError, match=r"org/absent.*models--org--absent/refs/main: not found.*HF_HUB_OFFLINE"):
        fastbpe.from_pretrained("org/absent")
    with pytest.raises(FileNotFoundError, match=r"refs/v9: not found"):
        fastbpe.from_pretrained("org/tiny", revision="v9")
    with pytest.raises(FileNotFoundError, match="local_files_only=True"):
        fastbpe.from_pretrained("org/absent", local_files_only=True)
    with pytest.raises(FileNotFoundError, match="not a model name"):
        fastbpe.from_pretrained("./no/such/../folder")


def test_bad_arguments(fake_cache):
    with pytest.raises(TypeError, match="path_or_name"):
        fastbpe.from_pretrained(3)
    with pytest.raises(TypeError, match="revision"):
        fastbpe.from_pretrained("org/tiny", revision=None)
    (fake_cache / "tokenizer_config.json").write_text("{")
    with pytest.raises(ValueError, match="tokenizer_config.json: not JSON"):
        fastbpe.from_pretrained("org/tiny")
    (fake_cache / "tokenizer_config.json").write_text('{"add_bos_token": "yes"}')
    with pytest.raises(ValueError, match="add_bos_token: true or false expected"):
        fastbpe.from_pretrained("org/tiny")


def test_llama_folder_config_and_ids(vocab_file):
    folder = vocab_file("llama-3.2/tokenizer.json").parent
    enc = fastbpe.from_pretrained(folder)
    assert enc.name == "llama-3.2"
    assert (enc.config.bos_token, enc.config.eos_token, enc.config.pad_token) == (
        "<|begin_of_text|>", "<|end_of_text|>", "<|finetune_right_pad_id|>")
    assert enc.encode("Hello", add_special_tokens=True)[0] == enc.encode_single_token("<|begin_of_text|>")


def test_config_reads_chat_template_file(tmp_path):
    (tmp_path / "chat_template.jinja").write_text("{{ messages }}")
    (tmp_path / "special_tokens_map.json").write_text('{"unk_token": "<unk>"}')
    c = TokenizerConfig.from_folder(tmp_path)
    assert (c.chat_template, c.unk_token) == ("{{ messages }}", "<unk>")


def test_cli_takes_a_folder_and_a_cached_name(fake_cache, tmp_path, vocab_file):
    from tests.test_cli import ok, run

    text = tmp_path / "t.txt"
    text.write_text("Hello world, hello tokens\n")
    want = len(fastbpe.load(vocab_file("gpt2.tokenizer.json")).encode("Hello world, hello tokens\n"))
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    for spec in ("org/tiny", fake_cache):
        out = ok(run("count", "-t", spec, text, env_extra=env))
        assert str(want) in out, out
    stats = ok(run("stats", "org/tiny", str(fake_cache), "--files", text, env_extra=env))
    assert "org/tiny" in stats
    ok(run("encode", "-t", "org/tiny", "--no-eot", "--shards", tmp_path / "shards", text, env_extra=env))
    from fastbpe import shards

    assert len(shards.open(tmp_path / "shards")) == want
    proc = run("count", "-t", "org/absent", text, env_extra=env)
    assert proc.returncode == 2 and b"models--org--absent/refs/main: not found" in proc.stderr
