"""``WordPiece``: BERT-style tokenizer with the same outputs as HF ``tokenizers``.

The rules (normalisation, pre-tokenisation, greedy longest match, training) are written down
in ``fastbpe.reference.wordpiece``; the native core ``fastbpe._wordpiece`` implements them
(linear-time LinMaxMatch, batch encoding on threads without the GIL). This class validates
inputs, owns the vocabulary and the options, and loads/saves ``vocab.txt`` and
``tokenizer.json``.

>>> wp = WordPiece({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "un": 3, "##fair": 4})
>>> wp.tokenize("Unfair")
['un', '##fair']
>>> wp.encode("unfair")
[1, 3, 4, 2]
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from . import _wordpiece as _native
from .reference import wordpiece as _ref

DEFAULT_SPECIAL_TOKENS = _ref.SPECIAL_TOKENS


def _check_text(text, what: str = "text") -> str:
    if not isinstance(text, str):
        raise TypeError(f"{what} must be str, not {type(text).__name__}")
    return text


class WordPiece:
    """A WordPiece tokenizer over ``vocab`` (token -> id) with BERT's pipeline.

    ``strip_accents=None`` follows ``lowercase`` (as HF). ``special_tokens`` are recognised
    in raw text and skipped by ``decode``; by default, those of ``[PAD] [UNK] [CLS] [SEP]
    [MASK]`` that are in the vocabulary.
    """

    def __init__(
        self,
        vocab: dict[str, int],
        *,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        unk_token: str = "[UNK]",
        max_input_chars_per_word: int = 100,
        continuing_subword_prefix: str = "##",
        tokenize_chinese_chars: bool = True,
        clean_text: bool = True,
        special_tokens=None,
        turkish_lowercase: bool = False,
    ):
        if not isinstance(vocab, dict):
            raise TypeError(f"vocab must be a dict of token -> id, not {type(vocab).__name__}")
        seen: dict[int, str] = {}
        for token, idx in vocab.items():
            if not isinstance(token, str) or not isinstance(idx, int) or isinstance(idx, bool):
                raise TypeError(f"vocab must map str to int; got {token!r}: {idx!r}")
            if idx < 0 or idx >= 2**31:
                raise ValueError(f"vocab id {idx} of {token!r} is out of range (0 <= id < 2**31)")
            if idx in seen:
                raise ValueError(f"vocab id {idx} is used by both {seen[idx]!r} and {token!r}")
            seen[idx] = token
        if not isinstance(unk_token, str) or unk_token not in vocab:
            raise ValueError(f"unk token {unk_token!r} is not in the vocabulary")
        if not isinstance(max_input_chars_per_word, int) or max_input_chars_per_word < 1:
            raise ValueError(f"max_input_chars_per_word must be a positive int, not {max_input_chars_per_word!r}")
        if not isinstance(continuing_subword_prefix, str):
            raise TypeError("continuing_subword_prefix must be str")
        if strip_accents is not None and not isinstance(strip_accents, bool):
            raise TypeError("strip_accents must be True, False or None")
        if special_tokens is None:
            special_tokens = [t for t in DEFAULT_SPECIAL_TOKENS if t in vocab]
        special_tokens = tuple(special_tokens)
        for t in special_tokens:
            if t not in vocab:
                raise ValueError(f"special token {t!r} is not in the vocabulary")
        self._vocab = dict(vocab)
        self._id_to_token = seen
        self._opts = _ref.BertOptions(
            lowercase=bool(lowercase),
            strip_accents=strip_accents,
            clean_text=bool(clean_text),
            tokenize_chinese_chars=bool(tokenize_chinese_chars),
            unk_token=unk_token,
            max_input_chars_per_word=max_input_chars_per_word,
            continuing_subword_prefix=continuing_subword_prefix,
            special_tokens=special_tokens,
            turkish_lowercase=bool(turkish_lowercase),
        )
        strip = lowercase if strip_accents is None else strip_accents
        self._core = _native.WordPieceCore(
            self._vocab, unk_token=unk_token, prefix=continuing_subword_prefix,
            max_chars=max_input_chars_per_word, lowercase=bool(lowercase), strip_accents=bool(strip),
            clean_text=bool(clean_text), cjk=bool(tokenize_chinese_chars), turkish=bool(turkish_lowercase),
        )
        # special tokens are cut out of raw text before the pipeline (as HF's added tokens)
        self._specials_by_length = sorted(special_tokens, key=len, reverse=True)

    # -- options ---------------------------------------------------------------------
    def _options(self) -> dict:
        o = self._opts
        return dict(
            lowercase=o.lowercase, strip_accents=o.strip_accents, clean_text=o.clean_text,
            tokenize_chinese_chars=o.tokenize_chinese_chars, unk_token=o.unk_token,
            max_input_chars_per_word=o.max_input_chars_per_word,
            continuing_subword_prefix=o.prefix, special_tokens=o.special_tokens,
            turkish_lowercase=o.turkish_lowercase,
        )

    def __repr__(self) -> str:
        return f"WordPiece(vocab_size={len(self)}, lowercase={self._opts.lowercase})"

    # -- vocabulary ------------------------------------------------------------------
    @property
    def vocab(self) -> dict[str, int]:
        """A copy of the token -> id mapping."""
        return dict(self._vocab)

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    def __len__(self) -> int:
        return len(self._vocab)

    @property
    def special_tokens(self) -> tuple[str, ...]:
        return self._opts.special_tokens

    def token_to_id(self, token: str) -> int | None:
        """Id of ``token``, or None if it is not in the vocabulary (as HF)."""
        _check_text(token, "token")
        return self._vocab.get(token)

    def id_to_token(self, idx: int) -> str:
        """Token of ``idx``; KeyError naming the id if there is none."""
        try:
            return self._id_to_token[idx]
        except (KeyError, TypeError):
            raise KeyError(f"token id {idx!r} is not in the vocabulary (size {len(self)})") from None

    # -- encoding ---------------------------------------------------------------------
    def _segments(self, text: str):
        """(segment, start, is_special) pieces of raw text; specials found leftmost-longest."""
        if not any(t in text for t in self._specials_by_length):
            return [(text, 0, False)]
        out = []
        pos = 0
        for seg, is_special in _ref.split_special_tokens(text, self._specials_by_length):
            out.append((seg, pos, is_special))
            pos += len(seg)
        return out

    def _encode_raw(self, text: str, offsets: bool = False):
        """Ids (and with ``offsets``, starts and ends) of ``text`` without [CLS]/[SEP]."""
        _check_text(text)
        segments = self._segments(text)
        if len(segments) == 1 and not segments[0][2]:
            return self._core.encode(text, offsets)
        ids, starts, ends = [], [], []
        for seg, pos, is_special in segments:
            if is_special:
                ids.append(self._vocab[seg])
                starts.append(pos)
                ends.append(pos + len(seg))
            elif offsets:
                i, s, e = self._core.encode(seg, True, pos)
                ids += i
                starts += s
                ends += e
            else:
                ids += self._core.encode(seg)
        return (ids, starts, ends) if offsets else ids

    def tokenize(self, text: str) -> list[str]:
        """Token strings of ``text`` without [CLS]/[SEP]."""
        return [self._id_to_token[i] for i in self._encode_raw(text)]

    def _special_id(self, token: str) -> int:
        idx = self._vocab.get(token)
        if idx is None:
            raise ValueError(f"add_special_tokens=True needs {token!r} in the vocabulary")
        return idx

    @staticmethod
    def _budget(max_length, n_special: int):
        if max_length is None:
            return None
        if not isinstance(max_length, int) or isinstance(max_length, bool):
            raise TypeError(f"max_length must be an int or None, not {type(max_length).__name__}")
        if max_length < n_special:
            raise ValueError(f"max_length={max_length} leaves no room for the {n_special} special tokens")
        return max_length - n_special

    def encode(self, text: str, *, add_special_tokens: bool = True, max_length: int | None = None) -> list[int]:
        """Ids of ``text``; ``[CLS] ... [SEP]`` around them unless ``add_special_tokens=False``.

        ``max_length`` truncates to at most that many ids, special tokens included.
        """
        ids = self._encode_raw(text)
        budget = self._budget(max_length, 2 if add_special_tokens else 0)
        if budget is not None:
            del ids[budget:]
        if add_special_tokens:
            ids = [self._special_id("[CLS]")] + ids + [self._special_id("[SEP]")]
        return ids

    @staticmethod
    def _truncate_pair(n1: int, n2: int, budget):
        """HF's longest-first: the longer side loses tokens first; an odd leftover stays with B."""
        if budget is None or n1 + n2 <= budget:
            return n1, n2
        if n1 > n2:
            keep_b = min(n2, budget // 2)
            return budget - keep_b, keep_b
        keep_a = min(n1, budget // 2)
        return keep_a, budget - keep_a

    def encode_pair(self, a: str, b: str, *, add_special_tokens: bool = True, return_type_ids: bool = False,
                    max_length: int | None = None):
        """Ids of ``[CLS] a [SEP] b [SEP]``; with ``return_type_ids=True``, (ids, type_ids)."""
        enc = self.encode_plus(a, b, add_special_tokens=add_special_tokens, max_length=max_length)
        if return_type_ids:
            return enc["input_ids"], enc["token_type_ids"]
        return enc["input_ids"]

    def encode_plus(self, text: str, pair: str | None = None, *, add_special_tokens: bool = True,
                    max_length: int | None = None, padding: bool | str = False) -> dict:
        """Everything HF's ``Encoding`` gives, as lists: ``input_ids``, ``token_type_ids``,
        ``attention_mask``, ``offsets`` ((start, end) character offsets into the text each
        token came from; (0, 0) for [CLS]/[SEP]/[PAD]) and ``tokens``.

        ``max_length`` truncates (longest-first for pairs, as HF); ``padding=True`` or
        ``"max_length"`` pads with ``[PAD]`` up to ``max_length``.
        """
        _check_text(text, "text")
        if pair is not None:
            _check_text(pair, "pair")
        ids_a, sa, ea = self._encode_raw(text, offsets=True)
        n_special = (3 if pair is not None else 2) if add_special_tokens else 0
        budget = self._budget(max_length, n_special)
        if pair is None:
            keep_a = len(ids_a) if budget is None else min(len(ids_a), budget)
            ids_b = sb = eb = []
            keep_b = 0
        else:
            ids_b, sb, eb = self._encode_raw(pair, offsets=True)
            keep_a, keep_b = self._truncate_pair(len(ids_a), len(ids_b), budget)
        ids = list(ids_a[:keep_a])
        offsets = list(zip(sa[:keep_a], ea[:keep_a]))
        if add_special_tokens:
            cls, sep = self._special_id("[CLS]"), self._special_id("[SEP]")
            ids = [cls] + ids + [sep]
            offsets = [(0, 0)] + offsets + [(0, 0)]
        types = [0] * len(ids)
        if pair is not None:
            ids += ids_b[:keep_b]
            offsets += list(zip(sb[:keep_b], eb[:keep_b]))
            if add_special_tokens:
                ids.append(sep)
                offsets.append((0, 0))
            types += [1] * (len(ids) - len(types))
        mask = [1] * len(ids)
        if padding:
            if max_length is None:
                raise ValueError("padding needs max_length")
            n_pad = max_length - len(ids)
            pad = self._special_id("[PAD]")
            ids += [pad] * n_pad
            types += [0] * n_pad
            mask += [0] * n_pad
            offsets += [(0, 0)] * n_pad
        return {
            "input_ids": ids,
            "token_type_ids": types,
            "attention_mask": mask,
            "offsets": offsets,
            "tokens": [self._id_to_token[i] for i in ids],
        }

    def encode_batch(self, texts, *, add_special_tokens: bool = True, max_length: int | None = None,
                     num_threads: int | None = None) -> list[list[int]]:
        """``encode`` for many texts, on ``num_threads`` native threads (default: all CPUs)."""
        ids, _, _, splits = self._batch(texts, num_threads, offsets=False)
        budget = self._budget(max_length, 2 if add_special_tokens else 0)
        flat = ids.tolist()
        out = []
        for t in range(len(splits) - 1):
            row = flat[splits[t]:splits[t + 1]]
            if budget is not None:
                del row[budget:]
            if add_special_tokens:
                row = [self._special_id("[CLS]")] + row + [self._special_id("[SEP]")]
            out.append(row)
        return out

    def encode_batch_arrays(self, texts, *, add_special_tokens: bool = True, max_length: int | None = None,
                            padding: bool | str = True, num_threads: int | None = None) -> dict:
        """Encode many texts into numpy arrays, padded to one length.

        Returns ``input_ids`` (int32, [batch, length]), ``attention_mask`` (int8),
        ``offsets`` (int64, [batch, length, 2]; (0, 0) for special and padding positions)
        and ``lengths`` (int64, tokens per row before padding). ``length`` is ``max_length``
        with ``padding="max_length"``, else the longest row (truncated to ``max_length``).
        """
        ids, starts, ends, splits = self._batch(texts, num_threads, offsets=True)
        budget = self._budget(max_length, 2 if add_special_tokens else 0)
        counts = np.diff(splits)
        if budget is not None:
            counts = np.minimum(counts, budget)
        n_extra = 2 if add_special_tokens else 0
        lengths = counts + n_extra
        if padding == "max_length":
            if max_length is None:
                raise ValueError("padding='max_length' needs max_length")
            width = max_length
        else:
            width = int(lengths.max()) if len(lengths) else 0
        batch = len(counts)
        pad = self._special_id("[PAD]") if (lengths < width).any() else 0
        out_ids = np.full((batch, width), pad, dtype=np.int32)
        mask = np.zeros((batch, width), dtype=np.int8)
        offs = np.zeros((batch, width, 2), dtype=np.int64)
        first = 1 if add_special_tokens else 0
        cls = self._special_id("[CLS]") if add_special_tokens else None
        sep = self._special_id("[SEP]") if add_special_tokens else None
        for t in range(batch):
            s0, n = int(splits[t]), int(counts[t])
            out_ids[t, first:first + n] = ids[s0:s0 + n]
            offs[t, first:first + n, 0] = starts[s0:s0 + n]
            offs[t, first:first + n, 1] = ends[s0:s0 + n]
            if add_special_tokens:
                out_ids[t, 0] = cls
                out_ids[t, n + 1] = sep
            mask[t, : n + n_extra] = 1
        return {"input_ids": out_ids, "attention_mask": mask, "offsets": offs, "lengths": lengths.astype(np.int64)}

    def _batch(self, texts, num_threads, offsets: bool):
        """Native batch encode of raw texts; texts with special tokens in them go one by one."""
        if isinstance(texts, str):
            raise TypeError("encode_batch takes a list of str, not one str")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"texts[{i}] is {type(t).__name__}, expected str")
        if num_threads is None:
            num_threads = os.cpu_count() or 1
        if not isinstance(num_threads, int) or num_threads < 1:
            raise ValueError(f"num_threads must be a positive int, not {num_threads!r}")
        plain = [not any(s in t for s in self._specials_by_length) for t in texts]
        if all(plain):
            return self._core.encode_batch(texts, num_threads, offsets)
        # rare: some texts contain special tokens; encode those through the splitting path
        rows = []
        for t, is_plain in zip(texts, plain):
            if offsets:
                rows.append(self._encode_raw(t, offsets=True))
            else:
                rows.append((self._encode_raw(t), [], []))
        splits = np.zeros(len(rows) + 1, dtype=np.int64)
        splits[1:] = np.cumsum([len(r[0]) for r in rows])
        ids = np.array([i for r in rows for i in r[0]], dtype=np.int32)
        starts = np.array([i for r in rows for i in r[1]], dtype=np.int64)
        ends = np.array([i for r in rows for i in r[2]], dtype=np.int64)
        return ids, starts, ends, splits

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        """Text of ``ids`` joined as HF's WordPiece decoder does (``##`` glued, cleanup on)."""
        tokens = [self.id_to_token(i) for i in ids]
        if skip_special_tokens:
            specials = set(self._opts.special_tokens)
            tokens = [t for t in tokens if t not in specials]
        return _ref.decode_tokens(tokens, self._opts.prefix)

    # -- files -----------------------------------------------------------------------
    @classmethod
    def from_file(cls, path: str | os.PathLike, **options) -> "WordPiece":
        """Load a BERT ``vocab.txt`` or an HF ``tokenizer.json`` (detected from the content).

        For vocab.txt, ``options`` are the constructor's keyword arguments (defaults are
        BERT uncased); for tokenizer.json they override what the file says.
        """
        from .formats.hf_wordpiece import read_hf_wordpiece
        from .formats.vocab_txt import read_vocab_txt

        path = Path(path)
        with open(path, "rb") as fh:
            head = fh.read(64).lstrip()
        if head.startswith(b"{"):
            kwargs = read_hf_wordpiece(path)
            kwargs.update(options)
            vocab = kwargs.pop("vocab")
        else:
            vocab = read_vocab_txt(path)
            kwargs = options
        try:
            return cls(vocab, **kwargs)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    def save(self, path: str | os.PathLike, format: str | None = None, *, transformers: bool = False) -> Path:
        """Save atomically as ``vocab.txt`` (``.txt``) or ``tokenizer.json`` (``.json``).

        vocab.txt holds only the tokens; tokenizer.json also keeps the options. A folder
        (or ``transformers=True``) gets tokenizer.json plus the config files
        ``transformers.AutoTokenizer.from_pretrained`` reads (``fastbpe.formats.transformers_files``).
        """
        from .formats.hf_wordpiece import write_hf_wordpiece
        from .formats.vocab_txt import write_vocab_txt

        path = Path(path)
        if transformers or (format in (None, "tokenizer.json", "json", "hf") and path.is_dir()):
            from .formats.transformers_files import TOKENIZER_JSON, transformers_folder, write_transformers_config

            if format not in (None, "tokenizer.json", "json", "hf"):
                raise ValueError(f"transformers=True saves a tokenizer.json, not format={format!r}")
            folder = transformers_folder(path)
            write_hf_wordpiece(folder / TOKENIZER_JSON, self._vocab, **self._options())
            specials = {t: self._vocab[t] for t in self.special_tokens if t in self._vocab}
            write_transformers_config(folder, specials, "wordpiece")
            return folder / TOKENIZER_JSON
        if format is None:
            suffix = path.suffix.lower()
            format = {".txt": "vocab.txt", ".json": "tokenizer.json"}.get(suffix)
            if format is None:
                raise ValueError(f"cannot tell the format of {path} from its extension; pass format='vocab.txt' or 'tokenizer.json'")
        if format in ("vocab.txt", "txt"):
            return write_vocab_txt(path, self._vocab)
        if format in ("tokenizer.json", "json", "hf"):
            return write_hf_wordpiece(path, self._vocab, **self._options())
        raise ValueError(f"unknown WordPiece format {format!r}; use 'vocab.txt' or 'tokenizer.json'")


#: Texts are handed to the native pre-tokeniser in batches of about this many characters.
_TRAIN_BATCH_CHARS = 1 << 23

#: Counts must stay below this so that count(AB)*count(A)*count(B) fits 128 bits exactly.
_MAX_TRAIN_COUNT = 1 << 42


def _count_words_native(texts, opts: "_ref.BertOptions", num_threads: int):
    """Word counts from the native BERT pre-tokeniser (same words as ``_ref.count_words``)."""
    from collections import Counter

    core = _native.WordPieceCore(
        {"[UNK]": 0}, unk_token="[UNK]", prefix="##", max_chars=100,
        lowercase=opts.lowercase,
        strip_accents=opts.lowercase if opts.strip_accents is None else opts.strip_accents,
        clean_text=opts.clean_text, cjk=opts.tokenize_chinese_chars, turkish=opts.turkish_lowercase,
        words_only=True,
    )
    counts: Counter = Counter()
    batch: list[str] = []
    size = 0

    def flush():
        if batch:
            words = _native.words_text(core, batch, num_threads)
            counts.update(words.split(" "))
            batch.clear()

    for text in texts:
        batch.append(text)
        size += len(text)
        if size >= _TRAIN_BATCH_CHARS:
            flush()
            size = 0
    flush()
    counts.pop("", None)
    return counts


def _train_native(texts, vocab_size, opts, *, min_frequency, limit_alphabet, special_tokens,
                  num_threads, progress, algorithm="likelihood", word_counts=None):
    """The reference's training rules on the native trainer; returns token -> id.
    ``word_counts`` (word -> count) skips phase 1 when it was done elsewhere (Dask)."""
    from . import _wordpiece_train

    prefix = opts.prefix
    if word_counts is None:
        word_counts = _count_words_native(texts, opts, num_threads)
    keep = _ref.choose_alphabet(word_counts, limit_alphabet)
    words = [w for w in word_counts if all(ch in keep for ch in w)]
    vocab: dict[str, int] = {}
    for tok in special_tokens:
        vocab.setdefault(tok, len(vocab))
    firsts = sorted({w[0] for w in words})
    inners = sorted({prefix + ch for w in words for ch in w[1:]})
    for unit in firsts + inners:
        vocab.setdefault(unit, len(vocab))
    total = sum(word_counts[w] * len(w) for w in words)
    if total >= _MAX_TRAIN_COUNT:
        raise ValueError(f"corpus too large for exact 128-bit scores ({total} characters >= 2**42)")
    starts = np.zeros(len(words) + 1, dtype=np.int64)
    starts[1:] = np.cumsum([len(w) for w in words])
    symbols = np.empty(int(starts[-1]), dtype=np.int32)
    pos = 0
    for w in words:
        symbols[pos] = vocab[w[0]]
        pos += 1
        for ch in w[1:]:
            symbols[pos] = vocab[prefix + ch]
            pos += 1
    freqs = np.array([word_counts[w] for w in words], dtype=np.int64)
    trainer = _wordpiece_train.Trainer()
    trainer.set_prefix_len(len(prefix))
    trainer.set_by_frequency(algorithm == "frequency")
    trainer.setup(list(vocab), starts, symbols, freqs, max(min_frequency, 1))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=max(0, vocab_size - len(vocab)), desc="merges", unit="tok")
    try:
        trainer.run(vocab, max(0, vocab_size - len(vocab)), bar)
    finally:
        if bar is not None:
            bar.close()
    return vocab


