"""fastbpe._encode.CoreBPE: ids identical to tiktoken, both merge paths, threads, pickling."""
from __future__ import annotations

import contextlib
import gc
import multiprocessing as mp
import os
import pickle
import random
import sys
import weakref

import numpy as np
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe._encode import (
    _IMMORTAL_REFCNT,
    CoreBPE,
    _equal_short,
    _find_pair,
    _output_pool_bytes,
    _cut_points,
    _set_id_int_top_up,
    _batch_threads,
    _shared_int_address,
    default_tuning,
)
from fastbpe._jobs import _utf8_of
from fastbpe.bpe.encoding import get_toy_encoding
from fastbpe.reference import patterns
from fastbpe.reference.bpe import bpe_encode_chunk, merge_bytes
from fastbpe.reference.core import CoreBPE as ReferenceCoreBPE
from fastbpe.reference.core import DisallowedSpecial, holds_any

VOCABS = ["gpt2", "cl100k_base", "o200k_base"]

_CORES: dict = {}


@pytest.fixture(scope="module")
def pair(tiktoken_encoding):
    """``pair(name)`` -> (CoreBPE, tiktoken.Encoding) built from the same ranks."""

    def get(name):
        tk = tiktoken_encoding(name)
        if name not in _CORES:
            _CORES[name] = CoreBPE(tk._mergeable_ranks, tk._special_tokens, tk._pat_str)
        return _CORES[name], tk

    return get


@contextlib.contextmanager
def tuned(**fields):
    """Set tuning fields for a block: on the process default (which new cores copy) and
    on every core cached by ``pair``."""
    old_default = default_tuning(**fields)
    olds = [(core, core.set_tuning(**fields)) for core in _CORES.values()]
    try:
        yield
    finally:
        for core, old in olds:
            core.set_tuning(**old)
        default_tuning(**old_default)


@pytest.fixture
def both_paths():
    """Run a block with chunks of up to 128 bytes through the scan, longer ones the heap."""
    with tuned(heap_threshold=128):
        yield


TEXTS = [
    "",
    "a",
    "Hello, world! This is a test of the emergency broadcast system.",
    "The quick brown fox jumps over the lazy dog. " * 20,
    # code
    "def f(x):\n    return x ** 2  # square\n\nclass A(B):\n\tpass\r\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }\n",
    "    if __name__ == '__main__':\n        main()\n\n\n",
    # Turkish, Chinese, Arabic, Hindi
    "İstanbul'da ığdır ŞEHİR ÇOK güzel, öğrenciler ülkeyi görüyor. Iı İi",
    "我们今天去公园散步，天气非常好！机器学习和自然语言处理。",
    "مرحبا بالعالم، كيف حالك اليوم؟ هذه جملة عربية.",
    "नमस्ते दुनिया, आप कैसे हैं? यह हिंदी वाक्य है।",
    # emoji / ZWJ / combining
    "👩‍👩‍👧‍👦 family 👍🏽 thumbs 🇺🇸 flag e\u0301 n\u0303 \u200d\u200c",
    # digits in many scripts
    "123 4567 89012 ١٢٣٤ ۱۲۳ १२३४५ ௧௨௩ ๑๒๓ １２３ 一二三 ⅠⅡⅢ ½ ²³",
    # whitespace
    "a\r\nb\r\n\r\nc\t\td  \t \n\n\n   e",
    " " * 50 + "x" + "\t" * 30 + "\n" * 20 + "y" + " \n" * 10,
    "trailing spaces   ",
    "\n\n\n",
    # apostrophes
    "I'm you're he's she'd we'll they've it't 'S 'T 'RE 'VE 'M 'LL 'D I'M YOU'RE "
    "don't DON'T Don'T ’s ‘quoted’ ''' 'x' 'll'll",
    # special-looking text
    "<|endoftext|> and <|fim_prefix|> <|endofprompt|> <|unknown|>",
    "<<|endoftext|>|endoftext|>>",
    "x" * 3000,
    "ab" * 1000,
    "\u00e9" * 500 + "\u4e2d" * 500,
]


@pytest.mark.parametrize("name", VOCABS)
def test_fixed_texts_match_tiktoken(pair, name, both_paths):
    core, tk = pair(name)
    for text in TEXTS:
        assert core.encode_ordinary(text) == tk.encode_ordinary(text), text[:60]
        assert core.encode(text, set()) == tk.encode(text, disallowed_special=()), text[:60]
        assert core.encode(text, tk.special_tokens_set) == tk.encode(
            text, allowed_special="all"
        ), text[:60]


@pytest.mark.parametrize("name", VOCABS)
def test_regex_fallback_path_matches_tiktoken(pair, name):
    """A pattern string that is not byte-identical to a built-in one (same language)
    goes through the regex module instead of the hand-written pre-tokenizer."""
    _, tk = pair(name)
    core = CoreBPE(tk._mergeable_ranks, tk._special_tokens, "(?:" + tk._pat_str + ")")
    for text in TEXTS:
        assert core.encode_ordinary(text) == tk.encode_ordinary(text), text[:60]
        assert core.encode(text, tk.special_tokens_set) == tk.encode(
            text, allowed_special="all"
        ), text[:60]
    texts = TEXTS * 2
    assert core.encode_batch(texts, {"<|endoftext|>"}, 2) == [
        tk.encode(t, allowed_special={"<|endoftext|>"}, disallowed_special=()) for t in texts
    ]


@pytest.mark.parametrize("name", VOCABS)
def test_real_text_matches_tiktoken(pair, name):
    core, tk = pair(name)
    import inspect
    import json

    text = inspect.getsource(json) + open("/usr/share/common-licenses/GPL-3").read()
    assert core.encode_ordinary(text) == tk.encode_ordinary(text)


@pytest.mark.parametrize("name", VOCABS)
def test_allowed_specials(pair, name):
    core, tk = pair(name)
    text = "a<|endoftext|>b <|endoftext|><|endoftext|>\n<|endofprompt|> <|fim_middle|>c"
    for allowed in [set(), {"<|endoftext|>"}, tk.special_tokens_set, {"<|nope|>"}]:
        want = tk.encode(text, allowed_special=allowed, disallowed_special=())
        assert core.encode(text, allowed) == want
        assert core.encode(text, frozenset(allowed)) == want
    # ordinary ignores specials entirely
    assert core.encode_ordinary(text) == tk.encode_ordinary(text)


_ALPHABET = st.sampled_from(
    list("aAbBzZ019 \t\n\r'’_-.,!?/<|>()[]")
    + list("ığüşöçİĞÜŞÖÇ中文字日本語한국어العربيةहिंदी١٢३")
    + ["\u0301", "\u200d", "👍", "🏽", "\U0001f469", "\u00a0", "\u3000", "\x00", "\ufffd"]
)
_FRAGMENTS = st.sampled_from(
    ["the", " the", "The", " 's", "'S", "'ll", "don't", "  ", "\n\n", "\r\n", "\t",
     "123456", " 42", "٣٤٥", "<|endoftext|>", "<|endofprompt|>", "中文", " مرحبا", " नमस्ते",
     "İs", "ıI", "👩‍👩‍👧", "x" * 40, " " * 17, "!!!", "...\n", "/**/", "é", "e\u0301"]
)
_TEXT = st.one_of(
    st.text(_ALPHABET, max_size=60),
    st.lists(_FRAGMENTS, max_size=20).map("".join),
    st.text(max_size=40),
)


@pytest.mark.parametrize("name", VOCABS)
@settings(max_examples=700)
@given(text=_TEXT)
def test_hypothesis_matches_tiktoken(pair, name, text):
    core, tk = pair(name)
    text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    assert core.encode_ordinary(text) == tk.encode_ordinary(text)
    assert core.encode(text, tk.special_tokens_set) == tk.encode(text, allowed_special="all")


# Texts long enough for the windows (64 bytes ahead of a chunk), around specials too.
_WINDOW_TEXT = st.lists(
    st.sampled_from(["word", " word", " Word", "WORD", "camelCase", " ", "  ", "\n", "\n\n",
                     " \n ", "\t", ".", ",", "!\n", "(", "'s", "'ll", "'x", "12", "1234",
                     "ç", " şu", "İ", "ı", "é", "×", "\u00a0", "“", "中", "👍", "\u0301",
                     "'T", "'RE", "((", "\u00a0x", "<|endoftext|>"]),
    min_size=20, max_size=100,
).map("".join)


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
@settings(max_examples=400, deadline=None)
@given(text=_WINDOW_TEXT)
def test_windows_match_tiktoken(pair, name, text):
    core, tk = pair(name)
    assert core.encode_ordinary(text) == tk.encode_ordinary(text)
    assert core.encode(text, tk.special_tokens_set) == tk.encode(text, allowed_special="all")


