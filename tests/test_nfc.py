"""HF's NFC (Unicode 9.0) natively and in the reference (issue 38, Qwen3's normalizer):
the generated class table against ``unicodedata`` and HF's normalizer for every code
point, *Corollary B*'s premises for every code point, the native spans and ``Needles``
against the reference, and all four forms against ``tokenizers`` on hypothesis text
(combining marks, Hangul jamo, singletons, non-starter decompositions, composition
exclusions, characters HF's Unicode 9.0 does not have)."""
from __future__ import annotations

import importlib.util
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe.reference import _nfc_table
from fastbpe.reference import hf as ref

native = pytest.importorskip("fastbpe._nfc")
ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("gen_nfc_table", ROOT / "tools" / "gen_nfc_table.py")
    module = importlib.util.module_from_spec(spec)
    saved = list(sys.path)   # the tool may put the checkout on sys.path: not for later tests
    try:                     # (a spawned worker would import an unbuilt tree from there)
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


def test_the_table_is_unicodedata_for_every_known_code_point():
    """Every code point's class in the native table equals the reference's, which is
    FROZEN for a frozen one, else ``nfc_class_of_unicodedata``."""
    table = native._CLASSES
    assert len(table) == 0x110000
    starts = np.asarray(_nfc_table.CLASS_STARTS + (0x110000,))
    assert (table == np.repeat(np.asarray(_nfc_table.CLASS_VALUES, dtype=np.uint8), np.diff(starts))).all()
    for cp in range(0x110000):
        want = ref.FROZEN if ref.is_frozen(cp) else ref.nfc_class_of_unicodedata(cp)
        assert table[cp] == want, hex(cp)


def test_frozen_code_points_are_those_hf_does_not_know():
    """Every code point ``unicodedata`` gives normalization data that HF's normalizer does
    not show is frozen; with the table's Unicode version the generated module is what
    the tool makes now."""
    pytest.importorskip("tokenizers")
    tool = _tool()
    unknown = tool.unknown_to_hf()
    assert all(ref.is_frozen(cp) for cp in unknown)
    assert unicodedata.unidata_version >= _nfc_table.UNIDATA_VERSION
    if unicodedata.unidata_version == _nfc_table.UNIDATA_VERSION:
        assert len(unknown) == _nfc_table.UNKNOWN_TO_HF
        assert (ROOT / "fastbpe" / "reference" / "_nfc_table.py").read_text(encoding="utf-8") == tool.render()


def test_corollary_b_premises_for_every_code_point():
    """A char that is not UNSAFE decomposes to a starter first that no composition
    takes as a second part (a boundary before it); a STABLE one decomposes to nothing
    and is no first part (a boundary after it too)."""
    firsts, seconds = ref._composition_parts()
    for cp in range(0x110000):
        k = ref.nfc_class(cp)
        if k in (ref.UNSAFE, ref.FROZEN):
            continue
        first = unicodedata.normalize("NFD", chr(cp))[0]
        assert unicodedata.combining(first) == 0 and ord(first) not in seconds, hex(cp)
        if k == ref.STABLE:
            assert unicodedata.normalize("NFD", chr(cp)) == chr(cp) and cp not in firsts, hex(cp)


def test_below_u0300_all_stable_or_starters():
    assert all(ref.nfc_class(cp) in (ref.STABLE, ref.STARTER) for cp in range(ref.NFC_STABLE_BELOW))
    assert ref.nfc_class(ref.NFC_STABLE_BELOW) == ref.UNSAFE


_MARKS = [cp for cp in range(0x110000) if unicodedata.combining(chr(cp))]
_POOL = sorted(set(_MARKS[:200] + _MARKS[-200:]) | set(range(0x1100, 0x1114)) | set(range(0x1161, 0x1176))
               | set(range(0x11A8, 0x11C3)) | set(range(0xAC00, 0xAC40))
               | {0x212B, 0x2126, 0x0344, 0x0340, 0x0958, 0x0F73, 0x0F77, 0x1DF6, 0x1ABF, 0x08CD, 0x11935, 0x11930,
                  0x0B47, 0x0B3E, 0x0B57, 0x0DD9, 0x0DCF, 0x00C5, 0x01FA, 0x0041, 0x0061, 0x0065, 0x0301, 0x0323,
                  0x0302, 0x0334, 0x0338, 0x003E, 0x00E9, 0x1E0B, 0xFB01, 0x2460, 0x3000, 0x4E2D, 0x0020, 0x0031})
