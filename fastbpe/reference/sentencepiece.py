"""SentencePiece BPE, the plain way: the specification the native code must match.

This is how google/sentencepiece's ``SentencePieceProcessor`` encodes and decodes with a
BPE model (``src/normalizer.cc``, ``src/bpe_model.cc``, ``src/model_interface.cc``,
``src/sentencepiece_processor.cc``), written as small pure functions over the plain
tables of ``SpmTables``. The file format is read by ``fastbpe.formats.sentencepiece_model``.

Decisions (each written down once, here):

* **What is reproduced.** Models of type BPE whose normalizer has no precompiled
  character map (``normalizer_spec.precompiled_charsmap`` empty). sentencepiece's
  normalizer applies only that map at run time (its ``name`` is a label), so with no
  map every character is kept as it is: Llama 2, Mistral v1-v3, Gemma and Yi are such
  models (``name: identity``). A model with a map (``nmt_nfkc`` ...), a unigram model, or
  a ``denormalizer_spec`` with a map is refused at load with a ValueError naming the
  field (``check_supported``): we would encode or decode it differently.
* **Normalization** (``normalize``): with ``remove_extra_whitespaces``, leading spaces
  are dropped, runs of spaces become one and trailing spaces are dropped; only U+0020
  counts as a space (tabs and newlines are ordinary characters). With
  ``add_dummy_prefix`` one space is put in front (at the end instead, with
  ``treat_whitespace_as_suffix``) unless the text is empty (or only spaces that were
  removed). With ``escape_whitespaces`` every space becomes ``▁`` (U+2581). A
  user-defined piece in the text is kept whole, its spaces unescaped and not squeezed.
* **Symbols before merging** (``initial_symbols``): the normalized text is cut into code
  points, except that the longest user-defined piece starting at a position is taken
  whole and frozen (never merged with a neighbour). sentencepiece's ``split_by_*``,
  ``split_digits`` and ``max_sentencepiece_length`` options shape the vocabulary at
  training time only; the encoder does not read them: a merge happens iff the merged
  string is a piece.
* **Merge order** (``bpe``): repeatedly merge the adjacent pair whose concatenation is a
  piece (normal, user-defined or unused) with the highest score (float32, as stored);
  among equal scores the leftmost pair. A pair is a candidate iff its string is a piece,
  so the result does not depend on how the pieces were learned.
* **Unused pieces** are split back into the two symbols they were last seen merged
  from (sentencepiece's ``rev_merge``: the latest candidate pair with that string,
  recursively); one that cannot be split (a single symbol) is unknown: the unknown id,
  or its bytes with ``byte_fallback`` (what sentencepiece 0.2 does).
* **Segments** (``segments``): an encoder may cut the normalized text between two
  characters that stand next to each other in no piece and merge the parts one at a
  time (the proof is ``segments``'); sentencepiece merges the whole text, and so does
  ``encode`` here.
* **Ids** (``piece_id``): a control/unknown/byte piece with that text first, then a
  normal/user-defined/unused piece, else the unknown id. A symbol with the unknown id
  becomes its UTF-8 bytes as ``<0xXX>`` pieces when ``byte_fallback`` is on (a byte with
  no piece is itself unknown); without it, a run of adjacent unknown symbols gives one
  unknown id (sentencepiece merges them).
* **Decoding** (``decode``): control pieces vanish, the unknown piece becomes the
  ``trainer_spec.unk_surface`` (`` ⁇ ``), runs of byte pieces are decoded as UTF-8 with one U+FFFD per
  invalid byte, ``▁`` becomes a space, and one leading ``▁`` of the first piece that
  brings text is dropped when ``add_dummy_prefix`` or ``remove_extra_whitespaces`` is set
  (with ``remove_extra_whitespaces``, of every piece until text appears).
* **Special tokens** are the control and unknown pieces; sentencepiece never produces
  them from text (``"<s>"`` in a text is the characters ``<``, ``s``, ``>``). When a caller
  allows them (``fastbpe.special``), the text between them is encoded as a text of its
  own (``encode_with_specials``), so each segment gets its dummy prefix, as when the
  segments are encoded separately and the ids joined (mistral-common's way).
"""
from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field


# --------------------------------------------------------------------------- the model
# ModelProto.SentencePiece.Type
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
# TrainerSpec.ModelType
UNIGRAM, BPE, WORD, CHAR = 1, 2, 3, 4
MODEL_TYPE_NAMES = {UNIGRAM: "unigram", BPE: "bpe", WORD: "word", CHAR: "char"}


@dataclass(frozen=True)
class Piece:
    """``ModelProto.SentencePiece``: 1 piece, 2 score, 3 type (default NORMAL)."""

    piece: str
    score: float = 0.0
    type: int = NORMAL


@dataclass(frozen=True)
class NormalizerSpec:
    """``NormalizerSpec``: 1 name, 2 precompiled_charsmap, 3 add_dummy_prefix,
    4 remove_extra_whitespaces, 5 escape_whitespaces (defaults as in the proto)."""

    name: str = ""
    precompiled_charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True


