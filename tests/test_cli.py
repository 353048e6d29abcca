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


def error_line(proc) -> bytes:
    """The one line of stderr a terminal shows: a progress bar drawn before the error
    (count, shards) must have been erased ("\\r", spaces, "\\r") before it."""
    assert proc.returncode == 2, proc.stderr
    assert b"Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.rstrip(b"\n").split(b"\n")
    assert len(lines) == 1, proc.stderr
    drawn, _, line = lines[0].rpartition(b"\r")
    assert drawn.rpartition(b"\r")[2].strip() == b"", proc.stderr  # the bar is gone
    assert line.startswith(b"fastbpe"), proc.stderr
    return line


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
    enc = run("encode", "-t", tok, "--allow-special", "all", stdin=original)
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
    if ext.endswith(".tiktoken"):  # ranks only: loading needs the pattern, none is guessed
        proc = run("encode", "-t", out, "--no-special", stdin=b"hello world")
        assert proc.returncode == 2 and b"pass pat_str=" in proc.stderr
        return
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


def run_in_terminal(*args, cwd, stdin=None):
    """Run the command with stdout on a pseudo-terminal; (returncode, stdout bytes, stderr)."""
    pty = pytest.importorskip("pty")
    import fastbpe

    leader, follower = pty.openpty()
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(fastbpe.__file__)))
    try:
        proc = subprocess.run([sys.executable, "-m", "fastbpe", *map(str, args)], input=stdin,
                              stdout=follower, stderr=subprocess.PIPE, env=env, timeout=120, cwd=cwd)
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
    return proc.returncode, out, proc.stderr


def test_show_colours_a_terminal_by_default(tok):
    rc, out, err = run_in_terminal("show", "-t", tok, "--text", "hello", cwd=tok.parent)
    assert rc == 0, err
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


def _shards(path):
    from fastbpe import shards

    return shards.open(path)


@pytest.mark.parametrize("dtype", [None, "uint16", "uint32"])
def test_encode_shards_memmap(tok, tmp_path, dtype):
    """Each file one document, EOT after every one; .bin memory-maps as nanoGPT loads it."""
    import fastbpe

    t = fastbpe.load(tok)
    docs = ["hello world\nsecond line", "çok güzel 中文", "def f(x):\n    return x\n"]
    files = []
    for i, d in enumerate(docs):
        f = tmp_path / f"doc{i}.txt"
        f.write_text(d, encoding="utf-8")
        files.append(f)
    out = tmp_path / "shards"
    proc = run("encode", "-t", tok, "--shards", out, *(["--dtype", dtype] if dtype else []), *files)
    summary = ok(proc)
    assert "3 documents" in summary and "MB/s" in summary and (dtype or "uint16") in summary
    assert b"shards" in proc.stderr  # the progress bar
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dtype"] == (dtype or "uint16")  # default: uint16 when every id fits
    expected = [i for d in docs for i in t.encode_ordinary(d) + [t.eot_token]]
    stream = []
    for s in manifest["shards"]:
        assert s["bin"].startswith("shard-") and s["bin"].endswith(".bin") and s["idx"].endswith(".idx")
        stream += np.memmap(out / s["bin"], dtype=manifest["dtype"], mode="r").tolist()
    assert stream == expected
    sh = _shards(out)
    assert sh.read().tolist() == expected and len(sh) == len(expected) and sh.documents == 3
    assert [sh.doc(i).tolist() for i in range(3)] == [t.encode_ordinary(d) + [t.eot_token] for d in docs]
    sh.verify()


