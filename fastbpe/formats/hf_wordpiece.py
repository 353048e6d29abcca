"""Hugging Face ``tokenizer.json`` for a BERT-style WordPiece tokenizer.

Reading accepts a ``WordPiece`` model with a ``BertNormalizer`` (or none) and a
``BertPreTokenizer``; anything else raises ValueError naming the file, because fastbpe would
not encode it the way HF does. Added tokens become fastbpe's special tokens (recognised in
raw text, skipped by decode). The file's ``post_processor`` (null, ``BertProcessing``,
``RobertaProcessing`` or ``TemplateProcessing``), ``truncation`` and ``padding`` sections
are applied as HF applies them (rules in ``fastbpe.reference.wordpiece``), so that
``WordPiece.encode`` gives HF's ``Tokenizer.encode(...).ids``; another post-processor
raises ValueError naming the file.

Turkish-aware lowercasing is written as ``Sequence[Replace İ->i, Replace I->ı,
BertNormalizer]``, which HF applies with the same result, and read back from that shape.

Writing produces a file that ``tokenizers.Tokenizer.from_file`` loads and encodes like
fastbpe: BertNormalizer, BertPreTokenizer, WordPiece model, the tokenizer's post-processor
(by default a TemplateProcessing ``[CLS] $A [SEP]`` / ``[CLS] $A [SEP] $B:1 [SEP]:1``),
truncation and padding, and the WordPiece decoder.

>>> import tempfile, os
>>> from fastbpe import WordPiece
>>> path = WordPiece({"[UNK]": 0, "hi": 1}).save(os.path.join(tempfile.mkdtemp(), "tokenizer.json"))
>>> read_hf_wordpiece(path)["vocab"]
{'[UNK]': 0, 'hi': 1}
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..io.atomic import atomic_write_text
from ._hfjson import added_token_ids, check_added_tokens, check_vocab, expect, field, model_of, read_json


# Turkish-aware lowercasing as HF can express it: two Replace normalizers before BERT's.
TURKISH_REPLACES = [
    {"type": "Replace", "pattern": {"String": "İ"}, "content": "i"},
    {"type": "Replace", "pattern": {"String": "I"}, "content": "ı"},
]


def _normalizer_kwargs(norm, path) -> dict:
    if norm is None:
        return dict(lowercase=False, strip_accents=False, clean_text=False, tokenize_chinese_chars=False)
    where = "normalizer"
    if field(norm, "type", str, where, path) != "BertNormalizer":
        raise ValueError(f"{path}: normalizer {norm.get('type')!r} is not supported (need BertNormalizer)")
    return dict(
        lowercase=field(norm, "lowercase", bool, where, path, default=True),
        strip_accents=field(norm, "strip_accents", (bool, None), where, path, default=None),
        clean_text=field(norm, "clean_text", bool, where, path, default=True),
        tokenize_chinese_chars=field(norm, "handle_chinese_chars", bool, where, path, default=True),
    )


def read_hf_wordpiece(path: str | os.PathLike) -> dict:
    """Constructor keyword arguments for ``fastbpe.WordPiece`` from a tokenizer.json.

    The structure is checked by ``_hfjson`` (ValueError naming the file and JSON path);
    added tokens get the ids HF gives them (``_hfjson.added_token_ids``).
    """
    path = Path(path)
    data = read_json(path)
    model = model_of(data, str(path))
    if model.get("type", "WordPiece") != "WordPiece" or "continuing_subword_prefix" not in model:
        raise ValueError(f"{path}: model type {model.get('type')!r} is not supported here (need WordPiece)")
    vocab = check_vocab(field(model, "vocab", dict, "model", path), "model.vocab", path)

    kwargs: dict = {
        "unk_token": field(model, "unk_token", str, "model", path, default="[UNK]"),
        "max_input_chars_per_word": field(model, "max_input_chars_per_word", int, "model", path, default=100),
        "continuing_subword_prefix": field(model, "continuing_subword_prefix", str, "model", path),
    }
    unk = kwargs["unk_token"]
    if unk not in vocab:
        # HF's WordPiece looks the unk token up in model.vocab alone (not the added tokens)
        # and fails on the first unknown word without it: a meaning fastbpe can't reproduce
        what = "is empty" if not vocab else f"has no unk_token {unk!r}"
        raise ValueError(f"{path}: model.vocab {what}; HF's WordPiece fails on every unknown word "
                         f"without {unk!r} in model.vocab (added_tokens do not count)")
    norm = expect(data.get("normalizer"), (dict, None), "normalizer", path)
    kwargs["turkish_lowercase"] = False
    if norm is not None and norm.get("type") == "Sequence":
        steps = field(norm, "normalizers", list, "normalizer", path)
        if steps[:2] == TURKISH_REPLACES and len(steps) == 3:
            kwargs["turkish_lowercase"] = True
            norm = expect(steps[2], dict, "normalizer.normalizers[2]", path)
    kwargs.update(_normalizer_kwargs(norm, path))
    pre = data.get("pre_tokenizer")
    if not isinstance(pre, dict) or pre.get("type") != "BertPreTokenizer":
        got = pre.get("type") if isinstance(pre, dict) else pre
        raise ValueError(f"{path}: pre_tokenizer {got!r} is not supported (need BertPreTokenizer)")

    vocab = dict(vocab)
    specials = []
    added = check_added_tokens(data, path)
    for entry, idx in zip(added, added_token_ids(added, vocab, path)):
        vocab[entry["content"]] = idx
        specials.append(entry["content"])
    kwargs["vocab"] = vocab
    kwargs["special_tokens"] = tuple(specials)
    # what HF does around the ids; WordPiece checks them (ValueError, named with the file)
    kwargs["post_processor"] = data.get("post_processor")
    kwargs["truncation"] = data.get("truncation")
    kwargs["padding"] = data.get("padding")
    return kwargs


def hf_wordpiece_json(
    vocab: dict[str, int],
    *,
    lowercase: bool,
    strip_accents: bool | None,
    clean_text: bool,
    tokenize_chinese_chars: bool,
    unk_token: str,
    max_input_chars_per_word: int,
    continuing_subword_prefix: str,
    special_tokens,
    turkish_lowercase: bool = False,
    post_processor="bert",
    truncation: dict | None = None,
    padding: dict | None = None,
) -> str:
    """The tokenizer.json text for a fastbpe WordPiece configuration.

    ``post_processor``, ``truncation`` and ``padding`` are tokenizer.json objects (or
    None); ``post_processor="bert"`` writes BERT's template when [CLS] and [SEP] exist."""
    added = [
        {"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for t in special_tokens if t in vocab
    ]
    post = None if post_processor == "bert" else post_processor
    if post_processor == "bert" and "[CLS]" in vocab and "[SEP]" in vocab:
        cls, sep = {"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}
        post = {
            "type": "TemplateProcessing",
            "single": [cls, {"Sequence": {"id": "A", "type_id": 0}}, sep],
            "pair": [cls, {"Sequence": {"id": "A", "type_id": 0}}, sep,
                     {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {
                t: {"id": t, "ids": [vocab[t]], "tokens": [t]} for t in ("[CLS]", "[SEP]")
            },
        }
    normalizer = {
        "type": "BertNormalizer",
        "clean_text": clean_text,
        "handle_chinese_chars": tokenize_chinese_chars,
        "strip_accents": strip_accents,
        "lowercase": lowercase,
    }
    if turkish_lowercase and lowercase:
        normalizer = {"type": "Sequence", "normalizers": TURKISH_REPLACES + [normalizer]}
    doc = {
        "version": "1.0",
        "truncation": truncation,
        "padding": padding,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": post,
        "decoder": {"type": "WordPiece", "prefix": continuing_subword_prefix, "cleanup": True},
        "model": {
            "type": "WordPiece",
            "unk_token": unk_token,
            "continuing_subword_prefix": continuing_subword_prefix,
            "max_input_chars_per_word": max_input_chars_per_word,
            "vocab": dict(sorted(vocab.items(), key=lambda kv: kv[1])),
        },
    }
    return json.dumps(doc, ensure_ascii=False, indent=2) + "\n"


def write_hf_wordpiece(path: str | os.PathLike, vocab: dict[str, int], **options) -> Path:
    """Write a tokenizer.json atomically (see ``hf_wordpiece_json`` for the options)."""
    return atomic_write_text(path, hf_wordpiece_json(vocab, **options))