def test_lone_surrogates_fixed_up_like_tiktoken(pair):
    core, tk = pair("cl100k_base")
    texts = ["a\ud800b", "\udfff", "x\ud83d\ude00y", "\ud83d", "中\ud800文", "ok"]
    for text in texts:
        assert core.encode_ordinary(text) == tk.encode_ordinary(text)
        assert core.encode(text, {"<|endoftext|>"}) == tk.encode(text)
    want = [tk.encode_ordinary(t) for t in texts]
    assert core.encode_ordinary_batch(texts * 3, 2) == want * 3
    flat, offsets = core.encode_batch_to_numpy(texts, frozenset(), 2)
    assert [flat[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))] == want


# ---- disallowed special tokens -----------------------------------------------------

_DISALLOWED_PIECES = st.sampled_from(
    ["<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|", "|>", "<", "endoftext", "a",
     " b", "\n", "x\ny", "\ud800", "\ud83d\ude42", "🙂", "é", "中文", "ab\ncd\n"]
)
_DISALLOWED_TEXT = st.lists(_DISALLOWED_PIECES, max_size=12).map("".join)
_NEEDLES = st.frozensets(
    st.sampled_from(["<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "x\ny", "🙂", "\ud800",
                     "b\nc", "<", "中文", "[EOS]"]),
    max_size=4,
)


def _disallowed_outcome(call):
    try:
        result = call()
    except DisallowedSpecial as found:
        return ("disallowed", found.index)
    if isinstance(result, tuple):      # numpy batch: (flat, offsets)
        flat, offsets = result
        return ("ids", [flat[offsets[i] : offsets[i + 1]].tolist() for i in range(len(offsets) - 1)])
    return ("ids", result.tolist() if isinstance(result, np.ndarray) else result)


def _expected_outcome(tk, texts, allowed, disallowed):
    """tiktoken's rule: the first text (as given) holding a disallowed string fails;
    otherwise tiktoken's ids with the allowed specials."""
    for i, text in enumerate(texts):
        if holds_any(text, disallowed):
            return ("disallowed", i)
    return ("ids", [tk.encode(t, allowed_special=allowed, disallowed_special=()) for t in texts])


@pytest.mark.parametrize("name", VOCABS)
@settings(max_examples=300, deadline=None)
@given(texts=st.lists(_DISALLOWED_TEXT, min_size=1, max_size=5), disallowed=_NEEDLES,
       allowed=st.frozensets(st.sampled_from(["<|endoftext|>", "<|endofprompt|>"]), max_size=2),
       threads=st.sampled_from([1, 2, 3]))
def test_disallowed_check_matches_the_rule(pair, name, texts, disallowed, allowed, threads):
    """Every way to encode with a disallowed set reports the first text that holds one
    of its strings (checked on the text as given, lone surrogates and all), before any
    other result: as the reference core and tiktoken's Encoding do. Texts are cut at
    every allowed place, so a string near a cut is still found."""
    core, tk = pair(name)
    allowed = allowed & tk.special_tokens_set
    for i, text in enumerate(texts):
        want = _expected_outcome(tk, [text], allowed, disallowed)
        if want[0] == "ids":
            want = ("ids", want[1][0])
        assert _disallowed_outcome(lambda: core.encode(text, allowed, disallowed)) == want
        assert _disallowed_outcome(lambda: core.encode_to_numpy(text, allowed, np.uint32, disallowed)) == want
    want = _expected_outcome(tk, texts, allowed, disallowed)
    with tiny_pieces():
        assert _disallowed_outcome(lambda: core.encode_batch(texts, allowed, threads, disallowed)) == want
        assert _disallowed_outcome(
            lambda: core.encode_batch_to_numpy(texts, allowed, threads, np.uint32, disallowed)) == want


def test_disallowed_check_on_the_reference_core(tiktoken_encoding):
    """The pure-Python twin takes the same argument and reports the same texts."""
    tk = tiktoken_encoding("gpt2")
    ref = ReferenceCoreBPE(tk._mergeable_ranks, tk._special_tokens, tk._pat_str)
    eot = "<|endoftext|>"
    texts = ["fine", f"a{eot}", "x\ud800" + eot, eot]
    assert _disallowed_outcome(lambda: ref.encode_batch(texts, set(), 1, {eot})) == ("disallowed", 1)
    assert _disallowed_outcome(lambda: ref.encode_batch_to_numpy(texts[2:], set(), 1, np.uint32, {eot})) == (
        "disallowed", 0)
    assert _disallowed_outcome(lambda: ref.encode("x\ud83d\ude42", set(), {"🙂"})) == (
        "ids", tk.encode("x\ud83d\ude42", disallowed_special={"🙂"}))
    assert ref.encode(f"a{eot}", {eot}, frozenset()) == tk.encode(f"a{eot}", allowed_special={eot})


