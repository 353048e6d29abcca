"""Beyond one machine: chunk counting and corpus encoding on a Dask cluster.

Install with ``pip install fastbpe[dask]`` (``dask[distributed]`` and ``fsspec``). Every
worker needs fastbpe installed too (the same version as the client).

Training (``count_chunks_distributed``)
    The read-and-count phase of ``train_bpe`` runs as one Dask task per ``fastbpe.io``
    task (``plan_tasks``: byte ranges that start at document starts, a compressed file
    or a ``docs="file"`` file whole, Parquet row groups). Each returns a ``{chunk bytes:
    count}`` table; tables are summed by a tree reduction on the workers, so the client
    receives only the final unique-chunk table, never raw text. Chunks never cross a
    document, and long documents are cut only where the counts don't change, so the
    counts, hence the merges, equal single-machine training on the same files.

Encoding a corpus (``encode_files``)
    The corpus is read by ``fastbpe.io`` (its document rules; ``Corpus.plan`` cuts it into
    tasks at document starts) and written in the one shard format of ``fastbpe.shards``
    (its docstring has the layout, the EOT rule, resume and crash safety). One Dask task
    runs ``shards.write_task`` for one planned part, on a worker; the client then runs
    ``shards.commit``, which writes the manifest last. So the cluster, this process
    (``client=None``) and ``fastbpe encode --shards`` write the same bytes for the same
    corpus and options. A worker that dies mid-shard leaves only temporaries, never a
    file under a final name; a rerun keeps the complete shards and redoes the others.
    ``out_dir`` must be a directory every worker can write (local disk for ``client=None``
    or a ``LocalCluster``, a shared filesystem on a real cluster). Two runs must not write
    the same ``out_dir`` at once.

Inputs: files only (a path, a list of paths), checked on the client by ``fastbpe.io``'s
rules (a missing file is an error naming it, a local directory stands for its files);
local paths are made absolute and must be readable at the same path on every worker (a
shared filesystem on a real cluster). Remote inputs (``s3://…``, ``gs://…``,
``https://…``; any fsspec URL with its backend installed on the client and the
workers) are cut at document starts by seeking with fsspec. The client only stats the
inputs and reads a little around each cut.

Count tables travel as plain ``dict``s: pickled, a table of 55k unique chunks (10 MB of
Python sources) is 0.7 MB and takes ~25 ms each way, smaller and no slower than packed
numpy arrays (bytes + offsets + int64 counts, 1.3 MB), which would still have to be
rebuilt into a dict to be summed.
"""
from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from . import shards
from .checks import check_int, check_num_threads, check_positive_int

_INSTALL_HINT = "pip install fastbpe[dask]"

#: A byte range is at least this long (smaller ones cost more in task overhead than
#: they gain in parallelism) and at most this long (the unit a worker retries).
MIN_RANGE_BYTES = 4 << 20
MAX_RANGE_BYTES = 256 << 20



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
    from .bpe import counting

    return counting.count_task(task, pat_str, special_tokens, num_threads=1, errors=errors)


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

    check_positive_int("ranges_per_file", ranges_per_file)
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
    split_every = check_int("split_every", split_every, low=2)
    plan = plan_tasks(paths, _n_worker_threads(client), ranges_per_file, docs=docs, field=field, column=column)
    tag = uuid.uuid4().hex
    futures = [client.submit(count_task, t, *args, key=f"fastbpe-count-{i}-{tag}") for i, t in enumerate(plan)]
    return _tree_reduce(client, futures, split_every)


