"""JSON Lines: the native scanner + json.loads slow path against the json.loads reference.

Every check compares ``fastbpe.io.jsonl.documents_of_block`` with
``fastbpe.reference.jsonl.documents``: the same documents, or the same error message.
The scanner itself is also checked to read the common lines (``json.dumps`` output) on
its own and to leave the unusual ones to json.loads.
"""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe._jsonl import extract_field
from fastbpe.io.jsonl import documents_of_block
from fastbpe.reference import jsonl as ref


def outcome(fn, *args):
    """A function's documents, or ('error', type, message)."""
    try:
        return fn(*args)
    except (ValueError, TypeError) as exc:
        return ("error", type(exc).__name__, str(exc))


def native(block, field="text", source="t.jsonl", first_line=0, errors="strict"):
    data, ends = documents_of_block(block, field, source, first_line, errors)
    assert ends.dtype == np.int64
    assert (len(ends) == 0 and data == b"") or ends[-1] == len(data)
    starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
    docs = [data[a:b].decode("utf-8") for a, b in zip(starts.tolist(), ends.tolist())]
    assert all(docs), "documents are non-empty"
    return docs


def check(block, field="text", first_line=0, errors="strict"):
    """The native result == the reference's; returns it."""
    want = outcome(ref.documents, block, field, "t.jsonl", first_line, errors)
    got = outcome(native, block, field, "t.jsonl", first_line, errors)
    assert got == want, block[:300]
    return got


def kernel_bad(line: bytes, field="text") -> bool:
    """Whether the scanner leaves ``line`` to json.loads."""
    return bool(extract_field(line, field)[3])


# ---------------------------------------------------------------------------------------
# golden cases
# ---------------------------------------------------------------------------------------

GOLDEN_DOCS = [
    (b'{"text": "hello"}', ["hello"]),
    (b'{"text":"a\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti"}', ['a"b\\c/d\x08e\x0cf\ng\rh\ti']),
    (b'{"text": "\\u0041\\u00e9\\u20ac\\uFFFF\\u0000"}', ["A\u00e9\u20ac\uffff\x00"]),
    (b'{"text": "\\ud83d\\ude42 \\uD83D\\uDE42"}', ["\U0001F642 \U0001F642"]),
    (b'{"text": "\xc3\xa9\xe2\x82\xac\xf0\x9f\x99\x82\xef\xbf\xbf\x7f"}', ["\u00e9\u20ac\U0001F642\uffff\x7f"]),
    (b'{"id": 1, "text": "x"}', ["x"]),
    (b'{"text": "first", "text": "last"}', ["last"]),
    (b'{"text": 1, "text": "last"}', ["last"]),
    (b'{"meta": {"text": "nested"}, "text": "top"}', ["top"]),
    (b'{"meta": [{"text": 1}, [], {}, [[["text"]]]], "text": "top"}', ["top"]),
    (b'{"te\\u0078t": "escaped key"}', ["escaped key"]),
    (b'{"text\\u0000": "other key", "text": "t"}', ["t"]),
    (b'  \t{ "text" : "spaced" , "a" : [ 1 , 2.5e-3 , -0 , true , false , null ] }  \r', ["spaced"]),
    (b'{"text": "crlf"}\r\n{"text": "two"}\r\n', ["crlf", "two"]),
    (b'\n   \n\t\r\n{"text": "after blanks"}\n\n', ["after blanks"]),
    (b'{"text": ""}\n{"text": "kept"}', ["kept"]),
    (b'{"a": -1.5E+10, "b": 0.0, "c": 1e5, "d": 123456789012345678901234567890, "text": "n"}', ["n"]),
    (b'{"a": NaN, "b": Infinity, "c": -Infinity, "text": "python json"}', ["python json"]),
    (b'{"text": "\\ud800"}', ["\ufffd"]),
    (b'{"text": "a\\udc00b\\ud800\\ud800\\udc00"}', ["a\ufffdb\ufffd\U00010000"]),
    (b'{"a": "\\ud800", "text": "lone surrogate elsewhere"}', ["lone surrogate elsewhere"]),
    (b'{"text": "\xe2\x80\xa8 \xc2\x85 line separators are text"}', ["\u2028 \x85 line separators are text"]),
    (b'\xef\xbb\xbf{"text": "bom at the start"}\n', ["bom at the start"]),
    (b'', []),
    (b'\n', []),
    (b'{"text": "no newline at the end"}', ["no newline at the end"]),
]


