"""``fastbpe audit``: what a byte-level BPE vocabulary holds that text never reaches.

**Unreachable tokens.** A token is *reachable* when some text (a ``str``) encodes to
ids that include it, under the tokenizer's own rule: audit asks the loaded tokenizer
(``encode_ordinary`` for a text, ``_encode_single_piece`` for one chunk of given bytes),
so whatever rule it follows is the rule audited. The rules fastbpe knows have one form:
the text is split into chunks by the pattern; a chunk's bytes become, optionally, the
token they are when they are one (tiktoken's rank rule looks the chunk up first), else
the result of merging from single bytes, the lowest-priority pair first (leftmost among
equals), until no pair merges. HF's merge-list rule with ``ignore_merges: false`` is
the same without the lookup.

*Lemma.* If token ``t`` comes out of a chunk ``c`` longer than ``t`` (so by merges),
then merging ``t``'s bytes alone gives ``[t]``. Why: the merges that touch the bytes
of ``t``'s span all stay inside it (one crossing its edge would make a token that is
never split again, and ``t`` would not come out); each of them was the lowest pair of
the whole chunk when made, so also the lowest among the pairs inside the span; and the
pairs inside the span do not depend on what happens outside it. So the span goes through
the same merges, in the same order, as ``t``'s bytes alone.

So each token ``t`` with bytes ``b`` (special and added tokens aside) is decided by:

1. ``b`` is UTF-8 text ``s`` and ``encode_ordinary(s) == [t]``: **reachable**, the proof
   is ``s`` itself (nearly every token).
2. ``b`` occurs in no UTF-8 text at all (GPT-2's byte tokens 0xC0, 0xC1, 0xF5-0xFF:
   bytes UTF-8 never uses): **never**, proven. ``_encode_single_piece(b) != [t]`` (a
   chunk of exactly these bytes gives other ids, so there is no lookup for it and
   merges do not build it): **never**, proven by the lemma; the proof shown is what
   its bytes encode to.
3. Else audit searches texts that hold ``b``: ``s`` after each continuation of up to two
   characters and between one-character contexts, from a fixed set of representative
   characters (letters of several scripts and cases, digits, spaces, newline, marks,
   punctuation) plus the token's own first and last characters; for bytes that are not
   UTF-8, the vocabulary's text tokens that contain them and short completions of the
   cut characters; and the corpus, when one is given. A text that produces ``t``:
   **reachable**, with that text as proof.
4. Not found, and merges alone do not build ``t`` (``merge_bytes``, tiktoken's rank
   rule, gives other ids): ``t`` comes only from a chunk that is exactly ``b``. If ``b``
   is not UTF-8, no chunk of any text is (a chunk is a slice of a ``str``): **never**,
   proven. If it is text, no searched continuation made it one chunk: **never by the
   split** (checked, not proven: the patterns look at most one character ahead, and
   the search covers two; a pattern with lookbehind would need more).
5. Not found, merges build ``t``, but in no searched text do its bytes fall inside one
   chunk: **never by the split** (Qwen's ``'１０'``: its pattern makes every digit its own
   chunk). Otherwise **undecided**: listed, counted apart, never called unreachable.

The report also gives the counts behind the issue's numbers: tokens that do not come
back from their own text (step 1 fails), and *merge-only* tokens (merges do not build
them; only the whole-chunk lookup gives them, so under HF's ``ignore_merges: false``
they are unreachable: 588 of Llama 3.2's).

**On a corpus** (files given): how often each token is produced; tokens never or rarely
produced, ranked (fewest first, then longest: the SolidGoldMagikarp candidates); tokens
never produced whose bytes occur inside a produced token ("only inside a longer token");
per file, tokens per byte and the token tax against the first file (``stats``).

**Vocabulary lists**: tokens that are not valid UTF-8 alone; tokens of whitespace only;
tokens holding a control or invisible character (``show.HIDDEN``); near-duplicates:
distinct tokens that read the same after Unicode NFKC normalisation (``'１０'`` and
``'10'``, composed and decomposed accents), the look-alikes a normalising tokenizer
would fold; case and space variants (``' The'``/``'the'``) are BPE's design, counted
only.

>>> from fastbpe.bpe.encoding import get_toy_encoding
>>> a = audit(get_toy_encoding())
>>> a["unreachable"]["count"], a["not_utf8"]["count"]
(13, 128)
"""
from __future__ import annotations

