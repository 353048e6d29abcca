"""The public OpenAI encodings as data: for each name, its ranks file, split pattern,
special tokens and explicit vocabulary size, as tiktoken defines them (its
``tiktoken_ext/openai_public.py``; ``tests/test_registry.py`` builds tiktoken's own
encodings and compares every field and the ids).

Seven names use four ``.tiktoken`` files: ``gpt2`` and ``r50k_base`` the same ranks
(tiktoken reads gpt2's from GPT-2's ``encoder.json``/``vocab.bpe``, which hold exactly
r50k_base's), ``p50k_edit`` p50k_base's and ``o200k_harmony`` o200k_base's.

>>> ENCODINGS["p50k_edit"].ranks, ENCODINGS["p50k_edit"].special_tokens["<|fim_suffix|>"]
('p50k_base', 50283)
"""
from __future__ import annotations

from typing import NamedTuple

from .reference import patterns

ENDOFTEXT = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_MIDDLE = "<|fim_middle|>"
FIM_SUFFIX = "<|fim_suffix|>"
ENDOFPROMPT = "<|endofprompt|>"

_BLOB = "https://openaipublic.blob.core.windows.net/encodings/"


class RanksFile(NamedTuple):
    """One ``.tiktoken`` file: tiktoken's sha256 of it, the URL tiktoken downloads it
    from (its cache names files by the URL's sha1), the names a user's folder may hold
    it under, and the encoding a bare file of these ranks loads as (``fastbpe.load``)."""

    sha256: str
    url: str
    file_names: tuple[str, ...]
    loads_as: str


class Definition(NamedTuple):
    ranks: str                       # a key of RANKS_FILES
    pat_str: str
    special_tokens: dict[str, int]   # treat as read-only: Encoding copies it
    explicit_n_vocab: int | None


RANKS_FILES: dict[str, RanksFile] = {
    "r50k_base": RanksFile(
        "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
        _BLOB + "r50k_base.tiktoken", ("r50k_base.tiktoken", "gpt2.tiktoken"), "gpt2",
    ),
    "p50k_base": RanksFile(
        "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
        _BLOB + "p50k_base.tiktoken", ("p50k_base.tiktoken",), "p50k_base",
    ),
    "cl100k_base": RanksFile(
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        _BLOB + "cl100k_base.tiktoken", ("cl100k_base.tiktoken",), "cl100k_base",
    ),
    "o200k_base": RanksFile(
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        _BLOB + "o200k_base.tiktoken", ("o200k_base.tiktoken",), "o200k_base",
    ),
}

_O200K_SPECIALS = {ENDOFTEXT: 199999, ENDOFPROMPT: 200018}

# o200k_harmony: o200k_base's specials, then named control tokens, then reserved names
# for every id from 200013 to 201087. The reserved range runs over 200018, so
# "<|reserved_200018|>" shares that id with "<|endofprompt|>" (the one shared id of the
# public encodings; see reference.core.CoreBPE for which bytes such an id decodes to).
_HARMONY_SPECIALS = {
    **_O200K_SPECIALS,
    "<|startoftext|>": 199998,
    "<|reserved_200000|>": 200000,
    "<|reserved_200001|>": 200001,
    "<|return|>": 200002,
    "<|constrain|>": 200003,
    "<|reserved_200004|>": 200004,
    "<|channel|>": 200005,
    "<|start|>": 200006,
    "<|end|>": 200007,
    "<|message|>": 200008,
    "<|reserved_200009|>": 200009,
    "<|reserved_200010|>": 200010,
    "<|reserved_200011|>": 200011,
    "<|call|>": 200012,
    **{f"<|reserved_{i}|>": i for i in range(200013, 201088)},
}

#: In tiktoken's order (its ``list_encoding_names()``).
ENCODINGS: dict[str, Definition] = {
    "gpt2": Definition("r50k_base", patterns.GPT2, {ENDOFTEXT: 50256}, 50257),
    "r50k_base": Definition("r50k_base", patterns.GPT2, {ENDOFTEXT: 50256}, 50257),
    "p50k_base": Definition("p50k_base", patterns.GPT2, {ENDOFTEXT: 50256}, 50281),
    "p50k_edit": Definition(
        "p50k_base", patterns.GPT2,
        {ENDOFTEXT: 50256, FIM_PREFIX: 50281, FIM_MIDDLE: 50282, FIM_SUFFIX: 50283}, None,
    ),
    "cl100k_base": Definition(
        "cl100k_base", patterns.CL100K,
        {ENDOFTEXT: 100257, FIM_PREFIX: 100258, FIM_MIDDLE: 100259, FIM_SUFFIX: 100260, ENDOFPROMPT: 100276},
        None,
    ),
    "o200k_base": Definition("o200k_base", patterns.O200K, _O200K_SPECIALS, None),
    "o200k_harmony": Definition("o200k_base", patterns.O200K, _HARMONY_SPECIALS, None),
}
