"""``WordPiece``: BERT-style tokenizer with the same outputs as HF ``tokenizers``.

The rules (normalisation, pre-tokenisation, greedy longest match, training) are written down
in ``fastbpe.reference.wordpiece``; this class validates inputs, owns the vocabulary and the
options, and loads/saves ``vocab.txt`` and ``tokenizer.json``.

>>> wp = WordPiece({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "un": 3, "##fair": 4})
>>> wp.tokenize("Unfair")
['un', '##fair']
>>> wp.encode("unfair")
[1, 3, 4, 2]
"""
from __future__ import annotations

import os
from pathlib import Path

from .reference import wordpiece as _ref

DEFAULT_SPECIAL_TOKENS = _ref.SPECIAL_TOKENS


def _check_text(text, what: str = "text") -> str:
    if not isinstance(text, str):
        raise TypeError(f"{what} must be str, not {type(text).__name__}")
    return text


class WordPiece:
    """A WordPiece tokenizer over ``vocab`` (token -> id) with BERT's pipeline.

    ``strip_accents=None`` follows ``lowercase`` (as HF). ``special_tokens`` are recognised
    in raw text and skipped by ``decode``; by default, those of ``[PAD] [UNK] [CLS] [SEP]
    [MASK]`` that are in the vocabulary.
    """

    def __init__(
        self,
        vocab: dict[str, int],
        *,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        unk_token: str = "[UNK]",
        max_input_chars_per_word: int = 100,
        continuing_subword_prefix: str = "##",
        tokenize_chinese_chars: bool = True,
        clean_text: bool = True,
        special_tokens=None,
    ):
        if not isinstance(vocab, dict):
            raise TypeError(f"vocab must be a dict of token -> id, not {type(vocab).__name__}")
        seen: dict[int, str] = {}
        for token, idx in vocab.items():
            if not isinstance(token, str) or not isinstance(idx, int) or isinstance(idx, bool):
                raise TypeError(f"vocab must map str to int; got {token!r}: {idx!r}")
            if idx < 0:
                raise ValueError(f"vocab id {idx} of {token!r} is negative")
            if idx in seen:
                raise ValueError(f"vocab id {idx} is used by both {seen[idx]!r} and {token!r}")
            seen[idx] = token
        if not isinstance(unk_token, str) or unk_token not in vocab:
            raise ValueError(f"unk token {unk_token!r} is not in the vocabulary")
        if not isinstance(max_input_chars_per_word, int) or max_input_chars_per_word < 1:
            raise ValueError(f"max_input_chars_per_word must be a positive int, not {max_input_chars_per_word!r}")
        if not isinstance(continuing_subword_prefix, str):
            raise TypeError("continuing_subword_prefix must be str")
        if strip_accents is not None and not isinstance(strip_accents, bool):
            raise TypeError("strip_accents must be True, False or None")
        if special_tokens is None:
            special_tokens = [t for t in DEFAULT_SPECIAL_TOKENS if t in vocab]
        special_tokens = tuple(special_tokens)
        for t in special_tokens:
            if t not in vocab:
                raise ValueError(f"special token {t!r} is not in the vocabulary")
        self._vocab = dict(vocab)
        self._id_to_token = seen
        self._opts = _ref.BertOptions(
            lowercase=bool(lowercase),
            strip_accents=strip_accents,
            clean_text=bool(clean_text),
            tokenize_chinese_chars=bool(tokenize_chinese_chars),
            unk_token=unk_token,
            max_input_chars_per_word=max_input_chars_per_word,
            continuing_subword_prefix=continuing_subword_prefix,
            special_tokens=special_tokens,
        )

    # -- options ---------------------------------------------------------------------
    def _options(self) -> dict:
        o = self._opts
        return dict(
            lowercase=o.lowercase, strip_accents=o.strip_accents, clean_text=o.clean_text,
            tokenize_chinese_chars=o.tokenize_chinese_chars, unk_token=o.unk_token,
            max_input_chars_per_word=o.max_input_chars_per_word,
            continuing_subword_prefix=o.prefix, special_tokens=o.special_tokens,
        )

    def __repr__(self) -> str:
        return f"WordPiece(vocab_size={len(self)}, lowercase={self._opts.lowercase})"

    # -- vocabulary ------------------------------------------------------------------
    @property
    def vocab(self) -> dict[str, int]:
        """A copy of the token -> id mapping."""
        return dict(self._vocab)

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    def __len__(self) -> int:
        return len(self._vocab)

    @property
    def special_tokens(self) -> tuple[str, ...]:
        return self._opts.special_tokens

    def token_to_id(self, token: str) -> int | None:
        """Id of ``token``, or None if it is not in the vocabulary (as HF)."""
        _check_text(token, "token")
        return self._vocab.get(token)

    def id_to_token(self, idx: int) -> str:
        """Token of ``idx``; KeyError naming the id if there is none."""
        try:
            return self._id_to_token[idx]
        except (KeyError, TypeError):
            raise KeyError(f"token id {idx!r} is not in the vocabulary (size {len(self)})") from None

    # -- encoding --------------------------------------------------------------------
    def tokenize(self, text: str) -> list[str]:
        """Token strings of ``text`` without [CLS]/[SEP]."""
        return _ref.tokenize(_check_text(text), self._vocab, self._opts)

    def _special_id(self, token: str) -> int:
        idx = self._vocab.get(token)
        if idx is None:
            raise ValueError(f"add_special_tokens=True needs {token!r} in the vocabulary")
        return idx

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        """Ids of ``text``; ``[CLS] ... [SEP]`` around them unless ``add_special_tokens=False``."""
        ids = [self._vocab[t] for t in self.tokenize(text)]
        if add_special_tokens:
            ids = [self._special_id("[CLS]")] + ids + [self._special_id("[SEP]")]
        return ids

    def encode_pair(self, a: str, b: str, *, add_special_tokens: bool = True, return_type_ids: bool = False):
        """Ids of ``[CLS] a [SEP] b [SEP]``; with ``return_type_ids=True``, (ids, type_ids)."""
        ids_a = self.encode(_check_text(a, "first text"), add_special_tokens=add_special_tokens)
        ids_b = self.encode(_check_text(b, "second text"), add_special_tokens=False)
        if add_special_tokens:
            ids_b.append(self._special_id("[SEP]"))
        ids = ids_a + ids_b
        if return_type_ids:
            return ids, [0] * len(ids_a) + [1] * len(ids_b)
        return ids

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        """Text of ``ids`` joined as HF's WordPiece decoder does (``##`` glued, cleanup on)."""
        tokens = [self.id_to_token(i) for i in ids]
        if skip_special_tokens:
            specials = set(self._opts.special_tokens)
            tokens = [t for t in tokens if t not in specials]
        return _ref.decode_tokens(tokens, self._opts.prefix)

    # -- files -----------------------------------------------------------------------
    @classmethod
    def from_file(cls, path: str | os.PathLike, **options) -> "WordPiece":
        """Load a BERT ``vocab.txt`` or an HF ``tokenizer.json`` (detected from the content).

        For vocab.txt, ``options`` are the constructor's keyword arguments (defaults are
        BERT uncased); for tokenizer.json they override what the file says.
        """
        from .formats.hf_wordpiece import read_hf_wordpiece
        from .formats.vocab_txt import read_vocab_txt

        path = Path(path)
        with open(path, "rb") as fh:
            head = fh.read(64).lstrip()
        if head.startswith(b"{"):
            kwargs = read_hf_wordpiece(path)
            kwargs.update(options)
            vocab = kwargs.pop("vocab")
        else:
            vocab = read_vocab_txt(path)
            kwargs = options
        try:
            return cls(vocab, **kwargs)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    def save(self, path: str | os.PathLike, format: str | None = None) -> Path:
        """Save atomically as ``vocab.txt`` (``.txt``) or ``tokenizer.json`` (``.json``).

        vocab.txt holds only the tokens; tokenizer.json also keeps the options.
        """
        from .formats.hf_wordpiece import write_hf_wordpiece
        from .formats.vocab_txt import write_vocab_txt

        path = Path(path)
        if format is None:
            suffix = path.suffix.lower()
            format = {".txt": "vocab.txt", ".json": "tokenizer.json"}.get(suffix)
            if format is None:
                raise ValueError(f"cannot tell the format of {path} from its extension; pass format='vocab.txt' or 'tokenizer.json'")
        if format in ("vocab.txt", "txt"):
            return write_vocab_txt(path, self._vocab)
        if format in ("tokenizer.json", "json", "hf"):
            return write_hf_wordpiece(path, self._vocab, **self._options())
        raise ValueError(f"unknown WordPiece format {format!r}; use 'vocab.txt' or 'tokenizer.json'")


