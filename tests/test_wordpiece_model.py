"""fastbpe.wordpiece: the public WordPiece class and train_wordpiece."""
from __future__ import annotations

import pytest

from fastbpe import WordPiece, train_wordpiece

COURSE_VOCAB = {
    "[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "film": 5, "çok": 6,
    "güzel": 7, "##di": 8, "oyun": 9, "##cu": 10, "##lar": 11, "iyi": 12, "kötü": 13, "##ydi": 14,
}


@pytest.fixture()
def course():
    return WordPiece(COURSE_VOCAB, lowercase=False)


def test_course_golden_case(course):
    text = "oyuncular film güzeldi masa"
    assert course.tokenize(text) == ["oyun", "##cu", "##lar", "film", "güzel", "##di", "[UNK]"]
    assert course.encode(text, add_special_tokens=False) == [9, 10, 11, 5, 7, 8, 1]
    assert course.encode(text) == [2, 9, 10, 11, 5, 7, 8, 1, 3]


def test_pairs_and_type_ids(course):
    ids, types = course.encode_pair("film", "iyi kötü", return_type_ids=True)
    assert ids == [2, 5, 3, 12, 13, 3]
    assert types == [0, 0, 0, 1, 1, 1]
    assert course.encode_pair("film", "iyi") == [2, 5, 3, 12, 3]
    assert course.encode_pair("film", "iyi", add_special_tokens=False, return_type_ids=True) == ([5, 12], [0, 1])


def test_decode(course):
    assert course.decode([2, 9, 10, 11, 5, 3]) == "oyuncular film"
    assert course.decode([2, 9, 10, 11, 5, 3], skip_special_tokens=False) == "[CLS] oyuncular film [SEP]"
    with pytest.raises(KeyError, match="99"):
        course.decode([5, 99])
    with pytest.raises(KeyError, match="-1"):
        course.decode([-1])


def test_vocab_accessors(course):
    assert len(course) == course.vocab_size == 15
    v = course.vocab
    v["new"] = 99  # a copy: the tokenizer is unchanged
    assert "new" not in course.vocab
    assert course.token_to_id("film") == 5 and course.token_to_id("nope") is None
    assert course.id_to_token(8) == "##di"
    with pytest.raises(KeyError, match="15"):
        course.id_to_token(15)
    assert course.special_tokens == ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def test_lowercase_and_accents_options():
    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "cok": 3, "çok": 4, "Çok": 5}
    assert WordPiece(vocab).tokenize("Çok") == ["cok"]  # strip_accents follows lowercase
    assert WordPiece(vocab, strip_accents=False).tokenize("Çok") == ["çok"]
    assert WordPiece(vocab, lowercase=False).tokenize("Çok") == ["Çok"]
    assert WordPiece(vocab, lowercase=False, strip_accents=True).tokenize("Çok") == ["[UNK]"]  # "Cok"


def test_special_token_text_follows_tiktokens_rule(course):
    """No text becomes a control id unless the caller asks (issue 22): by default
    special-token text is an error, as in tiktoken; "all" is HF's behaviour; () makes it
    ordinary text."""
    text = "film [MASK] iyi"
    with pytest.raises(ValueError, match=r"disallowed special token '\[MASK\]' at position 5"):
        course.encode(text, add_special_tokens=False)
    with pytest.raises(ValueError, match="disallowed special token"):
        course.tokenize(text)
    with pytest.raises(ValueError, match="of text 1 of the batch"):
        course.encode_batch(["film", text])
    assert course.encode(text, add_special_tokens=False, allowed_special="all") == [5, 4, 12]
    assert course.encode(text, add_special_tokens=False, allowed_special={"[MASK]"}) == [5, 4, 12]
    assert course.encode_batch([text], allowed_special="all") == [[2, 5, 4, 12, 3]]
    # ordinary text: "[", "MASK", "]" are words of their own (unknown here)
    assert course.encode(text, add_special_tokens=False, disallowed_special=()) == [5, 1, 1, 1, 12]
    assert course.encode_ordinary(text) == [5, 1, 1, 1, 12]
    assert course.encode_ordinary_batch([text, "film"]) == [[5, 1, 1, 1, 12], [5]]
    # a subset: [SEP] allowed, [MASK] ordinary, nothing checked
    assert course.encode("[SEP][MASK]", add_special_tokens=False, allowed_special={"[SEP]"},
                         disallowed_special=()) == [3, 1, 1, 1]
    with pytest.raises(ValueError, match=r"'\[MASK\]'"):
        course.encode("[SEP][MASK]", allowed_special={"[SEP]"})
    assert course.encode("film") == [2, 5, 3]   # text without special-token text: unaffected
    with pytest.raises(TypeError, match="allowed_special"):
        course.encode(text, allowed_special="[MASK]")


