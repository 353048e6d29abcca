"""Texts the WordPiece tests run through every path (reference, native, HF): scripts,
controls and every whitespace BERT's pre-tokenizer knows, a word past
``max_input_chars_per_word``, special-token text, contractions, compatibility forms,
combining marks outside the BMP, the empty and the blank text, code."""
from __future__ import annotations

TEXTS = [
    "Hello, World! How are you doing today?",
    "Héllo wörld, ÇOK GÜZEL! İstanbul'da ılık bir gün. Straße, façade, naïve, résumé.",
    "中文字符测试，还有日本語のテキスト、한국어 텍스트。",
    "emoji 😀👍🏽🇹🇷 mixed with text 🤖!!",
    "control\x00chars\x01here\x7f and\ufffd replacement\u200b zero width \u00ad soft hyphen",
    "tabs\tnew\nlines\r\nand\x0bvertical\x0cfeed\x85next\u2028line\u2029para\u3000ideo",
    "a" * 101 + " " + "b" * 100 + " " + "é" * 100 + " " + "x" * 250,
    "[CLS] text with [MASK] and [SEP] special [sep] [UNK]tokens[PAD]",
    "don't do not it's you're I'm we've they 're . , ! ?",
    "ΟΔΟΣ Ελληνικά κείμενα, Русский текст, العربية, עברית, हिन्दी",
    "ﬁ ligature ½ ① Ⅻ ㎏ ＡＢＣ full width; ᾅ ǅ İ ẞ",
    "$100 + 5^2 = `code` {x: [1, 2]} ~tilde| back\\slash @user #tag",
    "marks a\u0301\u0327\U0001D165\U0001D16D\u05b0 𝅘𝅥𝅮 \u1e0b\u0323",
    "",
    "   ",
    "unaffable unbelievable counterrevolutionaries antidisestablishmentarianism",
    "def f(x):\n    return x ** 2  # comment\n",
]
