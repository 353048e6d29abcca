"""fastbpe.shards: the one shard format (writer, reader, manifest), atomic and resumable.

Hand-made tasks (``tests/io_stub.py``) feed the writer real ``fastbpe.io`` blocks."""
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import fastbpe
from fastbpe import shards
from fastbpe.bpe.encoding import get_toy_encoding
from fastbpe.io.atomic import TMP_SUFFIX

sys.path.insert(0, str(Path(__file__).parent))
from io_stub import ListTask, PiecesTask, block_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["hello world", "çok güzel 中文 here\n\nand more", "x", "hello\n\nshards\n", " lead", "中文"]
OTHER = ["other text entirely", "never mixed", "with the first run"]


@pytest.fixture(scope="module")
def enc():
    docs = ["hello world, hello shards\n", "çok güzel 中文 <|endoftext|>\n", "other text entirely"] * 20
    return fastbpe.train_bpe(documents=docs, vocab_size=300, special_tokens=["<|endoftext|>", "<|fim|>"],
                             progress=False)


def _stream(tok, docs, eot) -> list[int]:
    """The EOT rule, plainly: every document's ids, then the EOT."""
    out = []
    for d in docs:
        out += tok.encode_ordinary(d)
        if eot is not None:
            out.append(eot)
    return out


