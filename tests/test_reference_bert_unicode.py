"""BERT's Unicode data (fastbpe.reference._bert_unicode) is HF tokenizers', on every code point.

Each comparison runs over all 1,112,064 scalar code points at once (one long string, or a
few long strings), so a test costs a few HF calls; only when one fails are the code points
that disagree found, by halving, to name them in the message.
"""
from __future__ import annotations

import functools

import pytest

from fastbpe import _wordpiece as native
from fastbpe.reference import _bert_unicode as U
from fastbpe.reference import wordpiece as R
from fastbpe.wordpiece import WordPiece

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import normalizers, pre_tokenizers  # noqa: E402

CODE_POINTS = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
assert len(CODE_POINTS) == 1_112_064


def disagreeing(cps, agree, limit: int = 12) -> list[str]:
    """The code points (as U+XXXX) of ``cps`` on which ``agree(cps)`` fails, by halving."""
    if agree(cps):
        return []
    if len(cps) == 1:
        return [f"U+{cps[0]:04X}"]
    mid = len(cps) // 2
    found = disagreeing(cps[:mid], agree, limit)
    if len(found) < limit:
        found += disagreeing(cps[mid:], agree, limit - len(found))
    return found


def joined(cps, context: str = "{}", sep: str = "") -> str:
    return sep.join(context.format(chr(cp)) for cp in cps)


def hf_normalizer(lowercase=False, strip_accents=False, clean_text=False, cjk=False):
    return normalizers.BertNormalizer(
        clean_text=clean_text, handle_chinese_chars=cjk, strip_accents=strip_accents, lowercase=lowercase
    )


# ---------------------------------------------------------------------------------------
# The decision (reference docstring): HF's versions, shown on the examples it names
# ---------------------------------------------------------------------------------------


def test_unicode_versions_are_hfs():
    assert (U.CATEGORY_VERSION, U.NORMALIZATION_VERSION, U.LOWERCASE_VERSION) == ("8.0.0", "9.0.0", "17.0.0")
    norm, pre = hf_normalizer(lowercase=True, strip_accents=True, clean_text=True, cjk=True), pre_tokenizers.BertPreTokenizer()
    for text in ("a\u061db", "a\u07fdb", "a\u0890b", "\u1c89", "a\u1dfb\u0316b", "a\u08d4b", "a\u2e43b"):
        assert R.normalize(text) == norm.normalize_str(text)
        assert R.pre_tokenize(text) == [w for w, _ in pre.pre_tokenize_str(text)]
    assert not R.is_punctuation("\u061d")      # Po only since Unicode 14
    assert R.strip_accents("a\u07fd") == "a\u07fd"  # Mn only since Unicode 11
    assert not R.is_control("\u0890")          # Cf only since Unicode 14
    assert R.lowercase("\u1c89") == "\u1c8a"    # case pair since Unicode 16
    assert R.combining_class("\u1dfb") == 230 and not R.is_nonspacing_mark("\u1dfb")  # 9.0 vs 8.0


# ---------------------------------------------------------------------------------------
# The reference, one step at a time, on every code point
# ---------------------------------------------------------------------------------------

STEPS = {
    "clean_text": (R.clean_text, dict(clean_text=True)),
    "pad_cjk": (R.pad_cjk, dict(cjk=True)),
    "strip_accents": (R.strip_accents, dict(strip_accents=True)),
    "lowercase": (R.lowercase, dict(lowercase=True)),
}


@pytest.mark.parametrize("step", STEPS)
def test_reference_normalizer_steps_match_hf_on_every_code_point(step):
    ours, options = STEPS[step]
    theirs = hf_normalizer(**options)

    def agree(cps):
        text = joined(cps)  # neighbours touch: marks after any code point get reordered too
        return ours(text) == theirs.normalize_str(text)

    assert agree(CODE_POINTS), f"{step} disagrees with HF on {disagreeing(CODE_POINTS, agree)}"


def test_reference_pre_tokenizer_matches_hf_on_every_code_point():
    pre = pre_tokenizers.BertPreTokenizer()

    def agree(cps):
        text = joined(cps)  # every whitespace or punctuation code point is a split point
        return R.pre_tokenize(text) == [w for w, _ in pre.pre_tokenize_str(text)]

    assert agree(CODE_POINTS), f"pre-tokenizer disagrees with HF on {disagreeing(CODE_POINTS, agree)}"


def test_reference_whole_normalizer_matches_hf_on_every_code_point():
    theirs = hf_normalizer(lowercase=True, strip_accents=None, clean_text=True, cjk=True)

    def agree(cps):
        text = joined(cps)
        return R.normalize(text) == theirs.normalize_str(text)

    assert agree(CODE_POINTS), f"normalize disagrees with HF on {disagreeing(CODE_POINTS, agree)}"


# ---------------------------------------------------------------------------------------
# The native core, every option, on every code point
# ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def words_core(lowercase, strip_accents, clean_text, cjk):
    return native.WordPieceCore(
        {"[UNK]": 0}, unk_token="[UNK]", prefix="##", max_chars=100, lowercase=lowercase,
        strip_accents=strip_accents, clean_text=clean_text, cjk=cjk, words_only=True,
    )


OPTIONS = [
    (lowercase, strip, True, cjk) for lowercase in (True, False) for strip in (True, False) for cjk in (True, False)
] + [(True, True, False, True)]


@pytest.mark.parametrize("lowercase,strip_accents,clean_text,cjk", OPTIONS)
def test_native_words_match_hf_on_every_code_point(lowercase, strip_accents, clean_text, cjk):
    core = words_core(lowercase, strip_accents, clean_text, cjk)
    norm = hf_normalizer(lowercase=lowercase, strip_accents=strip_accents, clean_text=clean_text, cjk=cjk)
    pre = pre_tokenizers.BertPreTokenizer()

    def agree(cps):
        text = joined(cps)
        ours = native.words_text(core, [text]).split(" ")[:-1]
        return ours == [w for w, _ in pre.pre_tokenize_str(norm.normalize_str(text))]

    assert agree(CODE_POINTS), f"native words disagree with HF on {disagreeing(CODE_POINTS, agree)}"


@pytest.fixture(scope="module")
def bert(vocab_file):
    path = vocab_file("bert-base-uncased/tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(path))
    hf.no_truncation()
    hf.no_padding()
    return hf, WordPiece.from_file(path, truncation=None, padding=None)   # as HF above: the Unicode is the question


# alone (between spaces), between letters, and between combining marks of classes 230
# and 220 (NFD reorders every mark of another class around it: offsets follow HF's rule)
@pytest.mark.parametrize("context", ["{}", "a{}b", "\u0301{}\u0316"])
def test_native_bert_uncased_ids_and_offsets_match_hf_on_every_code_point(bert, context):
    hf, wp = bert

    def agree(cps):
        texts = [joined(cps[i : i + 65536], context, " ") for i in range(0, len(cps), 65536)]
        for text, enc in zip(texts, hf.encode_batch(texts, add_special_tokens=False)):
            plus = wp.encode_plus(text, add_special_tokens=False)
            if plus["input_ids"] != enc.ids or plus["offsets"] != enc.offsets:
                return False
        return True

    assert agree(CODE_POINTS), f"ids/offsets disagree with HF on {disagreeing(CODE_POINTS, agree)}"