import html
import json
import os
import sys
import unicodedata
from collections import Counter

from .checks import is_wordpiece
from .reference.bpe import merge_bytes
from .show import HIDDEN

#: Characters the context search puts around a token: one per kind of character the
#: split patterns tell apart (and the letters of English contractions).
REPRESENTATIVE = (" ", "  ", "\n", "\t", "\r", "\u00a0", "a", "Z", "s", "t", "e", "l", "d", "m", "v", "r",
                  "é", "É", "ß", "ǅ", "ʰ", "中", "あ", "ア", "ا", "д", "\u0301", "1", "１", "Ⅳ", "'", ".", "!",
                  "/", "_", "-", "😀", "\u200d")

#: Rows of the corpus's ranked lists that the result (--json, --html) holds.
HELD = 1000

#: A UTF-8 lead byte for each length of a cut character, and filler continuation bytes.
LEADS = {2: (0xC3, 0xD0, 0xD9), 3: (0xE3, 0xE4, 0xE2, 0xEA, 0xE1), 4: (0xF0,)}
FILLERS = (0x80, 0x81, 0x9F, 0xA0, 0xA4, 0xBF)


def label(b: bytes) -> str:
    """A token as the report shows it: its text's repr, or its bytes' when not UTF-8.

    >>> label(b" the"), label(b"\\xe6\\x9c")
    ("' the'", "b'\\\\xe6\\\\x9c'")
    """
    try:
        return repr(b.decode("utf-8"))
    except UnicodeDecodeError:
        return repr(b)


def _text(b: bytes) -> str | None:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


# --------------------------------------------------------------------------- the search
def _contexts(s: str):
    """``(prefix, suffix)`` pairs around text ``s``: continuations of up to two
    characters, then one character each side."""
    alphabet = list(dict.fromkeys((*REPRESENTATIVE, s[:1], s[-1:])))
    yield "", ""
    for q in alphabet:
        yield "", q
    for q in alphabet:
        for q2 in alphabet:
            yield "", q + q2
    for p in alphabet:
        for q in ("", *alphabet):
            yield p, q


def _completions(b: bytes, fillers=FILLERS) -> list[bytes]:
    """Short UTF-8 byte strings holding ``b``: cut characters at either end completed
    (with ``fillers`` as the continuation bytes a completion adds).

    >>> len(_completions(b"\\xe5", range(0x80, 0xC0)))  # every character U+5000-U+5FFF
    4096

    >>> _completions(b"\\x9c\\xe6")[:2]
    [b'\\xc3\\x9c\\xe6\\x80\\x80', b'\\xc3\\x9c\\xe6\\x80\\x81']
    """
    lead = 0
    while lead < len(b) and lead < 3 and 0x80 <= b[lead] <= 0xBF:
        lead += 1
    heads = [b""]
    if lead:
        heads = [bytes([x, *[f] * (n - 1 - lead)]) for n in (2, 3, 4) if n > lead for x in LEADS[n] for f in fillers]
    tails = [b""]
    for back in range(1, min(4, len(b)) + 1):  # a lead byte near the end, its character cut
        x = b[-back]
        n = 2 if 0xC0 <= x <= 0xDF else 3 if 0xE0 <= x <= 0xEF else 4 if 0xF0 <= x <= 0xF7 else 0
        if n > back:
            more = n - back - 1  # bytes after the first one added: every filler for one, 0x80 after
            tails = [bytes([f, *g]) for f in fillers
                     for g in ([(h,) for h in fillers] if more == 1 else [(0x80,) * more])]
            break
        if x < 0x80 or n:
            break
    out = []
    for h in heads:
        for t in tails:
            cand = h + b + t
            if _text(cand) is not None:
                out.append(cand)
    return out


