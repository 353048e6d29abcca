"""The load path's bulk checks equal the rules they stand for (issue 38, load time):
the added-token overlap test of the rank-engine plan over all pairs at once."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe.bpe.hf import _any_taken_before_raw, _taken_before_raw
from fastbpe.formats.hf_bpe import _may_overlap

_TOKENS = st.lists(st.text(alphabet="ab|<>.", min_size=1, max_size=6), max_size=8)


@settings(max_examples=2000, deadline=None)
@given(normalized=_TOKENS, raw=_TOKENS)
def test_any_taken_before_raw_is_the_pairwise_rule(normalized, raw):
    assert _any_taken_before_raw(normalized, raw) == any(_taken_before_raw(a, b) for a in normalized for b in raw)
    # NFC's test (any overlap) is the rule both ways round
    assert (_any_taken_before_raw(normalized, raw) or _any_taken_before_raw(raw, normalized)) == any(
        _may_overlap(a, b) for a in normalized for b in raw)


def test_published_added_tokens(vocab_file):
    """DeepSeek V4's 1,283 added tokens (normalized and raw): the bulk test's answer is
    the pairwise one."""
    from fastbpe.formats._hfjson import check_added_tokens, read_json

    entries = check_added_tokens(read_json(vocab_file("deepseek-v4/tokenizer.json")), "deepseek")
    normalized, raw = [[e["content"] for e in entries if e["normalized"] == flag] for flag in (True, False)]
    assert normalized and raw
    assert _any_taken_before_raw(normalized, raw) == any(_taken_before_raw(a, b) for a in normalized for b in raw)
    assert _any_taken_before_raw(raw, normalized) == any(_taken_before_raw(a, b) for a in raw for b in normalized)


def _tables_by_tuple(atoms: tuple):
    """``class_tables`` as it was computed before the per-atom cache: each tuple's
    atoms scanned by ``regex`` into one array (the oracle)."""
    import numpy as np
    import regex

    from fastbpe.reference.split_program import _every_code_point

    sets = np.zeros(0x110000, dtype=np.uint32)
    for k, text in enumerate(atoms):
        for m in regex.finditer(f"(?:{text})+", _every_code_point()):
            sets[m.start():m.end()] |= np.uint32(1 << k)
    return sets


def test_class_tables_from_per_atom_bits_equal_the_tuple_scan():
    """DeepSeek V4's atoms (its three Splits) and a pair sharing one: every code point's
    atom set through the two-stage tables equals the direct scan."""
    import numpy as np

    from fastbpe.reference.split_program import _atom_bits, class_tables

    main = ('[!"#$%&\'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~]', "[A-Za-z]", "[^\r\n\\p{L}\\p{P}\\p{S}]", "[\\p{L}\\p{M}]",
            "\\ ", "[\\p{P}\\p{S}]", "[\r\n]", "\\s", "\\S")
    for atoms in (main, ("\\p{N}", "[一-龥\u3040-ゟ゠-ヿ]"), ("\\p{N}", "\\s")):
        s1, s2, cls, asc = class_tables(atoms)
        cps = np.arange(0x110000)
        got = cls[s2[s1[cps >> 7].astype(np.int64) * 128 + (cps & 127)]]
        want = _tables_by_tuple(atoms)
        assert (got == want).all() and (asc == want[:128]).all()
    # _never_inside's disjointness test: the packed bits' AND
    assert not (_atom_bits("\\p{N}") & _atom_bits("[A-Za-z]")).any()
    assert (_atom_bits("\\p{N}") & _atom_bits("\\S")).any()


@settings(max_examples=300, deadline=None)
@given(pairs=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), max_size=14),
       pieces=st.lists(st.binary(max_size=9).map(lambda b: bytes(97 + x % 4 for x in b)), max_size=20))
def test_merge_list_from_uint32_columns_is_the_list_one(pairs, pieces):
    """``MergeList`` from three uint32 buffers (the load's packed merges) is the one from
    lists of ints: the same counts and ids, a pair listed twice at its last position."""
    import numpy as np
    import pytest

    MergeList = pytest.importorskip("fastbpe._hf_merge").MergeList
    toks = [97, 98, 99, 100]
    lefts, rights, news = [], [], []
    for n, (a, b) in enumerate(pairs):
        lefts.append(toks[a % 4]), rights.append(toks[b % 4]), news.append(256 + n)
    byte_ids = list(range(256))
    ends = np.cumsum([len(p) for p in pieces], dtype=np.int64)
    data = b"".join(pieces)
    from_lists = MergeList(byte_ids, lefts, rights, news, None, 0)
    typed = [np.asarray(c, dtype=np.uint32) for c in (lefts, rights, news)]
    from_buffers = MergeList(byte_ids, *typed, None, 0)
    assert from_lists.piece_counts(data, ends) == from_buffers.piece_counts(data, ends)
    words = [p for p in pieces if p]
    assert from_lists.encode_pieces(words) == from_buffers.encode_pieces(words)
    wide = MergeList(byte_ids, *(np.asarray(c, dtype=np.int64) for c in (lefts, rights, news)), None, 0)
    assert wide.piece_counts(data, ends) == from_lists.piece_counts(data, ends)   # not uint32: the generic path


_DEEPSEEK_SPLITS = (r"\p{N}{1,3}", "[一-龥\u3040-ゟ゠-ヿ]+",
                    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
_SYNTHETIC = ["[a-c]", "[^a-c]", r"[\-a]", "[a-]", "[-a]", r"[\]a]", r"[\\]", r"[\p{Lu}\s0-9]", r"[^\s\p{N}x]", "[ -~]",
              r"\ ", "'", "e", r"\S", "[\u00e9\u0301]", "[\U0001F600-\U0001F64F]", r"[\t\f\v]", "[^\U00010000-\U0010FFFF]"]


def _scan(text: str):
    """An atom's code points by ``regex`` over all of them (the oracle)."""
    import numpy as np
    import regex

    from fastbpe.reference.split_program import _every_code_point

    members = np.zeros(0x110000, dtype=bool)
    for m in regex.finditer(f"(?:{text})+", _every_code_point()):
        members[m.start():m.end()] = True
    return members


def test_atom_sets_composed_from_their_parts_equal_regex():
    """``_set_members`` (an atom composed from its literal characters, ranges and
    properties) equals ``regex`` on every code point, for every atom of the built-in
    and open models' patterns and of DeepSeek V4's Splits, and for other set forms."""
    from fastbpe.reference import patterns
    from fastbpe.reference.split_program import Unsupported, _set_members, compile_program

    atoms = set(_SYNTHETIC)
    for pattern in set(patterns.PATTERNS.values()) | set(_DEEPSEEK_SPLITS):
        try:
            atoms |= set(compile_program(pattern).atoms)
        except Unsupported:
            continue
    composed = 0
    for text in sorted(atoms):
        got = _set_members(text)
        if got is not None:
            composed += 1
            assert (got == _scan(text)).all(), text
    assert composed >= 20


def test_atoms_from_the_compiled_tables_equal_regex():
    """The native programs' atoms (primitives from the compiled tables,
    ``_split_program.table_primitive``) equal ``regex`` on every code point, for every
    atom of the built-in and open models' patterns, DeepSeek V4's Splits and other set
    forms; their programs and class tables are the reference's (all regex)."""
    import numpy as np
    import pytest

    from fastbpe.reference import patterns
    from fastbpe.reference.split_program import Unsupported, _atom_members, class_tables, compile_program, \
        compile_sequence

    SP = pytest.importorskip("fastbpe._split_program")
    atoms = set(_SYNTHETIC) | {r"\p{Lu}", r"\p{Zs}", r"[\p{Sc}\p{Pd}]", r"\p{C}", r"[^\p{Z}]", r"\p{Han}", "(?i:s)"}
    programs = []
    for pattern in set(patterns.PATTERNS.values()) | set(_DEEPSEEK_SPLITS):
        try:
            programs.append((compile_program(pattern), compile_program(pattern, SP.table_primitive)))
        except Unsupported:
            continue
        atoms |= set(programs[-1][0].atoms)
    for text in sorted(atoms):
        assert (_atom_members(text, SP.table_primitive) == _scan(text)).all(), text
    assert len(programs) >= 5
    for by_regex, by_tables in programs:
        assert by_regex == by_tables
        for want, got in zip(class_tables(by_regex.atoms), class_tables(by_tables.atoms, SP.table_primitive)):
            assert want.dtype == got.dtype and np.array_equal(want, got), by_regex.pattern
    assert compile_sequence(_DEEPSEEK_SPLITS) == compile_sequence(_DEEPSEEK_SPLITS, SP.table_primitive)


def test_other_atom_forms_are_scanned_whole():
    from fastbpe.reference.split_program import _set_members

    for text in ["(?i:s)", "(?i:[sdmt])", r"\p{L}", r"\s", r"\d", r"[\d]", r"[\w-]", r"[\x41]", "[[a]]", "[]a]", "[a&&b]",
                 "[a--b]", r"[\P{L}]", r"[\p{Script=Han}]", "[c-a]", ".", "[^]", "[]"]:
        assert _set_members(text) is None, text


def _added_tokens_field_by_field(entries: list, source: str) -> list[dict]:
    """``check_added_tokens`` as it was before its plain-entry shortcut: every field
    checked by ``field`` (the oracle)."""
    from fastbpe.formats._hfjson import ADDED_TOKEN_FLAGS, check_id, expect, field

    out = []
    for n, entry in enumerate(entries):
        where = f"added_tokens[{n}]"
        expect(entry, dict, where, source)
        idx = check_id(field(entry, "id", int, where, source), f"{where}.id", source)
        content = field(entry, "content", str, where, source)
        if not content:
            raise ValueError(f"{source}: {where}.content is empty")
        flags = {flag: field(entry, flag, bool, where, source, default=False) for flag in ADDED_TOKEN_FLAGS}
        if "normalized" not in entry:
            flags["normalized"] = not flags["special"]
        out.append({"id": idx, "content": content, **flags})
    return out


_VALUES = st.one_of(st.booleans(), st.integers(-2, 2**32 + 1), st.sampled_from(["", "<s>", "a"]), st.none(),
                    st.floats(0, 1), st.lists(st.integers(), max_size=1))
_ENTRY = st.one_of(
    st.dictionaries(st.sampled_from(["id", "content", "single_word", "lstrip", "rstrip", "normalized", "special", "x"]),
                    _VALUES, max_size=8),
    st.fixed_dictionaries({"id": st.integers(0, 9), "content": st.sampled_from(["<s>", "a"])},
                          optional={f: st.booleans() for f in ("lstrip", "normalized", "special")}),
    _VALUES)


@settings(max_examples=1500, deadline=None)
@given(entries=st.lists(_ENTRY, max_size=4))
def test_added_tokens_shortcut_is_the_field_by_field_check(entries):
    """``check_added_tokens``' shortcut for plain entries gives the same entries, and
    the same error for any other, as checking every field."""
    import pytest

    from fastbpe.formats._hfjson import check_added_tokens

    try:
        want = _added_tokens_field_by_field(entries, "f.json")
    except ValueError as e:
        with pytest.raises(ValueError) as got:
            check_added_tokens({"added_tokens": entries}, "f.json")
        assert str(got.value) == str(e)
    else:
        got = check_added_tokens({"added_tokens": entries}, "f.json")
        assert got == want and [type(v) for e in got for v in e.values()] == [type(v) for e in want for v in e.values()]