def test_encode_shards_jsonl_field_and_docs_lines(tok, tmp_path):
    import fastbpe

    t = fastbpe.load(tok)
    j = tmp_path / "c.jsonl"
    j.write_text(json.dumps({"text": "hello"}) + "\n\n" + json.dumps({"text": "world"}) + "\n", encoding="utf-8")
    ok(run("encode", "-t", tok, "--shards", tmp_path / "a", "-q", j))  # field text by default
    expected = t.encode_ordinary("hello") + [t.eot_token] + t.encode_ordinary("world") + [t.eot_token]
    assert _shards(tmp_path / "a").read().tolist() == expected
    body = tmp_path / "b.jsonl"
    body.write_text(json.dumps({"body": "hello", "text": 1}) + "\n" + json.dumps({"body": "world"}) + "\n",
                    encoding="utf-8")
    ok(run("encode", "-t", tok, "--shards", tmp_path / "f", "--field", "body", "-q", body))
    assert _shards(tmp_path / "f").read().tolist() == expected
    lines = tmp_path / "l.txt"
    lines.write_text("hello\n\nworld\n", encoding="utf-8")  # the empty line is no document
    ok(run("encode", "-t", tok, "--shards", tmp_path / "b", "--docs", "lines", "-q", lines))
    assert _shards(tmp_path / "b").read().tolist() == expected
    assert _shards(tmp_path / "b").documents == 2
    # without --docs the file is one document, its newlines included
    ok(run("encode", "-t", tok, "--shards", tmp_path / "c", "-q", lines))
    assert _shards(tmp_path / "c").read().tolist() == t.encode_ordinary("hello\n\nworld\n") + [t.eot_token]


@pytest.mark.parametrize("rule, text, docs", [
    ("lines", "a b\n\nc\r\n", ["a b", "c\r"]),
    ("blank-line", "p1 l1\np1 l2\n \n\np2\n", ["p1 l1\np1 l2", "p2\n"]),
    ("sep:<|endoftext|>", "x y<|endoftext|>z<|endoftext|>", ["x y", "z"]),
    ("file", "whole\n\nfile\n", ["whole\n\nfile\n"]),
])
def test_docs_rule_in_every_command(tok, tmp_path, rule, text, docs):
    """--docs cuts a text file into documents the same way in encode, count, stats,
    encode --shards and train; separators belong to no document."""
    import fastbpe

    t = fastbpe.load(tok)
    f = tmp_path / "in.txt"
    f.write_bytes(text.encode("utf-8"))
    per_doc = [t.encode_ordinary(d) for d in docs]
    # encode FILE: one line of ids per document (the separator text "<|endoftext|>" is no
    # document, so no special-token refusal)
    printed = ok(run("encode", "-t", tok, "--docs", rule, f)).splitlines()
    assert [[int(x) for x in ln.split()] for ln in printed] == per_doc
    assert _count(run("count", "-t", tok, "--docs", rule, "-q", f)) == sum(map(len, per_doc))
    stats = ok(run("stats", tok, "--files", f, "--docs", rule))
    assert [ln.split()[-1] for ln in stats.splitlines() if " tokens " in f" {ln} "] == [str(sum(map(len, per_doc)))]
    ok(run("encode", "-t", tok, "--shards", tmp_path / "s", "--docs", rule, "-q", f))
    sh = _shards(tmp_path / "s")
    assert sh.documents == len(docs)
    assert [sh.doc(i).tolist() for i in range(len(docs))] == [ids + [t.eot_token] for ids in per_doc]
    ok(run("train", f, "--docs", rule, "--vocab-size", "258", "-o", tmp_path / "t.json", "-q"))


def test_no_eot_and_eot_token(tmp_path):
    import fastbpe

    enc = fastbpe.Encoding("e", pat_str=r"\S+|\s+", mergeable_ranks={bytes([i]): i for i in range(256)},
                           special_tokens={"<|endoftext|>": 256, "<|sep|>": 257})
    tok = tmp_path / "e.json"
    enc.save(tok)
    f = tmp_path / "l.txt"
    f.write_text("ab\ncd\n", encoding="utf-8")
    ok(run("encode", "-t", tok, "--shards", tmp_path / "none", "--docs", "lines", "--no-eot", "-q", f))
    sh = _shards(tmp_path / "none")
    assert sh.read().tolist() == [97, 98, 99, 100] and sh.documents == 2  # the .idx tells them apart
    assert [sh.doc(i).tolist() for i in range(2)] == [[97, 98], [99, 100]]
    ok(run("encode", "-t", tok, "--shards", tmp_path / "sep", "--docs", "lines", "--eot", "<|sep|>", "-q", f))
    assert _shards(tmp_path / "sep").read().tolist() == [97, 98, 257, 99, 100, 257]
    ok(run("encode", "-t", tok, "--shards", tmp_path / "dflt", "--docs", "lines", "-q", f))
    assert _shards(tmp_path / "dflt").read().tolist() == [97, 98, 256, 99, 100, 256]


