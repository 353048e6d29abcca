"""What a document is, and where a document may be cut: the specification.

Every reader of a corpus (``train_bpe``, ``train_wordpiece``, ``count``, ``encode``,
``encode --shards``, ``encode_files``, ``stats``, Dask) follows these rules through
``fastbpe.io``, whose streaming readers are tested against the plain functions here.

Decisions
---------
* **A corpus is a list of sources; a source yields documents; a document is a non-empty
  str.** Empty documents are dropped everywhere (a blank line is not a document), so every
  entry point counts the same documents.
* **Text files** (``.txt`` or any name; gzip, zstd and xz data are recognised by their magic
  bytes, not their names; a compressed stream that does not end where its format says is
  an error, never a shorter file: the rule is ``fastbpe.io.streams``') are cut into
  documents by a rule the caller chooses:

  - ``"file"`` (**the default**): the whole file is one document. A GPT-style corpus of text
    files is a folder of documents (source files, books, pages, man pages), and tokens
    that span newlines (``"\\n\\n"``, ``"\\n    "`` indentation) must be learnable, which
    lines-as-documents forbids. A file that holds many documents says how they are
    separated (``sep:``) or comes as JSON Lines.
  - ``"lines"``: split on ``"\\n"`` (only; a ``"\\r"`` stays in its line).
  - ``"blank-line"`` (paragraphs): split on a newline followed by one or more lines that
    are empty or hold only spaces, tabs and ``"\\r"`` (``BLANK_LINE``).
  - ``"sep:STR"``: split on ``STR`` (e.g. ``sep:<|endoftext|>``), leftmost first, as
    ``str.split`` does.

  **Separators never belong to documents**: the newline, the blank lines and ``STR`` are
  dropped, so a document's tokens never depend on how its neighbours were separated.
* **JSON Lines** (``.jsonl``/``.json`` names, possibly ``.gz``/``.zst``/``.xz``): every
  line that is not blank is a JSON object whose ``field`` (default ``"text"``) is a str;
  that str is the document (the rules in full: ``reference.jsonl``).
* **Parquet**: the str values of ``column`` (default ``"text"``), row by row.
* **Iterables of str**: one document per item.
* **Text encoding.** Files are UTF-8; strings with lone surrogates follow tiktoken's rule
  (``reference.bpe.fix_surrogates``).

Cuts
----
A document longer than a reader's block is handed on in pieces. A piece boundary is put
only where the tokenizer gives the same result for the two sides as for the whole: the
ids of ``doc`` equal the ids of ``doc[:i]`` followed by those of ``doc[i:]``, and the
chunks counted in training are the same. ``bpe_cut`` gives the rule for the built-in
byte-level patterns (gpt2, cl100k, o200k and the encodings that share them); a custom
regex is never cut. ``wordpiece_cut`` gives BERT's. The arguments, as corollaries:

*Corollary 1 (letter, then a non-letter).* Let ``b[i-1]`` be an ASCII letter and ``b[i]``
an ASCII byte that is neither a letter nor ``"'"``. In all three patterns a chunk that
holds a letter is a letter run (with at most one leading non-letter) or a contraction,
optionally (o200k) followed by a contraction suffix, which starts with ``"'"``. Such a
chunk stops before ``b[i]``, so ``i`` is a chunk boundary; and the only parts of any
alternative that read ``b[i]`` while matching before ``i`` are the end of a letter run
and the suffix's ``"'"``, which fail on ``b[i]`` as they fail at the end of the text, so
the chunks of ``doc[:i]`` are those of ``doc`` before ``i``. No pattern looks behind, so
the chunks from ``i`` on do not depend on what precedes ``i``.

*Corollary 2 (a lone newline between plain characters).* Let ``b[i-1]`` be ``"\\n"`` and
``b[i-2]``, ``b[i]`` printable ASCII other than the space, ``b[i]`` not ``"/"``. The chunk
holding the newline is whitespace only or (cl100k/o200k) punctuation followed by newlines
(o200k: also ``"/"``): none goes on past a newline into such a character. A lone ``"\\n"``
after a non-space is one chunk before a plain character and at the end of the text
alike, under ``\\s+(?!\\S)``, ``\\s*[\\r\\n]+`` and ``\\s++$``. (The native encoder cuts long
texts for its threads by the same rule, in code points.)

*Corollary 3 (special tokens).* Special tokens are matched before the pattern, so no cut
may fall inside an occurrence of one; a cut is refused when any of the tokenizer's
special tokens occurs across it.

*Corollary 4 (WordPiece).* BERT splits words on whitespace after a per-character
normalisation, and accents are stripped per word: a position ``i`` with ``b[i]`` an ASCII
space, tab, ``"\\r"`` or ``"\\n"`` ends a word on its left and starts whitespace on its
right, so the two sides give the words of the whole.

>>> split_documents("a\\nb\\n\\nc", "lines")
['a', 'b', 'c']
>>> split_documents("p1 l1\\np1 l2\\n \\n\\np2\\n", "blank-line")
['p1 l1\\np1 l2', 'p2\\n']
>>> split_documents("x<|endoftext|>y<|endoftext|>", "sep:<|endoftext|>")
['x', 'y']
>>> split_documents("whole\\n\\nfile\\n", "file")
['whole\\n\\nfile\\n']
>>> [i for i in range(1, 10) if bpe_cut(b"Hi, it's 2", i)]
[2, 8]
"""
from __future__ import annotations

