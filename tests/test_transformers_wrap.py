"""``fastbpe.transformers.wrap``: a transformers fast tokenizer's ``__call__`` on fastbpe
gives the same ``input_ids`` / ``attention_mask`` as transformers itself (issue 38
section 3), with padding and truncation arguments. Files load once per session."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from open_corpus import documents  # noqa: E402

transformers = pytest.importorskip("transformers")

from fastbpe.transformers import FastTokenizer, wrap  # noqa: E402

FILES = ["gpt2.tokenizer.json", "llama-3.2/tokenizer.json", "bert-base-uncased/tokenizer.json"]
_LOADED: dict = {}
DOCS = [d for d in documents(16)]


@pytest.fixture(params=FILES, ids=["gpt2", "llama-3.2", "bert"])
def pair(request, vocab_file):
    if request.param not in _LOADED:
        hf = transformers.PreTrainedTokenizerFast(tokenizer_file=str(vocab_file(request.param)))
        hf.pad_token = hf.convert_ids_to_tokens(hf.encode("!", add_special_tokens=False))[0]
        _LOADED[request.param] = wrap(hf), hf
    return _LOADED[request.param]


CALLS = [
    {},
    {"padding": True},
    {"padding": "longest", "truncation": True, "max_length": 16},
    {"padding": "max_length", "max_length": 24, "truncation": True},
    {"padding": True, "pad_to_multiple_of": 8, "padding_side": "left"},
    {"truncation": "only_first", "max_length": 12},
    {"add_special_tokens": False, "padding": True, "return_tensors": "np"},
]


@pytest.mark.parametrize("kwargs", CALLS, ids=[str(sorted(k.items())) for k in CALLS])
def test_call_equals_transformers(pair, kwargs):
    ours, hf = pair
    got, want = ours(DOCS, **kwargs), hf(DOCS, **kwargs)
    assert type(got) is type(want) and set(got) == set(want)
    for key in want:
        a, b = got[key], want[key]
        assert (a.tolist() if hasattr(a, "tolist") else a) == (b.tolist() if hasattr(b, "tolist") else b), key
    if "truncation" in kwargs and kwargs.get("truncation") != "only_first":
        pairs = dict(kwargs)
        got, want = ours(DOCS[:4], DOCS[4:8], **pairs), hf(DOCS[:4], DOCS[4:8], **pairs)
        assert got["input_ids"] == want["input_ids"] and got["attention_mask"] == want["attention_mask"]


def test_single_text_and_decode(pair):
    ours, hf = pair
    assert ours(DOCS[0])["input_ids"] == hf(DOCS[0])["input_ids"]
    ids = hf(DOCS[1])["input_ids"]
    assert ours.decode(ids) == hf.decode(ids)
    assert ours.batch_decode([ids], skip_special_tokens=True) == hf.batch_decode([ids], skip_special_tokens=True)
    assert len(ours) == len(hf)


def test_data_loader_collate(pair):
    """The documented use: a collate function calling the tokenizer on a batch."""
    ours, hf = pair
    loader = [DOCS[i:i + 4] for i in range(0, 12, 4)]
    for batch in loader:
        out = ours(batch, padding=True, truncation=True, max_length=32, return_tensors="np")
        assert out["input_ids"].shape == out["attention_mask"].shape
        assert out["input_ids"].tolist() == hf(batch, padding=True, truncation=True, max_length=32)["input_ids"]


def test_refusals(pair):
    ours, _ = pair
    with pytest.raises(ValueError, match="return_offsets_mapping"):
        ours(DOCS, return_offsets_mapping=True)
    with pytest.raises(ValueError, match="padding='sideways'"):
        ours(DOCS, padding="sideways")
    with pytest.raises(TypeError, match="fast tokenizer"):
        wrap(object())
    with pytest.raises(TypeError, match="fastbpe.Tokenizer"):
        FastTokenizer(None)


def test_from_pretrained_folder(vocab_file):
    folder = vocab_file("llama-3.2/tokenizer.json").parent
    ours = FastTokenizer.from_pretrained(folder)
    hf = transformers.AutoTokenizer.from_pretrained(str(folder))
    assert ours.pad_token == hf.pad_token
    assert ours(DOCS[:4], padding=True)["input_ids"] == hf(DOCS[:4], padding=True)["input_ids"]
