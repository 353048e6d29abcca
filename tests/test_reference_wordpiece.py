"""fastbpe.reference.wordpiece: golden cases, parity with HF tokenizers on BERT, training."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe.reference import wordpiece as R

sys.path.insert(0, str(Path(__file__).parent))
from wordpiece_texts import TEXTS  # noqa: E402

HF = dict(allowed_special="all")  # HF's rule: special-token text becomes the token's id

COURSE_VOCAB = {
    "[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "film": 5, "çok": 6,
    "güzel": 7, "##di": 8, "oyun": 9, "##cu": 10, "##lar": 11, "iyi": 12, "kötü": 13, "##ydi": 14,
}



def test_course_golden_case():
    opts = R.BertOptions(lowercase=False)
    text = "oyuncular film güzeldi masa"
    assert R.tokenize(text, COURSE_VOCAB, opts) == ["oyun", "##cu", "##lar", "film", "güzel", "##di", "[UNK]"]
    assert R.encode(text, COURSE_VOCAB, opts, add_special_tokens=False) == [9, 10, 11, 5, 7, 8, 1]
    assert R.encode(text, COURSE_VOCAB, opts) == [2, 9, 10, 11, 5, 7, 8, 1, 3]


def test_unmatched_part_makes_whole_word_unk():
    vocab = {"[UNK]": 0, "oyun": 1, "##cu": 2}
    # "oyuncux": oyun + ##cu match, then "x" has no piece: the whole word is one [UNK].
    assert R.wordpiece_word("oyuncux", vocab) == ["[UNK]"]
    assert R.wordpiece_word("oyuncu", vocab) == ["oyun", "##cu"]


def test_long_word_counts_characters_not_bytes():
    vocab = {"[UNK]": 0, "é": 1, "##é": 2}
    assert R.wordpiece_word("é" * 100, vocab) == ["é"] + ["##é"] * 99
    assert R.wordpiece_word("é" * 101, vocab) == ["[UNK]"]
    assert R.wordpiece_word("é" * 3, vocab, max_input_chars_per_word=2) == ["[UNK]"]


def test_normalisation_steps():
    assert R.clean_text("a\tb\x00c\ufffdd\u200be") == "a bcde"
    assert R.pad_cjk("a中b") == "a 中 b"
    assert R.strip_accents("Çok güzel") == "Cok guzel"
    assert R.lowercase("ΟΔΟΣ") == "οδοσ"  # per character: no final sigma
    assert R.lowercase("İ") == "i\u0307"
    assert R.normalize("İ") == "i"  # strip accents happens before lowercase (HF order)
    assert R.normalize("Héllo", lowercase_text=False) == "Héllo"
    assert R.normalize("Héllo", lowercase_text=False, strip_accents_text=True) == "Hello"
    assert R.normalize("Héllo", lowercase_text=True, strip_accents_text=False) == "héllo"


def test_pre_tokenize_punctuation_and_whitespace():
    assert R.pre_tokenize("Hi, you!  $5+x^2") == ["Hi", ",", "you", "!", "$", "5", "+", "x", "^", "2"]
    assert R.pre_tokenize("a\u3000b\u2028c") == ["a", "b", "c"]
    assert R.pre_tokenize("«quoted»—dash") == ["«", "quoted", "»", "—", "dash"]


def test_split_special_tokens_leftmost_longest():
    assert R.split_special_tokens("x[SEP]y", ["[SEP]"]) == [("x", False), ("[SEP]", True), ("y", False)]
    assert R.split_special_tokens("[A][AB]", ["[A]", "[AB]"]) == [("[A]", True), ("[AB]", True)]


def test_decode_joins_pieces_with_cleanup():
    assert R.decode_tokens(["un", "##fair", "!", "it", "'", "s"]) == "unfair! it ' s"
    assert R.decode_tokens(["hello", ".", "?", ","]) == "hello.?,"
    assert R.decode_tokens(["a", "##b"], clean_up=False) == "ab"


# ---------------------------------------------------------------------------------------
# Parity with HF tokenizers on BERT uncased
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bert(vocab_file):
    tokenizers = pytest.importorskip("tokenizers")
    path = vocab_file("bert-base-uncased/tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(path))
    hf.no_truncation()  # the file asks for fixed padding/truncation to 128
    hf.no_padding()
    vocab = hf.get_vocab()
    return hf, vocab


@pytest.mark.parametrize("text", TEXTS)
def test_matches_hf_on_mixed_text(bert, text):
    hf, vocab = bert
    enc = hf.encode(text)
    assert R.encode(text, vocab, **HF) == enc.ids
    assert R.tokenize(text, vocab, **HF) == hf.encode(text, add_special_tokens=False).tokens
    assert R.encode(text, vocab, add_special_tokens=False, **HF) == hf.encode(text, add_special_tokens=False).ids
    for skip in (True, False):
        assert R.decode(enc.ids, vocab, skip_special_tokens=skip) == hf.decode(enc.ids, skip_special_tokens=skip)


def test_pairs_match_hf_with_type_ids(bert):
    hf, vocab = bert
    for a, b in zip(TEXTS, TEXTS[1:] + TEXTS[:1]):
        enc = hf.encode(a, b)
        assert R.encode_pair(a, b, vocab, **HF) == (enc.ids, enc.type_ids)
        enc = hf.encode(a, b, add_special_tokens=False)
        assert R.encode_pair(a, b, vocab, add_special_tokens=False, **HF) == (enc.ids, enc.type_ids)


def test_cased_configuration_matches_hf(bert):
    from tokenizers import Tokenizer, normalizers

    hf, vocab = bert
    cased = Tokenizer.from_str(hf.to_str())
    cased.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False)
    opts = R.BertOptions(lowercase=False, strip_accents=False)
    for text in TEXTS:
        assert R.encode(text, vocab, opts, **HF) == cased.encode(text).ids


# Every code point agrees with HF (tests/test_reference_bert_unicode.py), so no character is filtered out.
_chars = st.characters(codec="utf-8")
_piece = st.one_of(
    _chars, _chars, st.sampled_from(list(" \t\n.,!?'#-[]") + ["[MASK]", "##", "ing", "un", "中", "é", "a" * 99])
)
_text = st.lists(_piece, max_size=40).map("".join)


@settings(max_examples=1000)
@given(_text)
def test_matches_hf_on_random_text(bert, text):
    hf, vocab = bert
    assert R.encode(text, vocab, **HF) == hf.encode(text).ids


@settings(max_examples=200)
@given(_text, _text)
def test_pairs_match_hf_on_random_text(bert, a, b):
    hf, vocab = bert
    enc = hf.encode(a, b)
    assert R.encode_pair(a, b, vocab, **HF) == (enc.ids, enc.type_ids)


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------

COURSE_CORPUS = ["hug " * 10 + "pug " * 5 + "pun " * 12 + "bun " * 4 + "hugs " * 5]


def test_training_hand_checked_course_corpus():
    vocab, merges = R.train(COURSE_CORPUS, 30, return_merges=True)
    assert list(vocab)[:5] == list(R.SPECIAL_TOKENS)
    # Alphabet: first characters, then ## inner characters, each by code point.
    assert list(vocab)[5:12] == ["b", "h", "p", "##g", "##n", "##s", "##u"]
    # 1st: ##g ##s scores 5/(20*5) = 1/20, the best although (##u, ##g) is far more frequent.
    # 2nd: every pair with ##u scores exactly 1/36 (count(##u)=36): the tie goes to the
    #      highest pair count, (p, ##u) = 17.
    # 3rd: (h, ##u) = 15/(15*19) beats (##u, ##g) = 10/(19*15) on score.
    assert merges[:3] == [("##g", "##s"), ("p", "##u"), ("h", "##u")]
    assert merges == [
        ("##g", "##s"), ("p", "##u"), ("h", "##u"), ("b", "##u"), ("hu", "##gs"),
        ("hu", "##g"), ("bu", "##n"), ("pu", "##n"), ("pu", "##g"),
    ]
    assert list(vocab)[12:] == ["##gs", "pu", "hu", "bu", "hugs", "hug", "bun", "pun", "pug"]
    assert len(vocab) == 21  # stops when no pair is left, below vocab_size


def test_training_likelihood_not_frequency():
    # (t, ##h) is by far the most frequent pair, but t and ##h are common on their own;
    # (q, ##z) is rare but q and ##z only ever occur together, so its score is 1 / count.
    corpus = ["th " * 50 + "ta " * 50 + "ah " * 50 + "qz " * 2]
    vocab, merges = R.train(corpus, 20, return_merges=True)
    assert merges[0] == ("q", "##z")
    # Score check by hand: (q,##z) = 2/(2*2) = 1/2; (t,##h) = 50/(100*100).
    assert R.better((2, 2, 2, "q", "##z"), (50, 100, 100, "t", "##h"))


def test_exact_tie_breaks():
    # Equal score, equal pair count: the smaller first token wins, then the smaller second.
    assert R.better((3, 3, 3, "a", "##z"), (3, 3, 3, "b", "##a"))
    assert R.better((3, 3, 3, "a", "##a"), (3, 3, 3, "a", "##b"))
    # Equal score (1/6 == 2/12), different pair counts: the higher count wins.
    assert R.better((2, 3, 4, "z", "##z"), (1, 2, 3, "a", "##a"))
    assert not R.better((1, 2, 3, "a", "##a"), (2, 3, 4, "z", "##z"))
    # Scores that differ beyond float precision are still ordered exactly.
    big = 10**18
    assert R.better((big + 1, big, big, "b", "##b"), (big, big, big, "a", "##a"))
    corpus = ["ab cd " * 3]
    _, merges = R.train(corpus, 100, return_merges=True)
    assert merges[:2] == [("a", "##b"), ("c", "##d")]


def test_training_options():
    corpus = ["Hello hello HELLO world wörld " * 3]
    vocab = R.train(corpus, 100)
    assert "hello" in vocab and "world" in vocab and "H" not in vocab and "##ö" not in vocab
    cased = R.train(corpus, 100, R.BertOptions(lowercase=False))
    assert "H" in cased and "##ö" in cased and "HELLO" in cased
    # min_frequency: pairs seen fewer times are never merged.
    rare = R.train(["ab ab cd"], 100, min_frequency=2)
    assert "ab" in rare and "cd" not in rare
    # limit_alphabet keeps the most frequent characters and drops words using others.
    lim = R.train(["aaa bbb c"], 100, limit_alphabet=2)
    assert "c" not in lim and "a" in lim and "##b" in lim
    # vocab_size stops merging; specials come first; the alphabet is always complete.
    small = R.train(corpus, 8)
    assert list(small)[:5] == list(R.SPECIAL_TOKENS) and "##d" in small


def test_trained_vocab_encodes_its_corpus_without_unk():
    text = "the quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs"
    vocab = R.train([text], 200)
    toks = R.tokenize(text, vocab)
    assert "[UNK]" not in toks
    assert R.decode([vocab[t] for t in toks], vocab).replace(" ;", ";") == text