def _tasks(docs, n):
    """``docs`` as ``n`` tasks (in order)."""
    k = -(-len(docs) // n)
    return [ListTask(docs[i:i + k], name=f"part{i}") for i in range(0, len(docs), k)]


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def _temps(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(TMP_SUFFIX))


# --------------------------------------------------------------------------- format and round trip
@pytest.mark.parametrize("dtype", ["uint16", "uint32"])
@pytest.mark.parametrize("n_tasks, block_bytes", [(1, 1), (2, 13), (3, 1 << 20)])
def test_round_trip_and_layout(enc, tmp_path, dtype, n_tasks, block_bytes):
    docs = DOCS * 3
    m = shards.write_shards(enc, _tasks(docs, n_tasks), tmp_path, dtype=dtype, block_bytes=block_bytes,
                            progress=False)
    eot = enc.special_tokens["<|endoftext|>"]
    want = _stream(enc, docs, eot)
    on_disk = json.loads((tmp_path / "manifest.json").read_text())
    assert {k: v for k, v in m.items() if k != "skipped"} == on_disk
    assert on_disk["format"] == "fastbpe-shards" and on_disk["version"] == 1 and on_disk["dtype"] == dtype
    assert on_disk["eot"] == {"rule": "one token after every document", "token": "<|endoftext|>", "id": eot}
    assert on_disk["tokenizer"] == shards.tokenizer_identity(enc) and on_disk["tokenizer"]["kind"] == "bpe"
    assert (on_disk["documents"], on_disk["tokens"], on_disk["bytes"]) == (
        len(docs), len(want), sum(len(d.encode()) for d in docs))
    assert len(on_disk["shards"]) == n_tasks
    names = set()
    stream = []
    for i, s in enumerate(on_disk["shards"]):
        assert s["bin"].startswith(f"shard-{i:06d}-") and s["bin"][:-4] == s["idx"][:-4]
        names |= {s["bin"], s["idx"], s["bin"][:-4] + ".json"}
        # loads the way nanoGPT / llm.c load theirs: no header, the manifest's dtype
        tokens = np.memmap(tmp_path / s["bin"], dtype=np.dtype(dtype), mode="r") if s["tokens"] else []
        idx = np.fromfile(tmp_path / s["idx"], dtype="<u8")
        assert len(tokens) == s["tokens"] and len(idx) == s["documents"] + 1
        assert idx[0] == 0 and idx[-1] == len(tokens)
        # every document slice is self-contained: ends with the EOT, none inside
        for a, b in zip(idx[:-1], idx[1:]):
            assert tokens[b - 1] == eot and eot not in list(tokens[a:b - 1])
        stream += list(map(int, tokens))
        side = json.loads((tmp_path / (s["bin"][:-4] + ".json")).read_text())
        assert side["key"]["source"] == s["source"] and side["sha256"] == s["sha256"]
    assert stream == want
    assert set(os.listdir(tmp_path)) == names | {"manifest.json"}


def test_concatenation_equals_encode_of_documents_joined_by_the_eot_rule():
    gpt2 = fastbpe.get_encoding("gpt2")
    import sysconfig

    text = (Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py").read_text(encoding="utf-8")
    docs = [d for d in text.split("\n\n") if d]
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        m = shards.write_shards(gpt2, _tasks(docs, 4), d, block_bytes=2000, num_threads=2, progress=False)
        got = shards.open(d).read()
        assert got.dtype == np.uint16 and m["tokens"] == len(got)
        joined = "<|endoftext|>".join(docs) + "<|endoftext|>"
        assert got.tolist() == gpt2.encode(joined, allowed_special={"<|endoftext|>"}) == _stream(gpt2, docs, 50256)


def test_reader(enc, tmp_path):
    docs = DOCS * 2
    shards.write_shards(enc, _tasks(docs, 3) + [ListTask([], name="empty")], tmp_path, progress=False)
    s = shards.open(tmp_path)
    eot = enc.special_tokens["<|endoftext|>"]
    assert len(s) == len(_stream(enc, docs, eot)) and s.documents == len(docs)
    assert s.manifest["shards"][-1]["tokens"] == 0  # an empty task is an empty shard
    for i, d in enumerate(docs):
        assert s.doc(i).tolist() == enc.encode_ordinary(d) + [eot]
    assert s.doc(-1).tolist() == s.doc(len(docs) - 1).tolist()
    assert [len(t) for t in s.tokens] == [x["tokens"] for x in s.manifest["shards"]]
    pairs = list(s)
    assert len(pairs) == 4 and all(isinstance(t, np.ndarray) and idx.dtype == np.uint64 for t, idx in pairs)
    assert np.concatenate([t for t, _ in pairs]).tolist() == s.read().tolist() == shards.read_shards(tmp_path).tolist()
    with pytest.raises(IndexError, match="document 12 out of range"):
        s.doc(len(docs))
    with pytest.raises(TypeError):
        s.doc("1")
    s.verify()
    assert "4 shards" in repr(s)


def test_verify_and_open_errors(enc, tmp_path):
    shards.write_shards(enc, _tasks(DOCS, 2), tmp_path, progress=False)
    s = shards.open(tmp_path)
    first, second = s.manifest["shards"]
    raw = bytearray((tmp_path / first["bin"]).read_bytes())
    raw[0] ^= 1
    (tmp_path / first["bin"]).write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=rf"{first['bin']}: sha256 does not match"):
        shards.open(tmp_path).verify()
    raw[0] ^= 1
    (tmp_path / first["bin"]).write_bytes(bytes(raw))
    (tmp_path / second["idx"]).write_bytes((tmp_path / second["idx"]).read_bytes()[:-8])
    with pytest.raises(ValueError, match=rf"{second['idx']}: .* bytes, not the"):
        s.verify()
    with pytest.raises(FileNotFoundError, match="no manifest.json"):
        shards.open(tmp_path / "nowhere")
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "manifest.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="not a fastbpe-shards version 1 manifest"):
        shards.open(tmp_path / "x")
    (tmp_path / "x" / "manifest.json").write_text('{')
    with pytest.raises(ValueError, match="not JSON"):
        shards.open(tmp_path / "x")


# --------------------------------------------------------------------------- runs: resume, failure, replacement
def test_resume_is_byte_identical(enc, tmp_path):
    tasks = _tasks(DOCS * 4, 4)
    first = shards.write_shards(enc, tasks, tmp_path, block_bytes=20, progress=False)
    before = _files(tmp_path)
    again = shards.write_shards(enc, tasks, tmp_path, block_bytes=1 << 20, num_threads=2, progress=False)
    assert again["skipped"] == 4 and _files(tmp_path) == before
    # a missing sidecar, a damaged .bin, a missing .idx: those shards are redone, the same bytes
    names = [s["bin"][:-4] for s in first["shards"]]
    (tmp_path / f"{names[0]}.json").unlink()
    raw = bytearray((tmp_path / f"{names[1]}.bin").read_bytes())
    raw[-1] ^= 1
    (tmp_path / f"{names[1]}.bin").write_bytes(bytes(raw))
    (tmp_path / f"{names[3]}.idx").unlink()
    redo = shards.write_shards(enc, tasks, tmp_path, progress=False)
    assert redo["skipped"] == 1 and _files(tmp_path) == before
    # anything that changes the ids changes the names: nothing reused
    other = shards.write_shards(enc, tasks, tmp_path, dtype="uint32", progress=False)
    assert other["skipped"] == 0 and not set(_files(tmp_path)) & (set(before) - {"manifest.json"})


def test_a_failed_run_leaves_the_old_output_whole(enc, tmp_path):
    old = shards.write_shards(enc, _tasks(DOCS, 3), tmp_path, progress=False)
    old_manifest = (tmp_path / "manifest.json").read_bytes()
    eot = enc.special_tokens["<|endoftext|>"]
    # a second run over other text dies in the middle of its task 2 (index 1)
    failing = [ListTask(OTHER, name="a"), ListTask(OTHER * 50, name="b", fail_after=3), ListTask(OTHER, name="c")]
    with pytest.raises(RuntimeError, match="simulated failure"):
        shards.write_shards(enc, failing, tmp_path, block_bytes=30, progress=False)
    assert (tmp_path / "manifest.json").read_bytes() == old_manifest
    s = shards.open(tmp_path)
    s.verify()
    assert s.read().tolist() == _stream(enc, DOCS, eot)
    assert _temps(tmp_path) == []
    spec = shards.make_spec(enc)
    task2 = shards.shard_stem(1, spec.task_key(failing[1].key()))
    assert not [p for p in os.listdir(tmp_path) if p.startswith(task2)]   # nothing of task 2
    task1 = shards.shard_stem(0, spec.task_key(failing[0].key()))
    assert (tmp_path / f"{task1}.json").exists()                           # task 1 is kept for the rerun
    listed = {n for x in old["shards"] for n in (x["bin"], x["idx"])}
    assert listed <= set(os.listdir(tmp_path))
    # the rerun finishes, reuses task 1, and equals a run that never failed
    fixed = [failing[0], ListTask(OTHER * 50, name="b"), failing[2]]
    m = shards.write_shards(enc, fixed, tmp_path, block_bytes=30, progress=False)
    assert m["skipped"] == 1
    clean = tmp_path.parent / (tmp_path.name + "-clean")
    shards.write_shards(enc, fixed, clean, progress=False)
    assert _files(tmp_path) == _files(clean)


def test_a_second_run_never_mixes_with_the_first(enc, tmp_path):
    eot = enc.special_tokens["<|endoftext|>"]
    shards.write_shards(enc, _tasks(DOCS, 2), tmp_path, progress=False)
    seen = {}

    def before_commit():
        # the new run's shards are all written; the old manifest and its files are whole
        old = shards.open(tmp_path)
        old.verify()
        seen["old"] = old.read().tolist()

    new = [ListTask(OTHER[:1], name="n0"), ListTask(OTHER[1:], name="n1", hook=before_commit)]
    shards.write_shards(enc, new, tmp_path, progress=False)
    assert seen["old"] == _stream(enc, DOCS, eot)
    s = shards.open(tmp_path)
    s.verify()
    assert s.read().tolist() == _stream(enc, OTHER, eot)
    listed = {n for x in s.manifest["shards"] for n in (x["bin"], x["idx"], x["bin"][:-4] + ".json")}
    assert set(os.listdir(tmp_path)) == listed | {"manifest.json"}  # the old files went after the commit


def test_other_files_are_left_alone(enc, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "shard_000000.npy").write_bytes(b"an old format's file")
    shards.write_shards(enc, _tasks(DOCS, 1), tmp_path, progress=False)
    shards.write_shards(enc, _tasks(OTHER, 1), tmp_path, progress=False)
    assert {"notes.txt", "shard_000000.npy"} <= set(os.listdir(tmp_path))


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_a_killed_writer_leaves_temporaries_the_next_run_removes(enc, tmp_path):
    """SIGKILL in the middle of a shard: no final file of it, only temporaries (named
    with the dead pid), which the next run removes."""
    import pickle

    (tmp_path / "enc.pkl").write_bytes(pickle.dumps(enc))
    out = tmp_path / "out"
    script = textwrap.dedent(f"""
        import os, pickle, signal, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from io_stub import ListTask
        from fastbpe import shards
        enc = pickle.loads(open({str(tmp_path / 'enc.pkl')!r}, 'rb').read())
        def die():
            os.kill(os.getpid(), signal.SIGKILL)
        class Dying(ListTask):
            def blocks(self, **how):
                for k, b in enumerate(super().blocks(**how)):
                    if k == 2:
                        die()
                    yield b
        shards.write_shards(enc, [ListTask({DOCS!r}), Dying({OTHER * 20!r}, name="d")], {str(out)!r},
                            block_bytes=40, progress=False)
    """)
    env = dict(os.environ, PYTHONPATH=str(Path(fastbpe.__file__).parents[1]))
    r = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, timeout=120)
    assert r.returncode == -signal.SIGKILL, r.stderr
    left = _temps(out)
    assert len(left) == 2 and all(n.startswith(".shard-000001-") for n in left)
    assert not (out / "manifest.json").exists()
    assert not [n for n in os.listdir(out) if n.startswith("shard-000001-")]
    m = shards.write_shards(enc, [ListTask(DOCS), ListTask(OTHER * 20, name="d")], out, progress=False)
    assert m["skipped"] == 1 and _temps(out) == []
    eot = enc.special_tokens["<|endoftext|>"]
    assert shards.open(out).read().tolist() == _stream(enc, DOCS + OTHER * 20, eot)


