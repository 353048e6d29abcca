r"""``HFEncoding``: a byte-level BPE tokenizer.json, encoded exactly as HF ``tokenizers`` does.

``fastbpe.load("tokenizer.json")`` returns one. It is an ``Encoding`` (tiktoken's API,
so shards, ``count`` and batches work unchanged) whose ids are HF's:
``enc.encode(text, allowed_special="all")`` equals ``tokenizers``'
``encode(text, add_special_tokens=False).ids``, and ``encode_ordinary`` equals HF with
``encode_special_tokens=True`` (special-token text is text; non-special added tokens
still match, as in HF).

**The post-processor** (Llama 3's ``<|begin_of_text|>``) is applied when the caller
asks: ``encode(..., add_special_tokens=True)`` (also on ``encode_batch``,
``encode_to_numpy``, ``encode_batch_to_numpy``) is HF's default
``encode(text).ids``. Decision: the default stays ``False``, so tiktoken code keeps
tiktoken's meaning of ``encode``; transformers-style callers say so explicitly.
``hf_decode(ids, skip_special_tokens=True)`` is HF's ``decode`` (its decoder, special
tokens dropped by default); ``decode`` keeps tiktoken's (every token's bytes).

**Two engines, one meaning.** At load the file is checked for the case where
tiktoken's rank rule gives HF's ids; such a file runs on the native rank core
(``enc.engine == "rank"``: its batches run on native threads). Any other file runs the
pipeline of ``fastbpe.reference.hf`` step by step (normalizer, pre-tokenizer chain, HF's
merge-list rule natively with a per-word cache): exact, and slower
(``enc.engine == "pipeline"``). The rank engine's conditions:

* the pre-tokenizer is one Split by a known pattern that matches every character (or
  ByteLevel's own regex), then ByteLevel; or several Isolated Splits in a Sequence that
  compile to one native split program (DeepSeek V3/V4's three, see *Sequences* below),
  then ByteLevel; no prefix / suffix on words; no added-token flags (``lstrip`` ...),
  and normalized and raw added tokens cannot overlap;
* the normalizer is none, an empty Sequence, or NFC (see *NFC* below);
* **the merge list is the rank rule** (``reference.hf.rank_rule_unreachable``, which
  proves it): no token's own bytes merge by the list into exactly two ids, and the
  merges that make a token the list reaches come in id order. Then, *Corollary A*,
  with ``ignore_merges: false`` HF's ids are tiktoken's rule on the ranks without the
  tokens ``U`` that merging never reaches (588 for Llama 3.2, 0 for Qwen3 and DeepSeek
  V4): the native core leaves ``U`` out of its encode table (``CoreBPE(...,
  unreachable=U)``; they still decode), so a piece that is one of them is merged, as HF
  merges it, under any cache state (the core never has such a token in a table it
  encodes with). *Corollary B*: with ``ignore_merges: true`` it is tiktoken's rule on
  all the ranks. The check merges every token's bytes once by the list (natively, one
  call) and scans the list once. The published Llama 3.2, Qwen3 and DeepSeek V4 lists
  (trained merges, not every split) and transformers' TikTokenConverter lists pass.

**Llama 3** (its Split's pattern, ``patterns.LLAMA3``): it splits every text as
cl100k's pattern splits the text's two parts at ``llama3_cut`` (after the last ``\r``
or ``\n`` of the trailing whitespace, when whitespace follows): the two differ only in
cl100k's ``\s++$``, which takes a whole trailing run, where Llama 3's ``\s*[\r\n]+``
stops after its last newline (the other alternatives match the same text: possessive
and greedy quantifiers there never backtrack into a different match; tested against
``regex`` on every whitespace character and hypothesis text). So such a file runs on
the hand-written cl100k splitter (``Llama3Core``); a text holding a token the call
matches (its runs between them each end like a text) goes to a core with Llama 3's
pattern as a split program, made at its first use. Qwen's pattern is Llama 3's with
``\p{N}`` for ``\p{N}{1,3}``, so it is ``patterns.CL100K_DIGIT1`` (cl100k's with
``\p{N}``) after the same cut, on the same splitter with its digit-run parameter 1
(nothing else in these patterns looks at digits; tested as Llama 3's is).

**Sequences** (DeepSeek): a Sequence of Isolated Splits (``\\p{N}{1,3}``, a CJK run,
the main regex), then ByteLevel without its regex, splits each text between added
tokens as ``reference.split_program.split_sequence`` does; when
``compile_sequence`` proves one split program equal to that (Corollary 5 of that
module), the core runs it natively (``CoreBPE(..., pat_str=tuple of the regexes)``,
``_pretokenize.pattern_id`` of the tuple), with the rank core's caches and native
batches. ``pat_str`` stays the first Split's regex, for display only.

**NFC** (Qwen): HF cuts the raw added tokens out of the text, normalizes each piece
between them, then cuts the normalized added tokens. On the rank engine
(``NFCCore``): the text's NFC as HF makes it (``reference.hf.nfc``, Unicode 9.0;
natively ``_nfc.nfc``, which finds the few spans NFC may change and gives only them to
``unicodedata``) is the same object for a text that is NFC, which is encoded as it is:
every substring of an NFC text is NFC (composition only joins a character to the last
starter before it, and cutting the ends removes nothing between them: what did not
compose in the whole text does not in a piece), so the normalizer changes no piece.
Another text in which no added token's text occurs, before or after normalizing, is
one piece to HF: its NFC is encoded. Any other text runs the pipeline engine (made at
its first use), which cuts exactly as HF. With both (Qwen), ``NFCCore`` is in front
of ``Llama3Core``: the cut is made on the text the normalizer gives.
"""
from __future__ import annotations

import bisect
import contextlib
import functools
import heapq
import os
from collections.abc import Sequence
from itertools import accumulate

import numpy as np
import regex

from ..formats.hf_bpe import unicode_to_bytes
from ..formats.hf_pipeline import HFPipeline, not_byte_level, read_pipeline
from ..reference import hf
from ..reference import patterns
from ..reference.core import CoreBPE as ReferenceCoreBPE
from ..reference.core import DisallowedSpecial
from ..reference.core import fix_surrogates
from ..reference.tokenizer_json import ModelParts, byte_level_bytes
from .encoding import Encoding, _make_core

try:
    from .._hf_merge import MergeList as _MergeList
    from .._hf_merge import merge_id_columns as _merge_id_columns
except ImportError:  # pragma: no cover - the pure-Python words serve
    _MergeList = _merge_id_columns = None
try:
    from .._encode import _rebuild_core
except ImportError:  # pragma: no cover - the core from the ranks dict serves
    _rebuild_core = None
try:
    from .._hf_json import model_parts as _native_model_parts
except ImportError:  # pragma: no cover - the ordinary reader serves
    _native_model_parts = None
try:
    from .._pretokenize import pattern_id as _pattern_id
    from .._pretokenize import split_offsets as _split_offsets
except ImportError:  # pragma: no cover - the regex splitters serve
    _pattern_id = _split_offsets = None
try:
    from .._nfc import OWN as _OWN
    from .._nfc import Needles as _Needles
    from .._nfc import Route as _Route
    from .._nfc import nfc as _hf_nfc
except ImportError:  # pragma: no cover - the reference serves
    _hf_nfc = hf.nfc
    _Needles = _Route = _OWN = None

#: Patterns that match every character, so Split(Isolated) leaves no gap to add: the
#: built-in ones and the open models' (their HF forms, as ``hf_pipeline`` reads them).
_TOTAL_PATTERNS = frozenset(patterns.PATTERNS.values())

#: A Split's pattern -> the hand-written splitter's pattern that splits as it does after
#: ``llama3_cut`` (the module docstring's *Llama 3*; Qwen's differs only in its digits).
_CUT_PATTERNS = {patterns.LLAMA3: patterns.CL100K, patterns.QWEN: patterns.CL100K_DIGIT1}

