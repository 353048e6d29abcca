"""fastbpe._wordpiece (native core behind fastbpe.WordPiece): native == reference == HF."""
from __future__ import annotations

import sys
from pathlib import Path

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe import _wordpiece as native
from fastbpe.reference import wordpiece as R
from fastbpe import WordPiece, train_wordpiece

sys.path.insert(0, str(Path(__file__).parent))
from wordpiece_texts import TEXTS  # noqa: E402

HF = dict(allowed_special="all")          # HF's rule: special-token text becomes the id
ORDINARY = dict(disallowed_special=())    # special-token text is ordinary text



@pytest.fixture(scope="module")
def bert(vocab_file):
    tokenizers = pytest.importorskip("tokenizers")
    path = vocab_file("bert-base-uncased/tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(path))
    hf.no_truncation()
    hf.no_padding()
    return hf, WordPiece.from_file(path, truncation=None, padding=None)


@pytest.mark.parametrize("text", TEXTS)
def test_ids_tokens_offsets_match_hf(bert, text):
    hf, wp = bert
    enc = hf.encode(text)
    plus = wp.encode_plus(text, **HF)
    assert plus["input_ids"] == enc.ids == wp.encode(text, **HF)
    assert plus["tokens"] == enc.tokens
    assert plus["offsets"] == enc.offsets
    assert plus["special_tokens_mask"] == enc.special_tokens_mask
    assert wp.encode(text, add_special_tokens=False, **HF) == hf.encode(text, add_special_tokens=False).ids
    assert wp.tokenize(text, **HF) == R.tokenize(text, wp.vocab, **HF)


def test_pairs_truncation_padding_match_hf(bert):
    hf, wp = bert
    from tokenizers import Tokenizer

    pairs = list(zip(TEXTS, TEXTS[3:] + TEXTS[:3]))
    for a, b in pairs:
        enc = hf.encode(a, b)
        plus = wp.encode_plus(a, b, **HF)
        assert (plus["input_ids"], plus["token_type_ids"], plus["offsets"]) == (enc.ids, enc.type_ids, enc.offsets)
    for max_length in (3, 4, 7, 16, 64):
        t = Tokenizer.from_str(hf.to_str())
        t.enable_truncation(max_length)
        t.enable_padding(length=max_length)
        for a, b in pairs:
            enc = t.encode(a, b)
            plus = wp.encode_plus(a, b, max_length=max_length, padding="max_length", **HF)
            assert plus["input_ids"] == enc.ids
            assert plus["token_type_ids"] == enc.type_ids
            assert plus["attention_mask"] == enc.attention_mask
            assert plus["offsets"] == enc.offsets
            single = t.encode(a)
            assert wp.encode_plus(a, max_length=max_length, padding=True, **HF)["input_ids"] == single.ids
            assert wp.encode(a, max_length=max_length, **HF) == [i for i, m in zip(single.ids, single.attention_mask) if m]


def test_max_length_errors(bert):
    _, wp = bert
    with pytest.raises(ValueError, match="max_length"):
        wp.encode("hi", max_length=1)
    with pytest.raises(TypeError):
        wp.encode("hi", max_length="5")
    with pytest.raises(ValueError, match="max_length"):
        wp.encode_plus("hi", padding=True)


def test_batch_equals_single_for_every_thread_count(bert):
    hf, wp = bert
    texts = TEXTS * 7
    expected = [wp.encode(t, **HF) for t in texts]
    for n in (1, 2, 3, 16):
        assert wp.encode_batch(texts, num_threads=n, **HF) == expected
    assert [e.ids for e in hf.encode_batch(texts)] == expected
    assert wp.encode_batch([]) == []
    with pytest.raises(TypeError):
        wp.encode_batch("one string")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        wp.encode_batch(["a", b"b"])
    with pytest.raises(ValueError):
        wp.encode_batch(["a"], num_threads=0)


def test_batch_arrays(bert):
    hf, wp = bert
    texts = TEXTS[:6]
    arr = wp.encode_batch_arrays(texts, num_threads=2, **HF)
    width = max(len(wp.encode(t, **HF)) for t in texts)
    assert arr["input_ids"].shape == (6, width) and arr["input_ids"].dtype == np.int32
    assert arr["offsets"].shape == (6, width, 2)
    for row, t in enumerate(texts):
        enc = hf.encode(t)
        n = len(enc.ids)
        assert arr["lengths"][row] == n
        assert arr["input_ids"][row, :n].tolist() == enc.ids
        assert (arr["input_ids"][row, n:] == wp.token_to_id("[PAD]")).all()
        assert arr["attention_mask"][row].tolist() == [1] * n + [0] * (width - n)
        assert [tuple(x) for x in arr["offsets"][row, :n].tolist()] == enc.offsets
    fixed = wp.encode_batch_arrays(texts, max_length=8, padding="max_length", **HF)
    assert fixed["input_ids"].shape == (6, 8)
    assert fixed["input_ids"][0].tolist() == wp.encode(texts[0], max_length=8) + [0] * (8 - len(wp.encode(texts[0], max_length=8)))


# ---------------------------------------------------------------------------------------
# LinMaxMatch against MaxMatch on adversarial vocabularies
# ---------------------------------------------------------------------------------------


def test_linmaxmatch_equals_maxmatch_on_random_vocabs():
    rng = random.Random(7)
    for trial in range(300):
        alphabet = "abc"
        vocab = {"[UNK]": 0}
        for _ in range(rng.randint(1, 14)):
            tok = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 5)))
            if rng.random() < 0.5:
                tok = "##" + tok
            vocab.setdefault(tok, len(vocab))
        wp = WordPiece(vocab, lowercase=False, max_input_chars_per_word=12)
        for _ in range(20):
            word = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 14)))
            expected = R.wordpiece_word(word, vocab, max_input_chars_per_word=12)
            assert wp.tokenize(word) == expected, (vocab, word)
            plus = wp.encode_plus(word, add_special_tokens=False)
            # offsets tile the word exactly unless it is [UNK]
            if expected != ["[UNK]"]:
                spans = plus["offsets"]
                assert spans[0][0] == 0 and spans[-1][1] == len(word)
                assert all(x[1] == y[0] for x, y in zip(spans, spans[1:]))