@dataclass(frozen=True)
class TrainerSpec:
    """The ``TrainerSpec`` fields that matter when encoding: 3 model_type (default
    UNIGRAM), 24 treat_whitespace_as_suffix, 35 byte_fallback, 40 unk_id, 41 bos_id,
    42 eos_id, 43 pad_id (defaults 0, 1, 2, -1), 44 unk_surface. The ``split_by_*`` options shape the
    vocabulary at training time only; a BPE model's encoder does not read them."""

    model_type: int = UNIGRAM
    treat_whitespace_as_suffix: bool = False
    byte_fallback: bool = False
    unk_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    pad_id: int = -1
    unk_surface: str = " \u2047 "   # " ⁇ ": what the unknown piece decodes to


@dataclass(frozen=True)
class SpmModel:
    """A ``ModelProto`` as ``fastbpe.formats.sentencepiece_model.read_model`` gives it:
    1 pieces, 2 trainer_spec, 3 normalizer_spec, 5 denormalizer_spec (None when absent)."""

    pieces: tuple[Piece, ...]
    trainer_spec: TrainerSpec = field(default_factory=TrainerSpec)
    normalizer_spec: NormalizerSpec = field(default_factory=NormalizerSpec)
    denormalizer_spec: NormalizerSpec | None = None


# --------------------------------------------------------------------------- tables
SPACE = "\u2581"          # ▁, what a space becomes


@dataclass(frozen=True)
class SpmTables:
    """The model as plain tables.

    ``pieces``: normal/user-defined/unused piece -> id (what merges may make);
    ``reserved``: control/unknown/byte piece -> id; ``user_defined``: those pieces,
    matched whole in text; ``scores``/``types``/``texts``: by id.
    """

    texts: tuple[str, ...]
    scores: tuple[float, ...]
    types: tuple[int, ...]
    pieces: dict[str, int]
    reserved: dict[str, int]
    user_defined: frozenset[str]
    unk_id: int
    byte_fallback: bool
    add_dummy_prefix: bool
    remove_extra_whitespaces: bool
    escape_whitespaces: bool
    treat_whitespace_as_suffix: bool
    unk_surface: str = TrainerSpec.unk_surface


def check_supported(model: SpmModel, where: str) -> None:
    """Refuse (ValueError naming the field) a model we would not reproduce exactly.

    >>> from fastbpe.reference.sentencepiece import SpmModel, Piece, TrainerSpec
    >>> check_supported(SpmModel((Piece("<unk>", 0, 2),), TrainerSpec(model_type=1)), "m.model")
    Traceback (most recent call last):
      ...
    ValueError: m.model: trainer_spec.model_type is unigram; only BPE sentencepiece models are supported
    """
    kind = model.trainer_spec.model_type
    if kind != BPE:
        raise ValueError(f"{where}: trainer_spec.model_type is {MODEL_TYPE_NAMES.get(kind, kind)}; "
                         "only BPE sentencepiece models are supported")
    spec = model.normalizer_spec
    if spec.precompiled_charsmap:
        raise ValueError(f"{where}: normalizer_spec.precompiled_charsmap ({spec.name or 'unnamed'} normalization, "
                         f"{len(spec.precompiled_charsmap)} bytes) is not supported; only models without a "
                         "character map (name 'identity') are reproduced exactly")
    if model.denormalizer_spec is not None and model.denormalizer_spec.precompiled_charsmap:
        raise ValueError(f"{where}: denormalizer_spec.precompiled_charsmap is not supported (decoding would differ)")


def build_tables(model: SpmModel, where: str = "<model>") -> SpmTables:
    """``SpmTables`` of a supported model; ValueError for what sentencepiece refuses to
    load (a piece defined twice, no unknown piece or two, byte pieces without
    ``byte_fallback``).

    >>> from fastbpe.reference.sentencepiece import SpmModel, Piece, TrainerSpec
    >>> t = build_tables(SpmModel((Piece("<unk>", 0, 2), Piece("a", -1), Piece("b", -2)), TrainerSpec(model_type=2)))
    >>> t.pieces, t.reserved, t.unk_id
    ({'a': 1, 'b': 2}, {'<unk>': 0}, 0)
    """
    check_supported(model, where)
    pieces, reserved, user_defined, unk_id = {}, {}, set(), -1
    for i, p in enumerate(model.pieces):
        table = pieces if p.type in (NORMAL, USER_DEFINED, UNUSED) else reserved
        if not p.piece:
            raise ValueError(f"{where}: pieces[{i}] is empty")
        if p.piece in table:
            raise ValueError(f"{where}: pieces[{i}] {p.piece!r} is already defined (pieces[{table[p.piece]}])")
        table[p.piece] = i
        if p.type == USER_DEFINED:
            user_defined.add(p.piece)
        elif p.type == UNKNOWN:
            if unk_id >= 0:
                raise ValueError(f"{where}: pieces[{i}]: a second unknown piece (the first is pieces[{unk_id}])")
            unk_id = i
        elif p.type == BYTE and not model.trainer_spec.byte_fallback:
            raise ValueError(f"{where}: pieces[{i}] {p.piece!r} is a byte piece but trainer_spec.byte_fallback is off")
    if unk_id < 0:
        raise ValueError(f"{where}: no unknown piece (type UNKNOWN) is defined")
    spec = model.normalizer_spec
    return SpmTables(
        texts=tuple(p.piece for p in model.pieces), scores=tuple(p.score for p in model.pieces),
        types=tuple(p.type for p in model.pieces), pieces=pieces, reserved=reserved,
        user_defined=frozenset(user_defined), unk_id=unk_id, byte_fallback=model.trainer_spec.byte_fallback,
        add_dummy_prefix=spec.add_dummy_prefix, remove_extra_whitespaces=spec.remove_extra_whitespaces,
        escape_whitespaces=spec.escape_whitespaces,
        treat_whitespace_as_suffix=model.trainer_spec.treat_whitespace_as_suffix,
        unk_surface=model.trainer_spec.unk_surface,
    )


