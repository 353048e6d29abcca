"""Trainers (layer 4): ``bpe`` (``train_bpe``) and ``wordpiece`` (``train_wordpiece``).

Each counts on one machine (``bpe.counting``, ``wordpiece.counting``) or on a Dask
cluster (``fastbpe.distributed``), then merges on a native trainer.

>>> from fastbpe.trainers.bpe import train_bpe
>>> train_bpe(documents=["ab ab ab"], vocab_size=257, progress=False).encode("ab")
[256]
"""
