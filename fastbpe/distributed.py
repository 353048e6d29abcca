"""Beyond one machine: chunk counting and corpus encoding on a Dask cluster.

Install with ``pip install fastbpe[dask]`` (``dask[distributed]`` and ``fsspec``). Every
worker needs fastbpe installed too (the same version as the client).

Training (``count_chunks_distributed``)
    The read-and-count phase of ``train_bpe`` runs as one Dask task per byte range of
    each input file (ranges start at line starts, see ``fastbpe._data.split_ranges``).
    Each task returns a ``{chunk bytes: count}`` table; tables are summed by a tree
    reduction on the workers, so the client receives only the final unique-chunk table,
    never raw text. Because documents are lines and chunks never cross a document, the
    counts, hence the merges, equal single-machine training on the same files.

Encoding a corpus (``encode_files``)
    The corpus is the documents of ``paths`` in order: every line of every file
    (``docs="lines"``, the same documents as training) or every file as one document
    (``docs="file"``). Each document is encoded with ``encode_ordinary`` (text that
    looks like a special token is ordinary text: a corpus must not be able to inject
    control tokens) and, when ``eot`` is true and the encoding has ``<|endoftext|>``,
    followed by that one token. So the corpus's tokens are
    ``doc0 EOT doc1 EOT ... docN EOT``: exactly one EOT between two documents (and one
    after the last), and the concatenation of the shards in manifest order equals
    encoding the corpus on one machine (``encode_corpus_local``).

    One task = one shard = one byte range of one file (a ``.gz`` file, a file that can't
    seek, or any file with ``docs="file"`` is one range). A shard is
    ``shard-NNNNNN.bin`` (raw little-endian uint16 when every id fits, else uint32),
    ``shard-NNNNNN.idx.npy`` (int64, ``documents + 1`` offsets: document ``i`` of the
    shard, its EOT included, is ``tokens[idx[i]:idx[i+1]]``) and a sidecar
    ``shard-NNNNNN.json`` (what the shard was made from and the sha256 of both files).
    ``manifest.json`` lists the shards in corpus order with their token and document
    counts and checksums; it is written last. A training loader can ``np.memmap`` each
    ``.bin`` with the manifest's ``dtype``; ``load_shards`` reads and verifies a whole
    (small) corpus. With ``docs="file"`` each file is read into memory whole.

    Crash safety and resume: every file is written under a temporary name, flushed,
    fsynced and renamed (``os.replace``, atomic on POSIX), so a worker that dies
    mid-shard leaves at worst a ``*.tmp-*`` file (removed by the next run), never a
    half-written file under a final name. The sidecar is renamed into place after the
    shard files, so a shard counts as complete only when its sidecar exists and both
    files still hash to the sidecar's checksums. A rerun skips complete shards that
    were made from the same source range, encoding, dtype and options, and redoes the
    others. ``out_dir`` must be a directory every worker can write (local disk for
    ``client=None`` or a ``LocalCluster``, a shared filesystem on a real cluster);
    inputs may be any fsspec URL. Two runs must not write the same ``out_dir`` at once.

Inputs: files only (a path, a list of paths), checked on the client by ``fastbpe._data``'s
rules (a missing file is an error naming it, a local directory stands for its files);
local paths must be readable at the same path on every worker (a shared
filesystem on a real cluster). Remote inputs (``s3://…``, ``gs://…``, ``https://…``;
any fsspec URL with its backend installed on the client and the workers): ranges are
cut at line starts by seeking with fsspec; a gzip file or a file that can't seek is one
range. The client only stats the inputs and reads a line around each cut.

Count tables travel as plain ``dict``s: pickled, a table of 55k unique chunks (10 MB of
Python sources) is 0.7 MB and takes ~25 ms each way, smaller and no slower than packed
numpy arrays (bytes + offsets + int64 counts, 1.3 MB), which would still have to be
rebuilt into a dict to be summed.
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import io
import json
import math
import os
import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from . import _data

_INSTALL_HINT = "pip install fastbpe[dask]"

#: A byte range is at least this long (smaller ones cost more in task overhead than
#: they gain in parallelism) and at most this long (the unit a worker retries).
MIN_RANGE_BYTES = 4 << 20
MAX_RANGE_BYTES = 256 << 20

#: Text handed to the encoder per call: big enough to amortise the call, small enough
#: to keep a worker's memory flat.
ENCODE_BLOCK_BYTES = 4 << 20

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "fastbpe-shards/1"
EOT_TEXT = "<|endoftext|>"


def _require_dask(what: str):
    """Import ``distributed`` (and ``fsspec``) or raise an ImportError saying what to install."""
    try:
        import distributed  # noqa: F401
        import fsspec  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"{what} needs Dask and fsspec, which are optional: `{_INSTALL_HINT}` "
            f"(installs dask[distributed] and fsspec). Original error: {exc}"
        ) from None
    return distributed


def _check_client(client, what: str):
    distributed = _require_dask(what)
    if not isinstance(client, distributed.Client):
        raise TypeError(f"client must be a dask.distributed.Client, not {type(client).__name__}")


# ----------------------------------------------------------------------------- inputs
def _is_local(path) -> bool:
    if isinstance(path, os.PathLike):
        return True
    return "://" not in path or path.startswith("file://")


def _local_path(path) -> Path:
    if isinstance(path, str) and path.startswith("file://"):
        path = path[len("file://"):]
    return Path(path)


def _normalize_paths(paths) -> list:
    """A path or a list of paths (str, PathLike or fsspec URL) as a list of absolute
    local ``Path``s (checked, directories expanded: ``_data``'s rules) and URL strs."""
    items = _data.file_list(paths)
    if not items:
        raise ValueError("no input files given")
    out = []
    for p in items:
        if _is_local(p):
            # absolute: a worker's working directory need not be the client's
            out.extend(f.absolute() for f in _data.local_files(_local_path(p)))
        else:
            out.append(str(p))
    return out


def _fs(url: str):
    try:
        import fsspec
    except ImportError:
        raise ImportError(f"reading {url} needs fsspec, which is optional: `{_INSTALL_HINT}`") from None
    return fsspec.core.url_to_fs(url)


def _open_remote_binary(url: str):
    """An fsspec file, gunzipped on the fly when it starts with the gzip magic."""
    fs, p = _fs(url)
    fh = fs.open(p, "rb")
    head = fh.read(2)
    try:
        fh.seek(0)
    except (OSError, ValueError, io.UnsupportedOperation):
        fh.close()
        fh = fs.open(p, "rb")
    if head == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=fh, mode="rb")
    return fh


