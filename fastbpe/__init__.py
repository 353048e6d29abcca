"""fastbpe: exact, fast byte-level BPE and WordPiece tokenizers."""
from . import _native  # noqa: F401  (fails early, with build instructions)

__version__ = "0.1.0"
