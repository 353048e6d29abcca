"""Token shards that GPT training scripts memory-map: the one format of fastbpe.

``fastbpe encode --shards``, ``fastbpe.encode_files`` and its Dask path all write it, with
``write_task`` (one unit of work) and ``commit`` (the manifest); ``open`` reads it.

Layout of a shard directory
---------------------------
::

    shard-NNNNNN-KKKKKKKKKKKK.bin   tokens: flat little-endian uint16 or uint32, no header
    shard-NNNNNN-KKKKKKKKKKKK.idx   flat little-endian uint64, documents + 1 token offsets
    shard-NNNNNN-KKKKKKKKKKKK.json  sidecar: the task key, counts, sha256 of .bin and .idx
    manifest.json                   the shards in corpus order, totals, tokenizer identity

- ``NNNNNN`` is the task's place in the corpus (0, 1, ...); ``KKKKKKKKKKKK`` the first 12
  hex digits of the sha256 of the task's *key*: what the shard is made of (the source's
  identity, the byte range, the document rule: ``task.key()``) and how (the tokenizer's
  sha256, dtype, EOT id, the special-token rule, ``errors``, this format's version). A
  rerun with the same inputs computes the same names (resume: a complete shard is kept,
  byte-identical); a run with anything different writes other names, so it never
  overwrites a file that the current manifest points to.
- ``.bin`` loads as nanoGPT / llm.c load theirs: ``np.memmap(path, dtype=np.uint16,
  mode="r")`` (the dtype is in the manifest).
- ``.idx``: document ``i`` of the shard is ``tokens[idx[i]:idx[i+1]]``, its EOT included;
  ``idx[0] == 0`` and ``idx[-1] == len(tokens)``.
- The sidecar is written last: a shard is *complete* iff its sidecar exists, holds the
  task's key, and both files have the sizes and sha256 it records.
- ``manifest.json``: format name and version; tokenizer (name, kind, n_vocab, sha256 of
  what decides the ids: ``tokenizer_identity``); dtype; the EOT rule and id; the
  special-token rule; the document rule the caller gives; totals (documents, tokens,
  text bytes); the shards in corpus order with their counts and checksums.

The resume key of a file
------------------------
A local file's identity is its path, size, mtime and inode **and a content sample**:
the sha256 of its first, middle and last 64 KiB as stored (the whole file up to 192 KiB;
``fastbpe.io.streams.content_sample``); a remote file's is its URL, size and the
backend's version (the etag: a content hash on S3 and GCS; else its mtime). So a file
edited in place to the same size with its mtime put back (``cp -p``, ``rsync -t``) is
re-encoded when the edit touches a sampled block, which a header, a footer, any change
that shifts bytes, and every edit of a file up to 192 KiB do. The cost: at most 192 KiB
read per task at each run (three reads; a smaller file is read whole), under 5 % of the
4 MiB a ``distributed.plan_tasks`` range holds at least; a resume that keeps every shard
reads only these. A same-size edit that touches none of the three blocks is not seen:
after such edits delete the folder (or that file's shards) to re-encode.

The EOT rule
------------
Exactly one EOT token **after** every document (nanoGPT's ``prepare.py``): the stream is
``doc0 EOT doc1 EOT ... docN EOT``. So every shard, and every document slice
``tokens[idx[i]:idx[i+1]]``, ends at a document boundary and stands alone; concatenating
shards gives the corpus's stream with no separator to add or drop at the seams (which an
EOT *between* documents would need), and a training window that starts after an EOT
starts a document. The EOT is ``<|endoftext|>`` for BPE, ``[SEP]`` for WordPiece, or the
token the caller names with ``eot=``; a tokenizer without it is a ValueError saying to
pass ``eot=``. ``eot=None`` writes no EOT (then the ``.idx`` alone tells documents apart).
The EOT is the writer's, never the text's.

Documents
---------
Documents come from ``fastbpe.io`` (its ``Corpus.plan()`` makes the tasks): non-empty
str, read in ``Block``s. A document longer than a block arrives cut into pieces at places
where encoding the pieces separately gives the ids of the whole (``block.last_open``
says the last piece continues in the next block); the writer joins them: no EOT and no
``.idx`` entry between the pieces of one document. WordPiece documents are the text
alone: no ``[CLS]``, and none of a tokenizer.json's truncation or padding.

Special-token text inside a document follows the library's rule (``fastbpe.special``), as
``Encoding.encode`` does: by default it raises ``DisallowedSpecialInDocument`` (a
ValueError naming the source, the document and the character), because a web page that
holds the string ``<|endoftext|>`` must neither end a document silently nor be rewritten
silently. ``disallowed_special=()`` encodes it as ordinary text (nanoGPT's
``encode_ordinary``); ``allowed_special`` writes its id (corpora that carry markers).

A run
-----
``write_shards`` (this process) or a Dask cluster (``fastbpe.encode_files``) runs
``write_task`` for every task, then ``commit``:

1. stale temporaries in the directory are removed (those of killed runs: see
   ``fastbpe.io.atomic``);
2. each task: if its shard is complete it is skipped; else its ``.bin`` and ``.idx`` are
   streamed to temporaries (memory stays bounded by one block: ids are appended as
   they come), fsynced and renamed, then the sidecar is written the same way;
3. ``commit`` writes the new ``manifest.json`` atomically (temp, fsync, rename, fsync of
   the directory), and only then deletes the shard files the new manifest does not list.

So a reader sees the old manifest and its complete files, or the new ones, never a mix;
a failed or killed run leaves no partial file under a final name, and no temporaries
(a SIGKILLed writer's temporaries are removed by the next run); its complete shards are
kept, and the rerun gives the same bytes as a run that never failed. Two runs must not
write one directory at the same time.

Reading
-------
``open(dir)`` checks every field of ``manifest.json`` (types, ranges, the EOT rule,
totals equal to the shards' sums) and that each ``.bin``/``.idx`` it lists is a plain
``shard-NNNNNN-…`` name of the folder (never a path: no separator, no ``..``, nothing
absolute; a symlink must resolve inside the folder) at its place ``NNNNNN`` in the
list, present, with the size its counts give; each failure is a ValueError naming the
file and the field. It reads no token, so it costs a stat per file.
``open(dir, tokenizer=tok)`` also refuses a folder written by another tokenizer (its
``tokenizer_identity`` sha256). ``verify()`` reads everything: the sha256 of every
file, the offsets, and each sidecar against the manifest: its key hashes to the
shard's name, and names the manifest's tokenizer sha256, dtype, EOT id, special-token
rule and source, its place, counts and checksums. So a manifest whose shards were
reordered, whose tokenizer was changed, or that lists another folder's files fails.

>>> import tempfile, numpy as np
>>> from fastbpe.bpe.encoding import get_toy_encoding
>>> from fastbpe.io import Corpus
>>> d = tempfile.mkdtemp()
>>> tasks = Corpus.resolve(documents=["hi", "hi hi"]).plan()
>>> m = write_shards(get_toy_encoding(), tasks, d, eot="<|eot|>", progress=False)
>>> m["documents"], m["tokens"], m["dtype"]
(2, 6, 'uint16')
>>> s = open(d)
>>> s.doc(1).tolist(), [t.tolist() for t, idx in s]
([256, 32, 256, 257], [[256, 257, 256, 32, 256, 257]])
"""
from __future__ import annotations

