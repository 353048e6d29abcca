"""Reading corpora: byte streams (local, fsspec, compressed), the document model, cuts.

Layer 0 of the package: nothing here imports the native extensions or the tokenizers.
The rules are in ``fastbpe.reference.documents``.
"""
from .cuts import BPECut, WordPieceCut
from .documents import (BLOCK_BYTES, ERRORS, MAX_DOCUMENT_BYTES, Block, Corpus, Task, check_errors,
                        fix_document, kind_of, not_a_document)

__all__ = ["BLOCK_BYTES", "BPECut", "Block", "Corpus", "ERRORS", "MAX_DOCUMENT_BYTES", "Task",
           "WordPieceCut", "check_errors", "fix_document", "kind_of", "not_a_document"]
