"""``fastbpe.reference.sentencepiece`` and the ``.model`` reader against sentencepiece itself.

sentencepiece is the judge of a ``.model`` file: ids and decoded text must equal
``SentencePieceProcessor``'s on Mistral's files (when /work/shared is there), on tiny
models sentencepiece trains here with the options that change encoding, and on random
hand-made models (scores with ties, unused pieces, user-defined and control pieces).
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe.formats.sentencepiece_model import parse_model, read_model
from fastbpe.reference import sentencepiece as R
from fastbpe.reference.sentencepiece import (BPE, BYTE, CONTROL, NORMAL, UNKNOWN, UNUSED, USER_DEFINED,
                                             NormalizerSpec, Piece, SpmModel, TrainerSpec)

sys.path.insert(0, str(Path(__file__).parent))
from spm_support import (CORPUS, MISTRAL_FILES, TRAINED, joinable_walk, model_bytes, nfkc_model,  # noqa: E402
                         processor, random_texts, trained_model)

spm = pytest.importorskip("sentencepiece", reason="sentencepiece is in the test extra")

TEXT = st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Z", "Cc")), max_size=60)
SPACEY = st.text(st.sampled_from(list("ab  \t\n▁çğ中😀☃1[]<>")), max_size=40)


@functools.lru_cache(maxsize=16)
def _loaded(data: bytes, where: str):
    return processor(data), R.build_tables(parse_model(data, where), where)


def _check(data: bytes, texts, where: str) -> None:
    sp, t = _loaded(data, where)
    for text in texts:
        ids = sp.encode(text)
        assert R.encode(text, t) == ids, (where, text)
        assert R.decode(ids, t) == sp.decode(ids), (where, text)


@pytest.mark.parametrize("name", MISTRAL_FILES)
def test_mistral_corpus(vocab_file, name):
    path = vocab_file(name)
    _check(path.read_bytes(), CORPUS + random_texts(0, 300), name)


@pytest.mark.parametrize("name", MISTRAL_FILES)
@settings(max_examples=150)
@given(text=TEXT | SPACEY)
def test_mistral_hypothesis(vocab_file, name, text):
    _check(vocab_file(name).read_bytes(), [text], name)


@pytest.mark.parametrize("name", MISTRAL_FILES)
def test_mistral_decode_any_ids(vocab_file, name):
    """Decoding random ids (control, unknown, lone and broken byte pieces) as sentencepiece."""
    import random

    sp, t = _loaded(vocab_file(name).read_bytes(), name)
    rng = random.Random(0)
    for _ in range(300):
        ids = [rng.randrange(len(t.texts)) if rng.random() < 0.5 else rng.randrange(800) for _ in range(rng.randint(0, 12))]
        assert R.decode(ids, t) == sp.decode(ids), ids


def test_mistral_specs(vocab_file):
    v3 = read_model(vocab_file(MISTRAL_FILES[1]))
    assert v3.normalizer_spec.name == "identity" and not v3.normalizer_spec.precompiled_charsmap
    assert v3.trainer_spec.model_type == BPE and v3.trainer_spec.byte_fallback
    assert [p.piece for p in v3.pieces[:6]] == ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]"]
    assert sum(p.type == USER_DEFINED for p in v3.pieces) == 20


@pytest.mark.parametrize("name", sorted(TRAINED))
def test_trained_models(name):
    texts = CORPUS + random_texts(1, 400) + ["x<sep>y [D10] [D1]z [INST] a b  a  b", "99999 1234"]
    _check(trained_model(name), texts, name)


@pytest.mark.parametrize("name", sorted(TRAINED))
@settings(max_examples=60)
@given(text=TEXT | SPACEY)
def test_trained_models_hypothesis(name, text):
    _check(trained_model(name), [text], name)


# --------------------------------------------------------------------------- hand-made models
def _model(pieces, byte_fallback=False, **normalizer) -> SpmModel:
    head = [Piece("<unk>", 0.0, UNKNOWN), Piece("<s>", 0.0, CONTROL), Piece("</s>", 0.0, CONTROL)]
    if byte_fallback:
        head += [Piece(R.byte_piece(b), 0.0, BYTE) for b in range(256)]
    spec = dict(name="identity", add_dummy_prefix=True, remove_extra_whitespaces=False, escape_whitespaces=True)
    spec.update(normalizer)
    return SpmModel(tuple(head + list(pieces)), TrainerSpec(model_type=BPE, byte_fallback=byte_fallback),
                    NormalizerSpec(**spec))


PIECE_TEXT = st.text(st.sampled_from(list("ab▁c中 ")), min_size=1, max_size=4)


@st.composite
def hand_made(draw):
    texts = draw(st.lists(PIECE_TEXT, min_size=1, max_size=25, unique=True))
    texts = [x for x in texts if x not in ("<unk>", "<s>", "</s>")]
    pieces = []
    for x in texts:
        kind = draw(st.sampled_from([NORMAL] * 6 + [UNUSED, USER_DEFINED]))
        score = float(draw(st.integers(-4, 0)))                       # small range: many ties
        pieces.append(Piece(x, score, kind))
    return _model(pieces, byte_fallback=draw(st.booleans()), add_dummy_prefix=draw(st.booleans()),
                  remove_extra_whitespaces=draw(st.booleans()), escape_whitespaces=draw(st.booleans()))


@settings(max_examples=300)
@given(model=hand_made(), texts=st.lists(st.text(st.sampled_from(list("ab▁c中 d\n")), max_size=20), max_size=5))
def test_hand_made_models(model, texts):
    data = model_bytes(model)
    assert parse_model(data) == model
    _check(data, texts, "hand-made")


def _merged_by_segments(text: str, t: R.SpmTables) -> tuple[list[str], list[str]]:
    """(``bpe`` of the whole normalized text, ``bpe`` of each segment joined)."""
    normalized = R.normalize(text, t)
    whole = R.bpe(R.initial_symbols(normalized, t.user_defined), t)
    parts = [p for seg in R.segments(normalized, R.joinable_pairs(t))
             for p in R.bpe(R.initial_symbols(seg, t.user_defined), t)]
    return whole, parts


@settings(max_examples=400)
@given(model=hand_made(), texts=st.lists(st.text(st.sampled_from(list("ab▁c中 d\n")), max_size=30), max_size=5))
def test_segments_merge_as_the_whole_text(model, texts):
    """``segments``' theorem: without unused pieces, merging segment by segment gives
    the pieces of merging the whole text (random pieces with spaces, space marks,
    user-defined pieces and many ties)."""
    t = R.build_tables(model)
    if any(kind == UNUSED for kind in t.types):
        return
    for text in texts:
        whole, parts = _merged_by_segments(text, t)
        assert parts == whole


@pytest.mark.parametrize("name", MISTRAL_FILES)
def test_segments_on_mistral(vocab_file, name):
    t = R.build_tables(read_model(vocab_file(name)))
    for text in CORPUS + ["".join(CORPUS) * 3]:
        whole, parts = _merged_by_segments(text, t)
        assert parts == whole


@settings(max_examples=300)
@given(model=hand_made(), size=st.integers(0, 400), seed=st.integers(0, 2**16),
       texts=st.lists(st.text(st.sampled_from(list("ab▁c中 d\n")), max_size=30), max_size=3))
def test_bucket_queue_is_the_heap_order(model, size, seed, texts):
    """``bucket_queue``'s corollary: the buckets by rank make ``bpe``'s merges (long
    walks over joinable pairs, many ties of equal score, user-defined pieces, pairs that
    go stale, merges that make a pair of a better rank than the current one)."""
    t = R.build_tables(model)
    if any(kind == UNUSED for kind in t.types):
        return
    for text in texts + [joinable_walk(t, "ab▁c中 ", size, seed)]:
        symbols = R.initial_symbols(R.normalize(text, t), t.user_defined)
        assert R.bucket_queue(symbols, t) == R.bucket_queue(symbols, t, on_ids=True) == R.bpe(symbols, t), text


def test_bucket_queue_with_a_better_rank_made_by_a_merge():
    """In "abc", "bc" (score -3) merges before "ab" (-4); then "a" + "bc" is "abc" (-1),
    a pair of a better rank than the one being read: it goes to the heap and merges
    next, before the rest of rank "bc"'s bucket (here the other "bc" pairs)."""
    t = R.build_tables(_model([Piece("abc", -1.0), Piece("cd", -2.0), Piece("bc", -3.0), Piece("ab", -4.0),
                               Piece("a", -5.0), Piece("b", -5.0), Piece("c", -5.0), Piece("d", -5.0)]))
    symbols = [(c, False) for c in "abc"]
    assert R.bpe(symbols, t) == R.bucket_queue(symbols, t) == ["abc"]
    for text in ("abcd", "cdabc", "abcabcd", "bcabc" * 7, "abc" * 50 + "d"):
        symbols = R.initial_symbols(R.normalize(text, t), t.user_defined)
        assert R.bucket_queue(symbols, t) == R.bpe(symbols, t), text


