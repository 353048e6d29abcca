"""A BPE ``tokenizer.json`` as HF reads it: every component checked, or refused.

``read_pipeline`` turns the parsed file into an ``HFPipeline``: the normalizer,
pre-tokenizer, BPE model (vocabulary and merge list), post-processor, decoder and added
tokens, each a JSON object that ``fastbpe.reference.hf`` runs exactly as HF does. Any
component, option or value that is not implemented there is refused with a ValueError
naming the file, the JSON path and the feature (``t.json: pre_tokenizer.pretokenizers[1]:
pre-tokenizer "Metaspace" is not supported``): a file fastbpe cannot reproduce is never
loaded and different.

Only byte-level BPE is read (a ByteLevel pre-tokenizer, so every text has tokens):
SentencePiece-style BPE files (Metaspace, byte fallback, no ByteLevel) are refused here,
though ``reference.hf`` states their model rule too.
"""
from __future__ import annotations

import bisect
import json
import re
from itertools import accumulate, repeat
from operator import add, itemgetter
from typing import NamedTuple

import regex

from ..reference import hf
from ._hfjson import added_token_ids, check_added_tokens, check_vocab, expect, field, key_path, model_of, show
from .hf_bpe import _ONIGURUMA_FORMS, _merge_parts, dumps_tokenizer_json, to_oniguruma, unicode_to_bytes

_BEHAVIORS = ("Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous")


class HFPipeline(NamedTuple):
    """What a byte-level BPE tokenizer.json means (see the module docstring)."""

    normalizer: dict | None
    pre_tokenizer: dict | None
    post_processor: dict | None
    decoder: dict | None
    model: dict                         # the model's options (no vocab or merges)
    vocab: dict[str, int]
    merge_texts: tuple[list[str], list[str]]                 # (left, right) texts of the merges, in order
    merge_columns: tuple[list[int], list[int], list[int]]    # (left, right, new) ids of the merges, in order
    added: list[dict]                   # added_tokens entries, with HF's id in "id"

    @property
    def merges(self) -> list[tuple[str, str]]:
        """``(left, right)`` of each merge, in order (made on each use: a load keeps
        columns, ~0.2 s less for 280k merges than a list of pairs)."""
        return list(zip(*self.merge_texts))

    @property
    def merge_ids(self) -> list[tuple[int, int, int]]:
        """``(left, right, new)`` id of each merge, in order (made on each use)."""
        return list(zip(*self.merge_columns))


def not_byte_level(texts) -> list[str]:
    """The texts with a character outside the ByteLevel alphabet (checked once for all
    texts' characters together: a vocabulary is usually all byte-level).

    >>> not_byte_level(["Ġa", "b", "▁c"])
    ['▁c']
    """
    alphabet = unicode_to_bytes()
    texts = list(texts)
    joined = "".join(texts)
    strange = set(joined) - alphabet.keys()
    if not strange:
        return []
    # where the strange characters are in all texts at once (one search of the joined
    # text, not a set test per text: DeepSeek's 128k texts, 0.1 s less), each a text's
    # index by the texts' ends
    found = re.compile("[" + "".join(map(re.escape, sorted(strange))) + "]")
    ends = list(accumulate(map(len, texts)))
    hits = sorted({bisect.bisect_right(ends, m.start()) for m in found.finditer(joined)})
    return [texts[i] for i in hits]


def _refuse(source: str, where: str, what: str):
    raise ValueError(f"{source}: {where}: {what} is not supported")


def _kind(obj, where: str, source: str) -> str:
    expect(obj, dict, where, source)
    return field(obj, "type", str, where, source)


def _check_regex(text: str, where: str, source: str) -> str:
    """A pattern as the ``regex`` module must run it to split as HF's Oniguruma does."""
    text = _ONIGURUMA_FORMS.get(text, text)
    if text not in _ONIGURUMA_FORMS.values() and regex.search(r"(?<!\\)\{\d+(?:,\d*)?\}\+", text):
        _refuse(source, where, f"the counted repeat '{{n,m}}+' in {show(text)} (Oniguruma reads it as a repeated group)")
    try:
        regex.compile(text)
    except regex.error as exc:
        raise ValueError(f"{source}: {where}: invalid regex {show(text)}: {exc}") from None
    return text


