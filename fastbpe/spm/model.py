"""``SentencePieceBPE``: a sentencepiece BPE model (Llama 2, Mistral 7B v0.1-v0.3, ...)
with tiktoken's API.

The algorithm is ``fastbpe.reference.sentencepiece`` (the specification, which says
what is reproduced and what is refused); this class holds the policy: argument checks,
the special-token rule of ``fastbpe.special``, batches, numpy output, pickling. It
delegates encoding to the native ``fastbpe._spm.SpmCore`` when it is built and can run
the model (see ``native_reason``), else to the reference.

Ids equal ``sentencepiece.SentencePieceProcessor(model_file=...).encode(text)`` (no
``<s>``: add ``bos_token_id`` yourself, as with sentencepiece), and ``decode`` equals its
``decode``.

Special tokens are the model's control pieces (``<s>``, ``</s>``, Mistral v3's
``[INST]``, ``[TOOL_CALLS]``, ...) and its unknown piece (``<unk>``). sentencepiece never
makes them from text; here, as for every fastbpe tokenizer, their text in a user's text
raises ValueError unless allowed (``allowed_special``) or the check is turned off
(``disallowed_special=()``, which then encodes it as sentencepiece does: as characters).
``encode_ordinary`` is sentencepiece's ``encode``. User-defined pieces (Mistral v3's
``[REFERENCE_DOC_0]`` ...) are ordinary vocabulary: always matched whole, never refused.

Text that has no UTF-8 form (lone surrogates) is encoded as the library encodes it
everywhere: lone surrogates become U+FFFD (``fastbpe.reference.core.fix_surrogates``).
"""
from __future__ import annotations

import functools
import os
from collections.abc import Collection, Sequence
from itertools import accumulate
from pathlib import Path
from typing import AbstractSet, Literal

import numpy as np

from ..checks import check_dtype, check_num_threads
from ..reference import sentencepiece as R
from ..reference.core import fix_surrogates
from ..special import check_no_disallowed, resolve_special_sets, split_on_specials

try:
    from .._spm import SpmCore as NativeCore
except ImportError:  # pragma: no cover  (an unbuilt checkout: the reference serves)
    NativeCore = None
try:
    from .._hf_spm import HFSpmKernel
except ImportError:  # pragma: no cover  (an unbuilt checkout: the reference serves)
    HFSpmKernel = None


def _check_text(text, what: str = "text") -> str:
    if not isinstance(text, str):
        hint = " (decode bytes to str first)" if isinstance(text, (bytes, bytearray)) else ""
        raise TypeError(f"{what} must be a str, not {type(text).__name__}{hint}")
    return text


class ReferenceCore:
    """The reference as a core (the interface ``fastbpe._spm.SpmCore`` has too: text with
    no UTF-8 form raises UnicodeEncodeError, which ``SentencePieceBPE`` fixes up)."""

    def __init__(self, tables: R.SpmTables):
        self.tables = tables

    def encode(self, text: str) -> list[int]:
        text.encode("utf-8")
        return R.encode(text, self.tables)

    def encode_batch(self, texts: list[str], num_threads: int) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def encode_to_numpy(self, text: str, dtype: np.dtype) -> np.ndarray:
        return np.array(self.encode(text), dtype=dtype)

    def encode_batch_to_numpy(self, texts: list[str], num_threads: int, dtype: np.dtype):
        return _rows_to_numpy(self.encode_batch(texts, num_threads), dtype)