def test_bucket_queue_refuses_unused_pieces():
    t = R.build_tables(_model([Piece("ab", -1.0, UNUSED), Piece("a", -2.0), Piece("b", -2.0)]))
    with pytest.raises(ValueError, match="unused pieces"):
        R.bucket_queue([("a", False), ("b", False)], t)


# --------------------------------------------------------------------------- the fused scan
@functools.lru_cache(maxsize=4)
def _scan_tables(path: str):
    t = R.build_tables(read_model(path), path)
    return t, R.joinable_pairs(t), R.joining_chars(t)


def _fused_matches(text: str, t: R.SpmTables, pairs=None, joining=None) -> None:
    """``fused_scan`` is ``segments`` with the one-character ids written in, and
    ``encode_fused`` is ``encode``."""
    pairs = R.joinable_pairs(t) if pairs is None else pairs
    normalized = R.normalize(text, t)
    items = R.fused_scan(normalized, t, pairs, joining)
    segs = R.segments(normalized, pairs)
    assert len(items) == len(segs), text
    for item, seg in zip(items, segs):
        assert item == (seg if len(seg) > 1 or R.one_char_id(seg, t) is None else R.one_char_id(seg, t)), text
    assert R.encode_fused(text, t, pairs, joining) == R.encode(text, t), text