def _pattern(obj: dict, where: str, source: str) -> dict:
    pat = field(obj, "pattern", dict, where, source)
    if set(pat) == {"String"}:
        return {"String": field(pat, "String", str, f"{where}.pattern", source)}
    if set(pat) == {"Regex"}:
        return {"Regex": _check_regex(field(pat, "Regex", str, f"{where}.pattern", source), f"{where}.pattern.Regex", source)}
    raise ValueError(f"{source}: {where}.pattern must be {{\"String\": ...}} or {{\"Regex\": ...}}, got {show(pat)}")


def _flag(obj: dict, key: str, where: str, source: str, default: bool) -> bool:
    return field(obj, key, bool, where, source, default=default)


# --------------------------------------------------------------------------- components
def check_normalizer(obj, where: str, source: str) -> dict | None:
    """A normalizer object as ``reference.hf.normalize`` takes it, defaults filled in.

    >>> check_normalizer({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Strip"}]}, "normalizer", "t.json")
    {'type': 'Sequence', 'normalizers': [{'type': 'NFC'}, {'type': 'Strip', 'strip_left': True, 'strip_right': True}]}
    >>> check_normalizer({"type": "Precompiled"}, "normalizer", "t.json")
    Traceback (most recent call last):
    ValueError: t.json: normalizer: normalizer "Precompiled" for BPE is not supported
    """
    if obj is None:
        return None
    kind = _kind(obj, where, source)
    if kind in ("NFC", "NFD", "NFKC", "NFKD", "Lowercase"):
        return {"type": kind}
    if kind == "Sequence":
        steps = field(obj, "normalizers", list, where, source)
        return {"type": kind, "normalizers": [check_normalizer(s, f"{where}.normalizers[{i}]", source) for i, s in enumerate(steps)]}
    if kind == "Strip":
        return {"type": kind, "strip_left": _flag(obj, "strip_left", where, source, True),
                "strip_right": _flag(obj, "strip_right", where, source, True)}
    if kind == "Replace":
        return {"type": kind, "pattern": _pattern(obj, where, source), "content": field(obj, "content", str, where, source)}
    if kind == "Prepend":
        return {"type": kind, "prepend": field(obj, "prepend", str, where, source)}
    if kind == "BertNormalizer":
        return {"type": kind, "clean_text": _flag(obj, "clean_text", where, source, True),
                "handle_chinese_chars": _flag(obj, "handle_chinese_chars", where, source, True),
                "strip_accents": field(obj, "strip_accents", (bool, None), where, source, default=None),
                "lowercase": _flag(obj, "lowercase", where, source, True)}
    _refuse(source, where, f"normalizer {show(kind)} for BPE")


def check_pre_tokenizer(obj, where: str, source: str) -> dict | None:
    if obj is None:
        return None
    kind = _kind(obj, where, source)
    if kind == "Split":
        behavior = field(obj, "behavior", str, where, source)
        if behavior not in _BEHAVIORS:
            _refuse(source, f"{where}.behavior", f"split behavior {show(behavior)}")
        return {"type": kind, "pattern": _pattern(obj, where, source), "behavior": behavior,
                "invert": _flag(obj, "invert", where, source, False)}
    if kind == "ByteLevel":
        return {"type": kind, "add_prefix_space": _flag(obj, "add_prefix_space", where, source, True),
                "trim_offsets": _flag(obj, "trim_offsets", where, source, True),
                "use_regex": _flag(obj, "use_regex", where, source, True)}
    if kind == "Digits":
        return {"type": kind, "individual_digits": _flag(obj, "individual_digits", where, source, False)}
    if kind == "Punctuation":
        behavior = field(obj, "behavior", str, where, source, default="Isolated")
        if behavior not in _BEHAVIORS:
            _refuse(source, f"{where}.behavior", f"split behavior {show(behavior)}")
        return {"type": kind, "behavior": behavior}
    if kind in ("Whitespace", "WhitespaceSplit"):
        return {"type": kind}
    if kind == "Sequence":
        steps = field(obj, "pretokenizers", list, where, source)
        return {"type": kind, "pretokenizers": [check_pre_tokenizer(s, f"{where}.pretokenizers[{i}]", source) for i, s in enumerate(steps)]}
    _refuse(source, where, f"pre-tokenizer {show(kind)}")


