"""Generate src_cython/fastbpe/_unicode_tables.h from the installed ``regex`` module.

The native pre-tokenizers must classify every code point exactly as ``regex`` does when
it runs tiktoken's split patterns, so the tables are read out of ``regex`` itself (not
out of ``unicodedata``, whose Unicode version follows the Python build and may differ).

Usage (from the project root)::

    python tools/gen_unicode_tables.py            # rewrite the header
    python tools/gen_unicode_tables.py --check    # exit 1 if the header is stale

The build never runs this script; the generated header is committed. Re-run it (and the
tests) after upgrading ``regex``: tests/test_pretokenize.py compares the header with the
installed ``regex`` for all code points and fails when they disagree.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import regex

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src_cython" / "fastbpe" / "_unicode_tables.h"
N_CODE_POINTS = 0x110000
BLOCK_SHIFT = 7  # 128 code points per second-stage block: small table, few distinct blocks
BLOCK = 1 << BLOCK_SHIFT

# Bit -> the regex class whose members get the bit. L/N/WS/U/W/M/CRLF drive the
# splitting; the single general categories are kept so tests can check them one by one.
# U and W are o200k's two letter classes ("upper-ish" and "lower-ish"); both hold M.
FLAG_CLASSES = [
    ("L", r"\p{L}"),
    ("N", r"\p{N}"),
    ("WS", r"\s"),
    ("U", r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"),
    ("W", r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"),
    ("M", r"\p{M}"),
    ("LU", r"\p{Lu}"),
    ("LL", r"\p{Ll}"),
    ("LT", r"\p{Lt}"),
    ("LM", r"\p{Lm}"),
    ("LO", r"\p{Lo}"),
    ("CRLF", r"[\r\n]"),
]

# Every general category, in this order (index = the value of fbpe_gc_of). They
# partition the code points (``render`` checks it), and each one-letter class of regex
# (``\p{L}``, ``\p{P}``, ...) is the union of its two-letter ones (checked too), so the
# split programs build any of these properties from this table at load
# (``_split_program.category_table``) instead of scanning every code point with regex.
GENERAL_CATEGORIES = (
    "Lu Ll Lt Lm Lo Mn Mc Me Nd Nl No Pc Pd Ps Pe Pi Pf Po Sm Sc Sk So Zs Zl Zp Cc Cf Cs Co Cn"
).split()

# Letters of the contractions in tiktoken's patterns; under (?i) other code points can
# match them (e.g. U+017F LATIN SMALL LETTER LONG S matches "s").
CONTRACTION_LETTERS = "sdmtlvre"

# A code point first assigned in each Unicode version, to name the version regex uses.
UNICODE_PROBES = [
    ("13.0", 0x1FAD0), ("14.0", 0x1FAE0), ("15.0", 0x1E030), ("15.1", 0x2EBF0),
    ("16.0", 0x1C89), ("17.0", 0x323B0),
]


def all_code_points() -> str:
    # Lone surrogates included: regex accepts them in a str and classifies them (Cs).
    return "".join(map(chr, range(N_CODE_POINTS)))


def class_flags(text: str) -> np.ndarray:
    flags = np.zeros(N_CODE_POINTS, dtype=np.uint16)
    for bit, (_, cls) in enumerate(FLAG_CLASSES):
        members = [m.start() for m in regex.finditer(cls, text)]
        flags[np.array(members, dtype=np.int64)] |= np.uint16(1 << bit)
    return flags


def general_categories(text: str) -> np.ndarray:
    """Each code point's index in GENERAL_CATEGORIES, as regex classifies it."""
    gc = np.full(N_CODE_POINTS, 0xFF, dtype=np.uint8)
    for k, name in enumerate(GENERAL_CATEGORIES):
        for m in regex.finditer(rf"\p{{{name}}}+", text):
            if (gc[m.start():m.end()] != 0xFF).any():
                raise SystemExit(f"regex puts a code point in two categories (one is {name})")
            gc[m.start():m.end()] = k
    if (gc == 0xFF).any():
        raise SystemExit(f"U+{int(np.flatnonzero(gc == 0xFF)[0]):04X} is in no general category")
    for major in sorted({name[0] for name in GENERAL_CATEGORIES}):
        members = np.zeros(N_CODE_POINTS, dtype=bool)
        for m in regex.finditer(rf"\p{{{major}}}+", text):
            members[m.start():m.end()] = True
        union = np.isin(gc, [k for k, name in enumerate(GENERAL_CATEGORIES) if name[0] == major])
        if (members != union).any():
            raise SystemExit(f"regex's \\p{{{major}}} is not the union of its categories")
    return gc


def case_folds(text: str) -> dict[int, str]:
    """Code point -> contraction letter it matches under (?i), for all code points."""
    folds: dict[int, str] = {}
    for letter in CONTRACTION_LETTERS:
        for m in regex.finditer(f"(?i:{letter})", text):
            cp = ord(m.group())
            if cp in folds:
                raise SystemExit(f"U+{cp:04X} folds to both {folds[cp]} and {letter}")
            folds[cp] = letter
    return folds


def unicode_version() -> str:
    version = "older than 13.0"
    for name, cp in UNICODE_PROBES:
        if regex.match(r"\p{Assigned}", chr(cp)):
            version = name
    if version == UNICODE_PROBES[-1][0]:
        version += " (or newer)"
    return version


def two_stage(flags: np.ndarray) -> tuple[list[int], list[bytes]]:
    """(stage1, the distinct blocks): block stage1[cp >> 7] holds cp's value."""
    blocks: dict[bytes, int] = {}
    stage1 = []
    for start in range(0, N_CODE_POINTS, BLOCK):
        key = flags[start : start + BLOCK].tobytes()
        stage1.append(blocks.setdefault(key, len(blocks)))
    return stage1, list(blocks)


