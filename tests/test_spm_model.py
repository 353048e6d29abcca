"""``fastbpe.load`` of a sentencepiece ``.model`` and ``SentencePieceBPE``'s tiktoken-style API.

Exactness of the algorithm is test_reference_sentencepiece.py's (reference vs
sentencepiece) and test_spm_native.py's (native vs reference); here: the API around it,
the special-token rule, batches, numpy, pickling, errors, the CLI.
"""
from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

import fastbpe
from fastbpe.spm import SentencePieceBPE

sys.path.insert(0, str(Path(__file__).parent))
from spm_support import CORPUS, MISTRAL_FILES, processor, random_texts, trained_model  # noqa: E402


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("spm") / "tokenizer.model"
    path.write_bytes(trained_model("digits_symbols"))
    return path


@pytest.fixture(scope="module")
def v3(vocab_file):
    return fastbpe.load(vocab_file(MISTRAL_FILES[1]))


def test_load_dispatches_on_content(model_path, tmp_path):
    tok = fastbpe.load(model_path)
    assert isinstance(tok, SentencePieceBPE) and tok.name == "tokenizer"
    sp = processor(model_path.read_bytes())
    texts = CORPUS + random_texts(3, 100)
    assert [tok.encode_ordinary(t) for t in texts] == [sp.encode(t) for t in texts]
    assert tok.n_vocab == sp.get_piece_size()
    # a Llama-3-style tokenizer.model (tiktoken ranks, base64 text) is not sentencepiece
    other = tmp_path / "tokenizer.model"
    other.write_text("IQ== 0\n")
    with pytest.raises(ValueError, match="a rank file holds no split pattern"):
        fastbpe.load(other)
    with pytest.raises(ValueError, match="no split pattern"):
        fastbpe.load(model_path, pat_str="gpt2")


def test_api_against_sentencepiece(model_path):
    tok = fastbpe.load(model_path)
    sp = processor(model_path.read_bytes())
    texts = CORPUS + random_texts(4, 200)
    expected = [sp.encode(t) for t in texts]
    assert tok.encode_ordinary_batch(texts, num_threads=2) == expected
    assert tok.encode_batch(texts, disallowed_special=()) == expected
    ids, offsets = tok.encode_batch_to_numpy(texts, disallowed_special=(), dtype=np.uint16)
    assert ids.dtype == np.uint16 and offsets[-1] == len(ids)
    assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == expected
    assert tok.encode_to_numpy("hello world").tolist() == sp.encode("hello world")
    for ids_ in expected:
        assert tok.decode(ids_) == sp.decode(ids_)
        assert tok.decode_bytes(ids_) == sp.decode(ids_).encode()
    assert tok.decode(np.array(expected[1])) == sp.decode(expected[1])
    assert tok.count("hello world") == len(sp.encode("hello world"))


def test_special_tokens_rule(model_path):
    tok = fastbpe.load(model_path)
    sp = processor(model_path.read_bytes())
    assert tok.special_tokens == {"<unk>": 0, "<s>": 1, "</s>": 2, "[INST]": 3, "[/INST]": 4}
    assert (tok.bos_token_id, tok.eos_token_id, tok.unk_token_id) == (1, 2, 0)
    with pytest.raises(ValueError, match=r"disallowed special token '\[INST\]' at position 2"):
        tok.encode("a [INST] b")
    with pytest.raises(ValueError, match="text 1 of the batch"):
        tok.encode_batch(["fine", "x</s>"])
    text = "[INST] hi<sep> [/INST] ok</s>"
    assert tok.encode(text, disallowed_special=()) == sp.encode(text) == tok.encode_ordinary(text)
    # allowed: the specials' ids, the text between encoded as texts of their own
    assert tok.encode(text, allowed_special="all") == (
        [3] + sp.encode(" hi<sep> ") + [4] + sp.encode(" ok") + [2])
    assert tok.encode(text, allowed_special={"</s>"}, disallowed_special=()) == sp.encode("[INST] hi<sep> [/INST] ok") + [2]
    assert tok.encode_batch([text, "x"], allowed_special="all") == [tok.encode(text, allowed_special="all"),
                                                                    sp.encode("x")]
    assert tok.is_special_token(3) and not tok.is_special_token(tok.piece_to_id("<sep>"))
    # control pieces decode to nothing, as in sentencepiece
    ids = tok.encode(text, allowed_special="all")
    assert tok.decode(ids) == sp.decode(ids)