#: what the fused scan cuts: CJK Unified (and extension A, B beyond the BMP), kana,
#: Hangul syllables and jamo, CJK punctuation, full-width forms, with Latin, spaces,
#: digits, newlines, emoji and characters outside any vocabulary around them
FUSED_RANGES = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x3040, 0x30FF), (0xAC00, 0xD7A3),
                (0x1100, 0x11FF), (0x3000, 0x303F), (0xFF00, 0xFFEF), (0x1F600, 0x1F64F), (0xE000, 0xE0FF)]
FUSED_TEXT = st.text(st.one_of([st.characters(min_codepoint=a, max_codepoint=b) for a, b in FUSED_RANGES]
                               + [st.sampled_from(list("abçğı  ,.\n12[]INST/"))]), max_size=60)
FUSED_GOLDEN = ["日本語のテキストとカタカナ、ひらがな。한국어 텍스트입니다. 中文和English混合mixed文本",
                "的的的 的。 件,文\n\n用：𪛖😀\ue000 x", "Çekoslovakyalılaştıramadıklarımızdan mı?",
                "[INST] 你好 [/INST] 世界[TOOL_CALLS]", "   中  ", "", "\u3000\u3001 ｈｅｌｌｏ ＡＢＣ"]


def test_fused_scan_examples():
    t = R.build_tables(_model([Piece("▁a", -1.0), Piece("中", -2.0), Piece("a", -3.0), Piece("▁", -4.0),
                               Piece("b", -5.0), Piece("ab", -6.0), Piece("<x>", 0.0, USER_DEFINED)]))
    # 中 is a wall (written without a look at its neighbours); "b" before "中" is a
    # one-character segment; "ab" merges; "<x>" (user-defined) and "z" (no piece) take
    # the general path
    assert R.fused_scan("▁a中b中ab<x>z", t) == ["▁a", 4, 7, 4, "ab", "<x>", "z"]
    for text in ["a中b", "中中 中", "<x>中", "zz中zz", "ab ab中"]:
        _fused_matches(text, t)