# --------------------------------------------------------------------------- encoding
def match_user_defined(text: str, pos: int, user_defined: frozenset[str]) -> int:
    """Length of the longest user-defined piece at ``text[pos:]``, 0 if none.

    >>> match_user_defined("x[D10]", 1, frozenset({"[D1", "[D10]"}))
    5
    """
    best = 0
    for piece in user_defined:
        if len(piece) > best and text.startswith(piece, pos):
            best = len(piece)
    return best


def normalize(text: str, t: SpmTables) -> str:
    """The text the model sees (see the module docstring, "Normalization").

    >>> from dataclasses import replace
    >>> t = SpmTables((), (), (), {}, {}, frozenset({"<x y>"}), 0, False, True, False, True, False)
    >>> normalize("hi  there <x y>", t)
    '▁hi▁▁there▁<x▁y>'
    >>> normalize("  a  b ", replace(t, remove_extra_whitespaces=True))
    '▁a▁b'
    >>> normalize("", t), normalize("a", replace(t, treat_whitespace_as_suffix=True))
    ('', 'a▁')
    """
    space = SPACE if t.escape_whitespaces else " "
    pos, n = 0, len(text)
    if t.remove_extra_whitespaces:
        while pos < n and normalize_prefix(text, pos, t) == " ":
            pos += 1
    if pos == n:
        return ""
    out = space if t.add_dummy_prefix and not t.treat_whitespace_as_suffix else ""
    prev_space = t.remove_extra_whitespaces
    while pos < n:
        chunk = normalize_prefix(text, pos, t)
        pos += len(chunk)
        kept = chunk.lstrip(" ") if prev_space else chunk    # a squeezed space
        if kept:
            out += kept.replace(" ", space)
            prev_space = t.remove_extra_whitespaces and kept.endswith(" ")
    if t.remove_extra_whitespaces:
        out = out.rstrip(space)
    if t.add_dummy_prefix and t.treat_whitespace_as_suffix:
        out += space
    return out


def normalize_prefix(text: str, pos: int, t: SpmTables) -> str:
    """What the normalizer takes at ``pos``: the longest user-defined piece there, else
    one character (kept as it is: no character map).

    >>> t = SpmTables((), (), (), {}, {}, frozenset({"<u>"}), 0, False, True, False, True, False)
    >>> normalize_prefix("a<u>", 1, t), normalize_prefix("a<u>", 0, t)
    ('<u>', 'a')
    """
    return text[pos:pos + (match_user_defined(text, pos, t.user_defined) or 1)]


def initial_symbols(normalized: str, user_defined: frozenset[str]) -> list[tuple[str, bool]]:
    """``(symbol, frozen)`` pairs: code points, user-defined pieces whole and frozen.

    >>> initial_symbols("▁a<u>b", frozenset({"<u>"}))
    [('▁', False), ('a', False), ('<u>', True), ('b', False)]
    """
    symbols, pos = [], 0
    while pos < len(normalized):
        size = match_user_defined(normalized, pos, user_defined)
        symbols.append((normalized[pos:pos + (size or 1)], size > 0))
        pos += size or 1
    return symbols


def linked_symbols(symbols: list[tuple[str, bool]]) -> tuple[list[str], list[bool], list[int], list[int]]:
    """The symbols as a doubly linked list for merging: (texts, frozen flags, prev, next),
    -1 past either end.

    >>> linked_symbols([("a", False), ("<x>", True)])
    (['a', '<x>'], [False, True], [-1, 0], [1, -1])
    """
    text = [s for s, _ in symbols]
    frozen = [f for _, f in symbols]
    prev = list(range(-1, len(text) - 1))
    nxt = list(range(1, len(text) + 1))
    if text:
        nxt[-1] = -1
    return text, frozen, prev, nxt


def join_symbols(text: list[str], prev: list[int], nxt: list[int], left: int) -> None:
    """Merge symbol left with the next one, which leaves the list (its text emptied)."""
    right = nxt[left]
    text[left] += text[right]
    text[right] = ""
    nxt[left] = nxt[right]
    if nxt[right] >= 0:
        prev[nxt[right]] = left


