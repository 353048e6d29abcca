"""HF's BPE pipeline (issue 38 section 1): every component ``fastbpe.reference.hf``
implements, in a small byte-level tokenizer.json, gives HF ``tokenizers``' ids; the
native merge-list words equal the reference's; what is not implemented is refused
naming the JSON path."""
from __future__ import annotations

import copy
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastbpe
from fastbpe.bpe.hf import merge_heap
from fastbpe.reference import hf as ref

tokenizers = pytest.importorskip("tokenizers")

CORPUS = [
    "Hello world, it's 2024! The quick brown fox jumps over the lazy dog 12345.",
    "Türkçe ayrıntılı İstanbul ılık; Tiếng Việt người được; 中文分词测试 日本語テキスト",
    "def f(x):\n    return x ** 2  # square\n\n\t  spaces   and\ttabs\r\n",
    "１２３ ＡＢＣ emoji 👍🏽 👨‍👩‍👧 café naïve ÉCOLE ΣΊΣΥΦΟΣ",
]
TEXTS = CORPUS + ["", " ", "  a", "a  ", "\n\n", "1", "12 345 6789", "x<s>y", " <s> ", "<s><s>", "a</s>b", "<pad>"]


@pytest.fixture(scope="module")
def base() -> dict:
    """A byte-level BPE tokenizer.json trained by HF (merges in training order, which
    tiktoken's rank rule does not reproduce), with a few added tokens."""
    from tokenizers import models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 20, trainer)
    tok.add_special_tokens(["<s>", "</s>"])
    tok.add_tokens(["<pad>"])
    return json.loads(tok.to_str())


def _pair(doc: dict, tmp_path, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return fastbpe.load(path), tokenizers.Tokenizer.from_file(str(path))


def _reference(ours, text: str, add_special_tokens: bool = False) -> list[int]:
    """``reference.hf.encode`` of the same file: the pure-Python twin of ``HFEncoding``."""
    p = ours.pipeline
    pipeline = {"normalizer": p.normalizer, "pre_tokenizer": p.pre_tokenizer, "model": p.model, "post_processor": p.post_processor}
    merges = ref.merge_table(p.merges, p.vocab, p.model["continuing_subword_prefix"])
    return ref.encode(text, pipeline, p.vocab, merges, {e["content"]: (e, e["id"]) for e in p.added}, add_special_tokens)


def _same(ours, theirs, texts=TEXTS):
    for text in texts:
        want = theirs.encode(text, add_special_tokens=False).ids
        assert ours.encode(text, allowed_special="all") == want == _reference(ours, text), text
        assert _reference(ours, text, True) == theirs.encode(text).ids, text
        assert ours.encode(text, allowed_special="all", add_special_tokens=True) == theirs.encode(text).ids, text
        assert ours.hf_decode(want) == theirs.decode(want), text
        assert ours.hf_decode(want, skip_special_tokens=False) == theirs.decode(want, skip_special_tokens=False), text


SPLIT = {"type": "Split", "pattern": {"Regex": r"\p{N}{1,3}"}, "behavior": "Isolated", "invert": False}
BYTELEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}

PRE_TOKENIZERS = {
    "bytelevel-regex": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
    "bytelevel-prefix": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "deepseek-like": {"type": "Sequence", "pretokenizers": [
        SPLIT, {**SPLIT, "pattern": {"Regex": "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"}},
        {**SPLIT, "pattern": {"Regex": r"[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"}},
        BYTELEVEL]},
    **{f"split-{b}": {"type": "Sequence", "pretokenizers": [{**SPLIT, "pattern": {"Regex": r"\s+"}, "behavior": b}, BYTELEVEL]}
       for b in ("Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous")},
    "split-invert": {"type": "Sequence", "pretokenizers": [{**SPLIT, "pattern": {"Regex": r"\p{L}+"}, "invert": True}, BYTELEVEL]},
    "split-string": {"type": "Sequence", "pretokenizers": [{**SPLIT, "pattern": {"String": " "}, "behavior": "MergedWithNext"}, BYTELEVEL]},
    "digits": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": False}, BYTELEVEL]},
    "digits-individual": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True},
                                                                 {**BYTELEVEL, "use_regex": True}]},
    "punctuation": {"type": "Sequence", "pretokenizers": [{"type": "Punctuation", "behavior": "Isolated"}, BYTELEVEL]},
    "whitespace": {"type": "Sequence", "pretokenizers": [{"type": "Whitespace"}, BYTELEVEL]},
    "whitespace-split": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {**BYTELEVEL, "add_prefix_space": True}]},
    "bytelevel-then-split": {"type": "Sequence", "pretokenizers": [BYTELEVEL, {**SPLIT, "pattern": {"String": "Ġ"}, "behavior": "MergedWithNext"}]},
}

