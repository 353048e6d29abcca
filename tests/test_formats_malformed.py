"""Malformed tokenizer.json files fail with a ValueError naming the file and the JSON path
(issue 22), never an AttributeError, RecursionError or unpacking error from the reader."""
import copy
import json

import pytest

import fastbpe
from fastbpe.formats.hf_bpe import token_to_str

FLAGS = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}


def bpe_doc() -> dict:
    vocab = {token_to_str(bytes([b])): b for b in range(256)}
    vocab.update({"ab": 256, "abc": 257, "<|eot|>": 258})
    return {
        "version": "1.0",
        "added_tokens": [{"id": 258, "content": "<|eot|>", **FLAGS}],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\s+|\\S+"}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ]},
        "model": {"type": "BPE", "vocab": vocab, "merges": [["a", "b"], ["ab", "c"]]},
    }


def wordpiece_doc() -> dict:
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "##b", "ab"])}
    return {
        "added_tokens": [{"id": i, "content": t, **FLAGS} for t, i in vocab.items() if t.startswith("[")],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
    }


def _set(path, value):
    """A mutation that sets doc[path...] = value (or deletes it when value is DELETE)."""
    def mutate(doc):
        *parents, last = path
        for key in parents:
            doc = doc[key]
        if value is DELETE:
            del doc[last]
        else:
            doc[last] = value
    return mutate


DELETE = object()

BPE_CASES = [
    # (id, mutation of the valid document, what the message must say)
    ("top-list", lambda d: [d], "the top level must be an object, got [{"),
    ("no-model", _set(["model"], DELETE), "model is missing"),
    ("model-list", _set(["model"], []), "model must be an object, got []"),
    ("type-int", _set(["model", "type"], 3), "model.type must be a string, got 3"),
    ("vocab-list", _set(["model", "vocab"], ["a", "b"]), 'model.vocab must be an object, got ["a", "b"]'),
    ("vocab-missing", _set(["model", "vocab"], DELETE), "model.vocab is missing"),
    ("vocab-id-str", _set(["model", "vocab", "x"], "y"), 'model.vocab["x"] must be an int, got "y"'),
    ("vocab-id-float", _set(["model", "vocab", "x"], 1.5), 'model.vocab["x"] must be an int, got 1.5'),
    ("vocab-id-bool", _set(["model", "vocab", "x"], True), 'model.vocab["x"] must be an int, got true'),
    ("vocab-id-negative", _set(["model", "vocab", "x"], -1), 'model.vocab["x"] is -1, outside the ids'),
    ("vocab-id-huge", _set(["model", "vocab", "x"], 2**32), 'model.vocab["x"] is 4294967296, outside the ids'),
    ("vocab-dup-id", _set(["model", "vocab", "x"], 7), 'model.vocab["x"] has id 7, already the id of'),
    ("vocab-not-bytelevel", _set(["model", "vocab", "é\u2603"], 300), 'model.vocab["é☃"]: token'),
    ("merges-dict", _set(["model", "merges"], {"a": "b"}), 'model.merges must be a list, got {"a": "b"}'),
    ("merge-int", _set(["model", "merges", 1], 5), "model.merges[1] must be a string or a list, got 5"),
    ("merge-three", _set(["model", "merges", 1], "a b c"), 'model.merges[1] must be two tokens separated by one space, got "a b c"'),
    ("merge-nospace", _set(["model", "merges", 0], "ab"), "model.merges[0] must be two tokens separated by one space"),
    ("merge-one", _set(["model", "merges", 0], ["a"]), 'model.merges[0] must be a pair of two token strings, got ["a"]'),
    ("merge-not-str", _set(["model", "merges", 0], ["a", 1]), 'model.merges[0] must be a pair of two token strings, got ["a", 1]'),
    ("merge-unknown-part", _set(["model", "merges", 1], ["ab", "zz"]), 'model.merges[1] has "zz", which is not in model.vocab'),
    ("dropout", _set(["model", "dropout"], 0.1), "model.dropout makes encoding random"),
    ("added-dict", _set(["added_tokens"], {"id": 1}), "added_tokens must be a list or null, got {"),
    ("added-entry-str", _set(["added_tokens", 0], "<|eot|>"), 'added_tokens[0] must be an object, got "<|eot|>"'),
    ("added-id-str", _set(["added_tokens", 0, "id"], "258"), 'added_tokens[0].id must be an int, got "258"'),
    ("added-id-missing", _set(["added_tokens", 0, "id"], DELETE), "added_tokens[0].id is missing"),
    ("added-content-missing", _set(["added_tokens", 0, "content"], DELETE), "added_tokens[0].content is missing"),
    ("added-content-empty", _set(["added_tokens", 0, "content"], ""), "added_tokens[0].content is empty"),
    ("added-flag-str", _set(["added_tokens", 0, "special"], "yes"), 'added_tokens[0].special must be a bool, got "yes"'),
    ("pretok-list", _set(["pre_tokenizer"], [1]), "pre_tokenizer must be an object, got [1]"),
    ("pretok-steps-dict", _set(["pre_tokenizer", "pretokenizers"], {}), "pre_tokenizer.pretokenizers must be a list"),
    ("pretok-step-int", _set(["pre_tokenizer", "pretokenizers", 0], 1), "pre_tokenizer.pretokenizers[0] must be an object, got 1"),
    ("pretok-step-type", _set(["pre_tokenizer", "pretokenizers", 0, "type"], None), "pre_tokenizer.pretokenizers[0].type must be a string, got null"),
    ("split-pattern-str", _set(["pre_tokenizer", "pretokenizers", 0, "pattern"], "x"), 'pre_tokenizer.pretokenizers[0].pattern must be an object, got "x"'),
    ("split-regex-int", _set(["pre_tokenizer", "pretokenizers", 0, "pattern", "Regex"], 1), "pre_tokenizer.pretokenizers[0].pattern.Regex must be a string, got 1"),
    ("bytelevel-flag", _set(["pre_tokenizer", "pretokenizers", 1, "use_regex"], "no"), 'pre_tokenizer.pretokenizers[1].use_regex must be a bool, got "no"'),
]

