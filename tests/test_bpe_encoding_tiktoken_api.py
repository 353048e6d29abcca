"""The rest of tiktoken's Encoding API, compared with the real tiktoken on gpt2, cl100k_base
and o200k_base, on the native core and on the reference core (the ``pair`` fixture): single tokens and pieces,
unstable tokens, bytes that are not UTF-8, counting to a limit, and decode errors."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastbpe
from fastbpe.bpe import encoding
from fastbpe.reference.core import CoreBPE, fix_surrogates

ROOT = Path(__file__).resolve().parents[1]


def _run(pair, check, strategy, native: int, reference: int):
    """Run check on hypothesis examples of strategy: fewer on the reference core, which
    is pure Python (encode_with_unstable re-encodes up to ~100,000 possibilities)."""
    n = native if type(pair[0]._core_bpe) is not CoreBPE else reference
    settings(max_examples=n)(given(strategy)(check))()


# Text that reaches the corners: special-token text, whitespace runs (which the patterns
# split with look-ahead), emoji, CJK, digits, contractions, lone surrogates.
_PIECES = ["<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", " ", "  ", "\n", "\n\n", "\t", " \n ",
           "\r\n", "🙂", "👩‍💻", "你好", "中文", "123", "4567", "'s", "'LL", "hello", " world", "İ", "é",
           "\u00a0", "\u2028", "\u3000", "!!", "...", "/", "\ud800", "\udfff", "\ud83d"]
_CHARS = st.one_of(st.characters(), st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF,
                                                  exclude_categories=()))   # surrogates: asked for
_TEXT = st.lists(st.one_of(st.sampled_from(_PIECES), st.text(_CHARS, max_size=4)), max_size=8).map("".join)
_TEXT_UTF8 = _TEXT.map(fix_surrogates)   # what tiktoken accepts where it has no fix-up

GOLDEN = ["", "hello fanta", "hello world", "x  ", "\n\n", "a\n\n", "你好", "🙂", " 👩‍💻", "def f():\n    ",
          "abc123", "It's", "hello<|endoftext|>", "hello <|endoftext|> wor", "\t\t", "a b c   \n",
          "İstanbul'da", "x\u3000", "a\u2028", "a\x85", "x\x1c", "<|endoftext|>"]   # \x1c: isspace, not White_Space


def _unstable(enc, text, **kwargs):
    try:
        stable, completions = enc.encode_with_unstable(text, **kwargs)
    except ValueError as exc:
        return type(exc)
    return stable, {tuple(c) for c in completions}


def _unstable_agrees(pair, text, **kwargs):
    ours, tk = pair
    got = _unstable(ours, text, **kwargs)
    assert got == _unstable(tk, fix_surrogates(text), **kwargs)
    if got is not ValueError:   # tiktoken's own promise, on some of them
        stable, completions = got
        data = fix_surrogates(text).encode()
        assert data.startswith(ours.decode_bytes(stable))
        assert all(ours.decode_bytes(stable + list(c)).startswith(data) for c in sorted(completions)[:300])


def _is_heavy(pair, text) -> bool:
    """Text ending in whitespace makes encode_with_unstable re-encode ~100,000
    possibilities (every token that starts with a space): seconds in pure Python, so the
    reference core leaves those to the native one (both run the same fastbpe.unstable)."""
    return type(pair[0]._core_bpe) is CoreBPE and text[-1:].isspace()


# --------------------------------------------------------------------------- 1. single tokens
def test_encode_single_token_finds_special_tokens_by_bytes(pair):
    ours, tk = pair
    for token, id_ in tk._special_tokens.items():
        assert ours.encode_single_token(token.encode()) == tk.encode_single_token(token.encode()) == id_
        assert ours.encode_single_token(token) == id_
    assert ours.encode_single_token(bytearray(b"hello")) == tk.encode_single_token(b"hello")


@pytest.mark.parametrize("piece", [b"zzzzqqq", "zzzzqqq", b"", b"<|endoftext|", b"\xff\xfe\xfd"], ids=repr)
def test_encode_single_token_errors_as_tiktoken(pair, piece):
    ours, tk = pair
    with pytest.raises(KeyError) as want:
        tk.encode_single_token(piece)
    with pytest.raises(KeyError) as got:
        ours.encode_single_token(piece)
    assert got.value.args == want.value.args


def test_encode_single_token_bad_input(pair):
    ours, tk = pair
    for bad, error in [(5, TypeError), (None, TypeError), ("\ud800", UnicodeEncodeError)]:
        with pytest.raises(error):
            tk.encode_single_token(bad)
        with pytest.raises(error):
            ours.encode_single_token(bad)


@given(data=st.data())
def test_encode_single_token_on_any_bytes(pair, data):
    ours, tk = pair
    piece = data.draw(st.one_of(st.binary(max_size=6), st.sampled_from(ours._sorted_token_bytes[:2000:7])))
    try:
        want = tk.encode_single_token(piece)
    except KeyError as exc:
        with pytest.raises(KeyError) as got:
            ours.encode_single_token(piece)
        assert got.value.args == exc.args
    else:
        assert ours.encode_single_token(piece) == want


# --------------------------------------------------------------------------- 2. unstable tokens
_ENDS_IN_SPACE = [t for t in GOLDEN if t[-1:].isspace()]


@pytest.mark.parametrize("text", [t for t in GOLDEN if t not in _ENDS_IN_SPACE], ids=repr)
def test_encode_with_unstable_golden(pair, text):
    _unstable_agrees(pair, text, allowed_special="all")


# on the native core only (see _is_heavy): not collected for the reference core rather than skipped
@pytest.mark.parametrize("pair", [(name, "native") for name in ("gpt2", "cl100k_base", "o200k_base")],
                         indirect=True, ids=lambda p: f"{p[0]}-{p[1]}")
@pytest.mark.parametrize("text", _ENDS_IN_SPACE, ids=repr)
def test_encode_with_unstable_golden_ending_in_whitespace(pair, text):
    _unstable_agrees(pair, text, allowed_special="all")


def test_encode_with_unstable_order_is_deterministic_and_without_repeats(pair):
    ours, _ = pair
    stable, completions = ours.encode_with_unstable("hello fanta")
    assert len({tuple(c) for c in completions}) == len(completions)
    assert ours.encode_with_unstable("hello fanta") == (stable, completions)
    singles = [c for c in completions if len(c) == 1]   # found first, by their bytes
    assert completions[: len(singles)] == singles
    assert [ours.decode_single_token_bytes(c[0]) for c in singles] == sorted(
        ours.decode_single_token_bytes(c[0]) for c in singles)


def test_encode_with_unstable_special_token_rules(pair):
    ours, _ = pair
    for text in ("hello<|endoftext|>", "a <|endoftext|> wor"):
        for kwargs in ({}, {"allowed_special": "all"}, {"disallowed_special": ()},
                       {"allowed_special": {"<|endoftext|>"}, "disallowed_special": ()}):
            _unstable_agrees(pair, text, **kwargs)
    with pytest.raises(ValueError, match=r"disallowed special token '<\|endoftext\|>' at position 2"):
        ours.encode_with_unstable("a <|endoftext|>")
    assert ours.encode_with_unstable("a <|endoftext|>", allowed_special="all") == (
        ours.encode("a <|endoftext|>", allowed_special="all"), [])
    with pytest.raises(TypeError, match="must be a str"):
        ours.encode_with_unstable(b"bytes")


def test_encode_with_unstable_fixes_lone_surrogates(pair):
    """tiktoken raises UnicodeEncodeError here; ours encodes what encode would."""
    ours, tk = pair
    with pytest.raises(UnicodeEncodeError):
        tk.encode_with_unstable("a\ud800")
    assert _unstable(ours, "a\ud800") == _unstable(tk, "a\ufffd")


def test_encode_with_unstable_any_text(pair):
    def check(text):
        if not _is_heavy(pair, text):
            _unstable_agrees(pair, text, allowed_special="all")

    _run(pair, check, _TEXT, 20, 8)


# --------------------------------------------------------------------------- 3. pieces and bytes
BYTES = [b"", b"\xff", b"hello \xe4\xbd", b"\xe4\xbd", b"abc\xffdef ghi", b"  \xff", b"\n\n\x80",
         "你好".encode()[:-1], b"a" * 5 + b"\xc3", b"\xed\xa0\x80", b"ok", b" \xf0\x9f\x99", b"x\n\n\n\xfe"]


@pytest.mark.parametrize("data", BYTES, ids=repr)
def test_encode_bytes_golden(pair, data):
    ours, tk = pair
    assert ours._encode_bytes(data) == tk._encode_bytes(data)
    assert ours._encode_bytes(bytearray(data)) == tk._encode_bytes(data)


@settings(max_examples=150)
@given(data=st.one_of(st.binary(max_size=40),
                      st.tuples(_TEXT_UTF8, st.binary(max_size=4), _TEXT_UTF8).map(
                          lambda t: t[0].encode() + t[1] + t[2].encode())))
def test_encode_bytes_any_bytes(pair, data):
    ours, tk = pair
    assert ours._encode_bytes(data) == tk._encode_bytes(data)


def test_encode_bytes_bad_input(pair):
    ours, _ = pair
    with pytest.raises(TypeError, match="expected bytes, not str"):
        ours._encode_bytes("text")


@settings(max_examples=150)
@given(piece=st.binary(min_size=1, max_size=300))
def test_encode_single_piece_any_bytes(pair, piece):
    ours, tk = pair
    assert ours._encode_single_piece(piece) == tk._encode_single_piece(piece)


def test_encode_single_piece_edges(pair):
    ours, tk = pair
    assert ours._encode_single_piece("helloqqqq") == tk._encode_single_piece("helloqqqq")
    assert ours._encode_single_piece("<|endoftext|>") == tk._encode_single_piece("<|endoftext|>")
    assert ours._encode_single_piece(b"") == ours._encode_single_piece("") == []   # tiktoken panics
    with pytest.raises(UnicodeEncodeError):
        ours._encode_single_piece("\ud800")
    with pytest.raises(TypeError, match="expected str or bytes, not int"):
        ours._encode_single_piece(5)


def test_core_byte_pair_encode_never_looks_the_piece_up(pair):
    """A token that merging from bytes never reaches stays split (tiktoken's
    byte_pair_encode); encode_single_piece looks the whole piece up first."""
    ours, _ = pair
    core = ours._core_bpe
    for tok in ours._sorted_token_bytes[::997]:
        assert core.encode_single_piece(tok) == [ours._mergeable_ranks[tok]]
        merged = core.byte_pair_encode(tok)
        assert b"".join(ours.decode_single_token_bytes(t) for t in merged) == tok
    assert core.byte_pair_encode(b"") == []


@settings(max_examples=60)
@given(text=_TEXT)
def test_encode_only_native_bpe_any_text(pair, text):
    ours, tk = pair
    assert ours._encode_only_native_bpe(text) == tk._encode_only_native_bpe(fix_surrogates(text)) == ours.encode_ordinary(text)


# --------------------------------------------------------------------------- 4. counting
@pytest.fixture(params=["whole", "walk"])
def strategy(request, monkeypatch):
    """count_till_limit as it runs on short texts (counted whole) and long ones (walked)."""
    if request.param == "walk":
        monkeypatch.setattr(encoding, "_COUNT_WHOLE", 0)
    return request.param


def test_count_till_limit_any_text(pair, strategy):
    ours, tk = pair

    def check(args):
        text, delta = args
        n = len(tk.encode_ordinary(text))
        assert ours.count(text) == n
        limit = max(0, n + delta)
        assert ours.count_till_limit(text, limit) == (n if n <= limit else None)

    _run(pair, check, st.tuples(_TEXT, st.integers(-2, 2)), 60, 30)


def test_count_till_limit_golden(pair, strategy):
    ours, tk = pair
    text = "".join(GOLDEN) * 3
    n = len(tk.encode_ordinary(text))
    for limit in (0, 1, n - 1, n, n + 1, 10 * n):
        assert ours.count_till_limit(text, limit) == (n if n <= limit else None)
    assert ours.count_till_limit("", 0) == 0


class _Spy:
    """A core that counts what it is asked to encode."""

    def __init__(self, core):
        self.core, self.pieces, self.chars = core, 0, 0

    def encode_single_piece(self, piece):
        self.pieces += 1
        return self.core.encode_single_piece(piece)

    def encode_ordinary(self, text):
        self.chars += len(text)
        return self.core.encode_ordinary(text)


def test_count_till_limit_reads_only_the_prefix(tiktoken_encoding):
    tk = tiktoken_encoding("cl100k_base")
    enc = fastbpe.Encoding("cl100k_base", pat_str=tk._pat_str, mergeable_ranks=tk._mergeable_ranks,
                           special_tokens=tk._special_tokens)
    spy = enc._core_bpe = _Spy(enc._core_bpe)
    text = "The quick brown fox jumps over the lazy dog. " * 100_000   # 4.5 MB
    assert enc.count_till_limit(text, 50) is None
    assert spy.pieces <= 51 and spy.chars == 0
    spy.pieces = 0
    assert enc.count_till_limit(text[:450], 500) == len(tk.encode_ordinary(text[:450]))   # counted whole
    assert spy.pieces == 0 and spy.chars == 450


def test_count_till_limit_bad_input(pair):
    ours, _ = pair
    with pytest.raises(ValueError, match="limit must be >= 0, got -1"):
        ours.count_till_limit("x", -1)
    with pytest.raises(TypeError, match="limit must be an int, not float"):
        ours.count_till_limit("x", 1.5)
    with pytest.raises(TypeError, match="must be a str"):
        ours.count_till_limit(b"x", 1)


# --------------------------------------------------------------------------- 5. decode errors
_BAD_IDS = [-1, 2**32, 2**64, 2**32 - 1, 10**6, 1.5, None, "5", np.int64(-1), np.uint64(2**64 - 1)]


def _error(call):
    try:
        call()
    except Exception as exc:   # noqa: BLE001 - we compare the types
        return type(exc)
    return None


@pytest.mark.parametrize("bad", _BAD_IDS, ids=repr)
def test_decode_errors_are_tiktokens(pair, bad):
    """The same error type as tiktoken for every decode method: TypeError for a non-int,
    OverflowError outside 0..2**32-1, KeyError for an unknown id."""
    ours, tk = pair
    for method, arg in [("decode", [1, bad]), ("decode_bytes", [1, bad]), ("decode_tokens_bytes", [1, bad]),
                        ("decode_single_token_bytes", bad), ("decode_batch", [[1], [1, bad]]),
                        ("decode_bytes_batch", [[1], [1, bad]])]:
        want = _error(lambda: getattr(tk, method)(arg))
        assert want is not None
        got = _error(lambda: getattr(ours, method)(arg))
        assert got is want, (method, bad)


@pytest.mark.parametrize("bad", [5, None, b"text", ["a"]], ids=repr)
def test_encode_of_a_non_str_is_a_type_error_as_in_tiktoken(pair, bad):
    ours, tk = pair
    for method in ("encode", "encode_ordinary", "encode_to_numpy", "encode_with_unstable",
                   "_encode_only_native_bpe", "count"):
        if hasattr(tk, method):
            assert _error(lambda: getattr(tk, method)(bad)) is TypeError
        with pytest.raises(TypeError, match="must be a str"):
            getattr(ours, method)(bad)
    for method in ("encode_batch", "encode_ordinary_batch"):
        assert _error(lambda: getattr(tk, method)(["ok", bad])) is TypeError
        with pytest.raises(TypeError, match="text 1 of the batch"):
            getattr(ours, method)(["ok", bad])


def test_decode_error_messages_name_the_item(pair):
    ours, _ = pair
    with pytest.raises(KeyError, match=r"Invalid token for decoding: 1000000 at index 2"):
        ours.decode([1, 2, 10**6])
    with pytest.raises(KeyError, match=r"^'Invalid token for decoding: 1000000'$"):
        ours.decode_single_token_bytes(10**6)
    with pytest.raises(OverflowError, match=r"token id -1 at index 1 is out of range"):
        ours.decode_tokens_bytes([1, -1])
    with pytest.raises(OverflowError, match=r"at index 0 of sequence 1 of the batch"):
        ours.decode_batch([[1], [2**40]])
    with pytest.raises(KeyError, match=r"at index 1 of sequence 0 of the batch"):
        ours.decode_bytes_batch([[1, 10**6], [2]])
    # tiktoken converts every item before looking any up: an out-of-range id after an
    # unknown one wins, and so does a non-int
    with pytest.raises(OverflowError):
        ours.decode([10**6, -1])
    with pytest.raises(TypeError, match="got 2.5 at index 2"):
        ours.decode([10**6, 1, 2.5])
    for method in ("decode", "decode_tokens_bytes", "decode_batch"):   # bool is no id, in both cores
        with pytest.raises(TypeError, match="True"):
            getattr(ours, method)([[1, True]] if method == "decode_batch" else [1, True])
    for call in (lambda: ours.decode([1, -1]), lambda: ours.decode_tokens_bytes([10**6]),
                 lambda: ours.decode_single_token_bytes(10**6)):
        with pytest.raises((KeyError, OverflowError)) as err:
            call()
        assert err.value.__context__ is None


# --------------------------------------------------------------------------- arguments taken differently
def _outcome(call):
    try:
        return "ok", call()
    except Exception as exc:   # noqa: BLE001 - the type is what is compared
        return type(exc).__name__, None


@pytest.mark.parametrize("call, tiktoken_gives, fastbpe_gives", [
    # allowed_special: any collection of str (tiktoken: a set only)
    (lambda e: e.encode("a<|endoftext|>", allowed_special=["<|endoftext|>"]), "TypeError", [64, 50256]),
    (lambda e: e.encode("a<|endoftext|>", allowed_special=("<|endoftext|>",)), "TypeError", [64, 50256]),
    (lambda e: e.encode_batch(["a<|endoftext|>"], allowed_special=["<|endoftext|>"]), "TypeError", [[64, 50256]]),
    (lambda e: e.encode_to_numpy("<|endoftext|>", allowed_special=["<|endoftext|>"]).tolist(), "TypeError",
     [50256]),
    (lambda e: e.encode("a", allowed_special="<|endoftext|>"), "TypeError", "TypeError"),
    # disallowed_special as a str: tiktoken reads its characters
    (lambda e: e.encode("a<b", disallowed_special="<|endoftext|>"), "ValueError", "TypeError"),
    # a batch of one str: tiktoken encodes each character
    (lambda e: e.encode_batch("ab"), [[64], [65]], "TypeError"),
    (lambda e: e.encode_ordinary_batch("ab"), [[64], [65]], "TypeError"),
    # num_threads: an int
    (lambda e: e.encode_batch(["ab"], num_threads=2.0), [[397]], "TypeError"),
    (lambda e: e.encode_batch(["ab"], num_threads=np.int64(2)), [[397]], [[397]]),
], ids=["list", "tuple", "batch-list", "numpy-list", "str", "disallowed-str", "batch-str", "ordinary-batch-str",
        "float-threads", "numpy-threads"])
def test_argument_differences_are_the_listed_ones(tiktoken_encoding, call, tiktoken_gives, fastbpe_gives):
    """The differences docs/tiktoken_compat.md lists under "Arguments", against the real
    tiktoken: a listed difference that tiktoken stops having fails here."""
    tk = tiktoken_encoding("gpt2")
    ours = fastbpe.Encoding("gpt2", pat_str=tk._pat_str, mergeable_ranks=tk._mergeable_ranks,
                            special_tokens=tk._special_tokens)
    for enc, want in ((tk, tiktoken_gives), (ours, fastbpe_gives)):
        kind, value = _outcome(lambda: call(enc))
        assert (kind if kind != "ok" else value) == want, (enc, kind, value)


# --------------------------------------------------------------------------- the table in the docs
_DOC = ROOT / "docs" / "tiktoken_compat.md"
_STATUSES = {"identical", "different", "absent"}


def _doc_rows() -> dict[str, str]:
    """``{name: status}`` from the tables of docs/tiktoken_compat.md (first two columns)."""
    rows = {}
    for line in _DOC.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\|\s*`([^`]+)`\s*\|\s*(\w+)", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def test_every_public_name_of_tiktoken_is_in_the_table(tiktoken_encoding):
    """Every name of ``tiktoken`` and of its Encoding (class and instance, private ones
    included) has a row in docs/tiktoken_compat.md, and the row is true of ours: present
    unless it says "absent". A new tiktoken name fails this test until it is listed."""
    import tiktoken

    rows = _doc_rows()
    assert set(rows.values()) <= _STATUSES
    module_names = {f"tiktoken.{n}" for n in dir(tiktoken) if not n.startswith("__")}
    tk = tiktoken_encoding("gpt2")
    ours = fastbpe.Encoding("gpt2", pat_str=tk._pat_str, mergeable_ranks=tk._mergeable_ranks,
                            special_tokens=tk._special_tokens)
    encoding_names = {n for n in dir(tk) if not n.startswith("__")}
    missing = sorted((module_names | {f"Encoding.{n}" for n in encoding_names}) - set(rows))
    assert not missing, f"add rows to {_DOC.name} for: {missing}"
    for name in encoding_names:
        status = rows[f"Encoding.{name}"]
        assert hasattr(ours, name) == (status != "absent"), name
    # the module's functions: an "identical" row has its twin in fastbpe, by name
    for name in module_names:
        if rows[name] == "identical" and callable(getattr(tiktoken, name.split(".", 1)[1])):
            assert hasattr(fastbpe, name.split(".", 1)[1]), name
