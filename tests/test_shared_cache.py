"""The encoders' shared pretoken cache (fastbpe._shared_cache): the same ids as tiktoken
with it on, off, tiny (evicting all the time), across calls, threads, fork and pickle."""
from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import fastbpe
from fastbpe import _encode, _shared_cache
from fastbpe.encoding import get_toy_encoding

if type(get_toy_encoding()._core_bpe).__module__ != "fastbpe._encode":
    pytest.skip("the native core is not built", allow_module_level=True)

def _ours(tk, cache_bytes=None):
    """A native Encoding over tiktoken's tables, with a shared cache of cache_bytes
    (None: the default size)."""
    old = _shared_cache.set_default_bytes(cache_bytes) if cache_bytes is not None else None
    try:
        return fastbpe.Encoding(tk.name, pat_str=tk._pat_str, mergeable_ranks=tk._mergeable_ranks,
                                special_tokens=tk._special_tokens)
    finally:
        if cache_bytes is not None:
            _shared_cache.set_default_bytes(None)


def _long_tail_docs(seed=7, n_docs=120):
    """Documents of words drawn from a Zipf-like law over many made-up words (Latin,
    Turkish and CJK letters), so that some recur, most do not, and lines collide."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyzığüşöçéABCDEF中文字日本"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 16))) for _ in range(5000)]
    weights = [1 / (i + 1) for i in range(len(words))]
    docs = []
    for _ in range(n_docs):
        k = rng.randint(20, 300)
        docs.append(" ".join(rng.choices(words, weights, k=k)) + rng.choice(["\n", ".", " 123\n", "!\n\n"]))
    return docs


@pytest.fixture(scope="module", params=["gpt2", "cl100k_base", "o200k_base"])
def tk(request, tiktoken_encoding):
    return tiktoken_encoding(request.param)


@pytest.mark.parametrize("size", [0, 64 * 64, 64 * 1024, None], ids=["off", "64-lines", "1k-lines", "default"])
def test_ids_match_tiktoken_whatever_the_size(tk, size):
    """Many calls on short documents (the cache's use), repeated so that the second and
    third passes read what the first ones wrote; a 64-line table evicts on almost every
    write, with its doorkeeper cleared every few dozen chunks."""
    ours = _ours(tk, size)
    docs = _long_tail_docs()
    want = [tk.encode_ordinary(d) for d in docs]
    for _ in range(3):
        assert [ours.encode_ordinary(d) for d in docs] == want
        assert [ours.encode_to_numpy(d).tolist() for d in docs] == want
    total, used = ours._core_bpe._shared_cache_info()
    if size == 0:
        assert (total, used) == (0, 0)
    else:
        assert 0 < used <= total // 64


def test_bypassed_and_used_give_the_same_ids(tk):
    ours = _ours(tk, 64 * 256)
    docs = _long_tail_docs(seed=3)
    old = _encode._set_shared_cache(False)
    try:
        off = [ours.encode_ordinary(d) for d in docs]
    finally:
        _encode._set_shared_cache(old)
    for _ in range(2):
        assert [ours.encode_ordinary(d) for d in docs] == off


def test_clear_empties_the_table(tk):
    ours = _ours(tk, 64 * 1024)
    docs = _long_tail_docs(seed=5, n_docs=40)
    for _ in range(3):
        for d in docs:
            ours.encode_ordinary(d)
    assert ours._core_bpe._shared_cache_info()[1] > 0
    ours._core_bpe._clear_chunk_caches()
    assert ours._core_bpe._shared_cache_info()[1] == 0
    assert [ours.encode_ordinary(d) for d in docs] == [tk.encode_ordinary(d) for d in docs]


def test_replaced_table_sizes(tk):
    ours = _ours(tk, 0)
    core = ours._core_bpe
    for size in (64 * 64, 64 * 100, 1 << 20, 0, 10):
        core._set_shared_cache_bytes(size)
        total, used = core._shared_cache_info()
        if size < 64 * 64:
            assert total == 0
        else:
            assert total <= size and total & (total - 1) == 0 and total * 2 > size
        assert used == 0
        docs = _long_tail_docs(seed=size % 97, n_docs=20)
        assert [ours.encode_ordinary(d) for d in docs * 2] == [tk.encode_ordinary(d) for d in docs * 2]


@pytest.mark.parametrize("size", [64 * 64, 64 * 4096])
def test_threads_share_one_table(tk, size):
    """Batches on 2 threads and several Python threads calling at once all read and write
    the same lines (a small table: constant contention for the same lines)."""
    ours = _ours(tk, size)
    docs = _long_tail_docs(seed=11, n_docs=160)
    want = [tk.encode_ordinary(d) for d in docs]
    for _ in range(3):
        assert ours.encode_ordinary_batch(docs, num_threads=2) == want
        ids, offsets = ours.encode_batch_to_numpy(docs, num_threads=2)
        assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(docs))] == want
    errors = []

    def worker(k):
        try:
            for _ in range(3):
                part = docs[k::4]
                if [ours.encode_ordinary(d) for d in part] != want[k::4]:
                    errors.append(k)
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def _child_encodes(args):
    ours, docs = args
    return [ours.encode_ordinary(d) for d in docs]


def test_fork_inherits_a_warm_table(tiktoken_encoding):
    tk = tiktoken_encoding("cl100k_base")
    ours = _ours(tk, 64 * 4096)
    docs = _long_tail_docs(seed=13, n_docs=60)
    want = [tk.encode_ordinary(d) for d in docs]
    for _ in range(2):
        assert [ours.encode_ordinary(d) for d in docs] == want
    assert ours._core_bpe._shared_cache_info()[1] > 0
    # a batch on 2 threads writes the table while the pool forks
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            ours.encode_ordinary_batch(_long_tail_docs(seed=17, n_docs=40), num_threads=2)

    t = threading.Thread(target=churn)
    t.start()
    try:
        with mp.get_context("fork").Pool(2) as pool:
            got = pool.map(_child_encodes, [(ours, docs[i::3]) for i in range(3)])
    finally:
        stop.set()
        t.join()
    assert got == [want[i::3] for i in range(3)]


def test_pickled_encoder_starts_empty_and_matches(tiktoken_encoding):
    tk = tiktoken_encoding("o200k_base")
    ours = _ours(tk, 64 * 4096)
    docs = _long_tail_docs(seed=19, n_docs=30)
    for d in docs * 2:
        ours.encode_ordinary(d)
    again = pickle.loads(pickle.dumps(ours))
    assert again._core_bpe._shared_cache_info()[1] == 0
    assert [again.encode_ordinary(d) for d in docs] == [tk.encode_ordinary(d) for d in docs]


def test_size_from_the_environment():
    """$FASTBPE_SHARED_CACHE_MB sets new encoders' tables; 0 turns them off; nonsense is a
    ValueError that names the variable."""
    code = (
        "from fastbpe.encoding import get_toy_encoding; from fastbpe import _shared_cache as s; "
        "print(s.default_bytes(), get_toy_encoding()._core_bpe._shared_cache_info()[0])"
    )

    def run(value):
        env = dict(os.environ, FASTBPE_SHARED_CACHE_MB=value, PYTHONPATH=str(Path(fastbpe.__file__).parents[1]))
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              cwd=Path(fastbpe.__file__).parents[2])

    assert run("0").stdout.split() == ["0", "0"]
    assert run("2").stdout.split() == [str(2 << 20), str(2 << 20)]
    assert run("0.5").stdout.split() == [str(1 << 19), str(1 << 19)]
    bad = run("lots")
    assert bad.returncode != 0 and "FASTBPE_SHARED_CACHE_MB" in bad.stderr
    assert "FASTBPE_SHARED_CACHE_MB" in run("-1").stderr


def test_set_default_bytes_validation():
    with pytest.raises(TypeError):
        _shared_cache.set_default_bytes(1.5)
    with pytest.raises(TypeError):
        _shared_cache.set_default_bytes(True)
    with pytest.raises(ValueError):
        _shared_cache.set_default_bytes(-1)
    assert _shared_cache.default_bytes() == _shared_cache.set_default_bytes(None)
