"""BPE chunk counting (phase 1 of ``train_bpe``): documents in, ``{chunk bytes: count}`` out.

``count_chunks`` equals ``fastbpe.reference.bpe.count_chunks`` over the documents of
``fastbpe.io.Corpus.resolve(...)`` (``fastbpe.reference.documents`` has the rules). The
work is split in two:

* a pattern with a native pre-tokenizer (``_pretokenize.pattern_id``: the built-in
  patterns by name or exact string, hand-written; any other pattern that
  ``reference.split_program`` compiles and that matches every character, as a split
  program) runs on it and the chunk table of ``fastbpe._train`` (``_NativeCounter``, one
  per thread, then ``_merge_tables``), fed blocks of ``fastbpe.io`` through a bounded
  queue; long documents of the built-in patterns are cut where the counts cannot change
  (Corollaries 1-3 of ``reference.documents``, proved for those patterns only:
  ``_pretokenize.cuts_hold``);
* any other regex runs the ``regex`` module in worker processes (the GIL would serialise
  threads), each counting whole documents into one ``Counter`` sent back once at the end.

Start method of the worker processes (the package's only process pool; ``encode_files``
and the batch encoders use native threads): ``fork`` where the platform has it, else
the platform's default. A forked worker starts in milliseconds without importing
anything again, and, unlike ``spawn``/``forkserver``, it never re-runs the caller's
``__main__`` module, so a script without an ``if __name__ == "__main__"`` guard can train
with a custom pattern. The workers only run ``regex`` and ``Counter`` on what the queue
brings; they take no lock another thread of the parent may hold (the reading thread
starts after the fork).

>>> count_chunks(documents=["ab ab"], pattern="gpt2")
{b'ab': 1, b' ab': 1}
"""
from __future__ import annotations

import multiprocessing
import os
import queue
import threading
from collections import Counter
from collections.abc import Iterable

from .._train import _ChunkTable, _NativeCounter, _merge_tables, _table_from_counts
from .. import io as _io
from .._pretokenize import cuts_hold as _cuts_hold
from .._pretokenize import pattern_id as _pattern_id
from ..checks import check_num_threads
from ..reference import bpe as _ref
from ..reference import patterns as _patterns

#: Target size of a block of packed documents (iterable input), in UTF-8 bytes.
DOC_BLOCK_BYTES = 1 << 20

#: The start method of the regex path's worker processes (see the module docstring).
START_METHOD = "fork" if "fork" in multiprocessing.get_all_start_methods() else None


def _check_specials(special_tokens):
    if isinstance(special_tokens, (str, bytes)):
        raise TypeError("special_tokens must be an iterable of str, not a single str")
    specials = []
    for tok in special_tokens:
        if not isinstance(tok, str):
            raise TypeError(f"special token {tok!r} is {type(tok).__name__}, expected str")
        if not tok:
            raise ValueError("a special token must not be empty")
        specials.append(tok)
    # longest first, like the reference's alternation: the longest wins at equal start
    return sorted(set(specials), key=lambda t: (-len(t), t))

def _cutter(pid, specials):
    """The cutter of a native pattern (long documents are counted in pieces, Corollaries
    1-3 of ``reference.documents``); a split program or a regex is never cut."""
    return _io.BPECut(specials) if _cuts_hold(pid) else None


def _blocks(source, errors, cut, progress):
    """The blocks of a ``fastbpe.io`` Corpus or Task (both have ``blocks``)."""
    return source.blocks(cut=cut, errors=errors, progress=progress)


def _count_native(source, pid, specials, num_threads, errors, progress, as_table):
    sp_bytes = [s.encode("utf-8") for s in specials]
    counters = [_NativeCounter(pid, sp_bytes) for _ in range(num_threads)]
    cut = _cutter(pid, specials)

    def run(counter, block):
        status = counter.count_documents(block.data, block.ends)
        if status < 0:
            raise counter.error(status, block.where(0))

    if num_threads == 1:
        for block in _blocks(source, errors, cut, progress):
            run(counters[0], block)
    else:
        # bounded queue: at most a few blocks in flight, never the whole corpus
        work = queue.Queue(maxsize=2 * num_threads)
        failures = []

        def worker(counter):
            while True:
                item = work.get()
                if item is None:
                    return
                if failures:
                    continue  # keep draining so the producer never blocks
                try:
                    run(counter, item)
                except BaseException as exc:  # reported by the main thread
                    failures.append(exc)

        threads = [threading.Thread(target=worker, args=(c,), daemon=True) for c in counters]
        for t in threads:
            t.start()
        try:
            for block in _blocks(source, errors, cut, progress):
                if failures:
                    break
                work.put(block)
        finally:
            for _ in threads:
                work.put(None)
            for t in threads:
                t.join()
        if failures:
            raise failures[0]
    table = _merge_tables([c.table for c in counters])
    return table if as_table else table.to_dict()


def _regex_count_into(counts, docs, pattern, specials):
    """Count documents with the regex module into ``counts`` (str chunks; the caller
    encodes the unique ones once at the end)."""
    pat = _patterns.compile_pattern(pattern)
    special = _ref.special_token_regex(specials)
    findall = pat.findall
    update = counts.update
    for doc in docs:
        if special is None:
            update(findall(doc))
        else:
            for piece in special.split(doc):
                update(findall(piece))


