"""Test support for sentencepiece: tiny models trained here, hand-made models, a corpus.

sentencepiece (from PyPI, in the test extra) is the judge of a ``.model`` file. The models
used here are trained in the test by sentencepiece's own trainer on a generated corpus,
or written by ``model_bytes`` from an ``SpmModel`` (a minimal protobuf writer: only the
fields ``fastbpe.formats.sentencepiece_model`` reads), so that the tests need nothing from
/work/shared. Mistral's real files are used when present (``mistral_model``).
"""
from __future__ import annotations

import functools
import io
import random
import struct

import pytest

from fastbpe.reference.sentencepiece import SpmModel

MISTRAL_FILES = ("mistral/tokenizer.model.v1", "mistral/mistral_instruct_tokenizer_240323.model.v3")

# English, Turkish, Chinese, code, whitespace runs, tabs, newlines, emoji, characters
# outside any vocabulary, specials' text, user-defined pieces of Mistral v3
CORPUS = [
    "Hello world", "The quick brown fox jumps over the lazy dog.", "  leading and  double  spaces  ",
    "tabs\tand\nnewlines\r\n\n\n", "Türkçe karakterler: ğüşıöç İstanbul'da ılık bir gün.",
    "中文字符测试，你好世界。这是一个句子。", "def f(x):\n    return x**2  # code\n\tif x: pass",
    "emoji 😀🎉👍🏽 flags 🇹🇷 zwj 👨‍👩‍👧", "rare: \u0fff\U0010ffff \u1234\u2603 ꙮ \x00\x01 \ufffd",
    "", " ", "   ", "\n", "\t", "[INST] hi [/INST] <s> </s> <unk> [REFERENCE_DOC_10] [REFERENCE_DOC_1]x",
    "▁▁ already ▁ escaped ▁", "a" * 300, "1234567890 3.14159 1e-9", "     \t\t  \n  x  \n",
    "<0x41> <0xZZ> [TOOL_CALLS]", "Ĳ ﬁ ① ＡＢＣ ｶﾀｶﾅ e\u0301",  # what NFKC would change: kept as is
]


def random_texts(seed: int, count: int, alphabet: str = "ab  \t\nçğ中文😀▁1[]<>☃Dsep0IST/") -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(count)]


def training_corpus(seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Türkçe", "güzel", "中文", "测试",
             "12345", "3.14", "def", "return", "x_1", "😀", "ab", "abab", "ba"]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(1, 12))) + rng.choice(["", "  ", "\t", "!"])
            for _ in range(2000)]


#: sentencepiece trainer options, by name: the variations the tests cover
TRAINED = {
    "byte_fallback": dict(byte_fallback=True),
    "no_byte_fallback": dict(byte_fallback=False),
    "digits_symbols": dict(byte_fallback=True, split_digits=True, control_symbols=["[INST]", "[/INST]"],
                           user_defined_symbols=["<sep>", "[D1]", "[D10]", "a b"]),
    "remove_extra_whitespaces": dict(remove_extra_whitespaces=True),
    "whitespace_suffix": dict(treat_whitespace_as_suffix=True, byte_fallback=True, remove_extra_whitespaces=True),
    "no_dummy_prefix": dict(add_dummy_prefix=False, split_by_whitespace=False, split_by_unicode_script=False),
}


@functools.lru_cache(maxsize=None)
def trained_model(name: str) -> bytes:
    """The bytes of a tiny BPE model sentencepiece trains with ``TRAINED[name]``."""
    spm = pytest.importorskip("sentencepiece", reason="sentencepiece is in the test extra")
    options = dict(model_type="bpe", vocab_size=600, normalization_rule_name="identity",
                   remove_extra_whitespaces=False, character_coverage=0.98, hard_vocab_limit=False,
                   minloglevel=2, num_threads=1)
    options.update(TRAINED[name])
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(training_corpus()), model_writer=buf, **options)
    return buf.getvalue()


@functools.lru_cache(maxsize=None)
def nfkc_model() -> bytes:
    """A model with sentencepiece's default ``nmt_nfkc`` character map (which we refuse)."""
    spm = pytest.importorskip("sentencepiece", reason="sentencepiece is in the test extra")
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(training_corpus()), model_writer=buf, model_type="bpe",
                                   vocab_size=300, hard_vocab_limit=False, minloglevel=2, num_threads=1)
    return buf.getvalue()


def processor(data: bytes):
    spm = pytest.importorskip("sentencepiece", reason="sentencepiece is in the test extra")
    return spm.SentencePieceProcessor(model_proto=data)


# --------------------------------------------------------------------------- a tiny writer
def _varint(value: int) -> bytes:
    value &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    return _varint(number << 3 | wire) + payload


def _message(number: int, body: bytes) -> bytes:
    return _field(number, 2, _varint(len(body)) + body)


def model_bytes(model: SpmModel) -> bytes:
    """Serialize the fields ``read_model`` reads (enough for sentencepiece to load it)."""
    out = bytearray()
    for p in model.pieces:
        body = _message(1, p.piece.encode()) + _field(2, 5, struct.pack("<f", p.score)) + _field(3, 0, _varint(p.type))
        out += _message(1, body)
    ts = model.trainer_spec
    trainer = b"".join(_field(n, 0, _varint(int(v))) for n, v in (
        (3, ts.model_type), (24, ts.treat_whitespace_as_suffix), (35, ts.byte_fallback), (40, ts.unk_id),
        (41, ts.bos_id), (42, ts.eos_id), (43, ts.pad_id)))
    out += _message(2, trainer)
    ns = model.normalizer_spec
    normalizer = _message(1, ns.name.encode()) + b"".join(_field(n, 0, _varint(int(v))) for n, v in (
        (3, ns.add_dummy_prefix), (4, ns.remove_extra_whitespaces), (5, ns.escape_whitespaces)))
    out += _message(3, normalizer)
    return bytes(out)


def joinable_walk(tables, alphabet: str, size: int, seed: int) -> str:
    """size characters of the alphabet, each adjacent pair side by side in some piece
    where the alphabet allows it: a line few cuts shorten (one merge sequence)."""
    from fastbpe.reference.sentencepiece import joinable_pairs

    rng = random.Random(seed)
    pairs = joinable_pairs(tables)
    follow = {a: [b for b in alphabet if a + b in pairs] or list(alphabet) for a in alphabet}
    out, c = [], rng.choice(alphabet)
    for _ in range(size):
        c = rng.choice(follow[c])
        out.append(c)
    return "".join(out)
