"""WordPiece speed, fastbpe vs HF tokenizers, side by side (pytest-benchmark).

    python -m pytest benchmarks/test_bench_wordpiece.py --benchmark-only --benchmark-group-by=group

Encoding: the full BERT pipeline (bert-base-uncased tokenizer.json from ../shared/vocab),
single thread, on ~1 MB of English prose, Python code, Turkish and Chinese; ids are checked
identical before timing. Training: likelihood WordPiece (fastbpe) vs HF WordPieceTrainer to
30,000 tokens on ~26 MB of Python standard-library source.
"""
from __future__ import annotations

import glob
import os
import random
import sys
import sysconfig
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
tokenizers = pytest.importorskip("tokenizers")

from corpus import short_lines  # noqa: E402

from fastbpe import WordPiece, train_wordpiece  # noqa: E402

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _stdlib_files():
    root = sysconfig.get_paths()["stdlib"]
    return sorted(f for f in glob.glob(os.path.join(root, "**", "*.py"), recursive=True) if "site-packages" not in f)


def _read_until(n_bytes):
    parts, size = [], 0
    for f in _stdlib_files():
        try:
            with open(f, encoding="utf-8") as fh:
                t = fh.read()
        except (UnicodeDecodeError, OSError):
            continue
        parts.append(t)
        size += len(t.encode())
        if size >= n_bytes:
            break
    return "".join(parts)


def _english(n):
    # docstrings and comments of the stdlib are English prose
    code = _read_until(4 * n)
    lines = [ln.strip().lstrip("#").strip() for ln in code.splitlines()]
    prose = " ".join(ln for ln in lines if ln and not ln.startswith(("def ", "class ", "import ", "from ", "return ")))
    return prose[:n]


def _turkish(n):
    rng = random.Random(1)
    stems = ["ev", "göz", "kitap", "oku", "yaz", "gel", "git", "çocuk", "öğretmen", "İstanbul", "ılık",
             "şehir", "ağaç", "ışık", "güzel", "büyük", "Türkiye", "üniversite", "bilgisayar", "dünya"]
    suffixes = ["ler", "lar", "de", "da", "den", "dan", "im", "ın", "miş", "yor", "ecek", "lık", "siz", "ci"]
    out, size = [], 0
    while size < n:
        w = rng.choice(stems) + "".join(rng.choice(suffixes) for _ in range(rng.randint(0, 3)))
        w += rng.choice([" ", " ", " ", ", ", ". "])
        out.append(w)
        size += len(w)
    return "".join(out)


def _chinese(n):
    rng = random.Random(2)
    common = "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过家十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公从"
    return "".join(rng.choice(common) if rng.random() > 0.08 else rng.choice("，。、") for _ in range(n))


TEXTS = {
    "english": lambda: _english(1_000_000),
    "code": lambda: _read_until(1_000_000),
    "turkish": lambda: _turkish(1_000_000),
    "chinese": lambda: _chinese(400_000),
}


@pytest.fixture(scope="module")
def bert(vocab_file):
    path = vocab_file("bert-base-uncased/tokenizer.json")   # shared folder, else tests/data
    hf = tokenizers.Tokenizer.from_file(str(path))
    hf.no_truncation()
    hf.no_padding()
    return hf, WordPiece.from_file(path, truncation=None, padding=None)   # the file pads to 128


@pytest.mark.parametrize("lang", list(TEXTS))
@pytest.mark.parametrize("impl", ["fastbpe", "hf"])
def test_encode_single_thread(benchmark, bert, lang, impl):
    hf, wp = bert
    text = TEXTS[lang]()
    expected = hf.encode(text).ids
    assert wp.encode(text) == expected
    benchmark.group = f"encode-{lang}"
    benchmark.extra_info["chars"] = len(text)
    benchmark.extra_info["tokens"] = len(expected)
    fn = wp.encode if impl == "fastbpe" else hf.encode
    benchmark.pedantic(fn, args=(text,), rounds=5, iterations=1, warmup_rounds=1)


def _chunks(text, size=500):
    return [text[i:i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize("lang", list(TEXTS))
@pytest.mark.parametrize("impl", ["fastbpe", "hf"])
def test_encode_many_short_texts(benchmark, bert, lang, impl):
    """~500-character documents encoded one call at a time (single thread, Python loop)."""
    hf, wp = bert
    docs = _chunks(TEXTS[lang]())[:1000]
    assert [wp.encode(d) for d in docs] == [e.ids for e in hf.encode_batch(docs)]
    benchmark.group = f"encode-500char-docs-{lang}"
    fn = wp.encode if impl == "fastbpe" else hf.encode

    def run():
        for d in docs:
            fn(d)

    benchmark.pedantic(run, rounds=5, iterations=1, warmup_rounds=1)


@pytest.mark.parametrize("impl", ["fastbpe", "hf"])
def test_encode_short_lines(benchmark, bert, impl):
    """Single lines of 40-80 characters, one call each (how BERT users encode sentences);
    benchmarks/wordpiece_ratios.py prints the ratios, with and without the file's padding."""
    hf, wp = bert
    lines = short_lines(TEXTS["english"](), 2000)
    assert [wp.encode(t) for t in lines] == [e.ids for e in hf.encode_batch(lines)]
    benchmark.group = "encode-short-lines"
    fn = wp.encode if impl == "fastbpe" else (lambda t: hf.encode(t).ids)

    def run():
        for t in lines:
            fn(t)

    benchmark.pedantic(run, rounds=5, iterations=1, warmup_rounds=1)


@pytest.mark.parametrize("impl", ["fastbpe", "hf"])
def test_encode_batch_all_threads(benchmark, bert, impl):
    """Batch API on every CPU: fastbpe pthreads without the GIL vs HF's rayon pool."""
    hf, wp = bert
    docs = _chunks(TEXTS["english"]())
    assert wp.encode_batch(docs) == [e.ids for e in hf.encode_batch(docs)]
    benchmark.group = "encode-batch-english"
    fn = wp.encode_batch if impl == "fastbpe" else hf.encode_batch
    benchmark.pedantic(fn, args=(docs,), rounds=5, iterations=1, warmup_rounds=1)


@pytest.fixture(scope="module")
def corpus_25mb(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "stdlib.txt"
    path.write_text(_read_until(26_000_000), encoding="utf-8")
    return path


@pytest.mark.parametrize("impl", ["fastbpe", "hf"])
def test_train_30k(benchmark, corpus_25mb, impl):
    benchmark.group = "train-wordpiece-30k"
    benchmark.extra_info["corpus_bytes"] = os.path.getsize(corpus_25mb)

    def fastbpe_train():
        return len(train_wordpiece(corpus_25mb, 30000))  # all CPUs for reading, like HF

    def hf_train():
        tok = tokenizers.Tokenizer(tokenizers.models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = tokenizers.normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
        trainer = tokenizers.trainers.WordPieceTrainer(vocab_size=30000, special_tokens=SPECIALS, show_progress=False)
        tok.train([str(corpus_25mb)], trainer)
        return tok.get_vocab_size()

    size = benchmark.pedantic(fastbpe_train if impl == "fastbpe" else hf_train, rounds=1, iterations=1)
    assert size == 30000
