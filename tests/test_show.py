"""fastbpe.show: segments, terminal rendering and the HTML page."""
import html.parser

import pytest

import fastbpe
from fastbpe import show
from fastbpe.bpe.encoding import get_toy_encoding

VOID = {"meta", "br", "hr", "img", "link", "input"}


class BalanceChecker(html.parser.HTMLParser):
    """Records unbalanced tags and collects the token spans' text and titles."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.spans, self.depth_in_token = [], [], [], 0
        self.doctype = False

    def handle_decl(self, decl):
        self.doctype = decl.lower() == "doctype html"

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            return
        self.stack.append(tag)
        attrs = dict(attrs)
        if tag == "span" and "t" in (attrs.get("class") or "").split():
            self.spans.append({"title": attrs.get("title"), "ids": attrs.get("data-ids"), "text": ""})
            self.depth_in_token = len(self.stack)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}> with open {self.stack}")
            return
        if len(self.stack) == self.depth_in_token:
            self.depth_in_token = 0
        self.stack.pop()

    def handle_data(self, data):
        if self.depth_in_token:
            self.spans[-1]["text"] += data


def parse_page(page: str) -> BalanceChecker:
    p = BalanceChecker()
    p.feed(page)
    p.close()
    return p


@pytest.fixture(scope="module")
def trained():
    text = ["hello world <b>&amp; 'quotes' \"dq\"\n", "çok güzel 中文字\n", "tabs\tand  spaces\n"] * 30
    return fastbpe.train_bpe(documents=text, vocab_size=300, pattern="cl100k", special_tokens=["<|endoftext|>"], progress=False)


@pytest.mark.parametrize("text", ["", "hello", "中文字 and é\n\n\t x", "<|endoftext|>a<b>&", "🎉🎉 emoji"])
def test_segments_cover_the_text_and_all_ids(trained, text):
    segs = show.segments(trained, text, allowed_special="all")
    assert "".join(s.text for s in segs) == text
    assert [i for s in segs for i in s.ids] == trained.encode(text, allowed_special="all")
    for s in segs:
        assert b"".join(s.pieces).decode("utf-8") == s.text
        assert s.partial == (len(s.ids) > 1)


def test_cut_characters_are_grouped():
    # Only byte tokens: every multi-byte character is cut into one token per byte.
    enc = get_toy_encoding()
    segs = show.segments(enc, "a中")
    assert [s.text for s in segs] == ["a", "中"]
    assert segs[1].ids == list("中".encode("utf-8")) and segs[1].partial


def test_plain_and_ansi_rendering():
    segs = show.segments(get_toy_encoding(), "hi hi\n")
    plain = show.render_plain(segs)
    assert "\x1b[" not in plain and plain == "hi│·│hi│↵\n"
    assert show.render_plain(segs, ids=True).startswith("hi[256]│·[32]")
    two_lines = show.segments(get_toy_encoding(), "a\nb")
    assert show.render_plain(two_lines) == "a│↵\nb"  # no separator opens a line
    assert show.render_plain(two_lines, ids=True) == "a[97]│↵[10]\nb[98]"
    ansi = show.render_ansi(segs, ids=True)
    assert ansi.count("\x1b[48;5;") >= len(segs) and "256" in ansi
    # colours cycle through the 6 backgrounds
    many = show.segments(get_toy_encoding(), "abcdefgh")
    codes = [c for c in show.ANSI_BACKGROUNDS]
    rendered = show.render_ansi(many)
    assert rendered.index(f"48;5;{codes[0]}") < rendered.index(f"48;5;{codes[5]}")
    assert rendered.count(f"48;5;{codes[0]}") == 2  # segments 0 and 6


def test_html_page_is_well_formed_and_escaped(trained):
    text = "hello <b>&amp; 'quotes' \"dq\"\n中文字\ttab  x <|endoftext|>"
    segs = show.segments(trained, text, allowed_special={"<|endoftext|>"})
    page = show.render_html(segs, title="<title & test>", summary="s")
    parsed = parse_page(page)
    assert parsed.doctype
    assert not parsed.errors and not parsed.stack, (parsed.errors, parsed.stack)
    assert "<b>" not in page and "<title & test>" not in page
    assert "<script" not in page and "http" not in page  # self-contained
    assert len(parsed.spans) == len(segs)
    for span, seg in zip(parsed.spans, segs):
        # what the reader sees is the segment with whitespace made visible
        assert span["text"] == show.visible(seg.text).replace("↵\n", "↵\n")
        assert span["ids"] == " ".join(map(str, seg.ids))
        for idx, piece in zip(seg.ids, seg.pieces):
            assert f"id {idx}: bytes {piece.hex(' ')}" in span["title"]
    eot = trained.encode_single_token("<|endoftext|>")
    assert any(s["ids"] == str(eot) for s in parsed.spans)


def test_summary_line():
    segs = show.segments(get_toy_encoding(), "hi hi")
    assert show.summary_line(segs, "hi hi") == "3 tokens, 5 bytes, 5 characters, 1.67 bytes/token"


def test_wordpiece_segments():
    wordpiece = pytest.importorskip("fastbpe.wordpiece")
    wp = wordpiece.WordPiece({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "un": 3, "##fair": 4})
    segs = show.segments(wp, "Unfair xyz")
    assert [s.text for s in segs] == ["un", "##fair", "[UNK]"]
    assert [s.ids for s in segs] == [[3], [4], [0]]
    assert not parse_page(show.render_html(segs)).errors


EVIL = "\x1b]0;PWNED\x07\x1b[2J"  # retitles the terminal, then clears the screen
HIDDEN_SAMPLES = "\x00\x1b\x07\x7f\x85\x9b\u00ad\u200d\u2028\u2029\u202a\u202e\u2066\u2069\ufeff\U000e0001"
OUR_SGR = r"\x1b\[[0-9;]*m"  # the colour codes render_ansi writes itself


@pytest.fixture(scope="module")
def evil_vocab():
    return fastbpe.train_bpe(documents=[EVIL * 3, HIDDEN_SAMPLES * 3], vocab_size=280, pattern="cl100k", progress=False)


def test_terminal_views_escape_every_hidden_character(evil_vocab):
    import re

    text = EVIL + " x " + HIDDEN_SAMPLES
    segs = show.segments(evil_vocab, text)
    assert any(len(s.text) > 1 and "\x1b" in s.text for s in segs)  # the vocabulary holds ESC tokens
    views = {"plain": show.render_plain(segs, ids=True), "ansi": re.sub(OUR_SGR, "", show.render_ansi(segs, ids=True))}
    for name, view in views.items():
        for c in HIDDEN_SAMPLES + "\r":
            assert c not in view, (name, hex(ord(c)))
        assert "\\x1b]" in view and "\\x07\\x1b" in view
        assert "\\u202e" in view and "\\U000e0001" in view
    page = show.render_html(segs)
    assert not any(c in page for c in HIDDEN_SAMPLES) and "\\x1b" in page and not parse_page(page).errors


def test_terminal_safe_keeps_ordinary_text():
    text = "naïve 中文\u3000\xa0 🎉 \\x1b tab\there\n"
    assert show.terminal_safe(text) == text  # CJK space, NBSP, emoji, a literal backslash: untouched
    assert show.terminal_safe("a\u2028b\x1b", keep="") == "a\\u2028b\\x1b"


def test_segments_follow_the_special_token_rule(trained):
    with pytest.raises(ValueError, match="disallowed special token"):
        show.segments(trained, "a <|endoftext|>")
    eot = trained.encode_single_token("<|endoftext|>")
    assert [eot] in [s.ids for s in show.segments(trained, "a <|endoftext|>", allowed_special="all")]
    as_text = show.segments(trained, "a <|endoftext|>", disallowed_special=())
    assert [i for s in as_text for i in s.ids] == trained.encode_ordinary("a <|endoftext|>")