def _in_some_text(b: bytes) -> bool:
    """Whether some UTF-8 text holds the bytes ``b`` (a ``str``'s encoding can contain
    them): a lead byte and continuation bytes before ``b`` complete its cut first
    character, and the rest must be a valid start. Every lead byte is tried, with the
    continuation bytes that each lead's second-byte range needs.

    >>> _in_some_text(b"\\x9c\\xe6"), _in_some_text(b"\\xc0"), _in_some_text(b"\\xff")
    (True, False, False)
    """
    import codecs

    lead = 0
    while lead < len(b) and lead < 3 and 0x80 <= b[lead] <= 0xBF:
        lead += 1
    heads = [b""] if not lead else [bytes([x, *c]) for x in range(0xC2, 0xF5)
                                    for k in range(3) for c in _fillers(k)]
    for head in heads:
        try:
            codecs.getincrementaldecoder("utf-8")().decode(head + b, final=False)
            return True
        except UnicodeDecodeError:
            continue
    return False


def _fillers(k: int) -> list[tuple[int, ...]]:
    """Continuation bytes to put between a lead byte and a fragment: one of each range a
    second byte may need (E0: A0-BF, ED: 80-9F, F0: 90-BF, F4: 80-8F)."""
    if k == 0:
        return [()]
    return [(c, *rest) for c in (0x80, 0x90, 0xA0, 0xBF) for rest in _fillers(k - 1)]


def _search(enc, t: int, b: bytes, containing: list[str]) -> tuple[str | None, bool]:
    """``(a text that produces t, or None; whether any text tried had b inside one chunk)``.
    Each text's chunks that hold ``b`` are encoded alone (the ids a chunk gets do not
    depend on the others); a hit is confirmed with ``encode_ordinary`` of the text."""
    pat = enc._pat
    covered = False
    s = _text(b)
    if s is not None:
        texts = (p + s + q for p, q in _contexts(s))
    else:
        every = _completions(b, range(0x80, 0xC0)) if len(b) <= 3 else []
        found = [*containing, *(c.decode("utf-8") for c in [*_completions(b), *every])]
        texts = (p + x + q for x in found for p, q in (("", ""), (" ", ""), ("", " ")))
    for text in texts:
        for chunk in pat.findall(text):
            cb = chunk.encode("utf-8")
            if b in cb:
                covered = True
                if t in enc._encode_single_piece(cb) and t in enc.encode_ordinary(text):
                    return text, True
    return None, covered


def _gives_itself(enc, s: str, t: int) -> bool:
    """``encode_ordinary(s) == [t]``, as the one chunk ``s`` must then be (a text that is
    two chunks or more gets two ids or more); text holding an added token's text goes
    through ``encode_ordinary`` itself."""
    if enc.added_tokens and any(a in s for a in enc.added_tokens):
        return enc.encode_ordinary(s) == [t]
    m = enc._pat.match(s)
    return m is not None and m.end() == len(s) and enc._encode_single_piece(s.encode("utf-8")) == [t]


def _containing(fragments: list[bytes], tokens: list[bytes], most: int = 8) -> dict[bytes, list[str]]:
    """For each byte fragment, up to ``most`` text tokens whose bytes hold it."""
    import numpy as np  # here, not at the top: ``fastbpe --help`` loads no numpy

    texts = [tb for tb in tokens if _text(tb) is not None]
    joined = b"\x00".join(texts)
    starts = np.cumsum([0] + [len(tb) + 1 for tb in texts])
    out: dict[bytes, list[str]] = {}
    for f in fragments:
        found, pos = [], joined.find(f)
        while pos >= 0 and len(found) < most:
            k = int(np.searchsorted(starts, pos, side="right")) - 1
            found.append(texts[k].decode("utf-8"))
            pos = joined.find(f, int(starts[k + 1]))
        out[f] = found
    return out


