"""JSON Lines blocks to documents: the native scanner, with json.loads for the rest.

The rules are ``fastbpe.reference.jsonl``'s (the specification). ``fastbpe._jsonl`` reads
the lines it is sure of (almost all of a real corpus) without the GIL; every other line
("bad": invalid, unusual, or an error) is handed to the reference's ``line_document``,
which gives its exact document or its exact error, and merged back in line order.

>>> data, ends = documents_of_block(b'{"text": "a"}\\n{"text": NaN}\\n{"id": 1, "text": "b"}\\n',
...                                 "text", "x.jsonl", 0, "strict")
Traceback (most recent call last):
...
ValueError: x.jsonl, line 2: field 'text' is float, not a string
>>> data, ends = documents_of_block(b'{"text": "a", "n": NaN}\\n\\n{"text": "\\\\u00e9"}', "text", "x", 0, "strict")
>>> data, ends.tolist()
(b'a\\xc3\\xa9', [1, 3])
"""
from __future__ import annotations

import numpy as np

from .._jsonl import extract_field
from ..reference.jsonl import BOM, check_arguments, line_document


def documents_of_block(block: bytes, field: str, source: str, first_line: int,
                       errors: str) -> tuple[bytes, np.ndarray]:
    """The documents of the whole lines in ``block`` as ``(data, ends)``: their UTF-8
    back to back and the int64 end of each (document k is ``data[ends[k-1]:ends[k]]``).

    ``first_line`` is the 0-based index in the source of the block's first line (0: the
    block starts the source, where a BOM is skipped); errors name ``source`` and the line.
    """
    check_arguments(block, field, errors)
    view = memoryview(block)
    if first_line == 0 and view[:len(BOM)] == BOM:
        view = view[len(BOM):]
    data, ends, lines, bad = extract_field(view, field)
    if not bad:
        return data, ends
    at, extra = [], []
    for i, start, end in bad:
        doc = line_document(bytes(view[start:end]), field, f"{source}, line {first_line + i + 1}", errors)
        if doc:
            at.append(i)
            extra.append(doc.encode("utf-8"))
    if not extra:
        return data, ends
    return _merge(data, ends, lines, at, extra)


def _merge(data: bytes, ends: np.ndarray, lines: np.ndarray, at: list[int],
           extra: list[bytes]) -> tuple[bytes, np.ndarray]:
    """Insert the documents ``extra`` of lines ``at`` among the scanner's, in line order.

    >>> _merge(b"ac", np.array([1, 2]), np.array([0, 2]), [1, 3], [b"B", b"D"])
    (b'aBcD', array([1, 2, 3, 4]))
    """
    before = np.searchsorted(lines, at)  # scanner documents before each extra one
    parts, done = [], 0
    for k, doc in zip(before.tolist(), extra):
        cut = int(ends[k - 1]) if k else 0
        parts.append(data[done:cut])
        parts.append(doc)
        done = cut
    parts.append(data[done:])
    lengths = np.diff(ends, prepend=0)
    lengths = np.insert(lengths, before, [len(doc) for doc in extra])
    return b"".join(parts), np.cumsum(lengths, dtype=np.int64)


__all__ = ["documents_of_block"]
