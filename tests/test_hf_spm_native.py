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


def bucket_kernels(spec: HFSpmSpec):
    """The long-segment merges side by side: buckets from 17 symbols, and the heap only."""
    return native.HFSpmKernel(spec, buckets_from=0), native.HFSpmKernel(spec, buckets_from=10**9)


@pytest.mark.parametrize("name", sorted(SPECS))
@settings(max_examples=150, deadline=None)
@given(word=WORDS)
def test_bucket_queue_corollary(name, word):
    """``reference.hf_spm.merge_buckets`` (buckets by rank) merges as the heap does."""
    spec = SPECS[name]
    symbols = H.initial_symbols(word, spec)
    assert H.merge_buckets(symbols, spec) == H.merge_symbols(symbols, spec)


@pytest.mark.parametrize("word", ["ab" * 3000, SPACE * 5000, "=" * 4097, "abc" * 2000 + "=" * 3000,
                                  "aab" * 2000, "cab" * 1500 + "bcab" * 1000, "ab" * 2048])
def test_buckets_golden(word):
    """Long segments (past ``buckets_from``, 4096 symbols by default) by buckets, equal
    to the heap's and the reference's merges."""
    spec = SPECS["bytes"]
    expected = reference_ids(word, spec)
    assert [i for i, _, _ in H.merge_buckets(H.initial_symbols(word, spec), spec)] == expected
    for kernel in bucket_kernels(spec) + (native.HFSpmKernel(spec),):
        assert kernel.bpe(word) == expected, kernel.buckets_from


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.sampled_from([5_000, 20_000, 200_000]),
       letters=st.sampled_from(["ab", "abc", "ab" + SPACE, "=" + SPACE, "abc=" + SPACE]))
def test_buckets_hypothesis(seed, size, letters):
    """Long segments of a few letters (5k-200k symbols): buckets, heap and (up to 20k
    symbols) the reference agree."""
    import random

    spec = SPECS["bytes"]
    rng = random.Random(seed)
    word = "".join(rng.choice(letters) for _ in range(size))
    buckets, heap = bucket_kernels(spec)
    got = buckets.bpe(word)
    assert got == heap.bpe(word)
    if size <= 20_000:
        assert got == reference_ids(word, spec)


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


def test_mistral_long_lines_buckets_equal_heap(mistral_specs):
    """Mistral's merges on long lines without spaces (one uncut segment of joinable
    letters, and random letters): buckets and heap give the same ids, and HF's rule
    through the reference on a prefix."""
    import random

    rng = random.Random(7)
    spec = mistral_specs[(MISTRAL_FILES[0], "spm_proto")]
    buckets, heap = bucket_kernels(spec)
    texts = []
    for letters in ("tha", "abcdefghijklmnopqrstuvwxyz", "ing"):
        text = "".join(rng.choice(letters) for _ in range(60_000))
        texts.append(text)
        assert buckets.encode(text) == heap.encode(text)
        head = text[:8_000]
        assert native.HFSpmKernel(spec).encode(head) == H.encode(head, spec)
    # batch threads: each on its context's bucket scratch
    assert buckets.encode_batch(texts * 2, frozenset(), 2) == [heap.encode(t) for t in texts * 2]


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
    """Python threads encoding on one tokenizer at once get the same ids as one thread
    (a call that finds the kernel's context busy takes a fresh one)."""
    from concurrent.futures import ThreadPoolExecutor

    from fastbpe.spm import HFSentencePieceBPE

    spec = mistral_specs[(MISTRAL_FILES[0], "spm_proto")]
    tok = HFSentencePieceBPE(spec)
    texts = (CORPUS + random_texts(35, 60)) * 4
    expected = [H.encode(t, spec) for t in texts]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(tok.encode_ordinary, texts)) == expected


# --------------------------------------------------------------------------- batches on native threads
# The kernel's encode / encode_batch (the added-token cut native, each batch thread on a
# context of its own) against reference.hf_spm.encode, through HFSentencePieceBPE.

ADDED = {"[X]": 902, "<s": 903, "a[": 904}           # "<s" is a prefix of the special "<s>": longest wins
SPECIAL = {"<s>": 900, "</s>": 901}
BATCH_TEXT = st.lists(st.sampled_from(list("abc=😀é中x  " + SPACE) + ["\U000e0100", "<s>", "</s>", "[X]", "<s", "a[",
                                                                     "\ud800", "\udc00", "<", "["]),
                      max_size=40).map("".join)


def _with_added(spec: HFSpmSpec) -> HFSpmSpec:
    from dataclasses import replace

    return replace(spec, added=dict(ADDED), special=dict(SPECIAL))


def _expected(texts: list[str], spec: HFSpmSpec, allowed: frozenset[str]) -> list[list[int]]:
    from fastbpe.reference.core import fix_surrogates

    return [H.encode(fix_surrogates(t), spec, allowed) for t in texts]