def test_parquet_column(tok, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    import fastbpe

    t = fastbpe.load(tok)
    docs = ["hello world", "", "çok güzel\n中文"]  # the empty value is no document
    f = tmp_path / "c.parquet"
    pq.write_table(pa.table({"body": docs, "text": ["x", "y", "z"]}), f)
    expected = [t.encode_ordinary(d) for d in docs if d]
    ok(run("encode", "-t", tok, "--shards", tmp_path / "s", "--column", "body", "-q", f))
    sh = _shards(tmp_path / "s")
    assert [sh.doc(i).tolist() for i in range(sh.documents)] == [ids + [t.eot_token] for ids in expected]
    printed = ok(run("encode", "-t", tok, "--column", "body", f)).splitlines()
    assert [[int(x) for x in ln.split()] for ln in printed] == expected
    assert _count(run("count", "-t", tok, "--column", "body", "-q", f)) == sum(map(len, expected))
    assert _count(run("count", "-t", tok, "-q", f)) == sum(len(t.encode_ordinary(c)) for c in "xyz")  # column text by default
    ok(run("train", f, "--column", "body", "--vocab-size", "260", "-o", tmp_path / "t.json", "-q"))


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
        (["train", "missing.txt", "--vocab-size", "300", "-o", "x.json"], b"input file not found: 'missing.txt'"),
        (["train", "--vocab-size", "10", "-o", "x.json"], b"too small"),
        (["train", "--vocab-size", "abc", "-o", "x.json"], b"--vocab-size must be an integer"),
        (["count", "-t", "no-such-tokenizer", "x"], b"neither a file nor"),
        # gpt2 loads from fastbpe's own copy even with no vocabulary files around
        (["count", "-t", "gpt2", "missing.txt"], b"input file not found: 'missing.txt'"),
        (["stats", "gpt2", "--files", "missing.txt"], b"input file not found: 'missing.txt'"),
        (["encode", "-t", "TOK", "--shards", "out", "missing.txt"], b"input file not found: 'missing.txt'"),
        (["show", "-t", "TOK", "missing.txt"], b"not found: missing.txt"),
        (["show", "-t", "TOK", "bad.txt"], b"bad.txt: not valid UTF-8 at byte offset 1"),
        (["show", "-t", "TOK", "bad.txt"], b"pass --errors replace"),
        (["encode", "-t", "TOK"], b"stdin: not valid UTF-8 at byte offset 1"),
        (["count", "-t", "TOK", "bad.txt"], b"pass --errors replace"),
        (["stats", "TOK", "--files", "bad.txt"], b"pass --errors replace"),
        (["train", "bad.txt", "--vocab-size", "300", "-o", "x.json", "-q"], b"pass --errors replace"),
        (["train", "--model", "wordpiece", "bad.txt", "--vocab-size", "300", "-o", "x.txt", "-q"],
         b"pass --errors replace"),
        (["encode", "-t", "TOK", "--shards", "out", "--docs", "lines", "-q", "bad.txt"], b"pass --errors replace"),
        (["encode", "-t", "TOK", "--docs", "lines", "bad.txt"], b"pass --errors replace"),
        (["decode", "-t", "TOK", "ids.txt"], b"unknown token id 999999 (vocabulary has 280)"),
        (["decode", "-t", "TOK", "neg.txt"], b"unknown token id -1 (vocabulary has 280)"),
        (["decode", "-t", "WP", "ids.txt"], b"unknown token id 999999 (vocabulary has 5)"),
        (["train", "corpus.txt", "--vocab-size", "300", "-o", "x.bin"], b"-o x.bin: cannot tell the format"),
        (["train", "corpus.txt", "--vocab-size", "300", "-o", "x.txt"], b"a .txt name is a WordPiece vocab.txt"),
        (["train", "corpus.txt", "--vocab-size", "300", "-o", "no/such/dir/x.json"], b"does not exist"),
        (["train", "--model", "wordpiece", "corpus.txt", "--vocab-size", "300", "-o", "x.tiktoken"],
         b"WordPiece saves as vocab.txt"),
        (["encode", "-t", "TOK", "--allow-special", "<|eot|>"], b"--allow-special '<|eot|>': not a special token"),
        (["stats", "TOK"], b"give --files"),
        (["stats", "TOK", "--parallel", "bad.txt"], b"at least one translation"),
        (["encode", "-t", "TOK", "--shards", "out"], b"--shards needs input FILEs"),
        (["encode", "-t", "TOK", "--shards", "out", "--dtype", "int8", "bad.txt"], b"invalid choice"),
        (["encode", "-t", "TOK", "--field", "text"], b"--docs/--field/--column apply to a BPE tokenizer's FILE"),
        (["encode", "-t", "WP", "--docs", "lines", "bad.txt"], b"apply to a BPE tokenizer's FILE or to --shards"),
        (["train", "--vocab-size", "300", "-o", "x.json", "--docs", "lines"], b"stdin is read one document per line"),
        (["encode", "-t", "TOK", "--docs", "para", "corpus.txt"], b"unknown document rule 'para'"),
        (["count", "-t", "TOK", "--docs", "para", "corpus.txt"], b"unknown document rule 'para'"),
        (["encode", "-t", "TOK", "--shards", "out", "--field", "body", "c.jsonl"], b"c.jsonl, line 1: no field 'body'"),
        (["count", "-t", "TOK", "--field", "body", "corpus.txt"], b"--field body applies to JSON Lines files"),
        (["count", "-t", "TOK", "--column", "body", "corpus.txt"], b"--column body applies to Parquet files"),
        (["count", "-t", "TOK", "--docs", "lines", "c.jsonl"], b"--docs lines is the rule for text files"),
        (["encode", "-t", "PLAIN", "--shards", "out", "bad.txt"], b"no special token '<|endoftext|>'"),
        (["encode", "-t", "PLAIN", "--shards", "out", "bad.txt"], b"pass --eot TOKEN naming one of them, or --no-eot"),
        (["encode", "-t", "TOK", "--shards", "out", "--eot", "<|eot|>", "corpus.txt"],
         b"no special token '<|eot|>' to put after every document (it has ['<|endoftext|>'])"),
        (["encode", "-t", "WP", "--shards", "out", "--eot", "[EOT]", "corpus.txt"], b"the vocabulary has no token '[EOT]'"),
        (["encode", "-t", "TOK", "--shards", "out", "--eot", "<|endoftext|>", "--no-eot", "corpus.txt"],
         b"give --eot TOKEN or --no-eot, not both"),
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
    (tmp_path / "corpus.txt").write_text("hello world\n" * 50)
    (tmp_path / "ids.txt").write_text("1 2 999999")
    (tmp_path / "neg.txt").write_text("1 -1")
    (tmp_path / "c.jsonl").write_text('{"text": "hello"}\n')
    if "WP" in args:
        wordpiece = pytest.importorskip("fastbpe.wordpiece")
        wordpiece.WordPiece({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "un": 3, "##fair": 4}).save(tmp_path / "vocab.txt")
    args = [str(tok) if a == "TOK" else str(plain) if a == "PLAIN" else str(tmp_path / "vocab.txt") if a == "WP" else a
            for a in args]
    proc = run(*args, stdin=b"a\xffc\n" if args[:1] == ["encode"] else b"abc\n", cwd=tmp_path,
               env_extra={"FASTBPE_VOCAB_DIR": str(tmp_path)})
    line = error_line(proc)
    assert message in line, proc.stderr
    assert b"documents=" not in line and b"eot=" not in line  # no library arguments named


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


# --------------------------------------------------------------------------- special-token text
def _ids(proc) -> list[int]:
    return [int(x) for x in ok(proc).split()]


def _count(proc) -> int:
    return int(ok(proc).split()[0].replace(",", ""))


def test_special_token_text_is_refused_by_default_in_every_command(tok, tmp_path):
    """One rule (the library's) in encode, count, show, stats and encode --shards.

    A text read whole (stdin, show) is named by line and column; a streamed file (encode
    FILE, count, stats, --shards) by its block's place and the document's character."""
    f = tmp_path / "in.txt"
    f.write_text("first line\na <|endoftext|> b\n", encoding="utf-8")
    whole = b", line 2, column 3: special-token text '<|endoftext|>'"
    streamed = b": byte 0, character 14: special-token text '<|endoftext|>'"  # one document, the file
    commands = {
        "encode": (["encode", "-t", tok, f], streamed),
        "encode stdin": (["encode", "-t", tok], whole),
        "count": (["count", "-t", tok, f], streamed),
        "count stdin": (["count", "-t", tok], whole),
        "show": (["show", "-t", tok, f], whole),
        "stats": (["stats", tok, "--files", f], streamed),
        "shards": (["encode", "-t", tok, "--shards", tmp_path / "out", "-q", f], streamed),
        "shards with a bar": (["encode", "-t", tok, "--shards", tmp_path / "out", f], streamed),
    }
    for name, (args, position) in commands.items():
        proc = run(*args, stdin=f.read_bytes())
        where = b"stdin" if "stdin" in name else str(f).encode()
        line = error_line(proc)
        assert where + position in line, (name, proc.stderr)
        assert b"--allow-special '<|endoftext|>'" in line and b"--special-as-text" in line, (name, proc.stderr)
    assert not (tmp_path / "out" / "manifest.json").exists()  # a refused corpus leaves no shards


@pytest.mark.parametrize("flags", [["--allow-special", "<|endoftext|>"], ["--allow-special", "all"],
                                   ["--special-as-text"]])
def test_every_command_counts_the_ids_encode_writes(tok, tmp_path, flags):
    import fastbpe

    t = fastbpe.load(tok)
    text = "a <|endoftext|> b"
    f = tmp_path / "in.txt"
    f.write_text(text, encoding="utf-8")
    expected = t.encode_ordinary(text) if flags == ["--special-as-text"] else t.encode(text, allowed_special="all")
    assert _ids(run("encode", "-t", tok, *flags, stdin=text.encode())) == expected
    assert _count(run("count", "-t", tok, *flags, f)) == len(expected)
    assert _count(run("count", "-t", tok, *flags, stdin=text.encode())) == len(expected)
    stats = ok(run("stats", tok, "--files", f, *flags))
    assert [ln.split()[-1] for ln in stats.splitlines() if " tokens " in f" {ln} "] == [str(len(expected))]
    shown = ok(run("show", "-t", tok, "--ids", "--color", "never", *flags, f))
    assert f"{len(expected)} tokens" in shown.splitlines()[-1]
    ok(run("encode", "-t", tok, "--shards", tmp_path / "s", "-q", *flags, f, f))
    assert _shards(tmp_path / "s").read().tolist() == expected + [t.eot_token] + expected + [t.eot_token]


def test_cl100k_endoftext_is_not_a_control_id_unless_asked(builtin_env):
    """Issue 21: `echo 'hello <|endoftext|> world' | fastbpe encode -t cl100k_base`."""
    text = b"hello <|endoftext|> world"
    refused = run("encode", "-t", "cl100k_base", stdin=text, env_extra=builtin_env)
    assert refused.returncode == 2 and b"line 1, column 7: special-token text '<|endoftext|>'" in refused.stderr
    allowed = _ids(run("encode", "-t", "cl100k_base", "--allow-special", "<|endoftext|>", stdin=text,
                       env_extra=builtin_env))
    assert allowed == [15339, 220, 100257, 1917]
    as_text = _ids(run("encode", "-t", "cl100k_base", "--special-as-text", stdin=text, env_extra=builtin_env))
    assert 100257 not in as_text
    # allowing one special token does not allow the others
    fim = run("encode", "-t", "cl100k_base", "--allow-special", "<|endoftext|>", stdin=b"<|fim_prefix|>",
              env_extra=builtin_env)
    assert fim.returncode == 2 and b"'<|fim_prefix|>'" in fim.stderr
    counts = {tuple(fl): _count(run("count", "-t", "cl100k_base", *fl, stdin=b"a <|endoftext|> b", env_extra=builtin_env))
              for fl in (["--allow-special", "all"], ["--special-as-text"])}
    assert counts == {("--allow-special", "all"): 4, ("--special-as-text",): 8}


# A streamed file's position is its block's start (byte offset, or JSONL line) plus, when
# the document is not the block's first, how many documents later it starts
# (``fastbpe.io.Block.where``), then the character within the document.
@pytest.mark.parametrize("mode, name, content, where", [
    ([], "b.txt", "x\nya <|endoftext|>", "b.txt: byte 0, character 6"),
    (["--docs", "lines"], "l.txt", "fine\nok <|endoftext|>\n", "l.txt: byte 0 (+1 documents), character 4"),
    (["--docs", "sep:=="], "s.txt", "fine==ok <|endoftext|>", "s.txt: byte 6, character 4"),
    ([], "c.jsonl", '{"text": "fine"}\n\n{"text": "a\\n<|endoftext|>"}\n', "c.jsonl: line 1 (+1 documents), character 3"),
    (["--field", "body"], "d.jsonl", '{"body": "a\\n<|endoftext|>"}\n', "d.jsonl: line 1, character 3"),
])
def test_streamed_inputs_name_the_file_and_position_of_special_token_text(tok, tmp_path, mode, name, content, where):
    first = tmp_path / ("a.jsonl" if "--field" in mode else "a.txt")  # --field is for JSON Lines only
    first.write_text('{"body": "first document"}' if "--field" in mode else "first document", encoding="utf-8")
    (tmp_path / name).write_text(content, encoding="utf-8")
    files = [first, tmp_path / name]  # the second file is named, not the first
    for command in (["encode", "-t", tok, "--shards", tmp_path / "out", "-q"], ["count", "-t", tok, "-q"],
                    ["encode", "-t", tok]):
        proc = run(*command, *mode, *(files if command[-1] == "-q" else files[1:]))
        assert f"{tmp_path / where}: special-token text '<|endoftext|>'".encode() in error_line(proc), proc.stderr


# --------------------------------------------------------------------------- files: .gz, --errors
def test_gzip_inputs_work_in_every_command(tok, corpus, tmp_path):
    import gzip

    import fastbpe

    t = fastbpe.load(tok)
    text = "hello world, çok güzel\nsecond line\n"
    gz = tmp_path / "in.txt.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    assert _ids(run("encode", "-t", tok, gz)) == t.encode(text)
    assert _count(run("count", "-t", tok, gz)) == len(t.encode(text))
    assert "hello" in ok(run("show", "-t", tok, gz, "--color", "never"))
    assert "in.txt.gz" in ok(run("stats", tok, "--files", gz))
    ok(run("encode", "-t", tok, "--shards", tmp_path / "s", "-q", "--docs", "lines", gz))
    assert _shards(tmp_path / "s").read().tolist() == (t.encode("hello world, çok güzel") + [t.eot_token]
                                                       + t.encode("second line") + [t.eot_token])
    assert _ids(run("encode", "-t", tok, "--docs", "lines", gz)) == t.encode("hello world, çok güzel") + t.encode(
        "second line")
    assert _count(run("count", "-t", tok, "--docs", "lines", gz)) == len(t.encode("hello world, çok güzel")) + len(
        t.encode("second line"))
    big = tmp_path / "corpus.txt.gz"
    big.write_bytes(gzip.compress(corpus.read_bytes()))
    ok(run("train", big, "--vocab-size", "270", "-o", tmp_path / "t.json", "-q"))
    ok(run("train", "--model", "wordpiece", big, "--vocab-size", "120", "-o", tmp_path / "vocab.txt", "-q"))


def test_errors_replace_wherever_the_message_suggests_it(tok, tmp_path):
    import fastbpe

    t = fastbpe.load(tok)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"hello \xff world\n")
    fixed = "hello \ufffd world\n"
    assert _ids(run("encode", "-t", tok, "--errors", "replace", bad)) == t.encode(fixed)
    assert _ids(run("encode", "-t", tok, "--errors", "replace", stdin=bad.read_bytes())) == t.encode(fixed)
    assert _count(run("count", "-t", tok, "--errors", "replace", bad)) == len(t.encode(fixed))
    assert "\ufffd" in ok(run("show", "-t", tok, "--errors", "replace", "--color", "never", bad))
    ok(run("stats", tok, "--files", bad, "--errors", "replace"))
    for mode in ([], ["--docs", "lines"]):
        ok(run("encode", "-t", tok, "--shards", tmp_path / "s", "-q", "--errors", "replace", *mode, bad))
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(b"hello \xff world\n" * 30)
    ok(run("train", corpus, "--vocab-size", "270", "-o", tmp_path / "t.json", "-q", "--errors", "replace"))
    ok(run("train", "--vocab-size", "270", "-o", tmp_path / "s.json", "-q", "--errors", "replace",
           stdin=corpus.read_bytes()))
    ok(run("train", "--model", "wordpiece", corpus, "--vocab-size", "60", "-o", tmp_path / "vocab.txt", "-q",
           "--errors", "replace"))
    # every message that suggests --errors comes from a command that has the flag
    parser = __import__("fastbpe.cli", fromlist=["build_parser"]).build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    readers = {name for name, p in sub.choices.items() if any("--errors" in a.option_strings for a in p._actions)}
    assert readers == {"train", "encode", "count", "show", "stats", "bench", "audit"}
    ok(run("bench", "-t", tok, "--errors", "replace", "--repeat", "1", "-q", bad))
    ok(run("audit", "-t", tok, "--errors", "replace", "-q", bad))


