"""``fastbpe.Encoding``: tiktoken's ``Encoding``, same constructor, methods and errors.

Code written for tiktoken works by changing the import. This class holds the policy
(argument checks, special-token rules, batching, error messages) and delegates the
algorithm to a core: the native ``fastbpe._encode.CoreBPE`` when it is built, else the
pure-Python ``fastbpe.reference.core.CoreBPE`` (same interface, same ids). Both cores
give lone surrogates tiktoken's treatment (see ``reference.bpe.fix_surrogates``).
"""
from __future__ import annotations

import functools
import os
import sys
from collections.abc import Collection, Iterable, Sequence
from typing import AbstractSet, Literal

import regex

from . import unstable
from .. import _native
from ..reference.core import CoreBPE as ReferenceCoreBPE
from ..reference.core import DisallowedSpecial
from ..reference.patterns import compile_pattern
from ..checks import check_dtype, check_num_threads as _check_num_threads, is_int
from ..special import check_no_disallowed, resolve_special_sets

#: The ``dtype`` argument's default: uint32. A str, so that the signatures need no
#: numpy at import (numpy is imported by the first call that returns an array).
_DEFAULT_DTYPE = "uint32"
_UINT32 = None   # np.dtype(np.uint32), made by that first call


def _numpy_uint32():
    global _UINT32
    if _UINT32 is None:
        import numpy as np

        _UINT32 = np.dtype(np.uint32)
    return _UINT32


