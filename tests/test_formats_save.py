"""Saving: what a format cannot hold (issue 22, item 3) and folders transformers loads
(item 2)."""
import json
import os
import warnings

import pytest

import fastbpe
from fastbpe.reference import patterns

TEXT = "Hello world! It's 2024.\n\tdef f(x): return x  # çok güzel 中文 🙂"


def _train(pattern, specials):
    docs = ["the quick brown fox jumps over the lazy dog. " * 3, "def f(x):\n    return x * 2\n  \n"] * 5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the tiny corpus stops early
        return fastbpe.train_bpe(documents=docs, vocab_size=300, pattern=pattern, special_tokens=specials, progress=False)


@pytest.fixture(scope="module")
def cl100k_trained():
    return _train("cl100k", ["<|endoftext|>", "<|pad|>"])


@pytest.fixture(scope="module")
def gpt2_trained():
    return _train("gpt2", ["<|endoftext|>"])


# ----------------------------------------------------------------- what a format cannot hold
def test_gpt2_files_refuse_another_pattern(cl100k_trained, tmp_path):
    with pytest.raises(ValueError, match=r"cannot hold the split pattern \(it would be read back with the gpt2 pattern\).*lossy=True"):
        cl100k_trained.save(tmp_path / "vocab.bpe", format="gpt2")
    assert os.listdir(tmp_path) == []


def test_gpt2_files_save_a_lossy_copy_when_asked(cl100k_trained, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cl100k_trained.save(tmp_path / "vocab.bpe", format="gpt2", lossy=True)
    back = fastbpe.load(tmp_path)
    assert back.mergeable_ranks == cl100k_trained.mergeable_ranks and back.pat_str == patterns.GPT2


def test_gpt2_files_take_a_gpt2_pattern_silently(gpt2_trained, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gpt2_trained.save(tmp_path, format="gpt2")
    back = fastbpe.load(tmp_path)
    assert back.special_tokens == gpt2_trained.special_tokens and back.encode(TEXT) == gpt2_trained.encode(TEXT)


@pytest.mark.parametrize(
    "which, lost",
    [("cl100k_trained", r"the special tokens \['<\|endoftext\|>', '<\|pad\|>'\] of"),
     ("gpt2_trained", r"the split pattern \(it would be read back with the cl100k pattern\) and the special tokens")],
)
def test_tiktoken_warns_what_it_loses(which, lost, request, tmp_path):
    enc = request.getfixturevalue(which)
    with pytest.warns(UserWarning, match=lost):
        enc.save(tmp_path / "t.tiktoken")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        enc.save(tmp_path / "t.tiktoken", lossy=True)
    assert fastbpe.load(tmp_path / "t.tiktoken").mergeable_ranks == enc.mergeable_ranks


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_tiktoken_of_a_public_encoding_loses_nothing(name, vocab_file, tmp_path):
    """load recognises the public files by their sha256, so it restores what was saved."""
    enc = fastbpe.load(vocab_file(f"{name}.tiktoken"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        enc.save(tmp_path / "t.tiktoken")
    back = fastbpe.load(tmp_path / "t.tiktoken")
    assert (back.pat_str, back.special_tokens) == (enc.pat_str, enc.special_tokens)


def test_tokenizer_json_holds_everything(gpt2_trained, cl100k_trained, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for enc in (gpt2_trained, cl100k_trained):
            enc.save(tmp_path / "t.json")
            back = fastbpe.load(tmp_path / "t.json")
            assert (back.pat_str, back.special_tokens) == (enc.pat_str, enc.special_tokens)


# ----------------------------------------------------------------- folders for transformers
def _auto(folder):
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)


def test_a_folder_gets_what_transformers_reads(vocab_file, tmp_path):
    enc = fastbpe.load(vocab_file("cl100k_base.tiktoken"))
    folder = tmp_path / "cl100k"
    folder.mkdir()
    enc.save(folder)
    assert sorted(os.listdir(folder)) == ["special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"]
    roles = json.loads((folder / "special_tokens_map.json").read_text(encoding="utf-8"))
    assert roles == {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}
    assert fastbpe.load(folder).special_tokens == enc.special_tokens
    tok = _auto(folder)
    assert (tok.eos_token, tok.bos_token, tok.unk_token, tok.pad_token) == ("<|endoftext|>",) * 3 + (None,)
    assert tok.eos_token_id == 100257
    text = TEXT + "<|endofprompt|><|fim_prefix|>"
    assert tok(text)["input_ids"] == enc.encode(text, allowed_special="all")
    assert tok.decode(enc.encode(TEXT)) == TEXT


def test_transformers_true_creates_the_folder_and_sets_pad(cl100k_trained, tmp_path):
    cl100k_trained.save(tmp_path / "new" / "tok", transformers=True)
    tok = _auto(tmp_path / "new" / "tok")
    assert tok.pad_token == "<|pad|>" and tok.pad_token_id == cl100k_trained.special_tokens["<|pad|>"]
    assert tok.eos_token_id == cl100k_trained.eot_token
    batch = tok(["ab", "the quick brown fox"], padding=True)["input_ids"]
    assert batch[0][-1] == tok.pad_token_id and batch[1] == cl100k_trained.encode_ordinary("the quick brown fox")


def test_transformers_true_takes_a_tokenizer_json_path_but_no_other_name(gpt2_trained, tmp_path):
    gpt2_trained.save(tmp_path / "tokenizer.json", transformers=True)
    assert (tmp_path / "tokenizer_config.json").exists()
    with pytest.raises(ValueError, match="from_pretrained looks for tokenizer.json"):
        gpt2_trained.save(tmp_path / "c.json", transformers=True)
    with pytest.raises(ValueError, match="not format='gpt2'"):
        gpt2_trained.save(tmp_path / "d", transformers=True, format="gpt2")


def test_a_wordpiece_folder_loads_in_transformers(vocab_file, tmp_path):
    wp = fastbpe.load(vocab_file("bert-base-uncased/vocab.txt"))
    wp.save(tmp_path / "bert", transformers=True)
    assert fastbpe.load(tmp_path / "bert").vocab == wp.vocab
    tok = _auto(tmp_path / "bert")
    roles = (tok.unk_token, tok.sep_token, tok.pad_token, tok.cls_token, tok.mask_token)
    assert roles == ("[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]") and tok.pad_token_id == 0
    for text in ["Hello, world!", "çok güzel 中文 [MASK] x"]:
        assert tok(text)["input_ids"] == wp.encode(text, allowed_special="all")   # HF matches special text
