"""``fastbpe.encoding``: where ``Encoding`` lived before the layered package (issue 24).

Pickles of an ``Encoding`` made then name ``fastbpe.encoding.Encoding``; this alias lets
them load. New code imports ``fastbpe.Encoding`` (defined in ``fastbpe.bpe.encoding``).

>>> from fastbpe.encoding import Encoding
>>> Encoding.__module__
'fastbpe.bpe.encoding'
"""
from .bpe.encoding import Encoding

__all__ = ["Encoding"]