# --------------------------------------------------------------------------- documents in pieces
def test_pieces_of_a_cut_document_get_no_eot_between_them(enc, tmp_path):
    whole = "alpha\nbeta\ngamma"
    cut = ["alpha\n", "beta\n", "gamma"]
    # the cuts are where fastbpe.io's cutter may cut: the pieces encode as the whole does
    assert sum((enc.encode_ordinary(p) for p in cut), []) == enc.encode_ordinary(whole)
    task = PiecesTask([(["x y", cut[0]], True), ([cut[1]], True), ([cut[2], "z"], False)])
    m = shards.write_shards(enc, [task], tmp_path, progress=False)
    eot = enc.special_tokens["<|endoftext|>"]
    s = shards.open(tmp_path)
    assert m["documents"] == s.documents == 3 and m["bytes"] == len("x y" + whole + "z")
    assert s.read().tolist() == _stream(enc, ["x y", whole, "z"], eot)
    assert s.doc(1).tolist() == enc.encode_ordinary(whole) + [eot]
    # a document open at the end of a task is the document model's bug: said, not written
    with pytest.raises(ValueError, match="pieces: block 0: the task's last block leaves a document open"):
        shards.write_shards(enc, [PiecesTask([(["a", "b"], True)])], tmp_path / "bad", progress=False)
    assert _temps(tmp_path / "bad") == [] and not (tmp_path / "bad" / "manifest.json").exists()