def _has_byte_level(pre: dict | None) -> bool:
    if pre is None:
        return False
    if pre["type"] == "Sequence":
        return any(_has_byte_level(s) for s in pre["pretokenizers"])
    return pre["type"] == "ByteLevel"


def _special_pair(obj: dict, key: str, where: str, source: str) -> list:
    pair = field(obj, key, list, where, source)
    if len(pair) != 2 or not isinstance(pair[0], str) or not isinstance(pair[1], int) or isinstance(pair[1], bool):
        raise ValueError(f"{source}: {where}.{key} must be [token, id], got {show(pair)}")
    return pair


def check_post_processor(obj, where: str, source: str) -> dict | None:
    if obj is None:
        return None
    kind = _kind(obj, where, source)
    if kind == "ByteLevel":
        return {**obj, "type": kind}
    if kind in ("BertProcessing", "RobertaProcessing"):
        return {**obj, "type": kind, "sep": _special_pair(obj, "sep", where, source), "cls": _special_pair(obj, "cls", where, source)}
    if kind == "Sequence":
        steps = field(obj, "processors", list, where, source)
        return {**obj, "type": kind, "processors": [check_post_processor(s, f"{where}.processors[{i}]", source) for i, s in enumerate(steps)]}
    if kind == "TemplateProcessing":
        specials = field(obj, "special_tokens", dict, where, source)
        for name, entry in specials.items():
            here = f"{where}.special_tokens[{show(name)}]"
            expect(entry, dict, here, source)
            ids = field(entry, "ids", list, here, source)
            if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids):
                raise ValueError(f"{source}: {here}.ids must be a list of ids, got {show(ids)}")
        single = field(obj, "single", list, where, source)
        for n, item in enumerate(single):
            here = f"{where}.single[{n}]"
            expect(item, dict, here, source)
            if set(item) == {"Sequence"}:
                expect(item["Sequence"], dict, f"{here}.Sequence", source)
                if item["Sequence"].get("id") != "A":
                    _refuse(source, f"{here}.Sequence.id", f"sequence {show(item['Sequence'].get('id'))} in a single template")
            elif set(item) == {"SpecialToken"}:
                name = field(expect(item["SpecialToken"], dict, f"{here}.SpecialToken", source), "id", str, f"{here}.SpecialToken", source)
                if name not in specials:
                    raise ValueError(f"{source}: {here}.SpecialToken.id {show(name)} is not in {where}.special_tokens")
            else:
                raise ValueError(f"{source}: {here} must be a Sequence or a SpecialToken, got {show(item)}")
        return {**obj, "type": kind, "single": single, "special_tokens": specials}
    _refuse(source, where, f"post-processor {show(kind)}")


def check_decoder(obj, where: str, source: str) -> dict | None:
    if obj is None:
        return None
    kind = _kind(obj, where, source)
    if kind in ("ByteLevel", "Fuse", "ByteFallback"):
        return {**obj, "type": kind}
    if kind == "Replace":
        return {**obj, "type": kind, "pattern": _pattern(obj, where, source), "content": field(obj, "content", str, where, source)}
    if kind == "Strip":
        out = {**obj, "type": kind, "content": field(obj, "content", str, where, source)}
        if len(out["content"]) != 1:
            raise ValueError(f"{source}: {where}.content must be one character, got {show(out['content'])}")
        for key in ("start", "stop"):
            out[key] = field(obj, key, int, where, source)
            if out[key] < 0:
                raise ValueError(f"{source}: {where}.{key} must be >= 0, got {out[key]}")
        return out
    if kind == "Sequence":
        steps = field(obj, "decoders", list, where, source)
        return {**obj, "type": kind, "decoders": [check_decoder(s, f"{where}.decoders[{i}]", source) for i, s in enumerate(steps)]}
    _refuse(source, where, f"decoder {show(kind)}")