import bisect
import builtins
import hashlib
import json
import re
import sys
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .formats._hfjson import expect as _expect, field as _field, show as _show
from .io.atomic import atomic_open, atomic_write_text, clean_stale_temps_in, fsync_dir
from .checks import check_dtype, check_int, check_num_threads, is_wordpiece
from . import corpus as _corpus
from .io.documents import prefetch as _prefetch
from .corpus import DisallowedSpecialInDocument, document_ids_batch  # noqa: F401  (re-exported)
from .special import resolve_special_sets

FORMAT = "fastbpe-shards"
VERSION = 1
MANIFEST = "manifest.json"
DTYPES = {"uint16": np.dtype("<u2"), "uint32": np.dtype("<u4")}
# tokenizer.kind: what made the ids ("bpe": tiktoken-style and byte-level tokenizer.json;
# "sentencepiece": a .model file; "hf-sentencepiece": a sentencepiece-style tokenizer.json)
KINDS = ("bpe", "wordpiece", "sentencepiece", "hf-sentencepiece")
IDX_DTYPE = np.dtype("<u8")
#: Text handed to the encoder per call: big enough for the native threads to share,
#: small enough that a worker's memory stays flat.
BLOCK_BYTES = 4 << 20

_SHARD_FILE = re.compile(r"shard-\d{6}-[0-9a-f]{12}\.(?:bin|idx|json)")


class _Default:
    """The "use the tokenizer's own" argument value (pickles as itself, for Dask)."""

    def __repr__(self) -> str:
        return "DEFAULT"

    def __reduce__(self):
        return "DEFAULT"


DEFAULT = _Default()


# --------------------------------------------------------------------------- what a run writes
_IDENTITY = weakref.WeakKeyDictionary()  # tokenizers are immutable: hashed once each