@pytest.mark.parametrize("block, docs", GOLDEN_DOCS)
def test_golden_documents(block, docs):
    assert check(block) == docs


GOLDEN_ERRORS = [
    (b'{"id": 1}', "line 1: no field 'text'"),
    (b'{}', "line 1: no field 'text'"),
    (b'{"meta": {"text": "nested only"}}', "no field 'text'"),
    (b'{"text": 5}', "field 'text' is int, not a string"),
    (b'{"text": null}', "field 'text' is NoneType, not a string"),
    (b'{"text": ["a"]}', "field 'text' is list, not a string"),
    (b'{"text": "a", "text": {}}', "field 'text' is dict, not a string"),
    (b'[1, 2]', "not a JSON object but list"),
    (b'"text"', "not a JSON object but str"),
    (b'{"text": "a",}', "not valid JSON (Expecting property name enclosed in double quotes: column 14)"),
    (b'{"text": "a"} x', "not valid JSON (Extra data: column 15)"),
    (b'{"text": "a"}{}', "not valid JSON (Extra data"),
    (b'{"text": "a\tb"}', "not valid JSON (Invalid control character"),
    (b'{"text": "\\x"}', "not valid JSON (Invalid \\escape"),
    (b'{"text": "\\u12g4"}', "not valid JSON (Invalid \\uXXXX escape"),
    (b'{"text": "open', "not valid JSON (Unterminated string starting at: column 10)"),
    (b'{"a": 01, "text": "x"}', "not valid JSON"),
    (b'{"a": 1., "text": "x"}', "not valid JSON"),
    (b'{"a": .5, "text": "x"}', "not valid JSON"),
    (b'{"a": +1, "text": "x"}', "not valid JSON"),
    (b'{"a": truex, "text": "x"}', "not valid JSON"),
    (b'{"a": [1,], "text": "x"}', "not valid JSON"),
    (b'{"a": [1}, "text": "x"}', "not valid JSON"),
    (b"{'text': 'x'}", "not valid JSON"),
    (b'{"text": "x"', "not valid JSON"),
    (b'\x0c{"text": "x"}', "not valid JSON"),  # form feed: whitespace to str.strip, not to JSON
    (b'{"text": "ok"}\n\xef\xbb\xbf{"text": "bom"}', "line 2: not valid JSON (Unexpected UTF-8 BOM"),
    (b'{"text": "a\xffb"}', "line 1: not valid UTF-8 at column 12 (invalid start byte)"),
    (b'{"text": "\xed\xa0\x80"}', "not valid UTF-8 at column 11"),  # an encoded surrogate
    (b'{"text": "\xc0\xaf"}', "not valid UTF-8"),  # overlong
    (b'{"text": "\xf4\x90\x80\x80"}', "not valid UTF-8"),  # past U+10FFFF
    (b'{"text": "\xe2\x82"}', "not valid UTF-8"),  # truncated
    (b'{"text": "\xe4\xb8A"}', "not valid UTF-8 at column 11 (invalid continuation byte)"),
    (b'{"text": "\xf0\x9f\x99A"}', "not valid UTF-8 at column 11 (invalid continuation byte)"),
    (b'{"text": "\xf0\x9f\x99\xc3\xa9"}', "not valid UTF-8 at column 11"),
]

# The same defects after 16+ plain bytes, where the scanner reads whole blocks.
PAD = b"0123456789abcdefghij"
GOLDEN_ERRORS += [(block.replace(b'"text": "', b'"text": "' + PAD, 1), message.replace("column 1", "column 3"))
                  for block, message in GOLDEN_ERRORS if b'"text": "' in block and "UTF-8" in message]
