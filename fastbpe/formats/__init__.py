"""Load and save tokenizers in the formats people already have.

=================  =========================================  ===========================
format             files                                      holds
=================  =========================================  ===========================
``tiktoken``       ``*.tiktoken``                             ranks only
``hf``             ``tokenizer.json`` (byte-level BPE or       everything
                   WordPiece)
``transformers``   a folder: ``tokenizer.json``,               everything, and the special
                   ``tokenizer_config.json``,                  tokens' roles (bos, eos, ...;
                   ``special_tokens_map.json``                 see ``transformers_files``)
``gpt2``           ``encoder.json`` + ``vocab.bpe``           ranks, special tokens; the
                                                              GPT-2 pattern is implied
``vocab.txt``      BERT ``vocab.txt``                         WordPiece vocabulary
=================  =========================================  ===========================

**What a save may lose.** A save is judged by what ``load`` gives back: the split
pattern and special tokens it would read. When that differs from the encoding, the
save says what is lost, and:

- ``gpt2`` refuses (ValueError) unless ``lossy=True``. Every reader of GPT-2's files
  (``load``, tiktoken's ``data_gym_to_mergeable_bpe_ranks``, HF's GPT-2 tokenizer)
  splits with GPT-2's pattern, so an encoding with another pattern would silently
  encode texts differently after reloading.
- ``tiktoken`` warns (UserWarning) unless ``lossy=True``, and saves. The format holds
  ranks by definition, and tiktoken users pass ``pat_str`` and ``special_tokens`` in
  code; ``load`` restores both only for the three public OpenAI files, which it
  recognises by their sha256 (so saving ``cl100k_base`` as .tiktoken loses nothing).
- ``hf`` and ``transformers`` hold everything and never lose anything.

``lossy=True`` is the caller saying "I know": nothing is raised or warned.

Every save is atomic and keeps the target's mode and symlinks (``fastbpe.io.atomic``).
Malformed tokenizer.json files raise ValueError naming the file and JSON path
(``_hfjson``).

>>> SAVE_FORMATS, _format_from_path(Path("cl100k_base.tiktoken"))
(('tiktoken', 'hf', 'gpt2'), 'tiktoken')
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

from ..reference import patterns
from ..io.atomic import atomic_write_bytes

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
    if name.endswith(".model") and path.is_file():
        return _sniff_model_file(path)
    raise ValueError(
        f"cannot tell the format of {path} from its name; use a .tiktoken or .json name, "
        "or pass format='tiktoken' | 'hf' | 'gpt2'"
    )


def _sniff_model_file(path: Path) -> str:
    """A ``.model`` file that is not a SentencePiece protobuf (``fastbpe.load`` sniffs
    those first) is Meta's tiktoken-format ranks (Llama 3, Llama 4: text lines
    ``base64 rank``), or unknown."""
    import re

    with open(path, "rb") as f:
        head = f.read(256)
    if re.match(rb"[A-Za-z0-9+/=]+ [0-9]+\r?\n", head):
        return "tiktoken"
    raise ValueError(f"{path}: neither a sentencepiece model nor a tiktoken-format rank file")


def _pattern_name(pattern: str) -> str:
    return next((name for name, pat in patterns.PATTERNS.items() if pat == pattern), "given")


def _what_is_lost(enc, pattern: str | None, specials: dict[str, int]) -> list[str]:
    """What ``load`` of the saved file would not give back: ``pattern`` and
    ``specials`` are what it would read (``pattern`` None: it needs the caller's)."""
    lost = []
    if pattern is None:
        lost.append("the split pattern (loading it needs pat_str=)")
    elif pattern != enc.pat_str:
        lost.append(f"the split pattern (it would be read back with the {_pattern_name(pattern)} pattern)")
    if specials != enc.special_tokens:
        lost.append(f"the special tokens {sorted(enc.special_tokens)}")
    if enc.added_tokens:
        lost.append(f"the added tokens {sorted(enc.added_tokens)}")
    return lost


def _tiktoken_read_back(contents: bytes, n_ranks: int) -> tuple[str | None, dict[str, int]]:
    """The (pattern, specials) ``load`` gives a ``.tiktoken`` file with these contents
    (pattern None: ``load`` refuses it without ``pat_str``)."""
    from .tiktoken_bpe import known_meaning

    known = known_meaning(contents, n_ranks)
    return (known[1], known[2]) if known else (None, {})


def save_encoding(enc, path: str | os.PathLike, format: str | None = None, *, lossy: bool = False,
                  transformers: bool = False) -> None:
    """Save an ``Encoding``; for ``gpt2`` pass the directory or the ``vocab.bpe`` path
    (``encoder.json`` is written beside it). See the module docstring for what each
    format holds and what happens when it cannot hold the encoding (``lossy``).

    A folder (or ``transformers=True``) gets what ``transformers.AutoTokenizer.from_pretrained``
    reads: ``tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json``.
    """
    path = Path(path)
    if transformers or (format in (None, "hf") and path.is_dir()):
        from .hf_bpe import write_hf_bpe
        from .transformers_files import TOKENIZER_JSON, transformers_folder, write_transformers_config

        if format not in (None, "hf"):
            raise ValueError(f"transformers=True saves a tokenizer.json, not format={format!r}")
        folder = transformers_folder(path)
        write_hf_bpe(folder / TOKENIZER_JSON, enc.mergeable_ranks, enc.pat_str, enc.special_tokens, enc.added_tokens)
        write_transformers_config(folder, enc.special_tokens, "bpe", enc.added_tokens)
        return
    fmt = format or _format_from_path(path)
    if fmt == "tiktoken":
        from .tiktoken_bpe import dump_tiktoken_bpe

        contents = dump_tiktoken_bpe(enc.mergeable_ranks)
        lost = _what_is_lost(enc, *_tiktoken_read_back(contents, len(enc.mergeable_ranks)))
        if lost and not lossy:
            warnings.warn(
                f"the .tiktoken format holds only ranks: {' and '.join(lost)} of {enc.name!r} are not saved in "
                f"{path}; pass pat_str= and special_tokens= to fastbpe.load, or save as tokenizer.json to keep them",
                stacklevel=3,
            )
        atomic_write_bytes(path, contents)
    elif fmt == "hf":
        from .hf_bpe import write_hf_bpe

        write_hf_bpe(path, enc.mergeable_ranks, enc.pat_str, enc.special_tokens, enc.added_tokens)
    elif fmt == "gpt2":
        from .gpt2_files import write_gpt2_files

        lost = _what_is_lost(enc, patterns.GPT2, enc.special_tokens)
        if lost and not lossy:
            raise ValueError(
                f"GPT-2's encoder.json + vocab.bpe cannot hold {' and '.join(lost)} of {enc.name!r}: every reader "
                "of these files splits with GPT-2's pattern, so texts would encode differently after reloading. "
                "Save as tokenizer.json to keep it, or pass lossy=True to save the ranks anyway"
            )
        folder = path if path.is_dir() else path.parent
        write_gpt2_files(folder / "encoder.json", folder / "vocab.bpe", enc.mergeable_ranks, enc.special_tokens)
    else:
        raise ValueError(f"unknown format {fmt!r} for a BPE Encoding; choose one of {SAVE_FORMATS}")
