"""``fastbpe bench``: fastbpe against every peer installed for a tokenizer, on the user's files.

Honest by construction (decisions, made once here):

- **Peers** are found at run time; none is required. For a BPE ``Encoding``: tiktoken
  (any ranks + pattern, no added tokens), gigatoken (``from_tiktoken`` for the GPT-2 /
  cl100k / o200k patterns, ``from_json`` for a tokenizer.json), quicktok (its bundled
  cl100k_base / o200k_base), HF ``tokenizers`` and tokie (the tokenizer.json given, or
  for a built-in name or a .tiktoken file one that fastbpe writes from the ranks: the
  check of ids tells whether the conversion is exact). For a WordPiece tokenizer.json:
  HF ``tokenizers``. fastbpe reads no SentencePiece model, so sentencepiece has nothing
  to compare with here. What is absent is listed with the reason, never silently
  dropped.
- **Ids are checked before any timing**: every (library, threads) call runs once, on a
  fresh tokenizer, over every document, and must give fastbpe's ids for each document
  (special-token text is ordinary text, as ``encode_ordinary``; WordPiece without
  [CLS]/[SEP]). A peer that differs is reported with the first document and token
  that differ, and is not timed.
- **The same for everyone**: the same documents (the CLI's document rule), the same
  output kind (``list``: Python lists of ints, or ``numpy``: arrays; a library without
  that output for a call is listed, not timed with another kind), the same threads,
  said in the header. ``1 thread``: each library's one-text call, document after
  document. ``N threads``: each library's batch call over all the documents with N
  threads (fastbpe and tiktoken ``num_threads=N``, quicktok its thread argument; HF
  ``tokenizers`` and gigatoken size their Rust pool from ``RAYON_NUM_THREADS``, which
  ``run`` sets to N before they are imported).
- **Cold and warm**: the documents are cut in two halves of about equal bytes; the
  second half is timed. *cold*: a fresh tokenizer (built untimed) encodes the timed
  half; *warm*: a fresh tokenizer that has encoded the first half (untimed) encodes
  the timed half, so caches have seen text of the kind but never the timed text. One
  document is cut at a line end near its middle to make two.
- **Numbers**: wall-clock seconds (``time.perf_counter``), best of ``repeat`` runs;
  MB/s of UTF-8 input, tokens/s, the ratio to tiktoken's MB/s in the same cell, and
  bytes per token (the same for every exact library: one column in the header).

>>> from fastbpe.bpe.encoding import get_toy_encoding
>>> r = run_bench({"toy": get_toy_encoding()}, ["hi there\\n", "hi hi\\n"], threads=2, peers={"toy": []})
>>> [(row["library"], row["threads"], row["state"]) for row in r[0]["rows"]][:2]
[('fastbpe', 1, 'cold'), ('fastbpe', 1, 'warm')]
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .checks import check_num_threads, is_wordpiece
from .reference import patterns

KINDS = ("list", "numpy")

#: Below this many timed bytes the header warns that fixed per-call costs dominate.
SMALL = 100_000

#: The pretokenizer gigatoken's ``from_tiktoken`` names for a split pattern.
GIGATOKEN_SCHEMES = {patterns.GPT2: "gpt2", patterns.CL100K: "gpt4", patterns.O200K: "o200k"}


@dataclass
class Library:
    """One library's calls for one tokenizer: ``make`` builds a fresh tokenizer, ``one``
    encodes one text, ``batch`` many with n threads (each per output kind; None: the
    library has no such call)."""

    name: str
    make: Callable[[], object]
    one: dict[str, Callable | None] = field(default_factory=dict)
    batch: dict[str, Callable | None] = field(default_factory=dict)
    note: str = ""  # how it got the vocabulary, when the header should say


def ids_of(out) -> list[list[int]]:
    """Per-document ids of a call's output: a list of lists or arrays, an awkward array,
    or fastbpe's ``(flat ids, offsets)``.

    >>> import numpy as np
    >>> ids_of((np.array([1, 2, 3]), np.array([0, 1, 3])))
    [[1], [2, 3]]
    """
    if isinstance(out, tuple) and len(out) == 2 and hasattr(out[1], "tolist"):
        flat, offsets = out[0].tolist(), out[1].tolist()
        return [flat[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
    return [p.tolist() if hasattr(p, "tolist") else list(p) for p in out]


def _optional(name: str):
    try:
        return __import__(name)
    except ImportError:
        return None


# --------------------------------------------------------------------------- the libraries
def fresh_fastbpe(tok, spec: str | None):
    """A new fastbpe tokenizer equal to ``tok`` (its own caches)."""
    if is_wordpiece(tok):
        from .loader import load

        if spec is None or not os.path.exists(spec):
            return tok
        return load(spec)
    from .bpe.encoding import Encoding

    return Encoding(tok.name, pat_str=tok.pat_str, mergeable_ranks=tok.mergeable_ranks,
                    special_tokens=tok.special_tokens, added_tokens=tok.added_tokens)


def fastbpe_library(tok, spec: str | None) -> Library:
    lib = Library("fastbpe", lambda: fresh_fastbpe(tok, spec))
    lib.one["list"] = lambda e, d: e.encode_ordinary(d)
    lib.batch["list"] = lambda e, docs, n: e.encode_ordinary_batch(docs, num_threads=n)
    if is_wordpiece(tok):
        lib.one["numpy"] = lib.batch["numpy"] = None
    else:
        lib.one["numpy"] = lambda e, d: e.encode_to_numpy(d, disallowed_special=())
        lib.batch["numpy"] = lambda e, docs, n: e.encode_batch_to_numpy(docs, num_threads=n, disallowed_special=())
    return lib


def _hf_file(spec: str | None) -> Path | None:
    """The tokenizer.json behind ``spec`` (a file, or a folder holding one), or None."""
    if spec is None or not os.path.exists(spec):
        return None
    p = Path(spec)
    p = p / "tokenizer.json" if p.is_dir() else p
    return p if p.is_file() and p.suffix == ".json" else None


def _installed(module: str, label: str, absent: dict[str, str], hf_path: Path | None):
    """A peer that reads tokenizer.json files: its module, or None with the reason in
    ``absent``."""
    mod = _optional(module)
    if mod is None:
        absent[label] = "not installed"
    elif hf_path is None:
        absent[label] = "needs a tokenizer.json file"
    else:
        return mod
    return None


def _written_hf_file(tok) -> Path | None:
    """A tokenizer.json that fastbpe writes from ``tok``'s ranks, pattern and special
    tokens, so that the tokenizer.json peers run a built-in or .tiktoken vocabulary too
    (their ids are checked like any peer's); None when it cannot be written."""
    import warnings

    path = Path(tempfile.mkdtemp(prefix="fastbpe-bench-")) / f"{tok.name}.tokenizer.json"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a lossy file is no file
            tok.save(path, format="hf")
    except (ValueError, UserWarning):
        return None
    return path


def find_peers(tok, spec: str | None) -> tuple[list[Library], dict[str, str]]:
    """``(libraries, absent)``: the installed peers that can run ``tok``, and why each
    other one cannot (``{name: reason}``)."""
    peers: list[Library] = []
    absent: dict[str, str] = {}
    given = hf_path = _hf_file(spec)
    wordpiece = is_wordpiece(tok)
    if hf_path is None and not wordpiece:
        hf_path = _written_hf_file(tok)
    written = "a tokenizer.json fastbpe wrote from the ranks" if given is None and hf_path is not None else ""

    tokenizers = _installed("tokenizers", "HF tokenizers", absent, hf_path)
    if tokenizers is not None:
        def make_hf(path=str(hf_path)):
            t = tokenizers.Tokenizer.from_file(path)
            t.no_truncation()
            t.no_padding()
            return t
        lib = Library("HF tokenizers", make_hf, note=written)
        lib.one["list"] = lambda e, d: e.encode(d, add_special_tokens=False).ids
        lib.batch["list"] = lambda e, docs, n: [x.ids for x in e.encode_batch(docs, add_special_tokens=False)]
        peers.append(lib)
    if wordpiece:
        absent.update({name: "byte-level BPE only" for name in ("tiktoken", "gigatoken", "quicktok", "tokie")})
        return peers, absent

    tiktoken = _optional("tiktoken")
    if tiktoken is None:
        absent["tiktoken"] = "not installed"
    elif tok.added_tokens:
        absent["tiktoken"] = "has no added (non-special) tokens"
    else:
        def make_tiktoken():
            return tiktoken.Encoding(tok.name, pat_str=tok.pat_str, mergeable_ranks=tok.mergeable_ranks,
                                     special_tokens=tok.special_tokens)
        lib = Library("tiktoken", make_tiktoken)
        lib.one["list"] = lambda e, d: e.encode_ordinary(d)
        lib.batch["list"] = lambda e, docs, n: e.encode_ordinary_batch(docs, num_threads=n)
        lib.one["numpy"] = lambda e, d: e.encode_to_numpy(d, disallowed_special=())
        lib.batch["numpy"] = None
        peers.append(lib)

    giga = _optional("gigatoken")
    scheme = GIGATOKEN_SCHEMES.get(tok.pat_str)
    if giga is None:
        absent["gigatoken"] = "not installed"
    elif given is None and scheme is None:
        absent["gigatoken"] = "no gigatoken pretokenizer for this split pattern"
    else:
        if scheme is None:  # the user's tokenizer.json (gigatoken may or may not run its pattern)
            text = given.read_text(encoding="utf-8")
            make_giga = lambda: giga.Tokenizer.from_json(text)  # noqa: E731
        else:
            import warnings

            path = os.path.join(tempfile.mkdtemp(prefix="fastbpe-bench-"), f"{tok.name}.tiktoken")
            with warnings.catch_warnings():  # the ranks alone: pattern and specials are passed below
                warnings.simplefilter("ignore")
                tok.save(path, format="tiktoken")
            make_giga = lambda: giga.Tokenizer.from_tiktoken(path, pretokenizer=scheme,  # noqa: E731
                                                             special_tokens=tok.special_tokens)
        lib = Library("gigatoken", make_giga)
        lib.one["list"] = lambda e, d: e.encode_batch_list([d], parallel=False)[0]
        lib.batch["list"] = lambda e, docs, n: e.encode_batch_list(docs, parallel=n > 1)
        lib.one["numpy"] = lambda e, d: e.encode(d)
        lib.batch["numpy"] = lambda e, docs, n: e.encode_batch(docs, parallel=n > 1)
        peers.append(lib)

    quick = _optional("quicktok")
    if quick is None:
        absent["quicktok"] = "not installed"
    elif not hasattr(quick, "Tokenizer"):
        absent["quicktok"] = f"the installed quicktok {getattr(quick, '__version__', '')} has no Tokenizer".replace("  ", " ")
    elif tok.name not in ("cl100k_base", "o200k_base") or spec != tok.name:
        absent["quicktok"] = "ships cl100k_base and o200k_base only"
    else:
        lib = Library("quicktok", lambda: quick.Tokenizer(tok.name, ""))
        lib.one["list"] = lambda e, d: e.encode_ordinary(d)
        lib.batch["list"] = None
        lib.one["numpy"] = lambda e, d: e.encode_batch([d], 1)[0]
        lib.batch["numpy"] = lambda e, docs, n: e.encode_batch(docs, n)
        peers.append(lib)

    if _optional("sentencepiece") is not None:
        absent["sentencepiece"] = "fastbpe reads no SentencePiece model to compare with"
    tokie = _installed("tokie", "tokie", absent, hf_path)
    if tokie is not None:
        lib = Library("tokie", lambda path=str(hf_path): tokie.Tokenizer.from_json(path), note=written)
        lib.one["list"] = lambda e, d: e.encode(d, add_special_tokens=False).ids
        peers.append(lib)
    return peers, absent


# --------------------------------------------------------------------------- measuring
def halves(docs: list[str]) -> tuple[list[str], list[str]]:
    """``(warm-up, timed)``: the documents cut where half the bytes are before; one
    document is cut at the line end nearest its middle.

    >>> halves(["ab\\ncd\\n"])
    (['ab\\n'], ['cd\\n'])
    >>> halves(["a", "bb", "c"])
    (['a'], ['bb', 'c'])
    """
    if len(docs) == 1:
        d = docs[0]
        mid = d.rfind("\n", 0, len(d) // 2 + 1)
        mid = mid + 1 if mid >= 0 else len(d) // 2
        return ([d[:mid]], [d[mid:]]) if 0 < mid < len(d) else ([], [d])
    sizes = [len(d.encode("utf-8")) for d in docs]
    total, acc = sum(sizes), 0
    for i, s in enumerate(sizes):
        if acc + s > total / 2 and i:
            return docs[:i], docs[i:]
        acc += s
    return docs[:-1], docs[-1:]


def _first_difference(got: list[list[int]], want: list[list[int]]) -> str | None:
    if len(got) != len(want):
        return f"{len(got)} documents back for {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        if g != w:
            j = next((j for j, (a, b) in enumerate(zip(g, w)) if a != b), min(len(g), len(w)))
            return f"document {k + 1}, token {j + 1}: {g[j:j + 3]} where fastbpe has {w[j:j + 3]}"
    return None


def _call(fn, threads: int):
    """The call that encodes a list of documents: one text at a time, or a batch."""
    if threads == 1:
        return lambda e, docs: [fn(e, d) for d in docs]
    return lambda e, docs: fn(e, docs, threads)


def _seconds(make, call, warm: list[str], docs: list[str], state: str) -> float:
    enc = make()
    if state == "warm":
        call(enc, warm)
    t0 = time.perf_counter()
    call(enc, docs)
    return time.perf_counter() - t0


def run_bench(toks: dict[str, object], docs: list[str], *, threads: int | None = None, repeat: int = 1,
              kind: str = "list", specs: dict[str, str] | None = None, peers=None, progress=None) -> list[dict]:
    """One result per tokenizer (``{name: tokenizer}``): header facts, ``rows`` (library,
    threads, state, seconds, MB/s, tokens/s, ratio to tiktoken), ``differs`` and
    ``absent``. ``specs``: how each was named (a file lets tokenizer.json peers in);
    ``peers``: ``{name: [Library]}`` instead of ``find_peers`` (tests);
    ``progress``: a tqdm bar whose total this sets."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    threads = check_num_threads(threads, allow_none=True) or (os.cpu_count() or 1)
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat must be an int >= 1, got {repeat!r}")
    if not docs or not any(docs):
        raise ValueError("no text to measure: the files hold no documents")
    warm, timed = halves(docs)
    modes = sorted({1, threads})
    n_bytes = sum(len(d.encode("utf-8")) for d in timed)
    results = []
    plans = []
    for name, tok in toks.items():
        spec = (specs or {}).get(name, name)
        found, absent = (peers[name], {}) if peers is not None else find_peers(tok, spec)
        plans.append((name, tok, [fastbpe_library(tok, spec), *found], absent))
    if progress is not None:
        progress.reset(total=sum(len(libs) * len(modes) * (1 + 2 * repeat) for _, _, libs, _ in plans))
    for name, tok, libs, absent in plans:
        ours = libs[0].make()
        want = [libs[0].one["list"](ours, d) for d in warm + timed]
        n_tokens = sum(len(ids) for ids in want[len(warm):])
        res = {"tokenizer": name, "documents": len(docs), "timed_documents": len(timed),
               "timed_bytes": n_bytes, "warmup_bytes": sum(len(d.encode("utf-8")) for d in warm),
               "tokens": n_tokens, "bytes_per_token": n_bytes / n_tokens if n_tokens else None,
               "kind": kind, "threads": modes, "repeat": repeat, "clock": "wall (time.perf_counter)",
               "rayon_threads": os.environ.get("RAYON_NUM_THREADS"),
               "libraries": [lib.name for lib in libs], "rows": [], "differs": {}, "absent": dict(absent),
               "no_call": {}, "notes": {lib.name: lib.note for lib in libs if lib.note}}
        for lib in libs:
            for n in modes:
                fn = (lib.one if n == 1 else lib.batch).get(kind)
                if fn is None:
                    res["no_call"][f"{lib.name}, {n} thread{'s' * (n > 1)}"] = f"no {kind} {'batch ' * (n > 1)}call"
                    if progress is not None:
                        progress.update(1 + 2 * repeat)
                    continue
                call = _call(fn, n)
                try:
                    diff = _first_difference(ids_of(call(lib.make(), warm + timed)), want)
                except Exception as exc:  # a peer that cannot load or run this tokenizer
                    diff = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:120]
                if progress is not None:
                    progress.update(1)
                if diff is not None:
                    res["differs"][f"{lib.name}, {n} thread{'s' * (n > 1)}"] = diff
                    if progress is not None:
                        progress.update(2 * repeat)
                    continue
                for state in ("cold", "warm"):
                    best = float("inf")
                    for _ in range(repeat):
                        best = min(best, _seconds(lib.make, call, warm, timed, state))
                        if progress is not None:
                            progress.update(1)
                    best = max(best, 1e-9)
                    res["rows"].append({"library": lib.name, "threads": n, "state": state, "seconds": best,
                                        "mb_per_s": n_bytes / 1e6 / best, "tokens_per_s": n_tokens / best})
        base = {(r["threads"], r["state"]): r["mb_per_s"] for r in res["rows"] if r["library"] == "tiktoken"}
        for r in res["rows"]:
            b = base.get((r["threads"], r["state"]))
            r["vs_tiktoken"] = r["mb_per_s"] / b if b else None
        results.append(res)
    return results


# --------------------------------------------------------------------------- output
def _size(n: int) -> str:
    """Bytes as the header says them.

    >>> _size(2_345), _size(1_234_567)
    ('2.3 KB', '1.23 MB')
    """
    return f"{n / 1e3:.1f} KB" if n < 1e6 else f"{n / 1e6:.2f} MB"


def header(res: dict) -> list[str]:
    """What was measured, so that the table is read as it was made."""
    bpt = f"{res['bytes_per_token']:.2f}" if res["bytes_per_token"] else "n/a"
    threads = " and ".join(str(n) for n in res["threads"])
    lines = [f"{res['tokenizer']}: {res['documents']:,} documents; timed {res['timed_documents']:,} documents, "
             f"{_size(res['timed_bytes'])}, {res['tokens']:,} tokens ({bpt} bytes/token); warm-up "
             f"{_size(res['warmup_bytes'])}",
             f"same documents, {res['kind']} output and threads ({threads}) for every library; 1 thread = one "
             f"call per document, more = one batch call; {res['clock']}, best of {res['repeat']}"]
    rust = [lib for lib in ("HF tokenizers", "gigatoken") if lib in res["libraries"]]
    if rust and len(res["threads"]) > 1:  # their pools are sized once, from the environment
        lines.append(f"{' and '.join(rust)} batch threads: RAYON_NUM_THREADS="
                     f"{res['rayon_threads'] or 'unset (one per CPU)'}")
    if res["timed_bytes"] < SMALL:
        lines.append(f"note: only {_size(res['timed_bytes'])} timed: a call's fixed costs (a first call's set-up, "
                     "starting threads) weigh more than encoding; give MBs of text for speeds that hold")
    ok = [lib for lib in res["libraries"] if not any(k.startswith(lib + ",") for k in res["differs"])]
    lines.append("ids identical to fastbpe's on every document: " + ", ".join(ok))
    for what, d in (("DIFFERENT ids or failed, not timed", res["differs"]), ("no such call", res["no_call"]),
                    ("absent", res["absent"]), ("read", res["notes"])):
        if d:
            lines.append(f"{what}: " + "; ".join(f"{k} ({v})" for k, v in d.items()))
    return lines


def format_table(res: dict) -> str:
    """The rows as an aligned text table under the header."""
    head = ["library", "threads", "state", "MB/s", "tokens/s", "vs tiktoken"]
    rows = [[r["library"], str(r["threads"]), r["state"], f"{r['mb_per_s']:.2f}", f"{r['tokens_per_s']:,.0f}",
             f"{r['vs_tiktoken']:.2f}x" if r["vs_tiktoken"] else "-"] for r in res["rows"]]
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(len(head))]
    line = lambda r: "  ".join(c.ljust(w) if i == 0 or i == 2 else c.rjust(w)  # noqa: E731
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip()
    return "\n".join([*header(res), "", line(head), "  ".join("-" * w for w in widths), *map(line, rows)])


def save_plot(results: list[dict], path: str | os.PathLike) -> Path:
    """A PNG of MB/s: one panel per tokenizer, a bar per library in each (threads, state)."""
    from .stats import pyplot

    plt = pyplot("--plot")
    import numpy as np

    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4), squeeze=False)
    every = list(dict.fromkeys(r["library"] for res in results for r in res["rows"]))
    colour = {lib: f"C{i}" for i, lib in enumerate(every)}  # one colour per library in every panel
    for ax, res in zip(axes[0], results):
        cells = list(dict.fromkeys((r["threads"], r["state"]) for r in res["rows"]))
        libs = list(dict.fromkeys(r["library"] for r in res["rows"]))
        value = {(r["library"], r["threads"], r["state"]): r["mb_per_s"] for r in res["rows"]}
        x = np.arange(len(cells))
        width = 0.8 / max(1, len(libs))
        for i, lib in enumerate(libs):
            ax.bar(x + i * width - 0.4 + width / 2, [value.get((lib, *c), 0) for c in cells], width, label=lib,
                   color=colour[lib])
        ax.set_xticks(x, [f"{n} thread{'s' * (n > 1)}, {s}" for n, s in cells])
        ax.set_ylabel("MB/s (higher is better)")
        ax.set_title(f"{res['tokenizer']}, {res['kind']} output")
        ax.legend(fontsize="small")
    fig.tight_layout()
    path = Path(path)
    from .io.atomic import atomic_open

    with atomic_open(path) as fh:
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)
    return path


def save_json(results: list[dict], path: str | os.PathLike) -> Path:
    from .io.atomic import atomic_write_text

    return atomic_write_text(path, json.dumps(results, indent=1) + "\n")


# --------------------------------------------------------------------------- the command
def add_command(sub, kit) -> None:
    """``fastbpe bench``'s parser (``kit``: the CLI's shared helpers)."""
    b = sub.add_parser("bench", help="fastbpe against every installed peer on your files (ids checked first)")
    b.add_argument("files", nargs="+", metavar="FILE", help="corpus files or folders (text, .jsonl, .parquet)")
    b.add_argument("--tokenizer", "-t", action="append", required=True, metavar="TOKENIZER",
                   help=kit.tok_help + " (repeatable)")
    b.add_argument("--threads", type=kit.positive("--threads"), default=os.cpu_count() or 1,
                   help="the 'all threads' count (default: every CPU); 1 thread is always measured")
    b.add_argument("--repeat", type=kit.positive("--repeat"), default=3, help="best of this many runs (default 3)")
    b.add_argument("--output", choices=KINDS, default="list", help="what every library returns (default list)")
    b.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    b.add_argument("--plot", metavar="PNG", help="also draw MB/s to a PNG (needs matplotlib)")
    b.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    kit.add_errors_flag(b)
    kit.add_corpus_flags(b)
    b.set_defaults(func=lambda args: run(args, kit))


def run(args, kit) -> int:
    # HF tokenizers and gigatoken size their thread pools once, from the environment
    os.environ.setdefault("RAYON_NUM_THREADS", str(args.threads))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    toks, specs = {}, {}
    for spec in args.tokenizer:
        name = kit.tokenizer_name(spec, None)
        name = spec if name in toks else name  # two files of one name: their paths
        toks[name], specs[name] = kit.load_tokenizer(spec), spec
    docs = list(kit.corpus_of(args).documents(args.errors))
    bar = None
    if not args.quiet:
        from tqdm.auto import tqdm

        bar = tqdm(total=1, unit="run", desc="bench", file=sys.stderr, leave=False)
    try:
        results = run_bench(toks, docs, threads=args.threads, repeat=args.repeat, kind=args.output,
                            specs=specs, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    print("\n\n".join(kit.safe(format_table(res)) for res in results))
    if args.json:
        save_json(results, args.json)
        print(f"wrote {kit.safe(args.json)}", file=sys.stderr)
    if args.plot:
        save_plot(results, args.plot)
        print(f"wrote {kit.safe(args.plot)}", file=sys.stderr)
    return 0
