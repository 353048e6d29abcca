"""``fastbpe.Tokenizer`` against HF ``tokenizers.Tokenizer`` on the real files (issue 38
section 3): ids, tokens, offsets, type ids and masks, single and pair inputs, with and
without ``add_special_tokens``, truncation and padding. Each file loads once per session."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastbpe
from fastbpe.hf_tokenizer import truncate

sys.path.insert(0, str(Path(__file__).parent))
from open_corpus import documents  # noqa: E402

tokenizers = pytest.importorskip("tokenizers")

FILES = ["gpt2.tokenizer.json", "llama-3.2/tokenizer.json", "qwen3/tokenizer.json", "deepseek-v4/tokenizer.json",
         "bert-base-uncased/tokenizer.json"]
FIELDS = ("ids", "tokens", "offsets", "type_ids", "special_tokens_mask", "attention_mask")
_LOADED: dict = {}


@pytest.fixture(params=FILES, ids=[f.split("/")[0].split(".")[0] for f in FILES])
def pair(request, vocab_file):
    if request.param not in _LOADED:
        path = str(vocab_file(request.param))
        _LOADED[request.param] = fastbpe.Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)
    ours, hf = _LOADED[request.param]
    yield ours, hf
    for t in (ours, hf):
        t.no_truncation()
        t.no_padding()


DOCS = documents(50)
NFC_DOCS = [d for d in DOCS if __import__("unicodedata").is_normalized("NFC", d)]


def same(a, b, offsets: bool = True, overflowing: bool = True):
    for k in FIELDS if offsets else FIELDS[:2] + FIELDS[3:]:
        assert getattr(a, k) == list(getattr(b, k)), k
    if not overflowing:   # a truncated pair's windows are not built (ValueError)
        return
    assert len(a.overflowing) == len(b.overflowing)
    for x, y in zip(a.overflowing, b.overflowing):
        same(x, y, offsets)


def test_corpus_single_and_pair(pair):
    ours, hf = pair
    for add in (True, False):
        for a, b in zip(ours.encode_batch(NFC_DOCS, add_special_tokens=add), hf.encode_batch(NFC_DOCS, add_special_tokens=add)):
            same(a, b)
        pairs = list(zip(NFC_DOCS[:15], NFC_DOCS[15:30]))
        for a, b in zip(ours.encode_batch(pairs, add_special_tokens=add), hf.encode_batch(pairs, add_special_tokens=add)):
            same(a, b, overflowing=ours.truncation is None)
    assert ours.encode("x", "y").ids == hf.encode("x", "y").ids


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=40), st.text(max_size=20))
def test_hypothesis_text(pair, a, b):
    ours, hf = pair
    import unicodedata
    aligned = unicodedata.is_normalized("NFC", a) and unicodedata.is_normalized("NFC", b) or \
        not isinstance(ours.encoding, fastbpe.HFEncoding) or ours.encoding.pipeline.normalizer is None
    same(ours.encode(a), hf.encode(a), aligned)
    same(ours.encode(a, b), hf.encode(a, b), aligned)


@pytest.mark.parametrize("strategy", ["longest_first", "only_first"])
@pytest.mark.parametrize("direction", ["right", "left"])
def test_truncation_and_padding(pair, strategy, direction):
    ours, hf = pair
    docs = NFC_DOCS[:12]
    for t in (ours, hf):
        t.enable_truncation(24, stride=4, strategy=strategy, direction=direction)
        t.enable_padding(direction="left" if direction == "right" else "right", pad_id=7, pad_type_id=1,
                         pad_token="<pad>", pad_to_multiple_of=8)
    for a, b in zip(ours.encode_batch(docs), hf.encode_batch(docs)):
        same(a, b)
    pairs = [(docs[i][:300], ["a tail", "é", "", "two  words"][i % 4]) for i in range(6)]
    got, want = ours.encode_batch(pairs), hf.encode_batch(pairs)
    for a, b in zip(got, want):
        for k in FIELDS:
            assert getattr(a, k) == list(getattr(b, k)), k
    if strategy == "only_first":   # the first is too short to lose enough: both refuse
        with pytest.raises(Exception, match="runcation"):
            hf.encode("a", docs[0])
        with pytest.raises(ValueError, match="only_first cannot cut"):
            ours.encode("a", docs[0])
    for t in (ours, hf):
        t.enable_padding(length=40, pad_id=3, pad_token="<pad>")
    for a, b in zip(ours.encode_batch(docs[:3] + ["short"]), hf.encode_batch(docs[:3] + ["short"])):
        same(a, b)


def test_padding_alone_and_pickled_results(pair):
    """Tokens and offsets are made when first read: padded first (no truncation, which
    makes them at once), read after, and pickled before being read, they equal HF's."""
    import pickle

    ours, hf = pair
    docs = NFC_DOCS[:4] + ["", "x"]
    for t in (ours, hf):
        t.enable_padding(direction="left", pad_id=5, pad_token="<pad>", pad_to_multiple_of=16)
    for a, b in zip(ours.encode_batch(docs), hf.encode_batch(docs)):
        same(pickle.loads(pickle.dumps(a)), b, overflowing=False)
        same(a, b)
    pairs = [(docs[0][:200], "a pair")]
    same(ours.encode_batch(pairs)[0], hf.encode_batch(pairs)[0])