def test_disallowed_check_in_many_texts_and_long_ones(pair):
    """On 2 and 3 threads, with blocks of texts and long texts cut into pieces, the
    text reported is the first that holds a disallowed string, wherever it is."""
    core, tk = pair("cl100k_base")
    eot = "<|endoftext|>"
    docs = [f"document {i}\nwith lines\n" * 3 for i in range(200)]
    long_doc = "\n".join(t for t in TEXTS if t.strip()).replace("<|", "<") * 40
    for where in (0, 57, 150, 199):
        texts = list(docs)
        texts[where] += eot
        texts[min(where + 20, 199)] += eot
        for threads in (1, 2, 3):
            with pytest.raises(DisallowedSpecial) as found:
                core.encode_batch(texts, frozenset(), threads, {eot})
            assert found.value.index == where
    for offset in (0, len(long_doc) // 3, len(long_doc) - 1):
        text = long_doc[:offset] + "\n" + eot + long_doc[offset:]
        for threads in (2, 3):
            with pytest.raises(DisallowedSpecial) as found:
                core.encode_batch(["short", long_doc, text], frozenset(), threads, {eot})
            assert found.value.index == 2
    assert core.encode_batch([long_doc] * 3, frozenset(), 2, {eot}) == [tk.encode_ordinary(long_doc)] * 3


@pytest.mark.usefixtures("tiny_pieces_fixture")
def test_no_cuts_when_a_disallowed_string_holds_a_newline(pair):
    """A disallowed string with "\n" can span a cut point (here every "b\nc" is one), so
    texts are not cut then and the check still sees it."""
    core, tk = pair("gpt2")
    text = "ab\ncd\n" * 50
    assert len(_cut_points(text)) >= 49
    for threads in (2, 3):
        with pytest.raises(DisallowedSpecial):
            core.encode_batch([text], frozenset(), threads, {"b\nc"})
        assert core.encode_batch([text], frozenset(), threads, {"b\nx"}) == [tk.encode_ordinary(text)]


@settings(max_examples=1500, deadline=None)
@given(text=st.binary(max_size=70).map(lambda b: b.replace(b"\x00", b"<")), start=st.integers(0, 70),
       pair_=st.sampled_from([b"<|", b"<<", b"||", b"\xff\x00"]))
def test_find_pair_matches_bytes_find(text, start, pair_):
    """The SSE2 scan for a two-byte prefix finds what bytes.find finds, from any start,
    across its 16-byte steps and in the scalar tail."""
    start = min(start, len(text))
    want = text.find(pair_, start)
    assert _find_pair(text, start, pair_[0], pair_[1]) == (len(text) if want < 0 else want)


@pytest.mark.parametrize("where", [0, 14, 15, 16, 17, 31, 32, 62])
def test_find_pair_at_every_step_boundary(where):
    text = bytearray(b"a<" * 32)
    text[where : where + 2] = b"<|"
    assert _find_pair(bytes(text), 0, ord("<"), ord("|")) == where
    assert _find_pair(bytes(text[: where + 1]), 0, ord("<"), ord("|")) == where + 1   # cut in two


def test_disallowed_argument_edge_cases(pair):
    """"" is in every text (as in tiktoken, whose regex then matches at 0); strings that
    start with different bytes take the table scan instead of memchr; sets are kept per
    encoder but any number of distinct ones works; items must be str."""
    core, tk = pair("gpt2")
    with pytest.raises(DisallowedSpecial):
        core.encode("", frozenset(), {""})
    assert core.encode_batch([], frozenset(), 2, {""}) == []
    mixed = {"[EOS]", "<s>", "§"}
    for text, bad in [("a [EOS] b", True), ("x <s>", True), ("§", True), ("[EO S] <x> s", False)]:
        if bad:
            with pytest.raises(DisallowedSpecial):
                core.encode(text, frozenset(), mixed)
        else:
            assert core.encode(text, frozenset(), mixed) == tk.encode_ordinary(text)
    for i in range(200):
        needle = f"<tok{i}>"
        with pytest.raises(DisallowedSpecial):
            core.encode(f"x {needle} y", frozenset(), [needle, "<other>"])
        assert core.encode("x y", frozenset(), (needle,)) == tk.encode_ordinary("x y")
    with pytest.raises(TypeError, match="must be str"):
        core.encode("x", frozenset(), {b"<|endoftext|>"})
    with pytest.raises(TypeError, match="collection of str"):
        core.encode("x", frozenset(), "all")


# ---- merge paths -------------------------------------------------------------------


NEVER = 1 << 40     # a threshold above every chunk


def merge_paths(core, piece):
    """The tokens of one chunk from the bucket merge, the heap merge and the scan."""
    old = core.set_tuning(heap_threshold=0, bucket_threshold=0)
    try:
        buckets = core._encode_chunk_bytes(piece)
        core.set_tuning(bucket_threshold=NEVER)
        heap = core._encode_chunk_bytes(piece)
        core.set_tuning(heap_threshold=1 << 20)
        return buckets, heap, core._encode_chunk_bytes(piece)
    finally:
        core.set_tuning(**old)


def heap_and_scan(core, piece):
    """The tokens of one chunk from the heap merge and from the scan, checking on the
    way that the bucket merge gives the heap's."""
    buckets, heap, scan = merge_paths(core, piece)
    assert buckets == heap, piece[:40]
    return heap, scan


@pytest.mark.parametrize("name", ["gpt2", "o200k_base"])
def test_heap_and_scan_agree_on_random_bytes(pair, name):
    core, tk = pair(name)
    ranks = tk._mergeable_ranks
    rng = random.Random(1234)
    alphabets = [
        bytes(range(256)),
        b"ab ",
        b"aaaa",
        "的一是不了人我在有他这".encode(),
        b"the quick brown fox",
        b"\n \t",
    ]
    for trial in range(400):
        alpha = alphabets[trial % len(alphabets)]
        n = rng.choice([2, 3, 5, 17, 64, 129, 300, 700])
        piece = bytes(rng.choice(alpha) for _ in range(n))
        heap, scan = heap_and_scan(core, piece)
        assert heap == scan, piece
        if n <= 129:
            assert scan == bpe_encode_chunk(piece, ranks), piece


def test_deep_heaps_match_the_scan(pair):
    """Chunks of thousands of bytes fill several levels of the 8-ary heap (sets of
    children cut short at the end, many stale entries, long runs of equal ranks); the
    quadratic scan is the second opinion."""
    core, tk = pair("o200k_base")
    rng = random.Random(99)
    pieces = [b"x" * 4099, b" " * 3001 + b"x", b"ab" * 2500, b"\n" * 4100,
              "是".encode() * 1400]
    for alpha in (b"ab ", b"aaab", b"0123456789", b"xyz\n"):
        pieces.append(bytes(rng.choice(alpha) for _ in range(rng.randint(2000, 5000))))
    for piece in pieces:
        heap, scan = heap_and_scan(core, piece)
        assert heap == scan, piece[:40]
        assert b"".join(tk.decode_single_token_bytes(t) for t in heap) == piece


def test_long_chunks_without_a_mergeable_pair_are_their_bytes(pair):
    """A long chunk in which no two adjacent bytes form a token skips the heap (nothing
    can merge); one mergeable pair anywhere, even the last, still takes it."""
    core, tk = pair("gpt2")
    ranks = tk._mergeable_ranks
    assert b"  " not in ranks and b" \n" not in ranks and b"\n\n" in ranks
    space = ranks[b" "]
    assert core._encode_chunk_bytes(b" " * 5000) == [space] * 5000
    assert core.encode_ordinary(" " * 100_000) == [space] * 100_000
    for piece in [b" " * 999 + b"\n\n", b"\n\n" + b" " * 999, b" \n" * 600, b" \n\n" * 300]:
        heap, scan = heap_and_scan(core, piece)    # the scan, as a second opinion
        assert core._encode_chunk_bytes(piece) == heap == scan == merge_bytes(piece, ranks)
    few = CoreBPE({b"a": 0, b" ": 1, b"aa": 2}, {}, r"[\s\S]+")
    with pytest.raises(ValueError, match="byte 0x62 at UTF-8 offset 41"):
        few.encode_ordinary(" a" * 20 + " b" + " a" * 20)


def test_heap_path_matches_tiktoken_on_long_chunks(pair):
    core, tk = pair("cl100k_base")
    rng = random.Random(7)
    words = ["中文", "字", "abc", "x", "的是", "ไทย", "é"]
    for _ in range(30):
        text = "".join(rng.choice(words) for _ in range(rng.randint(50, 400)))
        text = text.replace(" ", "")
        old = core.set_tuning(heap_threshold=0)
        try:
            assert core.encode_ordinary(text) == tk.encode_ordinary(text)
        finally:
            core.set_tuning(**old)


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_bucket_merge_matches_tiktoken_on_long_runs(pair, name):
    """The worst-case inputs, long enough for the default bucket_threshold and for
    queues of many blocks; ids equal tiktoken's (the texts are one or a few chunks,
    where tiktoken's merge is quadratic, so they stay tens of kilobytes)."""
    core, tk = pair(name)
    rng = random.Random(3)
    texts = ["x" * 20_000, "\n" * 9_000, " " * 9_001 + "y", "中" * 7_000,
             "".join(rng.choice("ACGT") for _ in range(12_000)),
             "".join(rng.choice("的一是不了人我在有他这") for _ in range(5_000)),
             "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(10_000))]
    assert default_tuning()["bucket_threshold"] < 9_000
    for text in texts:
        assert core.encode_ordinary(text) == tk.encode_ordinary(text), text[:20]


def random_ranks(rng, alphabet, n_tokens):
    """A vocabulary over alphabet with ranks in random order: not one a trainer makes
    (a token may rank below a part of it, so a merge can create a pair of a lower rank
    than its own), outside the premise of the bucket merge's Corollary B2."""
    tokens = {bytes([c]) for c in alphabet}
    while len(tokens) < n_tokens:
        tokens.add(bytes(rng.choice(alphabet) for _ in range(rng.randint(2, 5))))
    order = list(tokens)
    rng.shuffle(order)
    return {t: r for r, t in enumerate(order)}


@given(st.data())
@settings(max_examples=60, deadline=None)
def test_bucket_merge_matches_the_reference_on_any_rank_order(data):
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = random.Random(seed)
    alphabet = b"abcd"[:data.draw(st.integers(2, 4))]
    ranks = random_ranks(rng, alphabet, data.draw(st.integers(len(alphabet) + 1, 60)))
    core = CoreBPE(ranks, {}, r"[\s\S]+")
    piece = bytes(rng.choice(alphabet) for _ in range(data.draw(st.integers(2, 600))))
    buckets, heap, scan = merge_paths(core, piece)
    assert buckets == heap == scan == bpe_encode_chunk(piece, ranks)


def test_bucket_merge_falls_back_to_the_heap_for_sparse_ranks():
    """The rank -> queue table is indexed by rank; a vocabulary whose ranks are too
    sparse for it (no dense tables) merges long chunks with the heap, same ids."""
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 10**9, b"abab": 10**9 + 1}
    core = CoreBPE(ranks, {}, r"[\s\S]+")
    piece = b"ab" * 700 + b"a"       # merge_paths asks for the buckets at any length
    buckets, heap, scan = merge_paths(core, piece)
    assert buckets == heap == scan == merge_bytes(piece, ranks)
    assert buckets.count(10**9 + 1) == 350


# ---- merging by characters ---------------------------------------------------------
# CJK-like chunks are merged at character level (fastbpe/_encode.pyx states the rules
# that make it exact, with their proofs); everything here must equal merging from bytes.

COMMON_CJK = "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过家十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公从"
SCRIPT_TEXTS = [
    "中华人民共和国成立于一九四九年。我们今天去公园散步，天气非常好！",
    " 中国人民银行 鉴定令牌失效 删除默认设置，进入获取关号。",
    "機械学習と自然言語処理は、とても面白いです。こんにちは世界！カタカナ",
    "안녕하세요 세계, 한국어 문장입니다. 대한민국 서울특별시",
    "नमस्ते दुनिया, आप कैसे हैं? यह हिंदी वाक्य है। स्वागत",
    "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "“引号”（括号）【方括号】《书名号》——破折号……省略号、顿号；分号：冒号",
    "混合text中文123数字 and English 和 emoji 😀👍🏽 在一起",
    "的" * 50 + "中国" * 40 + " 的的的 中中 国国国国",
]


@pytest.mark.parametrize("name", VOCABS)
def test_by_chars_matches_tiktoken_on_scripts(pair, name):
    core, tk = pair(name)
    for text in SCRIPT_TEXTS:
        want = tk.encode_ordinary(text)
        assert core.encode_ordinary(text) == want, text
        old = core.set_tuning(by_chars=False)
        try:
            assert core.encode_ordinary(text) == want, text
        finally:
            core.set_tuning(**old)


_cjk_char = st.one_of(
    st.sampled_from(COMMON_CJK),
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),   # rare ones too
    st.characters(min_codepoint=0x3041, max_codepoint=0x30FF),   # kana
    st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3),   # hangul
    st.characters(min_codepoint=0x0900, max_codepoint=0x097F),   # devanagari
    st.characters(min_codepoint=0x0E00, max_codepoint=0x0E7F),   # thai
    st.sampled_from("，。！？、；：“”（）《》 　 ,.!?\n'"),
    st.sampled_from("aZ9éığüşжщ😀"),
    st.characters(min_codepoint=0x80, max_codepoint=0x7FF),      # any 2-byte character
    st.characters(min_codepoint=0x800, max_codepoint=0xFFFF,     # any 3-byte one
                  blacklist_categories=("Cs",)),
)
_cjk_text = st.lists(_cjk_char, min_size=1, max_size=80).map("".join)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@given(text=_cjk_text)
@settings(max_examples=400, deadline=None)
def test_by_chars_matches_tiktoken_on_generated_text(pair, name, text):
    core, tk = pair(name)
    assert core.encode_ordinary(text) == tk.encode_ordinary(text)