def _check_batch(tok, texts: list[str], spec: HFSpmSpec, threads=(1, 2, 8)) -> None:
    """encode_batch (lists and numpy) on 1, 2 and 8 threads == per text == the reference,
    special tokens allowed and not (their text then ordinary), uint32 and uint16."""
    import numpy as np

    for allowed_special, allowed in (("all", frozenset(spec.special)), (set(), frozenset())):
        expected = _expected(texts, spec, allowed)
        kw = dict(allowed_special=allowed_special, disallowed_special=())
        assert [tok.encode(t, **kw) for t in texts] == expected
        assert [tok.encode_to_numpy(t, **kw).tolist() for t in texts] == expected
        for n in threads:
            assert tok.encode_batch(texts, num_threads=n, **kw) == expected, n
            for dtype in (np.uint32, np.uint16):
                ids, offsets = tok.encode_batch_to_numpy(texts, num_threads=n, dtype=dtype, **kw)
                assert ids.dtype == dtype and offsets.dtype == np.int64 and len(offsets) == len(texts) + 1
                assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == expected, n
        if not allowed:
            for n in threads:
                assert tok.encode_ordinary_batch(texts, num_threads=n) == expected


BATCH_GOLDEN = GOLDEN + ["a b", " a", "a  b ", SPACE + "a" + SPACE, "中 中", "x<s> y<s>", "<s>", "<s", "<s>>",
                         "[X][X]a[", " <s> a", "a\ud800b", "\udc00", "</s></s>", "<</s>", ""]


@pytest.mark.parametrize("key", sorted(VARIANTS, key=str))
def test_batch_golden(key):
    """The synthetic specs under every normalizer layout, with added and special tokens
    (no shared files needed)."""
    from fastbpe.spm import HFSentencePieceBPE

    spec = _with_added(VARIANTS[key])
    tok = HFSentencePieceBPE(spec)
    assert tok._core.threaded
    _check_batch(tok, BATCH_GOLDEN, spec)


@pytest.mark.parametrize("key", [("bytes", "legacy"), ("unk_fuse", "always", True), ("no_unk", "first", False)],
                         ids=str)
@settings(max_examples=60, deadline=None)
@given(texts=st.lists(BATCH_TEXT, max_size=12))
def test_batch_hypothesis(key, texts):
    from fastbpe.spm import HFSentencePieceBPE

    spec = _with_added(VARIANTS[key])
    _check_batch(HFSentencePieceBPE(spec), texts, spec, threads=(1, 3))


def test_batch_edges():
    """No texts, empty texts, many more texts than threads, a 200,000-symbol text
    among short ones (merged by the heap on its thread: not quadratic)."""
    import time

    import numpy as np

    from fastbpe.spm import HFSentencePieceBPE

    spec = _with_added(VARIANTS[("bytes", "legacy")])
    tok = HFSentencePieceBPE(spec)
    for n in (1, 2, 8):
        assert tok.encode_batch([], num_threads=n) == []
        ids, offsets = tok.encode_batch_to_numpy([], num_threads=n)
        assert ids.tolist() == [] and offsets.tolist() == [0]
        assert tok.encode_batch(["", "", ""], num_threads=n) == [[], [], []]
    many = (BATCH_GOLDEN * 40)[:1000]
    expected = [tok.encode(t, allowed_special="all", disallowed_special=()) for t in many]
    assert expected == _expected(many, spec, frozenset(SPECIAL))[:len(many)]
    for n in (1, 2, 8):
        assert tok.encode_batch(many, num_threads=n, allowed_special="all", disallowed_special=()) == expected
    long = [SPACE * 200_000, "=" * 200_000 + "<s>" + "ab" * 10, "a b"]
    expected = [tok.encode(t, allowed_special="all") for t in long]
    assert expected[0] == reference_ids(SPACE + SPACE * 200_000, spec)   # Prepend's ▁ in front
    t0 = time.process_time()
    for n in (1, 2):
        assert tok.encode_batch(long + many[:50], num_threads=n, allowed_special="all") == expected + [
            tok.encode(t, allowed_special="all", disallowed_special=()) for t in many[:50]]
        ids, offsets = tok.encode_batch_to_numpy(long, num_threads=n, allowed_special="all", dtype=np.uint16)
        assert ids.tolist() == [i for e in expected for i in e]
    assert time.process_time() - t0 < 10.0


