"""Issue 37, item 1: a compressed input that does not end where its format says is an
error naming the file and the decompressed offset, never a shorter corpus.

Every format the readers accept (gzip, xz, zstd; single and multi-frame, a skippable
zstd frame; text and JSON Lines) is cut at many offsets (the first bytes, every 1/20 of
the file, the last bytes) and given garbage tails, and read through the public entry
points: ``fastbpe count`` (the CLI, in process and for real), ``train_bpe``,
``train_wordpiece``, ``encode_files`` (here; Dask in test_distributed.py). The test
files are made with the ``zstandard`` package (the ``zstd`` program may be absent).
"""
from __future__ import annotations

import gzip
import io
import json
import lzma
import random
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastbpe
from fastbpe import cli
from fastbpe.distributed import encode_files
from fastbpe.io import Corpus
from fastbpe.trainers.wordpiece import train_wordpiece

zstd = pytest.importorskip("zstandard", reason="zstandard (a test dependency) is not installed")


def _text(n_lines: int, seed: int) -> str:
    rnd = random.Random(seed)
    words = ["".join(rnd.choice("abcdefghijklmnoprstu") for _ in range(rnd.randint(1, 8))) for _ in range(3000)]
    return "".join(" ".join(rnd.choices(words, k=10)) + "\n" for _ in range(n_lines))


