"""Open models' tokenizer.json files as published (issue 38): ids equal HF
``tokenizers``' on a multilingual corpus and hypothesis text, with and without special
tokens and ``add_special_tokens``, and ``hf_decode`` equals HF's ``decode``. Each file
is loaded once per session; a missing file skips, naming it."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastbpe

sys.path.insert(0, str(Path(__file__).parent))
from open_corpus import documents  # noqa: E402

tokenizers = pytest.importorskip("tokenizers")

FILES = ["llama-3.2/tokenizer.json", "qwen3/tokenizer.json", "deepseek-v4/tokenizer.json"]
_LOADED: dict = {}


def _load(vocab_file, name: str):
    """(ours, HF's, HF's with special-token text as text) for one file."""
    if name not in _LOADED:
        path = vocab_file(name)
        plain = tokenizers.Tokenizer.from_file(str(path))
        plain.encode_special_tokens = True
        _LOADED[name] = fastbpe.load(path), tokenizers.Tokenizer.from_file(str(path)), plain
    return _LOADED[name]


@pytest.fixture(scope="module", params=FILES, ids=[f.split("/")[0] for f in FILES])
def model(request, vocab_file):
    return _load(vocab_file, request.param)


DOCS = documents(300)


def test_corpus_ids_equal_hf(model):
    ours, hf, _ = model
    want = [e.ids for e in hf.encode_batch(DOCS, add_special_tokens=False)]
    assert ours.encode_batch(DOCS, allowed_special="all") == want
    for doc, ids in zip(DOCS[:40], want):
        assert ours.encode(doc, allowed_special="all") == ids
        assert ours.encode_to_numpy(doc, allowed_special="all").tolist() == ids


def test_corpus_with_add_special_tokens_equals_hf(model):
    ours, hf, _ = model
    docs = DOCS[:100]
    want = [e.ids for e in hf.encode_batch(docs)]
    assert ours.encode_batch(docs, allowed_special="all", add_special_tokens=True) == want
    flat, offsets = ours.encode_batch_to_numpy(docs, allowed_special="all", add_special_tokens=True)
    assert [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(docs))] == want


def test_special_token_text_as_text_equals_hf(model):
    """``encode_ordinary`` is HF with ``encode_special_tokens=True``: special-token text
    is text (non-special added tokens still match, in both)."""
    ours, _, plain = model
    docs = DOCS[:100]
    assert ours.encode_ordinary_batch(docs) == [e.ids for e in plain.encode_batch(docs, add_special_tokens=False)]


def test_decode_equals_hf(model):
    ours, hf, _ = model
    for doc in DOCS[:60]:
        ids = hf.encode(doc).ids
        assert ours.hf_decode(ids) == hf.decode(ids)
        assert ours.hf_decode(ids, skip_special_tokens=False) == hf.decode(ids, skip_special_tokens=False)
        # tiktoken's decode (every token's bytes) is HF's with the special tokens kept,
        # for these ByteLevel decoders; the text back is the normalized text (Qwen: NFC)
        assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=False)


@settings(max_examples=150)
@given(text=st.text(max_size=120))
def test_hypothesis_text_equals_hf(vocab_file, text):
    for name in FILES:
        ours, hf, _ = _load(vocab_file, name)
        assert ours.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids, name


# ----------------------------------------------------------------- the silent wrong results, fixed
def test_deepseek_keeps_what_a_split_does_not_match(vocab_file):
    """Row 1: only the last of DeepSeek's three Splits was kept and "2024" was dropped."""
    ours, hf, _ = _load(vocab_file, "deepseek-v4/tokenizer.json")
    ids = ours.encode_ordinary("Hello 2024")
    assert ids == hf.encode("Hello 2024", add_special_tokens=False).ids
    assert ours.decode(ids) == "Hello 2024"
    assert ours.engine == "rank"


# ----------------------------------------------------------------- DeepSeek V4 on the rank core
DEEPSEEK = "deepseek-v4/tokenizer.json"


def test_deepseek_runs_on_the_rank_core(vocab_file):
    """Its three Splits are one native split program in the rank core (no pipeline, no
    Python per piece), its merge list the rank rule with no unreachable token."""
    from fastbpe._encode import CoreBPE

    ours, _, _ = _load(vocab_file, DEEPSEEK)
    assert (ours.engine, ours._split_engine) == ("rank", "program")
    assert type(ours._core_bpe) is CoreBPE and isinstance(ours._core_bpe.pat_str, tuple)
    assert len(ours._core_bpe.pat_str) == 3 and not ours._unreachable


