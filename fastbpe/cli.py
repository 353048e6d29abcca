"""The ``fastbpe`` command (also ``python -m fastbpe``).

=========  ==========================================================================
command    what
=========  ==========================================================================
demo       train on the Python standard library, save, show a sample, compare
train      BPE or WordPiece from files (or stdin lines) -> .tiktoken / tokenizer.json /
           vocab.txt
encode     text -> ids (stdin/file -> stdout), or a corpus -> token shards (``--shards``)
decode     ids -> text, exactly the original bytes for a BPE round trip
count      token counts of files and their total (a ``wc`` for tokens)
show       the text with token boundaries coloured; ``--html FILE`` for a web page
stats      bytes/token, tokens/word, [UNK] rate, token tax; tokenizers side by side
=========  ==========================================================================

Any ``TOKENIZER`` argument is a file (``.tiktoken``, ``tokenizer.json``, ``vocab.txt``,
GPT-2 ``vocab.bpe``) or a built-in name (``gpt2``, ``cl100k_base``, ``o200k_base``),
resolved offline as ``fastbpe.get_encoding`` does.

Errors are one line on stderr and exit code 2, never a traceback.
"""
from __future__ import annotations

import argparse
import os
import sys
import sysconfig
import time
import warnings
from pathlib import Path

#: ``fastbpe demo`` defaults (MB of sources, vocabulary size): small enough to finish in
#: well under a minute on 2 cores with the pure-Python trainer, larger when
#: ``fastbpe.train`` runs on the native trainer (``fastbpe._train``).
DEMO_REFERENCE = (0.5, 640)
DEMO_NATIVE = (3.0, 2048)


def demo_defaults() -> tuple[float, int]:
    import fastbpe.train  # noqa: F401  (imports the native trainer when it is built and used)

    return DEMO_NATIVE if sys.modules.get("fastbpe._train") is not None else DEMO_REFERENCE


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
        if "site-packages" in rel or "dist-packages" in rel or "test" in rel or "tests" in rel:
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
        try:
            return fastbpe.load(spec)
        except ImportError as exc:  # e.g. WordPiece support not installed
            raise CLIError(f"cannot load {spec}: {exc}") from None
    if spec in fastbpe.list_encoding_names():
        try:
            return fastbpe.get_encoding(spec)
        except FileNotFoundError as exc:
            raise CLIError(str(exc).splitlines()[0] + " (set FASTBPE_VOCAB_DIR to the folder that has it)") from None
    raise CLIError(f"tokenizer {spec!r} is neither a file nor one of {fastbpe.list_encoding_names()}")


def tokenizer_name(spec: str, tok) -> str:
    return spec if not os.path.exists(spec) else Path(spec).name


def check_files(files) -> None:
    for f in files:
        if not os.path.exists(f):
            raise CLIError(f"input file not found: {f}")
        if os.path.isdir(f):
            raise CLIError(f"input is a directory, not a file: {f}")


def read_input_text(file: str | None) -> str:
    """A file's text, or stdin's; invalid UTF-8 is an error naming where."""
    if file and file != "-":
        check_files([file])
        data = Path(file).read_bytes()
        where = file
    else:
        data = sys.stdin.buffer.read()
        where = "stdin"
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CLIError(f"{where}: invalid UTF-8 at byte {exc.start}") from None


def _positive(name):
    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {s!r}") from None
        if v < 1:
            raise argparse.ArgumentTypeError(f"{name} must be >= 1, got {v}")
        return v

    return parse


def _is_wordpiece(tok) -> bool:
    from .show import is_wordpiece

    return is_wordpiece(tok)


