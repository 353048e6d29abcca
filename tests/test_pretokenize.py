"""Native pre-tokenizers split exactly as regex.findall does with tiktoken's patterns."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import regex
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fastbpe import _pretokenize as P
from fastbpe.reference import patterns as R

PATTERNS = {"gpt2": R.GPT2, "cl100k": R.CL100K, "o200k": R.O200K, "cl100k_digit1": R.CL100K_DIGIT1}
COMPILED = {name: regex.compile(pat) for name, pat in PATTERNS.items()}
N_CODE_POINTS = 0x110000


def expected(text: str, name: str) -> list[str]:
    return COMPILED[name].findall(text)


def assert_same_split(text: str) -> None:
    for name in PATTERNS:
        want = expected(text, name)
        got = P.split(text, name)
        assert got == want, (name, text)


# ---------------------------------------------------------------------------------------
# Unicode tables


@pytest.fixture(scope="module")
def all_code_points() -> str:
    return "".join(map(chr, range(N_CODE_POINTS)))  # lone surrogates included


def regex_members(cls: str, text: str) -> np.ndarray:
    member = np.zeros(N_CODE_POINTS, dtype=bool)
    member[[m.start() for m in regex.finditer(cls, text)]] = True
    return member


CLASS_REGEX = {
    "L": r"\p{L}", "N": r"\p{N}", "WS": r"\s", "M": r"\p{M}",
    "U": r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", "W": r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]",
    "Lu": r"\p{Lu}", "Ll": r"\p{Ll}", "Lt": r"\p{Lt}", "Lm": r"\p{Lm}", "Lo": r"\p{Lo}",
    "CRLF": r"[\r\n]",
}


def test_class_table_matches_regex_for_every_code_point(all_code_points):
    table = P._class_table()
    assert table.shape == (N_CODE_POINTS,)
    assert set(CLASS_REGEX) == set(P.CLASS_BITS)
    for name, cls in CLASS_REGEX.items():
        ours = (table & P.CLASS_BITS[name]) != 0
        theirs = regex_members(cls, all_code_points)
        diff = np.flatnonzero(ours != theirs)
        assert diff.size == 0, (
            f"{name} ({cls}) differs from regex {regex.__version__} at "
            f"{[hex(c) for c in diff[:10]]}; regenerate with tools/gen_unicode_tables.py"
        )


#: regex's general categories, in the order of the compiled table's names
GENERAL_CATEGORIES = "Lu Ll Lt Lm Lo Mn Mc Me Nd Nl No Pc Pd Ps Pe Pi Pf Po Sm Sc Sk So Zs Zl Zp Cc Cf Cs Co Cn".split()


def test_general_category_table_matches_regex_for_every_code_point(all_code_points):
    """The general-category table the split programs build their properties from at load
    (``_split_program.table_primitive``): every category, every one-letter class and
    ``\\s`` equal ``regex``'s on every code point; anything else is left to ``regex``."""
    SP = pytest.importorskip("fastbpe._split_program")
    gc1, gc_blocks, space1, space_blocks, names = SP.category_table()
    assert list(names) == GENERAL_CATEGORIES
    cps = np.arange(N_CODE_POINTS)
    gc = gc_blocks[gc1[cps >> 7], cps & 127]
    assert (space_blocks[space1[cps >> 7], cps & 127] == regex_members(r"\s", all_code_points)).all()
    classes = [rf"\p{{{name}}}" for name in GENERAL_CATEGORIES + sorted({n[0] for n in GENERAL_CATEGORIES})]
    for cls in classes + [r"\s"]:
        theirs = regex_members(cls, all_code_points)
        ours = SP.table_primitive(cls)
        diff = np.flatnonzero(ours != theirs)
        assert diff.size == 0, (
            f"{cls} differs from regex {regex.__version__} at {[hex(c) for c in diff[:10]]}; "
            "regenerate with tools/gen_unicode_tables.py")
        if cls[3:-1] in GENERAL_CATEGORIES:
            assert (ours == (gc == GENERAL_CATEGORIES.index(cls[3:-1]))).all(), cls
    for other in [r"\p{Han}", r"\p{Lc}", r"\p{lu}", r"\p{X}", r"\S", "[a]", r"\d", r"\p{Letter}"]:
        assert SP.table_primitive(other) is None, other


