"""Training inputs: documents are lines, ranges tile a file, errors name file and offset."""
import gzip
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe import _data
from fastbpe.reference.patterns import CL100K
from fastbpe.train import count_documents, count_file_range


@settings(max_examples=150)
@given(st.lists(st.text(alphabet="ab \n\r\x0c\u2028é中", max_size=30), max_size=8), st.integers(1, 9))
def test_ranges_tile_the_file_into_its_lines(tmp_path_factory, docs, n_parts):
    text = "".join(docs)
    path = tmp_path_factory.mktemp("d") / "f.txt"
    path.write_bytes(text.encode("utf-8"))
    ranges = _data.split_ranges(path, n_parts)
    assert ranges[0][0] == 0 and ranges[-1][1] == len(text.encode())
    lines = [line for s, e in ranges for line in _data.iter_range_lines(path, s, e)]
    assert lines == _data.split_lines(text) == list(_data.iter_documents(path))
    counts = Counter()
    for s, e in ranges:
        counts.update(count_file_range(path, s, e, CL100K, []))
    assert counts == count_documents(lines, CL100K, [])


def test_lines_split_on_newline_only():
    assert _data.split_lines("a\rb\x0cc\u2028d\ne") == ["a\rb\x0cc\u2028d\n", "e"]


def test_gzip_is_one_range(tmp_path):
    path = tmp_path / "f.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("x\ny\n" * 100)
    assert _data.split_ranges(path, 4) == [(0, path.stat().st_size)]
    assert list(_data.iter_range_lines(path, 0, path.stat().st_size))[:2] == ["x\n", "y\n"]


def test_bad_utf8_names_file_and_offset(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok\nok\n\xff\n")
    with pytest.raises(ValueError, match=r"bad.txt: not valid UTF-8 at byte offset 6"):
        list(_data.iter_documents(path))
    with pytest.raises(ValueError, match=r"byte offset 6"):
        list(_data.iter_range_lines(path, 0, 9))
    assert list(_data.iter_documents(path, errors="replace"))[-1] == "\ufffd\n"
