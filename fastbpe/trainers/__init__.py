"""Trainers (layer 4): ``bpe`` (``train_bpe``) and ``wordpiece`` (``train_wordpiece``).

Each counts on one machine (``bpe.counting``, ``wordpiece.counting``) or on a Dask
cluster (``fastbpe.distributed``), then merges on a native trainer.

Decisions shared by both:

* **Integer arguments** (``vocab_size``, ``min_frequency``, ...) are checked by
  ``fastbpe.checks.check_int``: numpy integers are accepted like ``int``; ``vocab_size``
  is at most ``checks.MAX_VOCAB_SIZE`` (the native trainers' ids are int32).
* **An empty corpus is an error**, not a vocabulary of bytes or special tokens alone:
  when the corpus gives the trainer nothing to learn from (BPE: no chunk, i.e. no
  document; WordPiece: no word, so text of whitespace alone counts as empty), both raise
  ValueError "the training corpus is empty", naming the inputs (``empty_corpus``).

>>> from fastbpe.trainers.bpe import train_bpe
>>> train_bpe(documents=["ab ab ab"], vocab_size=257, progress=False).encode("ab")
[256]
>>> train_bpe(documents=["", ""], vocab_size=257, progress=False)
Traceback (most recent call last):
...
ValueError: the training corpus is empty: no text to learn from in documents= (2 items)
"""
import os

from ..io import Corpus


def empty_corpus(files, documents, what: str = "text") -> ValueError:
    """The error of a trainer whose corpus has nothing to learn from, naming the inputs
    (at most three paths, as given: a folder stands for its files).

    >>> print(empty_corpus(["a.txt", "b/", "c.txt", "d.txt"], None))
    the training corpus is empty: no text to learn from in a.txt, b/, c.txt and 1 more
    """
    if isinstance(files, Corpus):   # resolved already (the command line's): its paths
        files, documents = files.files, (None if files.files is not None else iter(()))
    if documents is not None:
        n = getattr(documents, "__len__", None)
        inputs = "documents=" + (f" ({n()} items)" if n is not None else "")
    else:
        paths = [files] if isinstance(files, (str, os.PathLike)) else list(files)
        names = [os.fspath(p) for p in paths[:3]]
        inputs = ", ".join(names) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    return ValueError(f"the training corpus is empty: no {what} to learn from in {inputs}")