@pytest.mark.parametrize("name", MISTRAL_FILES)
def test_fused_scan_on_mistral(vocab_file, name):
    t, pairs, joining = _scan_tables(str(vocab_file(name)))
    for text in FUSED_GOLDEN + CORPUS:
        _fused_matches(text, t, pairs, joining)


@pytest.mark.parametrize("name", MISTRAL_FILES)
@settings(max_examples=150)
@given(text=FUSED_TEXT)
def test_fused_scan_on_mistral_hypothesis(vocab_file, name, text):
    _fused_matches(text, *_scan_tables(str(vocab_file(name))))


@settings(max_examples=300)
@given(model=hand_made(), texts=st.lists(st.text(st.sampled_from(list("ab▁c中 d\n")), max_size=30), max_size=5))
def test_fused_scan_on_hand_made_models(model, texts):
    """The corollary on random pieces (walls and joining characters of every kind,
    user-defined pieces, unknown runs without byte fallback)."""
    t = R.build_tables(model)
    if any(kind == UNUSED for kind in t.types):
        return
    for text in texts:
        _fused_matches(text, t)


def test_unused_pieces_are_split_back():
    model = _model([Piece("a", -1.0), Piece("b", -1.0), Piece("ab", -0.5, UNUSED), Piece("abb", -0.25),
                    Piece("▁", -3.0)])
    t = R.build_tables(model)
    assert R.encode("ab abb", t) == processor(model_bytes(model)).encode("ab abb") == [7, 3, 4, 7, 6]


def test_unused_symbols_are_unknown():
    for byte_fallback in (False, True):
        model = _model([Piece("b", 0.0), Piece(" ", 0.0, UNUSED), Piece("a", 0.0, UNUSED), Piece("ab", -1.0, UNUSED),
                        Piece("abb", -2.0)], byte_fallback=byte_fallback, add_dummy_prefix=False,
                       escape_whitespaces=False)
        sp, t = processor(model_bytes(model)), R.build_tables(model)
        for text in [" ", "a", "  ", " ☃", "☃ a", "ab", "abb", "bab"]:
            assert R.encode(text, t) == sp.encode(text), (byte_fallback, text)


def test_unknown_runs_fuse_without_byte_fallback():
    model = _model([Piece("a", -1.0), Piece("▁", -2.0)])
    t = R.build_tables(model)
    assert R.encode("a☃☃xa", t) == processor(model_bytes(model)).encode("a☃☃xa") == [4, 3, 0, 3]


# --------------------------------------------------------------------------- refusals
def test_refuses_character_map():
    with pytest.raises(ValueError, match=r"normalizer_spec.precompiled_charsmap \(nmt_nfkc"):
        R.build_tables(parse_model(nfkc_model(), "nfkc.model"), "nfkc.model")


def test_refuses_unigram_and_broken_models(tmp_path):
    unigram = SpmModel((Piece("<unk>", 0.0, UNKNOWN),), TrainerSpec(model_type=1))
    with pytest.raises(ValueError, match="model_type is unigram"):
        R.build_tables(parse_model(model_bytes(unigram)), "u.model")
    with pytest.raises(ValueError, match="no unknown piece"):
        R.build_tables(SpmModel((Piece("a", 0.0),), TrainerSpec(model_type=BPE)))
    with pytest.raises(ValueError, match=r"pieces\[2\] 'a' is already defined"):
        R.build_tables(SpmModel((Piece("<unk>", 0.0, UNKNOWN), Piece("a"), Piece("a")), TrainerSpec(model_type=BPE)))
    with pytest.raises(ValueError, match="byte_fallback is off"):
        R.build_tables(SpmModel((Piece("<unk>", 0.0, UNKNOWN), Piece("<0x00>", 0.0, BYTE)), TrainerSpec(model_type=BPE)))
    data = model_bytes(_model([Piece("a", -1.0)]))
    path = tmp_path / "cut.model"
    path.write_bytes(data[:-3])
    with pytest.raises(ValueError, match="cut.model"):
        read_model(path)
    with pytest.raises(ValueError, match="no pieces"):
        parse_model(b"", "empty.model")
    with pytest.raises(ValueError, match="wire type 7"):
        parse_model(b"\x0f", "x.model")
