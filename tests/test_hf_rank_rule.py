"""HF's merge-list rule on the native rank core (issue 38, speed): when a tokenizer.json's
merge list is the rank rule (``reference.hf.rank_rule_unreachable``), the file runs on
the rank engine, with the tokens merging never reaches left out of the encode table
(``CoreBPE(..., unreachable=...)``) and NFC text straight to the core. Ids equal HF
``tokenizers``' on the corpus, hypothesis text, every unreachable token, chunk-cache
eviction patterns and batches on threads; a list that is not the rank rule stays on
the pipeline engine."""
from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

import fastbpe
from fastbpe.bpe.hf import _merged_counts, _rank_rule_unreachable, llama3_cut
from fastbpe.reference import hf as ref
from fastbpe.reference import patterns
from fastbpe.reference.core import CoreBPE as ReferenceCoreBPE

sys.path.insert(0, str(Path(__file__).parent))
from open_corpus import documents  # noqa: E402

tokenizers = pytest.importorskip("tokenizers")

from test_open_models_hf import _load as _load_files  # noqa: E402  (one load per session for both)

DOCS = documents(200)


def _load(vocab_file, name: str):
    """(ours, HF with special-token text as text) for one file."""
    ours, _, plain = _load_files(vocab_file, name)
    return ours, plain


# ----------------------------------------------------------------- the rule, small
def _brute_force(ranks: dict[bytes, int], merges: list[tuple[bytes, bytes]], text: bytes) -> tuple[list[int], list[int]]:
    """(HF's merge list on ``text``, tiktoken's rank rule without the whole-piece lookup)."""
    table = {(ranks[a], ranks[b]): (i, ranks[a + b]) for i, (a, b) in enumerate(merges)}
    return ref.merge_by_list([ranks[bytes([c])] for c in text], table), ReferenceCoreBPE(ranks, {}, ".").byte_pair_encode(text)


@settings(max_examples=300, deadline=None)
@given(words=st.lists(st.text(alphabet="abc", min_size=1, max_size=6), min_size=1, max_size=8),
       vocab_size=st.integers(260, 280), drop=st.integers(0, 30), text=st.text(alphabet="abc", max_size=14))
def test_rule_says_equal_only_when_equal(words, vocab_size, drop, text):
    """The theorem on HF-trained merge lists (with a merge dropped or not): when the
    rule says the two processes agree, they do on every text, and the unreachable
    tokens are exactly those merging does not give back."""
    from tokenizers import models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(words * 3, trainer)
    model = json.loads(tok.to_str())["model"]
    to_bytes = {c: bytes([b]) for b, c in enumerate(ref._byte_chars())}
    ranks = {b"".join(to_bytes[c] for c in t): i for t, i in model["vocab"].items()}
    merges = [tuple(b"".join(to_bytes[c] for c in part) for part in (m.split(" ") if isinstance(m, str) else m))
              for m in model["merges"]]
    if merges and drop < len(merges):
        del merges[drop]
    table = {(ranks[a], ranks[b]): (i, ranks[a + b]) for i, (a, b) in enumerate(merges)}
    counts = [len(ref.merge_by_list([ranks[bytes([c])] for c in t], table)) for t in ranks]
    found = ref.rank_rule_unreachable(list(ranks.values()), counts, [ranks[a + b] for a, b in merges])
    if found is None:
        return
    for t, i in ranks.items():
        hf_ids, rank_ids = _brute_force(ranks, merges, t)
        assert hf_ids == rank_ids, t
        assert (hf_ids != [i]) == (i in found), t
    data = text.encode()
    assert _brute_force(ranks, merges, data)[0] == _brute_force(ranks, merges, data)[1]
    # Corollary A: tiktoken's rule (whole-piece lookup first) without the unreachable tokens
    core = ReferenceCoreBPE(ranks, {}, ".+", unreachable={t for t, i in ranks.items() if i in found})
    assert core.encode_single_piece(data) == _brute_force(ranks, merges, data)[0]


