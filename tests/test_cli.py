"""The fastbpe command, run for real in a subprocess."""
import html.parser
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

VOCAB_DIR = Path(os.environ.get("FASTBPE_TEST_VOCAB_DIR", Path(__file__).resolve().parents[2] / "shared" / "vocab"))


def run(*args, stdin=None, cwd=None, env_extra=None):
    import tempfile

    import fastbpe

    # Never run from the project root: `python -m` puts the working directory first on
    # sys.path, where an unbuilt source tree would shadow the installed package.
    cwd = cwd or tempfile.gettempdir()
    # The subprocess imports the same fastbpe as this test (installed or in-tree).
    pkg_parent = os.path.dirname(os.path.dirname(fastbpe.__file__))
    env = dict(os.environ, PYTHONPATH=pkg_parent, **(env_extra or {}))
    env.pop("FASTBPE_VOCAB_DIR", None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "fastbpe", *map(str, args)], input=stdin, capture_output=True,
                          cwd=cwd, env=env, timeout=600)


def ok(proc) -> str:
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"Traceback" not in proc.stderr
    return proc.stdout.decode("utf-8")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    c = d / "corpus.txt"
    c.write_text("hello world, hello fastbpe\nçok güzel 中文\ndef f(x):\n    return x\n" * 20, encoding="utf-8")
    return c


@pytest.fixture(scope="module")
def tok(corpus):
    out = corpus.parent / "tok.json"
    ok(run("train", corpus, "--vocab-size", "280", "-o", out, "-q", "--special", "<|endoftext|>"))
    return out


@pytest.fixture(scope="session")
def builtin_env(vocab_file):
    folder = vocab_file("cl100k_base.tiktoken").parent
    return {"FASTBPE_VOCAB_DIR": str(folder)}


def test_demo_trains_saves_and_reports(tmp_path):
    out = tmp_path / "demo.json"
    text = ok(run("demo", "--max-mb", "0.15", "--vocab-size", "300", "-q", "-o", out))
    assert "standard library" in text and "bytes/token" in text and "First merges" in text
    assert "│" in text and "\x1b[" not in text  # the show view, no colours into a pipe
    if "tiktoken" in text:
        assert "same ids" in text
    import fastbpe

    assert fastbpe.load(out).n_vocab == 300


def test_train_encode_decode_round_trip(tok, tmp_path):
    original = "hello çok 中文 world\r\n\ttabs  and spaces  <|endoftext|>".encode("utf-8")
    enc = run("encode", "-t", tok, stdin=original)
    ids = [int(x) for x in ok(enc).split()]
    import fastbpe

    t = fastbpe.load(tok)
    assert ids == t.encode(original.decode(), allowed_special="all")
    dec = run("decode", "-t", tok, stdin=enc.stdout)
    assert ok(dec).encode() == original and dec.stdout == original
    # files instead of stdin, and --no-special
    src = tmp_path / "in.txt"
    src.write_bytes(original)
    ids2 = [int(x) for x in ok(run("encode", "-t", tok, src, "--no-special")).split()]
    assert ids2 == t.encode_ordinary(original.decode())
    (tmp_path / "ids.txt").write_text(" ".join(map(str, ids2)))
    assert run("decode", "-t", tok, tmp_path / "ids.txt").stdout == original


@pytest.mark.parametrize("ext, fmt", [("t.tiktoken", None), ("t.json", "hf"), ("d/vocab.bpe", "gpt2")])
def test_train_formats(corpus, tmp_path, ext, fmt):
    out = tmp_path / ext
    out.parent.mkdir(exist_ok=True)
    args = ["train", corpus, "--vocab-size", "270", "-o", out, "-q", "--pattern", "gpt2"]
    proc = run(*args, *(["--format", fmt] if fmt else []))
    ok(proc)
    assert out.exists()
    assert [int(x) for x in ok(run("encode", "-t", out, "--no-special", stdin=b"hello world")).split()]


def test_version():
    import fastbpe

    assert ok(run("--version")).strip() == f"fastbpe {fastbpe.__version__}"


def test_train_from_stdin(tmp_path):
    out = tmp_path / "s.json"
    ok(run("train", "--vocab-size", "260", "-o", out, "-q", stdin=b"aaab aaab\n" * 10))
    import fastbpe

    assert fastbpe.load(out).n_vocab == 260


def test_count(tok, corpus, tmp_path):
    import fastbpe

    t = fastbpe.load(tok)
    other = tmp_path / "other.txt"
    other.write_text("hello", encoding="utf-8")
    lines = ok(run("count", "-t", tok, corpus, other)).splitlines()
    n1 = len(t.encode_ordinary(corpus.read_text(encoding="utf-8")))
    n2 = len(t.encode_ordinary("hello"))
    assert [ln.split()[0].replace(",", "") for ln in lines] == [str(n1), str(n2), str(n1 + n2)]
    assert lines[-1].endswith("total") and lines[0].endswith(str(corpus))
    assert ok(run("count", "-t", tok, stdin=b"hello")).strip() == str(n2)


