"""The native sentencepiece core (``fastbpe._spm``) against its specification, the reference.

Golden cases and hypothesis text on Mistral's files, tiny trained models and random
hand-made models (spaces and space marks inside pieces, which move the segments' cuts;
user-defined pieces, ties, no byte fallback), batches on threads, the numpy arrays the core
writes, ``merge``'s sorted run of initial pairs (forced on short texts by ``_set_run_min``),
and long inputs staying linear.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe.formats.sentencepiece_model import parse_model
from fastbpe.reference import sentencepiece as R
from fastbpe.reference.sentencepiece import (BPE, BYTE, CONTROL, NORMAL, UNKNOWN, USER_DEFINED, NormalizerSpec,
                                             Piece, SpmModel, TrainerSpec)

_spm = pytest.importorskip("fastbpe._spm", reason="the native extensions are not built")

sys.path.insert(0, str(Path(__file__).parent))
from spm_support import CORPUS, MISTRAL_FILES, TRAINED, joinable_walk, random_texts, trained_model  # noqa: E402

TEXT = st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Z", "Cc")), max_size=80)
SPACEY = st.text(st.sampled_from(list("ab  \t\n▁çğ中😀☃1[]<>")), max_size=60)
_CORES: dict = {}


def _cores(data: bytes, where: str):
    if data not in _CORES:
        tables = R.build_tables(parse_model(data, where), where)
        _CORES[data] = (_spm.SpmCore(tables), tables)
    return _CORES[data]


def _check(data: bytes, texts: list[str], where: str) -> None:
    core, tables = _cores(data, where)
    expected = [R.encode(t, tables) for t in texts]
    assert [core.encode(t) for t in texts] == expected, where
    assert core.encode_batch(texts, 2) == expected, where
    _check_numpy(core, texts, expected)


def _check_numpy(core, texts: list[str], expected: list[list[int]]) -> None:
    """The arrays the core writes (no lists between) hold the reference's ids."""
    for dtype in (np.uint32, np.uint16):
        ids, offsets = core.encode_batch_to_numpy(texts, 2, np.dtype(dtype))
        assert ids.dtype == dtype and offsets.dtype == np.int64 and len(offsets) == len(texts) + 1
        assert offsets[0] == 0 and offsets[-1] == len(ids)
        assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == expected
        for t, e in zip(texts[:5], expected):
            one = core.encode_to_numpy(t, np.dtype(dtype))
            assert one.dtype == dtype and one.tolist() == e


@pytest.mark.parametrize("name", MISTRAL_FILES)
def test_mistral_golden(vocab_file, name):
    data = vocab_file(name).read_bytes()
    _check(data, CORPUS + random_texts(11, 500) + random_texts(12, 200, "ab ▁☃\n"), name)


@pytest.mark.parametrize("name", MISTRAL_FILES)
@settings(max_examples=200)
@given(text=TEXT | SPACEY)
def test_mistral_hypothesis(vocab_file, name, text):
    _check(vocab_file(name).read_bytes(), [text, text + text], name)


@pytest.mark.parametrize("name", sorted(TRAINED))
def test_trained(name):
    _check(trained_model(name), CORPUS + random_texts(13, 300), name)


@pytest.mark.parametrize("name", sorted(TRAINED))
@settings(max_examples=60)
@given(text=TEXT | SPACEY)
def test_trained_hypothesis(name, text):
    _check(trained_model(name), [text], name)


PIECE_TEXT = st.text(st.sampled_from(list("ab▁c中 ")), min_size=1, max_size=4)