import re
from collections.abc import Iterable

#: The document rules of text files, as the CLI and ``docs=`` spell them.
RULES = ("file", "lines", "blank-line", "sep:STR")

#: The default rule for text files (see the module docstring for why).
DEFAULT_RULE = "file"

#: The separator of ``"blank-line"``: a newline, then one or more blank lines.
BLANK_LINE = re.compile(r"\n(?:[ \t\r]*\n)+")


def parse_rule(rule: str) -> tuple[str, str | None]:
    """``(kind, separator)`` of a document rule: the separator of ``sep:STR``, else None.

    >>> parse_rule("sep:<|endoftext|>")
    ('sep', '<|endoftext|>')
    >>> parse_rule("paragraphs")
    Traceback (most recent call last):
    ...
    ValueError: unknown document rule 'paragraphs': use file, lines, blank-line or sep:STR
    """
    if not isinstance(rule, str):
        raise TypeError(f"the document rule must be a str, not {type(rule).__name__}")
    if rule.startswith("sep:"):
        if len(rule) == 4:
            raise ValueError("document rule 'sep:' needs a separator, e.g. sep:<|endoftext|>")
        return "sep", rule[4:]
    if rule in ("file", "lines", "blank-line"):
        return rule, None
    raise ValueError(f"unknown document rule {rule!r}: use file, lines, blank-line or sep:STR")


def split_documents(text: str, rule: str = DEFAULT_RULE) -> list[str]:
    """The documents of one text file's ``text`` under ``rule`` (empty ones dropped)."""
    kind, sep = parse_rule(rule)
    if kind == "file":
        parts = [text]
    elif kind == "lines":
        parts = text.split("\n")
    elif kind == "blank-line":
        parts = BLANK_LINE.split(text)
    else:
        parts = text.split(sep)
    return [p for p in parts if p]


def _is_letter(c: int) -> bool:
    return 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A


def _plain(c: int) -> bool:
    return 0x21 <= c <= 0x7E


def _spans_special(b: bytes, i: int, specials: Iterable[bytes]) -> bool:
    """Whether an occurrence of one of ``specials`` starts before ``i`` and ends after it."""
    for s in specials:
        start = b.find(s, max(0, i - len(s) + 1), i + len(s) - 1)
        while 0 <= start < i:
            if start + len(s) > i:
                return True
            start = b.find(s, start + 1, i + len(s) - 1)
    return False


def bpe_cut(b: bytes, i: int, specials: Iterable[bytes] = ()) -> bool:
    """Whether a document's UTF-8 ``b`` may be cut at byte ``i`` for the built-in byte-level
    patterns (Corollaries 1-3 of the module docstring)."""
    if not 0 < i < len(b):
        return False
    c0, c1 = b[i - 1], b[i]
    ok = _is_letter(c0) and c1 < 0x80 and not _is_letter(c1) and c1 != 0x27
    if not ok and c0 == 0x0A and i >= 2:
        ok = _plain(b[i - 2]) and _plain(c1) and c1 != 0x2F
    return ok and not _spans_special(b, i, specials)


def wordpiece_cut(b: bytes, i: int, specials: Iterable[bytes] = ()) -> bool:
    """Whether a document's UTF-8 ``b`` may be cut at byte ``i`` for BERT's WordPiece
    (Corollaries 3-4)."""
    if not 0 < i < len(b):
        return False
    return b[i] in b" \t\r\n" and not _spans_special(b, i, specials)


__all__ = ["BLANK_LINE", "DEFAULT_RULE", "RULES", "bpe_cut", "parse_rule",
           "split_documents", "wordpiece_cut"]
