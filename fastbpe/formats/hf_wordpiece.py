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
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ._atomic import atomic_write_text


# Turkish-aware lowercasing as HF can express it: two Replace normalizers before BERT's.
TURKISH_REPLACES = [
    {"type": "Replace", "pattern": {"String": "İ"}, "content": "i"},
    {"type": "Replace", "pattern": {"String": "I"}, "content": "ı"},
]


def read_hf_wordpiece(path: str | os.PathLike) -> dict:
    """Constructor keyword arguments for ``fastbpe.WordPiece`` from a tokenizer.json."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = f" line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise ValueError(f"{path}:{where} not a valid tokenizer.json ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise ValueError(f"{path}: no 'model' object; not a tokenizer.json")
    model = data["model"]
    if model.get("type", "WordPiece") != "WordPiece" or "continuing_subword_prefix" not in model:
        raise ValueError(f"{path}: model type {model.get('type')!r} is not supported here (need WordPiece)")
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not all(isinstance(t, str) and isinstance(i, int) for t, i in vocab.items()):
        raise ValueError(f"{path}: model.vocab must map token strings to integer ids")

    kwargs: dict = {
        "unk_token": model.get("unk_token", "[UNK]"),
        "max_input_chars_per_word": int(model.get("max_input_chars_per_word", 100)),
        "continuing_subword_prefix": model.get("continuing_subword_prefix", "##"),
    }
    norm = data.get("normalizer")
    kwargs["turkish_lowercase"] = False
    if isinstance(norm, dict) and norm.get("type") == "Sequence" and norm.get("normalizers", [])[:2] == TURKISH_REPLACES:
        rest = norm["normalizers"][2:]
        if len(rest) == 1:
            kwargs["turkish_lowercase"] = True
            norm = rest[0]
    if norm is None:
        kwargs.update(lowercase=False, strip_accents=False, clean_text=False, tokenize_chinese_chars=False)
    elif norm.get("type") == "BertNormalizer":
        kwargs.update(
            lowercase=bool(norm.get("lowercase", True)),
            strip_accents=norm.get("strip_accents"),
            clean_text=bool(norm.get("clean_text", True)),
            tokenize_chinese_chars=bool(norm.get("handle_chinese_chars", True)),
        )
    else:
        raise ValueError(f"{path}: normalizer {norm.get('type')!r} is not supported (need BertNormalizer)")
    pre = data.get("pre_tokenizer")
    if not isinstance(pre, dict) or pre.get("type") != "BertPreTokenizer":
        got = pre.get("type") if isinstance(pre, dict) else pre
        raise ValueError(f"{path}: pre_tokenizer {got!r} is not supported (need BertPreTokenizer)")

    vocab = dict(vocab)
    specials = []
    for added in data.get("added_tokens") or []:
        content, idx = added.get("content"), added.get("id")
        if not isinstance(content, str) or not isinstance(idx, int):
            raise ValueError(f"{path}: malformed added_tokens entry {added!r}")
        if vocab.get(content, idx) != idx:
            raise ValueError(f"{path}: added token {content!r} has id {idx} but the vocab says {vocab[content]}")
        vocab[content] = idx
        specials.append(content)
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