@pytest.mark.parametrize("name", VOCABS)
def test_by_chars_with_the_chunk_cache(pair, name):
    """Each thread of a call has a chunk cache, which the joins of merging by characters
    share (with their own tag): many random CJK-like texts in one string."""
    core, tk = pair(name)
    rng = random.Random(5)
    pool = (list(COMMON_CJK) * 3 + list("，。！？、 　\n'aé")
            + [chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(300)]
            + [chr(rng.randint(0xAC00, 0xD7A3)) for _ in range(100)]
            + [chr(rng.randint(0x3041, 0x30FF)) for _ in range(100)])
    text = "".join(rng.choice(pool) for _ in range(60_000))
    assert core.encode_ordinary(text) == tk.encode_ordinary(text)
    docs = [text[i : i + 9000] for i in range(0, len(text), 9000)]
    assert core.encode_ordinary_batch(docs, 2) == [tk.encode_ordinary(d) for d in docs]


@pytest.mark.parametrize("name", VOCABS)
@given(text=_cjk_text)
@settings(max_examples=300, deadline=None)
def test_by_chars_chunk_equals_merging_from_bytes(pair, name, text):
    """The path itself, on whole strings (not pre-tokenized): either it gives up, or it
    gives exactly what merging from single bytes gives."""
    core, tk = pair(name)
    piece = text.encode()
    got = core._encode_chunk_by_chars(piece)
    if got is not None:
        assert got == merge_bytes(piece, tk._mergeable_ranks)


@pytest.mark.parametrize("name", ["gpt2", "o200k_base"])
def test_by_chars_is_taken_for_cjk(pair, name):
    """Guard against the path silently never running (it is an optimisation, so only
    this test would notice). In o200k most CJK characters are one token (rule 2); in
    GPT-2 most are several (walls, rule 3)."""
    core, tk = pair(name)
    taken = 0
    for text in SCRIPT_TEXTS[:3]:
        for chunk in regex.findall(tk._pat_str, text):
            got = core._encode_chunk_by_chars(chunk.encode())
            if got is not None:
                taken += 1
                assert got == merge_bytes(chunk.encode(), tk._mergeable_ranks)
    assert taken >= 5


# Rule 4: a CJK chunk is cut where no token spans the boundary, and the pieces (short
# words that recur) are encoded alone. Everything above covers its output; these check
# its two facts directly and guard against it silently never cutting.


def _adjacent_chars(tok: bytes):
    """Pairs of adjacent whole characters of 1 to 3 bytes inside a token, decoded as in
    the text: a byte that starts no such character breaks the run."""
    pos, prev = 0, None
    while pos < len(tok):
        b = tok[pos]
        q = 1 if b < 0x80 else 2 if 0xC2 <= b < 0xE0 else 3 if 0xE0 <= b < 0xF0 else 0
        try:
            ch = tok[pos : pos + q].decode("utf-8") if q else None
        except UnicodeDecodeError:
            ch = None
        if ch is None or len(tok[pos : pos + q]) < q:
            prev, pos = None, pos + 1
            continue
        if prev is not None:
            yield prev, ch
        prev, pos = ch, pos + q


@pytest.mark.parametrize("name", VOCABS)
def test_split_filter_has_every_character_pair_inside_a_token(pair, name):
    """No false negatives: a pair it calls impossible must occur in no token."""
    core, tk = pair(name)
    missing = [(tok, a, b) for tok in tk._mergeable_ranks for a, b in _adjacent_chars(tok)
               if not core._bigram_may_join(a, b)]
    assert missing == []


_MAX_TOKEN_LEN: dict = {}


def _check_cuts(core, tk, name, piece):
    cuts = core._split_points(piece)
    if not cuts:
        return 0
    ranks = tk._mergeable_ranks
    longest = _MAX_TOKEN_LEN.setdefault(name, max(map(len, ranks)))
    for c in cuts:
        for a in range(max(0, c - longest + 1), c):
            for b in range(c + 1, min(len(piece), a + longest) + 1):
                assert piece[a:b] not in ranks, (piece, c, piece[a:b])
    bounds = [0, *cuts, len(piece)]
    pieces = [merge_bytes(piece[x:y], ranks) for x, y in zip(bounds, bounds[1:])]
    assert merge_bytes(piece, ranks) == [t for ids in pieces for t in ids]
    return len(cuts)


@pytest.mark.parametrize("name", VOCABS)
@given(text=_cjk_text)
@settings(max_examples=150, deadline=None)
def test_split_points_are_spanned_by_no_token(pair, name, text):
    core, tk = pair(name)
    _check_cuts(core, tk, name, text.encode())


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_split_rule_cuts_chinese(pair, name):
    core, tk = pair(name)
    cuts = sum(_check_cuts(core, tk, name, text.encode()) for text in SCRIPT_TEXTS[:3])
    assert cuts >= 10


@pytest.mark.parametrize("name", VOCABS)
@pytest.mark.parametrize("ch", ["x", " ", "\n", "中", "ab"])
def test_long_runs_match_tiktoken(pair, name, ch):
    core, tk = pair(name)
    text = ch * 1_000_000
    got = core.encode_ordinary(text)
    assert core.decode_bytes(got) == text.encode()
    try:
        want = tk.encode_ordinary(text)
    except BaseException:  # tiktoken's regex overflows its stack on o200k's 1M spaces
        want = None
    if want is not None:
        assert got == want
    small = ch * 20_000
    assert core.encode_ordinary(small) == tk.encode_ordinary(small)


# ---- batch, numpy ------------------------------------------------------------------


def test_list_batch_leaves_no_young_collection_due(pair):
    # Python 3.12 runs a due collection after the call, where it would walk every item
    # of every returned list; the batch collects before handing the lists over (on
    # 3.11, collections run inside the call and none is left due either way).
    import gc

    core, tk = pair("gpt2")
    docs = [f"def f{i}(x):\n    return x + {i}\n" * 20 for i in range(3000)]
    gc.collect()
    out = core.encode_ordinary_batch(docs, 2)
    if gc.isenabled():
        assert gc.get_count()[0] <= gc.get_threshold()[0]
    assert all(gc.is_tracked(ids) for ids in out)
    assert out[:5] == [tk.encode_ordinary(d) for d in docs[:5]]


