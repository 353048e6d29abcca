"""Read a sentencepiece ``.model`` file (a ``ModelProto``) without protobuf.

A ``.model`` file is one protobuf message, ``sentencepiece.ModelProto`` (its schema is
``src/sentencepiece_model.proto`` in google/sentencepiece). The wire format is small:
a message is a sequence of fields, each a varint key ``(field_number << 3) | wire_type``
and then a value whose shape the wire type gives:

====  ==================  =======================================================
type  shape               used here for
====  ==================  =======================================================
0     varint              enums, bools, int32 (negative int32s take 10 bytes)
1     8 bytes             (double; skipped)
2     varint length +     strings, bytes, nested messages
      that many bytes
5     4 bytes             float (little-endian IEEE 754)
====  ==================  =======================================================

Fields this reader does not know are skipped, as protobuf does; a field that appears
twice keeps the last value (protobuf's rule for singular fields). Only the fields
that change how text is encoded or decoded are read (below, with their numbers);
``read_model`` returns them as a plain ``SpmModel`` of Python values (defined, with
what each field means, in ``fastbpe.reference.sentencepiece``).

A file that is not a well-formed message raises ValueError naming the file and the
byte position. Whether the model can be reproduced exactly (its model type, its
normalization rule) is the caller's decision (``fastbpe.reference.sentencepiece``),
not the reader's.

>>> data = bytes([0x0a, 0x0a, 0x0a, 0x01, 0x61, 0x15, 0, 0, 0x80, 0xbf, 0x18, 0x01])
>>> [(p.piece, p.score, p.type) for p in parse_model(data).pieces]
[('a', -1.0, 1)]
"""
from __future__ import annotations

import os
import struct
from pathlib import Path

from ..reference.sentencepiece import (BYTE, CONTROL, NORMAL, UNKNOWN, UNUSED, USER_DEFINED, NormalizerSpec, Piece,
                                       SpmModel, TrainerSpec)

# --------------------------------------------------------------------------- wire format
def read_varint(data: bytes, pos: int, where: str) -> tuple[int, int]:
    """``(value, next position)`` of the varint at ``pos``: 7 bits a byte, least
    significant group first, high bit set on every byte but the last.

    >>> read_varint(bytes([0xac, 0x02]), 0, "x")
    (300, 2)
    """
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError(f"{where}: truncated varint at byte {pos}")
        if shift > 63:
            raise ValueError(f"{where}: varint longer than 10 bytes at byte {pos}")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        shift += 7
        if byte < 0x80:
            return value, pos


def iter_fields(data: bytes, where: str):
    """Yield ``(field_number, wire_type, value)`` for each field of one message:
    value is an int (types 0, 1, 5 as raw unsigned) or bytes (type 2).

    >>> list(iter_fields(bytes([0x08, 0x96, 0x01, 0x12, 0x01, 0x41]), "x"))
    [(1, 0, 150), (2, 2, b'A')]
    """
    pos = 0
    while pos < len(data):
        start = pos
        key, pos = read_varint(data, pos, where)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError(f"{where}: field number 0 at byte {start}")
        if wire == 0:
            value, pos = read_varint(data, pos, where)
        elif wire == 1 or wire == 5:
            size = 8 if wire == 1 else 4
            if pos + size > len(data):
                raise ValueError(f"{where}: truncated fixed-size field {number} at byte {start}")
            value = int.from_bytes(data[pos:pos + size], "little")
            pos += size
        elif wire == 2:
            size, pos = read_varint(data, pos, where)
            if pos + size > len(data):
                raise ValueError(f"{where}: field {number} at byte {start} runs past the end ({size} bytes)")
            value = bytes(data[pos:pos + size])
            pos += size
        else:  # 3, 4 (groups, unused by ModelProto) and 6, 7 do not exist
            raise ValueError(f"{where}: unsupported wire type {wire} for field {number} at byte {start}")
        yield number, wire, value


def _int32(value: int) -> int:
    """A varint read as protobuf's int32 (negatives are sign-extended to 64 bits)."""
    value &= 0xFFFFFFFFFFFFFFFF
    return value - (1 << 64) if value >= 1 << 63 else value


def _text(value, number: int, where: str) -> str:
    if not isinstance(value, bytes):
        raise ValueError(f"{where}: field {number} should be a string")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{where}: field {number} is not UTF-8 ({e})") from None


