"""``fastbpe bench``: ids checked before timing (a peer that differs is reported, never
timed), the table's shape, --json, --plot. Tiny inputs, one repeat: runtime, not speed."""
from __future__ import annotations

import json

import pytest

import fastbpe
from fastbpe import bench
from fastbpe.cli import main

DOCS = ["hello world, hello fastbpe\n", "çok güzel 中文\n", "def f(x):\n    return x\n", "numbers 12345\n"] * 3


def _library(name: str, one) -> bench.Library:
    lib = bench.Library(name, lambda: fastbpe.get_encoding("gpt2"))
    lib.one["list"] = one
    lib.batch["list"] = lambda e, docs, n: [one(e, d) for d in docs]
    return lib


def test_ids_are_checked_before_timing_and_a_different_peer_is_not_timed():
    right = _library("right", lambda e, d: e.encode_ordinary(d))
    wrong = _library("wrong", lambda e, d: e.encode_ordinary(d)[::-1])
    broken = _library("broken", lambda e, d: 1 / 0)
    [res] = bench.run_bench({"gpt2": fastbpe.get_encoding("gpt2")}, DOCS, threads=2,
                            peers={"gpt2": [right, wrong, broken]})
    assert {r["library"] for r in res["rows"]} == {"fastbpe", "right"}
    assert res["differs"]["wrong, 1 thread"].startswith("document 1, token 1: ")
    assert res["differs"]["broken, 2 threads"] == "failed: ZeroDivisionError: division by zero"
    text = bench.format_table(res)
    assert "DIFFERENT ids or failed, not timed: wrong, 1 thread (document 1" in text
    assert "ids identical to fastbpe's on every document: fastbpe, right" in text


def test_table_shape_every_library_threads_and_state():
    [res] = bench.run_bench({"gpt2": fastbpe.get_encoding("gpt2")}, DOCS, threads=2, specs={"gpt2": "gpt2"})
    libs = [lib for lib in res["libraries"] if not any(k.startswith(lib + ",") for k in res["differs"])]
    assert "tiktoken" in libs and res["threads"] == [1, 2]
    # a built-in name reaches the tokenizer.json peers through a file fastbpe writes, said in the header
    assert "HF tokenizers" in libs and res["notes"]["HF tokenizers"] == "a tokenizer.json fastbpe wrote from the ranks"
    assert [(r["library"], r["threads"], r["state"]) for r in res["rows"]] == [
        (lib, n, state) for lib in libs for n in (1, 2) for state in ("cold", "warm")]
    assert all(r["vs_tiktoken"] == 1.0 for r in res["rows"] if r["library"] == "tiktoken")
    assert res["tokens"] == sum(len(fastbpe.get_encoding("gpt2").encode_ordinary(d)) for d in bench.halves(DOCS)[1])
    lines = bench.format_table(res).splitlines()
    head = lines.index(next(x for x in lines if x.startswith("library")))
    assert lines[head].split() == ["library", "threads", "state", "MB/s", "tokens/s", "vs", "tiktoken"]
    assert len(lines) - head - 2 == len(res["rows"])
    assert "same documents, list output and threads (1 and 2) for every library" in lines[1]


def test_numpy_output_lists_calls_a_library_lacks():
    [res] = bench.run_bench({"gpt2": fastbpe.get_encoding("gpt2")}, DOCS, threads=2, kind="numpy",
                            specs={"gpt2": "gpt2"})
    assert {(r["library"], r["threads"]) for r in res["rows"]} >= {("fastbpe", 1), ("fastbpe", 2), ("tiktoken", 1)}
    assert res["no_call"]["tiktoken, 2 threads"] == "no numpy batch call"


def test_wordpiece_against_hf_tokenizers(vocab_file):
    path = str(vocab_file("bert-base-uncased/tokenizer.json"))
    [res] = bench.run_bench({"bert": fastbpe.load(path)}, DOCS, threads=1, specs={"bert": path})
    assert {r["library"] for r in res["rows"]} == {"fastbpe", "HF tokenizers"} and not res["differs"]
    assert res["absent"]["tiktoken"] == "byte-level BPE only"


def test_bad_arguments():
    enc = {"gpt2": fastbpe.get_encoding("gpt2")}
    with pytest.raises(ValueError, match="no text to measure"):
        bench.run_bench(enc, [""])
    with pytest.raises(ValueError, match="kind must be one of"):
        bench.run_bench(enc, DOCS, kind="arrow")
    with pytest.raises(ValueError, match="repeat must be an int >= 1"):
        bench.run_bench(enc, DOCS, repeat=0)


def test_cli_table_json_and_plot(tmp_path, capsys):
    corpus = tmp_path / "docs.txt"
    corpus.write_text("".join(DOCS), encoding="utf-8")
    out = tmp_path / "bench.json"
    args = ["bench", "-t", "gpt2", str(corpus), "--docs", "lines", "--repeat", "1", "--threads", "2", "-q",
            "--json", str(out)]
    plot = tmp_path / "bench.png"
    try:
        import matplotlib  # noqa: F401
        args += ["--plot", str(plot)]
    except ImportError:
        plot = None
    assert main(args) == 0
    text = capsys.readouterr().out
    assert text.startswith("gpt2: 15 documents; timed ")  # --docs lines: one per line
    [res] = json.loads(out.read_text())
    assert res["tokenizer"] == "gpt2" and res["rows"] and res["repeat"] == 1
    if plot is not None:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_errors(tmp_path, capsys):
    assert main(["bench", "-t", "gpt2", str(tmp_path / "missing.txt"), "-q"]) == 2
    assert "missing.txt" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["bench", "-t", "gpt2", "x.txt", "--repeat", "0"])
