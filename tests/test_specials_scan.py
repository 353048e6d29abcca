"""The special-token scan (``_specials.find_special``) against its twin
``reference.bpe.find_special``: sets with one shared first pair (tiktoken's "<|"), with
1-4 distinct first bytes (DeepSeek V4's added tokens: "<" and the first byte of "｜") and
with more; text dense with candidates; the allowed scan and the disallowed check
(``NeedleSet``) of a core against the reference core."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe._encode import CoreBPE
from fastbpe._specials import _TestSet
from fastbpe.reference.bpe import find_special
from fastbpe.reference.core import CoreBPE as ReferenceCoreBPE
from fastbpe.reference.core import DisallowedSpecial

VOCAB = Path(os.environ.get("FASTBPE_TEST_VOCAB_DIR", "/work/shared/vocab"))
DEEPSEEK = VOCAB / "deepseek-v4" / "tokenizer.json"

# DeepSeek-like added tokens (their shapes: "<｜...｜>", "</...", "<|...|>", "<t...",
# "<d...", one starting with "｜"), written here, not read from the model's file
SHAPED = ["<｜fim▁hole｜>", "<｜fim▁begin｜>", "<｜User｜>", "<|EOT|>", "<think>", "</think>",
          "｜DSML｜", "<dsml:", "</dsml:", "<｜/table>｜", "<｜table｜>", "<｜/td｜>", "<｜td｜>",
          "<｜tr｜>", "<｜/tr｜>", "<｜tool▁call▁begin｜>", "<｜tool▁calls▁begin｜>"]


def matches(tokens: list[bytes], text: bytes, start: int = 0) -> list[tuple[int, int, int]]:
    """The reference's successive matches, as _TestSet.find_all gives them."""
    index = {t: k for k, t in enumerate(tokens)}
    out = []
    while (m := find_special(text, tokens, start)) is not None:
        out.append((m[0], m[1], index[m[2]]))
        start = m[1]
    return out


def check(tokens: list[bytes], text: bytes, start: int = 0) -> None:
    assert _TestSet(tokens).find_all(text, start) == matches(tokens, text, start), (tokens, text)


DENSE = [
    "<div><td>a</td><tr></tr><｜td｜><｜/td｜><｜/table>｜</dsml:x>",
    "if a < b and c <= d: x = a<b<<c <think></think></think",
    "<｜<｜<｜User｜><｜Us<｜User｜>｜DSML｜｜DSML<|EOT|<|EOT|><|",
    "中文，标点（全角）：｜ｄｓｍｌ｜｜DSML｜ｱｲｳ｡<｜fim▁hole｜>ｶﾞ",
    "<｜tool▁call▁begin｜><｜tool▁calls▁begin｜><｜tool▁call",
    "<", "｜", "<｜", "</", "<｜/tr｜", "<｜/tr｜>", "x<｜tr｜>", "｜DSML｜",
]


@pytest.mark.parametrize("text", DENSE)
def test_dense_text_matches_the_reference(text):
    tokens = [t.encode() for t in SHAPED]
    assert _TestSet(tokens).scan == "firsts"
    data = text.encode()
    for start in range(len(data) + 1):
        check(tokens, data, start)
    for cut in range(len(data) + 1):    # tokens at the end of the text, cut anywhere
        check(tokens, data[:cut])


def test_scan_kinds_and_their_edges():
    assert _TestSet([b"<|a|>", b"<|b|>"]).scan == "pair"
    assert _TestSet([b"<a", b"<b"]).scan == "firsts"
    assert _TestSet([b"a", b"b", b"c", b"d"]).scan == "firsts"
    assert _TestSet([bytes([c]) for c in b"abcde"]).scan == "pairs"
    assert _TestSet([b"<", b"<|a|>"]).scan == "firsts"          # a 1-byte item: no pair
    # candidates on both sides of the 16-byte steps, 1-byte items, overlaps
    for tokens in ([b"<a", b"<ab", b"b"], [b"x", b"xy", b"xyz", b"y"], [b"\xef\xbd\x9c", b"<"],
                   [bytes([c]) + b"q" for c in b"abcdef"], [b"ab", b"b", b"ba"]):
        for text in (b"ab" * 40, b"." * 15 + b"<ab" + b"." * 14 + b"xyz", b"<" * 33,
                     b"\xef\xbd\x9c" * 11 + b"\xef\xbd", b"bababa<a", b"aq" * 9 + b"fq"):
            for cut in range(len(text) + 1):
                check(tokens, text[:cut])
            check(tokens, text, 17)


# token sets with 1-6 distinct first bytes, from a small alphabet of ASCII and UTF-8
_PIECES = ["<", "/", "|", "a", "b", "｜", "中", "\n", "é"]
_token = st.lists(st.sampled_from(_PIECES), min_size=1, max_size=5).map(lambda p: "".join(p).encode())


@st.composite
def token_sets(draw):
    firsts = draw(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=6, unique=True))
    tokens = draw(st.lists(st.tuples(st.sampled_from(firsts), _token).map(lambda p: p[0].encode() + p[1]),
                           min_size=1, max_size=12, unique=True))
    tokens += draw(st.lists(st.sampled_from(firsts).map(str.encode), max_size=2, unique=True))
    return list(dict.fromkeys(tokens))