#: Words cached per encoding before the cache starts over (HF keeps 10,000 per thread).
_CACHE_WORDS = 200_000


class HFEncoding(Encoding):
    """A byte-level BPE tokenizer.json (see the module docstring)."""

    def __init__(self, name: str, pipeline: HFPipeline, *, engine: str = "auto", parts: ModelParts | None = None):
        """``engine``: "auto" (the rank engine when the file allows it) or "pipeline"
        (always the pipeline: for comparisons and benchmarks). ``parts``: the file's
        vocabulary and merges as ``read_model_parts`` read them, when the pipeline was
        read with them (its token bytes are not made again)."""
        if not isinstance(pipeline, HFPipeline):
            raise TypeError(f"pipeline must be an HFPipeline, not {type(pipeline).__name__}")
        if engine not in ("auto", "pipeline"):
            raise ValueError(f"engine must be 'auto' or 'pipeline', not {engine!r}")
        ranks, specials, added = _ids_of(pipeline, parts)
        #: the file's tokens packed as read (``parts``), when they are exactly ``ranks``:
        #: the rank-rule check and the core are built from them without int objects
        self._packed = parts if parts is not None and ranks is parts.ranks else None
        plan = _rank_engine_plan(pipeline, ranks, self._packed) if engine == "auto" else None
        engine_pattern, self._unreachable = plan if plan else (None, frozenset())
        cut = engine_pattern in _CUT_PATTERNS
        if isinstance(engine_pattern, tuple):  # Splits in sequence: one split program
            self._core_pattern, engine_pattern = engine_pattern, _display_pattern(pipeline.pre_tokenizer)
        else:  # Llama 3's and Qwen's patterns run on the cl100k splitter (see Llama3Core)
            self._core_pattern = _CUT_PATTERNS.get(engine_pattern)
        super().__init__(name, pat_str=engine_pattern or _display_pattern(pipeline.pre_tokenizer),
                         mergeable_ranks=ranks, special_tokens=specials, added_tokens=added)
        self._pipeline = pipeline
        self._engine_asked = engine
        self.engine = "rank" if plan else "pipeline"
        #: the rank engine on a .tiktoken's own rule: no normalizer, no unreachable
        #: tokens, the core's pattern the file's
        self._plain_rank = (self.engine == "rank" and not self._unreachable and not _nfc(pipeline)
                            and self._core_pattern is None)
        native, added_texts = self._core_bpe, [e["content"] for e in pipeline.added]
        if self.engine == "pipeline":
            self._core_bpe = PipelineCore(native, pipeline, specials)
            return
        if cut:
            own = functools.partial(_make_core, ranks, {**specials, **added}, engine_pattern, self._unreachable)
            self._core_bpe = Llama3Core(native, own)
        if _nfc(pipeline):   # NFC first, then the cut (Qwen): the cut is on the normalized text
            self._core_bpe = NFCCore(self._core_bpe, functools.partial(PipelineCore, native, pipeline, specials),
                                     added_texts)

    @classmethod
    def from_json(cls, name: str, data: dict, source: str, *, engine: str = "auto",
                  parts: ModelParts | None = None) -> HFEncoding:
        """The encoding of a parsed tokenizer.json (``read_pipeline``, which refuses what
        it cannot reproduce), the merges' ids found natively
        (``_hf_merge.merge_id_columns``); ``parts``: the vocabulary and merges as
        ``formats._hfjson.read_json_parts`` read them with ``read_model_parts``."""
        return cls(name, read_pipeline(data, source, merge_ids=_merge_id_columns, parts=parts), engine=engine,
                   parts=parts)

    def _new_core(self, ranks, specials, pat_str):
        """The native core of ``Encoding.__init__``: without the unreachable tokens in
        its encode table, splitting by the core pattern when there is one; from the
        file's packed tokens when the load read them (``_packed_core``)."""
        pattern = self._core_pattern or pat_str
        if self._packed is not None and _rebuild_core is not None and os.environ.get("FASTBPE_REFERENCE_CORE") != "1":
            return _packed_core(self._packed, specials, pattern, self._unreachable)
        return _make_core(ranks, specials, pattern, self._unreachable)

    def encode_single_token(self, text_or_bytes) -> int:
        """``Encoding.encode_single_token``; a token the merges never reach is a token too."""
        try:
            return super().encode_single_token(text_or_bytes)
        except KeyError:
            piece = text_or_bytes.encode("utf-8") if isinstance(text_or_bytes, str) else bytes(text_or_bytes)
            if piece in self._unreachable:
                return self._mergeable_ranks[piece]
            raise

    # ------------------------------------------------------------------ HF's extras
    def encode(self, text: str, *, allowed_special=set(), disallowed_special="all",  # noqa: B006
               add_special_tokens: bool = False) -> list[int]:
        """``Encoding.encode``; ``add_special_tokens=True`` adds what the file's
        post-processor adds (HF's default)."""
        ids = super().encode(text, allowed_special=allowed_special, disallowed_special=disallowed_special)
        return self._post(ids) if _flag(add_special_tokens) else ids

    def encode_batch(self, text: Sequence[str], *, num_threads: int = 8, allowed_special=set(),  # noqa: B006
                     disallowed_special="all", add_special_tokens: bool = False) -> list[list[int]]:
        out = super().encode_batch(text, num_threads=num_threads, allowed_special=allowed_special,
                                   disallowed_special=disallowed_special)
        return [self._post(ids) for ids in out] if _flag(add_special_tokens) else out

    def encode_to_numpy(self, text: str, *, allowed_special=set(), disallowed_special="all",  # noqa: B006
                        dtype=np.uint32, add_special_tokens: bool = False) -> np.ndarray:
        ids = super().encode_to_numpy(text, allowed_special=allowed_special, disallowed_special=disallowed_special, dtype=dtype)
        return np.asarray(self._post(ids.tolist()), dtype=ids.dtype) if _flag(add_special_tokens) else ids

    def encode_batch_to_numpy(self, text: Sequence[str], *, num_threads: int = 8, allowed_special=set(),  # noqa: B006
                              disallowed_special="all", dtype=np.uint32, add_special_tokens: bool = False):
        if not _flag(add_special_tokens):
            return super().encode_batch_to_numpy(text, num_threads=num_threads, allowed_special=allowed_special,
                                                 disallowed_special=disallowed_special, dtype=dtype)
        dtype = self._check_dtype(dtype)
        encoded = self.encode_batch(text, num_threads=num_threads, allowed_special=allowed_special,
                                    disallowed_special=disallowed_special, add_special_tokens=True)
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        return np.fromiter((i for e in encoded for i in e), dtype=dtype, count=int(offsets[-1])), offsets

    def hf_decode(self, tokens: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        """HF's ``decode``: the tokens' strings (special added tokens dropped unless
        ``skip_special_tokens=False``) through the file's decoder."""
        tokens = self._check_tokens(tokens)
        self.decode_bytes(tokens)   # tiktoken's checks and errors for bad ids
        strings = []
        for t in (tokens.tolist() if isinstance(tokens, np.ndarray) else tokens):
            t = int(t)
            if t in self._added_by_id:
                if skip_special_tokens and self._added_by_id[t]["special"]:
                    continue
                strings.append(self._added_by_id[t]["content"])
            else:
                strings.append(self._vocab_by_id[t])
        return hf.decode(self._pipeline.decoder, strings)

    @property
    def _split_engine(self) -> str:
        """``Encoding._split_engine``; on the pipeline engine, what splits the pieces
        the merge list takes: "program" (a native split program) or "regex"."""
        if self.engine == "rank" and self._core_pattern is not None:
            from .._pretokenize import pattern_id, split_engine

            return split_engine(pattern_id(self._core_pattern))
        if self.engine == "rank":
            return super()._split_engine
        return "program" if hasattr(self._core_bpe._split, "pattern") else "regex"

    @property
    def pipeline(self) -> HFPipeline:
        """The file's components (normalizer, pre-tokenizer, model, post-processor,
        decoder, added tokens), as ``fastbpe.formats.hf_pipeline`` read them."""
        return self._pipeline

    # ------------------------------------------------------------------ what needs the pipeline
    def count_till_limit(self, text: str, limit: int) -> int | None:
        """``count(text)`` if at most ``limit``, else None (the text is encoded whole,
        unless the rank engine runs it without a normalizer: the pipeline's pieces are
        not the pattern's)."""
        if self.engine == "rank" and self._core_pattern is None and not isinstance(self._core_bpe, _RoutedCore):
            return super().count_till_limit(text, limit)
        super().count_till_limit("", limit)   # the argument checks
        n = self.count(text)
        return n if n <= limit else None

    def encode_with_unstable(self, text: str, **kwargs):
        if self._plain_rank:
            return super().encode_with_unstable(text, **kwargs)
        raise ValueError(f"{self.name}: encode_with_unstable follows tiktoken's rank rule, which this file's pipeline does not")

    def _encode_bytes(self, text: bytes) -> list[int]:
        if self._plain_rank:
            return super()._encode_bytes(text)
        raise ValueError(f"{self.name}: _encode_bytes follows tiktoken's rank rule, which this file's pipeline does not")

    def _encode_only_native_bpe(self, text: str) -> list[int]:
        return super()._encode_only_native_bpe(text) if self._plain_rank else self.encode_ordinary(text)

    # ------------------------------------------------------------------ files
    def save(self, path, format: str | None = None, *, lossy: bool = False, transformers: bool = False) -> None:
        """As ``Encoding.save``; a tokenizer.json (or a transformers folder) holds the
        file's whole pipeline, as read. A ranks-only format cannot hold a pipeline that
        the rank rule does not reproduce: ValueError unless ``lossy=True``."""
        from pathlib import Path

        from ..formats import _format_from_path
        from ..formats.hf_pipeline import pipeline_json
        from ..formats.transformers_files import TOKENIZER_JSON, transformers_folder, write_transformers_config
        from ..io.atomic import atomic_write_text

        path = Path(path)
        folder = transformers or (format in (None, "hf") and path.is_dir())
        fmt = "hf" if folder else format or _format_from_path(path)
        if fmt == "hf":
            if folder:
                target = transformers_folder(path)
                atomic_write_text(target / TOKENIZER_JSON, pipeline_json(self._pipeline))
                write_transformers_config(target, self.special_tokens, "bpe", self.added_tokens)
            else:
                atomic_write_text(path, pipeline_json(self._pipeline))
            return
        if not self._plain_rank and not lossy:
            raise ValueError(
                f"a {fmt} file holds ranks and a split pattern, which give other ids than {self.name!r} "
                "(HF's pipeline: its normalizer, pre-tokenizers or merge list); save as tokenizer.json, "
                "or pass lossy=True to save the ranks anyway"
            )
        super().save(path, format=format, lossy=lossy, transformers=transformers)

    # ------------------------------------------------------------------ pickling
    def __reduce_ex__(self, protocol):
        from ..formats.hf_pipeline import pipeline_json

        return (_rebuild, (self.name, pipeline_json(self._pipeline), self._engine_asked))

    def _ids_rule(self) -> bytes:
        """What decides a document's ids beyond ranks, pattern and special tokens, for
        the shard manifest's tokenizer sha256 (``fastbpe.shards.tokenizer_identity``):
        nothing on the rank engine with a .tiktoken's own rule (its shards are those of
        the ``.tiktoken`` it equals); else the whole pipeline as written (normalizer,
        pre-tokenizer chain, merge list, ``ignore_merges``: two files with one
        vocabulary may differ)."""
        if self._plain_rank:
            return b""
        from ..formats.hf_pipeline import pipeline_json

        return pipeline_json(self._pipeline).encode("utf-8")

    # ------------------------------------------------------------------ helpers
    def _post(self, ids: list[int]) -> list[int]:
        return hf.post_process(self._pipeline.post_processor, ids)

    @property
    def _added_by_id(self) -> dict[int, dict]:
        try:
            return self.__added_by_id
        except AttributeError:
            self.__added_by_id = {e["id"]: e for e in self._pipeline.added}
            return self.__added_by_id

    @property
    def _vocab_by_id(self) -> dict[int, str]:
        try:
            return self.__vocab_by_id
        except AttributeError:
            self.__vocab_by_id = {i: t for t, i in self._pipeline.vocab.items()}
            return self.__vocab_by_id


def _rebuild(name: str, text: str, engine: str = "auto") -> HFEncoding:
    import json

    return HFEncoding.from_json(name, json.loads(text), name, engine=engine)


def _flag(value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"add_special_tokens must be a bool, not {type(value).__name__}")
    return value


def _ids_of(p: HFPipeline, parts: ModelParts | None = None) -> tuple[dict[bytes, int], dict[str, int], dict[str, int]]:
    """(ranks, special tokens, other added tokens) for the ``Encoding`` underneath: every
    byte-level vocabulary entry is an id's bytes, except an added token's own entry
    (its id decodes to its content) unless merges build that token too. With ``parts``
    the byte-level entries' bytes are ``parts.ranks`` (made as the file was read)."""
    added_texts = {e["content"] for e in p.added}
    # the added tokens' ids that merges make (no set of every merge's id)
    produced = {p.vocab[t] for t in added_texts if t in p.vocab}.intersection(p.merge_columns[2])
    table = unicode_to_bytes()
    strange = parts.not_byte_level if parts is not None else not_byte_level(p.vocab)
    skip = set(strange)   # added tokens' own entries (hf_pipeline checks)
    skip |= {t for t in added_texts if t in p.vocab and p.vocab[t] not in produced and not (len(t) == 1 and t in table)}
    specials = {e["content"]: e["id"] for e in p.added if e["special"]}
    added = {e["content"]: e["id"] for e in p.added if not e["special"]}
    if parts is not None:
        ranks = parts.ranks
        dropped = [t for t in skip if t not in strange]
        if dropped:
            ranks = dict(ranks)
            for t in dropped:
                del ranks[byte_level_bytes(t)]
        return ranks, specials, added
    texts = [t for t in p.vocab if t not in skip] if skip else list(p.vocab)
    # one translate and encode of all texts (each ByteLevel character is one byte), cut
    # by the texts' lengths: ~3x faster than a translate per token
    blob = "".join(texts).translate(_to_latin1()).encode("latin-1")
    ends = list(accumulate(map(len, texts)))
    tokens = map(blob.__getitem__, map(slice, [0] + ends[:-1], ends))
    ranks = dict(zip(tokens, map(p.vocab.__getitem__, texts)))
    return ranks, specials, added


def _packed_core(packed: ModelParts, specials: dict[str, int], pattern, unreachable: frozenset[bytes]):
    """The native core of ``packed``'s tokens (``_encode._rebuild_core``, no dict to
    pack), as ``CoreBPE(ranks, specials, pattern, unreachable)`` builds it: the
    encoded tokens first, then the unreachable ones, each group in file order."""
    arena, lengths, ids = packed.arena, packed.lengths, packed.ids
    n_encoded = -1
    if unreachable:
        lens = np.frombuffer(lengths, dtype=np.uint32)
        idv = np.frombuffer(ids, dtype=np.uint32)
        skip = np.isin(idv, np.fromiter((packed.ranks[t] for t in unreachable), dtype=np.uint32, count=len(unreachable)))
        # a stable partition (kept tokens, then the unreachable ones) of the tokens and of
        # their bytes: two boolean selections, no int64 gather index per byte
        skip_bytes = np.repeat(skip, lens)
        data = np.frombuffer(arena, dtype=np.uint8)
        arena = data[~skip_bytes].tobytes() + data[skip_bytes].tobytes()
        lengths = lens[~skip].tobytes() + lens[skip].tobytes()
        ids = idv[~skip].tobytes() + idv[skip].tobytes()
        n_encoded = int(len(skip) - skip.sum())
    return _rebuild_core(arena, lengths, ids, dict(specials), pattern, n_encoded)


def read_model_parts(raw: bytes) -> ModelParts | None:
    """``reference.tokenizer_json.model_parts`` of a tokenizer.json's bytes, natively
    (``_hf_json.model_parts``): None when the file is not of the plain form (then it is
    read the ordinary way), or when the native reader is not built."""
    if _native_model_parts is None:  # pragma: no cover - the ordinary reader serves
        return None
    found = _native_model_parts(raw, hf._byte_chars())
    return None if found is None else ModelParts(*found)


@functools.lru_cache(maxsize=1)
def _to_latin1() -> dict[int, str]:
    """``str.translate`` table: each ByteLevel character to the character of its byte,
    so ``.encode("latin-1")`` gives the token's bytes."""
    return str.maketrans({c: chr(b) for b, c in enumerate(hf._byte_chars())})


def _display_pattern(pre: dict | None) -> str:
    """``pat_str`` of a pipeline file: its first Split regex, else ByteLevel's (for
    display only: the pipeline, not this pattern, splits). A built-in pattern is
    wrapped in a group, the same regex under another name: code that takes a built-in
    pattern as a promise of how text splits (``corpus.cutter`` cuts long documents where
    every built-in pattern splits) must not take it from a pipeline."""
    stack = [pre] if pre else []
    found = patterns.GPT2
    while stack:
        step = stack.pop(0)
        if step["type"] == "Sequence":
            stack[:0] = step["pretokenizers"]
        elif step["type"] == "Split" and "Regex" in step["pattern"]:
            found = step["pattern"]["Regex"]
            break
    return f"(?:{found})" if found in _TOTAL_PATTERNS else found


def _nfc(p: HFPipeline) -> bool:
    return p.normalizer == {"type": "NFC"}


def _rank_engine_plan(p: HFPipeline, ranks: dict[bytes, int],
                      packed: ModelParts | None = None) -> tuple[str | tuple[str, ...], frozenset[bytes]] | None:
    """``(pattern, unreachable tokens)`` with which tiktoken's rank rule gives exactly
    this file's ids, or None (the module docstring's conditions); the pattern is a
    tuple for Isolated Splits in sequence (one native split program)."""
    if p.normalizer not in (None, {"type": "Sequence", "normalizers": []}) and not _nfc(p):
        return None
    if p.model["continuing_subword_prefix"] or p.model["end_of_word_suffix"]:
        return None
    pattern = _single_total_split(p.pre_tokenizer) or _native_sequence(p.pre_tokenizer)
    if pattern is None:
        return None
    for e in p.added:
        if e["lstrip"] or e["rstrip"] or e["single_word"]:
            return None
    normalized, raw = [[e["content"] for e in p.added if e["normalized"] == flag] for flag in (True, False)]
    # with NFC, any overlap (``_may_overlap``: ``_taken_before_raw`` either way round)
    if _any_taken_before_raw(normalized, raw) or (_nfc(p) and _any_taken_before_raw(raw, normalized)):
        return None
    unreachable = _rank_rule_unreachable(p, ranks, packed)
    if unreachable is None:
        return None
    return pattern, (frozenset() if p.model["ignore_merges"] else unreachable)


def _taken_before_raw(a: str, b: str) -> bool:
    """Whether one pass over the text (the native core's: leftmost added token, longest
    at one start) may take the normalized added token ``a`` where HF, with a normalizer
    that changes nothing, takes the raw one ``b``. HF cuts the raw tokens first and
    matches the normalized ones in the text between them. One pass differs only where
    an ``a`` it takes overlaps a ``b``: ``a`` starts first (a suffix of ``a`` is a
    prefix of ``b``) or at the same place holding ``b`` (``b`` in ``a``). A ``b`` that
    starts first, or at the same place and is longer, is taken by both.

    >>> _taken_before_raw("|DSML|", "</table>|"), _taken_before_raw("</table>|", "|DSML|")
    (False, True)
    >>> _taken_before_raw("<a>", "a")
    True
    """
    return b in a or any(a.endswith(b[:k]) for k in range(1, min(len(a), len(b))))


def _any_taken_before_raw(normalized: list[str], raw: list[str]) -> bool:
    """``any(_taken_before_raw(a, b) for a in normalized for b in raw)``, without the
    product (DeepSeek V4: 1,283 added tokens, ~57k pairs, ~0.3 s that way): a raw token
    inside some ``a`` is a set lookup per substring of ``a`` of a raw token's length
    (no regex of them all: compiling 1,237 alternatives costs ~0.3 s); whether a suffix
    of ``a`` is a proper prefix of a raw token (each shorter than both) is one bisection
    of the sorted raw tokens per suffix: those starting with it follow it there, the
    one equal to it (not a proper prefix) first (no set of every prefix: ~18k strings).

    >>> _any_taken_before_raw(["|DSML|", "x"], ["</table>|"]), _any_taken_before_raw(["</table>|"], ["|DSML|"])
    (False, True)
    """
    if not normalized or not raw:
        return False
    raws = set(raw)
    lengths = sorted(set(map(len, raws)))
    ordered = sorted(raws)

    def proper_prefix(s: str) -> bool:
        i = bisect.bisect_left(ordered, s)
        i += i < len(ordered) and ordered[i] == s
        return i < len(ordered) and ordered[i].startswith(s)

    for a in normalized:
        if any(a[i:i + n] in raws for n in lengths for i in range(len(a) - n + 1)):
            return True
        if any(proper_prefix(a[len(a) - k:]) for k in range(1, len(a))):
            return True
    return False


def _rank_rule_unreachable(p: HFPipeline, ranks: dict[bytes, int],
                           packed: ModelParts | None = None) -> frozenset[bytes] | None:
    """``reference.hf.rank_rule_unreachable`` of the file, as token bytes, decided on
    numpy arrays (the same two conditions; ``tests/test_hf_rank_rule.py`` checks both
    agree on the published files). ``packed``: ``ranks`` and the merges as the load
    read them (``_merged_counts``)."""
    ids, counts, news = _merged_counts(p, ranks, packed)
    if _MergeList is None:  # pragma: no cover - the reference decides
        found = hf.rank_rule_unreachable(ids.tolist(), counts.tolist(), news.tolist())
    elif (counts == 2).any():
        found = None                                   # condition (1)
    else:
        reached = np.zeros(int(max(ids.max(initial=0), news.max(initial=0))) + 1, dtype=bool)
        reached[ids[counts == 1]] = True
        in_order = not (np.diff(news[reached[news]]) < 0).any()    # condition (2)
        found = frozenset(ids[counts >= 3].tolist()) if in_order else None
    if found is None:
        return None
    # the few found ids' tokens (Llama 3.2: 588 of 128k; no id -> token dict of them all)
    return frozenset(t for t, r in ranks.items() if r in found) if found else frozenset()


def _merged_counts(p: HFPipeline, ranks: dict[bytes, int],
                   packed: ModelParts | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(token ids, how many ids the merge list makes of each token's own bytes, the id
    each merge makes) as int64 arrays: every token merged by the list natively in one
    call (``MergeList.piece_counts`` over all tokens end to end, no whole-word lookup;
    counts of 3 or more given as 3, all the check tells apart). With ``packed`` (the
    same tokens and merges, packed as the load read them) no list, int or bytes object
    is made per token or merge."""
    if packed is not None and _MergeList is not None:
        ids = np.frombuffer(packed.ids, dtype=np.uint32).astype(np.int64)
        ends = np.cumsum(np.frombuffer(packed.lengths, dtype=np.uint32), dtype=np.int64)
        trio = np.frombuffer(packed.merge_triples, dtype=np.uint32).reshape(-1, 3)
        lefts, rights, news = (np.ascontiguousarray(trio[:, k]) for k in range(3))
        words = _MergeList([p.vocab[c] for c in hf._byte_chars()], lefts, rights, news, None, 0)
        counts = np.frombuffer(words.piece_counts(packed.arena, ends), dtype=np.uint8)
        return ids, counts.astype(np.int64), news.astype(np.int64)
    tokens = list(ranks)
    ids = np.fromiter(ranks.values(), dtype=np.int64, count=len(tokens))
    lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
    lefts, rights, news = p.merge_columns
    if _MergeList is None:  # pragma: no cover - the Python rule serves
        table = {(a, b): (rank, new) for rank, (a, b, new) in enumerate(p.merge_ids)}
        counts = [len(hf.merge_by_list(list(t), table)) for t in tokens]
        return ids, np.asarray(counts, dtype=np.int64), np.asarray(news, dtype=np.int64)
    words = _MergeList([p.vocab[c] for c in hf._byte_chars()], lefts, rights, news, None, 0)
    counts = np.frombuffer(words.piece_counts(b"".join(tokens), np.cumsum(lengths)), dtype=np.uint8)
    return ids, counts.astype(np.int64), np.asarray(news, dtype=np.int64)


def _single_total_split(pre: dict | None) -> str | None:
    if pre is None:
        return None
    steps = pre["pretokenizers"] if pre["type"] == "Sequence" else [pre]
    if len(steps) == 1 and steps[0]["type"] == "ByteLevel":
        bl = steps[0]
        return patterns.GPT2 if bl["use_regex"] and not bl["add_prefix_space"] else None
    if len(steps) != 2 or steps[0]["type"] != "Split" or steps[1]["type"] != "ByteLevel":
        return None
    split, bl = steps
    if bl["use_regex"] or bl["add_prefix_space"] or split["invert"] or split["behavior"] != "Isolated":
        return None
    regex_text = split["pattern"].get("Regex")
    return regex_text if regex_text in _TOTAL_PATTERNS else None


def _isolated_regexes(pre: dict | None) -> str | tuple[str, ...] | None:
    """The regexes of a pre-tokenizer that is Isolated Splits (not inverted) and then
    ByteLevel without its regex or a prefix space: the one regex, or the tuple of them
    in order (HF's Sequence); None for any other pre-tokenizer.

    >>> bl = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}
    >>> split = {"type": "Split", "pattern": {"Regex": r"\\p{N}"}, "behavior": "Isolated", "invert": False}
    >>> _isolated_regexes({"type": "Sequence", "pretokenizers": [split, split, bl]})
    ('\\\\p{N}', '\\\\p{N}')
    """
    if pre is None:
        return None
    steps = pre["pretokenizers"] if pre["type"] == "Sequence" else [pre]
    *splits, bl = steps
    if bl["type"] != "ByteLevel" or bl["use_regex"] or bl["add_prefix_space"] or not splits:
        return None
    if not all(_is_isolated_regex(s) for s in splits):
        return None
    regexes = tuple(s["pattern"]["Regex"] for s in splits)
    return regexes[0] if len(regexes) == 1 else regexes


def _native_sequence(pre: dict | None) -> tuple[str, ...] | None:
    """The Split regexes of a Sequence of Isolated Splits then ByteLevel (no regex, no
    prefix space) that runs as one native split program, else None."""
    regexes = _isolated_regexes(pre)
    if not isinstance(regexes, tuple) or _pattern_id is None or _pattern_id(regexes, gaps=True) < 0:
        return None
    return regexes


# --------------------------------------------------------------------------- the pipeline engine
class PipelineCore(ReferenceCoreBPE):
    """The core interface (``fastbpe.reference.core.CoreBPE``'s) over the pipeline of
    ``fastbpe.reference.hf``: encoding runs the file's steps; decoding and token
    lookups are the native core's."""

    def __init__(self, native, pipeline: HFPipeline, specials: dict[str, int]):
        self._native = native
        self._p = pipeline
        self._special_names = frozenset(specials)
        self._entries = {e["content"]: e for e in pipeline.added}
        self._ids = {e["content"]: e["id"] for e in pipeline.added}
        self._vocab = pipeline.vocab
        self._cache: dict[str, list[int]] = {}
        self._matchers: dict[frozenset, tuple[dict, dict]] = {}
        model = pipeline.model
        plain = not model["continuing_subword_prefix"] and not model["end_of_word_suffix"]
        self._char_ids = {c: pipeline.vocab[c] for c in hf._byte_chars()} if plain else None
        if not plain or _MergeList is None:
            # words start from prefixed / suffixed characters: the reference's rule
            self._split, self._words = lambda text: hf.pre_tokenize(pipeline.pre_tokenizer, text), self._python_words
            return
        # every ByteLevel character is a vocabulary entry (hf_pipeline checks it): a
        # word's bytes map to ids, merged natively
        vocab, chars = pipeline.vocab, hf._byte_chars()
        whole = None
        if model["ignore_merges"]:
            strange, to_bytes = set(not_byte_level(vocab)), _to_latin1()
            whole = {t.translate(to_bytes).encode("latin-1"): i for t, i in vocab.items() if t not in strange}
        lefts, rights, news = pipeline.merge_columns
        self._native_words = _MergeList([vocab[c] for c in chars], lefts, rights, news, whole, _CACHE_WORDS)
        self._split = _raw_splitter(pipeline.pre_tokenizer)
        self._words = self._native_words.encode_pieces
        pattern = getattr(self._split, "pattern", None)
        if pattern is not None:  # split offsets straight into the merges: no list of pieces
            self._encode_text = functools.partial(_split_and_merge, pattern, self._native_words.encode_split)

    def _encode_text(self, text: str, out: list[int] | None = None) -> list[int]:
        """The ids of a piece of text between added tokens (normalized already)."""
        return self._words(self._split(text), out)

    # encoding --------------------------------------------------------------------
    def encode_ordinary(self, text: str) -> list[int]:
        return self._encode_allowed(text, frozenset())

    def _encode_allowed(self, text: str, allowed_special) -> list[int]:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = fix_surrogates(text)
        raw, normalized = self._matcher(allowed_special)
        if not raw and not normalized and self._p.normalizer is None:
            return self._encode_text(text)
        ids: list[int] = []
        normalizer, encode_text = self._p.normalizer, self._encode_text
        for piece, token in hf.split_added(text, raw, normalized, normalizer):
            if token is not None:
                ids.append(self._ids[token])
            else:
                encode_text(piece, ids)
        return ids

    def _python_words(self, words: list[str], out: list[int] | None = None) -> list[int]:
        out = [] if out is None else out
        for word in words:
            out.extend(self._word_ids(word))
        return out

    def encode_ordinary_batch(self, texts, num_threads: int = 1) -> list[list[int]]:
        return [self.encode_ordinary(self._checked(t, i)) for i, t in enumerate(texts)]

    def encode_batch(self, texts, allowed_special, num_threads: int = 1, disallowed_special=frozenset()):
        texts = [self._checked(t, i) for i, t in enumerate(texts)]
        return super().encode_batch(texts, allowed_special, num_threads, disallowed_special)

    @staticmethod
    def _checked(text, index: int) -> str:
        if not isinstance(text, str):
            raise TypeError(f"text {index} of the batch is {type(text).__name__}, expected str")
        return text

    def encode_single_piece(self, piece: bytes) -> list[int]:
        """One piece of bytes as one word of the model (no normalizer, no split)."""
        chars = hf._byte_chars()
        return self._python_words(["".join(chars[b] for b in bytes(piece))])

    def byte_pair_encode(self, piece: bytes) -> list[int]:
        return self.encode_single_piece(piece)

    @functools.cached_property
    def _merges(self) -> dict:
        """The merge table of the Python words (``reference.hf.merge_table``)."""
        return {(a, b): (rank, new) for rank, (a, b, new) in enumerate(self._p.merge_ids)}

    def _matcher(self, allowed) -> tuple[dict, dict]:
        """The added tokens to match on raw and on normalized text: the non-special
        ones, and the allowed special ones (cached by the set ``Encoding`` passes, whose
        hash a frozenset keeps)."""
        found = self._matchers.get(allowed)
        if found is None:
            if len(self._matchers) > 64:
                self._matchers.clear()
            key, allowed = allowed, frozenset(allowed) & self._special_names
            entries = [e for c, e in self._entries.items() if not e["special"] or c in allowed]
            raw = hf.AddedTokens((e["content"], e) for e in entries if not e["normalized"])
            normalized = hf.AddedTokens((hf.normalize(self._p.normalizer, e["content"]), e) for e in entries if e["normalized"])
            found = self._matchers[key] = (raw, normalized)
        return found

    def _word_ids(self, word: str) -> list[int]:
        ids = self._cache.get(word)
        if ids is None:
            model = self._p.model
            if model["ignore_merges"] and word in self._vocab:
                ids = [self._vocab[word]]
            elif self._char_ids is not None:
                ids = merge_heap([self._char_ids[c] for c in word], self._merges)
            else:
                ids = merge_heap(hf.word_symbols(word, model, self._vocab), self._merges)
            if len(self._cache) >= _CACHE_WORDS:
                self._cache.clear()
            self._cache[word] = ids
        return ids

    # decoding: the native core's ---------------------------------------------------
    def decode_bytes(self, tokens) -> bytes:
        return self._native.decode_bytes(tokens)

    def decode_batch_bytes(self, batch, num_threads: int = 1) -> list[bytes]:
        return self._native.decode_batch_bytes(batch, num_threads)

    def decode_single_token_bytes(self, token: int) -> bytes:
        return self._native.decode_single_token_bytes(token)

    def encode_single_token(self, piece: bytes) -> int:
        return self._native.encode_single_token(piece)

    def token_byte_values(self) -> list[bytes]:
        return self._native.token_byte_values()

    def __reduce__(self):  # pragma: no cover - HFEncoding pickles itself
        raise TypeError("PipelineCore is pickled with its HFEncoding")


class _RoutedCore:
    """A native core with a rule in front (``NFCCore``, ``Llama3Core``): ``_route(text)``
    gives the texts the native core encodes for ``text`` (their ids concatenated, batches
    on its threads), or None: then the other core (made at its first use) encodes the
    text. Decoding and token lookups are the native core's."""

    #: the one native route (``_nfc.Route``: NFC, the search for the tokens a call
    #: matches, Llama 3's cut) when the rule has one, and the rank core it feeds
    #: (``NFCCore``, ``Llama3Core``); else None and each rule's ``_route`` in Python
    _fast = None

    def __init__(self, native, make_other, added_texts):
        self._native = native
        self._rank = native
        self._make_other = make_other
        self._other_core = None
        self._added = _needles(added_texts) if added_texts else None
        self._searches: dict = {}
        # the last call's (set, search): one tuple, swapped whole, so a thread never
        # pairs one call's set with another's search
        self._last = (None, None)

    def _search(self, allowed):
        """``text -> whether it holds one of allowed`` (None for none): the last call's
        (an Encoding passes the same set each call), else by the set."""
        last = self._last
        if last[0] is not allowed:
            last = self._last = (allowed, _finder(self._searches, allowed))
        return last[1]

    def _elsewhere(self, found):  # pragma: no cover - the rules with a native route say
        """The core that encodes a text the native route gives ``_nfc.OWN`` or
        ``_nfc.PIPELINE`` for."""
        raise NotImplementedError

    def _parts(self, texts, allowed) -> list[list[str]] | None:
        """Each text's parts for the rank core by the native route (nothing disallowed),
        or None when one needs another core (then each rule's ``_route``)."""
        if self._fast is None:
            return None
        needles, routes = self._search(allowed), []
        for text in texts:
            found = self._fast(text, needles)
            if type(found) is str:
                routes.append([found])
            elif type(found) is tuple:
                routes.append(list(found))
            else:
                return None
        return routes

    def __getattr__(self, name):
        return getattr(self._native, name)

    def _other(self):
        if self._other_core is None:
            self._other_core = self._make_other()
        return self._other_core

    def _route(self, text, allowed=frozenset(), disallowed=frozenset()) -> list | None:  # pragma: no cover
        """``allowed``: the special and added tokens the native core matches in text;
        ``disallowed``: those whose text in ``text`` is an error (each rule says how it
        uses them)."""
        raise NotImplementedError

    def encode_ordinary(self, text):
        if self._fast is not None and type(text) is str:   # a str or a pair: no needles
            found = self._fast(text, None)
            return self._rank.encode_ordinary(found) if type(found) is str else _joined(self._rank.encode_ordinary, found)
        parts = self._route(text)
        if parts is None:
            return self._other().encode_ordinary(text)
        return _joined(self._native.encode_ordinary, parts)

    #: whether the texts ``_route`` gives hold none of the tokens it was asked about
    #: (``Llama3Core``): then, with nothing disallowed, the native core's ordinary
    #: encode gives the same ids without scanning for them
    _parts_hold_no_token = False

    def encode(self, text, allowed_special, disallowed_special=frozenset()):
        """With nothing disallowed (every ``encode_ordinary`` of a file with added tokens),
        one native route a text, then the rank core; else each rule's ``_route``."""
        if self._fast is not None and not disallowed_special and type(text) is str:
            last = self._last
            needles = last[1] if last[0] is allowed_special else self._search(allowed_special)
            found = self._fast(text, needles)
            if type(found) is str:
                return self._rank.encode_ordinary(found)
            if type(found) is tuple:
                return _joined(self._rank.encode_ordinary, found)
            return self._elsewhere(found).encode(text, allowed_special, disallowed_special)
        parts = self._route(text, allowed_special, disallowed_special)
        if parts is None:
            return self._other().encode(text, allowed_special, disallowed_special)
        if self._parts_hold_no_token and not disallowed_special:
            return _joined(self._native.encode_ordinary, parts)
        return _joined(self._native.encode, parts, allowed_special, disallowed_special)

    def encode_to_numpy(self, text, allowed_special=frozenset(), dtype=np.uint32, disallowed_special=frozenset()):
        parts = self._route(text, allowed_special, disallowed_special)
        if parts is None:
            return self._other().encode_to_numpy(text, allowed_special, dtype, disallowed_special)
        arrays = [self._native.encode_to_numpy(part, allowed_special, dtype, disallowed_special) for part in parts]
        return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)

    def encode_ordinary_batch(self, texts, num_threads=8):
        texts = [PipelineCore._checked(t, i) for i, t in enumerate(texts)]
        routes = self._parts(texts, frozenset())
        if routes is not None:
            return _regroup(routes, self._rank.encode_ordinary_batch([p for r in routes for p in r], num_threads))
        routes = [self._route(t) for t in texts]
        if any(r is None for r in routes):
            return self.encode_batch(texts, frozenset(), num_threads)
        return _regroup(routes, self._native.encode_ordinary_batch([p for r in routes for p in r], num_threads))

    def encode_batch(self, texts, allowed_special, num_threads=8, disallowed_special=frozenset()):
        texts = [PipelineCore._checked(t, i) for i, t in enumerate(texts)]
        routes = None if disallowed_special else self._parts(texts, allowed_special)
        if routes is not None:   # the parts hold no token the call matches
            return _regroup(routes, self._rank.encode_ordinary_batch([p for r in routes for p in r], num_threads))
        routes = [self._route(t, allowed_special, disallowed_special) for t in texts]
        if all(r is not None for r in routes):
            flat = [p for r in routes for p in r]   # parts hold no token the call matches
            if self._parts_hold_no_token and not disallowed_special:
                return _regroup(routes, self._native.encode_ordinary_batch(flat, num_threads))
            with _texts_of_parts(routes):
                return _regroup(routes, self._native.encode_batch(flat, allowed_special, num_threads, disallowed_special))
        ReferenceCoreBPE._check_disallowed(texts, disallowed_special)   # every text first, as tiktoken
        done = self._native.encode_batch([p for r in routes if r is not None for p in r], allowed_special, num_threads)
        out = _regroup([r for r in routes if r is not None], done)[::-1]
        return [self._other().encode(text, allowed_special) if parts is None else out.pop()
                for text, parts in zip(texts, routes)]

    def encode_batch_to_numpy(self, texts, allowed_special=frozenset(), num_threads=8, dtype=np.uint32,
                              disallowed_special=frozenset()):
        texts = [PipelineCore._checked(t, i) for i, t in enumerate(texts)]
        routes = None if disallowed_special else self._parts(texts, allowed_special)
        if routes is not None:   # the parts hold no token the call matches
            flat, offsets = self._rank.encode_batch_to_numpy([p for r in routes for p in r], frozenset(), num_threads, dtype)
        else:
            routes = [self._route(t, allowed_special, disallowed_special) for t in texts]
            if any(r is None for r in routes):
                encoded = self.encode_batch(texts, allowed_special, num_threads, disallowed_special)
                offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
                np.cumsum([len(e) for e in encoded], out=offsets[1:])
                return np.fromiter((i for e in encoded for i in e), dtype=dtype, count=int(offsets[-1])), offsets
            with _texts_of_parts(routes):
                flat, offsets = self._native.encode_batch_to_numpy([p for r in routes for p in r], allowed_special,
                                                                   num_threads, dtype, disallowed_special)
        if len(offsets) == len(texts) + 1:
            return flat, offsets
        # a text's parts are contiguous in flat: keep the offsets where texts start
        return flat, offsets[np.cumsum([0] + [len(r) for r in routes])]

    def encode_utf8_to_numpy(self, data, allowed_special=frozenset(), num_threads=8, dtype=np.uint32,
                             disallowed_special=frozenset()):
        native = self._native.encode_utf8_to_numpy
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError:   # the native core names the bad byte
            return native(data, allowed_special, num_threads, dtype, disallowed_special)
        parts = self._route(text, allowed_special, disallowed_special)
        if parts is None:
            return self._other().encode_to_numpy(text, allowed_special, dtype, disallowed_special)
        if len(parts) == 1 and parts[0] is text:
            return native(data, allowed_special, num_threads, dtype, disallowed_special)
        arrays = [native(p.encode("utf-8"), allowed_special, num_threads, dtype, disallowed_special) for p in parts]
        return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)

    def __reduce__(self):  # pragma: no cover - HFEncoding pickles itself
        raise TypeError(f"{type(self).__name__} is pickled with its HFEncoding")


def _joined(encode, parts: list, *args) -> list[int]:
    """The ids of the parts in order, as one list (a text cut in two: the second's ids
    appended to the first's, in C)."""
    ids = encode(parts[0], *args)
    for part in parts[1:]:
        ids += encode(part, *args)
    return ids


@contextlib.contextmanager
def _texts_of_parts(routes: list[list]):
    """A core's ``DisallowedSpecial(index of a part)`` as the index of its text."""
    try:
        yield
    except DisallowedSpecial as found:
        ends = list(accumulate(map(len, routes)))
        raise DisallowedSpecial(bisect.bisect_right(ends, found.index)) from None


def _regroup(routes: list[list], done: list[list[int]]) -> list[list[int]]:
    """The ids of each text from the ids of its parts (``done``, in order): a text of
    one part takes its list as it is."""
    if len(done) == len(routes):
        return done
    out, k = [], 0
    for parts in routes:
        if len(parts) == 1:
            out.append(done[k])
        else:
            out.append([i for ids in done[k:k + len(parts)] for i in ids])
        k += len(parts)
    return out


class NFCCore(_RoutedCore):
    """The rank core behind an NFC normalizer (the module docstring's *NFC*): a text
    goes to the native core as it is when it is NFC, as its NFC when no added token's
    text (with something disallowed: special or not, matched or not; else of the tokens
    the call matches) is in it before or after normalizing; any other text to the
    pipeline engine. With nothing disallowed (``encode_ordinary``, batches, numpy) one
    native call a text (``_nfc.Route``) decides all of it, with Llama3Core's cut when it
    is behind (Qwen), and the parts go straight to the rank core."""

    def __init__(self, native, make_other, added_texts):
        super().__init__(native, make_other, added_texts)
        # the one native route: with Llama3Core behind (Qwen), its cut too
        cut = isinstance(native, Llama3Core)
        self._fast = _Route(True, cut, _spaces()) if _Route is not None else None
        self._rank = native._native if cut else native

    def _elsewhere(self, found):
        return self._native if found == _OWN else self._other()

    def _route(self, text, allowed=frozenset(), disallowed=frozenset()) -> list | None:
        if not isinstance(text, str):
            return [text]   # the core's TypeError
        # HF's NFC natively (_nfc.nfc: the same object when nothing changes; only the
        # spans around UNSAFE chars go to unicodedata)
        nfc = _hf_nfc(text)
        if nfc is text:
            return [text]
        # With nothing disallowed, only the tokens the call matches cut the text (HF
        # cuts no other: special tokens it does not match are text, before and after
        # normalizing); else every added token's text, which normalizing may change
        # (">" and U+0338 compose), sends the text to the pipeline, which checks it raw.
        search = self._added if disallowed else self._search(allowed)
        if search is not None and (search(text) or search(nfc)):
            return None
        return [nfc]


def _finder(cache: dict, tokens):
    """``text -> whether it holds any of tokens`` (None for no tokens), kept in ``cache``
    by the set."""
    if not tokens:
        return None
    if not isinstance(tokens, frozenset):
        tokens = frozenset(tokens)
    found = cache.get(tokens)
    if found is None:
        if len(cache) > 64:
            cache.clear()
        found = cache[tokens] = _needles(tokens)
    return found


def _needles(tokens):
    """``text -> whether it holds any of tokens``: ``_nfc.Needles`` (candidates at the
    tokens' first chars, compared in place: 0.3 us for a 2 KB document against 1.4 us
    for a ``regex`` alternation), else the alternation's search."""
    if _Needles is not None:
        return _Needles(tokens)
    search = regex.compile("|".join(map(regex.escape, sorted(set(tokens), key=len, reverse=True)))).search
    return lambda text: search(text) is not None


class Llama3Core(_RoutedCore):
    """Llama 3's (or Qwen's) pattern on the hand-written cl100k splitter (the module
    docstring's *Llama 3*): a text is cut after the last newline of its trailing whitespace (when
    whitespace follows it) and each part split as cl100k splits. The pattern's end is
    each run of text between the tokens the core matches, so a text holding a token the
    call matches goes to a core that runs Llama 3's pattern as a split program."""

    _parts_hold_no_token = True

    def __init__(self, native, make_other):
        super().__init__(native, make_other, ())
        self._spaces = _spaces()
        self._fast = _Route(False, True, self._spaces) if _Route is not None else None

    def _elsewhere(self, found):
        return self._other()

    def _holds(self, text: str, allowed) -> bool:
        """Whether text holds one of the tokens ``allowed`` (``_nfc.Needles``)."""
        search = self._search(allowed)
        return search is not None and search(text)

    def _route(self, text, allowed=frozenset(), disallowed=frozenset()) -> list | None:
        if not isinstance(text, str):
            return [text]   # the core's TypeError
        if self._holds(text, allowed):
            return None
        cut = llama3_cut(text)
        return [text] if cut is None else [text[:cut], text[cut:]]


_TRAILING_SPACE = regex.compile(r"(?r)\s+\Z")


@functools.lru_cache(maxsize=1)
def _spaces() -> frozenset[str]:
    """The characters ``regex``'s ``\\s`` matches (all below U+3001)."""
    return frozenset(c for c in map(chr, range(0x3001)) if _TRAILING_SPACE.match(c))


def llama3_cut(text: str) -> int | None:
    """Where Llama 3's pattern ends a chunk that cl100k's does not: after the last
    ``\\r`` or ``\\n`` of the text's trailing whitespace, when whitespace follows it
    (cl100k's ``\\s++$`` takes the whole run; Llama 3's ``\\s*[\\r\\n]+`` stops there). None
    when the two split the text alike.

    >>> llama3_cut("a \\n  "), llama3_cut("a \\n"), llama3_cut("a  ")
    (3, None, None)
    """
    if not text or text[-1] in "\r\n" or text[-1] not in _spaces():
        return None   # the common case, without a search
    run = _TRAILING_SPACE.search(text)
    if run is None:
        return None
    last = max(text.rfind("\r", run.start()), text.rfind("\n", run.start()))
    return last + 1 if 0 <= last < len(text) - 1 else None


def _raw_splitter(pre: dict):
    """``text -> pieces`` for the native words: the pieces before the ByteLevel step
    (their UTF-8 bytes are what ByteLevel maps), when ByteLevel comes last without a
    prefix space; otherwise the reference's byte-level pieces turned back into bytes."""
    steps = pre["pretokenizers"] if pre["type"] == "Sequence" else [pre]
    last = steps[-1]
    if last["type"] == "ByteLevel" and not last["add_prefix_space"] and all(s["type"] != "ByteLevel" for s in steps[:-1]):
        before = list(steps[:-1])
        if last["use_regex"]:
            before.append({"type": "Split", "pattern": {"Regex": hf.BYTELEVEL_REGEX}, "behavior": "Isolated", "invert": False})
        if not before:
            return lambda text: [text] if text else []
        if all(_is_isolated_regex(s) for s in before):
            native = _native_splitter(tuple(s["pattern"]["Regex"] for s in before))
            if native is not None:
                return native
        if len(before) == 1 and _is_total_split(before[0]):
            return hf._compiled(before[0]["pattern"]["Regex"]).findall
        if all(_is_isolated_regex(s) for s in before):
            return _isolated_chain([hf._compiled(s["pattern"]["Regex"]) for s in before])
        seq = {"type": "Sequence", "pretokenizers": before}
        return lambda text: [p for p in hf.pre_tokenize_piece(seq, text) if p]
    to_bytes = str.maketrans({c: chr(b) for b, c in enumerate(hf._byte_chars())})
    return lambda text: [w.translate(to_bytes).encode("latin-1") for w in hf.pre_tokenize(pre, text)]


def _native_splitter(regexes: tuple[str, ...]):
    """``text -> pieces`` (UTF-8 bytes) by the native split program of these Isolated
    Splits in sequence (``_pretokenize.pattern_id``: one regex with ``gaps``, HF's
    unmatched text kept as pieces; several as one sequence program), else None (the
    ``regex`` chain serves). The pieces stay bytes: the merge list takes them as they
    are, with no decode and re-encode."""
    if _split_offsets is None:  # pragma: no cover - the regex chain serves
        return None
    pattern = regexes[0] if len(regexes) == 1 else regexes
    if _pattern_id(pattern, gaps=True) < 0:
        return None

    def split(text: str) -> list[bytes]:
        data = text.encode("utf-8", "surrogatepass")
        a, out = 0, []
        for b in _split_offsets(data, pattern, gaps=True).tolist():
            out.append(data[a:b])
            a = b
        return out
    split.pattern = pattern
    return split


def _split_and_merge(pattern, encode_split, text: str, out: list[int] | None = None) -> list[int]:
    """The ids of ``text`` by the native split program of ``pattern`` and the native
    merge list (``MergeList.encode_split``)."""
    data = text.encode("utf-8", "surrogatepass")
    return encode_split(data, _split_offsets(data, pattern, gaps=True), out)


def _is_isolated_regex(step: dict) -> bool:
    return step["type"] == "Split" and step["behavior"] == "Isolated" and not step["invert"] and "Regex" in step["pattern"]


def _isolated_chain(regexes: list):
    """``text -> pieces`` of Splits by these regexes (Isolated, not inverted) in
    sequence: each splits every piece of the one before into its matches and the runs
    between them (``reference.hf.split_by_behavior``'s Isolated, without its lists of
    runs: DeepSeek's three Splits run 3x faster)."""
    def split(text: str) -> list[str]:
        pieces = [text] if text else []
        for rx in regexes:
            out = []
            for piece in pieces:
                prev = 0
                for m in rx.finditer(piece):
                    s, e = m.span()
                    if s > prev:
                        out.append(piece[prev:s])
                    if e > s:
                        out.append(piece[s:e])
                    prev = e
                if prev < len(piece):
                    out.append(piece[prev:])
            pieces = out
        return pieces
    return split


def _is_total_split(step: dict) -> bool:
    """A Split whose Isolated pieces are exactly its regex's matches (it matches
    every character, so there are no gaps)."""
    return (step["type"] == "Split" and step["behavior"] == "Isolated" and not step["invert"]
            and step["pattern"].get("Regex") in _TOTAL_PATTERNS | {hf.BYTELEVEL_REGEX})


def merge_heap(ids: list[int], merges: dict[tuple[int, int], tuple[int, int]]) -> list[int]:
    """``reference.hf.merge_by_list`` in O(n log n) (a heap of candidate pairs over a
    linked list, as HF's ``Word::merge_all``), so a long word costs no quadratic time.

    >>> merge_heap([0, 0, 0], {(0, 0): (0, 5)})
    [5, 0]
    """
    n = len(ids)
    if n < 2:
        return list(ids)
    sym = list(ids)
    nxt = list(range(1, n + 1))
    prv = list(range(-1, n - 1))
    alive = [True] * n
    heap = []
    get = merges.get
    for i in range(n - 1):
        m = get((sym[i], sym[i + 1]))
        if m is not None:
            heap.append((m[0], i, m[1]))
    heapq.heapify(heap)
    while heap:
        rank, i, new_id = heapq.heappop(heap)
        j = nxt[i]
        if not alive[i] or j >= n:
            continue
        m = get((sym[i], sym[j]))
        if m is None or m[1] != new_id or m[0] != rank:
            continue   # this pair changed since it was queued
        sym[i] = new_id
        alive[j] = False
        nxt[i] = nxt[j]
        if nxt[j] < n:
            prv[nxt[j]] = i
        p = prv[i]
        if p >= 0:
            m = get((sym[p], new_id))
            if m is not None:
                heapq.heappush(heap, (m[0], p, m[1]))
        k = nxt[i]
        if k < n:
            m = get((new_id, sym[k]))
            if m is not None:
                heapq.heappush(heap, (m[0], i, m[1]))
    return [s for s, a in zip(sym, alive) if a]
