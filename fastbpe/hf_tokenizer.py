"""``fastbpe.Tokenizer``: HF ``tokenizers.Tokenizer``'s API on fastbpe (issue 38 section 3).

HF ``tokenizers`` users change one import::

    tok = fastbpe.Tokenizer.from_file("tokenizer.json")     # or .from_pretrained(folder or name)
    enc = tok.encode("Hello world")                          # add_special_tokens=True, as HF
    enc.ids, enc.tokens, enc.offsets, enc.attention_mask, enc.type_ids, enc.special_tokens_mask

The ids come from the file's ``HFEncoding`` (``tok.encoding``: tiktoken's API, shards,
``count``, numpy batches). This module adds what HF's ``Encoding`` carries besides ids:
the post-processor with a pair (its type ids and special-token mask), truncation and
padding (as the file says or ``enable_truncation`` / ``enable_padding`` set), tokens and
character offsets.

Decisions:

- The result class is ``Encoded`` (HF calls it ``Encoding``; in fastbpe that name is the
  tiktoken-style tokenizer).
- **Offsets** are HF's for byte-level BPE: a token's span is the characters its bytes
  come from (a token holding part of a character's bytes spans the whole character),
  added tokens span their text, tokens the post-processor adds are ``(0, 0)``. They are
  exact when the normalizer leaves the text unchanged (no normalizer, an empty Sequence,
  NFC on NFC text ...). Where the normalizer changes the text, or a ByteLevel
  post-processor says ``trim_offsets: true``, ``.offsets`` raises ValueError saying so
  (alignment through normalizers is not tracked yet); the ids are unaffected.
- Truncation: ``max_length`` with strategy ``longest_first`` / ``only_first`` /
  ``only_second``, direction right or left, ``stride``; ``overflowing`` holds the cut
  windows for a single sequence (a truncated pair raises on ``.overflowing``: not built).
  Padding: to the batch's longest or a fixed length, ``pad_to_multiple_of``, direction
  right or left, ``pad_id`` / ``pad_type_id`` / ``pad_token``.
- Byte-level BPE files (an ``HFEncoding``), WordPiece files (BERT: a ``WordPiece``,
  which tracks offsets through its normalizer itself) and sentencepiece-style BPE files
  (Llama 2, Mistral: an ``HFSentencePieceBPE``, offsets read off its native ids, the
  spans of ``fastbpe.reference.hf_spm.encode_with_offsets``); ``tok.encoding`` hands out each.
- An ``Encoded``'s ``tokens`` and ``offsets`` are made when first read: the ids are
  what most callers take, and a list of spans costs several times the ids. They are
  not part of ``==``; a pickle holds them made.
"""
from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .bpe.hf import HFEncoding, read_model_parts
from .formats._hfjson import parts_of_bytes
from .formats.hf_spm import is_spm_json, read_hf_spm
from .pretrained import TokenizerConfig, resolve
from .reference import hf
from .reference.wordpiece import Padding, Truncation
from .spm import HFSentencePieceBPE


@dataclass
class Encoded:
    """One encoded input, as HF's ``tokenizers.Encoding`` (see the module docstring)."""

    ids: list[int]
    #: the tokens' strings, or a function giving them (made when first read, as offsets)
    _tokens: list[str] | Callable = field(repr=False, compare=False)
    type_ids: list[int]
    special_tokens_mask: list[int]
    attention_mask: list[int]
    #: Every token's (start, end) in characters, or the reason there are none, or a
    #: function giving either: offsets are made when first read (most callers read ids
    #: only, and spans cost more than the ids), so they take no part in ``==``.
    _offsets: list[tuple[int, int]] | str | Callable = field(repr=False, compare=False)
    _overflowing: list[Encoded] | str = field(default_factory=list, repr=False)

    @property
    def tokens(self) -> list[str]:
        tokens = self._tokens = _force(self._tokens)
        return tokens

    @property
    def offsets(self) -> list[tuple[int, int]]:
        offsets = self._offsets = _force(self._offsets)
        if isinstance(offsets, str):
            raise ValueError(offsets)
        return offsets

    def __getstate__(self) -> dict:
        self._offsets, self._tokens = _force(self._offsets), _force(self._tokens)   # not the tokenizer
        return dict(self.__dict__)

    @property
    def overflowing(self) -> list[Encoded]:
        if isinstance(self._overflowing, str):
            raise ValueError(self._overflowing)
        return self._overflowing

    def __len__(self) -> int:
        return len(self.ids)


