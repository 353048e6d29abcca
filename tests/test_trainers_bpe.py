"""fastbpe.train_bpe: inputs, options, results usable everywhere, bad input."""
import gzip
import warnings

import pytest

import fastbpe
from fastbpe.reference import bpe as ref

DOCS = [
    "The quick brown fox jumps over the lazy dog.\n",
    "def tokenize(text):\n    return [t for t in text.split()]\n",
    "Türkçe: İstanbul'da çok güzel bir gün geçirdik.\n",
    "中文：我们今天在北京度过了美好的一天。\n",
    "aaaa aaaa aaaa\t\t\t\t    \n",
] * 4


def test_course_example():
    enc = fastbpe.train_bpe(documents=["aaabdaaabac"], vocab_size=259, pattern=r"[\s\S]+", progress=False)
    assert enc.encode_ordinary("aaabdaaabac") == [258, 100, 258, 97, 99]


def test_equals_reference_and_round_trips():
    enc = fastbpe.train_bpe(documents=DOCS, vocab_size=330, pattern="gpt2", special_tokens=["<|endoftext|>"], progress=False)
    ranks, specials = ref.train(DOCS, 330, pattern=fastbpe.GPT2, special_tokens=["<|endoftext|>"])
    assert enc.mergeable_ranks == ranks and enc.special_tokens == specials
    assert enc.n_vocab == 330
    for doc in DOCS:
        assert enc.decode(enc.encode(doc)) == doc


def test_tiktoken_gives_identical_ids_on_our_encoding():
    tiktoken = pytest.importorskip("tiktoken")
    enc = fastbpe.train_bpe(documents=DOCS, vocab_size=350, pattern="o200k", special_tokens=["<|endoftext|>"], progress=False)
    tk = tiktoken.Encoding("ours", pat_str=enc.pat_str, mergeable_ranks=enc.mergeable_ranks,
                           special_tokens=enc.special_tokens)
    for doc in DOCS + ["unseen text, 12345 çok İyi 你好 🙂<|endoftext|>"]:
        assert enc.encode(doc, allowed_special="all") == tk.encode(doc, allowed_special="all")


def test_file_many_files_gzip_and_iterator_agree(tmp_path):
    one = tmp_path / "all.txt"
    one.write_text("".join(DOCS), encoding="utf-8")
    parts = []
    for i in range(0, len(DOCS), 7):
        p = tmp_path / f"part{i}.txt.gz"
        with gzip.open(p, "wt", encoding="utf-8") as fh:
            fh.write("".join(DOCS[i:i + 7]))
        parts.append(p)
    lines = "".join(DOCS).split("\n")
    line_docs = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    results = [
        fastbpe.train_bpe(one, 320, progress=False).mergeable_ranks,
        fastbpe.train_bpe(str(one), 320, progress=False).mergeable_ranks,
        fastbpe.train_bpe(parts, 320, progress=False).mergeable_ranks,
        fastbpe.train_bpe(documents=iter(line_docs), vocab_size=320, progress=False).mergeable_ranks,
        fastbpe.train_bpe(documents=line_docs, vocab_size=320, num_threads=2, progress=False).mergeable_ranks,
    ]
    assert all(r == results[0] for r in results)


def test_special_tokens_are_never_learned_and_get_last_ids():
    docs = ["hello<|endoftext|>world<|endoftext|>"] * 10
    with pytest.warns(RuntimeWarning, match="stopped early"):
        enc = fastbpe.train_bpe(documents=docs, vocab_size=300, special_tokens=["<|endoftext|>", "<|pad|>"], progress=False)
    assert enc.special_tokens == {"<|endoftext|>": enc.n_vocab - 2, "<|pad|>": enc.n_vocab - 1}
    assert not any(b"<|" in tok or b"|>" in tok for tok in enc.mergeable_ranks)


def test_vocab_too_large_stops_early_with_warning():
    with pytest.warns(RuntimeWarning, match="stopped early"):
        enc = fastbpe.train_bpe(documents=["abcabc"], vocab_size=5000, special_tokens=["<|endoftext|>"], progress=False)
    assert enc.n_vocab < 5000
    assert enc.special_tokens == {"<|endoftext|>": enc.n_vocab - 1}
    assert enc.decode(enc.encode("abcabc")) == "abcabc"


def test_min_frequency_and_max_token_length():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        enc = fastbpe.train_bpe(documents=DOCS, vocab_size=400, min_frequency=8, max_token_length=3, progress=False)
    assert max(len(t) for t in enc.mergeable_ranks) <= 3


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"vocab_size": 100}, ValueError, "at least 256"),
        ({"vocab_size": 256, "special_tokens": ["<s>"]}, ValueError, "at least 256"),
        ({"vocab_size": "300"}, TypeError, "vocab_size"),
        ({"vocab_size": 300, "special_tokens": "<s>"}, TypeError, "special_tokens"),
        ({"vocab_size": 300, "special_tokens": ["<s>", "<s>"]}, ValueError, "duplicates"),
        ({"vocab_size": 300, "min_frequency": -1}, ValueError, "min_frequency"),
        ({"vocab_size": 300, "max_token_length": 0}, ValueError, "max_token_length"),
        ({"vocab_size": 300, "num_threads": 0}, ValueError, "num_threads"),
        ({"vocab_size": 300, "pattern": "("}, ValueError, "invalid split pattern"),
    ],
)
def test_bad_options(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        fastbpe.train_bpe(documents=["some text"], progress=False, **kwargs)


def test_bad_inputs(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        fastbpe.train_bpe(tmp_path / "missing.txt", 300, progress=False)
    with pytest.raises(ValueError, match="empty"):
        fastbpe.train_bpe(documents=[], vocab_size=300, progress=False)
    with pytest.raises(ValueError, match="empty"):
        fastbpe.train_bpe(documents=["", ""], vocab_size=300, progress=False)
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"good line\nbad: caf\xe9\n")
    with pytest.raises(ValueError, match=r"latin1.txt: not valid UTF-8 at byte offset 18"):
        fastbpe.train_bpe(bad, 300, progress=False)
    enc = fastbpe.train_bpe(bad, 260, errors="replace", progress=False)
    assert enc.n_vocab == 260
    with pytest.raises(TypeError, match="item 1"):
        fastbpe.train_bpe(documents=["ok", 3], vocab_size=300, progress=False)
    with pytest.raises(TypeError):
        fastbpe.train_bpe(b"bytes", 300, progress=False)
