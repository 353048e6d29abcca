"""The seeded table (``fastbpe._seed_table``): tokens of 3..8 bytes seeded at load, chunks
seen admitted, bounded. Ids must equal tiktoken's whatever the table's size (down to a
few buckets, where seeds find no room and chunks seen replace each other at every
turn), on threads that write it at the same time, in a child forked while another
thread writes it, and after pickling."""
from __future__ import annotations

import multiprocessing as mp
import pickle
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe._encode import CoreBPE, default_tuning
from fastbpe._seed_table import SEED_CPU_OK

pytestmark = pytest.mark.skipif(not SEED_CPU_OK, reason="this CPU has no atomic 16-byte "
                                "accesses (AVX): encoders build no seeded table")

VOCABS = ["gpt2", "cl100k_base", "o200k_base"]
# KiB: 1 = 4 buckets (64 entries), 4 = 64 buckets; None = the default bound.
SIZES = [1, 4, None]
_CORES: dict = {}


def core_with(tk, kb, block=64):
    """A CoreBPE of tk's vocabulary whose seeded table was built with at most kb KiB."""
    key = (tk.name, kb, block)
    if key not in _CORES:
        fields = {"block_chunks": block}
        if kb is not None:
            fields["seed_table_kb"] = kb
        old = default_tuning(**fields)
        try:
            _CORES[key] = CoreBPE(tk._mergeable_ranks, tk._special_tokens, tk._pat_str)
        finally:
            default_tuning(**old)
    return _CORES[key]


TEXTS = [
    "",
    "abc",
    "Hello, world! This is a test of the emergency broadcast system.",
    "The quick brown fox jumps over the lazy dog. " * 40,
    "def f(x):\n    return x ** 2  # square\n\nclass A(B):\n\tpass\r\n" * 10,
    "İstanbul'da ığdır ŞEHİR ÇOK güzel, öğrenciler ülkeyi görüyor. Iı İi " * 10,
    "我们今天去公园散步，天气非常好！机器学习和自然语言处理。" * 10,
    "a\x00b \x00\x00\x00 ab\x00\x00 abc\x00 \x01\x02\x03",     # words with NUL bytes
    "I'm you're he's 'S 'T 'RE DON'T ’s ‘quoted’ 12345 ١٢٣ " * 10,
    "a<|endoftext|>b <|endoftext|><|endoftext|>\n<|endofprompt|> c" * 5,
    " ".join(f"w{i}x{i * 7 % 13}" for i in range(3000)),        # many distinct short chunks
]


@pytest.mark.parametrize("name", VOCABS)
@pytest.mark.parametrize("kb", SIZES)
def test_seeded_table_matches_tiktoken(tiktoken_encoding, name, kb):
    tk = tiktoken_encoding(name)
    core = core_with(tk, kb)
    info = core._seed_table_info()
    assert 0 < info["bytes"] <= (kb or default_tuning()["seed_table_kb"]) * 1024
    for rnd in range(2):            # tables as built, then full of what round 0 admitted
        for text in TEXTS:
            assert core.encode_ordinary(text) == tk.encode_ordinary(text), (rnd, text[:40])
            assert core.encode(text, tk.special_tokens_set) == tk.encode(
                text, allowed_special="all"), (rnd, text[:40])


@pytest.mark.parametrize("name", VOCABS)
def test_default_table_holds_nearly_every_short_token(tiktoken_encoding, name):
    tk = tiktoken_encoding(name)
    core = core_with(tk, None)
    info = core._seed_table_info()
    short = sum(3 <= len(t) <= 8 for t in tk._mergeable_ranks)
    assert info["seeds"] >= 0.97 * short
    assert info["entries"] >= 4 * short and info["bytes"] <= 16 << 20


@pytest.mark.parametrize("name", ["gpt2", "o200k_base"])
@settings(max_examples=150, deadline=None)
@given(text=st.lists(st.sampled_from(
    ["word", " word", " Word", "WORD", "a\x00", " ", "\n", "'s", "12", "1234", "ç", " şu",
     "中文", "👍", " antidisestablishment", "abc", "abd", "xyz", " the", " then"]),
    max_size=80).map("".join), kb=st.sampled_from([1, 4]))
