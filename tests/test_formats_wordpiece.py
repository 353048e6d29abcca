"""vocab.txt and tokenizer.json for WordPiece: round trips, HF interop, bad files."""
from __future__ import annotations

import json

import pytest

from fastbpe.formats.hf_wordpiece import read_hf_wordpiece
from fastbpe.formats.vocab_txt import read_vocab_txt, write_vocab_txt
from fastbpe import WordPiece, train_wordpiece

HF = dict(allowed_special="all")  # HF's rule for special-token text (the texts hold [MASK])

TEXTS = [
    "Héllo, WORLD! İstanbul'da çok güzel bir gün.",
    "中文字符 日本語 한국어 😀 tabs\tand\nnewlines \x00 [MASK] here",
    "unaffable counterrevolutionaries " + "x" * 120,
    "don't do not, it's you're.",
]

COURSE_VOCAB = {
    "[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "film": 5, "çok": 6,
    "güzel": 7, "##di": 8, "oyun": 9, "##cu": 10, "##lar": 11, "iyi": 12, "kötü": 13, "##ydi": 14,
}


def _hf(path):
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_file(str(path))
    tok.no_truncation()
    tok.no_padding()
    return tok


def test_vocab_txt_round_trip(tmp_path):
    path = tmp_path / "vocab.txt"
    write_vocab_txt(path, COURSE_VOCAB)
    assert path.read_text(encoding="utf-8").splitlines()[5] == "film"
    assert read_vocab_txt(path) == COURSE_VOCAB
    wp = WordPiece(COURSE_VOCAB, lowercase=False)
    wp.save(tmp_path / "v2.txt")
    assert WordPiece.from_file(tmp_path / "v2.txt", lowercase=False).vocab == COURSE_VOCAB
    assert not list(tmp_path.glob(".*.tmp"))  # atomic save leaves no temporary files


def test_tokenizer_json_round_trip_keeps_options(tmp_path):
    wp = WordPiece(COURSE_VOCAB, lowercase=False, max_input_chars_per_word=7)
    path = wp.save(tmp_path / "tokenizer.json")
    back = WordPiece.from_file(path)
    assert back.vocab == COURSE_VOCAB
    assert back._options() == wp._options()
    text = "oyuncular film güzeldi masa çokçokçok"
    assert back.encode(text) == wp.encode(text)


def test_bert_vocab_txt_and_tokenizer_json_agree(vocab_file):
    txt = WordPiece.from_file(vocab_file("bert-base-uncased/vocab.txt"))
    js = WordPiece.from_file(vocab_file("bert-base-uncased/tokenizer.json"), truncation=None, padding=None)
    assert txt.vocab == js.vocab and len(txt) == 30522
    assert txt.token_to_id("[UNK]") == 100
    for t in TEXTS:
        assert txt.encode(t, **HF) == js.encode(t, **HF)


def test_hf_saved_bert_loads_and_matches(vocab_file):
    path = vocab_file("bert-base-uncased/tokenizer.json")
    hf = _hf(path)
    wp = WordPiece.from_file(path, truncation=None, padding=None)
    for t in TEXTS:
        assert wp.encode(t, **HF) == hf.encode(t).ids
        assert wp.tokenize(t, **HF) == hf.encode(t, add_special_tokens=False).tokens


def test_our_bert_file_loads_in_hf_and_encodes_the_same(vocab_file, tmp_path):
    wp = WordPiece.from_file(vocab_file("bert-base-uncased/vocab.txt"))
    path = wp.save(tmp_path / "bert.json")
    hf = _hf(path)
    for t in TEXTS:
        enc = hf.encode(t)
        assert enc.ids == wp.encode(t, **HF)
        assert hf.encode(t, add_special_tokens=False).ids == wp.encode(t, add_special_tokens=False, **HF)
        assert hf.decode(enc.ids) == wp.decode(enc.ids)
    enc = hf.encode(TEXTS[0], TEXTS[1])
    assert (enc.ids, enc.type_ids) == wp.encode_pair(TEXTS[0], TEXTS[1], return_type_ids=True, **HF)