def test_added_tokens_cut_leftmost_longest():
    """A few cuts written out (``reference.sentencepiece.split_specials``' rule)."""
    from dataclasses import replace

    spec = _with_added(VARIANTS[("bytes", "legacy")])
    k = native.HFSpmKernel(spec)
    v = spec.vocab
    assert k.encode("<s>", frozenset({"<s>"})) == [900]
    assert k.encode("<s>", frozenset()) == [903, v[SPACE], v["<0x3E>"]]   # "<s" (added), then "▁>" (Prepend)
    assert k.encode("[X]a[", frozenset()) == [902, 904]
    assert k.encode("b<s>", frozenset({"<s>"})) == [v[SPACE], v["b"], 900]
    with pytest.raises(ValueError, match="empty"):
        native.HFSpmKernel(replace(spec, added={"": 5})).encode("a")
    with pytest.raises(ValueError, match="ignore_merges"):
        native.HFSpmKernel(SPECS["ignore_merges"]).encode_batch(["a"], frozenset(), 2)


CHAIN = {"[": 910, "[A": 911, "[A]": 912, "[AB]": 913, "[ABC]": 914, "[B": 915, "A]": 916, "[AC": 917}


@settings(max_examples=200, deadline=None)
@given(text=st.text(st.sampled_from(list("[AB]C a")), max_size=40))
def test_added_tokens_sharing_prefixes(text):
    """Many tokens sharing prefixes (Mistral v3: 768 of 771 start with "["): the
    native cut narrows a sorted range; the reference tries each token, longest first."""
    from dataclasses import replace

    spec = replace(VARIANTS[("bytes", "legacy")], added=dict(CHAIN), special={"[AB": 918})
    k = native.HFSpmKernel(spec)
    for allowed in (frozenset(), frozenset({"[AB"})):
        assert k.encode(text, allowed) == H.encode(text, spec, allowed)


def test_ignore_merges_batches_stay_exact():
    """``ignore_merges`` models run batches per text on the words' path (Python)."""
    from fastbpe.spm import HFSentencePieceBPE

    spec = _with_added(SPECS["ignore_merges"])
    tok = HFSentencePieceBPE(spec)
    assert not tok._core.threaded
    _check_batch(tok, ["abc abc", "ab", "c c<s>", "", "中a[X]", "a\ud800"], spec, threads=(1, 2))


def test_mistral_batches(mistral_specs):
    """Mistral v1 / v3 converted three ways: batch == per text == the reference, 1, 2
    and 8 threads."""
    from fastbpe.spm import HFSentencePieceBPE

    texts = CORPUS + random_texts(36, 40) + ["a\ud800b", "", "<s>[INST] x [/INST]</s>", "=" * 3000]
    for key, spec in mistral_specs.items():
        _check_batch(HFSentencePieceBPE(spec), texts, spec)


def test_batch_threads_each_keep_a_segment_cache():
    """Each batch thread fills its context's own segment cache (the compact one of
    ``_hf_spm_cache.pxd`` and the fused scan, or past 16-bit ids the wide one): many
    distinct words, segments the scan hands over (byte fallback, astral, unknown), the
    kernel kept warm from batch to batch, on 1, 2 and 4 threads."""
    import random

    rng = random.Random(3939)
    vocab, merges = small_vocab(True)
    wide = spec_of({t: i + 70_000 for t, i in vocab.items()}, merges)
    alphabet = "ab" * 6 + "c=" + " " + SPACE + "é中😀"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(600)]
    for spec in (SPECS["bytes"], SPECS["unk_fuse"], wide):
        expected = [H.encode(t, spec, frozenset()) for t in texts]
        kernel = native.HFSpmKernel(spec)
        for n in (1, 2, 4, 2):
            assert kernel.encode_batch(texts, frozenset(), n) == expected, n


def _hammer(tok, texts: list[str]) -> None:
    """Python threads calling one tokenizer at once, batches (without the GIL) and
    single texts mixed: each gets the ids of a serial run (no shared scratch)."""
    from concurrent.futures import ThreadPoolExecutor

    kw = dict(allowed_special="all", disallowed_special=())
    serial = [tok.encode(t, **kw) for t in texts]

    def work(i):
        if i % 3 == 0:
            return tok.encode_batch(texts, num_threads=1 + i % 4, **kw)
        if i % 3 == 1:
            ids, off = tok.encode_batch_to_numpy(texts, num_threads=2, **kw)
            return [ids[off[j]:off[j + 1]].tolist() for j in range(len(texts))]
        return [tok.encode(t, **kw) for t in texts]

    with ThreadPoolExecutor(4) as pool:
        for got in pool.map(work, range(24)):
            assert got == serial


def test_threads_hammer_one_tokenizer():
    from fastbpe.spm import HFSentencePieceBPE

    spec = _with_added(VARIANTS[("bytes", "always", True)])
    texts = BATCH_GOLDEN * 3 + ["ab c" * 20_000]   # long: single calls drop the GIL too
    _hammer(HFSentencePieceBPE(spec), texts)


def test_threads_hammer_mistral(mistral_specs):
    from fastbpe.spm import HFSentencePieceBPE

    spec = mistral_specs[(MISTRAL_FILES[-1], "non_legacy")]
    _hammer(HFSentencePieceBPE(spec), CORPUS + random_texts(37, 80) + ["x" * 70_000 + " y"])