def _rows_to_numpy(rows: list[list[int]], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Lists of ids as (one flat array of dtype, int64 offsets of len(rows) + 1)."""
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    return np.fromiter((i for r in rows for i in r), dtype=dtype, count=int(offsets[-1])), offsets


class SentencePieceBPE:
    """A sentencepiece BPE model with tiktoken's ``Encoding`` API.

    >>> from fastbpe.reference.sentencepiece import SpmModel, Piece, TrainerSpec, NormalizerSpec
    >>> model = SpmModel((Piece("<unk>", 0.0, 2), Piece("<s>", 0.0, 3), Piece("▁", -2.0), Piece("h", -3.0),
    ...                   Piece("i", -3.0), Piece("▁h", -1.0), Piece("▁hi", -0.5)), TrainerSpec(model_type=2),
    ...                  NormalizerSpec("identity", b"", True, False, True))
    >>> tok = SentencePieceBPE(model, name="toy")
    >>> tok.encode("hi hi"), tok.decode([6, 6])
    ([6, 6], 'hi hi')
    >>> tok.encode("<s>hi", allowed_special="all"), tok.special_tokens
    ([1, 6], {'<unk>': 0, '<s>': 1})
    """

    def __init__(self, model: R.SpmModel, *, name: str = "sentencepiece", source: str | None = None,
                 native: bool | None = None):
        if not isinstance(model, R.SpmModel):
            raise TypeError(f"model must be a fastbpe.reference.sentencepiece.SpmModel, not {type(model).__name__}")
        self.name = name
        self._model = model
        self._tables = R.build_tables(model, source or name)
        self._special_tokens = {p.piece: i for i, p in enumerate(model.pieces) if p.type in (R.CONTROL, R.UNKNOWN)}
        self._specials = frozenset(self._special_tokens)
        self.native_reason = _native_reason(self._tables) if native is not False else "native=False"
        if NativeCore is not None and self.native_reason is None:
            self._core = NativeCore(self._tables)
        else:
            if native:
                raise ValueError(f"{name}: the native core cannot run this model: {self.native_reason}")
            self._core = ReferenceCore(self._tables)

    @classmethod
    def from_file(cls, path: str | os.PathLike, *, name: str | None = None) -> "SentencePieceBPE":
        """Load a sentencepiece ``.model`` file (ValueError naming the file and field for
        what is not reproduced: see ``fastbpe.reference.sentencepiece``)."""
        from ..formats.sentencepiece_model import read_model

        path = Path(path)
        return cls(read_model(path), name=name or path.name.removesuffix(".model"), source=str(path))

    def __repr__(self) -> str:
        return f"<SentencePieceBPE {self.name!r}>"

    # ----------------------------------------------------------------------- encoding
    def encode_ordinary(self, text: str) -> list[int]:
        """``SentencePieceProcessor.encode(text)``: special-token text is ordinary text."""
        return self._encode_one(_check_text(text))

    def encode(self, text: str, *, allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
               disallowed_special: Literal["all"] | Collection[str] = "all") -> list[int]:
        """Encode with tiktoken's special-token rules (module docstring): the text between
        allowed special tokens is encoded as texts of their own."""
        text = _check_text(text)
        allowed, disallowed = resolve_special_sets(allowed_special, disallowed_special, self._specials)
        check_no_disallowed(text, disallowed - allowed)
        if not allowed:
            return self._encode_one(text)
        return self._encode_allowed(text, allowed)

    def encode_to_numpy(self, text: str, *, allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
                        disallowed_special: Literal["all"] | Collection[str] = "all", dtype=np.uint32) -> np.ndarray:
        """Like ``encode``, as a numpy array (uint32, or uint16: every id of these models fits)."""
        dtype = check_dtype(dtype, self.n_vocab - 1, repr(self.name))
        text = _check_text(text)
        allowed, disallowed = resolve_special_sets(allowed_special, disallowed_special, self._specials)
        check_no_disallowed(text, disallowed - allowed)
        if allowed:
            return self._numpy_allowed(text, allowed, dtype)
        try:   # the core writes the array (no list between)
            return self._core.encode_to_numpy(text, dtype)
        except UnicodeEncodeError:   # lone surrogates (module docstring)
            return self._core.encode_to_numpy(fix_surrogates(text), dtype)

    def encode_ordinary_batch(self, text: Sequence[str], *, num_threads: int = 8) -> list[list[int]]:
        """``encode_ordinary`` of each text, on up to ``num_threads`` native threads."""
        texts = [_check_text(t, f"text {i} of the batch") for i, t in enumerate(_check_batch(text))]
        return self._encode_many(texts, check_num_threads(num_threads))

    def encode_batch(self, text: Sequence[str], *, num_threads: int = 8,
                     allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
                     disallowed_special: Literal["all"] | Collection[str] = "all") -> list[list[int]]:
        """``encode`` of each text, on up to ``num_threads`` native threads; an error names
        the text of the batch."""
        texts, num_threads, allowed = self._checked_batch(text, num_threads, allowed_special, disallowed_special)
        if not allowed:
            return self._encode_many(texts, num_threads)
        return self._encode_batch_allowed(texts, allowed, num_threads)

    def _checked_batch(self, text, num_threads, allowed_special, disallowed_special):
        """The batch's texts, thread count and allowed special tokens, after the checks
        (TypeError naming a text that is not a str; disallowed special text)."""
        texts = [_check_text(t, f"text {i} of the batch") for i, t in enumerate(_check_batch(text))]
        num_threads = check_num_threads(num_threads)
        allowed, disallowed = resolve_special_sets(allowed_special, disallowed_special, self._specials)
        for i, t in enumerate(texts):
            check_no_disallowed(t, disallowed - allowed, i)
        return texts, num_threads, allowed

    def _encode_allowed(self, text: str, allowed: frozenset[str]) -> list[int]:
        """``encode`` with some special tokens allowed: the text between them encoded as
        texts of their own (``fastbpe.reference.sentencepiece``, "Special tokens")."""
        return self._encode_parts(split_on_specials(text, allowed))

    def _numpy_allowed(self, text: str, allowed: frozenset[str], dtype: np.dtype) -> np.ndarray:
        return np.array(self._encode_allowed(text, allowed), dtype=dtype)

    def _encode_batch_allowed(self, texts: list[str], allowed: frozenset[str], num_threads: int) -> list[list[int]]:
        split = [split_on_specials(t, allowed) for t in texts]
        plain = [p for parts in split for p in parts if not isinstance(p, tuple)]
        encoded = iter(self._encode_many(plain, num_threads))
        return [[i for p in parts for i in ([self._special_tokens[p[0]]] if isinstance(p, tuple) else next(encoded))]
                for parts in split]

    def encode_batch_to_numpy(self, text: Sequence[str], *, num_threads: int = 8,
                              allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
                              disallowed_special: Literal["all"] | Collection[str] = "all",
                              dtype=np.uint32) -> tuple[np.ndarray, np.ndarray]:
        """One flat array of ids and ``offsets`` (int64, len n+1): text ``i`` is
        ``ids[offsets[i]:offsets[i+1]]``. The core writes the array (no lists between)."""
        dtype = check_dtype(dtype, self.n_vocab - 1, repr(self.name))
        texts, num_threads, allowed = self._checked_batch(text, num_threads, allowed_special, disallowed_special)
        if allowed:
            return self._numpy_batch_allowed(texts, allowed, num_threads, dtype)
        try:
            return self._core.encode_batch_to_numpy(texts, num_threads, dtype)
        except UnicodeEncodeError:
            return self._core.encode_batch_to_numpy([fix_surrogates(t) for t in texts], num_threads, dtype)

    def _numpy_batch_allowed(self, texts: list[str], allowed: frozenset[str], num_threads: int,
                             dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        """``encode_batch_to_numpy`` with some special tokens allowed: the text between
        them as one flat batch of its own (``_encode_allowed``'s rule), then each text's
        runs of ids and special ids copied in order (a loop over parts, not over ids)."""
        split = [split_on_specials(t, allowed) for t in texts]
        plain = [p for parts in split for p in parts if not isinstance(p, tuple)]
        try:
            flat, starts = self._core.encode_batch_to_numpy(plain, num_threads, dtype)
        except UnicodeEncodeError:
            flat, starts = self._core.encode_batch_to_numpy([fix_surrogates(t) for t in plain], num_threads, dtype)
        n_special = sum(isinstance(p, tuple) for parts in split for p in parts)
        ids = np.empty(len(flat) + n_special, dtype=dtype)
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        at = k = 0
        for i, parts in enumerate(split):
            for part in parts:
                if isinstance(part, tuple):
                    ids[at] = self._special_tokens[part[0]]
                    at += 1
                else:
                    run = flat[starts[k]:starts[k + 1]]
                    ids[at:at + len(run)] = run
                    at += len(run)
                    k += 1
            offsets[i + 1] = at
        return ids, offsets

    def count(self, text: str) -> int:
        """How many ids ``encode_ordinary(text)`` gives."""
        return len(self.encode_ordinary(text))

    def _encode_parts(self, parts) -> list[int]:
        ids = []
        for part in parts:
            if isinstance(part, tuple):
                ids.append(self._special_tokens[part[0]])
            else:
                ids.extend(self._encode_one(part))
        return ids

    def _encode_one(self, text: str) -> list[int]:
        try:
            return self._core.encode(text)
        except UnicodeEncodeError:   # lone surrogates (module docstring)
            return self._core.encode(fix_surrogates(text))

    def _encode_many(self, texts: list[str], num_threads: int) -> list[list[int]]:
        try:
            return self._core.encode_batch(texts, num_threads)
        except UnicodeEncodeError:
            return self._core.encode_batch([fix_surrogates(t) for t in texts], num_threads)

    # ----------------------------------------------------------------------- decoding
    def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        """``SentencePieceProcessor.decode(tokens)``; ValueError naming an id out of range.
        (``errors`` is accepted for tiktoken's signature: byte pieces always decode with
        sentencepiece's one U+FFFD per invalid byte.)"""
        return R.decode(_check_tokens(tokens), self._tables)

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        return self.decode(tokens).encode("utf-8")

    def decode_batch(self, batch: Sequence[Sequence[int]], *, errors: str = "replace",
                     num_threads: int = 8) -> list[str]:
        return [self.decode(tokens) for tokens in batch]

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The piece's text as bytes with ``▁`` as a space, or its byte (``<0xXX>``);
        control pieces are empty."""
        (token,) = _check_tokens([token])
        if not 0 <= token < self.n_vocab:
            raise KeyError(f"Invalid token for decoding: {token}")
        kind, piece = self._tables.types[token], self._tables.texts[token]
        if kind == R.BYTE:
            return bytes([R.piece_byte(piece)])
        if kind == R.CONTROL:
            return b""
        return piece.replace(R.SPACE, " ").encode("utf-8")

    # ----------------------------------------------------------------------- vocabulary
    @property
    def n_vocab(self) -> int:
        return len(self._tables.texts)

    @property
    def max_token_value(self) -> int:
        return self.n_vocab - 1

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self._special_tokens)

    @functools.cached_property
    def special_tokens_set(self) -> set[str]:
        return set(self._special_tokens)

    def is_special_token(self, token: int) -> bool:
        return 0 <= token < self.n_vocab and self._tables.types[token] in (R.CONTROL, R.UNKNOWN)

    @property
    def unk_token_id(self) -> int:
        return self._tables.unk_id

    @property
    def bos_token_id(self) -> int | None:
        """``<s>``'s id (trainer_spec.bos_id when it is a control piece), else None."""
        return self._control_id(self._model.trainer_spec.bos_id)

    @property
    def eos_token_id(self) -> int | None:
        return self._control_id(self._model.trainer_spec.eos_id)

    @property
    def eot_token(self) -> int | None:
        return self.eos_token_id

    def _control_id(self, i: int) -> int | None:
        return i if 0 <= i < self.n_vocab and self._tables.types[i] == R.CONTROL else None

    def piece_to_id(self, piece: str) -> int:
        """sentencepiece's ``piece_to_id`` (the unknown id for a string that is no piece)."""
        return R.piece_id(piece, self._tables)

    def id_to_piece(self, token: int) -> str:
        return self._tables.texts[token]

    def shard_identity(self) -> dict:
        """``fastbpe.shards``' identity: the sha256 covers what decides the ids (the
        repr of the model or spec: every field, in order), not the name."""
        import hashlib

        return {"name": self.name, "kind": self._kind, "n_vocab": self.n_vocab,
                "sha256": hashlib.sha256(repr(self._definition()).encode("utf-8")).hexdigest()}

    _kind = "sentencepiece"

    def _definition(self):
        """What ``__init__`` was given (the ``SpmModel``; an ``HFSpmSpec`` in the subclass)."""
        return self._model

    # ----------------------------------------------------------------------- pickling
    def __getstate__(self) -> dict:
        return {"definition": self._definition(), "name": self.name}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["definition"], name=state["name"])


def _native_reason(t: R.SpmTables) -> str | None:
    """Why the native core cannot run these tables, or None when it can."""
    if any(kind == R.UNUSED for kind in t.types):
        return "the model has unused pieces (sentencepiece's per-call rev_merge is in the reference only)"
    return None


def _check_batch(texts) -> list:
    if isinstance(texts, (str, bytes)):
        raise TypeError("expected a sequence of str, got a single " + type(texts).__name__)
    return list(texts)


def _check_tokens(tokens) -> list[int]:
    if isinstance(tokens, np.ndarray):
        tokens = tokens.tolist()
    out = []
    for i, token in enumerate(tokens):
        if isinstance(token, bool) or not isinstance(token, (int, np.integer)):
            raise TypeError(f"token at index {i} must be an int, not {type(token).__name__}")
        out.append(int(token))
    return out


class HFSentencePieceBPE(SentencePieceBPE):
    """A sentencepiece-style tokenizer.json (Llama 2, Mistral as transformers converts
    them) with the same API; HF ``tokenizers`` is the judge (``fastbpe.reference.hf_spm``,
    whose decisions apply: merges by pair rank, added tokens cut first, ``legacy``
    Prepend vs Metaspace ``prepend_scheme``). The added-token cut, normalizer and BPE
    run on the native ``fastbpe._hf_spm`` kernel when it is built (``native_reason``
    None; batches on native threads), else on the reference (``_HFCore``). Offsets
    (``encode_with_offsets``) are read off the kernel's ids (``_OffsetWalk``, the
    reference where it cannot vouch); ``decode`` runs on the reference.

    ``encode(text, allowed_special="all")`` equals HF's ``encode(text,
    add_special_tokens=False).ids``; ``decode`` equals HF's ``decode(ids)`` (special tokens
    skipped).
    """

    def __init__(self, spec, *, name: str = "tokenizer", source: str | None = None):
        from ..reference import hf_spm

        if not isinstance(spec, hf_spm.HFSpmSpec):
            raise TypeError(f"spec must be a fastbpe.reference.hf_spm.HFSpmSpec, not {type(spec).__name__}")
        self.name = name
        self._spec = spec
        self._hf = hf_spm
        self._id_to_token = {i: t for t, i in spec.vocab.items()}
        self._id_to_token.update({i: t for t, i in {**spec.added, **spec.special}.items()})
        self._special_tokens = dict(spec.special)
        self._specials = frozenset(spec.special)
        self._core = _HFCore(spec)
        self.native_reason = None if self._core.kernel is not None else "fastbpe._hf_spm is not built"

    @classmethod
    def from_file(cls, path: str | os.PathLike, *, name: str | None = None) -> "HFSentencePieceBPE":
        from ..formats._hfjson import read_json
        from ..formats.hf_spm import read_hf_spm

        path = Path(path)
        return cls(read_hf_spm(read_json(path), str(path)), name=name or path.stem, source=str(path))

    def __repr__(self) -> str:
        return f"<HFSentencePieceBPE {self.name!r}>"

    # The core cuts the allowed special tokens too (``_HFCore``), batches included.
    def _encode_allowed(self, text: str, allowed: frozenset[str]) -> list[int]:
        return self._core.encode(text, allowed)

    def _numpy_allowed(self, text, allowed, dtype):
        return self._core.encode_to_numpy(text, dtype, allowed)

    def _encode_batch_allowed(self, texts, allowed, num_threads):
        return self._core.encode_batch(texts, num_threads, allowed)

    def _numpy_batch_allowed(self, texts, allowed, num_threads, dtype):
        return self._core.encode_batch_to_numpy(texts, num_threads, dtype, allowed)

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """HF's ``encode(text, add_special_tokens=False)``: its ids and offsets (every
        special token matched, as HF does; ``fastbpe.Tokenizer`` reads these)."""
        text = fix_surrogates(_check_text(text))
        found = self._core.encode_with_offsets(text, self._specials)
        if found is not None:
            return found
        pairs = self._hf.encode_with_offsets(text, self._spec, self._specials)
        return [i for i, _ in pairs], [span for _, span in pairs]

    def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        """HF's ``decode(tokens)`` (special tokens skipped); ValueError for an unknown id."""
        tokens = _check_tokens(tokens)
        for pos, i in enumerate(tokens):
            if i not in self._id_to_token:
                raise ValueError(f"token id {i} at position {pos} is out of range [0, {self.n_vocab})")
        return self._hf.decode(tokens, self._spec, self._id_to_token)

    def decode_single_token_bytes(self, token: int) -> bytes:
        (token,) = _check_tokens([token])
        if token not in self._id_to_token:
            raise KeyError(f"Invalid token for decoding: {token}")
        if token in self._special_tokens.values():
            return b""
        piece = self._id_to_token[token]
        byte = self._hf._byte_of(piece) if self._spec.byte_fallback else None
        return bytes([byte]) if byte is not None else piece.replace(R.SPACE, " ").encode("utf-8")

    @property
    def n_vocab(self) -> int:
        return max(self._id_to_token) + 1

    def is_special_token(self, token: int) -> bool:
        return token in self._special_tokens.values()

    @property
    def unk_token_id(self) -> int | None:
        return self._spec.unk_id

    @property
    def bos_token_id(self) -> int | None:
        return self._special_tokens.get("<s>")

    @property
    def eos_token_id(self) -> int | None:
        return self._special_tokens.get("</s>")

    def piece_to_id(self, piece: str) -> int | None:
        return {**self._spec.vocab, **self._spec.added, **self._spec.special}.get(piece)

    def id_to_piece(self, token: int) -> str:
        return self._id_to_token[token]

    _kind = "hf-sentencepiece"

    def _definition(self):
        return self._spec


class _HFCore(ReferenceCore):
    """HF's BPE of a tokenizer.json as a core: the native ``fastbpe._hf_spm.HFSpmKernel``
    (the twin of ``reference.hf_spm.encode``: the added-token cut, the normalizer and
    BPE; batches on native threads without the GIL) when it is built, else the
    reference. ``allowed``: the special tokens matched (none for ``encode_ordinary``).
    Lone surrogates are encoded as U+FFFD on every path (the kernel finds them itself),
    so this core never raises UnicodeEncodeError.

    ``ignore_merges`` models (a word that is a token is taken whole: a dict look-up per
    word) stay on the words' path: the cut in Python, ``encode_words`` per text."""

    def __init__(self, spec):
        from ..reference import hf_spm

        self.spec, self.hf = spec, hf_spm
        self.kernel = HFSpmKernel(spec) if HFSpmKernel is not None else None
        self.walk = None    # _OffsetWalk, made at the first encode_with_offsets
        self.threaded = self.kernel is not None and not spec.ignore_merges

    def encode_with_offsets(self, text: str, allowed: frozenset[str]) -> tuple[list[int], list[tuple[int, int]]] | None:
        """``reference.hf_spm.encode_with_offsets`` from the kernel's ids: each id's
        characters walked through the pieces (``_OffsetWalk``); None when the kernel is
        not built or the walk cannot vouch for a text (the caller then runs the
        reference)."""
        if self.kernel is None or self.spec.ignore_merges:
            return None
        if self.walk is None:
            self.walk = _OffsetWalk(self.spec)
        if not self.walk.usable:
            return None
        ps = self.hf.pieces(text, self.spec, allowed, split_on_specials)
        return self.walk.run(ps, self.kernel.encode_pieces)

    def encode(self, text: str, allowed: frozenset[str] = frozenset()) -> list[int]:
        if self.threaded:
            return self.kernel.encode(text, allowed)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:   # lone surrogates (module docstring)
            text = fix_surrogates(text)
        if self.kernel is None:
            return self.hf.encode(text, self.spec, allowed)
        return [i for p in self.hf.parts(text, self.spec, allowed, split_on_specials)
                for i in ([p] if isinstance(p, int) else self.kernel.encode_words(p))]

    def encode_batch(self, texts: list[str], num_threads: int, allowed: frozenset[str] = frozenset()):
        if self.threaded:
            return self.kernel.encode_batch(texts, allowed, num_threads)
        return [self.encode(t, allowed) for t in texts]

    def encode_to_numpy(self, text: str, dtype: np.dtype, allowed: frozenset[str] = frozenset()) -> np.ndarray:
        if self.threaded:
            return self.kernel.encode_to_numpy(text, allowed, dtype)
        return np.array(self.encode(text, allowed), dtype=dtype)

    def encode_batch_to_numpy(self, texts: list[str], num_threads: int, dtype: np.dtype,
                              allowed: frozenset[str] = frozenset()) -> tuple[np.ndarray, np.ndarray]:
        if self.threaded:
            return self.kernel.encode_batch_to_numpy(texts, allowed, num_threads, dtype)
        return _rows_to_numpy(self.encode_batch(texts, num_threads, allowed), dtype)


class _OffsetWalk:
    """HF's offsets of a sentencepiece-style tokenizer.json's ids, read off the ids: the
    spans ``reference.hf_spm.encode_with_offsets`` defines (an added token spans its
    text; a BPE token the characters of its symbols, in the piece's coordinates where a
    ``▁`` put in front stands for the first character; a byte-fallback token its whole
    character; an unknown token its character, or the run ``fuse_unk`` fused).

    It walks each piece's characters (spaces escaped) beside its ids. A BPE token is its
    text there, checked by comparing strings; byte and unknown tokens are checked
    against the character's kind. Anything else (a token whose text is not there, a
    character a model without ``unk_token`` drops, ids left over) makes ``run`` return
    None, and the caller runs the reference: the walk never guesses. ``usable`` is False
    for files whose merges join byte or unknown tokens (a token's text is then not its
    characters)."""

    def __init__(self, spec):
        self.spec = spec
        self.text_of = {i: t for t, i in spec.vocab.items()}
        self.added_len = {i: len(t) for t, i in {**spec.added, **spec.special}.items()}
        self.byte_ids = {}
        if spec.byte_fallback:
            for b in range(256):
                i = spec.vocab.get(f"<0x{b:02X}>")
                if i is not None:
                    self.byte_ids[b] = i
        odd = set(self.byte_ids.values()) | ({spec.unk_id} if spec.unk_id is not None else set())
        self.usable = not any(l in odd or r in odd for l, r in spec.merges)
        self.kinds: dict[str, object] = {}   # character -> None (in vocab), its byte ids, or "unk"
        # per id (plain): its UTF-8 (None: the unknown token, or no vocabulary token), the
        # characters it adds (a byte token: 1 at an ASCII or lead byte) and spans
        size = max(spec.vocab.values(), default=-1) + 1
        self.token_bytes: list = [None] * size
        self.starts_char, self.width = [0] * size, [0] * size
        for t, i in spec.vocab.items():
            self.token_bytes[i] = t.encode("utf-8")
            self.starts_char[i] = self.width[i] = len(t)
        for b, i in self.byte_ids.items():
            self.token_bytes[i] = bytes([b])
            self.starts_char[i], self.width[i] = int(b < 0x80 or b >= 0xC0), 1
        if spec.unk_id is not None:
            self.token_bytes[spec.unk_id] = None

    def kind(self, ch: str):
        try:
            return self.kinds[ch]
        except KeyError:
            pass
        if ch in self.spec.vocab:
            k = None
        else:
            b = [self.byte_ids.get(x) for x in ch.encode("utf-8")] if self.spec.byte_fallback else [None]
            k = b if None not in b else "unk"
        self.kinds[ch] = k
        return k

    def run(self, pieces: list, encode) -> tuple[list[int], list[tuple[int, int]]] | None:
        """The ids and offsets of a text's ``pieces`` (``reference.hf_spm.pieces``);
        ``encode`` gives the ids of a list of pieces."""
        out, spans, offset = [], [], 0
        for p in pieces:
            if isinstance(p, int):
                out.append(p)
                spans.append((offset, offset + self.added_len[p]))
                offset += self.added_len[p]
                continue
            piece, lead = p
            w = (R.SPACE if lead else "") + piece
            if self.spec.replace_space:
                w = w.replace(" ", R.SPACE)
            ids = encode([p])
            if not self.plain(w, lead, offset, ids, spans) and not self.walk(w, lead, offset, ids, spans):
                return None
            out += ids
            offset += len(piece)
        return out, spans

    def plain(self, w: str, lead: int, offset: int, ids: list[int], out: list) -> bool:
        """The common case in bulk: BPE and byte-fallback tokens whose bytes, joined, are
        the piece's UTF-8 (no unknown token, no dropped character). A BPE token spans its
        text's length; a byte token its character, which starts at an ASCII or lead byte
        (merges never join byte tokens: ``usable``). False (nothing written) otherwise."""
        tb, width, starts_char = self.token_bytes, self.width, self.starts_char
        try:
            if b"".join([tb[t] for t in ids]) != w.encode("utf-8"):
                return False
        except (TypeError, IndexError):   # an unknown token (None), an added token's id
            return False
        ends = list(accumulate([starts_char[t] for t in ids], initial=offset - lead))[1:]
        starts = [e - width[t] for e, t in zip(ends, ids)]
        j = 0
        while lead and j < len(ids) and (starts[j] < offset or ends[j] < offset + 1):
            starts[j], ends[j] = max(starts[j], offset), max(ends[j], offset + 1)   # the ▁ put in front
            j += 1
        out.extend(zip(starts, ends))
        return True

    def walk(self, w: str, lead: int, offset: int, ids: list[int], out: list) -> bool:
        """The piece token by token; False when a token is not what its characters say
        (``out`` is then thrown away by ``run``'s caller)."""
        spec, text_of, k = self.spec, self.text_of, 0
        i, n = 0, len(w)
        while i < n:
            if k >= len(ids):
                return False
            t = ids[k]
            kind = self.kind(w[i])
            if kind is None:            # a BPE token: its text is here
                tt = text_of.get(t)
                if tt is None or not w.startswith(tt, i) or not tt:
                    return False
                spans = [(i, i + len(tt))]
            elif kind == "unk":
                if spec.unk_id is None or t != spec.unk_id:
                    return False         # dropped characters: the reference says
                j = i + 1
                while spec.fuse_unk and j < n and self.kind(w[j]) == "unk":
                    j += 1
                spans = [(i, j)]
            else:                       # the character's bytes, one token each
                if ids[k:k + len(kind)] != kind:
                    return False
                spans = [(i, i + 1)] * len(kind)
            for s, e in spans:
                out.append((offset + max(s - lead, 0), offset + max(e - lead, 1)))
                k += 1
            i = spans[-1][1]
        return k == len(ids)
