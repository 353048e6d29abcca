"""SentencePiece BPE (layer 2): ``SentencePieceBPE``, a sentencepiece BPE ``.model`` (Llama 2,
Mistral 7B, ...) with tiktoken's API. The algorithm is ``fastbpe.reference.sentencepiece``.
"""
from .model import SentencePieceBPE

__all__ = ["SentencePieceBPE"]
