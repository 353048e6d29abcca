"""sentencepiece-style BPE as HF ``tokenizers`` runs a tokenizer.json: the specification.

transformers converts a sentencepiece model (Llama 2, Mistral ...) into a tokenizer.json
that HF ``tokenizers`` runs with its own BPE, and HF is the judge of that file, whatever
it says, even where it differs from sentencepiece on the ``.model`` it came from (it
does often: HF merges by the rank of a pair in ``merges``, sentencepiece by the score
of the merged piece; transformers 5's Llama conversion orders merges by piece id, so
``▁▁`` (id 259, score -1e9) merges first). ``fastbpe.formats.hf_spm`` reads the file into
an ``HFSpmSpec``; what it cannot reproduce is refused there, naming the JSON path.

Decisions (each written down once, here):

* **Added tokens** are cut out of the raw text first, leftmost and then longest (HF's
  ``AddedVocabulary``); the pieces between are normalized and tokenized on their own.
  Non-special added tokens (sentencepiece's user-defined pieces) are always matched;
  special ones (control pieces, ``<unk>``) only when the caller allows them
  (``fastbpe.special``), as for every fastbpe tokenizer.
* **Normalizer** ``Prepend("▁")`` puts ``▁`` in front of every non-empty piece between
  added tokens (transformers' ``legacy`` Llama files); ``Replace(" ", "▁")`` escapes
  spaces. **Pre-tokenizer** ``Metaspace``: spaces become ``▁``; ``prepend_scheme``
  ``always`` prepends ``▁`` to every piece not starting with it, ``first`` only to the
  piece at the start of the text (``legacy: false``), ``never`` to none; ``split: true``
  cuts before every ``▁`` (HF's ``MergedWithNext``).
* **BPE** (``bpe_word``): each character is a symbol: its id, else its UTF-8 bytes as
  ``<0xXX>`` ids when ``byte_fallback`` and every byte has one, else the unknown id (a
  run of unknown characters is one symbol with ``fuse_unk``); a model without an
  ``unk_token`` drops the character (its neighbours then merge as if adjacent). Then repeatedly merge the
  adjacent pair with the lowest rank in ``merges`` (leftmost among equal ranks); pairs
  not in ``merges`` never merge, whatever the vocabulary holds. ``ignore_merges`` takes
  a word that is a token whole.
* **Decoding** runs the decoder chain on the tokens' strings: ``Replace("▁", " ")``,
  ``ByteFallback`` (a run of ``<0xXX>`` tokens as UTF-8, one U+FFFD per byte token when
  invalid), ``Fuse``, ``Strip(" ", 1, 0)``; or ``Metaspace`` (``▁`` as a space, the first
  token's leading space dropped unless ``prepend_scheme`` is ``never``). Special tokens
  are skipped (HF's ``skip_special_tokens=True``).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

from .sentencepiece import bucket_merge, split_specials

SPACE = "\u2581"


@dataclass(frozen=True)
class HFSpmSpec:
    """What a sentencepiece-style tokenizer.json means (``fastbpe.formats.hf_spm``)."""

    vocab: dict[str, int]
    merges: dict[tuple[int, int], tuple[int, int]]   # (left id, right id) -> (rank, merged id)
    unk_id: int | None
    byte_fallback: bool
    fuse_unk: bool
    ignore_merges: bool
    prepend: bool             # normalizer Prepend("▁")
    replace_space: bool       # normalizer Replace(" ", "▁") or Metaspace
    prepend_scheme: str       # Metaspace's: "always" | "first" | "never"; "never" without one
    split: bool               # Metaspace split
    added: dict[str, int]     # non-special added tokens: always matched
    special: dict[str, int]   # special added tokens
    decoder: tuple[str, ...]  # "replace", "byte_fallback", "fuse", "strip", "metaspace"
    strip_start: int = 0      # Strip(" ", start, 0)


def pre_tokenize(piece: str, offset: int, spec: HFSpmSpec) -> list[str]:
    """The words of a piece between added tokens (normalizer, then pre-tokenizer) that
    starts at ``offset`` in the text.

    >>> spec = HFSpmSpec({}, {}, None, False, False, False, False, True, "first", False, {}, {}, ())
    >>> pre_tokenize("a b", 0, spec), pre_tokenize("a b", 3, spec)
    (['▁a▁b'], ['a▁b'])
    """
    return words(piece, prefix(piece, offset, spec), spec) if piece else []


def prefix(piece: str, offset: int, spec: HFSpmSpec) -> bool:
    """Whether a ``▁`` goes in front of a non-empty piece: ``Prepend`` always; Metaspace's
    ``prepend_scheme`` (``always``, or ``first`` for the piece at the text's start) when
    the piece, spaces escaped, does not start with ``▁`` already.

    >>> spec = HFSpmSpec({}, {}, None, False, False, False, False, True, "always", False, {}, {}, ())
    >>> prefix("a", 5, spec), prefix(" a", 0, spec), prefix("▁a", 0, spec)
    (True, False, False)
    """
    if spec.prepend:
        return True
    if spec.prepend_scheme == "always" or (spec.prepend_scheme == "first" and offset == 0):
        return not (piece[0] == SPACE or (spec.replace_space and piece[0] == " "))
    return False


def words(piece: str, lead: bool, spec: HFSpmSpec) -> list[str]:
    """A non-empty piece's words: ``▁`` in front when ``lead`` (``prefix``), spaces
    escaped as ``▁`` (``Replace`` or Metaspace), cut before every ``▁`` but the first
    character when Metaspace's ``split``.

    >>> spec = HFSpmSpec({}, {}, None, False, False, False, False, True, "always", True, {}, {}, ())
    >>> words("a b▁c", True, spec)
    ['▁a', '▁b', '▁c']
    """
    if lead:
        piece = SPACE + piece
    if spec.replace_space:
        piece = piece.replace(" ", SPACE)
    if not spec.split:
        return [piece]
    out, start = [], 0
    for i in range(1, len(piece)):
        if piece[i] == SPACE:
            out.append(piece[start:i])
            start = i
    out.append(piece[start:])
    return out


def initial_symbols(word: str, spec: HFSpmSpec) -> list[tuple[int, int, int]]:
    """The word's characters as ``(id, start, end)``, the span in the word's characters:
    byte fallback (each byte's id spans its character), then the unknown id (a fused run
    spans the run).

    >>> spec = HFSpmSpec({"a": 0, "<unk>": 1, "<0xC3>": 2, "<0xA9>": 3}, {}, 1, True, True, False, False, False,
    ...                  "never", False, {}, {}, ())
    >>> initial_symbols("aé中中", spec)
    [(0, 0, 1), (2, 1, 2), (3, 1, 2), (1, 2, 4)]
    """
    out, prev_unk = [], False
    for k, ch in enumerate(word):
        tid = spec.vocab.get(ch)
        if tid is not None:
            out.append((tid, k, k + 1))
            prev_unk = False
            continue
        if spec.byte_fallback:
            byte_ids = [spec.vocab.get(f"<0x{b:02X}>") for b in ch.encode("utf-8")]
            if all(b is not None for b in byte_ids):
                out.extend((b, k, k + 1) for b in byte_ids)
                prev_unk = False
                continue
        if spec.unk_id is None:
            continue        # dropped, as HF does without an unk_token (transformers 5's Llama files)
        if spec.fuse_unk and prev_unk:
            out[-1] = (spec.unk_id, out[-1][1], k + 1)
        else:
            out.append((spec.unk_id, k, k + 1))
        prev_unk = True
    return out


def bpe_word(word: str, spec: HFSpmSpec) -> list[tuple[int, int, int]]:
    """HF's BPE of one word (module docstring, "BPE"), as ``(id, start, end)`` with each
    token's span in the word's characters (its symbols' spans joined).

    >>> spec = HFSpmSpec({"a": 0, "b": 1, "ab": 2}, {(0, 1): (0, 2)}, None, False, False, False, False, False,
    ...                  "never", False, {}, {}, ())
    >>> bpe_word("abab", spec)
    [(2, 0, 2), (2, 2, 4)]
    """
    if spec.ignore_merges and word in spec.vocab:
        return [(spec.vocab[word], 0, len(word))]
    return merge_symbols(initial_symbols(word, spec), spec)


def _linked(symbols: list[tuple[int, int, int]]) -> tuple[list[int], list[int], list[int], list[int]]:
    """The symbols as a doubly linked list for merging: ids, end of each span, next and
    previous index (-1 at the ends).

    >>> _linked([(5, 0, 1), (6, 1, 3)])
    ([5, 6], [1, 3], [1, -1], [-1, 0])
    """
    ids = [i for i, _, _ in symbols]
    nxt = list(range(1, len(ids) + 1))
    if ids:
        nxt[-1] = -1
    return ids, [e for _, _, e in symbols], nxt, list(range(-1, len(ids) - 1))


def merge_symbols(symbols: list[tuple[int, int, int]], spec: HFSpmSpec) -> list[tuple[int, int, int]]:
    """Merge ``(id, start, end)`` symbols: the lowest-rank pair of ``merges`` first,
    leftmost among equal ranks (a heap of candidate pairs, stale ones skipped when
    popped: O(n log n)).

    >>> spec = HFSpmSpec({"a": 0, "b": 1, "ab": 2, "ba": 3}, {(0, 1): (1, 2), (1, 0): (0, 3)}, None, False,
    ...                  False, False, False, False, "never", False, {}, {}, ())
    >>> merge_symbols([(0, 0, 1), (1, 1, 2), (0, 2, 3)], spec)     # "ba" ranks before "ab"
    [(0, 0, 1), (3, 1, 3)]
    """
    ids, ends, nxt, prev = _linked(symbols)
    alive = [True] * len(ids)
    heap = []

    def push(left: int) -> None:
        if left >= 0 and nxt[left] >= 0:
            merge = spec.merges.get((ids[left], ids[nxt[left]]))
            if merge is not None:
                heapq.heappush(heap, (merge[0], left, merge[1]))

    for i in range(len(ids) - 1):
        push(i)
    while heap:
        rank, left, new_id = heapq.heappop(heap)
        if not alive[left] or nxt[left] < 0:
            continue
        if spec.merges.get((ids[left], ids[nxt[left]])) != (rank, new_id):
            continue                              # stale: the pair changed since the push
        right = nxt[left]
        ids[left] = new_id
        ends[left] = ends[right]
        alive[right] = False
        nxt[left] = nxt[right]
        if nxt[right] >= 0:
            prev[nxt[right]] = left
        push(prev[left])
        push(left)
    out, i = [], 0 if ids else -1
    while i >= 0:
        out.append((ids[i], symbols[i][1], ends[i]))
        i = nxt[i]
    return out


def merge_buckets(symbols: list[tuple[int, int, int]], spec: HFSpmSpec) -> list[tuple[int, int, int]]:
    """``merge_symbols`` with its heap replaced by buckets by rank
    (``reference.sentencepiece.bucket_merge``), the structure of the native merge of a
    long segment (``_hf_spm.merge_buckets``): the same tokens. HF's order is the keys
    ``(rank, left)`` a heap pops, lowest first: ``bucket_queue``'s corollary gives the
    same pops, so the same merges (ranks are small dense integers: a bucket each).

    >>> spec = HFSpmSpec({"a": 0, "b": 1, "ab": 2, "ba": 3}, {(0, 1): (1, 2), (1, 0): (0, 3)}, None, False,
    ...                  False, False, False, False, "never", False, {}, {}, ())
    >>> syms = [(i % 2, i, i + 1) for i in range(7)]                       # "abababa"
    >>> merge_buckets(syms, spec) == merge_symbols(syms, spec)
    True
    """
    ids, ends, nxt, prev = _linked(symbols)

    def rank_at(left: int) -> int | None:
        if left < 0 or ids[left] < 0 or nxt[left] < 0:
            return None
        merge = spec.merges.get((ids[left], ids[nxt[left]]))
        return None if merge is None else merge[0]

    def join(left: int) -> int:
        right = nxt[left]
        ids[left] = spec.merges[(ids[left], ids[right])][1]
        ends[left] = ends[right]
        ids[right] = -1
        nxt[left] = nxt[right]
        if nxt[right] >= 0:
            prev[nxt[right]] = left
        return prev[left]

    bucket_merge(len(ids), rank_at, join)
    out, i = [], 0 if ids else -1
    while i >= 0:
        out.append((ids[i], symbols[i][1], ends[i]))
        i = nxt[i]
    return out


def junctions(spec: HFSpmSpec) -> frozenset[tuple[str, str]] | None:
    """``(last character of left's text, first character of right's text)`` of every
    merge ``(left, right)``: the only character pairs a merge can join across
    (``segments``); None when a merge has a side with empty text (no cut is then safe).

    >>> spec = HFSpmSpec({"a": 0, "b": 1, "ab": 2, "c": 3, "abc": 4}, {(0, 1): (0, 2), (2, 3): (1, 4)}, None,
    ...                  False, False, False, False, False, "never", False, {}, {}, ())
    >>> sorted(junctions(spec))
    [('a', 'b'), ('b', 'c')]
    """
    text = {i: t for t, i in spec.vocab.items()}
    if any(not text[i] for pair in spec.merges for i in pair):
        return None
    return frozenset((text[left][-1], text[right][0]) for left, right in spec.merges)


def segments(symbols: list[tuple[int, int, int]], spec: HFSpmSpec,
             joins: frozenset[tuple[str, str]] | None) -> list[list[tuple[int, int, int]]]:
    """The initial symbols cut between every two adjacent ``a``, ``b`` whose pair
    ``(last character of a's text, first character of b's text)`` is not in ``joins``
    (``junctions``; no cut when it is None).

    Corollary: ``merge_symbols`` of the whole gives the concatenation of
    ``merge_symbols`` of each segment (what lets the native kernel merge short segments
    by a scan and long ones by a heap). Proof: a merged token's text is its sides' texts
    joined (``formats.hf_spm`` checks ``merges`` make ``vocab[left + right]``), so every
    symbol's text is its initial symbols' texts joined. A merge across the cut between
    ``a`` and ``b`` would join a symbol ending in ``a`` (its text ends with ``a``'s last
    character) and one starting with ``b``: a merge whose junction is the pair, not in
    ``joins``. So no pair across a cut is ever a candidate, a segment's candidates
    depend on its own symbols only, and the lowest (rank, position) overall is the
    lowest of its own segment: each segment goes through the same merges, in the same
    order, as merged alone.

    >>> spec = HFSpmSpec({"a": 0, "b": 1, "ab": 2}, {(0, 1): (0, 2)}, None, False, False, False, False, False,
    ...                  "never", False, {}, {}, ())
    >>> segments([(0, 0, 1), (1, 1, 2), (1, 2, 3), (0, 3, 4)], spec, junctions(spec))
    [[(0, 0, 1), (1, 1, 2)], [(1, 2, 3)], [(0, 3, 4)]]
    """
    if not symbols:
        return []
    text = {i: t for t, i in spec.vocab.items()}
    out, start = [], 0
    for k in range(1, len(symbols)):
        if joins is not None and (text[symbols[k - 1][0]][-1], text[symbols[k][0]][0]) not in joins:
            out.append(symbols[start:k])
            start = k
    out.append(symbols[start:])
    return out


def encode(text: str, spec: HFSpmSpec, allowed_special: frozenset[str] = frozenset()) -> list[int]:
    """HF's ``encode(text, add_special_tokens=False).ids``, with only ``allowed_special``
    of the special tokens matched (module docstring, "Added tokens").

    >>> spec = HFSpmSpec({"▁": 0, "a": 1, "▁a": 2}, {(0, 1): (0, 2)}, None, False, False, False, True, True,
    ...                  "never", False, {}, {"<s>": 3}, ())
    >>> encode("a<s>a", spec, frozenset({"<s>"})), encode("a<s>a", spec)   # "<", "s", ">" dropped: no unk
    ([2, 3, 2], [2, 1])
    """
    return [i for i, _ in encode_with_offsets(text, spec, allowed_special)]


def pieces(text: str, spec: HFSpmSpec, allowed_special: frozenset[str] = frozenset(),
           split=split_specials) -> list[int | tuple[str, bool]]:
    """The text cut at added tokens (module docstring, "Added tokens"), in order: an
    added token's id, or a piece between them with whether a ``▁`` goes in front of it
    (``prefix``). ``split`` cuts (``split_specials``, the definition; the library passes
    its faster twin ``fastbpe.special.split_on_specials``).

    >>> spec = HFSpmSpec({}, {}, None, False, False, False, True, True, "never", False, {}, {"<s>": 3}, ())
    >>> pieces("a b<s>c", spec, frozenset({"<s>"})), pieces("", spec)
    ([('a b', True), 3, ('c', True)], [])
    """
    tokens = dict(spec.added)
    tokens.update({s: i for s, i in spec.special.items() if s in allowed_special})
    out, offset = [], 0
    for part in split(text, frozenset(tokens)):
        if isinstance(part, tuple):
            out.append(tokens[part[0]])
            offset += len(part[0])
        else:
            out.append((part, prefix(part, offset, spec)))
            offset += len(part)
    return out


def parts(text: str, spec: HFSpmSpec, allowed_special: frozenset[str] = frozenset(),
          split=split_specials) -> list[int | list[str]]:
    """``encode``'s steps before BPE, in order: an added token's id, or the words
    (``words``) of a piece between added tokens. ``encode`` is each id, and
    ``bpe_word`` of each word (the step a native kernel takes over).

    >>> spec = HFSpmSpec({}, {}, None, False, False, False, True, True, "never", False, {}, {"<s>": 3}, ())
    >>> parts("a b<s>c", spec, frozenset({"<s>"})), parts("", spec)
    ([['▁a▁b'], 3, ['▁c']], [])
    """
    return [p if isinstance(p, int) else words(p[0], p[1], spec) for p in pieces(text, spec, allowed_special, split)]


def encode_with_offsets(text: str, spec: HFSpmSpec,
                        allowed_special: frozenset[str] = frozenset()) -> list[tuple[int, tuple[int, int]]]:
    """``encode``'s ids with HF's offsets: ``(start, end)`` in ``text``'s characters.

    The normalizer and pre-tokenizer only escape spaces (one character for one) and may
    put one ``▁`` in front of a piece between added tokens; that ``▁`` stands for the
    piece's first character, as HF aligns it. A token spans the characters of its
    symbols (a byte-fallback token spans its whole character); an added token spans its
    text.

    >>> spec = HFSpmSpec({"▁": 0, "a": 1, "▁a": 2, "中": 4}, {(0, 1): (0, 2)}, None, False, False, True, True,
    ...                  True, "never", False, {}, {"<s>": 3}, ())
    >>> encode_with_offsets("中a<s>a a", spec, frozenset({"<s>"}))
    [(0, (0, 1)), (4, (0, 1)), (1, (1, 2)), (3, (2, 5)), (2, (5, 6)), (2, (6, 8))]
    """
    tokens = dict(spec.added)
    tokens.update({s: i for s, i in spec.special.items() if s in allowed_special})
    out, offset = [], 0
    for part in split_specials(text, frozenset(tokens)):
        if isinstance(part, tuple):
            out.append((tokens[part[0]], (offset, offset + len(part[0]))))
            offset += len(part[0])
            continue
        words = pre_tokenize(part, offset, spec)
        lead = sum(len(w) for w in words) - len(part)     # 1 when a "▁" was put in front
        at = 0
        for word in words:
            for tid, start, end in bpe_word(word, spec):
                out.append((tid, (offset + max(at + start - lead, 0), offset + max(at + end - lead, 1))))
            at += len(word)
        offset += len(part)
    return out


def _byte_of(token: str) -> int | None:
    if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
        try:
            return int(token[3:5], 16)
        except ValueError:
            return None
    return None


def decode(ids: list[int], spec: HFSpmSpec, id_to_token: dict[int, str]) -> str:
    """HF's ``decode(ids, skip_special_tokens=True)`` (module docstring, "Decoding")."""
    specials = set(spec.special.values())
    tokens = [id_to_token[i] for i in ids if i not in specials]
    if "metaspace" in spec.decoder:
        out = []
        for i, t in enumerate(tokens):
            t = t.replace(SPACE, " ")
            if i == 0 and spec.prepend_scheme != "never" and t.startswith(" "):
                t = t[1:]
            out.append(t)
        return "".join(out)
    if "replace" in spec.decoder:
        tokens = [t.replace(SPACE, " ") for t in tokens]
    if "byte_fallback" in spec.decoder:
        out, pending = [], []
        for t in tokens + [None]:
            b = _byte_of(t) if t is not None else None
            if b is not None:
                pending.append(b)
                continue
            if pending:
                try:
                    out.append(bytes(pending).decode("utf-8"))
                except UnicodeDecodeError:
                    out.extend("\ufffd" for _ in pending)
                pending = []
            if t is not None:
                out.append(t)
        tokens = out
    if "fuse" in spec.decoder:
        tokens = ["".join(tokens)]
    if "strip" in spec.decoder and spec.strip_start:
        stripped = []
        for t in tokens:
            k = 0
            while k < spec.strip_start and k < len(t) and t[k] == " ":
                k += 1
            stripped.append(t[k:])
        tokens = stripped
    return "".join(tokens)
