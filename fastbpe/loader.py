"""``fastbpe.load``: build an ``Encoding`` (BPE) or a ``WordPiece`` from tokenizer files.

(The module is ``loader``: a submodule named ``load`` would replace the function
``fastbpe.load`` on the package as soon as it was imported.)

The codecs in ``fastbpe.formats`` turn files into ranks, merges and vocabularies; this
module picks the codec from the path (or ``format=``) and builds the tokenizer. See
``fastbpe.formats`` for the formats and what each holds.

>>> import os, tempfile, fastbpe
>>> path = os.path.join(tempfile.mkdtemp(), "toy.json")
>>> fastbpe.Encoding("toy", pat_str=r"\\S+|\\s+", mergeable_ranks={bytes([i]): i for i in range(256)},
...                  special_tokens={}).save(path)
>>> load(path).n_vocab
256
"""
from __future__ import annotations

import os
from pathlib import Path

from .bpe.encoding import Encoding
from .formats import _format_from_path
from .formats.sentencepiece_model import is_sentencepiece_file
from .reference import patterns


def load(path: str | os.PathLike, *, format: str | None = None, pat_str: str | None = None,
         special_tokens: dict[str, int] | None = None, name: str | None = None):
    """Load a tokenizer file; returns an ``Encoding`` (BPE), a ``WordPiece`` or, for a
    sentencepiece ``.model`` file (or ``format="sentencepiece"``), a ``SentencePieceBPE``.

    ``.tiktoken`` files hold no split pattern or special tokens: the three public OpenAI
    files are recognised by their sha256; for others pass ``pat_str`` (default: the
    cl100k pattern) and ``special_tokens``.
    """
    if isinstance(path, (bytes, bytearray)) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"tokenizer file not found: {path}")
    if path.is_dir() and format in (None, "hf") and (path / "tokenizer.json").exists():
        path = path / "tokenizer.json"  # a transformers folder
    if format == "sentencepiece" or (format is None and is_sentencepiece_file(path)):
        if pat_str is not None or special_tokens is not None:
            raise ValueError(f"{path}: a sentencepiece model has no split pattern and its own special tokens")
        from .spm import SentencePieceBPE

        return SentencePieceBPE.from_file(path, name=name)
    fmt = format or (_format_from_path(path) if not path.is_dir() else "gpt2")
    if fmt == "tiktoken":
        from .formats.tiktoken_bpe import read_tiktoken

        ranks, known = read_tiktoken(path)
        k_name, k_pat, k_special = known if known else (path.name.removesuffix(".tiktoken"), patterns.CL100K, {})
        return Encoding(
            name or k_name,
            pat_str=patterns.resolve_pattern(pat_str) if pat_str else k_pat,
            mergeable_ranks=ranks,
            special_tokens=k_special if special_tokens is None else special_tokens,
        )
    if fmt == "hf":
        from .formats._hfjson import field, model_of, read_json

        data = read_json(path)
        model_type = field(model_of(data, str(path)), "type", str, "model", str(path), default=None)
        if model_type == "WordPiece":
            from .wordpiece import WordPiece

            return WordPiece.from_file(path)
        from .formats.hf_spm import is_spm_json

        if is_spm_json(data):   # sentencepiece-style (Llama 2, Mistral): characters, ▁, byte fallback
            from .spm import HFSentencePieceBPE
            from .formats.hf_spm import read_hf_spm

            return HFSentencePieceBPE(read_hf_spm(data, str(path)), name=name or path.stem, source=str(path))
        if model_type != "BPE":
            raise ValueError(f"{path}: unsupported tokenizer model {model_type!r} (expected BPE or WordPiece)")
        from .formats.hf_bpe import from_hf_json

        ranks, pat, specials, added = from_hf_json(data, str(path))
        return Encoding(name or path.stem, pat_str=pat, mergeable_ranks=ranks,
                        special_tokens=specials if special_tokens is None else special_tokens, added_tokens=added)
    if fmt == "gpt2":
        from .formats.gpt2_files import read_gpt2_files

        folder = path if path.is_dir() else path.parent
        ranks, specials = read_gpt2_files(folder / "encoder.json", folder / "vocab.bpe")
        return Encoding(name or folder.name, pat_str=patterns.resolve_pattern(pat_str or "gpt2"),
                        mergeable_ranks=ranks, special_tokens=specials if special_tokens is None else special_tokens)
    if fmt == "vocab.txt":
        from .wordpiece import WordPiece

        return WordPiece.from_file(path)
    raise ValueError(f"unknown format {fmt!r}")
