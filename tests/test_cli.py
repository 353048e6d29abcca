"""The fastbpe command, run for real in a subprocess."""
import os
import subprocess
import sys

import pytest


def run(*args, stdin=None, cwd=None, env_extra=None):
    import tempfile

    import fastbpe

    # Never run from the project root: `python -m` puts the working directory first on
    # sys.path, where an unbuilt source tree would shadow the installed package.
    cwd = cwd or tempfile.gettempdir()
    # The subprocess imports the same fastbpe as this test (installed or in-tree).
    pkg_parent = os.path.dirname(os.path.dirname(fastbpe.__file__))
    env = dict(os.environ, PYTHONPATH=pkg_parent, **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "fastbpe", *args], input=stdin, capture_output=True,
                          cwd=cwd, env=env, timeout=600)


def test_demo_trains_saves_and_reports(tmp_path):
    out = tmp_path / "demo.json"
    proc = run("demo", "--max-mb", "0.3", "--vocab-size", "300", "-q", "-o", str(out))
    assert proc.returncode == 0, proc.stderr.decode()
    text = proc.stdout.decode()
    assert "standard library" in text and "bytes/token" in text
    assert out.exists()
    import fastbpe

    assert fastbpe.load(out).n_vocab == 300


def test_train_encode_decode_round_trip(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("hello world, hello fastbpe\nçok güzel 中文\n" * 20, encoding="utf-8")
    tok = tmp_path / "tok.json"
    proc = run("train", str(corpus), "--vocab-size", "280", "-o", str(tok), "-q", "--special", "<|endoftext|>")
    assert proc.returncode == 0, proc.stderr.decode()
    original = "hello çok 中文 world\r\n\ttabs  and spaces  ".encode("utf-8")
    enc = run("encode", "-t", str(tok), stdin=original)
    assert enc.returncode == 0, enc.stderr.decode()
    dec = run("decode", "-t", str(tok), stdin=enc.stdout)
    assert dec.returncode == 0 and dec.stdout == original


@pytest.mark.parametrize(
    "args, message",
    [
        (["encode", "-t", "no-such-tokenizer"], b"neither a file nor"),
        (["train", "missing.txt", "--vocab-size", "300", "-o", "x.json"], b"not found: missing.txt"),
        (["train", "--vocab-size", "10", "-o", "x.json"], b"too small"),
    ],
)
def test_errors_are_one_line_without_traceback(args, message, tmp_path):
    proc = run(*args, stdin=b"abc\n", cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr and b"Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
