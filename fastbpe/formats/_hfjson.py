"""Structural checks for ``tokenizer.json`` files, BPE and WordPiece alike.

A malformed file must fail with a ValueError that names the file and the JSON path of
what is wrong (``c.json: model.vocab["x"] must be an int, got "y"``), never with an
AttributeError from deep inside the reader. The readers (``hf_bpe``, ``hf_wordpiece``)
call these helpers for every value they take from the parsed document, so each check
lives here once.

It also holds the one rule for the ids of ``added_tokens``, which is HF's, not the
``id`` the file states: ``tokenizers`` gives an added token the id of the same string in
``model.vocab`` when it is there, and otherwise the next id after the model's vocabulary
(``len(model.vocab)``, then +1 for each further new token). A file whose stated ids
differ (cl100k's ``<|endoftext|>`` stated as 100257 but absent from the vocabulary of
100,256 tokens: HF gives it 100256) is read with HF's ids and a warning, so fastbpe and
HF agree on what the file means.

>>> added_token_ids([{"id": 2, "content": "<s>"}, {"id": 0, "content": "a"}], {"a": 0, "b": 1}, "t.json")
[2, 0]
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

from ..reference.jsonl import json_error

#: HF's ids are u32.
MAX_ID = 2**32 - 1

#: The flags an added-token entry may carry (HF's ``AddedToken`` fields).
ADDED_TOKEN_FLAGS = ("single_word", "lstrip", "rstrip", "normalized", "special")


def show(value, limit: int = 60) -> str:
    """A short JSON rendering of a value for an error message."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):  # pragma: no cover - parsed JSON always dumps
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def key_path(parent: str, key: str, *, bracket: bool = False) -> str:
    """``parent.key`` as a JSON path, or ``parent["key"]`` for a key that is data (a
    token) or not a plain identifier.

    >>> key_path("model", "vocab"), key_path("model.vocab", "x", bracket=True)
    ('model.vocab', 'model.vocab["x"]')
    """
    if key.isidentifier() and not bracket:
        return f"{parent}.{key}" if parent else key
    return f"{parent}[{json.dumps(key, ensure_ascii=False)}]"


_TYPE_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an int", bool: "a bool"}


def _type_ok(value, kind) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if k is None and value is None:
            return True
        if k is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        if k not in (None, int) and isinstance(value, k):
            return True
    return False


def expect(value, kind, where: str, source: str):
    """``value`` if it has JSON type ``kind`` (a type, None, or a tuple of them), else
    ValueError ``source: where must be ..., got ...``."""
    if not _type_ok(value, kind):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        wanted = " or ".join("null" if k is None else _TYPE_NAMES.get(k, k.__name__) for k in kinds)
        raise ValueError(f"{source}: {where} must be {wanted}, got {show(value)}")
    return value


def field(obj: dict, key: str, kind, where: str, source: str, default=...):
    """``obj[key]`` checked by ``expect``; a missing key is an error unless a default is given."""
    if key not in obj:
        if default is ...:
            raise ValueError(f"{source}: {key_path(where, key)} is missing")
        return default
    return expect(obj[key], kind, key_path(where, key), source)


def read_json(path: str | os.PathLike) -> dict:
    """Parse a tokenizer.json; any failure is a ValueError naming the file and where."""
    path = Path(path)
    return _parse(path, path.read_bytes())


def read_json_parts(path: str | os.PathLike, model_parts=None) -> tuple[dict, object]:
    """``(read_json(path), None)``, or, when ``model_parts(raw)`` takes the file (the
    native ``_hf_json.model_parts``, passed down by the layers above; see its twin
    ``reference.tokenizer_json``), ``(data, parts)``: ``data`` parsed by ``json`` with
    ``model.vocab`` and ``model.merges`` cut out of the bytes, ``model.vocab`` then set to
    ``parts.vocab`` and ``model.merges`` left empty (``parts`` holds them: a caller that
    reads merges from ``data`` must take the first form). Only a file with no
    ``continuing_subword_prefix`` takes the parts (their new ids are left + right).
    A file the cut leaves unparseable or otherwise odd is read the ordinary way, which
    names what is wrong."""
    path = Path(path)
    raw = path.read_bytes()
    found = parts_of_bytes(raw, model_parts) if model_parts is not None else None
    return found if found is not None else (_parse(path, raw), None)


def parts_of_bytes(raw: bytes, model_parts) -> tuple[dict, object] | None:
    """``read_json_parts``' ``(data, parts)`` of a file's bytes, or None."""
    parts = model_parts(raw)
    if parts is None:
        return None
    first, second = sorted([(*parts.vocab_span, b"{}"), (*parts.merges_span, b"[]")])
    rest = raw[:first[0]] + first[2] + raw[first[1]:second[0]] + second[2] + raw[second[1]:]
    try:   # the rest is checked by json: with it valid, the cut members sat where json reads them
        data = json.loads(rest.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    model = data.get("model") if type(data) is dict else None
    if (type(model) is not dict or model.get("vocab") != {} or model.get("merges") != []
            or model.get("continuing_subword_prefix")):
        return None
    model["vocab"] = parts.vocab
    return data, parts


def _parse(path: Path, raw: bytes) -> dict:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 (byte {exc.start}: {raw[exc.start:exc.start + 1]!r}); a tokenizer.json is UTF-8 JSON") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({json_error(exc)})") from None
    except RecursionError:
        raise ValueError(f"{path}: JSON nested too deeply to be a tokenizer.json") from None
    expect(data, dict, "the top level", str(path))
    return data