def _check_exists(path) -> None:
    if isinstance(path, Path):
        return  # checked by _normalize_paths (_data.local_files)
    fs, p = _fs(path)
    if not fs.exists(p):
        raise FileNotFoundError(f"input file not found: {path}")
    if fs.isdir(p):
        raise IsADirectoryError(f"input is a directory, not a file: {path} (remote directories are "
                                "not expanded: list their files)")


def _size(path) -> int:
    if isinstance(path, Path):
        return path.stat().st_size
    fs, p = _fs(path)
    return int(fs.size(p))


def _source_version(path) -> str:
    """What tells that an input changed (then its shards are redone on resume): size and
    mtime for a local file, fsspec's ``ukey`` (e.g. size + ETag/mtime) for a remote one."""
    if isinstance(path, Path):
        st = path.stat()
        return f"{st.st_size}:{st.st_mtime_ns}"
    fs, p = _fs(path)
    return str(fs.ukey(p))


def _split_remote(url: str, n_parts: int) -> list[tuple[int, int]]:
    """``_data.split_ranges`` for an fsspec URL: cut at line starts by seeking; one
    range for gzip or when the file can't seek."""
    fs, p = _fs(url)
    size = int(fs.size(p))
    if n_parts <= 1 or size == 0:
        return [(0, size)]
    try:
        with fs.open(p, "rb") as fh:
            if fh.read(2) == b"\x1f\x8b":
                return [(0, size)]
            cuts = [0]
            for i in range(1, n_parts):
                fh.seek(max(size * i // n_parts - 1, cuts[-1]))
                _data.skip_line(fh)
                pos = fh.tell()
                if cuts[-1] < pos < size:
                    cuts.append(pos)
    except (OSError, ValueError, io.UnsupportedOperation):
        return [(0, size)]
    cuts.append(size)
    return list(zip(cuts, cuts[1:]))


def plan_ranges(paths, ranges_per_file: int | None = None, n_workers: int = 1) -> list[tuple[object, int, int]]:
    """The units of work: ``(path, start, end)`` in corpus order.

    ``ranges_per_file=None`` sizes ranges so that there are about four per worker thread,
    each between ``MIN_RANGE_BYTES`` and ``MAX_RANGE_BYTES``.
    """
    if ranges_per_file is not None and (
        isinstance(ranges_per_file, bool) or not isinstance(ranges_per_file, int) or ranges_per_file < 1
    ):
        raise ValueError(f"ranges_per_file must be None or a positive int, got {ranges_per_file!r}")
    paths = _normalize_paths(paths)
    for p in paths:
        _check_exists(p)
    sizes = [_size(p) for p in paths]
    target = min(max(sum(sizes) // max(4 * n_workers, 1), MIN_RANGE_BYTES), MAX_RANGE_BYTES)
    plan = []
    for p, size in zip(paths, sizes):
        n = ranges_per_file if ranges_per_file is not None else max(1, math.ceil(size / target))
        cuts = _data.split_ranges(p, n) if isinstance(p, Path) else _split_remote(p, n)
        plan.extend((p, s, e) for s, e in cuts)
    return plan


def iter_range_documents(path, start: int, end: int, errors: str = "strict") -> Iterator[str]:
    """The lines of ``[start, end)`` of a local path or fsspec URL (see ``plan_ranges``)."""
    if isinstance(path, Path):
        yield from _data.iter_range_lines(path, start, end, errors)
        return
    with _open_remote_binary(path) as fh:
        is_gz = isinstance(fh, gzip.GzipFile)
        if is_gz and start != 0:
            raise ValueError(f"{path}: a gzip file can only be read as a whole")
        if not is_gz and start:
            fh.seek(start)
        yield from _data.iter_binary_lines(fh, path, start, None if is_gz else end, errors)


def _read_whole_text(path, errors: str) -> str:
    if isinstance(path, Path):
        return "".join(_data.iter_file_blocks(path, errors=errors))
    return "".join(iter_range_documents(path, 0, _size(path), errors))


def _n_worker_threads(client) -> int:
    try:
        return max(1, sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values()))
    except Exception:  # noqa: BLE001 - sizing is a hint only
        return 1


# ----------------------------------------------------------------------------- counting
def merge_counts(*tables: dict) -> dict:
    """Sum ``{key: count}`` tables (the combine step of the tree reduction).

    >>> merge_counts({b"a": 1, b"b": 2}, {b"a": 3})
    {b'a': 4, b'b': 2}
    """
    tables = sorted(tables, key=len, reverse=True)
    out = dict(tables[0])  # add the smaller tables into a copy of the largest
    for t in tables[1:]:
        get = out.get
        for k, v in t.items():
            out[k] = get(k, 0) + v
    return out


def _count_bpe_task(task, pat_str, special_tokens, errors):
    from . import train

    return train.count_task(task, pat_str, special_tokens, errors)


def _count_words_task(task, opts, errors):
    """WordPiece word counts of one task's documents (pieces cut before whitespace)."""
    from . import io as _io

    blocks = task.blocks(cut=_io.WordPieceCut(opts.special_tokens), errors=errors)
    return dict(_count_words_lines((p for b in blocks for p in b.pieces()), opts))


def plan_tasks(paths, n_workers: int = 1, ranges_per_file: int | None = None, *, docs=None, field=None,
               column=None) -> list:
    """The units of work (``fastbpe.io.Task``, picklable) in corpus order: byte ranges at
    document starts sized so that there are about four per worker thread, each between
    ``MIN_RANGE_BYTES`` and ``MAX_RANGE_BYTES`` (or ``ranges_per_file`` per file); a
    compressed or ``docs="file"`` file is one task, a Parquet file a task per row groups.
    Local paths are made absolute (a worker's working directory need not be the client's).
    """
    from . import io as _io

    if ranges_per_file is not None and (
        isinstance(ranges_per_file, bool) or not isinstance(ranges_per_file, int) or ranges_per_file < 1
    ):
        raise ValueError(f"ranges_per_file must be None or a positive int, got {ranges_per_file!r}")
    corpus = _io.Corpus.resolve(paths, docs=docs, field=field, column=column)
    for s in corpus.sources:
        if not _io.documents.streams.is_url(s.path):
            s.path = Path(s.path).absolute()
    if ranges_per_file is not None:
        return corpus.plan(n_parts=ranges_per_file, min_bytes=1)
    total = corpus.total_bytes() or 0
    target = min(max(total // max(4 * n_workers, 1), MIN_RANGE_BYTES), MAX_RANGE_BYTES)
    return corpus.plan(target_bytes=target)


def _tree_reduce(client, futures: list, split_every: int):
    """Sum count tables pairwise (``split_every`` at a time) on the workers."""
    if not futures:
        return {}
    level = 0
    while len(futures) > 1:
        level += 1
        futures = [
            client.submit(merge_counts, *futures[i:i + split_every], key=f"fastbpe-merge-{level}-{i}-{uuid.uuid4().hex}")
            if len(futures[i:i + split_every]) > 1 else futures[i]
            for i in range(0, len(futures), split_every)
        ]
    return futures[0].result()


def count_distributed(client, paths, count_task: Callable, *args, ranges_per_file: int | None = None,
                      split_every: int = 4, docs=None, field=None, column=None) -> dict:
    """Run ``count_task(task, *args) -> {key: count}`` as one Dask task per unit of
    ``plan_tasks(paths)`` and return the tree-reduced sum. ``count_task`` must be
    importable on the workers (a module-level function, or a ``functools.partial`` of one)."""
    _check_client(client, "distributed counting")
    if isinstance(split_every, bool) or not isinstance(split_every, int) or split_every < 2:
        raise ValueError(f"split_every must be an int >= 2, got {split_every!r}")
    plan = plan_tasks(paths, _n_worker_threads(client), ranges_per_file, docs=docs, field=field, column=column)
    tag = uuid.uuid4().hex
    futures = [client.submit(count_task, t, *args, key=f"fastbpe-count-{i}-{tag}") for i, t in enumerate(plan)]
    return _tree_reduce(client, futures, split_every)


def count_chunks_distributed(client, paths, pat_str: str, special_tokens: list[str], errors: str = "strict",
                             ranges_per_file: int | None = None, split_every: int = 4, *, docs=None,
                             field=None, column=None) -> dict[bytes, int]:
    """Phase 1 of ``train_bpe`` on a Dask cluster: ``{chunk bytes: count}`` over the
    documents of ``paths`` (local paths or fsspec URLs; ``docs``/``field``/``column`` as
    in ``fastbpe.io.Corpus.resolve``), equal to one machine's ``_train.count_chunks``.

    This is the hook ``train_bpe(..., client=client)`` calls with its validated
    ``pat_str`` and ``special_tokens``.
    """
    from . import io as _io

    _check_client(client, "train_bpe(client=...)")
    if not isinstance(pat_str, str):
        raise TypeError(f"pat_str must be a str, not {type(pat_str).__name__}")
    _io.check_errors(errors)
    return count_distributed(client, paths, _count_bpe_task, pat_str, list(special_tokens), errors,
                             ranges_per_file=ranges_per_file, split_every=split_every, docs=docs,
                             field=field, column=column)


def _count_words_lines(lines, opts):
    """WordPiece word counts of some lines: the native counter of ``train_wordpiece``
    (one thread: a Dask worker thread is the unit of parallelism), else the reference."""
    try:
        from .wordpiece import _count_words_native
    except ImportError:  # pragma: no cover - the native WordPiece core is not built
        from .reference.wordpiece import count_words

        return count_words(lines, opts)
    return _count_words_native(lines, opts, 1)


def _count_docs_task(task, count_docs, errors):
    """``count_docs`` over one task's documents, whole (no cutter: the caller's counts
    may depend on whole documents)."""
    return dict(count_docs(_whole_documents(task.blocks(errors=errors))))


def _whole_documents(blocks):
    pending = []
    for block in blocks:
        pieces = block.pieces()
        if pending:
            pieces[0] = "".join(pending) + pieces[0]
            pending = []
        if block.last_open:
            pending.append(pieces.pop())
        yield from pieces
    if pending:
        yield "".join(pending)


def count_documents_distributed(client, paths, count_docs: Callable[[Iterable[str]], dict], errors: str = "strict",
                                ranges_per_file: int | None = None, split_every: int = 4, *, docs=None,
                                field=None, column=None) -> dict:
    """Generic phase 1 for other trainers: ``count_docs(iterable of documents) ->
    {key: count}`` per task, tree-summed."""
    from . import io as _io

    _io.check_errors(errors)
    return count_distributed(client, paths, _count_docs_task, count_docs, errors, ranges_per_file=ranges_per_file,
                             split_every=split_every, docs=docs, field=field, column=column)


def count_words_distributed(client, paths, opts=None, errors: str = "strict",
                            ranges_per_file: int | None = None, split_every: int = 4, *, docs=None,
                            field=None, column=None):
    """Phase 1 of ``train_wordpiece`` on a Dask cluster: the ``Counter`` of normalised,
    pre-tokenised words over the documents of ``paths``, equal to
    ``reference.wordpiece.count_words(Corpus.resolve(paths, ...).documents(), opts)``.

    ``opts`` is a ``reference.wordpiece.BertOptions`` (default: BERT uncased).
    """
    from collections import Counter

    from . import io as _io
    from .reference import wordpiece as ref_wordpiece

    _check_client(client, "train_wordpiece(client=...)")
    opts = opts if opts is not None else ref_wordpiece.BertOptions()
    if not isinstance(opts, ref_wordpiece.BertOptions):
        raise TypeError(f"opts must be a BertOptions, not {type(opts).__name__}")
    _io.check_errors(errors)
    return Counter(count_distributed(client, paths, _count_words_task, opts, errors,
                                     ranges_per_file=ranges_per_file, split_every=split_every, docs=docs,
                                     field=field, column=column))


# ----------------------------------------------------------------------------- encoding
def _encoding_fingerprint(encoding) -> str:
    """sha256 of what decides the ids: pattern, ranks and special tokens."""
    h = hashlib.sha256()
    h.update(encoding.pat_str.encode("utf-8") + b"\0")
    for tok, rank in sorted(encoding._mergeable_ranks.items(), key=lambda kv: kv[1]):
        h.update(rank.to_bytes(8, "little") + len(tok).to_bytes(4, "little") + tok)
    for tok, rank in sorted(encoding._special_tokens.items()):
        h.update(b"\1" + rank.to_bytes(8, "little") + tok.encode("utf-8") + b"\0")
    return h.hexdigest()


def _resolve_dtype(encoding, dtype) -> np.dtype:
    if dtype is None:
        return np.dtype("<u2") if encoding.max_token_value <= 0xFFFF else np.dtype("<u4")
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.uint16), np.dtype(np.uint32)):
        raise ValueError(f"dtype must be uint16 or uint32, not {dt}")
    if dt.itemsize == 2 and encoding.max_token_value > 0xFFFF:
        raise ValueError(f"dtype uint16 cannot hold ids of {encoding.name!r} (largest id {encoding.max_token_value}); use uint32")
    return dt.newbyteorder("<")


def _eot_id(encoding, eot: bool) -> int | None:
    return encoding.special_tokens.get(EOT_TEXT) if eot else None


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _tmp_name(final: Path) -> Path:
    return final.with_name(f"{final.name}.tmp-{uuid.uuid4().hex}")


def _atomic_write_bytes(final: Path, data: bytes) -> None:
    tmp = _tmp_name(final)
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()


def _iter_doc_batches(task: dict, errors: str) -> Iterator[list[str]]:
    """The documents of one task in batches of about ``ENCODE_BLOCK_BYTES`` characters."""
    path = _local_path(task["path"]) if task["local"] else task["path"]
    if task["docs"] == "file":
        yield [_read_whole_text(path, errors)]
        return
    batch, n = [], 0
    for line in iter_range_documents(path, task["start"], task["end"], errors):
        batch.append(line)
        n += len(line)
        if n >= ENCODE_BLOCK_BYTES:
            yield batch
            batch, n = [], 0
    if batch:
        yield batch


def _shard_is_complete(out_dir: Path, task: dict) -> dict | None:
    """The sidecar of a complete shard made from exactly ``task``, else None."""
    side = out_dir / f"{task['stem']}.json"
    try:
        info = json.loads(side.read_text())
    except (OSError, ValueError):
        return None
    if info.get("task") != task:
        return None
    try:
        if _sha256_file(out_dir / info["bin"]) != info["sha256"]:
            return None
        if _sha256_file(out_dir / info["idx"]) != info["idx_sha256"]:
            return None
    except (OSError, KeyError):
        return None
    return info


def _encode_shard(task: dict, encoding, out_dir: str, errors: str = "strict") -> dict:
    """Encode one byte range into ``<stem>.bin`` + ``<stem>.idx.npy`` + ``<stem>.json``.

    Returns the sidecar dict, with ``"skipped": True`` when a complete shard was there."""
    out_dir = Path(out_dir)
    done = _shard_is_complete(out_dir, task)
    if done is not None:
        return {**done, "skipped": True}
    dtype = np.dtype(task["dtype"])
    eot = task["eot_id"]
    stem = task["stem"]
    bin_final, idx_final, side_final = out_dir / f"{stem}.bin", out_dir / f"{stem}.idx.npy", out_dir / f"{stem}.json"
    # a stale sidecar must not vouch for the files about to be replaced
    side_final.unlink(missing_ok=True)
    bin_tmp = _tmp_name(bin_final)
    idx_tmp = idx_final.with_name(f"{stem}.idx.tmp-{uuid.uuid4().hex}.npy")
    h = hashlib.sha256()
    doc_lengths: list[np.ndarray] = []
    n_tokens = 0
    try:
        with open(bin_tmp, "wb") as fh:
            for batch in _iter_doc_batches(task, errors):
                # allowed_special=set() and disallowed_special=() is encode_ordinary
                ids, offsets = encoding.encode_batch_to_numpy(batch, num_threads=1, disallowed_special=(), dtype=dtype)
                lengths = np.diff(offsets)
                if eot is not None:
                    ids = np.insert(ids, offsets[1:], np.array(eot, dtype=dtype))
                    lengths = lengths + 1
                data = np.ascontiguousarray(ids, dtype=dtype).tobytes()
                fh.write(data)
                h.update(data)
                doc_lengths.append(lengths.astype(np.int64))
                n_tokens += len(ids)
            fh.flush()
            os.fsync(fh.fileno())
        lengths = np.concatenate(doc_lengths) if doc_lengths else np.zeros(0, np.int64)
        idx = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=idx[1:])
        with open(idx_tmp, "wb") as fh:
            np.save(fh, idx)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(bin_tmp, bin_final)
        os.replace(idx_tmp, idx_final)
    finally:
        bin_tmp.unlink(missing_ok=True)
        idx_tmp.unlink(missing_ok=True)
    info = {
        "task": task,
        "bin": bin_final.name,
        "idx": idx_final.name,
        "tokens": int(n_tokens),
        "documents": int(len(idx) - 1),
        "sha256": h.hexdigest(),
        "idx_sha256": _sha256_file(idx_final),
    }
    # the sidecar goes last: its presence says the shard files are complete
    _atomic_write_bytes(side_final, json.dumps(info, indent=1).encode("utf-8"))
    _fsync_dir(out_dir)
    return {**info, "skipped": False}


# local process pool: the Encoding is sent once per process, not once per task
_WORKER_ENCODING = None


def _init_local_worker(encoding) -> None:
    global _WORKER_ENCODING
    _WORKER_ENCODING = encoding


def _encode_shard_local(task: dict, out_dir: str, errors: str) -> dict:
    return _encode_shard(task, _WORKER_ENCODING, out_dir, errors)


def _remove_stale_tmp(out_dir: Path) -> None:
    for p in out_dir.glob("shard-*.tmp-*"):
        p.unlink(missing_ok=True)
    for p in out_dir.glob(f"{MANIFEST_NAME}.tmp-*"):
        p.unlink(missing_ok=True)


_SHARD_FILE = re.compile(r"(shard-\d{6})\.(bin|idx\.npy|json)")


def _remove_unlisted_shards(out_dir: Path, stems: set[str]) -> None:
    """Shards of an earlier run over more ranges: not in the manifest, so not data."""
    for p in out_dir.iterdir():
        m = _SHARD_FILE.fullmatch(p.name)
        if m and m.group(1) not in stems:
            p.unlink(missing_ok=True)


def encode_files(paths, encoding, out_dir, client=None, *, dtype=None, docs: str = "lines",
                 num_workers: int | None = None, eot: bool = True, errors: str = "strict",
                 ranges_per_file: int | None = None) -> dict:
    """Encode the documents of ``paths`` into token shards in ``out_dir``; return the manifest.

    ``paths``: a path or list of paths (text or ``.gz``; local or fsspec URLs).
    ``encoding``: a ``fastbpe.Encoding``. ``client``: a ``dask.distributed.Client``, or
    None to use ``num_workers`` local processes (default: all cores; 1 = this process).
    ``dtype``: ``uint16``/``uint32`` (default: uint16 when every id fits). ``docs``:
    ``"lines"`` (each line is a document) or ``"file"`` (each file is one). ``eot``:
    follow each document by ``<|endoftext|>`` if the encoding has it. See the module
    docstring for the shard format, the exact corpus rule and resume.
    """
    from .encoding import Encoding

    if not isinstance(encoding, Encoding):
        raise TypeError(f"encoding must be a fastbpe.Encoding, not {type(encoding).__name__}")
    if docs not in ("lines", "file"):
        raise ValueError(f"docs must be 'lines' or 'file', got {docs!r}")
    _data.check_errors(errors)
    if not isinstance(eot, bool):
        raise TypeError(f"eot must be a bool, not {type(eot).__name__}")
    if num_workers is not None and (isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1):
        raise ValueError(f"num_workers must be None or a positive int, got {num_workers!r}")
    if client is not None:
        _check_client(client, "encode_files(client=...)")
        import distributed
        n_threads = _n_worker_threads(client)
    else:
        n_threads = num_workers or os.cpu_count() or 1
    dt = _resolve_dtype(encoding, dtype)
    eot_id = _eot_id(encoding, eot)
    out_dir = Path(out_dir).absolute()
    out_dir.mkdir(parents=True, exist_ok=True)
    _remove_stale_tmp(out_dir)

    if docs == "file":
        plan = []
        for p in _normalize_paths(paths):
            _check_exists(p)
            plan.append((p, 0, _size(p)))
    else:
        plan = plan_ranges(paths, ranges_per_file, n_threads)
    fingerprint = _encoding_fingerprint(encoding)
    versions = {p: _source_version(p) for p in {p for p, _, _ in plan}}
    tasks = [
        {
            "stem": f"shard-{i:06d}",
            "path": str(p),
            "local": isinstance(p, Path),
            "start": int(s),
            "end": int(e),
            "source_version": versions[p],
            "docs": docs,
            "dtype": dt.str,
            "eot_id": eot_id,
            "encoding": fingerprint,
        }
        for i, (p, s, e) in enumerate(plan)
    ]
    # the manifest of a previous run describes files about to be rewritten
    (out_dir / MANIFEST_NAME).unlink(missing_ok=True)

    if client is not None:
        enc_future = client.scatter(encoding, broadcast=True, hash=False)
        tag = uuid.uuid4().hex
        futures = [
            client.submit(_encode_shard, t, enc_future, str(out_dir), errors, key=f"fastbpe-encode-{t['stem']}-{tag}")
            for t in tasks
        ]
        # let every task settle before reporting a failure: shards that finish are kept
        # for the rerun, and no task of this call still writes out_dir when it returns
        distributed.wait(futures)
        results = client.gather(futures)
    elif n_threads == 1 or len(tasks) <= 1:
        results = [_encode_shard(t, encoding, str(out_dir), errors) for t in tasks]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn: safe whatever threads the caller runs; the encoding pickles small
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(n_threads, len(tasks)), mp_context=ctx, initializer=_init_local_worker,
                                 initargs=(encoding,)) as pool:
            results = list(pool.map(_encode_shard_local, tasks, [str(out_dir)] * len(tasks),
                                    [errors] * len(tasks)))

    shards = []
    for r in results:
        t = r["task"]
        shards.append({
            "bin": r["bin"], "idx": r["idx"], "source": t["path"], "start": t["start"], "end": t["end"],
            "tokens": r["tokens"], "documents": r["documents"], "sha256": r["sha256"], "idx_sha256": r["idx_sha256"],
        })
    manifest = {
        "format": MANIFEST_FORMAT,
        "encoding": {"name": encoding.name, "n_vocab": encoding.n_vocab, "sha256": fingerprint},
        "dtype": dt.name,
        "docs": docs,
        "eot_token": eot_id,
        "total_tokens": sum(s["tokens"] for s in shards),
        "total_documents": sum(s["documents"] for s in shards),
        "shards": shards,
    }
    _atomic_write_bytes(out_dir / MANIFEST_NAME, json.dumps(manifest, indent=1).encode("utf-8"))
    _remove_stale_tmp(out_dir)  # left by attempts that died and were retried elsewhere
    _remove_unlisted_shards(out_dir, {t["stem"] for t in tasks})
    _fsync_dir(out_dir)
    manifest["skipped"] = sum(1 for r in results if r["skipped"])
    return manifest


# ----------------------------------------------------------------------------- reading back
def load_shards(out_dir) -> tuple[np.ndarray, np.ndarray]:
    """Read ``out_dir`` back as ``(tokens, doc_offsets)``, checking the manifest's
    checksums: the corpus's tokens and the int64 start of each document (plus the end)."""
    out_dir = Path(out_dir)
    manifest = json.loads((out_dir / MANIFEST_NAME).read_text())
    dtype = np.dtype(manifest["dtype"]).newbyteorder("<")
    parts, offsets, base = [], [np.zeros(1, np.int64)], 0
    for s in manifest["shards"]:
        raw = (out_dir / s["bin"]).read_bytes()
        if hashlib.sha256(raw).hexdigest() != s["sha256"]:
            raise ValueError(f"{out_dir / s['bin']}: checksum does not match {MANIFEST_NAME}")
        ids = np.frombuffer(raw, dtype=dtype)
        idx = np.load(out_dir / s["idx"])
        if len(ids) != s["tokens"] or len(idx) != s["documents"] + 1 or idx[-1] != len(ids):
            raise ValueError(f"{out_dir / s['bin']}: token or document count does not match {MANIFEST_NAME}")
        parts.append(ids)
        offsets.append(idx[1:] + base)
        base += len(ids)
    tokens = np.concatenate(parts) if parts else np.zeros(0, dtype)
    return tokens, np.concatenate(offsets)


def encode_corpus_local(paths, encoding, *, docs: str = "lines", eot: bool = True, errors: str = "strict") -> list[int]:
    """The corpus rule on one machine, plainly (the specification ``encode_files`` meets)."""
    eot_id = _eot_id(encoding, eot)
    out: list[int] = []
    for p in _normalize_paths(paths):
        if docs == "file":
            documents = [_read_whole_text(p, errors)]
        else:
            documents = iter_range_documents(p, 0, _size(p), errors)
        for doc in documents:
            out.extend(encoding.encode_ordinary(doc))
            if eot_id is not None:
                out.append(eot_id)
    return out


__all__ = [
    "count_chunks_distributed",
    "count_distributed",
    "count_documents_distributed",
    "plan_tasks",
    "count_words_distributed",
    "encode_corpus_local",
    "encode_files",
    "load_shards",
    "merge_counts",
    "plan_ranges",
]

