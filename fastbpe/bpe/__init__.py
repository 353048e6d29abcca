"""Byte-level BPE (layer 2): ``encoding`` (``Encoding``, tiktoken's API over the native
core), ``unstable`` (``encode_with_unstable``), ``counting`` (phase 1 of training).

Nothing is imported here, so importing one of them loads only what it needs.

>>> from fastbpe.bpe.encoding import get_toy_encoding
>>> get_toy_encoding().encode("hi")
[256]
"""