# --------------------------------------------------------------------------- demo
def cmd_demo(args) -> int:
    """Train on the standard library, save, show a sample, compression and speed."""
    import fastbpe
    from . import show

    max_mb, vocab_size = demo_defaults()
    args.max_mb = max_mb if args.max_mb is None else args.max_mb
    args.vocab_size = vocab_size if args.vocab_size is None else args.vocab_size
    files = stdlib_sources(int(args.max_mb * 1e6))
    n_bytes = sum(f.stat().st_size for f in files)
    print(f"Training a {args.vocab_size}-token BPE (cl100k pattern) on {len(files)} Python standard library "
          f"files ({n_bytes / 1e6:.2f} MB) from {files[0].parent} ...")
    t0 = time.perf_counter()
    enc = fastbpe.train_bpe(files, args.vocab_size, pattern="cl100k", special_tokens=["<|endoftext|>"],
                            progress=not args.quiet, name="stdlib-demo")
    train_s = time.perf_counter() - t0
    out = Path(args.output)
    enc.save(out)
    print(f"Trained in {train_s:.1f} s; saved to {out}")
    merges = [enc.decode_single_token_bytes(i) for i in range(256, min(266, enc.n_vocab - 1))]
    print("First merges learned:", " ".join(repr(m.decode("utf-8", "replace")) for m in merges))

    sample = 'def greet(name):\n    """Say hello."""\n    return f"Hello, {name}!"\n'
    segs = show.segments(enc, sample)
    colour = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    print("\nSample (fastbpe show):")
    print(show.render_ansi(segs) if colour else show.render_plain(segs))
    print(show.summary_line(segs, sample))
    assert enc.decode(enc.encode(sample)) == sample

    # Compression and speed on held-out text: the files after the training slice.
    more = stdlib_sources(int(args.max_mb * 1e6) + 300_000)[len(files):]
    text = "".join(f.read_text(encoding="utf-8") for f in more) or sample * 100
    n = len(text.encode("utf-8"))
    t0 = time.perf_counter()
    ids = enc.encode_ordinary(text)
    enc_s = time.perf_counter() - t0
    print(f"\nHeld-out text ({len(more)} more files, {n / 1e6:.2f} MB):")
    print(f"  fastbpe {enc.name}: {len(ids):,} tokens = {n / len(ids):.2f} bytes/token, "
          f"encoded at {n / 1e6 / enc_s:.2f} MB/s")
    try:
        import tiktoken
    except ImportError:
        print("  (install tiktoken to compare speed with it)")
        return 0
    # tiktoken with the very same vocabulary: same ids expected, speed compared.
    tk = tiktoken.Encoding("stdlib-demo", pat_str=enc.pat_str, mergeable_ranks=enc.mergeable_ranks,
                           special_tokens=enc.special_tokens)
    t0 = time.perf_counter()
    tk_ids = tk.encode_ordinary(text)
    tk_s = time.perf_counter() - t0
    same = "same ids" if tk_ids == ids else "DIFFERENT ids (a bug: please report it)"
    print(f"  tiktoken, same vocabulary: {same}, encoded at {n / 1e6 / tk_s:.2f} MB/s "
          f"(fastbpe/tiktoken speed = {tk_s / enc_s:.2f}x)")
    try:
        cl = fastbpe.get_encoding("cl100k_base")
        print(f"  cl100k_base (100k tokens, trained on far more text): {n / len(cl.encode_ordinary(text)):.2f} bytes/token")
    except (FileNotFoundError, ValueError):
        pass
    return 0