def test_issue_22_separator_text_is_not_a_separator(vocab_file):
    bert = WordPiece.from_file(vocab_file("bert-base-uncased/vocab.txt"))
    assert bert.encode("x[SEP]y", add_special_tokens=False, allowed_special="all") == [1060, 102, 1061]
    assert bert.encode("x[SEP]y", add_special_tokens=False, disallowed_special=()) == [1060, 1031, 19802, 1033, 1061]
    with pytest.raises(ValueError):
        bert.encode("x[SEP]y", add_special_tokens=False)


def test_constructor_validation():
    with pytest.raises(ValueError, match=r"\[UNK\]"):
        WordPiece({"a": 0})
    with pytest.raises(ValueError, match="<unk>"):
        WordPiece({"[UNK]": 0}, unk_token="<unk>")
    with pytest.raises(TypeError):
        WordPiece([("[UNK]", 0)])
    with pytest.raises(TypeError):
        WordPiece({"[UNK]": "0"})
    with pytest.raises(ValueError, match="both"):
        WordPiece({"[UNK]": 0, "a": 0})
    with pytest.raises(ValueError, match="out of range"):
        WordPiece({"[UNK]": -1})
    with pytest.raises(ValueError, match="out of range"):
        WordPiece({"[UNK]": 2**31})


def test_sparse_ids():
    wp = WordPiece({"[UNK]": 2**31 - 1, "[CLS]": 7, "[SEP]": 10**6, "ab": 3, "##c": 123456})
    assert wp.encode("abc") == [7, 3, 123456, 10**6]
    assert wp.encode("x") == [7, 2**31 - 1, 10**6]
    assert wp.decode([3, 123456]) == "abc"
    with pytest.raises(ValueError):
        WordPiece({"[UNK]": 0}, max_input_chars_per_word=0)
    with pytest.raises(ValueError, match=r"\[X\]"):
        WordPiece({"[UNK]": 0}, special_tokens=["[X]"])


def test_non_str_input_is_type_error(course):
    for bad in (b"film", None, 5, ["film"]):
        with pytest.raises(TypeError):
            course.encode(bad)
        with pytest.raises(TypeError):
            course.tokenize(bad)
    with pytest.raises(TypeError):
        course.encode_pair("film", b"iyi")


def test_missing_cls_sep_only_matters_when_adding_them():
    wp = WordPiece({"[UNK]": 0, "a": 1})
    assert wp.encode("a", add_special_tokens=False) == [1]
    with pytest.raises(ValueError, match=r"\[CLS\]"):
        wp.encode("a")


def test_long_input_is_linear_enough():
    wp = WordPiece({"[UNK]": 0, "a": 1, "##a": 2})
    # 100 chars -> pieces; 101 -> [UNK]; a huge word is rejected by length before matching.
    assert wp.encode("a" * 100, add_special_tokens=False) == [1] + [2] * 99
    assert wp.encode("a" * 10**6, add_special_tokens=False) == [0]
    assert len(wp.encode("a " * 50000, add_special_tokens=False)) == 50000


def test_train_wordpiece_on_texts_and_files(tmp_path):
    corpus = ["hug " * 10 + "pug " * 5 + "pun " * 12 + "bun " * 4 + "hugs " * 5]
    wp = train_wordpiece(documents=corpus, vocab_size=30)
    assert isinstance(wp, WordPiece)
    assert list(wp.vocab)[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert wp.tokenize("hugs pun bug") == ["hugs", "pun", "bu", "##g"]
    path = tmp_path / "corpus.txt"
    path.write_text(corpus[0] + "\n", encoding="utf-8")
    assert train_wordpiece(path, 30).vocab == wp.vocab
    assert train_wordpiece([path], 30).vocab == wp.vocab
    assert train_wordpiece(str(path), 30, progress=True).vocab == wp.vocab


def test_train_wordpiece_validation(tmp_path):
    with pytest.raises(ValueError):
        train_wordpiece(documents=["a"], vocab_size=0)
    with pytest.raises(ValueError):
        train_wordpiece(documents=["a"], vocab_size=10, min_frequency=-1)
    with pytest.raises(ValueError, match="UNK"):
        train_wordpiece(documents=["a"], vocab_size=10, special_tokens=["[PAD]"])
    with pytest.raises(TypeError):
        train_wordpiece(documents=[b"bytes"], vocab_size=10)
    with pytest.raises(FileNotFoundError):
        train_wordpiece(tmp_path / "missing.txt", 10)


def test_train_cased():
    wp = train_wordpiece(documents=["Hello World Hello"], vocab_size=40, lowercase=False)
    assert wp.tokenize("Hello") == ["Hello"]
    assert wp.tokenize("hello") == ["[UNK]"]