@st.composite
def hand_made(draw):
    texts = [x for x in draw(st.lists(PIECE_TEXT, min_size=1, max_size=25, unique=True))]
    byte_fallback = draw(st.booleans())
    head = [Piece("<unk>", 0.0, UNKNOWN), Piece("<s>", 0.0, CONTROL)]
    if byte_fallback:
        head += [Piece(R.byte_piece(b), 0.0, BYTE) for b in range(0, 256, draw(st.sampled_from([1, 3])))]
    pieces = [Piece(x, float(draw(st.integers(-4, 0))), draw(st.sampled_from([NORMAL] * 6 + [USER_DEFINED])))
              for x in texts]
    spec = NormalizerSpec("identity", b"", draw(st.booleans()), draw(st.booleans()), draw(st.booleans()))
    trainer = TrainerSpec(model_type=BPE, byte_fallback=byte_fallback, treat_whitespace_as_suffix=draw(st.booleans()))
    return SpmModel(tuple(head + pieces), trainer, spec)


@settings(max_examples=400)
@given(model=hand_made(), texts=st.lists(st.text(st.sampled_from(list("ab▁c中 d\n")), max_size=30), max_size=6))
def test_hand_made(model, texts):
    tables = R.build_tables(model)
    core = _spm.SpmCore(tables)
    assert core.merges_on_ids and core._id_pairs() == R.merge_pairs(tables)   # the native table's pairs
    expected = [R.encode(t, tables) for t in texts]
    assert [core.encode(t) for t in texts] == expected
    assert [core.encode(t) for t in texts] == expected      # again: from the segment cache
    assert core.encode_batch(texts, 3) == expected
    _check_numpy(core, texts, expected)


class _SortedRuns:
    """Every segment of two or more symbols through ``merge``'s sorted run of initial
    pairs (``_spm._set_run_min``), restored on exit."""

    def __enter__(self):
        self.old = _spm._set_run_min(2)

    def __exit__(self, *exc):
        _spm._set_run_min(self.old)


@settings(max_examples=300)
@given(model=hand_made(), texts=st.lists(st.text(st.sampled_from(list("ab▁c中 d\n")), max_size=30), max_size=6))
def test_hand_made_sorted_run(model, texts):
    """The sorted run of initial pairs beside the heap gives the heap's order (ties,
    frozen user-defined pieces, pairs that go stale), so the reference's ids."""
    tables = R.build_tables(model)
    with _SortedRuns():
        core = _spm.SpmCore(tables)
        assert [core.encode(t) for t in texts] == [R.encode(t, tables) for t in texts]


@pytest.mark.parametrize("name", MISTRAL_FILES)
@settings(max_examples=30)   # a fresh core each (~0.2 s to build)
@given(text=TEXT | SPACEY)
def test_mistral_sorted_run(vocab_file, name, text):
    data = vocab_file(name).read_bytes()
    tables = _cores(data, name)[1]
    with _SortedRuns():
        core = _spm.SpmCore(tables)    # fresh: no segment cached by the other path
        assert core.encode(text) == R.encode(text, tables)
        assert core.encode_batch([text, text + "x"], 2) == [R.encode(t, tables) for t in (text, text + "x")]


def test_sorted_run_hook_checks():
    with pytest.raises(ValueError, match="at least 2"):
        _spm._set_run_min(1)


