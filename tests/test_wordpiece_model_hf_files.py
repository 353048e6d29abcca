"""WordPiece on tokenizer.json files as HF writes them: post-processors, truncation and
padding (issue 21), pickling and process pools, thread bounds of batches.

The files are made by ``tokenizers`` itself (``BertWordPieceTokenizer`` trained on a tiny
corpus saves ``post_processor: null``; the other sections are set through its API), and
every id, type id and attention mask is compared with HF's ``encode`` / ``encode_batch``.
"""
from __future__ import annotations

import itertools
import multiprocessing
import pickle
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe import shards
from fastbpe.reference import wordpiece as R
from fastbpe.wordpiece import WordPiece

sys.path.insert(0, str(Path(__file__).parent))
from io_stub import ListTask  # noqa: E402  (fastbpe.io's stand-in until it lands)

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Tokenizer, processors  # noqa: E402

CORPUS = [
    "hello world this is a test of the tokenizer",
    "another line with words and more words, unaffable things!",
    "Héllo Wörld: the quick brown fox jumps over the lazy dog.",
] * 10

TEXTS = [
    "hello world", "", "a", "this is a test of the tokenizer and another line with more words",
    "unknown zyxw words, the end!", "[SEP] inside [MASK] text", "fox " * 30, "Héllo   wörld\tthe\nend",
]

HF = dict(allowed_special="all")   # HF's rule for special-token text


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tokenizer.json exactly as BertWordPieceTokenizer saves it (post_processor: null)."""
    bert = tokenizers.BertWordPieceTokenizer()
    bert.train_from_iterator(CORPUS, vocab_size=120, show_progress=False)
    path = tmp_path_factory.mktemp("hf") / "bert_wordpiece.json"
    bert.save(str(path))
    return path


def _ids(hf, name):
    return hf.token_to_id(name)


POSTS = {
    "null": lambda hf: None,
    "bert": lambda hf: processors.BertProcessing(("[SEP]", _ids(hf, "[SEP]")), ("[CLS]", _ids(hf, "[CLS]"))),
    "template": lambda hf: processors.TemplateProcessing(
        single="[CLS] [MASK] $A [SEP]", pair="[CLS] $B:1 [SEP] $A [SEP]:1",
        special_tokens=[(t, _ids(hf, t)) for t in ("[CLS]", "[SEP]", "[MASK]")]),
    "roberta": lambda hf: processors.RobertaProcessing(("[SEP]", _ids(hf, "[SEP]")), ("[CLS]", _ids(hf, "[CLS]"))),
}
TRUNCATIONS = {
    "none": None,
    "right7": dict(max_length=7),
    "left9-stride1": dict(max_length=9, stride=1, direction="left"),
    "only_first8": dict(max_length=8, strategy="only_first"),
    "only_second8": dict(max_length=8, strategy="only_second"),
}
PADDINGS = {
    "none": None,
    "fixed12": dict(length=12),
    "longest-left-x8": dict(direction="left", pad_to_multiple_of=8, pad_id=4, pad_type_id=1, pad_token="[MASK]"),
}


def _variant(trained, tmp_path, post, trunc, pad):
    hf = Tokenizer.from_file(str(trained))
    hf.post_processor = POSTS[post](hf)
    if TRUNCATIONS[trunc] is not None:
        hf.enable_truncation(**TRUNCATIONS[trunc])
    if PADDINGS[pad] is not None:
        hf.enable_padding(**PADDINGS[pad])
    path = tmp_path / f"{post}-{trunc}-{pad}.json"
    hf.save(str(path))
    return Tokenizer.from_file(str(path)), WordPiece.from_file(path)


def _hf_or_error(fn):
    try:
        return fn()
    except Exception as exc:  # HF raises plain Exception for truncation errors
        return type(exc)


def _same(hf_call, ours_call):
    """Both give the same result, or HF fails and fastbpe raises ValueError."""
    expected = _hf_or_error(hf_call)
    if isinstance(expected, type):
        with pytest.raises(ValueError):
            ours_call()
        return None
    got = ours_call()
    return expected, got


def test_bert_wordpiece_tokenizer_file_has_no_post_processor(trained):
    """Issue 21: 0 of 1,211 texts had HF's ids, because [CLS]/[SEP] were added anyway."""
    hf = Tokenizer.from_file(str(trained))
    wp = WordPiece.from_file(trained)
    assert wp.post_processor == R.PostProcessor.none()
    for t in TEXTS:
        assert wp.encode(t, **HF) == hf.encode(t).ids == wp.encode(t, add_special_tokens=False, **HF)
    assert wp.encode("hello world") == [hf.token_to_id("hello"), hf.token_to_id("world")]


