"""The pure-Python twin of the native ``CoreBPE``: same interface, reference semantics.

``fastbpe.Encoding`` holds the policy (validation, special-token checks) and delegates
the algorithm to a core. This one is built from ``reference.bpe`` functions only, so
tests can run any ``Encoding`` on it and compare with the native core id for id.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from . import bpe
from .bpe import fix_surrogates  # also the native cores' (_encode, _jobs) import of it
from ..checks import is_int


class DisallowedSpecial(ValueError):
    """A core's report that text ``index`` of a call holds a disallowed special token.

    Cores only say which text; ``Encoding`` finds the token and its position with the
    regex module and raises tiktoken's message."""

    def __init__(self, index: int):
        super().__init__(f"text {index} holds a disallowed special token")
        self.index = index


def holds_any(text: str, tokens: Iterable[str]) -> bool:
    """Whether any of tokens occurs in text: tiktoken's disallowed-special check, whose
    regex (the tokens as alternative literals) matches exactly where one occurs. The
    text is checked as given, before any surrogate fix-up; "" occurs in every text.

    >>> holds_any("a <|x|> b", {"<|x|>"}), holds_any("a b", {"<|x|>"})
    (True, False)
    """
    return any(tok in text for tok in tokens)


def _retry_without_surrogates(encode):
    # Encoding tries the text as it is and fixes it only if it has no UTF-8 form, so
    # ordinary text pays nothing for this rule.
    def wrapper(self, text, *args):
        try:
            return encode(self, text, *args)
        except UnicodeEncodeError:
            return encode(self, fix_surrogates(text), *args)

    wrapper.__doc__ = encode.__doc__
    return wrapper


def _piece_bytes(piece) -> bytes:
    if isinstance(piece, bytearray):
        return bytes(piece)
    if not isinstance(piece, bytes):
        raise TypeError(f"piece must be bytes, not {type(piece).__name__}")
    return piece