def test_joinable_pairs_tables():
    """The native pair tables hold exactly the reference's pairs: small characters (below
    U+0600, and the space mark) as bits, the others in the probed table."""
    def tables(*pieces, escape=True):
        return R.build_tables(SpmModel((Piece("<unk>", 0.0, UNKNOWN),) + pieces, TrainerSpec(model_type=BPE),
                                       NormalizerSpec("identity", b"", True, False, escape)))

    bits, other = _spm.joinable_pairs(tables(Piece("▁▁a"), Piece("a▁b"), Piece("[u ]", 0.0, USER_DEFINED),
                                             Piece("中文"), Piece("é中"), Piece("ğı"), Piece("я▁")))
    n = 0x601                       # U+0000-U+05FF, then the space mark
    small = {k for k in range(len(bits) * 8) if bits[k >> 3] >> (k & 7) & 1}
    code = {0x600: "▁"}
    got = {code.get(k // n, chr(k // n)) + code.get(k % n, chr(k % n)) for k in small}
    assert got == {"▁▁", "▁a", "a▁", "▁b", "[u", "u ", " ]", "ğı", "я▁"}
    assert {chr(k >> 21) + chr(k & 0x1FFFFF) for k in other} == {"中文", "é中"}
    bits, other = _spm.joinable_pairs(tables(Piece("a▁"), escape=False))   # unescaped: ▁ is no space mark
    assert not any(bits) and [chr(k >> 21) + chr(k & 0x1FFFFF) for k in other] == ["a▁"]


def test_batches_keep_their_caches_and_share_nothing():
    """encode_batch's scratches (with their segment caches) are kept from call to call;
    batches running at once on other Python threads use their own and agree."""
    import threading

    data = trained_model("byte_fallback")
    core, tables = _cores(data, "byte_fallback")
    texts = CORPUS + random_texts(21, 400)
    expected = [R.encode(t, tables) for t in texts]
    results = []

    def run():
        for _ in range(5):
            results.append(core.encode_batch(texts, 3) == expected)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 15
    assert core.encode_batch(["x" * 2_000_000, "ab"], 2) == [R.encode(t, tables) for t in ["x" * 2_000_000, "ab"]]


def test_unused_pieces_stay_on_the_reference():
    from fastbpe.spm import SentencePieceBPE

    model = SpmModel((Piece("<unk>", 0.0, UNKNOWN), Piece("a"), Piece("ab", 0.0, 5)), TrainerSpec(model_type=BPE))
    with pytest.raises(ValueError, match="unused"):
        _spm.SpmCore(R.build_tables(model))
    tok = SentencePieceBPE(model)
    assert "unused" in tok.native_reason and tok.encode_ordinary("ab") == R.encode("ab", tok._tables)


def test_cache_full_of_distinct_segments(vocab_file):
    """More distinct segments than the cache has slots (short and long ones: words and
    indented words), encoded three times: every slot is taken, evicted and hit, and the
    ids stay the reference's, one text at a time and in batches."""
    import random

    core, tables = _cores(vocab_file(MISTRAL_FILES[0]).read_bytes(), "v1")
    rng = random.Random(5)
    letters = "abcdefghijklmnopqrstuvwxyzéğ中"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(1, 12))) for _ in range(45_000)]
    docs = []
    for i in range(0, len(words), 60):
        chunk = words[i:i + 60]
        docs.append(" ".join(chunk[:40]) + "\n" + "\n".join(" " * rng.choice([4, 8, 12, 16, 20]) + w for w in chunk[40:]))
    expected = [R.encode(d, tables) for d in docs]
    for _ in range(2):
        assert [core.encode(d) for d in docs] == expected
    assert core.encode_batch(docs, 2) == expected
    assert core.encode_batch(docs, 2) == expected


def _uncut_line(tables, size: int, seed: int = 0) -> str:
    """Letters without spaces where every adjacent pair stands side by side in some piece:
    no cut shortens it (``R.segments``), so it is one sequence of merges."""
    import random

    rng = random.Random(seed)
    pairs = R.joinable_pairs(tables)
    letters = "abcdefghijklmnopqrstuvwxyz"
    follow = {a: [b for b in letters if a + b in pairs] for a in letters}
    out, c = [], "t"
    for _ in range(size):
        c = rng.choice(follow[c])
        out.append(c)
    return "".join(out)


def test_long_line_is_not_quadratic(vocab_file):
    """A line no cut shortens is one sequence of merges (the heap): 5x the text must not
    cost 25x (quadratic); the bound (12x) is loose for a loaded machine's noise.
    (The issue's bound, 10 MB <= 12x the time of 1 MB, is measured by
    benchmarks/spm_peers.py --long: too slow for a unit test.)"""
    data = vocab_file(MISTRAL_FILES[0]).read_bytes()
    core, tables = _cores(data, "v1")
    big = _uncut_line(tables, 1_000_000)
    small = big[:200_000]
    assert len(R.segments(R.normalize(big[:5000], tables), R.joinable_pairs(tables))) == 1
    assert core.encode(small[:5000]) == R.encode(small[:5000], tables)
    # past merge's run_min (4096 symbols): the initial pairs in a sorted run
    assert core.encode(small[:30_000]) == R.encode(small[:30_000], tables)

    def best(text):   # CPU time: other processes on a shared machine do not count
        times = []
        for _ in range(3):
            t = time.process_time()
            core.encode(text)
            times.append(time.process_time() - t)
        return min(times)

    assert best(big) <= 12 * best(small)