def tokenizer_identity(tok) -> dict:
    """``{"name", "kind", "n_vocab", "sha256"}``: the sha256 covers everything that decides
    a document's ids (BPE: pattern, ranks, special and added tokens; WordPiece: the
    vocabulary and the normalisation options), and nothing else (the name; a WordPiece
    file's post-processor, truncation and padding, which never touch documents)."""
    try:
        return dict(_IDENTITY[tok])
    except (KeyError, TypeError):
        pass
    if hasattr(tok, "shard_identity"):  # a tokenizer that says what decides its ids (SentencePieceBPE)
        ident = tok.shard_identity()
    elif not is_wordpiece(tok) and not hasattr(tok, "_mergeable_ranks"):
        raise TypeError(f"tok must be a fastbpe Encoding or WordPiece, not {type(tok).__name__}")
    elif is_wordpiece(tok):
        o = tok._options()
        head = b"wordpiece\0" + json.dumps(
            {k: o[k] for k in ("lowercase", "strip_accents", "clean_text", "tokenize_chinese_chars", "unk_token",
                               "max_input_chars_per_word", "continuing_subword_prefix", "special_tokens",
                               "turkish_lowercase")}, sort_keys=True).encode("utf-8")
        body = b"".join(i.to_bytes(8, "little") + len(b).to_bytes(4, "little") + b
                        for b, i in sorted(((t.encode("utf-8"), i) for t, i in tok.vocab.items()), key=lambda x: x[1]))
        ident = {"name": "wordpiece", "kind": "wordpiece", "n_vocab": max(tok.vocab.values(), default=-1) + 1,
                 "sha256": hashlib.sha256(head + body).hexdigest()}
    else:
        head = b"bpe\0" + tok.pat_str.encode("utf-8") + b"\0"
        body = b"".join(rank.to_bytes(8, "little") + len(t).to_bytes(4, "little") + t
                        for t, rank in sorted(tok._mergeable_ranks.items(), key=lambda kv: kv[1]))
        tail = b"".join(tag + i.to_bytes(8, "little") + t.encode("utf-8") + b"\0"
                        for tag, table in ((b"\1", tok._special_tokens), (b"\2", tok._added_tokens))
                        for t, i in sorted(table.items()))
        rule = tok._ids_rule() if hasattr(tok, "_ids_rule") else b""   # HFEncoding's pipeline
        ident = {"name": tok.name, "kind": "bpe", "n_vocab": tok.n_vocab,
                 "sha256": hashlib.sha256(head + body + tail + (b"\3" + rule if rule else b"")).hexdigest()}
    try:
        _IDENTITY[tok] = ident
    except TypeError:  # not weak-referenceable: computed each time
        pass
    return dict(ident)


def _max_id(tok) -> int:
    return max(tok.vocab.values(), default=0) if is_wordpiece(tok) else tok.max_token_value


def resolve_dtype(tok, dtype=None) -> str:
    """``"uint16"`` or ``"uint32"``; None picks uint16 when every id of ``tok`` fits.

    >>> from fastbpe.bpe.encoding import get_toy_encoding
    >>> resolve_dtype(get_toy_encoding()), resolve_dtype(get_toy_encoding(), np.uint32)
    ('uint16', 'uint32')
    """
    top = _max_id(tok)
    if dtype is None:
        return "uint16" if top <= 0xFFFF else "uint32"
    return check_dtype(dtype, top, "this tokenizer").name


def resolve_eot(tok, eot=DEFAULT) -> tuple[str | None, int | None]:
    """``(token, id)`` written after every document: ``<|endoftext|>`` (BPE) or ``[SEP]``
    (WordPiece) by default, the token named by ``eot``, or ``(None, None)`` for ``eot=None``.

    >>> from fastbpe.bpe.encoding import get_toy_encoding
    >>> resolve_eot(get_toy_encoding(), "<|eot|>"), resolve_eot(get_toy_encoding(), None)
    (('<|eot|>', 257), (None, None))
    """
    if eot is None:
        return None, None
    if eot is not DEFAULT and not isinstance(eot, str):
        raise TypeError(f"eot must be a token (str) or None, not {type(eot).__name__}")
    if is_wordpiece(tok):
        name = "[SEP]" if eot is DEFAULT else eot
        idx = tok.token_to_id(name)
        if idx is None:
            raise ValueError(f"the tokenizer has no token {name!r} to put after every document; "
                             "pass eot=TOKEN (a token of the vocabulary) or eot=None for none")
        return name, idx
    name = "<|endoftext|>" if eot is DEFAULT else eot
    if name in tok.special_tokens:
        return name, tok.special_tokens[name]
    raise ValueError(
        f"the tokenizer has no special token {name!r} to put after every document "
        f"(it has {sorted(tok.special_tokens) or 'none'}); pass eot=TOKEN naming one of them, or eot=None "
        "for none (train with special_tokens=['<|endoftext|>'] to have it)"
    )


def _check_errors(errors) -> str:
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', not {errors!r}")
    return errors


@dataclass(frozen=True)
class Spec:
    """How a run encodes: everything but the documents (picklable; ``make_spec`` builds it)."""

    tokenizer: dict
    dtype: str
    eot_token: str | None
    eot_id: int | None
    allowed: tuple[str, ...]
    disallowed: tuple[str, ...]
    errors: str

    def task_key(self, source_key: dict) -> dict:
        """The key of a shard: the task's own key and this spec (see the module docstring).
        The task's key is put in one order (sorted), so a key read back from a sidecar
        equals, and dumps as, a fresh one."""
        try:
            source_key = json.loads(json.dumps(source_key, sort_keys=True))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"a task's key() must be a JSON-able dict ({exc})") from None
        return {"format": FORMAT, "version": VERSION, "source": source_key, "tokenizer": self.tokenizer["sha256"],
                "dtype": self.dtype, "eot": self.eot_id, "allowed_special": list(self.allowed),
                "disallowed_special": list(self.disallowed), "errors": self.errors}


