"""Reading corpora: byte streams (local, fsspec, compressed), the document model, cuts.

Layer 0 of the package: nothing here imports the tokenizers; the one native helper is
the JSON Lines field scan ``fastbpe._jsonl``, which imports nothing of fastbpe.
The rules are in ``fastbpe.reference.documents``.

>>> [block.pieces() for block in Corpus.resolve(documents=["a b", "c"]).blocks()]
[['a b', 'c']]
"""
from .cuts import BPECut, WordPieceCut
from .documents import (BLOCK_BYTES, ERRORS, MAX_DOCUMENT_BYTES, Block, Corpus, Task, check_errors,
                        fix_document, kind_of, not_a_document)

__all__ = ["BLOCK_BYTES", "BPECut", "Block", "Corpus", "ERRORS", "MAX_DOCUMENT_BYTES", "Task",
           "WordPieceCut", "check_errors", "fix_document", "kind_of", "not_a_document"]