@settings(max_examples=200)
@given(model=hand_made(), size=st.integers(0, 300), seed=st.integers(0, 2**16))
def test_hand_made_long_lines_through_buckets(model, size, seed):
    """``merge_buckets`` (every segment of two or more symbols, by ``_set_run_min(2)``)
    on walks over joinable pairs: ties of equal score, user-defined pieces, byte
    fallback, merges that make a better rank than the current one; the reference's ids."""
    tables = R.build_tables(model)
    text = joinable_walk(tables, "ab▁c中 d", size, seed)
    with _SortedRuns():
        core = _spm.SpmCore(tables)
        assert core.encode(text) == R.encode(text, tables)


def test_hand_made_long_line_at_the_default_run_min():
    """Walks past ``run_min`` (4096 symbols) with the default hook, on models whose
    scores tie and whose merges make better ranks than their parts."""
    pieces = [Piece(x, float(-i % 3), NORMAL) for i, x in enumerate(
        ["ab", "bc", "abc", "ca", "cab", "bca", "aa", "aab", "bb", "cc", "abca", "bcab", "中a", "a中"])]
    head = [Piece("<unk>", 0.0, UNKNOWN), Piece("<s>", 0.0, CONTROL)]
    for byte_fallback in (False, True):
        extra = [Piece(R.byte_piece(b), 0.0, BYTE) for b in range(256)] if byte_fallback else []
        tables = R.build_tables(SpmModel(tuple(head + extra + pieces), TrainerSpec(model_type=BPE,
                                                                                   byte_fallback=byte_fallback)))
        core = _spm.SpmCore(tables)
        for seed in range(3):
            text = joinable_walk(tables, "abc中", 6000, seed) + "x" + joinable_walk(tables, "abc", 5000, seed + 9)
            assert core.encode(text) == R.encode(text, tables)


@pytest.mark.parametrize("name", MISTRAL_FILES)
def test_mistral_long_lines_against_sentencepiece(vocab_file, name):
    """Lines no cut shortens, past ``run_min``, through ``merge_buckets``: the ids of
    sentencepiece itself and of the reference (with characters outside the vocabulary,
    byte fallback, and v3's user-defined pieces inside the line)."""
    from spm_support import processor

    data = vocab_file(name).read_bytes()
    core, tables = _cores(data, name)
    sp = processor(data)
    line = _uncut_line(tables, 70_000, seed=3)     # on ids, with the pairs' filter
    odd = ["\U0001F600", "\u0fff", "[REFERENCE_DOC_3]", "[REFERENCE_DOC_12]x", "中文", "ğ"]
    texts = [line[:5000], line,
             "".join(part + odd[i % len(odd)] for i, part in enumerate(line[k:k + 7000] for k in range(0, 70_000, 7000)))]
    for text in texts:
        assert core.encode(text) == sp.encode(text) == R.encode(text, tables), text[:40]