def _regex_worker(tasks, results, pattern, specials):
    """Worker process: count every block it takes from ``tasks`` into one Counter, and
    send that once at the end (per-block results would make the parent the bottleneck)."""
    counts = Counter()
    try:
        while True:
            item = tasks.get()
            if item is None:
                break
            _regex_count_into(counts, item, pattern, specials)
        results.put(("ok", counts))
    except BaseException as exc:  # reported by the parent
        results.put(("error", exc))


def _iter_regex_blocks(source, errors, progress):
    """Whole documents as str (a custom pattern is never cut: Corollary 1 is about the
    built-in ones)."""
    for block in _blocks(source, errors, None, progress):
        yield block.pieces()


def _count_regex(source, pattern, specials, num_threads, errors, progress):
    _patterns.compile_pattern(pattern)  # a bad pattern fails here, before any work
    if num_threads == 1:
        total = Counter()
        for docs in _iter_regex_blocks(source, errors, progress):
            _regex_count_into(total, docs, pattern, specials)
        return {chunk.encode("utf-8"): n for chunk, n in total.items()}

    ctx = multiprocessing.get_context(START_METHOD)
    # bounded: at most 2 blocks per worker wait in the queue, never the whole input
    tasks = ctx.Queue(maxsize=2 * num_threads)
    results = ctx.Queue()
    procs = [ctx.Process(target=_regex_worker, args=(tasks, results, pattern, specials), daemon=True)
             for _ in range(num_threads)]
    for proc in procs:
        proc.start()

    def check_alive():
        if any(proc.exitcode not in (None, 0) for proc in procs):
            raise RuntimeError("a chunk-counting worker process died")

    def put(item):
        while True:
            try:
                tasks.put(item, timeout=0.5)
                return
            except queue.Full:
                check_alive()

    parts = []
    try:
        for docs in _iter_regex_blocks(source, errors, progress):
            put(docs)
        for _ in procs:
            put(None)
        while len(parts) < num_threads:
            try:
                status, value = results.get(timeout=0.5)
            except queue.Empty:
                check_alive()
                continue
            if status == "error":
                raise value
            parts.append(value)
    finally:
        if len(parts) < num_threads:
            for proc in procs:
                proc.terminate()
        for proc in procs:
            proc.join()
    total = max(parts, key=len)
    for part in parts:
        if part is not total:
            total.update(part)
    return {chunk.encode("utf-8"): n for chunk, n in total.items()}


def count_chunk_table(files=None, pattern="cl100k", special_tokens=(), *, documents=None,
                      docs=None, field=None, column=None, num_threads=None, errors="strict",
                      progress=None):
    """Like count_chunks, but return the native table (``len()``, ``to_dict()``), which
    ``train_merges`` takes directly without building a Python object per chunk."""
    counts = _count(_io.Corpus.resolve(files, documents, docs=docs, field=field, column=column),
                    pattern, special_tokens, num_threads, errors, progress, True)
    if isinstance(counts, _ChunkTable):
        return counts
    return _table_from_counts(counts)


def count_task(task, pattern="cl100k", special_tokens=(), *, num_threads=1, errors="strict",
               progress=None):
    """count_chunks over one ``fastbpe.io.Task`` (a range of one source, from
    ``Corpus.plan``): the unit of work of distributed counting."""
    if not isinstance(task, _io.Task):
        raise TypeError(f"task must be a fastbpe.io.Task, not {type(task).__name__}")
    return _count(task, pattern, special_tokens, num_threads, errors, progress, False)


def count_chunks(files=None, pattern="cl100k", special_tokens=(), *, documents=None,
                 docs=None, field=None, column=None, num_threads=None, errors="strict",
                 progress=None):
    """Count the UTF-8 bytes of every chunk of every document: ``dict[bytes, int]``.

    Equal to ``fastbpe.reference.bpe.count_chunks(Corpus.resolve(...).documents(),
    pattern, special_tokens)``: ``files`` (paths; ``docs``, ``field``, ``column`` as in
    ``fastbpe.io.Corpus.resolve``) or ``documents=`` (an iterable of str, one document
    per item); see ``fastbpe.reference.documents`` for the rules. The built-in patterns
    (names or exact strings) use the native pre-tokenizer on ``num_threads`` threads
    (default: all cores); a custom pattern uses ``regex`` in worker processes.
    ``progress`` is None or a tqdm-like object updated with the bytes read.

    >>> count_chunks(documents=["ab ab"], pattern=r"\\w+| ")
    {b'ab': 2, b' ': 1}
    """
    return _count(_io.Corpus.resolve(files, documents, docs=docs, field=field, column=column),
                  pattern, special_tokens, num_threads, errors, progress, False)


def _count(source, pattern, special_tokens, num_threads, errors, progress, as_table):
    _io.check_errors(errors)
    specials = _check_specials(special_tokens)
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str, not {type(pattern).__name__}")
    num_threads = check_num_threads(num_threads, allow_none=True) or os.cpu_count() or 1
    pid = _pattern_id(pattern)
    if pid >= 0:
        return _count_native(source, pid, specials, num_threads, errors, progress, as_table)
    counts = _count_regex(source, _patterns.resolve_pattern(pattern), specials, num_threads, errors, progress)
    return counts


def count_documents(documents: Iterable[str], pat_str: str, special_tokens: list[str],
                    num_threads: int | None = None) -> dict[bytes, int]:
    """``count_chunks`` over an iterable of documents (positional arguments).

    >>> count_documents(["a a"], "gpt2", [])
    {b'a': 1, b' a': 1}
    """
    return count_chunks(documents=documents, pattern=pat_str, special_tokens=special_tokens,
                        num_threads=num_threads)