class Tokenizer:
    """A byte-level BPE tokenizer.json with ``tokenizers.Tokenizer``'s methods."""

    def __init__(self, encoding, *, truncation: dict | None = None, padding: dict | None = None,
                 config: TokenizerConfig | None = None, post_processor: dict | None = None):
        from .wordpiece.model import WordPiece

        self._enc = encoding
        if isinstance(encoding, HFEncoding):
            p = encoding.pipeline
            self._base_vocab = p.vocab
            self._post = p.post_processor
            self._id_to_token = {i: t for t, i in p.vocab.items()}
            self._special_ids = set()
            for entry in p.added:
                self._id_to_token[entry["id"]] = entry["content"]
                if entry["special"]:
                    self._special_ids.add(entry["id"])
        elif isinstance(encoding, HFSentencePieceBPE):
            # sentencepiece-style BPE: the file's post_processor JSON, given by from_str
            self._base_vocab = encoding._spec.vocab
            self._post = post_processor
            self._id_to_token = {i: t for i, t in encoding._id_to_token.items()}
            self._special_ids = set(encoding.special_tokens.values())
        elif isinstance(encoding, WordPiece):
            # WordPiece (BERT): the file's post_processor JSON, given by from_str
            self._base_vocab = encoding.vocab
            self._post = post_processor
            self._id_to_token = {i: t for t, i in self._base_vocab.items()}
            self._special_ids = {self._base_vocab[t] for t in encoding.special_tokens if t in self._base_vocab}
        else:
            raise TypeError("encoding must be an HFEncoding (fastbpe.load of a byte-level BPE tokenizer.json), "
                            f"an HFSentencePieceBPE or a WordPiece, not {type(encoding).__name__}")
        self._base_ids = frozenset(self._base_vocab.values())
        self._byte_lengths: dict[int, int] = {}
        self._token_to_id = {t: i for i, t in self._id_to_token.items()}
        self.config = config
        self._truncation = self._padding = None
        self._set_truncation(truncation, "truncation")
        self._set_padding(padding, "padding")

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_file(cls, path: str | os.PathLike, *, config: TokenizerConfig | None = None) -> Tokenizer:
        """A tokenizer.json; its ``truncation`` / ``padding`` become the tokenizer's."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or path, not {type(path).__name__}")
        path = Path(path)
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            from .formats.sentencepiece_model import is_sentencepiece_file

            hint = ("; it is a sentencepiece model, which fastbpe.load reads (tokenizer.json files are what "
                    "fastbpe.Tokenizer reads)" if is_sentencepiece_file(path) else "")
            raise ValueError(f"{path}: not a tokenizer.json: not UTF-8 text at byte {exc.start}{hint}") from None
        name = path.parent.name if path.name == "tokenizer.json" else path.stem
        return cls.from_str(text, config=config, name=name, source=str(path))

    @classmethod
    def from_str(cls, json: str, *, config: TokenizerConfig | None = None, name: str = "tokenizer",
                 source: str = "<json>") -> Tokenizer:
        """A tokenizer.json's text (as ``tokenizers.Tokenizer.to_str()`` gives it)."""
        import json as _json

        if not isinstance(json, str):
            raise TypeError(f"json must be a str, not {type(json).__name__}")
        path = source
        # a byte-level BPE file's vocabulary and merges read natively (``fastbpe.load``'s
        # way: ``formats._hfjson.read_json_parts``); anything else by json, as before
        found = _native_parts(json)
        data, parts = found if found is not None else (None, None)
        if parts is not None:
            model = data["model"]
            if model.get("type", "BPE") != "BPE" or is_spm_json(data):   # they read merges from data
                data = parts = None
        if data is None:
            try:
                data = _json.loads(json)
            except _json.JSONDecodeError as exc:
                raise ValueError(f"{path}: not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: the top level must be a JSON object")
        model = data.get("model")
        truncation, padding = data.get("truncation"), data.get("padding")
        data = {**data, "truncation": None, "padding": None}
        kind = model.get("type", "BPE") if isinstance(model, dict) else "BPE"
        if kind == "WordPiece":
            enc = _wordpiece(data, path)
        elif kind == "BPE" and is_spm_json(data):    # sentencepiece-style: Llama 2, Mistral
            enc = HFSentencePieceBPE(read_hf_spm(data, str(path)), name=name, source=str(path))
        elif kind == "BPE":
            enc = HFEncoding.from_json(name, data, str(path), parts=parts)
        else:
            raise ValueError(f"{path}: model.type {kind!r}: fastbpe.Tokenizer reads BPE and WordPiece files")
        return cls(enc, truncation=_file_truncation(truncation, path), padding=_file_padding(padding, path),
                   config=config, post_processor=data.get("post_processor"))

    @classmethod
    def from_pretrained(cls, path_or_name: str | os.PathLike, *, revision: str = "main", cache_dir=None,
                        local_files_only: bool = False) -> Tokenizer:
        """A model folder or cached model name (``fastbpe.from_pretrained``'s rules)."""
        where = resolve(path_or_name, revision=revision, cache_dir=cache_dir, local_files_only=local_files_only)
        folder = where if where.is_dir() else where.parent
        file = where if where.is_file() else where / "tokenizer.json"
        if not file.is_file():
            raise FileNotFoundError(f"{folder}: no tokenizer.json")
        return cls.from_file(file, config=TokenizerConfig.from_folder(folder))

    @property
    def encoding(self) -> HFEncoding:
        """The tiktoken-style ``Encoding`` of the same file (what ``fastbpe.load`` returns)."""
        return self._enc

    # ------------------------------------------------------------------ vocabulary
    def token_to_id(self, token: str) -> int | None:
        return self._token_to_id.get(token)

    def id_to_token(self, id: int) -> str | None:
        return self._id_to_token.get(id)

    def get_vocab(self, with_added_tokens: bool = True) -> dict[str, int]:
        if with_added_tokens:
            return dict(self._token_to_id)
        return dict(self._base_vocab)

    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        return len(self._token_to_id) if with_added_tokens else len(self._base_vocab)

    # ------------------------------------------------------------------ truncation and padding
    def enable_truncation(self, max_length: int, stride: int = 0, strategy: str = "longest_first",
                          direction: str = "right") -> None:
        self._set_truncation({"max_length": max_length, "stride": stride, "strategy": strategy,
                              "direction": direction}, "enable_truncation")

    def no_truncation(self) -> None:
        self._truncation = None

    def enable_padding(self, direction: str = "right", pad_id: int = 0, pad_type_id: int = 0,
                       pad_token: str = "[PAD]", length: int | None = None, pad_to_multiple_of: int | None = None) -> None:
        self._set_padding({"direction": direction, "pad_id": pad_id, "pad_type_id": pad_type_id,
                           "pad_token": pad_token, "length": length, "pad_to_multiple_of": pad_to_multiple_of},
                          "enable_padding")

    def no_padding(self) -> None:
        self._padding = None

    @property
    def truncation(self) -> dict | None:
        return None if self._truncation is None else dict(self._truncation)

    @property
    def padding(self) -> dict | None:
        return None if self._padding is None else dict(self._padding)

    def _set_truncation(self, t: dict | None, where: str) -> None:
        """Checked by the one truncation rule, ``reference.wordpiece.Truncation``; the stride
        must also leave room to move (HF refuses ``stride >= max_length`` when it cuts)."""
        if t is None:
            self._truncation = None
            return
        try:
            rule = Truncation(t.get("max_length"), t.get("strategy"), t.get("stride", 0), t.get("direction"))
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if rule.stride >= max(rule.max_length, 1):
            raise ValueError(f"{where}: stride {rule.stride} must be below max_length {rule.max_length}")
        self._truncation = dict(vars(rule))

    def _set_padding(self, p: dict | None, where: str) -> None:
        if p is None:
            self._padding = None
            return
        if p.get("direction") not in ("right", "left"):
            raise ValueError(f"{where}: direction {p.get('direction')!r} is not 'right' or 'left'")
        for key in ("pad_id", "pad_type_id", "length", "pad_to_multiple_of"):
            value = p.get(key)
            if value is None and key in ("length", "pad_to_multiple_of"):
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{where}: {key} must be an int >= 0, not {value!r}")
        if not isinstance(p.get("pad_token"), str):
            raise ValueError(f"{where}: pad_token must be a str, not {p.get('pad_token')!r}")
        self._padding = {k: p.get(k) for k in ("direction", "pad_id", "pad_type_id", "pad_token", "length",
                                               "pad_to_multiple_of")}

    # ------------------------------------------------------------------ encoding
    def encode(self, sequence: str, pair: str | None = None, is_pretokenized: bool = False,
               add_special_tokens: bool = True) -> Encoded:
        """HF's ``Tokenizer.encode``: one input (and its pair), post-processed, truncated
        and padded as configured."""
        return self.encode_batch([sequence if pair is None else (sequence, pair)], is_pretokenized=is_pretokenized,
                                 add_special_tokens=add_special_tokens)[0]

    def encode_batch(self, input: Sequence, is_pretokenized: bool = False, add_special_tokens: bool = True) -> list[Encoded]:
        return self._encode_batch(input, is_pretokenized, add_special_tokens, offsets=True)

    def _encode_batch(self, input: Sequence, is_pretokenized: bool, add_special_tokens: bool, *,
                      offsets: bool) -> list[Encoded]:
        """``encode_batch``; ``offsets=False`` (for callers that read ids and masks only,
        such as ``fastbpe.transformers``) skips the offsets, whose ``.offsets`` then raises."""
        if is_pretokenized:
            raise ValueError("is_pretokenized=True is not implemented (pass the text)")
        if isinstance(input, str) or not isinstance(input, Sequence):
            raise TypeError(f"input must be a list of texts or (text, pair) pairs, not {type(input).__name__}")
        if not isinstance(add_special_tokens, bool):
            raise TypeError(f"add_special_tokens must be a bool, not {type(add_special_tokens).__name__}")
        pairs = []
        for i, item in enumerate(input):
            a, b = (item, None) if isinstance(item, str) else _pair(item, i)
            pairs.append((a, b))
        firsts = self._parts([a for a, _ in pairs], offsets)
        seconds = iter(self._parts([b for _, b in pairs if b is not None], offsets))
        out = [self._finish(part_a, None if b is None else next(seconds), add_special_tokens)
               for (_, b), part_a in zip(pairs, firsts)]
        return self._pad(out)

    def _parts(self, texts: list[str], offsets: bool = True) -> list[tuple[list[int], list[tuple[int, int]] | str]]:
        """Each text's ids (special-token text matched, as HF) and offsets, before the
        post-processor."""
        if not offsets and isinstance(self._enc, (HFEncoding, HFSentencePieceBPE)):
            return [(i, "offsets: not computed (encoded for ids only)")
                    for i in self._enc.encode_batch(texts, allowed_special="all")]
        if isinstance(self._enc, HFSentencePieceBPE):   # offsets through its ▁ escaping, when read
            ids = self._enc.encode_batch(texts, allowed_special="all")
            return [(i, functools.partial(_spm_offsets, self._enc, t)) for t, i in zip(texts, ids)]
        if not isinstance(self._enc, HFEncoding):   # WordPiece tracks its own offsets
            outs = [self._enc.encode_plus(t, add_special_tokens=False, padding=False, allowed_special="all")
                    for t in texts]
            return [(o["input_ids"], [tuple(x) for x in o["offsets"]]) for o in outs]
        ids = self._enc.encode_batch(texts, allowed_special="all")
        return [(i, functools.partial(self._offsets_of, t, i)) for t, i in zip(texts, ids)]   # when read

    def _offsets_of(self, text: str, ids: list[int]) -> list[tuple[int, int]] | str:
        p = self._enc.pipeline
        why = _unaligned(p.post_processor)
        if why is None and p.normalizer is not None and hf.normalize(p.normalizer, text) != text:
            why = f"the normalizer ({p.normalizer.get('type')}) changes this text; offsets through it are not aligned yet"
        if why is not None:
            return "offsets: " + why
        offsets = byte_offsets(text, [self._byte_length(i) for i in ids])
        return "offsets: the tokens' bytes are not the text's (an added token strips whitespace)" if offsets is None else offsets

    def _byte_length(self, i: int) -> int:
        try:
            return self._byte_lengths[i]
        except KeyError:
            n = self._byte_lengths[i] = len(self._token_bytes(i))
            return n

    def _token_bytes(self, i: int) -> bytes:
        if i in self._special_ids or i not in self._base_ids and i in self._id_to_token:
            return self._id_to_token[i].encode("utf-8")
        return self._enc.decode_single_token_bytes(i)

    def _finish(self, a, b, add_special_tokens: bool) -> Encoded:
        (ids_a, off_a), pair = a, b
        ids_b, off_b = pair if pair is not None else (None, None)
        overflow: list | str = []
        if self._truncation is not None:   # windows cut the spans too: made now
            off_a, off_b = _force(off_a), _force(off_b)
            budget = self._truncation["max_length"]
            if add_special_tokens:
                budget -= len(post_process_pair(self._post, [], None if pair is None else [])[0])
            cut = truncate(len(ids_a), None if pair is None else len(ids_b), max(budget, 0), self._truncation["strategy"])
            if cut[0] < len(ids_a) and pair is None:
                overflow = [self._finish((w, wo), None, add_special_tokens) for w, wo in
                            _windows(ids_a, off_a, budget, self._truncation["stride"], self._truncation["direction"])[1:]]
            elif pair is not None and (cut[0] < len(ids_a) or cut[1] < len(ids_b)):
                overflow = "overflowing: not built for a truncated pair"
            keep = _keep(self._truncation["direction"])
            ids_a, off_a = keep(ids_a, cut[0]), off_a if isinstance(off_a, str) else keep(off_a, cut[0])
            if pair is not None:
                ids_b, off_b = keep(ids_b, cut[1]), off_b if isinstance(off_b, str) else keep(off_b, cut[1])
        if add_special_tokens:
            ids, types, special, where = post_process_pair(self._post, ids_a, ids_b)
        else:
            ids = ids_a + (ids_b or [])
            types = [0] * len(ids_a) + [1] * len(ids_b or [])
            special, where = [0] * len(ids), [(0, len(ids_a))] + ([(1, len(ids_b))] if ids_b else [])
        lazy = callable(off_a) or callable(off_b)
        offsets = functools.partial(_join_offsets, where, off_a, off_b) if lazy else _join_offsets(where, off_a, off_b)
        return Encoded(ids=ids, _tokens=functools.partial(_tokens_of, self._id_to_token, ids), type_ids=types,
                       special_tokens_mask=special,
                       attention_mask=[1] * len(ids), _offsets=offsets, _overflowing=overflow)

    def _pad(self, out: list[Encoded]) -> list[Encoded]:
        p = self._padding
        if p is None or not out:
            return out
        n = p["length"] if p["length"] is not None else max(len(e) for e in out)
        if p["pad_to_multiple_of"]:
            m = p["pad_to_multiple_of"]
            n = -(-n // m) * m
        for e in out:
            _pad_one(e, n, p)
        return out

    # ------------------------------------------------------------------ decoding
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        if isinstance(self._enc, HFEncoding):
            return self._enc.hf_decode(ids, skip_special_tokens=skip_special_tokens)
        return self._enc.decode(ids, skip_special_tokens=skip_special_tokens)

    def decode_batch(self, sequences: Sequence[Sequence[int]], skip_special_tokens: bool = True) -> list[str]:
        return [self.decode(s, skip_special_tokens=skip_special_tokens) for s in sequences]

    def __repr__(self) -> str:
        return f"<fastbpe.Tokenizer {self._enc.name!r} ({self.get_vocab_size()} tokens)>"


# ---------------------------------------------------------------------- pure helpers
def byte_offsets(text: str, lengths: list[int]) -> list[tuple[int, int]] | None:
    """Character spans of consecutive tokens of ``lengths`` UTF-8 bytes over ``text``
    (HF's byte-level offsets: a token with part of a character spans all of it); None
    if the lengths do not add up to the text's bytes.

    >>> byte_offsets("aé b", [1, 1, 1, 2])   # 'é' is 2 bytes, split over two tokens
    [(0, 1), (1, 2), (1, 2), (2, 4)]
    """
    import numpy as np

    points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    widths = 1 + (points >= 0x80) + (points >= 0x800) + (points >= 0x10000)   # UTF-8 bytes per character
    char_of = np.repeat(np.arange(len(points), dtype=np.int64), widths)
    char_of = np.append(char_of, len(points))   # a zero-length token at the end sits there
    lengths = np.asarray(lengths, dtype=np.int64)
    if int(lengths.sum()) != len(char_of) - 1:
        return None
    ends = np.cumsum(lengths)
    starts = char_of[ends - lengths]
    stops = np.where(lengths > 0, char_of[np.maximum(ends - 1, 0)] + 1, starts)
    return list(zip(starts.tolist(), stops.tolist()))


def post_process_pair(spec: dict | None, a: list[int], b: list[int] | None):
    """HF's post-processor on one input and its pair: (ids, type_ids,
    special_tokens_mask, where) with ``where`` the ids in runs: ``(0 or 1, n)`` for a
    sequence's n tokens (each sequence whole, once), ``(None, n)`` for n the processor adds.

    >>> t = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
    ...      {"Sequence": {"id": "A", "type_id": 0}}], "pair": [{"Sequence": {"id": "A", "type_id": 0}},
    ...      {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
    ...      "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    >>> post_process_pair(t, [7], [8])[:3]
    ([7, 1, 8], [0, 1, 1], [0, 1, 0])
    >>> post_process_pair(None, [7], [8])[:3]
    ([7, 8], [0, 1], [0, 0])
    """
    steps = [spec] if spec is None or spec["type"] != "Sequence" else spec["processors"]
    steps = [s for s in steps if s is not None and s["type"] != "ByteLevel"]   # ByteLevel moves offsets only
    if len(steps) > 1:
        raise ValueError("post_processor: a Sequence with more than one step besides ByteLevel is not implemented")
    seqs = [a] if b is None else [a, b]
    if not steps:
        items = [("seq", k, k) for k in range(len(seqs))]
    else:
        step = steps[0]
        kind = step["type"]
        if kind == "TemplateProcessing":
            items = []
            for item in step["single" if b is None else "pair"]:
                if "Sequence" in item:
                    items.append(("seq", "AB".index(item["Sequence"]["id"]), item["Sequence"]["type_id"]))
                else:
                    items.append(("special", step["special_tokens"][item["SpecialToken"]["id"]]["ids"],
                                  item["SpecialToken"]["type_id"]))
        elif kind == "BertProcessing":
            cls, sep = [step["cls"][1]], [step["sep"][1]]
            items = [("special", cls, 0), ("seq", 0, 0), ("special", sep, 0)]
            if b is not None:
                items += [("seq", 1, 1), ("special", sep, 1)]
        elif kind == "RobertaProcessing" and b is None:
            items = [("special", [step["cls"][1]], 0), ("seq", 0, 0), ("special", [step["sep"][1]], 0)]
        else:
            raise ValueError(f"post_processor: {kind} {'with a pair ' if b is not None else ''}is not implemented")
    ids, types, special, where = [], [], [], []
    for kind, what, type_id in items:
        if kind == "seq":
            ids += seqs[what]
            where.append((what, len(seqs[what])))
            special += [0] * len(seqs[what])
            types += [type_id] * len(seqs[what])
        else:
            ids += what
            where.append((None, len(what)))
            special += [1] * len(what)
            types += [type_id] * len(what)
    return ids, types, special, where


def truncate(n_a: int, n_b: int | None, max_length: int, strategy: str) -> tuple[int, int | None]:
    """How many tokens of each sequence HF keeps (its ``truncate_encodings``);
    ValueError when the strategy cannot reach ``max_length``.

    >>> truncate(10, 3, 8, "longest_first"), truncate(5, 5, 7, "longest_first"), truncate(10, None, 4, "only_first")
    ((5, 3), (3, 4), (4, None))
    """
    total = n_a + (n_b or 0)
    if total <= max_length:
        return n_a, n_b
    if n_b is None and strategy == "only_second":
        raise ValueError("truncation: only_second needs a pair")
    if n_b is None or strategy == "longest_first":
        if n_b is None:
            return min(n_a, max_length), None
        # HF's rule: the shorter keeps its length if the longer fits in the rest, else
        # both are cut to half (the longer gets the odd token)
        short, long_ = sorted((n_a, n_b))
        long_ = short if short > max_length else max(short, max_length - short)
        if short + long_ > max_length:
            short, long_ = max_length // 2, max_length // 2 + max_length % 2
        return (short, long_) if n_a <= n_b else (long_, short)
    remove = total - max_length
    index = 0 if strategy == "only_first" else 1
    n = (n_a, n_b)[index]
    if n <= remove:
        raise ValueError(f"truncation: {strategy} cannot cut {remove} tokens from a sequence of {n} "
                         f"(max_length {max_length})")
    return (n_a - remove, n_b) if index == 0 else (n_a, n_b - remove)


def _pad_one(e: Encoded, n: int, p: dict) -> None:
    """Pad ``e`` (and its overflowing windows, as HF does) to ``n`` tokens."""
    if isinstance(e._overflowing, list):
        for o in e._overflowing:
            _pad_one(o, n, p)
    k = n - len(e)
    if k <= 0:
        return
    right = p["direction"] == "right"

    def side(xs: list, fill) -> list:
        return xs + [fill] * k if right else [fill] * k + xs

    e.ids, e._tokens = side(e.ids, p["pad_id"]), functools.partial(_pad_lazy, e._tokens, side, p["pad_token"])
    e.type_ids, e.special_tokens_mask = side(e.type_ids, p["pad_type_id"]), side(e.special_tokens_mask, 1)
    e.attention_mask = side(e.attention_mask, 0)
    e._offsets = functools.partial(_pad_lazy, e._offsets, side, (0, 0))


def _pad_lazy(values, side, fill):
    """``side(values, fill)`` of a list that may be a function giving it (or offsets'
    reason there are none, kept)."""
    values = _force(values)
    return values if isinstance(values, str) else side(values, fill)


def _tokens_of(id_to_token: dict, ids: list[int]) -> list[str]:
    return [id_to_token[i] for i in ids]


def _force(offsets):
    """Spans (or the reason there are none) of a value that may be a function giving them."""
    return offsets() if callable(offsets) else offsets


def _join_offsets(where: list, off_a, off_b) -> list[tuple[int, int]] | str:
    """The spans of a post-processed input from its sequences' (``post_process_pair``'s
    runs: a sequence whole, or n added tokens at (0, 0)), or the first reason there are none."""
    parts = (_force(off_a), _force(off_b))
    bad = next((o for o in parts if isinstance(o, str)), None)
    if bad is not None:
        return bad
    offsets: list = []
    for seq, n in where:
        offsets += [(0, 0)] * n if seq is None else parts[seq]
    return offsets


def _spm_offsets(enc, text: str) -> list[tuple[int, int]]:
    return enc.encode_with_offsets(text)[1]


def _keep(direction: str):
    return (lambda xs, n: xs[:n]) if direction == "right" else (lambda xs, n: xs[len(xs) - n:])


def _windows(ids, offsets, n: int, stride: int, direction: str) -> list[tuple[list, list | str]]:
    """HF's ``Encoding.truncate``: windows of ``n`` tokens stepping ``n - stride``; the
    first is kept, the rest overflow (from the end when cutting on the left)."""
    if n <= 0:
        return [([], offsets if isinstance(offsets, str) else [])]
    step = n - stride
    starts = list(range(0, len(ids), step)) if direction == "right" else \
        list(range(len(ids) - n, -step, -step))
    out = []
    for s in starts:
        lo, hi = max(s, 0), s + n
        out.append((ids[lo:hi], offsets if isinstance(offsets, str) else offsets[lo:hi]))
        if hi >= len(ids) and direction == "right" or lo == 0 and direction == "left":
            break
    return out


def _pair(item, index: int) -> tuple[str, str]:
    if isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(x, str) for x in item):
        return item[0], item[1]
    raise TypeError(f"input[{index}]: a text or a (text, pair) of two texts expected, not {item!r:.80}")


