"""Shared fixtures: where the real vocabularies are, and tiktoken built offline from them."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
VOCAB_DIR = Path(os.environ.get("FASTBPE_TEST_VOCAB_DIR", ROOT.parent / "shared" / "vocab"))

# Hypothesis: no wall-clock deadlines (machines are shared and noisy); CI runs the same
# number of examples as a developer so that a green CI means the same thing.
settings.register_profile(
    "fastbpe", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("fastbpe")

# Special tokens as tiktoken_ext.openai_public defines them.
TIKTOKEN_SPECIALS = {
    "gpt2": {"<|endoftext|>": 50256},
    "cl100k_base": {
        "<|endoftext|>": 100257,
        "<|fim_prefix|>": 100258,
        "<|fim_middle|>": 100259,
        "<|fim_suffix|>": 100260,
        "<|endofprompt|>": 100276,
    },
    "o200k_base": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
}


def _vocab_file(name: str) -> Path:
    path = VOCAB_DIR / name
    if not path.exists():
        pytest.skip(
            f"real vocabulary {name} not found in {VOCAB_DIR}; it lives in ../shared/vocab "
            "beside the project (set FASTBPE_TEST_VOCAB_DIR to point elsewhere)"
        )
    return path


@pytest.fixture(scope="session")
def vocab_file():
    """``vocab_file("gpt2.tiktoken")`` -> Path, or skip the test with the reason."""
    return _vocab_file


_TIKTOKEN_CACHE: dict = {}


@pytest.fixture(scope="session")
def tiktoken_encoding():
    """``tiktoken_encoding("cl100k_base")`` -> a real ``tiktoken.Encoding``, built offline."""
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    from fastbpe.reference import patterns

    pats = {"gpt2": patterns.GPT2, "cl100k_base": patterns.CL100K, "o200k_base": patterns.O200K}

    def get(name: str):
        if name not in _TIKTOKEN_CACHE:
            path = _vocab_file(f"{name}.tiktoken")
            _TIKTOKEN_CACHE[name] = tiktoken.Encoding(
                name,
                pat_str=pats[name],
                mergeable_ranks=load_tiktoken_bpe(str(path)),
                special_tokens=TIKTOKEN_SPECIALS[name],
            )
        return _TIKTOKEN_CACHE[name]

    return get


@pytest.fixture(scope="module", params=[(n, core) for n in TIKTOKEN_SPECIALS for core in ("native", "reference")],
                ids=lambda p: f"{p[0]}-{p[1]}")
def pair(request, tiktoken_encoding):
    """(our Encoding, tiktoken's) on gpt2, cl100k_base and o200k_base, each on the native
    core and on its pure-Python twin."""
    import fastbpe
    from fastbpe.reference.core import CoreBPE

    name, core = request.param
    tk = tiktoken_encoding(name)
    ours = fastbpe.Encoding(name, pat_str=tk._pat_str, mergeable_ranks=tk._mergeable_ranks,
                            special_tokens=tk._special_tokens)
    if core == "reference":
        ours._core_bpe = CoreBPE(tk._mergeable_ranks, tk._special_tokens, tk._pat_str)
    else:
        assert type(ours._core_bpe).__module__ == "fastbpe._encode"
    return ours, tk


@pytest.fixture(autouse=True, scope="session")
def _threads_as_asked():
    """Batch calls run on exactly the threads a test asks for.

    The native core otherwise uses about one thread per 16,384 characters and no more
    than the CPUs it may run on (``_encode.batch_threads``), which would put almost every
    test batch (small on purpose) on one thread and leave the threaded paths untested.
    ``test_bpe_encoding_native.py`` tests that rule with it switched back on."""
    try:
        from fastbpe import _encode
    except ImportError:  # the reference core has no threads
        yield
        return
    old = _encode.default_tuning(points_per_thread=0, cap_to_cpus=False)
    yield
    _encode.default_tuning(**old)
