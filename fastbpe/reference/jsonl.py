"""JSON Lines documents: the specification (json.loads per line).

``fastbpe.io.jsonl.documents_of_block`` (a native scanner, ``fastbpe._jsonl``, with this
module as its slow path) must give exactly ``documents(...)`` here: the same documents,
or a ValueError with the same message.

Decisions
---------
* **Lines.** A block of a JSON Lines source holds whole lines: split on ``"\\n"`` only;
  a final ``"\\n"`` ends the last line (it does not start an empty one). A ``"\\r"``
  before the ``"\\n"`` (CRLF files) is JSON whitespace, so it changes nothing.
* **Blank lines** (nothing but JSON whitespace: space, tab, ``"\\r"``) are skipped. Any
  other line must be a JSON object, as ``json.loads`` reads it (so Python's extensions
  ``NaN``, ``Infinity`` and ``-Infinity`` are accepted as values of other keys), whose
  top-level ``field`` (keys compared after decoding their escapes; the *last* one if the
  key repeats, as ``json.loads`` keeps it) is a string. That string is the document; an
  empty one is dropped (documents are non-empty).
* **Errors** name the source and the 1-based line (``first_line`` is the 0-based index in
  the source of the block's first line): ``not valid JSON (<json's message>: column
  <n>)`` (``json_error``; json's column, in characters), ``not a JSON object but <type>``, ``no field 'text'``, ``field 'text' is <type>,
  not a string``. Limits of json.loads itself (nesting past the recursion limit, an int
  of more digits than ``sys.get_int_max_str_digits()``) are "not valid JSON" too.
* **Encoding.** Lines are UTF-8. Invalid bytes raise ValueError naming the line and the
  1-based *byte* column, unless ``errors="replace"`` (each invalid sequence becomes
  U+FFFD before parsing, as Python's decoder replaces them). A value with no UTF-8 form
  (a lone surrogate escape such as ``"\\ud800"``) follows tiktoken's rule, as every
  fastbpe document does: lone surrogates become U+FFFD (``bpe.fix_surrogates``).
* **Byte order mark.** ``json.loads`` refuses a str that starts with U+FEFF, but a UTF-8
  BOM at the start of a file is common (Windows editors write one) and carries no text.
  So a BOM is skipped where the source starts (``first_line == 0``, the block's first
  three bytes; columns are then counted after it) and is an error anywhere else, with
  json's message (``Unexpected UTF-8 BOM``).

>>> documents(b'{"text": "a", "id": 1}\\n\\n{"text": ""}\\r\\n{"id": 2, "text": "b\\\\n"}\\n')
['a', 'b\\n']
>>> documents(b'{"text": "ok"}\\n{"id": 1}\\n', source="x.jsonl", first_line=9)
Traceback (most recent call last):
...
ValueError: x.jsonl, line 11: no field 'text'
"""
from __future__ import annotations

import json

from .bpe import fix_surrogates

#: A UTF-8 byte order mark, skipped at the start of a source.
BOM = b"\xef\xbb\xbf"

#: The values ``errors=`` accepts.
ERRORS = ("strict", "replace")

#: JSON's whitespace (a line holds no "\n").
WHITESPACE = " \t\r\n"


def block_lines(block: bytes) -> list[bytes]:
    """The lines of ``block``, their ``"\\n"`` dropped.

    >>> block_lines(b"a\\n\\nb"), block_lines(b"a\\n"), block_lines(b"")
    ([b'a', b'', b'b'], [b'a'], [])
    """
    lines = block.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


def _kind(value) -> str:
    return type(value).__name__


def json_error(exc: json.JSONDecodeError, *, line: bool = True) -> str:
    """Where ``json`` failed, in one form for every JSON reader of the package: json's
    message, then ``line L column C`` as Python itself puts it (``line=False`` for a line
    of JSON Lines, whose number the caller gives); the column counts characters.

    >>> try:
    ...     json.loads('{"a": 1,\\n "b": "open')
    ... except json.JSONDecodeError as exc:
    ...     print(json_error(exc)); print(json_error(exc, line=False))
    Unterminated string starting at: line 2 column 7
    Unterminated string starting at: column 7
    """
    return f"{exc.msg}: " + (f"line {exc.lineno} column {exc.colno}" if line else f"column {exc.colno}")


def line_document(line: bytes, field: str, where: str, errors: str = "strict") -> str:
    """The document of one line (``""`` for a blank line or an empty value); ``where``
    (e.g. ``"x.jsonl, line 3"``) starts the error messages.

    >>> line_document(b'{"text": "\\\\ud83d\\\\ude42\\\\ud800"}', "text", "x")
    '🙂\\ufffd'
    >>> line_document(b'{"text": 1}', "text", "x.jsonl, line 3")
    Traceback (most recent call last):
    ...
    ValueError: x.jsonl, line 3: field 'text' is int, not a string
    """
    try:
        text = line.decode("utf-8", errors)
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{where}: not valid UTF-8 at column {exc.start + 1} ({exc.reason}); "
            "pass errors='replace' to replace invalid bytes"
        ) from None
    if not text.strip(WHITESPACE):
        return ""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: not valid JSON ({json_error(exc, line=False)})") from None
    except (ValueError, RecursionError) as exc:  # json.loads's own limits
        raise ValueError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: not a JSON object but {_kind(obj)}")
    if field not in obj:
        raise ValueError(f"{where}: no field {field!r}")
    value = obj[field]
    if not isinstance(value, str):
        raise ValueError(f"{where}: field {field!r} is {_kind(value)}, not a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return fix_surrogates(value)
    return value


def check_arguments(block, field, errors) -> None:
    """TypeError / ValueError for arguments of the wrong kind, before any work."""
    if not isinstance(block, (bytes, bytearray, memoryview)):
        raise TypeError(f"block must be bytes, not {type(block).__name__}")
    if not isinstance(field, str):
        raise TypeError(f"field must be str, not {type(field).__name__}")
    if not isinstance(errors, str) or errors not in ERRORS:
        raise ValueError(f"errors must be one of {', '.join(map(repr, ERRORS))}; got {errors!r}")


def documents(block: bytes, field: str = "text", source: str = "<jsonl>", first_line: int = 0,
              errors: str = "strict") -> list[str]:
    """The documents of the JSON Lines in ``block`` (see the module's decisions)."""
    check_arguments(block, field, errors)
    block = bytes(block)
    if first_line == 0 and block.startswith(BOM):
        block = block[len(BOM):]
    docs = []
    for i, line in enumerate(block_lines(block)):
        doc = line_document(line, field, f"{source}, line {first_line + i + 1}", errors)
        if doc:
            docs.append(doc)
    return docs


__all__ = ["BOM", "ERRORS", "block_lines", "check_arguments", "documents", "line_document"]