def train_wordpiece(
    data,
    vocab_size: int,
    *,
    lowercase: bool = True,
    strip_accents: bool | None = None,
    min_frequency: int = 0,
    limit_alphabet: int | None = None,
    special_tokens=DEFAULT_SPECIAL_TOKENS,
    progress: bool = False,
) -> WordPiece:
    """Train a likelihood WordPiece vocabulary on ``data`` (a path, list of paths, or iterable of str).

    Scores are count(AB)/(count(A)count(B)), compared exactly; see
    ``fastbpe.reference.wordpiece`` for the tie-break and every other rule.
    """
    from ._data import iter_texts

    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive int, not {vocab_size!r}")
    if not isinstance(min_frequency, int) or min_frequency < 0:
        raise ValueError(f"min_frequency must be an int >= 0, not {min_frequency!r}")
    if limit_alphabet is not None and (not isinstance(limit_alphabet, int) or limit_alphabet < 0):
        raise ValueError(f"limit_alphabet must be None or an int >= 0, not {limit_alphabet!r}")
    special_tokens = tuple(special_tokens)
    if "[UNK]" not in special_tokens:
        raise ValueError("special_tokens must include '[UNK]'")
    for t in special_tokens:
        _check_text(t, "special token")
    texts = iter_texts(data)
    if progress:
        from tqdm.auto import tqdm

        texts = tqdm(texts, desc="reading", unit="doc")
    opts = _ref.BertOptions(lowercase=lowercase, strip_accents=strip_accents, special_tokens=special_tokens)
    vocab = _ref.train(
        texts, vocab_size, opts, min_frequency=min_frequency, limit_alphabet=limit_alphabet,
        special_tokens=special_tokens,
    )
    return WordPiece(vocab, lowercase=lowercase, strip_accents=strip_accents, special_tokens=special_tokens)