def check_model(model: dict, source: str, merge_ids=None, parts=None) -> tuple[dict, dict[str, int], tuple[list, list], tuple[list, list, list]]:
    """(options, vocab, merge texts, merge ids) of a BPE model object, every value
    checked; merge texts are the columns ``(lefts, rights)``, merge ids the columns
    ``(left ids, right ids, new ids)``, in the file's order. ``merge_ids(vocab, merges,
    prefix)``: a faster way to the id columns from the layers above (the native
    ``_hf_merge.merge_id_columns``), which returns None for anything but the common
    forms; then the checks here decide. ``parts``: the vocabulary and merges as
    ``_hfjson.read_json_parts`` read them from the file's bytes (the checks of the
    vocabulary and merges made there: ``reference.tokenizer_json``)."""
    if field(model, "type", str, "model", source, default=None) != "BPE":
        raise ValueError(f"{source}: model.type {show(model.get('type'))} is not BPE")
    if field(model, "dropout", (int, float, None), "model", source, default=None) not in (None, 0, 0.0):
        raise ValueError(f"{source}: model.dropout makes encoding random; fastbpe encodes deterministically")
    vocab = parts.vocab if parts is not None else check_vocab(field(model, "vocab", dict, "model", source), "model.vocab", source)
    options = {
        "unk_token": field(model, "unk_token", (str, None), "model", source, default=None),
        "continuing_subword_prefix": field(model, "continuing_subword_prefix", (str, None), "model", source, default=None),
        "end_of_word_suffix": field(model, "end_of_word_suffix", (str, None), "model", source, default=None),
        "fuse_unk": field(model, "fuse_unk", bool, "model", source, default=False),
        "byte_fallback": field(model, "byte_fallback", bool, "model", source, default=False),
        "ignore_merges": field(model, "ignore_merges", bool, "model", source, default=False),
    }
    if options["unk_token"] is not None and options["unk_token"] not in vocab:
        raise ValueError(f"{source}: model.unk_token {show(options['unk_token'])} is not in model.vocab")
    prefix = options["continuing_subword_prefix"] or ""
    if parts is not None:
        assert not prefix, "read_json_parts takes no file with a continuing_subword_prefix"
        return options, vocab, parts.merge_texts, parts.merge_ids
    raw = field(model, "merges", list, "model", source, default=[])
    # the common forms in bulk, by C-level maps (280k merges: ~0.15 s, not ~0.5 s): the
    # lookups are the checks (the loop below names the first bad merge)
    cut = len(prefix)
    try:
        kinds = set(map(type, raw))
        columns = merge_ids(vocab, raw, prefix) if merge_ids is not None and raw else None
        if not raw:
            lefts, rights = [], []
        elif kinds == {str}:
            if columns is None and set(map(str.count, raw, repeat(" "))) != {1}:
                raise KeyError
            flat = " ".join(raw).split(" ")   # one space each: left, right, left, right...
            lefts, rights = flat[0::2], flat[1::2]
        elif kinds == {list}:
            if columns is None and set(map(len, raw)) != {2}:
                raise KeyError
            lefts, rights = list(map(itemgetter(0), raw)), list(map(itemgetter(1), raw))
        else:
            raise KeyError
        if columns is not None:   # every merge found in the vocabulary, the prefix checked
            return options, vocab, (lefts, rights), columns
        if prefix and not all(b.startswith(prefix) for b in rights):
            raise KeyError
        get = vocab.__getitem__
        news = list(map(get, map(add, lefts, [b[cut:] for b in rights] if cut else rights)))
        return options, vocab, (lefts, rights), (list(map(get, lefts)), list(map(get, rights)), news)
    except (KeyError, ValueError, TypeError):
        pass
    merges = []
    for n, merge in enumerate(raw):
        where = f"model.merges[{n}]"
        a, b = _merge_parts(merge, where, source)
        for part in (a, b):
            if part not in vocab:
                raise ValueError(f"{source}: {where} has {show(part)}, which is not in model.vocab")
        if not b.startswith(prefix):
            raise ValueError(f"{source}: {where} right part {show(b)} lacks the continuing_subword_prefix {show(prefix)}")
        if a + b[cut:] not in vocab:
            raise ValueError(f"{source}: {where} ({a!r}, {b!r}) makes a token that is not in model.vocab")
        merges.append((a, b))
    lefts, rights = [a for a, _ in merges], [b for _, b in merges]
    return (options, vocab, (lefts, rights),
            ([vocab[a] for a in lefts], [vocab[b] for b in rights], [vocab[a + b[cut:]] for a, b in merges]))


