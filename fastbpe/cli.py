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
bench      fastbpe against every installed peer on your files, ids checked first
           (``fastbpe.bench``)
audit      what a vocabulary holds that text never reaches (``fastbpe.audit``)
view       a local web page: type text, see it tokenized side by side (``fastbpe.view``)
=========  ==========================================================================

Any ``TOKENIZER`` argument is a file (``.tiktoken``, ``tokenizer.json``, ``vocab.txt``,
GPT-2 ``vocab.bpe``), a model folder (``tokenizer.json`` + ``tokenizer_config.json``), a
built-in name (``gpt2``, ``cl100k_base``, ``o200k_base``, resolved offline as
``fastbpe.get_encoding`` does) or a model name in the Hugging Face cache
(``org/name``, as ``fastbpe.from_pretrained`` resolves it).

Errors are one line on stderr and exit code 2, never a traceback.

Decisions, each made once here for every command:

- **Special-token text** (``<|endoftext|>`` typed in the input) follows the library's
  rule (``fastbpe.special``): ``encode``, ``count``, ``show``, ``stats`` and ``encode
  --shards`` refuse it with an error naming the token, the file and the position (line
  and column of a text read whole; a streamed file's block and the document's character), unless
  ``--allow-special TOKEN`` (repeatable, or ``all``) makes it its id or
  ``--special-as-text`` encodes it as ordinary text. So all commands count the same
  ids. The separator that ``--shards`` puts between documents is the writer's, never
  the text's (``fastbpe.shards``).
- **The terminal never receives raw control characters** from a file or a vocabulary:
  every command escapes them (``\\x1b``, ``\\u202e``) in what it prints, as
  ``fastbpe.show`` defines. ``decode`` prints the exact bytes into a pipe or a file (its
  job), and escapes only when stdout is a terminal, unless ``--raw``.
- **Input files** may be ``.gz``; invalid UTF-8 is an error naming the file and byte,
  unless ``--errors replace`` (U+FFFD).
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import shlex
import sys
import sysconfig
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

#: ``fastbpe demo`` defaults (MB of sources, vocabulary size): small enough to finish in
#: well under a minute on 2 cores with the pure-Python trainer, larger when
#: ``fastbpe.trainers.bpe`` runs on the native trainer (``fastbpe._train``).
DEMO_REFERENCE = (0.5, 640)
DEMO_NATIVE = (3.0, 2048)


def demo_defaults() -> tuple[float, int]:
    import fastbpe.trainers.bpe  # noqa: F401  (imports the native trainer when it is built and used)

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
    """A file or model folder, a built-in name resolved offline as ``get_encoding`` does,
    or a model name in the Hugging Face cache (``fastbpe.from_pretrained``)."""
    import fastbpe

    if os.path.exists(spec):
        try:
            return fastbpe.from_pretrained(spec) if os.path.isdir(spec) else fastbpe.load(spec)
        except ImportError as exc:  # e.g. WordPiece support not installed
            raise CLIError(f"cannot load {spec}: {exc}") from None
    if spec in fastbpe.list_encoding_names():
        try:
            return fastbpe.get_encoding(spec)
        except FileNotFoundError as exc:
            raise CLIError(str(exc).splitlines()[0] + " (set FASTBPE_VOCAB_DIR to the folder that has it)") from None
    from .pretrained import from_pretrained

    try:  # a model name in the Hugging Face cache (or downloaded, when allowed)
        return from_pretrained(spec)
    except FileNotFoundError as exc:
        raise CLIError(f"tokenizer {spec!r} is neither a file nor a folder, nor one of "
                       f"{fastbpe.list_encoding_names()}, nor a model found: {exc}") from None


def tokenizer_name(spec: str, tok) -> str:
    return spec if not os.path.exists(spec) else Path(spec).name


def check_files(files) -> None:
    for f in files:
        if not os.path.exists(f):
            raise CLIError(f"input file not found: {f}")
        if os.path.isdir(f):
            raise CLIError(f"input is a directory, not a file: {f}")


def read_input_text(file: str | None, errors: str = "strict") -> str:
    """A (small) file's whole text, decompressed, or stdin's; invalid UTF-8 is an error
    naming where."""
    if file and file != "-":
        check_files([file])
        from .stats import read_text

        return read_text(file, errors)
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as exc:
        raise ValueError(f"stdin: not valid UTF-8 at byte offset {exc.start} ({exc.reason}); "
                         "pass --errors replace to replace invalid bytes") from None