def tiktoken_members(cls: str) -> np.ndarray:
    """The code points tiktoken's own regex engine puts in ``cls``: encode every code
    point with ``cls`` as the split pattern (unmatched text is dropped) and decode."""
    tiktoken = pytest.importorskip("tiktoken")
    enc = tiktoken.Encoding("probe", pat_str=cls, mergeable_ranks={bytes([i]): i for i in range(256)},
                            special_tokens={})
    text = "".join(chr(c) for c in range(N_CODE_POINTS) if not 0xD800 <= c <= 0xDFFF)
    member = np.zeros(N_CODE_POINTS, dtype=bool)
    member[[ord(c) for c in enc.decode_bytes(enc.encode_ordinary(text)).decode("utf-8")]] = True
    return member


def test_class_table_matches_tiktoken_for_every_code_point():
    """Decision: the Unicode version is tiktoken's (so ids equal tiktoken's on every
    character): the tables come from the regex release with the same Unicode data."""
    table = P._class_table()
    not_surrogate = np.ones(N_CODE_POINTS, dtype=bool)
    not_surrogate[0xD800:0xE000] = False
    for name in ["L", "N", "WS", "M", "U", "W", "Lu", "Ll", "Lt", "Lm", "Lo"]:
        ours = ((table & P.CLASS_BITS[name]) != 0) & not_surrogate
        diff = np.flatnonzero(ours != tiktoken_members(CLASS_REGEX[name]))
        assert diff.size == 0, (
            f"{name} differs from tiktoken at {[hex(c) for c in diff[:10]]}: tiktoken's Unicode "
            "version moved; regenerate the tables with the regex release that matches it"
        )


def test_classes_partition_code_points():
    # The tiling argument relies on L, N and \s being disjoint.
    table = P._class_table()
    for a, b in [("L", "N"), ("L", "WS"), ("N", "WS"), ("M", "L"), ("M", "N")]:
        both = ((table & P.CLASS_BITS[a]) != 0) & ((table & P.CLASS_BITS[b]) != 0)
        assert not np.any(both), (a, b)


@pytest.mark.parametrize("letter", list("sdmtlvre"))
def test_case_fold_table_matches_regex(letter, all_code_points):
    folds = P._fold_table()
    ours = folds == ord(letter)
    theirs = regex_members(f"(?i:{letter})", all_code_points)
    diff = np.flatnonzero(ours != theirs)
    assert diff.size == 0, [hex(c) for c in diff[:10]]
    assert not np.any((folds != 0) & (np.isin(folds, [ord(c) for c in "sdmtlvre"]) == 0))


def test_contractions_with_every_case_variant(all_code_points):
    # Every code point that regex's (?i) equates with an ASCII letter (for example U+017F
    # LONG S with "s", U+212A KELVIN SIGN with "k"), in the contraction positions.
    variants = sorted({m.group() for m in regex.finditer(r"(?i:[a-z])", all_code_points)})
    assert "\u017f" in variants and "\u212a" in variants
    for c in variants:
        for text in ["'" + c, "'" + c + "x", "a'" + c, "A'" + c, "'l" + c, "'" + c + "l",
                     "'" + c + "e", "'v" + c, "'r" + c, "ab'" + c + "e", "AB'" + c + c]:
            assert_same_split(text)


def test_table_source_names_versions():
    assert P.UNICODE_SOURCE.startswith("regex ")
    assert "Unicode" in P.UNICODE_SOURCE


# ---------------------------------------------------------------------------------------
# Golden strings

