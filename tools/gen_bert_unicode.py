"""Generate fastbpe/reference/_bert_unicode.py: the Unicode data of HF tokenizers' BERT path.

HF ``tokenizers`` (Rust) classifies characters for ``BertNormalizer`` and
``BertPreTokenizer`` with three sources, each frozen at its own Unicode version:

* the ``unicode_categories`` crate 0.1.1 (general categories: ``is_other`` = Cc, Cf, Co
  for clean text; ``is_mark_nonspacing`` = Mn for accent stripping; ``is_punctuation``
  = P*): its tables were generated from Unicode 8.0.0 (U+08E3, new in 8.0, is in its Mn
  table; U+08D4, new in 9.0, is not);
* the ``unicode-normalization-alignments`` crate 0.1.12 (NFD: decompositions and
  canonical combining classes): Unicode 9.0.0;
* Rust's standard library (``char::is_whitespace``, ``char::to_lowercase``): the Unicode
  version of the rustc that built the wheel; tokenizers 0.23.3 was built by rustc 1.99,
  whose ``char::UNICODE_VERSION`` is 17.0.0.

This script reads real Unicode data of those versions: the tables that CPython's
``makeunicodedata.py`` generated from the UCD into the ``unicodedata2`` source
distributions on PyPI (``unicodedata_db.h`` for categories, combining classes and
decompositions; ``unicodetype_db.h`` for the full lowercase mappings). White_Space comes
from the ``regex`` module (the property has not changed since Unicode 6.3, so every
version from there to 17.0 gives the same set).

Usage (from the project root)::

    python tools/gen_bert_unicode.py              # download the sdists with pip, rewrite
    python tools/gen_bert_unicode.py --check      # exit 1 if the module is stale
    python tools/gen_bert_unicode.py --sdist-dir DIR   # use unicodedata2-*.tar.gz in DIR

The build and the tests never run this script; the generated module is committed.
tests/test_reference_bert_unicode.py compares it with the installed HF ``tokenizers`` on every
code point: if a new tokenizers wheel moves to another Unicode version, that test fails
and names the code points; then change the versions below and regenerate.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import regex

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "fastbpe" / "reference" / "_bert_unicode.py"
N_CODE_POINTS = 0x110000

# What HF uses -> (Unicode version, the unicodedata2 sdist with CPython's tables of it).
CATEGORIES = ("8.0.0", "unicodedata2==8.0.0")         # unicode_categories 0.1.1
NORMALIZATION = ("9.0.0", "unicodedata2==9.0.0.post4")  # unicode-normalization-alignments 0.1.12
LOWERCASE = ("17.0.0", "unicodedata2==17.0.1")         # Rust std of rustc 1.99

EXTENDED_CASE_MASK = 0x4000  # CPython's unicodectype.c: lower is an _PyUnicode_ExtendedCase run
HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3  # decomposed by algorithm, not listed in tables


# ---------------------------------------------------------------------------------------
# Reading CPython's generated C headers
# ---------------------------------------------------------------------------------------


def c_array(header: str, name: str) -> list:
    """The values of ``static ... name[] = {...};``: ints, or tuples of ints for structs."""
    m = re.search(r"\b" + re.escape(name) + r"\[\]\s*=\s*\{(.*?)\n\};", header, re.S)
    if m is None:
        raise SystemExit(f"array {name} not found in header")
    body = m.group(1)
    if "{" in body:
        return [tuple(int(x) for x in rec.split(",") if x.strip()) for rec in re.findall(r"\{([^{}]*)\}", body)]
    return [int(x) for x in body.replace("\n", " ").split(",") if x.strip()]


def c_define(header: str, name: str) -> str:
    m = re.search(r"#define " + re.escape(name) + r" (\S+)", header)
    if m is None:
        raise SystemExit(f"#define {name} not found in header")
    return m.group(1).strip('"')


def two_stage(header: str, index1: str, index2: str, shift: str) -> list[int]:
    """Record index of every code point from CPython's two-stage index tables."""
    i1, i2, s = c_array(header, index1), c_array(header, index2), int(c_define(header, shift))
    mask = (1 << s) - 1
    return [i2[(i1[cp >> s] << s) + (cp & mask)] for cp in range(N_CODE_POINTS)]