def test_pickle_and_errors(model_path):
    tok = fastbpe.load(model_path)
    again = pickle.loads(pickle.dumps(tok))
    assert again.encode_ordinary("a b 12") == tok.encode_ordinary("a b 12") and again.name == tok.name
    with pytest.raises(TypeError, match="decode bytes to str first"):
        tok.encode(b"x")
    with pytest.raises(TypeError, match="text 1 of the batch must be a str"):
        tok.encode_batch(["a", 3])
    with pytest.raises(TypeError, match="single str"):
        tok.encode_batch("abc")
    with pytest.raises(ValueError, match="out of range"):
        tok.decode([tok.n_vocab])
    with pytest.raises(TypeError, match="index 1"):
        tok.decode([1, "x"])
    with pytest.raises(ValueError, match="num_threads"):
        tok.encode_ordinary_batch(["a"], num_threads=0)
    # lone surrogates: U+FFFD, as everywhere in fastbpe
    assert tok.encode_ordinary("a\ud800b") == tok.encode_ordinary("a\ufffdb")
    assert tok.encode_ordinary_batch(["c", "a\ud800b"]) == [tok.encode_ordinary("c"), tok.encode_ordinary("a\ufffdb")]


def test_refused_models_name_the_field(tmp_path):
    from spm_support import nfkc_model

    path = tmp_path / "nfkc.model"
    path.write_bytes(nfkc_model())
    with pytest.raises(ValueError, match=r"nfkc.model: normalizer_spec.precompiled_charsmap"):
        fastbpe.load(path)


def test_folder_with_tokenizer_model(model_path, tmp_path):
    """A model folder holding only tokenizer.model (and its config): ``fastbpe.load`` and
    ``from_pretrained`` read it as sentencepiece; a tokenizer.json beside it wins (HF's
    file, as transformers prefers it); Meta's tiktoken-format tokenizer.model is ranks."""
    import shutil

    folder = tmp_path / "llama2-like"
    folder.mkdir()
    shutil.copy(model_path, folder / "tokenizer.model")
    (folder / "tokenizer_config.json").write_text('{"bos_token": "<s>", "add_bos_token": true}')
    sp = processor(model_path.read_bytes())
    for tok in (fastbpe.load(folder), fastbpe.from_pretrained(folder)):
        assert isinstance(tok, SentencePieceBPE)
        assert tok.encode_ordinary_batch(CORPUS) == [sp.encode(t) for t in CORPUS]
    assert fastbpe.from_pretrained(folder).config.bos_token == "<s>"
    ranks = tmp_path / "llama3-like"
    ranks.mkdir()
    (ranks / "tokenizer.model").write_text("IQ== 0\n")
    with pytest.raises(ValueError, match="a rank file holds no split pattern"):
        fastbpe.load(ranks)


def test_batches_refuse_control_text(v3):
    """``[INST]`` is never made from plain text: refused in a batch (naming the text),
    its characters with the check off, the control id only when allowed."""
    with pytest.raises(ValueError, match=r"\[INST\].*text 1|text 1.*\[INST\]"):
        v3.encode_batch(["ok", "a [INST] b"])
    plain = v3.encode_batch(["[INST] hi [/INST]"], disallowed_special=())[0]
    assert 3 not in plain and 4 not in plain and plain == v3.encode_ordinary("[INST] hi [/INST]")
    assert v3.encode_batch(["[INST] hi [/INST]"], allowed_special="all")[0][0] == 3
    ids, offsets = v3.encode_batch_to_numpy(["[INST] hi", "x"], allowed_special={"[INST]"}, dtype="uint16")
    assert ids.dtype.name == "uint16" and ids[offsets[0]] == 3 and offsets.tolist()[-1] == len(ids)


