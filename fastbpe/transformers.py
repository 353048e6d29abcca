"""transformers users: ``tok(texts)["input_ids"]`` on fastbpe, in a data loader.

``fastbpe.transformers.wrap(hf_tokenizer)`` takes a transformers fast tokenizer
(``AutoTokenizer.from_pretrained(...)``, a ``PreTrainedTokenizerFast``) and returns a
``FastTokenizer`` whose ``__call__`` takes the arguments data loaders pass
(``text``, ``text_pair``, ``add_special_tokens``, ``padding``, ``truncation``,
``max_length``, ``pad_to_multiple_of``, ``return_tensors``, ``return_attention_mask``,
``return_token_type_ids``, ``padding_side``) and returns transformers' own
``BatchEncoding`` with the same ``input_ids`` / ``attention_mask`` (/ ``token_type_ids``)
as the wrapped tokenizer. The tokenizer.json comes from the wrapped tokenizer's backend
(``backend_tokenizer.to_str()``); its pad token, ``model_max_length``, padding and
truncation sides and ``model_input_names`` are copied. ``FastTokenizer.from_pretrained``
does the same from a folder or cached model name without transformers' loading.

Decision: a small object that answers ``__call__``, ``decode``, ``batch_decode`` and the
vocabulary questions, not a ``PreTrainedTokenizerFast`` subclass (whose internals are the
Rust tokenizer): arguments it does not implement raise ValueError naming them, never
ignored. transformers is imported only when a ``BatchEncoding`` is made.
"""
from __future__ import annotations

import os
from collections.abc import Sequence

from .hf_tokenizer import Tokenizer
from .pretrained import TokenizerConfig

_TRUNCATION = {True: "longest_first", "longest_first": "longest_first", "only_first": "only_first",
               "only_second": "only_second"}


