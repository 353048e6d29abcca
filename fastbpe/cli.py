"""The ``fastbpe`` command: ``demo``, ``train``, ``encode``, ``decode``.

Errors are one line on stderr and a non-zero exit code, never a traceback.
"""
from __future__ import annotations

import argparse
import os
import sys
import sysconfig
import time
import warnings
from pathlib import Path


class CLIError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


# --------------------------------------------------------------------------- helpers
def stdlib_sources(max_bytes: int) -> list[Path]:
    """The Python standard library's own ``.py`` files (not site-packages), sorted, up
    to about ``max_bytes``: real text that is on every machine with Python."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files, total = [], 0
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).parts
        if "site-packages" in rel or "dist-packages" in rel:
            continue
        try:
            size = path.stat().st_size
            path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        files.append(path)
        total += size
        if total >= max_bytes:
            break
    if not files:
        raise CLIError(f"no Python standard library sources found under {root}")
    return files


def load_tokenizer(spec: str):
    """A file path, or a built-in name resolved offline as ``get_encoding`` does."""
    import fastbpe

    if os.path.exists(spec):
        return fastbpe.load(spec)
    if spec in fastbpe.list_encoding_names():
        return fastbpe.get_encoding(spec)
    raise CLIError(f"tokenizer {spec!r} is neither a file nor one of {fastbpe.list_encoding_names()}")


# --------------------------------------------------------------------------- commands
def cmd_demo(args) -> int:
    """Train on the standard library, save, show a sample and the compression."""
    import fastbpe

    files = stdlib_sources(int(args.max_mb * 1e6))
    n_bytes = sum(f.stat().st_size for f in files)
    print(f"Training a {args.vocab_size}-token BPE (cl100k pattern) on {len(files)} Python standard library "
          f"files ({n_bytes / 1e6:.1f} MB) from {files[0].parent} ...")
    t0 = time.perf_counter()
    enc = fastbpe.train_bpe(files, args.vocab_size, pattern="cl100k", special_tokens=["<|endoftext|>"],
                            progress=not args.quiet, name="stdlib-demo")
    train_s = time.perf_counter() - t0
    out = Path(args.output)
    enc.save(out)
    print(f"Trained in {train_s:.1f} s; saved to {out}")

    sample = 'def greet(name):\n    """Say hello."""\n    return f"Hello, {name}!"\n'
    ids = enc.encode(sample)
    print("\nSample:", repr(sample))
    print("Ids:   ", ids)
    print("Tokens:", [enc.decode_single_token_bytes(i).decode("utf-8", "replace") for i in ids])
    assert enc.decode(ids) == sample

    # Compression on held-out text: files after the training slice.
    held_out = "".join(f.read_text(encoding="utf-8") for f in stdlib_sources(int(args.max_mb * 1e6) + 400_000)[len(files):])
    text = held_out or sample
    t0 = time.perf_counter()
    n_tokens = len(enc.encode_ordinary(text))
    enc_s = time.perf_counter() - t0
    n = len(text.encode("utf-8"))
    print(f"\nHeld-out text: {n / 1e6:.2f} MB -> {n_tokens} tokens = {n / n_tokens:.2f} bytes/token "
          f"({n / 1e6 / enc_s:.1f} MB/s)")
    try:
        tk = fastbpe.get_encoding("cl100k_base")
        print(f"cl100k_base on the same text: {n / len(tk.encode_ordinary(text)):.2f} bytes/token")
    except (FileNotFoundError, ValueError):
        pass
    return 0


def cmd_train(args) -> int:
    import fastbpe

    for f in args.files:
        if not os.path.exists(f):
            raise CLIError(f"input file not found: {f}")
    data = args.files if args.files else (line for line in sys.stdin)
    enc = fastbpe.train_bpe(data, args.vocab_size, pattern=args.pattern, special_tokens=args.special or [],
                            num_threads=args.threads, progress=not args.quiet)
    enc.save(args.output, format=args.format)
    print(f"saved {enc.n_vocab} tokens to {args.output}", file=sys.stderr)
    return 0


def cmd_encode(args) -> int:
    enc = load_tokenizer(args.tokenizer)
    text = Path(args.file).read_text(encoding="utf-8") if args.file else sys.stdin.read()
    ids = enc.encode(text, allowed_special="all") if hasattr(enc, "special_tokens_set") else enc.encode(text)
    sys.stdout.write(" ".join(map(str, ids)) + "\n")
    return 0


def cmd_decode(args) -> int:
    enc = load_tokenizer(args.tokenizer)
    raw = Path(args.file).read_text() if args.file else sys.stdin.read()
    try:
        ids = [int(x) for x in raw.split()]
    except ValueError as exc:
        raise CLIError(f"ids must be whitespace-separated integers: {exc}") from None
    data = enc.decode_bytes(ids) if hasattr(enc, "decode_bytes") else enc.decode(ids).encode("utf-8")
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
    return 0


# --------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fastbpe", description="Exact, fast BPE and WordPiece tokenizers.")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="train on the Python standard library and show the result")
    d.add_argument("--vocab-size", type=int, default=1024)
    d.add_argument("--max-mb", type=float, default=1.0, help="MB of standard library sources to train on")
    d.add_argument("-o", "--output", default="stdlib-demo.tokenizer.json")
    d.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    d.set_defaults(func=cmd_demo)

    t = sub.add_parser("train", help="train a byte-level BPE from files (or stdin)")
    t.add_argument("files", nargs="*")
    t.add_argument("--vocab-size", type=int, required=True)
    t.add_argument("--pattern", default="cl100k", help="gpt2, cl100k, o200k or a regex")
    t.add_argument("--special", action="append", help="a special token (repeatable)")
    t.add_argument("--threads", type=int, default=None)
    t.add_argument("-o", "--output", required=True)
    t.add_argument("--format", choices=["tiktoken", "hf", "gpt2"], default=None)
    t.add_argument("-q", "--quiet", action="store_true")
    t.set_defaults(func=cmd_train)

    e = sub.add_parser("encode", help="text to ids (stdin when no file)")
    e.add_argument("file", nargs="?")
    e.add_argument("--tokenizer", "-t", required=True, help="a file or gpt2 / cl100k_base / o200k_base")
    e.set_defaults(func=cmd_encode)

    de = sub.add_parser("decode", help="ids to text (stdin when no file)")
    de.add_argument("file", nargs="?")
    de.add_argument("--tokenizer", "-t", required=True)
    de.set_defaults(func=cmd_decode)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            return args.func(args)
    except (CLIError, FileNotFoundError, ValueError, KeyError, TypeError, OSError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"fastbpe {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"fastbpe {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