@pytest.mark.parametrize("name", VOCABS)
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_batch_equals_single(pair, name, threads):
    core, tk = pair(name)
    texts = TEXTS * 3 + ["word " * 5000, "中文" * 3000]
    want = [core.encode_ordinary(t) for t in texts]
    assert core.encode_ordinary_batch(texts, threads) == want
    want_sp = [core.encode(t, tk.special_tokens_set) for t in texts]
    assert core.encode_batch(texts, tk.special_tokens_set, threads) == want_sp
    flat, offsets = core.encode_batch_to_numpy(texts, tk.special_tokens_set, threads)
    assert flat.dtype == np.uint32 and offsets.dtype == np.int64
    assert len(offsets) == len(texts) + 1 and offsets[0] == 0 and offsets[-1] == len(flat)
    for i, ids in enumerate(want_sp):
        assert flat[offsets[i] : offsets[i + 1]].tolist() == ids
    assert core.encode_ordinary_batch([], threads) == []


@pytest.mark.parametrize("count", [3, 40])   # few jobs: workers only; many: caller too
def test_batch_lists_in_both_thread_layouts(pair, count):
    """A list batch on 2 threads has two layouts (few texts: 2 workers while the caller
    builds lists; at least 8 per thread: the caller encodes too). Both give each text's
    own ids, in order, with lone surrogates fixed as tiktoken does, and both report a
    text that cannot be encoded."""
    core, tk = pair("cl100k_base")
    texts = [TEXTS[i % len(TEXTS)] for i in range(count)]
    texts[count // 2] = "lone \ud800 surrogate " + texts[count // 2]
    want = [tk.encode_ordinary(t) for t in texts]
    for threads in (2, 3):
        assert core.encode_ordinary_batch(texts, threads) == want
    few_bytes = CoreBPE({b"a": 0, b"b": 1, b"ab": 2, b" ": 3}, {}, r"\S+|\s")
    bad = ["ab a"] * count
    bad[count - 1] = "ab c"
    with pytest.raises(ValueError, match="not a token"):
        few_bytes.encode_ordinary_batch(bad, 2)


@pytest.mark.parametrize("threads", [2, 3, 5, 70])
def test_batch_blocks_cover_every_text_once(pair, threads):
    """Many texts are dealt to the threads in contiguous blocks (uneven when the count
    does not divide; past 64 threads, threads share blocks), and a thread whose block
    runs out takes from the others: every text is encoded exactly once, lists and numpy
    come back in input order, and a text that cannot be encoded is reported whichever
    block it is in."""
    core, tk = pair("gpt2")
    for count in (8 * threads, 8 * threads + 1, 8 * threads + threads - 1, 101):
        texts = [f"{i}: " + TEXTS[i % len(TEXTS)][: 50 + 13 * (i % 7)] for i in range(count)]
        want = [tk.encode_ordinary(t) for t in texts]
        assert core.encode_ordinary_batch(texts, threads) == want
        flat, offsets = core.encode_batch_to_numpy(texts, frozenset(), threads)
        assert [flat[offsets[i] : offsets[i + 1]].tolist() for i in range(count)] == want
    few_bytes = CoreBPE({b"a": 0, b"b": 1, b"ab": 2, b" ": 3}, {}, r"\S+|\s")
    count = 8 * threads + 1
    for bad_at in (0, count // 2, count - 1):
        bad = ["ab a"] * count
        bad[bad_at] = "ab c"
        with pytest.raises(ValueError, match="not a token"):
            few_bytes.encode_ordinary_batch(bad, threads)
        with pytest.raises(ValueError, match="not a token"):
            few_bytes.encode_batch_to_numpy(bad, frozenset(), threads)


# ---- long texts of a batch cut into pieces -------------------------------------------


@contextlib.contextmanager
def tiny_pieces():
    """Cut batch texts at every place the cut rule allows (pieces of >= 1 code point)."""
    with tuned(piece_min=1, pieces_per_thread=1 << 20):
        yield


@pytest.fixture
def tiny_pieces_fixture():
    with tiny_pieces():
        yield


_CUT_ALPHABET = st.sampled_from(
    list("aZ9 \t\n\r'/._-!?<>|") + ["\n"] * 6 + list("ığİ中文١")
    + ["\u0301", "\u00a0", "\u3000", "\u2028", "\u0085", "\x1c", "\x0b", "\ufeff", "👍", "\u200d"]
)
_CUT_TEXT = st.one_of(
    st.text(_CUT_ALPHABET, max_size=60),
    st.lists(st.sampled_from(["x\ny", ".\n/", "a\n\nb", " \nc", "'s\n's", "1\n2", "\r\n",
                              "中\n文", "<|endoftext|>", "\n<|endoftext|>", "e\u0301\n",
                              "/\n", "!\n!", "\u3000\n\u3000", " ", "word"]),
             max_size=20).map("".join),
)


@pytest.mark.parametrize("name", VOCABS)
@settings(max_examples=1500, deadline=None)
@given(text=_CUT_TEXT)
def test_cut_points_split_as_the_pattern_does(name, text):
    """Splitting each piece between two cut points with the regex module gives exactly
    the chunks of the whole text: the rule next_cut proves holds for all three patterns,
    at every cut at once."""
    pat = regex.compile(patterns.PATTERNS[name])
    bounds = [0] + _cut_points(text) + [len(text)]
    pieces = [c for a, b in zip(bounds, bounds[1:]) for c in pat.findall(text[a:b])]
    assert pieces == pat.findall(text)


def test_cut_points_examples():
    # after "\n" that follows a non-space, before a non-space that is not "/"
    assert _cut_points("ab\ncd\n\nef.\n/x\n x\nq") == [3, 17]
    assert _cut_points("中\n文\n\u3000a\n😀") == [2, 7]
    assert _cut_points("\nx") == [] and _cut_points("x\n") == []


@pytest.mark.parametrize("name", VOCABS)
@settings(max_examples=300, deadline=None)
@given(texts=st.lists(_CUT_TEXT, min_size=1, max_size=4))
def test_cut_texts_match_tiktoken(pair, name, texts):
    core, tk = pair(name)
    texts = [t.encode("utf-16", "surrogatepass").decode("utf-16", "replace") for t in texts]
    want = [tk.encode_ordinary(t) for t in texts]
    want_sp = [tk.encode(t, allowed_special="all") for t in texts]
    with tiny_pieces():
        assert core.encode_ordinary_batch(texts, 2) == want
        assert core.encode_batch(texts, tk.special_tokens_set, 3) == want_sp
        flat, offsets = core.encode_batch_to_numpy(texts, tk.special_tokens_set, 2)
    assert [flat[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))] == want_sp


@pytest.mark.parametrize("name", VOCABS)
def test_long_texts_cut_with_default_sizes(pair, name):
    """A few long texts, with the default piece sizes: each is cut (about 16 pieces per
    thread over the call) and still gets tiktoken's ids, as lists and as numpy, with
    pieces finishing out of order on 2 and 3 threads."""
    core, tk = pair(name)
    line = "\n".join(t for t in TEXTS if t.strip())
    texts = [line * 40, "中文\n字" * 30_000, "short", line * 25 + "\ud800 tail"]
    assert len(_cut_points(texts[0])) > 100
    want = [tk.encode_ordinary(t) for t in texts]
    for threads in (2, 3):
        got = core.encode_ordinary_batch(texts, threads)
        assert got == want
        # lists of cut texts are sized ahead from the share encoded, then trimmed
        assert all(sys.getsizeof(ids) <= sys.getsizeof([0] * len(ids)) * 9 // 8 + 64
                   for ids in got)
        flat, offsets = core.encode_batch_to_numpy(texts, frozenset(), threads)
        assert [flat[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))] == want


@pytest.mark.usefixtures("tiny_pieces_fixture")
def test_cut_texts_with_errors_report_the_whole_text(pair):
    """A piece that fails sends its whole text down the single-job path: a lone
    surrogate is fixed up as tiktoken does, and a byte that is no token is reported at
    its offset in the text, not in the piece."""
    core, tk = pair("gpt2")
    texts = ["a\nb\n" * 50 + "x\ud800y\nz", "ok\nfine"]
    assert core.encode_ordinary_batch(texts, 2) == [tk.encode_ordinary(t) for t in texts]
    ranks = {bytes([b]): b for b in range(256) if b != ord("q")}
    no_q = CoreBPE(ranks, {}, tk._pat_str)
    text = "ab\ncd\n" * 100 + "q"
    assert len(_cut_points(text)) > 100
    for threads in (2, 3):
        with pytest.raises(ValueError, match="byte 0x71 at UTF-8 offset 600 "):
            no_q.encode_ordinary_batch([text, "ab\ncd"], threads)
        with pytest.raises(ValueError, match="byte 0x71 at UTF-8 offset 600 "):
            no_q.encode_batch_to_numpy(["ab\ncd", text], frozenset(), threads)


