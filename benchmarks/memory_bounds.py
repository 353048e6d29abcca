"""Peak memory of count / encode --shards / encode_files on one big file, by file shape.

    python benchmarks/memory_bounds.py                       # 1 GB files, every shape and command
    python benchmarks/memory_bounds.py --mb 64 --shapes text,byte-lines --commands count
    python benchmarks/memory_bounds.py --dir /tmp/mb --keep  # reuse the files next time

Issue 23's bound: on a 1 GB single file, whatever its shape, ``fastbpe count``,
``fastbpe encode --shards`` and ``fastbpe.encode_files`` peak at most ~300 MB above the
tokenizer itself, in time linear in the input. This script makes one file per shape
(in ``--dir``, default a temporary directory, deleted afterwards unless ``--keep``):

* ``text``: ordinary text with newlines (documents of ``--source`` joined by ``\\n``);
* ``one-line``: the same prose with every ``\\n``/``\\r`` turned into a space, then one
  final ``\\n``: a single 1 GB line;
* ``no-newlines``: multibyte-heavy text (the documents of ``--source`` with the most
  non-ASCII, e.g. the Chinese, Japanese, Russian man pages) with no ``\\n`` at all,
  not even at the end, so block boundaries fall inside characters too;
* ``byte-lines``: ``"a\\n"`` repeated (512 M one-byte lines in 1 GB).

``--source`` is a ``.jsonl`` of ``{"text": ...}`` documents (default
``/work/corpus/docs.jsonl``, see ``debian_corpus.py``; the text is repeated when the
file is smaller than ``--mb``); without it, the Python standard library's ``.py``
sources are used.

Each command runs in a fresh process under a tiny launcher (``peak_rss.py``), which
reports that process's ``ru_maxrss`` and the wall time (interpreter start and
tokenizer load included, about a second). The tokenizer's own RSS is measured the
same way, by a process that only loads it and encodes one short string. The verdict
is PASS when peak RSS <= ``--bound-mb`` (300) + that RSS. ``encode_files`` is called
with ``num_workers=1`` where it has that parameter (``--workers``), so that the work
happens in the measured process (``ru_maxrss`` is one process's peak, not a sum over
worker processes). A command whose RSS passes ``--rss-cap-mb`` (4096) is killed and
counted as FAIL, so that a build far over the bound can't take a shared machine's
memory.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from peak_rss import env_with_checkout, measure  # noqa: E402

SHAPES = ("text", "one-line", "no-newlines", "byte-lines")
COMMANDS = ("count", "encode-shards", "encode_files")

_LOAD_ONLY = """
import fastbpe, sys
enc = fastbpe.get_encoding(sys.argv[1])
enc.encode_ordinary("warm up the tokenizer: hello world")
"""

_ENCODE_FILES = """
import inspect, json, sys
import fastbpe
name, path, out, workers = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
enc = fastbpe.get_encoding(name)
kw = {}
if workers != "default" and "num_workers" in inspect.signature(fastbpe.encode_files).parameters:
    kw["num_workers"] = int(workers)
