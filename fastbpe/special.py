"""The special-token policy, in one place: when text becomes a control id.

A special token (``<|endoftext|>``, ``[SEP]``) is a control id that a model trusts. Text
from a user must not be able to produce one unless the caller says so. This module is
the one copy of that rule, with tiktoken's semantics; ``Encoding``, ``WordPiece``, the
CLI and the shard writers all resolve their arguments here.

The rule (tiktoken's ``Encoding.encode``):

- ``allowed_special`` (a set of str, or ``"all"``) lists the special tokens whose text
  becomes their id. Names that are not special tokens of the vocabulary are ignored, as
  in tiktoken, so one set can be reused across encodings.
- ``disallowed_special`` (a collection of str, or ``"all"`` = every special token not
  allowed) lists strings that no text may hold: finding one raises ValueError. Any
  string may be listed, special token or not, as in tiktoken.
- ``disallowed_special=()`` turns the check off: special-token text that is not allowed
  is encoded as ordinary text.

>>> specials = frozenset({"<|endoftext|>", "<|fim|>"})
>>> a, d = resolve_special_sets(set(), "all", specials)          # the default
>>> sorted(a), sorted(d)
([], ['<|endoftext|>', '<|fim|>'])
>>> a, d = resolve_special_sets({"<|endoftext|>", "<|other|>"}, "all", specials)
>>> sorted(a), sorted(d)                                          # unknown names ignored
(['<|endoftext|>'], ['<|fim|>'])
>>> a, d = resolve_special_sets("all", (), specials)
>>> sorted(a), sorted(d)
(['<|endoftext|>', '<|fim|>'], [])
>>> find_disallowed("a <|fim|> b", frozenset({"<|fim|>"}))
('<|fim|>', 2)
"""
from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import AbstractSet, Collection, Literal

import regex

NO_SPECIALS: frozenset[str] = frozenset()

AllowedSpecial = Literal["all"] | AbstractSet[str]
DisallowedSpecialArg = Literal["all"] | Collection[str]


def _is_all(value) -> bool:
    return isinstance(value, str) and value == "all"


def resolve_special_sets(
    allowed_special, disallowed_special, specials: frozenset[str]
) -> tuple[frozenset[str], frozenset[str]]:
    """``(allowed, disallowed)`` as frozensets, from tiktoken-style arguments.

    ``specials`` is the vocabulary's set of special tokens. ``allowed`` is always a
    subset of it; ``disallowed`` may hold any strings. Wrong types raise TypeError
    naming the argument.
    """
    # the defaults, asked for on every call: no set to build
    if type(allowed_special) in (set, frozenset) and not allowed_special and _is_all(disallowed_special):
        return NO_SPECIALS, specials
    if _is_all(allowed_special):
        allowed = specials
    elif isinstance(allowed_special, (str, bytes)) or not isinstance(allowed_special, Iterable):
        raise TypeError(f"allowed_special must be 'all' or a set of str, not {allowed_special!r}")
    else:
        allowed = frozenset(allowed_special)
        for token in allowed:
            if not isinstance(token, str):
                raise TypeError(f"allowed_special must hold str, got {token!r}")
        allowed = allowed & specials
    if _is_all(disallowed_special):
        return allowed, specials - allowed
    if isinstance(disallowed_special, (str, bytes)) or not isinstance(disallowed_special, Iterable):
        raise TypeError(f"disallowed_special must be 'all' or a collection of str, not {disallowed_special!r}")
    disallowed = frozenset(disallowed_special)
    for token in disallowed:
        if not isinstance(token, str):
            raise TypeError(f"disallowed_special must hold str, got {token!r}")
    return allowed, disallowed


@functools.lru_cache(maxsize=128)
def special_token_regex(tokens: frozenset[str]) -> regex.Pattern:
    """One regex matching any of tokens, longest first (the leftmost-longest match)."""
    return regex.compile("|".join(regex.escape(t) for t in sorted(tokens, key=lambda t: (-len(t), t))))


def find_disallowed(text: str, disallowed: frozenset[str]) -> tuple[str, int] | None:
    """The first disallowed string in text and its character position, or None."""
    if not disallowed:
        return None
    match = special_token_regex(disallowed).search(text)
    return (match.group(), match.start()) if match else None


def raise_disallowed_special_token(token: str, position: int, index: int | None = None):
    """tiktoken's error for disallowed special-token text, with where it was found
    (``index``: which text of a batch)."""
    where = f"at position {position}" + ("" if index is None else f" of text {index} of the batch")
    raise ValueError(
        f"Encountered text corresponding to disallowed special token {token!r} {where}.\n"
        f"If you want this text to be encoded as a special token, pass it to `allowed_special`, "
        f"e.g. `allowed_special={{{token!r}, ...}}`.\n"
        f"If you want this text to be encoded as normal text, disable the check for this token "
        f"by passing `disallowed_special=(enc.special_tokens_set - {{{token!r}}})`.\n"
        f"To disable this check for all special tokens, pass `disallowed_special=()`.\n"
    )


def check_no_disallowed(text: str, disallowed: frozenset[str], index: int | None = None) -> None:
    """Raise tiktoken's ValueError if text holds a disallowed string."""
    found = find_disallowed(text, disallowed)
    if found is not None:
        raise_disallowed_special_token(found[0], found[1], index)