NORMALIZERS = {
    "nfc": {"type": "NFC"}, "nfd": {"type": "NFD"}, "nfkc": {"type": "NFKC"}, "nfkd": {"type": "NFKD"},
    "lowercase": {"type": "Lowercase"}, "strip": {"type": "Strip", "strip_left": True, "strip_right": True},
    "replace": {"type": "Replace", "pattern": {"String": " "}, "content": "_"},
    "replace-regex": {"type": "Replace", "pattern": {"Regex": r"\d+"}, "content": "#"},
    "prepend": {"type": "Prepend", "prepend": "▁"},
    "bert": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None, "lowercase": True},
    "bert-cased": {"type": "BertNormalizer", "clean_text": False, "handle_chinese_chars": False, "strip_accents": True,
                   "lowercase": False},
    "empty-sequence": {"type": "Sequence", "normalizers": []},
    "sequence": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": False, "strip_right": True}]},
}

def post_processors(s: int, e: int) -> dict:
    """The post-processors, with ``<s>`` = ``s`` and ``</s>`` = ``e``."""
    template = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                           {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {"<s>": {"id": "<s>", "ids": [s], "tokens": ["<s>"]},
                                   "</s>": {"id": "</s>", "ids": [e], "tokens": ["</s>"]}}}
    bytelevel = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
    return {
        "template": template,
        "bytelevel": bytelevel,
        "sequence": {"type": "Sequence", "processors": [bytelevel, template]},
        "roberta": {"type": "RobertaProcessing", "sep": ["</s>", e], "cls": ["<s>", s], "trim_offsets": True, "add_prefix_space": False},
        "bert": {"type": "BertProcessing", "sep": ["</s>", e], "cls": ["<s>", s]},
    }


POST_PROCESSORS = list(post_processors(0, 0))

DECODERS = {
    "bytelevel": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "sequence": {"type": "Sequence", "decoders": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        {"type": "Replace", "pattern": {"String": "o"}, "content": "0"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}, {"type": "Fuse"}]},
    "bytefallback-after": {"type": "Sequence", "decoders": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}, {"type": "ByteFallback"}]},
}


def _components(base: dict) -> dict:
    ids = {e["content"]: e["id"] for e in base["added_tokens"]}
    return {"pre_tokenizer": PRE_TOKENIZERS, "normalizer": NORMALIZERS, "decoder": DECODERS,
            "post_processor": post_processors(ids["<s>"], ids["</s>"])}


CASES = [(kind, name) for kind, names in [("pre_tokenizer", PRE_TOKENIZERS), ("normalizer", NORMALIZERS),
                                          ("decoder", DECODERS), ("post_processor", POST_PROCESSORS)] for name in names]


@pytest.mark.parametrize("kind, name", CASES, ids=[f"{k}-{n}" for k, n in CASES])
def test_components_equal_hf(base, tmp_path, kind, name):
    doc = copy.deepcopy(base)
    doc[kind] = _components(base)[kind][name]
    _same(*_pair(doc, tmp_path))


@pytest.mark.parametrize("ignore_merges", [False, True])
def test_ignore_merges_both_ways(base, tmp_path, ignore_merges):
    doc = copy.deepcopy(base)
    doc["model"]["ignore_merges"] = ignore_merges
    # a token no merge builds: reachable only as a whole word with ignore_merges
    doc["model"]["vocab"]["Ġzzqq"] = len(doc["model"]["vocab"]) + 10
    doc["added_tokens"] = []
    ours, theirs = _pair(doc, tmp_path)
    _same(ours, theirs, TEXTS + [" zzqq", "zzqq zzqq"])
    assert (ours.encode_ordinary(" zzqq") == [doc["model"]["vocab"]["Ġzzqq"]]) == ignore_merges


def test_duplicate_merge_keeps_its_last_rank(base, tmp_path):
    doc = copy.deepcopy(base)
    merges = doc["model"]["merges"]
    merges.append(merges[0])           # the first merge now ranks last
    _same(*_pair(doc, tmp_path))


