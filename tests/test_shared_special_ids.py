"""Special tokens that share an id (tiktoken's o200k_harmony has two at 200018): each
encodes to the id, on both cores; the id decodes to the first name's bytes."""
import pytest

import fastbpe

BYTES = {bytes([i]): i for i in range(256)}


def _both(specials, explicit_n_vocab=None):
    """The same encoding on the native core and on the reference core."""
    out = []
    for core in ("native", "reference"):
        with pytest.MonkeyPatch.context() as mp:
            if core == "reference":
                mp.setenv("FASTBPE_REFERENCE_CORE", "1")
            enc = fastbpe.Encoding("shared", pat_str=r"\S+|\s+", mergeable_ranks=BYTES, special_tokens=specials,
                                   explicit_n_vocab=explicit_n_vocab)
        assert type(enc._core_bpe).__module__ == ("fastbpe._encode" if core == "native" else "fastbpe.reference.core")
        out.append(enc)
    return out


# a small id (the native core's dense decode table) and a far one (its sorted table)
@pytest.mark.parametrize("token_id", [300, 10_000_000])
def test_each_name_encodes_to_the_id_and_the_first_name_decodes(token_id):
    # Before: ValueError "special token '<|b|>' has id ..., already used by '<|a|>'".
    specials = {"<|a|>": token_id, "<|b|>": token_id, "<|c|>": token_id + 1, "<|d|>": token_id}
    for enc in _both(specials):
        assert enc.encode("<|a|>x<|b|><|d|>", allowed_special="all") == [token_id, ord("x"), token_id, token_id]
        assert enc.encode_batch(["<|b|>", "<|c|>"], allowed_special={"<|b|>", "<|c|>"}) == [[token_id], [token_id + 1]]
        assert enc.encode_single_token("<|d|>") == token_id
        assert enc.decode_single_token_bytes(token_id) == b"<|a|>"
        assert enc.decode_bytes([token_id, token_id + 1]) == b"<|a|><|c|>"
        assert enc.decode_bytes_batch([[token_id]]) == [b"<|a|>"]
        assert enc.is_special_token(token_id) and enc.special_tokens_set == set(specials)
        assert (enc.max_token_value, enc.n_vocab) == (token_id + 1, token_id + 2)
        with pytest.raises(ValueError, match="disallowed special token '<\\|b\\|>'"):
            enc.encode("<|b|>")


def test_sizes_and_explicit_n_vocab_as_tiktoken():
    tiktoken = pytest.importorskip("tiktoken")
    cases = [
        ({"<|a|>": 256, "<|b|>": 256}, None),
        ({"<|a|>": 257, "<|b|>": 257}, 258),   # two names, one id, one gap: tiktoken counts names
        ({"<|a|>": 257, "<|b|>": 257}, 257),
        ({"<|a|>": 256, "<|b|>": 256}, 257),
        ({"<|a|>": 256, "<|b|>": 256}, 258),
    ]
    accepted = []
    for specials, n in cases:
        try:
            tk = tiktoken.Encoding("shared", pat_str=r"\S+|\s+", mergeable_ranks=BYTES, special_tokens=specials,
                                   explicit_n_vocab=n)
        except AssertionError:
            with pytest.raises(ValueError, match="explicit_n_vocab"):
                _both(specials, n)
            continue
        accepted.append(n)
        for enc in _both(specials, n):
            assert (enc.n_vocab, enc.max_token_value) == (tk.n_vocab, tk.max_token_value)
            assert enc.encode("<|b|><|a|>", allowed_special="all") == tk.encode("<|b|><|a|>", allowed_special="all")
    assert accepted == [None, 258]


def test_o200k_harmony_decodes_its_shared_id_as_tiktoken():
    enc = fastbpe.get_encoding("o200k_harmony")
    assert enc.encode("<|endofprompt|><|reserved_200018|>", allowed_special="all") == [200018, 200018]
    assert enc.decode_single_token_bytes(200018) == b"<|endofprompt|>"   # what tiktoken 0.14 gives


def test_a_special_id_that_is_an_ordinary_rank_is_still_an_error():
    with pytest.raises(ValueError, match=r"special token '<\|a\|>' has id 97, already used by b'a'"):
        fastbpe.Encoding("x", pat_str=".", mergeable_ranks=BYTES, special_tokens={"<|a|>": 97})
