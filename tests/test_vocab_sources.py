"""The vocabularies the tests read: made from what ships when ../shared/vocab is absent,
and the same bytes as the shared folder's when both exist (tests/conftest.py says where
each comes from)."""
from __future__ import annotations

import hashlib

import pytest

# Every file a test session can make (conftest's FREE_FILES; checked below to stay equal).
FREE = [
    "gpt2.tiktoken",
    "p50k_base.tiktoken",
    "cl100k_base.tiktoken",
    "o200k_base.tiktoken",
    "gpt2.tokenizer.json",
    "bert-base-uncased/vocab.txt",
    "bert-base-uncased/tokenizer.json",
    "bert-base-uncased/tokenizer_config.json",
]


def test_the_list_here_is_conftests(vocab_file):
    assert FREE == list(vocab_file.free_files)


@pytest.mark.parametrize("name", FREE)
def test_made_file_is_the_shared_one(vocab_file, name):
    """The .tiktoken files fastbpe ships, the converted gpt2.tokenizer.json and BERT from
    tests/data are byte for byte the files in ../shared/vocab."""
    shared = vocab_file.shared(name)
    if shared is None:
        pytest.skip(f"{name} not in {vocab_file.shared_dir}: nothing to compare the made copy with")
    assert vocab_file.made(name).read_bytes() == shared.read_bytes()


def test_converted_gpt2_tokenizer_json_has_the_published_sha256(vocab_file):
    """Also without the shared folder (the other made files are checked as they are
    unpacked). This is the one check of transformers' converter: a release that writes
    the same tokenizer differently fails here, and the tests that read the file still run
    on what it wrote."""
    data = vocab_file.made("gpt2.tokenizer.json").read_bytes()
    assert hashlib.sha256(data).hexdigest() == vocab_file.free_files["gpt2.tokenizer.json"][1]


def test_without_shared_folder_free_files_are_made_and_others_skip(vocab_file, tmp_path_factory, tmp_path):
    empty = type(vocab_file)(tmp_path_factory, shared_dir=tmp_path)
    assert empty("bert-base-uncased/vocab.txt").read_text(encoding="utf-8").splitlines()[:1] == ["[PAD]"]
    assert empty("cl100k_base.tiktoken").parent != tmp_path
    with pytest.raises(pytest.skip.Exception, match=r"llama-3\.2/tokenizer\.json not found in .*model-licensed"):
        empty("llama-3.2/tokenizer.json")