def bpe(symbols: list[tuple[str, bool]], t: SpmTables) -> list[str]:
    """Merge the symbols by score, leftmost first among equal scores; unused pieces are
    split back (module docstring, "Merge order" and "Unused pieces").

    >>> from fastbpe.reference.sentencepiece import SpmModel, Piece, TrainerSpec
    >>> t = build_tables(SpmModel((Piece("<unk>", 0, 2), Piece("ab", -1), Piece("bc", -1), Piece("a", -2),
    ...                            Piece("b", -2), Piece("c", -2)), TrainerSpec(model_type=2)))
    >>> bpe([("a", False), ("b", False), ("c", False)], t)   # a tie: the left pair first
    ['ab', 'c']
    """
    text, frozen, prev, nxt = linked_symbols(symbols)
    heap, rev_merge = [], {}

    def add_pair(left: int, right: int) -> None:
        if left < 0 or right < 0 or frozen[left] or frozen[right]:
            return
        merged = text[left] + text[right]
        pid = t.pieces.get(merged)
        if pid is None:
            return
        heapq.heappush(heap, (-t.scores[pid], left, right, len(merged)))
        if t.types[pid] == UNUSED:
            rev_merge[merged] = (text[left], text[right])

    for i in range(1, len(text)):
        add_pair(i - 1, i)
    while heap:
        _, left, right, size = heapq.heappop(heap)
        if not text[left] or not text[right] or len(text[left]) + len(text[right]) != size:
            continue                                  # stale: a side has merged since
        join_symbols(text, prev, nxt, left)
        add_pair(prev[left], left)
        add_pair(left, nxt[left])

    out = []

    def resegment(piece: str) -> None:
        pid = t.pieces.get(piece)
        if pid is not None and t.types[pid] == UNUSED and piece in rev_merge:
            for part in rev_merge[piece]:
                resegment(part)
        else:
            out.append(piece)

    i = 0 if text else -1
    while i >= 0:
        resegment(text[i])
        i = nxt[i]
    return out


def score_ranks(t: SpmTables) -> dict[str, int]:
    """Each piece merges may make -> its score's place among their distinct scores, best
    first: ``bpe``'s order "higher score first" as small integers (a tie keeps one rank).

    >>> t = build_tables(SpmModel((Piece("<unk>", 0, 2), Piece("ab", -1), Piece("bc", -1), Piece("abc", -3)),
    ...                           TrainerSpec(model_type=2)))
    >>> score_ranks(t)
    {'ab': 0, 'bc': 0, 'abc': 1}
    """
    order = {score: rank for rank, score in enumerate(sorted({t.scores[i] for i in t.pieces.values()}, reverse=True))}
    return {piece: order[t.scores[pid]] for piece, pid in t.pieces.items()}


def bucket_merge(count: int, rank_at: Callable[[int], int | None], join: Callable[[int], int]) -> None:
    """Run ``bucket_queue``'s queue over ``count`` linked symbols, on keys ``(rank,
    left)`` only, so any BPE whose order is "lowest rank first, leftmost among equal
    ranks" shares it (sentencepiece's by ``score_ranks``, HF's by merge rank:
    ``reference.hf_spm.merge_buckets``). ``rank_at(left)``: the rank of the pair
    (left, next) if it is a candidate, else None (also for left < 0 or merged away);
    ``join(left)``: merge that pair, return the symbol now before left (or -1). The
    pops are a heap's (``bucket_queue``'s corollary, which assumes nothing else).

    >>> ids, nxt = [0, 1, 0, 1], [1, 2, 3, -1]                # "abab", "ab" of rank 5
    >>> def rank_at(i):
    ...     return 5 if i >= 0 and ids[i] == 0 and nxt[i] >= 0 and ids[nxt[i]] == 1 else None
    >>> def join(i):
    ...     ids[i], ids[nxt[i]], nxt[i] = 2, -1, nxt[nxt[i]]
    ...     return max(i - 2, -1)
    >>> bucket_merge(4, rank_at, join); ids
    [2, -1, 2, -1]
    """
    run = sorted((r, i) for i in range(count - 1) if (r := rank_at(i)) is not None)
    buckets: dict[int, list[int]] = {}
    heap: list[tuple[int, int]] = []
    bucket: list[int] = []            # cur's bucket, sorted, read from position `at`
    ri = at = 0
    cur = run[0][0] if run else 0

    def push(left: int) -> None:
        r = rank_at(left)
        if r is not None:
            if r <= cur:
                heapq.heappush(heap, (r, left))
            else:
                buckets.setdefault(r, []).append(left)

    while True:
        heads = [k for k in (run[ri] if ri < len(run) else None,
                             (cur, bucket[at]) if at < len(bucket) else None) if k is not None]
        key = min(heads, default=None)
        if heap and (key is None or heap[0] < key):
            key = heapq.heappop(heap)
        elif key is None or key[0] > cur:     # nothing of rank <= cur is left: move cur
            ahead = ([run[ri][0]] if ri < len(run) else []) + ([min(buckets)] if buckets else [])
            if not ahead:
                break
            cur = min(ahead)
            bucket, at = sorted(buckets.pop(cur, [])), 0
            continue
        elif ri < len(run) and key == run[ri]:
            ri += 1
        else:
            at += 1
        r, left = key
        if rank_at(left) == r:          # still the pair at left, of that rank
            before = join(left)
            push(before)
            push(left)


