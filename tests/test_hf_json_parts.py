"""The native reader of a tokenizer.json's vocabulary and merges (issue 38, load time):
``_hf_json.model_parts`` equals its twin ``reference.tokenizer_json.model_parts`` on every
published file and on hypothesis-made JSON (escapes, odd keys, both merge forms, any
layout); what it does not take (the twin's docstring) it leaves to the ordinary reader,
so ``fastbpe.load`` gives the same encoding, or the same error, either way."""
from __future__ import annotations

import json
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastbpe
from fastbpe.bpe.hf import HFEncoding, read_model_parts
from fastbpe.formats._hfjson import parts_of_bytes, read_json, read_json_parts
from fastbpe.reference import tokenizer_json as ref
from fastbpe.reference.hf import _byte_chars

native = pytest.importorskip("fastbpe._hf_json")

PUBLISHED = ("llama-3.2/tokenizer.json", "qwen3/tokenizer.json", "deepseek-v4/tokenizer.json", "gpt2.tokenizer.json")
ALPHABET = _byte_chars()


def _same_parts(raw: bytes):
    """The native parts equal the twin's, and the spans hold model.vocab / model.merges."""
    got, want = read_model_parts(raw), ref.model_parts(raw)
    assert got is not None and want is not None
    assert got._replace(vocab_span=(-1, -1), merges_span=(-1, -1)) == want
    assert list(got.vocab) == list(want.vocab) and list(got.ranks) == list(want.ranks)
    model = json.loads(raw)["model"]
    assert json.loads(raw[slice(*got.vocab_span)]) == model["vocab"]
    assert json.loads(raw[slice(*got.merges_span)]) == model["merges"]
    return got


