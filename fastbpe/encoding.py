"""``fastbpe.Encoding``: tiktoken's ``Encoding``, same constructor, methods and errors.

Code written for tiktoken works by changing the import. This class holds the policy
(argument checks, special-token rules, batching, error messages) and delegates the
algorithm to a core: the native ``fastbpe._encode.CoreBPE`` when it is built, else the
pure-Python ``fastbpe.reference.core.CoreBPE`` (same interface, same ids). Both cores
give lone surrogates tiktoken's treatment (see ``reference.core.fix_surrogates``).
"""
from __future__ import annotations

import functools
import os
from collections.abc import Collection, Iterable, Sequence
from typing import AbstractSet, Literal

import numpy as np
import regex

from .reference.core import CoreBPE as ReferenceCoreBPE
from .reference.core import DisallowedSpecial
from .special import check_no_disallowed, resolve_special_sets

try:  # the native core lands with the encoder issue; until then the reference serves
    from ._encode import CoreBPE as NativeCoreBPE
except ImportError:  # pragma: no cover
    NativeCoreBPE = None

_MAX_THREADS = 1024


def _check_num_threads(num_threads) -> int:
    if isinstance(num_threads, bool) or not isinstance(num_threads, (int, np.integer)):
        raise TypeError(f"num_threads must be an int, not {type(num_threads).__name__}")
    if not 1 <= num_threads <= _MAX_THREADS:
        raise ValueError(f"num_threads must be between 1 and {_MAX_THREADS}, got {num_threads}")
    return int(num_threads)


def _check_text(text, what: str = "text") -> None:
    if not isinstance(text, str):
        hint = " (decode bytes to str first)" if isinstance(text, (bytes, bytearray)) else ""
        raise TypeError(f"{what} must be a str, not {type(text).__name__}{hint}")