def bucket_queue(symbols: list[tuple[str, bool]], t: SpmTables, on_ids: bool = False) -> list[str]:
    """``bpe`` with its heap replaced by buckets by rank (``score_ranks``), the structure
    of the native merge of a long segment (``_spm.merge_buckets``), for a model without
    unused pieces: the same pieces. With cur the rank being read, the queue of
    candidate pairs (rank, left) is

    * ``run``: the initial pairs, sorted once (rank, then position);
    * ``buckets[r]`` for r > cur: the positions merges pushed with rank r before r's
      turn, in push order; sorted when cur reaches r (that bucket is then complete);
    * ``heap``: what merges push with a rank <= cur: a rank-cur pair at or left of the
      one just merged, or a better rank than cur (a model may have one: "abc" ranked
      above "bc" and reached as "a" + "bc" once "bc" merges).

    **Corollary (bucket order is heap order).** Every pop takes the smallest key in the
    queue: the smallest of the run's head, cur's bucket's head and the heap's top when
    that has rank <= cur, because every bucket above cur holds keys of rank > cur (a push
    of rank <= cur goes to the heap, and cur never decreases). When it has rank > cur,
    nothing of rank <= cur is left (the heap's keys all have rank <= cur: it is empty),
    and cur moves to the lowest rank present, the lower of the run's next rank and the
    lowest filled bucket, which keeps the invariant. ``bpe``'s heap pops the smallest
    key too, and both push the same pairs after the same merges (by induction on the
    pops: the same queue contents, the same next pop); equal keys are one pair, so
    which copy comes first does not matter; a popped pair merges iff it is still the
    pair at its left with that rank. So the merges, in order, are ``bpe``'s, and so are
    the pieces and ids. Nothing is assumed of the model's scores; in a model whose
    merged pieces rank below their parts (what BPE training makes) the heap holds only a
    few rank-cur pairs at a time, so a pop costs O(1) amortized plus a bucket's share
    of one linear sort.

    The queue holds keys only, so it runs the same on symbol ids as on text (``on_ids``:
    a pair's rank is its merged piece's in ``merge_pairs``, which holds exactly the
    candidates: the same keys); the native twin does so when the model's ids fit 16 bits.

    >>> t = build_tables(SpmModel((Piece("<unk>", 0, 2), Piece("ab", -1), Piece("bc", -1), Piece("abc", -3),
    ...                            Piece("a", -4), Piece("b", -4), Piece("c", -4)), TrainerSpec(model_type=2)))
    >>> syms = [(c, False) for c in "abcabc"]
    >>> bucket_queue(syms, t) == bucket_queue(syms, t, on_ids=True) == bpe(syms, t) == ['abc', 'abc']
    True
    """
    if any(t.types[pid] == UNUSED for pid in t.pieces.values()):
        raise ValueError("bucket_queue: the model has unused pieces, which need bpe's rev_merge")
    ranks = score_ranks(t)
    text, frozen, prev, nxt = linked_symbols(symbols)
    sids, id_pairs = (symbol_ids(t), merge_pairs(t)) if on_ids else ({}, {})

    def rank_at(left: int) -> int | None:
        """The rank of the pair (left, nxt[left]) if it is a candidate, else None."""
        right = nxt[left] if left >= 0 and text[left] else -1
        if right < 0 or frozen[left] or frozen[right]:
            return None
        if on_ids:
            merged = id_pairs.get((sids.get(text[left]), sids.get(text[right])))
            return None if merged is None else ranks[t.texts[merged]]
        return ranks.get(text[left] + text[right])

    def join(left: int) -> int:
        join_symbols(text, prev, nxt, left)
        return prev[left]

    bucket_merge(len(text), rank_at, join)
    out, i = [], 0 if text else -1
    while i >= 0:
        out.append(text[i])
        i = nxt[i]
    return out


def joinable_pairs(t: SpmTables) -> frozenset[str]:
    """The two-character strings that occur inside some piece merges may make (normal,
    user-defined or unused): where the text may not be cut (``segments``).

    >>> from fastbpe.reference.sentencepiece import SpmModel, Piece, TrainerSpec
    >>> t = build_tables(SpmModel((Piece("<unk>", 0, 2), Piece("▁ab", -1), Piece("c", -2)), TrainerSpec(model_type=2)))
    >>> sorted(joinable_pairs(t))
    ['ab', '▁a']
    """
    return frozenset(piece[i:i + 2] for piece in t.pieces for i in range(len(piece) - 1))


def symbol_ids(t: SpmTables) -> dict[str, int]:
    """An id for every symbol ``bpe`` may hold that can merge: a piece merges may make
    has its id; a character inside such a piece that is no piece itself gets an id past
    the vocabulary (``len(t.texts)`` on, in the order of first appearance).

    Why this is every symbol that can merge: ``bpe``'s symbols are its initial ones (a
    character, or a frozen user-defined piece, which never merges) and what merges make
    (a piece merges may make: ``segments``' proof, step 1); a character merges only with
    a neighbour inside some piece of two or more characters. So a merge joins two
    symbols of this table, and a pair can be looked up by its two ids
    (``merge_pairs``) instead of its text.

    >>> t = build_tables(SpmModel((Piece("<unk>", 0, 2), Piece("ab", -1), Piece("a", -2)), TrainerSpec(model_type=2)))
    >>> symbol_ids(t)
    {'ab': 1, 'a': 2, 'b': 3}
    """
    ids = dict(t.pieces)
    for piece in t.pieces:
        if len(piece) > 1:
            for ch in piece:
                ids.setdefault(ch, len(t.texts) + len(ids) - len(t.pieces))
    return ids