@settings(max_examples=120)
@given(text=st.lists(st.sampled_from(list("ab cdé中1２ \n'<s>/") + ["<s>", "</s>", "<pad>", "  ", "É", "Ｅ"]), max_size=30).map("".join))
def test_hypothesis_full_pipeline(base, tmp_path_factory, text):
    key = "full"
    if key not in _CACHE:
        doc = copy.deepcopy(base)
        doc["normalizer"] = NORMALIZERS["sequence"]
        doc["pre_tokenizer"] = PRE_TOKENIZERS["deepseek-like"]
        ids = {e["content"]: e["id"] for e in doc["added_tokens"]}
        doc["post_processor"] = post_processors(ids["<s>"], ids["</s>"])["sequence"]
        doc["decoder"] = DECODERS["bytelevel"]
        _CACHE[key] = _pair(doc, tmp_path_factory.mktemp("full"))
    ours, theirs = _CACHE[key]
    _same(ours, theirs, [text])


_CACHE: dict = {}


# ----------------------------------------------------------------- the model rule alone
def test_model_options_equal_hf():
    """unk_token, fuse_unk, byte_fallback, continuing_subword_prefix, end_of_word_suffix:
    the reference's word rule against HF's BPE model alone."""
    from tokenizers import models

    vocab = {"a": 0, "b": 1, "<unk>": 2, "<0x63>": 3, "##b": 4, "a##b": 5, "ab": 6, "b</w>": 7, "ab</w>": 8, "##b</w>": 9}
    merges = [("a", "##b"), ("a", "b</w>"), ("a", "b")]
    for options in [
        {"unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True},
        {"unk_token": "<unk>", "fuse_unk": False, "byte_fallback": False},
        {"unk_token": None, "fuse_unk": False, "byte_fallback": True},
        {"unk_token": "<unk>", "continuing_subword_prefix": "##"},
        {"unk_token": "<unk>", "end_of_word_suffix": "</w>"},
    ]:
        good = [m for m in merges if m[0] + m[1][len(options.get("continuing_subword_prefix") or ""):] in vocab
                and m[1].startswith(options.get("continuing_subword_prefix") or "")]
        table = ref.merge_table(good, vocab, options.get("continuing_subword_prefix"))
        hf_model = models.BPE(vocab=vocab, merges=good, **options)
        for word in ["ab", "abxyc", "xxab", "c", "ba", "abab", "xcx"]:
            want = [t.id for t in hf_model.tokenize(word)]
            assert ref.bpe_word(word, options, vocab, table) == want, (options, word)


@settings(max_examples=200)
@given(ids=st.lists(st.integers(0, 5), max_size=30),
       pairs=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=12))
def test_native_and_heap_merges_equal_the_reference(ids, pairs):
    from fastbpe._hf_merge import MergeList

    merges: dict = {}
    for rank, pair in enumerate(pairs):
        merges[pair] = (rank, 8 + rank)
    want = ref.merge_by_list(ids, merges)
    assert merge_heap(ids, merges) == want
    lefts, rights, new = [2**32 - 2] * len(pairs), [2**32 - 2] * len(pairs), [0] * len(pairs)
    for (a, b), (rank, n) in merges.items():
        lefts[rank], rights[rank], new[rank] = a, b, n
    native = MergeList(list(range(256)), lefts, rights, new)
    assert native.encode_pieces([bytes(ids)]) == want


@settings(max_examples=200)
@given(data=st.binary(max_size=40), cuts=st.sets(st.integers(1, 40), max_size=10))
def test_encode_split_equals_encode_pieces(data, cuts):
    """``encode_split`` (pieces as end offsets) gives ``encode_pieces``' ids."""
    import numpy as np

    from fastbpe._hf_merge import MergeList

    native = MergeList(list(range(256)), [97, 256, 98], [98, 99, 98], [256, 257, 258])
    ends = sorted(c for c in cuts if c < len(data)) + ([len(data)] if data else [])
    pieces = [data[a:b] for a, b in zip([0] + ends, ends)]
    assert native.encode_split(data, np.array(ends, dtype=np.int64)) == native.encode_pieces(pieces)
    assert native.encode_split(data, np.array(ends, dtype=np.int64), [7]) == [7] + native.encode_pieces(pieces)