def c_array(ctype: str, name: str, values, per_line: int = 16) -> str:
    values = list(values)
    lines = []
    for i in range(0, len(values), per_line):
        lines.append("    " + ", ".join(str(v) for v in values[i : i + per_line]) + ",")
    return f"static const {ctype} {name}[{len(values)}] = {{\n" + "\n".join(lines) + "\n};\n"


def render() -> str:
    text = all_code_points()
    flags = class_flags(text)
    folds = case_folds(text)
    stage1, blocks = two_stage(flags)
    if len(blocks) > 0xFFFF:
        raise SystemExit("too many distinct blocks for a uint16 stage-1 table")
    stage2 = np.frombuffer(b"".join(blocks), dtype=np.uint16)
    ascii_fold = [ord(folds[c]) if c in folds else 0 for c in range(128)]
    wide_fold = sorted((cp, letter) for cp, letter in folds.items() if cp >= 128)

    out = [
        "/* GENERATED by tools/gen_unicode_tables.py -- do not edit by hand.\n",
        f" * Source: Python regex module {regex.__version__}, Unicode {unicode_version()}\n",
        f" * (generated under Python {sys.version.split()[0]}).\n",
        " * Classes are read out of regex itself, so the native pre-tokenizers classify\n",
        " * every code point (lone surrogates included) exactly as regex does.\n",
        f" * Two-stage table: {BLOCK}-code-point blocks, {len(blocks)} distinct.\n",
        " */\n",
        "#ifndef FASTBPE_UNICODE_TABLES_H\n#define FASTBPE_UNICODE_TABLES_H\n\n",
        "#include <stdint.h>\n\n",
        f'#define FBPE_UNICODE_SOURCE "regex {regex.__version__}, Unicode {unicode_version()}"\n\n',
    ]
    for bit, (name, cls) in enumerate(FLAG_CLASSES):
        out.append(f"#define FBPE_{name} {1 << bit}u  /* {cls} */\n")
    out.append(f"\n#define FBPE_BLOCK_SHIFT {BLOCK_SHIFT}\n\n")
    out.append(c_array("uint16_t", "fbpe_stage1", stage1))
    out.append("\n")
    out.append(c_array("uint16_t", "fbpe_stage2", stage2.tolist()))
    out.append("\n/* Class bits of an ASCII byte (the ASCII fast path reads only this). */\n")
    out.append(c_array("uint16_t", "fbpe_ascii_flags", flags[:128].tolist()))
    out.append("\n")
    out.append(
        "static inline uint16_t fbpe_class_of(uint32_t cp) {\n"
        "    if (cp >= 0x110000u) return 0;\n"
        "    return fbpe_stage2[((uint32_t)fbpe_stage1[cp >> FBPE_BLOCK_SHIFT] << FBPE_BLOCK_SHIFT)\n"
        f"                       | (cp & {BLOCK - 1}u)];\n"
        "}\n\n"
    )
    out.append(
        f"/* Contraction letter ({CONTRACTION_LETTERS}) that a code point matches under regex\n"
        " * (?i), as a lower-case ASCII char, or 0. */\n"
    )
    out.append(c_array("unsigned char", "fbpe_fold_ascii", ascii_fold))
    out.append("\nstatic inline int fbpe_fold_letter(uint32_t cp) {\n")
    out.append("    if (cp < 128u) return fbpe_fold_ascii[cp];\n    switch (cp) {\n")
    for cp, letter in wide_fold:
        out.append(f"    case 0x{cp:X}u: return '{letter}';\n")
    out.append("    default: return 0;\n    }\n}\n\n")
    out.append(render_categories(general_categories(text)))
    out.append("#endif\n")
    return "".join(out)


def render_categories(gc: np.ndarray) -> str:
    """The general-category table: read at load by the split programs only."""
    stage1, blocks = two_stage(gc)
    if len(blocks) > 0xFFFF:
        raise SystemExit("too many distinct category blocks for a uint16 stage-1 table")
    names = ", ".join(f'"{name}"' for name in GENERAL_CATEGORIES)
    return "".join([
        f"/* General category of every code point (index into fbpe_gc_names), as regex\n"
        f" * classifies it; {len(blocks)} distinct blocks. A one-letter class (\\p{{P}}) is the\n"
        " * union of the categories whose name starts with it (checked when generated). */\n",
        f"#define FBPE_N_GC {len(GENERAL_CATEGORIES)}\n",
        f"static const char* const fbpe_gc_names[FBPE_N_GC] = {{{names}}};\n\n",
        c_array("uint16_t", "fbpe_gc_stage1", stage1),
        "\n",
        c_array("uint8_t", "fbpe_gc_stage2", np.frombuffer(b"".join(blocks), dtype=np.uint8).tolist()),
        "\n",
        "static inline uint8_t fbpe_gc_of(uint32_t cp) {\n"
        "    if (cp >= 0x110000u) return FBPE_N_GC - 1;  /* Cn */\n"
        "    return fbpe_gc_stage2[((uint32_t)fbpe_gc_stage1[cp >> FBPE_BLOCK_SHIFT] << FBPE_BLOCK_SHIFT)\n"
        f"                          | (cp & {BLOCK - 1}u)];\n"
        "}\n\n",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the header is stale")
    args = parser.parse_args()
    header = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != header:
            print(f"{OUT} is stale; run python tools/gen_unicode_tables.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(header)
    print(f"wrote {OUT} ({len(header)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
