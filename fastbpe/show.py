"""See where the token boundaries fall: coloured terminal text and a self-contained HTML page.

A byte-level BPE token need not end on a character boundary (GPT-2 splits most Chinese
characters over two or three tokens). Printing each token on its own would show U+FFFD
where a character is cut, so consecutive tokens are grouped into one *segment* until
their bytes decode as UTF-8; such a segment lists all its ids and is underlined (terminal)
or outlined (HTML), telling the reader "these tokens share a character".

WordPiece tokenizers normalise the text (lower-casing, accents, spaces dropped), so their
view shows the token strings (``un`` ``##fair``) rather than slices of the input.

Decision (what reaches a terminal): text from a file or a vocabulary is data, never a
command to the terminal. Every character that a terminal may act on or that the reader
cannot see is shown as a Python-style escape (``\\x1b``, ``\\u202e``): controls (C0, DEL,
C1), format characters (bidi overrides and isolates U+202A-U+202E, U+2066-U+2069,
zero-width joiners, soft hyphen, BOM), line and paragraph separators (U+2028, U+2029),
lone surrogates and unassigned code points (Unicode categories Cc, Cf, Cs, Cn, Zl, Zp).
``visible`` does it for the token views (terminal and HTML alike) and ``terminal_safe``
for everything else the commands print (file names, tokenizer names, error messages).
Space, newline and tab keep their marks (``·`` ``↵`` ``→``) and ``\\r`` is ``␍``. A literal
backslash is left alone, so ``\\x1b`` typed in a file looks like an escaped ESC: the
view is for reading, the ids are what is exact.

>>> from fastbpe.bpe.encoding import get_toy_encoding
>>> [s.text for s in segments(get_toy_encoding(), "hi there")]
['hi', ' ', 't', 'h', 'e', 'r', 'e']
>>> render_plain(segments(get_toy_encoding(), "hi\\n"))
'hi│↵\\n'
>>> print(visible("\\x1b]0;PWNED\\x07 \\u202e"))
\\x1b]0;PWNED\\x07·\\u202e
"""
from __future__ import annotations

import html
from dataclasses import dataclass

import regex

from .checks import is_wordpiece  # noqa: F401  (also used as show.is_wordpiece)

#: Background colours the terminal view cycles through (ANSI 256-colour codes: soft
#: pastels that keep black text readable on light and dark themes).
ANSI_BACKGROUNDS = (153, 194, 223, 218, 187, 183)
#: The same cycle for the HTML page.
HTML_BACKGROUNDS = ("#c6e2ff", "#d7f5d0", "#ffe3b8", "#ffd1dc", "#e6e6b0", "#dcc6ff")

#: What whitespace looks like in the views (the real character is kept after it where
#: it matters for layout: a newline still ends the line).
VISIBLE = {" ": "·", "\n": "↵\n", "\t": "→\t", "\r": "␍"}

SEPARATOR = "│"

#: Characters never written raw to a terminal (see the module docstring).
HIDDEN = regex.compile(r"[\p{Cc}\p{Cf}\p{Cs}\p{Cn}\p{Zl}\p{Zp}]")


def escape_char(c: str) -> str:
    """``\\xHH``, ``\\uHHHH`` or ``\\UHHHHHHHH``, as Python writes it in a string literal.

    >>> escape_char("\\x1b"), escape_char("\\u2028"), escape_char("\\U000e0001")
    ('\\\\x1b', '\\\\u2028', '\\\\U000e0001')
    """
    o = ord(c)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def terminal_safe(text: str, keep: str = "\n\t") -> str:
    """``text`` with every hidden character escaped except those in ``keep``.

    >>> terminal_safe("a\\x1b[2Jb\\n")
    'a\\\\x1b[2Jb\\n'
    """
    if not HIDDEN.search(text):
        return text
    return HIDDEN.sub(lambda m: m.group() if m.group() in keep else escape_char(m.group()), text)


@dataclass
class Segment:
    """Text shown as one unit, with the ids and bytes of the tokens it came from."""

    text: str
    ids: list[int]
    pieces: list[bytes]

    @property
    def partial(self) -> bool:
        """True when several tokens share a character (a cut UTF-8 sequence)."""
        return len(self.ids) > 1


def segments(tok, text: str, *, allowed_special=frozenset(), disallowed_special="all") -> list[Segment]:
    """The segments of ``text`` under ``tok`` (an ``Encoding`` or a ``WordPiece``).

    Special-token text follows ``Encoding.encode``'s rule (``fastbpe.special``): by
    default it raises ValueError; ``allowed_special`` shows it as its id and
    ``disallowed_special=()`` as ordinary text."""
    if is_wordpiece(tok):
        vocab = tok.vocab
        unk = getattr(tok, "unk_token", "[UNK]")
        out = []
        for t in tok.tokenize(text, allowed_special=allowed_special):
            idx = vocab.get(t, vocab.get(unk))
            out.append(Segment(t, [idx], [t.encode("utf-8")]))
        return out
    ids = tok.encode(text, allowed_special=allowed_special, disallowed_special=disallowed_special)
    out, pending_ids, pending = [], [], b""
    for idx in ids:
        piece = tok.decode_single_token_bytes(idx)
        pending_ids.append(idx)
        pending += piece
        try:
            s = pending.decode("utf-8")
        except UnicodeDecodeError:
            # The tokens of a str concatenate to valid UTF-8 and `pending` starts on a
            # character boundary, so the only failure is a character cut at the end:
            # the next tokens complete it.
            continue
        out.append(Segment(s, pending_ids, [tok.decode_single_token_bytes(i) for i in pending_ids]))
        pending_ids, pending = [], b""
    if pending_ids:  # the text ended inside a character (cannot happen for str input)
        out.append(Segment(pending.decode("utf-8", "replace"), pending_ids,
                           [tok.decode_single_token_bytes(i) for i in pending_ids]))
    return out