@pytest.mark.parametrize("post", list(POSTS))
@pytest.mark.parametrize("trunc", list(TRUNCATIONS))
@pytest.mark.parametrize("pad", list(PADDINGS))
def test_encode_matches_hf(trained, tmp_path, post, trunc, pad):
    hf, wp = _variant(trained, tmp_path, post, trunc, pad)
    for t in TEXTS:
        for special in (True, False):
            both = _same(lambda: hf.encode(t, add_special_tokens=special),
                         lambda: wp.encode_plus(t, add_special_tokens=special, **HF))
            if both is None:
                with pytest.raises(ValueError):
                    wp.encode(t, add_special_tokens=special, **HF)
                continue
            enc, plus = both
            assert wp.encode(t, add_special_tokens=special, **HF) == enc.ids
            assert plus["input_ids"] == enc.ids
            assert plus["token_type_ids"] == enc.type_ids
            assert plus["attention_mask"] == enc.attention_mask
            assert plus["special_tokens_mask"] == enc.special_tokens_mask
            assert plus["offsets"] == enc.offsets
    for special in (True, False):
        both = _same(lambda: hf.encode_batch(TEXTS, add_special_tokens=special),
                     lambda: wp.encode_batch(TEXTS, add_special_tokens=special, num_threads=2, **HF))
        if both is not None:
            assert both[1] == [e.ids for e in both[0]]


@pytest.mark.parametrize("post", list(POSTS))
@pytest.mark.parametrize("trunc", list(TRUNCATIONS))
@pytest.mark.parametrize("pad", ["none", "longest-left-x8"])
def test_pairs_match_hf(trained, tmp_path, post, trunc, pad):
    hf, wp = _variant(trained, tmp_path, post, trunc, pad)
    for a, b in itertools.product(TEXTS[:5], TEXTS[3:]):
        for special in (True, False):
            both = _same(lambda: hf.encode(a, b, add_special_tokens=special),
                         lambda: wp.encode_plus(a, b, add_special_tokens=special, **HF))
            if both is None:
                continue
            enc, plus = both
            assert (plus["input_ids"], plus["token_type_ids"]) == (enc.ids, enc.type_ids)
            assert (plus["attention_mask"], plus["offsets"]) == (enc.attention_mask, enc.offsets)


@pytest.mark.parametrize("post", list(POSTS))
def test_reference_is_the_specification(trained, tmp_path, post):
    """The reference's encode_full, from the same file sections, gives the same lists."""
    import json

    hf, wp = _variant(trained, tmp_path, post, "left9-stride1", "longest-left-x8")
    doc = json.loads(hf.to_str())
    kwargs = dict(post_processor=R.PostProcessor.from_hf(doc["post_processor"]),
                  truncation=R.Truncation.from_hf(doc["truncation"]), padding=R.Padding.from_hf(doc["padding"]))
    opts = R.BertOptions(special_tokens=wp.special_tokens)
    for a, b in itertools.product(TEXTS, [None, "hello world"]):
        ref = R.encode_full(a, b, wp.vocab, opts, **kwargs, **HF)
        plus = wp.encode_plus(a, b, **HF)
        assert {k: plus[k] for k in ref} == ref
    assert wp.post_processor.to_hf() == doc["post_processor"]


def test_save_keeps_the_sections(trained, tmp_path):
    hf, wp = _variant(trained, tmp_path, "roberta", "left9-stride1", "longest-left-x8")
    back = WordPiece.from_file(wp.save(tmp_path / "ours.json"))
    again = Tokenizer.from_file(str(tmp_path / "ours.json"))
    for t in TEXTS:
        assert back.encode(t, **HF) == wp.encode(t, **HF) == again.encode(t).ids == hf.encode(t).ids


def test_per_call_max_length_replaces_the_files(trained, tmp_path):
    hf, wp = _variant(trained, tmp_path, "bert", "right7", "none")
    hf.enable_truncation(5)
    text = TEXTS[3]
    assert wp.encode(text, max_length=5) == hf.encode(text).ids
    assert wp.encode_batch([text, "a"], max_length=5) == [e.ids for e in hf.encode_batch([text, "a"])]
    with pytest.raises(ValueError, match="max_length"):
        wp.encode(text, max_length=1)


def test_bad_sections_name_the_file(trained, tmp_path):
    import json

    doc = json.loads(trained.read_text(encoding="utf-8"))
    for section, value, pattern in [
        ("post_processor", {"type": "ByteLevel"}, "ByteLevel"),
        ("post_processor", {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "[X]", "type_id": 0}}],
                            "pair": [], "special_tokens": {}}, r"\[X\]"),
        ("truncation", {"max_length": 4, "strategy": "Sideways", "stride": 0}, "Sideways"),
        ("padding", {"strategy": "Longest"}, "Longest"),
        ("truncation", {"max_length": 3, "strategy": "LongestFirst", "stride": 3},  "stride"),
    ]:
        bad = dict(doc, **{section: value})
        if section == "truncation" and value["stride"]:
            bad["post_processor"] = {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]}
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(bad), encoding="utf-8")
        with pytest.raises(ValueError, match=pattern) as info:
            WordPiece.from_file(path)
        assert "bad.json" in str(info.value)


_word = st.sampled_from(sorted({w for line in CORPUS for w in line.split()}) + ["[SEP]", "[MASK]", "zq", "é", "中"])
_text = st.lists(st.one_of(_word, st.characters(codec="utf-8"), st.just(" ")), max_size=30).map("".join)