def read_header(source: tuple[str, str], name: str, sdist_dir: Path) -> str:
    """Header ``name`` of the source's unicodedata2 sdist (downloaded by pip if absent).

    Checks that its UNIDATA_VERSION is the source's Unicode version.
    """
    version, spec = source
    path = sdist_dir / (spec.replace("==", "-") + ".tar.gz")
    if not path.exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", spec, "-d", str(sdist_dir)],
            check=True, stdout=subprocess.DEVNULL,
        )
    with tarfile.open(path) as tar:
        names = tar.getnames()

        def member(base):  # old sdists keep a py2/ and a py3/ copy
            found = [n for n in names if n.endswith("/" + base) and "/py2/" not in n]
            if len(found) != 1:
                raise SystemExit(f"expected one {base} in {path}, found {found}")
            return tar.extractfile(found[0]).read().decode("utf-8")

        got = c_define(member("unicodedata_db.h"), "UNIDATA_VERSION")
        if got != version:
            raise SystemExit(f"{path} holds Unicode {got}, not {version}")
        return member(name)


# ---------------------------------------------------------------------------------------
# The properties
# ---------------------------------------------------------------------------------------


def categories(db: str) -> list[str]:
    """General category of every code point."""
    names = re.search(r"_PyUnicode_CategoryNames\[\] = \{(.*?)\};", db, re.S).group(1)
    cat_names = re.findall(r'"(\w+)"', names)
    records = c_array(db, "_PyUnicode_Database_Records")
    return [cat_names[records[i][0]] for i in two_stage(db, "index1", "index2", "SHIFT")]


def combining_and_decompositions(db: str):
    """(canonical combining class per code point, canonical decompositions one level)."""
    records = c_array(db, "_PyUnicode_Database_Records")
    ccc = [records[i][1] for i in two_stage(db, "index1", "index2", "SHIFT")]
    data = c_array(db, "decomp_data")
    dindex = two_stage(db, "decomp_index1", "decomp_index2", "DECOMP_SHIFT")
    decomp = {}
    for cp, i in enumerate(dindex):
        if i == 0:
            continue
        count, prefix = data[i] >> 8, data[i] & 255
        if prefix == 0 and count:  # prefix 0: canonical (compatibility ones carry a <tag>)
            decomp[cp] = tuple(data[i + 1 : i + 1 + count])
    return ccc, decomp


def full_nfd(decomp: dict[int, tuple]) -> dict[int, tuple]:
    """Canonical decompositions applied until nothing decomposes (before reordering)."""

    def expand(cp):
        if cp not in decomp:
            return (cp,)
        return tuple(x for d in decomp[cp] for x in expand(d))

    return {cp: expand(cp) for cp in decomp}


def lowercase(tdb: str) -> dict[int, tuple]:
    """Full lowercase mapping (UnicodeData + unconditional SpecialCasing) where it changes."""
    records = c_array(tdb, "_PyUnicode_TypeRecords")
    extended = c_array(tdb, "_PyUnicode_ExtendedCase")
    index = two_stage(tdb, "index1", "index2", "SHIFT")
    out = {}
    for cp, i in enumerate(index):
        _, lower, _, _, _, flags = records[i]
        if flags & EXTENDED_CASE_MASK:
            start, n = lower & 0xFFFF, lower >> 24
            mapped = tuple(extended[start : start + n])
        else:
            mapped = (cp + lower,)
        if mapped != (cp,):
            out[cp] = mapped
    return out


def ranges(cps) -> list[tuple[int, int]]:
    """Sorted code points -> inclusive (first, last) runs."""
    out: list[list[int]] = []
    for cp in sorted(cps):
        if out and out[-1][1] == cp - 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return [tuple(r) for r in out]


def valued_ranges(values) -> list[tuple[int, int, int]]:
    """Per-code-point values -> (first, last, value) runs of non-zero values."""
    out: list[list[int]] = []
    for cp, v in enumerate(values):
        if not v:
            continue
        if out and out[-1][1] == cp - 1 and out[-1][2] == v:
            out[-1][1] = cp
        else:
            out.append([cp, cp, v])
    return [tuple(r) for r in out]


# ---------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------


def py_tuple_lines(name: str, items, per_line: int) -> str:
    items = list(items)
    lines = [f"{name} = ("]
    for i in range(0, len(items), per_line):
        lines.append("    " + " ".join(f"{it}," for it in items[i : i + per_line]))
    lines.append(")\n")
    return "\n".join(lines)