def model_of(data: dict, source: str) -> dict:
    """The ``model`` object (its presence and type checked)."""
    return field(data, "model", dict, "", source)


def check_id(idx, where: str, source: str) -> int:
    """An id: an int in HF's range 0 .. 2**32 - 1."""
    expect(idx, int, where, source)
    if not 0 <= idx <= MAX_ID:
        raise ValueError(f"{source}: {where} is {idx}, outside the ids HF can hold (0 .. {MAX_ID})")
    return idx


def check_vocab(vocab, where: str, source: str) -> dict[str, int]:
    """A ``token -> id`` object: string keys, non-negative int ids, no id twice."""
    expect(vocab, dict, where, source)
    ids = vocab.values()
    # a whole vocabulary at once (128k entries: 4 s in the loop, which names what is wrong)
    if all(type(i) is int for i in ids) and (not ids or 0 <= min(ids) and max(ids) <= MAX_ID) and len(set(ids)) == len(ids):
        return vocab
    owner: dict[int, str] = {}
    for token, idx in vocab.items():
        here = key_path(where, token, bracket=True)
        check_id(idx, here, source)
        if idx in owner:
            raise ValueError(f"{source}: {here} has id {idx}, already the id of {show(owner[idx])}")
        owner[idx] = token
    return vocab


def check_added_tokens(data: dict, source: str) -> list[dict]:
    """The ``added_tokens`` list, each entry with an int ``id``, a non-empty string
    ``content`` and bool flags (missing flags get HF's defaults: all false except
    ``normalized``, which HF defaults to ``not special``)."""
    entries = field(data, "added_tokens", (list, None), "", source, default=None) or []
    out = []
    for n, entry in enumerate(entries):
        if not _plain_added_token(entry):   # checked field by field, naming what is wrong
            where = f"added_tokens[{n}]"
            expect(entry, dict, where, source)
            check_id(field(entry, "id", int, where, source), f"{where}.id", source)
            if not field(entry, "content", str, where, source):
                raise ValueError(f"{source}: {where}.content is empty")
            for flag in ADDED_TOKEN_FLAGS:
                field(entry, flag, bool, where, source, default=False)
        flags = {flag: bool(entry.get(flag, False)) for flag in ADDED_TOKEN_FLAGS}
        if "normalized" not in entry:
            flags["normalized"] = not flags["special"]
        out.append({"id": int(entry["id"]), "content": entry["content"], **flags})
    return out


def _plain_added_token(entry) -> bool:
    """Is an ``added_tokens`` entry of exactly the types ``json`` gives a valid one (an
    id in range, non-empty content, bool flags)? Then ``check_added_tokens`` takes it
    without the field-by-field checks, whose paths (``added_tokens[7].lstrip``) cost
    ~20 us an entry: DeepSeek V4 has 1,283. Anything else goes through those checks,
    which accept the same and name the rest.

    >>> _plain_added_token({"id": 5, "content": "<s>", "special": True}), _plain_added_token({"id": 5, "content": ""})
    (True, False)
    """
    if type(entry) is not dict:
        return False
    idx, content = entry.get("id"), entry.get("content")
    return (type(idx) is int and 0 <= idx <= MAX_ID and type(content) is str and content != ""
            and all(type(entry.get(flag, False)) is bool for flag in ADDED_TOKEN_FLAGS))


def added_token_ids(added: list[dict], vocab: dict[str, int], source: str) -> list[int]:
    """The id HF gives each added token (see the module docstring), in file order.

    Warns when a stated id differs from HF's; raises ValueError when HF's id is not
    well defined (a new token, and a vocabulary with holes: tokenizers versions differ).
    """
    size = len(vocab)
    contiguous = not vocab or max(vocab.values()) == size - 1
    # a contiguous vocabulary ends at size - 1, so the ids from size on are free
    ids, given, next_id = [], {}, size
    for n, entry in enumerate(added):
        content, stated = entry["content"], entry["id"]
        if content in vocab:
            idx = vocab[content]
        elif content in given:
            idx = given[content]
        else:
            if not contiguous:
                raise ValueError(
                    f"{source}: added_tokens[{n}] {show(content)} is not in model.vocab, whose ids have gaps; "
                    f"which id HF gives it depends on the tokenizers version. Put it in model.vocab with id {stated}"
                )
            idx, next_id = next_id, next_id + 1
        if idx != stated:
            why = "is not in model.vocab" if content not in vocab else "is in model.vocab with another id"
            warnings.warn(
                f"{source}: added_tokens[{n}] {show(content)} states id {stated} but {why}, "
                f"so HF gives it id {idx}; using {idx}",
                UserWarning,
                stacklevel=4,
            )
        given[content] = idx
        ids.append(idx)
    return ids
