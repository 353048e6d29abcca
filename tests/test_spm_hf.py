"""sentencepiece-style tokenizer.json files (Llama 2 / Mistral as transformers converts them)
against HF ``tokenizers``, their judge.

The files are generated here with transformers (from PyPI) from a tiny model that
sentencepiece trains in the test, and from Mistral's files when /work/shared is there:
``LlamaTokenizerFast`` with ``legacy`` true and false (Metaspace ``prepend_scheme``
always / first), the older legacy layout (normalizer Prepend + Replace), and the
spm-proto conversion (``SpmConverter.build_tokenizer_from_spm_proto``).
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastbpe
from fastbpe.spm import HFSentencePieceBPE

sys.path.insert(0, str(Path(__file__).parent))
from spm_support import CORPUS, MISTRAL_FILES, random_texts, trained_model  # noqa: E402

tokenizers = pytest.importorskip("tokenizers", reason="HF tokenizers is in the test extra")
transformers = pytest.importorskip("transformers", reason="transformers is in the test extra")

KINDS = ("legacy", "non_legacy", "prepend_replace", "spm_proto")
TEXT = st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Z", "Cc")), max_size=60)
SPACEY = st.text(st.sampled_from(list("ab  \t\n▁çğ中😀☃1[]<>s/")), max_size=40)
EXTRA = ["a<s>b </s> c", "<s> x", " <unk>", "<s><s>", "x </s>"]


def make_json(model: Path, kind: str, out: Path) -> Path:
    """A tokenizer.json transformers makes of ``model`` (see the module docstring)."""
    if kind == "spm_proto":
        pytest.importorskip("google.protobuf", reason="protobuf is in the test extra (transformers' converter)")
        from tokenizers import normalizers
        from transformers.convert_slow_tokenizer import SentencePieceExtractor, SpmConverter, import_protobuf

        proto = import_protobuf().ModelProto()
        proto.ParseFromString(model.read_bytes())
        extracted = SentencePieceExtractor(str(model)).extract(None)
        tok = SpmConverter.build_tokenizer_from_spm_proto(proto, extracted["vocab"], extracted["merges"])
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), tok.normalizer])
        tok.save(str(out))
        return out
    folder = out.parent / f"{out.stem}_folder"
    folder.mkdir(exist_ok=True)
    shutil.copy(model, folder / "tokenizer.model")
    fast = transformers.LlamaTokenizerFast.from_pretrained(str(folder), legacy=kind != "non_legacy")
    fast.backend_tokenizer.save(str(out))
    if kind == "prepend_replace":   # the layout of older transformers' legacy files
        data = json.loads(out.read_text(encoding="utf-8"))
        data["pre_tokenizer"] = None
        data["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
        data["model"]["unk_token"] = "<unk>"
        out.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return out


_FILES: dict = {}


def _pair(tmp_path_factory, model: Path, kind: str):
    key = (str(model), kind)
    if key not in _FILES:
        out = make_json(model, kind, tmp_path_factory.mktemp("hf") / f"{kind}.json")
        _FILES[key] = (tokenizers.Tokenizer.from_file(str(out)), fastbpe.load(out))
    return _FILES[key]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "tiny.model"
    path.write_bytes(trained_model("digits_symbols"))
    return path


def _check(hf, tok, texts):
    assert isinstance(tok, HFSentencePieceBPE)
    for text in texts:
        expected = hf.encode(text, add_special_tokens=False).ids
        assert tok.encode(text, allowed_special="all") == expected, text
        assert tok.decode(expected) == hf.decode(expected), text


@pytest.mark.parametrize("kind", KINDS)
def test_tiny_model_files(tmp_path_factory, tiny, kind):
    hf, tok = _pair(tmp_path_factory, tiny, kind)
    _check(hf, tok, CORPUS + random_texts(31, 300) + EXTRA)


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=80)
@given(text=TEXT | SPACEY)
def test_tiny_model_hypothesis(tmp_path_factory, tiny, kind, text):
    hf, tok = _pair(tmp_path_factory, tiny, kind)
    _check(hf, tok, [text])


@pytest.mark.parametrize("name", MISTRAL_FILES)
@pytest.mark.parametrize("kind", KINDS)
def test_mistral_files(tmp_path_factory, vocab_file, name, kind):
    hf, tok = _pair(tmp_path_factory, vocab_file(name), kind)
    _check(hf, tok, CORPUS + random_texts(32, 200) + EXTRA)


def test_unknown_characters_without_unk_token():
    from tokenizers import models

    hf = tokenizers.Tokenizer(models.BPE(vocab={"a": 0, "b": 1, "ab": 2, "<0x78>": 3}, merges=[("a", "b")],
                                         byte_fallback=True))
    from fastbpe.formats.hf_spm import read_hf_spm
    from fastbpe.reference import hf_spm

    spec = read_hf_spm(json.loads(hf.to_str()), "t.json")
    for text in ["axb", "aéb", "a☃☃b", "x"]:
        assert hf_spm.encode(text, spec) == hf.encode(text).ids, text


def test_special_rule_and_api(tmp_path_factory, tiny):
    hf, tok = _pair(tmp_path_factory, tiny, "non_legacy")
    with pytest.raises(ValueError, match="disallowed special token '</s>'"):
        tok.encode("a</s>")
    assert tok.encode("a</s>", disallowed_special=()) == tok.encode_ordinary("a</s>")
    assert tok.encode_batch(["a</s>", "b"], allowed_special="all") == [
        hf.encode("a</s>", add_special_tokens=False).ids, hf.encode("b", add_special_tokens=False).ids]
    assert tok.bos_token_id == 1 and tok.is_special_token(2)
    import pickle

    again = pickle.loads(pickle.dumps(tok))
    assert again.encode_ordinary("hello world") == tok.encode_ordinary("hello world")


def test_shards_and_cli(tmp_path, tmp_path_factory, tiny):
    """The CLI's shards of a sentencepiece-style tokenizer.json open, verify and hold HF's
    ids (the manifest's tokenizer.kind "hf-sentencepiece" is one shards accepts)."""
    from fastbpe import shards
    from fastbpe.cli import main

    path = make_json(tiny, "non_legacy", tmp_path / "tok.json")
    hf = tokenizers.Tokenizer.from_file(str(path))
    docs = ["hello world 12", "Türkçe\tx  y"]
    f = tmp_path / "docs.txt"
    f.write_text("\n".join(docs) + "\n", encoding="utf-8")
    assert main(["encode", "-q", "-t", str(path), "--shards", str(tmp_path / "sh"), "--eot", "</s>",
                 "--docs", "lines", str(f)]) == 0
    ds = shards.open(tmp_path / "sh", fastbpe.load(path))
    ds.verify()
    assert ds.manifest["tokenizer"]["kind"] == "hf-sentencepiece"
    assert ds.read().tolist() == [i for d in docs for i in hf.encode(d, add_special_tokens=False).ids + [2]]


def test_refusals_name_the_json_path(tmp_path, tmp_path_factory, tiny):
    source = make_json(tiny, "legacy", tmp_path / "base.json")
    base = json.loads(source.read_text(encoding="utf-8"))

    def refused(change, match):
        data = json.loads(json.dumps(base))
        change(data)
        path = tmp_path / "x.json"
        path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        with pytest.raises(ValueError, match=match):
            fastbpe.load(path)

    refused(lambda d: d.update(normalizer={"type": "Precompiled", "precompiled_charsmap": "AAAA"}),
            r"x.json: normalizer: normalizer .*Precompiled.* is not supported")
    refused(lambda d: d["model"].update(dropout=0.1), r"model.dropout: 0.1 is not supported")
    refused(lambda d: d["added_tokens"][1].update(lstrip=True), r"added_tokens\[1\].lstrip")
    refused(lambda d: d.update(decoder={"type": "ByteLevel"}), r"decoder: decoder .*ByteLevel")
    refused(lambda d: d["model"]["merges"].append(["▁", "nope"]), r"model.merges\[\d+\]: \"nope\" is not in model.vocab")


def _check_tokenizer(path, texts):
    """``fastbpe.Tokenizer`` on the file equals HF's ``Tokenizer``: ids, tokens, offsets,
    masks, with and without the post-processor's special tokens."""
    hf = tokenizers.Tokenizer.from_file(str(path))
    ours = fastbpe.Tokenizer.from_file(path)
    assert isinstance(ours.encoding, HFSentencePieceBPE)
    for text in texts:
        for add in (False, True):
            e, o = hf.encode(text, add_special_tokens=add), ours.encode(text, add_special_tokens=add)
            assert (o.ids, o.tokens, o.offsets, o.special_tokens_mask) == (
                e.ids, e.tokens, e.offsets, e.special_tokens_mask), (text, add)
    pair = ("Hello there", "second  one")
    e, o = hf.encode(*pair), ours.encode(*pair)
    assert (o.ids, o.offsets, o.type_ids) == (e.ids, e.offsets, e.type_ids)


@pytest.mark.parametrize("name", MISTRAL_FILES)
@pytest.mark.parametrize("kind", KINDS)
def test_tokenizer_offsets_on_mistral(tmp_path_factory, vocab_file, name, kind):
    out = make_json(vocab_file(name), kind, tmp_path_factory.mktemp("tok") / f"{kind}.json")
    _check_tokenizer(out, CORPUS + random_texts(33, 150) + EXTRA + ["[INST] hi [/INST]", " [INST]x"])


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=60)
@given(text=TEXT | SPACEY)
def test_tokenizer_offsets_hypothesis(tmp_path_factory, tiny, kind, text):
    key = ("offsets", kind)
    if key not in _FILES:
        _FILES[key] = make_json(tiny, kind, tmp_path_factory.mktemp("tok") / f"{kind}.json")
    _check_tokenizer(_FILES[key], [text])