GOLDEN_ERRORS += [(b'{"text": "' + PAD + b'\x01"}', "Invalid control character"),
                  (b'{"text": "' + PAD + PAD + b'\x7f\x1f"}', "Invalid control character"),
                  (b'{"' + PAD + b'\xff": 1, "text": "x"}', "not valid UTF-8")]


@pytest.mark.parametrize("block, message", GOLDEN_ERRORS)
def test_golden_errors(block, message):
    got = check(block)
    assert got[0] == "error" and message in got[2], got
    after = check(b'{"text": "before"}\n\n' + block)  # the same error, two lines later
    assert after[0] == "error" and after[2] != got[2] and ", line " in after[2]


def test_error_names_source_and_absolute_line():
    block = b'{"text": "a"}\n\n{"text": "b"}\n{"text": 1}\n'
    with pytest.raises(ValueError, match=r"^t\.jsonl, line 104: field 'text' is int, not a string$"):
        native(block, first_line=100)
    assert check(block, first_line=100)[0] == "error"


def test_first_error_in_line_order_wins():
    block = b'{"text": "a"}\n{"id": 1}\n{"text": 2}\n'
    assert check(block)[2] == "t.jsonl, line 2: no field 'text'"


def test_errors_replace():
    block = b'{"text": "a\xffb\xe2\x82"}\n{"text": "ok"}'
    assert check(block, errors="replace") == ["a\ufffdb\ufffd", "ok"]
    # outside a string, a replaced byte is still not JSON
    assert "not valid JSON" in check(b'{"text": "a"}\xff', errors="replace")[2]


def test_bom_only_at_the_start_of_the_source():
    block = b'\xef\xbb\xbf{"text": "x"}\n'
    assert check(block) == ["x"]
    assert "Unexpected UTF-8 BOM" in check(block, first_line=7)[2]
    assert check(b"\xef\xbb\xbf\n") == []
    assert check(b'\xef\xbb\xbf{"text": "a\xff"}')[2].endswith(
        "line 1: not valid UTF-8 at column 12 (invalid start byte); pass errors='replace' to replace invalid bytes")


def test_other_field_names():
    line = b'{"text": "t", "content": "c", "\xc3\xa9t\xc3\xa9": "summer", "": "empty key"}'
    assert check(line, field="content") == ["c"]
    assert check(line, field="\u00e9t\u00e9") == ["summer"]
    assert check(b'{"\\u00e9t\\u00e9": "escaped"}', field="\u00e9t\u00e9") == ["escaped"]
    assert check(line, field="") == ["empty key"]
    assert check(b'{"\\ud800": "x"}', field="\ud800") == ["x"]  # a field with no UTF-8 form
    assert check(b'{"\\ud83d\\ude42": "x"}', field="\U0001F642") == ["x"]


def test_limits_of_json_loads():
    deep = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b', "text": "x"}'
    assert "not valid JSON" in check(deep)[2]
    nested = b'{"a": ' + b"[" * 200 + b"]" * 200 + b', "text": "x"}'
    assert check(nested) == ["x"]
    assert not kernel_bad(nested)
    huge_int = b'{"a": ' + b"7" * 5000 + b', "text": "x"}'
    assert "not valid JSON" in check(huge_int)[2]
    assert kernel_bad(huge_int)
    assert check(b'{"a": ' + b"7" * 5000 + b'.5, "text": "x"}') == ["x"]  # a float: no limit


def test_huge_values():
    text = ("word \u00e9\U0001F642 \"q\" \\ \n" * 300_000)
    for ensure_ascii in (False, True):
        line = json.dumps({"id": 1, "text": text}, ensure_ascii=ensure_ascii).encode()
        assert len(line) > 6_000_000
        assert not kernel_bad(line)
        assert check(line + b"\n" + line) == [text, text]


def test_values_at_the_end_of_the_block():
    """Every short value length as the block's very last bytes: the scanner reads and
    writes whole 8/16-byte blocks ahead, which must stay inside the input and output
    (run these under AddressSanitizer when changing the kernel)."""
    for unit in ("a", "\u00e9", "\u4e2d", "\U0001F642", "\\", "\n", "a\u00e9\u4e2d\n"):
        for n in range(41):
            value = (unit * n)[:n]
            for ensure_ascii in (False, True):
                line = json.dumps({"text": value}, ensure_ascii=ensure_ascii).encode()
                assert check(line) == ([value] if value else [])
                assert check(line[:-1])[0] == "error"  # the "}" cut off


