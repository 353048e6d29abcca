"""Split patterns: the exact strings tiktoken uses, and a resolver for custom ones.

Decision (Unicode version): character classes such as ``\\p{L}`` are those of the
``regex`` module at Unicode 16.0, the Unicode version of tiktoken's own regex engine,
so that ids equal tiktoken's on every character. The native pre-tokenizers' tables were
generated from regex 2025.9.18 (Unicode 16.0) by ``tools/gen_unicode_tables.py`` (so are
the general categories the split programs build ``\\p{..}`` and ``\\s`` from at load); the
test extra pins that release, and tests check the tables against both ``regex`` and
tiktoken for every code point. With a newer ``regex`` (Unicode 17: e.g. U+18D80 became
a letter) this reference differs from tiktoken and the native code on newly assigned
characters only; move all three together.
"""
from __future__ import annotations

import functools

import regex

#: GPT-2 / r50k_base / p50k_base (tiktoken's faster, equivalent form of the original).
GPT2 = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""

#: cl100k_base (GPT-3.5 / GPT-4).
CL100K = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

#: o200k_base (GPT-4o).
O200K = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

#: Llama 3 / 3.1 / 3.2 / 3.3 (Meta's ``llama_models/llama3/tokenizer.py``): cl100k's
#: alternatives without possessive quantifiers, and ``(?i:...)`` contractions.
LLAMA3 = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

#: Qwen (``tokenization_qwen.py``, Qwen2/3's tokenizer.json): Llama 3's, one digit a chunk.
QWEN = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")

#: cl100k's pattern with one digit a chunk (``\p{N}`` for ``\p{N}{1,3}+``): what Qwen's
#: pattern is after ``bpe.hf.llama3_cut``, as Llama 3's is cl100k's; the hand-written
#: cl100k splitter runs it with its digit-run parameter 1 (``SPLIT_CL100K_DIGIT1``).
CL100K_DIGIT1 = CL100K.replace(r"\p{N}{1,3}+", r"\p{N}")

#: Llama 4 (``llama_models/llama4/tokenizer.py``'s ``O200K_PATTERN``): o200k's, same string.
LLAMA4 = O200K

#: Short names accepted wherever a pattern is asked for.
PATTERNS = {
    "gpt2": GPT2,
    "r50k": GPT2,
    "r50k_base": GPT2,
    "cl100k": CL100K,
    "cl100k_base": CL100K,
    "gpt4": CL100K,
    "o200k": O200K,
    "o200k_base": O200K,
    "llama3": LLAMA3,
    "llama4": LLAMA4,
    "qwen": QWEN,
}


def resolve_pattern(pattern: str) -> str:
    """Return the pattern string for a short name, or the string itself.

    >>> resolve_pattern("gpt2") == GPT2
    True
    """
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str, not {type(pattern).__name__}")
    return PATTERNS.get(pattern, pattern)


@functools.lru_cache(maxsize=64)
def compile_pattern(pattern: str) -> regex.Pattern:
    """Compile a (resolved) pattern with the ``regex`` module; errors name the pattern."""
    try:
        return regex.compile(resolve_pattern(pattern))
    except regex.error as exc:
        raise ValueError(f"invalid split pattern {pattern!r}: {exc}") from None


def split_text(text: str, pattern: str = CL100K) -> list[str]:
    """Split text into chunks; BPE never merges across chunk boundaries.

    >>> split_text("Hello world!!", GPT2)
    ['Hello', ' world', '!!']
    """
    return compile_pattern(pattern).findall(text)