def count_chunks_distributed(client, paths, pat_str: str, special_tokens: list[str], errors: str = "strict",
                             ranges_per_file: int | None = None, split_every: int = 4, *, docs=None,
                             field=None, column=None) -> dict[bytes, int]:
    """Phase 1 of ``train_bpe`` on a Dask cluster: ``{chunk bytes: count}`` over the
    documents of ``paths`` (local paths or fsspec URLs; ``docs``/``field``/``column`` as
    in ``fastbpe.io.Corpus.resolve``), equal to one machine's ``bpe.counting.count_chunks``.

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
        from .wordpiece.counting import _count_words_native
    except ImportError:  # pragma: no cover - the native WordPiece core is not built
        from .reference.wordpiece import count_words

        return count_words(lines, opts)
    return _count_words_native(lines, opts, 1)


def _count_docs_task(task, count_docs, errors):
    """``count_docs`` over one task's documents, whole (no cutter: the caller's counts
    may depend on whole documents)."""
    from .io.documents import whole_documents

    return dict(count_docs(whole_documents(task.blocks(errors=errors))))


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
def encode_files(paths, encoding, out_dir, client=None, *, docs: str | None = None, field: str | None = None,
                 column: str | None = None, dtype=None, eot=shards.DEFAULT, allowed_special=frozenset(),
                 disallowed_special="all", errors: str = "strict", num_threads: int | None = None,
                 n_parts: int | None = None, block_bytes: int = shards.BLOCK_BYTES, progress: bool = True) -> dict:
    """Encode the documents of ``paths`` into ``fastbpe.shards``' format in ``out_dir``;
    return the manifest (plus ``"skipped"``: shards kept from an earlier run).

    ``paths``: files or fsspec URLs, read by ``fastbpe.io`` with the document rule
    ``docs`` (and ``field`` for JSON Lines, ``column`` for Parquet); None is its default.
    ``encoding``: a ``fastbpe.Encoding`` or ``WordPiece``. ``client``: a
    ``dask.distributed.Client`` (one Dask task per planned part, each the same
    ``shards.write_task`` as on one machine, on one native thread; then ``shards.commit``
    on the client), or None to encode here on ``num_threads`` native threads (default:
    all cores). ``n_parts``: tasks per file (default: ``plan_tasks``'s sizing). ``progress``: a
    bar of text bytes on stderr (on a cluster it moves as shards finish). ``dtype``, ``eot``,
    ``allowed_special``, ``disallowed_special``, ``errors``: as ``shards.write_shards``.
    ``out_dir`` must be a folder every worker writes to (a shared filesystem on a real
    cluster). The tokens are the same whichever way the work is spread.
    """
    if client is not None:
        _check_client(client, "encode_files(client=...)")
    check_num_threads(num_threads, allow_none=True)
    check_positive_int("n_parts", n_parts)
    spec = shards.make_spec(encoding, dtype=dtype, eot=eot, allowed_special=allowed_special,
                            disallowed_special=disallowed_special, errors=errors)
    n_workers = _n_worker_threads(client) if client is not None else 1
    tasks = plan_tasks(paths, n_workers, n_parts, docs=docs, field=field, column=column)
    rule = {"docs": docs, "field": field, "column": column}
    if client is None:
        return shards.write_shards(encoding, tasks, out_dir, dtype=spec.dtype, eot=spec.eot_token,
                                   allowed_special=set(spec.allowed), disallowed_special=spec.disallowed,
                                   errors=errors, num_threads=num_threads or os.cpu_count() or 1,
                                   block_bytes=block_bytes, document_rule=rule, progress=progress)
    import distributed

    out = shards.prepare(out_dir)
    enc_future = client.scatter(encoding, broadcast=True, hash=False)
    tag = uuid.uuid4().hex
    futures = [
        client.submit(shards.write_task, enc_future, t, str(out), i, spec, num_threads=1, block_bytes=block_bytes,
                      key=f"fastbpe-shard-{i:06d}-{tag}", pure=False)
        for i, t in enumerate(tasks)
    ]
    bar = shards._progress_bar(progress, shards._total_bytes(tasks))  # updated as shards finish
    try:
        for f in distributed.as_completed(futures):
            if bar is not None and f.status == "finished":
                bar.update(f.result()["bytes"])
    finally:
        if bar is not None:
            bar.close()
    # every task has settled (finished shards are kept for a rerun, and no task of this call
    # still writes out_dir); the first failure, if any, is raised here
    sidecars = client.gather(futures)
    return shards.commit(out, sidecars, spec, document_rule=rule)


__all__ = [
    "count_chunks_distributed",
    "count_distributed",
    "count_documents_distributed",
    "plan_tasks",
    "count_words_distributed",
    "encode_files",
    "merge_counts",
]