def test_tokenizer_names_a_model_file(tiny):
    """``fastbpe.Tokenizer`` reads tokenizer.json files: a sentencepiece ``.model`` is a
    ValueError naming the file and ``fastbpe.load``, not a UnicodeDecodeError."""
    with pytest.raises(ValueError, match=r"tiny.model: not a tokenizer.json: .*sentencepiece model, which fastbpe.load"):
        fastbpe.Tokenizer.from_file(tiny)


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=80, deadline=None)
@given(text=TEXT | SPACEY | st.sampled_from(EXTRA))
def test_offsets_from_ids_equal_the_reference(tmp_path_factory, tiny, kind, text):
    """``encode_with_offsets`` reads the spans off the kernel's ids (``_OffsetWalk``:
    plain pieces in bulk, byte and unknown tokens one by one, the reference when it
    cannot vouch): the same ids and spans as ``reference.hf_spm.encode_with_offsets``."""
    from fastbpe.reference import hf_spm

    _, tok = _pair(tmp_path_factory, tiny, kind)
    if tok._core.kernel is None:
        pytest.skip("fastbpe._hf_spm is not built")
    want = hf_spm.encode_with_offsets(text, tok._spec, tok._specials)
    assert tok.encode_with_offsets(text) == ([i for i, _ in want], [s for _, s in want])


def test_offsets_walk_hands_back_what_it_cannot_vouch_for(tmp_path_factory, tiny):
    """Characters a model without ``unk_token`` drops, and unknown tokens, leave the
    bulk path; the result is still the reference's."""
    from fastbpe.reference import hf_spm

    _, tok = _pair(tmp_path_factory, tiny, "non_legacy")
    walk_spec = tok._spec
    for text in ["a\u0378b c", "\u0378\u0379 x", "x \U000e0001\U000e0002", "<s>a\u0378", ""]:
        want = hf_spm.encode_with_offsets(text, walk_spec, tok._specials)
        assert tok.encode_with_offsets(text) == ([i for i, _ in want], [s for _, s in want])
