"""fastbpe.Encoding behaves as tiktoken.Encoding: same ids, same rules, same errors."""
import multiprocessing as mp
import pickle

import numpy as np
import pytest
import regex

import fastbpe
from fastbpe.reference import patterns

PAT = {"gpt2": patterns.GPT2, "cl100k_base": patterns.CL100K, "o200k_base": patterns.O200K}
TEXTS = [
    "Hello world! It's a test, isn't it? I'LL go.",
    "def foo(x):\n    return x ** 2\r\n\n\n\t\tpass   ",
    "İstanbul'da çok güzel. 中文文本 你好 النص العربي हिन्दी पाठ 🙂 👩‍💻 ١٢٣ १२३",
    "",
]


def test_properties_match_tiktoken(pair):
    ours, tk = pair
    assert ours.name == tk.name
    assert ours.n_vocab == tk.n_vocab
    assert ours.max_token_value == tk.max_token_value
    assert ours.eot_token == tk.eot_token
    assert ours.special_tokens_set == tk.special_tokens_set
    assert ours.token_byte_values() == tk.token_byte_values()
    assert repr(ours) == f"<Encoding {tk.name!r}>"


@pytest.mark.parametrize("text", TEXTS)
def test_encode_decode_match_tiktoken(pair, text):
    ours, tk = pair
    ids = ours.encode(text)
    assert ids == tk.encode(text)
    assert ours.encode_ordinary(text) == tk.encode_ordinary(text)
    assert ours.decode(ids) == tk.decode(ids) == text
    assert ours.decode_bytes(ids) == tk.decode_bytes(ids)
    assert ours.decode_tokens_bytes(ids) == tk.decode_tokens_bytes(ids)
    assert ours.decode_with_offsets(ids) == tk.decode_with_offsets(ids)
    assert ours.encode_to_numpy(text).tolist() == tk.encode_to_numpy(text).tolist()


def test_batches_match_tiktoken(pair):
    ours, tk = pair
    assert ours.encode_batch(TEXTS) == tk.encode_batch(TEXTS)
    assert ours.encode_ordinary_batch(TEXTS, num_threads=2) == tk.encode_ordinary_batch(TEXTS, num_threads=2)
    batch = tk.encode_batch(TEXTS)
    assert ours.decode_batch(batch) == tk.decode_batch(batch)
    assert ours.decode_bytes_batch(batch) == tk.decode_bytes_batch(batch)
    flat, offsets = ours.encode_batch_to_numpy(TEXTS, num_threads=2)
    assert offsets.dtype == np.int64 and len(offsets) == len(TEXTS) + 1
    assert [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(TEXTS))] == batch


def test_special_token_rules_match_tiktoken(pair):
    ours, tk = pair
    eot = "<|endoftext|>"
    text = f"a{eot}b"
    for kwargs in ({"allowed_special": "all"}, {"allowed_special": {eot}}, {"disallowed_special": ()},
                   {"allowed_special": set(), "disallowed_special": ()}):
        assert ours.encode(text, **kwargs) == tk.encode(text, **kwargs)
    with pytest.raises(ValueError, match=r"disallowed special token '<\|endoftext\|>' at position 1"):
        ours.encode(text)
    with pytest.raises(ValueError):
        tk.encode(text)
    # Plain text never yields a special id unless allowed.
    assert ours.eot_token not in ours.encode(text, disallowed_special=())
    assert ours.eot_token not in ours.encode_ordinary(text)
    assert ours.encode(text, allowed_special="all").count(ours.eot_token) == 1
    with pytest.raises(ValueError, match="disallowed special token .* of text 1 of the batch"):
        ours.encode_batch(["fine", text])
    # tiktoken ignores allowed names the encoding lacks, so one set serves many encodings
    assert ours.encode("x", allowed_special={"<|nope|>"}) == tk.encode("x", allowed_special={"<|nope|>"})
    assert ours.encode(text, allowed_special={"<|nope|>", eot}) == tk.encode(text, allowed_special={"<|nope|>", eot})
    # and, like tiktoken, any string may be disallowed
    with pytest.raises(ValueError, match="disallowed special token 'b'"):
        ours.encode("abc", disallowed_special={"b"})
    with pytest.raises(ValueError):
        tk.encode("abc", disallowed_special={"b"})


