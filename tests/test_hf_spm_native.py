"""The native BPE of a sentencepiece-style tokenizer.json (``fastbpe._hf_spm``) against its
specification ``fastbpe.reference.hf_spm`` (``bpe_word``), and the reference's corollary
that words merge segment by segment (``segments``). HF ``tokenizers`` judges the whole
path in ``tests/test_spm_hf.py`` (which now runs on the kernel); here the kernel is
checked with both merge loops (``scan_max`` 0: the heap only; 10**6: the scan only) and
both junction tables (``dense``).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe.reference import hf_spm as H
from fastbpe.reference.hf_spm import HFSpmSpec

sys.path.insert(0, str(Path(__file__).parent))
from spm_support import CORPUS, MISTRAL_FILES, random_texts  # noqa: E402

native = pytest.importorskip("fastbpe._hf_spm", reason="the native extensions are not built")

SPACE = H.SPACE


def spec_of(vocab: dict[str, int], merges: list[tuple[str, str]], *, unk: str | None = "<unk>",
            byte_fallback: bool = True, fuse_unk: bool = False, ignore_merges: bool = False) -> HFSpmSpec:
    """A spec as ``formats.hf_spm`` reads one: merges ranked in order, each making
    ``vocab[left + right]``."""
    pairs = {}
    for rank, (a, b) in enumerate(merges):
        pairs.setdefault((vocab[a], vocab[b]), (rank, vocab[a + b]))
    return HFSpmSpec(vocab, pairs, vocab[unk] if unk is not None else None, byte_fallback, fuse_unk,
                     ignore_merges, True, True, "never", False, {}, {}, ())


def small_vocab(with_bytes: bool) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Characters, a few merges (including one of a byte token and a character, so byte
    symbols merge too), ``▁`` runs, ``=`` runs and an astral character."""
    tokens = ["<unk>", SPACE, "a", "b", "c", "=", "😀", "é"]
    merges = [(SPACE, SPACE), ("a", "b"), ("b", "a"), ("=", "="), (SPACE, "a"), ("ab", "c"), ("==", "=="),
              (SPACE + SPACE, SPACE + SPACE), ("😀", "a"), ("c", "c"), ("b", "c")]
    if with_bytes:
        tokens += [f"<0x{b:02X}>" for b in range(256)]
        merges += [("<0xAD>", "a")]
    for a, b in merges:
        if a + b not in tokens:
            tokens.append(a + b)
    return {t: i for i, t in enumerate(tokens)}, merges


SPECS = {
    "bytes": spec_of(*small_vocab(True)),
    "bytes_fuse": spec_of(*small_vocab(True), fuse_unk=True),
    "unk": spec_of(*small_vocab(False), byte_fallback=False),
    "unk_fuse": spec_of(*small_vocab(False), byte_fallback=False, fuse_unk=True),
    "no_unk": spec_of(*small_vocab(False), unk=None, byte_fallback=False),
    "ignore_merges": spec_of(*small_vocab(True), ignore_merges=True),
}
GOLDEN = ["", "a", "abab", "abcabc", SPACE * 500, "=" * 500, "=" * 501, "😀a😀😀a", "中中a中", "x\U000e0100y",
          "é中😀", "aé", "ab" * 300, SPACE + "a" * 40 + "b" * 40, "c" * 33, "abcabcabc" * 7, "\x00", "中" * 50,
          "中\U000e0100a" * 700]   # byte fallback: 8 symbols per 3 characters, the symbol buffer grows mid-word
WORDS = st.text(st.sampled_from(list("abc=😀é中x" + SPACE) + ["\U000e0100", "\x00"]), max_size=80)


def reference_ids(word: str, spec: HFSpmSpec) -> list[int]:
    return [i for i, _, _ in H.bpe_word(word, spec)]


def kernels(spec: HFSpmSpec):
    return [native.HFSpmKernel(spec), native.HFSpmKernel(spec, scan_max=0, dense=False),
            native.HFSpmKernel(spec, scan_max=10**6)]