def make_spec(tok, *, dtype=None, eot=DEFAULT, allowed_special=frozenset(), disallowed_special="all",
              errors: str = "strict") -> Spec:
    """Check the arguments of a run once and resolve them (``resolve_dtype``, ``resolve_eot``,
    the special-token rule of ``fastbpe.special``)."""
    identity = tokenizer_identity(tok)   # first: its TypeError for anything else
    allowed, disallowed = resolve_special_sets(allowed_special, disallowed_special, frozenset(tok.special_tokens_set))
    eot_token, eot_id = resolve_eot(tok, eot)
    return Spec(tokenizer=identity, dtype=resolve_dtype(tok, dtype), eot_token=eot_token,
                eot_id=eot_id, allowed=tuple(sorted(allowed)), disallowed=tuple(sorted(disallowed)),
                errors=_check_errors(errors))


def shard_stem(index: int, key: dict) -> str:
    """``shard-NNNNNN-<first 12 hex of sha256(key)>``.

    >>> shard_stem(3, {"a": 1})
    'shard-000003-015abd7f5cc5'
    """
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()
    return f"shard-{index:06d}-{digest[:12]}"


# --------------------------------------------------------------------------- encoding
def encode_pieces(tok, pieces: list[str], spec: Spec, num_threads: int) -> tuple[np.ndarray, np.ndarray]:
    """``corpus.encode_pieces`` under the spec's dtype and special-token rule."""
    return _corpus.encode_pieces(tok, pieces, num_threads, allowed_special=frozenset(spec.allowed),
                                 disallowed_special=frozenset(spec.disallowed), dtype=DTYPES[spec.dtype])


def _write_stream(tok, blocks: Iterable, spec: Spec, fb, fi, shard: int, num_threads: int, bar) -> dict:
    """Encode ``blocks`` into the open ``.bin`` (``fb``) and ``.idx`` (``fi``); the counts
    and checksums. Holds one block's ids at a time."""
    eot = spec.eot_id
    hb, hi = hashlib.sha256(), hashlib.sha256()

    def put(fh, h, arr):
        arr = np.ascontiguousarray(arr)
        fh.write(arr)
        h.update(arr)

    put(fi, hi, np.zeros(1, IDX_DTYPE))
    n_tokens = n_docs = n_bytes = 0
    last_open, open_chars, where = False, 0, "the first block"
    for block in blocks:
        pieces = block.pieces()
        where = block.where(0)
        if not pieces:
            continue
        try:
            ids, offsets = encode_pieces(tok, pieces, spec, num_threads)
        except ValueError:
            found = _corpus.refused(tok, pieces, block.where, frozenset(spec.allowed), frozenset(spec.disallowed),
                                    n_docs, open_chars if last_open else 0, shard)
            if found is None:
                raise
            raise found from None
        n_close = len(pieces) - 1 if block.last_open else len(pieces)
        ends = offsets[1:n_close + 1]
        if eot is not None and n_close:
            ids = np.insert(ids, ends, eot)        # one EOT after each whole document
            ends = ends + np.arange(1, n_close + 1)
        put(fb, hb, ids)
        put(fi, hi, (ends + n_tokens).astype(IDX_DTYPE))
        n_tokens += len(ids)
        n_docs += n_close
        n_bytes += len(block.data)
        # characters already written of the document left open (for error positions)
        if block.last_open:
            open_chars = (open_chars if last_open and len(pieces) == 1 else 0) + len(pieces[-1])
        last_open = block.last_open
        if bar is not None:
            bar.update(len(block.data))
    if last_open:
        raise ValueError(f"{where}: the task's last block leaves a document open (last_open=True); "
                         "its blocks must end at a document end")
    return {"tokens": n_tokens, "documents": n_docs, "bytes": n_bytes, "sha256": hb.hexdigest(),
            "idx_sha256": hi.hexdigest()}


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with builtins.open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _check_files(folder: Path, info: dict, itemsize: int) -> str | None:
    """What is wrong with the files of a shard (sizes, checksums), or None."""
    for name, size, digest in ((info["bin"], info["tokens"] * itemsize, info["sha256"]),
                               (info["idx"], (info["documents"] + 1) * IDX_DTYPE.itemsize, info["idx_sha256"])):
        path = folder / name
        try:
            if path.stat().st_size != size:
                return f"{path}: {path.stat().st_size} bytes, not the {size} its sidecar and the manifest record"
            if _sha256_file(path) != digest:
                return f"{path}: sha256 does not match the manifest"
        except FileNotFoundError:
            return f"{path}: missing"
    return None