def test_reference_and_native_core_leave_unreachable_tokens_out():
    ranks = {bytes([i]): i for i in range(256)} | {b"ab": 256, b"abc": 257, b"bc": 258}
    native = fastbpe._native.load().CoreBPE(ranks, {}, r"\S+|\s+", {b"abc"})
    reference = ReferenceCoreBPE(ranks, {}, r"\S+|\s+", {b"abc"})
    for core in (native, reference, pickle.loads(pickle.dumps(native))):
        assert core.encode_ordinary("abc abcabc") == [256, 99, 32, 256, 99, 256, 99]
        assert core.decode_bytes([257]) == b"abc"
        assert core.encode_single_piece(b"abc") == [256, 99]
    # the seeded table (issue 41) holds the tokens that encode: "abc", its one 3-byte
    # token, is not seeded, or the table would return it whole
    assert native._seed_table_info()["seeds"] in (0, None) or not native._seed_table_info()["entries"]
    with pytest.raises(ValueError, match="unreachable token b'zz' is not in mergeable_ranks"):
        fastbpe._native.load().CoreBPE(ranks, {}, r"\S+", {b"zz"})
    with pytest.raises(ValueError, match="unreachable token b'zz' is not in mergeable_ranks"):
        ReferenceCoreBPE(ranks, {}, r"\S+", {b"zz"})


# ----------------------------------------------------------------- the published files
def test_published_lists_are_the_rank_rule(vocab_file):
    """Llama 3.2, Qwen3 (with NFC) and DeepSeek V4 (its three Splits one split
    program) on the rank engine."""
    llama, _ = _load(vocab_file, "llama-3.2/tokenizer.json")
    qwen, _ = _load(vocab_file, "qwen3/tokenizer.json")
    deepseek, _ = _load(vocab_file, "deepseek-v4/tokenizer.json")
    assert (llama.engine, qwen.engine, deepseek.engine) == ("rank", "rank", "rank")
    assert len(llama._unreachable) == 588 and not qwen._unreachable
    assert _rank_rule_unreachable(deepseek.pipeline, deepseek._mergeable_ranks) == frozenset()
    for enc in (llama, qwen, deepseek):   # the numpy decision is the reference's
        ids, counts, news = _merged_counts(enc.pipeline, enc._mergeable_ranks)
        found = ref.rank_rule_unreachable(ids.tolist(), counts.tolist(), news.tolist())
        assert {enc._mergeable_ranks[t] for t in _rank_rule_unreachable(enc.pipeline, enc._mergeable_ranks)} == found


def test_every_unreachable_token_equals_hf(vocab_file):
    """Each token merging never reaches, as a text of its own (when its bytes are
    UTF-8), inside words, and repeated: HF's merged ids, never the token."""
    ours, hf = _load(vocab_file, "llama-3.2/tokenizer.json")
    texts = []
    for t in sorted(ours._unreachable):
        try:
            s = t.decode("utf-8")
        except UnicodeDecodeError:
            continue
        texts += [s, s + s, "x" + s, s + " " + s, " " + s + "\n"]
    assert len(texts) > 2000
    want = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    assert ours.encode_ordinary_batch(texts, num_threads=2) == want
    assert [ours.encode_ordinary(t) for t in texts] == want
    for t in ours._unreachable:
        assert ours.encode_single_token(t) == ours._mergeable_ranks[t]
        assert ours.decode_single_token_bytes(ours._mergeable_ranks[t]) == t