@pytest.mark.parametrize("name", sorted(SPECS))
def test_golden_words(name):
    spec = SPECS[name]
    for kernel in kernels(spec):
        for word in GOLDEN:
            assert kernel.bpe(word) == reference_ids(word, spec), (name, word[:20], kernel.scan_max)
        assert kernel.encode_words(GOLDEN) == [i for w in GOLDEN for i in reference_ids(w, spec)]


def test_golden_values():
    """A few ids written out, so a change to both twins at once shows."""
    spec = SPECS["bytes"]
    v = spec.vocab
    k = native.HFSpmKernel(spec)
    assert k.bpe("") == []
    assert k.bpe("中") == [v["<0xE4>"], v["<0xB8>"], v["<0xAD>"]]            # byte fallback
    assert k.bpe("中a") == [v["<0xE4>"], v["<0xB8>"], v["<0xAD>a"]]           # a byte symbol merges
    assert k.bpe("x\U000e0100") == [v["<0x78>"], v["<0xF3>"], v["<0xA0>"], v["<0x84>"], v["<0x80>"]]
    assert k.bpe("😀a") == [v["😀a"]]                                          # astral character in vocab
    assert k.bpe("=" * 5) == [v["===="], v["="]]
    assert k.bpe(SPACE * 5) == [v[SPACE * 4], v[SPACE]]
    unk = native.HFSpmKernel(SPECS["unk"])
    assert unk.bpe("中中a") == [0, 0, SPECS["unk"].vocab["a"]]
    assert native.HFSpmKernel(SPECS["unk_fuse"]).bpe("中中a中") == [0, SPECS["unk"].vocab["a"], 0]
    assert native.HFSpmKernel(SPECS["no_unk"]).bpe("a中b") == [SPECS["no_unk"].vocab["ab"]]   # dropped, then merged


@pytest.mark.parametrize("name", sorted(SPECS))
@settings(max_examples=150, deadline=None)
@given(word=WORDS)
def test_hypothesis_words(name, word):
    spec = SPECS[name]
    expected = reference_ids(word, spec)
    for kernel in kernels(spec):
        assert kernel.bpe(word) == expected


@pytest.mark.parametrize("name", sorted(SPECS))
@settings(max_examples=150, deadline=None)
@given(word=WORDS)
def test_segments_corollary(name, word):
    """``reference.hf_spm.segments``: merging segment by segment is merging the whole."""
    spec = SPECS[name]
    symbols = H.initial_symbols(word, spec)
    joins = H.junctions(spec)
    assert joins is not None
    by_segment = [s for seg in H.segments(symbols, spec, joins) for s in H.merge_symbols(seg, spec)]
    assert by_segment == H.merge_symbols(symbols, spec)


def test_long_runs_are_not_quadratic():
    """200,000 symbols of one run (one segment, merged by the heap) in well under a
    second: a quadratic loop would take minutes."""
    import time

    spec = SPECS["bytes"]
    k = native.HFSpmKernel(spec)
    for word in (SPACE * 200_000, "=" * 200_000, "ab" * 100_000):
        t0 = time.process_time()
        ids = k.bpe(word)
        assert time.process_time() - t0 < 2.0
        assert ids == reference_ids(word, spec)


CACHED = {name: native.HFSpmKernel(SPECS[name]) for name in ("bytes", "unk_fuse")}   # kept across examples


@pytest.mark.parametrize("name", sorted(CACHED))
@settings(max_examples=200, deadline=None)
@given(words=st.lists(st.text(st.sampled_from("abc=" + SPACE), min_size=1, max_size=34), min_size=1, max_size=20))
def test_segment_cache_across_words(name, words):
    """The segment caches (``_hf_spm_cache.pxd``) of one kernel kept across many words:
    hits, segments of 15-30 symbols (the long table) and longer, and results that do not
    fit an entry (``"ab" * 10``: 20 symbols, 10 ids) give the reference's ids, the first
    time and again."""
    spec = SPECS[name]
    for word in words + words[::-1]:
        assert CACHED[name].bpe(word) == reference_ids(word, spec)