def test_whole_pieces_only_when_their_text_merges_into_them():
    """A segment that is exactly a piece's text is that piece only when merging the text
    alone makes it (decided at load): "▁abc" is a piece no merge reaches (no "▁ab",
    "ab" nor "bc"), "▁xy" is reached."""
    model = SpmModel((Piece("<unk>", 0.0, UNKNOWN), Piece("▁", -1.0), Piece("a", -1.0), Piece("b", -1.0),
                      Piece("c", -1.0), Piece("▁abc", -0.5), Piece("x", -1.0), Piece("y", -1.0), Piece("xy", -0.7),
                      Piece("▁xy", -0.6)), TrainerSpec(model_type=BPE, byte_fallback=False))
    tables = R.build_tables(model)
    core = _spm.SpmCore(tables)
    for text in ["abc", "xy", "abc xy abc", "xy abc"]:
        assert core.encode(text) == R.encode(text, tables), text
        assert core.encode(text) == R.encode(text, tables), text      # from the cache
    assert core.encode("abc") == [1, 2, 3, 4] and core.encode("xy") == [9]


# --------------------------------------------------------------------------- pairs on ids
def _spread(first: int, last: int, count: int) -> str:
    """count code points spread evenly over [first, last]."""
    step = max(1, (last - first) // count)
    return "".join(chr(c) for c in range(first, last + 1, step))


#: the ranges the one-character table and the pairs on ids see most: CJK Unified (and
#: extension A, and B beyond the BMP), Hiragana/Katakana, Hangul syllables and jamo,
#: CJK punctuation and full-width forms; with Latin around, runs of them, and characters
#: in no vocabulary (byte fallback)
CJK_RANGES = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x3040, 0x30FF), (0xAC00, 0xD7A3),
              (0x1100, 0x11FF), (0x3000, 0x303F), (0xFF00, 0xFFEF)]
STRESS = ([_spread(a, b, 400) for a, b in CJK_RANGES]
          + [" ".join(_spread(a, b, 60)) + " x" + _spread(a, b, 30) + "y" for a, b in CJK_RANGES]
          + ["Çekoslovakyalılaştıramadıklarımızdanmışsınızcasına " * 3,        # > SCAN_MAX letters: the heap
             "Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft",
             "pneumonoultramicroscopicsilicovolcanoconiosis" + "ab" * 30, "▁" * 60 + "return",
             "日本語のテキストとカタカナ、ひらがな。한국어 텍스트입니다. 中文和English混合mixed文本",
             "\U0001F600\U0002A6D6\U0010FFFF\u0fff\U00023456abc\u3400def"])


@pytest.mark.parametrize("name", MISTRAL_FILES)
def test_mistral_stress_against_sentencepiece(vocab_file, name):
    """Texts that stress the id tables, against sentencepiece itself and the reference."""
    from spm_support import processor

    data = vocab_file(name).read_bytes()
    core, tables = _cores(data, name)
    assert core.merges_on_ids and core._id_pairs() == R.merge_pairs(tables)
    sp = processor(data)
    for text in STRESS:
        assert core.encode(text) == sp.encode(text) == R.encode(text, tables), text[:40]
    _check(data, STRESS, name)


CJK_TEXT = st.text(st.one_of([st.characters(min_codepoint=a, max_codepoint=b) for a, b in CJK_RANGES]
                             + [st.sampled_from(list("ab ,.\n"))]), max_size=60)


@pytest.mark.parametrize("name", MISTRAL_FILES)
@settings(max_examples=300)
@given(text=CJK_TEXT)
def test_mistral_cjk_hypothesis(vocab_file, name, text):
    _against_sentencepiece(vocab_file, name, text)


def _against_sentencepiece(vocab_file, name: str, text: str) -> None:
    """The core's ids for text are sentencepiece's and the reference's."""
    from spm_support import processor

    data = vocab_file(name).read_bytes()
    core, tables = _cores(data, name)
    assert core.encode(text) == processor(data).encode(text) == R.encode(text, tables)


