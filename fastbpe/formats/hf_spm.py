"""Read a sentencepiece-style tokenizer.json (Llama 2, Mistral 7B as transformers converts
them) into ``fastbpe.reference.hf_spm.HFSpmSpec``.

Such a file has a BPE model over characters (not GPT-2's byte-level text) with
``byte_fallback`` and ``▁`` for spaces, from a normalizer ``Prepend("▁")`` +
``Replace(" ", "▁")`` or a ``Metaspace`` pre-tokenizer (``is_spm_json``). Everything the
reference does not reproduce is refused with a ValueError naming the file, the JSON path
and the feature: other normalizers (``Precompiled`` NFKC maps ...), pre-tokenizers and
decoders, BPE dropout or subword prefixes/suffixes, added tokens that are normalized or
strip/match whole words. The post-processor (``<s>`` in front) is not part of
``encode``, as with sentencepiece and tiktoken.

>>> is_spm_json({"model": {"type": "BPE", "byte_fallback": True}})
True
"""
from __future__ import annotations

from ..reference.hf_spm import SPACE, HFSpmSpec
from ._hfjson import added_token_ids, check_added_tokens, check_vocab, expect, field, model_of, show


def is_spm_json(data: dict) -> bool:
    """A BPE tokenizer.json in sentencepiece's style: byte fallback, or ``▁`` spaces,
    and no ByteLevel step (a byte-level file with a Prepend normalizer is HF's
    byte-level pipeline, read by ``hf_pipeline``)."""
    model = data.get("model")
    if not isinstance(model, dict) or model.get("type") != "BPE":
        return False
    if model.get("byte_fallback"):
        return True
    parts = _steps(data.get("normalizer")) + _steps(data.get("pre_tokenizer"))
    if any(isinstance(p, dict) and p.get("type") == "ByteLevel" for p in parts):
        return False
    return any(isinstance(p, dict) and p.get("type") in ("Prepend", "Metaspace") for p in parts)


def _steps(obj) -> list:
    if isinstance(obj, dict) and obj.get("type") == "Sequence":
        inner = obj.get("normalizers", obj.get("pretokenizers", obj.get("decoders", [])))
        return inner if isinstance(inner, list) else []
    return [obj] if obj is not None else []


def _sequence(data: dict, key: str, items: str, source: str) -> list[tuple[str, dict]]:
    """``(json path, step)`` of ``data[key]``, a single step or a Sequence of them."""
    obj = field(data, key, (dict, None), "", source, default=None)
    if obj is None:
        return []
    if field(obj, "type", str, key, source) == "Sequence":
        steps = field(obj, items, list, key, source)
        return [(f"{key}.{items}[{i}]", expect(s, dict, f"{key}.{items}[{i}]", source)) for i, s in enumerate(steps)]
    return [(key, obj)]


def _refuse(source: str, where: str, what: str) -> None:
    raise ValueError(f"{source}: {where}: {what} is not supported for a sentencepiece-style BPE "
                     "(fastbpe would encode differently)")


def _replace_args(step: dict, where: str, source: str) -> tuple[str, str]:
    pattern = field(step, "pattern", dict, where, source)
    if set(pattern) != {"String"}:
        _refuse(source, f"{where}.pattern", f"a pattern {show(pattern)} (only String)")
    return pattern["String"], field(step, "content", str, where, source)


def read_hf_spm(data: dict, source: str) -> HFSpmSpec:
    """The ``HFSpmSpec`` of a parsed tokenizer.json (ValueError for what is refused)."""
    model = model_of(data, source)
    vocab = check_vocab(field(model, "vocab", dict, "model", source), "model.vocab", source)
    for key in ("dropout", "continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key) not in (None, ""):
            _refuse(source, f"model.{key}", f"{show(model.get(key))}")
    merges = {}
    for rank, pair in enumerate(field(model, "merges", list, "model", source)):
        where = f"model.merges[{rank}]"
        if isinstance(pair, str):
            pair = pair.split(" ")
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
            raise ValueError(f"{source}: {where} must be a pair of strings, got {show(pair)}")
        left, right = pair
        for part in (left, right, left + right):
            if part not in vocab:
                raise ValueError(f"{source}: {where}: {show(part)} is not in model.vocab")
        merges.setdefault((vocab[left], vocab[right]), (rank, vocab[left + right]))
    unk = field(model, "unk_token", (str, None), "model", source, default=None)
    if unk is not None and unk not in vocab:
        raise ValueError(f"{source}: model.unk_token {show(unk)} is not in model.vocab")

    prepend = replace_space = split = False
    scheme = "never"
    for where, step in _sequence(data, "normalizer", "normalizers", source):
        kind = field(step, "type", str, where, source)
        if kind == "Prepend" and field(step, "prepend", str, where, source) == SPACE:
            prepend = True
        elif kind == "Replace" and _replace_args(step, where, source) == (" ", SPACE):
            replace_space = True
        else:
            _refuse(source, where, f"normalizer {show(step)}")
    for where, step in _sequence(data, "pre_tokenizer", "pretokenizers", source):
        kind = field(step, "type", str, where, source)
        if kind != "Metaspace" or field(step, "replacement", str, where, source) != SPACE:
            _refuse(source, where, f"pre-tokenizer {show(step)}")
        replace_space = True
        scheme = field(step, "prepend_scheme", str, where, source, default="always")
        if scheme not in ("always", "first", "never"):
            _refuse(source, f"{where}.prepend_scheme", show(scheme))
        split = field(step, "split", bool, where, source, default=True)

    decoder, strip_start = [], 0
    for where, step in _sequence(data, "decoder", "decoders", source):
        kind = field(step, "type", str, where, source)
        if kind == "Replace" and _replace_args(step, where, source) == (SPACE, " "):
            decoder.append("replace")
        elif kind == "ByteFallback":
            decoder.append("byte_fallback")
        elif kind == "Fuse":
            decoder.append("fuse")
        elif kind == "Strip" and field(step, "content", str, where, source) == " " and \
                field(step, "stop", int, where, source, default=0) == 0 and decoder[-1:] == ["fuse"]:
            decoder.append("strip")
            strip_start = field(step, "start", int, where, source)
        elif kind == "Metaspace" and not decoder:
            decoder.append("metaspace")
        else:
            _refuse(source, where, f"decoder {show(step)} (after {decoder})")
    if decoder and decoder[0] == "replace" and decoder[1:2] not in ([], ["byte_fallback"]):
        _refuse(source, "decoder", f"the chain {decoder}")

    added, special = {}, {}
    entries = check_added_tokens(data, source)
    for n, (entry, idx) in enumerate(zip(entries, added_token_ids(entries, vocab, source))):
        where = f"added_tokens[{n}]"
        for flag in ("single_word", "lstrip", "rstrip"):
            if entry[flag]:
                _refuse(source, f"{where}.{flag}", "true")
        if entry["normalized"]:
            _refuse(source, f"{where}.normalized", "true (a token matched in normalized text)")
        (special if entry["special"] else added)[entry["content"]] = idx
    return HFSpmSpec(
        vocab=vocab, merges=merges, unk_id=vocab[unk] if unk is not None else None,
        byte_fallback=field(model, "byte_fallback", bool, "model", source, default=False),
        fuse_unk=field(model, "fuse_unk", bool, "model", source, default=False),
        ignore_merges=field(model, "ignore_merges", bool, "model", source, default=False),
        prepend=prepend, replace_space=replace_space, prepend_scheme=scheme, split=split, added=added,
        special=special, decoder=tuple(decoder), strip_start=strip_start,
    )