class CoreBPE:
    """Encode and decode with tiktoken's rules.

    Special tokens may share an id (tiktoken's o200k_harmony has ``<|endofprompt|>`` and
    ``<|reserved_200018|>`` at 200018). Each name encodes to the id. Decision: the id
    decodes to the bytes of the *first* name with it in ``special_tokens`` (an ordinary
    token with the id would win over both; ``Encoding`` rejects that case). tiktoken
    decodes it to the last name its Rust hash map iterates over, an order that is fixed
    by the hash function, not by the dict (``{"<|a|>": 256, "<|b|>": 256, "<|c|>": 256}``
    and its reverse both decode 256 to ``<|b|>`` in tiktoken 0.14); first-in-dict is a
    rule a user can read, and it agrees with tiktoken on o200k_harmony.

    >>> core = CoreBPE({bytes([i]): i for i in range(256)} | {b"ab": 256}, {"<s>": 257}, r".+")
    >>> core.encode("ab<s>", {"<s>"})
    [256, 257]
    """

    def __init__(self, mergeable_ranks: dict[bytes, int], special_tokens: dict[str, int], pat_str: str,
                 unreachable=()):
        """``unreachable``: tokens that decode but that encoding never produces (left out
        of the table encoding reads: a piece that is one is merged from its bytes). HF's
        ``ignore_merges: false`` on the rank rule (``fastbpe.bpe.hf`` proves when that is
        exact).

        >>> ranks = {bytes([i]): i for i in range(256)} | {b"ab": 256, b"abc": 257}
        >>> CoreBPE(ranks, {}, r".+", unreachable={b"abc"}).encode_ordinary("abc")
        [256, 99]
        """
        missing = [t for t in unreachable if t not in mergeable_ranks]
        if missing:
            raise ValueError(f"unreachable token {missing[0]!r} is not in mergeable_ranks")
        self._unreachable = frozenset(unreachable)
        self._all_ranks = dict(mergeable_ranks)
        self._ranks = {t: r for t, r in self._all_ranks.items() if t not in self._unreachable}
        self._special = dict(special_tokens)
        self._pat_str = pat_str
        self._decoder = {rank: tok for tok, rank in self._all_ranks.items()}
        for s, i in self._special.items():   # the first name of a shared id wins (see above)
            self._decoder.setdefault(i, s.encode("utf-8"))

    # encoding ------------------------------------------------------------------------
    @_retry_without_surrogates
    def encode_ordinary(self, text: str) -> list[int]:
        return bpe.encode_ordinary(text, self._ranks, self._pat_str)

    def encode(self, text: str, allowed_special: Iterable[str], disallowed_special=frozenset()) -> list[int]:
        """Ids of text with allowed special tokens as their ids; DisallowedSpecial(0) if
        text holds one of disallowed_special."""
        self._check_disallowed([text], disallowed_special)
        return self._encode_allowed(text, allowed_special)

    @_retry_without_surrogates
    def _encode_allowed(self, text: str, allowed_special: Iterable[str]) -> list[int]:
        return bpe.encode(text, self._ranks, self._pat_str, self._special, allowed_special)

    @staticmethod
    def _check_disallowed(texts: Sequence[str], disallowed_special) -> None:
        # every text is checked before any is encoded, as tiktoken's encode_batch does
        if disallowed_special:
            for i, text in enumerate(texts):
                if holds_any(text, disallowed_special):
                    raise DisallowedSpecial(i)

    def encode_ordinary_batch(self, texts: Sequence[str], num_threads: int = 1) -> list[list[int]]:
        return [self.encode_ordinary(t) for t in texts]

    def encode_batch(
        self, texts: Sequence[str], allowed_special, num_threads: int = 1, disallowed_special=frozenset()
    ) -> list[list[int]]:
        self._check_disallowed(texts, disallowed_special)
        return [self._encode_allowed(t, allowed_special) for t in texts]

    # numpy is imported by the calls that return arrays, never by ``import fastbpe``
    def encode_to_numpy(
        self, text: str, allowed_special, dtype="uint32", disallowed_special=frozenset()
    ) -> np.ndarray:
        import numpy as np

        return np.asarray(self.encode(text, allowed_special, disallowed_special), dtype=dtype)

    def encode_batch_to_numpy(
        self, texts, allowed_special, num_threads: int = 1, dtype="uint32", disallowed_special=frozenset()
    ):
        import numpy as np

        encoded = self.encode_batch(texts, allowed_special, disallowed_special=disallowed_special)
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        flat = np.fromiter((i for e in encoded for i in e), dtype=dtype, count=int(offsets[-1]))
        return flat, offsets

    def encode_utf8_to_numpy(
        self, data, allowed_special, num_threads: int = 1, dtype="uint32", disallowed_special=frozenset()
    ) -> np.ndarray:
        """``encode_to_numpy`` of the text of UTF-8 bytes; ValueError naming the byte
        offset of the first invalid byte (the strict codec's ``start``)."""
        data = bytes(data)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"not UTF-8: invalid byte 0x{data[exc.start]:02x} at byte offset {exc.start}") from None
        return self.encode_to_numpy(text, allowed_special, dtype, disallowed_special)

    def encode_single_token(self, piece: bytes) -> int:
        if piece in self._ranks:
            return self._ranks[piece]
        try:
            return self._special[piece.decode("utf-8")]
        except (UnicodeDecodeError, KeyError):
            raise KeyError(piece) from None

    def encode_single_piece(self, piece: bytes) -> list[int]:
        """One piece of bytes, no pre-tokenization: its id if it is a token, else merged
        from single bytes (tiktoken's ``encode_single_piece``); [] for b"".

        >>> CoreBPE({bytes([i]): i for i in range(256)} | {b"ab": 256}, {}, ".").encode_single_piece(b"abc")
        [256, 99]
        """
        piece = _piece_bytes(piece)
        return bpe.bpe_encode_chunk(piece, self._ranks) if piece else []

    def byte_pair_encode(self, piece: bytes) -> list[int]:
        """One piece merged from single bytes, without the whole-piece lookup (tiktoken's
        ``byte_pair_encode``: a token that merging never reaches stays split)."""
        piece = _piece_bytes(piece)
        return bpe.merge_bytes(piece, self._ranks) if piece else []

    # decoding ------------------------------------------------------------------------
    def decode_bytes(self, tokens: Iterable[int]) -> bytes:
        """The tokens' bytes; TypeError names the first item that is not an int (bool is
        not one), KeyError the first unknown id."""
        ids = []
        for i, t in enumerate(tokens):
            if not is_int(t):
                raise TypeError(f"token ids must be ints, got {t!r} at index {i}")
            ids.append(int(t))
        return bpe.decode_bytes(ids, self._decoder)

    def decode_batch_bytes(self, batch: Sequence[Sequence[int]], num_threads: int = 1) -> list[bytes]:
        return [self.decode_bytes(t) for t in batch]

    def decode_single_token_bytes(self, token: int) -> bytes:
        if not is_int(token):
            raise TypeError(f"token must be an int, not {type(token).__name__}")
        try:
            return self._decoder[token]
        except KeyError:
            raise KeyError(f"unknown token id {token!r}") from None

    def token_byte_values(self) -> list[bytes]:
        return sorted(self._all_ranks)

    def __reduce__(self):
        return (CoreBPE, (self._all_ranks, self._special, self._pat_str, self._unreachable))