TEXT = st.text(alphabet=st.sampled_from([chr(c) for c in _POOL]), max_size=40) | st.text(max_size=30)


@settings(max_examples=1500, deadline=None)
@given(text=TEXT)
def test_native_nfc_equals_reference(text):
    assert native.nfc(text) == ref.nfc(text) == ref.unicode_normalize("NFC", text) == ref.normalize({"type": "NFC"}, text)
    if native.nfc(text) == text:
        assert native.nfc(text) is text
    for a, b in native.nfc_spans(text):   # merged spans still run boundary to boundary
        assert ref.nfc(text[:a]) + ref.nfc(text[a:b]) + ref.nfc(text[b:]) == ref.nfc(text)


@settings(max_examples=1500, deadline=None)
@given(text=TEXT)
def test_all_four_forms_equal_hf(text):
    normalizers = pytest.importorskip("tokenizers.normalizers")
    assert ref.nfc(text) == normalizers.NFC().normalize_str(text)
    assert native.nfc(text) == normalizers.NFC().normalize_str(text)
    for form in ("NFD", "NFKC", "NFKD"):
        assert ref.unicode_normalize(form, text) == getattr(normalizers, form)().normalize_str(text), form


def test_unicode_versions_differ_where_the_docstring_says():
    """HF keeps "a" U+1DF6 U+0301 (U+1DF6 is Unicode 10); ``unicodedata`` does not."""
    normalizers = pytest.importorskip("tokenizers.normalizers")
    text = "a\u1df6\u0301"
    assert normalizers.NFC().normalize_str(text) == text == ref.nfc(text) == native.nfc(text)
    assert unicodedata.normalize("NFC", text) != text


@settings(max_examples=800, deadline=None)
@given(tokens=st.lists(st.text(alphabet="<|>ab\u00e9\u4e2d", min_size=1, max_size=4), max_size=20),
       text=st.text(alphabet="<|>ab\u00e9\u4e2d ", max_size=30))
def test_needles_equal_in(tokens, text):
    assert native.Needles(tokens)(text) == any(t in text for t in tokens)


def test_needles_many_first_chars():
    tokens = [chr(c) + "!" for c in range(0x4E00, 0x4E40)]
    needles = native.Needles(tokens)
    assert needles("x\u4e3f!") and not needles("x\u4e3f") and not needles("!" * 50)
    with pytest.raises(TypeError):
        native.Needles([b"x"])


@settings(max_examples=1500, deadline=None)
@given(text=st.text(alphabet=" \t\n\r\x0b\x0c\x1c\x85\xa0\u2028\u3000ae\u0301<>", max_size=14),
       tokens=st.sampled_from([None, ["<a>"], ["a"], ["\u00e9"]]))
def test_route_is_nfc_search_and_llama3_cut(text, tokens):
    """``_nfc.Route`` (NFC, the search for the tokens a call matches, ``llama3_cut``, in
    one call) against those three steps in Python."""
    from fastbpe.bpe.hf import _spaces, llama3_cut

    needles = native.Needles(tokens) if tokens else None
    got = native.Route(True, True, _spaces())(text, needles)
    done = ref.nfc(text)
    holds = (lambda t: any(x in t for x in tokens)) if tokens else (lambda t: False)
    if done != text and (holds(text) or holds(done)):
        assert got == native.PIPELINE
    elif holds(done):
        assert got == native.OWN
    else:
        at = llama3_cut(done)
        assert got == (done if at is None else (done[:at], done[at:]))
    plain = native.Route(False, False, _spaces())(text, None)
    assert plain is text