def visible(text: str) -> str:
    """Whitespace made visible (``·`` for space, ``↵`` before a newline, ``→`` for tab)
    and every other hidden character escaped."""
    return terminal_safe("".join(VISIBLE.get(c, c) for c in text))


# --------------------------------------------------------------------------- terminal
def _ansi(text: str, colour: int, underline: bool) -> str:
    # A newline inside a coloured span would paint the rest of the line: close the
    # colour before it and reopen after.
    start = f"\x1b[48;5;{colour};38;5;16" + (";4" if underline else "") + "m"
    return "\n".join(start + part + "\x1b[0m" if part else part for part in text.split("\n"))


def render_ansi(segs: list[Segment], *, ids: bool = False) -> str:
    """Text with a cycling background colour per segment (and the ids below)."""
    out = [_ansi(visible(s.text), ANSI_BACKGROUNDS[i % len(ANSI_BACKGROUNDS)], s.partial)
           for i, s in enumerate(segs)]
    text = "".join(out)
    if ids:
        text += "\n\n" + " ".join(
            _ansi(" ".join(map(str, s.ids)), ANSI_BACKGROUNDS[i % len(ANSI_BACKGROUNDS)], s.partial)
            for i, s in enumerate(segs)
        )
    return text


def render_plain(segs: list[Segment], *, ids: bool = False) -> str:
    """Without colours: segments separated by ``│`` (ids in brackets after each); no
    separator at the start of a line (the ``↵`` already ends the segment before)."""
    out = []
    for i, s in enumerate(segs):
        if i and not segs[i - 1].text.endswith("\n"):
            out.append(SEPARATOR)
        text = visible(s.text)
        if ids:  # the ids stay on the segment's line
            mark = f"[{' '.join(map(str, s.ids))}]"
            text = text[:-1] + mark + "\n" if text.endswith("\n") else text + mark
        out.append(text)
    return "".join(out)


# --------------------------------------------------------------------------- HTML
CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.2em; }
.summary { color: #555; }
.tokens { font-family: ui-monospace, Menlo, Consolas, monospace; white-space: pre-wrap;
          line-height: 1.9; border: 1px solid #ddd; padding: 1em; border-radius: 6px; }
.t { border-radius: 3px; padding: 1px 0; }
.t:hover { outline: 2px solid #333; }
.partial { outline: 1px dashed #a33; }
.ws { color: #999; }
.ids { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.85em; color: #444;
       margin-top: 1.5em; word-break: break-all; }
"""


def hover(seg: Segment) -> str:
    """What hovering over a segment tells: each token's id and bytes (also ``fastbpe view``)."""
    parts = []
    for idx, piece in zip(seg.ids, seg.pieces):
        parts.append(f"id {idx}: bytes {piece.hex(' ')} {piece!r}")
    return "\n".join(parts)


def html_text(text: str) -> str:
    """``text`` as HTML with whitespace marked and hidden characters escaped (also
    ``fastbpe view``)."""
    out = []
    for c in text:
        if c in VISIBLE:
            mark = VISIBLE[c].rstrip("\n\t")
            out.append(f'<span class="ws">{html.escape(mark)}</span>' + ("\n" if c == "\n" else "\t" if c == "\t" else ""))
        elif HIDDEN.match(c):  # invisible in a page too (and C0 controls are not valid HTML)
            out.append(f'<span class="ws">{html.escape(escape_char(c))}</span>')
        else:
            out.append(html.escape(c))
    return "".join(out)


def render_html(segs: list[Segment], *, title: str = "fastbpe tokens", summary: str = "", ids: bool = True) -> str:
    """One self-contained page (inline CSS, no scripts): every segment is a ``<span>``
    whose ``title`` (shown on hover) gives the token ids and their bytes."""
    spans = []
    for i, s in enumerate(segs):
        cls = "t partial" if s.partial else "t"
        spans.append(
            f'<span class="{cls}" style="background:{HTML_BACKGROUNDS[i % len(HTML_BACKGROUNDS)]}" '
            f'title="{html.escape(hover(s), quote=True)}" data-ids="{" ".join(map(str, s.ids))}">'
            f"{html_text(s.text)}</span>"
        )
    id_block = ""
    if ids:
        id_block = '<div class="ids">' + html.escape(", ".join(str(i) for s in segs for i in s.ids)) + "</div>\n"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        f"<h1>{html.escape(title)}</h1>\n"
        f'<p class="summary">{html.escape(summary)}</p>\n'
        f'<div class="tokens">{"".join(spans)}</div>\n'
        f"{id_block}</body>\n</html>\n"
    )


def summary_line(segs: list[Segment], text: str) -> str:
    n_tokens = sum(len(s.ids) for s in segs)
    n_bytes = len(text.encode("utf-8"))
    per = f", {n_bytes / n_tokens:.2f} bytes/token" if n_tokens else ""
    return f"{n_tokens} tokens, {n_bytes} bytes, {len(text)} characters{per}"