def _complete(folder: Path, stem: str, key: dict, itemsize: int) -> dict | None:
    """The sidecar of a complete shard ``stem`` made from ``key``, else None."""
    try:
        info = json.loads((folder / f"{stem}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or info.get("key") != key:
        return None
    try:
        return info if _check_files(folder, info, itemsize) is None else None
    except (KeyError, TypeError):
        return None


def _progress_bar(progress, total: int | None = None, desc: str = "shards"):
    """A tqdm bar of text bytes for ``progress=True``; None for False; else ``progress``
    itself (anything with ``update(n)``)."""
    if progress is True:
        from tqdm.auto import tqdm

        return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1000, desc=desc, file=sys.stderr)
    if progress is False or progress is None:
        return None
    if not hasattr(progress, "update"):
        raise TypeError(f"progress must be a bool or a progress bar, not {type(progress).__name__}")
    return progress


def _cutter(tok, cut):
    return _corpus.cutter(tok) if cut is DEFAULT else cut


def write_task(tok, task, out_dir, index: int, spec: Spec, *, num_threads: int = 1, cut=DEFAULT,
               block_bytes: int = BLOCK_BYTES, progress=False) -> dict:
    """Write the shard of one task (the unit a Dask worker runs); return its sidecar dict
    plus ``"skipped": True`` when a complete shard was already there.

    ``index``: the task's place in the corpus. ``spec``: ``make_spec``'s. ``cut``: the
    document cutter handed to ``task.blocks`` (DEFAULT: the tokenizer's
    ``corpus.cutter(tok)``). ``progress``: a bar (``update(n)``) for the
    text bytes, True for a tqdm bar, or False.
    """
    out = Path(out_dir)
    key = spec.task_key(task.key())
    stem = shard_stem(index, key)
    itemsize = DTYPES[spec.dtype].itemsize
    bar = _progress_bar(progress)
    done = _complete(out, stem, key, itemsize)
    if done is not None:
        if bar is not None:
            bar.update(done["bytes"])
        return {**done, "skipped": True}
    side = out / f"{stem}.json"
    side.unlink(missing_ok=True)  # a stale sidecar must not vouch for the files about to be replaced
    # read ahead on a thread: reading overlaps encoding (fastbpe.io.prefetch)
    blocks = _prefetch(task.blocks(cut=_cutter(tok, cut), errors=spec.errors, block_bytes=block_bytes))
    try:
        # the .idx is renamed first, then the .bin, whose folder fsync makes both durable
        with atomic_open(out / f"{stem}.bin", clean=False) as fb, \
                atomic_open(out / f"{stem}.idx", clean=False, sync_dir=False) as fi:
            counts = _write_stream(tok, blocks, spec, fb, fi, index, num_threads, bar)
    finally:
        close = getattr(blocks, "close", None)
        if close is not None:
            close()
    info = {"format": FORMAT, "version": VERSION, "index": index, "key": key, "bin": f"{stem}.bin",
            "idx": f"{stem}.idx", **counts}
    # last: its presence says the shard files are complete
    atomic_write_text(side, json.dumps(info, indent=1) + "\n")
    return {**info, "skipped": False}


def prepare(out_dir) -> Path:
    """Make ``out_dir`` (absolute) and remove the stale temporaries of killed runs."""
    out = Path(out_dir).absolute()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):   # the OS's errno names no role
        blocker = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), out)
        raise ValueError(f"{out_dir}: shards are written to a folder, and {blocker} is a file") from None
    clean_stale_temps_in(out)
    return out