def cli_message(message: str, keep: str = "") -> str:
    """A library message as the command line says it: ``errors='replace'`` is the
    ``--errors replace`` flag here; hidden characters but ``keep`` escaped
    (``show.terminal_safe``).

    >>> cli_message("a.txt: not valid UTF-8; pass errors='replace' to replace invalid bytes")
    'a.txt: not valid UTF-8; pass --errors replace to replace invalid bytes'
    >>> cli_message("input file not found: 'x' (to pass text, use documents=[...])")
    "input file not found: 'x'"
    >>> cli_message("field='body' applies to JSON Lines files; for text files choose a rule with docs=")
    '--field body applies to JSON Lines files; for text files choose a rule with --docs'
    >>> cli_message("vocab_size must be <= 2147483647, got 1000000000000")
    '--vocab-size must be <= 2147483647, got 1000000000000'
    """
    from .show import terminal_safe

    # documents=[...] is the library's way to pass text; a command has no such argument
    message = message.replace(" (to pass text, use documents=[...])", "")
    message = re.sub(r"(?<![\w-])(docs|field|column)=(?:'([^'\\]*)'|([a-z][\w:-]*))?", _flag, message)
    message = re.sub(r"(?<![\w-])(vocab_size|min_frequency|num_threads)\b", lambda m: _FLAGS[m[1]], message)
    return terminal_safe(message.replace("errors='replace'", "--errors replace"), keep=keep)


#: The library's integer arguments that are flags of the commands.
_FLAGS = {"vocab_size": "--vocab-size", "min_frequency": "--min-frequency", "num_threads": "--threads"}


def _flag(m) -> str:
    """``docs=`` / ``field='x'`` (fastbpe.io's arguments) as the flags ``--docs`` / ``--field x``."""
    value = m[2] if m[2] is not None else m[3]
    return f"--{m[1]}" + (f" {shlex.quote(value)}" if value is not None else "")


def _positive(name, kind=int):
    """An argparse type: an int >= 1, or (``kind=float``) a finite number > 0."""
    what, least = ("an integer", ">= 1") if kind is int else ("a number", "a number > 0")

    def parse(s: str):
        try:
            v = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be {what}, got {s!r}") from None
        if not (math.isfinite(v) and v > 0):
            raise argparse.ArgumentTypeError(f"{name} must be {least}, got {s}")
        return v

    return parse


def _is_wordpiece(tok) -> bool:
    from .show import is_wordpiece

    return is_wordpiece(tok)


def _special_names(tok) -> frozenset[str]:
    return frozenset(tok.special_tokens if _is_wordpiece(tok) else tok.special_tokens_set)


def _line_column(text: str, pos: int) -> str:
    line_start = text.rfind("\n", 0, pos) + 1
    line = text.count("\n", 0, pos) + 1
    return f"line {line}, column {pos - line_start + 1}"


@dataclass(frozen=True)
class SpecialRule:
    """What special-token text in the input becomes (see the module docstring): the
    library's ``allowed_special`` / ``disallowed_special``, from the flags."""

    allowed_special: frozenset[str] | str = frozenset()
    disallowed_special: str | tuple = "all"

    @classmethod
    def from_args(cls, args, toks) -> SpecialRule:
        names = args.allow_special or []
        if "all" in names:
            allowed = "all"
        else:
            # tiktoken ignores names that are not special tokens; a command line more
            # likely has a typo, so a name no tokenizer knows is an error
            allowed = frozenset(names)
            known = frozenset().union(*map(_special_names, toks))
            unknown = sorted(allowed - known)
            if unknown:
                raise CLIError(f"--allow-special {unknown[0]!r}: not a special token here "
                               f"(the tokenizer has {sorted(known) or 'none'})")
        as_text = args.special_as_text or getattr(args, "no_special", False)
        return cls(allowed, () if as_text else "all")

    def kwargs(self) -> dict:
        return {"allowed_special": self.allowed_special, "disallowed_special": self.disallowed_special}

    def refuse(self, tok, where: str, text: str, line: int | None = None) -> None:
        """The one-line error if ``text`` holds special-token text the rule refuses
        (``line``: the text is that line of ``where``)."""
        from .special import find_disallowed, resolve_special_sets

        disallowed = resolve_special_sets(self.allowed_special, self.disallowed_special, _special_names(tok))[1]
        found = find_disallowed(text, disallowed)
        if found is None:
            return
        token, pos = found
        at = _line_column(text, pos) if line is None else f"line {line}, column {pos + 1}"
        raise CLIError(f"{where}, {at}: special-token text {token!r}; pass --allow-special {shlex.quote(token)} "
                       f"to encode it as its id, or --special-as-text to encode it as ordinary text")

    @contextlib.contextmanager
    def guard(self, tok, items: list[tuple[str, str]]):
        """Run a library call on ``items`` (``(where, text)``) under the rule; a refusal
        becomes ``refuse``'s error naming the file and position."""
        try:
            yield
        except ValueError:
            for where, text in items:
                self.refuse(tok, where, text)
            raise