def test_encode_split_table_overwrites_stay_exact():
    """More distinct short words than the native word table has slots: words evict
    each other, and every id still equals ``encode_pieces``'."""
    import numpy as np

    from fastbpe._hf_merge import MergeList

    native = MergeList(list(range(256)), [97, 256, 98], [98, 99, 98], [256, 257, 258])
    words = [f"ab{i}bbc{i % 7}".encode() for i in range(100_000)] + [b"x" * 30, b"ab" * 11]
    data = b"".join(words)
    ends = np.cumsum([len(w) for w in words], dtype=np.int64)
    want = native.encode_pieces(words)
    assert native.encode_split(data, ends) == want
    assert native.encode_split(data, ends) == want  # hits, misses and evictions again


@pytest.mark.parametrize("ends", [[3, 2], [5], [-1]])
def test_encode_split_refuses_bad_ends(ends):
    import numpy as np

    from fastbpe._hf_merge import MergeList

    with pytest.raises(ValueError, match="ends"):
        MergeList(list(range(256)), [], [], []).encode_split(b"abcd", np.array(ends, dtype=np.int64))


def test_a_long_word_is_not_quadratic():
    from fastbpe._hf_merge import MergeList

    import time

    native = MergeList(list(range(256)), [97], [97], [256])
    t = time.perf_counter()
    out = native.encode_pieces([b"a" * 200_001])
    assert out == [256] * 100_000 + [97]
    assert time.perf_counter() - t < 5


# ----------------------------------------------------------------- refusals
REFUSED = [
    (["normalizer"], {"type": "Precompiled", "precompiled_charsmap": ""}, 'normalizer: normalizer "Precompiled" for BPE is not supported'),
    (["normalizer"], {"type": "Sequence", "normalizers": [{"type": "StripAccents"}]}, r'normalizer\.normalizers\[0\]: normalizer "StripAccents"'),
    # a Metaspace file is sentencepiece-style: fastbpe.formats.hf_spm reads (and here refuses) it
    (["pre_tokenizer"], {"type": "Metaspace", "replacement": "▁"}, r".* is not supported for a sentencepiece-style BPE"),
    (["pre_tokenizer"], {"type": "Sequence", "pretokenizers": [BYTELEVEL, {"type": "UnicodeScripts"}]},
     r'pre_tokenizer\.pretokenizers\[1\]: pre-tokenizer "UnicodeScripts"'),
    (["pre_tokenizer"], {"type": "Sequence", "pretokenizers": [{**SPLIT, "behavior": "Bogus"}, BYTELEVEL]},
     r'pre_tokenizer\.pretokenizers\[0\]\.behavior: split behavior "Bogus"'),
    (["pre_tokenizer"], {"type": "Sequence", "pretokenizers": [{**SPLIT, "pattern": {"Regex": r"\p{N}{1,3}+"}}, BYTELEVEL]},
     r"pre_tokenizer.pretokenizers\[0\].pattern.Regex: the counted repeat"),
    (["pre_tokenizer"], {"type": "Digits", "individual_digits": True}, "pre_tokenizer: a BPE without a ByteLevel pre-tokenizer"),
    (["post_processor"], {"type": "Bogus"}, 'post_processor: post-processor "Bogus" is not supported'),
    (["decoder"], {"type": "Metaspace"}, 'decoder: decoder "Metaspace" is not supported'),
    (["decoder"], {"type": "Sequence", "decoders": [{"type": "CTC"}]}, r'decoder\.decoders\[0\]: decoder "CTC"'),
    (["truncation"], {"max_length": 5}, "truncation: truncation"),
    (["padding"], {"length": 5}, "padding: padding"),
]


@pytest.mark.parametrize("where, value, message", REFUSED, ids=[r[2][:40] for r in REFUSED])
def test_what_is_not_implemented_is_refused(base, tmp_path, where, value, message):
    doc = copy.deepcopy(base)
    doc[where[0]] = value
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ValueError, match="^" + re.escape(f"{path}: ") + message):
        fastbpe.load(path)


# ----------------------------------------------------------------- the merges' ids at load (issue 38, load time)
_merge_id_columns = pytest.importorskip("fastbpe._hf_merge").merge_id_columns


