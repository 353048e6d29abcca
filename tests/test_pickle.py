"""Pickling: an encoding from get_encoding travels as its name (as in tiktoken) and
arrives as the receiving process's cached object; any other encoding by value."""
import multiprocessing as mp
import pickle

import pytest

import fastbpe
from fastbpe import registry

TEXTS = ["hello world", "çok güzel 中文 🙂", "def f(x):\n    return x\n", "<|endoftext|> as text"]


@pytest.mark.parametrize("name", fastbpe.list_encoding_names())
def test_registered_encodings_pickle_by_name(name):
    # Before: 1.3 MB for cl100k_base (the ranks), and loads gave a copy.
    enc = fastbpe.get_encoding(name)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        blob = pickle.dumps(enc, protocol)
        assert len(blob) < 100, len(blob)   # tiktoken: 59 bytes for cl100k_base
        assert pickle.loads(blob) is enc


def test_pickle_by_name_rebuilds_in_a_process_that_has_not_built_it():
    enc = fastbpe.get_encoding("gpt2")
    blob = pickle.dumps(enc)
    registry._clear_cache()
    try:
        again = pickle.loads(blob)
        assert again is fastbpe.get_encoding("gpt2") and again is not enc
        assert again.encode(TEXTS[1]) == enc.encode(TEXTS[1])
    finally:
        registry._clear_cache()


def test_other_encodings_pickle_by_value():
    reg = fastbpe.get_encoding("gpt2")
    # same name and data as a registered one, but not the registered object
    custom = fastbpe.Encoding("gpt2", pat_str=reg.pat_str, mergeable_ranks=reg.mergeable_ranks,
                              special_tokens={"<|endoftext|>": 50256, "<|pickle|>": 60000})
    blob = pickle.dumps(custom)
    assert len(blob) > 500_000
    again = pickle.loads(blob)
    assert again is not custom and again is not reg and not registry.is_registered(again)
    assert again.encode("<|pickle|> hi", allowed_special="all") == [60000, 23105]
    assert [again.encode(t, disallowed_special=()) for t in TEXTS] == [custom.encode(t, disallowed_special=()) for t in TEXTS]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_process_pools_get_the_workers_own_cached_encoding(method):
    enc = fastbpe.get_encoding("cl100k_base")
    want = [enc.encode_ordinary(t) for t in TEXTS]
    # bound methods and module functions only: spawned workers cannot import this test
    # module under --import-mode=importlib
    with mp.get_context(method).Pool(2) as pool:
        got = pool.map_async(enc.encode_ordinary, TEXTS).get(timeout=300)
        registered = pool.map_async(registry.is_registered, [enc] * 4).get(timeout=300)
    assert got == want and registered == [True] * 4


def test_pickles_from_before_the_layered_package_load():
    # by-value pickles made before issue 24 name fastbpe.encoding.Encoding (protocol 0 is
    # text, so the old name can be written back into a new pickle)
    enc = fastbpe.Encoding("toy", pat_str=r"\S+|\s+", mergeable_ranks={bytes([i]): i for i in range(256)} | {b"hi": 256},
                           special_tokens={"<|eot|>": 257})
    blob = pickle.dumps(enc, 0)
    assert b"fastbpe.bpe.encoding\nEncoding" in blob
    old = pickle.loads(blob.replace(b"fastbpe.bpe.encoding\nEncoding", b"fastbpe.encoding\nEncoding"))
    assert old.encode("hi<|eot|>", allowed_special="all") == [256, 257]
