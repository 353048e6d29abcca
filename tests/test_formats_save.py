"""Saving: what a format cannot hold (issue 22, item 3) and folders transformers loads
(item 2)."""
import json
import os
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
     ("gpt2_trained", r"the split pattern \(loading it needs pat_str=\) and the special tokens")],
)
def test_tiktoken_warns_what_it_loses(which, lost, request, tmp_path):
    enc = request.getfixturevalue(which)
    with pytest.warns(UserWarning, match=lost):
        enc.save(tmp_path / "t.tiktoken")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        enc.save(tmp_path / "t.tiktoken", lossy=True)
    assert fastbpe.load(tmp_path / "t.tiktoken", pat_str=enc.pat_str).mergeable_ranks == enc.mergeable_ranks


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


# ----------------------------------------------------------------- tokenizer.json bytes (issue 24)
# A save formats model.merges and model.vocab itself (hf_bpe._merge_texts and
# dumps_tokenizer_json, for speed); the file must stay byte-identical to the plain
# derivation: every split of every multi-byte token into two tokens, sorted by (token
# rank, left rank, right rank), written by json.dumps(indent=2).
def _derived_merges(ranks):
    from fastbpe.formats.hf_bpe import bytes_to_unicode

    def text(tok):
        return "".join(bytes_to_unicode()[b] for b in tok)

    splits = sorted((rank, ranks[tok[:i]], ranks[tok[i:]], tok[:i], tok[i:])
                    for tok, rank in ranks.items() for i in range(1, len(tok))
                    if tok[:i] in ranks and tok[i:] in ranks)
    return [[text(s[3]), text(s[4])] for s in splits]


def _derived_tokenizer_json(enc) -> bytes:
    from fastbpe.formats.hf_bpe import to_hf_json

    doc = to_hf_json(enc.mergeable_ranks, enc.pat_str, enc.special_tokens, enc.added_tokens)
    doc["model"]["merges"] = _derived_merges(enc.mergeable_ranks)
    return json.dumps(doc, ensure_ascii=False, indent=2).encode("utf-8")


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _bytes_only(specials):
    return fastbpe.Encoding("b", pat_str=r"\S+|\s+", mergeable_ranks={bytes([i]): i for i in range(256)},
                            special_tokens=specials)


ODD_SPECIALS = {'"q"\\ \n\t': 256, "\0fastbpe:merges\0": 257, "\0fastbpe:vocab\0": 258, "é中🙂\u2028": 259}


@pytest.mark.parametrize("which", ["gpt2_trained", "cl100k_trained", "no_specials", "larger", "added",
                                   "odd_specials", "bytes_only", "hf_gpt2", "tiktoken_gpt2"])
def test_tokenizer_json_is_the_derived_bytes(which, request, vocab_file, tmp_path):
    if which in ("gpt2_trained", "cl100k_trained"):
        enc = request.getfixturevalue(which)
    elif which == "no_specials":
        enc = _train("o200k", [])
    elif which == "larger":
        docs = [TEXT * 3, "the quick brown fox jumps over the lazy dog " * 20, "aaaa bbbb abab baba " * 30] * 4
        enc = fastbpe.train_bpe(documents=docs, vocab_size=600, pattern=r"\S+|\s+", progress=False)
    elif which == "added":
        enc = fastbpe.Encoding("chat", pat_str=r"\S+|\s+",
                               mergeable_ranks={bytes([i]): i for i in range(256)} | {b"hi": 256, b"ih": 257, b"hih": 258},
                               special_tokens={"<|eot|>": 300}, added_tokens={"<|im|>": 259})
    elif which == "odd_specials":
        enc = fastbpe.Encoding("odd", pat_str=r"\S+|\s+",
                               mergeable_ranks={bytes([i]): i for i in range(256)} | {b"ab": 260, b"abc": 262, b"bc": 261},
                               special_tokens=ODD_SPECIALS)
    elif which == "bytes_only":
        enc = _bytes_only({})
    elif which == "hf_gpt2":
        enc = fastbpe.load(vocab_file("gpt2.tokenizer.json"))
    else:
        enc = fastbpe.load(vocab_file("gpt2.tiktoken"))
    expected = _sha(_derived_tokenizer_json(enc))
    if which == "hf_gpt2":   # a loaded tokenizer.json saves its own pipeline: the same bytes
        expected = _sha(vocab_file("gpt2.tokenizer.json").read_bytes())
    enc.save(tmp_path / "tokenizer.json")
    assert _sha((tmp_path / "tokenizer.json").read_bytes()) == expected
    enc.save(tmp_path / "folder", transformers=True)
    assert _sha((tmp_path / "folder" / "tokenizer.json").read_bytes()) == expected


@settings(max_examples=60)
@given(st.lists(st.binary(min_size=2, max_size=5), max_size=40), st.randoms(use_true_random=False))
def test_merge_texts_is_the_derivation(tokens, rnd):
    """Any ranks: multi-byte tokens in any order of ids, missing parts, gaps in the ids."""
    from fastbpe.formats.hf_bpe import _merge_texts

    tokens = [bytes([i]) for i in range(256)] + list(dict.fromkeys(tokens))
    ids = rnd.sample(range(3 * len(tokens)), len(tokens))
    ranks = dict(zip(tokens, ids))
    assert _merge_texts(ranks) == _derived_merges(ranks)
    shared = ranks | {tok: 0 for tok in tokens[256:258]}  # shared ranks (not an Encoding's)
    assert _merge_texts(shared) == _derived_merges(shared)


@pytest.mark.parametrize("doc", [
    {"model": {"vocab": {}, "merges": []}},
    {"a": [1, {"b": None}], "model": {"merges": [["x", "\"y\\"]], "type": "BPE", "vocab": {"\n": 1, "é": 2}}, "z": "\0fastbpe:vocab\0"},
    {"model": {"vocab": {"a": True}, "merges": []}},           # not ints: json.dumps writes it
    {"model": {"vocab": {"a": 1}, "merges": [["a", "b", "c"]]}},
    {"model": {"vocab": {"a": 1}}},
    {"model": [1, 2]},
])
def test_dumps_tokenizer_json_is_json_dumps(doc):
    from fastbpe.formats.hf_bpe import dumps_tokenizer_json

    assert dumps_tokenizer_json(doc) == json.dumps(doc, ensure_ascii=False, indent=2)