def unreachable(enc, produced: np.ndarray | None = None, progress=None) -> dict:
    """The decision above for every ordinary token of ``enc`` (``produced``: counts of
    each id on a corpus, a proof of reach). Returns the lists and counts."""
    ranks = enc.mergeable_ranks
    own_text_fails, merge_only, need_search = [], [], []
    never_proven, never_split, undecided, found = [], [], [], []
    lookup = None
    for b, t in ranks.items():
        if progress is not None:
            progress.update(1)
        s = _text(b)
        merged = merge_bytes(b, ranks) if len(b) > 1 else [t]
        itself = s is not None and _gives_itself(enc, s, t)
        piece = enc._encode_single_piece(b) if merged != [t] or not itself else None
        if merged != [t]:
            merge_only.append((t, b, merged))
            lookup = lookup or piece == [t]
        if itself:  # step 1: its own text gives it
            continue
        if s is not None:
            own_text_fails.append((t, b))
        if s is None and not _in_some_text(b):
            never_proven.append({"id": t, "token": label(b), "encodes_to": None,
                                 "why": "no UTF-8 text holds these bytes (so no str does)"})
        elif piece != [t]:
            never_proven.append({"id": t, "token": label(b), "why": "its bytes as one chunk encode to other ids, "
                                 "and merges do not build it", "encodes_to": piece})
        elif produced is not None and t < len(produced) and produced[t]:
            found.append({"id": t, "token": label(b), "proof": f"produced {int(produced[t]):,}x on the corpus"})
        else:
            need_search.append((t, b, merged))
    containing = _containing([b for _, b, _ in need_search if _text(b) is None], list(ranks))
    if progress is not None:
        progress.total += len(need_search)
    for t, b, merged in need_search:
        if progress is not None:
            progress.update(1)
        text, covered = _search(enc, t, b, containing.get(b, []))
        s = _text(b)
        encodes_to = enc.encode_ordinary(s) if s is not None else None
        item = {"id": t, "token": label(b), "encodes_to": encodes_to}
        if text is not None:
            found.append({"id": t, "token": label(b), "proof": f"{text!r} encodes to ids that hold it"})
        elif merged != [t] and s is None:
            never_proven.append({**item, "why": "not UTF-8, so never one whole chunk, and merges do not build it"})
        elif merged != [t] or not covered:
            never_split.append({**item, "why": "merges do not build it and no text searched has it as one chunk"
                                if merged != [t] else "no text searched has its bytes inside one chunk"})
        else:
            undecided.append({**item, "why": "its bytes fall inside one chunk, but other merges win there "
                              "in every text searched"})
    never = never_proven + never_split
    rule = ("whole-chunk lookup, then merges (tiktoken's rank rule)" if lookup
            else "merges only (no whole-chunk lookup)" if lookup is False
            else "every token is built by merges from its bytes: with or without a whole-chunk lookup, the same")
    return {
        "rule": rule,
        "tokens": len(ranks),
        "count": len(never),
        "proven": never_proven,
        "by_split": never_split,
        "undecided": undecided,
        "reached_by_search": found,
        "not_from_own_text": {"count": len(own_text_fails),
                              "tokens": [{"id": t, "token": label(b), "encodes_to": enc.encode_ordinary(b.decode())}
                                           for t, b in own_text_fails]},
        "merge_only": {"count": len(merge_only),
                       "tokens": [{"id": t, "token": label(b),
                                     "merges_give": [label(enc.decode_single_token_bytes(i)) for i in m]}
                                    for t, b, m in merge_only]},
    }


# --------------------------------------------------------------------------- vocabulary lists
def vocabulary_lists(enc) -> dict:
    """Tokens not UTF-8 alone, whitespace-only tokens, tokens with hidden characters,
    near-duplicates (same NFKC text) and the count of case/space variant groups."""
    not_utf8, space, hidden = [], [], []
    by_nfkc: dict[str, list[tuple[int, str]]] = {}
    by_loose: Counter = Counter()
    for b, t in sorted(enc.mergeable_ranks.items(), key=lambda kv: kv[1]):
        s = _text(b)
        if s is None:
            not_utf8.append({"id": t, "token": label(b)})
            continue
        if s.isspace():
            space.append({"id": t, "token": label(b)})
        elif HIDDEN.search(s):
            hidden.append({"id": t, "token": label(b)})
        by_nfkc.setdefault(unicodedata.normalize("NFKC", s), []).append((t, s))
        by_loose[s.strip().casefold()] += 1
    groups = [{"nfkc": repr(k), "tokens": [{"id": t, "token": repr(s)} for t, s in v]}
              for k, v in by_nfkc.items() if len(v) > 1]
    return {"not_utf8": {"count": len(not_utf8), "tokens": not_utf8},
            "whitespace": {"count": len(space), "tokens": space},
            "hidden_characters": {"count": len(hidden), "tokens": hidden},
            "near_duplicates": {"count": len(groups), "groups": groups},
            "case_space_variant_groups": sum(1 for n in by_loose.values() if n > 1)}


