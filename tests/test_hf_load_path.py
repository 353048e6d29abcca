"""The load path's bulk checks equal the rules they stand for (issue 38, load time):
the added-token overlap test of the rank-engine plan over all pairs at once."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe.bpe.hf import _any_taken_before_raw, _taken_before_raw
from fastbpe.formats.hf_bpe import _may_overlap

_TOKENS = st.lists(st.text(alphabet="ab|<>.", min_size=1, max_size=6), max_size=8)


@settings(max_examples=2000, deadline=None)
@given(normalized=_TOKENS, raw=_TOKENS)
def test_any_taken_before_raw_is_the_pairwise_rule(normalized, raw):
    assert _any_taken_before_raw(normalized, raw) == any(_taken_before_raw(a, b) for a in normalized for b in raw)
    # NFC's test (any overlap) is the rule both ways round
    assert (_any_taken_before_raw(normalized, raw) or _any_taken_before_raw(raw, normalized)) == any(
        _may_overlap(a, b) for a in normalized for b in raw)


def test_published_added_tokens(vocab_file):
    """DeepSeek V4's 1,283 added tokens (normalized and raw): the bulk test's answer is
    the pairwise one."""
    from fastbpe.formats._hfjson import check_added_tokens, read_json

    entries = check_added_tokens(read_json(vocab_file("deepseek-v4/tokenizer.json")), "deepseek")
    normalized, raw = [[e["content"] for e in entries if e["normalized"] == flag] for flag in (True, False)]
    assert normalized and raw
    assert _any_taken_before_raw(normalized, raw) == any(_taken_before_raw(a, b) for a in normalized for b in raw)
    assert _any_taken_before_raw(raw, normalized) == any(_taken_before_raw(a, b) for a in raw for b in normalized)