def test_prefix_made_of_letters():
    # With a prefix that is not punctuation, a word may start with it: the first token is
    # then looked up spelled in full, as HF does.
    vocab = {"[UNK]": 0, "xxab": 1, "xxa": 2, "a": 3, "xxb": 4}
    wp = WordPiece(vocab, lowercase=False, continuing_subword_prefix="xx")
    for word in ("xxab", "ab", "xxabb", "abb", "xxa"):
        assert wp.tokenize(word) == R.wordpiece_word(word, vocab, prefix="xx")
    assert wp.encode_plus("xxab", add_special_tokens=False)["offsets"] == [(0, 4)]


def test_long_inputs_are_fast_enough_to_finish():
    wp = WordPiece({"[UNK]": 0, "a": 1, "##a": 2, "aaaaaaaaab": 3, "##aaaaaaaab": 4})
    # 10**6 characters of adversarial words (long near-misses) and one huge word
    assert len(wp.encode(("a" * 99 + " ") * 10000, add_special_tokens=False)) == 99 * 10000
    assert wp.encode("a" * 10**6, add_special_tokens=False) == [0]
    assert wp.encode("\u0301" * 10**5 + "a", add_special_tokens=False) == [1]


# ---------------------------------------------------------------------------------------
# Options: cased, Turkish, random text against reference and HF
# ---------------------------------------------------------------------------------------


def test_turkish_lowercase():
    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "istanbul": 3, "ısık": 4, "i̇stanbul": 5, "isik": 6, "ışık": 7}
    default = WordPiece(vocab, strip_accents=False)
    assert default.tokenize("İstanbul") == ["i̇stanbul"]  # BERT/HF: İ -> i + combining dot
    tr = WordPiece(vocab, strip_accents=False, turkish_lowercase=True)
    assert tr.tokenize("İstanbul IŞIK") == ["istanbul", "ışık"]
    tr_strip = WordPiece(vocab, turkish_lowercase=True)
    assert tr_strip.tokenize("İstanbul IŞIK") == ["istanbul", "ısık"]
    opts = R.BertOptions(turkish_lowercase=True)
    assert R.tokenize("İstanbul IŞIK", vocab, opts) == ["istanbul", "ısık"]