def test_trained_cased_file_loads_in_hf(tmp_path):
    corpus = ["Çok güzel bir gün. İstanbul'da oyuncular film izledi. " * 3, "Hello World, HELLO world!"]
    wp = train_wordpiece(documents=corpus, vocab_size=80, lowercase=False)
    hf = _hf(wp.save(tmp_path / "cased.json"))
    for t in corpus + ["Ünknown wörds 中文 here"]:
        assert hf.encode(t).ids == wp.encode(t)
    # vocab.txt as HF's BertWordPieceTokenizer reads it
    tokenizers = pytest.importorskip("tokenizers")
    wp.save(tmp_path / "cased.txt")
    bert = tokenizers.BertWordPieceTokenizer(str(tmp_path / "cased.txt"), lowercase=False, strip_accents=False)
    for t in corpus:
        assert bert.encode(t).ids == wp.encode(t)


def test_save_format_selection(tmp_path):
    wp = WordPiece(COURSE_VOCAB)
    with pytest.raises(ValueError, match="extension"):
        wp.save(tmp_path / "model.bin")
    wp.save(tmp_path / "model.bin", format="vocab.txt")
    assert read_vocab_txt(tmp_path / "model.bin") == COURSE_VOCAB
    with pytest.raises(ValueError, match="format"):
        wp.save(tmp_path / "x.txt", format="pickle")


def test_vocab_txt_cannot_hold_gaps(tmp_path):
    wp = WordPiece({"[UNK]": 0, "a": 5})
    with pytest.raises(ValueError, match="missing"):
        wp.save(tmp_path / "v.txt")
    wp.save(tmp_path / "v.json")  # tokenizer.json can
    assert WordPiece.from_file(tmp_path / "v.json").vocab == {"[UNK]": 0, "a": 5}


def test_duplicate_token_names_file_and_line(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[UNK]\na\nb\na\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab\.txt: line 4: duplicate token 'a' \(first on line 2\)"):
        WordPiece.from_file(path)


def test_bad_vocab_txt_files(tmp_path):
    blank = tmp_path / "blank.txt"
    blank.write_text("[UNK]\n\na\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"blank\.txt: line 2"):
        read_vocab_txt(blank)
    badutf = tmp_path / "bad.txt"
    badutf.write_bytes(b"[UNK]\na\n\xff\xfe\n")
    with pytest.raises(ValueError, match=r"bad\.txt: line 3"):
        read_vocab_txt(badutf)
    no_unk = tmp_path / "nounk.txt"
    no_unk.write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"nounk\.txt.*\[UNK\]"):
        WordPiece.from_file(no_unk)
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="empty"):
        read_vocab_txt(empty)


def _bert_json(**changes):
    doc = {
        "version": "1.0", "added_tokens": [], "normalizer": {"type": "BertNormalizer"},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": {"[UNK]": 0, "a": 1}},
    }
    doc.update(changes)
    return json.dumps(doc)


def test_bad_tokenizer_json_files(tmp_path):
    cases = {
        "broken.json": ("{not json", "broken.json"),
        "bpe.json": (_bert_json(model={"type": "BPE", "vocab": {}, "merges": []}), "BPE"),
        "norm.json": (_bert_json(normalizer={"type": "NFKC"}), "NFKC"),
        "pre.json": (_bert_json(pre_tokenizer={"type": "ByteLevel"}), "ByteLevel"),
        "nounk.json": (_bert_json(model={"type": "WordPiece", "unk_token": "[UNK]",
                                         "continuing_subword_prefix": "##", "vocab": {"a": 0}}), r"\[UNK\]"),
        "list.json": ("[1, 2]", "list.json"),
    }
    for name, (text, pattern) in cases.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match=pattern) as info:
            WordPiece.from_file(path)
        assert name in str(info.value)
    good = tmp_path / "good.json"
    good.write_text(_bert_json(), encoding="utf-8")
    assert read_hf_wordpiece(good)["vocab"] == {"[UNK]": 0, "a": 1}