@contextlib.contextmanager
def corpus_special_guard():
    """A streamed corpus's refusal (``corpus.DisallowedSpecialInDocument``, which names the
    file and where) as the CLI's one-line error with the flags to pass."""
    from .corpus import DisallowedSpecialInDocument

    try:
        yield
    except DisallowedSpecialInDocument as exc:
        raise CLIError(f"{exc.where}, character {exc.position + 1}: special-token text {exc.token!r}; pass "
                       f"--allow-special {shlex.quote(exc.token)} to encode it as its id, or --special-as-text "
                       "to encode it as ordinary text") from None


def add_corpus_flags(parser) -> None:
    g = parser.add_argument_group(
        "documents",
        "What a document is (fastbpe.reference.documents): a text file is one document unless --docs "
        "says otherwise; .jsonl(.gz/.zst/.xz) files hold one per line in --field; .parquet files in "
        "--column. Files may be gzip/zstd/xz-compressed, directories stand for their files, fsspec "
        "URLs work when fsspec is installed.")
    g.add_argument("--docs", metavar="RULE", default=None,
                   help="text files: file (default), lines, blank-line, or sep:STR (e.g. sep:'<|endoftext|>')")
    g.add_argument("--field", metavar="NAME", default=None, help="JSON Lines: the field holding the text (default text)")
    g.add_argument("--column", metavar="NAME", default=None, help="Parquet: the column holding the text (default text)")


def corpus_of(args, files=None):
    """The ``fastbpe.io.Corpus`` of the command's files and document flags."""
    from .io import Corpus

    files = args.files if files is None else files
    return Corpus.resolve([str(f) for f in files], docs=args.docs, field=args.field, column=args.column)


def add_special_flags(parser) -> None:
    g = parser.add_argument_group(
        "special-token text",
        "Text such as <|endoftext|> in the input is refused by default, as the library refuses it: "
        "text must not become a control id unless you ask.")
    g.add_argument("--allow-special", action="append", metavar="TOKEN",
                   help="encode this special token's text as its id (repeatable; 'all': every special token)")
    g.add_argument("--special-as-text", action="store_true",
                   help="encode special-token text that is not allowed as ordinary text")


def add_errors_flag(parser) -> None:
    parser.add_argument("--errors", choices=["strict", "replace"], default="strict",
                        help="invalid UTF-8 in the input: strict = an error naming the file and byte "
                             "(default), replace = U+FFFD")


def _close_progress_bars() -> None:
    """Close the progress bars an interrupted or failed command left open, so the error
    starts on its own line and no bar is redrawn after it."""
    tqdm_std = sys.modules.get("tqdm.std")
    if tqdm_std is None:
        return
    for bar in list(getattr(tqdm_std.tqdm, "_instances", ())):
        with contextlib.suppress(Exception):
            bar.close()


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
def _output_format(args) -> str:
    """The format ``-o`` will be saved in, decided before training (a name train cannot
    write fails now, not after an hour of training)."""
    out = Path(args.output)
    if not out.parent.is_dir():
        raise CLIError(f"-o {args.output}: the folder {out.parent} does not exist")
    if args.model == "wordpiece":
        fmt = {"hf": "tokenizer.json", "tokenizer.json": "tokenizer.json", "vocab.txt": "vocab.txt"}.get(args.format)
        if args.format is not None and fmt is None:
            raise CLIError(f"--format {args.format} is for BPE; WordPiece saves as vocab.txt or tokenizer.json")
        fmt = fmt or {".txt": "vocab.txt", ".json": "tokenizer.json"}.get(out.suffix.lower())
        if fmt is None:
            raise CLIError(f"-o {args.output}: a WordPiece saves as vocab.txt (.txt) or tokenizer.json (.json); "
                           "use one of those names or pass --format")
        return fmt
    from .formats import _format_from_path

    if args.format == "vocab.txt":
        raise CLIError("--format vocab.txt is for WordPiece; BPE saves as tiktoken, tokenizer.json (hf) or gpt2")
    fmt = {"tokenizer.json": "hf"}.get(args.format, args.format)
    if fmt is None:
        try:
            fmt = _format_from_path(out)
        except ValueError:
            raise CLIError(f"-o {args.output}: cannot tell the format from the name; use a .tiktoken, .json or "
                           "vocab.bpe name, or pass --format tiktoken | hf | gpt2") from None
    if fmt == "vocab.txt":
        raise CLIError(f"-o {args.output}: a .txt name is a WordPiece vocab.txt; BPE saves as .tiktoken, "
                       ".json or vocab.bpe (or pass --format)")
    return fmt