# --------------------------------------------------------------------------- the corpus
def corpus_counts(enc, files: list[str], *, num_threads: int = 1, errors: str = "strict", progress=None,
                  document_rule: dict | None = None, **special) -> tuple[np.ndarray, dict]:
    """``(counts of every id over all files, {file: stats.TextStats})``."""
    import numpy as np

    from .corpus import count_corpus
    from .io import Corpus
    from .stats import TextStats

    counts = np.zeros(enc.max_token_value + 1, dtype=np.int64)

    def add(ids):
        counts[:] += np.bincount(ids.astype(np.int64), minlength=len(counts))[:len(counts)]

    per_file = {}
    for f in files:
        corpus = Corpus.resolve(f, **(document_rule or {}))
        c = count_corpus(enc, corpus, num_threads=num_threads, errors=errors, progress=progress, on_ids=add,
                         **special)
        per_file[f] = TextStats(c["bytes"], c["chars"], c["words"], c["tokens"], c["unknown"])
    return counts, per_file


def corpus_lists(enc, counts: np.ndarray, per_file: dict, *, under: int = 1, top: int = 50) -> dict:
    """Never / rarely produced tokens (ranked), tokens only inside longer ones, and the
    per-file tokens per byte and token tax."""
    import numpy as np

    from .stats import token_tax

    ranks = enc.mergeable_ranks
    by_id = {t: b for b, t in ranks.items()}
    rare = sorted((int(counts[t]), -len(b), t) for t, b in by_id.items() if counts[t] < under)
    never = [t for t, _ in by_id.items() if counts[t] == 0]
    # "inside": a produced token's bytes hold the never-produced token's bytes
    never_set = {by_id[t]: t for t in never}
    inside: dict[int, tuple[int, int]] = {}
    longest = max((len(b) for b in never_set), default=0)
    for t in np.flatnonzero(counts).tolist():
        b = by_id.get(t)
        if b is None or len(b) < 2:
            continue
        for i in range(len(b)):
            for j in range(i + 1, min(len(b), i + longest) + 1):
                if j - i < len(b):
                    u = never_set.get(b[i:j])
                    if u is not None and (u not in inside or counts[t] > counts[inside[u][0]]):
                        inside[u] = (t, int(counts[t]))
    inside_rows = sorted(((c, u, t) for u, (t, c) in inside.items()), reverse=True)
    files = list(per_file)
    tax = token_tax({f: {enc.name: s} for f, s in per_file.items()}, files) if len(files) > 1 else None
    total = int(counts.sum())
    return {
        "tokens_produced": total,
        "distinct_produced": int(np.count_nonzero(counts[: max(by_id) + 1])),
        "never": {"count": len(never)},
        "rare": {"under": under, "count": len(rare),
                 "ranked": [{"id": t, "token": label(by_id[t]), "count": c} for c, _, t in rare[:top]]},
        "only_inside": {"count": len(inside_rows),
                        "ranked": [{"id": u, "token": label(by_id[u]), "inside": label(by_id[t]), "id_inside": t,
                                    "count": c} for c, u, t in inside_rows[:top]]},
        "per_file": {f: {"bytes": s.bytes, "tokens": s.tokens,
                         "tokens_per_byte": s.tokens / s.bytes if s.bytes else None,
                         "token_tax": tax[f][enc.name] if tax else None} for f, s in per_file.items()},
    }