def commit(out_dir, sidecars: list[dict], spec: Spec, *, document_rule=None) -> dict:
    """Write ``manifest.json`` for ``sidecars`` (``write_task``'s, in corpus order) atomically,
    then delete the shard files it does not list; return the manifest (plus ``"skipped"``:
    how many shards were kept from an earlier run, which is not written)."""
    out = Path(out_dir)
    if [s["index"] for s in sidecars] != list(range(len(sidecars))):
        raise ValueError("commit needs the sidecars of tasks 0, 1, ... in corpus order")
    shards = [{k: s[k] for k in ("bin", "idx", "tokens", "documents", "bytes", "sha256", "idx_sha256")}
              | {"source": s["key"]["source"]} for s in sidecars]
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "tokenizer": spec.tokenizer,
        "dtype": spec.dtype,
        "byteorder": "little",
        "eot": {"rule": "one token after every document" if spec.eot_id is not None else "none",
                "token": spec.eot_token, "id": spec.eot_id},
        "special_tokens": {"allowed": list(spec.allowed), "disallowed": list(spec.disallowed),
                           "rule": "allowed: their id; disallowed: refused; others: encoded as text"},
        "document_rule": document_rule,
        "documents": sum(s["documents"] for s in shards),
        "tokens": sum(s["tokens"] for s in shards),
        "bytes": sum(s["bytes"] for s in shards),
        "shards": shards,
    }
    atomic_write_text(out / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    # only now: a reader holding the old manifest saw its files until this point
    listed = {name for s in shards for name in (s["bin"], s["idx"])} | {s["bin"][:-4] + ".json" for s in shards}
    for p in out.iterdir():
        if _SHARD_FILE.fullmatch(p.name) and p.name not in listed:
            p.unlink(missing_ok=True)
    clean_stale_temps_in(out)
    fsync_dir(out)
    return {**manifest, "skipped": sum(1 for s in sidecars if s.get("skipped"))}


def _total_bytes(tasks) -> int | None:
    sizes = [getattr(t, "nbytes", None) for t in tasks]
    return None if any(s is None for s in sizes) else sum(sizes)


def write_shards(tok, tasks, out_dir, *, dtype=None, eot=DEFAULT, allowed_special=frozenset(),
                 disallowed_special="all", errors: str = "strict", num_threads: int = 1, cut=DEFAULT,
                 block_bytes: int = BLOCK_BYTES, document_rule=None, progress=True) -> dict:
    """Encode ``tasks`` (``fastbpe.io``'s ``Corpus.plan()``) into shards in ``out_dir``, in
    this process, in order, each block on ``num_threads`` native threads; then ``commit``.
    Returns the manifest (see the module docstring for everything else)."""
    num_threads = check_num_threads(num_threads)
    block_bytes = check_int("block_bytes", block_bytes, low=1)
    spec = make_spec(tok, dtype=dtype, eot=eot, allowed_special=allowed_special,
                     disallowed_special=disallowed_special, errors=errors)
    tasks = list(tasks)
    out = prepare(out_dir)
    bar = _progress_bar(progress, _total_bytes(tasks))
    try:
        sidecars = [write_task(tok, t, out, i, spec, num_threads=num_threads, cut=cut, block_bytes=block_bytes,
                               progress=bar if bar is not None else False) for i, t in enumerate(tasks)]
    finally:
        if bar is not None and progress is True:
            bar.close()
    return commit(out, sidecars, spec, document_rule=document_rule)


# --------------------------------------------------------------------------- reading
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SHARD_NAME = re.compile(r"shard-(\d{6})-([0-9a-f]{12})\.(bin|idx)")


def _count(obj: dict, key: str, where: str, source: str) -> int:
    """A count of the manifest: an int >= 0."""
    value = _field(obj, key, int, where, source)
    if value < 0:
        raise ValueError(f"{source}: {where + '.' if where else ''}{key} is {value}, not a count (>= 0)")
    return value


def _digest(obj: dict, key: str, where: str, source: str) -> str:
    value = _field(obj, key, str, where, source)
    if not _SHA256.fullmatch(value):
        raise ValueError(f"{source}: {where}.{key} is {_show(value, 80)}, not a sha256 (64 lowercase hex digits)")
    return value


def _shard_name(s: dict, key: str, k: int, source: str) -> str:
    """``shards[k].bin``/``.idx``: a plain name inside the folder (no path separator, no
    ``..``, not absolute: the writer's pattern), of the shard at place ``k``."""
    where = f"shards[{k}]"
    name = _field(s, key, str, where, source)
    m = _SHARD_NAME.fullmatch(name)
    if m is None or m.group(3) != key:
        raise ValueError(f"{source}: {where}.{key} is {_show(name)}, not a shard file of this folder "
                         f"(shard-NNNNNN-<12 hex digits>.{key}: a name, never a path)")
    if int(m.group(1)) != k:
        raise ValueError(f"{source}: {where}.{key} is {name}, the file of shard {int(m.group(1))}, at place {k}: "
                         "the shards are out of corpus order")
    return name


def check_manifest(manifest, source: str) -> dict:
    """``manifest`` (parsed ``manifest.json``) with every field checked: types, ranges,
    shard names (plain names of this folder, in corpus order, ``.bin`` and ``.idx`` of
    one stem), totals equal to the sums of the shards; else a ValueError naming
    ``source`` (the manifest's path) and the field."""
    _expect(manifest, dict, "the top level", source)
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise ValueError(f"{source}: not a {FORMAT} version {VERSION} manifest "
                         f"(format {_show(manifest.get('format'))}, version {_show(manifest.get('version'))})")
    tok = _field(manifest, "tokenizer", dict, "", source)
    _field(tok, "name", str, "tokenizer", source)
    if _field(tok, "kind", str, "tokenizer", source) not in KINDS:
        raise ValueError(f"{source}: tokenizer.kind is {_show(tok['kind'])}, not one of {', '.join(map(_show, KINDS))}")
    n_vocab = _count(tok, "n_vocab", "tokenizer", source)
    _digest(tok, "sha256", "tokenizer", source)
    dtype = _field(manifest, "dtype", str, "", source)
    if dtype not in DTYPES:
        raise ValueError(f"{source}: dtype is {_show(dtype)}, not one of {sorted(DTYPES)}")
    if n_vocab - 1 > np.iinfo(DTYPES[dtype]).max:
        raise ValueError(f"{source}: dtype {dtype} cannot hold the ids of tokenizer.n_vocab {n_vocab}")
    if _field(manifest, "byteorder", str, "", source) != "little":
        raise ValueError(f"{source}: byteorder is {_show(manifest['byteorder'])}, not \"little\"")
    eot = _field(manifest, "eot", dict, "", source)
    rule = _field(eot, "rule", str, "eot", source)
    token = _field(eot, "token", (str, None), "eot", source)
    eot_id = _field(eot, "id", (int, None), "eot", source)
    if (rule == "none") != (token is None) or (token is None) != (eot_id is None) or \
            rule not in ("none", "one token after every document"):
        raise ValueError(f"{source}: eot is {_show(eot, 120)}: a rule \"one token after every document\" with "
                         "its token and id, or \"none\" with neither")
    if eot_id is not None and not 0 <= eot_id < n_vocab:
        raise ValueError(f"{source}: eot.id is {eot_id}, outside tokenizer.n_vocab {n_vocab}")
    special = _field(manifest, "special_tokens", dict, "", source)
    for key in ("allowed", "disallowed"):
        for i, t in enumerate(_field(special, key, list, "special_tokens", source)):
            _expect(t, str, f"special_tokens.{key}[{i}]", source)
    _field(special, "rule", str, "special_tokens", source)
    _field(manifest, "document_rule", (dict, None), "", source)
    totals = {key: _count(manifest, key, "", source) for key in ("documents", "tokens", "bytes")}
    shards = _field(manifest, "shards", list, "", source)
    for k, s in enumerate(shards):
        where = f"shards[{k}]"
        _expect(s, dict, where, source)
        stems = {_shard_name(s, key, k, source)[:-4] for key in ("bin", "idx")}
        if len(stems) != 1:
            raise ValueError(f"{source}: {where}.bin and .idx are {s['bin']} and {s['idx']}, not one shard's")
        for key in ("tokens", "documents", "bytes"):
            _count(s, key, where, source)
        for key in ("sha256", "idx_sha256"):
            _digest(s, key, where, source)
        _field(s, "source", dict, where, source)
    for key, total in totals.items():
        if sum(s[key] for s in shards) != total:
            raise ValueError(f"{source}: {key} is {total}, not the sum of the shards' {key} "
                             f"({sum(s[key] for s in shards)})")
    return manifest


def _shard_file(folder: Path, name: str, size: int, what: str) -> Path:
    """``folder / name``, a regular file of ``size`` bytes inside ``folder`` (a symlink
    must resolve into it); else a ValueError naming it, its size and the expected one."""
    path = folder / name
    try:
        have = path.stat().st_size
    except FileNotFoundError:
        raise ValueError(f"{path}: missing; {MANIFEST} lists it ({what}: {size} bytes)") from None
    if path.is_symlink() and path.resolve().parent != folder.resolve():
        raise ValueError(f"{path}: a symlink to {path.resolve()}, outside the folder; a shard file stays inside it")
    if have != size:
        raise ValueError(f"{path}: {have} bytes, not the {size} of {what} that {MANIFEST} records")
    return path


def _map(path: Path, dtype: np.dtype, n: int) -> np.ndarray:
    """``path`` memory-mapped read-only (an empty file has nothing to map)."""
    if n == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=(n,))