# --------------------------------------------------------------------------- rules and arguments
def test_special_token_text_follows_the_library_rule(enc, tmp_path):
    docs = ["hello", "a <|endoftext|> b", "world"]
    eot = enc.special_tokens["<|endoftext|>"]
    with pytest.raises(shards.DisallowedSpecialInDocument,
                       match=r"^src: from item 0 \(\+1 documents\): document 1 of shard 0: special-token text '<\|endoftext\|>' "
                             r"at character 2; pass allowed_special=") as info:
        shards.write_shards(enc, [ListTask(docs, name="src")], tmp_path, progress=False)
    assert (info.value.document, info.value.token, info.value.position, info.value.shard) == (1, "<|endoftext|>", 2, 0)
    import pickle

    again = pickle.loads(pickle.dumps(info.value))  # as it comes back from a Dask worker
    assert str(again) == str(info.value) and again.where == "src: from item 0 (+1 documents)"
    assert _temps(tmp_path) == [] and not (tmp_path / "manifest.json").exists()
    shards.write_shards(enc, [ListTask(docs)], tmp_path, progress=False, allowed_special={"<|endoftext|>"})
    assert shards.read_shards(tmp_path).tolist() == (
        enc.encode("hello") + [eot] + enc.encode("a <|endoftext|> b", allowed_special="all") + [eot]
        + enc.encode("world") + [eot])
    m = shards.write_shards(enc, [ListTask(docs)], tmp_path, progress=False, disallowed_special=())
    assert shards.read_shards(tmp_path).tolist() == _stream(enc, docs, eot)
    assert m["special_tokens"]["disallowed"] == [] and m["special_tokens"]["allowed"] == []
    # allowing one special token does not allow the others
    with pytest.raises(shards.DisallowedSpecialInDocument, match="'<\\|fim\\|>'"):
        shards.write_shards(enc, [ListTask(["<|fim|><|endoftext|>"])], tmp_path, progress=False,
                            allowed_special={"<|endoftext|>"})
    # in a later piece of a cut document, the position counts the earlier pieces
    task = PiecesTask([(["ok", "abc "], True), (["de <|fim|>"], False)])
    with pytest.raises(shards.DisallowedSpecialInDocument, match=r"pieces: block 1: document 1 .* at character 7"):
        shards.write_shards(enc, [task], tmp_path, progress=False)


def test_dtype(enc, tmp_path):
    big = fastbpe.Encoding("big", pat_str=r"\S+|\s+", mergeable_ranks={bytes([i]): i for i in range(256)},
                           special_tokens={"<|endoftext|>": 70000})
    with pytest.raises(ValueError, match="uint16 cannot hold ids up to 70000"):
        shards.write_shards(big, [ListTask(["x"])], tmp_path, dtype="uint16", progress=False)
    m = shards.write_shards(big, [ListTask(["x", "y"])], tmp_path, progress=False)  # None: the smallest that fits
    assert m["dtype"] == "uint32" and shards.read_shards(tmp_path).tolist() == [120, 70000, 121, 70000]
    assert (tmp_path / m["shards"][0]["bin"]).stat().st_size == 16
    for bad in ("int64", "float32", np.int16, "nonsense"):
        with pytest.raises(ValueError, match="dtype must be uint16 or uint32"):
            shards.write_shards(enc, [ListTask(["x"])], tmp_path, dtype=bad, progress=False)
    assert shards.write_shards(enc, [ListTask(["x"])], tmp_path, dtype=np.uint16, progress=False)["dtype"] == "uint16"


def test_eot_rule_arguments(enc, tmp_path):
    with pytest.raises(ValueError, match=r"no special token '<\|endoftext\|>'.*pass eot=TOKEN"):
        shards.write_shards(get_toy_encoding(), [ListTask(["x"])], tmp_path, progress=False)
    with pytest.raises(ValueError, match="no special token '<|nope|>'"):
        shards.write_shards(enc, [ListTask(["x"])], tmp_path, eot="<|nope|>", progress=False)
    with pytest.raises(TypeError, match="eot must be a token"):
        shards.write_shards(enc, [ListTask(["x"])], tmp_path, eot=True, progress=False)
    fim = enc.special_tokens["<|fim|>"]
    m = shards.write_shards(enc, [ListTask(DOCS)], tmp_path, eot="<|fim|>", progress=False)
    assert m["eot"]["id"] == fim and shards.read_shards(tmp_path).tolist() == _stream(enc, DOCS, fim)
    # eot=None: no EOT; the .idx still tells the documents apart
    m = shards.write_shards(enc, [ListTask(DOCS)], tmp_path, eot=None, progress=False)
    assert m["eot"] == {"rule": "none", "token": None, "id": None}
    s = shards.open(tmp_path)
    assert s.read().tolist() == _stream(enc, DOCS, None)
    assert [s.doc(i).tolist() for i in range(len(DOCS))] == [enc.encode_ordinary(d) for d in DOCS]


def test_argument_errors(enc, tmp_path):
    for kw, match in (({"num_threads": 0}, "num_threads"), ({"block_bytes": 0}, "block_bytes"),
                      ({"errors": "ignore"}, "errors must be"), ({"progress": "yes"}, "progress must be")):
        with pytest.raises((ValueError, TypeError), match=match):
            shards.write_shards(enc, [ListTask(["x"])], tmp_path, **{"progress": False, **kw})
    with pytest.raises(TypeError, match="Encoding or WordPiece"):
        shards.write_shards("gpt2", [ListTask(["x"])], tmp_path, progress=False)


