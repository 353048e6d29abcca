"""A small multilingual test corpus for the open models' exactness tests.

English, Turkish (dotted/dotless i: Llama 3's merge list and its whole words differ
there), Vietnamese (combining marks, NFC vs NFD), Chinese and Japanese (DeepSeek's CJK
split), code, runs of whitespace and newlines, digits (``\\p{N}{1,3}`` vs ``\\p{N}``),
fullwidth digits, emoji (ZWJ sequences, skin tones), contractions in both cases. The
documents are made from these samples by a seeded generator, so every run tests the
same text; ``documents(n)`` gives ``n`` of them, ~100-2,000 characters each.
"""
from __future__ import annotations

import random
import unicodedata

SAMPLES = [
    "The quick brown fox jumps over the lazy dog. It's 2024, and we've got 1,234,567 reasons; they'll see.",
    "I'M HERE, YOU'RE THERE, HE'S GONE, WE'D GO, THEY'LL COME, I'VE SEEN, DON'T STOP",
    "Türkçe metinlerde ayrıntılı bir inceleme yapılmalıdır: İstanbul'da ılık bir gün, IŞIK ve ışık.",
    "Ayrıntı, ayrıntılar, ayrıntısız; çalışkanlık, güzelleştirilmiş, öğretmenlerimizden.",
    "Tiếng Việt có nhiều dấu: người, được, những, trường hợp đặc biệt ở Hà Nội và Sài Gòn.",
    unicodedata.normalize("NFD", "Tiếng Việt viết theo NFD: người được Hà Nội, café, naïve."),
    "我们今天在北京讨论了自然语言处理的最新进展，包括分词、机器翻译和问答系统。",
    "日本語のテキストも少し含めます。カタカナとひらがな、そして漢字が混ざっています。",
    "한국어 문장도 조금 있습니다. 안녕하세요!",
    "def encode(self, text: str) -> list[int]:\n    return [self.ranks[b] for b in text.encode('utf-8')]\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n// done\n",
    "    \n\n\t\t  \r\n   x  \u00a0\u3000 y\n\n\n",
    "0123456789 12 123 1234 12345 3.14159 -42 1e10 0x1F",
    "Fullwidth: １０ ２０２４ ＡＢＣ ａｂｃ！？ and ½ ⅓ ² ³ ٣٤٥ ०१२",
    "Emoji: 👍🏽 👨‍👩‍👧‍👦 🇹🇷 ❤️ 😀😃😄 🧑‍💻 ✈︎",
    "Mixed: hello世界123abc!!! ...??? ---> <<<>>> ''' \"\"\" `code`",
    "Русский текст: Привет, мир! Ёлка и ёжик.",
    "العربية: مرحبا بالعالم ١٢٣",
    "Ελληνικά: Καλημέρα κόσμε, ΣΊΣΥΦΟΣ.",
    "special-looking text: <|begin_of_text|> <|im_start|>user\nhi<|im_end|> <s> </s> [INST]",
    "ﬁ ﬂ ẞ ß Å Å K K ℌ ① ㍿ ﾊﾝｶｸ",
]


def documents(n: int = 300, seed: int = 1234) -> list[str]:
    """``n`` deterministic documents: every sample alone first, then random mixes."""
    rng = random.Random(seed)
    docs = list(SAMPLES)
    while len(docs) < n:
        parts = rng.choices(SAMPLES, k=rng.randint(1, 12))
        sep = rng.choice([" ", "\n", "\n\n", "  ", "\t", ""])
        docs.append(sep.join(parts))
    return docs[:n]
