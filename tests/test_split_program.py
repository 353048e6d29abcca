"""Split programs (fastbpe.reference.split_program, fastbpe._split_program) against regex.

The reference is ``regex`` itself: for every model pattern the compiler accepts, the
native matcher and the Python matcher give ``regex.finditer``'s chunks (with the text
between matches as chunks too for a pattern that does not tile, as HF's Split with
behaviour Isolated keeps it) on every code point in several contexts, on generated text,
and on long runs; what the compiler refuses stays on ``regex``.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe import _pretokenize as P
from fastbpe.reference import patterns as R
from fastbpe.reference import split_program as S

# The split patterns of the open models, as their files and code spell them.
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")  # also Phi-4's
QWEN = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")
TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
          r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
          r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")  # also Nemotron's
DEEPSEEK_DIGITS = r"\p{N}{1,3}"
DEEPSEEK_CJK = "[一-龥぀-ゟ゠-ヿ]+"
DEEPSEEK_MAIN = ("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+"
                 "|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*"
                 "|\\s*[\r\n]+|\\s+(?!\\S)|\\s+")
# tiktoken's own three with an unreachable branch: the same splits, run as programs
# (the possessive, case-insensitive and o200k shapes through the compiler).
AS_PROGRAMS = {name: pat + "|x" for name, pat in
               [("gpt2", R.GPT2), ("cl100k", R.CL100K), ("o200k", R.O200K)]}

#: name -> (pattern, tiles)
MODELS = {
    "llama3": (LLAMA3, True),
    "qwen": (QWEN, True),
    "tekken": (TEKKEN, True),
    "deepseek-digits": (DEEPSEEK_DIGITS, False),
    "deepseek-cjk": (DEEPSEEK_CJK, False),
    "deepseek-main": (DEEPSEEK_MAIN, False),
    **{f"{name}-program": (pat, True) for name, pat in AS_PROGRAMS.items()},
}


regex_chunks = S.split_isolated  # regex.finditer's matches and the text between them


def native_chunks(pattern: str, text: str) -> list[str]:
    return P.split(text, pattern, gaps=True)


def test_models_compile_as_expected():
    for name, (pattern, tiles) in MODELS.items():
        prog = S.compile_program(pattern)
        assert prog.tiles == tiles, name
        assert P.split_engine(P.pattern_id(pattern)) == ("program" if tiles else "regex")
        assert P.split_engine(P.pattern_id(pattern, gaps=True)) == "program"


def test_builtin_patterns_keep_their_hand_written_splitters():
    for name, pid in [("gpt2", P.SPLIT_GPT2), ("cl100k", P.SPLIT_CL100K), ("o200k", P.SPLIT_O200K)]:
        assert P.pattern_id(R.PATTERNS[name]) == pid
        assert P.split_engine(pid) == f"builtin:{name}"


def atom_sets(prog: S.Program) -> np.ndarray:
    stage1, stage2, class_atoms, _ = S.class_tables(prog.atoms)
    cps = np.arange(0x110000)
    return class_atoms[stage2[stage1[cps >> 7].astype(np.int64) * S.BLOCK + (cps & 127)]]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_tables_are_regex_classes_for_every_code_point(name):
    # Corollary 1: for every code point, the tables say what regex says, atom by atom.
    prog = S.compile_program(MODELS[name][0])
    sets = atom_sets(prog)
    assert (sets[:128] == S.class_tables(prog.atoms)[3]).all()
    for k, atom in enumerate(prog.atoms):
        members = np.zeros(0x110000, dtype=bool)
        for m in regex.finditer(atom, S._every_code_point()):
            members[m.start()] = True
        assert ((sets >> k & 1).astype(bool) == members).all(), atom


def representatives(prog: S.Program) -> list[str]:
    """Every ASCII char, the first 4 code points of each atom set and 3000 others at
    random: the matcher reads a char only through its atom set (and "\n" for `$`), and
    the tables are proved per code point above, so these cover every code point."""
    sets = atom_sets(prog)
    picks = set(range(128))
    for value in np.unique(sets):
        picks.update(int(c) for c in np.nonzero(sets == value)[0][:4])
    picks.update(int(c) for c in np.random.default_rng(38).integers(0, 0x110000, 3000))
    return [chr(c) for c in sorted(picks)]


# Each code point alone, after a space, before a letter / digit / newline, after an
# apostrophe, between letters, inside a run of itself: the code points joined in one
# text per context, compared with regex over the whole text.
CONTEXTS = ["{c}", " {c}", "{c}a ", "{c}1", "{c}\n", "'{c}", "A{c}b", "{c}{c}{c} ", "\r\n{c} "]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_code_points_in_context(name):
    pattern = MODELS[name][0]
    chars = representatives(S.compile_program(pattern))
    for context in CONTEXTS:
        text = "".join(context.format(c=c) for c in chars)
        got, want = native_chunks(pattern, text), regex_chunks(pattern, text)
        if got != want:
            k = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
            raise AssertionError(f"{name} {context!r}: chunk {k}: {got[k]!r} != {want[k]!r}")


ALPHABET = st.sampled_from(
    list("aZ'sStTdDmMlLvVrReE1 \t\n\r/!.,-_\"#~") + [
        "\u00a0", "\u2003", "\u3000", "\u0085", "\u000b", "\u000c",   # other spaces
        "é", "É", "ǅ", "ʰ", "ß", "ſ", "K", "İ", "ı",                  # cases, folds
        "\u0301", "\u0903", "\u20dd",                                   # marks
        "٣", "½", "Ⅻ", "１", "²",                                       # numbers
        "中", "龥", "ぁ", "カ", "ー", "가", "ｱ",                        # CJK, kana
        "€", "«", "—", "…", "😀", "\U00010000", "\ud800", "\udfff",     # symbols, astral
        "\x00", "\x7f", "\u200b", "\ufeff",                             # controls, format
    ])
TEXT = st.lists(st.one_of(ALPHABET, st.text(ALPHABET, min_size=2, max_size=6)),
                max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(TEXT)
def test_generated_text(text):
    for name, (pattern, tiles) in MODELS.items():
        want = regex_chunks(pattern, text)
        assert native_chunks(pattern, text) == want, name
        assert S.split(S.compile_program(pattern), text, gaps=True) == want, name
        if tiles:
            assert P.split(text, pattern) == regex.findall(pattern, text), name


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_arbitrary_text(text):
    for name, (pattern, _) in MODELS.items():
        assert native_chunks(pattern, text) == regex_chunks(pattern, text), name


def test_dollar_and_lookahead_at_the_segment_end():
    for text in ["a  ", "a \n", "a\n", "  \n", " \n ", "x\n\n", "\n", " "]:
        for pattern in (R.GPT2 + "|x", LLAMA3, r"\s++$|\S+|\s"):
            assert native_chunks(pattern, text) == regex_chunks(pattern, text), (pattern, text)


def test_long_runs_are_linear():
    # Each alternative must not backtrack quadratically (Corollary 3): 200k of one class.
    for piece in ["a", " ", "1", "!", "\u0301", "A", "\n", "ǅ", " \n", "\t ", "中", "'s"]:
        text = piece * 100_000
        for name, (pattern, _) in MODELS.items():
            t = time.perf_counter()
            got = native_chunks(pattern, text)
            assert time.perf_counter() - t < 2.0, (name, piece)
            assert "".join(got) == text


# ---------------------------------------------------------------------------------------
# What the compiler refuses stays on regex, with the reason.

REFUSED = [
    (r"\p{L}+?", "lazy"),
    (r"(\p{L}+)", "group other than"),
    (r"(?<=a)b", "group other than"),
    (r"\Ga", "escape"),
    (r".+", "'.'"),
    (r"^a", "'^'"),
    (r"\ba", "escape"),
    (r"a|\s*", "empty"),
    (r"(?:ab)+", "repeated other than"),
    (r"x(?:a\p{L}+|b)", "strings of single characters"),
    (r"\p{L}*\p{L}+\p{N}", "unbounded run"),
    (r"\s*\s*x", "unbounded run"),
    (r"[[:alpha:]]", "nested"),
    (r"(?i)a", "group other than"),
]


@pytest.mark.parametrize("pattern, reason", REFUSED)
def test_refused_patterns_stay_on_regex(pattern, reason):
    with pytest.raises(S.Unsupported, match=regex.escape(reason)):
        S.compile_program(pattern)
    assert P.pattern_id(pattern, gaps=True) == -1


def test_compile_errors():
    with pytest.raises(TypeError):
        S.compile_program(b"a")
    with pytest.raises(ValueError, match="invalid split pattern"):
        S.compile_program("(a")
    assert P.pattern_id("(a") == -1  # the caller's regex.compile names the error
    with pytest.raises(ValueError, match="gaps=True"):
        S.split(S.compile_program(DEEPSEEK_DIGITS), "a1")


# ---------------------------------------------------------------------------------------
# The encoder and the trainer take programs, and never cut a program's text at newlines
# (the cut rule is proved for tiktoken's patterns only).

VOCAB = Path(os.environ.get("FASTBPE_TEST_VOCAB_DIR", Path(__file__).resolve().parents[2] / "shared" / "vocab"))

# Chunks that span a newline: a cut after "\n" would change them.
ACROSS_NEWLINES = r"\n\p{L}+|[^\n]+|\n"


def _ranks(name: str) -> dict:
    path = VOCAB / f"{name}.tiktoken"
    if not path.exists():
        pytest.skip(f"{path} is absent (see /work/shared/vocab/README.md)")
    import tiktoken.load
    return tiktoken.load.load_tiktoken_bpe(str(path))


GOLDEN = ["Hello world's 2024 ÉTÉ ǅx", "  x\n\n  y  \r\n", "def f(x):\n    return x**2  # ok\n",
          "你好，世界！カタカナ 12345", "I'LL can't 'VE", "a  \n  ", "ﬁ½٣\u0301\u00a0\t!"]


@pytest.mark.parametrize("family, pattern", [("cl100k_base", LLAMA3), ("cl100k_base", QWEN),
                                             ("o200k_base", TEKKEN)])
def test_encoding_runs_programs_with_tiktoken_ids(family, pattern):
    import tiktoken
    import fastbpe
    ranks = _ranks(family)
    enc = fastbpe.Encoding("p", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    ref = tiktoken.Encoding("p", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    assert enc._split_engine == "program"
    for text in GOLDEN + ["".join(GOLDEN) * 50]:
        assert enc.encode_ordinary(text) == ref.encode_ordinary(text), text[:40]
    assert enc.encode_batch(GOLDEN, num_threads=2) == [ref.encode_ordinary(t) for t in GOLDEN]


def test_long_texts_of_a_program_are_not_cut():
    import tiktoken
    import fastbpe
    ranks = _ranks("gpt2")
    enc = fastbpe.Encoding("p", pat_str=ACROSS_NEWLINES, mergeable_ranks=ranks, special_tokens={})
    ref = tiktoken.Encoding("p", pat_str=ACROSS_NEWLINES, mergeable_ranks=ranks, special_tokens={})
    assert enc._split_engine == "program" and not P.cuts_hold(P.pattern_id(ACROSS_NEWLINES))
    text = "ab\ncd ef\n" * 30_000
    want = ref.encode_ordinary(text)
    assert enc.encode_ordinary(text) == want
    assert enc.encode_batch([text, text[:5000]], num_threads=2) == [want, ref.encode_ordinary(text[:5000])]


def test_trainer_counts_programs_natively(monkeypatch):
    from collections import Counter
    from fastbpe.bpe import counting

    def no_regex(*args, **kwargs):
        raise AssertionError("counted with regex")

    monkeypatch.setattr(counting, "_count_regex", no_regex)
    docs = GOLDEN + ["ab\ncd ef\n" * 150_000]  # over a block: cut only if the rule held
    for pattern in (LLAMA3, ACROSS_NEWLINES):
        want = Counter()
        for doc in docs:
            want.update(c.encode() for c in regex.findall(pattern, doc))
        assert counting.count_documents(docs, pattern, [], num_threads=2) == dict(want)


# ---------------------------------------------------------------------------------------
# Sequences of Isolated splits (Corollary 5): DeepSeek's three, StarCoder's Digits
# (individual digits: each \p{N} alone) before ByteLevel's GPT-2 regex.

HF_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
SEQUENCES = {
    "deepseek": (DEEPSEEK_DIGITS, DEEPSEEK_CJK, DEEPSEEK_MAIN),
    "starcoder": (r"\p{N}", HF_GPT2),
    "cjk-then-llama3": (DEEPSEEK_CJK, LLAMA3),
}


def test_deepseek_file_has_these_splits():
    path = VOCAB / "deepseek-v4" / "tokenizer.json"
    if not path.exists():
        pytest.skip(f"{path} is absent (see /work/shared/vocab/README.md)")
    import json
    steps = json.loads(path.read_text(encoding="utf-8"))["pre_tokenizer"]["pretokenizers"]
    assert tuple(s["pattern"]["Regex"] for s in steps if s["type"] == "Split") == SEQUENCES["deepseek"]


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_sequence_code_points_in_context(name):
    patterns = SEQUENCES[name]
    assert P.split_engine(P.pattern_id(patterns)) == "program"
    chars = sorted(set().union(*(representatives(S.compile_program(p)) for p in patterns)))
    for context in CONTEXTS + ["{c}12345", "中{c}か1"]:
        text = "".join(context.format(c=c) for c in chars)
        got, want = P.split(text, patterns), S.split_sequence(patterns, text)
        if got != want:
            k = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
            raise AssertionError(f"{name} {context!r}: chunk {k}: {got[k]!r} != {want[k]!r}")


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_sequence_generated_text(text):
    for name, patterns in SEQUENCES.items():
        assert P.split(text, patterns) == S.split_sequence(patterns, text), name


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_sequence_long_pieces_are_linear(name):
    """A long outer piece (DeepSeek: text without digits) is scanned once per split,
    not once per chunk in it: 1 MB in well under a second (it took ~130 s), and the
    chunks still equal the reference's on long text where the outer pieces are long."""
    patterns = SEQUENCES[name]
    data = ("word, 中文 " * 100_000).encode()
    t = time.perf_counter()
    P.split_offsets(data, patterns)
    assert time.perf_counter() - t < 1.0
    text = ("Hello world, 中文かな 2024 x" + "y z " * 300) * 4
    assert P.split(text, patterns) == S.split_sequence(patterns, text)