def audit(enc, files: list[str] | None = None, *, under: int = 1, top: int = 50, num_threads: int = 1,
          errors: str = "strict", document_rule: dict | None = None, progress=None, **special) -> dict:
    """The whole audit of a byte-level BPE ``Encoding`` (and of a corpus, when ``files``)."""
    if is_wordpiece(enc):
        raise ValueError("audit handles byte-level BPE tokenizers; this one is WordPiece")
    result = {"tokenizer": enc.name, "ordinary_tokens": len(enc.mergeable_ranks),
              "special_tokens": len(enc.special_tokens), "added_tokens": len(enc.added_tokens)}
    counts = None
    if files:
        counts, per_file = corpus_counts(enc, files, num_threads=num_threads, errors=errors,
                                         document_rule=document_rule, **special)
        result["corpus"] = {"files": list(files), **corpus_lists(enc, counts, per_file, under=under, top=top)}
    if progress is not None:
        progress.reset(total=len(enc.mergeable_ranks))
    result["unreachable"] = unreachable(enc, counts, progress)
    result.update(vocabulary_lists(enc))
    return result


# --------------------------------------------------------------------------- reports
def _items(rows: list[dict], top: int, fmt, total: int | None = None) -> list[str]:
    """The first ``top`` rows, then how many more there are (``total``: of a list that
    the result holds only the head of)."""
    out = [f"    {fmt(r)}" for r in rows[:top]]
    total = len(rows) if total is None else total
    if total > top:
        held = "all" if len(rows) == total else f"the first {len(rows):,}"
        out.append(f"    ... {total - top:,} more (--json or --html list {held})")
    return out


def _ids(enc_ids) -> str:
    return "[" + ", ".join(map(str, enc_ids)) + "]" if enc_ids is not None else "-"


def format_report(a: dict, top: int = 20) -> str:
    """The audit as text."""
    u = a["unreachable"]
    lines = [f"audit of {a['tokenizer']}: {a['ordinary_tokens']:,} ordinary tokens, {a['special_tokens']} special, "
             f"{a['added_tokens']} added",
             f"rule: {u['rule']}",
             "",
             f"unreachable (no text produces them): {u['count']:,}  ({len(u['proven']):,} proven, "
             f"{len(u['by_split']):,} by the split pattern, checked); undecided: {len(u['undecided']):,}"]
    for title, rows in (("proven", u["proven"]), ("by the split pattern", u["by_split"]),
                        ("undecided", u["undecided"])):
        if rows:
            lines.append(f"  {title}:")
            lines += _items(rows, top, lambda r: f"{r['id']:>7}  {r['token']}  -> {_ids(r['encodes_to'])}  "
                                                 f"({r['why']})")
    n = u["not_from_own_text"]
    lines.append(f"not from their own text (their text encodes to other ids): {n['count']:,}")
    lines += _items(n["tokens"], min(top, 5), lambda r: f"{r['id']:>7}  {r['token']} -> {_ids(r['encodes_to'])}")
    m = u["merge_only"]
    lines.append(f"merge-only (merges from single bytes do not build them; only a whole-chunk lookup gives them, "
                 f"so HF's ignore_merges: false never does): {m['count']:,}")
    lines += _items(m["tokens"], min(top, 5),
                    lambda r: f"{r['id']:>7}  {r['token']} -> merges give {' '.join(r['merges_give'])}")
    if u["reached_by_search"]:
        lines.append(f"reached only from other text (found by the search or the corpus): "
                     f"{len(u['reached_by_search']):,}")
        lines += _items(u["reached_by_search"], min(top, 5), lambda r: f"{r['id']:>7}  {r['token']}  {r['proof']}")
    if "corpus" in a:
        c = a["corpus"]
        lines += ["", f"on the corpus ({len(c['files'])} file(s), {c['tokens_produced']:,} tokens): "
                      f"{c['distinct_produced']:,} distinct tokens produced; never produced: {c['never']['count']:,}"]
        lines.append(f"  fewest produced (under {c['rare']['under']}; fewest first, then longest): "
                     f"{c['rare']['count']:,}")
        lines += _items(c["rare"]["ranked"], top, lambda r: f"{r['id']:>7}  {r['token']}  {r['count']}x",
                        c["rare"]["count"])
        lines.append(f"  only inside a longer token (never produced; its bytes inside a produced token): "
                     f"{c['only_inside']['count']:,}")
        lines += _items(c["only_inside"]["ranked"], top,
                        lambda r: f"{r['id']:>7}  {r['token']}  inside {r['inside']} ({r['count']:,}x)",
                        c["only_inside"]["count"])
        if len(c["per_file"]) > 1:
            first = next(iter(c["per_file"]))
            lines.append(f"  per file: tokens per byte; token tax against {os.path.basename(first)} (tokens / its "
                         "tokens, for parallel text) and per byte (tokens/byte / its tokens/byte)")
            base = c["per_file"][first]["tokens_per_byte"]
            for f, s in c["per_file"].items():
                tpb = s["tokens_per_byte"]
                per_byte = f"{tpb / base:.2f}x" if tpb and base else "n/a"
                lines.append(f"    {os.path.basename(f)}: {s['tokens']:,} tokens, "
                             f"{'n/a' if tpb is None else format(tpb, '.3f')} tokens/byte, tax {s['token_tax']:.2f}x, "
                             f"per byte {per_byte}")
    lines.append("")
    for key, title in (("not_utf8", "not valid UTF-8 alone"), ("whitespace", "whitespace only"),
                       ("hidden_characters", "holding control or invisible characters")):
        lines.append(f"{title}: {a[key]['count']:,}")
        lines += _items(a[key]["tokens"], min(top, 5), lambda r: f"{r['id']:>7}  {r['token']}")
    nd = a["near_duplicates"]
    lines.append(f"near-duplicates (distinct tokens, the same text after NFKC): {nd['count']:,} groups; "
                 f"case/space variant groups (same after strip + casefold): {a['case_space_variant_groups']:,}")
    lines += _items(nd["groups"], min(top, 5),
                    lambda g: " ~ ".join(f"{r['token']} ({r['id']})" for r in g["tokens"]) + f"  NFKC {g['nfkc']}")
    return "\n".join(lines)