def test_progress_bar_counts_text_bytes(enc, tmp_path, capsys):
    shards.write_shards(enc, _tasks(DOCS * 10, 2), tmp_path, progress=True)
    err = capsys.readouterr().err
    assert "shards" in err and "B/s" in err

    class Bar:
        n = 0

        def update(self, k):
            self.n += k

    bar = Bar()
    m = shards.write_shards(enc, _tasks(DOCS, 2), tmp_path, progress=bar)
    assert bar.n == m["bytes"]


def test_wordpiece(tmp_path):
    wordpiece = pytest.importorskip("fastbpe.wordpiece")
    wp = wordpiece.WordPiece({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "un": 3, "##fair": 4, "[": 5, "]": 6, "sep": 7,
                              "##s": 8, "[EOD]": 9}, special_tokens=["[UNK]", "[CLS]", "[SEP]", "[EOD]"])
    m = shards.write_shards(wp, [ListTask(["unfair", "unfairs un"])], tmp_path, progress=False)
    assert shards.read_shards(tmp_path).tolist() == [3, 4, 2, 3, 4, 8, 3, 2]  # no [CLS]; [SEP] after each
    assert m["tokenizer"]["kind"] == "wordpiece" and m["eot"]["token"] == "[SEP]" and m["dtype"] == "uint16"
    # a document of spaces has no ids; it still gets its EOT and its .idx entry
    shards.write_shards(wp, [ListTask(["un", "   ", "un"])], tmp_path, progress=False)
    assert shards.read_shards(tmp_path).tolist() == [3, 2, 2, 3, 2] and shards.open(tmp_path).doc(1).tolist() == [2]
    shards.write_shards(wp, [ListTask(["unfair"])], tmp_path, eot="[EOD]", progress=False)
    assert shards.read_shards(tmp_path).tolist() == [3, 4, 9]
    # the special-token rule, as WordPiece.encode_text
    with pytest.raises(shards.DisallowedSpecialInDocument, match=r"document 0 of shard 0: special-token text '\[SEP\]' at character 2"):
        shards.write_shards(wp, [ListTask(["un[SEP]"])], tmp_path, progress=False)
    shards.write_shards(wp, [ListTask(["un[SEP]"])], tmp_path, progress=False, disallowed_special=())
    assert shards.read_shards(tmp_path).tolist() == wp.encode_text("un[SEP]", disallowed_special=()) + [2]
    shards.write_shards(wp, [ListTask(["un[SEP]un"])], tmp_path, progress=False, allowed_special={"[SEP]"},
                        disallowed_special=())
    assert shards.read_shards(tmp_path).tolist() == [3, 2, 3, 2]
    shards.write_shards(wp, [ListTask(["un[EOD][SEP]"])], tmp_path, progress=False, allowed_special={"[EOD]"},
                        disallowed_special=())   # a subset: not one of the native modes
    assert shards.read_shards(tmp_path).tolist() == wp.encode_text("un[EOD][SEP]", allowed_special={"[EOD]"},
                                                                   disallowed_special=()) + [2]
    no_sep = wordpiece.WordPiece({"[UNK]": 0, "a": 1})
    with pytest.raises(ValueError, match=r"no token '\[SEP\]'.*pass eot=TOKEN"):
        shards.write_shards(no_sep, [ListTask(["a"])], tmp_path, progress=False)


def test_wordpiece_real_vocab_matches_encode_text(tmp_path, vocab_file):
    wordpiece = pytest.importorskip("fastbpe.wordpiece")
    wp = wordpiece.WordPiece.from_file(vocab_file("bert-base-uncased/vocab.txt"))
    docs = ["Hello, World! unaffable", "çok güzel 中文", "  spaces  "]
    shards.write_shards(wp, [ListTask(docs)], tmp_path, progress=False)
    sep = wp.token_to_id("[SEP]")
    assert shards.read_shards(tmp_path).tolist() == sum((wp.encode_text(d) + [sep] for d in docs), [])


def test_tokenizer_identity_changes_with_what_decides_ids(enc):
    a = shards.tokenizer_identity(enc)
    renamed = fastbpe.Encoding("renamed", pat_str=enc.pat_str, mergeable_ranks=enc.mergeable_ranks,
                               special_tokens=enc.special_tokens)
    assert shards.tokenizer_identity(renamed) == {**a, "name": "renamed"}  # the name decides no id
    other = fastbpe.Encoding("x", pat_str=r"\S+|\s+", mergeable_ranks=enc.mergeable_ranks,
                             special_tokens=enc.special_tokens)
    assert shards.tokenizer_identity(other)["sha256"] != a["sha256"]
    specials = dict(enc.special_tokens, **{"<|new|>": enc.max_token_value + 1})
    more = fastbpe.Encoding("x", pat_str=enc.pat_str, mergeable_ranks=enc.mergeable_ranks, special_tokens=specials)
    assert shards.tokenizer_identity(more)["sha256"] != a["sha256"]


def test_block_stub_shape():
    b = block_of(["ab", "ç", "d"], True)
    assert b.pieces() == ["ab", "ç", "d"] and b.ends.tolist() == [2, 4, 5] and b.last_open