# --------------------------------------------------------------------------- train
def cmd_train(args) -> int:
    check_files(args.files)
    # files, or stdin's lines as documents: the API never guesses which (fastbpe._data)
    data = {"files": [str(f) for f in args.files]} if args.files else {"documents": sys.stdin}
    if args.model == "wordpiece":
        try:
            from .wordpiece import train_wordpiece
        except ImportError:
            raise CLIError("WordPiece training is not available in this build of fastbpe") from None
        if args.pattern != "cl100k":
            raise CLIError("--pattern applies to BPE only (WordPiece splits words as BERT does)")
        kwargs = {"lowercase": not args.cased, "progress": not args.quiet}
        if args.special:
            kwargs["special_tokens"] = args.special
        if args.min_frequency:
            kwargs["min_frequency"] = args.min_frequency
        tok = train_wordpiece(vocab_size=args.vocab_size, **data, **kwargs)
        fmt = {"hf": "tokenizer.json", "tokenizer.json": "tokenizer.json", "vocab.txt": "vocab.txt", None: None}.get(args.format)
        if fmt is None and args.format is not None:
            raise CLIError(f"--format {args.format} is for BPE; WordPiece saves as vocab.txt or tokenizer.json")
        tok.save(args.output, format=fmt)
        print(f"saved a {len(tok)}-token WordPiece to {args.output}", file=sys.stderr)
        return 0
    import fastbpe

    if args.cased:
        raise CLIError("--cased applies to WordPiece only (byte-level BPE never changes the text)")
    fmt = {"tokenizer.json": "hf", "vocab.txt": None}.get(args.format, args.format)
    if args.format == "vocab.txt":
        raise CLIError("--format vocab.txt is for WordPiece; BPE saves as tiktoken, tokenizer.json (hf) or gpt2")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        enc = fastbpe.train_bpe(vocab_size=args.vocab_size, **data, pattern=args.pattern, special_tokens=args.special or [],
                                min_frequency=args.min_frequency, num_threads=args.threads, progress=not args.quiet)
        enc.save(args.output, format=fmt)
    for w in caught:  # one line each, no source location
        print(f"fastbpe train: warning: {w.message}", file=sys.stderr)
    print(f"saved a {enc.n_vocab}-token BPE to {args.output}", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- encode / decode
def cmd_encode(args) -> int:
    tok = load_tokenizer(args.tokenizer)
    if args.shards:
        return _encode_shards(args, tok)
    for opt in ("jsonl_field", "doc_sep_lines"):
        if getattr(args, opt):
            raise CLIError(f"--{opt.replace('_', '-')} applies to --shards only")
    if len(args.files) > 1:
        raise CLIError("give one FILE (or none for stdin); use --shards DIR to encode many files")
    text = read_input_text(args.files[0] if args.files else None)
    if _is_wordpiece(tok):
        ids = tok.encode(text, add_special_tokens=not args.no_special)
    elif args.no_special:
        ids = tok.encode_ordinary(text)
    else:
        ids = tok.encode(text, allowed_special="all")
    sys.stdout.write(" ".join(map(str, ids)) + "\n")
    return 0


def _encode_shards(args, tok) -> int:
    from . import shards

    if not args.files:
        raise CLIError("--shards needs input FILEs (each file is one document unless --jsonl-field or --doc-sep-lines)")
    check_files(args.files)
    total = sum(os.path.getsize(f) for f in args.files)
    docs = shards.iter_documents(args.files, jsonl_field=args.jsonl_field, doc_sep_lines=args.doc_sep_lines)
    summary = shards.write_shards(
        tok, docs, args.shards, fmt=args.format, dtype=args.dtype, shard_tokens=args.shard_tokens,
        eot_token=args.eot, num_threads=args.threads, progress=not args.quiet,
        total_bytes=None if args.jsonl_field else total,
    )
    print(f"wrote {args.shards}: {summary.line()}")
    return 0


def cmd_decode(args) -> int:
    tok = load_tokenizer(args.tokenizer)
    raw = read_input_text(args.file)
    try:
        ids = [int(x) for x in raw.split()]
    except ValueError as exc:
        raise CLIError(f"ids must be whitespace-separated integers: {exc}") from None
    if _is_wordpiece(tok):
        data = tok.decode(ids).encode("utf-8")
    else:
        data = tok.decode_bytes(ids)
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
    return 0


# --------------------------------------------------------------------------- count / show / stats
def cmd_count(args) -> int:
    from . import stats

    tok = load_tokenizer(args.tokenizer)
    if not args.files:
        text = read_input_text(None)
        print(len(stats.count_tokens(tok, text)))
        return 0
    check_files(args.files)
    # Files are encoded whole (exact counts), in parallel batches of up to ~64 MB of text
    # so that a long list of big files is never all in memory at once.
    counts: list[int] = []
    batch: list[str] = []
    size = 0
    for f in args.files:
        batch.append(stats.read_text(f))
        size += len(batch[-1])
        if size >= 64 << 20:
            counts += stats.count_tokens_batch(tok, batch, num_threads=args.threads)
            batch, size = [], 0
    if batch:
        counts += stats.count_tokens_batch(tok, batch, num_threads=args.threads)
    width = max(len(f"{c:,}") for c in [*counts, sum(counts)])
    for f, c in zip(args.files, counts):
        print(f"{c:>{width},}  {f}")
    if len(args.files) > 1:
        print(f"{sum(counts):>{width},}  total")
    return 0


def cmd_show(args) -> int:
    from . import show

    tok = load_tokenizer(args.tokenizer)
    if args.text is not None and args.files:
        raise CLIError("give --text or FILE, not both")
    if len(args.files) > 1:
        raise CLIError("show takes one FILE (or --text, or stdin)")
    text = args.text if args.text is not None else read_input_text(args.files[0] if args.files else None)
    segs = show.segments(tok, text)
    summary = f"{tokenizer_name(args.tokenizer, tok)}: " + show.summary_line(segs, text)
    if args.html:
        title = f"{tokenizer_name(args.tokenizer, tok)} tokens" + (f" of {Path(args.files[0]).name}" if args.files else "")
        page = show.render_html(segs, title=title, summary=summary, ids=True)
        Path(args.html).write_text(page, encoding="utf-8")
        print(f"wrote {args.html} ({summary})", file=sys.stderr)
        return 0
    colour = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    body = show.render_ansi(segs, ids=args.ids) if colour else show.render_plain(segs, ids=args.ids)
    sys.stdout.write(body + "\n")
    if not args.quiet:
        sys.stdout.write(summary + "\n")
    return 0


def cmd_stats(args) -> int:
    from . import stats

    if not args.files and not args.parallel:
        raise CLIError("give --files F... and/or --parallel EN_FILE OTHER_FILE...")
    if args.parallel and len(args.parallel) < 2:
        raise CLIError("--parallel needs the English file first and at least one translation")
    check_files(list(args.files or []) + list(args.parallel or []))
    toks: dict[str, object] = {}
    for spec in args.tokenizers:
        name = tokenizer_name(spec, None)
        if name in toks:
            name = spec
        toks[name] = load_tokenizer(spec)
    names = list(toks)
    files = list(dict.fromkeys(list(args.files or []) + list(args.parallel or [])))
    table = stats.file_stats(toks, files)
    print(stats.format_stats(table, names))
    tax = None
    if args.parallel:
        tax = stats.token_tax(table, args.parallel)
        print()
        print(stats.format_tax(tax, names, args.parallel))
    if args.plot:
        try:
            written = stats.save_plots(table, names, args.plot, tax=tax, tax_files=args.parallel)
        except RuntimeError as exc:
            raise CLIError(str(exc)) from None
        print(f"\nsaved {', '.join(str(p) for p in written)}", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- parser
class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (plus where to find help), exit code 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fastbpe", description="Exact, fast BPE and WordPiece tokenizers.")
    from . import __version__

    p.add_argument("--version", action="version", version=f"fastbpe {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    tok_help = "a tokenizer file or gpt2 / cl100k_base / o200k_base"

    d = sub.add_parser("demo", help="train on the Python standard library and show the result")
    d.add_argument("--vocab-size", type=_positive("--vocab-size"), default=None,
                   help=f"default {DEMO_REFERENCE[1]} ({DEMO_NATIVE[1]} with the native trainer)")
    d.add_argument("--max-mb", type=float, default=None,
                   help=f"MB of standard library sources to train on; default {DEMO_REFERENCE[0]} "
                        f"({DEMO_NATIVE[0]} with the native trainer)")
    d.add_argument("-o", "--output", default="stdlib-demo.tokenizer.json")
    d.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    d.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    d.set_defaults(func=cmd_demo)

    t = sub.add_parser("train", help="train BPE or WordPiece from files (or stdin lines)")
    t.add_argument("files", nargs="*", metavar="FILE", help="text files (.gz too); each line is a document")
    t.add_argument("--model", choices=["bpe", "wordpiece"], default="bpe")
    t.add_argument("--vocab-size", type=_positive("--vocab-size"), required=True)
    t.add_argument("--pattern", default="cl100k", help="BPE split pattern: gpt2, cl100k, o200k or a regex")
    t.add_argument("--special", action="append", metavar="TOKEN", help="a special token (repeatable)")
    t.add_argument("--min-frequency", type=int, default=0)
    t.add_argument("--cased", action="store_true", help="WordPiece: keep case and accents")
    t.add_argument("--threads", type=_positive("--threads"), default=None)
    t.add_argument("-o", "--output", required=True, help=".tiktoken, .json (tokenizer.json) or vocab .txt")
    t.add_argument("--format", choices=["tiktoken", "hf", "tokenizer.json", "gpt2", "vocab.txt"], default=None,
                   help="default: from the output's extension")
    t.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    t.set_defaults(func=cmd_train)

    e = sub.add_parser("encode", help="text to ids (stdin when no FILE), or files to token shards")
    e.add_argument("files", nargs="*", metavar="FILE")
    e.add_argument("--tokenizer", "-t", required=True, help=tok_help)
    e.add_argument("--no-special", action="store_true",
                   help="special-token text is ordinary text (BPE); no [CLS]/[SEP] (WordPiece)")
    g = e.add_argument_group("token shards")
    g.add_argument("--shards", metavar="DIR", help="write shards of ids to DIR instead of printing ids")
    g.add_argument("--format", choices=["npy", "bin"], default="npy")
    g.add_argument("--dtype", choices=["uint16", "uint32"], default="uint16")
    g.add_argument("--shard-tokens", type=_positive("--shard-tokens"), default=100_000_000)
    g.add_argument("--jsonl-field", metavar="NAME", help="each JSON line's field NAME is a document")
    g.add_argument("--doc-sep-lines", action="store_true", help="each line is a document")
    g.add_argument("--eot", metavar="TOKEN", help="separator between documents (default <|endoftext|>, [SEP])")
    g.add_argument("--threads", type=_positive("--threads"), default=min(8, os.cpu_count() or 1))
    g.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    e.set_defaults(func=cmd_encode)

    de = sub.add_parser("decode", help="ids to text (stdin when no FILE)")
    de.add_argument("file", nargs="?", metavar="FILE")
    de.add_argument("--tokenizer", "-t", required=True, help=tok_help)
    de.set_defaults(func=cmd_decode)

    c = sub.add_parser("count", help="token counts of files and their total")
    c.add_argument("files", nargs="*", metavar="FILE")
    c.add_argument("--tokenizer", "-t", default="cl100k_base", help=tok_help + " (default cl100k_base)")
    c.add_argument("--threads", type=_positive("--threads"), default=min(8, os.cpu_count() or 1))
    c.set_defaults(func=cmd_count)

    s = sub.add_parser("show", help="the text with token boundaries coloured (or as an HTML page)")
    s.add_argument("files", nargs="*", metavar="FILE")
    s.add_argument("--tokenizer", "-t", default="cl100k_base", help=tok_help + " (default cl100k_base)")
    s.add_argument("--text", help="show this text instead of a file or stdin")
    s.add_argument("--ids", action="store_true", help="print the ids too")
    s.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                   help="auto: colours only when stdout is a terminal")
    s.add_argument("--html", metavar="FILE", help="write a self-contained HTML page instead")
    s.add_argument("-q", "--quiet", action="store_true", help="no summary line")
    s.set_defaults(func=cmd_show)

    st = sub.add_parser("stats", help="bytes/token, tokens/word, [UNK] rate and token tax, side by side")
    st.add_argument("tokenizers", nargs="+", metavar="TOKENIZER", help=tok_help)
    st.add_argument("--files", nargs="+", metavar="F")
    st.add_argument("--parallel", nargs="+", metavar="F", help="parallel text, English first: the token tax")
    st.add_argument("--plot", metavar="DIR", help="save PNG charts to DIR (needs matplotlib)")
    st.set_defaults(func=cmd_stats)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            return args.func(args)
    except BrokenPipeError:  # `fastbpe show big.txt | head`: not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's final flush must not fail again
        return 0
    except (CLIError, FileNotFoundError, ValueError, KeyError, TypeError, OSError, RuntimeError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        msg = str(msg).splitlines()[0] if str(msg) else type(exc).__name__
        print(f"fastbpe {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"fastbpe {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
