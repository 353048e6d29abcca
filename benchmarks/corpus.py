"""Benchmark corpora built from text already on this machine (nothing is downloaded).

Four languages, about 1.5-4 MB of UTF-8 each, deterministic (files are read in sorted
order, identical files are skipped so boilerplate is not counted twice):

- ``english``: every file in ``/usr/share/common-licenses``, then the docstrings of the
  Python standard library modules (``ast.get_docstring`` of each module, class and
  function in ``<stdlib>/*.py`` and ``<stdlib>/*/*.py``, tests excluded), then plain-text
  files under ``/usr/share/doc`` (README, copyright, ...; not ``.gz``), up to 4 MB.
- ``python``: the source of the standard library, ``<stdlib>/**/*.py`` (tests
  excluded), up to 4 MB.
- ``turkish``: the translated strings (msgstr) of every gettext catalog
  ``/usr/share/locale/tr/LC_MESSAGES/*.mo``, read with :mod:`gettext`'s ``.mo`` parser
  (about 1.8 MB on the reference machine).
- ``chinese``: the msgstr strings of ``/usr/share/locale/zh_CN/LC_MESSAGES/*.mo``, plus
  the Chinese sample texts of CPython's test suite,
  ``<stdlib>/test/cjkencodings/{big5,big5hkscs,gb2312,gbk,gb18030,hz}-utf8.txt``
  (about 1.8 MB).

``<stdlib>`` is the directory of the running interpreter's ``os`` module. Missing sources
are skipped; ``corpus(name)`` raises if a language ends up empty.
"""
from __future__ import annotations

import ast
import functools
import gettext
import hashlib
import os
import re
from pathlib import Path

LIMIT = 4_000_000
STDLIB = Path(os.__file__).parent
LANGUAGES = ("english", "python", "turkish", "chinese")


class _Collector:
    def __init__(self, limit: int = LIMIT):
        self.parts: list[str] = []
        self.size = 0
        self.limit = limit
        self._seen: set[bytes] = set()

    def full(self) -> bool:
        return self.size >= self.limit

    def add(self, text: str) -> None:
        if not text or self.full():
            return
        digest = hashlib.sha1(text.encode("utf-8", "replace")).digest()
        if digest in self._seen:
            return
        self._seen.add(digest)
        self.parts.append(text)
        self.size += len(text.encode("utf-8", "replace"))

    def text(self) -> str:
        return "\n".join(self.parts)


def _read_text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:4096]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _stdlib_files() -> list[Path]:
    files = sorted(STDLIB.glob("*.py")) + sorted(STDLIB.glob("*/*.py"))
    return [f for f in files if "test" not in f.relative_to(STDLIB).parts[0]]


def _docstrings(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                out.append(doc)
    return out


def _english() -> str:
    c = _Collector()
    for f in sorted(Path("/usr/share/common-licenses").glob("*")):
        if f.is_file():
            c.add(_read_text(f) or "")
    for f in _stdlib_files():
        if c.full():
            break
        for doc in _docstrings(_read_text(f) or ""):
            c.add(doc)
    for root, _dirs, names in sorted(os.walk("/usr/share/doc")):
        if c.full():
            break
        for name in sorted(names):
            if not name.endswith(".gz"):
                c.add(_read_text(Path(root) / name) or "")
    return c.text()


def _python() -> str:
    c = _Collector()
    for f in sorted(STDLIB.rglob("*.py")):
        if c.full():
            break
        if "test" in f.relative_to(STDLIB).parts[0]:
            continue
        c.add(_read_text(f) or "")
    return c.text()


@functools.lru_cache(maxsize=None)
def _mo_messages(lang: str) -> tuple[tuple[str, str], ...]:
    """(msgid, msgstr) of every gettext ``.mo`` of ``lang`` on this machine, catalog by
    catalog; the key "" is a catalog's header, not a message."""
    out = []
    for f in sorted(Path("/usr/share/locale", lang, "LC_MESSAGES").glob("*.mo")):
        try:
            with open(f, "rb") as fp:
                messages = gettext.GNUTranslations(fp)._catalog
        except Exception:  # unreadable or malformed catalog: skip it, the rest is enough
            continue
        out.extend((k, v) for k, v in messages.items() if isinstance(k, str) and k and isinstance(v, str) and v)
    return tuple(out)


def _mo_strings(lang: str) -> list[str]:
    return [v for _, v in _mo_messages(lang)]


def catalog(lang: str) -> dict[str, str]:
    """msgid -> msgstr (the first catalog wins on duplicates)."""
    out: dict[str, str] = {}
    for k, v in _mo_messages(lang):
        out.setdefault(k, v)
    return out


def parallel(limit: int = 300_000) -> dict[str, str]:
    """``{"english": ..., "turkish": ..., "chinese": ...}``: the same gettext messages
    (English msgid, Turkish and Chinese msgstr), one per line: parallel text."""
    tr, zh = catalog("tr"), catalog("zh_CN")
    keys = [k for k in tr if k in zh and "\n" not in k and "\n" not in tr[k] and "\n" not in zh[k]]
    out: dict[str, list[str]] = {"english": [], "turkish": [], "chinese": []}
    size = 0
    for k in keys:
        out["english"].append(k)
        out["turkish"].append(tr[k])
        out["chinese"].append(zh[k])
        size += len(k)
        if size >= limit:
            break
    return {lang: "\n".join(lines) + "\n" for lang, lines in out.items()}


def _turkish() -> str:
    c = _Collector()
    for s in _mo_strings("tr"):
        c.add(s)
    return c.text()


def _chinese() -> str:
    c = _Collector()
    for s in _mo_strings("zh_CN"):
        c.add(s)
    for name in ["big5", "big5hkscs", "gb2312", "gbk", "gb18030", "hz"]:
        c.add(_read_text(STDLIB / "test" / "cjkencodings" / f"{name}-utf8.txt") or "")
    return c.text()


@functools.lru_cache(maxsize=None)
def corpus(name: str) -> str:
    """The benchmark text for one of LANGUAGES."""
    builders = {"english": _english, "python": _python, "turkish": _turkish,
                "chinese": _chinese}
    if name not in builders:
        raise ValueError(f"unknown corpus {name!r}; choose from {LANGUAGES}")
    text = builders[name]()
    if not text:
        raise RuntimeError(f"no text found on this machine for the {name} corpus")
    return text


def documents(name: str, size: int = 2000) -> list[str]:
    """The corpus cut into documents of about ``size`` characters, at line ends."""
    return cut(corpus(name), size)


def cut(text: str, size: int = 2000) -> list[str]:
    r"""``text`` in documents of about ``size`` characters, each cut after the first
    newline at or after ``size`` characters in (the last one takes the rest).

    >>> cut("ab\ncd\nef", 2)
    ['ab\n', 'cd\n', 'ef']
    """
    docs, start = [], 0
    while start < len(text):
        end = text.find("\n", start + size)
        end = len(text) if end < 0 else end + 1
        docs.append(text[start:end])
        start = end
    return docs


def short_lines(text: str, n: int) -> list[str]:
    """Up to n sentences of 40-80 characters of text (how BERT users encode: a line at a time)."""
    out = []
    for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())):
        if 40 <= len(s) <= 80 and "[" not in s:
            out.append(s)
            if len(out) == n:
                break
    return out


if __name__ == "__main__":
    for lang in LANGUAGES:
        t = corpus(lang)
        print(f"{lang:8} {len(t.encode()) / 1e6:5.2f} MB  {t[:60]!r}")