def test_deepseek_batches_on_threads_equal_hf(vocab_file, tmp_path):
    ours, hf, plain = _load(vocab_file, DEEPSEEK)
    docs = DOCS + ["".join(DOCS[i:i + 20]) for i in range(0, 200, 20)]   # long texts too
    want = [e.ids for e in hf.encode_batch(docs, add_special_tokens=False)]
    assert ours.encode_batch(docs, allowed_special="all", num_threads=2) == want
    flat, offsets = ours.encode_batch_to_numpy(docs, allowed_special="all", num_threads=2)
    assert [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(docs))] == want
    text = "\n".join(docs)
    (tmp_path / "t.txt").write_bytes(text.encode())
    assert ours.encode_file(tmp_path / "t.txt", allowed_special="all", num_threads=2).tolist() == \
        hf.encode(text, add_special_tokens=False).ids


def test_count_matches_added_tokens_as_encode_ordinary(model):
    """``count`` / ``count_till_limit`` count what ``encode_ordinary`` gives: non-special
    added tokens (DeepSeek's ``<think>``) match there; the rank core's own
    ``encode_ordinary`` knows none, so counting through it gave two more ids a pair."""
    ours, _, plain = model
    text = "Hello 2024 中文かな <think>x</think> " * 400 + DOCS[3]
    n = len(plain.encode(text, add_special_tokens=False).ids)
    assert ours.count(text) == len(ours.encode_ordinary(text)) == n
    assert ours.count_till_limit(text, n) == n and ours.count_till_limit(text, n - 1) is None


#: DeepSeek V4's added tokens: raw and normalized ones that share a character
#: ("<｜/table>｜" then "｜DSML｜"), specials, and text around them.
_DEEPSEEK_PARTS = ["<｜/table>｜", "｜DSML｜", "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>",
                   "<｜begin▁of▁sentence｜>", "｜", "<", ">", "DSML", "2024", "12345", "中文", "かな",
                   " ", "\n", "Hello", ",", "x", "é", "\u200d", "!", "ab"]


@settings(max_examples=300)
@given(parts=st.lists(st.sampled_from(_DEEPSEEK_PARTS), max_size=25))
def test_deepseek_added_tokens_equal_hf(vocab_file, parts):
    """One pass over the added tokens (the core's) is HF's raw-then-normalized cut for
    this file (``bpe.hf._taken_before_raw``), with and without special tokens."""
    ours, hf, plain = _load(vocab_file, DEEPSEEK)
    text = "".join(parts)
    assert ours.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids
    assert ours.encode_ordinary(text) == plain.encode(text, add_special_tokens=False).ids


def test_llama32_builds_words_from_the_merge_list(vocab_file):
    """Row 2: ``ignore_merges: false``: ' ayrıntı' is ' ayrı' 'nt' 'ı' (HF), not the whole
    token that Meta's tiktoken-format file gives."""
    ours, hf, _ = _load(vocab_file, "llama-3.2/tokenizer.json")
    ids = ours.encode_ordinary(" ayrıntı")
    assert ids == hf.encode(" ayrıntı", add_special_tokens=False).ids
    assert [ours.decode([i]) for i in ids] == [" ayrı", "nt", "ı"]
    meta = fastbpe.load(vocab_file("llama-3.2/tokenizer.model"))
    assert len(meta.encode_ordinary(" ayrıntı")) == 1


def test_llama32_adds_begin_of_text_when_asked(vocab_file):
    """Row 3: the post-processor's ``<|begin_of_text|>``, with ``add_special_tokens=True``;
    tiktoken's ``encode`` is unchanged by default."""
    ours, hf, _ = _load(vocab_file, "llama-3.2/tokenizer.json")
    assert ours.encode("Hi", add_special_tokens=True) == hf.encode("Hi").ids == [128000, 13347]
    assert ours.encode("Hi") == [13347]
    with pytest.raises(TypeError, match="add_special_tokens must be a bool"):
        ours.encode("Hi", add_special_tokens=1)


def test_qwen3_normalizes_nfc_and_splits_digits(vocab_file):
    ours, hf, _ = _load(vocab_file, "qwen3/tokenizer.json")
    for text in ["e\u0301", "１０", "Tiếng Việt", "ｶﾞ"]:
        assert ours.encode_ordinary(text) == hf.encode(text, add_special_tokens=False).ids
    assert len(ours.encode_ordinary("１０")) == 2


def test_pickle_round_trip(vocab_file):
    import pickle

    ours, _, _ = _load(vocab_file, "qwen3/tokenizer.json")
    back = pickle.loads(pickle.dumps(ours))
    assert back.encode(DOCS[5], allowed_special="all") == ours.encode(DOCS[5], allowed_special="all")