def test_chunk_cache_evictions_keep_hf_ids(vocab_file):
    """The chunk caches fill with other words between the exception words: each round
    (cold, warm, after evictions, on 1 and 2 threads) gives HF's ids."""
    ours, hf = _load(vocab_file, "llama-3.2/tokenizer.json")
    words = [t.decode("utf-8") for t in sorted(ours._unreachable) if t.isascii() or t[:1] == b" "]
    words = [w for w in words if len(hf.encode(w, add_special_tokens=False).ids) > 1][:200]
    filler = " ".join(f"w{i}q{i * 7919 % 1000}" for i in range(60_000))
    text = " ".join(words)
    want = hf.encode(text, add_special_tokens=False).ids
    ours._core_bpe._clear_chunk_caches()
    for _ in range(2):
        assert ours.encode_ordinary(text) == want
        ours.encode_ordinary(filler)
        assert ours.encode_batch([text, filler, text], num_threads=2, disallowed_special=())[::2] == [want, want]
        flat, offsets = ours.encode_batch_to_numpy([filler, text] * 3, num_threads=2, disallowed_special=())
        assert flat[offsets[1]:offsets[2]].tolist() == want


def test_batches_on_threads_equal_hf(vocab_file):
    for name in ("llama-3.2/tokenizer.json", "qwen3/tokenizer.json"):
        ours, hf = _load(vocab_file, name)
        want = [e.ids for e in hf.encode_batch(DOCS, add_special_tokens=False)]
        assert ours.encode_ordinary_batch(DOCS, num_threads=2) == want, name
        flat, offsets = ours.encode_batch_to_numpy(DOCS, num_threads=2, disallowed_special=())
        assert [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(DOCS))] == want, name


NOT_NFC = ["e\u0301", "<|im_start|>\u0338", "a<|im_end|>\u0338b", "\u037e<think>", "Vie\u0302\u0323t", "\u212b x",
           "<|endoftext|>e\u0301<|endoftext|>"]


def test_qwen_nfc_and_not_nfc_text_equal_hf(vocab_file):
    """NFC text goes straight to the rank core; other text through the pipeline (the
    added tokens cut before normalizing, as HF): both HF's ids, alone and mixed in
    batches and numpy batches."""
    ours, hf = _load(vocab_file, "qwen3/tokenizer.json")
    full = tokenizers.Tokenizer.from_file(str(vocab_file("qwen3/tokenizer.json")))
    texts = NOT_NFC + DOCS[:20] + [d + "e\u0301" for d in DOCS[:5]]
    want = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    assert [ours.encode_ordinary(t) for t in texts] == want
    assert ours.encode_ordinary_batch(texts, num_threads=2) == want
    flat, offsets = ours.encode_batch_to_numpy(texts, num_threads=2, disallowed_special=())
    assert [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == want
    want_all = [e.ids for e in full.encode_batch(texts, add_special_tokens=False)]
    assert ours.encode_batch(texts, allowed_special="all", num_threads=2) == want_all
    assert [ours.encode_to_numpy(t, allowed_special="all").tolist() for t in texts] == want_all
    with pytest.raises(ValueError, match="disallowed special token"):
        ours.encode_batch(["e\u0301", "<|im_start|>"])
    route = ours._core_bpe._route
    assert route("abc") == ["abc"] and route("e\u0301") == ["\u00e9"]   # NFC, or made NFC: the rank core
    # a special token's text that the call does not match, nothing disallowed: text to HF
    assert route("<|im_start|>e\u0301") == ["<|im_start|>\u00e9"]
    everything = frozenset(e["content"] for e in ours.pipeline.added)
    assert route("<|im_start|>e\u0301", everything) is None   # matched: HF cuts it before normalizing
    assert route("<|im_start|>e\u0301", frozenset(), everything) is None   # disallowed: checked raw
    assert route("\u037e<think>", ours._added_names) is None   # matched after normalizing: the pipeline
    with pytest.raises(ValueError, match="disallowed special token"):
        ours.encode("<|im_start|>\u0338")   # NFC would compose ">" and U+0338: checked raw


def test_the_pipeline_engine_on_request_gives_the_same_ids(vocab_file):
    """``engine="pipeline"`` (for comparisons) runs the same file the other way: the
    same ids, and a pickle keeps the choice."""
    from fastbpe.bpe.hf import HFEncoding

    ours, hf = _load(vocab_file, "llama-3.2/tokenizer.json")
    pipe = HFEncoding("llama", ours.pipeline, engine="pipeline")
    assert pipe.engine == "pipeline"
    assert pipe.encode_ordinary_batch(DOCS[:50]) == ours.encode_ordinary_batch(DOCS[:50])
    assert pickle.loads(pickle.dumps(pipe)).engine == "pipeline"
    with pytest.raises(ValueError, match="engine must be 'auto' or 'pipeline'"):
        HFEncoding("llama", ours.pipeline, engine="rank")


@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet=st.characters(codec="utf-8"), max_size=80) | st.sampled_from(NOT_NFC))
def test_hypothesis_text_on_the_rank_engine_equals_hf(vocab_file, text):
    for name in ("llama-3.2/tokenizer.json", "qwen3/tokenizer.json"):
        ours, hf = _load(vocab_file, name)
        assert ours.encode_ordinary(text) == hf.encode(text, add_special_tokens=False).ids, name


