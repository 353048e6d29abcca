"""get_encoding: every tiktoken name, offline, from users' files or the shipped copy,
checked, defined as tiktoken defines it, cached once per process."""
import hashlib
import lzma
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import fastbpe
from fastbpe import _openai_public, registry
from fastbpe.formats.tiktoken_bpe import KNOWN_FILES, parse_tiktoken_bpe

NAMES = ["gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base", "o200k_harmony"]
ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "fastbpe" / "vocab"


@pytest.fixture(autouse=True)
def _fresh(monkeypatch, tmp_path):
    """No user files anywhere unless a test puts them there."""
    registry._clear_cache()
    monkeypatch.delenv("FASTBPE_VOCAB_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "no-cache"))
    monkeypatch.setattr(registry, "_PACKAGES", {})
    yield
    registry._clear_cache()


def _unpacked(ranks_name: str) -> bytes:
    return lzma.decompress((SHIPPED / f"{ranks_name}.tiktoken.xz").read_bytes())


# ----------------------------------------------------------------------- names, docs
def test_names_are_tiktokens():
    openai_public = pytest.importorskip("tiktoken_ext.openai_public")
    assert fastbpe.list_encoding_names() == NAMES == list(openai_public.ENCODING_CONSTRUCTORS)


# ----------------------------------------------------------------------- where from
def test_works_with_no_user_files_from_the_shipped_copy():
    # Before: FileNotFoundError on a machine without a .tiktoken file somewhere.
    for ranks_name in _openai_public.RANKS_FILES:
        _, source = registry._locate(ranks_name)
        assert source == str(registry._SHIPPED_DIR / f"{ranks_name}.tiktoken.xz")
    assert fastbpe.get_encoding("cl100k_base").encode("hello world") == [15339, 1917]


def test_every_name_loads_in_a_fresh_process_outside_the_repo(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("FASTBPE_VOCAB_DIR", "DATA_GYM_CACHE_DIR")}
    env.update(TIKTOKEN_CACHE_DIR=str(tmp_path / "empty"), PYTHONPATH=str(Path(fastbpe.__file__).parents[1]))
    code = "import fastbpe; print([fastbpe.get_encoding(n).n_vocab for n in fastbpe.list_encoding_names()])"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[50257, 50257, 50281, 50284, 100277, 200019, 201088]"


def test_fastbpe_vocab_dir_comes_first(monkeypatch, tmp_path):
    (tmp_path / "gpt2.tiktoken").write_bytes(_unpacked("r50k_base"))   # the older file name
    monkeypatch.setenv("FASTBPE_VOCAB_DIR", str(tmp_path))
    assert registry._locate("r50k_base")[1] == str(tmp_path / "gpt2.tiktoken")
    (tmp_path / "r50k_base.tiktoken").write_bytes(_unpacked("r50k_base"))
    assert registry._locate("r50k_base")[1] == str(tmp_path / "r50k_base.tiktoken")
    assert fastbpe.get_encoding("r50k_base").n_vocab == 50257


def test_tiktoken_cache_comes_before_the_shipped_copy(monkeypatch, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    key = hashlib.sha1(_openai_public.RANKS_FILES["cl100k_base"].url.encode()).hexdigest()
    (cache / key).write_bytes(_unpacked("cl100k_base"))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    assert registry._locate("cl100k_base")[1] == str(cache / key)
    assert fastbpe.get_encoding("cl100k_base").encode("hi") == [6151]
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", str(cache))   # tiktoken's second choice
    assert registry._locate("cl100k_base")[1] == str(cache / key)


def test_empty_tiktoken_cache_dir_turns_the_cache_off(monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", "/nowhere")
    assert registry._user_candidates("o200k_base") == []


def test_installed_packages_are_searched(monkeypatch, tmp_path):
    pkg = tmp_path / "fake_vocab_pkg"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "data" / "p50k_base.tiktoken").write_bytes(_unpacked("p50k_base"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_PACKAGES", {"fake_vocab_pkg": ["data"]})
    assert registry._locate("p50k_base")[1] == str(pkg / "data" / "p50k_base.tiktoken")


def test_wrong_file_in_vocab_dir_is_an_error(monkeypatch, tmp_path):
    (tmp_path / "r50k_base.tiktoken").write_bytes(b"YQ== 0\n")
    monkeypatch.setenv("FASTBPE_VOCAB_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="r50k_base.tiktoken is not the expected r50k_base file"):
        fastbpe.get_encoding("gpt2")


def test_wrong_file_in_tiktoken_cache_is_skipped_as_tiktoken_does(monkeypatch, tmp_path):
    key = hashlib.sha1(_openai_public.RANKS_FILES["r50k_base"].url.encode()).hexdigest()
    (tmp_path / key).write_bytes(b"truncated")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert registry._locate("r50k_base")[1].endswith("r50k_base.tiktoken.xz")


def test_damaged_shipped_copy_is_an_error(monkeypatch, tmp_path):
    (tmp_path / "o200k_base.tiktoken.xz").write_bytes(lzma.compress(b"YQ== 0\n"))
    monkeypatch.setattr(registry, "_SHIPPED_DIR", tmp_path)
    with pytest.raises(ValueError, match="damaged.*reinstall"):
        fastbpe.get_encoding("o200k_base")


def test_missing_everywhere_says_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.setenv("FASTBPE_VOCAB_DIR", str(tmp_path))
    monkeypatch.setattr(registry, "_SHIPPED_DIR", tmp_path / "no-vocab")
    with pytest.raises(FileNotFoundError, match="FASTBPE_VOCAB_DIR") as info:
        fastbpe.get_encoding("o200k_harmony")
    message = str(info.value)
    assert "o200k_base.tiktoken not found" in message and "never downloads" in message
    assert str(tmp_path / "o200k_base.tiktoken") in message and str(tmp_path / "no-vocab") in message


def test_unknown_name():
    with pytest.raises(ValueError, match="unknown encoding 'p50k'"):
        fastbpe.get_encoding("p50k")
    with pytest.raises(TypeError):
        fastbpe.get_encoding(None)


# ----------------------------------------------------------------------- the data
def test_shipped_files_are_tiktokens_and_listed_in_the_package_data():
    import tomllib

    assert sorted(p.name for p in SHIPPED.glob("*.xz")) == sorted(f"{n}.tiktoken.xz" for n in _openai_public.RANKS_FILES)
    for ranks_name, info in _openai_public.RANKS_FILES.items():
        assert hashlib.sha256(_unpacked(ranks_name)).hexdigest() == info.sha256
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "vocab/*.tiktoken.xz" in package_data["fastbpe"] and "vocab/LICENSE" in package_data["fastbpe"]
    assert "recursive-include fastbpe/vocab *.tiktoken.xz LICENSE" in (ROOT / "MANIFEST.in").read_text()
    assert "MIT" in (SHIPPED / "LICENSE").read_text()


@pytest.mark.parametrize("ranks_name", list(_openai_public.RANKS_FILES))
def test_fast_parse_of_a_known_file_equals_the_checked_parse(ranks_name):
    contents = _unpacked(ranks_name)
    fast, checked = registry._parse_known(contents), parse_tiktoken_bpe(contents)
    assert list(fast.items()) == list(checked.items())


def test_load_knows_every_public_file(tmp_path):
    # Before: p50k_base.tiktoken loaded with cl100k's pattern and no special tokens.
    assert {known[0] for known in KNOWN_FILES.values()} == {"gpt2", "p50k_base", "cl100k_base", "o200k_base"}
    path = tmp_path / "p50k_base.tiktoken"
    path.write_bytes(_unpacked("p50k_base"))
    enc = fastbpe.load(path)
    assert enc.name == "p50k_base" and enc.pat_str == fastbpe.GPT2 and enc.special_tokens == {"<|endoftext|>": 50256}


# ----------------------------------------------------------------------- tiktoken's definitions
TEXTS = [
    "hello world",
    "   many    spaces\n\n\tand tabs  ",
    "çok güzel 中文 🙂 Ünïcödé's DON'T we'll",
    "def f(x):\n    return x ** 2  # 12345 678901\r\n",
]


@pytest.fixture(scope="module")
def tiktoken_definitions(tmp_path_factory):
    """``definition(name)`` -> the kwargs tiktoken_ext.openai_public builds for that name,
    with its file loads answered from the unpacked shipped copies (offline)."""
    openai_public = pytest.importorskip("tiktoken_ext.openai_public")
    from tiktoken.load import load_tiktoken_bpe

    folder = tmp_path_factory.mktemp("tiktoken-files")
    local = {}
    for ranks_name, info in _openai_public.RANKS_FILES.items():
        (folder / ranks_name).write_bytes(_unpacked(ranks_name))
        local[info.url] = str(folder / ranks_name)

    def offline_load(url, expected_hash=None):
        return load_tiktoken_bpe(local[url], expected_hash=expected_hash)   # tiktoken checks the hash

    def gpt2_ranks(**_):   # GPT-2's encoder.json/vocab.bpe hold exactly r50k_base's ranks
        return offline_load(_openai_public.RANKS_FILES["r50k_base"].url)

    def definition(name):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(openai_public, "load_tiktoken_bpe", offline_load)
            mp.setattr(openai_public, "data_gym_to_mergeable_bpe_ranks", gpt2_ranks)
            return openai_public.ENCODING_CONSTRUCTORS[name]()

    return definition


@pytest.mark.parametrize("name", NAMES)
def test_definition_and_ids_equal_tiktokens(name, tiktoken_definitions):
    import tiktoken

    theirs = tiktoken_definitions(name)
    tk = tiktoken.Encoding(**theirs)
    ours = fastbpe.get_encoding(name)
    ours_def = _openai_public.ENCODINGS[name]
    assert ours.name == tk.name == name
    assert ours.pat_str == tk._pat_str
    assert list(ours.special_tokens.items()) == list(tk._special_tokens.items())   # order too
    assert ours.special_tokens_set == tk.special_tokens_set
    assert ours_def.explicit_n_vocab == theirs.get("explicit_n_vocab")
    assert (ours.n_vocab, ours.max_token_value) == (tk.n_vocab, tk.max_token_value)
    assert ours.mergeable_ranks == tk._mergeable_ranks
    specials = "".join(tk._special_tokens)[:2000]
    for text in TEXTS + [specials, "x" + specials + TEXTS[2]]:
        assert ours.encode_ordinary(text) == tk.encode_ordinary(text)
        assert ours.encode(text, allowed_special="all") == tk.encode(text, allowed_special="all")
    special_ids = sorted(set(tk._special_tokens.values()))
    assert [ours.decode_single_token_bytes(i) for i in special_ids] == [tk.decode_single_token_bytes(i) for i in special_ids]
    assert ours.decode_bytes(special_ids) == tk.decode_bytes(special_ids)


# ----------------------------------------------------------------------- cache
def test_built_once_even_when_threads_ask_at_once(monkeypatch):
    built = []
    real = registry._build
    monkeypatch.setattr(registry, "_build", lambda name: built.append(name) or real(name))
    results = []
    threads = [threading.Thread(target=lambda: results.append(fastbpe.get_encoding("gpt2"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert built == ["gpt2"] and len(results) == 4 and all(r is results[0] for r in results)
    assert registry.is_registered(results[0])
    registry._clear_cache()
    assert not registry.is_registered(results[0]) and fastbpe.get_encoding("gpt2") is not results[0]


def test_shipped_data_stays_small():
    # xz keeps the four files at 2.3 MB (7 MB as text); a wheel carries them as they are
    assert sum(p.stat().st_size for p in SHIPPED.iterdir()) < 2_500_000