CONTRACTIONS = [
    "'s", "'S", "'t", "'T", "'d", "'D", "'m", "'M", "'ll", "'LL", "'Ll", "'lL", "'ve",
    "'VE", "'vE", "'re", "'RE", "'Re", "'ſ", "'ſt", "'x", "'", "''s", "'l", "'v", "'r",
    "’s", "’S", "'K", "'\u212a",
]

GOLDEN = [
    "",
    "Hello world",
    "Hello world!!",
    "I'm sure you'll see it's what they've said they'd do, we're done",
    "I'M SURE YOU'LL SEE IT'S WHAT THEY'VE SAID THEY'D DO, WE'RE DONE",
    "don’t can’t won’t",
    "a  b   c    d",
    "  leading and trailing  ",
    "trailing newline\n",
    "trailing spaces then newline  \n",
    "trailing newline then spaces\n  ",
    "two newlines\n\n",
    "line one\r\nline two\r\n",
    "\r\n\r\n",
    "tabs\tand\t\tmore\ttabs\t",
    "\t\tindented\n\t\tcode",
    " ",
    "\n",
    "   ",
    "x\n   \n y",
    "digits 1 12 123 1234 12345 123456",
    "١٢٣٤ ١٢٣٤٥",
    "१२३ १२३४",
    "１２３４ ５",
    "Ⅻ ⅻ ½ ² ₃",
    "emoji 👍🏽 👨\u200d👩\u200d👧\u200d👦 🏳️\u200d🌈!",
    "combining e\u0301 a\u0300\u0301 \u0301x \u0301 \u0301",
    "İstanbul'da İSTANBUL'DA istanbul'da",
    "ǅemal ǅ Ǆ ǆ",
    "中文字符测试，这是一个句子。",
    "日本語のテキスト、カタカナとひらがな。",
    "한국어 텍스트",
    "مرحبا بالعالم ١٢٣",
    "नमस्ते दुनिया १२३",
    "Ελληνικά ΣΊΣΥΦΟΣ ς",
    "def f(x):\n    return x**2 + 1  # comment\n",
    "if (a && b) { return c->d[0]; }\n",
    "path/to/file.txt // comment\r\n/* block */",
    "!\r/ ?\n/ ,\r\n// x!/\n/",
    "HELLO world HeLLo wORLD",
    "ʰello ʰHELLO",
    "a\u00a0b\u3000c\u2028d\u2029e\x85f\x0bg\x0ch",
    "    \n    ",
    "x   \n",
    "(hello) [world] {foo}",
    "$100 €200 ¥300",
    "e-mail: someone@example.com, https://example.com/a?b=c&d=e",
    "\u0301",
    "a\u0301\u0301b",
    "Ab\u0301C",
    "A\u0301\u0301!",
    "!\u0301A",
    " \u0301A",
    " \u0301!",
    "\u0301!",
    "'\u0301s",
    "HELLO's HELLO'S Hello'S hello'LL",
]


@pytest.mark.parametrize("text", GOLDEN + CONTRACTIONS + [c + "x" for c in CONTRACTIONS]
                         + ["a" + c for c in CONTRACTIONS] + ["A" + c for c in CONTRACTIONS])
def test_golden(text):
    assert_same_split(text)


@pytest.mark.parametrize("ws", [" ", "  ", "\t", " \t", "\n", " \n", "\n ", "\r\n",
                                "\u00a0", "\u3000", "\n\n", " \r\n ", "\x0b"])
@pytest.mark.parametrize("after", ["", "x", "!", "1", "\n", " ", "\u0301", "'s"])
@pytest.mark.parametrize("before", ["", "x", "!", "1"])
def test_whitespace_runs(before, ws, after):
    assert_same_split(before + ws + after)
    assert_same_split(before + ws * 3 + after)


