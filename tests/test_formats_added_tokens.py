"""HF added tokens with ``"special": false`` are loaded with HF's semantics (issue 21):
matched in text before the pattern, without ``allowed_special``, and not special."""
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastbpe

tokenizers = pytest.importorskip("tokenizers")

ADDED = ["<|im_start|>", "<|im_end|>", "ing", " assistant", "hello world"]

TRICKY = [
    "hi <|im_start|>user",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|><|im_end|><|im_start|>",
    "<|im_start", "im_start|>", "<<|im_start|>|>", " <|im_start|> ", "\n\n<|im_end|>\n",
    "thinking singing ing", "ingingi", "hello world!", "hello  world", "Hello world",
    " assistant assistant", "the assistant's", "a<|im_start|>b<|endoftext|>c", "<|endoftext|>ing",
    "çok güzel 中文 🙂 <|im_end|>", "",
]


@pytest.fixture(scope="module")
def files(vocab_file, tmp_path_factory):
    """(HF tokenizer, path of the tokenizer.json it saved): GPT-2 plus non-special added
    tokens (added the usual way: ``add_tokens``, so ``normalized: true``)."""
    hf = tokenizers.Tokenizer.from_file(str(vocab_file("gpt2.tokenizer.json")))
    hf.add_special_tokens([tokenizers.AddedToken("<|endoftext|>", special=True, normalized=False)])
    hf.add_tokens(ADDED)
    path = tmp_path_factory.mktemp("added") / "gpt2-chat.json"
    hf.save(str(path))
    return hf, path


@pytest.fixture(scope="module")
def enc(files):
    return fastbpe.load(files[1])


def test_the_file_has_non_special_added_tokens(files):
    entries = json.loads(files[1].read_text(encoding="utf-8"))["added_tokens"]
    assert {e["content"]: e["special"] for e in entries} == {"<|endoftext|>": True, **{t: False for t in ADDED}}


def test_added_tokens_are_loaded_and_not_special(files, enc):
    hf, _ = files
    assert enc.added_tokens == {t: hf.token_to_id(t) for t in ADDED}
    assert enc.special_tokens == {"<|endoftext|>": 50256}
    assert not any(enc.is_special_token(i) for i in enc.added_tokens.values())
    assert enc.decode(enc.encode_ordinary("hi <|im_start|>user")) == "hi <|im_start|>user"


@pytest.mark.parametrize("text", TRICKY)
def test_ids_equal_hf(files, enc, text):
    hf, _ = files
    assert enc.encode(text, allowed_special="all") == hf.encode(text).ids
    assert enc.encode_batch([text], allowed_special="all") == [hf.encode(text).ids]
    if "<|endoftext|>" not in text:
        # added tokens need no allowed_special and are never disallowed
        assert enc.encode(text) == enc.encode_ordinary(text) == hf.encode(text).ids
        assert enc.encode_ordinary_batch([text, text]) == [hf.encode(text).ids] * 2
        assert list(enc.encode_to_numpy(text)) == hf.encode(text).ids


def test_specials_keep_tiktoken_rules_beside_added_tokens(enc):
    with pytest.raises(ValueError, match="disallowed special token '<|endoftext|>'"):
        enc.encode("<|im_start|><|endoftext|>")
    # disallowing an added token's text has no effect: it is not a control token
    assert enc.encode("<|im_start|>", disallowed_special={"<|im_start|>"}) == [enc.added_tokens["<|im_start|>"]]
    assert enc.encode_single_token("<|im_end|>") == enc.added_tokens["<|im_end|>"]


_FRAGMENTS = ADDED + ["<|endoftext|>", "<|", "|>", "im_", "start", " ", "\n", "i", "n", "g", "hello", "world", "é", "中", "'s"]


@settings(max_examples=150)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=12).map("".join))
def test_random_mixes_equal_hf(files, enc, text):
    hf, _ = files
    assert enc.encode(text, allowed_special="all") == hf.encode(text).ids


def test_our_file_with_added_tokens_round_trips(files, enc, tmp_path):
    path = tmp_path / "ours.json"
    enc.save(path)
    back = fastbpe.load(path)
    assert back.added_tokens == enc.added_tokens and back.special_tokens == enc.special_tokens
    ours = tokenizers.Tokenizer.from_file(str(path))
    for text in TRICKY:
        assert ours.encode(text).ids == files[0].encode(text).ids == back.encode(text, allowed_special="all")
    transformers = pytest.importorskip("transformers")
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(path))
    for text in TRICKY:
        assert tok(text)["input_ids"] == enc.encode(text, allowed_special="all")


def test_formats_without_added_tokens_say_so(enc, tmp_path):
    with pytest.raises(ValueError, match=r"the added tokens \['.*'\]"):
        enc.save(tmp_path / "vocab.bpe", format="gpt2")
    with pytest.warns(UserWarning, match="the added tokens"):
        enc.save(tmp_path / "t.tiktoken")


def _doc_with(files, **changes) -> dict:
    doc = json.loads(files[1].read_text(encoding="utf-8"))
    for entry in doc["added_tokens"]:
        entry.update(changes.get(entry["content"], {}))
    return doc


@pytest.mark.parametrize(
    "changes",
    [
        {"<|im_start|>": {"lstrip": True}},
        {"<|im_end|>": {"rstrip": True}},
        {"ing": {"rstrip": True}},
        {"ing": {"single_word": True}},
        {"<|im_start|>": {"lstrip": True, "rstrip": True, "single_word": True}},
        {"<|im_start|>": {"content": "<|endoftext|>x"}},
    ],
    ids=["lstrip", "rstrip", "rstrip-word", "single_word", "all-flags", "two-passes"],
)
def test_every_flag_equals_hf(files, tmp_path, changes):
    """Once refused (issue 21); HF's pipeline (issue 38) honours them: ids equal HF's."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps(_doc_with(files, **changes)), encoding="utf-8")
    ours, hf = fastbpe.load(path), tokenizers.Tokenizer.from_file(str(path))
    assert ours.engine == "pipeline"
    for text in TRICKY + ["x <|im_start|> y", "a<|im_end|>  b", "sing ing ing", "<|endoftext|>xy"]:
        assert ours.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids, text