class Encoding:
    """A byte-level BPE encoding: mergeable ranks, a split pattern and special tokens.

    >>> import fastbpe
    >>> enc = fastbpe.Encoding("toy", pat_str=r"\\S+|\\s+",
    ...     mergeable_ranks={bytes([i]): i for i in range(256)} | {b"hi": 256},
    ...     special_tokens={"<|eot|>": 257})
    >>> enc.encode("hi<|eot|>", allowed_special="all")
    [256, 257]

    ``added_tokens`` (not in tiktoken) are HF's non-special added tokens (``"special":
    false`` in a tokenizer.json, e.g. ``<|im_start|>`` added with ``add_tokens``). They
    are ordinary vocabulary, not control tokens: their text is always matched, by every
    ``encode*`` method including ``encode_ordinary``, without ``allowed_special`` and
    never refused by ``disallowed_special``; ``special_tokens`` and
    ``is_special_token`` leave them out. They are split out of the text before the
    pattern, as HF does, together with the allowed special tokens (leftmost, then
    longest, match first).

    >>> chat = fastbpe.Encoding("chat", pat_str=r"\\S+|\\s+",
    ...     mergeable_ranks={bytes([i]): i for i in range(256)}, special_tokens={},
    ...     added_tokens={"<|im|>": 256})
    >>> chat.encode_ordinary("a<|im|>b"), chat.is_special_token(256)
    ([97, 256, 98], False)
    """

    def __init__(
        self,
        name: str,
        *,
        pat_str: str,
        mergeable_ranks: dict[bytes, int],
        special_tokens: dict[str, int],
        explicit_n_vocab: int | None = None,
        added_tokens: dict[str, int] | None = None,
    ):
        # 1. validate once, with messages that name what is wrong
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        if not isinstance(pat_str, str):
            raise TypeError(f"pat_str must be a str, not {type(pat_str).__name__}")
        try:
            regex.compile(pat_str)
        except regex.error as exc:
            raise ValueError(f"invalid pat_str {pat_str!r}: {exc}") from None
        if not isinstance(mergeable_ranks, dict):
            raise TypeError(f"mergeable_ranks must be a dict of bytes -> int, not {type(mergeable_ranks).__name__}")
        if not isinstance(special_tokens, dict):
            raise TypeError(f"special_tokens must be a dict of str -> int, not {type(special_tokens).__name__}")
        seen: dict[int, object] = {}
        for tok, rank in mergeable_ranks.items():
            if not isinstance(tok, bytes):
                raise TypeError(f"mergeable_ranks keys must be bytes, got {tok!r}")
            if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 0:
                raise ValueError(f"rank of {tok!r} must be a non-negative int, got {rank!r}")
            if rank in seen:
                raise ValueError(f"rank {rank} is used twice: {seen[rank]!r} and {tok!r}")
            seen[rank] = tok
        for tok, rank in special_tokens.items():
            if not isinstance(tok, str):
                raise TypeError(f"special_tokens keys must be str, got {tok!r}")
            if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 0:
                raise ValueError(f"id of special token {tok!r} must be a non-negative int, got {rank!r}")
            if rank in seen:
                raise ValueError(f"special token {tok!r} has id {rank}, already used by {seen[rank]!r}")
            seen[rank] = tok
        added_tokens = _check_added_tokens(added_tokens, special_tokens, seen)
        missing = [b for b in range(256) if bytes([b]) not in mergeable_ranks]
        if missing:
            raise ValueError(
                f"mergeable_ranks lacks {len(missing)} single-byte tokens (e.g. byte {missing[0]}); "
                "byte-level BPE needs all 256 so that any text can be encoded"
            )
        self.name = name
        self._pat_str = pat_str
        self._mergeable_ranks = {bytes(k): int(v) for k, v in mergeable_ranks.items()}
        self._special_tokens = {k: int(v) for k, v in special_tokens.items()}
        self._all_specials = frozenset(self._special_tokens)   # the default disallowed set
        self._added_tokens = added_tokens
        self._added_names = frozenset(added_tokens)
        self.max_token_value = max(seen)
        if explicit_n_vocab is not None:
            if len(seen) != explicit_n_vocab:
                raise ValueError(f"explicit_n_vocab={explicit_n_vocab} but there are {len(seen)} tokens")
            if self.max_token_value != explicit_n_vocab - 1:
                raise ValueError(f"explicit_n_vocab={explicit_n_vocab} but the largest id is {self.max_token_value}")
        # 2. build the core once
        # added tokens are matched in text by the core's special-token split, always allowed
        self._core_bpe = _make_core(self._mergeable_ranks, {**self._special_tokens, **added_tokens}, pat_str)

    def __repr__(self) -> str:
        return f"<Encoding {self.name!r}>"

    # ----------------------------------------------------------------------- encoding
    def encode_ordinary(self, text: str) -> list[int]:
        """Encode text, treating special-token text as ordinary text.

        >>> enc = get_toy_encoding(); enc.encode_ordinary("hi")
        [256]
        """
        _check_text(text)
        if self._added_names:
            return self._core_bpe.encode(text, self._added_names, frozenset())
        return self._core_bpe.encode_ordinary(text)

    def encode(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> list[int]:
        """Encode text, with tiktoken's rules for special tokens.

        By default any special-token text raises ValueError (a user's text must not be
        able to smuggle in a control token). ``allowed_special`` (a set, or ``"all"``)
        lists those that become their ids; ``disallowed_special=()`` encodes the others
        as ordinary text.
        """
        _check_text(text)
        allowed, disallowed = self._special_sets(allowed_special, disallowed_special)
        try:
            return self._core_bpe.encode(text, allowed, disallowed)
        except DisallowedSpecial:
            pass
        self._raise_disallowed(text, disallowed)   # outside the except: no chained error

    def encode_to_numpy(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
        dtype=np.uint32,
    ) -> np.ndarray:
        """Like ``encode``, as a numpy array (uint32, or uint16 when every id fits)."""
        _check_text(text)
        dtype = self._check_dtype(dtype)
        allowed, disallowed = self._special_sets(allowed_special, disallowed_special)
        try:
            return self._core_bpe.encode_to_numpy(text, allowed, dtype, disallowed)
        except DisallowedSpecial:
            pass
        self._raise_disallowed(text, disallowed)   # outside the except: no chained error

    def encode_ordinary_batch(self, text: Sequence[str], *, num_threads: int = 8) -> list[list[int]]:
        """Encode many texts (no special tokens), in parallel native threads.

        ``num_threads`` is an upper bound. The native core uses no more threads than the
        CPUs this process may run on, and about one per 16,384 characters of text: a
        thread costs tens of microseconds to start, which a small batch does not repay."""
        texts = self._check_batch(text)
        if self._added_names:
            return self._core_bpe.encode_batch(texts, self._added_names, _check_num_threads(num_threads), frozenset())
        return self._core_bpe.encode_ordinary_batch(texts, _check_num_threads(num_threads))

    def encode_batch(
        self,
        text: Sequence[str],
        *,
        num_threads: int = 8,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> list[list[int]]:
        """Encode many texts with ``encode``'s special-token rules, in parallel
        (``num_threads`` as in ``encode_ordinary_batch``)."""
        texts = self._check_batch(text)
        num_threads = _check_num_threads(num_threads)
        allowed, disallowed = self._special_sets(allowed_special, disallowed_special)
        try:
            return self._core_bpe.encode_batch(texts, allowed, num_threads, disallowed)
        except DisallowedSpecial as found:
            index = found.index
        self._raise_disallowed(texts[index], disallowed, index)

    def encode_batch_to_numpy(
        self,
        text: Sequence[str],
        *,
        num_threads: int = 8,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
        dtype=np.uint32,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Encode many texts into one flat array plus ``offsets`` (len n+1, int64):
        text ``i`` is ``ids[offsets[i]:offsets[i+1]]`` (``num_threads`` as in
        ``encode_ordinary_batch``)."""
        texts = self._check_batch(text)
        num_threads = _check_num_threads(num_threads)
        dtype = self._check_dtype(dtype)
        allowed, disallowed = self._special_sets(allowed_special, disallowed_special)
        try:
            return self._core_bpe.encode_batch_to_numpy(texts, allowed, num_threads, dtype, disallowed)
        except DisallowedSpecial as found:
            index = found.index
        self._raise_disallowed(texts[index], disallowed, index)

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """The id of one whole token (ordinary or special); KeyError if it is none.

        >>> get_toy_encoding().encode_single_token("hi")
        256
        """
        if isinstance(text_or_bytes, str):
            if text_or_bytes in self._special_tokens:
                return self._special_tokens[text_or_bytes]
            if text_or_bytes in self._added_tokens:
                return self._added_tokens[text_or_bytes]
            text_or_bytes = text_or_bytes.encode("utf-8")
        if not isinstance(text_or_bytes, (bytes, bytearray)):
            raise TypeError(f"expected str or bytes, not {type(text_or_bytes).__name__}")
        try:
            return self._mergeable_ranks[bytes(text_or_bytes)]
        except KeyError:
            raise KeyError(f"{bytes(text_or_bytes)!r} is not a single token of {self.name!r}") from None

    # ----------------------------------------------------------------------- decoding
    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        """The bytes of the tokens, joined; KeyError names an unknown id."""
        return self._core_bpe.decode_bytes(self._check_tokens(tokens))

    def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        """Decode to str; a UTF-8 character split across tokens becomes U+FFFD."""
        return self.decode_bytes(tokens).decode("utf-8", errors=errors)

    def decode_single_token_bytes(self, token: int) -> bytes:
        if isinstance(token, bool) or not isinstance(token, (int, np.integer)):
            raise TypeError(f"token must be an int, not {type(token).__name__}")
        return self._core_bpe.decode_single_token_bytes(int(token))

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        return [self.decode_single_token_bytes(t) for t in self._check_tokens(tokens)]

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        """Decode, and give each token's starting character offset (as tiktoken does)."""
        token_bytes = self.decode_tokens_bytes(tokens)
        text_len, offsets = 0, []
        for token in token_bytes:
            # A token that starts inside a multi-byte character belongs to it.
            offsets.append(max(0, text_len - (0x80 <= token[0] < 0xC0)) if token else text_len)
            text_len += sum(1 for c in token if not 0x80 <= c < 0xC0)
        return b"".join(token_bytes).decode("utf-8", errors="strict"), offsets

    def decode_batch(self, batch: Sequence[Sequence[int]], *, errors: str = "replace", num_threads: int = 8) -> list[str]:
        return [b.decode("utf-8", errors=errors) for b in self.decode_bytes_batch(batch, num_threads=num_threads)]

    def decode_bytes_batch(self, batch: Sequence[Sequence[int]], *, num_threads: int = 8) -> list[bytes]:
        num_threads = _check_num_threads(num_threads)
        return self._core_bpe.decode_batch_bytes([self._check_tokens(t) for t in batch], num_threads)

    # ----------------------------------------------------------------------- properties
    def token_byte_values(self) -> list[bytes]:
        """The bytes of every ordinary token, sorted."""
        return self._core_bpe.token_byte_values()

    @property
    def eot_token(self) -> int:
        return self._special_tokens["<|endoftext|>"]

    @functools.cached_property
    def special_tokens_set(self) -> set[str]:
        return set(self._special_tokens)

    def is_special_token(self, token: int) -> bool:
        return token in self._special_token_ids

    @functools.cached_property
    def _special_token_ids(self) -> frozenset[int]:
        return frozenset(self._special_tokens.values())

    @property
    def n_vocab(self) -> int:
        return self.max_token_value + 1

    @property
    def pat_str(self) -> str:
        return self._pat_str

    @property
    def mergeable_ranks(self) -> dict[bytes, int]:
        return dict(self._mergeable_ranks)

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self._special_tokens)

    @property
    def added_tokens(self) -> dict[str, int]:
        """Added tokens that are not special (HF's ``"special": false``): see ``__init__``."""
        return dict(self._added_tokens)

    # ----------------------------------------------------------------------- files
    def save(self, path: str | os.PathLike, format: str | None = None, *, lossy: bool = False,
             transformers: bool = False) -> None:
        """Save as ``.tiktoken`` (ranks only), ``tokenizer.json`` (everything) or GPT-2's
        two files; the format comes from the extension unless ``format`` is given. A
        folder (or ``transformers=True``) gets a tokenizer.json with the config files
        ``transformers`` reads. A format that cannot hold the split pattern or special
        tokens refuses unless ``lossy=True`` (``.tiktoken`` only warns); see
        ``fastbpe.formats``."""
        from .formats import save_encoding

        save_encoding(self, path, format=format, lossy=lossy, transformers=transformers)

    # ----------------------------------------------------------------------- pickling
    def __getstate__(self) -> dict:
        state = {
            "name": self.name,
            "pat_str": self._pat_str,
            "mergeable_ranks": self._mergeable_ranks,
            "special_tokens": self._special_tokens,
        }
        if self._added_tokens:
            state["added_tokens"] = self._added_tokens
        return state

    def __setstate__(self, state: dict) -> None:
        self.__init__(**{k: v for k, v in state.items() if k != "name"}, name=state["name"])

    # ----------------------------------------------------------------------- helpers
    def _special_sets(self, allowed_special, disallowed_special) -> tuple[frozenset[str], frozenset[str]]:
        """(allowed, disallowed) as the core takes them (``fastbpe.special`` holds the
        rule). The core looks for the disallowed ones in every text before encoding it
        (natively, on the encoding threads) and reports the first text that holds one,
        which ``_raise_disallowed`` turns into tiktoken's error. Added tokens are ordinary
        text: always allowed, never disallowed."""
        allowed, disallowed = resolve_special_sets(allowed_special, disallowed_special, self._all_specials)
        if self._added_names:
            return allowed | self._added_names, disallowed - self._added_names
        return allowed, disallowed

    @staticmethod
    def _raise_disallowed(text: str, disallowed: frozenset[str], index: int | None = None):
        """tiktoken's error for the first disallowed special token in text (which the
        core found there); ``index`` names the text of a batch."""
        check_no_disallowed(text, disallowed, index)
        raise AssertionError("the core and the regex module disagree on a special token")

    def _check_dtype(self, dtype):
        dtype = np.dtype(dtype)
        if dtype not in (np.dtype(np.uint16), np.dtype(np.uint32)):
            raise ValueError(f"dtype must be uint16 or uint32, not {dtype}")
        if dtype == np.uint16 and self.max_token_value > 0xFFFF:
            raise ValueError(
                f"dtype uint16 cannot hold ids of {self.name!r} (largest id {self.max_token_value}); use uint32"
            )
        return dtype

    def _check_batch(self, texts) -> list[str]:
        if isinstance(texts, (str, bytes)):
            raise TypeError("expected a sequence of str, got a single " + type(texts).__name__)
        texts = list(texts)
        if NativeCoreBPE is not None and type(self._core_bpe) is NativeCoreBPE:
            return texts  # it checks the items in C, with the same message (66 us per 2,000 here)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"text {i} of the batch is {type(t).__name__}, expected str")
        return texts

    @staticmethod
    def _check_tokens(tokens) -> list[int] | np.ndarray:
        if isinstance(tokens, np.ndarray):
            if tokens.dtype.kind not in "iu":
                raise TypeError(f"token array must hold integers, not {tokens.dtype}")
            return tokens
        if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Iterable):
            raise TypeError(f"tokens must be a sequence of int, not {type(tokens).__name__}")
        # the items are the core's to check (TypeError naming the first that is not an
        # int, KeyError the first unknown id): a loop here cost more than decoding
        return tokens if type(tokens) in (list, tuple) else list(tokens)


def _check_added_tokens(added_tokens, special_tokens: dict, seen: dict) -> dict[str, int]:
    """``added_tokens`` checked like special tokens (``seen``: id -> token so far)."""
    if added_tokens is None:
        return {}
    if not isinstance(added_tokens, dict):
        raise TypeError(f"added_tokens must be a dict of str -> int, not {type(added_tokens).__name__}")
    for tok, idx in added_tokens.items():
        if not isinstance(tok, str):
            raise TypeError(f"added_tokens keys must be str, got {tok!r}")
        if not tok:
            raise ValueError("an added token cannot be the empty string")
        if tok in special_tokens:
            raise ValueError(f"added token {tok!r} is also a special token")
        if isinstance(idx, bool) or not isinstance(idx, (int, np.integer)) or idx < 0:
            raise ValueError(f"id of added token {tok!r} must be a non-negative int, got {idx!r}")
        # HF may add a token that is already in the vocabulary (GPT-2's "ing"): it keeps
        # that id, and its text is then matched whole wherever it appears
        if idx in seen and seen[idx] != tok.encode("utf-8"):
            raise ValueError(f"added token {tok!r} has id {idx}, already used by {seen[idx]!r}")
        seen[idx] = tok.encode("utf-8") if idx in seen else tok
    return {k: int(v) for k, v in added_tokens.items()}


def _make_core(ranks: dict[bytes, int], specials: dict[str, int], pat_str: str):
    if NativeCoreBPE is not None and os.environ.get("FASTBPE_REFERENCE_CORE") != "1":
        return NativeCoreBPE(ranks, specials, pat_str)
    return ReferenceCoreBPE(ranks, specials, pat_str)


def get_toy_encoding() -> Encoding:
    """A tiny encoding for docstring examples."""
    return Encoding(
        "toy",
        pat_str=r"\S+|\s+",
        mergeable_ranks={bytes([i]): i for i in range(256)} | {b"hi": 256},
        special_tokens={"<|eot|>": 257},
    )