_DISALLOWED_CASES = [
    ("a<|endoftext|>b", {}),
    ("a<|endoftext|>b", {"allowed_special": {"<|endoftext|>"}}),
    ("<|endoftext|> then <|endofprompt|>", {"allowed_special": {"<|endoftext|>"}}),
    ("x <|fim_prefix|> <|endoftext|>", {"disallowed_special": {"<|fim_prefix|>"}}),
    ("plain text", {"disallowed_special": {"text"}}),
    ("a<|endoftext|>b", {"allowed_special": "all", "disallowed_special": {"<|endoftext|>"}}),
    ("x\ud800<|endoftext|>", {}),
    ("x\ud83d\ude42y", {"disallowed_special": {"🙂"}}),
    ("x\ud800y", {"disallowed_special": {"\ud800"}}),
    ("line\nnext\n" * 50, {"disallowed_special": {"e\nn"}}),
    ("no specials here", {}),
]


def _second_of(flat_offsets):
    flat, offsets = flat_offsets
    return flat[offsets[1] : offsets[2]].tolist()


@pytest.mark.parametrize("text, kwargs", _DISALLOWED_CASES)
def test_disallowed_special_tokens_as_tiktoken(pair, text, kwargs):
    """encode, encode_to_numpy and both batches accept or refuse a text exactly when
    tiktoken does (any string can be disallowed; text is checked as given), and the
    error names the token and its position, with nothing chained to it."""
    ours, tk = pair
    try:
        want = tk.encode(text, **kwargs)
    except ValueError:
        want = None
    calls = [
        lambda: ours.encode(text, **kwargs),
        lambda: ours.encode_to_numpy(text, **kwargs).tolist(),
        lambda: ours.encode_batch(["fine", text, text], num_threads=2, **kwargs)[1],
        lambda: _second_of(ours.encode_batch_to_numpy(["fine", text], num_threads=2, **kwargs)),
    ]
    if want is not None:
        for call in calls:
            assert call() == want
        return
    disallowed = kwargs.get("disallowed_special", "all")
    if disallowed == "all":
        allowed = kwargs.get("allowed_special", set())
        disallowed = tk.special_tokens_set - (tk.special_tokens_set if allowed == "all" else allowed)
    found = regex.search("|".join(regex.escape(t) for t in sorted(disallowed, key=lambda t: (-len(t), t))), text)
    for call in calls:
        with pytest.raises(ValueError, match=regex.escape(f"token {found.group()!r} at position {found.start()}")) as err:
            call()
        assert err.value.__context__ is None and err.value.__cause__ is None


def test_disallowed_special_argument_errors(pair):
    ours, _ = pair
    with pytest.raises(TypeError, match="disallowed_special must be 'all' or a collection"):
        ours.encode("x", disallowed_special="<|endoftext|>")
    with pytest.raises(TypeError, match="disallowed_special must hold str"):
        ours.encode("x", disallowed_special={b"<|endoftext|>"})
    with pytest.raises(TypeError, match="disallowed_special"):
        ours.encode_batch(["x"], disallowed_special=5)