@pytest.mark.usefixtures("tiny_pieces_fixture")
def test_no_cuts_when_a_special_token_holds_a_newline(pair):
    """A special token such as "a\\nb" can span a cut point, so with one allowed no
    text is cut; with it not allowed, texts are cut again."""
    _, tk = pair("gpt2")
    core = CoreBPE(tk._mergeable_ranks, {"x\ny": 60_000, "<|endoftext|>": 50256}, tk._pat_str)
    texts = ["ax\nyb\n" * 30, "x\ny" * 40]
    got = core.encode_batch(texts, {"x\ny"}, 2)
    for text, ids in zip(texts, got):
        want = []
        for i, part in enumerate(text.split("x\ny")):
            if i:
                want.append(60_000)
            want += tk.encode_ordinary(part)
        assert ids == want
    assert core.encode_batch(texts, {"<|endoftext|>"}, 2) == [tk.encode_ordinary(t) for t in texts]


def test_output_slabs_are_reused_and_bounded(pair):
    """Ids are written to slabs of a process-wide pool, given back when the call ends:
    the pool keeps at most 32 MiB between calls, outputs larger than a slab (one text
    of several MiB of ids) still come out whole, and nothing leaks from one call's
    output into the next."""
    core, tk = pair("gpt2")
    big = "ab, cd " * 700_000                      # about 2.1M ids: 8 MiB, several slabs
    want_big = tk.encode_ordinary(big)
    for threads in (1, 2):
        assert core.encode_ordinary_batch([big, "x"], threads) == [want_big, [87]]
        assert 0 < _output_pool_bytes() <= 32 << 20
    texts = [TEXTS[i % len(TEXTS)] for i in range(300)]
    want = [tk.encode_ordinary(t) for t in texts]
    for threads in (1, 2, 3):
        assert core.encode_ordinary_batch(texts, threads) == want
        flat, offsets = core.encode_batch_to_numpy(texts, frozenset(), threads)
        assert [flat[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))] == want
    assert core.encode_ordinary(big) == want_big
    assert _output_pool_bytes() <= 32 << 20


def test_numpy_dtypes(pair):
    core, _ = pair("gpt2")
    text = "hello world <|endoftext|>"
    ids = core.encode(text, {"<|endoftext|>"})
    a = core.encode_to_numpy(text, {"<|endoftext|>"})
    assert a.dtype == np.uint32 and a.tolist() == ids
    b = core.encode_to_numpy(text, {"<|endoftext|>"}, np.uint16)
    assert b.dtype == np.uint16 and b.tolist() == ids
    big, _ = pair("cl100k_base")
    with pytest.raises(ValueError, match="uint16"):
        big.encode_to_numpy("hi", frozenset(), np.uint16)
    with pytest.raises(ValueError, match="dtype"):
        core.encode_to_numpy("hi", frozenset(), np.float32)
    flat, off = core.encode_batch_to_numpy(["a b", "", "c"], frozenset(), 2, np.uint16)
    assert flat.dtype == np.uint16 and off.tolist()[0] == 0 and off[2] == off[1]


@contextlib.contextmanager
def thread_policy(min_points, to_cpus):
    with tuned(points_per_thread=min_points, cap_to_cpus=to_cpus):
        yield


def _usable_cpus():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def test_batch_threads_follow_text_size_and_cpus():
    """num_threads is an upper bound: about one thread per 16,384 code points of text,
    and no more than the CPUs this process may run on."""
    cpus = _usable_cpus()
    with thread_policy(1 << 14, True):
        assert _batch_threads(8, 0) == 1
        assert _batch_threads(8, 16383) == 1         # one small batch: no thread started
        assert _batch_threads(8, 2 * 16384) == min(2, cpus)
        assert _batch_threads(1, 10**9) == 1
        assert _batch_threads(1024, 10**12) == min(1024, cpus)
    with thread_policy(1 << 14, False):
        assert _batch_threads(8, 3 * 16384 + 5) == 3
        assert _batch_threads(8, 10**9) == 8
    with thread_policy(0, True):
        assert _batch_threads(1024, 5) == min(1024, cpus)
    with thread_policy(0, False):                     # as the tests run: as asked
        assert _batch_threads(7, 0) == 7
    with pytest.raises(ValueError, match="points_per_thread must be at least 0"):
        default_tuning(points_per_thread=-1)
    with pytest.raises(TypeError, match="unknown tuning field"):
        default_tuning(min_points=1)
    with pytest.raises(TypeError, match="cap_to_cpus must be a bool"):
        default_tuning(cap_to_cpus=1)


def test_batch_ids_do_not_depend_on_the_thread_rule():
    texts = ["hello world, hi there " * k for k in range(40)] + ["x" * 70000, "", "hi"]
    want = [get_toy_encoding().encode_ordinary(t) for t in texts]
    for policy in [(1 << 14, True), (0, False), (1, False)]:
        with thread_policy(*policy):
            enc = get_toy_encoding()      # copies the default tuning
            for threads in (1, 2, 3, 8):
                assert enc.encode_ordinary_batch(texts, num_threads=threads) == want
                flat, offsets = enc.encode_batch_to_numpy(texts, num_threads=threads)
                assert [flat[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])] == want


def test_num_threads_validation(pair):
    core, _ = pair("gpt2")
    for bad in [0, -1, 1025]:
        with pytest.raises(ValueError, match="num_threads"):
            core.encode_ordinary_batch(["a"], bad)
    for bad in [1.5, "2", None, True]:
        with pytest.raises(TypeError, match="num_threads"):
            core.encode_ordinary_batch(["a"], bad)
    with pytest.raises(TypeError):
        core.encode_ordinary_batch("abc", 1)
    with pytest.raises(TypeError):
        core.encode_ordinary_batch(["a", b"b"], 1)


def test_bad_text_types(pair):
    core, _ = pair("gpt2")
    for bad in [None, b"bytes", 3]:
        with pytest.raises(TypeError):
            core.encode_ordinary(bad)
        with pytest.raises(TypeError):
            core.encode(bad, set())


# ---- decode, single tokens ---------------------------------------------------------


@pytest.mark.parametrize("name", VOCABS)
def test_decode_round_trip(pair, name):
    core, tk = pair(name)
    for text in TEXTS:
        ids = core.encode(text, tk.special_tokens_set)
        want = tk.decode_bytes(ids)
        assert core.decode_bytes(ids) == want
        assert core.decode_bytes(tuple(ids)) == want
        assert core.decode_bytes(np.array(ids, dtype=np.uint32)) == want
        assert core.decode_bytes(np.array(ids, dtype=np.int64)) == want
    batch = [core.encode_ordinary(t) for t in TEXTS]
    assert core.decode_batch_bytes(batch, 2) == [t.encode() for t in TEXTS]


def test_decode_errors(pair):
    core, tk = pair("cl100k_base")
    for bad in [100261, 10**9, -1, 2**40, 2**70]:
        with pytest.raises(KeyError, match=str(bad)):
            core.decode_bytes([1, bad, 2])
    with pytest.raises(KeyError, match="100261"):
        core.decode_bytes(np.array([100261], dtype=np.int64))
    for bad in ["abc", None, 5, [1.5], [True], np.array([1.0])]:
        with pytest.raises(TypeError):
            core.decode_bytes(bad)
    with pytest.raises(KeyError, match="100261"):
        core.decode_single_token_bytes(100261)
    assert core.decode_single_token_bytes(100257) == b"<|endoftext|>"
    assert core.decode_single_token_bytes(15339) == tk.decode_single_token_bytes(15339)
    assert core.decode_bytes([]) == b""


def test_single_token_and_byte_values(pair):
    core, tk = pair("cl100k_base")
    assert core.encode_single_token(b"hello") == tk.encode_single_token(b"hello")
    assert core.encode_single_token("<|endoftext|>") == 100257
    assert core.encode_single_token(b"<|endoftext|>") == 100257
    with pytest.raises(KeyError, match="not a token"):
        core.encode_single_token(b"not a token at all")
    assert core.token_byte_values() == tk.token_byte_values()


