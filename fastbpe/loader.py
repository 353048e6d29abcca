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


#: What a folder may hold, in the order looked for: (format, the file that stands for it,
#: the files it needs).
FOLDER_FILES = (("hf", "tokenizer.json", ("tokenizer.json",)),
                ("gpt2", "encoder.json", ("encoder.json", "vocab.bpe")),
                ("sentencepiece", "tokenizer.model", ("tokenizer.model",)))


def _folder_file(folder: Path, format: str | None) -> tuple[Path, str]:
    """The tokenizer file of a folder and its format: a transformers folder's
    ``tokenizer.json``, or GPT-2's ``encoder.json`` with ``vocab.bpe``, or a
    ``tokenizer.model`` (sentencepiece: Llama 2, Mistral; or Meta's tiktoken ranks); else
    FileNotFoundError naming the folder and what was looked for. (``vocab.txt`` and
    ``.tiktoken`` files are named, not found: a BERT folder's casing lives elsewhere.)

    >>> import tempfile
    >>> _folder_file(Path(tempfile.mkdtemp(prefix="empty")), None)
    Traceback (most recent call last):
    ...
    FileNotFoundError: .../empty...: a folder with no tokenizer file fastbpe knows: looked for tokenizer.json, or encoder.json with vocab.bpe, or tokenizer.model (pass a .tiktoken or vocab.txt file itself)
    """
    wanted = [entry for entry in FOLDER_FILES if format in (None, entry[0])]
    if not wanted:
        raise ValueError(f"{folder}: a folder, but format={format!r} is read from one file: pass the file itself")
    for fmt, name, needs in wanted:
        if all((folder / n).is_file() for n in needs):
            return folder / name, fmt
    looked = ", or ".join(" with ".join(needs) for _, _, needs in wanted)
    raise FileNotFoundError(f"{folder}: a folder with no tokenizer file fastbpe knows: looked for {looked} "
                            "(pass a .tiktoken or vocab.txt file itself)")


def load(path: str | os.PathLike, *, format: str | None = None, pat_str: str | None = None,
         special_tokens: dict[str, int] | None = None, name: str | None = None, model: str | None = None):
    """Load a tokenizer file; returns an ``Encoding`` (BPE), a ``WordPiece`` or, for a
    sentencepiece ``.model`` file (or ``format="sentencepiece"``), a ``SentencePieceBPE``.

    ``.tiktoken`` files (and Meta's tiktoken-format ``tokenizer.model``) hold no split
    pattern or special tokens. The public OpenAI files and Meta's Llama 3 / Llama 4
    files are recognised by their sha256; any other needs ``pat_str`` (a pattern or a
    short name such as ``"cl100k"``, with ``special_tokens``) or ``model`` (one of
    ``fastbpe.formats.open_models.OPEN_MODELS``: ``"llama3"``, ``"llama4"``, ``"qwen"``,
    which gives its pattern and special tokens). There is no default pattern: a guessed
    one encodes differently from the model, silently.
    """
    if isinstance(path, (bytes, bytearray)) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"tokenizer file not found: {path}")
    fmt = None
    if path.is_dir():
        path, fmt = _folder_file(path, format)
        if fmt == "sentencepiece" and not is_sentencepiece_file(path):
            fmt = "tiktoken"    # Meta's Llama 3 folders: tiktoken ranks named tokenizer.model
    if format == "sentencepiece" or (format is None and is_sentencepiece_file(path)):
        if pat_str is not None or special_tokens is not None or model is not None:
            raise ValueError(f"{path}: a sentencepiece model has no split pattern and its own special tokens")
        from .spm import SentencePieceBPE

        return SentencePieceBPE.from_file(path, name=name)
    fmt = fmt or format or _format_from_path(path)
    if fmt == "tiktoken":
        from .formats.open_models import OPEN_MODELS, open_model
        from .formats.tiktoken_bpe import read_tiktoken

        ranks, known = read_tiktoken(path)
        if model is not None:
            chosen = open_model(model)
            known = (model, chosen.pat_str, chosen.special_tokens(len(ranks)))
        if known is None and pat_str is None:
            raise ValueError(
                f"{path}: a rank file holds no split pattern and this one is not a file fastbpe knows; pass "
                f"pat_str= (and special_tokens=), or model= one of {sorted(OPEN_MODELS)} "
                "(loading it with another model's pattern would encode differently, silently)"
            )
        k_name, k_pat, k_special = known if known else (path.name.removesuffix(".tiktoken"), None, {})
        return Encoding(
            name or k_name,
            pat_str=patterns.resolve_pattern(pat_str) if pat_str else k_pat,
            mergeable_ranks=ranks,
            special_tokens=k_special if special_tokens is None else special_tokens,
        )
    if model is not None:
        raise ValueError(f"model= names the meaning of a rank file (.tiktoken); {path} is read as {fmt!r}")
    if fmt == "hf":
        from .bpe.hf import read_model_parts
        from .formats._hfjson import field, model_of, read_json, read_json_parts

        # a byte-level BPE file's vocabulary and merges read natively from its bytes
        # (``parts``; None: read the ordinary way)
        data, parts = read_json_parts(path, read_model_parts)
        from .formats.tekken import is_tekken, read_tekken_json

        if is_tekken(data):
            if special_tokens is not None or pat_str is not None:
                raise ValueError(f"{path}: a Tekken file states its own pattern and special tokens")
            ranks, pat, specials = read_tekken_json(data, str(path))
            return Encoding(name or path.stem, pat_str=pat, mergeable_ranks=ranks, special_tokens=specials)
        model_type = field(model_of(data, str(path)), "type", str, "model", str(path), default=None)
        if model_type == "WordPiece":
            from .wordpiece import WordPiece

            return WordPiece.from_file(path)
        from .formats.hf_spm import is_spm_json

        if is_spm_json(data):   # sentencepiece-style (Llama 2, Mistral): characters, ▁, byte fallback
            from .spm import HFSentencePieceBPE
            from .formats.hf_spm import read_hf_spm

            data = read_json(path) if parts is not None else data   # its merges, as json reads them
            return HFSentencePieceBPE(read_hf_spm(data, str(path)), name=name or path.stem, source=str(path))
        if model_type != "BPE":
            raise ValueError(f"{path}: unsupported tokenizer model {model_type!r} (expected BPE or WordPiece)")
        from .bpe.hf import HFEncoding

        if special_tokens is not None or pat_str is not None:
            raise ValueError(f"{path}: a tokenizer.json states its own pattern and special tokens; "
                             "pat_str= and special_tokens= are for rank files")
        return HFEncoding.from_json(name or path.stem, data, str(path), parts=parts)
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

