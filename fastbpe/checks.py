"""Argument checks shared by every layer: one copy of each rule, one message.

Wrong types raise TypeError, wrong values ValueError naming the argument and the value
(the project's rule for bad input). Callers that accept ``None`` ("all cores", "the
default") say so with ``allow_none``; what ``None`` then means stays with the caller.

>>> check_num_threads(4)
4
>>> check_num_threads(None, allow_none=True) is None
True
>>> check_num_threads(0)
Traceback (most recent call last):
ValueError: num_threads must be between 1 and 1024, got 0
>>> check_num_threads(True)
Traceback (most recent call last):
TypeError: num_threads must be an int, not bool
>>> check_dtype("uint16", 70000, "this tokenizer")
Traceback (most recent call last):
ValueError: dtype uint16 cannot hold ids up to 70000 of this tokenizer; use uint32
"""
from __future__ import annotations

from numbers import Integral

#: The most threads a batch or a counter may ask for (a typo such as 10**9 is an error,
#: not a billion threads).
MAX_THREADS = 1024


def is_int(value) -> bool:
    """Whether ``value`` is an int or a numpy integer, and not a bool: the ids, counts
    and sizes every layer accepts. numpy registers its integers as ``numbers.Integral``,
    so the test needs no numpy (``import fastbpe`` does not load it).

    >>> is_int(3), is_int(True), is_int(3.0)
    (True, False, False)
    """
    return type(value) is int or (not isinstance(value, bool) and isinstance(value, Integral))


def check_num_threads(num_threads, *, allow_none: bool = False) -> int | None:
    """``num_threads`` as an int from 1 to ``MAX_THREADS`` (numpy integers accepted,
    ``bool`` refused); ``None`` passes through when ``allow_none``."""
    if num_threads is None and allow_none:
        return None
    if not is_int(num_threads):
        accepted = "an int or None" if allow_none else "an int"
        raise TypeError(f"num_threads must be {accepted}, not {type(num_threads).__name__}")
    if not 1 <= num_threads <= MAX_THREADS:
        raise ValueError(f"num_threads must be between 1 and {MAX_THREADS}, got {num_threads}")
    return int(num_threads)


def check_positive_int(name: str, value) -> int | None:
    """``value`` as None or an int >= 1 (a count of parts or ranges, not of threads).

    >>> check_positive_int("n_parts", 3), check_positive_int("n_parts", None)
    (3, None)
    """
    return check_int(name, value, low=1, allow_none=True)


def check_dtype(dtype, max_id: int, what: str) -> np.dtype:
    """``dtype`` as numpy's native uint16 or uint32, one that holds every id up to
    ``max_id`` (``what`` names the tokenizer in the message)."""
    import numpy as np   # here: a dtype is asked for when arrays are, never at import

    UINT16, UINT32 = np.dtype(np.uint16), np.dtype(np.uint32)
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype must be uint16 or uint32, not {dtype!r}") from None
    if dt != UINT16 and dt != UINT32:
        raise ValueError(f"dtype must be uint16 or uint32, not {dt}")
    if dt == UINT16 and max_id > 0xFFFF:
        raise ValueError(f"dtype uint16 cannot hold ids up to {max_id} of {what}; use uint32")
    return dt


def is_wordpiece(tok) -> bool:
    """Whether ``tok`` is a WordPiece tokenizer (duck-typed, so that the layers that
    take either kind need not import both).

    >>> from fastbpe.wordpiece import WordPiece
    >>> is_wordpiece(WordPiece({"[UNK]": 0})), is_wordpiece("text")
    (True, False)
    """
    return hasattr(tok, "tokenize") and not hasattr(tok, "decode_single_token_bytes")


#: The largest ``vocab_size`` a trainer takes: the native trainers' ids are int32.
MAX_VOCAB_SIZE = 2**31 - 1


def check_int(name: str, value, *, low: int | None = None, high: int | None = None,
              allow_none: bool = False) -> int | None:
    """``value`` as a Python int, checked: the integer arguments of the package go
    through here (``check_num_threads`` is its rule for threads).

    An integer is what ``is_int`` says (numpy's integers too: a size read from an array
    is accepted like a literal; ``bool`` and floats are not: TypeError). ValueError
    names the argument when the value is below ``low`` or above ``high``. ``None``
    passes through when ``allow_none``.

    >>> import numpy as np
    >>> check_int("vocab_size", np.int64(300), low=1)
    300
    >>> check_int("vocab_size", 300.0)
    Traceback (most recent call last):
    TypeError: vocab_size must be an int, not float
    >>> check_int("min_frequency", -1, low=0)
    Traceback (most recent call last):
    ValueError: min_frequency must be >= 0, got -1
    """
    if value is None and allow_none:
        return None
    if not is_int(value):
        accepted = "an int or None" if allow_none else "an int"
        raise TypeError(f"{name} must be {accepted}, not {type(value).__name__}")
    if (low is not None and value < low) or (high is not None and value > high):
        if low is not None and high is not None:
            raise ValueError(f"{name} must be between {low} and {high}, got {value}")
        raise ValueError(f"{name} must be {'>= ' + str(low) if high is None else '<= ' + str(high)}, got {value}")
    return int(value)