def _python_columns(vocab, merges, prefix=""):
    from fastbpe.formats.hf_pipeline import check_model

    try:
        model = {"type": "BPE", "vocab": vocab, "merges": merges, "continuing_subword_prefix": prefix or None}
        return check_model(model, "t.json")[3]
    except ValueError:
        return None


_part = st.text(alphabet=st.sampled_from("abĠ\u00e9\u4e2d\U0001f600 "), min_size=1, max_size=10)


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(_part, min_size=1, max_size=12, unique=True), picks=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=10),
       form=st.sampled_from(["str", "list"]), prefix=st.sampled_from(["", "##"]))
def test_native_merge_ids_equal_the_python_lookups(keys, picks, form, prefix):
    """``merge_id_columns`` gives the ids of ``check_model``'s lookups, or None exactly
    where those fail (or where a merge is not of the common form: then the Python path
    decides). Keys of one, two and four bytes a char; merged texts both in and not in
    the vocabulary."""
    vocab = {k: i * 3 for i, k in enumerate(keys)}
    vocab.update({keys[a % len(keys)] + keys[b % len(keys)]: 1000 + n for n, (a, b) in enumerate(picks[::2])})
    pairs = [(keys[a % len(keys)], prefix + keys[b % len(keys)]) for a, b in picks]
    vocab.update({prefix + keys[b % len(keys)]: 5000 + n for n, (_, b) in enumerate(picks)})
    merges = [f"{a} {b}" for a, b in pairs] if form == "str" else [[a, b] for a, b in pairs]
    native = _merge_id_columns(vocab, merges, prefix)
    want = _python_columns(vocab, merges, prefix)
    if native is not None:
        assert native == tuple(want)
    elif want is not None:   # only merges the native path leaves to Python: a space in a part
        assert form == "str" and any(" " in a + b for a, b in pairs)


def test_native_merge_ids_leave_the_uncommon_to_python():
    vocab = {"a": 0, "b": 1, "ab": 2}
    assert _merge_id_columns(vocab, ["a b"]) == ([0], [1], [2])
    for merges in (["a  b"], ["ab"], ["a c"], [["a"]], [["a", 1]], [("a", "b")], [7]):
        assert _merge_id_columns(vocab, merges) is None, merges
    assert _merge_id_columns({"a": 0, "b": True, "ab": 2}, ["a b"]) is None
    assert _merge_id_columns({"a": 0, "##b": 1, "ab": 2}, ["a ##b"], "##") == ([0], [1], [2])
    assert _merge_id_columns({"a": 0, "b": 1, "ab": 2}, ["a b"], "##") is None


def test_published_files_merge_ids_native_equal_python(vocab_file):
    from fastbpe.formats._hfjson import read_json
    from fastbpe.formats.hf_pipeline import check_model

    for name in ("llama-3.2/tokenizer.json", "qwen3/tokenizer.json", "deepseek-v4/tokenizer.json", "gpt2.tokenizer.json"):
        model = read_json(vocab_file(name))["model"]
        assert _merge_id_columns(model["vocab"], model["merges"]) == tuple(check_model(model, name)[3]), name


@settings(max_examples=300, deadline=None)
@given(pairs=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), max_size=12),
       pieces=st.lists(st.binary(max_size=9).map(lambda b: bytes(97 + x % 4 for x in b)), max_size=20))
def test_piece_counts_are_the_merge_lists_counts(pairs, pieces):
    """``MergeList.piece_counts`` (the rank-rule check's counts at load) is
    ``len(reference.hf.merge_by_list(...))`` of each piece, 3 for three or more."""
    import numpy as np

    MergeList = pytest.importorskip("fastbpe._hf_merge").MergeList
    toks, table = [97, 98, 99, 100], {}
    for a, b in pairs:
        a, b = toks[a % len(toks)], toks[b % len(toks)]
        if (a, b) not in table:
            table[(a, b)] = (len(table), 256 + len(table))
            toks.append(256 + len(table) - 1)
    merges = sorted(table.items(), key=lambda kv: kv[1][0])
    m = MergeList(list(range(256)), [a for (a, _), _ in merges], [b for (_, b), _ in merges], [n for _, (_, n) in merges], None, 0)
    got = m.piece_counts(b"".join(pieces), np.cumsum([len(p) for p in pieces], dtype=np.int64))
    assert list(got) == [min(3, len(ref.merge_by_list(list(p), table))) for p in pieces]