WORDPIECE_CASES = [
    ("vocab-list", _set(["model", "vocab"], ["a"]), 'model.vocab must be an object, got ["a"]'),
    ("vocab-id-str", _set(["model", "vocab", "x"], "y"), 'model.vocab["x"] must be an int, got "y"'),
    ("vocab-dup-id", _set(["model", "vocab", "x"], 4), 'model.vocab["x"] has id 4, already the id of "a"'),
    ("unk-int", _set(["model", "unk_token"], 1), "model.unk_token must be a string, got 1"),
    ("max-chars-str", _set(["model", "max_input_chars_per_word"], "100"), 'model.max_input_chars_per_word must be an int, got "100"'),
    ("prefix-int", _set(["model", "continuing_subword_prefix"], 2), "model.continuing_subword_prefix must be a string, got 2"),
    ("normalizer-list", _set(["normalizer"], []), "normalizer must be an object or null, got []"),
    ("lowercase-str", _set(["normalizer", "lowercase"], "yes"), 'normalizer.lowercase must be a bool, got "yes"'),
    ("accents-int", _set(["normalizer", "strip_accents"], 0), "normalizer.strip_accents must be a bool or null, got 0"),
    ("added-entry-list", _set(["added_tokens", 1], [1]), "added_tokens[1] must be an object, got [1]"),
    ("added-id-float", _set(["added_tokens", 0, "id"], 0.0), "added_tokens[0].id must be an int, got 0.0"),
    ("model-str", _set(["model"], "WordPiece"), 'model must be an object, got "WordPiece"'),
]


def _write(tmp_path, doc) -> str:
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.mark.parametrize("make, cases", [(bpe_doc, BPE_CASES), (wordpiece_doc, WORDPIECE_CASES)], ids=["bpe", "wordpiece"])
def test_the_valid_documents_load(make, cases, tmp_path):
    """The base documents are valid, so each case below fails for its own mutation."""
    fastbpe.load(_write(tmp_path, make()))


@pytest.mark.parametrize("mutate, message", [c[1:] for c in BPE_CASES], ids=[c[0] for c in BPE_CASES])
def test_malformed_bpe_files(mutate, message, tmp_path):
    _check(tmp_path, bpe_doc, mutate, message)


@pytest.mark.parametrize("mutate, message", [c[1:] for c in WORDPIECE_CASES], ids=[c[0] for c in WORDPIECE_CASES])
def test_malformed_wordpiece_files(mutate, message, tmp_path):
    _check(tmp_path, wordpiece_doc, mutate, message)


def _check(tmp_path, make, mutate, message):
    doc = copy.deepcopy(make())
    doc = mutate(doc) or doc
    path = _write(tmp_path, doc)
    with pytest.raises(ValueError) as info:
        fastbpe.load(path)
    assert str(info.value).startswith(f"{path}: "), str(info.value)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "content, message",
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"model": {"vocab": {"\xff": 0}}}', "not UTF-8 (byte 22: b'\\xff')"),
        (b'{"model": {"type": "BPE",\n  "vocab": {"a": 0', "not valid JSON (Expecting ',' delimiter: line 2 column 19)"),
        (b"", "not valid JSON (Expecting value: line 1 column 1)"),
        (b"null", "the top level must be an object, got null"),
    ],
    ids=["deep", "not-utf8", "truncated", "empty", "null"],
)
def test_files_that_are_not_json_objects(content, message, tmp_path):
    path = tmp_path / "c.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=None) as info:
        fastbpe.load(path)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value), str(info.value)


def test_merges_as_strings_or_pairs_are_the_same(tmp_path):
    """HF accepts both ``"a b"`` and ``["a", "b"]`` (and files mix them)."""
    pairs = bpe_doc()
    strings = bpe_doc()
    strings["model"]["merges"] = ["a b", ["ab", "c"]]
    a = fastbpe.load(_write(tmp_path, pairs))
    b = fastbpe.load(_write(tmp_path, strings))
    assert a.mergeable_ranks == b.mergeable_ranks and a.encode("abc ab") == b.encode("abc ab") == [257, 32, 256]
