"""The package's layers: imports only point down (``[tool.importlinter]`` in pyproject.toml).

import-linter checks the Python modules (function-level imports too). It cannot see the
native extensions (``fastbpe._*.so``, built from ``src_cython/fastbpe/*.pyx``), so the
second half of this file reads the ``.pyx`` sources: an extension may import only other
extensions and modules of the layers below ``_native`` (reference, special, checks, ...),
and a Python module that imports an extension must sit above everything that extension
imports (``fastbpe.io`` uses the ``_jsonl`` kernel, which imports nothing of fastbpe).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYX = ROOT / "src_cython" / "fastbpe"
PKG = ROOT / "fastbpe"

importlinter = pytest.importorskip("importlinter", reason="import-linter is in the test extra")


def _contract() -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    with open(ROOT / "pyproject.toml", "rb") as fh:
        config = tomllib.load(fh)["tool"]["importlinter"]
    (layers,) = [c for c in config["contracts"] if c["type"] == "layers"]
    return layers


def _ranks() -> dict[str, int]:
    """Layer tail (``bpe``, ``io``, ``_native`` ...) -> rank, higher = further up."""
    layers = _contract()["layers"]
    ranks = {}
    for i, line in enumerate(layers):
        for tail in re.split(r"[|:]", line):
            ranks[tail.strip()] = len(layers) - i
    return ranks


def _rank(module: str, ranks: dict[str, int]) -> int:
    parts = module.split(".")[1:]   # fastbpe.bpe.encoding -> bpe
    if not parts:
        return max(ranks.values()) + 1   # the package root sits on top of everything
    return ranks[parts[0]]


#: The extensions and their cimported declarations (.pxd), by module name.
NATIVE = sorted({p.stem for p in PYX.glob("*.pyx")} | {p.stem for p in PYX.glob("*.pxd")})

# `from fastbpe.X import`, `from .X import`, `from fastbpe import X`, `from . import X`,
# `import fastbpe.X` (indented ones too: function-level imports count)
_FROM = re.compile(r"^[ \t]*from[ \t]+(fastbpe(?:\.[\w.]+)?|\.+[\w.]*)[ \t]+(?:c?import)[ \t]+\(?([\w, ]+)", re.M)
_IMPORT = re.compile(r"^[ \t]*import[ \t]+fastbpe((?:\.\w+)+)", re.M)


def _targets(source: str) -> set[str]:
    """The fastbpe modules a source file of the package's top level imports (``fastbpe.x.y``)."""
    out = {"fastbpe" + m.group(1) for m in _IMPORT.finditer(source)}
    for m in _FROM.finditer(source):
        base, names = m.groups()
        if base.startswith("."):   # relative to the package: the extensions sit at its top
            base = f"fastbpe.{base.lstrip('.')}".rstrip(".")
        if base == "fastbpe":   # from fastbpe import a, b: each may be a module
            out.update(f"fastbpe.{n.strip()}" for n in names.split(",") if n.strip() and n.strip() != "as")
        else:
            out.add(base)
    return out


def test_the_scan_reads_every_form():
    src = ("from fastbpe.reference.core import A\nfrom .reference import wordpiece as ref\n"
           "    from fastbpe import special, io\nimport fastbpe.trainers.bpe\nfrom . import _encode\n"
           "from libc.stdint cimport int32_t\nimport numpy as np\n")
    assert _targets(src) == {"fastbpe.reference.core", "fastbpe.reference", "fastbpe.special", "fastbpe.io",
                             "fastbpe.trainers.bpe", "fastbpe._encode"}


def _native_imports() -> dict[str, set[str]]:
    return {name: set().union(*(_targets(p.read_text()) for p in PYX.glob(f"{name}.p[yx][xd]")))
            for name in NATIVE}


def test_import_linter_contract_is_kept():
    from importlinter.cli import lint_imports

    import sys

    # lint_imports puts the working directory on sys.path itself, and leaves it there:
    # restore the whole path, or processes spawned by later tests import the unbuilt
    # source tree (in CI, the working directory) instead of the installed package
    saved = list(sys.path)
    sys.path.insert(0, str(ROOT))
    try:
        code = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True)
    finally:
        sys.path[:] = saved
    assert code == 0, "an import points up a layer: run `lint-imports` in the project root for the chain"


def test_every_module_is_in_a_layer():
    ranks = _ranks()
    for path in PKG.rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        if module != "fastbpe":
            _rank(module, ranks)   # KeyError: a new top-level module needs a line in the contract


def test_native_extensions_import_only_down():
    ranks = _ranks()
    native = ranks["_native"]
    for ext, targets in _native_imports().items():
        for target in targets:
            if target.split(".")[1] in NATIVE:
                continue
            assert _rank(target, ranks) < native, f"{ext}.pyx imports {target}, a layer above the extensions"


def _python_imports_of_natives() -> dict[str, set[str]]:
    """Python module -> the extensions it imports (which import-linter does not see)."""
    out = {}
    for path in PKG.rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        source = path.read_text()
        found = set()
        for m in re.finditer(r"^\s*from\s+(\.+|fastbpe\.?)([\w.]*)\s+import\s+([\w, ]+)", source, re.M):
            base, rest, names = m.groups()
            cands = [rest.split(".")[0]] if rest else [n.strip() for n in names.split(",")]
            found.update(c for c in cands if c in NATIVE)
        found.update(m.group(1) for m in re.finditer(r"^\s*import\s+fastbpe\.(\w+)", source, re.M)
                     if m.group(1) in NATIVE)
        if found:
            out[module] = found
    return out


def test_python_modules_sit_above_what_their_extensions_import():
    ranks = _ranks()
    deps = _native_imports()

    def python_deps(ext: str, seen=()) -> set[str]:
        out = set()
        for target in deps[ext]:
            name = target.split(".")[1]
            if name in NATIVE:
                if name not in seen:
                    out |= python_deps(name, seen + (ext,))
            else:
                out.add(target)
        return out

    found = _python_imports_of_natives()
    assert "fastbpe.io.jsonl" in found and "fastbpe.bpe.counting" in found   # the scan sees them
    for module, exts in found.items():
        for ext in exts:
            for target in python_deps(ext):
                assert _rank(target, ranks) < _rank(module, ranks) or target.startswith(module), (
                    f"{module} imports {ext}, which imports {target} from a layer not below it")


def test_the_pyx_scan_sees_imports():
    # a guard on the regex above: these are known imports of the extensions
    deps = _native_imports()
    assert "fastbpe.reference.core" in deps["_encode"]
    assert "fastbpe.special" in deps["_wordpiece"]
    assert "fastbpe._pretokenize" in deps["_train"]
    assert "fastbpe.reference" in deps["_wordpiece"]   # a function-level relative import
