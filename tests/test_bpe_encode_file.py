"""Encoding UTF-8 bytes without a str: ``Encoding.encode_file`` and the cores'
``encode_utf8_to_numpy``, against tiktoken on the text and against each other."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe._encode import CoreBPE, _cut_points, default_tuning
from fastbpe._jobs import _cut_points_utf8, _utf8_invalid_at
from fastbpe.bpe.encoding import Encoding, get_toy_encoding
from fastbpe.reference.core import CoreBPE as ReferenceCoreBPE
from fastbpe.reference.core import DisallowedSpecial

VOCABS = ["gpt2", "cl100k_base", "o200k_base"]
_CORES: dict = {}


@pytest.fixture(scope="module")
def trio(tiktoken_encoding):
    """``trio(name)`` -> (native CoreBPE, reference CoreBPE, tiktoken.Encoding)."""

    def get(name):
        tk = tiktoken_encoding(name)
        if name not in _CORES:
            args = (tk._mergeable_ranks, tk._special_tokens, tk._pat_str)
            _CORES[name] = CoreBPE(*args), ReferenceCoreBPE(*args)
        return (*_CORES[name], tk)

    return get


@contextlib.contextmanager
def pieces_everywhere(*cores):
    """Threads for any text and a cut at every place the rule allows."""
    fields = dict(piece_min=1, pieces_per_thread=1 << 20, points_per_thread=0, cap_to_cpus=False)
    old_default = default_tuning(**fields)
    olds = [(core, core.set_tuning(**fields)) for core in cores]
    try:
        yield
    finally:
        for core, old in olds:
            core.set_tuning(**old)
        default_tuning(**old_default)


# ------------------------------------------------------------------- the cut rule on UTF-8

_CUT_ALPHABET = st.sampled_from(
    list("aZ9 \t\n\r'/._-!") + ["\n"] * 6 + list("ığİ中文١")
    + ["\u0301", "\u00a0", "\u3000", "\u2028", "\u0085", "\x1c", "\ufeff", "👍", "\u200d", "\u1680"]
)


@settings(max_examples=1500, deadline=None)
@given(st.text(_CUT_ALPHABET, max_size=60))
def test_utf8_cuts_are_the_str_cuts(text):
    """next_cut_utf8 cuts UTF-8 where next_cut cuts the str: the same rule on the same
    chars (so the proof in next_cut's docstring covers both)."""
    data = text.encode("utf-8")
    in_bytes = [len(text[:i].encode("utf-8")) for i in _cut_points(text)]
    assert _cut_points_utf8(data) == in_bytes


def test_utf8_cut_examples():
    assert _cut_points_utf8("中\n文\n\u3000a\n😀".encode()) == [4, 13]
    assert _cut_points_utf8(b"ab\ncd\n\nef.\n/x\n x\nq") == [3, 17]
    assert _cut_points_utf8(b"") == [] and _cut_points_utf8(b"\nx") == []


@settings(max_examples=2000)
@given(st.one_of(st.binary(max_size=16),
                 st.tuples(st.text(max_size=12), st.binary(max_size=3), st.text(max_size=4)).map(
                     lambda t: t[0].encode() + t[1] + t[2].encode())))
def test_native_utf8_check_agrees_with_python(data):
    assert _utf8_invalid_at(data) == _utf8_invalid_at(data, False) == _python_invalid_at(data)


def _python_invalid_at(data):
    try:
        data.decode("utf-8")
        return -1
    except UnicodeDecodeError as exc:
        return exc.start


_CHARS = st.sampled_from(["a", "\n", "é", "\u07ff", "\u0800", "中", "\ud7ff", "\ue000", "\uffff",
                          "😀", "\U00010000", "\U0010ffff"]).map(str.encode)
_MALFORMED = st.sampled_from([b"\x80", b"\xc0\x80", b"\xc1\xbf", b"\xc2", b"\xe0\x9f\xbf",
                              b"\xed\xa0\x80", b"\xf0\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5",
                              b"\xff", b"\xe4\xb8", b"\xf0\x9f\x98", b"\xe4\x41"])


@settings(max_examples=1500)
@given(st.lists(st.one_of(_CHARS, _CHARS, _CHARS, _CHARS, _MALFORMED, st.binary(min_size=1, max_size=1)),
                max_size=50).map(b"".join))
def test_simd_utf8_check_agrees_with_python(data):
    """The SSSE3 check skips 16-byte blocks: inputs of several blocks, with a malformed
    char or a stray byte at any offset in a block and truncated chars at block ends."""
    assert _utf8_invalid_at(data) == _utf8_invalid_at(data, False) == _python_invalid_at(data)


# ------------------------------------------------------------------------- the ids

_PIECES = st.sampled_from(["word", " word", "\n", "x\ny", "中文", "\n中", "'s", "1234", "  ",
                           "\r\n", "İı", "👍", "\u3000", ".\n/", "<|endoftext|>", "\t"])
_TEXT = st.lists(_PIECES, max_size=40).map("".join)


@pytest.mark.parametrize("name", VOCABS)
@settings(max_examples=150, deadline=None)
@given(text=_TEXT, threads=st.sampled_from([1, 2, 3]))
def test_bytes_encode_as_their_text(trio, name, text, threads):
    """Cut at every allowed place, on 1-3 threads: the ids of the text, from both cores;
    the disallowed check as for the str."""
    native, ref, tk = trio(name)
    data = text.encode("utf-8")
    none, eot = frozenset(), frozenset({"<|endoftext|>"})
    want = np.array(tk.encode_ordinary(text), dtype=np.uint32)
    with pieces_everywhere(native):
        for core in (native, ref):
            assert np.array_equal(core.encode_utf8_to_numpy(data, none, threads, np.uint32, none), want)
            got = core.encode_utf8_to_numpy(data, eot, threads, np.uint32, none)
            assert got.tolist() == tk.encode(text, allowed_special="all")
            if "<|endoftext|>" in text:
                with pytest.raises(DisallowedSpecial):
                    core.encode_utf8_to_numpy(data, none, threads, np.uint32, eot)
            else:
                assert np.array_equal(core.encode_utf8_to_numpy(data, none, threads, np.uint32, eot), want)


_BAD = st.sampled_from([b"\xff", b"\xe4", b"\xe4\xb8", b"\xf0\x9f", b"\x80", b"\xc0\xaf",
                        b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\n\xe4", b"\n\xf0"])


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@settings(max_examples=150, deadline=None)
@given(parts=st.lists(st.one_of(_PIECES.map(str.encode), _BAD), max_size=30),
       threads=st.sampled_from([1, 2, 3]))
def test_bytes_that_are_not_utf8_fail_as_the_reference(trio, name, parts, threads):
    """The jobs check their own pieces (on every thread); the error is still the whole
    buffer's first invalid byte, before any disallowed special token, as the reference
    (which decodes first) raises it. Truncated chars right after a cut's newline and at
    the end are read within the buffer."""
    native, ref, _ = trio(name)
    data = b"".join(parts)
    eot = frozenset({"<|endoftext|>"})
    with pieces_everywhere(native):
        outcome = []
        for core in (native, ref):
            try:
                outcome.append(core.encode_utf8_to_numpy(data, frozenset(), threads, np.uint32, eot).tolist())
            except (ValueError, DisallowedSpecial) as exc:
                outcome.append((type(exc), str(exc)))
        assert outcome[0] == outcome[1]


def test_not_utf8_comes_before_a_disallowed_special_token(trio):
    native, _, _ = trio("cl100k_base")
    data = b"<|endoftext|>\nabc\n" * 50 + b"x\n\xe4"
    with pieces_everywhere(native):
        with pytest.raises(ValueError, match=f"invalid byte 0xe4 at byte offset {len(data) - 1}$"):
            native.encode_utf8_to_numpy(data, frozenset(), 2, np.uint32, frozenset({"<|endoftext|>"}))


_SCRIPTS = [
    "Hello, world! This is a test.\n\nThe quick brown fox jumps over the lazy dog.",
    "def f(x):\n    return x ** 2  # square\n\nclass A(B):\n\tpass\r\n",
    "İstanbul'da ığdır ŞEHİR ÇOK güzel, öğrenciler ülkeyi görüyor.",
    "我们今天去公园散步，天气非常好！\n机器学习和自然语言处理。",
    "مرحبا بالعالم، كيف حالك اليوم؟\nनमस्ते दुनिया, आप कैसे हैं?",
    "👩‍👩‍👧‍👦 family 👍🏽 e\u0301 \u3000 123 4567 １２３\n\u2028x\u00a0y",
]


@pytest.mark.parametrize("name", VOCABS)
def test_real_text_on_threads(trio, name):
    """Texts of every script in the tests' corpus, cut into many pieces on 1-4 threads."""
    native, _, tk = trio(name)
    text = "\n".join(_SCRIPTS) * 30
    want = tk.encode_ordinary(text)
    data = text.encode("utf-8")
    with pieces_everywhere(native):
        for threads in (1, 2, 4):
            got = native.encode_utf8_to_numpy(data, frozenset(), threads, np.uint32, frozenset())
            assert got.tolist() == want
            got16 = native.encode_utf8_to_numpy(data, frozenset(), threads, np.uint16, frozenset()) \
                if name == "gpt2" else None
            if got16 is not None:
                assert got16.dtype == np.uint16 and got16.tolist() == want


def test_invalid_utf8_names_the_byte(trio):
    native, ref, _ = trio("gpt2")
    for data, at in [(b"ok \xff", 3), (b"\xed\xa0\x80", 0), (b"abc\xe4\xb8", 3), (b"\xc0\xaf", 0)]:
        for core in (native, ref):
            with pytest.raises(ValueError, match=f"at byte offset {at}$"):
                core.encode_utf8_to_numpy(data, frozenset(), 2, np.uint32, frozenset())


def test_buffers_other_than_bytes(trio):
    native, _, tk = trio("cl100k_base")
    text = "memoryview and bytearray\nwork too"
    want = tk.encode_ordinary(text)
    for buf in (bytearray(text.encode()), memoryview(text.encode()), np.frombuffer(text.encode(), np.uint8)):
        assert native.encode_utf8_to_numpy(buf, frozenset(), 2, np.uint32, frozenset()).tolist() == want


# ---------------------------------------------------------------- Encoding.encode_file


@pytest.fixture(scope="module")
def cl100k(tiktoken_encoding):
    tk = tiktoken_encoding("cl100k_base")
    return Encoding("cl100k_base", pat_str=tk._pat_str, mergeable_ranks=tk._mergeable_ranks,
                    special_tokens=tk._special_tokens), tk


def test_encode_file_is_encode_of_the_text(cl100k, tmp_path):
    enc, tk = cl100k
    text = "\ufeffLine one\r\nline two\n\n中文 and 'quotes'\n" * 500
    path = tmp_path / "doc.txt"
    path.write_bytes(text.encode("utf-8"))      # no newline translation either way
    want = tk.encode(text)
    for threads in (1, 2):
        got = enc.encode_file(path, num_threads=threads)
        assert got.dtype == np.uint32 and got.tolist() == want
    assert enc.encode_file(str(path), dtype="uint32").tolist() == want
    (tmp_path / "empty.txt").write_bytes(b"")
    assert enc.encode_file(tmp_path / "empty.txt").tolist() == []


def test_encode_file_special_tokens(cl100k, tmp_path):
    enc, tk = cl100k
    path = tmp_path / "eot.txt"
    path.write_text("a\nb<|endoftext|>c", encoding="utf-8")
    with pytest.raises(ValueError, match=r"eot\.txt: .*<\|endoftext\|>"):
        enc.encode_file(path)
    assert enc.encode_file(path, allowed_special="all").tolist() == tk.encode("a\nb<|endoftext|>c",
                                                                               allowed_special="all")
    assert enc.encode_file(path, disallowed_special=()).tolist() == tk.encode_ordinary("a\nb<|endoftext|>c")


def test_encode_file_bad_input(cl100k, tmp_path):
    enc, _ = cl100k
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\u00e9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1\.txt: not UTF-8: invalid byte 0xe9 at byte offset 3"):
        enc.encode_file(bad)
    with pytest.raises(FileNotFoundError):
        enc.encode_file(tmp_path / "missing.txt")
    with pytest.raises(TypeError, match="path must be a str or os.PathLike"):
        enc.encode_file(b"bytes-path")
    with pytest.raises(TypeError):
        enc.encode_file(bad, num_threads="2")
    with pytest.raises(ValueError, match="dtype"):
        enc.encode_file(bad, dtype=np.int8)


def test_encode_file_custom_pattern_and_toy(tmp_path):
    """A pattern without a native splitter takes the str path: the same ids."""
    enc = get_toy_encoding()
    path = tmp_path / "toy.txt"
    path.write_bytes(b"hi hi\nhi")
    assert enc.encode_file(path).tolist() == enc.encode("hi hi\nhi")
