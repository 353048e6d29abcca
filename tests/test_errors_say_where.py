"""Issue 37, item 3: errors that say what and where, one rule each.

(A .gz with a garbage tail naming the right decompressed offset is in
test_io_truncated.py; the tiktoken argument differences in
test_bpe_encoding_tiktoken_api.py.)
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import fastbpe
from fastbpe import cli
from fastbpe.distributed import encode_files


def _cli_error(capsys, *argv) -> str:
    assert cli.main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


@pytest.fixture(scope="module")
def gpt2():
    return fastbpe.get_encoding("gpt2")


# ----------------------------------------------------------------------------- a folder as the tokenizer
def test_a_folder_without_a_tokenizer_file_says_what_was_looked_for(tmp_path, capsys):
    looked = "looked for tokenizer.json, or encoder.json with vocab.bpe"
    with pytest.raises(FileNotFoundError, match=rf"{tmp_path}: a folder with no tokenizer file fastbpe knows: {looked}"):
        fastbpe.load(tmp_path)
    (tmp_path / "encoder.json").write_text("{}")   # half of GPT-2's pair
    with pytest.raises(FileNotFoundError, match=looked):
        fastbpe.load(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"looked for tokenizer\.json \("):
        fastbpe.load(tmp_path, format="hf")
    with pytest.raises(ValueError, match="a folder, but format='tiktoken' is read from one file"):
        fastbpe.load(tmp_path, format="tiktoken")
    err = _cli_error(capsys, "count", "-q", "-t", tmp_path, tmp_path / "encoder.json")
    assert f"{tmp_path}: a folder with no tokenizer file fastbpe knows" in err and "Errno" not in err


def test_a_folder_with_a_tokenizer_file_still_loads(tmp_path, gpt2):
    gpt2.save(tmp_path / "tokenizer.json")
    assert fastbpe.load(tmp_path).encode("hello world") == gpt2.encode("hello world")


# ----------------------------------------------------------------------------- --shards at a file
def test_shards_at_a_file_names_it(tmp_path, capsys, gpt2):
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\n")
    for out in (corpus, corpus / "below"):
        with pytest.raises(ValueError, match=rf"shards are written to a folder, and {corpus} is a file"):
            encode_files([corpus], gpt2, out, num_threads=1, progress=False)
        err = _cli_error(capsys, "encode", "-q", "-t", "gpt2", corpus, "--shards", out)
        assert f"shards are written to a folder, and {corpus} is a file" in err and "Errno" not in err


# ----------------------------------------------------------------------------- integer arguments
def test_vocab_size_too_large_is_named_as_the_argument(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\n")
    with pytest.raises(ValueError, match=r"vocab_size must be <= 2147483647, got 1000000000000"):
        fastbpe.train_bpe(corpus, 10**12, progress=False)
    with pytest.raises(ValueError, match=r"vocab_size must be between 1 and 2147483647"):
        fastbpe.train_wordpiece(corpus, 10**12)
    for model, out in (("bpe", "t.tiktoken"), ("wordpiece", "v.txt")):
        err = _cli_error(capsys, "train", "-q", "--model", model, corpus, "--vocab-size", 10**12, "-o", tmp_path / out)
        assert "--vocab-size must be" in err and "n_tokens" not in err and "vocab_size" not in err


def test_numpy_integers_are_integers_everywhere():
    docs = ["hello world, hello there"] * 5
    enc = fastbpe.train_bpe(documents=docs, vocab_size=np.int64(260), min_frequency=np.int32(1),
                            max_token_length=np.int64(8), num_threads=np.int64(1), progress=False)
    assert enc.n_vocab == 260
    assert enc.encode_batch(docs[:2], num_threads=np.int64(2)) == [enc.encode(d) for d in docs[:2]]
    wp = fastbpe.train_wordpiece(documents=docs, vocab_size=np.int64(30), min_frequency=np.int64(0),
                                 limit_alphabet=np.int32(50), num_threads=np.int16(1))
    assert len(wp.vocab) <= 30
    for bad in (300.0, True, "300"):
        with pytest.raises(TypeError, match="vocab_size must be an int"):
            fastbpe.train_bpe(documents=docs, vocab_size=bad, progress=False)
        with pytest.raises(TypeError, match="vocab_size must be an int"):
            fastbpe.train_wordpiece(documents=docs, vocab_size=bad)
    with pytest.raises(ValueError, match="min_frequency must be >= 0, got -1"):
        fastbpe.train_bpe(documents=docs, vocab_size=300, min_frequency=-1, progress=False)


# ----------------------------------------------------------------------------- JSON errors
def test_json_errors_say_where_in_one_form(tmp_path, capsys):
    jl = tmp_path / "bad.jsonl"
    jl.write_text('{"text": "a"}\n{"text": "unterminated\n')
    err = _cli_error(capsys, "count", "-q", "-t", "gpt2", jl)
    assert f"{jl}, line 2: not valid JSON (Unterminated string starting at: column 10)" in err
    assert "at at" not in err
    tj = tmp_path / "tokenizer.json"
    tj.write_text('{"model": {"type": "BPE",\n  "vocab": {"a": 0')
    with pytest.raises(ValueError, match=r"tokenizer\.json: not valid JSON \(Expecting ',' delimiter: line 2 column 19\)"):
        fastbpe.load(tj)
    folder = tmp_path / "gpt2"
    folder.mkdir()
    (folder / "encoder.json").write_text('{"a": 0,}')
    (folder / "vocab.bpe").write_text("#version: 0.2\n")
    with pytest.raises(ValueError, match=r"encoder\.json: not valid JSON \(Expecting property name enclosed in "
                                         r"double quotes: line 1 column 9\)"):
        fastbpe.load(folder)


# ----------------------------------------------------------------------------- demo --max-mb
@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "x"])
def test_demo_refuses_a_size_that_is_no_positive_number(value, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["demo", f"--max-mb={value}"])
    assert info.value.code == 2
    assert "argument --max-mb: --max-mb must be a number" in capsys.readouterr().err


# ----------------------------------------------------------------------------- a WordPiece unk token
def test_a_wordpiece_tokenizer_json_without_its_unk_token_in_model_vocab_is_refused(tmp_path):
    wp = fastbpe.train_wordpiece(documents=["hello world"] * 3, vocab_size=30)
    path = wp.save(tmp_path / "tokenizer.json")
    data = json.loads(path.read_text())
    assert fastbpe.load(path).encode("hello") == wp.encode("hello")
    for vocab, what in (({}, "model.vocab is empty"),
                        ({t: i for t, i in data["model"]["vocab"].items() if t != "[UNK]"},
                         "model.vocab has no unk_token '\\[UNK\\]'")):
        bad = tmp_path / f"bad{len(vocab)}.json"
        bad.write_text(json.dumps({**data, "model": {**data["model"], "vocab": vocab}}))
        with pytest.raises(ValueError, match=rf"{bad}: {what}; HF's WordPiece fails on every unknown word"):
            fastbpe.load(bad)


# ----------------------------------------------------------------------------- the empty corpus
@pytest.mark.parametrize("content, docs, bpe_learns", [("", None, False), ("\n\n", "lines", False),
                                                    ("   \t\n", "lines", True)],
                         ids=["empty", "blank-lines", "whitespace"])
def test_both_trainers_refuse_an_empty_corpus_naming_it(tmp_path, content, docs, bpe_learns, capsys):
    """The rule (fastbpe.trainers): nothing to learn from is an error in both trainers;
    whitespace alone is text to BPE (it learns its merges) but no word to WordPiece."""
    path = tmp_path / "empty.txt"
    path.write_text(content)
    if bpe_learns:
        with pytest.warns(RuntimeWarning, match="training stopped early"):
            fastbpe.train_bpe(path, 300, docs=docs, progress=False)
    else:
        with pytest.raises(ValueError, match=rf"the training corpus is empty: no text to learn from in {path}"):
            fastbpe.train_bpe(path, 300, docs=docs, progress=False)
    with pytest.raises(ValueError, match=rf"the training corpus is empty: no words to learn from in {path}"):
        fastbpe.train_wordpiece(path, 100, docs=docs)
    with pytest.raises(ValueError, match=r"the training corpus is empty: no words to learn from in documents= \(0 items\)"):
        fastbpe.train_wordpiece(documents=[], vocab_size=100)
    with pytest.raises(ValueError, match=r"the training corpus is empty: no text to learn from in documents= \(1 items\)"):
        fastbpe.train_bpe(documents=[""], vocab_size=300, progress=False)
    err = _cli_error(capsys, "train", "-q", "--model", "wordpiece", path, "--vocab-size", 100, "-o", tmp_path / "v.txt")
    assert f"the training corpus is empty: no words to learn from in {path}" in err