m = fastbpe.encode_files([path], enc, out, **kw)
tokens = m.get("total_tokens", m.get("tokens")) if isinstance(m, dict) else None
print(json.dumps({"tokens": tokens, "kw": kw}))
"""


# ----------------------------------------------------------------------------- the files
def source_texts(source: str | None):
    """Documents to build the files from, forever (the source is repeated)."""
    while True:
        n = 0
        if source:
            with open(source, encoding="utf-8") as fh:
                for line in fh:
                    if line.strip():
                        text = json.loads(line).get("text")
                        if text:
                            n += 1
                            yield text
        else:
            lib = Path(sysconfig.get_paths()["stdlib"])
            for p in sorted(lib.rglob("*.py")):
                try:
                    n += 1
                    yield p.read_text(encoding="utf-8")
                except (UnicodeDecodeError, OSError):
                    pass
        if not n:
            raise ValueError(f"no documents in {source or 'the standard library'}")


def multibyte(text: str) -> bool:
    """Whether a document is mostly non-ASCII (at least 1.5 UTF-8 bytes per character).

    >>> multibyte("日本語のテキスト"), multibyte("plain ascii")
    (True, False)
    """
    return len(text.encode("utf-8")) >= 1.5 * len(text)


def write_shape(path: Path, shape: str, n_bytes: int, source: str | None) -> None:
    """Write about ``n_bytes`` of the shape (see the module docstring), streaming."""
    tmp = path.with_name(path.name + ".part")
    written = 0
    with open(tmp, "wb") as fh:
        if shape == "byte-lines":
            block = b"a\n" * (1 << 19)
            while n_bytes - written >= 2:
                remaining = n_bytes - written
                piece = block[: remaining - remaining % 2]
                fh.write(piece)
                written += len(piece)
        else:
            skipped = 0
            for text in source_texts(source):
                if shape == "no-newlines" and source and not multibyte(text):
                    skipped += 1
                    if skipped > 10_000_000 and not written:
                        raise ValueError(f"no multibyte-heavy documents in {source}")
                    continue
                if shape == "text":
                    raw = (text if text.endswith("\n") else text + "\n").encode("utf-8")
                else:
                    raw = (text.replace("\r", " ").replace("\n", " ") + " ").encode("utf-8")
                raw = raw[: n_bytes - written]
                # never cut a character in two: the file must stay valid UTF-8
                raw = raw.decode("utf-8", "ignore").encode("utf-8")
                fh.write(raw)
                written += len(raw)
                if written >= n_bytes - 3:
                    break
            if shape == "one-line":
                fh.write(b"\n")
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- commands
def command_argv(command: str, tokenizer: str, path: Path, out: Path, workers: str) -> list[str]:
    py = sys.executable
    if command == "count":
        return [py, "-m", "fastbpe", "count", "-t", tokenizer, str(path)]
    if command == "encode-shards":
        return [py, "-m", "fastbpe", "encode", "-t", tokenizer, str(path), "--shards", str(out)]
    if command == "encode_files":
        return [py, "-c", _ENCODE_FILES, tokenizer, str(path), str(out), workers]
    raise ValueError(f"unknown command {command!r}; choose from {', '.join(COMMANDS)}")


def tokens_of(command: str, stdout: str):
    """The token total a command reports (for the table; None if not found).

    >>> tokens_of("count", "374,117  s3.txt\\n")
    374117
    >>> tokens_of("encode-shards", "wrote d: 1 documents, 374,117 tokens in 1 shard(s)")
    374117
    """
    if command == "encode_files":
        try:
            return json.loads(stdout.strip().splitlines()[-1])["tokens"]
        except (ValueError, IndexError, KeyError):
            return None
    if command == "count":
        lines = stdout.strip().splitlines()
        m = re.match(r"\s*([\d,]+)", lines[-1]) if lines else None
    else:
        m = re.search(r"([\d,]+) tokens", stdout)
    return int(m.group(1).replace(",", "")) if m else None


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=1024, help="size of each file in MiB (default 1024)")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--commands", default=",".join(COMMANDS))
    ap.add_argument("--tokenizer", "-t", default="gpt2")
    ap.add_argument("--source", default="/work/corpus/docs.jsonl",
                    help="a .jsonl of {'text': ...} documents; '' for the standard library")
    ap.add_argument("--dir", help="where the files go (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the files (and reuse them next time)")
    ap.add_argument("--bound-mb", type=float, default=300)
    ap.add_argument("--workers", default="1", help="encode_files num_workers ('default': not passed)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per command (0: none)")
    ap.add_argument("--rss-cap-mb", type=float, default=4096,
                    help="kill a command whose RSS passes this (the machine is shared; 0: no cap)")
    args = ap.parse_args(argv)
    shapes, commands = args.shapes.split(","), args.commands.split(",")
    for s in shapes:
        if s not in SHAPES:
            ap.error(f"unknown shape {s!r}; choose from {', '.join(SHAPES)}")
    source = args.source if args.source and Path(args.source).exists() else None
    n_bytes = int(args.mb * (1 << 20))

    env = env_with_checkout()
    base = measure([sys.executable, "-c", _LOAD_ONLY, args.tokenizer], env=env)
    if base["rc"] != 0:
        sys.exit(f"loading {args.tokenizer} failed: {base['stderr'][-500:]}")
    limit = args.bound_mb + base["peak_rss_mb"]
    print(f"tokenizer {args.tokenizer}: {base['peak_rss_mb']:.0f} MB RSS loaded ({base['wall_s']:.1f} s);"
          f" bound {args.bound_mb:.0f} + {base['peak_rss_mb']:.0f} = {limit:.0f} MB;"
          f" files of {n_bytes / 1e6:.0f} MB from {source or 'the standard library'}")
    print(f"{'shape':<12} {'command':<14} {'peak RSS MB':>11} {'seconds':>8} {'MB/s':>7} {'tokens':>14}  verdict")

    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="fastbpe_membounds_"))
    work.mkdir(parents=True, exist_ok=True)
    failures = 0
    try:
        for shape in shapes:
            path = work / f"{shape}-{args.mb:g}mb.txt"
            if not (path.exists() and args.keep):
                write_shape(path, shape, n_bytes, source)
            mb = path.stat().st_size / 1e6
            for command in commands:
                out = work / f"out-{shape}-{command}"
                shutil.rmtree(out, ignore_errors=True)
                r = measure(command_argv(command, args.tokenizer, path, out, args.workers), env=env,
                            timeout=args.timeout, rss_cap_mb=args.rss_cap_mb)
                shutil.rmtree(out, ignore_errors=True)
                if r["rc"] != 0:
                    failures += 1
                    if r["rc"] == "rss cap":
                        print(f"{shape:<12} {command:<14} {'>' + format(args.rss_cap_mb, '.0f'):>11}"
                              f" {r['wall_s']:8.1f} {'':>7} {'':>14}  FAIL (killed above --rss-cap-mb)", flush=True)
                        continue
                    last = (r["stderr"].strip().splitlines() or ["?"])[-1][:200]
                    print(f"{shape:<12} {command:<14} {r['peak_rss_mb']:11.0f} {r['wall_s']:8.1f} {'':>7}"
                          f" {'':>14}  ERROR rc={r['rc']}: {last}", flush=True)
                    continue
                ok = r["peak_rss_mb"] <= limit
                failures += not ok
                tokens = tokens_of(command, r["stdout"])
                print(f"{shape:<12} {command:<14} {r['peak_rss_mb']:11.0f} {r['wall_s']:8.1f}"
                      f" {mb / r['wall_s']:7.1f} {tokens if tokens is not None else '?':>14}"
                      f"  {'PASS' if ok else 'FAIL'}", flush=True)
            if not args.keep:
                path.unlink()
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{failures} over the bound or failed" if failures else "all within the bound")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