@pytest.mark.parametrize("run", ["x", "X", "ab", "é", "中"])
def test_runs_end_at_every_byte_offset(run):
    # The ASCII fast path tests 8 bytes at a time: end runs at every offset around the
    # 8-byte steps, on every ASCII char and a few non-ASCII ones.
    stops = [chr(c) for c in range(128)] + ["é", "\u0301", "中", "١", "\u00a0", "👍"]
    for n in range(0, 19):
        for stop in stops:
            assert_same_split(run * n + stop + "yz")
            assert_same_split(" " + run * n + stop)


def test_dollar_before_final_newline():
    # Python-regex "$" also matches before a final "\n": \s++$ must still behave.
    for text in ["a \n", "a  \n", "a\t\n", "a \n\n", "a \nb", "a  \r\n", "a\n \n"]:
        assert_same_split(text)


# ---------------------------------------------------------------------------------------
# Generated text

TRICKY = [
    "a", "z", "A", "Z", "s", "S", "t", "l", "L", "v", "e", "r", "d", "m", "'", "’", " ",
    "  ", "\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x85", "\u00a0", "\u2028", "\u3000",
    "!", "?", ".", ",", "/", "-", "_", "$", "(", ")", "0", "7", "١", "३", "１", "Ⅻ", "½",
    "é", "\u0301", "\u0300", "\u20dd", "ǅ", "ʰ", "ˆ", "中", "あ", "ア", "İ", "ı", "ſ",
    "\u212a", "Σ", "σ", "ς", "ß", "ﬅ", "\u200d", "👍", "🏽", "Hello", "HELLO", "hello",
    "'s", "'S", "'ll", "'LL", "'ve", "'re", "'d", "'m", "'t", "'ſ", "'x", "ǅemal",
    "\U0001e030", "\u0903", "ःa",
    # One or two of each class o200k tells apart: Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, N, \s.
    "Ω", "Ǆ", "ß", "ᾈ", "ᵃ", "ˆ", "א", "\u0300", "\u093e", "\u20dd", "²", "\u2009",
]

tricky_text = st.lists(
    st.one_of(st.sampled_from(TRICKY), st.text(max_size=4), st.characters()),
    max_size=30,
).map("".join)


@settings(max_examples=1000)
@given(tricky_text)
@example("a\ud800b")
def test_generated_text_gpt2(text):
    assert P.split(text, "gpt2") == expected(text, "gpt2")


@settings(max_examples=1000)
@given(tricky_text)
def test_generated_text_cl100k(text):
    assert P.split(text, "cl100k") == expected(text, "cl100k")


@settings(max_examples=1000)
@given(tricky_text)
def test_generated_text_cl100k_digit1(text):
    assert P.split(text, "cl100k_digit1") == expected(text, "cl100k_digit1")


@settings(max_examples=1000)
@given(tricky_text)
def test_generated_text_o200k(text):
    assert P.split(text, "o200k") == expected(text, "o200k")


# Windows (_split_fast.h / _split_fill.h / _split_<pattern>.h) decide chunks 64 bytes at a time, only
# where 64 bytes of the segment are left: texts here are long enough, and mostly made of
# what the masks handle (ASCII, two-byte letters, symbols and spaces), with some of what
# they leave to the scalar splitter (three-byte chars, digit runs, suffixes, marks).
WINDOW_PIECES = [
    "a", "z", "A", "Z", "word", " word", "Word", " Word", "WORD", "wORD", "camelCase",
    "HTTPServer", " ", "  ", "   ", "\t", " \t", "\n", "\n\n", "\r\n", " \n", "\n ",
    "\n  \n", "\x0b", "\x0c", "\x85", "\u00a0", "\u2028", "\u3000", "!", "?", ".", "..",
    ",", "/", "//", "-", "(", ")", "\"", "'", "''", "'s", "'S", "'t", "'ll", "'LL", "'ve",
    "'re", "'RE", "'d", "'m", "'x", "'l", "'r", "'ſ", "ſ", "0", "7", "12", "123", "1234",
    "١", "ç", "ş", "ğ", "ı", "İ", "ö", "Ü", "é", "É", "ß", "×", "÷", "«", "»", "§", "©",
    "ǅ", "ª", "ʰ", "\u0301", "Σ", "σ", "Ω", "\u05d0", "“", "”", "’", "中", "あ", "👍",
    "\x00", "\x1c", "\x7f", "~", "_", "@", "`", "[", "{",
    # three-byte chars: punctuation, spaces, letters of one case, numbers, marks, Lo
    "—", "…", "„", "\u2009", "\u200b", "\u202f", "Ạ", "ạ", "ｄ", "Ｄ", "０", "१", "क", "\u0901",
    "€", "→", "한", "。", "、",
]
window_text = st.lists(st.sampled_from(WINDOW_PIECES), min_size=20, max_size=120).map("".join)