def train_wordpiece(
    data,
    vocab_size: int,
    *,
    lowercase: bool = True,
    strip_accents: bool | None = None,
    min_frequency: int = 0,
    limit_alphabet: int | None = None,
    special_tokens=DEFAULT_SPECIAL_TOKENS,
    turkish_lowercase: bool = False,
    algorithm: str = "likelihood",
    num_threads: int | None = None,
    progress: bool = False,
    client=None,
) -> WordPiece:
    """Train a likelihood WordPiece vocabulary on ``data`` (a path, list of paths, or iterable of str).

    Scores are count(AB)/(count(A)count(B)), compared exactly; see
    ``fastbpe.reference.wordpiece`` for the tie-break and every other rule. The result is
    the same vocabulary as ``fastbpe.reference.wordpiece.train`` for any ``num_threads``
    (threads only split the pre-tokenisation of the input). ``algorithm="frequency"`` merges
    the most frequent pair instead, like HF's WordPieceTrainer (BPE over ``##`` pieces).
    With a ``dask.distributed`` ``client``, word counting runs on the cluster over byte
    ranges of the input files (see ``fastbpe.distributed``).
    """
    from ._data import iter_texts

    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive int, not {vocab_size!r}")
    if not isinstance(min_frequency, int) or min_frequency < 0:
        raise ValueError(f"min_frequency must be an int >= 0, not {min_frequency!r}")
    if limit_alphabet is not None and (not isinstance(limit_alphabet, int) or limit_alphabet < 0):
        raise ValueError(f"limit_alphabet must be None or an int >= 0, not {limit_alphabet!r}")
    if num_threads is None:
        num_threads = os.cpu_count() or 1
    if not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"num_threads must be a positive int, not {num_threads!r}")
    if algorithm not in ("likelihood", "frequency"):
        raise ValueError(f"algorithm must be 'likelihood' or 'frequency', not {algorithm!r}")
    special_tokens = tuple(special_tokens)
    if "[UNK]" not in special_tokens:
        raise ValueError("special_tokens must include '[UNK]'")
    for t in special_tokens:
        _check_text(t, "special token")
    opts = _ref.BertOptions(lowercase=lowercase, strip_accents=strip_accents, special_tokens=special_tokens,
                            turkish_lowercase=turkish_lowercase)
    word_counts = None
    if client is not None:  # phase 1 on a Dask cluster
        from .distributed import count_words_distributed

        texts, word_counts = (), count_words_distributed(client, data, opts)
    else:
        texts = iter_texts(data)
        if progress:
            from tqdm.auto import tqdm

            texts = tqdm(texts, desc="reading", unit="doc")
    vocab = _train_native(
        texts, vocab_size, opts, min_frequency=min_frequency, limit_alphabet=limit_alphabet,
        special_tokens=special_tokens, num_threads=num_threads, progress=progress, algorithm=algorithm,
        word_counts=word_counts,
    )
    return WordPiece(vocab, lowercase=lowercase, strip_accents=strip_accents, special_tokens=special_tokens,
                     turkish_lowercase=turkish_lowercase)