def test_constructor_validation():
    base = {bytes([b]): b for b in range(256)}
    with pytest.raises(TypeError):
        CoreBPE([(b"a", 0)], {}, r"\w+")
    with pytest.raises(TypeError):
        CoreBPE({"a": 0}, {}, r"\w+")
    with pytest.raises(ValueError, match="duplicate rank 5"):
        CoreBPE(base | {b"ab": 5}, {}, r"\w+")
    with pytest.raises(ValueError, match="pattern"):
        CoreBPE(base, {}, r"(")
    with pytest.raises(ValueError):
        CoreBPE(base | {b"ab": -3}, {}, r"\w+")


def test_custom_pattern_and_missing_bytes():
    ranks = {b"a": 0, b"b": 1, b"ab": 2, b" ": 3}
    core = CoreBPE(ranks, {"<s>": 10}, r"\S+|\s")
    assert core.encode_ordinary("ab a b") == [2, 3, 0, 3, 1]
    assert core.encode("ab<s>b", {"<s>"}) == [2, 10, 1]
    with pytest.raises(ValueError, match="not a token"):
        core.encode_ordinary("abc")
    # sparse ids use the bisection decoder
    sparse = CoreBPE({b"a": 0, b"b": 7_000_000}, {"<s>": 3_000_000_000}, r".")
    assert sparse.encode("ab<s>", {"<s>"}) == [0, 7_000_000, 3_000_000_000]
    assert sparse.decode_bytes([7_000_000, 3_000_000_000, 0]) == b"b<s>a"
    with pytest.raises(KeyError):
        sparse.decode_bytes([5])


def test_shared_id_ints_survive_many_lists_and_encoders():
    """Result lists share one process-wide table of immortal int objects: dropping
    many lists never frees them, new encoders reuse them, and sparse vocabularies get ordinary
    ints."""
    base = {bytes([b]): b for b in range(256)}
    ranks = base | {b"ab": 300, b"abc": 1000}
    first = CoreBPE(ranks, {"<s>": 2000}, r"\S+|\s")
    second = CoreBPE(dict(ranks), {}, r"\S+|\s")
    a = first.encode("abc abc<s>", {"<s>"})
    b = second.encode_ordinary("abc")
    assert a == [1000, 32, 1000, 2000] and b == [1000]
    assert a[0] is b[0]                      # one shared object per id
    before = sys.getrefcount(a[0])
    for _ in range(2000):
        lists = first.encode_ordinary_batch(["abc " * 50] * 4, num_threads=2)
        del lists
    gc.collect()
    assert sys.getrefcount(a[0]) >= min(before, 1 << 20)
    assert first.encode_ordinary("abc") == [1000]
    # ids too sparse for the table: ordinary ints, still correct
    sparse = CoreBPE(base | {b"ab": 700_000}, {}, r"\S+|\s")
    assert sparse.encode_ordinary("ab ab") == [700_000, 32, 700_000]


def test_shared_id_ints_are_ordinary_ints(pair):
    """The shared ints are byte copies of CPython's own, side by side in one block (the
    int of id v at a fixed stride from the first): they behave as any int does,
    including id 0, which CPython stores without digits."""
    import json

    core, tk = pair("gpt2")
    ids = core.encode_ordinary("!" + "hello world, this is a test" * 3)
    assert ids[0] == 0 and ids == tk.encode_ordinary("!" + "hello world, this is a test" * 3)
    for x in ids:
        fresh = int(str(x))
        assert type(x) is int and x == fresh and hash(x) == hash(fresh) and str(x) == str(fresh)
        assert x + 1 - 1 == fresh and x.bit_length() == fresh.bit_length() and -x == -fresh
        assert {fresh: "v"}[x] == "v" and sys.getsizeof(x) == sys.getsizeof(fresh)
        assert id(x) == _shared_int_address(x)
    assert _shared_int_address(1) - _shared_int_address(0) == _shared_int_address(2) - _shared_int_address(1)
    assert pickle.loads(pickle.dumps(ids)) == ids
    assert json.loads(json.dumps(ids)) == ids
    assert np.array(ids).tolist() == ids and sum(ids) == sum(int(str(x)) for x in ids)


def test_shared_id_ints_are_topped_up_before_they_drift_to_zero():
    """Before Python 3.12 every list freed decrements its shared ints once per token with
    no increment to match; a top-up every so many handed-out references puts the count
    back, so that no amount of encoding can bring it to zero. (On 3.12+ the count of an
    immortal object never moves, and this holds trivially.)"""
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 300}
    core = CoreBPE(ranks, {}, r"\S+|\s")
    token = core.encode_ordinary("ab")[0]
    start = sys.getrefcount(token)
    old = _set_id_int_top_up(1000)
    try:
        for _ in range(200):   # 100k references to `token`, each list freed at once
            core.encode_ordinary("ab " * 500)
        drift = start - sys.getrefcount(token)
        assert drift < 2000, drift   # without the top-up: 100000
        for _ in range(20):
            lists = core.encode_ordinary_batch(["ab " * 500] * 8, num_threads=2)
            del lists
        assert start - sys.getrefcount(token) < 10_000
    finally:
        _set_id_int_top_up(old)
    assert sys.getrefcount(token) <= _IMMORTAL_REFCNT + 10
    with pytest.raises(ValueError, match="at least 1"):
        _set_id_int_top_up(0)


# ---- pickling and processes --------------------------------------------------------


def test_pickle_round_trip(pair):
    core, tk = pair("o200k_base")
    blob = pickle.dumps(core)
    assert len(blob) < 8_000_000
    again = pickle.loads(blob)
    for text in TEXTS:
        assert again.encode(text, tk.special_tokens_set) == core.encode(text, tk.special_tokens_set)
    assert again.special_tokens == core.special_tokens and again.pat_str == core.pat_str


@pytest.mark.parametrize("method", ["spawn", "fork", "fork-after-batch"])
def test_multiprocessing_pool(pair, method):
    core, _ = pair("gpt2")
    texts = TEXTS[:8]
    want = [core.encode_ordinary(t) for t in texts]
    if method == "fork-after-batch":
        assert core.encode_ordinary_batch(texts * 5, 2) == want * 5
        method = "fork"
    ctx = mp.get_context(method)
    with ctx.Pool(2) as pool:
        assert pool.map(core.encode_ordinary, texts) == want
        # threads inside a forked child work too
        batches = pool.starmap(core.encode_ordinary_batch, [(texts, 2), (texts, 3)])
        assert batches == [want, want]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_chunk_cache_with_many_repeats_and_collisions(pair, name):
    """Long texts use a per-thread cache of merged chunks: many distinct rare words (so
    entries get evicted and replaced) and many repeats must still match tiktoken."""
    core, tk = pair(name)
    rng = random.Random(99)
    letters = "abcdefghijklmnopqrstuvwxyzığüşöçé中文字"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 14))) for _ in range(6000)]
    text = " ".join(rng.choice(words) for _ in range(40000))
    assert core.encode_ordinary(text) == tk.encode_ordinary(text)
    docs = [text[i : i + 5000] for i in range(0, len(text), 5000)]
    assert core.encode_ordinary_batch(docs, 2) == [tk.encode_ordinary(d) for d in docs]


def test_cache_key_compare_sees_every_byte():
    """The chunk cache compares keys by (overlapping) words: a difference in any one
    byte, at any length from 1 to 24, must make two keys unequal."""
    for n in range(1, 25):
        key = bytes(range(65, 65 + n))
        assert _equal_short(key, bytes(key))
        for i in range(n):
            other = bytearray(key)
            other[i] ^= 0x80
            assert not _equal_short(key, bytes(other)), (n, i)


@given(st.integers(1, 24).flatmap(lambda n: st.tuples(st.binary(min_size=n, max_size=n),
                                                      st.binary(min_size=n, max_size=n))))
@settings(max_examples=300, deadline=None)
def test_cache_key_compare_matches_bytes_equality(keys):
    a, b = keys
    assert _equal_short(a, b) == (a == b)
    assert _equal_short(a, a)


# The str -> UTF-8 conversion that workers run: vector blocks of 8 or 16 code points
# (SSSE3, where the CPU has it) and the plain loop must both equal str.encode. Block
# edges matter most, so the text mixes characters of every UTF-8 length at all offsets.
def _utf8_with(simd, text):
    return _utf8_of(text, simd)


_UTF8_CHARS = st.sampled_from(
    ["a", " ", "\x7f", "\x80", "é", "\xff", "ı", "ş", "\u07ff", "\u0800", "中", "\ud7ff",
     "\ue000", "\uffff", "😀", "\U00010000", "\U0010ffff"]
)


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "plain"])
@given(text=st.one_of(st.text(max_size=80), st.lists(_UTF8_CHARS, max_size=80).map("".join),
                      st.text(st.characters(max_codepoint=0xFF), max_size=80)))
