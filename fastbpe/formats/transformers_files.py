"""The files ``transformers`` reads beside a ``tokenizer.json``: ``tokenizer_config.json``
and ``special_tokens_map.json``, so that ``AutoTokenizer.from_pretrained(folder)`` loads
a saved tokenizer with its special-token roles set.

Which special token plays which role is a convention, chosen here once:

- byte-level BPE: ``<|endoftext|>`` is ``bos``, ``eos`` and ``unk``, as in GPT-2's own
  files (a byte-level BPE never produces an unknown token, so ``unk`` only names one);
- WordPiece: BERT's ``[UNK]``, ``[SEP]``, ``[PAD]``, ``[CLS]``, ``[MASK]``;
- ``pad`` is set only when the tokenizer has a padding token (``<|pad|>``, ``<pad>``,
  ``[PAD]``, ``<|padding|>``); otherwise it stays unset, as in GPT-2, and a caller who
  pads must choose one (``tokenizer.pad_token = tokenizer.eos_token`` is the usual way).

A role whose token the tokenizer does not have is left out. ``tokenizer_class`` is
``PreTrainedTokenizerFast``, which takes the tokenizer.json as it is.

>>> special_token_roles({"<|endoftext|>": 3, "<|pad|>": 4}, "bpe")
{'bos_token': '<|endoftext|>', 'eos_token': '<|endoftext|>', 'unk_token': '<|endoftext|>', 'pad_token': '<|pad|>'}
>>> special_token_roles({"[CLS]": 0, "[SEP]": 1, "[UNK]": 2}, "wordpiece")
{'unk_token': '[UNK]', 'sep_token': '[SEP]', 'cls_token': '[CLS]'}
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..io.atomic import atomic_write_text

PAD_NAMES = ("<|pad|>", "<pad>", "[PAD]", "<|padding|>")

_ROLES = {
    "bpe": {"bos_token": ("<|endoftext|>",), "eos_token": ("<|endoftext|>",), "unk_token": ("<|endoftext|>",),
            "pad_token": PAD_NAMES},
    "wordpiece": {"unk_token": ("[UNK]",), "sep_token": ("[SEP]",), "pad_token": PAD_NAMES,
                  "cls_token": ("[CLS]",), "mask_token": ("[MASK]",)},
}

TOKENIZER_JSON = "tokenizer.json"


def special_token_roles(special_tokens, kind: str) -> dict[str, str]:
    """``{role: token}`` for the special tokens a tokenizer has (see the module docstring)."""
    roles = {}
    for role, names in _ROLES[kind].items():
        found = next((name for name in names if name in special_tokens), None)
        if found is not None:
            roles[role] = found
    return roles


def transformers_folder(path: str | os.PathLike) -> Path:
    """The folder a ``transformers`` save goes to: ``path`` itself, or the folder of a
    ``.../tokenizer.json`` path (``from_pretrained`` looks for that exact name)."""
    path = Path(path)
    if path.name == TOKENIZER_JSON:
        return path.parent
    if path.suffix.lower() == ".json" or (path.exists() and not path.is_dir()):
        raise ValueError(
            f"a transformers save needs a folder (or a path named {TOKENIZER_JSON}), got {path}: "
            f"from_pretrained looks for {TOKENIZER_JSON} by that name"
        )
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_transformers_config(folder: Path, special_tokens: dict[str, int], kind: str,
                              added_tokens: dict[str, int] | None = None) -> None:
    """Write tokenizer_config.json and special_tokens_map.json into ``folder``
    (``added_tokens``: the non-special ones)."""
    roles = special_token_roles(special_tokens, kind)
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "clean_up_tokenization_spaces": False,
        **roles,
        "added_tokens_decoder": {
            str(idx): {"content": text, "lstrip": False, "normalized": False, "rstrip": False,
                       "single_word": False, "special": text in special_tokens}
            for text, idx in sorted({**special_tokens, **(added_tokens or {})}.items(), key=lambda kv: kv[1])
        },
    }
    atomic_write_text(folder / "tokenizer_config.json", json.dumps(config, ensure_ascii=False, indent=2) + "\n")
    atomic_write_text(folder / "special_tokens_map.json", json.dumps(roles, ensure_ascii=False, indent=2) + "\n")