def test_resume_whatever_order_a_task_key_has(enc, tmp_path):
    class Unsorted(ListTask):
        def key(self):
            return {"z": 1, "a": {"y": 2, "b": 3}}

    shards.write_shards(enc, [Unsorted(DOCS)], tmp_path, progress=False)
    before = _files(tmp_path)
    m = shards.write_shards(enc, [Unsorted(DOCS)], tmp_path, progress=False)
    assert m["skipped"] == 1 and _files(tmp_path) == before   # the manifest too

    class NotJSON(ListTask):
        def key(self):
            return {"path": Path("x")}

    with pytest.raises(TypeError, match="JSON-able"):
        shards.write_shards(enc, [NotJSON(DOCS)], tmp_path, progress=False)


# --------------------------------------------------------------------------- a damaged folder (issue 37)
def _manifest(d: Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


def _set_manifest(d: Path, m: dict) -> None:
    (d / "manifest.json").write_text(json.dumps(m))


def _sidecar(d: Path, s: dict) -> Path:
    return d / (s["bin"][:-4] + ".json")


def _edit(path, value):
    """A function setting ``path`` (keys and list indices) of a manifest to ``value``
    (``...``: delete it)."""
    def apply(m):
        *head, last = path
        obj = m
        for k in head:
            obj = obj[k]
        if value is ...:
            del obj[last]
        else:
            obj[last] = value
    return apply


@pytest.mark.parametrize("path, value, field", [
    (("shards",), ..., r"shards is missing"),
    (("shards",), {}, r"shards must be a list"),
    (("dtype",), ..., r"dtype is missing"),
    (("dtype",), "int64", r"dtype is \"int64\", not one of"),
    (("tokenizer",), ..., r"tokenizer is missing"),
    (("tokenizer", "sha256"), "abc", r"tokenizer.sha256 is \"abc\", not a sha256"),
    (("tokenizer", "n_vocab"), 70000, r"dtype uint16 cannot hold the ids of tokenizer.n_vocab 70000"),
    (("tokenizer", "kind"), "unigram", r"tokenizer.kind is \"unigram\""),
    (("byteorder",), "big", r"byteorder is \"big\""),
    (("eot", "id"), None, r"eot is .*a rule"),
    (("eot", "id"), 10**6, r"eot.id is 1000000, outside tokenizer.n_vocab"),
    (("eot",), ..., r"eot is missing"),
    (("special_tokens", "allowed"), [1], r"special_tokens.allowed\[0\] must be a string"),
    (("documents",), 1, r"documents is 1, not the sum of the shards' documents"),
    (("tokens",), -1, r"tokens is -1, not a count"),
    (("tokens",), True, r"tokens must be an int, got true"),
    (("shards", 1, "tokens"), "7", r"shards\[1\].tokens must be an int"),
    (("shards", 1, "sha256"), ..., r"shards\[1\].sha256 is missing"),
    (("shards", 0, "idx_sha256"), "0" * 63, r"shards\[0\].idx_sha256 is \"0{63}\", not a sha256"),
    (("shards", 0, "source"), None, r"shards\[0\].source must be an object"),
    (("shards", 0), [], r"shards\[0\] must be an object"),
    (("shards", 0, "bin"), "../../etc/passwd", r"shards\[0\].bin is \"../../etc/passwd\", not a shard file of this folder"),
    (("shards", 0, "bin"), "/etc/passwd", r"shards\[0\].bin is \"/etc/passwd\", not a shard file"),
    (("shards", 0, "idx"), "sub/shard-000000-0123456789ab.idx", r"shards\[0\].idx is .*, not a shard file"),
    (("shards", 0, "idx"), "shard-000000-0123456789ab.idx", r"shards\[0\].bin and .idx are .*, not one shard's"),
    (("shards", 0, "bin"), "shard-000000-0123456789ab.idx", r"shards\[0\].bin is .*, not a shard file"),
])
def test_open_checks_every_manifest_field(enc, tmp_path, path, value, field):
    shards.write_shards(enc, _tasks(DOCS, 2), tmp_path, progress=False)
    m = _manifest(tmp_path)
    _edit(path, value)(m)
    _set_manifest(tmp_path, m)
    with pytest.raises(ValueError, match=rf"^{tmp_path / 'manifest.json'}: {field}"):
        shards.open(tmp_path)


def test_open_refuses_reordered_shards(enc, tmp_path):
    shards.write_shards(enc, _tasks(DOCS, 3), tmp_path, progress=False)
    m = _manifest(tmp_path)
    m["shards"][0], m["shards"][1] = m["shards"][1], m["shards"][0]
    _set_manifest(tmp_path, m)
    with pytest.raises(ValueError, match=r"shards\[0\].bin is shard-000001-\w+\.bin, the file of shard 1, at place 0: "
                                         r"the shards are out of corpus order"):
        shards.open(tmp_path)


def test_verify_finds_shards_reordered_under_new_names(enc, tmp_path):
    """Files renamed to swap their places (the names agree with the order again): each
    sidecar still says which place its shard was written for."""
    shards.write_shards(enc, _tasks(DOCS, 2), tmp_path, progress=False)
    m = _manifest(tmp_path)
    a, b = m["shards"]
    swap = {a["bin"][:-4]: "shard-000001-" + a["bin"][13:-4], b["bin"][:-4]: "shard-000000-" + b["bin"][13:-4]}
    for old, new in swap.items():
        for ext in (".bin", ".idx", ".json"):
            (tmp_path / (old + ext)).rename(tmp_path / (new + ext + ".tmp"))
    for new in swap.values():
        for ext in (".bin", ".idx", ".json"):
            (tmp_path / (new + ext + ".tmp")).rename(tmp_path / (new + ext))
    for s in (a, b):
        s["bin"], s["idx"] = swap[s["bin"][:-4]] + ".bin", swap[s["bin"][:-4]] + ".idx"
    m["shards"] = [b, a]
    _set_manifest(tmp_path, m)
    s = shards.open(tmp_path)
    with pytest.raises(ValueError, match=r"shards\[0\].index is 0, its sidecar shard-000000-\w+\.json says 1"):
        s.verify()


def test_verify_finds_a_changed_tokenizer_and_edited_sidecars(enc, tmp_path):
    shards.write_shards(enc, _tasks(DOCS, 2), tmp_path, progress=False)
    good = _manifest(tmp_path)
    m = json.loads(json.dumps(good))
    m["tokenizer"]["sha256"] = "0" * 64
    _set_manifest(tmp_path, m)
    s = shards.open(tmp_path)   # a well-formed manifest: only reading the sidecars tells
    with pytest.raises(ValueError, match=r"manifest.json: shard 0 was written with tokenizer \"[0-9a-f]{64}\", "
                                         r"not the manifest's \"0{64}\""):
        s.verify()
    for field, value in (("eot", {"rule": "none", "token": None, "id": None}), ("dtype", "uint32")):
        m = json.loads(json.dumps(good))
        m[field] = value
        _set_manifest(tmp_path, m)
        with pytest.raises(ValueError, match=rf"shard 0 was written with|shard-000000-\w+\.bin: \d+ bytes, not the"):
            shards.open(tmp_path).verify()
    m = json.loads(json.dumps(good))
    m["shards"][1]["source"] = {"documents": "elsewhere"}
    _set_manifest(tmp_path, m)
    with pytest.raises(ValueError, match=r"shards\[1\].source is not the source shard 1 was written from"):
        shards.open(tmp_path).verify()
    _set_manifest(tmp_path, good)
    shards.open(tmp_path).verify()
    side = _sidecar(tmp_path, good["shards"][1])
    info = json.loads(side.read_text())
    info["key"]["errors"] = "replace"
    side.write_text(json.dumps(info))
    with pytest.raises(ValueError, match=rf"{side}: its key does not hash to the name"):
        shards.open(tmp_path).verify()
    side.unlink()
    with pytest.raises(ValueError, match=rf"{side}: missing"):
        shards.open(tmp_path).verify()


def test_open_with_a_tokenizer_refuses_another(enc, tmp_path):
    shards.write_shards(enc, _tasks(DOCS, 2), tmp_path, progress=False)
    assert shards.open(tmp_path, tokenizer=enc).documents == len(DOCS)
    gpt2 = fastbpe.get_encoding("gpt2")
    with pytest.raises(ValueError, match=rf"^{tmp_path}: written by tokenizer '[^']+' \(bpe, \d+ ids, sha256 \w+…\), "
                                         r"not by this one \('gpt2', bpe, 50257 ids"):
        shards.open(tmp_path, tokenizer=gpt2)
    with pytest.raises(TypeError, match="tok must be a fastbpe Encoding or WordPiece, not str"):
        shards.open(tmp_path, tokenizer="gpt2")


def test_open_names_a_missing_short_or_escaping_file(enc, tmp_path):
    shards.write_shards(enc, _tasks(DOCS, 2), tmp_path, progress=False)
    a, b = _manifest(tmp_path)["shards"]
    raw = (tmp_path / b["bin"]).read_bytes()
    (tmp_path / b["bin"]).write_bytes(raw[:-2])
    with pytest.raises(ValueError, match=rf"^{tmp_path / b['bin']}: {len(raw) - 2} bytes, not the {len(raw)} of "
                                         rf"shards\[1\].tokens = {b['tokens']} uint16 tokens that manifest.json records"):
        shards.open(tmp_path)
    (tmp_path / b["bin"]).write_bytes(raw)
    (tmp_path / a["idx"]).unlink()
    with pytest.raises(ValueError, match=rf"^{tmp_path / a['idx']}: missing; manifest.json lists it "
                                         rf"\(shards\[0\].documents \+ 1 = {a['documents'] + 1} uint64 offsets: "):
        shards.open(tmp_path)
    if os.name != "posix":
        return
    outside = tmp_path.parent / (tmp_path.name + "-outside.idx")
    outside.write_bytes(b"\0" * 8 * (a["documents"] + 1))
    (tmp_path / a["idx"]).symlink_to(outside)
    with pytest.raises(ValueError, match=rf"{a['idx']}: a symlink to .*-outside.idx, outside the folder"):
        shards.open(tmp_path)


def test_doc_refuses_offsets_outside_the_shard(enc, tmp_path):
    shards.write_shards(enc, _tasks(DOCS, 1), tmp_path, progress=False)
    s0 = _manifest(tmp_path)["shards"][0]
    idx = np.fromfile(tmp_path / s0["idx"], dtype="<u8")
    idx[2] = 10**6
    idx.tofile(tmp_path / s0["idx"])
    s = shards.open(tmp_path)
    assert s.doc(0).tolist() == enc.encode_ordinary(DOCS[0]) + [enc.special_tokens["<|endoftext|>"]]
    with pytest.raises(ValueError, match=rf"{s0['idx']}: offsets 1 and 2 are \d+ and 1000000, not a range"):
        s.doc(1)
    with pytest.raises(ValueError, match="sha256 does not match"):
        s.verify()


# --------------------------------------------------------------------------- resume: the content check (issue 37)
def _edit_in_place(path: Path, at: int, new: bytes) -> None:
    """``new`` written over ``path`` at ``at``, the size, inode and mtime kept (as
    ``cp -p`` or ``rsync -t`` over an in-place edit leave them)."""
    st = path.stat()
    with path.open("r+b") as fh:
        fh.seek(at)
        fh.write(new)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)