def _is_ndarray(value) -> bool:
    """Whether ``value`` is a numpy array, without importing numpy (none exists before)."""
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, np.ndarray)


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

    #: ``fastbpe.registry`` when it handed this object out (then it pickles by name); the
    #: registry sets it, so this layer never imports the one above it.
    _registry = None

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
        ranks = _checked_ranks(mergeable_ranks)
        max_rank = max(ranks.values())   # one pass (all 256 bytes are ranks: not empty)
        specials = _checked_specials(special_tokens, ranks, max_rank)
        added_tokens = _check_added_tokens(added_tokens, specials, ranks, max_rank)
        self.name = name
        self._pat_str = pat_str
        self._mergeable_ranks = ranks
        self._special_tokens = specials
        self._all_specials = frozenset(self._special_tokens)   # the default disallowed set
        self._added_tokens = added_tokens
        self._added_names = frozenset(added_tokens)
        self._special_memo: dict = {}   # see _special_sets
        self.max_token_value = max(max_rank, max(specials.values(), default=0),
                                   max(added_tokens.values(), default=0))
        if explicit_n_vocab is not None:
            _check_explicit_n_vocab(explicit_n_vocab, len(ranks) + len(specials), self.max_token_value)
        # 2. build the core once
        # added tokens are matched in text by the core's special-token split, always allowed
        self._core_bpe = self._new_core(self._mergeable_ranks, {**self._special_tokens, **added_tokens}, pat_str)

    def _new_core(self, ranks: dict[bytes, int], specials: dict[str, int], pat_str: str):
        """The core ``__init__`` builds (a subclass may pass the core more: ``HFEncoding``
        its unreachable tokens)."""
        return _make_core(ranks, specials, pat_str)

    @property
    def _split_engine(self) -> str:
        """What splits text for this encoding: "builtin:gpt2" / "builtin:cl100k" /
        "builtin:o200k" (hand-written), "program" (a compiled split program,
        ``fastbpe.reference.split_program``) or "regex" (the ``regex`` module). For
        tests and benchmarks.

        >>> get_toy_encoding()._split_engine  # its pattern is \\S+|\\s+
        'program'
        """
        native = _native.load()
        from .._pretokenize import split_engine

        return split_engine(native._native_pattern_id(self._pat_str))

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
        dtype=_DEFAULT_DTYPE,
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
        dtype=_DEFAULT_DTYPE,
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

    def encode_file(
        self,
        path: str | os.PathLike,
        *,
        num_threads: int = 8,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
        dtype=_DEFAULT_DTYPE,
    ) -> np.ndarray:
        """The ids of a UTF-8 text file as one array: ``encode_to_numpy`` of its text,
        where the text is ``Path(path).read_bytes().decode("utf-8")`` (bytes as they
        are: no newline translation, a BOM is the char U+FEFF). The native core encodes
        the bytes without making a str, on up to ``num_threads`` threads (a long text is
        cut where every built-in pattern splits anyway, as batches cut theirs).

        Not UTF-8: ValueError naming the file and the byte offset. Special tokens as in
        ``encode``; the error names the file.

        >>> import tempfile; f = tempfile.NamedTemporaryFile(suffix=".txt", delete=False)
        >>> _ = f.write(b"hi hi"); f.close()
        >>> get_toy_encoding().encode_file(f.name).tolist()
        [256, 32, 256]
        >>> os.unlink(f.name)
        """
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
        num_threads = _check_num_threads(num_threads)
        dtype = self._check_dtype(dtype)
        allowed, disallowed = self._special_sets(allowed_special, disallowed_special)
        with open(path, "rb") as f:
            data = f.read()
        try:
            return self._core_bpe.encode_utf8_to_numpy(data, allowed, num_threads, dtype, disallowed)
        except DisallowedSpecial:
            pass
        except ValueError as exc:
            raise ValueError(f"{os.fspath(path)}: {exc}") from None
        try:
            self._raise_disallowed(data.decode("utf-8"), disallowed)
        except ValueError as exc:
            raise ValueError(f"{os.fspath(path)}: {exc}") from None

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """The id of one whole token, ordinary or special, given as str or bytes;
        ``KeyError(the bytes)`` if it is none, as tiktoken.

        >>> enc = get_toy_encoding()
        >>> enc.encode_single_token("hi"), enc.encode_single_token(b"<|eot|>")
        (256, 257)
        """
        return self._core_bpe.encode_single_token(_piece_bytes(text_or_bytes))

    def encode_with_unstable(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> tuple[list[int], list[list[int]]]:
        """``(stable_tokens, completions)`` as tiktoken: the ids of text but its last
        piece, and every id sequence that may follow them once more text comes (in the
        order found; the rules are in ``fastbpe.bpe.unstable``). Special tokens as in ``encode``.

        >>> get_toy_encoding().encode_with_unstable("hi h")
        ([256, 32], [[104], [256]])
        """
        _check_text(text)
        allowed, disallowed = self._special_sets(allowed_special, disallowed_special)
        check_no_disallowed(text, disallowed)
        return unstable.encode_with_unstable(self, text, allowed)

    # ----------------------------------------------------------------------- counting
    def count(self, text: str) -> int:
        """How many ids ``encode_ordinary(text)`` gives (special-token text is text, as
        in bpe-openai's ``count`` and ``fastbpe count``).

        >>> get_toy_encoding().count("hi hi")
        3
        """
        _check_text(text)
        if self._added_names:   # they match in encode_ordinary too
            return len(self._core_bpe.encode(text, self._added_names, frozenset()))
        return len(self._core_bpe.encode_ordinary(text))

    def count_till_limit(self, text: str, limit: int) -> int | None:
        """``count(text)`` if it is at most ``limit``, else None, reading no more of a
        long text than it takes to pass the limit (bpe-openai's ``count_till_limit``).

        A text of at most ``_COUNT_WHOLE`` characters per allowed token is counted
        whole, natively; a longer one piece by piece (the pattern's chunks, each encoded
        alone, as encoding does), stopping at the first piece past the limit.

        >>> enc = get_toy_encoding()
        >>> enc.count_till_limit("hi hi", 3), enc.count_till_limit("hi hi", 2)
        (3, None)
        """
        _check_text(text)
        if not is_int(limit):
            raise TypeError(f"limit must be an int, not {type(limit).__name__}")
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        if len(text) <= _COUNT_WHOLE * (limit + 1) or self._added_names:  # (added tokens span pieces)
            n = self.count(text)
            return n if n <= limit else None
        total, encode_piece = 0, self._core_bpe.encode_single_piece
        try:
            for m in self._pat.finditer(text):
                total += len(encode_piece(m.group().encode("utf-8")))
                if total > limit:
                    return None
        except UnicodeEncodeError:   # lone surrogates: count what encode would encode
            return self.count_till_limit(unstable.utf8_text(text), limit)
        return total

    # ----------------------------------------------------------------------- private, as tiktoken
    def _encode_single_piece(self, text_or_bytes: str | bytes) -> list[int]:
        """Ids of text or bytes as one piece, with no pattern split and no special
        tokens: its id if it is a token, else BPE from single bytes ([] for empty input,
        where tiktoken panics).

        >>> get_toy_encoding()._encode_single_piece("hi hi")
        [256, 32, 256]
        """
        return self._core_bpe.encode_single_piece(_piece_bytes(text_or_bytes))

    def _encode_only_native_bpe(self, text: str) -> list[int]:
        """tiktoken's check of its core: split with the ``regex`` module in Python, BPE
        each piece alone. The same ids as ``encode_ordinary``."""
        _check_text(text)
        text = unstable.utf8_text(text)
        encode_piece = self._core_bpe.encode_single_piece
        return [t for piece in self._pat.findall(text) for t in encode_piece(piece.encode("utf-8"))]

    def _encode_bytes(self, text: bytes) -> list[int]:
        """Ids of bytes that need not be UTF-8, as tiktoken (see ``fastbpe.bpe.unstable``).

        >>> get_toy_encoding()._encode_bytes(b"hi \\xff")
        [256, 32, 255]
        """
        if isinstance(text, (bytearray, memoryview)):
            text = bytes(text)
        if not isinstance(text, bytes):
            raise TypeError(f"expected bytes, not {type(text).__name__}")
        return unstable.encode_bytes(self, text)

    # ----------------------------------------------------------------------- decoding
    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        """The bytes of the tokens, joined. Errors as tiktoken's, naming the item: TypeError
        for one that is not an int, OverflowError for one outside 0..2**32-1, then
        KeyError for an id that is no token.

        >>> get_toy_encoding().decode_bytes([256, 300])
        Traceback (most recent call last):
        KeyError: 'Invalid token for decoding: 300 at index 1'
        """
        tokens = self._check_tokens(tokens)
        try:
            return self._core_bpe.decode_bytes(tokens)
        except (KeyError, TypeError, OverflowError):
            pass
        self._raise_bad_token(tokens)   # outside the except: no chained error

    def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        """Decode to str; a UTF-8 character split across tokens becomes U+FFFD."""
        return self.decode_bytes(tokens).decode("utf-8", errors=errors)

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one token, ordinary or special (errors as ``decode_bytes``)."""
        _check_token_id(token)
        try:
            return self._core_bpe.decode_single_token_bytes(int(token))
        except KeyError:
            pass
        raise KeyError(f"Invalid token for decoding: {token}")   # outside the except: no chain

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        """The bytes of each token (errors as ``decode_bytes``)."""
        tokens = self._check_tokens(tokens)
        decode = self._core_bpe.decode_single_token_bytes
        try:
            return [decode(t) for t in tokens]
        except (KeyError, TypeError, OverflowError):
            pass
        self._raise_bad_token(tokens)

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
        """``decode_bytes`` of each sequence; an error names the sequence and the item."""
        num_threads = _check_num_threads(num_threads)
        batch = [self._check_tokens(t) for t in batch]
        try:
            return self._core_bpe.decode_batch_bytes(batch, num_threads)
        except (KeyError, TypeError, OverflowError):
            pass
        for i, tokens in enumerate(batch):
            self._raise_bad_token(tokens, i, must=False)
        raise AssertionError("the core refused a batch in which every id is a token")

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
        from ..formats import save_encoding

        save_encoding(self, path, format=format, lossy=lossy, transformers=transformers)

    # ----------------------------------------------------------------------- pickling
    def __reduce_ex__(self, protocol):
        """An encoding from ``get_encoding`` pickles as its name (~60 bytes, as in
        tiktoken) and unpickles as the receiving process's own cached object, so pool
        workers get it without 2 MB of ranks per task; any other encoding pickles by
        value (``__getstate__``).

        >>> import pickle, fastbpe
        >>> enc = fastbpe.get_encoding("gpt2")
        >>> pickle.loads(pickle.dumps(enc)) is enc, len(pickle.dumps(enc)) < 100
        (True, True)
        """
        registry = self._registry  # set by fastbpe.registry on the objects it hands out
        if registry is not None and registry.is_registered(self):
            return (registry.get_encoding, (self.name,))
        return super().__reduce_ex__(protocol)

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
        if not self._added_names:
            return allowed, disallowed
        # The same objects for the same sets: the core keeps its native sets by frozenset,
        # and a new one per call is hashed and compared item by item there (DeepSeek V4's
        # 1,230 special tokens: ~40 us a call, as long as encoding a ~2 KB document).
        memo = self._special_memo.get((allowed, disallowed))
        if memo is None:
            if len(self._special_memo) >= 64:
                self._special_memo.clear()
            memo = self._special_memo[allowed, disallowed] = (
                allowed | self._added_names,
                disallowed - self._added_names if not disallowed.isdisjoint(self._added_names) else disallowed)
        return memo

    @staticmethod
    def _raise_disallowed(text: str, disallowed: frozenset[str], index: int | None = None):
        """tiktoken's error for the first disallowed special token in text (which the
        core found there); ``index`` names the text of a batch."""
        check_no_disallowed(text, disallowed, index)
        raise AssertionError("the core and the regex module disagree on a special token")

    def _check_dtype(self, dtype):
        # The default, on every encode_to_numpy call: np.dtype() and the membership test
        # below cost 2.5 us, 8% of a ~2 KB document's encode.
        if dtype is _DEFAULT_DTYPE:
            return _UINT32 if _UINT32 is not None else _numpy_uint32()
        u32 = _numpy_uint32()
        if dtype is u32 or dtype is u32.type:   # np.dtype(np.uint32), np.uint32
            return u32
        return check_dtype(dtype, self.max_token_value, repr(self.name))

    def _check_batch(self, texts) -> list[str]:
        if isinstance(texts, (str, bytes)):
            raise TypeError("expected a sequence of str, got a single " + type(texts).__name__)
        texts = list(texts)
        if type(self._core_bpe) is _NativeCoreBPE:
            return texts  # it checks the items in C, with the same message (66 us per 2,000 here)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"text {i} of the batch is {type(t).__name__}, expected str")
        return texts

    def _raise_bad_token(self, tokens, index: int | None = None, must: bool = True) -> None:
        """tiktoken's error for the first bad item of tokens (which a core refused):
        first any item that is no id (TypeError, OverflowError), then an unknown id;
        ``index`` names the sequence of a batch. Only the error path pays for this loop."""
        where = "" if index is None else f" of sequence {index} of the batch"
        items = tokens.tolist() if _is_ndarray(tokens) else tokens
        for i, token in enumerate(items):
            _check_token_id(token, f" at index {i}{where}")
        for i, token in enumerate(items):
            if not self._is_token(int(token)):
                raise KeyError(f"Invalid token for decoding: {token} at index {i}{where}")
        if must:
            raise AssertionError("the core refused tokens that are all known ids")

    def _is_token(self, token: int) -> bool:
        try:
            self._core_bpe.decode_single_token_bytes(token)
        except KeyError:
            return False
        return True

    @functools.cached_property
    def _pat(self) -> regex.Pattern:
        return compile_pattern(self._pat_str)

    @functools.cached_property
    def _sorted_token_bytes(self) -> list[bytes]:
        return self._core_bpe.token_byte_values()

    @functools.cached_property
    def _sorted_token_texts(self) -> list[str | None]:
        """``_sorted_token_bytes`` as str, None where a token is not UTF-8."""
        out: list[str | None] = []
        for tok in self._sorted_token_bytes:
            try:
                out.append(tok.decode("utf-8"))
            except UnicodeDecodeError:
                out.append(None)
        return out

    @functools.cached_property
    def _token_lengths(self) -> np.ndarray:
        """The byte length of every id (int64; 0 where no token has that id)."""
        import numpy as np

        lengths = np.zeros(self.max_token_value + 1, dtype=np.int64)
        for tok, rank in self._mergeable_ranks.items():
            lengths[rank] = len(tok)
        for tok, rank in self._special_tokens.items():
            lengths[rank] = len(tok.encode("utf-8"))
        return lengths

    @staticmethod
    def _check_tokens(tokens) -> list[int] | np.ndarray:
        if _is_ndarray(tokens):
            if tokens.dtype.kind not in "iu":
                raise TypeError(f"token array must hold integers, not {tokens.dtype}")
            return tokens
        if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Iterable):
            raise TypeError(f"tokens must be a sequence of int, not {type(tokens).__name__}")
        # the items are the core's to check (TypeError naming the first that is not an
        # int, KeyError the first unknown id): a loop here cost more than decoding
        return tokens if type(tokens) in (list, tuple) else list(tokens)


_MAX_ID = 2**32 - 1   # ids are u32, as in tiktoken
#: count_till_limit counts a text whole when it has at most this many characters per
#: allowed token. The walk costs ~0.6 us per token (a Python step per piece), native
#: encoding 5-11 ns per character: 64 keeps either within ~2x of the other at the switch
#: (benchmarks/count_till_limit.py measures both).
_COUNT_WHOLE = 64


def _check_token_id(token, where: str = "") -> None:
    """TypeError unless token is an int (bool is not one), OverflowError unless it is an
    id tiktoken can hold (0..2**32-1); ``where`` says which item it is."""
    if not is_int(token):
        raise TypeError(f"token ids must be ints, got {token!r}{where}")
    if not 0 <= token <= _MAX_ID:
        raise OverflowError(f"token id {token}{where} is out of range: ids are 0 .. 2**32 - 1")


def _piece_bytes(text_or_bytes) -> bytes:
    """The bytes of one token or piece given as str or bytes. A lone surrogate raises
    UnicodeEncodeError, as in tiktoken: replacing it would look up another token."""
    if isinstance(text_or_bytes, str):
        return text_or_bytes.encode("utf-8")
    if isinstance(text_or_bytes, (bytearray, memoryview)):
        return bytes(text_or_bytes)
    if not isinstance(text_or_bytes, bytes):
        raise TypeError(f"expected str or bytes, not {type(text_or_bytes).__name__}")
    return text_or_bytes


def _check_added_tokens(added_tokens, specials: dict[str, int], ranks: dict[bytes, int],
                        max_rank: int) -> dict[str, int]:
    """``added_tokens`` checked like special tokens, against the ids already taken
    (``max_rank``: the largest rank)."""
    if added_tokens is None:
        return {}
    if not isinstance(added_tokens, dict):
        raise TypeError(f"added_tokens must be a dict of str -> int, not {type(added_tokens).__name__}")
    if not added_tokens:
        return {}
    # only the added tokens' ids are looked up: the ranks at those ids (a load of DeepSeek
    # V4 checked 1,283 added tokens against a dict of all 128k ranks, ~20 ms), and only
    # when one may be a rank (HF's added tokens mostly follow the ranks: no Python pass
    # over 128k ranks, ~12 ms)
    wanted = {idx for idx in added_tokens.values() if is_int(idx)}
    below = bool(wanted) and min(wanted) <= max_rank
    seen: dict[int, object] = {r: b for b, r in ranks.items() if r in wanted} if below else {}
    seen.update((i, t) for t, i in specials.items())
    for tok, idx in added_tokens.items():
        if not isinstance(tok, str):
            raise TypeError(f"added_tokens keys must be str, got {tok!r}")
        if not tok:
            raise ValueError("an added token cannot be the empty string")
        if tok in specials:
            raise ValueError(f"added token {tok!r} is also a special token")
        if not is_int(idx) or idx < 0:
            raise ValueError(f"id of added token {tok!r} must be a non-negative int, got {idx!r}")
        # HF may add a token that is already in the vocabulary (GPT-2's "ing"): it keeps
        # that id, and its text is then matched whole wherever it appears
        if idx in seen and seen[idx] != tok.encode("utf-8"):
            raise ValueError(f"added token {tok!r} has id {idx}, already used by {seen[idx]!r}")
        seen[idx] = tok.encode("utf-8") if idx in seen else tok
    return {k: int(v) for k, v in added_tokens.items()}


_NativeCoreBPE = None   # fastbpe._encode.CoreBPE once loaded (by the first Encoding)


def _make_core(ranks: dict[bytes, int], specials: dict[str, int], pat_str: str, unreachable=()):
    """The native core, or the reference one under ``FASTBPE_REFERENCE_CORE=1``;
    ``unreachable``: tokens that decode but never encode (``CoreBPE``'s argument)."""
    global _NativeCoreBPE
    extra = (unreachable,) if unreachable else ()
    if os.environ.get("FASTBPE_REFERENCE_CORE") != "1":
        _NativeCoreBPE = _native.load().CoreBPE
        return _NativeCoreBPE(ranks, specials, pat_str, *extra)
    return ReferenceCoreBPE(ranks, specials, pat_str, *extra)


def get_toy_encoding() -> Encoding:
    """A tiny encoding for docstring examples."""
    return Encoding(
        "toy",
        pat_str=r"\S+|\s+",
        mergeable_ranks={bytes([i]): i for i in range(256)} | {b"hi": 256},
        special_tokens={"<|eot|>": 257},
    )


# --------------------------------------------------------------------------- validation
def _checked_ranks(mergeable_ranks: dict) -> dict[bytes, int]:
    """``mergeable_ranks`` as a plain ``dict[bytes, int]``, or an error naming the first
    bad entry. The item loop is the rule; exact bytes/int types are first checked in
    bulk (the same rule, natively: ``fastbpe._vocab.ranks_are_plain``, the check the
    native core's constructor makes; in Python under ``FASTBPE_REFERENCE_CORE=1``,
    which runs no native code), and the loop
    runs only when that fails: to name the problem, or to convert subclasses and numpy
    ints."""
    values = mergeable_ranks.values()
    native = _native.load() if os.environ.get("FASTBPE_REFERENCE_CORE") != "1" else None
    if native is not None and native.ranks_are_plain(mergeable_ranks):
        ranks = dict(mergeable_ranks)
    elif native is None and (
        all(type(tok) is bytes for tok in mergeable_ranks)
        and all(type(rank) is int for rank in values)
        and min(values, default=0) >= 0
        and len(set(values)) == len(values)
    ):
        ranks = dict(mergeable_ranks)
    else:
        ranks, seen = {}, {}
        for tok, rank in mergeable_ranks.items():
            if not isinstance(tok, bytes):
                raise TypeError(f"mergeable_ranks keys must be bytes, got {tok!r}")
            if not is_int(rank) or rank < 0:
                raise ValueError(f"rank of {tok!r} must be a non-negative int, got {rank!r}")
            if rank in seen:
                raise ValueError(f"rank {rank} is used twice: {seen[rank]!r} and {tok!r}")
            seen[rank] = tok
            ranks[bytes(tok)] = int(rank)
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise ValueError(
            f"mergeable_ranks lacks {len(missing)} single-byte tokens (e.g. byte {missing[0]}); "
            "byte-level BPE needs all 256 so that any text can be encoded"
        )
    return ranks


def _checked_specials(special_tokens: dict, ranks: dict[bytes, int], max_rank: int) -> dict[str, int]:
    """``special_tokens`` as a plain ``dict[str, int]``, or an error naming the first bad
    entry. Special tokens may share an id, as in tiktoken (o200k_harmony gives
    ``<|endofprompt|>`` and ``<|reserved_200018|>`` both 200018): each encodes to it, and
    ``reference.core.CoreBPE`` says which bytes it decodes to. An id that is also an
    ordinary token's rank is an error: decoding it could not give both (``max_rank``,
    the largest rank: ids above it are not looked for among the ranks)."""
    specials: dict[str, int] = {}
    for tok, token_id in special_tokens.items():
        if not isinstance(tok, str):
            raise TypeError(f"special_tokens keys must be str, got {tok!r}")
        if not is_int(token_id) or token_id < 0:
            raise ValueError(f"id of special token {tok!r} must be a non-negative int, got {token_id!r}")
        specials[str(tok)] = int(token_id)
    ids = set(specials.values())
    clash = ids.intersection(ranks.values()) if ids and min(ids) <= max_rank else ()
    if clash:
        tok, token_id = next((t, i) for t, i in specials.items() if i in clash)
        ordinary = next(b for b, r in ranks.items() if r == token_id)
        raise ValueError(f"special token {tok!r} has id {token_id}, already used by {ordinary!r}")
    return specials


def _check_explicit_n_vocab(explicit_n_vocab: int, n_tokens: int, max_token_value: int) -> None:
    """tiktoken's check: ``n_tokens`` (ordinary tokens plus special token *names*, so
    two names sharing an id count twice) equals ``explicit_n_vocab``, and the largest id
    is ``explicit_n_vocab - 1``."""
    if n_tokens != explicit_n_vocab:
        raise ValueError(f"explicit_n_vocab={explicit_n_vocab} but there are {n_tokens} tokens")
    if max_token_value != explicit_n_vocab - 1:
        raise ValueError(f"explicit_n_vocab={explicit_n_vocab} but the largest id is {max_token_value}")
