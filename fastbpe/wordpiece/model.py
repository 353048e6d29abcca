"""``WordPiece``: BERT-style tokenizer with the same outputs as HF ``tokenizers``.

The rules (normalisation, pre-tokenisation, greedy longest match, training) are written down
in ``fastbpe.reference.wordpiece``; the native core ``fastbpe._wordpiece`` implements them
(linear-time LinMaxMatch, batch encoding on threads without the GIL). This class validates
inputs, owns the vocabulary and the options, and loads/saves ``vocab.txt`` and
``tokenizer.json``.

>>> wp = WordPiece({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "un": 3, "##fair": 4})
>>> wp.tokenize("Unfair")
['un', '##fair']
>>> wp.encode("unfair")
[1, 3, 4, 2]
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .._wordpiece import WordPieceCore as _WordPieceCore
from ..checks import MAX_THREADS as _MAX_THREADS, check_int, check_num_threads as _check_num_threads
from ..reference import wordpiece as _ref
from ..special import check_no_disallowed, resolve_special_sets

DEFAULT_SPECIAL_TOKENS = _ref.SPECIAL_TOKENS

# The native core's handling of special-token text (see WordPieceCore.encode_ids).
_MODE_ORDINARY, _MODE_SPLIT, _MODE_CHECK = 0, 1, 2
# tiktoken's defaults, as objects the hot path recognises by identity
_NO_SPECIALS: frozenset = frozenset()
_ALL = "all"


def _usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _post_processor(value, vocab):
    """A constructor's ``post_processor`` argument as a PostProcessor, or None when the
    default ``"bert"`` finds no [CLS]/[SEP] (asking for special tokens then fails)."""
    if isinstance(value, str) and value == _ref.BERT:
        return _ref.default_post_processor(vocab)
    if value is None:
        return _ref.PostProcessor.none()
    if isinstance(value, _ref.PostProcessor):
        return value
    if isinstance(value, dict):
        return _ref.PostProcessor.from_hf(value)
    raise TypeError(f"post_processor must be 'bert', None, a PostProcessor or a tokenizer.json object, not {value!r}")


def _section(value, cls, what: str):
    """A ``truncation`` / ``padding`` argument: None, a ``cls``, or its tokenizer.json object."""
    if value is None or isinstance(value, cls):
        return value
    if isinstance(value, dict):
        return cls.from_hf(value)
    raise TypeError(f"{what} must be None, a {cls.__name__} or a tokenizer.json object, not {value!r}")


def _check_text(text, what: str = "text") -> str:
    if not isinstance(text, str):
        raise TypeError(f"{what} must be str, not {type(text).__name__}")
    return text


class WordPiece:
    """A WordPiece tokenizer over ``vocab`` (token -> id) with BERT's pipeline.

    ``strip_accents=None`` follows ``lowercase`` (as HF). ``special_tokens`` are the
    tokens whose text may stand for their id in raw text (see ``encode``) and that
    ``decode`` skips; by default, those of ``[PAD] [UNK] [CLS] [SEP] [MASK]`` that are in
    the vocabulary.

    Around the ids, as HF's ``Tokenizer`` (rules in ``fastbpe.reference.wordpiece``):
    ``post_processor`` says what ``add_special_tokens=True`` adds (``"bert"``: ``[CLS] ...
    [SEP]`` when both are in the vocabulary; None: nothing, like a tokenizer.json with
    ``post_processor: null``; or a ``reference.wordpiece.PostProcessor`` or the
    tokenizer.json object); ``truncation`` and ``padding`` (None, or a
    ``Truncation`` / ``Padding`` or the tokenizer.json object) apply to every encode call.
    ``from_file`` takes all three from the file.

    Checks happen here, once; the encode calls hand the text to one native call.
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
        turkish_lowercase: bool = False,
        post_processor="bert",
        truncation=None,
        padding=None,
    ):
        if not isinstance(vocab, dict):
            raise TypeError(f"vocab must be a dict of token -> id, not {type(vocab).__name__}")
        seen: dict[int, str] = {}
        for token, idx in vocab.items():
            if not isinstance(token, str) or not isinstance(idx, int) or isinstance(idx, bool):
                raise TypeError(f"vocab must map str to int; got {token!r}: {idx!r}")
            if idx < 0 or idx >= 2**31:
                raise ValueError(f"vocab id {idx} of {token!r} is out of range (0 <= id < 2**31)")
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
            turkish_lowercase=bool(turkish_lowercase),
        )
        self._special_set = frozenset(t for t in special_tokens if t)
        strip = lowercase if strip_accents is None else strip_accents
        self._core = _WordPieceCore(
            self._vocab, unk_token=unk_token, prefix=continuing_subword_prefix,
            max_chars=max_input_chars_per_word, lowercase=bool(lowercase), strip_accents=bool(strip),
            clean_text=bool(clean_text), cjk=bool(tokenize_chinese_chars), turkish=bool(turkish_lowercase),
            specials=[(t, self._vocab[t]) for t in self._special_set],
        )
        self._post = _post_processor(post_processor, self._vocab)
        self._truncation = _section(truncation, _ref.Truncation, "truncation")
        self._padding = _section(padding, _ref.Padding, "padding")
        self._configure_core()

    def _configure_core(self) -> None:
        """Hand the post-processor, truncation and padding to the native core, checked."""
        post, trunc, pad = self._post, self._truncation, self._padding
        prefix, suffix = post.wrap() if post is not None else ([], [])
        for i in prefix + suffix + ([pad.pad_id] if pad is not None else []):
            if not 0 <= i < 2**31:
                raise ValueError(f"id {i} of the post-processor or padding is out of range (0 <= id < 2**31)")
        budget_special = budget_plain = -1
        if trunc is not None:
            n_added = post.added_tokens(False) if post is not None else 0
            budget_special = trunc.budget(n_added)
            budget_plain = trunc.budget(0)
            if trunc.stride > budget_special:   # HF's enable_truncation check
                raise ValueError(f"truncation stride={trunc.stride} is more than max_length={trunc.max_length} "
                                 f"minus the {n_added} special tokens")
        self._core.configure(
            prefix, suffix, budget_special, budget_plain,
            trunc_left=trunc is not None and trunc.direction == "left",
            trunc_only_second=trunc is not None and trunc.strategy == "only_second",
            pad_mode=-1 if pad is None else (0 if pad.length is None else 1),
            pad_length=0 if pad is None or pad.length is None else pad.length,
            pad_multiple=(pad.pad_to_multiple_of or 0) if pad is not None else 0,
            pad_left=pad is not None and pad.direction == "left",
            pad_id=pad.pad_id if pad is not None else 0,
        )

    # -- options ---------------------------------------------------------------------
    def _options(self) -> dict:
        o = self._opts
        return dict(
            lowercase=o.lowercase, strip_accents=o.strip_accents, clean_text=o.clean_text,
            tokenize_chinese_chars=o.tokenize_chinese_chars, unk_token=o.unk_token,
            max_input_chars_per_word=o.max_input_chars_per_word,
            continuing_subword_prefix=o.prefix, special_tokens=o.special_tokens,
            turkish_lowercase=o.turkish_lowercase,
            post_processor=self._post.to_hf() if self._post is not None else None,
            truncation=self._truncation.to_hf() if self._truncation is not None else None,
            padding=self._padding.to_hf() if self._padding is not None else None,
        )

    def __repr__(self) -> str:
        return f"WordPiece(vocab_size={len(self)}, lowercase={self._opts.lowercase})"

    # -- pickling: the vocabulary and the options; the native core is rebuilt ----------
    def __getstate__(self) -> dict:
        return {"vocab": self._vocab, **self._options()}

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        self.__init__(state.pop("vocab"), **state)

    @property
    def post_processor(self):
        """The ``reference.wordpiece.PostProcessor`` (None: the vocabulary has no [CLS]/[SEP])."""
        return self._post

    @property
    def truncation(self):
        return self._truncation

    @property
    def padding(self):
        return self._padding

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

    @property
    def special_tokens_set(self) -> set[str]:
        return set(self._special_set)

    @property
    def unk_token(self) -> str:
        return self._opts.unk_token

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

    # -- the special-token rule ------------------------------------------------------------
    def _special_mode(self, allowed_special, disallowed_special):
        """``(mode, allowed, disallowed)``: the native mode for the three common cases
        (ordinary text, HF's behaviour, the default check), else None (then the caller
        checks and splits in Python). ``fastbpe.special`` holds the rule."""
        allowed, disallowed = resolve_special_sets(allowed_special, disallowed_special, self._special_set)
        if not disallowed:
            if not allowed:
                return _MODE_ORDINARY, allowed, disallowed
            if allowed == self._special_set:
                return _MODE_SPLIT, allowed, disallowed
        elif not allowed and disallowed == self._special_set:
            return _MODE_CHECK, allowed, disallowed
        return None, allowed, disallowed

    def _raw(self, text: str, offsets: bool, allowed_special, disallowed_special):
        """Ids (with ``offsets``: ids, starts, ends) of ``text`` alone: no post-processor,
        truncation or padding."""
        _check_text(text)
        mode, allowed, disallowed = self._special_mode(allowed_special, disallowed_special)
        if mode is not None:
            return self._core.encode(text, offsets, 0, mode)
        check_no_disallowed(text, disallowed)
        ids, starts, ends = [], [], []
        pos = 0
        for seg, is_special in _ref.split_special_tokens(text, allowed):
            if is_special:
                ids.append(self._vocab[seg])
                starts.append(pos)
                ends.append(pos + len(seg))
            else:
                i, s, e = self._core.encode(seg, True, pos)
                ids += i
                starts += s
                ends += e
            pos += len(seg)
        return (ids, starts, ends) if offsets else ids

    # -- encoding ---------------------------------------------------------------------
    def encode_ordinary(self, text: str) -> list[int]:
        """Ids of the text alone, special-token text as ordinary text (tiktoken's
        ``encode_ordinary``): no post-processor, truncation or padding. What shards,
        ``count`` and ``stats`` encode documents with.

        >>> wp = WordPiece({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "[": 3, "]": 4, "sep": 5, "x": 6})
        >>> wp.encode_ordinary("x[SEP]x")
        [6, 3, 5, 4, 6]
        """
        _check_text(text)
        return self._core.encode(text)

    def encode_ordinary_batch(self, texts, *, num_threads: int | None = None) -> list[list[int]]:
        """``encode_ordinary`` of many texts, on native threads (``num_threads`` as in ``encode_batch``)."""
        ids, _, _, splits = self._core.encode_batch(self._check_batch(texts), self._threads(num_threads),
                                                    False, _MODE_ORDINARY)
        flat = ids.tolist()
        return [flat[a:b] for a, b in zip(splits[:-1].tolist(), splits[1:].tolist())]

    def encode_text(self, text: str, *, allowed_special=frozenset(), disallowed_special="all") -> list[int]:
        """Ids of ``text`` alone (no post-processor, truncation or padding) under
        ``encode``'s special-token rule: what a document contributes to shards and counts.

        >>> wp = WordPiece({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "[": 3, "]": 4, "sep": 5, "x": 6})
        >>> wp.encode_text("x[SEP]x", allowed_special="all")
        [6, 2, 6]
        """
        return self._raw(text, False, allowed_special, disallowed_special)

    def tokenize(self, text: str, *, allowed_special=frozenset(), disallowed_special="all") -> list[str]:
        """Token strings of ``text`` without [CLS]/[SEP] (the special-token rule of ``encode``)."""
        return [self._id_to_token[i] for i in self._raw(text, False, allowed_special, disallowed_special)]

    def _need_post(self, add_special_tokens: bool):
        """The post-processor to apply (ValueError when special tokens are asked for and
        the vocabulary has none)."""
        if self._post is None:
            if add_special_tokens:
                raise ValueError("add_special_tokens=True needs '[CLS]' and '[SEP]' in the vocabulary "
                                 "(or pass post_processor=None)")
            return _ref.PostProcessor.none()
        return self._post

    @staticmethod
    def _budget(max_length, n_special: int):
        if max_length is None:
            return None
        max_length = check_int("max_length", max_length)
        if max_length < n_special:
            raise ValueError(f"max_length={max_length} leaves no room for the {n_special} special tokens")
        return max_length - n_special

    def _native_budget(self, max_length, add_special_tokens: bool) -> int:
        """The core's budget argument: -2 (as configured) or what ``max_length`` leaves."""
        if max_length is None:
            return -2
        n_added = self._post.added_tokens(False) if (add_special_tokens and self._post is not None) else 0
        return self._budget(max_length, n_added)

    def encode(self, text: str, *, add_special_tokens: bool = True, max_length: int | None = None,
               allowed_special=_NO_SPECIALS, disallowed_special=_ALL) -> list[int]:
        """Ids of ``text`` as HF's ``Tokenizer.encode(text).ids``: the post-processor's
        special tokens around them (``[CLS] ... [SEP]``) unless ``add_special_tokens=False``,
        then the tokenizer's truncation and padding.

        ``max_length`` truncates to at most that many ids, special tokens included
        (instead of the truncation's ``max_length``). Special-token text in ``text``
        follows tiktoken's rule (``fastbpe.special``; the decision is written down in
        ``fastbpe.reference.wordpiece``): by default it raises ValueError;
        ``allowed_special="all"`` is HF's behaviour (``"[SEP]"`` becomes the separator's
        id); ``disallowed_special=()`` encodes it as ordinary text.

        >>> wp = WordPiece({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "[": 3, "]": 4, "sep": 5, "x": 6})
        >>> wp.encode("x[SEP]x", allowed_special="all")
        [1, 6, 2, 6, 2]
        >>> wp.encode("x[SEP]x", disallowed_special=())
        [1, 6, 3, 5, 4, 6, 2]
        """
        # the common call in one native call: the defaults, nothing to resolve
        if allowed_special is _NO_SPECIALS and disallowed_special is _ALL and max_length is None \
                and self._post is not None:
            return self._core.encode_ids(text, _MODE_CHECK, add_special_tokens)
        _check_text(text)
        self._need_post(add_special_tokens)
        budget = self._native_budget(max_length, add_special_tokens)
        mode, allowed, disallowed = self._special_mode(allowed_special, disallowed_special)
        if mode is not None:
            return self._core.encode_ids(text, mode, add_special_tokens, budget)
        return self.encode_plus(text, add_special_tokens=add_special_tokens, max_length=max_length,
                                allowed_special=allowed, disallowed_special=disallowed)["input_ids"]

    def _truncation_for(self, max_length):
        """The truncation of one call: the tokenizer's, with ``max_length`` if given."""
        if max_length is None:
            return self._truncation
        max_length = check_int("max_length", max_length)
        t = self._truncation
        if t is None:
            return _ref.Truncation(max_length)
        return _ref.Truncation(max_length, t.strategy, 0, t.direction)

    def encode_pair(self, a: str, b: str, *, add_special_tokens: bool = True, return_type_ids: bool = False,
                    max_length: int | None = None, allowed_special=_NO_SPECIALS, disallowed_special=_ALL):
        """Ids of ``[CLS] a [SEP] b [SEP]`` (the post-processor's pair template); with
        ``return_type_ids=True``, (ids, type_ids)."""
        enc = self.encode_plus(a, b, add_special_tokens=add_special_tokens, max_length=max_length,
                               allowed_special=allowed_special, disallowed_special=disallowed_special)
        if return_type_ids:
            return enc["input_ids"], enc["token_type_ids"]
        return enc["input_ids"]

    def encode_plus(self, text: str, pair: str | None = None, *, add_special_tokens: bool = True,
                    max_length: int | None = None, padding: bool | str | None = None,
                    allowed_special=_NO_SPECIALS, disallowed_special=_ALL) -> dict:
        """Everything HF's ``Encoding`` gives, as lists: ``input_ids``, ``token_type_ids``,
        ``attention_mask``, ``special_tokens_mask``, ``offsets`` ((start, end) character
        offsets into the text each token came from; (0, 0) for added and padding tokens)
        and ``tokens``.

        Truncation, post-processor and padding as ``encode`` (the rules are in
        ``reference.wordpiece.encode_full``); ``max_length`` replaces the truncation's
        length; ``padding=True`` or ``"max_length"`` pads to ``max_length`` instead of the
        tokenizer's padding, ``padding=False`` not at all.
        """
        _check_text(text, "text")
        if pair is not None:
            _check_text(pair, "pair")
        post = self._need_post(add_special_tokens)
        trunc = self._truncation_for(max_length)
        pad = self._padding_for(padding, max_length)
        a = self._raw(text, True, allowed_special, disallowed_special)
        b = self._raw(pair, True, allowed_special, disallowed_special) if pair is not None else None
        offs_a = list(zip(a[1], a[2]))
        offs_b = list(zip(b[1], b[2])) if b is not None else None
        ids_a, ids_b = a[0], (b[0] if b is not None else None)
        if trunc is not None:
            n_added = post.added_tokens(pair is not None) if add_special_tokens else 0
            if max_length is not None:
                self._budget(max_length, n_added)   # the error names max_length
            keep_a, keep_b = trunc.lengths(len(ids_a), None if ids_b is None else len(ids_b), n_added)
            ids_a, offs_a = trunc.cut(ids_a, keep_a), trunc.cut(offs_a, keep_a)
            if ids_b is not None:
                ids_b, offs_b = trunc.cut(ids_b, keep_b), trunc.cut(offs_b, keep_b)
        ids, types, special = post.apply(ids_a, ids_b, add_special_tokens)
        # offsets: the sequences' own, in the template's order; (0, 0) for added tokens
        marked, _, _ = post.apply([-1] * len(ids_a), None if ids_b is None else [-2] * len(ids_b), add_special_tokens)
        it_a, it_b = iter(offs_a), iter(offs_b or ())
        offsets = [next(it_a) if m == -1 else next(it_b) if m == -2 else (0, 0) for m in marked]
        mask = [1] * len(ids)
        if pad is not None:
            target = pad.target([len(ids)])
            n = len(ids)
            ids, mask = pad.pad(ids, target)
            types, _ = pad.pad(types, target, pad.pad_type_id)
            special, _ = pad.pad(special, target, 1)
            offsets, _ = pad.pad(offsets, target, (0, 0)) if target > n else (offsets, None)
        return {
            "input_ids": ids,
            "token_type_ids": types,
            "attention_mask": mask,
            "special_tokens_mask": special,
            "offsets": offsets,
            "tokens": [self._id_to_token.get(i, pad.pad_token if pad else "") for i in ids],
        }

    def _padding_for(self, padding, max_length):
        """The padding of one ``encode_plus`` call (see there)."""
        if padding is None:
            return self._padding
        if padding is False:
            return None
        if padding is True or padding == "max_length":
            if max_length is None:
                raise ValueError("padding=True / 'max_length' needs max_length")
            base = self._padding
            if base is not None:
                return _ref.Padding(max_length, base.direction, base.pad_id, base.pad_type_id, base.pad_token)
            return _ref.Padding(max_length, pad_id=self._special_id("[PAD]"))
        raise ValueError(f"padding must be None, False, True or 'max_length', not {padding!r}")

    def _special_id(self, token: str) -> int:
        idx = self._vocab.get(token)
        if idx is None:
            raise ValueError(f"this needs {token!r} in the vocabulary")
        return idx

    def encode_batch(self, texts, *, add_special_tokens: bool = True, max_length: int | None = None,
                     num_threads: int | None = None, allowed_special=_NO_SPECIALS,
                     disallowed_special=_ALL) -> list[list[int]]:
        """``encode`` for many texts, as HF's ``encode_batch(...)`` ids (padding, if the
        tokenizer pads, to the longest row of the batch).

        ``num_threads`` is an upper bound (default: the CPUs this process may use), with
        ``fastbpe.Encoding``'s rule: about one thread per 16,384 characters of text and no
        more than the usable CPUs, since a thread costs more to start than a few short
        texts take to encode."""
        texts = self._check_batch(texts)
        num_threads = self._threads(num_threads)
        self._need_post(add_special_tokens)
        budget = self._native_budget(max_length, add_special_tokens)
        mode, allowed, disallowed = self._special_mode(allowed_special, disallowed_special)
        if mode is not None:
            return self._core.encode_batch_ids(texts, num_threads, mode, add_special_tokens, budget)
        for i, t in enumerate(texts):
            check_no_disallowed(t, disallowed, i)
        rows = [self.encode_plus(t, add_special_tokens=add_special_tokens, max_length=max_length, padding=False,
                                 allowed_special=allowed, disallowed_special=())["input_ids"] for t in texts]
        return _ref.pad_batch(rows, self._padding)

    def encode_batch_arrays(self, texts, *, add_special_tokens: bool = True, max_length: int | None = None,
                            padding: bool | str = True, num_threads: int | None = None,
                            allowed_special=_NO_SPECIALS, disallowed_special=_ALL) -> dict:
        """Encode many texts into numpy arrays, padded to one length.

        Returns ``input_ids`` (int32, [batch, length]), ``attention_mask`` (int8),
        ``offsets`` (int64, [batch, length, 2]; (0, 0) for special and padding positions)
        and ``lengths`` (int64, tokens per row before padding). ``length`` is ``max_length``
        with ``padding="max_length"``, else the longest row (truncated to ``max_length``).
        Padding is always on the right with the tokenizer's pad id (or ``[PAD]``).
        """
        ids, starts, ends, splits = self._raw_batch(texts, num_threads, allowed_special, disallowed_special)
        post = self._need_post(add_special_tokens)
        prefix, suffix = post.wrap(add_special_tokens)
        trunc = self._truncation_for(max_length)
        n_extra = len(prefix) + len(suffix)
        if max_length is not None:
            self._budget(max_length, n_extra)
        counts = np.diff(splits)
        keep = counts
        if trunc is not None:
            keep = np.minimum(counts, trunc.budget(n_extra))
        lengths = keep + n_extra
        if padding == "max_length":
            if max_length is None:
                raise ValueError("padding='max_length' needs max_length")
            width = max_length
        else:
            width = int(lengths.max()) if len(lengths) else 0
        batch = len(counts)
        pad = 0
        if (lengths < width).any():
            pad = self._padding.pad_id if self._padding is not None else self._special_id("[PAD]")
        out_ids = np.full((batch, width), pad, dtype=np.int32)
        mask = np.zeros((batch, width), dtype=np.int8)
        offs = np.zeros((batch, width, 2), dtype=np.int64)
        first = len(prefix)
        left = trunc is not None and trunc.direction == "left"
        for t in range(batch):
            n, k = int(counts[t]), int(keep[t])
            s0 = int(splits[t]) + (n - k if left else 0)
            out_ids[t, :first] = prefix
            out_ids[t, first:first + k] = ids[s0:s0 + k]
            out_ids[t, first + k:first + k + len(suffix)] = suffix
            offs[t, first:first + k, 0] = starts[s0:s0 + k]
            offs[t, first:first + k, 1] = ends[s0:s0 + k]
            mask[t, : k + n_extra] = 1
        return {"input_ids": out_ids, "attention_mask": mask, "offsets": offs, "lengths": lengths.astype(np.int64)}

    def _raw_batch(self, texts, num_threads, allowed_special, disallowed_special):
        """Native batch encode of the texts alone: (ids, starts, ends, row_splits) arrays."""
        texts = self._check_batch(texts)
        num_threads = self._threads(num_threads)
        mode, allowed, disallowed = self._special_mode(allowed_special, disallowed_special)
        if mode is not None:
            return self._core.encode_batch(texts, num_threads, True, mode)
        for i, t in enumerate(texts):
            check_no_disallowed(t, disallowed, i)
        rows = [self._raw(t, True, allowed, ()) for t in texts]
        splits = np.zeros(len(rows) + 1, dtype=np.int64)
        splits[1:] = np.cumsum([len(r[0]) for r in rows])
        ids = np.array([i for r in rows for i in r[0]], dtype=np.int32)
        starts = np.array([i for r in rows for i in r[1]], dtype=np.int64)
        ends = np.array([i for r in rows for i in r[2]], dtype=np.int64)
        return ids, starts, ends, splits

    @staticmethod
    def _check_batch(texts) -> list:
        if isinstance(texts, (str, bytes)):
            raise TypeError(f"a batch is a list of str, not one {type(texts).__name__}")
        return list(texts)   # the core checks the items (TypeError naming texts[i])

    @staticmethod
    def _threads(num_threads) -> int:
        if num_threads is None:
            return min(_usable_cpus(), _MAX_THREADS)
        return _check_num_threads(num_threads)

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
        from ..formats.hf_wordpiece import read_hf_wordpiece
        from ..formats.vocab_txt import read_vocab_txt

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

    def save(self, path: str | os.PathLike, format: str | None = None, *, transformers: bool = False) -> Path:
        """Save atomically as ``vocab.txt`` (``.txt``) or ``tokenizer.json`` (``.json``).

        vocab.txt holds only the tokens; tokenizer.json also keeps the options. A folder
        (or ``transformers=True``) gets tokenizer.json plus the config files
        ``transformers.AutoTokenizer.from_pretrained`` reads (``fastbpe.formats.transformers_files``).
        """
        from ..formats.hf_wordpiece import write_hf_wordpiece
        from ..formats.vocab_txt import write_vocab_txt

        path = Path(path)
        if transformers or (format in (None, "tokenizer.json", "json", "hf") and path.is_dir()):
            from ..formats.transformers_files import TOKENIZER_JSON, transformers_folder, write_transformers_config

            if format not in (None, "tokenizer.json", "json", "hf"):
                raise ValueError(f"transformers=True saves a tokenizer.json, not format={format!r}")
            folder = transformers_folder(path)
            write_hf_wordpiece(folder / TOKENIZER_JSON, self._vocab, **self._options())
            specials = {t: self._vocab[t] for t in self.special_tokens if t in self._vocab}
            write_transformers_config(folder, specials, "wordpiece")
            return folder / TOKENIZER_JSON
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