def test_types_and_arguments():
    with pytest.raises(TypeError, match="block must be bytes, not str"):
        documents_of_block('{"text": "x"}', "text", "t", 0, "strict")
    with pytest.raises(TypeError, match="field must be str"):
        documents_of_block(b'{"text": "x"}', b"text", "t", 0, "strict")
    with pytest.raises(ValueError, match="errors must be one of"):
        documents_of_block(b'{"text": "x"}', "text", "t", 0, "ignore")
    with pytest.raises(TypeError):
        extract_field('{"text": "x"}', "text")
    for kind in (bytearray, memoryview):
        assert native(kind(b'{"text": "x"}\n{"text": 1, "text": "y"}')) == ["x", "y"]


# ---------------------------------------------------------------------------------------
# the scanner: what it reads itself, what it leaves to json.loads
# ---------------------------------------------------------------------------------------

def test_kernel_outputs():
    block = b'{"text": "a"}\n\n{"id": 1}\n{"text": ""}\n{"text": "\\u00e9"}'
    data, ends, lines, bad = extract_field(block, "text")
    assert data == "a\u00e9".encode()
    assert ends.tolist() == [1, 3] and lines.tolist() == [0, 4]
    assert bad == [(2, 15, 24)] and block[15:24] == b'{"id": 1}'


@pytest.mark.parametrize("line", [
    b'{"text": "\\uD83D\\uDE42 \\u00E9 \\uABCD"}', b'{"te\\u0078t": "escaped key"}',
    b'{"text": "first", "text": "last"}', b'{"text": 1, "text": "last"}',
    b'{"meta": {"text": 1, "a": [1, -2.5e+3, true, false, null, {}, []]}, "text": "x"}\r',
    b'{"a": "\\ud800", "text": "lone surrogate in another key"}', b'{"text": ""}',
    b'{"text": "\xc3\xa9\xe2\x82\xac\xf0\x9f\x99\x82 \\" \\\\ \\/ \\b \\f \\n \\r \\t"}',
])
def test_kernel_reads_common_lines(line):
    """Lines the scanner must read itself (else they would cost a json.loads)."""
    assert not kernel_bad(line)
    check(line)


@pytest.mark.parametrize("line", [
    b'{"text": "\\ud800"}', b'{"text": "\\udc00"}', b'{"text": "\\ud800x"}', b'{"text": "\\ud800\\u0041"}',
    b'{"a": NaN, "text": "x"}', b'{"text": "x", "b": -Infinity}', b'\xef\xbb\xbf{"text": "x"}',
    b'{"text": "a\xffb"}', b'{"text": "a\x1fb"}', b'{"text": 1}', b'{"text": "a", "text": null}',
    b'{"a": ' + b"[" * 300 + b"]" * 300 + b', "text": "x"}',
])
def test_kernel_leaves_unusual_lines_to_json(line):
    assert kernel_bad(line)
    check(line)