class FastTokenizer:
    """See the module docstring."""

    def __init__(self, tokenizer: Tokenizer, *, pad_token: str | None = None, model_max_length: int | None = None,
                 padding_side: str = "right", truncation_side: str = "right",
                 model_input_names: Sequence[str] = ("input_ids", "attention_mask")):
        if not isinstance(tokenizer, Tokenizer):
            raise TypeError(f"tokenizer must be a fastbpe.Tokenizer, not {type(tokenizer).__name__}")
        for name, side in (("padding_side", padding_side), ("truncation_side", truncation_side)):
            if side not in ("right", "left"):
                raise ValueError(f"{name} must be 'right' or 'left', not {side!r}")
        self.tokenizer = tokenizer
        self.pad_token = pad_token
        self.model_max_length = model_max_length
        self.padding_side, self.truncation_side = padding_side, truncation_side
        self.model_input_names = list(model_input_names)

    @classmethod
    def from_pretrained(cls, path_or_name: str | os.PathLike, **kwargs) -> FastTokenizer:
        tok = Tokenizer.from_pretrained(path_or_name, **kwargs)
        c = tok.config or TokenizerConfig()
        side = c.raw.get("padding_side", "right")
        return cls(tok, pad_token=c.pad_token, model_max_length=c.model_max_length, padding_side=side,
                   truncation_side=c.raw.get("truncation_side", "right"),
                   model_input_names=c.raw.get("model_input_names") or ("input_ids", "attention_mask"))

    @property
    def pad_token_id(self) -> int | None:
        return None if self.pad_token is None else self.tokenizer.token_to_id(self.pad_token)

    @property
    def encoding(self):
        """The tiktoken-style ``Encoding`` (numpy batches, shards, ``count``)."""
        return self.tokenizer.encoding

    def __call__(self, text, text_pair=None, *, add_special_tokens: bool = True, padding=False, truncation=None,
                 max_length: int | None = None, stride: int = 0, pad_to_multiple_of: int | None = None,
                 padding_side: str | None = None, return_tensors=None, return_token_type_ids: bool | None = None,
                 return_attention_mask: bool | None = None, **unsupported):
        if unsupported:
            raise ValueError(f"not implemented by fastbpe.transformers: {sorted(unsupported)}")
        single = isinstance(text, str)
        texts = [text] if single else list(text)
        if text_pair is not None:
            pairs = [text_pair] if isinstance(text_pair, str) else list(text_pair)
            if len(pairs) != len(texts):
                raise ValueError(f"text_pair has {len(pairs)} texts for {len(texts)} texts")
            inputs = list(zip(texts, pairs))
        else:
            inputs = texts
        tok = self.tokenizer
        old_truncation, old_padding = tok.truncation, tok.padding
        try:
            self._configure(padding, truncation, max_length, stride, pad_to_multiple_of, padding_side)
            encoded = tok._encode_batch(inputs, False, add_special_tokens, offsets=False)
        finally:
            tok._set_truncation(old_truncation, "truncation")
            tok._set_padding(old_padding, "padding")
        data = {"input_ids": [e.ids for e in encoded]}
        if return_token_type_ids or return_token_type_ids is None and "token_type_ids" in self.model_input_names:
            data["token_type_ids"] = [e.type_ids for e in encoded]
        if return_attention_mask or return_attention_mask is None and "attention_mask" in self.model_input_names:
            data["attention_mask"] = [e.attention_mask for e in encoded]
        if single and return_tensors is None:
            data = {k: v[0] for k, v in data.items()}
        from transformers import BatchEncoding

        return BatchEncoding(data, tensor_type=return_tensors)

    def _configure(self, padding, truncation, max_length, stride, pad_to_multiple_of, padding_side) -> None:
        tok = self.tokenizer
        if truncation is None:   # transformers: truncate when max_length is given
            truncation = max_length is not None
        if truncation in (False, "do_not_truncate"):
            tok.no_truncation()
        elif truncation in _TRUNCATION:
            limit = max_length if max_length is not None else self.model_max_length
            if limit is None:
                raise ValueError("truncation needs max_length (the tokenizer has no model_max_length)")
            tok.enable_truncation(limit, stride=stride, strategy=_TRUNCATION[truncation], direction=self.truncation_side)
        else:
            raise ValueError(f"truncation={truncation!r} is not one of True, False, {sorted(map(str, _TRUNCATION))}")
        if padding in (False, "do_not_pad"):
            tok.no_padding()
            return
        if padding not in (True, "longest", "max_length"):
            raise ValueError(f"padding={padding!r} is not one of True, False, 'longest', 'max_length', 'do_not_pad'")
        if self.pad_token is None or self.pad_token_id is None:
            raise ValueError("padding needs a pad token: the tokenizer has none (set pad_token)")
        length = None
        if padding == "max_length":
            length = max_length if max_length is not None else self.model_max_length
            if length is None:
                raise ValueError("padding='max_length' needs max_length")
        tok.enable_padding(direction=padding_side or self.padding_side, pad_id=self.pad_token_id, pad_token=self.pad_token,
                           length=length, pad_to_multiple_of=pad_to_multiple_of)

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return self.tokenizer.decode(_ids(ids), skip_special_tokens=skip_special_tokens)

    def batch_decode(self, sequences, skip_special_tokens: bool = False) -> list[str]:
        return [self.decode(s, skip_special_tokens=skip_special_tokens) for s in sequences]

    def convert_tokens_to_ids(self, tokens):
        return self.tokenizer.token_to_id(tokens) if isinstance(tokens, str) else [self.tokenizer.token_to_id(t) for t in tokens]

    def get_vocab(self) -> dict[str, int]:
        return self.tokenizer.get_vocab()

    def __len__(self) -> int:
        return self.tokenizer.get_vocab_size()


def wrap(hf_tokenizer) -> FastTokenizer:
    """A ``FastTokenizer`` with the same file and settings as a transformers fast
    tokenizer (see the module docstring)."""
    backend = getattr(hf_tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise TypeError(f"wrap needs a transformers fast tokenizer (with backend_tokenizer), not {type(hf_tokenizer).__name__}")
    name = getattr(hf_tokenizer, "name_or_path", "") or "tokenizer"
    tok = Tokenizer.from_str(backend.to_str(), name=os.path.basename(str(name)) or "tokenizer", source=f"{name} (backend)")
    max_length = getattr(hf_tokenizer, "model_max_length", None)
    return FastTokenizer(tok, pad_token=hf_tokenizer.pad_token,
                         model_max_length=max_length if isinstance(max_length, int) and max_length < 10**12 else None,
                         padding_side=hf_tokenizer.padding_side, truncation_side=hf_tokenizer.truncation_side,
                         model_input_names=hf_tokenizer.model_input_names)


def _ids(ids) -> list[int]:
    """Ids as a list, from a list, tuple, numpy array or tensor.

    >>> import numpy as np
    >>> _ids(np.array([5, 6])), _ids((7,))
    ([5, 6], [7])
    """
    return ids.tolist() if hasattr(ids, "tolist") else list(ids)