def test_sequences_refused():
    for patterns in [(r"\p{N}{1,3}", r"\p{N}"),          # would split inside a group
                     (r"\p{N}+|x", r"\p{L}+"),            # an outer level of two branches
                     (r"\p{N}{2,3}", r"\p{L}+")]:
        with pytest.raises(S.Unsupported):
            S.compile_sequence(patterns)
        assert P.pattern_id(patterns) == -1
    with pytest.raises(TypeError):
        S.compile_sequence([r"\p{N}"])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40))
def test_matcher_survives_malformed_utf8(data):
    # Valid UTF-8 is the contract; bad bytes must still not crash, hang or read past the
    # end: every chunk is at least one byte.
    for pattern in [LLAMA3, TEKKEN, DEEPSEEK_MAIN, SEQUENCES["deepseek"]]:
        pid = P.pattern_id(pattern, gaps=True) if isinstance(pattern, str) else P.pattern_id(pattern)
        count = P._count_chunks(data, pid)
        assert (count == 0) == (len(data) == 0)
        assert count <= len(data)


# ----------------------------------------------------------------- the rank core on a sequence
_RANKS = {bytes([i]): i for i in range(256)}
for _tok in [b"12", b"123", b"ab", b" a", b"\xe4\xb8\xad", b"He", b"llo", b"Hello", b" 1", b"\n\n"]:
    _RANKS.setdefault(_tok, len(_RANKS))


