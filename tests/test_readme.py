"""Every snippet of README.md runs as written (and gives what its comments say).

Python blocks run in order in one namespace, statement by statement; a statement whose
line ends in a comment that is a Python literal (``# [15339, 1917]``) must produce that
value. Bash blocks run line by line through bash, with ``fastbpe`` being this
checkout's ``python -m fastbpe``; ``pip install`` steps and ``pytest`` (this very suite)
are left out. Both run in a temporary folder holding the small inputs the snippets name
(``corpus.txt``, ``en.txt`` ...) and the real vocabularies (``FASTBPE_VOCAB_DIR``).
"""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
VOCABS = ["gpt2.tiktoken", "gpt2.tokenizer.json", "cl100k_base.tiktoken", "o200k_base.tiktoken", "bert-base-uncased/vocab.txt",
          "bert-base-uncased/tokenizer.json", "bert-base-uncased/tokenizer_config.json"]
#: Commands of the README that are not snippets to run here, and why.
NOT_RUN = {"pip": "installs the package (the tests use this checkout)", "pytest": "runs this very test suite"}


def blocks(language: str) -> list[str]:
    if not README.exists():
        pytest.skip("README.md is not shipped in this installation")
    return re.findall(rf"^```{language}\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.S | re.M)


def shell_commands(block: str) -> list[str]:
    """The lines of a bash block to run: ``pip install ... &&`` and ``pytest`` left out."""
    out = []
    for line in block.splitlines():
        steps = [s.strip() for s in line.split("&&")]
        steps = [s for s in steps if s and s.split()[0] not in NOT_RUN]
        if steps:
            out.append(" && ".join(steps))
    return out


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, vocab_file):
    paths = {name: vocab_file(name) for name in VOCABS}  # skip, saying which, when one is absent
    vocab_dir = paths["gpt2.tiktoken"].parent  # FASTBPE_VOCAB_DIR, for get_encoding
    d = tmp_path_factory.mktemp("readme")
    text = ("Tokenizers turn text into ids. The quick brown fox jumps over the lazy dog.\n"
            "def greet(name):\n    return f'Hello, {name}!'\n") * 40
    (d / "corpus.txt").write_text(text, encoding="utf-8")
    for sub in ("corpus", "docs"):
        (d / sub).mkdir()
        (d / sub / "a.txt").write_text(text, encoding="utf-8")
        (d / sub / "b.txt").write_text("Another document, with numbers 12345.\n", encoding="utf-8")
    (d / "en.txt").write_text("The weather is very nice today.\n", encoding="utf-8")
    (d / "tr.txt").write_text("Bugün hava çok güzel.\n", encoding="utf-8")
    (d / "zh.txt").write_text("今天天气很好。\n", encoding="utf-8")
    # the corpus workflow's JSONL (zstd) and Parquet files
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    (d / "data").mkdir()
    rows = [text[i:i + 300] for i in range(0, len(text), 300)]
    jsonl = "".join(json.dumps({"text": r, "id": i}) + "\n" for i, r in enumerate(rows)).encode()
    (d / "data" / "a.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(jsonl))
    pq.write_table(pa.table({"text": rows}), d / "data" / "b.parquet")
    # the files the Python snippets load by name (cl100k_base.tiktoken, bert-base-uncased/)
    for name in VOCABS:
        (d / name).parent.mkdir(exist_ok=True)
        shutil.copy(paths[name], d / name)
    return d, vocab_dir


def _comment_literal(line: str):
    """The value a ``# literal`` comment at the end of the line promises, or None."""
    if "#" not in line:
        return None
    comment = line.rsplit("#", 1)[1].strip()
    # "# [1, 2]" or "# [1, 2]: why" (the literal, then an explanation)
    for candidate in (comment, comment.split(": ", 1)[0]):
        try:
            return (ast.literal_eval(candidate),)
        except (ValueError, SyntaxError):
            continue
    return None


# the README trains a 32,000-token vocabulary on a few lines, and saves it as .tiktoken
@pytest.mark.filterwarnings("ignore:training stopped early", "ignore:the .tiktoken format holds only ranks")
def test_python_snippets_run_as_written(workdir, monkeypatch):
    d, vocab_dir = workdir
    monkeypatch.chdir(d)
    monkeypatch.setenv("FASTBPE_VOCAB_DIR", str(vocab_dir))
    namespace: dict = {}
    code = "\n".join(blocks("python"))
    lines = code.splitlines()
    checked = 0
    for stmt in ast.parse(code).body:
        source = ast.get_source_segment(code, stmt)
        exec(compile(ast.Module([stmt], []), "README.md", "exec"), namespace)  # noqa: S102
        promised = _comment_literal(lines[stmt.end_lineno - 1])
        if promised is None:
            continue
        if isinstance(stmt, ast.Expr):
            value = eval(compile(ast.Expression(stmt.value), "README.md", "eval"), namespace)  # noqa: S307
        elif isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
            value = namespace[stmt.targets[0].id]
        else:
            continue
        assert value == promised[0], source
        checked += 1
    assert checked >= 5  # the comments are checked, not only the code run


def test_bash_snippets_run_as_written(workdir):
    import fastbpe

    d, vocab_dir = workdir
    env = dict(os.environ, FASTBPE_VOCAB_DIR=str(vocab_dir),
               PYTHONPATH=os.path.dirname(os.path.dirname(fastbpe.__file__)))
    prelude = f'fastbpe() {{ "{sys.executable}" -m fastbpe "$@"; }}\nset -eo pipefail\n'
    ran = []
    for block in blocks("bash"):
        for command in shell_commands(block):
            proc = subprocess.run(["bash", "-c", prelude + command], cwd=d, env=env, capture_output=True,
                                  timeout=300)
            assert proc.returncode == 0, f"{command}\n{proc.stderr.decode()[-2000:]}"
            assert b"Traceback" not in proc.stderr, command
            ran.append((command, proc.stdout.decode()))
    outputs = dict(ran)
    assert any(c.startswith("fastbpe demo") for c in outputs)
    assert outputs['echo "hello" | fastbpe encode -t gpt2 | fastbpe decode -t gpt2'] == "hello\n"
    assert (d / "tok.json").exists() and (d / "tokens.html").exists() and (d / "out" / "manifest.json").exists()
    assert (d / "shards" / "manifest.json").exists()


def test_the_runner_leaves_out_only_installs_and_the_suite():
    assert shell_commands('pip install . && fastbpe demo\npip install ".[test]" && pytest\n') == ["fastbpe demo"]
    every = [c for b in blocks("bash") for c in shell_commands(b)]
    assert all("fastbpe" in c for c in every), every