def merge_pairs(t: SpmTables) -> dict[tuple[int, int], int]:
    """``(id a, id b) -> id of the piece a + b``, over the symbols of ``symbol_ids``:
    every candidate pair ``bpe`` can meet (its text is a piece merges may make, and both
    sides are such symbols), each split of each piece into two symbols.

    ``bpe`` on these ids makes the same merges as on text: a pair is a candidate iff its
    key is here, and its score is the merged piece's. (A piece may be reachable from
    several splits, "abc" as "ab" + "c" and "a" + "bc": each is a key.)

    >>> t = build_tables(SpmModel((Piece("<unk>", 0, 2), Piece("abc", -1), Piece("ab", -2), Piece("c", -3),
    ...                            Piece("a", -4)), TrainerSpec(model_type=2)))
    >>> sorted(merge_pairs(t).items())   # 'b' is no piece: id 5
    [((2, 3), 1), ((4, 5), 2)]
    """
    ids = symbol_ids(t)
    out = {}
    for piece, pid in t.pieces.items():
        for k in range(1, len(piece)):
            a, b = ids.get(piece[:k]), ids.get(piece[k:])
            if a is not None and b is not None:
                out[a, b] = pid
    return out


def segments(normalized: str, pairs: frozenset[str]) -> list[str]:
    """The normalized text cut between every two adjacent characters ``a``, ``b`` whose
    string ``ab`` is not in ``pairs`` (``joinable_pairs``).

    For a model without unused pieces, ``bpe`` of the whole text gives the pieces of
    ``bpe`` of each segment, in order (what lets an encoder merge, and cache, segments
    one at a time). Proof:

    1. Every symbol ``bpe`` ever holds is a piece merges may make: an initial symbol is
       one character or a user-defined piece, and a merge makes a symbol only when its
       string is such a piece. A symbol spanning a cut between ``a`` and ``b`` would
       contain ``ab``, which is in ``pairs`` for a piece of two or more characters.
       So no symbol spans a cut, including the initial ones: the longest user-defined
       match at a segment's start lies inside the segment, and the segment's own
       ``initial_symbols`` are the whole text's symbols of that segment.
    2. The pair across a cut is never a candidate (its string would span the cut), so
       a segment's candidates depend on its own symbols only, and a merge in one
       segment changes no other segment's candidates.
    3. ``bpe`` takes the best candidate by (score, position); restricted to one
       segment that is the segment's own order (positions keep their relative order).
       By induction on the merges, each segment goes through the same merges, in the
       same order, as when merged alone.

    With unused pieces it does not hold: ``rev_merge`` is per call, keyed by string,
    so a later segment can change how an earlier one's unused piece splits. (Ids are
    made from the joined pieces: a run of unknown pieces across a cut is still one id.)

    >>> segments("▁the▁cat▁▁sat", frozenset({"▁t", "th", "he", "▁c", "ca", "at", "▁▁", "▁s", "sa"}))
    ['▁the', '▁cat', '▁▁sat']
    >>> segments("", frozenset())
    []
    """
    out, start = [], 0
    for i in range(1, len(normalized)):
        if normalized[i - 1:i + 1] not in pairs:
            out.append(normalized[start:i])
            start = i
    if normalized:
        out.append(normalized[start:])
    return out


def joining_chars(t: SpmTables) -> frozenset[str]:
    """The characters inside some piece of two or more characters that merges may make.
    Any other character is a *wall*: every pair it stands in is outside ``joinable_pairs``
    (a pair holding it would be inside such a piece), so it is a segment by itself
    whatever its neighbours (``fused_scan``).

    >>> t = build_tables(SpmModel((Piece("<unk>", 0, 2), Piece("ab", -1), Piece("c", -2)), TrainerSpec(model_type=2)))
    >>> sorted(joining_chars(t))
    ['a', 'b']
    """
    return frozenset(ch for piece in t.pieces if len(piece) > 1 for ch in piece)


#: the ids a native one-character table holds (16 bits, 0xFFFF meaning "none")
ONE_CHAR_IDS = 0xFFFF