@settings(max_examples=1500)
@given(window_text)
@example("x" * 70 + "'s" + "y" * 70)
@example("a" * 61 + " \n  \n b" + "c" * 70)
@example("a" * 40 + "!\n/word" + "b" * 70)
# found by a longer random search: whitespace after "\n" that runs into a char the masks
# leave alone (U+3000 is whitespace), or to the window's end, then "\n" again
@example("é''123ÉababWord@'m\n    \u3000\n1234'm\n 'm12345'dé   \x7f''Éİé..é")
@example("ab\n" + " " * 61 + "\u3000\n" + "c" * 70)
@example("x\n" + " " * 80 + "\ny")
def test_generated_text_o200k_windows(text):
    _check_both_paths(text, "o200k")


@settings(max_examples=1500)
@given(window_text)
@example("x" * 70 + "'s" + "y" * 70)
@example("don't 's it's 'tis ((x (hello 'hello ' \t's 1's ..'s 'ſ 'LL 'Re" * 4)
@example("a" * 61 + " \n  \n b" + "c" * 70)
@example("e\u0301x \u0301x \u00a0x \u00a0(x \x85x \t(x " * 8)
@example("ab\n" + " " * 61 + "\u3000\n" + "c" * 70)
@example("x\n" + " " * 80 + "\ny")
@example("(\n\n  \n" * 20 + "z" * 70)
def test_generated_text_cl100k_windows(text):
    _check_both_paths(text, "cl100k")


@settings(max_examples=1500)
@given(window_text)
@example("x" * 70 + "'s" + "y" * 70)
@example("1" * 200 + " 2" * 40)
@example("a" + "1234567890" * 15 + "١" + "12 " * 20)
@example("a" * 58 + "123456" + "b" * 70)
@example(("x1 12 123 1234 12345 (1) '1 1's a1b " + "\u00a0" + "9\n") * 6)
def test_generated_text_cl100k_digit1_windows(text):
    """cl100k's window rules with the digit-run parameter 1 (every digit a chunk)."""
    _check_both_paths(text, "cl100k_digit1")


# GPT-2's pattern cuts otherwise: contractions are case-sensitive and tried wherever a
# chunk starts, the only prefix is one space, digit runs are unbounded, marks are "other".
GPT2_WINDOW_PIECES = WINDOW_PIECES + [
    " 's", "\n's", "\t'll", "x's", "5's", "'''", "((", "ll", "ve", "re", "s", "t", "'sa",
    "²", "½", "١٢٣", "1234567", "\u00a0a", " \u0301", "e\u0301", "\u00a0 ", "  \t",
    "中文", " 中", "，", "。", "〇", "Ⅻ", "\u2009", "\u3000 ", " \u3000", "\u0903", "\ud800",
]
gpt2_window_text = st.lists(st.sampled_from(GPT2_WINDOW_PIECES), min_size=20,
                            max_size=120).map("".join)