def test_models_past_16_bit_ids_merge_by_text():
    """A model with more ids than the pairs on ids hold (16 bits) merges short segments
    by text, to the reference's ids."""
    letters = "abcdefghij"
    texts = [a + b + c + d + e for a in letters for b in letters for c in letters for d in letters for e in letters]
    pieces = ([Piece("<unk>", 0.0, UNKNOWN), Piece("▁", -1.0)] + [Piece(c, -1.0) for c in letters]
              + [Piece(a + b, -2.0 - i) for i, (a, b) in enumerate((a, b) for a in letters for b in letters)]
              + [Piece(t, -200.0 - i) for i, t in enumerate(texts[:66000])])
    tables = R.build_tables(SpmModel(tuple(pieces), TrainerSpec(model_type=BPE)))
    core = _spm.SpmCore(tables)
    assert not core.merges_on_ids and core._id_pairs() is None and len(tables.texts) > 0xFFFF
    sample = ["abcde fghij", "aaaaabbbbbjjjjj", "abcdefghijabcdefghij" * 3, "j a bb ccc dddd eeeee", "xyz abc"]
    assert [core.encode(t) for t in sample] == [R.encode(t, tables) for t in sample]
    # long segments of such a model merge through the buckets by text (asking the piece
    # filter built at load), where a model with pairs on ids merges them on ids
    line = joinable_walk(tables, "abcdefghij", 3000, 7)
    expected = R.encode(line, tables)
    with _SortedRuns():
        core = _spm.SpmCore(tables)
        assert [core.encode(t) for t in sample] == [R.encode(t, tables) for t in sample]
        assert core.encode(line) == expected


# --------------------------------------------------------------------------- the fused scan
#: ``scan``'s one pass: walls and one-character segments written at once, other
#: segments held one turn with the ids found behind them (more than ``HELD`` = 64 of
#: them flush early), user-defined pieces (v3's [INST] ...), characters outside the
#: vocabulary (byte fallback), beyond the BMP, private use
FUSED_GOLDEN = ["日本語のテキストとカタカナ、ひらがな。한국어 텍스트입니다. 中文和English混合mixed文本",
                "▁ab" + "的" * 200 + " xy" + "。" * 64 + "zz" + "件" * 63 + "qq" + "文" * 65,
                "的的的 的。 件,文\n\n用：\U0002A6D6\U0001F600\ue000 x\ue001\ue002中",
                "[INST] 你好 [/INST] 世界[TOOL_CALLS]的[/INST]", "   中  ", "中", "x", "\u3000\u3001 ｈｅｌｌｏ ＡＢＣ",
                "Çekoslovakyalılaştıramadıklarımızdan mı? ı ş ğ: 'x', %5.",
                # one-byte characters that are no piece (newline, tab: their <0xXX> id
                # written at once, ``one_char_id``), alone, in runs, held behind a segment
                "\n", "\t", "a\nb\n\n\tc\t\n中\n", "\"%\n数据\n\n" * 3, "xy" + "\n" * 70 + "\t" * 3 + "q\x01\x7f"]
FUSED_TEXT = st.lists(st.one_of([st.characters(min_codepoint=a, max_codepoint=b) for a, b in CJK_RANGES]
                                + [st.characters(min_codepoint=0xE000, max_codepoint=0xE0FF),
                                   st.sampled_from(["[INST]", "[/INST]", "ı", "ş", "ğ", "\n", "\t", " ", "ab", ",", "."])]),
                      max_size=120).map("".join)

#: ``normalize`` copies 8 bytes at a time up to the first space or first byte of a
#: user-defined piece (at most 4 distinct first bytes among at most 32 pieces; else byte
#: by byte): spaces, runs of spaces and v3's [INST] ... at every offset of a word, at
#: the text's ends, multi-byte characters across a word's edge
NORMALIZE_GOLDEN = ["x" * i + "[INST]" + " " * j + "中文" * k + "[/INST]" + "ı" * j
                    for i in range(10) for j in (0, 1, 2, 9) for k in (0, 1, 3)]
NORMALIZE_TEXT = st.lists(st.sampled_from(list("ab  中ş\n") + ["[INST]", "[/INST]", "[", "▁", "abcdefgh"]),
                          max_size=40).map("".join)