# about 240 KB of text: a zstd frame of it holds two blocks (a block is at most 128 KiB)
TEXT = _text(4000, 0)
HALF = TEXT.index("\n", len(TEXT) // 2) + 1
JSONL = "".join(json.dumps({"text": line}) + "\n" for line in TEXT.splitlines())


def _zst(data: bytes, **kw) -> bytes:
    return zstd.ZstdCompressor(**kw).compress(data)


def _skippable(payload: bytes) -> bytes:
    return (0x184D2A53).to_bytes(4, "little") + len(payload).to_bytes(4, "little") + payload


def _two(compress, text: str) -> bytes:
    return compress(text[:HALF].encode()) + compress(text[HALF:].encode())


#: name -> (file suffix, format, the file's bytes, its text)
FORMATS = {
    "gzip": (".txt.gz", "gzip", gzip.compress(TEXT.encode()), TEXT),
    "gzip-2-members": (".txt.gz", "gzip", _two(gzip.compress, TEXT), TEXT),
    "xz": (".txt.xz", "xz", lzma.compress(TEXT.encode()), TEXT),
    "xz-2-streams": (".txt.xz", "xz", _two(lzma.compress, TEXT), TEXT),
    "zstd": (".txt.zst", "zstd", _zst(TEXT.encode(), write_checksum=True), TEXT),
    "zstd-no-checksum-no-size": (".txt.zstd", "zstd", _zst(TEXT.encode(), write_content_size=False), TEXT),
    "zstd-2-frames": (".txt.zst", "zstd", _two(lambda b: _zst(b, write_checksum=True), TEXT), TEXT),
    "zstd-skippable": (".txt.zst", "zstd", _zst(TEXT[:HALF].encode()) + _skippable(b"meta" * 9)
                       + _zst(TEXT[HALF:].encode()), TEXT),
    "zstd-skippable-first": (".txt.zst", "zstd", _skippable(b"header") + _zst(TEXT.encode(), write_checksum=True),
                             TEXT),
    "jsonl.gz": (".jsonl.gz", "gzip", gzip.compress(JSONL.encode()), JSONL),
    "jsonl.xz": (".jsonl.xz", "xz", lzma.compress(JSONL.encode()), JSONL),
    "jsonl.zst-2-frames": (".jsonl.zst", "zstd", _two(_zst, JSONL), JSONL),
}


def cuts(n: int) -> list[int]:
    """The lengths a file of ``n`` bytes is cut to: its first bytes, every 1/20, its last."""
    return sorted({*range(0, 13), *(n * k // 20 for k in range(1, 20)), *(n - k for k in (1, 2, 3, 4, 5, 8))})


def _write(tmp_path, name: str, data: bytes):
    suffix = FORMATS[name][0]
    path = tmp_path / f"cut{suffix}"
    path.write_bytes(data)
    return path


def _offset(message: str, path, fmt: str) -> int:
    """The decompressed offset the error names (it must name the file and the format)."""
    m = re.search(re.escape(str(path)) + rf": corrupt or truncated {fmt} data after (\d+) decompressed bytes",
                  message)
    assert m, message
    return int(m.group(1))


def _docs(path) -> list[str]:
    """The documents: a line each (text files by the rule docs="lines")."""
    return list(Corpus.resolve(path, docs=None if ".jsonl" in path.name else "lines").documents())


def _cli_count(path, capsys) -> str:
    assert cli.main(["count", "-q", "-t", "gpt2", str(path)]) == 2
    return capsys.readouterr().err


@pytest.fixture(scope="module")
def gpt2():
    return fastbpe.get_encoding("gpt2")


@pytest.mark.parametrize("name", FORMATS)
def test_whole_files_read_whole(tmp_path, name):
    path = _write(tmp_path, name, FORMATS[name][2])
    assert _docs(path) == TEXT.splitlines()


@pytest.mark.parametrize("name", FORMATS)
def test_every_cut_is_an_error_naming_file_and_offset(tmp_path, name):
    _, fmt, data, text = FORMATS[name]
    for n in cuts(len(data)):
        path = _write(tmp_path, name, data[:n])
        with pytest.raises(ValueError) as info:
            _docs(path)
        assert _offset(str(info.value), path, fmt) <= len(text.encode()), n


@pytest.mark.parametrize("entry", ["cli count", "train_bpe", "encode_files"])
@pytest.mark.parametrize("name", FORMATS)
def test_every_cut_fails_every_entry_point(tmp_path, name, entry, gpt2, capsys):
    _, fmt, data, text = FORMATS[name]
    for n in cuts(len(data)):
        path = _write(tmp_path, name, data[:n])
        if entry == "cli count":
            message = _cli_count(path, capsys)
        else:
            with pytest.raises(ValueError) as info:
                if entry == "train_bpe":
                    fastbpe.train_bpe(path, 300, progress=False)
                else:
                    encode_files([path], gpt2, tmp_path / f"shards{n}", num_threads=1, progress=False)
            message = str(info.value)
        assert _offset(message, path, fmt) <= len(text.encode()), (n, message)


@pytest.mark.parametrize("name", ["gzip-2-members", "xz", "zstd-2-frames", "jsonl.zst-2-frames"])
def test_train_wordpiece_refuses_cut_files(tmp_path, name):
    _, fmt, data, _ = FORMATS[name]
    for n in (4, len(data) // 3, len(data) - 1):
        path = _write(tmp_path, name, data[:n])
        with pytest.raises(ValueError, match=rf"{re.escape(str(path))}: corrupt or truncated {fmt} data"):
            train_wordpiece(path, 200)


TAILS = [b"garbage!", b"\x01", b"\x00\x00\x00"]


@pytest.mark.parametrize("tail", TAILS, ids=["garbage", "one-byte", "three-zeros"])
@pytest.mark.parametrize("name", FORMATS)
def test_a_tail_after_the_last_frame_names_the_end_of_the_text(tmp_path, name, tail):
    """Bytes after the data that begin no frame: the offset is where the text ended
    (the issue's gzip case said "after 0 decompressed bytes"). gzip allows zero bytes
    after its last member (gzip's own rule), so the zeros pass there."""
    _, fmt, data, text = FORMATS[name]
    path = _write(tmp_path, name, data + tail)
    if fmt == "gzip" and not tail.strip(b"\0"):
        assert _docs(path) == TEXT.splitlines()
        return
    with pytest.raises(ValueError) as info:
        _docs(path)
    assert _offset(str(info.value), path, fmt) == len(text.encode())


def test_what_each_format_allows_after_its_end(tmp_path):
    # xz: stream padding, zero bytes in a multiple of 4; zstd: skippable frames
    path = _write(tmp_path, "xz-2-streams", FORMATS["xz-2-streams"][2] + bytes(8))
    assert _docs(path) == TEXT.splitlines()
    path = _write(tmp_path, "zstd", FORMATS["zstd"][2] + _skippable(b""))
    assert _docs(path) == TEXT.splitlines()
    # a third frame cut inside its header, and a whole frame of another format, are errors
    for name, extra in (("zstd", _zst(b"more\n")[:5]), ("zstd", gzip.compress(b"more\n")),
                        ("xz", gzip.compress(b"more\n")), ("gzip", lzma.compress(b"more\n"))):
        _, fmt, data, text = FORMATS[name]
        path = _write(tmp_path, name, data + extra)
        with pytest.raises(ValueError) as info:
            _docs(path)
        assert _offset(str(info.value), path, fmt) == len(text.encode())


def test_a_bad_checksum_is_an_error(tmp_path):
    data = bytearray(FORMATS["zstd"][2])
    data[-1] ^= 0xFF
    path = _write(tmp_path, "zstd", bytes(data))
    with pytest.raises(ValueError, match="corrupt or truncated zstd data"):
        _docs(path)


def test_a_short_file_named_compressed_is_cut_but_a_plain_one_is_text(tmp_path):
    for suffix, head in ((".txt.gz", b"\x1f"), (".jsonl.zst", b"\x28\xb5\x2f"), (".txt.xz", b""), (".zstd", b"")):
        path = tmp_path / f"x{suffix}"
        path.write_bytes(head)
        with pytest.raises(ValueError, match=rf"x{re.escape(suffix)}: corrupt or truncated .* "
                                             rf"\(the file is {len(head)} bytes long, cut inside the magic"):
            _docs(path)
    # compression is read from the data: a longer file without the magic is text
    path = tmp_path / "plain.txt.gz"
    path.write_bytes(b"plain text\n")
    assert _docs(path) == ["plain text"]
    path = tmp_path / "short.txt"
    path.write_bytes(b"\x1f")
    assert _docs(path) == ["\x1f"]


def test_the_command_line_names_file_and_offset(tmp_path):
    """For real, in a subprocess: count, stats, train and encode --shards of a .jsonl.zst
    cut in its middle (the issue's case: 0 documents and exit 0)."""
    _, _, data, _ = FORMATS["jsonl.zst-2-frames"]
    path = _write(tmp_path, "jsonl.zst-2-frames", data[: len(data) // 2])
    import os

    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(fastbpe.__file__)))
    for args in (["count", "-q", "-t", "gpt2", path], ["stats", "gpt2", "--files", path],
                 ["train", "-q", path, "--vocab-size", "300", "-o", tmp_path / "t.tiktoken"],
                 ["encode", "-q", "-t", "gpt2", path, "--shards", tmp_path / "shards"]):
        proc = subprocess.run([sys.executable, "-m", "fastbpe", *map(str, args)], capture_output=True,
                              cwd=tmp_path, env=env, timeout=300)
        err = proc.stderr.decode()
        assert proc.returncode == 2, (args, err)
        assert "Traceback" not in err
        assert _offset(err, path, "zstd") <= len(JSONL.encode()), err


# ----------------------------------------------------------------------------- any frames, any cut
_COMPRESS = {
    "gzip": lambda b, _: gzip.compress(b),
    "xz": lambda b, check: lzma.compress(b, check=lzma.CHECK_CRC64 if check else lzma.CHECK_NONE),
    "zstd": lambda b, check: _zst(b, write_checksum=check, write_content_size=not check),
}


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=3000), st.lists(st.integers(0, 3000), max_size=3), st.sampled_from(sorted(_COMPRESS)),
       st.booleans(), st.data())
def test_any_cut_of_any_frames_is_an_error_unless_between_frames(data, splits, fmt, check, draw):
    """The rule on its own (``streams.Stream``): frames of any data, cut anywhere. A
    cut between two frames leaves a whole, shorter stream (no format can tell): its
    data must be exactly the frames before the cut."""
    from fastbpe.io import streams

    bounds = sorted({0, len(data), *(min(s, len(data)) for s in splits)})
    frames = [_COMPRESS[fmt](data[a:b], check) for a, b in zip(bounds, bounds[1:])] or [_COMPRESS[fmt](b"", check)]
    ends = {sum(len(f) for f in frames[:k]): data[:bounds[k]] if k < len(bounds) else data
            for k in range(1, len(frames) + 1)}
    blob = b"".join(frames)
    cut = draw.draw(st.integers(1, len(blob)), label="cut")
    stream = streams.Stream("x", io.BytesIO(blob[:cut]), fmt)

    def read_all() -> bytes:
        out = []
        while chunk := stream.read(1000):
            out.append(chunk)
        return b"".join(out)

    if cut in ends:
        assert read_all() == ends[cut]
    else:
        with pytest.raises(ValueError, match=rf"x: corrupt or truncated {fmt} data after (\d+) decompressed bytes") \
                as info:
            read_all()
        assert int(re.search(r"after (\d+)", str(info.value)).group(1)) <= len(data)