def _load_both(path):
    """fastbpe.load (the native parts) and the ordinary reader's encoding of one file."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = fastbpe.load(path)
        slow = HFEncoding.from_json(path.stem, read_json(path), str(path))
    return fast, slow


def _assert_same_encoding(fast, slow):
    assert fast.pipeline == slow.pipeline
    assert list(fast.pipeline.vocab) == list(slow.pipeline.vocab)
    assert list(fast._mergeable_ranks.items()) == list(slow._mergeable_ranks.items())
    assert (fast._special_tokens, fast.added_tokens) == (slow._special_tokens, slow.added_tokens)
    assert (fast.engine, fast._unreachable, fast._core_pattern) == (slow.engine, slow._unreachable, slow._core_pattern)
    # the native core built from the packed tokens holds what the one from the ranks
    # dict holds: its pickled state (arena, lengths, ids, specials, pattern, n_encoded)
    cores = [enc._core_bpe for enc in (fast, slow)]
    while all(hasattr(c, "_native") for c in cores):
        cores = [c._native for c in cores]
    if fast.engine == "rank":
        assert cores[0].__reduce__()[1] == cores[1].__reduce__()[1]


@pytest.mark.parametrize("name", PUBLISHED)
def test_published_files_native_parts_equal_the_twin(vocab_file, name):
    path = vocab_file(name)
    _same_parts(path.read_bytes())
    data, parts = read_json_parts(path, read_model_parts)
    assert parts is not None, f"{name}: the plain form, read natively"
    fast, slow = _load_both(path)
    assert fast._packed is not None, f"{name}: the core and the rank-rule check from the packed tokens"
    _assert_same_encoding(fast, slow)
    # fastbpe.Tokenizer.from_file (HF's API) reads the file the same native way
    tok = fastbpe.Tokenizer.from_file(path).encoding
    assert tok._packed is not None
    _assert_same_encoding(tok, slow)


# --------------------------------------------------------------------------- hypothesis
_BYTE_TEXT = st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=6).map("".join)


@st.composite
def _files(draw):
    """A byte-level BPE tokenizer.json of the plain form (every merge's parts and whole
    in the vocabulary), written with any JSON layout: escapes, key order, both merge forms."""
    texts = draw(st.lists(_BYTE_TEXT, min_size=1, max_size=30, unique=True))
    texts = list(dict.fromkeys(list(ALPHABET[:4]) + texts))
    odd = draw(st.lists(st.text(min_size=1, max_size=4).filter(lambda t: any(c not in ALPHABET for c in t)), max_size=3))
    ids = draw(st.permutations(range(len(texts) + len(odd) + draw(st.integers(0, 5)))))
    vocab = dict(zip(texts + [t for t in dict.fromkeys(odd) if t not in texts], ids))
    pairs = [(a, b) for a in texts for b in texts if a + b in vocab]
    merges = draw(st.lists(st.sampled_from(pairs), max_size=20)) if pairs else []
    forms = draw(st.lists(st.booleans(), min_size=len(merges), max_size=len(merges)))
    merges = [f"{a} {b}" if s else [a, b] for (a, b), s in zip(merges, forms)]
    model = {"type": "BPE", "vocab": vocab, "merges": merges, "dropout": None}
    items = list(model.items())
    items = draw(st.permutations(items))
    doc = {"version": "1.0", "added_tokens": [{"id": 99, "content": "<|x|>", "special": True}], "model": dict(items)}
    if draw(st.booleans()):
        doc = {"model": doc.pop("model"), **doc}
    text = json.dumps(doc, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 0, 2, "\t"])))
    if draw(st.booleans()):
        text = text.replace("/", "\\/")          # an escaped solidus is the same string
    return text.encode("utf-8")


@settings(max_examples=400, deadline=None)
@given(raw=_files())
def test_native_parts_equal_the_twin_on_generated_files(raw):
    _same_parts(raw)


@settings(max_examples=300, deadline=None)
@given(raw=_files(), data=st.data())
def test_native_parts_equal_the_twin_or_decline(raw, data):
    """Any byte of a plain file changed: the native reader takes it only when the twin
    reads the same parts (else None: the ordinary reader decides)."""
    pos = data.draw(st.integers(0, len(raw) - 1))
    raw = raw[:pos] + bytes([data.draw(st.integers(0, 255))]) + raw[pos + 1:]
    found = parts_of_bytes(raw, read_model_parts)
    if found is not None:
        doc, parts = found
        want, whole = ref.model_parts(raw), json.loads(raw)
        assert want is not None and parts._replace(vocab_span=(-1, -1), merges_span=(-1, -1)) == want
        whole["model"]["merges"] = []
        assert doc == whole


# --------------------------------------------------------------------------- what is left to json
PLAIN = '{"model": {"type": "BPE", "vocab": {VOCAB}, "merges": [MERGES]}}'


def _doc(vocab: str, merges: str = '"a b"', around=PLAIN) -> bytes:
    return around.replace("VOCAB", vocab).replace("MERGES", merges).encode("utf-8")


ABC = '"a": 0, "b": 1, "ab": 2'


@pytest.mark.parametrize("raw", [
    _doc(ABC, around='{"model": {"vocab": {}, "merges": []}, "model": {"vocab": {VOCAB}, "merges": [MERGES]}}'),
    _doc(ABC, around='{"mod\\u0065l": {"vocab": {VOCAB}, "merges": [MERGES]}}'),
    _doc(ABC, around='{"model": {"vocab": {}, "voc\\u0061b": {VOCAB}, "merges": [MERGES]}}'),
    _doc(ABC, around='{"model": {"vocab": {VOCAB}, "merges": [], "merges": [MERGES]}}'),
    _doc(ABC, around='{"model": {"vocab": {VOCAB}}}'),
    _doc('"a": 0, "b": 1, "ab": 2, "a": 3'),                  # a text twice: json keeps the last
    _doc('"a": 0, "b": 1, "ab": 1'),                          # an id twice
    _doc('"a": 0, "b": 1.0, "ab": 2'), _doc('"a": 0, "b": 1e0, "ab": 2'), _doc('"a": 0, "b": -1, "ab": 2'),
    _doc('"a": 0, "b": 01, "ab": 2'), _doc('"a": 0, "b": 4294967296, "ab": 2'), _doc('"a": 0, "b": 67108864, "ab": 2'),
    _doc('"a": 0, "b": "1", "ab": 2'), _doc('"a": 0, "b": true, "ab": 2'),
    _doc('"a": 0, "": 1, "ab": 2'),                           # an empty text
    _doc('"a": 0, "b\\ud800": 1, "ab": 2'),                   # a lone surrogate
    _doc('"a": 0, "b\\udc00": 1, "ab": 2'),
    _doc('"a": 0, "b\\x": 1, "ab": 2'),                       # an invalid escape
    _doc('"a": 0, "b\t": 1, "ab": 2'),                        # a raw control character
    _doc(ABC, '"a  b"'), _doc(ABC, '"ab"'), _doc(ABC, '"a b c"'), _doc(ABC, '["a"]'), _doc(ABC, '["a", "b", "c"]'),
    _doc(ABC, '["a", 1]'), _doc(ABC, '7'), _doc(ABC, '"a c"'), _doc(ABC, '"b b"'), _doc(ABC, '"a \\u2581"'),
    b"\xef\xbb\xbf" + _doc(ABC),                              # a BOM
    _doc(ABC) + b" x", _doc(ABC)[:-1], b"[" + _doc(ABC) + b"]",
    _doc(ABC).replace(b'"a": 0', b'"\xff": 0'),               # not UTF-8
    _doc(ABC).replace(b'"a": 0', b'"\xc0\xa1": 0'),           # overlong
    _doc(ABC).replace(b'"a": 0', b'"\xed\xa0\x80": 0'),       # a surrogate in UTF-8
])
def test_native_reader_declines_what_the_ordinary_reader_decides(raw):
    assert native.model_parts(raw, ALPHABET) is None


def test_escapes_are_read_as_json_reads_them():
    vocab = '"\\u0061": 0, "\\u0120b": 1, "a\\u0120b": 2, "\\"": 3, "\\\\": 4, "\\/": 5, "\\n\\r\\t\\b\\f": 6, "\\ud83d\\ude00": 7'
    raw = _doc(vocab, '"a \\u0120b", ["\\u0061", "\\u0120\\u0062"]')
    parts = _same_parts(raw)
    assert parts.ranks[b" b"] == 1 and parts.not_byte_level == ["\n\r\t\b\x0c", "😀"]
    assert parts.merge_ids == ([0, 0], [1, 1], [2, 2])


@pytest.mark.parametrize("vocab, merges, message", [
    ('"a": 0, "b": 1, "ab": 2, "a": 3', '"a b"', None),
    ('"a": 0, "b": 1, "ab": 1', '"a b"', 'already the id of "b~"'),
    ('"a": 0, "b": 1.5, "ab": 2', '"a b"', 'model.vocab["b~"] must be an int, got 50257.5'),
    ('"a": 0, "b": 1, "ab": 2', '"a c"', 'model.merges[0] has "c~", which is not in model.vocab'),
    ('"a": 0, "b": 1, "ab": 2', '"a b c"', 'model.merges[0] must be two tokens separated by one space'),
])
def test_load_gives_the_ordinary_readers_result(tmp_path, vocab_file, vocab, merges, message):
    """A file the native reader declines loads (or fails) exactly as before: here a
    real file's vocabulary with a small change at its start."""
    base = vocab_file("gpt2.tokenizer.json").read_text(encoding="utf-8")
    doc = json.loads(base)
    head = doc["model"]["vocab"]
    first = json.dumps(doc, ensure_ascii=False)
    text = first.replace('"vocab": {', '"vocab": {' + vocab.replace('"a"', '"a~"').replace('"b"', '"b~"').replace('"ab"', '"a~b~"')
                         .replace(": 0", f": {len(head)}").replace(": 1", f": {len(head) + 1}").replace(": 2", f": {len(head) + 2}")
                         .replace(": 3", f": {len(head) + 3}") + ", ", 1)
    text = text.replace('"merges": [', '"merges": [' + merges.replace("a", "a~").replace("b", "b~").replace("c", "c~") + ", ", 1)
    path = tmp_path / "t.json"
    path.write_text(text, encoding="utf-8")
    assert native.model_parts(path.read_bytes(), ALPHABET) is None
    if message is None:
        _assert_same_encoding(*_load_both(path))
        return
    with pytest.raises(ValueError) as fast:
        fastbpe.load(path)
    with pytest.raises(ValueError) as slow:
        HFEncoding.from_json(path.stem, read_json(path), str(path))
    assert str(fast.value) == str(slow.value) and message in str(fast.value)


def test_a_prefix_takes_the_ordinary_reader(tmp_path):
    """``continuing_subword_prefix``: the merges' new ids are not left + right."""
    raw = _doc(ABC, around='{"model": {"type": "BPE", "continuing_subword_prefix": "#", "vocab": {VOCAB}, "merges": [MERGES]}}')
    path = tmp_path / "t.json"
    path.write_bytes(raw)
    assert read_model_parts(raw) is not None
    assert read_json_parts(path, read_model_parts)[1] is None
