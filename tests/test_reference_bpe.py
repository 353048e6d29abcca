"""The reference BPE: golden cases, written-down decisions, and tiktoken parity."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe.reference import bpe, patterns
from fastbpe.reference.core import CoreBPE

BYTES = {bytes([i]): i for i in range(256)}

# Text that exercises the split patterns: scripts, digits, apostrophes, whitespace.
TRICKY = [
    "'s", "'S", "'ll", "'LL", "'Re", "’s", " ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0",
    "\u3000", "a", "Z", "é", "ß", "İ", "ı", "Ω", "я", "中", "文", "日本", "한", "ع", "ह",
    "ि", "\u0301", "1", "12", "١٢٣", "१२३", "１２３", "²", "Ⅻ", "!", "...", "-", "/", "\\",
    "🙂", "👩\u200d💻", "🇹🇷", "\ufe0f", "\u200d", "<|endoftext|>", "$", "x", "the", " the",
]
text_strategy = st.one_of(
    st.text(max_size=40),
    st.lists(st.sampled_from(TRICKY), max_size=25).map("".join),
    st.lists(st.one_of(st.sampled_from(TRICKY), st.text(max_size=3)), max_size=20).map("".join),
)

GOLDEN = [
    "Hello world! It's a test, isn't it? I'LL go; they'Re here. We’ve",
    "def foo(x):\n    return x ** 2  # comment\n\n\tif x:\r\n        pass\n",
    "Türkçe metin: İstanbul'da çok güzel bir gün. Iğdır, ılık, ŞEKER.",
    "中文文本：你好，世界！这是一个测试。日本語のテキスト、한국어 텍스트",
    "النص العربي: مرحبا بالعالم ١٢٣٤٥",
    "हिन्दी पाठ: नमस्ते दुनिया १२३",
    "Emoji: 🙂👍🏽 👩‍💻 🇹🇷 ❤️ family 👨‍👩‍👧‍👦",
    "digits 1 12 123 1234 12345 ١٢٣٤ १२३४ １２３４ ²³ Ⅻ",
    "spaces      before   words and trailing   ",
    "   \n\n\n    \t\t  x  \n",
    "",
    " ",
    "\n",
    "<|endoftext|> is just text here",
]


def test_course_example_three_merges():
    merges, vocab = bpe.train_on_chunks({b"aaabdaaabac": 1}, 259)
    assert merges == [(97, 97), (97, 98), (256, 257)]
    ranks = {tok: i for i, tok in enumerate(vocab)}
    assert bpe.bpe_encode_chunk(b"aaabdaaabac", ranks) == [258, 100, 258, 97, 99]


def test_pairs_overlap_when_counted_but_not_when_merged():
    assert bpe.get_stats(list(b"aaa")) == {(97, 97): 2}
    assert bpe.merge(list(b"aaaa"), (97, 97), 256) == [256, 256]
    assert bpe.merge(list(b"aaa"), (97, 97), 256) == [256, 97]


def test_tie_break_is_smallest_pair():
    # (98, 99) and (97, 98) both occur once: the smaller pair (97, 98) wins.
    merges, _ = bpe.train_on_chunks({b"abc": 1}, 257)
    assert merges == [(97, 98)]
    merges, _ = bpe.train_on_chunks({b"cd": 3, b"ab": 3, b"xy": 2}, 258)
    assert merges == [(97, 98), (99, 100)]


def test_counts_are_weighted_by_chunk_frequency():
    merges, _ = bpe.train_on_chunks({b"ab": 2, b"cd": 1, b"cdcd": 1}, 257)
    # (c,d) occurs 1 + 2 = 3 times, (a,b) twice.
    assert merges == [(99, 100)]


def test_min_frequency_and_max_token_length_stop_early():
    merges, vocab = bpe.train_on_chunks({b"ab": 3, b"cd": 1}, 300, min_frequency=2)
    assert merges == [(97, 98)] and len(vocab) == 257
    merges, vocab = bpe.train_on_chunks({b"aaaa": 5}, 300, max_token_length=2)
    assert [vocab[256]] == [b"aa"] and len(vocab) == 257


def test_special_tokens_are_cut_out_and_get_last_ids():
    ranks, specials = bpe.train(["ab<|x|>ab<|x|>"], 260, pattern=r"[\s\S]+", special_tokens=["<|x|>"])
    assert specials == {"<|x|>": len(ranks)}
    assert b"<|x|>" not in ranks and b"b<" not in ranks
    with pytest.raises(ValueError, match="at least 256"):
        bpe.train(["a"], 256, special_tokens=["<|x|>"])


@settings(max_examples=300)
@given(st.dictionaries(st.binary(min_size=1, max_size=8), st.integers(1, 5), max_size=12), st.integers(256, 300))
def test_training_makes_unique_contiguous_tokens(chunks, n_tokens):
    merges, vocab = bpe.train_on_chunks(chunks, n_tokens)
    assert len(set(vocab)) == len(vocab) <= n_tokens
    ranks = {tok: i for i, tok in enumerate(vocab)}
    # Every training chunk round-trips.
    for chunk in chunks:
        assert b"".join(vocab[i] for i in bpe.bpe_encode_chunk(chunk, ranks)) == chunk


def test_encode_is_lowest_rank_first_not_training_order():
    ranks = dict(BYTES) | {b"bc": 256, b"ab": 257}
    assert bpe.bpe_encode_chunk(b"abc", ranks) == [97, 256]
    ranks = dict(BYTES) | {b"ab": 256, b"bc": 257}
    assert bpe.bpe_encode_chunk(b"abc", ranks) == [256, 99]
    # equal ranks can't happen in a valid table; leftmost wins among equal candidates
    ranks = dict(BYTES) | {b"aa": 256}
    assert bpe.bpe_encode_chunk(b"aaa", ranks) == [256, 97]


def test_decode_replaces_split_characters():
    vocab = {0: "é".encode()[:1], 1: "é".encode()[1:]}
    assert bpe.decode([0], vocab) == "\ufffd"
    assert bpe.decode([0, 1], vocab) == "é"
    assert bpe.decode_bytes([0], vocab) == b"\xc3"
    with pytest.raises(KeyError, match="unknown token id 7"):
        bpe.decode([7], vocab)


NAMES = ["gpt2", "cl100k_base", "o200k_base"]
PATTERN_OF = {"gpt2": patterns.GPT2, "cl100k_base": patterns.CL100K, "o200k_base": patterns.O200K}


@pytest.fixture(scope="module", params=NAMES)
def ref_and_tiktoken(request, tiktoken_encoding):
    tk = tiktoken_encoding(request.param)
    core = CoreBPE(tk._mergeable_ranks, tk._special_tokens, PATTERN_OF[request.param])
    return core, tk


@pytest.mark.parametrize("text", GOLDEN)
def test_reference_equals_tiktoken_golden(ref_and_tiktoken, text):
    core, tk = ref_and_tiktoken
    assert core.encode_ordinary(text) == tk.encode_ordinary(text)
    assert core.decode_bytes(core.encode_ordinary(text)) == text.encode()
    assert core.encode(text, {"<|endoftext|>"}) == tk.encode(text, allowed_special={"<|endoftext|>"})


def test_reference_equals_tiktoken_hypothesis(ref_and_tiktoken):
    core, tk = ref_and_tiktoken

    @settings(max_examples=400)
    @given(text_strategy)
    def check(text):
        text = text.encode("utf-8", "replace").decode("utf-8")  # tiktoken rejects surrogates in its core
        ids = core.encode_ordinary(text)
        assert ids == tk.encode_ordinary(text)
        assert core.decode_bytes(ids).decode() == text

    check()


@pytest.mark.parametrize("name", NAMES)
def test_split_pattern_strings_are_tiktokens(name, tiktoken_encoding, monkeypatch):
    import tiktoken_ext.openai_public as op

    # The definitions would download their ranks; stub the loaders, keep the patterns.
    monkeypatch.setattr(op, "load_tiktoken_bpe", lambda *a, **k: {})
    monkeypatch.setattr(op, "data_gym_to_mergeable_bpe_ranks", lambda *a, **k: {})
    defs = {"gpt2": op.gpt2, "cl100k_base": op.cl100k_base, "o200k_base": op.o200k_base}
    assert defs[name]()["pat_str"] == PATTERN_OF[name]