@settings(max_examples=400, deadline=None)
@given(token_sets(), st.data())
def test_hypothesis_matches_the_reference(tokens, data):
    fragments = [t[:k] for t in tokens for k in range(len(t) + 1)] + [b"x", b" ", "，".encode()]
    parts = data.draw(st.lists(st.sampled_from(fragments), max_size=40))
    text = b"".join(parts)
    check(tokens, text)
    check(tokens, text, data.draw(st.integers(0, len(text))))


def _cores(specials: list[str]):
    ranks = {bytes([b]): b for b in range(256)}
    ids = {s: 256 + k for k, s in enumerate(specials)}
    pattern = r"\S+|\s+"
    return CoreBPE(ranks, ids, pattern), ReferenceCoreBPE(ranks, ids, pattern)


def _outcome(call):
    try:
        return call()
    except DisallowedSpecial as e:
        return ("disallowed", e.args)


@pytest.mark.parametrize("text", DENSE + ["plain text, no candidate at all " * 3])
def test_allowed_scan_and_disallowed_check_match_the_reference_core(text):
    native, ref = _cores(SHAPED)
    every = frozenset(SHAPED)
    half = frozenset(SHAPED[::2])
    for allowed, disallowed in ((every, frozenset()), (half, every - half), (frozenset(), every)):
        assert _outcome(lambda: native.encode(text, allowed, disallowed)) == \
            _outcome(lambda: ref.encode(text, allowed, disallowed)), (allowed, disallowed)
    assert native.encode_batch([text, "a" + text], every, 2) == [ref.encode(t, every) for t in (text, "a" + text)]


@settings(max_examples=150, deadline=None)
@given(token_sets(), st.data())
def test_hypothesis_cores_match(tokens, data):
    specials = sorted({t.decode("utf-8", "replace") for t in tokens} - {"\ufffd"} - {""})
    if not specials:
        return
    native, ref = _cores(specials)
    utf8 = [s.encode() for s in specials]
    fragments = [t[:k].decode("utf-8", "ignore") for t in utf8 for k in range(len(t) + 1)] + ["x", " "]
    text = "".join(data.draw(st.lists(st.sampled_from(fragments), max_size=30)))
    allowed = frozenset(data.draw(st.lists(st.sampled_from(specials), unique=True)))
    for disallowed in (frozenset(), frozenset(specials) - allowed):
        assert _outcome(lambda: native.encode(text, allowed, disallowed)) == \
            _outcome(lambda: ref.encode(text, allowed, disallowed))


@pytest.mark.skipif(not DEEPSEEK.exists(), reason=f"{DEEPSEEK} is absent (see the vocabulary README)")
def test_deepseek_v4_sets_match_the_reference():
    added = json.loads(DEEPSEEK.read_text(encoding="utf-8"))["added_tokens"]
    ordinary = [a["content"].encode() for a in added if not a["special"]]
    special = [a["content"].encode() for a in added if a["special"]]
    assert _TestSet(ordinary).scan == "firsts" and len(ordinary) == 53
    text = "".join(DENSE).encode() + b"".join(t[:k] for t in ordinary for k in (1, 2, 4, len(t)))
    for tokens in (ordinary, special, ordinary + special):
        check(tokens, text)


def test_encoding_passes_the_core_the_same_sets_each_call():
    """Encoding._special_sets with added tokens: equal results, the same objects (the
    core keeps its native sets by frozenset; a new one per call cost DeepSeek V4 ~40 us)."""
    from fastbpe.bpe.encoding import Encoding

    ranks = {bytes([b]): b for b in range(256)}
    enc = Encoding("toy-added", pat_str=r"\S+|\s+", mergeable_ranks=ranks,
                   special_tokens={"<|s|>": 300, "<|t|>": 301}, added_tokens={"<｜a｜>": 302, "</a": 303})
    first = enc._special_sets(set(), "all")
    assert first == (frozenset({"<｜a｜>", "</a"}), frozenset({"<|s|>", "<|t|>"}))
    again = enc._special_sets(set(), "all")
    assert again[0] is first[0] and again[1] is first[1]
    assert enc._special_sets({"<|s|>"}, "all") == (frozenset({"<|s|>", "<｜a｜>", "</a"}), frozenset({"<|t|>"}))
    assert enc._special_sets(set(), {"</a", "<|t|>"})[1] == frozenset({"<|t|>"})
    assert enc.encode("x</a<｜a｜><|s|>", allowed_special={"<|s|>"}) == [ord("x"), 303, 302, 300]
    with pytest.raises(ValueError, match="<|t|>"):
        enc.encode("</a<|t|>")


@settings(max_examples=300, deadline=None)
@given(st.sets(st.text(st.sampled_from("<s/>[]IN"), min_size=1, max_size=5), max_size=6),
       st.text(st.sampled_from("<s/>[]INx é"), max_size=40))
def test_split_on_specials_is_the_reference_split(tokens, text):
    """``fastbpe.special.split_on_specials`` (one regex) cuts as the reference's
    ``split_specials`` (a loop over characters): leftmost, then longest."""
    from fastbpe.reference.sentencepiece import split_specials
    from fastbpe.special import split_on_specials

    tokens = frozenset(tokens)
    assert split_on_specials(text, tokens) == split_specials(text, tokens)
    for token in tokens:   # text made of the tokens themselves: overlaps and prefixes
        doubled = token + text + token
        assert split_on_specials(doubled, tokens) == split_specials(doubled, tokens)