# --------------------------------------------------------------------------- the terminal
EVIL = "\x1b]0;PWNED\x07\x1b[2J"  # retitles the terminal, then clears the screen
HIDDEN = "\x1b\x07\x7f\x85\x9b\u2028\u202e\u2066"


def _no_hidden(out: str, what: str) -> None:
    import re

    out = re.sub(r"\x1b\[[0-9;]*m", "", out)  # show's own colours
    for c in HIDDEN:
        assert c not in out, (what, hex(ord(c)), out)


def test_terminal_output_never_carries_control_characters(tmp_path):
    corpus = tmp_path / "evil.txt"
    corpus.write_text((EVIL + " " + HIDDEN + "\n") * 30, encoding="utf-8")
    tok = tmp_path / "evil.json"
    ok(run("train", corpus, "--vocab-size", "270", "-o", tok, "-q"))
    import fastbpe

    assert any(b"\x1b" in b and len(b) > 1 for b in fastbpe.load(tok).mergeable_ranks)  # ESC in merged tokens
    text = EVIL + " x " + HIDDEN
    for colour in ("never", "always"):
        out = ok(run("show", "-t", tok, "--text", text, "--ids", "--color", colour))
        _no_hidden(out, f"show --color {colour}")
        assert "\\x1b]" in out and "\\u202e" in out
    named = tmp_path / f"a{EVIL}.txt"  # file names are printed too
    named.write_text("hello", encoding="utf-8")
    for args in (["count", "-t", tok, named, corpus], ["stats", tok, "--files", named, corpus],
                 ["count", "-t", tok, tmp_path / f"missing{EVIL}"]):
        proc = run(*args)
        _no_hidden(proc.stdout.decode() + proc.stderr.decode(), args[0])
        assert "\\x1b]0;PWNED\\x07" in proc.stdout.decode() + proc.stderr.decode()
    # decode into a pipe: the exact bytes (its job); into a terminal: escaped, unless --raw
    ids = ok(run("encode", "-t", tok, "--special-as-text", stdin=EVIL.encode()))
    assert run("decode", "-t", tok, stdin=ids.encode()).stdout == EVIL.encode()
    rc, out, err = run_in_terminal("decode", "-t", tok, stdin=ids.encode(), cwd=tmp_path)
    assert rc == 0, err
    assert b"\x1b" not in out and b"\x07" not in out and b"\\x1b]0;PWNED\\x07" in out
    rc, out, err = run_in_terminal("decode", "-t", tok, "--raw", stdin=ids.encode(), cwd=tmp_path)
    assert rc == 0 and EVIL.encode() in out