def _training_data(args) -> dict:
    """The corpus of the files (and document flags), or ``documents=`` from stdin (one
    document per line): the API never guesses which (``fastbpe.io``)."""
    if not args.files:
        if args.docs or args.field or args.column:
            raise CLIError("--docs/--field/--column apply to FILEs; stdin is read one document per line")
        return {"documents": _stdin_lines(args.errors)}
    return {"files": corpus_of(args)}


def _stdin_lines(errors: str):
    """stdin's lines (without their newline; empty ones dropped), decoded as they come."""
    for n, raw in enumerate(sys.stdin.buffer, 1):
        try:
            line = raw.decode("utf-8", errors=errors)
        except UnicodeDecodeError as exc:
            raise ValueError(f"stdin, line {n}: not valid UTF-8 at column {exc.start + 1}; "
                             "pass --errors replace to replace invalid bytes") from None
        line = line[:-1] if line.endswith("\n") else line
        if line:
            yield line


def cmd_train(args) -> int:
    data = _training_data(args)
    if args.model == "wordpiece":
        try:
            from .trainers.wordpiece import train_wordpiece
        except ImportError:
            raise CLIError("WordPiece training is not available in this build of fastbpe") from None
        if args.pattern != "cl100k":
            raise CLIError("--pattern applies to BPE only (WordPiece splits words as BERT does)")
        fmt = _output_format(args)
        kwargs = {"lowercase": not args.cased, "progress": not args.quiet, "errors": args.errors}
        if args.special:
            kwargs["special_tokens"] = args.special
        if args.min_frequency:
            kwargs["min_frequency"] = args.min_frequency
        tok = train_wordpiece(vocab_size=args.vocab_size, **data, **kwargs)
        tok.save(args.output, format=fmt)
        print(f"saved a {len(tok)}-token WordPiece to {cli_message(args.output)}", file=sys.stderr)
        return 0
    import fastbpe

    if args.cased:
        raise CLIError("--cased applies to WordPiece only (byte-level BPE never changes the text)")
    fmt = _output_format(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        enc = fastbpe.train_bpe(vocab_size=args.vocab_size, **data, pattern=args.pattern,
                                special_tokens=args.special or [], min_frequency=args.min_frequency,
                                num_threads=args.threads, progress=not args.quiet, errors=args.errors)
        enc.save(args.output, format=fmt)
    for w in caught:  # one line each, no source location
        print(f"fastbpe train: warning: {cli_message(str(w.message))}", file=sys.stderr)
    print(f"saved a {enc.n_vocab}-token BPE to {cli_message(args.output)}", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- encode / decode
def cmd_encode(args) -> int:
    tok = load_tokenizer(args.tokenizer)
    rule = SpecialRule.from_args(args, [tok])
    if args.shards:
        return _encode_shards(args, tok, rule)
    if len(args.files) > 1:
        raise CLIError("give one FILE (or none for stdin); use --shards DIR to encode many files")
    if args.files and not _is_wordpiece(tok):
        return _encode_streamed(args, tok, rule)
    if args.docs or args.field or args.column:
        raise CLIError("--docs/--field/--column apply to a BPE tokenizer's FILE or to --shards")
    where = args.files[0] if args.files else "stdin"
    text = read_input_text(args.files[0] if args.files else None, args.errors)
    with rule.guard(tok, [(where, text)]):
        if _is_wordpiece(tok):
            ids = tok.encode(text, add_special_tokens=not args.no_special, **rule.kwargs())
        else:
            ids = tok.encode(text, **rule.kwargs())
    sys.stdout.write(" ".join(map(str, ids)) + "\n")
    return 0


def _encode_streamed(args, tok, rule: SpecialRule) -> int:
    """A BPE FILE's ids, one line per document, written as its blocks are encoded (a
    file bigger than memory prints as it goes)."""
    from .corpus import block_ids, cutter

    out = sys.stdout
    corpus = corpus_of(args)
    with corpus_special_guard():
        for block in corpus.blocks(cut=cutter(tok), errors=args.errors):
            ids, offsets = block_ids(tok, block, args.threads, **rule.kwargs())
            ids = ids.tolist()
            for k in range(len(block)):
                part = " ".join(map(str, ids[offsets[k]:offsets[k + 1]]))
                last = k == len(block) - 1 and block.last_open
                out.write(part + (" " if last and part else "" if last else "\n"))
    return 0


def _encode_shards(args, tok, rule: SpecialRule) -> int:
    """The corpus's documents to token shards (``fastbpe.shards``: the format
    ``fastbpe.encode_files`` and Dask write too)."""
    import time

    from . import shards
    from .distributed import plan_tasks

    if not args.files:
        raise CLIError("--shards needs input FILEs (a text file is one document unless --docs says otherwise)")
    if args.no_eot and args.eot is not None:
        raise CLIError("give --eot TOKEN or --no-eot, not both")
    eot = None if args.no_eot else (args.eot if args.eot is not None else shards.DEFAULT)
    try:  # before any work, and in the flags' words (the library's message says eot=)
        shards.resolve_eot(tok, eot)
    except ValueError:
        name = args.eot if args.eot is not None else "[SEP]" if _is_wordpiece(tok) else "<|endoftext|>"
        if _is_wordpiece(tok):  # any token of a WordPiece vocabulary may be the EOT
            raise CLIError(f"the vocabulary has no token {name!r} to put after every document; pass --eot TOKEN "
                           "(a token of the vocabulary), or --no-eot for none") from None
        has = sorted(_special_names(tok)) or "none"
        raise CLIError(f"the tokenizer has no special token {name!r} to put after every document (it has {has}); "
                       "pass --eot TOKEN naming one of them, or --no-eot for none") from None
    tasks = plan_tasks([str(f) for f in args.files], 1, docs=args.docs, field=args.field, column=args.column)
    t0 = time.perf_counter()
    bar = None
    if not args.quiet:  # write_shards' bar, but kept after a run and erased before an error line
        from tqdm.auto import tqdm

        bar = tqdm(total=shards._total_bytes(tasks), unit="B", unit_scale=True, unit_divisor=1000,
                   desc="shards", file=sys.stderr)
    try:
        with corpus_special_guard():
            m = shards.write_shards(tok, tasks, args.shards, dtype=args.dtype, eot=eot, errors=args.errors,
                                    num_threads=args.threads, progress=bar if bar is not None else False,
                                    document_rule={"docs": args.docs, "field": args.field, "column": args.column},
                                    **rule.kwargs())
    except BaseException:
        if bar is not None:
            bar.leave = False
        raise
    finally:
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - t0
    print(f"wrote {cli_message(args.shards)}: {m['documents']:,} documents, {m['tokens']:,} tokens in "
          f"{len(m['shards'])} shard(s) ({m['dtype']}), {m['bytes']:,} bytes, {seconds:.2f} s "
          f"({m['bytes'] / 1e6 / max(seconds, 1e-9):.2f} MB/s)")
    return 0


def _decode_bytes(tok, ids: list[int]) -> bytes:
    """The bytes of ``ids``; an id outside the vocabulary is a one-line error naming it."""
    wordpiece = _is_wordpiece(tok)
    try:
        return tok.decode(ids).encode("utf-8") if wordpiece else tok.decode_bytes(ids)
    except (KeyError, OverflowError, ValueError):
        pass
    one = tok.id_to_token if wordpiece else tok.decode_single_token_bytes
    for i in ids:  # outside the except: no chained error
        try:
            one(i)
        except (KeyError, OverflowError, ValueError):
            raise CLIError(f"unknown token id {i} (vocabulary has {len(tok) if wordpiece else tok.n_vocab})") from None
    raise CLIError("cannot decode these ids")


def cmd_decode(args) -> int:
    from .show import terminal_safe

    tok = load_tokenizer(args.tokenizer)
    raw = read_input_text(args.file)
    try:
        ids = [int(x) for x in raw.split()]
    except ValueError as exc:
        raise CLIError(f"ids must be whitespace-separated integers: {exc}") from None
    data = _decode_bytes(tok, ids)
    if sys.stdout.isatty() and not args.raw:
        # a terminal acts on control characters: show them escaped (module docstring)
        sys.stdout.write(terminal_safe(data.decode("utf-8", errors="backslashreplace")))
    else:
        sys.stdout.buffer.write(data)
    sys.stdout.flush()
    return 0


# --------------------------------------------------------------------------- count / show / stats
def cmd_count(args) -> int:
    from . import stats

    tok = load_tokenizer(args.tokenizer)
    rule = SpecialRule.from_args(args, [tok])
    if not args.files:
        text = read_input_text(None, args.errors)
        with rule.guard(tok, [("stdin", text)]):
            print(len(stats.count_tokens(tok, text, **rule.kwargs())))
        return 0
    # each file streamed in blocks (bounded memory), long documents in exact pieces
    from .corpus import count_corpus

    counts: list[int] = []
    names = [str(f) for f in args.files]
    with corpus_special_guard(), _bar(args, corpus_of(args)) as bar:
        for f in names:
            c = count_corpus(tok, corpus_of(args, [f]), num_threads=args.threads, errors=args.errors,
                             progress=bar, **rule.kwargs())
            counts.append(c["tokens"])
    width = max(len(f"{c:,}") for c in [*counts, sum(counts)])
    for f, c in zip(names, counts):
        print(f"{c:>{width},}  {cli_message(f)}")
    if len(names) > 1:
        print(f"{sum(counts):>{width},}  total")
    return 0


@contextlib.contextmanager
def _bar(args, corpus, desc: str = "reading"):
    """A bytes progress bar (MB/s, ETA) over the corpus's stored size, or None (-q)."""
    if getattr(args, "quiet", False):
        yield None
        return
    from tqdm.auto import tqdm

    bar = tqdm(total=corpus.total_bytes(), unit="B", unit_scale=True, desc=desc, file=sys.stderr,
               leave=False)
    try:
        yield bar
    finally:
        bar.close()


def _argv_text(text: str, errors: str) -> str:
    """``--text`` as typed: bytes that were not UTF-8 reach Python as lone surrogates."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError as exc:
        if errors == "replace":
            return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        raise CLIError(f"--text: not valid UTF-8 at character {exc.start}; pass --errors replace "
                       "to replace invalid bytes") from None


def cmd_show(args) -> int:
    from . import show

    tok = load_tokenizer(args.tokenizer)
    rule = SpecialRule.from_args(args, [tok])
    if args.text is not None and args.files:
        raise CLIError("give --text or FILE, not both")
    if len(args.files) > 1:
        raise CLIError("show takes one FILE (or --text, or stdin)")
    text = _argv_text(args.text, args.errors) if args.text is not None else read_input_text(
        args.files[0] if args.files else None, args.errors)
    where = "--text" if args.text is not None else args.files[0] if args.files else "stdin"
    with rule.guard(tok, [(where, text)]):
        segs = show.segments(tok, text, **rule.kwargs())
    name = tokenizer_name(args.tokenizer, tok)
    summary = f"{name}: " + show.summary_line(segs, text)
    if args.html:
        title = f"{name} tokens" + (f" of {Path(args.files[0]).name}" if args.files else "")
        page = show.render_html(segs, title=title, summary=summary, ids=True)
        Path(args.html).write_text(page, encoding="utf-8")
        print(f"wrote {cli_message(args.html)} ({cli_message(summary)})", file=sys.stderr)
        return 0
    colour = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    body = show.render_ansi(segs, ids=args.ids) if colour else show.render_plain(segs, ids=args.ids)
    sys.stdout.write(body + "\n")
    if not args.quiet:
        sys.stdout.write(cli_message(summary) + "\n")
    return 0


def cmd_stats(args) -> int:
    from . import stats

    if not args.files and not args.parallel:
        raise CLIError("give --files F... and/or --parallel EN_FILE OTHER_FILE...")
    if args.parallel and len(args.parallel) < 2:
        raise CLIError("--parallel needs the English file first and at least one translation")
    toks: dict[str, object] = {}
    for spec in args.tokenizers:
        name = tokenizer_name(spec, None)
        if name in toks:
            name = spec
        toks[name] = load_tokenizer(spec)
    rule = SpecialRule.from_args(args, toks.values())
    names = list(toks)
    files = list(dict.fromkeys(list(args.files or []) + list(args.parallel or [])))
    with corpus_special_guard():
        table = stats.file_stats(toks, files, errors=args.errors, docs=args.docs, field=args.field,
                                 column=args.column, **rule.kwargs())
    print(cli_message(stats.format_stats(table, names), keep="\n"))
    tax = None
    if args.parallel:
        tax = stats.token_tax(table, args.parallel)
        print()
        print(cli_message(stats.format_tax(tax, names, args.parallel), keep="\n"))
    if args.plot:
        try:
            written = stats.save_plots(table, names, args.plot, tax=tax, tax_files=args.parallel)
        except RuntimeError as exc:
            raise CLIError(str(exc)) from None
        print(f"\nsaved {cli_message(', '.join(str(p) for p in written))}", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- parser
class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (plus where to find help), exit code 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {cli_message(message)} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fastbpe", description="Exact, fast BPE and WordPiece tokenizers.")
    from . import __version__

    p.add_argument("--version", action="version", version=f"fastbpe {__version__}",
                   help="print the version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    tok_help = "a tokenizer file, model folder, gpt2 / cl100k_base / o200k_base, or a cached model name (org/name)"
    threads_help = "native threads for a batch of files (default: CPUs, at most 8)"
    files_help = "text files (.gz too); stdin when none"

    d = sub.add_parser("demo", help="train on the Python standard library and show the result")
    d.add_argument("--vocab-size", type=_positive("--vocab-size"), default=None,
                   help=f"default {DEMO_REFERENCE[1]} ({DEMO_NATIVE[1]} with the native trainer)")
    d.add_argument("--max-mb", type=_positive("--max-mb", float), default=None,
                   help=f"MB of standard library sources to train on; default {DEMO_REFERENCE[0]} "
                        f"({DEMO_NATIVE[0]} with the native trainer)")
    d.add_argument("-o", "--output", default="stdlib-demo.tokenizer.json",
                   help="where to save the tokenizer (default stdlib-demo.tokenizer.json)")
    d.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                   help="colour the sample: auto = only when stdout is a terminal")
    d.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    d.set_defaults(func=cmd_demo)

    t = sub.add_parser("train", help="train BPE or WordPiece from files (or stdin lines)")
    t.add_argument("files", nargs="*", metavar="FILE",
                   help="corpus files or folders (text, .jsonl, .parquet; see --docs); stdin lines when none")
    t.add_argument("--model", choices=["bpe", "wordpiece"], default="bpe", help="the model to train (default bpe)")
    t.add_argument("--vocab-size", type=_positive("--vocab-size"), required=True,
                   help="tokens in the vocabulary, bytes and special tokens included")
    t.add_argument("--pattern", default="cl100k", help="BPE split pattern: gpt2, cl100k, o200k or a regex")
    t.add_argument("--special", action="append", metavar="TOKEN", help="a special token (repeatable)")
    t.add_argument("--min-frequency", type=int, default=0, help="merge only pairs seen at least this often")
    t.add_argument("--cased", action="store_true", help="WordPiece: keep case and accents")
    t.add_argument("--threads", type=_positive("--threads"), default=None,
                   help="threads that read and split the text (default: all CPUs)")
    t.add_argument("-o", "--output", required=True,
                   help=".tiktoken, .json (tokenizer.json), vocab.bpe (GPT-2 files) or vocab .txt (WordPiece)")
    t.add_argument("--format", choices=["tiktoken", "hf", "tokenizer.json", "gpt2", "vocab.txt"], default=None,
                   help="default: from the output's extension")
    add_errors_flag(t)
    add_corpus_flags(t)
    t.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    t.set_defaults(func=cmd_train)

    e = sub.add_parser("encode", help="text to ids (stdin when no FILE), or files to token shards")
    e.add_argument("files", nargs="*", metavar="FILE", help=files_help + "; many with --shards")
    e.add_argument("--tokenizer", "-t", required=True, help=tok_help)
    e.add_argument("--no-special", action="store_true",
                   help="no special ids at all: --special-as-text, and no [CLS]/[SEP] around WordPiece ids")
    add_errors_flag(e)
    add_special_flags(e)
    add_corpus_flags(e)
    g = e.add_argument_group("token shards")
    g.add_argument("--shards", metavar="DIR", help="write shards of ids to DIR instead of printing ids")
    g.add_argument("--dtype", choices=["uint16", "uint32"], default=None,
                   help="id type in the shards (default: uint16 when every id fits, else uint32)")
    g.add_argument("--eot", metavar="TOKEN",
                   help="the token after every document (default <|endoftext|>; [SEP] for WordPiece)")
    g.add_argument("--no-eot", action="store_true", help="no token after documents (the .idx tells them apart)")
    g.add_argument("--threads", type=_positive("--threads"), default=min(8, os.cpu_count() or 1),
                   help=threads_help)
    g.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    e.set_defaults(func=cmd_encode)

    de = sub.add_parser("decode", help="ids to text (stdin when no FILE)")
    de.add_argument("file", nargs="?", metavar="FILE", help="whitespace-separated ids; stdin when none")
    de.add_argument("--tokenizer", "-t", required=True, help=tok_help)
    de.add_argument("--raw", action="store_true",
                    help="write the bytes as they are even to a terminal (by default a terminal gets "
                         "control characters escaped; pipes and files always get the exact bytes)")
    de.set_defaults(func=cmd_decode)

    c = sub.add_parser("count", help="token counts of files and their total")
    c.add_argument("files", nargs="*", metavar="FILE", help=files_help)
    c.add_argument("--tokenizer", "-t", default="cl100k_base", help=tok_help + " (default cl100k_base)")
    c.add_argument("--threads", type=_positive("--threads"), default=min(8, os.cpu_count() or 1), help=threads_help)
    add_errors_flag(c)
    add_special_flags(c)
    add_corpus_flags(c)
    c.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    c.set_defaults(func=cmd_count)

    s = sub.add_parser("show", help="the text with token boundaries coloured (or as an HTML page)")
    s.add_argument("files", nargs="*", metavar="FILE", help="one text file (.gz too); stdin when none")
    s.add_argument("--tokenizer", "-t", default="cl100k_base", help=tok_help + " (default cl100k_base)")
    s.add_argument("--text", help="show this text instead of a file or stdin")
    s.add_argument("--ids", action="store_true", help="print the ids too")
    s.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                   help="auto: colours only when stdout is a terminal")
    s.add_argument("--html", metavar="FILE", help="write a self-contained HTML page instead")
    s.add_argument("-q", "--quiet", action="store_true", help="no summary line")
    add_errors_flag(s)
    add_special_flags(s)
    s.set_defaults(func=cmd_show)

    st = sub.add_parser("stats", help="bytes/token, tokens/word, [UNK] rate and token tax, side by side")
    st.add_argument("tokenizers", nargs="+", metavar="TOKENIZER", help=tok_help)
    st.add_argument("--files", nargs="+", metavar="F", help="text files (.gz too) to measure")
    st.add_argument("--parallel", nargs="+", metavar="F", help="parallel text, English first: the token tax")
    st.add_argument("--plot", metavar="DIR", help="save PNG charts to DIR (needs matplotlib)")
    add_errors_flag(st)
    add_special_flags(st)
    add_corpus_flags(st)
    st.set_defaults(func=cmd_stats)

    # bench, audit, view: each module holds its parser and runner; it sits below this
    # layer, so the helpers every command shares are handed to it
    from . import audit, bench, view

    kit = SimpleNamespace(
        tok_help=tok_help, load_tokenizer=load_tokenizer, tokenizer_name=tokenizer_name, corpus_of=corpus_of,
        add_corpus_flags=add_corpus_flags, add_errors_flag=add_errors_flag, add_special_flags=add_special_flags,
        special_rule=SpecialRule.from_args, special_guard=corpus_special_guard, positive=_positive,
        safe=lambda text: cli_message(text, keep="\n"))
    for tool in (bench, audit, view):
        tool.add_command(sub, kit)
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
        _close_progress_bars()
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        msg = str(msg).splitlines()[0] if str(msg) else type(exc).__name__
        print(f"fastbpe {args.command}: error: {cli_message(msg)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        _close_progress_bars()
        print(f"fastbpe {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