@settings(max_examples=1500)
@given(gpt2_window_text)
# contractions where the window's decided starts end (byte 56-63 of a window at 0)
@example("a" * 58 + "'s" + "b" * 70)
@example("a" * 59 + "'ll" + "b" * 70)
@example("a" * 61 + "'ve" + "b" * 70)
@example("a" * 62 + "'re" + "b" * 70)
@example("x" * 70 + "'s" + "y" * 70)
@example("don't " * 30)
# an apostrophe after a space, a newline, a tab, a letter, a digit, other chars
@example(" 's \n's \t'd x's 5's (('s ''s 's's 'sa 'lx 'LL " * 8)
# whitespace runs up to the end margin, across the window's end, to the text's end
@example("a" * 55 + " " * 8 + "b" * 70)
@example("a" * 58 + "  \n" + "b" * 70)
@example("a" * 57 + "\u00a0\u00a0x" + "b" * 70)
@example("a" * 58 + " \u00a0" + "b" * 70)
@example("a" * 60 + "\n" + " " * 10 + "\u3000\n" + "c" * 70)
@example("x\n" + " " * 80 + "\ny")
@example("word " * 20 + "   ")
@example("word " * 20 + " \n\t ")
# long digit runs, two-byte numbers and marks
@example("1" * 200 + " 2" * 40)
@example("a" + "1" * 100 + "²½١" * 20 + " x")
@example("e\u0301 \u0301x " * 20)
# three-byte chars: whitespace runs that end on one near the margin, numbers, letters
@example("a" * 52 + " \u3000x" + "b" * 70)
@example("a" * 53 + "\u3000\u2009中" + "b" * 70)
@example("a" * 55 + "\u3000 中" + "b" * 70)
@example("中文，" * 30 + "〇Ⅻ" * 10 + " 中")
@example("a\ud800b " * 30)
def test_generated_text_gpt2_windows(text):
    _check_both_paths(text, "gpt2")


def _check_both_paths(text, name):
    """Windows (with each classifier build the CPU runs) and the scalar splitter alone
    split as regex does."""
    want = expected(text, name)
    for simd in SIMD_BUILDS:
        old = P._set_win_simd(simd)
        try:
            assert P.split(text, name) == want, simd
        finally:
            P._set_win_simd(old)
    old = P._set_window_split(False)
    try:
        assert P.split(text, name) == want
    finally:
        P._set_window_split(old)


def _simd_builds():
    """The window classifier builds this CPU runs ("avx2" only where it has AVX2)."""
    builds = []
    for simd in ("sse2", "avx2"):
        old = P._set_win_simd(simd)
        if P.win_simd() == simd:
            builds.append(simd)
        P._set_win_simd(old)
    return builds


SIMD_BUILDS = _simd_builds()
all_window_text = st.lists(st.sampled_from(GPT2_WINDOW_PIECES), min_size=30,
                           max_size=120).map("".join)


def test_simd_default_is_the_best_build_the_cpu_runs():
    if P.win_simd() == "none":
        pytest.skip("this build has no windows (not x86 with GCC/Clang)")
    assert P.win_simd() == SIMD_BUILDS[-1]


def test_simd_knob_is_checked():
    with pytest.raises(ValueError, match="'avx512'"):
        P._set_win_simd("avx512")


@settings(max_examples=1500)
@given(all_window_text, st.integers(0, 200), st.sampled_from(["gpt2", "cl100k", "o200k", "cl100k_digit1"]))
@example("a" * 70, 3, "gpt2")
@example("“quoted” — dash… 中文，ok's 123 \u3000\r\n\t x" * 4, 5, "cl100k")
@example("don't (x) 12 camelCase\t\n  é ß " * 4, 0, "o200k")
def test_simd_builds_give_the_same_masks(text, base, name):
    # bit for bit, at any base (the masks are a function of the 64 bytes); the plain
    # builds (no three-byte terms) too, on windows without a byte of 0xE0 or more
    if not SIMD_BUILDS:
        pytest.skip("this build has no windows")
    data = text.encode("utf-8", "surrogatepass")
    if len(data) < 64:
        return
    base %= len(data) - 63
    plain = max(data[base:base + 64]) < 0xE0
    masks = []
    for simd in SIMD_BUILDS:
        old = P._set_win_simd(simd)
        try:
            masks.append(P._window_starts(data, name, base))
            if plain:
                masks.append(P._window_starts(data, name, base, three=False))
        finally:
            P._set_win_simd(old)
    assert len(set(masks)) == 1