def hex_tuple(t) -> str:
    return "(" + ", ".join(f"0x{x:X}" for x in t) + ("," if len(t) == 1 else "") + ")"


def py_map_lines(name: str, mapping: dict[int, tuple], per_line: int = 4) -> str:
    entries = [f"0x{cp:X}: {hex_tuple(v)}" for cp, v in sorted(mapping.items())]
    lines = [f"{name} = {{"]
    for i in range(0, len(entries), per_line):
        lines.append("    " + " ".join(e + "," for e in entries[i : i + per_line]))
    lines.append("}\n")
    return "\n".join(lines)


def hex_range(r) -> str:
    return "(" + ", ".join(f"0x{x:X}" if j < 2 else str(x) for j, x in enumerate(r)) + ")"


def render(sdist_dir: Path) -> str:
    category = categories(read_header(CATEGORIES, "unicodedata_db.h", sdist_dir))
    ccc, decomp = combining_and_decompositions(read_header(NORMALIZATION, "unicodedata_db.h", sdist_dir))
    lower = lowercase(read_header(LOWERCASE, "unicodetype_db.h", sdist_dir))
    nfd = full_nfd(decomp)
    other = ranges(cp for cp, c in enumerate(category) if c in ("Cc", "Cf", "Co"))
    mn = ranges(cp for cp, c in enumerate(category) if c == "Mn")
    punct = ranges(cp for cp, c in enumerate(category) if c.startswith("P"))
    white = [m.start() for m in regex.finditer(r"\p{White_Space}", "".join(map(chr, range(N_CODE_POINTS))))]
    ccc_runs = valued_ranges(ccc)

    out = [
        '"""GENERATED by tools/gen_bert_unicode.py -- do not edit by hand.\n\n',
        "The Unicode data HF tokenizers' BERT normaliser and pre-tokeniser use (see that script\n",
        "and the docstring of fastbpe.reference.wordpiece for the versions and why).\n\n",
        f"* OTHER, NONSPACING_MARK, PUNCTUATION: Unicode {CATEGORIES[0]} ({CATEGORIES[1]}).\n",
        f"* COMBINING_CLASS, NFD: Unicode {NORMALIZATION[0]} ({NORMALIZATION[1]}).\n",
        f"* LOWERCASE: Unicode {LOWERCASE[0]} ({LOWERCASE[1]}).\n",
        f"* WHITE_SPACE: the White_Space property (regex {regex.__version__}; unchanged since Unicode 6.3).\n",
        '"""\n\n',
        f'CATEGORY_VERSION = "{CATEGORIES[0]}"\n',
        f'NORMALIZATION_VERSION = "{NORMALIZATION[0]}"\n',
        f'LOWERCASE_VERSION = "{LOWERCASE[0]}"\n\n',
        "# Inclusive (first, last) code point runs.\n",
        "# General category Cc, Cf or Co (unicode_categories' is_other; Cn and Cs are not in it).\n",
        py_tuple_lines("OTHER", map(hex_range, other), 6),
        "# General category Mn.\n",
        py_tuple_lines("NONSPACING_MARK", map(hex_range, mn), 6),
        "# General categories Pc, Pd, Ps, Pe, Pi, Pf, Po.\n",
        py_tuple_lines("PUNCTUATION", map(hex_range, punct), 6),
        "# White_Space.\n",
        py_tuple_lines("WHITE_SPACE", (f"0x{cp:X}" for cp in white), 10),
        "# (first, last, canonical combining class) runs; every other code point has class 0.\n",
        py_tuple_lines("COMBINING_CLASS", map(hex_range, ccc_runs), 4),
        f"# Full canonical decomposition (not yet reordered) of each code point that has one;\n",
        f"# Hangul syllables U+{HANGUL_FIRST:04X}..U+{HANGUL_LAST:04X} decompose by algorithm instead.\n",
        py_map_lines("NFD", nfd),
        "# Full lowercase mapping of each code point whose lowercase differs.\n",
        py_map_lines("LOWERCASE", lower),
    ]
    return "".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the module is stale")
    parser.add_argument("--sdist-dir", type=Path, help="folder with (or for) the unicodedata2 sdists")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        text = render(args.sdist_dir or Path(tmp))
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is stale; run python tools/gen_bert_unicode.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
