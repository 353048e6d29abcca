"""How well tokenizers compress text: bytes per token, fertility, [UNK] rate, token tax.

Definitions (each a ratio over a whole file, so that long files weigh more):

- **bytes/token**: UTF-8 bytes of the text / tokens. Higher is better compression.
- **fertility**: tokens / whitespace-separated words (``str.split()``). 1.0 means one token
  per word; agglutinative languages and languages written without spaces score higher.
  A file with no whitespace word (e.g. Chinese) has fertility = tokens / 1 per file; use
  bytes/token or the token tax to compare such files.
- **[UNK] rate**: share of tokens that are the unknown token. Byte-level BPE never emits
  one (0 by construction); WordPiece emits ``[UNK]`` for words it cannot spell.
- **token tax** (parallel text): tokens of a translation / tokens of the English original.
  1.0 means the language costs the same as English; 2.0 means twice the tokens for the
  same content (so twice the price, half the context window).

Counting rules: the text is encoded as ``Encoding.encode`` encodes it, with the same
special-token rule (``fastbpe.special``): special-token text such as ``<|endoftext|>``
inside a file raises ValueError unless ``allowed_special`` lists it (it counts as one
token) or ``disallowed_special=()`` (it counts as ordinary text), so ``stats``, ``count``
and ``encode`` always agree. WordPiece text is counted without ``[CLS]``/``[SEP]`` and
without its tokenizer.json's truncation or padding (``corpus.document_ids_batch``).
Each file is encoded whole, so counts are exact (no block boundary changes a
pre-tokenizer chunk).

>>> from fastbpe.bpe.encoding import get_toy_encoding
>>> s = text_stats(get_toy_encoding(), "hi hi")
>>> (s.tokens, s.words, round(s.bytes_per_token, 2), s.fertility)
(3, 2, 1.67, 1.5)
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .checks import is_wordpiece
from .corpus import document_ids_batch


@dataclass
class TextStats:
    """Counts for one text under one tokenizer."""

    bytes: int
    chars: int
    words: int
    tokens: int
    unknown: int | None  # None when the tokenizer has no unknown token (byte-level BPE)

    @property
    def bytes_per_token(self) -> float:
        return self.bytes / self.tokens if self.tokens else float("nan")

    @property
    def fertility(self) -> float:
        return self.tokens / self.words if self.words else float("nan")

    @property
    def unk_rate(self) -> float | None:
        if self.unknown is None:
            return None
        return self.unknown / self.tokens if self.tokens else 0.0


def count_tokens(tok, text: str, *, allowed_special=frozenset(), disallowed_special="all") -> list[int]:
    """The ids ``stats`` and ``count`` count (see the module docstring)."""
    return document_ids_batch(tok, [text], allowed_special=allowed_special, disallowed_special=disallowed_special)[0]


def count_tokens_batch(tok, texts: list[str], num_threads: int = 1, *, allowed_special=frozenset(),
                       disallowed_special="all") -> list[int]:
    """Token counts of many texts (on native threads)."""
    batch = document_ids_batch(tok, texts, num_threads, allowed_special=allowed_special,
                               disallowed_special=disallowed_special)
    return [len(ids) for ids in batch]


def text_stats(tok, text: str, **special) -> TextStats:
    """Counts of ``text``; ``special``: ``allowed_special`` / ``disallowed_special``."""
    ids = count_tokens(tok, text, **special)
    unknown = None
    if is_wordpiece(tok):
        unk_id = tok.token_to_id(getattr(tok, "unk_token", "[UNK]"))
        unknown = sum(1 for i in ids if i == unk_id) if unk_id is not None else 0
    return TextStats(len(text.encode("utf-8")), len(text), len(text.split()), len(ids), unknown)


def read_text(path: str | os.PathLike, errors: str = "strict") -> str:
    """A small file's whole text (decompressed); ValueError naming the file and byte
    offset for invalid UTF-8 unless ``errors="replace"``."""
    from .io import Corpus

    return "".join(Corpus.resolve(path, docs="file").documents(errors))


def file_stats(tokenizers: dict[str, object], files: list[str], *, errors: str = "strict", docs=None,
               field=None, column=None, num_threads: int = 1, **special) -> dict[str, dict[str, TextStats]]:
    """``{file: {tokenizer name: TextStats}}`` of each file's documents, streamed;
    ``docs``/``field``/``column`` as in ``fastbpe.io.Corpus.resolve``, ``special`` as in
    ``text_stats``."""
    from .corpus import count_corpus
    from .io import Corpus

    out: dict[str, dict[str, TextStats]] = {}
    for f in files:
        corpus = Corpus.resolve(f, docs=docs, field=field, column=column)
        out[f] = {}
        for name, tok in tokenizers.items():
            c = count_corpus(tok, corpus, num_threads=num_threads, errors=errors, **special)
            out[f][name] = TextStats(c["bytes"], c["chars"], c["words"], c["tokens"], c["unknown"])
    return out


def token_tax(stats: dict[str, dict[str, TextStats]], files: list[str]) -> dict[str, dict[str, float]]:
    """``{file: {tokenizer: tokens(file) / tokens(files[0])}}`` for parallel text whose
    first file is the English original."""
    base = stats[files[0]]
    return {
        f: {name: (s.tokens / base[name].tokens if base[name].tokens else float("nan")) for name, s in stats[f].items()}
        for f in files
    }


# --------------------------------------------------------------------------- tables
def _fmt(x: float | None, spec: str) -> str:
    if x is None:
        return "-"
    if x != x:  # nan
        return "n/a"
    return format(x, spec)


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([line(header), "  ".join("-" * w for w in widths), *map(line, rows)])


def format_stats(stats: dict[str, dict[str, TextStats]], names: list[str]) -> str:
    """Tokenizers side by side: one block of rows per file."""
    rows = []
    for f, per in stats.items():
        any_s = per[names[0]]
        label = f"{Path(f).name} ({any_s.bytes:,} B)"
        for metric, get, spec in (
            ("tokens", lambda s: s.tokens, ","),
            ("bytes/token", lambda s: s.bytes_per_token, ".2f"),
            ("tokens/word", lambda s: s.fertility, ".2f"),
            ("[UNK] rate", lambda s: s.unk_rate, ".2%"),
        ):
            rows.append([label, metric, *(_fmt(get(per[n]), spec) for n in names)])
            label = ""
    return _table(["file", "metric", *names], rows)


def format_tax(tax: dict[str, dict[str, float]], names: list[str], files: list[str]) -> str:
    rows = [[Path(f).name, "token tax", *(_fmt(tax[f][n], ".2f") + "x" for n in names)] for f in files]
    return f"Token tax relative to {Path(files[0]).name} (tokens / tokens of the first file):\n" + _table(
        ["file", "", *names], rows
    )


# --------------------------------------------------------------------------- plots
def pyplot(what: str):
    """matplotlib's ``pyplot`` drawing to files (no window), or RuntimeError saying that
    ``what`` needs matplotlib and how to install it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError(f"{what} needs matplotlib: pip install matplotlib (or pip install 'fastbpe[bench]')") from None
    return plt