def test_scan_releases_the_gil():
    block = (json.dumps({"text": "some words " * 200}) + "\n").encode() * 5000
    want = native(block)
    results = []
    threads = [threading.Thread(target=lambda: results.append(native(block))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [want] * 3


# ---------------------------------------------------------------------------------------
# hypothesis: random objects through json.dumps, and random damage to them
# ---------------------------------------------------------------------------------------

texts = st.text(st.characters(codec="utf-8"), max_size=40) | st.sampled_from(
    ["", "text", "\\", '"', "\n\r\t\x00\x1f\x7f", "\u2028\ufeff\uffff", "\U0001F642\U00010000"])
keys = st.sampled_from(["text", "id", "meta", "TEXT", "text ", "t\u00e9xt"]) | texts
scalars = (st.none() | st.booleans() | st.integers(-10**30, 10**30)
           | st.floats(allow_nan=False, allow_infinity=False) | texts)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(keys, inner, max_size=4), max_leaves=12)


@st.composite
def objects(draw):
    """A dict, often with a str "text" (sometimes repeated: json.dumps of a list of pairs)."""
    pairs = draw(st.lists(st.tuples(keys, values), max_size=5))
    if draw(st.integers(0, 9)) < 8:
        pairs.insert(draw(st.integers(0, len(pairs))), ("text", draw(texts)))
    return pairs


@st.composite
def dumped_lines(draw):
    pairs = draw(objects())
    ensure_ascii = draw(st.booleans())
    separators = draw(st.sampled_from([(", ", ": "), (",", ":"), (" ,  ", " :\t")]))
    inner = [json.dumps(k, ensure_ascii=ensure_ascii) + separators[1]
             + json.dumps(v, ensure_ascii=ensure_ascii, separators=separators) for k, v in pairs]
    line = "{" + separators[0].join(inner) + "}"
    pad = draw(st.sampled_from(["", " ", "\t ", "\r"]))
    return (draw(st.sampled_from(["", " ", "\t"])) + line + pad).encode("utf-8")


@settings(max_examples=200)
@given(st.lists(dumped_lines() | st.sampled_from([b"", b"  ", b"\r"]), max_size=8),
       st.sampled_from([b"\n", b"\r\n"]), st.booleans())
def test_dumped_objects_match_reference(lines, newline, final_newline):
    block = newline.join(lines) + (newline if final_newline and lines else b"")
    check(block)


@settings(max_examples=150)
@given(st.lists(dumped_lines(), min_size=1, max_size=6))
def test_scanner_reads_dumped_objects_itself(lines):
    """json.dumps output (no NaN, no lone surrogates) never needs the slow path, except
    when its "text" is missing or not a string."""
    for line in lines:
        obj = json.loads(line)
        expected_bad = not isinstance(obj.get("text"), str)
        assert kernel_bad(line) == expected_bad, line


@st.composite
def damaged(draw):
    """A dumped line with a few bytes deleted, inserted or replaced (JSON syntax bytes
    and escapes are likely picks, so the damage is often near-valid)."""
    line = bytearray(draw(dumped_lines()))
    alphabet = st.sampled_from(list(b'{}[]",:\\/u0123456789abcdefABCDEF+-.eEtrulsnfa \t\r\x00\x1f\x7f')
                               + [0x80, 0xBF, 0xC3, 0xE2, 0xED, 0xF0, 0xF4, 0xFF])
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["delete", "insert", "replace"]))
        i = draw(st.integers(0, len(line)))
        if op == "insert" or not line:
            line.insert(i, draw(alphabet))
        elif op == "delete":
            del line[min(i, len(line) - 1)]
        else:
            line[min(i, len(line) - 1)] = draw(alphabet)
    return bytes(line).replace(b"\n", b" ")


@settings(max_examples=600)
@given(damaged(), st.sampled_from(["strict", "replace"]))
def test_damaged_lines_match_reference(line, errors):
    check(b'{"text": "x"}\n' + line + b'\n{"text": "y"}', errors=errors)


@settings(max_examples=500)
@given(st.binary(max_size=60), st.sampled_from(["strict", "replace"]))
def test_garbage_matches_reference(garbage, errors):
    check(garbage, errors=errors)
    check(b'{"text": "' + garbage.replace(b"\n", b"") + b'"}', errors=errors)


@settings(max_examples=300)
@given(st.lists(st.sampled_from([
    "\\ud800", "\\udbff", "\\udc00", "\\udfff", "\\ud83d\\ude42", "\\ud83d", "\\ude42", "\\u0000",
    "\\u00e9", "\\\\", "\\\"", "\\/", "\\b", "a", "\u00e9", "\U0001F642",
]), max_size=8))
def test_escapes_and_surrogates_match_reference(parts):
    check(('{"text": "' + "".join(parts) + '", "k": "' + "".join(reversed(parts)) + '"}').encode())
    check(('{"' + "".join(parts) + '": "v", "text": "t"}').encode())
