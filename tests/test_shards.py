"""fastbpe.shards: the stream layout, shard cutting, document rules, errors."""
import doctest
import json

import numpy as np
import pytest

import fastbpe
from fastbpe import shards
from fastbpe.encoding import get_toy_encoding


@pytest.fixture(scope="module")
def enc():
    docs = ["hello world, hello shards\n", "çok güzel 中文 <|endoftext|>\n"] * 20
    return fastbpe.train_bpe(documents=docs, vocab_size=280, special_tokens=["<|endoftext|>"], progress=False)


def test_docstring_examples():
    result = doctest.testmod(shards)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("fmt", ["npy", "bin"])
@pytest.mark.parametrize("dtype", ["uint16", "uint32"])
@pytest.mark.parametrize("shard_tokens", [1, 7, 10_000])
def test_stream_is_documents_joined_by_one_separator(enc, tmp_path, fmt, dtype, shard_tokens):
    docs = ["hello world", "", "çok güzel 中文 <|endoftext|> is text here", "hello\n\nshards"]
    summary = shards.write_shards(enc, docs, tmp_path, fmt=fmt, dtype=dtype, shard_tokens=shard_tokens, progress=False,
                                  disallowed_special=())
    eot = enc.eot_token
    expected = []
    for i, d in enumerate(docs):
        if i:
            expected.append(eot)
        expected += enc.encode_ordinary(d)
    index = json.loads((tmp_path / "index.json").read_text())
    assert index["dtype"] == dtype and index["format"] == fmt and index["separator_id"] == eot
    assert index["documents"] == summary.documents == 4 and index["tokens"] == summary.tokens == len(expected)
    sizes = [s["tokens"] for s in index["shards"]]
    assert sum(sizes) == len(expected) and all(n == shard_tokens for n in sizes[:-1]) and 0 < sizes[-1] <= shard_tokens
    # each shard loads the way training scripts load it
    for s in index["shards"]:
        path = tmp_path / s["file"]
        arr = np.load(path, mmap_mode="r") if fmt == "npy" else np.memmap(path, dtype=np.dtype(dtype).newbyteorder("<"), mode="r")
        assert arr.dtype == np.dtype(dtype) and len(arr) == s["tokens"]
    stream = shards.read_shards(tmp_path)
    assert stream.tolist() == expected
    offsets = np.load(tmp_path / "doc_offsets.npy")
    assert offsets.tolist()[0] == 0
    for i, start in enumerate(offsets.tolist()):
        if i:
            assert stream[start - 1] == eot
    assert summary.bytes == sum(len(d.encode()) for d in docs)


def test_special_token_text_in_documents_follows_the_library_rule(enc, tmp_path):
    docs = ["hello", "a <|endoftext|> b", "world"]
    # default: refused, naming the document (its index in doc_offsets.npy) and the position
    with pytest.raises(shards.DisallowedSpecialInDocument, match=r"document 1: .*'<\|endoftext\|>' at character 2") as info:
        shards.write_shards(enc, docs, tmp_path, progress=False)
    assert (info.value.document, info.value.token, info.value.position) == (1, "<|endoftext|>", 2)
    eot = enc.eot_token
    shards.write_shards(enc, docs, tmp_path, progress=False, allowed_special={"<|endoftext|>"})
    assert shards.read_shards(tmp_path).tolist() == enc.encode("hello") + [eot] + enc.encode(
        "a <|endoftext|> b", allowed_special="all") + [eot] + enc.encode("world")
    shards.write_shards(enc, docs, tmp_path, progress=False, disallowed_special=())
    assert shards.read_shards(tmp_path).tolist() == enc.encode("hello") + [eot] + enc.encode_ordinary(
        "a <|endoftext|> b") + [eot] + enc.encode("world")


def test_gzip_inputs_and_replace(tmp_path):
    import gzip

    plain, gz = tmp_path / "a.txt", tmp_path / "a.txt.gz"
    plain.write_bytes("one\ntwo \xff\n".encode("latin-1"))
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    for f in (plain, gz):
        with pytest.raises(ValueError, match="errors='replace'"):
            list(shards.iter_documents([str(f)]))
        with pytest.raises(ValueError, match=r"line 2: invalid UTF-8 at column 5; pass errors='replace'"):
            list(shards.iter_documents([str(f)], doc_sep_lines=True))
        assert list(shards.iter_documents([str(f)], errors="replace")) == ["one\ntwo \ufffd\n"]
        assert list(shards.iter_sourced_documents([str(f)], doc_sep_lines=True, errors="replace")) == [
            (str(f), 1, "one"), (str(f), 2, "two \ufffd")]


def test_rerun_replaces_old_shards(enc, tmp_path):
    shards.write_shards(enc, ["hello world"] * 10, tmp_path, shard_tokens=3, progress=False)
    shards.write_shards(enc, ["hello"], tmp_path, shard_tokens=3, progress=False)
    assert sorted(p.name for p in tmp_path.glob("shard_*")) == ["shard_000000.npy"]


def test_document_rules(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.jsonl"
    a.write_text("one\ntwo\n", encoding="utf-8")
    b.write_text('{"text": "x\\ny", "id": 1}\n\n{"text": ""}\n', encoding="utf-8")
    assert list(shards.iter_documents([str(a)])) == ["one\ntwo\n"]
    assert list(shards.iter_documents([str(a)], doc_sep_lines=True)) == ["one", "two"]
    assert list(shards.iter_documents([str(b)], jsonl_field="text")) == ["x\ny", ""]


@pytest.mark.parametrize(
    "content, field, message",
    [
        (b'{"text": 1}\n', "text", r"line 1: field 'text' is int"),
        (b'{"a": "x"}\n', "text", r"line 1: no field 'text'"),
        (b'{"text": "x"}\nnot json\n', "text", r"line 2: not JSON"),
        (b'{"text": "\xff"}\n', "text", r"line 1: invalid UTF-8"),
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path, content, field, message):
    f = tmp_path / "c.jsonl"
    f.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        list(shards.iter_documents([str(f)], jsonl_field=field))


def test_errors(enc, tmp_path):
    with pytest.raises(ValueError, match="no special token '<|endoftext|>'"):
        shards.write_shards(get_toy_encoding(), ["x"], tmp_path, progress=False)
    with pytest.raises(ValueError, match="unknown shard format"):
        shards.write_shards(enc, ["x"], tmp_path, fmt="pt", progress=False)
    with pytest.raises(ValueError, match="shard_tokens"):
        shards.write_shards(enc, ["x"], tmp_path, shard_tokens=0, progress=False)
    big = fastbpe.Encoding("big", pat_str=r"\S+|\s+", mergeable_ranks={bytes([i]): i for i in range(256)},
                           special_tokens={"<|endoftext|>": 70000})
    with pytest.raises(ValueError, match="uint16 cannot hold ids up to 70000"):
        shards.write_shards(big, ["x"], tmp_path, progress=False)
    summary = shards.write_shards(big, ["x", "y"], tmp_path, dtype="uint32", progress=False)
    assert shards.read_shards(tmp_path).tolist() == [120, 70000, 121] and summary.tokens == 3


def test_wordpiece_separator(tmp_path):
    wordpiece = pytest.importorskip("fastbpe.wordpiece")
    wp = wordpiece.WordPiece({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "un": 3, "##fair": 4})
    shards.write_shards(wp, ["unfair", "unfair"], tmp_path, progress=False)
    assert shards.read_shards(tmp_path).tolist() == [3, 4, 2, 3, 4]