def test_save_keeps_the_pipeline(vocab_file, tmp_path):
    """A save writes the file's pipeline back (never a rank-rule file with other ids);
    ranks-only formats refuse a pipeline they cannot hold."""
    ours, hf, _ = _load(vocab_file, "deepseek-v4/tokenizer.json")
    ours.save(tmp_path / "t.json")
    back, theirs = fastbpe.load(tmp_path / "t.json"), tokenizers.Tokenizer.from_file(str(tmp_path / "t.json"))
    for doc in DOCS[:40]:
        want = hf.encode(doc).ids
        assert theirs.encode(doc).ids == want
        assert back.encode(doc, allowed_special="all", add_special_tokens=True) == want
    with pytest.raises(ValueError, match="holds ranks and a split pattern"):
        ours.save(tmp_path / "t.tiktoken")
    ours.save(tmp_path / "folder", transformers=True)
    assert (tmp_path / "folder" / "tokenizer.json").read_text(encoding="utf-8") == (tmp_path / "t.json").read_text(encoding="utf-8")


def test_runs_of_one_unit_equal_hf(vocab_file):
    """Runs of a repeated unit are where merge orders could differ (two overlapping
    pairs that make the same token): HF's order by merge rank, kept by both engines
    (GPT-2's converted file runs on the rank rule)."""
    units = [" ", "a", "-", "=", "\n", "ab", "0", ".", "*", "中", "\t", "aa"]
    texts = [p + u * n + s for u in units for n in range(1, 40) for p in ("", "x", " ") for s in ("", " ")]
    for name in FILES + ["gpt2.tokenizer.json"]:
        if name.startswith("gpt2"):
            ours, hf = fastbpe.load(vocab_file(name)), tokenizers.Tokenizer.from_file(str(vocab_file(name)))
            assert ours.engine == "rank"
        else:
            ours, hf, _ = _load(vocab_file, name)
        want = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
        assert ours.encode_ordinary_batch(texts) == want, name


def _code_point_blocks(stop: int):
    """Every code point below ``stop`` (no surrogates), 256 to a text, each inside
    letters, spaces, digits, newlines and an apostrophe, where split patterns differ."""
    for start in range(0, stop, 256):
        cps = [chr(c) for c in range(start, start + 256) if not 0xD800 <= c < 0xE000]
        if cps:
            yield "".join(f"a{c} {c}{c}1\n'{c}S " for c in cps)


def test_every_code_point_equals_hf(vocab_file):
    """The BMP and plane 1 through every file's pipeline (Oniguruma in HF, ``regex``
    here). All 17 planes agree too (checked once: 4,344 blocks a file, minutes)."""
    blocks = list(_code_point_blocks(0x20000))
    for name in FILES:
        ours, _, plain = _load(vocab_file, name)
        want = [e.ids for e in plain.encode_batch(blocks, add_special_tokens=False)]
        assert ours.encode_ordinary_batch(blocks) == want, name


# ----------------------------------------------------------------- native splitting (issue 38, speed)
def test_the_pipeline_splits_natively(model):
    """The open models' Split chains compile to split programs: no ``regex`` per text,
    all three on the rank engine (Llama 3.2 and Qwen3 on the cl100k splitter, DeepSeek V4's
    three Splits as one program)."""
    ours, _, _ = model
    assert ours.engine == "rank"
    assert ours._split_engine in ("program", "builtin:cl100k", "builtin:cl100k_digit1")


def test_tekken_splits_natively(vocab_file):
    assert fastbpe.load(vocab_file("mistral/tekken_240911.json"))._split_engine == "program"


@settings(max_examples=200)
@given(text=st.text(max_size=200))
def test_native_split_equals_the_regex_chain(vocab_file, text):
    """The native pieces are the ``regex`` chain's (``_isolated_chain``), as UTF-8."""
    from fastbpe.bpe.hf import _isolated_chain, _raw_splitter
    from fastbpe.reference import hf as ref

    text = text.encode("utf-8", "replace").decode("utf-8")  # the core fixes surrogates first
    for name in FILES:
        ours, _, _ = _load(vocab_file, name)
        split = _raw_splitter(ours.pipeline.pre_tokenizer)   # the pipeline engine's (Qwen's non-NFC text)
        chain = _isolated_chain([ref._compiled(p) for p in (split.pattern if isinstance(split.pattern, tuple) else (split.pattern,))])
        assert split(text) == [p.encode("utf-8") for p in chain(text)], name