def one_char_id(ch: str, t: SpmTables) -> int | None:
    """The id ``fused_scan`` writes for the one-character segment ``ch`` straight away,
    or None (the segment takes the general path: cache, merge, byte fallback). Written
    straight: a character of the Basic Multilingual Plane (not a surrogate) whose id
    (``piece_id``) is not the unknown id and fits the native 16-bit table. That id is
    what ``encode`` gives the segment: ``bpe`` of one symbol is that symbol, and a known
    id neither comes from nor joins a run of unknown symbols.

    With ``byte_fallback``, a one-byte character that is no piece (Mistral's newline and
    tab: a fifth of the segments of its Chinese text) is written as its ``<0xXX>``
    piece's id when that is not the unknown id: ``pieces_to_ids`` gives the one symbol
    exactly that one id, and with byte fallback no unknown run is fused across a cut.
    (A longer character that is no piece falls back to two or more ids: general path.)

    >>> t = build_tables(SpmModel((Piece("<unk>", 0, 2), Piece("中", -1), Piece("😀", -2)), TrainerSpec(model_type=2)))
    >>> one_char_id("中", t), one_char_id("😀", t), one_char_id("x", t)
    (1, None, None)
    >>> t = build_tables(SpmModel((Piece("<unk>", 0, 2), Piece("<0x0A>", 0, 6), Piece("中", -1)),
    ...                           TrainerSpec(model_type=2, byte_fallback=True)))
    >>> one_char_id("\\n", t), one_char_id("\\t", t), one_char_id("é", t)    # no <0x09> piece
    (1, None, None)
    """
    if ord(ch) >= 0x10000 or 0xD800 <= ord(ch) < 0xE000:
        return None
    pid = piece_id(ch, t)
    if pid == t.unk_id and t.byte_fallback and ord(ch) < 0x80:
        pid = piece_id(byte_piece(ord(ch)), t)
    return pid if pid != t.unk_id and pid < ONE_CHAR_IDS else None


def fused_scan(normalized: str, t: SpmTables, pairs: frozenset[str] | None = None,
               joining: frozenset[str] | None = None) -> list[int | str]:
    """``segments(normalized)`` in the order and form the native encoder's one pass
    over the characters makes them (``_spm.pyx`` ``scan``): each one-character segment
    with a ``one_char_id`` as that id (an int), every other segment as its text.

    The dividing line: a wall character (not in ``joining_chars``) is a segment by
    itself, found without looking at its neighbours (no pair test, no segment end);
    with a ``one_char_id`` it is written at once. Any other character starts a segment
    that runs to the first pair outside ``pairs``; if that segment is one character with
    a ``one_char_id``, it is written at once too. Everything else (multi-character
    segments, unknown characters, characters beyond the BMP) goes to the cache and merge
    path. Corollary (for a model without unused pieces, as ``segments``): the ids are
    ``encode``'s, an int item standing for the one piece ``bpe`` leaves of its segment
    (``encode_fused`` joins them so; the tests hold it to ``encode``).

    >>> t = build_tables(SpmModel((Piece("<unk>", 0, 2), Piece("▁a", -1), Piece("中", -2), Piece("a", -3),
    ...                            Piece("▁", -4), Piece("b", -5)), TrainerSpec(model_type=2)))
    >>> fused_scan("▁a中中b▁x", t)     # 中 is a wall; b is a one-character segment; x no piece
    ['▁a', 2, 2, 5, 4, 'x']
    """
    pairs = joinable_pairs(t) if pairs is None else pairs
    joining = joining_chars(t) if joining is None else joining
    out: list[int | str] = []
    pos, n = 0, len(normalized)
    while pos < n:
        start, pos = pos, pos + 1
        if normalized[start] in joining:
            while pos < n and normalized[pos - 1:pos + 1] in pairs:
                pos += 1
        one = one_char_id(normalized[start], t) if pos == start + 1 else None
        out.append(normalized[start:pos] if one is None else one)
    return out


def encode_fused(text: str, t: SpmTables, pairs: frozenset[str] | None = None,
                 joining: frozenset[str] | None = None) -> list[int]:
    """``encode`` by ``fused_scan``: an int item is its id, a text item its segment's
    ``bpe`` pieces' ids; without ``byte_fallback`` a segment's leading unknown id is
    dropped after an unknown id (a run of unknown symbols across a cut is one id).

    >>> t = build_tables(SpmModel((Piece("<unk>", 0, 2), Piece("中", -1)), TrainerSpec(model_type=2)))
    >>> fused_scan(normalize("中xy中", t), t)
    ['▁', 1, 'x', 'y', 1]
    >>> encode_fused("中xy中", t) == encode("中xy中", t) == [0, 1, 0, 1]   # x, y: one unknown id
    True
    """
    ids: list[int] = []
    for item in fused_scan(normalize(text, t), t, pairs, joining):
        if isinstance(item, int):
            ids.append(item)
            continue
        part = pieces_to_ids(bpe(initial_symbols(item, t.user_defined), t), t)
        if part and ids and not t.byte_fallback and ids[-1] == t.unk_id and part[0] == t.unk_id:
            part = part[1:]
        ids.extend(part)
    return ids


def piece_id(piece: str, t: SpmTables) -> int:
    """The id of a piece's text (module docstring, "Ids")."""
    pid = t.reserved.get(piece)
    if pid is None:
        pid = t.pieces.get(piece, t.unk_id)
    return pid


def byte_piece(byte: int) -> str:
    """The piece that stands for a byte (``byte_fallback``).

    >>> byte_piece(10)
    '<0x0A>'
    """
    return f"<0x{byte:02X}>"


def pieces_to_ids(pieces: list[str], t: SpmTables) -> list[int]:
    """Ids of merged pieces: byte fallback, or one unknown id per run of unknown pieces."""
    ids, prev_unk = [], False
    for piece in pieces:
        pid = piece_id(piece, t)
        unk = pid == t.unk_id or t.types[pid] == UNUSED
        if unk and t.byte_fallback:
            ids.extend(piece_id(byte_piece(b), t) for b in piece.encode("utf-8"))
        elif not (unk and prev_unk):
            ids.append(t.unk_id if unk else pid)
        prev_unk = unk
    return ids