def save_plots(stats, names: list[str], out_dir: str | os.PathLike, tax=None, tax_files=None) -> list[Path]:
    """PNG bar charts (bytes/token and fertility per file; token tax). Needs matplotlib."""
    plt = pyplot("--plot")
    import numpy as np

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []

    def bars(values_by_name, labels, ylabel, title, filename, ref_line=None):
        fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(labels) * max(1, len(names)) / 2 + 3), 4))
        x = np.arange(len(labels))
        width = 0.8 / max(1, len(names))
        for i, n in enumerate(names):
            ax.bar(x + i * width - 0.4 + width / 2, values_by_name[n], width, label=n)
        if ref_line is not None:
            ax.axhline(ref_line, color="#555", lw=0.8, ls="--")
        ax.set_xticks(x, labels, rotation=20, ha="right")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize="small")
        fig.tight_layout()
        path = out_dir / filename
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    files = list(stats)
    labels = [Path(f).name for f in files]
    bars({n: [stats[f][n].bytes_per_token for f in files] for n in names}, labels, "bytes per token",
         "Compression (higher is better)", "bytes_per_token.png")
    bars({n: [stats[f][n].fertility for f in files] for n in names}, labels, "tokens per word",
         "Fertility (lower is better)", "fertility.png")
    if tax:
        bars({n: [tax[f][n] for f in tax_files] for n in names}, [Path(f).name for f in tax_files],
             f"tokens / tokens of {Path(tax_files[0]).name}", "Token tax on parallel text", "token_tax.png", ref_line=1.0)
    return written
