"""Fallback corpus for ``report.py`` until ``benchmarks/corpus.py`` (branch ``encode``) is on
main; same interface (``LANGUAGES``, ``corpus(name)``, ``documents(name, size)``), smaller.

Text already on this machine, nothing downloaded, deterministic (sorted file order):

- ``english``: docstrings of the Python standard library (``ast.get_docstring``);
- ``python``: the standard library's ``.py`` sources (tests excluded);
- ``turkish`` / ``chinese``: the translations (msgstr) of the gettext catalogs in
  ``/usr/share/locale/{tr,zh_CN}/LC_MESSAGES/*.mo``.

``parallel()`` gives *parallel* text from the same catalogs: the English messages (msgid)
that both Turkish and Chinese translate, with both translations, in the same order.
"""
from __future__ import annotations

import ast
import functools
import gettext
import os
from pathlib import Path

LANGUAGES = ("english", "python", "turkish", "chinese")
LIMIT = 2_000_000
STDLIB = Path(os.__file__).parent
LOCALE = Path("/usr/share/locale")


def _stdlib_py() -> list[Path]:
    return [p for p in sorted(STDLIB.rglob("*.py"))
            if not {"test", "tests", "site-packages", "idle_test"} & set(p.relative_to(STDLIB).parts)]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _take(parts, limit: int) -> str:
    out, size = [], 0
    for p in parts:
        if not p:
            continue
        out.append(p)
        size += len(p.encode("utf-8"))
        if size >= limit:
            break
    return "\n".join(out)


def _docstrings():
    for f in _stdlib_py():
        try:
            tree = ast.parse(_read(f))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    yield doc


@functools.lru_cache(maxsize=None)
def catalog(lang: str) -> dict[str, str]:
    """msgid -> msgstr of every ``.mo`` of ``lang`` (first catalog wins on duplicates)."""
    out: dict[str, str] = {}
    for f in sorted((LOCALE / lang / "LC_MESSAGES").glob("*.mo")):
        try:
            with open(f, "rb") as fh:
                cat = gettext.GNUTranslations(fh)._catalog
        except Exception:  # a malformed catalog is skipped; the others suffice
            continue
        for k, v in cat.items():
            if isinstance(k, str) and k and isinstance(v, str) and v:
                out.setdefault(k, v)
    return out


@functools.lru_cache(maxsize=None)
def corpus(name: str) -> str:
    if name == "english":
        text = _take(_docstrings(), LIMIT)
    elif name == "python":
        text = _take((_read(f) for f in _stdlib_py()), LIMIT)
    elif name == "turkish":
        text = _take(catalog("tr").values(), LIMIT)
    elif name == "chinese":
        text = _take(catalog("zh_CN").values(), LIMIT)
    else:
        raise ValueError(f"unknown corpus {name!r}; choose from {LANGUAGES}")
    if not text:
        raise RuntimeError(f"no text found on this machine for the {name} corpus")
    return text


def documents(name: str, size: int = 2000) -> list[str]:
    """The corpus cut into documents of about ``size`` characters, at line ends."""
    text, docs, start = corpus(name), [], 0
    while start < len(text):
        end = text.find("\n", start + size)
        end = len(text) if end < 0 else end + 1
        docs.append(text[start:end])
        start = end
    return docs


def parallel(limit: int = 300_000) -> dict[str, str]:
    """``{"english": ..., "turkish": ..., "chinese": ...}``: the same messages, one per line."""
    tr, zh = catalog("tr"), catalog("zh_CN")
    keys = [k for k in tr if k in zh and "\n" not in k and "\n" not in tr[k] and "\n" not in zh[k]]
    out = {"english": [], "turkish": [], "chinese": []}
    size = 0
    for k in keys:
        out["english"].append(k)
        out["turkish"].append(tr[k])
        out["chinese"].append(zh[k])
        size += len(k)
        if size >= limit:
            break
    return {lang: "\n".join(lines) + "\n" for lang, lines in out.items()}
