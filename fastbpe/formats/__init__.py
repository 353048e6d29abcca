"""Load and save tokenizers in the formats people already have.

=================  =========================================  =====================
format             files                                      holds
=================  =========================================  =====================
``tiktoken``       ``*.tiktoken``                             ranks
``hf``             ``tokenizer.json`` (byte-level BPE or       everything
                   WordPiece)
``gpt2``           ``encoder.json`` + ``vocab.bpe``           ranks, special tokens
``vocab.txt``      BERT ``vocab.txt``                         WordPiece vocabulary
=================  =========================================  =====================

Every save is atomic (temporary file + rename).
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

from ..reference import patterns

SAVE_FORMATS = ("tiktoken", "hf", "gpt2")


def _format_from_path(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(".tiktoken"):
        return "tiktoken"
    if name.endswith(".json"):
        return "hf"
    if name.endswith(".txt"):
        return "vocab.txt"
    if name.endswith(".bpe"):
        return "gpt2"
    raise ValueError(
        f"cannot tell the format of {path} from its name; use a .tiktoken or .json name, "
        "or pass format='tiktoken' | 'hf' | 'gpt2'"
    )


def save_encoding(enc, path: str | os.PathLike, format: str | None = None) -> None:
    """Save an ``Encoding``; for ``gpt2`` pass the directory or the ``vocab.bpe`` path
    (``encoder.json`` is written beside it)."""
    path = Path(path)
    fmt = format or _format_from_path(path)
    if fmt == "tiktoken":
        from .tiktoken_bpe import write_tiktoken

        if enc.special_tokens or enc.pat_str not in patterns.PATTERNS.values():
            warnings.warn(
                f"the .tiktoken format holds only ranks: the split pattern and special tokens of "
                f"{enc.name!r} are not saved in {path}; save as tokenizer.json to keep them",
                stacklevel=3,
            )
        write_tiktoken(path, enc.mergeable_ranks)
    elif fmt == "hf":
        from .hf_bpe import write_hf_bpe

        write_hf_bpe(path, enc.mergeable_ranks, enc.pat_str, enc.special_tokens)
    elif fmt == "gpt2":
        from .gpt2_files import write_gpt2_files

        folder = path if path.is_dir() else path.parent
        write_gpt2_files(folder / "encoder.json", folder / "vocab.bpe", enc.mergeable_ranks, enc.special_tokens)
    else:
        raise ValueError(f"unknown format {fmt!r} for a BPE Encoding; choose one of {SAVE_FORMATS}")


def load(path: str | os.PathLike, *, format: str | None = None, pat_str: str | None = None,
         special_tokens: dict[str, int] | None = None, name: str | None = None):
    """Load a tokenizer file; returns an ``Encoding`` (BPE) or a ``WordPiece``.

    ``.tiktoken`` files hold no split pattern or special tokens: the three public OpenAI
    files are recognised by their sha256; for others pass ``pat_str`` (default: the
    cl100k pattern) and ``special_tokens``.
    """
    from ..encoding import Encoding

    if isinstance(path, (bytes, bytearray)) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"tokenizer file not found: {path}")
    fmt = format or (_format_from_path(path) if not path.is_dir() else "gpt2")
    if fmt == "tiktoken":
        from .tiktoken_bpe import read_tiktoken

        ranks, known = read_tiktoken(path)
        k_name, k_pat, k_special = known if known else (path.name.removesuffix(".tiktoken"), patterns.CL100K, {})
        return Encoding(
            name or k_name,
            pat_str=patterns.resolve_pattern(pat_str) if pat_str else k_pat,
            mergeable_ranks=ranks,
            special_tokens=k_special if special_tokens is None else special_tokens,
        )
    if fmt == "hf":
        from ._hfjson import field, model_of, read_json

        data = read_json(path)
        model_type = field(model_of(data, str(path)), "type", str, "model", str(path), default=None)
        if model_type == "WordPiece":
            from ..wordpiece import WordPiece

            return WordPiece.from_file(path)
        if model_type != "BPE":
            raise ValueError(f"{path}: unsupported tokenizer model {model_type!r} (expected BPE or WordPiece)")
        from .hf_bpe import from_hf_json

        ranks, pat, specials = from_hf_json(data, str(path))
        return Encoding(name or path.stem, pat_str=pat, mergeable_ranks=ranks,
                        special_tokens=specials if special_tokens is None else special_tokens)
    if fmt == "gpt2":
        from .gpt2_files import read_gpt2_files

        folder = path if path.is_dir() else path.parent
        ranks, specials = read_gpt2_files(folder / "encoder.json", folder / "vocab.bpe")
        return Encoding(name or folder.name, pat_str=patterns.resolve_pattern(pat_str or "gpt2"),
                        mergeable_ranks=ranks, special_tokens=specials if special_tokens is None else special_tokens)
    if fmt == "vocab.txt":
        from ..wordpiece import WordPiece

        return WordPiece.from_file(path)
    raise ValueError(f"unknown format {fmt!r}")