def encode(text: str, t: SpmTables) -> list[int]:
    """``SentencePieceProcessor.encode(text)`` for a supported BPE model (no bos/eos)."""
    normalized = normalize(text, t)
    return pieces_to_ids(bpe(initial_symbols(normalized, t.user_defined), t), t)


def split_specials(text: str, allowed: frozenset[str]) -> list[str | tuple[str]]:
    """Text segments and allowed special tokens (as 1-tuples), leftmost-longest first.

    >>> split_specials("a<s>b</s>", frozenset({"<s>", "</s>"}))
    ['a', ('<s>',), 'b', ('</s>',)]
    """
    out, pos, n = [], 0, len(text)
    order = sorted(allowed, key=lambda s: (-len(s), s))
    start = 0
    while pos < n and order:
        hit = next((s for s in order if text.startswith(s, pos)), None)
        if hit is None:
            pos += 1
            continue
        if start < pos:
            out.append(text[start:pos])
        out.append((hit,))
        pos = start = pos + len(hit)
    if start < n:
        out.append(text[start:])
    return out


def encode_with_specials(text: str, t: SpmTables, allowed: frozenset[str]) -> list[int]:
    """``encode`` with the ``allowed`` special tokens' text as their ids; the text
    between them is encoded as texts of their own (module docstring, "Special tokens").

    >>> from fastbpe.reference.sentencepiece import SpmModel, Piece, TrainerSpec
    >>> t = build_tables(SpmModel((Piece("<unk>", 0, 2), Piece("<s>", 0, 3), Piece("▁", -1), Piece("a", -2)),
    ...                           TrainerSpec(model_type=2)))
    >>> encode_with_specials("<s>a", t, frozenset({"<s>"})), encode("<s>a", t)
    ([1, 2, 3], [2, 0, 3])
    """
    ids = []
    for part in split_specials(text, allowed):
        if isinstance(part, tuple):
            ids.append(piece_id(part[0], t))
        else:
            ids.extend(encode(part, t))
    return ids


# --------------------------------------------------------------------------- decoding
def piece_byte(piece: str) -> int:
    """The byte of a ``<0xXX>`` piece.

    >>> piece_byte("<0xE2>")
    226
    """
    return int(piece[3:5], 16)


def decode_bytes(data: bytes) -> str:
    """UTF-8 with one U+FFFD per byte that starts no valid character (sentencepiece's rule).

    >>> decode_bytes(b"a\\xe2\\x96b\\xff")
    'a\ufffd\ufffdb\ufffd'
    """
    return data.decode("utf-8", errors="replace") if _all_single_errors(data) else _decode_bytewise(data)


def _all_single_errors(data: bytes) -> bool:
    """Python's ``errors="replace"`` gives one U+FFFD per maximal invalid subpart, which
    may cover several bytes; sentencepiece gives one per byte. Equal when valid."""
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _decode_bytewise(data: bytes) -> str:
    out, pos = [], 0
    while pos < len(data):
        for size in (1, 2, 3, 4):
            try:
                out.append(data[pos:pos + size].decode("utf-8"))
                pos += size
                break
            except UnicodeDecodeError:
                continue
        else:
            out.append("\ufffd")
            pos += 1
    return "".join(out)


def decode(ids: list[int], t: SpmTables) -> str:
    """``SentencePieceProcessor.decode(ids)`` (module docstring, "Decoding"); an id out of
    range raises ValueError.

    >>> from fastbpe.reference.sentencepiece import SpmModel, Piece, TrainerSpec
    >>> t = build_tables(SpmModel((Piece("<unk>", 0, 2), Piece("<s>", 0, 3), Piece("▁a", -1), Piece("▁", -2)),
    ...                           TrainerSpec(model_type=2)))
    >>> decode([1, 2, 3, 2, 0], t)
    'a  a ⁇ '
    """
    strip_first = t.add_dummy_prefix or t.remove_extra_whitespaces
    out, pending, bos_ws_seen, is_bos_ws = [], bytearray(), False, True
    for pos, i in enumerate(ids):
        if not 0 <= i < len(t.texts):
            raise ValueError(f"token id {i} at position {pos} is out of range [0, {len(t.texts)})")
        piece = t.texts[i]
        kind = t.types[piece_id(piece, t)]
        if kind == BYTE:
            pending.append(piece_byte(piece))
            continue
        if pending:
            out.append(decode_bytes(bytes(pending)))
            pending.clear()
        is_bos_ws = is_bos_ws and not bos_ws_seen and not any(out)
        bos_ws_seen = False
        if kind == CONTROL:
            continue
        if kind == UNKNOWN:
            out.append(t.unk_surface if piece == t.texts[t.unk_id] else piece)
            continue
        if is_bos_ws and strip_first and piece.startswith(SPACE):
            piece = piece[1:]
            bos_ws_seen = not t.remove_extra_whitespaces
        out.append(piece.replace(SPACE, " "))
    if pending:
        out.append(decode_bytes(bytes(pending)))
    return "".join(out)