def test_segment_cache_evictions():
    """80,000 distinct words of one segment each (~36,000 of up to 14 symbols: many of
    the short table's 2-way sets get three or more, the long table's 2,048 entries
    overflow), twice over: the evicted ones merge again, to the same ids."""
    import random

    spec = SPECS["bytes"]
    rng = random.Random(39)
    words = ["".join(rng.choice("ab") for _ in range(rng.randint(2, 30))) for _ in range(80_000)]
    expected = [reference_ids(w, spec) for w in words]
    kernel = native.HFSpmKernel(spec)
    for _ in range(2):
        assert kernel.encode_words(words) == [i for ids in expected for i in ids]


def test_ids_past_16_bits_take_the_wide_cache():
    """A model whose ids need more than 16 bits (Gemma's 256,000) cannot use the compact
    cache's 16-bit entries: it keeps the first one, with the same ids."""
    vocab, merges = small_vocab(True)
    spec = spec_of({t: i + 70_000 for t, i in vocab.items()}, merges)
    for kernel in kernels(spec):
        for word in GOLDEN + ["ab" * 10, "abcabc" * 5, "c" * 20] * 2:
            assert kernel.bpe(word) == reference_ids(word, spec), (word[:20], kernel.scan_max)


@pytest.fixture(scope="module")
def mistral_specs(tmp_path_factory, vocab_file):
    pytest.importorskip("transformers", reason="transformers is in the test extra")
    from test_spm_hf import make_json

    import fastbpe

    out = {}
    for name in MISTRAL_FILES:
        path = vocab_file(name)
        for kind in ("spm_proto", "legacy", "non_legacy"):
            json_path = make_json(path, kind, tmp_path_factory.mktemp("hfn") / f"{kind}.json")
            out[(name, kind)] = fastbpe.load(json_path)._spec
    return out


def test_mistral_native_equals_reference(mistral_specs):
    texts = CORPUS + random_texts(34, 100) + [" " * 500, "=" * 500, "", "\U0001F600" * 20, "\U000e0100x"]
    for key, spec in mistral_specs.items():
        for kernel in kernels(spec):
            for text in texts:
                for part in H.parts(text, spec):
                    if isinstance(part, list):
                        assert kernel.encode_words(part) == [i for w in part for i in reference_ids(w, spec)], (
                            key, text[:30], kernel.scan_max)


def test_no_cut_when_a_merge_side_has_empty_text():
    """``junctions`` is None when a merge has a side with empty text: the kernel then
    merges each word whole (no segments), still equal to the reference."""
    vocab = {"<unk>": 0, "": 1, "a": 2, "b": 3, "ab": 4}
    spec = spec_of(vocab, [("", "a"), ("a", "b")], byte_fallback=False)
    assert H.junctions(spec) is None
    for kernel in kernels(spec):
        for word in ["", "ab", "abab", "ba", "xab"]:
            assert kernel.bpe(word) == reference_ids(word, spec)


def test_model_encodes_through_the_kernel(mistral_specs):
    """``HFSentencePieceBPE`` runs the kernel (``native_reason`` None) and gives the
    reference's ids, lone surrogates as U+FFFD, special tokens allowed or not."""
    from fastbpe.spm import HFSentencePieceBPE

    spec = mistral_specs[(MISTRAL_FILES[0], "spm_proto")]
    tok = HFSentencePieceBPE(spec)
    assert tok.native_reason is None and tok._core.kernel is not None
    for text in CORPUS[:5] + ["a\ud800b", "x<s>y</s>", "=" * 300, ""]:
        fixed = text.replace("\ud800", "\ufffd")
        assert tok.encode_ordinary(text) == H.encode(fixed, spec)
        assert tok.encode(text, allowed_special="all") == H.encode(fixed, spec, frozenset(spec.special))
    assert tok.encode_batch(["a b", "<s>c"], allowed_special="all") == [
        H.encode("a b", spec), H.encode("<s>c", spec, frozenset(spec.special))]