def test_truncate_rule_matches_hf_on_small_cases(vocab_file):
    ours, hf = _gpt2(vocab_file)
    for n_a in range(0, 7):
        for n_b in range(0, 7):
            a, b = " a" * n_a, " b" * n_b
            for m in range(1, 9):
                for t in (ours, hf):
                    t.enable_truncation(m)
                assert ours.encode(a, b, add_special_tokens=False).ids == hf.encode(a, b, add_special_tokens=False).ids
    assert truncate(10, 3, 8, "longest_first") == (5, 3)
    with pytest.raises(ValueError, match="only_second needs a pair"):
        truncate(10, None, 4, "only_second")


def _gpt2(vocab_file):
    path = str(vocab_file("gpt2.tokenizer.json"))   # the shared file, else converted (conftest)
    return fastbpe.Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)


def test_vocabulary_and_decode(pair):
    ours, hf = pair
    assert ours.get_vocab_size() == hf.get_vocab_size()
    assert ours.get_vocab_size(with_added_tokens=False) == hf.get_vocab_size(with_added_tokens=False)
    assert ours.get_vocab() == hf.get_vocab()
    for tok in ("hello", "<|endoftext|>", "no such token"):
        assert ours.token_to_id(tok) == hf.token_to_id(tok)
    ids = hf.encode(NFC_DOCS[0], NFC_DOCS[1]).ids
    assert ours.id_to_token(ids[1]) == hf.id_to_token(ids[1])
    assert ours.decode(ids) == hf.decode(ids)
    assert ours.decode_batch([ids, ids[:3]], skip_special_tokens=False) == hf.decode_batch([ids, ids[:3]], skip_special_tokens=False)
    if isinstance(ours.encoding, fastbpe.HFEncoding):
        assert ours.encoding.encode(NFC_DOCS[0], allowed_special="all", add_special_tokens=True) == hf.encode(NFC_DOCS[0]).ids


def test_offsets_refused_through_a_changing_normalizer(vocab_file):
    path = str(vocab_file("qwen3/tokenizer.json"))
    ours = _LOADED[FILES[2]][0] if FILES[2] in _LOADED else fastbpe.Tokenizer.from_file(path)
    enc = ours.encode("Cafe\u0301")   # NFC changes it
    assert enc.ids == tokenizers.Tokenizer.from_file(path).encode("Cafe\u0301").ids
    with pytest.raises(ValueError, match="offsets: the normalizer .NFC. changes this text"):
        enc.offsets


def test_file_truncation_and_padding_are_read(tmp_path, vocab_file):
    import json

    data = json.loads(Path(vocab_file("gpt2.tokenizer.json")).read_text())
    data["truncation"] = {"direction": "Left", "max_length": 5, "strategy": "LongestFirst", "stride": 1}
    data["padding"] = {"strategy": {"Fixed": 8}, "direction": "Right", "pad_to_multiple_of": None,
                       "pad_id": 0, "pad_type_id": 0, "pad_token": "!"}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data))
    ours, hf = fastbpe.Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))
    text = "one two three four five six seven"
    same(ours.encode(text), hf.encode(text))
    assert ours.truncation["max_length"] == 5 and ours.padding["length"] == 8
    with pytest.raises(ValueError, match="truncation"):
        fastbpe.load(path)   # the Encoding returns every id: a cutting file is refused there
    data["padding"]["strategy"] = "Weird"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"tokenizer.json: padding strategy 'Weird' is not BatchLongest or Fixed"):
        fastbpe.Tokenizer.from_file(path)


def test_bad_arguments(vocab_file):
    ours, _ = _gpt2(vocab_file)
    with pytest.raises(TypeError, match="input must be a list"):
        ours.encode_batch("text")
    with pytest.raises(TypeError, match=r"input\[1\]"):
        ours.encode_batch(["a", ("b", 3)])
    with pytest.raises(ValueError, match=r"enable_truncation: truncation strategy must be one of .*, not 'middle'"):
        ours.enable_truncation(5, strategy="middle")
    with pytest.raises(ValueError, match="stride 5 must be below max_length 5"):
        ours.enable_truncation(5, stride=5)
    with pytest.raises(ValueError, match="direction 'up'"):
        ours.enable_padding(direction="up")
    with pytest.raises(TypeError, match="HFEncoding"):
        fastbpe.Tokenizer(fastbpe.get_encoding("gpt2"))


def test_from_pretrained_folder(vocab_file):
    folder = vocab_file("llama-3.2/tokenizer.json").parent
    tok = fastbpe.Tokenizer.from_pretrained(folder)
    assert tok.config.bos_token == "<|begin_of_text|>"
    assert tok.encode("Hi").ids[0] == tok.token_to_id("<|begin_of_text|>")
