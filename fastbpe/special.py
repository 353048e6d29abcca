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
    """One regex matching any of tokens, the longest where several start at a place (the
    leftmost-longest match): the tokens as a trie (``_trie_pattern``), which compiles
    and searches about twice as fast as an alternation of hundreds of tokens (Mistral
    v3's 751 control tokens); an alternation sorted longest first for very long ones."""
    if max(map(len, tokens), default=0) > 400:   # the trie's recursion is one level a character
        return regex.compile("|".join(regex.escape(t) for t in sorted(tokens, key=lambda t: (-len(t), t))))
    return regex.compile(_trie_pattern(tokens))


def _trie_pattern(tokens: Iterable[str]) -> str:
    """A regex of the (non-empty) tokens as a trie. At each node the longer continuations
    are tried before ending there, so a match is the longest token at its start: the
    tokens that match at one place are prefixes of one another, one path of the trie.

    >>> _trie_pattern({"<s>", "</s>", "<"})
    '<(?:/s>|s>|)'
    """
    root: dict = {}
    for token in tokens:
        node = root
        for ch in token:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:
        parts = [regex.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if "" in node:
            parts.append("")   # ending here: tried last
        return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"

    return emit(root)


def find_disallowed(text: str, disallowed: frozenset[str]) -> tuple[str, int] | None:
    """The first disallowed string in text and its character position, or None."""
    if not disallowed:
        return None
    match = special_token_regex(disallowed).search(text)
    return (match.group(), match.start()) if match else None


def split_on_specials(text: str, tokens: frozenset[str]) -> list[str | tuple[str]]:
    """The text between the ``tokens`` and each token found (as a 1-tuple), in order: the
    leftmost token first, the longest where several start there. The same list as the
    reference's ``fastbpe.reference.sentencepiece.split_specials`` (its twin, tested),
    in one regex search per token found instead of a loop over the characters: an
    alternation sorted longest first matches the longest token at the leftmost place.

    >>> split_on_specials("a<s>b</s>", frozenset({"<s>", "</s>"}))
    ['a', ('<s>',), 'b', ('</s>',)]
    >>> split_on_specials("[INST][INST]x", frozenset({"[INST]", "[INST][INST]"})), split_on_specials("", frozenset({"<s>"}))
    ([('[INST][INST]',), 'x'], [])
    """
    if not tokens:
        return [text] if text else []
    out, start = [], 0
    for match in special_token_regex(tokens).finditer(text):
        if start < match.start():
            out.append(text[start:match.start()])
        out.append((match.group(),))
        start = match.end()
    if start < len(text):
        out.append(text[start:])
    return out


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