def _normalizer_variants():
    """Each SPECS model under each normalizer layout ``formats.hf_spm`` reads: Prepend +
    Replace (legacy), Metaspace ``always`` / ``first`` with and without ``split``, and a
    model without ``▁`` in its vocabulary (unknown, fused: a word's run is its own)."""
    from dataclasses import replace

    out = {}
    for name, spec in SPECS.items():
        if spec.ignore_merges:
            continue
        out[(name, "legacy")] = spec
        for scheme in ("always", "first", "never"):
            for split in (False, True):
                out[(name, scheme, split)] = replace(spec, prepend=False, prepend_scheme=scheme, split=split)
    vocab = {t: i for i, t in enumerate(["<unk>", "a", "b", "ab"])}
    out[("no_space_piece", "split")] = replace(spec_of(vocab, [("a", "b")], byte_fallback=False, fuse_unk=True),
                                               prepend=False, prepend_scheme="always", split=True)
    return out


VARIANTS = _normalizer_variants()
TEXTS = st.lists(st.sampled_from(list("abc=😀é中x  " + SPACE) + ["\U000e0100", "<s>"]), max_size=60).map("".join)


def _reference_encode(text, spec, allowed=frozenset()):
    return [i for p in H.parts(text, spec, allowed) for i in ([p] if isinstance(p, int) else
                                                               [j for w in p for j in reference_ids(w, spec)])]


@pytest.mark.parametrize("key", sorted(VARIANTS, key=str))
def test_pieces_golden(key):
    """``encode_pieces`` (the normalizer made on the fly) equals the reference's words."""
    from dataclasses import replace

    spec = replace(VARIANTS[key], special={"<s>": 900})
    texts = GOLDEN + ["a b", " a", "a  b ", SPACE + "a" + SPACE, "中 中", "x<s> y<s>", "<s>", "  ", "a\U000e0100 b"]
    for kernel in kernels(spec):
        for text in texts:
            assert H.encode(text, spec, frozenset({"<s>"})) == _reference_encode(text, spec, frozenset({"<s>"}))
            assert kernel.encode_pieces(H.pieces(text, spec, frozenset({"<s>"}))) == H.encode(
                text, spec, frozenset({"<s>"})), (key, text[:30], kernel.scan_max)


@pytest.mark.parametrize("key", sorted(VARIANTS, key=str))
@settings(max_examples=80, deadline=None)
@given(text=TEXTS)
def test_pieces_hypothesis(key, text):
    from dataclasses import replace

    spec = replace(VARIANTS[key], special={"<s>": 900})
    for allowed in (frozenset(), frozenset({"<s>"})):
        expected = H.encode(text, spec, allowed)
        for kernel in kernels(spec):
            assert kernel.encode_pieces(H.pieces(text, spec, allowed)) == expected


def test_ignore_merges_takes_the_words_path():
    """With ``ignore_merges`` a word in the vocabulary is one token: the model sends
    words to ``encode_words`` (which looks each up whole); ``encode_pieces`` refuses."""
    from fastbpe.spm import HFSentencePieceBPE

    spec = SPECS["ignore_merges"]
    tok = HFSentencePieceBPE(spec)
    for text in ["abc abc", "ab", "c c", "", "中a"]:
        assert tok.encode_ordinary(text) == H.encode(text, spec)
    with pytest.raises(ValueError, match="ignore_merges"):
        native.HFSpmKernel(spec).encode_pieces(H.pieces("ab", spec))


def test_threads_share_one_tokenizer(mistral_specs):
    """The kernel holds the GIL while it uses its own buffers and cache: Python threads
    encoding on one tokenizer at once get the same ids as one thread."""
    from concurrent.futures import ThreadPoolExecutor

    from fastbpe.spm import HFSentencePieceBPE

    spec = mistral_specs[(MISTRAL_FILES[0], "spm_proto")]
    tok = HFSentencePieceBPE(spec)
    texts = (CORPUS + random_texts(35, 60)) * 4
    expected = [H.encode(t, spec) for t in texts]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(tok.encode_ordinary, texts)) == expected