_DECODE_INPUTS = [
    [1, 2, 3],
    (1, 2, 3),
    [],
    [1, np.int64(2), np.uint16(3)],
    np.array([1, 2, 3], dtype=np.uint32),
    iter([1, 2]),
    range(5),
]
_DECODE_BAD_ITEMS = [   # (tokens, error, what the message names)
    ([1, 2.5, 3], TypeError, "2.5 at index 1"),
    ([1, True], TypeError, "True at index 1"),
    (["1"], TypeError, "'1' at index 0"),
    ([1, None], TypeError, "None at index 1"),
    ([10**9], KeyError, "Invalid token for decoding: 1000000000 at index 0"),
    # as tiktoken: every item is converted (TypeError, OverflowError outside u32) before
    # any is looked up (KeyError), so the first item that is no id wins
    ([1, -1, 2.5], OverflowError, "-1 at index 1"),
    ([1, 10**9, 2.5], TypeError, "2.5 at index 2"),
    ([1, 10**9, 2**70], OverflowError, f"{2**70} at index 2"),
    ((5, 10**9), KeyError, "1000000000 at index 1"),
    (np.array([7, 2**64 - 1, 10**9], dtype=np.uint64), OverflowError, f"{2**64 - 1} at index 1"),
    (np.array([-3, 1]), OverflowError, "-3 at index 0"),
    (np.array([1.0]), TypeError, "float64"),
]


@pytest.mark.parametrize("tokens", _DECODE_INPUTS, ids=repr)
def test_decode_takes_any_sequence_of_ints(pair, tokens):
    ours, tk = pair
    items = list(tokens) if not isinstance(tokens, np.ndarray) else tokens.tolist()
    if isinstance(tokens, type(iter([]))):
        tokens = iter(items)
    assert ours.decode_bytes(tokens) == tk.decode_bytes([int(t) for t in items])
    assert ours.decode_batch([items, items[::-1]]) == tk.decode_batch([items, items[::-1]])


@pytest.mark.parametrize("tokens, error, names", _DECODE_BAD_ITEMS, ids=repr)
def test_decode_names_the_first_bad_item(pair, tokens, error, names):
    """Both cores check the items (the Encoding only the container) and name the first
    bad one, whether it comes before or after a run of good ids."""
    ours, _ = pair
    longer = np.concatenate([np.arange(100, dtype=tokens.dtype), tokens]) if isinstance(
        tokens, np.ndarray) else list(range(100)) + list(tokens)
    for seq in (tokens, longer):
        with pytest.raises(error) as err:
            ours.decode(seq)
        if seq is tokens:
            assert names in str(err.value)
        with pytest.raises(error):
            ours.decode_batch([[1, 2], seq])


def test_single_tokens(pair):
    ours, tk = pair
    for piece in [b"hello", b" the", b"!"]:
        if piece in tk._mergeable_ranks:
            assert ours.encode_single_token(piece) == tk.encode_single_token(piece)
    assert ours.encode_single_token("<|endoftext|>") == tk.eot_token
    assert ours.decode_single_token_bytes(ours.eot_token) == b"<|endoftext|>"
    with pytest.raises(KeyError):
        ours.encode_single_token(b"definitely not one token, surely")


def test_lone_surrogates_do_what_tiktoken_does(pair):
    ours, tk = pair
    for text in ["a\ud800b", "\udfff", "x\ud83d\ude42y", "\ud83d"]:
        assert ours.encode(text) == tk.encode(text)
        assert ours.encode_ordinary(text) == tk.encode_ordinary(text)


def test_bad_input_raises_clear_errors(pair):
    ours, _ = pair
    with pytest.raises(TypeError, match="must be a str"):
        ours.encode(None)
    with pytest.raises(TypeError, match="decode bytes to str first"):
        ours.encode(b"bytes")
    with pytest.raises(TypeError):
        ours.encode_ordinary(123)
    with pytest.raises(TypeError, match="single str"):
        ours.encode_batch("not a list")
    with pytest.raises(TypeError, match="text 1 of the batch"):
        ours.encode_ordinary_batch(["ok", None])
    with pytest.raises(KeyError, match=str(ours.n_vocab + 5)):
        ours.decode([1, ours.n_vocab + 5])
    with pytest.raises(TypeError):
        ours.decode("abc")
    for bad in (0, -1, 5000):
        with pytest.raises(ValueError, match="num_threads"):
            ours.encode_batch(["a"], num_threads=bad)
    with pytest.raises(TypeError, match="num_threads"):
        ours.encode_batch(["a"], num_threads=1.5)
    with pytest.raises(ValueError, match="uint16"):
        if ours.max_token_value > 0xFFFF:
            ours.encode_to_numpy("a", dtype=np.uint16)
        else:
            ours.encode_to_numpy("a", dtype=np.int8)