@pytest.fixture(scope="module")
def variants(trained, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("variants")
    return [_variant(trained, tmp, p, t, d) for p, t, d in
            [("null", "none", "none"), ("bert", "right7", "fixed12"), ("template", "left9-stride1", "longest-left-x8"),
             ("roberta", "only_first8", "none")]]


@settings(max_examples=150)
@given(st.lists(_text, min_size=1, max_size=4))
def test_random_texts_match_hf(variants, texts):
    for hf, wp in variants:
        batch = _same(lambda: hf.encode_batch(texts), lambda: wp.encode_batch(texts, **HF))
        if batch is not None:
            assert batch[1] == [e.ids for e in batch[0]]
        for t in texts:
            single = _same(lambda: hf.encode(t), lambda: wp.encode(t, **HF))
            if single is not None:
                assert single[1] == single[0].ids
            assert wp.encode(t, disallowed_special=()) == R.encode(
                t, wp.vocab, R.BertOptions(special_tokens=wp.special_tokens), post_processor=wp.post_processor,
                truncation=wp.truncation, padding=wp.padding, disallowed_special=())


# ---------------------------------------------------------------------------------------
# Pickling and process pools (issue 22)
# ---------------------------------------------------------------------------------------


def test_pickle_round_trip(trained, tmp_path):
    _, wp = _variant(trained, tmp_path, "template", "left9-stride1", "longest-left-x8")
    back = pickle.loads(pickle.dumps(wp))
    assert back._options() == wp._options() and back.vocab == wp.vocab
    assert [back.encode(t, **HF) for t in TEXTS] == [wp.encode(t, **HF) for t in TEXTS]
    plain = WordPiece({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "un": 3, "##fair": 4})
    assert pickle.loads(pickle.dumps(plain)).encode("unfair") == [1, 3, 4, 2]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_process_pools(trained, tmp_path, method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    _, wp = _variant(trained, tmp_path, "bert", "right7", "none")
    texts = [t for t in TEXTS if "[" not in t] * 3
    with multiprocessing.get_context(method).Pool(2) as pool:
        got = pool.map(wp.encode_ordinary, texts)
        batches = pool.map(wp.encode_batch, [texts[:5], texts[5:]])
    assert got == [wp.encode_ordinary(t) for t in texts]
    assert batches == [wp.encode_batch(texts[:5]), wp.encode_batch(texts[5:])]


# ---------------------------------------------------------------------------------------
# Threads of batches, and shards of documents (issue 22)
# ---------------------------------------------------------------------------------------


def test_num_threads_is_checked_and_bounded(trained, monkeypatch):
    from fastbpe import _wordpiece

    wp = WordPiece.from_file(trained)
    for bad, err in ((10**9, ValueError), (0, ValueError), (True, TypeError), (2.0, TypeError), ("2", TypeError)):
        with pytest.raises(err, match="num_threads"):
            wp.encode_batch(["a"], num_threads=bad)
        with pytest.raises(err, match="num_threads"):
            wp.encode_ordinary_batch(["a"], num_threads=bad)
    asked = []
    real = _wordpiece._batch_threads

    def spy(num_threads, points):
        asked.append((num_threads, points))
        return real(num_threads, points)

    monkeypatch.setattr(_wordpiece, "_batch_threads", spy)
    assert wp.encode_batch(["hello", "world"], num_threads=1024) == [wp.encode("hello"), wp.encode("world")]
    assert asked == [(1024, 10)]   # the BPE rule decides: num_threads is only an upper bound


def test_batch_thread_rule_is_the_bpe_rule():
    from fastbpe import _encode

    old = _encode.default_tuning(points_per_thread=1 << 14, cap_to_cpus=True)
    try:
        assert _encode._batch_threads(1024, 100 * 60) == 1    # 100 short lines: no thread started
        wp = WordPiece({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "a": 3})
        assert wp.encode_batch(["a"] * 100, num_threads=1024) == [[1, 3, 2]] * 100
    finally:
        _encode.default_tuning(**old)


def test_shards_keep_document_text_ordinary(tmp_path, vocab_file):
    """Issue 22: the document "first [SEP] second" gave three separators for one boundary."""
    wp = WordPiece.from_file(vocab_file("bert-base-uncased/tokenizer.json"))   # pads to 128
    sep = wp.token_to_id("[SEP]")
    # the library rule by default: special-token text in a document is refused, naming it
    with pytest.raises(shards.DisallowedSpecialInDocument):
        shards.write_shards(wp, [ListTask(["first [SEP] second", "third"])], tmp_path / "refused", progress=False)
    shards.write_shards(wp, [ListTask(["first [SEP] second", "third"])], tmp_path, progress=False,
                        disallowed_special=())
    stream = shards.read_shards(tmp_path).tolist()
    assert stream.count(sep) == 2   # the one after each document (the shard format's EOT rule)
    assert stream == wp.encode_ordinary("first [SEP] second") + [sep] + wp.encode_ordinary("third") + [sep]
    assert wp.token_to_id("[PAD]") not in stream