_CSS = """body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; } td, th { border: 1px solid #ddd; padding: 2px 8px; }
td.t { font-family: ui-monospace, Menlo, Consolas, monospace; white-space: pre; } th { background: #f4f4f4; }"""


def render_html(a: dict, limit: int = 1000) -> str:
    """One self-contained page with every list (each up to ``limit`` rows)."""
    e = html.escape
    u = a["unreachable"]
    parts = [f"<h1>audit of {e(a['tokenizer'])}</h1>",
             f"<p>{a['ordinary_tokens']:,} ordinary tokens; rule: {e(u['rule'])}. Unreachable: {u['count']:,} "
             f"({len(u['proven']):,} proven, {len(u['by_split']):,} by the split pattern); undecided "
             f"{len(u['undecided']):,}.</p>"]

    def table(title, rows, cols, total=None):
        total = len(rows) if total is None else total
        if not total:
            return f"<h2>{e(title)}: none</h2>"
        head = "".join(f"<th>{e(c)}</th>" for c, _ in cols)
        body = "".join("<tr>" + "".join(f'<td class="t">{e(str(get(r)))}</td>' for _, get in cols) + "</tr>"
                       for r in rows[:limit])
        shown = min(len(rows), limit)
        more = f"<p>... {total - shown:,} more (the first {shown:,} are listed)</p>" if total > shown else ""
        return f"<h2>{e(title)}: {total:,}</h2><table><tr>{head}</tr>{body}</table>{more}"

    why = [("id", lambda r: r["id"]), ("token", lambda r: r["token"]), ("encodes to", lambda r: _ids(r["encodes_to"])),
           ("why", lambda r: r["why"])]
    parts.append(table("unreachable, proven", u["proven"], why))
    parts.append(table("unreachable by the split pattern (checked)", u["by_split"], why))
    parts.append(table("undecided", u["undecided"], why))
    parts.append(table("not from their own text", u["not_from_own_text"]["tokens"],
                       [("id", lambda r: r["id"]), ("token", lambda r: r["token"]),
                        ("its text encodes to", lambda r: _ids(r["encodes_to"]))]))
    parts.append(table("merge-only (HF's ignore_merges: false never gives them)", u["merge_only"]["tokens"],
                       [("id", lambda r: r["id"]), ("token", lambda r: r["token"]),
                        ("merges give", lambda r: " ".join(r["merges_give"]))]))
    if "corpus" in a:
        c = a["corpus"]
        parts.append(table(f"fewest produced on the corpus (under {c['rare']['under']})", c["rare"]["ranked"],
                           [("id", lambda r: r["id"]), ("token", lambda r: r["token"]), ("times", lambda r: r["count"])],
                           c["rare"]["count"]))
        parts.append(table("only inside a longer token", c["only_inside"]["ranked"],
                           [("id", lambda r: r["id"]), ("token", lambda r: r["token"]),
                            ("inside", lambda r: r["inside"]), ("times", lambda r: r["count"])],
                           c["only_inside"]["count"]))
        rows = [{"file": f, **s} for f, s in c["per_file"].items()]
        parts.append(table("per file", rows, [("file", lambda r: r["file"]), ("tokens", lambda r: r["tokens"]),
                                              ("tokens/byte", lambda r: f"{r['tokens_per_byte']:.3f}"),
                                              ("token tax", lambda r: r["token_tax"] if r["token_tax"] is None
                                               else f"{r['token_tax']:.2f}x")]))
    tok = [("id", lambda r: r["id"]), ("token", lambda r: r["token"])]
    parts.append(table("not valid UTF-8 alone", a["not_utf8"]["tokens"], tok))
    parts.append(table("whitespace only", a["whitespace"]["tokens"], tok))
    parts.append(table("holding control or invisible characters", a["hidden_characters"]["tokens"], tok))
    parts.append(table("near-duplicates (same after NFKC)", a["near_duplicates"]["groups"],
                       [("NFKC", lambda g: g["nfkc"]),
                        ("tokens", lambda g: "  ".join(f"{r['token']} ({r['id']})" for r in g["tokens"]))]))
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>audit of {e(a['tokenizer'])}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
            + "\n".join(parts) + "\n</body>\n</html>\n")


