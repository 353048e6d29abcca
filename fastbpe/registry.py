"""``get_encoding(name)`` for the public OpenAI encodings, offline and checked.

It never downloads. It looks for ``<name>.tiktoken`` (gpt2 also as ``r50k_base``) in
``$FASTBPE_VOCAB_DIR``, then in tiktoken's cache (``$TIKTOKEN_CACHE_DIR``,
``$DATA_GYM_CACHE_DIR`` or ``<tmp>/data-gym-cache``, files named by the sha1 of the
URL), then in installed packages that ship the file; it checks tiktoken's sha256 and
otherwise raises an error that says where to put the file.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import tempfile
from pathlib import Path

from .formats.tiktoken_bpe import KNOWN_FILES, parse_tiktoken_bpe

_URLS = {
    "gpt2": "https://openaipublic.blob.core.windows.net/encodings/r50k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}
_ALIASES = {"gpt2": "gpt2", "r50k_base": "gpt2", "cl100k_base": "cl100k_base", "o200k_base": "o200k_base"}
_HASHES = {known[0]: sha for sha, known in KNOWN_FILES.items()}
# Packages known to ship the files (module name -> relative folders to look in).
_PACKAGES = {"tiktoken_ext": ["data"], "whisper": ["assets"], "bpe_openai": ["data"]}


def list_encoding_names() -> list[str]:
    return sorted(_ALIASES)


def _candidates(name: str) -> list[Path]:
    files = [f"{name}.tiktoken"] + (["r50k_base.tiktoken"] if name == "gpt2" else [])
    out: list[Path] = []
    if os.environ.get("FASTBPE_VOCAB_DIR"):
        out += [Path(os.environ["FASTBPE_VOCAB_DIR"]) / f for f in files]
    cache = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or os.path.join(
        tempfile.gettempdir(), "data-gym-cache"
    )
    out.append(Path(cache) / hashlib.sha1(_URLS[name].encode()).hexdigest())
    for module, folders in _PACKAGES.items():
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        for loc in (spec.submodule_search_locations or []) if spec else []:
            out += [Path(loc) / folder / f for folder in folders for f in files]
    return out


@functools.lru_cache(maxsize=None)
def get_encoding(name: str):
    """The ``Encoding`` for ``gpt2`` (``r50k_base``), ``cl100k_base`` or ``o200k_base``."""
    from .encoding import Encoding

    if not isinstance(name, str):
        raise TypeError(f"encoding name must be a str, not {type(name).__name__}")
    if name not in _ALIASES:
        raise ValueError(f"unknown encoding {name!r}; choose one of {list_encoding_names()}, or load a file with fastbpe.load(path)")
    canonical = _ALIASES[name]
    tried = _candidates(canonical)
    for path in tried:
        if not path.is_file():
            continue
        contents = path.read_bytes()
        if hashlib.sha256(contents).hexdigest() != _HASHES[canonical]:
            raise ValueError(f"{path} is not the expected {canonical} file (sha256 mismatch); delete or replace it")
        _, pat, specials = KNOWN_FILES[_HASHES[canonical]]
        return Encoding(
            name,
            pat_str=pat,
            mergeable_ranks=parse_tiktoken_bpe(contents, str(path)),
            special_tokens=specials,
            explicit_n_vocab=50257 if canonical == "gpt2" else None,
        )
    raise FileNotFoundError(
        f"{canonical}.tiktoken not found; fastbpe never downloads it. Put the file in a folder and set "
        f"FASTBPE_VOCAB_DIR to it (or let tiktoken cache it once). Looked in:\n  "
        + "\n  ".join(str(p) for p in tried)
    )