@pytest.mark.parametrize("name", MISTRAL_FILES)
@pytest.mark.parametrize("golden", [FUSED_GOLDEN, NORMALIZE_GOLDEN], ids=["fused", "normalize"])
def test_fused_scan_golden(vocab_file, name, golden):
    for text in golden:
        _against_sentencepiece(vocab_file, name, text)
    _check(vocab_file(name).read_bytes(), golden, name)


@pytest.mark.parametrize("name", MISTRAL_FILES)
@settings(max_examples=300)
@given(text=st.one_of(FUSED_TEXT, NORMALIZE_TEXT))
def test_fused_scan_hypothesis(vocab_file, name, text):
    _against_sentencepiece(vocab_file, name, text)


def test_first_level_cache_gives_the_same_ids(vocab_file):
    """Short segments (up to 16 bytes, 7 ids) found in the cache's first level (32-byte
    entries) or in its 64-byte slots, or merged, give the same ids: each text three
    times (the later passes hit), with the first level on and off; and a model without
    byte fallback, where a cached segment's leading unknown id joins a run."""
    name = MISTRAL_FILES[0]
    data = vocab_file(name).read_bytes()
    tables = R.build_tables(parse_model(data, name), name)
    texts = CORPUS + FUSED_GOLDEN + random_texts(14, 300, "ab ı ş,.中\n")
    expected = [R.encode(t, tables) for t in texts]
    old = _spm._set_near(1)
    try:
        for setting in (1, 0, 1):
            _spm._set_near(setting)
            core = _spm.SpmCore(tables)
            for _ in range(3):
                assert [core.encode(t) for t in texts] == expected, setting
    finally:
        _spm._set_near(old)
    pieces = [Piece("<unk>", 0.0, UNKNOWN), Piece("a", -1.0), Piece("b", -1.0), Piece("ab", -0.5), Piece("▁", -2.0)]
    t = R.build_tables(SpmModel(tuple(pieces), TrainerSpec(model_type=BPE)))
    core = _spm.SpmCore(t)
    # segments of 8, 9, 15, 16 and 17 bytes (the first level keys up to 16), of up to 7
    # ids and more, after an unknown run
    edges = ["xxxxxxx xxxxxxxx", "ababababababab ababababababababx", "xabababababababab abababababababab",
             "ababababababab x" + "ab" * 8, "▁ab" * 5 + "x" + "▁ab" * 5]
    for text in (["xy ab xy xyab", "ab xx ab xx", "yab ab yab xxxxxxxxx xxxxxxxxx"] + edges) * 3:
        assert core.encode(text) == R.encode(text, t), text


# --------------------------------------------------------------------------- normalize's 8-byte steps
@pytest.mark.parametrize("firsts", ["[", "[<", "[<{(", "[<{(|", "abcdefgh", "[" * 32, "[" * 33])
def test_normalize_words_user_pieces(firsts):
    """Models whose user-defined pieces start with 1, 2, 4 distinct bytes (8-byte steps)
    and 5 or 8 (byte by byte), 32 pieces (8-byte steps) and 33 (byte by byte), with and
    without removing extra spaces."""
    pieces = [Piece("<unk>", 0.0, UNKNOWN), Piece("▁", -1.0), Piece("x", -1.0), Piece("xx", -2.0)]
    pieces += [Piece(f + "u" * i, 0.0, USER_DEFINED) for i, f in enumerate(firsts)]
    texts = ["xxxx" * 4 + f + "u" * 3 + "  xx " * 3 + "x" * i for i, f in enumerate(firsts)]
    texts += [" " * i + "x" * j + firsts[0] + " " * j for i in range(3) for j in range(10)]
    for remove in (True, False):
        spec = NormalizerSpec("identity", b"", True, remove, True)
        tables = R.build_tables(SpmModel(tuple(pieces), TrainerSpec(model_type=BPE), spec))
        core = _spm.SpmCore(tables)
        assert [core.encode(t) for t in texts] == [R.encode(t, tables) for t in texts], (firsts, remove)
