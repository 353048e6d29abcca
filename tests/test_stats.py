"""fastbpe.stats: definitions on small texts, tables, token tax and plots."""
import doctest
import math

import pytest

from fastbpe import stats
from fastbpe.bpe.encoding import get_toy_encoding


def test_docstring_examples():
    result = doctest.testmod(stats)
    assert result.attempted > 0 and result.failed == 0


def test_definitions():
    enc = get_toy_encoding()
    with pytest.raises(ValueError, match="disallowed special token '<\\|eot\\|>'"):  # the library's rule
        stats.text_stats(enc, "hi hi <|eot|>")
    assert stats.text_stats(enc, "hi hi <|eot|>", allowed_special="all").tokens == len(enc.encode("hi hi ")) + 1
    s = stats.text_stats(enc, "hi hi <|eot|>", disallowed_special=())  # special-token text as text
    assert s.tokens == len(enc.encode_ordinary("hi hi <|eot|>"))
    assert s.words == 3 and s.bytes == 13 and s.chars == 13
    assert s.bytes_per_token == pytest.approx(13 / s.tokens)
    assert s.fertility == pytest.approx(s.tokens / 3)
    assert s.unk_rate is None  # byte-level BPE has no unknown token
    empty = stats.text_stats(enc, "")
    assert math.isnan(empty.bytes_per_token) and math.isnan(empty.fertility)


def test_file_stats_tax_and_table(tmp_path):
    en, tr = tmp_path / "en.txt", tmp_path / "tr.txt"
    en.write_text("hi hi hi\n", encoding="utf-8")
    tr.write_text("çok çok çok\n", encoding="utf-8")
    toks = {"toy": get_toy_encoding(), "toy2": get_toy_encoding()}
    table = stats.file_stats(toks, [str(en), str(tr)])
    assert table[str(en)]["toy"].tokens == 6
    assert table[str(tr)]["toy"].tokens == len("çok çok çok\n".encode())
    tax = stats.token_tax(table, [str(en), str(tr)])
    assert tax[str(en)]["toy"] == 1.0
    assert tax[str(tr)]["toy"] == pytest.approx(15 / 6)
    out = stats.format_stats(table, ["toy", "toy2"])
    assert "bytes/token" in out and "tokens/word" in out and "[UNK] rate" in out and "en.txt" in out
    assert "2.50x" in stats.format_tax(tax, ["toy", "toy2"], [str(en), str(tr)])


def test_invalid_utf8_names_file(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\xff")
    with pytest.raises(ValueError, match=r"bad.txt: not valid UTF-8 at byte offset 2 .*errors='replace'"):
        stats.read_text(bad)
    assert stats.read_text(bad, errors="replace") == "ok\ufffd"


def test_gzip_files_and_special_text_name_the_file(tmp_path):
    import gzip

    gz = tmp_path / "a.txt.gz"
    gz.write_bytes(gzip.compress(b"hi <|eot|>"))
    assert stats.read_text(gz) == "hi <|eot|>"
    with pytest.raises(ValueError, match=r"a.txt.gz: byte 0.*special-token text '<\|eot\|>'"):
        stats.file_stats({"toy": get_toy_encoding()}, [str(gz)])
    table = stats.file_stats({"toy": get_toy_encoding()}, [str(gz)], allowed_special={"<|eot|>"})
    assert table[str(gz)]["toy"].tokens == len(get_toy_encoding().encode("hi ")) + 1


def test_wordpiece_unk_rate():
    wordpiece = pytest.importorskip("fastbpe.wordpiece")
    wp = wordpiece.WordPiece({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "un": 3, "##fair": 4})
    s = stats.text_stats(wp, "unfair xyz unfair")
    assert s.tokens == 5 and s.unknown == 1 and s.unk_rate == pytest.approx(0.2)


def test_plots(tmp_path):
    pytest.importorskip("matplotlib")
    en, tr = tmp_path / "en.txt", tmp_path / "tr.txt"
    en.write_text("hi hi\n", encoding="utf-8")
    tr.write_text("çok\n", encoding="utf-8")
    toks = {"toy": get_toy_encoding()}
    files = [str(en), str(tr)]
    table = stats.file_stats(toks, files)
    written = stats.save_plots(table, ["toy"], tmp_path / "plots", tax=stats.token_tax(table, files), tax_files=files)
    assert {p.name for p in written} == {"bytes_per_token.png", "fertility.png", "token_tax.png"}
    for p in written:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