def test_turkish_tokenizer_json_round_trip_in_hf(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    corpus = ["İstanbul IŞIK ılık İzmir Irmak ırmak istanbul " * 3]
    wp = train_wordpiece(documents=corpus, vocab_size=60)
    wp = WordPiece(wp.vocab, turkish_lowercase=True)
    path = wp.save(tmp_path / "tr.json")
    back = WordPiece.from_file(path)
    assert back._options()["turkish_lowercase"] is True
    hf = tokenizers.Tokenizer.from_file(str(path))
    for t in corpus + ["IŞIKLI İSTANBUL"]:
        assert hf.encode(t).ids == wp.encode(t) == back.encode(t)


_pool = st.one_of(
    st.characters(codec="utf-8"),
    st.sampled_from(list(" \t\n.,!?'#[]İIıé中\u0301\U0001D165\x00") + ["[MASK]", "##", "ing", "a" * 99]),
)
_text = st.lists(_pool, max_size=40).map("".join)

CONFIGS = [
    dict(),
    dict(lowercase=False),
    dict(lowercase=False, strip_accents=True, clean_text=False, tokenize_chinese_chars=False),
    dict(strip_accents=False, turkish_lowercase=True),
    dict(turkish_lowercase=True),
]


@pytest.fixture(scope="module")
def configured(bert):
    _, wp = bert
    vocab = wp.vocab
    return [(WordPiece(vocab, **cfg), R.BertOptions(**{
        "lowercase": cfg.get("lowercase", True), "strip_accents": cfg.get("strip_accents"),
        "clean_text": cfg.get("clean_text", True),
        "tokenize_chinese_chars": cfg.get("tokenize_chinese_chars", True),
        "turkish_lowercase": cfg.get("turkish_lowercase", False),
    })) for cfg in CONFIGS]


@settings(max_examples=600)
@given(_text)
def test_native_equals_reference_on_random_text(configured, text):
    for wp, opts in configured:
        vocab = wp._vocab
        for rule in (HF, ORDINARY):
            assert wp.tokenize(text, **rule) == R.tokenize(text, vocab, opts, **rule)
            assert wp.encode(text, **rule) == R.encode(text, vocab, opts, **rule)
        if any(s in text for s in wp.special_tokens):   # the default: an error, as tiktoken
            with pytest.raises(ValueError, match="disallowed special token"):
                wp.encode(text)
        else:
            assert wp.encode(text) == R.encode(text, vocab, opts)


@settings(max_examples=600)
@given(st.lists(st.one_of(st.characters(codec="utf-8"), st.sampled_from(["[SEP]", " ", "é", "中"])), max_size=40).map("".join))
def test_native_equals_hf_on_random_text_with_offsets(bert, text):
    hf, wp = bert
    enc = hf.encode(text)
    plus = wp.encode_plus(text, **HF)
    assert plus["input_ids"] == enc.ids
    assert plus["offsets"] == enc.offsets


def test_cased_trained_vocab_matches_hf(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    corpus = [" ".join(TEXTS[:4] + TEXTS[8:12]) * 2]
    wp = train_wordpiece(documents=corpus, vocab_size=300, lowercase=False)
    hf = tokenizers.Tokenizer.from_file(str(wp.save(tmp_path / "cased.json")))
    for t in TEXTS:
        enc = hf.encode(t)
        plus = wp.encode_plus(t, **HF)
        assert plus["input_ids"] == enc.ids and plus["offsets"] == enc.offsets


@pytest.mark.parametrize("text", [
    "\u08d4\u0316\u0301",               # kept mark (not Mn in Unicode 8.0) sorts after a dropped one
    "x \U0001D16D\u0316 y",              # a spacing mark of class 226 before one of 220
    "\u01d6\u0316q \u0301\u1b44",         # decomposed marks behind a later mark; class 9 after 230
    "a" + "\u0301\u1dfb\u0316\u302e" * 40,  # a run longer than 32 marks (the counting sort)
])
def test_offsets_follow_hf_when_nfd_reorders_marks(bert, text):
    """HF aligns NFD's reordered marks by position, not by character (before, a kept mark
    took its own input index: offsets differed although the ids agreed)."""
    hf, wp = bert
    enc = hf.encode(text, add_special_tokens=False)
    plus = wp.encode_plus(text, add_special_tokens=False)
    assert (plus["input_ids"], plus["offsets"]) == (enc.ids, enc.offsets)


def test_unicode_tables_are_cached():
    assert native.unicode_tables() is native.unicode_tables()


def test_runner_clamps_threads_to_its_arrays():
    """The core itself takes any int: more threads than the runner's MAX_THREADS_C
    thread ids (with the thread rule off) are clamped, not written past the array."""
    from fastbpe._tuning import default_tuning

    wp = WordPiece({"[UNK]": 0, "a": 1, "##a": 2})
    texts = ["a aa"] * 1100
    want = wp._core.encode_batch(texts, 1)[0].tolist()
    old = default_tuning(points_per_thread=0, cap_to_cpus=False)
    try:
        assert wp._core.encode_batch(texts, 5000)[0].tolist() == want
    finally:
        default_tuning(**old)