LATIN_TEXT = ("Türkçe metin, İstanbul'da \"çok\" güzel. It's a Test of HTTPServer's\n"
              "    code (with 12 numbers) and  spaces.\n\n")
# curly quotes, dashes, ellipses and Latin Extended Additional (three-byte chars) are in
# the masks: they do not send windows to the scalar splitter
TYPOGRAPHIC_TEXT = ("“Quoted” text — with dashes… and ‘single’ quotes; "
                    "Việt Nam, naïve café – it’s 12\u202f%.\n")


@pytest.mark.parametrize("name", ["gpt2", "cl100k", "o200k", "cl100k_digit1"])
@pytest.mark.parametrize("line", [LATIN_TEXT, TYPOGRAPHIC_TEXT], ids=["latin", "typographic"])
def test_windows_decide_most_chunks_of_latin_text(name, line):
    # the fast path is taken (a regression would still split right, only slower)
    text = line * 50
    data = text.encode()
    chunks, scalar = P._win_stats(data, name)
    assert chunks == len(expected(text, name))
    assert scalar < chunks * 0.15


def test_simd_environment_variable(tmp_path):
    import subprocess
    import sys
    code = "from fastbpe import _pretokenize as P; print(P.win_simd())"
    env = {**os.environ, "FASTBPE_SIMD": "sse2"}
    # outside the checkout, so that the installed package is the one imported
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, cwd=tmp_path).stdout.strip()
    assert out in ("sse2", "none")
    env["FASTBPE_SIMD"] = "avx-512"
    bad = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode != 0 and "FASTBPE_SIMD" in bad.stderr and "'avx-512'" in bad.stderr


@settings(max_examples=300)
@given(st.text())
def test_chunks_tile_text(text):
    for name in PATTERNS:
        # regex itself never skips a char with these patterns...
        spans = [m.span() for m in COMPILED[name].finditer(text)]
        bounds = [0] + [b for _, b in spans]
        assert [a for a, _ in spans] == bounds[:-1]
        assert bounds[-1] == len(text)
        # ...and neither do we.
        assert "".join(P.split(text, name)) == text


def test_surrogates_split_like_regex():
    # Lone surrogates are kept ("surrogatepass") and split as regex splits them.
    for text in ["\ud800", "a\udfffb", " \ud800 ", "x\ud83d\ude00y", "'\ud800s"]:
        assert_same_split(text)


# ---------------------------------------------------------------------------------------
# Real text


def _stdlib_sources(limit: int = 40) -> list[Path]:
    lib = Path(regex.__file__).parents[2]  # .../lib/python3.X
    files = sorted(lib.glob("*.py"))[:limit]
    return files


def test_real_text_stdlib_sources():
    for path in _stdlib_sources():
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        assert_same_split(text)


