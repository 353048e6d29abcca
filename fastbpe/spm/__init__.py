"""SentencePiece BPE (layer 2): ``SentencePieceBPE``, a sentencepiece BPE ``.model`` (Llama 2,
Mistral 7B, ...) with tiktoken's API, and ``HFSentencePieceBPE``, the tokenizer.json transformers
makes of one, as HF ``tokenizers`` runs it. The algorithm is ``fastbpe.reference.sentencepiece``.
"""
from .model import HFSentencePieceBPE, SentencePieceBPE

__all__ = ["HFSentencePieceBPE", "SentencePieceBPE"]
