"""tokenizer.json files we save mean to HF what they mean to fastbpe (issue 21).

HF gives an added token the id of its string in ``model.vocab``, else the next id after
the vocabulary, whatever id the file states; special ids that are not contiguous after
the ranks (cl100k, o200k, custom ones) used to come out shifted in HF.
"""
import json
import warnings

import pytest

import fastbpe
from fastbpe.formats.hf_bpe import token_to_str
from fastbpe.reference import patterns

tokenizers = pytest.importorskip("tokenizers")

ORDINARY = [
    "Hello world! It's 2024.\n\tdef f(x): return x  # çok güzel 中文 🙂",
    "ab abab  \n\n x",
    "İstanbul'da 123456 ",
    "",
]


def _with_every_special(enc) -> str:
    return "a" + " x ".join(sorted(enc.special_tokens)) + "b<|endoftext|><|endoftext|>"


def _trained_with_gaps():
    docs = ["the quick brown fox jumps over the lazy dog. " * 3, "def f(x):\n    return x * 2\n"] * 5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the tiny corpus stops early
        base = fastbpe.train_bpe(documents=docs, vocab_size=300, pattern="cl100k", progress=False)
    n = len(base.mergeable_ranks)
    # custom ids: out of order, with gaps, one far past the vocabulary
    specials = {"<|endoftext|>": n + 7, "<|pad|>": n + 2, "<|im_start|>": 5000, "[MASK]": n}
    return fastbpe.Encoding("gaps", pat_str=base.pat_str, mergeable_ranks=base.mergeable_ranks, special_tokens=specials)


@pytest.fixture(scope="module", params=["gpt2", "cl100k_base", "o200k_base", "trained"])
def saved(request, vocab_file, tiktoken_encoding, tmp_path_factory):
    """(encoding, path of the tokenizer.json it saved)."""
    if request.param == "trained":
        enc = _trained_with_gaps()
    else:  # the specials of conftest.TIKTOKEN_SPECIALS, through the tiktoken fixture
        specials = tiktoken_encoding(request.param)._special_tokens
        enc = fastbpe.load(vocab_file(f"{request.param}.tiktoken"), special_tokens=specials)
    path = tmp_path_factory.mktemp("hf") / f"{request.param}.json"
    enc.save(path)
    return enc, path


def test_hf_gives_every_special_its_id(saved):
    enc, path = saved
    hf = tokenizers.Tokenizer.from_file(str(path))
    assert {s: hf.token_to_id(s) for s in enc.special_tokens} == enc.special_tokens
    text = _with_every_special(enc)
    assert hf.encode(text).ids == enc.encode(text, allowed_special="all")
    for text in ORDINARY:
        assert hf.encode(text).ids == enc.encode_ordinary(text)
    assert hf.decode(enc.encode(ORDINARY[0])) == ORDINARY[0]


def test_transformers_gives_the_same_ids(saved):
    transformers = pytest.importorskip("transformers")
    enc, path = saved
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(path))
    assert {s: tok.convert_tokens_to_ids(s) for s in enc.special_tokens} == enc.special_tokens
    text = _with_every_special(enc)
    assert tok(text)["input_ids"] == enc.encode(text, allowed_special="all")
    for text in ORDINARY:
        assert tok(text)["input_ids"] == enc.encode_ordinary(text)


def test_fastbpe_reads_its_own_file_back(saved):
    enc, path = saved
    back = fastbpe.load(path)
    assert back.mergeable_ranks == enc.mergeable_ranks and back.special_tokens == enc.special_tokens
    assert back.pat_str == enc.pat_str
    text = _with_every_special(enc)
    assert back.encode(text, allowed_special="all") == enc.encode(text, allowed_special="all")
    for text in ORDINARY:
        assert back.encode_ordinary(text) == enc.encode_ordinary(text)


def test_special_ids_sit_in_the_model_vocab(saved):
    enc, path = saved
    data = json.loads(path.read_text(encoding="utf-8"))
    assert all(data["model"]["vocab"][s] == i for s, i in enc.special_tokens.items())
    assert all(t["id"] == enc.special_tokens[t["content"]] and t["special"] for t in data["added_tokens"])


def _ranks():
    ranks = {bytes([b]): b for b in range(256)}
    ranks[b"ab"] = 256
    return ranks


def test_a_special_that_is_also_a_token_text_cannot_be_saved(tmp_path):
    enc = fastbpe.Encoding("clash", pat_str=patterns.GPT2, mergeable_ranks=_ranks(), special_tokens={"ab": 300})
    with pytest.raises(ValueError, match="special token 'ab' is also the byte-level text of the token with rank 256"):
        enc.save(tmp_path / "clash.json")
    assert not (tmp_path / "clash.json").exists()


def test_reading_a_file_with_shifted_ids_follows_hf_and_warns(tmp_path):
    """A file written before the fix (specials only in added_tokens, after a gap) means
    to HF the ids it assigns; fastbpe reads what HF reads and says so."""
    vocab = {token_to_str(t): i for t, i in _ranks().items()}
    doc = {
        "added_tokens": [{"id": 300, "content": "<|eot|>", "special": True, "normalized": False,
                          "lstrip": False, "rstrip": False, "single_word": False}],
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True},
        "model": {"type": "BPE", "vocab": vocab, "merges": ["a b"]},
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.warns(UserWarning, match=r'added_tokens\[0\] "<\|eot\|>" states id 300 but is not in model.vocab, so HF gives it id 257'):
        enc = fastbpe.load(path)
    assert enc.special_tokens == {"<|eot|>": 257}
    assert tokenizers.Tokenizer.from_file(str(path)).token_to_id("<|eot|>") == 257
