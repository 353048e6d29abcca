"""Open models' tiktoken-format rank files: their split patterns and special tokens.

A ``.tiktoken``-format file holds ranks only. tiktoken's users pass the pattern and the
special tokens in code, and each model publishes them in its own code, not in the file.
So a rank file loads only when we know its meaning: the public OpenAI files and Meta's
Llama 3 / Llama 4 ``tokenizer.model`` by their sha256, any file with a model name given
(``fastbpe.load(path, model="qwen")``) or with the caller's ``pat_str``. A rank file
loaded with a guessed pattern encodes differently from its model, silently (Llama 4's
with cl100k's pattern differs on 272 of 750 documents), so there is no default.

The facts, from the code each model publishes:

- Llama 3 / 3.1 / 3.2 / 3.3 (``llama_models/llama3/tokenizer.py``): ``patterns.LLAMA3``;
  256 special tokens from id ``len(ranks)`` (128000): eleven named ones, then
  ``<|reserved_special_token_{2+i}|>`` (as the text models' code and Llama 3.2's
  tokenizer.json number them; the vision models' code puts ``<|image|>`` at 128011).
- Llama 4 (``llama_models/llama4/tokenizer.py``): ``patterns.LLAMA4`` (o200k's); 2,048
  special slots from ``len(ranks)`` (200000): five basic tokens, the text, vision and
  reasoning ones, then ``<|reserved_special_token_{i}|>`` to fill the slots.
- Qwen (``tokenization_qwen.py`` beside ``qwen.tiktoken``): ``patterns.QWEN``;
  ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``, ``<|extra_0|>`` ..
  ``<|extra_204|>`` from id 151643.

>>> sorted(OPEN_MODELS)
['llama3', 'llama4', 'qwen']
>>> specials = llama3_special_tokens(128000)
>>> specials["<|begin_of_text|>"], specials["<|eot_id|>"], specials["<|reserved_special_token_246|>"]
(128000, 128009, 128255)
>>> llama4_special_tokens(200000)["<|patch|>"], len(llama4_special_tokens(200000))
(200092, 2048)
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from ..reference import patterns


def llama3_special_tokens(first_id: int) -> dict[str, int]:
    """Llama 3's 256 special tokens, numbered from ``first_id`` (the number of ranks)."""
    named = [
        "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
        "<|finetune_right_pad_id|>", "<|step_id|>", "<|start_header_id|>", "<|end_header_id|>",
        "<|eom_id|>", "<|eot_id|>", "<|python_tag|>",
    ]
    names = named + [f"<|reserved_special_token_{2 + i}|>" for i in range(256 - len(named))]
    return {name: first_id + i for i, name in enumerate(names)}


def _numbered(kind: str, count: int, start: int) -> list[str]:
    return [f"<|{kind}_reserved_special_token_{i}|>" for i in range(start, start + count)]


def llama4_special_tokens(first_id: int) -> dict[str, int]:
    """Llama 4's 2,048 special slots, numbered from ``first_id`` (the number of ranks)."""
    text = [
        "<|header_start|>", "<|header_end|>", "<|eom|>", "<|eot|>", "<|step|>",
        *_numbered("text_post_train", 6, 0), "<|python_start|>", "<|python_end|>", "<|finetune_right_pad|>",
        *_numbered("text_post_train", 61, 8),
    ]
    vision = [
        "<|image_start|>", "<|image_end|>", *_numbered("vision", 2, 0), "<|tile_x_separator|>",
        "<|tile_y_separator|>", *_numbered("vision", 4, 2), "<|image|>", *_numbered("vision", 1, 6), "<|patch|>",
        *_numbered("vision", 1041, 7),
    ]
    reasoning = [*_numbered("reasoning", 8, 0), "<|reasoning_thinking_start|>", "<|reasoning_thinking_end|>"]
    basic = ["<|begin_of_text|>", "<|end_of_text|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>"]
    names = basic + text + vision + reasoning
    names += [f"<|reserved_special_token_{i}|>" for i in range(2048 - len(names))]
    return {name: first_id + i for i, name in enumerate(names)}


def qwen_special_tokens(first_id: int = 151643) -> dict[str, int]:
    """Qwen's 208 special tokens (``qwen.tiktoken``: from id 151643, its number of ranks)."""
    names = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [f"<|extra_{i}|>" for i in range(205)]
    return {name: first_id + i for i, name in enumerate(names)}


class OpenModel(NamedTuple):
    """A model whose rank file we can read: its pattern, and its special tokens as a
    function of the number of ranks (each model numbers them from there)."""

    pat_str: str
    special_tokens: Callable[[int], dict[str, int]]


OPEN_MODELS: dict[str, OpenModel] = {
    "llama3": OpenModel(patterns.LLAMA3, llama3_special_tokens),
    "llama4": OpenModel(patterns.LLAMA4, llama4_special_tokens),
    "qwen": OpenModel(patterns.QWEN, qwen_special_tokens),
}

#: sha256 of Meta's published ``tokenizer.model`` files -> the model they belong to
#: (the hashes of the files in ``llama-models`` 0.3.0; Llama 3.1-3.3 ship Llama 3's).
META_FILES = {
    "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55": "llama3",
    "d0bdbaf59b0762c8c807617e2d8ea51420eb1b1de266df2495be755c8e0ed6ed": "llama4",
}


def open_model(name: str) -> OpenModel:
    """The model called ``name``; ValueError naming the known ones otherwise."""
    if not isinstance(name, str):
        raise TypeError(f"model must be a str, not {type(name).__name__}")
    if name not in OPEN_MODELS:
        raise ValueError(f"unknown model {name!r}; known models for a rank file: {sorted(OPEN_MODELS)}")
    return OPEN_MODELS[name]
