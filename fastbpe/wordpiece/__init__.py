"""WordPiece (layer 2): ``model`` (``WordPiece``, BERT-style encoding with HF's outputs)
and ``counting`` (phase 1 of training). Training itself is ``fastbpe.trainers.wordpiece``.

>>> from fastbpe.wordpiece import WordPiece
>>> WordPiece({"[UNK]": 0, "hi": 1}).tokenize("hi")
['hi']
"""
from .model import DEFAULT_SPECIAL_TOKENS, WordPiece

__all__ = ["DEFAULT_SPECIAL_TOKENS", "WordPiece"]