# --------------------------------------------------------------------------- the command
def add_command(sub, kit) -> None:
    """``fastbpe audit``'s parser (``kit``: the CLI's shared helpers)."""
    a = sub.add_parser("audit", help="unreachable, never-produced, odd and near-duplicate tokens of a vocabulary")
    a.add_argument("files", nargs="*", metavar="CORPUS", help="corpus files (one per language for the token tax)")
    a.add_argument("--tokenizer", "-t", required=True, help=kit.tok_help)
    a.add_argument("--under", type=kit.positive("--under"), default=1,
                   help="list tokens produced fewer than this many times on the corpus (default 1: never)")
    a.add_argument("--top", type=kit.positive("--top"), default=20, help="rows per list in the text report")
    a.add_argument("--threads", type=kit.positive("--threads"), default=min(8, os.cpu_count() or 1),
                   help="native threads for the corpus")
    a.add_argument("--json", metavar="FILE", help="also write everything as JSON")
    a.add_argument("--html", metavar="FILE", help="also write an HTML page with the lists")
    a.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    kit.add_errors_flag(a)
    kit.add_special_flags(a)
    kit.add_corpus_flags(a)
    a.set_defaults(func=lambda args: run(args, kit))


def run(args, kit) -> int:
    from .io.atomic import atomic_write_text

    enc = kit.load_tokenizer(args.tokenizer)
    if is_wordpiece(enc):
        raise ValueError(f"{args.tokenizer}: audit handles byte-level BPE tokenizers; this one is WordPiece")
    rule = kit.special_rule(args, [enc])
    bar = None
    if not args.quiet:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(enc.mergeable_ranks), unit="token", desc="audit", file=sys.stderr, leave=False)
    try:
        with kit.special_guard():
            result = audit(enc, [str(f) for f in args.files], under=args.under, top=max(args.top, HELD),
                           num_threads=args.threads, errors=args.errors, progress=bar,
                           document_rule={"docs": args.docs, "field": args.field, "column": args.column},
                           **rule.kwargs())
    finally:
        if bar is not None:
            bar.close()
    result["tokenizer"] = kit.tokenizer_name(args.tokenizer, enc)
    print(kit.safe(format_report(result, args.top)))
    if args.json:
        atomic_write_text(args.json, json.dumps(result, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {kit.safe(args.json)}", file=sys.stderr)
    if args.html:
        atomic_write_text(args.html, render_html(result))
        print(f"wrote {kit.safe(args.html)}", file=sys.stderr)
    return 0