def _unaligned(spec: dict | None) -> str | None:
    steps = [] if spec is None else spec["processors"] if spec["type"] == "Sequence" else [spec]
    for s in steps:
        if s["type"] == "ByteLevel" and s.get("trim_offsets"):
            return "a ByteLevel post-processor with trim_offsets: true is not implemented"
    return None


def _wordpiece(data: dict, path):
    """A WordPiece of a tokenizer.json's parsed data (truncation and padding removed:
    the ``Tokenizer`` applies them)."""
    import tempfile

    from .wordpiece.model import WordPiece

    with tempfile.TemporaryDirectory() as d:   # WordPiece reads files
        tmp = Path(d) / "tokenizer.json"
        tmp.write_text(__import__("json").dumps(data), encoding="utf-8")
        try:
            return WordPiece.from_file(tmp)
        except ValueError as exc:
            raise ValueError(str(exc).replace(str(tmp), str(path))) from None


def _file_truncation(t, path) -> dict | None:
    """The file's ``truncation`` as keyword values: read by the one tokenizer.json
    truncation rule, ``reference.wordpiece.Truncation.from_hf``, with the file named."""
    if t is not None and not isinstance(t, dict):
        raise ValueError(f"{path}: truncation: an object or null expected")
    try:
        truncation = Truncation.from_hf(t)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return None if truncation is None else dict(vars(truncation))


def _file_padding(p, path) -> dict | None:
    """The file's ``padding`` as keyword values: read by the one tokenizer.json padding
    rule, ``reference.wordpiece.Padding.from_hf`` (strategy, defaults, checks), with the
    file named in its errors."""
    if p is not None and not isinstance(p, dict):
        raise ValueError(f"{path}: padding: an object or null expected")
    try:
        padding = Padding.from_hf(p)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    return None if padding is None else dict(vars(padding))


def _native_parts(text: str):
    """``formats._hfjson.parts_of_bytes`` of a tokenizer.json's text, or None (a text
    that is not UTF-8-encodable, lone surrogates, is read by json)."""
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return parts_of_bytes(raw, read_model_parts)
