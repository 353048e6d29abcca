"""``get_encoding(name)`` for the public OpenAI encodings: offline, checked, cached.

The names are tiktoken's (``list_encoding_names()``); each is defined as tiktoken
defines it (``fastbpe._openai_public``). The ranks come from one of four ``.tiktoken``
files, and fastbpe ships all four inside the package (xz-compressed, MIT-licensed data
from OpenAI's tiktoken), so ``get_encoding`` works on a fresh machine and never
downloads.

Where the ranks are read from (decision), first found wins:

1. ``$FASTBPE_VOCAB_DIR/<file>.tiktoken`` (r50k_base's also as ``gpt2.tiktoken``);
2. tiktoken's cache (``$TIKTOKEN_CACHE_DIR``, else ``$DATA_GYM_CACHE_DIR``, else
   ``<tmp>/data-gym-cache``; files named by the sha1 of the URL; an empty
   ``TIKTOKEN_CACHE_DIR`` turns the cache off, as in tiktoken);
3. installed packages known to ship the files (tiktoken_ext, whisper, bpe_openai);
4. the copy inside fastbpe (``fastbpe/vocab/<file>.tiktoken.xz``).

Why users' files come first: every source is checked against tiktoken's sha256, so all
of them give the same ranks; a plain file skips unpacking (~60 ms for o200k_base), and
``FASTBPE_VOCAB_DIR`` keeps its meaning, "use this file": a file there (or in a
package) whose hash is wrong is a ValueError naming it, never passed over in silence.
A wrong file in tiktoken's cache is skipped instead, as tiktoken itself skips it (it
downloads the file again). The shipped copy comes last and is checked the same way, so
FileNotFoundError (listing every place looked in) means an installation whose data
files were removed.

Each encoding is built once per process, under a lock, and cached. A cached encoding
pickles as its name and unpickles as the receiving process's cached object (see
``Encoding.__reduce_ex__``).

>>> list_encoding_names()[:3]
['gpt2', 'r50k_base', 'p50k_base']
"""
from __future__ import annotations

import binascii
import hashlib
import importlib.resources
import importlib.util
import lzma
import os
import sys
import tempfile
import threading
from pathlib import Path

from ._openai_public import ENCODINGS, RANKS_FILES

# Packages known to ship the files (module name -> relative folders to look in).
_PACKAGES = {"tiktoken_ext": ["data"], "whisper": ["assets"], "bpe_openai": ["data"]}

# The copies shipped in the package (a Traversable: works from a zip too).
_SHIPPED_DIR = importlib.resources.files("fastbpe") / "vocab"

_LOCK = threading.RLock()
_CACHE: dict[str, object] = {}   # name -> Encoding


def list_encoding_names() -> list[str]:
    """The names ``get_encoding`` knows, in tiktoken's order."""
    return list(ENCODINGS)


def get_encoding(name: str):
    """The ``Encoding`` called ``name`` (one of ``list_encoding_names()``), built once.

    >>> get_encoding("cl100k_base") is get_encoding("cl100k_base")
    True
    """
    if not isinstance(name, str):
        raise TypeError(f"encoding name must be a str, not {type(name).__name__}")
    enc = _CACHE.get(name)
    if enc is not None:
        return enc
    if name not in ENCODINGS:
        raise ValueError(
            f"unknown encoding {name!r}; choose one of {list_encoding_names()}, or load a file with fastbpe.load(path)"
        )
    with _LOCK:   # two threads asking at once build it once
        if name not in _CACHE:
            _CACHE[name] = _build(name)
        return _CACHE[name]


def is_registered(encoding) -> bool:
    """Whether ``encoding`` is the object ``get_encoding`` hands out for its name."""
    return _CACHE.get(getattr(encoding, "name", None)) is encoding


def _clear_cache() -> None:
    """Forget the built encodings (tests use it to exercise the search again)."""
    with _LOCK:
        _CACHE.clear()


def _build(name: str):
    from .bpe.encoding import Encoding

    definition = ENCODINGS[name]
    contents, _ = _locate(definition.ranks)
    enc = Encoding(
        name,
        pat_str=definition.pat_str,
        mergeable_ranks=_parse_known(contents),
        special_tokens=dict(definition.special_tokens),
        explicit_n_vocab=definition.explicit_n_vocab,
    )
    enc._registry = sys.modules[__name__]  # pickles by name while it is the cached one
    return enc


def _locate(ranks_name: str) -> tuple[bytes, str]:
    """The checked contents of a ranks file and where they came from, searched in the
    order of the module docstring."""
    info = RANKS_FILES[ranks_name]
    tried: list[str] = []
    for path, skip_if_wrong in _user_candidates(ranks_name):
        tried.append(str(path))
        if not path.is_file():
            continue
        contents = path.read_bytes()
        if _sha256(contents) == info.sha256:
            return contents, str(path)
        if not skip_if_wrong:
            raise ValueError(f"{path} is not the expected {ranks_name} file (sha256 mismatch); delete or replace it")
    shipped = _SHIPPED_DIR / f"{ranks_name}.tiktoken.xz"
    tried.append(str(shipped))
    if shipped.is_file():
        contents = lzma.decompress(shipped.read_bytes())
        if _sha256(contents) != info.sha256:
            raise ValueError(f"fastbpe's own copy {shipped} is damaged (sha256 mismatch); reinstall fastbpe")
        return contents, str(shipped)
    raise FileNotFoundError(
        f"{info.file_names[0]} not found (this fastbpe installation lacks its vocab/ files, and "
        "fastbpe never downloads). Reinstall fastbpe, or put the file in a folder and set "
        "FASTBPE_VOCAB_DIR to it. Looked in:\n  " + "\n  ".join(tried)
    )


def _user_candidates(ranks_name: str) -> list[tuple[Path, bool]]:
    """Users' copies of a ranks file, in search order, each with whether a wrong file
    there is skipped (tiktoken's cache) rather than an error."""
    info = RANKS_FILES[ranks_name]
    out: list[tuple[Path, bool]] = []
    if os.environ.get("FASTBPE_VOCAB_DIR"):
        out += [(Path(os.environ["FASTBPE_VOCAB_DIR"]) / f, False) for f in info.file_names]
    cache = _tiktoken_cache_dir()
    if cache:
        out.append((Path(cache) / hashlib.sha1(info.url.encode()).hexdigest(), True))
    for module, folders in _PACKAGES.items():
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        for loc in (spec.submodule_search_locations or []) if spec else []:
            out += [(Path(loc) / folder / f, False) for folder in folders for f in info.file_names]
    return out


def _tiktoken_cache_dir() -> str:
    """tiktoken's cache folder, or "" when the user turned the cache off."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return os.environ["TIKTOKEN_CACHE_DIR"]
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return os.environ["DATA_GYM_CACHE_DIR"]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _parse_known(contents: bytes) -> dict[bytes, int]:
    """Parse a ``.tiktoken`` file whose sha256 is tiktoken's for it, so it is one of the
    four known-good files: ``formats.tiktoken_bpe.parse_tiktoken_bpe``'s line-by-line
    checks cannot fail on it, and skipping them halves the parse (~170 against ~300 ms
    for o200k_base; tests check both parsers agree on every file)."""
    fields = contents.split()
    return dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2])))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