def test_count_builtin_name(builtin_env, tiktoken_encoding, corpus):
    expected = len(tiktoken_encoding("cl100k_base").encode_ordinary(corpus.read_text(encoding="utf-8")))
    out = ok(run("count", corpus, env_extra=builtin_env))  # default tokenizer cl100k_base
    assert out.split()[0].replace(",", "") == str(expected)


def test_show_plain_ids_and_colour(tok):
    text = "hello 中文\n\tx"
    plain = ok(run("show", "-t", tok, "--text", text, "--ids"))
    assert "\x1b[" not in plain and "│" in plain and "↵" in plain and "→" in plain
    assert "tokens" in plain.splitlines()[-1]
    colour = ok(run("show", "-t", tok, "--color", "always", stdin=text.encode()))
    assert "\x1b[48;5;" in colour
    never = ok(run("show", "-t", tok, "--color", "never", "-q", "--text", "ab"))
    assert never.strip() in ("ab", "a│b")


def test_show_colours_a_terminal_by_default(tok):
    pty = pytest.importorskip("pty")
    import fastbpe

    leader, follower = pty.openpty()
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(fastbpe.__file__)))
    try:
        proc = subprocess.run([sys.executable, "-m", "fastbpe", "show", "-t", str(tok), "--text", "hello"],
                              stdout=follower, stderr=subprocess.PIPE, env=env, timeout=120, cwd=tok.parent)
        os.close(follower)
        follower = None
        out = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not chunk:
                break
            out += chunk
    finally:
        if follower is not None:
            os.close(follower)
        os.close(leader)
    assert proc.returncode == 0, proc.stderr
    assert b"\x1b[48;5;" in out