def test_tiny_tables_hypothesis(tiktoken_encoding, name, text, kb):
    tk = tiktoken_encoding(name)
    core = core_with(tk, kb, block=3)
    assert core.encode_ordinary(text) == tk.encode_ordinary(text)


@pytest.mark.parametrize("kb", [1, None])
def test_threads_writing_one_table(tiktoken_encoding, kb):
    """Batches on 3 threads and plain calls on 2 more, all admitting chunks into one
    table at once (a tiny one: every admission replaces another's entry)."""
    tk = tiktoken_encoding("cl100k_base")
    core = core_with(tk, kb)
    texts = [TEXTS[i % len(TEXTS)] + f" {i} v{i % 97}q" for i in range(90)]
    want = [tk.encode_ordinary(t) for t in texts]
    errors = []

    def hammer():
        try:
            for _ in range(3):
                for t, w in zip(texts, want):
                    if core.encode_ordinary(t) != w:
                        errors.append(t[:40])
        except Exception as exc:       # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=hammer) for _ in range(2)]
    for th in threads:
        th.start()
    for _ in range(3):
        assert core.encode_ordinary_batch(texts, 3) == want
    for th in threads:
        th.join()
    assert errors == []


def _child_encode(core, texts, want, q):
    q.put(all(core.encode_ordinary(t) == w for t, w in zip(texts, want)))


def test_fork_while_another_thread_writes(tiktoken_encoding):
    tk = tiktoken_encoding("o200k_base")
    core = core_with(tk, 4)
    texts = [TEXTS[i % len(TEXTS)] + f" z{i}k" for i in range(40)]
    want = [tk.encode_ordinary(t) for t in texts]
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            core.encode_ordinary(f" q{i}r{i * 31 % 1000} " * 50)
            i += 1

    th = threading.Thread(target=writer)
    th.start()
    try:
        ctx = mp.get_context("fork")
        for _ in range(3):
            q = ctx.Queue()
            p = ctx.Process(target=_child_encode, args=(core, texts, want, q))
            p.start()
            ok = q.get(timeout=120)
            p.join(timeout=120)
            assert ok and p.exitcode == 0
    finally:
        stop.set()
        th.join()


def test_pickled_encoder_builds_its_own_table(tiktoken_encoding):
    tk = tiktoken_encoding("gpt2")
    core = core_with(tk, None)
    for t in TEXTS:
        core.encode_ordinary(t)
    clone = pickle.loads(pickle.dumps(core))
    assert clone._seed_table_info() == core._seed_table_info()
    old = clone.set_tuning(block_chunks=64)
    try:
        for t in TEXTS:
            assert clone.encode_ordinary(t) == tk.encode_ordinary(t)
    finally:
        clone.set_tuning(**old)


def test_no_table_when_the_bound_is_zero(tiktoken_encoding):
    tk = tiktoken_encoding("gpt2")
    old = default_tuning(seed_table_kb=0, block_chunks=64)
    try:
        core = CoreBPE(tk._mergeable_ranks, tk._special_tokens, tk._pat_str)
    finally:
        default_tuning(**old)
    assert core._seed_table_info() == {"bytes": 0, "entries": 0, "seeds": 0}
    assert core.encode_ordinary(TEXTS[3]) == tk.encode_ordinary(TEXTS[3])


def test_preseeded_entries_win_and_stay():
    """Another core may pre-seed (bytes -> ids) pieces whose ids are not the whole-piece
    shortcut's: the block loop then answers them from the seed, and no chunk seen later
    replaces a seed (a toy vocabulary, where the ids are easy to tell apart)."""
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc": 257}
    old = default_tuning(block_chunks=8)
    try:
        core = CoreBPE(ranks, {}, r"\w+|\W")
        plain = CoreBPE(ranks, {}, r"\w+|\W")
    finally:
        default_tuning(**old)
    assert core.encode_ordinary("abc") == [257]
    assert core._seed_table_put(b"abc", [256, 99])
    assert core.encode_ordinary("abc abc") == [256, 99, 32, 256, 99]
    assert plain.encode_ordinary("abc abc") == [257, 32, 257]
    assert not core._seed_table_put(b"abcdefghi", [1])         # 9 bytes: not for the table
    assert not core._seed_table_put(b"abd", [1, 2, 3, 4])      # 4 ids: not for the table
    core.set_tuning(block_chunks=0)                            # the fused loop: no table
    assert core.encode_ordinary("abc") == [257]