@settings(max_examples=1500, deadline=None)
def test_utf8_conversion_matches_str_encode(simd, text):
    text = text.encode("utf-8", "replace").decode("utf-8")   # no lone surrogates here
    assert _utf8_with(simd, text) == text.encode("utf-8")


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "plain"])
def test_utf8_conversion_every_code_point_at_every_block_offset(simd):
    bmp = "".join(chr(c) for c in range(0x10000) if not 0xD800 <= c < 0xE000)
    astral = "".join(chr(c) for c in range(0x10000, 0x110000, 61))
    for offset in range(17):
        for text in ("x" * offset + bmp, bmp[offset:], "é" * offset + bmp[:4000],
                     "ş" * offset + astral, astral[offset:] + "ab" * 20):
            assert _utf8_with(simd, text) == text.encode("utf-8"), offset


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "plain"])
@given(text=st.lists(_UTF8_CHARS, max_size=40).map("".join), where=st.integers(0, 40),
       surrogate=st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff"]))
@settings(max_examples=500, deadline=None)
def test_utf8_conversion_refuses_lone_surrogates(simd, text, where, surrogate):
    where = min(where, len(text))
    with pytest.raises(ValueError):
        _utf8_with(simd, text[:where] + surrogate + text[where:])


def test_uninitialised_core_raises_instead_of_crashing():
    core = CoreBPE.__new__(CoreBPE)
    with pytest.raises(RuntimeError):
        core.encode_ordinary("abc")
    with pytest.raises(RuntimeError):
        core.decode_bytes([1])


@pytest.mark.parametrize("name", VOCABS)
def test_chunk_caches_kept_between_calls(pair, name):
    """An encoder keeps its chunk caches warm between calls: short texts encoded one
    call each (as a data loader does) reuse what earlier calls merged, and get
    tiktoken's ids whether the cache is warm, cleared or shared by other threads."""
    core, tk = pair(name)
    rng = random.Random(11)
    words = [w for t in TEXTS for w in t.split()] + list(COMMON_CJK) + ["中文字", "ığüş"]
    docs = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 40))) for _ in range(300)]
    want = [tk.encode_ordinary(d) for d in docs]
    core._clear_chunk_caches()
    assert core._chunk_caches_kept() == 0
    assert [core.encode_ordinary(d) for d in docs] == want          # cold, then warm
    assert core._chunk_caches_kept() >= 1
    assert [core.encode_ordinary(d) for d in docs] == want          # all warm
    assert core.encode_ordinary_batch(docs, 3) == want
    core._clear_chunk_caches()
    assert core._chunk_caches_kept() == 0
    assert [core.encode_ordinary(d) for d in docs[::-1]] == want[::-1]


@pytest.mark.parametrize("name", VOCABS)
def test_kept_chunk_caches_bounds_what_is_kept(pair, name):
    """Tuning.kept_chunk_caches caps the caches kept between calls (the memory an idle
    encoder holds); 0 keeps none, and lowering it frees the extra ones. The ids never
    change."""
    core, tk = pair(name)
    docs = [" ".join(TEXTS)[i:i + 3000] for i in range(0, 30000, 1500)] * 4
    want = [tk.encode_ordinary(d) for d in docs]
    old = core.set_tuning(kept_chunk_caches=16)
    try:
        core._clear_chunk_caches()
        assert core.encode_ordinary_batch(docs, 4) == want
        assert core._chunk_caches_kept() >= 1
        core.set_tuning(kept_chunk_caches=1)
        assert core._chunk_caches_kept() <= 1                  # the others freed at once
        assert core.encode_ordinary_batch(docs, 4) == want
        assert core._chunk_caches_kept() == 1
        assert [core.encode_ordinary(d) for d in docs[:5]] == want[:5]
        assert core._chunk_caches_kept() == 1
        core.set_tuning(kept_chunk_caches=0)
        assert [core.encode_ordinary(d) for d in docs[:5]] == want[:5]
        assert core.encode_ordinary_batch(docs, 4) == want
        assert core._chunk_caches_kept() == 0
    finally:
        core.set_tuning(**old)


def test_chunk_caches_belong_to_their_encoder(pair):
    """Two encoders never see each other's cached chunks (the same bytes have other
    tokens in another vocabulary), also with many threads taking and giving back
    caches at once."""
    gpt2, tk_gpt2 = pair("gpt2")
    o200k, tk_o200k = pair("o200k_base")
    text = "The quick brown fox; der schnelle Fuchs; 中文字 ığüş\n" * 40
    for _ in range(3):
        assert gpt2.encode_ordinary(text) == tk_gpt2.encode_ordinary(text)
        assert o200k.encode_ordinary(text) == tk_o200k.encode_ordinary(text)
    assert gpt2.encode_ordinary_batch([text] * 200, 40) == [tk_gpt2.encode_ordinary(text)] * 200
    assert o200k.encode_ordinary_batch([text] * 200, 40) == [tk_o200k.encode_ordinary(text)] * 200


def test_shared_between_python_threads(pair):
    """One immutable core used from several Python threads at once (GIL released)."""
    from concurrent.futures import ThreadPoolExecutor

    core, tk = pair("cl100k_base")
    texts = [t * 50 for t in TEXTS if t] * 2
    want = [tk.encode_ordinary(t) for t in texts]
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(core.encode_ordinary, texts))
        batches = list(ex.map(lambda _: core.encode_ordinary_batch(texts, 2), range(4)))
    assert got == want
    assert all(b == want for b in batches)


@pytest.mark.parametrize("threads", [1, 2])
def test_batch_lists_are_tracked_by_the_cycle_collector(threads):
    """Batch lists are built hidden from the garbage collector (track_lists), but every
    returned list must be tracked again: a cycle made through one is still collected."""
    ranks = {bytes([i]): i for i in range(256)}
    ranks.update({b"ab": 256, b"abc": 257, b" a": 258})
    core = CoreBPE(ranks, {"<|end|>": 300}, patterns.GPT2)
    texts = [f"abc ab a {i} " * 50 for i in range(40)]
    for result in (core.encode_ordinary_batch(texts, threads),
                   core.encode_batch(texts, {"<|end|>"}, threads)):
        assert gc.is_tracked(result)
        assert all(type(ids) is list and gc.is_tracked(ids) for ids in result)
        assert result[3] == core.encode_ordinary(texts[3])

    class Box:
        pass

    ids = core.encode_ordinary_batch(texts, threads)[0]
    box = Box()
    ids.append(box)
    box.ids = ids            # a cycle: the list -> box -> the list
    gone = weakref.ref(box)
    del ids, box
    gc.collect()
    assert gone() is None


# ---- tuning --------------------------------------------------------------------------


def test_tuning_is_per_core_and_new_cores_copy_the_default():
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256}
    core = CoreBPE(ranks, {}, r"\S+|\s")
    assert core.tuning == default_tuning()
    assert set(core.tuning) == {"heap_threshold", "bucket_threshold", "by_chars", "utf8_simd",
                                "points_per_thread", "cap_to_cpus", "piece_min",
                                "pieces_per_thread", "kept_chunk_caches", "block_chunks",
                                "seed_table_kb"}
    old = core.set_tuning(heap_threshold=0, by_chars=False)
    assert old == {"heap_threshold": default_tuning()["heap_threshold"], "by_chars": True}
    assert core.tuning["heap_threshold"] == 0 and default_tuning()["heap_threshold"] != 0
    assert core.encode_ordinary("abab ab") == [256, 256, 32, 256]
    with tuned(piece_min=7):
        assert CoreBPE(ranks, {}, r"\S+|\s").tuning["piece_min"] == 7
        assert pickle.loads(pickle.dumps(core)).tuning == default_tuning()
    assert core.tuning["piece_min"] == default_tuning()["piece_min"] != 7
    for bad, error in [({"heap_threshold": -1}, ValueError), ({"heap_threshold": 1 << 21}, ValueError),
                       ({"heap_threshold": "1"}, TypeError), ({"by_chars": 1}, TypeError),
                       ({"bucket_threshold": -1}, ValueError), ({"bucket_threshold": 1.0}, TypeError),
                       ({"piece_min": 0}, ValueError), ({"nope": 1}, TypeError),
                       ({"kept_chunk_caches": -1}, ValueError), ({"kept_chunk_caches": 17}, ValueError)]:
        before = core.tuning
        with pytest.raises(error):
            core.set_tuning(**bad)
        assert core.tuning == before