def test_real_text_cjk():
    lib = Path(regex.__file__).parents[2]
    files = sorted((lib / "test" / "cjkencodings").glob("*-utf8.txt"))
    if not files:
        pytest.skip("cjkencodings test data not installed")
    for path in files:
        assert_same_split(path.read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------------------
# API


def test_pattern_id():
    assert P.pattern_id(R.GPT2) == P.SPLIT_GPT2 == 0
    assert P.pattern_id(R.CL100K) == P.SPLIT_CL100K == 1
    assert P.pattern_id(R.O200K) == P.SPLIT_O200K == 2
    assert P.pattern_id(R.CL100K_DIGIT1) == P.SPLIT_CL100K_DIGIT1 == 3
    assert P.split_engine(3) == "builtin:cl100k_digit1"
    for name, pid in [("gpt2", 0), ("r50k_base", 0), ("cl100k", 1), ("cl100k_base", 1),
                      ("o200k", 2), ("o200k_base", 2), ("cl100k_digit1", 3)]:
        assert P.pattern_id(name) == pid
    # any other pattern: a split program when it compiles and matches every character
    assert P.pattern_id(R.GPT2 + "|x") >= P.SPLIT_PROGRAM
    assert P.split_engine(P.pattern_id(R.GPT2 + "|x")) == "program"
    assert P.pattern_id(r"\w+") == -1  # leaves text unmatched: tiktoken drops it
    assert P.pattern_id(r"\w+", gaps=True) >= P.SPLIT_PROGRAM
    assert P.pattern_id(r"\w+?|\W") == -1  # lazy: not compiled
    assert P.split_engine(-1) == "regex"
    with pytest.raises(TypeError):
        P.pattern_id(3)


def test_split_accepts_exact_pattern_strings():
    text = "Hello world's 123"
    for name, pat in PATTERNS.items():
        assert P.split(text, pat) == P.split(text, name) == expected(text, name)


def test_split_errors():
    with pytest.raises(TypeError, match="str"):
        P.split(b"abc", "gpt2")
    with pytest.raises(ValueError, match=r"\\w\+"):
        P.split("abc", r"\w+")
    with pytest.raises(TypeError):
        P.split("abc", None)


def test_split_offsets():
    text = "Hello, wörld's 12345 中文\n"
    data = text.encode()
    for name in PATTERNS:
        ends = P.split_offsets(data, name)
        assert ends.dtype == np.int64
        chunks = [data[a:b].decode() for a, b in zip([0, *ends[:-1]], ends)]
        assert chunks == expected(text, name)
    assert P.split_offsets(b"", "gpt2").tolist() == []
    assert P.split_offsets(bytearray(b"a b"), "gpt2").tolist() == [1, 3]
    with pytest.raises(TypeError):
        P.split_offsets("abc", "gpt2")
    with pytest.raises(ValueError, match="position 1"):
        P.split_offsets(b"a\xffb", "gpt2")
    with pytest.raises(ValueError, match="nope"):
        P.split_offsets(b"abc", "nope")


UTF8_EDGES = [b"\xc0\x80", b"\xc1\xbf", b"\xc2\x80", b"\xe0\x80\x80", b"\xe0\xa0\x80",
              b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xef\xbf\xbf", b"\xf0\x80\x80\x80",
              b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80",
              b"\xff", b"\x80", b"\xe2\x82", b"\xf0\x9f\x98", b"\xc3"]


@settings(max_examples=500)
@given(st.lists(st.one_of(st.binary(max_size=12), st.sampled_from(UTF8_EDGES),
                          st.text(max_size=5).map(str.encode)), max_size=8).map(b"".join))
def test_split_offsets_accepts_exactly_what_the_codec_accepts(data):
    try:
        text = data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        with pytest.raises(ValueError):
            P.split_offsets(data, "cl100k")
        return
    ends = P.split_offsets(data, "cl100k")
    chunks = [data[a:b].decode("utf-8", "surrogatepass") for a, b in zip([0, *ends[:-1]], ends)]
    assert chunks == expected(text, "cl100k")


@settings(max_examples=300)
@given(st.binary(max_size=40))
def test_kernel_survives_malformed_utf8(data):
    # The kernel's contract is valid UTF-8, but bad bytes must not crash, hang or read
    # past the end (each malformed byte counts as one symbol).
    for pid in (P.SPLIT_GPT2, P.SPLIT_CL100K, P.SPLIT_O200K):
        count = P._count_chunks(data, pid)
        assert (count == 0) == (len(data) == 0)
        assert count <= len(data)


def test_long_runs_are_linear():
    # Long runs of one class must not go quadratic (a smoke test, not a timing test).
    for piece in ["a", " ", "1", "!", "\u0301", "A", "\n", "ǅ"]:
        text = piece * 200_000
        assert_same_split(text)