def read_pipeline(data: dict, source: str = "<json>", *, merge_ids=None, parts=None) -> HFPipeline:
    """The ``HFPipeline`` of a parsed BPE tokenizer.json; ValueError for anything not
    implemented (the module docstring). ``merge_ids``, ``parts``: see ``check_model``."""
    expect(data, dict, "the top level", source)
    for key in ("truncation", "padding"):
        if data.get(key) is not None:
            _refuse(source, key, f"{key} (encode would cut or pad; fastbpe returns every id)")
    options, vocab, merge_texts, merge_columns = check_model(model_of(data, source), source, merge_ids, parts)
    pipeline = HFPipeline(
        normalizer=check_normalizer(data.get("normalizer"), "normalizer", source),
        pre_tokenizer=check_pre_tokenizer(data.get("pre_tokenizer"), "pre_tokenizer", source),
        post_processor=check_post_processor(data.get("post_processor"), "post_processor", source),
        decoder=check_decoder(data.get("decoder"), "decoder", source),
        model=options, vocab=vocab, merge_texts=merge_texts, merge_columns=merge_columns, added=[],
    )
    if not _has_byte_level(pipeline.pre_tokenizer):
        _refuse(source, "pre_tokenizer", "a BPE without a ByteLevel pre-tokenizer (not byte-level BPE)")
    missing = [b for b, c in enumerate(hf._byte_chars()) if c not in vocab]
    if missing:
        raise ValueError(f"{source}: model.vocab lacks {len(missing)} byte-level characters (e.g. byte {missing[0]}); not a byte-level BPE")
    entries = check_added_tokens(data, source)
    contents = {e["content"] for e in entries}
    alphabet = unicode_to_bytes()
    for text in (parts.not_byte_level if parts is not None else not_byte_level(vocab)):
        if text not in contents:
            c = next(c for c in text if c not in alphabet)
            raise ValueError(f"{source}: {key_path('model.vocab', text, bracket=True)}: token {text!r} has character {c!r} "
                             "outside the byte-level alphabet, and no added token is that text")
    for entry, idx in zip(entries, added_token_ids(entries, vocab, source)):
        entry["id"] = idx
    seen: dict[str, int] = {}
    for n, entry in enumerate(entries):
        if entry["content"] in seen and seen[entry["content"]] != entry["id"]:  # pragma: no cover - ids follow content
            raise ValueError(f"{source}: added_tokens[{n}] {show(entry['content'])} is listed twice")
        seen[entry["content"]] = entry["id"]
    return pipeline._replace(added=entries)


def _as_oniguruma(obj):
    """A component with every ``{"Regex": ...}`` as HF must read it (``to_oniguruma``)."""
    if isinstance(obj, dict):
        return {k: (to_oniguruma(v) if k == "Regex" and isinstance(v, str) else _as_oniguruma(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_as_oniguruma(v) for v in obj]
    return obj


def pipeline_json(pipeline: HFPipeline) -> str:
    """The tokenizer.json text of a pipeline: what ``read_pipeline`` read, so HF and
    fastbpe read the same meaning back.

    >>> p = HFPipeline(None, {"type": "ByteLevel"}, None, None, {"ignore_merges": False}, {"a": 0}, [], [], [])
    >>> json.loads(pipeline_json(p))["model"]["type"]
    'BPE'
    """
    doc = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{k: e[k] for k in ("id", "content", "single_word", "lstrip", "rstrip", "normalized", "special")}
                         for e in pipeline.added],
        **_as_oniguruma({k: getattr(pipeline, k) for k in ("normalizer", "pre_tokenizer", "post_processor", "decoder")}),
        "model": {"type": "BPE", "dropout": None, **pipeline.model, "vocab": pipeline.vocab,
                  "merges": [list(m) for m in pipeline.merges]},
    }
    return dumps_tokenizer_json(doc)