def test_resume_re_encodes_a_file_edited_with_its_size_and_mtime_kept(enc, tmp_path):
    from fastbpe.io import Corpus

    src = tmp_path / "corpus.txt"
    src.write_text("hello world\nother text entirely\n")
    out = tmp_path / "out"

    def run():
        return shards.write_shards(enc, Corpus.resolve(src).plan(), out, progress=False)

    run()
    assert run()["skipped"] == 1
    _edit_in_place(src, 0, b"HELLO")
    m = run()
    assert m["skipped"] == 0
    s = shards.open(out)
    s.verify()
    assert enc.decode(s.read().tolist()).startswith("HELLO world")
    assert _files(out) == (shards.write_shards(enc, Corpus.resolve(src).plan(), tmp_path / "clean", progress=False)
                           and _files(tmp_path / "clean"))


@pytest.mark.parametrize("where, seen", [("first", True), ("middle", True), ("last", True), ("between", False)])
def test_the_content_check_reads_three_fixed_blocks(enc, tmp_path, where, seen):
    """The rule as documented: the first, middle and last 64 KiB of a file larger than
    three blocks are hashed; an edit elsewhere that keeps size and mtime is not seen."""
    from fastbpe.io import Corpus
    from fastbpe.io.streams import SAMPLE_BLOCK

    src = tmp_path / "big.txt"
    line = b"hello world other text\n"
    src.write_bytes(line * (8 * SAMPLE_BLOCK // len(line)))
    size = src.stat().st_size
    at = {"first": 100, "middle": size // 2, "last": size - 100, "between": SAMPLE_BLOCK + 100}[where]
    tasks = Corpus.resolve(src).plan()
    out = tmp_path / "out"
    shards.write_shards(enc, tasks, out, progress=False)
    _edit_in_place(src, at, b"X")
    assert shards.write_shards(enc, Corpus.resolve(src).plan(), out, progress=False)["skipped"] == (0 if seen else 1)
    # a file that is shorter than when it was planned: named, never half-read
    src.write_bytes(b"short\n")
    with pytest.raises(ValueError, match=rf"{src}: \d+ bytes where it had {size}: it changed since the corpus"):
        shards.write_shards(enc, tasks, out, progress=False)


def test_the_content_sample_is_for_local_files(tmp_path):
    """A local file's key holds the sample; a remote one's has the backend's version
    instead (no range reads: a stream that cannot seek is still read whole)."""
    fsspec = pytest.importorskip("fsspec")
    from fastbpe.io import Corpus
    from fastbpe.io.streams import content_sample

    (tmp_path / "a.txt").write_bytes(b"one\ntwo\n")
    local = Corpus.resolve(tmp_path / "a.txt").plan()[0].key()
    assert local["sample"] == content_sample(tmp_path / "a.txt", 8) and local["size"] == 8
    with fsspec.open("memory://fastbpe-test/a.txt", "wb") as fh:
        fh.write(b"one\ntwo\n")
    remote = Corpus.resolve("memory://fastbpe-test/a.txt").plan()[0].key()
    assert "sample" not in remote and remote["size"] == 8


def test_identity_of_a_tokenizer_json_covers_its_merge_rule(tmp_path):
    """Two tokenizer.json files with one vocabulary but another merge rule (a merge
    dropped, ``ignore_merges``) give other ids, so their shards must not pass for each
    other; where the rule provably gives the same ids (``ignore_merges: false`` on a
    list every token is reached by, Corollary A of ``reference.hf``), they may."""
    base = fastbpe.train_bpe(documents=["low lower lowest newest widest"] * 20, vocab_size=280,
                             special_tokens=["<|endoftext|>"], progress=False)
    path = tmp_path / "tok.json"
    base.save(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    rank = fastbpe.load(path)
    data["model"]["ignore_merges"] = False
    (tmp_path / "same.json").write_text(json.dumps(data), encoding="utf-8")
    same = fastbpe.load(tmp_path / "same.json")
    assert same.engine == "rank" and not same._unreachable
    assert shards.tokenizer_identity(same)["sha256"] == shards.tokenizer_identity(rank)["sha256"]
    del data["model"]["merges"][0]   # a two-byte token: its only merge
    (tmp_path / "merges.json").write_text(json.dumps(data), encoding="utf-8")
    pipeline = fastbpe.load(tmp_path / "merges.json")
    assert (rank.engine, pipeline.engine) == ("rank", "pipeline")
    # the rank engine is the trained encoding's identity; the pipeline's is its own
    assert shards.tokenizer_identity(rank)["sha256"] == shards.tokenizer_identity(base)["sha256"]
    assert shards.tokenizer_identity(pipeline)["sha256"] != shards.tokenizer_identity(rank)["sha256"]