class _Balance(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.titles = [], [], []

    def handle_starttag(self, tag, attrs):
        if tag not in ("meta", "br"):
            self.stack.append(tag)
        if dict(attrs).get("title"):
            self.titles.append(dict(attrs)["title"])

    def handle_endtag(self, tag):
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(tag)


def test_show_html(tok, tmp_path):
    src = tmp_path / "page.txt"
    src.write_text("hello <script>alert(1)</script> & 中文\n", encoding="utf-8")
    page = tmp_path / "out.html"
    proc = run("show", "-t", tok, src, "--html", page)
    ok(proc)
    content = page.read_text(encoding="utf-8")
    p = _Balance()
    p.feed(content)
    p.close()
    assert not p.errors and not p.stack
    assert "<script" not in content and "&lt;" in content and "&amp;" in content
    assert any(t.startswith("id ") and "bytes" in t for t in p.titles)


def test_stats_side_by_side_and_tax(tok, corpus, tmp_path):
    en, tr = tmp_path / "en.txt", tmp_path / "tr.txt"
    en.write_text("hello world\n", encoding="utf-8")
    tr.write_text("merhaba dünya, çok güzel\n", encoding="utf-8")
    out = ok(run("stats", tok, tok.parent / "tok.json", "--files", corpus, "--parallel", en, tr))
    assert "bytes/token" in out and "tokens/word" in out and "[UNK] rate" in out
    assert "Token tax relative to en.txt" in out and "1.00x" in out


def test_stats_plot(tok, tmp_path):
    pytest.importorskip("matplotlib")
    en, tr = tmp_path / "en.txt", tmp_path / "tr.txt"
    en.write_text("hello world\n", encoding="utf-8")
    tr.write_text("çok güzel\n", encoding="utf-8")
    ok(run("stats", tok, "--parallel", en, tr, "--plot", tmp_path / "plots"))
    assert (tmp_path / "plots" / "token_tax.png").exists() and (tmp_path / "plots" / "bytes_per_token.png").exists()


@pytest.mark.parametrize("fmt", ["npy", "bin"])
def test_encode_shards_memmap(tok, tmp_path, fmt):
    import fastbpe

    t = fastbpe.load(tok)
    docs = ["hello world\nsecond line", "çok güzel 中文", "def f(x):\n    return x\n"]
    files = []
    for i, d in enumerate(docs):
        f = tmp_path / f"doc{i}.txt"
        f.write_text(d, encoding="utf-8")
        files.append(f)
    out = tmp_path / "shards"
    proc = run("encode", "-t", tok, "--shards", out, "--format", fmt, "--dtype", "uint16", "--shard-tokens", "10", *files)
    summary = ok(proc)
    assert "3 documents" in summary and "bytes/token" in summary and "MB/s" in summary
    assert b"encoding" in proc.stderr  # the progress bar
    index = json.loads((out / "index.json").read_text())
    stream = []
    for s in index["shards"]:
        path = out / s["file"]
        arr = np.load(path, mmap_mode="r") if fmt == "npy" else np.memmap(path, dtype=np.uint16, mode="r")
        stream += arr.tolist()
    expected = t.encode_ordinary(docs[0]) + [t.eot_token] + t.encode_ordinary(docs[1]) + [t.eot_token] + t.encode_ordinary(docs[2])
    assert stream == expected


def test_encode_shards_jsonl_and_lines(tok, tmp_path):
    import fastbpe

    t = fastbpe.load(tok)
    j = tmp_path / "c.jsonl"
    j.write_text(json.dumps({"text": "hello"}) + "\n" + json.dumps({"text": "world"}) + "\n", encoding="utf-8")
    ok(run("encode", "-t", tok, "--shards", tmp_path / "a", "--jsonl-field", "text", "-q", j))
    from fastbpe.shards import read_shards

    assert read_shards(tmp_path / "a").tolist() == t.encode_ordinary("hello") + [t.eot_token] + t.encode_ordinary("world")
    lines = tmp_path / "l.txt"
    lines.write_text("hello\nworld\n", encoding="utf-8")
    ok(run("encode", "-t", tok, "--shards", tmp_path / "b", "--doc-sep-lines", "-q", lines))
    assert read_shards(tmp_path / "b").tolist() == read_shards(tmp_path / "a").tolist()


def test_wordpiece_train_encode_stats(corpus, tmp_path):
    pytest.importorskip("fastbpe.wordpiece")
    out = tmp_path / "vocab.txt"
    ok(run("train", "--model", "wordpiece", corpus, "--vocab-size", "120", "-o", out, "-q"))
    ids = ok(run("encode", "-t", out, stdin=b"hello world"))
    import fastbpe

    wp = fastbpe.load(out)
    assert [int(x) for x in ids.split()] == wp.encode("hello world")
    assert ok(run("decode", "-t", out, stdin=ids.encode())).strip() == "hello world"
    stats = ok(run("stats", out, "--files", corpus))
    assert "[UNK] rate" in stats and "%" in stats


@pytest.mark.parametrize(
    "args, message",
    [
        (["encode", "-t", "no-such-tokenizer"], b"neither a file nor"),
        (["train", "missing.txt", "--vocab-size", "300", "-o", "x.json"], b"not found: missing.txt"),
        (["train", "--vocab-size", "10", "-o", "x.json"], b"too small"),
        (["train", "--vocab-size", "abc", "-o", "x.json"], b"--vocab-size must be an integer"),
        (["count", "-t", "no-such-tokenizer", "x"], b"neither a file nor"),
        # gpt2 loads from fastbpe's own copy even with no vocabulary files around
        (["count", "-t", "gpt2", "missing.txt"], b"input file not found: missing.txt"),
        (["show", "-t", "TOK", "missing.txt"], b"not found: missing.txt"),
        (["show", "-t", "TOK", "bad.txt"], b"bad.txt: invalid UTF-8 at byte 1"),
        (["stats", "TOK"], b"give --files"),
        (["stats", "TOK", "--parallel", "bad.txt"], b"at least one translation"),
        (["encode", "-t", "TOK", "--shards", "out"], b"--shards needs input FILEs"),
        (["encode", "-t", "TOK", "--shards", "out", "--dtype", "int8", "bad.txt"], b"invalid choice"),
        (["encode", "-t", "TOK", "--jsonl-field", "text"], b"applies to --shards only"),
        (["encode", "-t", "PLAIN", "--shards", "out", "bad.txt"], b"no special token '<|endoftext|>'"),
        (["decode", "-t", "TOK"], b"whitespace-separated integers"),
        (["decode", "-t", "TOK", "ids.txt"], b"999999"),
        (["frobnicate"], b"invalid choice"),
    ],
)
def test_errors_are_one_line_without_traceback(args, message, tmp_path, tok):
    plain = tmp_path / "plain.json"
    if "PLAIN" in args:
        import fastbpe

        fastbpe.Encoding("p", pat_str=r"\S+|\s+", mergeable_ranks={bytes([i]): i for i in range(256)},
                         special_tokens={}).save(plain)
    (tmp_path / "bad.txt").write_bytes(b"a\xffb")
    (tmp_path / "ids.txt").write_text("1 2 999999")
    args = [str(tok) if a == "TOK" else str(plain) if a == "PLAIN" else a for a in args]
    proc = run(*args, stdin=b"abc\n", cwd=tmp_path, env_extra={"FASTBPE_VOCAB_DIR": str(tmp_path)})
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and b"Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_benchmark_report_smoke(tmp_path):
    """benchmarks/report.py must not rot: a tiny run of its cheaper sections."""
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "report.py"
    if not script.exists():
        pytest.skip("benchmarks/ is not shipped in this installation")
    import fastbpe

    # the report measures the fastbpe this test imports (installed, or built in place)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(fastbpe.__file__)))
    if VOCAB_DIR.exists():
        env["FASTBPE_VOCAB_DIR"] = str(VOCAB_DIR)
    proc = subprocess.run([sys.executable, str(script), "--out", str(tmp_path), "--quick", "--skip", "encode", "batch"],
                          capture_output=True, env=env, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    for heading in ("## Machine and versions", "## Training", "## Vocabulary size vs sequence length",
                    "## The first 20 merges", "## The same text in three languages"):
        assert heading in report
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["train"]["trainers"]["fastbpe"]["vocab"] == 300
    assert results["train"]["trainers"]["fastbpe"]["peak_rss_mb"] > 0
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp_path / "vocab_size_vs_tokens.png").exists() and (tmp_path / "tokens_by_language.png").exists()
