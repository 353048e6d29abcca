"""SentencePiece BPE (layer 2): ``SentencePieceBPE``, a sentencepiece BPE ``.model`` (Llama 2,
Mistral 7B, ...) with tiktoken's API, and ``HFSentencePieceBPE``, the tokenizer.json
transformers makes of one, as HF ``tokenizers`` runs it. The algorithms are
``fastbpe.reference.sentencepiece`` and ``fastbpe.reference.hf_spm``.

>>> from fastbpe.spm import SentencePieceBPE
>>> from fastbpe.reference.sentencepiece import SpmModel, Piece, TrainerSpec
>>> tok = SentencePieceBPE(SpmModel((Piece("<unk>", 0.0, 2), Piece("▁", -1.0), Piece("a", -1.0)),
...                                 TrainerSpec(model_type=2, byte_fallback=False)))
>>> tok.encode("a a"), tok.decode([1, 2, 1, 2])
([1, 2, 1, 2], 'a a')
"""
from .model import HFSentencePieceBPE, SentencePieceBPE

__all__ = ["HFSentencePieceBPE", "SentencePieceBPE"]
