"""Shared fixtures: where the real vocabularies are, and tiktoken built offline from them.

Where a vocabulary file comes from (decision), first found wins:

1. ``$FASTBPE_TEST_VOCAB_DIR`` (default ``../shared/vocab`` beside the project), so that a
   machine with the shared folder runs on exactly its files;
2. for the files anyone may have (``FREE_FILES``), a copy made once per test session in a
   temporary folder: OpenAI's four ``.tiktoken`` files unpacked from the copies fastbpe
   ships (``fastbpe/vocab``, MIT); ``gpt2.tokenizer.json`` converted from gpt2's ranks by
   transformers' ``TikTokenConverter`` (the tool that made the shared file, byte for byte;
   not fastbpe's own writer, so that tests of our HF reader read a file we did not
   write); BERT uncased unpacked from ``tests/data`` (Apache-2.0). An unpacked file is
   checked against its sha256 as it is made, the converted one by test_vocab_sources.py;
3. otherwise the test skips, naming the file. Only model-licensed files (Llama, Qwen,
   DeepSeek, Mistral) are in neither place, so a fresh clone runs every other test.

tiktoken stays the reference: ``tiktoken_encoding`` builds a real ``tiktoken.Encoding``
from these files with tiktoken's own parser, and tiktoken never downloads.
"""
from __future__ import annotations

import contextlib
import hashlib
import lzma
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
VOCAB_DIR = Path(os.environ.get("FASTBPE_TEST_VOCAB_DIR", ROOT.parent / "shared" / "vocab"))
DATA_DIR = Path(__file__).resolve().parent / "data"

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

# The files a test session can make without ../shared/vocab: name -> (how, sha256).
# "shipped:<ranks>" unpacks fastbpe/vocab/<ranks>.tiktoken.xz; "converted:<file>"
# converts that ranks file with TikTokenConverter; "data" unpacks tests/data/<name>.xz.
# The hashes are the shared folder's (its README); the .tiktoken ones are tiktoken's own.
FREE_FILES = {
    "gpt2.tiktoken": ("shipped:r50k_base", "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"),
    "p50k_base.tiktoken": ("shipped:p50k_base", "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"),
    "cl100k_base.tiktoken": ("shipped:cl100k_base", "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"),
    "o200k_base.tiktoken": ("shipped:o200k_base", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
    "gpt2.tokenizer.json": ("converted:gpt2.tiktoken", "0766c191ce47c7ac1a12c97491e2f243f5fcf696d183b91f7c53082dd39e37d2"),
    "bert-base-uncased/vocab.txt": ("data", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
    "bert-base-uncased/tokenizer.json": ("data", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    "bert-base-uncased/tokenizer_config.json": ("data", "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"),
}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@contextlib.contextmanager
def no_tiktoken_cache():
    """tiktoken's file reader without its cache: it would otherwise copy every file it
    reads into <tmp>/data-gym-cache under the sha1 of its path, a new copy for each
    session's temporary folder."""
    old = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = ""
    try:
        yield
    finally:
        if old is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = old


class VocabFiles:
    """``vocab_file(name)`` -> the path of a real vocabulary file (see the module
    docstring for where it comes from), or skip the test naming it; ``made(name)`` ->
    the session's own copy of a FREE_FILES file, even when the shared folder has one;
    ``shared(name)`` -> the shared folder's file or None."""

    free_files = FREE_FILES

    def __init__(self, tmp_path_factory, shared_dir: Path = VOCAB_DIR):
        self._factory = tmp_path_factory
        self.shared_dir = shared_dir
        self._dir: Path | None = None

    def shared(self, name: str) -> Path | None:
        path = self.shared_dir / name
        return path if path.exists() else None

    def __call__(self, name: str) -> Path:
        path = self.shared(name)
        if path is not None:
            return path
        if name in FREE_FILES:
            return self.made(name)
        pytest.skip(
            f"vocabulary {name} not found in {self.shared_dir}, and not one the tests can make "
            "(model-licensed files never ship): it lives in ../shared/vocab beside the project "
            "(set FASTBPE_TEST_VOCAB_DIR to point elsewhere)"
        )

    def made(self, name: str) -> Path:
        if self._dir is None:
            self._dir = self._factory.mktemp("vocab")
        out = self._dir / name
        if not out.exists():
            how, sha256 = FREE_FILES[name]
            data = self._make(name, how)
            if not how.startswith("converted:") and _sha256(data) != sha256:
                raise ValueError(f"{name} unpacked from {how} is damaged (sha256 {_sha256(data)}, expected {sha256})")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
        return out

    def _make(self, name: str, how: str) -> bytes:
        if how.startswith("shipped:"):
            import importlib.resources

            return lzma.decompress((importlib.resources.files("fastbpe") / "vocab" / f"{how[8:]}.tiktoken.xz").read_bytes())
        if how == "data":
            return lzma.decompress((DATA_DIR / f"{name}.xz").read_bytes())
        # "converted:": HF's converter, as the shared file was made. Its output is checked
        # against the shared file's sha256 by test_vocab_sources.py, not here, so that a
        # transformers release that writes the same tokenizer differently fails one test.
        pytest.importorskip("transformers", reason="transformers (test extra) converts gpt2.tokenizer.json")
        from transformers.convert_slow_tokenizer import TikTokenConverter

        from fastbpe._openai_public import ENCODINGS

        with no_tiktoken_cache():
            tok = TikTokenConverter(vocab_file=str(self(how[10:])), pattern=ENCODINGS["r50k_base"].pat_str).converted()
        tmp = self._dir / f"{name}.partial"
        tok.save(str(tmp))
        data = tmp.read_bytes()
        tmp.unlink()
        return data


@pytest.fixture(scope="session")
def vocab_file(tmp_path_factory):
    """``vocab_file("gpt2.tiktoken")`` -> Path, or skip the test with the reason."""
    return VocabFiles(tmp_path_factory)


_TIKTOKEN_CACHE: dict = {}


@pytest.fixture(scope="session")
def tiktoken_encoding(vocab_file):
    """``tiktoken_encoding("cl100k_base")`` -> a real ``tiktoken.Encoding``, built offline."""
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    from fastbpe.reference import patterns

    pats = {"gpt2": patterns.GPT2, "cl100k_base": patterns.CL100K, "o200k_base": patterns.O200K}

    def get(name: str):
        if name not in _TIKTOKEN_CACHE:
            path = vocab_file(f"{name}.tiktoken")
            with no_tiktoken_cache():
                ranks = load_tiktoken_bpe(str(path))
            _TIKTOKEN_CACHE[name] = tiktoken.Encoding(
                name, pat_str=pats[name], mergeable_ranks=ranks, special_tokens=TIKTOKEN_SPECIALS[name],
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


@pytest.fixture(autouse=True, scope="session")
def _hub_offline():
    """No test downloads a model: ``fastbpe.from_pretrained`` (and the CLI's ``-t
    org/name``, run in subprocesses that inherit this) stays on the local cache."""
    old = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