def test_a_list_that_is_not_the_rank_rule_stays_on_the_pipeline(vocab_file, tmp_path):
    """Qwen3 without the merge that makes " the": the list no longer reaches it, the
    rank rule does (its bytes merge by the list to two ids); the file runs the
    pipeline, ids equal HF."""
    data = json.loads(vocab_file("qwen3/tokenizer.json").read_text(encoding="utf-8"))
    merges = data["model"]["merges"]
    target = next(i for i, m in enumerate(merges) if "".join(m.split(" ") if isinstance(m, str) else m) == "Ġthe")
    del merges[target]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    ours = fastbpe.load(path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    hf.encode_special_tokens = True
    assert ours.engine == "pipeline"
    for doc in DOCS[:20] + [" the theory"]:
        assert ours.encode_ordinary(doc) == hf.encode(doc, add_special_tokens=False).ids


def test_rank_engine_with_a_pipeline_rule_is_not_a_tiktoken(vocab_file, tmp_path):
    """Unreachable tokens or a normalizer make ids a .tiktoken cannot give: saving one
    needs ``lossy=True``, and features of tiktoken's own rule refuse."""
    for name in ("llama-3.2/tokenizer.json", "qwen3/tokenizer.json"):
        ours, _ = _load(vocab_file, name)
        with pytest.raises(ValueError, match="holds ranks and a split pattern"):
            ours.save(tmp_path / "t.tiktoken")
        with pytest.raises(ValueError, match="encode_with_unstable follows tiktoken's rank rule"):
            ours.encode_with_unstable("hello wor")
        assert ours._ids_rule()


def test_files_and_counts_on_the_rank_engine(vocab_file, tmp_path):
    """``encode_file`` (UTF-8 bytes to the core: NFC as is, other text normalized or
    through the pipeline) and ``count_till_limit`` give HF's ids and counts."""
    for name in ("llama-3.2/tokenizer.json", "qwen3/tokenizer.json"):
        ours, hf = _load(vocab_file, name)
        for i, text in enumerate([DOCS[3], "Vie\u0302\u0323t Nam\n" * 50, "<|im_start|>\u0338 e\u0301"]):
            want = hf.encode(text, add_special_tokens=False).ids
            path = tmp_path / f"{i}.txt"
            path.write_bytes(text.encode("utf-8"))
            assert ours.encode_file(path, disallowed_special=()).tolist() == want, (name, i)
            assert ours.count_till_limit(text, len(want)) == len(want)
            assert ours.count_till_limit(text, len(want) - 1) is None


# ----------------------------------------------------------------- Llama 3's pattern on the cl100k splitter
_SPACES = [chr(c) for c in range(0x3000 + 1) if regex.match(r"\s", chr(c))]


def test_the_whitespace_llama3_cut_knows_is_regex_s():
    """``llama3_cut`` tests a text's last character against ``regex``'s ``\\s``, every
    code point of which is below U+3001."""
    from fastbpe.bpe.hf import _spaces

    every = {chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000 and regex.match(r"\s", chr(c))}
    assert _spaces() == every == set(_SPACES)


#: a Split's pattern and the hand-written splitter's pattern it is after ``llama3_cut``
CUT_PAIRS = [(patterns.LLAMA3, patterns.CL100K), (patterns.QWEN, patterns.CL100K_DIGIT1)]


@pytest.mark.parametrize("pattern, core", CUT_PAIRS)
@settings(max_examples=3000, deadline=None)
@given(text=st.lists(st.sampled_from([*_SPACES, "a", "1", "23", "١", "!", "'", "s", "é", "中", "\r\n"]),
                     max_size=14).map("".join))
def test_llama3_is_cl100k_cut_at_the_trailing_newline(pattern, core, text):
    """Llama 3's pattern splits a text as cl100k's splits its two parts at
    ``llama3_cut``, and Qwen's as cl100k's with one digit a chunk (the ``regex`` module
    runs both patterns)."""
    cut = llama3_cut(text)
    parts = [text] if cut is None else [text[:cut], text[cut:]]
    assert regex.findall(pattern, text) == [c for part in parts for c in regex.findall(core, part)]


@pytest.mark.parametrize("pattern, core", CUT_PAIRS)
def test_every_code_point_through_the_cut_and_the_native_splitter(pattern, core):
    """Every code point, in a few contexts (after a letter, a digit, a space, a
    newline; doubled; before a digit and trailing whitespace): ``llama3_cut`` and the
    native splitter of ``core`` give the chunks ``regex`` gives for the Split's pattern."""
    from fastbpe import _pretokenize as P

    rx = regex.compile(pattern)
    step = 4096
    for lo in range(0, 0x110000, step):
        chars = [chr(c) for c in range(lo, min(lo + step, 0x110000)) if not 0xD800 <= c < 0xE000]
        for text in ("".join(f"a{c}1{c}{c}12 {c}\n" for c in chars), "".join(f"{c}123 {c}x'{c}" for c in chars),
                     " ".join(chars) + " \n  ", "9".join(chars) + "\n\t"):
            cut = llama3_cut(text)
            parts = [text] if cut is None else [text[:cut], text[cut:]]
            assert [c for part in parts for c in P.split(part, core)] == rx.findall(text), hex(lo)


def _cut_route_equals_hf(vocab_file, name: str, engine: str, text: str) -> None:
    ours, hf = _load(vocab_file, name)
    full = _load_files(vocab_file, name)[1]
    assert ours._split_engine == engine
    want = hf.encode(text, add_special_tokens=False).ids
    assert ours.encode_ordinary(text) == want
    assert ours.encode_ordinary_batch([text, text + " \n "], num_threads=2)[0] == want
    assert ours.encode(text, allowed_special="all") == full.encode(text, add_special_tokens=False).ids


@settings(max_examples=300, deadline=None)
@given(text=st.lists(st.sampled_from([" ", "\n", "\r", "\t", "\u3000", "a", "1", "!", "ı", "<|eot_id|>"]), max_size=30).map("".join))
def test_llama3_on_the_cl100k_splitter_equals_hf(vocab_file, text):
    _cut_route_equals_hf(vocab_file, "llama-3.2/tokenizer.json", "builtin:cl100k", text)


@settings(max_examples=300, deadline=None)
@given(text=st.lists(st.sampled_from([" ", "\n", "\r", "\t", "\u3000", "a", "1", "23", "４", "!", "ı", "e\u0301",
                                      "<|im_start|>"]), max_size=30).map("".join))
def test_qwen_on_the_cl100k_splitter_equals_hf(vocab_file, text):
    """Qwen3: NFC, then the cut, then cl100k's splitter with one digit a chunk."""
    _cut_route_equals_hf(vocab_file, "qwen3/tokenizer.json", "builtin:cl100k_digit1", text)


@settings(max_examples=400, deadline=None)
@given(text=st.lists(st.sampled_from(["e", "\u0301", "\u0323", "\u0302", "a\u1df6\u0301", "\u1df6", "\u08cd", "\u212b",
                                      "\u0344", "\u0958", "\u1100\u1161", "\u11a8", "\uac00", ">", "\u0338", " ", "\n ",
                                      "1", "<think>", "</think", "<|im_start|>", "<|im_end|>\u0338", "中"]),
                     max_size=24).map("".join))
def test_qwen_non_nfc_text_and_added_tokens_equal_hf(vocab_file, text):
    """Qwen3 on text that NFC changes (combining marks, Hangul jamo, singletons,
    non-starter decompositions, exclusions, chars HF's Unicode 9.0 does not know) mixed
    with added tokens before and after normalizing: HF's ids for ``encode_ordinary``,
    ``encode`` with every special allowed, batches; a disallowed special's text raises
    exactly where HF's raw text holds it."""
    _cut_route_equals_hf(vocab_file, "qwen3/tokenizer.json", "builtin:cl100k_digit1", text)
    ours, _ = _load(vocab_file, "qwen3/tokenizer.json")
    specials = [e["content"] for e in ours.pipeline.added if e["special"]]
    if any(t in text for t in specials):
        with pytest.raises(ValueError, match="disallowed special token"):
            ours.encode(text)
    else:
        assert ours.encode(text) == ours.encode_ordinary(text)


def test_a_batch_of_cut_texts_names_the_text_with_a_disallowed_special(vocab_file):
    """Texts cut in two for the cl100k splitter: the error names the batch's text."""
    ours, _ = _load(vocab_file, "llama-3.2/tokenizer.json")
    texts = ["a \n  ", "b\n\t", "ok", "x <|eot_id|> y \n "]
    with pytest.raises(ValueError, match="of text 3 of the batch"):
        ours.encode_batch(texts)
    with pytest.raises(ValueError, match="of text 3 of the batch"):
        ours.encode_batch_to_numpy(texts)
    assert ours.encode_batch(texts[:3]) == [ours.encode(t) for t in texts[:3]]


# ----------------------------------------------------------------- NFC's quick rule
def test_every_code_point_below_u0300_is_nfc_stable():
    """``reference.hf.NFC_STABLE_BELOW``'s three claims, against ``unicodedata`` for
    every code point: below it each is its own NFC with combining class 0, and no
    code point's canonical decomposition has one of them after its first part (so
    composition never joins one to a char before it); U+0300 itself is not stable."""
    import unicodedata

    below = ref.NFC_STABLE_BELOW
    for c in map(chr, range(below)):
        assert unicodedata.normalize("NFC", c) == c and unicodedata.combining(c) == 0, hex(ord(c))
    for cp in range(0x110000):
        parts = unicodedata.decomposition(chr(cp)).split()
        if parts and not parts[0].startswith("<"):   # canonical
            assert all(int(p, 16) >= below for p in parts[1:]), hex(cp)
    assert unicodedata.combining(chr(below)) != 0
    chars = "".join(map(chr, range(below)))
    assert all(unicodedata.is_normalized("NFC", a + chars) for a in chars)


def test_qwen_threads_with_different_allowed_sets(vocab_file):
    """The router keeps the last call's (set, search) as one tuple: threads that
    alternate ``encode_ordinary`` (the non-special added tokens allowed) and ``encode``
    with every special allowed each get their own call's ids."""
    from concurrent.futures import ThreadPoolExecutor

    ours, _ = _load(vocab_file, "qwen3/tokenizer.json")
    texts = ["a<think>b<|im_start|>c e\u0301", "x<|im_start|>y", "<tool_call> z \n "] * 20
    want_ord = [ours.encode_ordinary(t) for t in texts]
    want_all = [ours.encode(t, allowed_special="all") for t in texts]

    def run(k):
        if k % 2:
            return [ours.encode_ordinary(t) for t in texts] == want_ord
        return [ours.encode(t, allowed_special="all") for t in texts] == want_all
    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(run, range(40)))
