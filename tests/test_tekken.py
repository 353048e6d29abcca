"""Mistral's Tekken JSON (issue 38): loads with mistral-common's id layout, and its ids
equal mistral-common's ``Tekkenizer`` (when installed; it pins ``numpy<2.4``, so it is
not in the test extra) and always tiktoken built from the same ranks and pattern with
that layout."""
from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastbpe
from fastbpe.formats.tekken import DEFAULT_SPECIAL_TOKENS

sys.path.insert(0, str(Path(__file__).parent))
from open_corpus import documents  # noqa: E402

NAME = "mistral/tekken_240911.json"
_LOADED: dict = {}


def _tekken(vocab_file):
    if "ours" not in _LOADED:
        path = vocab_file(NAME)
        _LOADED["ours"] = fastbpe.load(path)
        _LOADED["doc"] = json.loads(path.read_text(encoding="utf-8"))
    return _LOADED["ours"], _LOADED["doc"]


@pytest.fixture(scope="module")
def tiktoken_tekken(vocab_file):
    """tiktoken from the file's ranks and pattern, ids shifted as mistral-common shifts them."""
    tiktoken = pytest.importorskip("tiktoken")
    _, doc = _tekken(vocab_file)
    config = doc["config"]
    n_special, n_inner = config["default_num_special_tokens"], config["default_vocab_size"] - config["default_num_special_tokens"]
    ranks = {base64.b64decode(e["token_bytes"]): e["rank"] for e in doc["vocab"][:n_inner]}
    enc = tiktoken.Encoding("tekken", pat_str=config["pattern"], mergeable_ranks=ranks, special_tokens={})
    return lambda text: [i + n_special for i in enc.encode_ordinary(text)]


def test_layout(vocab_file):
    ours, doc = _tekken(vocab_file)
    assert ours.n_vocab == doc["config"]["default_vocab_size"] == 131072
    assert ours.pat_str == doc["config"]["pattern"]
    specials = ours.special_tokens
    assert [specials[t] for t in DEFAULT_SPECIAL_TOKENS] == list(range(20))
    assert specials["<SPECIAL_999>"] == 999 and len(specials) == 1000
    assert ours.encode_single_token(b"\x00") == 1000


def test_corpus_equals_tiktoken_layout(vocab_file, tiktoken_tekken):
    ours, _ = _tekken(vocab_file)
    docs = documents(300)
    assert ours.encode_ordinary_batch(docs) == [tiktoken_tekken(d) for d in docs]
    for d in docs[:50]:
        assert ours.decode(ours.encode_ordinary(d)) == d


@settings(max_examples=150)
@given(text=st.text(max_size=150))
def test_hypothesis_equals_tiktoken_layout(vocab_file, tiktoken_tekken, text):
    ours, _ = _tekken(vocab_file)
    assert ours.encode_ordinary(text) == tiktoken_tekken(text)


def test_corpus_equals_mistral_common(vocab_file):
    tekken = pytest.importorskip("mistral_common.tokens.tokenizers.tekken")
    ours, _ = _tekken(vocab_file)
    theirs = tekken.Tekkenizer.from_file(str(vocab_file(NAME)))
    for d in documents(200):
        assert ours.encode_ordinary(d) == theirs.encode(d, bos=False, eos=False)
        assert [ours.special_tokens["<s>"], *ours.encode_ordinary(d)] == theirs.encode(d, bos=True, eos=False)
    assert ours.special_tokens["<s>"] == theirs.bos_id and ours.special_tokens["</s>"] == theirs.eos_id


def test_malformed_tekken_is_refused(tmp_path):
    doc = {"config": {"pattern": ".", "default_vocab_size": 300, "default_num_special_tokens": 10, "version": "v3"},
           "vocab": [{"rank": 0, "token_bytes": "AA==", "token_str": None}]}
    path = tmp_path / "tekken.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ValueError, match=r"tekken\.json: config\.default_vocab_size 300 - 10 special tokens needs 290 ranks; vocab holds 1"):
        fastbpe.load(path)
    doc["config"]["version"] = "v13"
    doc["config"]["default_vocab_size"] = 11
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ValueError, match="special_tokens is missing, which a version v13 file must list"):
        fastbpe.load(path)