@pytest.mark.parametrize("native", [None, False])
def test_numpy_equals_lists(v3, native):
    """``encode_batch_to_numpy`` / ``encode_to_numpy`` (written by the core, no lists
    between) give ``encode_batch`` / ``encode``'s ids: allowed special tokens between
    runs of text, empty texts and batches, lone surrogates, both dtypes."""
    tok = v3 if native is None else SentencePieceBPE(v3._model, name="v3", native=False)
    texts = ["[INST] hi [/INST] there[INST]", "", "x", "lone \ud800 surrogate", "[INST]", "a b  c"] + CORPUS
    for allowed in (set(), {"[INST]"}, "all"):
        rows = tok.encode_batch(texts, allowed_special=allowed, disallowed_special=())
        for dtype in ("uint16", np.uint32):
            ids, offsets = tok.encode_batch_to_numpy(texts, allowed_special=allowed, disallowed_special=(),
                                                     dtype=dtype)
            assert ids.dtype == np.dtype(dtype) and offsets.tolist()[-1] == len(ids)
            assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == rows
            for t, r in zip(texts, rows):
                assert tok.encode_to_numpy(t, allowed_special=allowed, disallowed_special=(),
                                           dtype=dtype).tolist() == r
    ids, offsets = tok.encode_batch_to_numpy([])
    assert len(ids) == 0 and offsets.tolist() == [0]
    with pytest.raises(ValueError, match="text 1"):
        tok.encode_batch_to_numpy(["ok", "a [INST] b"])
    with pytest.raises(TypeError, match="text 1 of the batch"):
        tok.encode_batch_to_numpy(["ok", b"x"])


@pytest.mark.parametrize("name", MISTRAL_FILES)
def test_mistral_load(vocab_file, name):
    path = vocab_file(name)
    tok = fastbpe.load(path)
    sp = processor(path.read_bytes())
    texts = CORPUS + random_texts(5, 200)
    assert tok.encode_ordinary_batch(texts) == [sp.encode(t) for t in texts]
    assert all(tok.decode(sp.encode(t)) == sp.decode(sp.encode(t)) for t in texts)


def test_mistral_v3_control_tokens(v3):
    names = ["[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
             "[/TOOL_RESULTS]"]
    assert [v3.special_tokens[n] for n in names] == [3, 4, 5, 6, 7, 8, 9]
    assert len(v3.special_tokens) == 1 + 2 + 750 - 2          # <unk>, <s>, </s> and the control pieces
    assert v3.encode("[TOOL_CALLS][AVAILABLE_TOOLS]", allowed_special="all") == [5, 6]
    with pytest.raises(ValueError, match="TOOL_CALLS"):
        v3.encode("[TOOL_CALLS]")
    # user-defined pieces are vocabulary: matched whole, never refused
    assert v3.encode("[REFERENCE_DOC_10]") == v3.encode_ordinary("[REFERENCE_DOC_10]")
    assert 760 in v3.encode("[REFERENCE_DOC_10]")


def test_cli_count_and_encode(model_path, tmp_path, capsys):
    from fastbpe.cli import main

    sp = processor(model_path.read_bytes())
    text = "hello world\n\tTürkçe 中文 12345\n"
    f = tmp_path / "doc.txt"
    f.write_text(text, encoding="utf-8")
    assert main(["count", "-q", "-t", str(model_path), str(f)]) == 0
    assert capsys.readouterr().out.split()[0] == str(len(sp.encode(text)))
    assert main(["encode", "-t", str(model_path), str(f)]) == 0
    assert [int(x) for x in capsys.readouterr().out.split()] == sp.encode(text)


def test_shards(model_path, tmp_path):
    from fastbpe import shards
    from fastbpe.cli import main

    sp = processor(model_path.read_bytes())
    f = tmp_path / "doc.txt"
    f.write_text("hello world\nTürkçe 12\n", encoding="utf-8")
    assert main(["encode", "-q", "-t", str(model_path), "--shards", str(tmp_path / "sh"), "--eot", "</s>",
                 str(f)]) == 0
    ds = shards.open(tmp_path / "sh")
    ds.verify()
    assert ds.read().tolist() == sp.encode("hello world\nTürkçe 12\n") + [2]
