"""fastbpe: exact, fast byte-level BPE and WordPiece tokenizers.

>>> import fastbpe
>>> enc = fastbpe.train_bpe(documents=["low lower lowest"] * 10, vocab_size=260, progress=False)
>>> enc.decode(enc.encode("lowest"))
'lowest'

``import fastbpe`` loads only what ``Encoding`` needs; every other public name is
imported on first use (PEP 562 ``__getattr__``), so a process that only encodes never
loads the trainers, WordPiece, the shard writer or the file formats. Submodules load
the same way (``fastbpe.shards.open(...)`` after ``import fastbpe``). Nor does it load
numpy or the native core: the first ``Encoding`` does (``fastbpe._native``).
"""
import sys as _sys

from . import _native  # noqa: F401  (fails early, with build instructions)
from .bpe import encoding as _encoding
from .bpe.encoding import Encoding
from .reference.patterns import CL100K, GPT2, O200K

__version__ = "0.1.0"

# Pickles of an Encoding made before the layered package (issue 24) name
# fastbpe.encoding.Encoding: the old module name stays an alias of the new module.
_sys.modules.setdefault(__name__ + ".encoding", _encoding)

#: Public name -> the module that defines it (imported by ``__getattr__`` on first use).
_LAZY = {
    "encode_files": "fastbpe.distributed",
    "encoding_for_model": "fastbpe.model",
    "encoding_name_for_model": "fastbpe.model",
    "from_pretrained": "fastbpe.pretrained",
    "get_encoding": "fastbpe.registry",
    "HFEncoding": "fastbpe.bpe.hf",
    "list_encoding_names": "fastbpe.registry",
    "load": "fastbpe.loader",
    "Tokenizer": "fastbpe.hf_tokenizer",
    "train_bpe": "fastbpe.trainers.bpe",
    "train_wordpiece": "fastbpe.trainers.wordpiece",
    "WordPiece": "fastbpe.wordpiece.model",
}

__all__ = [
    "CL100K",
    "GPT2",
    "O200K",
    "Encoding",
    "encode_files",
    "encoding_for_model",
    "encoding_name_for_model",
    "from_pretrained",
    "get_encoding",
    "HFEncoding",
    "list_encoding_names",
    "load",
    "Tokenizer",
    "train_bpe",
    "train_wordpiece",
    "WordPiece",
]


def __getattr__(name: str):
    import importlib

    module = _LAZY.get(name)
    if module is None and name.startswith("__"):
        raise AttributeError(f"module 'fastbpe' has no attribute {name!r}")
    if module is None:  # a submodule, as `import fastbpe` made them all attributes before
        try:
            return importlib.import_module(f"{__name__}.{name}")   # e.g. fastbpe.shards.open
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module 'fastbpe' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