# --------------------------------------------------------------------------- parser, progress bars
def test_every_flag_has_help():
    from fastbpe.cli import build_parser

    missing = []

    def walk(parser, prog):
        for action in parser._actions:
            if isinstance(action, __import__("argparse")._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{prog} {name}")
            elif not action.help and action.dest != "help":
                missing.append(f"{prog} {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "fastbpe")
    assert not missing, missing


def test_progress_bars_are_closed_when_training_stops(tmp_path, monkeypatch, capsys):
    """An interrupted or failed command closes the bars it left open before it says so."""
    pytest.importorskip("fastbpe.wordpiece")
    import tqdm.std

    from fastbpe import cli
    from fastbpe.trainers import wordpiece

    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\n" * 100, encoding="utf-8")

    def interrupted(texts, opts, num_threads):
        reading = iter(texts)  # held by the traceback, as a real reader's frame holds it
        next(reading)  # the reading bar has started
        raise KeyboardInterrupt

    monkeypatch.setattr(wordpiece, "_count_words_native", interrupted)
    rc = cli.main(["train", "--model", "wordpiece", str(corpus), "--vocab-size", "100", "-o", str(tmp_path / "v.txt")])
    err = capsys.readouterr().err
    assert rc == 130 and "reading" in err
    assert err.endswith("\nfastbpe train: interrupted\n")  # on its own line, nothing redrawn after it
    assert not [b for b in tqdm.std.tqdm._instances if not b.disable]


def test_wordpiece_special_token_text_follows_the_rule(corpus, tmp_path):
    wordpiece = pytest.importorskip("fastbpe.wordpiece")
    wp = wordpiece.WordPiece({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "hello": 3, "world": 4})
    vocab = tmp_path / "vocab.txt"
    wp.save(vocab)
    text = b"hello [SEP] world"
    refused = run("encode", "-t", vocab, stdin=text)
    assert refused.returncode == 2 and b"stdin, line 1, column 7: special-token text '[SEP]'" in refused.stderr
    assert _ids(run("encode", "-t", vocab, "--allow-special", "[SEP]", stdin=text)) == [1, 3, 2, 4, 2]
    # as ordinary text "[SEP]" is three words the vocabulary lacks: [UNK] each, no separator
    assert _ids(run("encode", "-t", vocab, "--special-as-text", stdin=text)) == [1, 3, 0, 0, 0, 4, 2]
    assert _count(run("count", "-t", vocab, "--allow-special", "all", stdin=text)) == 3
    assert _count(run("count", "-t", vocab, "--special-as-text", stdin=b"hello world")) == 2


def test_show_text_that_is_not_utf8(tok):
    bad = os.fsdecode(b"a\xffb")  # what argv gives Python for bytes that are not UTF-8
    proc = run("show", "-t", tok, "--text", bad)
    assert proc.returncode == 2 and b"--text: not valid UTF-8 at character 1; pass --errors replace" in proc.stderr
    assert "\ufffd" in ok(run("show", "-t", tok, "--text", bad, "--errors", "replace", "--color", "never"))