class ShardSet:
    """A shard directory, read through its manifest (``open``).

    ``len()`` is the number of tokens, ``documents`` the number of documents; iterating
    gives each shard as ``(tokens, idx)`` memmaps; ``tokens`` lists the shards' token
    memmaps (opened once, kept: one open file each); ``doc(i)`` is document ``i`` of the
    corpus (EOT included); ``read()`` copies the whole stream into memory; ``verify()``
    reads every file and checks it against the manifest and the sidecars.

    Opening checks every field of the manifest (``check_manifest``) and that every
    ``.bin`` and ``.idx`` it lists is there, inside the folder, with the size the
    manifest gives it: a ValueError names the folder's file and the field. It reads no
    token: ``verify()`` does.
    """

    def __init__(self, path, tokenizer=None):
        self.path = Path(path)
        source = str(self.path / MANIFEST)
        try:
            text = (self.path / MANIFEST).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise FileNotFoundError(f"{self.path}: no {MANIFEST} (not a shard directory, or no run finished)") from None
        except UnicodeDecodeError as exc:
            raise ValueError(f"{source}: not UTF-8 (byte {exc.start})") from None
        try:
            manifest = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{source}: not JSON ({exc})") from None
        except RecursionError:
            raise ValueError(f"{source}: not JSON (nested too deeply)") from None
        self.manifest = check_manifest(manifest, source)
        self.dtype = DTYPES[manifest["dtype"]]
        self.shards = manifest["shards"]
        if tokenizer is not None:
            self.check_tokenizer(tokenizer)
        for k, s in enumerate(self.shards):
            _shard_file(self.path, s["bin"], s["tokens"] * self.dtype.itemsize,
                        f"shards[{k}].tokens = {s['tokens']} {manifest['dtype']} tokens")
            _shard_file(self.path, s["idx"], (s["documents"] + 1) * IDX_DTYPE.itemsize,
                        f"shards[{k}].documents + 1 = {s['documents'] + 1} uint64 offsets")
        self._doc_starts = [0]
        for s in self.shards:
            self._doc_starts.append(self._doc_starts[-1] + s["documents"])
        self._open: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def check_tokenizer(self, tok) -> None:
        """ValueError unless ``tok`` is the tokenizer the folder was written with (the
        same ``tokenizer_identity`` sha256: the same ids for every document)."""
        mine, theirs = tokenizer_identity(tok), self.manifest["tokenizer"]
        if mine["sha256"] != theirs["sha256"]:
            raise ValueError(
                f"{self.path}: written by tokenizer {theirs['name']!r} ({theirs['kind']}, {theirs['n_vocab']} ids, "
                f"sha256 {theirs['sha256'][:12]}…), not by this one ({mine['name']!r}, {mine['kind']}, "
                f"{mine['n_vocab']} ids, sha256 {mine['sha256'][:12]}…): its ids mean other tokens")

    def __repr__(self) -> str:
        return f"ShardSet({str(self.path)!r}: {len(self.shards)} shards, {self.documents} documents, {len(self)} tokens)"

    def __len__(self) -> int:
        return int(self.manifest["tokens"])

    @property
    def documents(self) -> int:
        return int(self.manifest["documents"])

    def shard(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Shard ``k`` as ``(tokens, idx)`` memmaps."""
        if k not in self._open:
            s = self.shards[k]
            self._open[k] = (_map(self.path / s["bin"], self.dtype, s["tokens"]),
                             _map(self.path / s["idx"], IDX_DTYPE, s["documents"] + 1))
        return self._open[k]

    def __iter__(self):
        for k in range(len(self.shards)):
            yield self.shard(k)

    @property
    def tokens(self) -> list[np.ndarray]:
        return [t for t, _ in self]

    def doc(self, i: int) -> np.ndarray:
        """Document ``i`` (negative counts from the end), its EOT included."""
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"a document index is an int, not {type(i).__name__}")
        n = self.documents
        j = int(i) + n if i < 0 else int(i)
        if not 0 <= j < n:
            raise IndexError(f"document {i} out of range ({n} documents)")
        k = bisect.bisect_right(self._doc_starts, j) - 1
        tokens, idx = self.shard(k)
        j -= self._doc_starts[k]
        a, b = int(idx[j]), int(idx[j + 1])
        if not a <= b <= len(tokens):
            raise ValueError(f"{self.path / self.shards[k]['idx']}: offsets {j} and {j + 1} are {a} and {b}, "
                             f"not a range of the shard's {len(tokens)} tokens (run verify())")
        return tokens[a:b]

    def read(self) -> np.ndarray:
        """The whole token stream, in memory (for small corpora and tests)."""
        return np.concatenate(self.tokens) if self.shards else np.zeros(0, self.dtype)

    def verify(self) -> None:
        """Read every file: a ValueError names the first whose size or sha256 differs from
        the manifest, whose offsets are not a valid index, or whose sidecar disagrees with
        the manifest (another key: the tokenizer, dtype, EOT or special-token rule the
        shard was written with, or its source; another place; other counts or checksums)
        or with its own name (the name carries the sha256 of the key)."""
        source = self.path / MANIFEST
        m = self.manifest
        rule = {"tokenizer": m["tokenizer"]["sha256"], "dtype": m["dtype"], "eot": m["eot"]["id"],
                "allowed_special": m["special_tokens"]["allowed"],
                "disallowed_special": m["special_tokens"]["disallowed"], "format": FORMAT, "version": VERSION}
        for k, s in enumerate(self.shards):
            problem = _check_files(self.path, s, self.dtype.itemsize)
            if problem is not None:
                raise ValueError(problem)
            _, idx = self.shard(k)
            if idx[0] != 0 or idx[-1] != s["tokens"] or (len(idx) > 1 and (np.diff(idx.astype(np.int64)) < 0).any()):
                raise ValueError(f"{self.path / s['idx']}: offsets are not 0 ... {s['tokens']}, non-decreasing")
            stem = s["bin"][:-4]
            side_path = self.path / f"{stem}.json"
            try:
                side = json.loads(side_path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                raise ValueError(f"{side_path}: missing (every shard has its sidecar)") from None
            except ValueError as exc:
                raise ValueError(f"{side_path}: not JSON ({exc})") from None
            key = side.get("key") if isinstance(side, dict) else None
            if not isinstance(key, dict) or shard_stem(k, key) != stem:
                raise ValueError(f"{side_path}: its key does not hash to the name {stem} (edited, or another shard's)")
            for name, want in rule.items():
                if key.get(name) != want:
                    raise ValueError(f"{source}: shard {k} was written with {name} {_show(key.get(name), 80)}, "
                                     f"not the manifest's {_show(want, 80)} ({side_path.name})")
            if key["source"] != s["source"]:
                raise ValueError(f"{source}: shards[{k}].source is not the source shard {k} was written from "
                                 f"({side_path.name})")
            for name in ("index", "bin", "idx", "tokens", "documents", "bytes", "sha256", "idx_sha256"):
                want = k if name == "index" else s[name]
                if side.get(name) != want:
                    raise ValueError(f"{source}: shards[{k}].{name} is {_show(want)}, its sidecar {side_path.name} "
                                     f"says {_show(side.get(name))}")


def open(path, tokenizer=None) -> ShardSet:  # noqa: A001 - fastbpe.shards.open(dir), as in the docs
    """Read the shard directory ``path`` (``ShardSet``); with ``tokenizer``, a ValueError
    unless the folder was written by it (``ShardSet.check_tokenizer``)."""
    return ShardSet(path, tokenizer)


def read_shards(path) -> np.ndarray:
    """The whole token stream of a shard directory, in memory."""
    return ShardSet(path).read()


__all__ = [
    "BLOCK_BYTES", "DEFAULT", "DisallowedSpecialInDocument", "ShardSet", "Spec", "check_manifest", "commit", "document_ids_batch",
    "encode_pieces", "make_spec", "open", "prepare", "read_shards", "resolve_dtype", "resolve_eot", "shard_stem",
    "tokenizer_identity", "write_shards", "write_task",
]