def _cores(patterns):
    from fastbpe._encode import CoreBPE
    from fastbpe.reference.core import CoreBPE as ReferenceCoreBPE

    return CoreBPE(_RANKS, {"<s>": 999}, patterns), ReferenceCoreBPE(_RANKS, {"<s>": 999}, patterns)


@settings(max_examples=200, deadline=None)
@given(TEXT)
def test_core_on_a_sequence_equals_the_reference(text):
    """``CoreBPE(..., pat_str=<tuple>)``: the native core splits by the sequence program
    (the scan kept across a segment's chunks), the reference core by ``split_sequence``;
    the same ids, one text or a batch on threads, with a special token between."""
    native, ref = _cores(SEQUENCES["deepseek"])
    want = ref.encode_ordinary(text)
    assert native.encode_ordinary(text) == want
    both = text + "<s>" + text
    assert native.encode(both, {"<s>"}) == ref.encode(both, {"<s>"})
    assert native.encode_ordinary_batch([text, both], 2) == [want, ref.encode_ordinary(both)]


def test_core_on_a_sequence_pickles_and_refuses():
    import pickle

    native, _ = _cores(SEQUENCES["deepseek"])
    back = pickle.loads(pickle.dumps(native))
    assert back.pat_str == SEQUENCES["deepseek"]
    text = "Hello 12345 中文かな, ab" * 50
    assert back.encode_ordinary(text) == native.encode_ordinary(text)
    from fastbpe._encode import CoreBPE

    with pytest.raises(ValueError, match="does not compile to a native split program"):
        CoreBPE(_RANKS, {}, (r"\p{N}{1,3}", r"\p{N}"))
    with pytest.raises(TypeError, match="pat_str must be a str or a tuple of str"):
        CoreBPE(_RANKS, {}, [r"\p{N}"])
    with pytest.raises(TypeError, match="non-empty tuple of str"):
        CoreBPE(_RANKS, {}, (r"\p{N}", 3))


def test_core_on_a_sequence_is_linear():
    """A long piece of the outer levels (text without digits) is scanned once per
    segment in the core's chunk loop, as in ``split_offsets``: 1 MB well under a second."""
    native, _ = _cores(SEQUENCES["deepseek"])
    text = "word, 中文 " * 100_000
    t = time.perf_counter()
    native.encode_ordinary(text)
    assert time.perf_counter() - t < 1.0


def test_sequence_outer_runs_at_every_offset():
    """An outer level's run of non-X chars skips ASCII 8 bytes a step
    (``_ascii_outside_end``): the X char (a digit; a CJK char, which has no ASCII member)
    at every offset from the run's start, and after a multi-byte char, still ends it."""
    texts = []
    for k in range(20):
        for x in ("7", "中", "é", "\n"):
            texts += ["a" * k + x + "b" * (19 - k) + "12345", "é" + " x" * k + x + "yy", "ab, " * k + x]
    for name, patterns in SEQUENCES.items():
        for text in texts:
            assert P.split(text, patterns) == S.split_sequence(patterns, text), (name, text)