def test_decode_split_character_replaces_and_bytes_are_raw(pair):
    ours, _ = pair
    ids = ours.encode("é")
    byte_ids = [ours.encode_single_token(bytes([b])) for b in "é".encode()]
    assert ours.decode(byte_ids[:1]) == "\ufffd"
    assert ours.decode_bytes(byte_ids[:1]) == b"\xc3"
    assert ours.decode(ids) == "é"


def test_pickle_is_small_and_equal(pair):
    ours, _ = pair
    blob = pickle.dumps(ours)
    again = pickle.loads(blob)
    assert again.encode(TEXTS[2]) == ours.encode(TEXTS[2])
    assert again.name == ours.name and again.special_tokens_set == ours.special_tokens_set


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_works_in_process_pools(method, tiktoken_encoding):
    tk = tiktoken_encoding("gpt2")
    enc = fastbpe.Encoding("gpt2", pat_str=tk._pat_str, mergeable_ranks=tk._mergeable_ranks,
                           special_tokens=tk._special_tokens)
    enc.encode_batch(TEXTS, num_threads=2)  # use it in the parent first
    # A bound method pickles as (encoding, name): workers need nothing from this test
    # module, which spawned children could not import under --import-mode=importlib.
    with mp.get_context(method).Pool(2) as pool:
        got = pool.map_async(enc.encode_ordinary, TEXTS).get(timeout=300)
    assert got == [tk.encode_ordinary(t) for t in TEXTS]


def test_constructor_validates():
    ranks = {bytes([i]): i for i in range(256)}
    with pytest.raises(ValueError, match="single-byte"):
        fastbpe.Encoding("x", pat_str=".", mergeable_ranks={b"a": 0}, special_tokens={})
    with pytest.raises(ValueError, match="already used"):
        fastbpe.Encoding("x", pat_str=".", mergeable_ranks=ranks, special_tokens={"<s>": 3})
    with pytest.raises(ValueError, match="invalid pat_str"):
        fastbpe.Encoding("x", pat_str="(", mergeable_ranks=ranks, special_tokens={})
    with pytest.raises(TypeError):
        fastbpe.Encoding("x", pat_str=".", mergeable_ranks={"a": 0}, special_tokens={})
    with pytest.raises(ValueError, match="explicit_n_vocab"):
        fastbpe.Encoding("x", pat_str=".", mergeable_ranks=ranks, special_tokens={}, explicit_n_vocab=300)
    enc = fastbpe.Encoding("x", pat_str=".", mergeable_ranks=ranks, special_tokens={}, explicit_n_vocab=256)
    assert enc.n_vocab == 256
    with pytest.raises(KeyError):
        enc.eot_token


@pytest.mark.parametrize("core", ["native", "reference"])
def test_batch_items_that_are_not_str_are_named(monkeypatch, core):
    """The Encoding leaves the item check to the native core (in C); both cores name the
    item the same way, for every batch method."""
    if core == "reference":
        monkeypatch.setenv("FASTBPE_REFERENCE_CORE", "1")
    enc = fastbpe.bpe.encoding.get_toy_encoding()
    is_native = type(enc._core_bpe).__module__ == "fastbpe._encode"
    assert is_native == (core == "native")
    for method in (enc.encode_ordinary_batch, enc.encode_batch, enc.encode_batch_to_numpy):
        for bad, name in [(["ok", None], "NoneType"), (("ok", "fine", b"x"), "bytes"),
                          (iter(["ok", 3]), "int")]:
            index = 2 if name == "bytes" else 1
            with pytest.raises(TypeError, match=f"^text {index} of the batch is {name}, expected str$"):
                method(bad)
    if is_native:
        with pytest.raises(TypeError, match="^text 0 of the batch is float, expected str$"):
            enc._core_bpe.encode_ordinary_batch([1.5], 1)