def _expect(wire: int, expected: int, number: int, where: str) -> None:
    if wire != expected:
        raise ValueError(f"{where}: field {number} has wire type {wire}, expected {expected}")


# --------------------------------------------------------------------------- messages
def _parse_piece(data: bytes, where: str) -> Piece:
    piece, score, kind = None, 0.0, NORMAL
    for number, wire, value in iter_fields(data, where):
        if number == 1:
            _expect(wire, 2, number, where)
            piece = _text(value, number, where)
        elif number == 2:
            _expect(wire, 5, number, where)
            score = struct.unpack("<f", value.to_bytes(4, "little"))[0]
        elif number == 3:
            _expect(wire, 0, number, where)
            kind = _int32(value)
    if piece is None:
        raise ValueError(f"{where}: piece has no text (field 1)")
    if kind not in (NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE):
        raise ValueError(f"{where}: piece {piece!r} has unknown type {kind}")
    return Piece(piece, score, kind)


_TRAINER_FIELDS = {3: "model_type", 24: "treat_whitespace_as_suffix", 35: "byte_fallback", 40: "unk_id",
                   41: "bos_id", 42: "eos_id", 43: "pad_id"}
_NORMALIZER_FIELDS = {3: "add_dummy_prefix", 4: "remove_extra_whitespaces", 5: "escape_whitespaces"}
_NORMALIZER_STRINGS = {1: "name", 2: "precompiled_charsmap"}


def _parse_fields(data: bytes, varints: dict[int, str], strings: dict[int, str], defaults, where: str):
    """``defaults`` (a spec class) with the message's ``varints`` (bools and int32s, typed
    like the defaults) and length-delimited ``strings`` (text, or bytes where the default
    is bytes), by field number."""
    out = {}
    for number, wire, value in iter_fields(data, where):
        name = varints.get(number) or strings.get(number)
        if name is None:
            continue
        default = getattr(defaults, name)
        if number in varints:
            _expect(wire, 0, number, where)
            out[name] = bool(value) if isinstance(default, bool) else _int32(value)
        else:
            _expect(wire, 2, number, where)
            out[name] = value if isinstance(default, bytes) else _text(value, number, where)
    return defaults(**out)


def parse_model(data: bytes, where: str = "<bytes>") -> SpmModel:
    """The ``SpmModel`` in a serialized ``ModelProto``; ``where`` names it in errors."""
    pieces, trainer, normalizer, denormalizer = [], TrainerSpec(), NormalizerSpec(), None
    for number, wire, value in iter_fields(data, where):
        if number == 1:
            _expect(wire, 2, number, where)
            pieces.append(_parse_piece(value, f"{where}: pieces[{len(pieces)}]"))
        elif number == 2:
            _expect(wire, 2, number, where)
            trainer = _parse_fields(value, _TRAINER_FIELDS, {44: "unk_surface"}, TrainerSpec, f"{where}: trainer_spec")
        elif number == 3:
            _expect(wire, 2, number, where)
            normalizer = _parse_fields(value, _NORMALIZER_FIELDS, _NORMALIZER_STRINGS, NormalizerSpec,
                                       f"{where}: normalizer_spec")
        elif number == 5:
            _expect(wire, 2, number, where)
            denormalizer = _parse_fields(value, _NORMALIZER_FIELDS, _NORMALIZER_STRINGS, NormalizerSpec,
                                         f"{where}: denormalizer_spec")
    if not pieces:
        raise ValueError(f"{where}: no pieces; not a sentencepiece model")
    return SpmModel(tuple(pieces), trainer, normalizer, denormalizer)


def is_sentencepiece_file(path: Path) -> bool:
    """Whether ``path`` looks like a sentencepiece model: ``.model`` in its name
    (``tokenizer.model``, ``tokenizer.model.v3``) and a protobuf's first field, the first
    piece (byte 0x0A). Llama 3's ``tokenizer.model`` is tiktoken ranks: base64 text,
    which never starts with a newline byte."""
    if ".model" not in path.name.lower() or not path.is_file():
        return False
    with open(path, "rb") as fh:
        return fh.read(1) == b"\x0a"


def read_model(path: str | os.PathLike) -> SpmModel:
    """Read a ``.model`` file."""
    path = Path(path)
    return parse_model(path.read_bytes(), str(path))
