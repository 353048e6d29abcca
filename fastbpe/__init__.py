"""fastbpe: exact, fast byte-level BPE and WordPiece tokenizers.

>>> import fastbpe
>>> enc = fastbpe.train_bpe(documents=["low lower lowest"] * 10, vocab_size=260, progress=False)
>>> enc.decode(enc.encode("lowest"))
'lowest'
"""
from . import _native  # noqa: F401  (fails early, with build instructions)
from .distributed import encode_files
from .encoding import Encoding
from .formats import load
from .model import encoding_for_model, encoding_name_for_model
from .reference.patterns import CL100K, GPT2, O200K
from .registry import get_encoding, list_encoding_names
from .train import train_bpe
from .wordpiece import WordPiece, train_wordpiece

__version__ = "0.1.0"

__all__ = [
    "CL100K",
    "GPT2",
    "O200K",
    "Encoding",
    "encode_files",
    "encoding_for_model",
    "encoding_name_for_model",
    "get_encoding",
    "list_encoding_names",
    "load",
    "train_bpe",
    "train_wordpiece",
    "WordPiece",
]
