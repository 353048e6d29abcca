"""``fastbpe audit``: golden counts on a small trained tokenizer whose unreachable tokens
are built on purpose (one of each kind the audit tells apart), and on gpt2."""
from __future__ import annotations

import json

import pytest

import fastbpe
from fastbpe import audit
from fastbpe.cli import main

TRAIN = ["the cat sat on the mat, the dog sat on the log\n", "hello world, hello there, 12 cats and 34 dogs\n"] * 20

#: The tokens added after training, each unreachable (or merge-only) in its own way.
BUILT = {
    b"a1": "never by the split: a letter and a digit are never in one chunk; merges would build it",
    b"qx": "an ordinary token the next two need",
    b"xz": "an ordinary token",
    b"qxzj": "merge-only (merges stop at qx z j) but one chunk: the whole-chunk lookup reaches it",
    b"zj5k": "merge-only and never one chunk: never by the split",
    b"\xb8\xad": "a fragment of '中': reachable inside it",
    b"\xe4\xb8\xad\xe4": "not UTF-8 and merge-only: never, proven",
}


@pytest.fixture(scope="module")
def built():
    enc = fastbpe.train_bpe(documents=TRAIN, vocab_size=290, pattern="cl100k", progress=False, name="built")
    ranks = dict(enc.mergeable_ranks)
    for b in BUILT:
        assert b not in ranks
        ranks[b] = len(ranks)
    return fastbpe.Encoding("built", pat_str=enc.pat_str, mergeable_ranks=ranks, special_tokens={})


def _ids(rows):
    return sorted(r["id"] for r in rows)


def test_golden_counts_on_a_built_tokenizer(built):
    a = audit.audit(built)
    u = a["unreachable"]
    r = built.mergeable_ranks
    impossible = [r[bytes([x])] for x in (0xC0, 0xC1, *range(0xF5, 0x100))]  # bytes UTF-8 never uses
    assert _ids(u["proven"]) == sorted([*impossible, r[b"\xe4\xb8\xad\xe4"]])
    assert _ids(u["by_split"]) == sorted([r[b"a1"], r[b"zj5k"]])
    assert u["undecided"] == [] and u["count"] == 16
    assert u["rule"] == "whole-chunk lookup, then merges (tiktoken's rank rule)"
    assert u["not_from_own_text"]["count"] == 2
    assert sorted(x["id"] for x in u["merge_only"]["tokens"]) == sorted(
        r[b] for b in (b"qxzj", b"zj5k", b"\xe4\xb8\xad\xe4"))
    # the proof of each: what its bytes encode to, and why
    a1 = next(x for x in u["by_split"] if x["id"] == r[b"a1"])
    assert a1["encodes_to"] == built.encode_ordinary("a1") == [r[b"a"], r[b"1"]]
    assert a1["why"] == "no text searched has its bytes inside one chunk"
    frag = next(x for x in u["reached_by_search"] if x["id"] == r[b"\xb8\xad"])
    assert "encodes to ids that hold it" in frag["proof"]
    assert a["not_utf8"]["count"] == 128 + 2


def test_gpt2_golden_counts():
    a = audit.audit(fastbpe.get_encoding("gpt2"))
    u = a["unreachable"]
    # the 13 byte tokens no UTF-8 text holds; every other token comes back, from its own
    # text (all but the 344 byte fragments) or from a text the search found
    assert (u["count"], len(u["proven"]), len(u["by_split"]), len(u["undecided"])) == (13, 13, 0, 0)
    assert u["not_from_own_text"]["count"] == 0 and u["merge_only"]["count"] == 0
    assert len(u["reached_by_search"]) == 344 - 13 and a["not_utf8"]["count"] == 344
    assert a["whitespace"]["count"] == 23
    groups = {g["nfkc"]: {t["token"] for t in g["tokens"]} for g in a["near_duplicates"]["groups"]}
    assert groups["'...'"] == {"'...'", "'…'"}


def test_corpus_lists_and_token_tax(built, tmp_path):
    en, tr = tmp_path / "en.txt", tmp_path / "tr.txt"
    en.write_text("the cat sat on the mat\nhello world\n", encoding="utf-8")
    tr.write_text("kedi minderin üstüne oturdu\nmerhaba dünya\n", encoding="utf-8")
    a = audit.audit(built, [str(en), str(tr)], under=2)
    c = a["corpus"]
    counts = {r["id"]: r["count"] for r in c["rare"]["ranked"]}
    assert all(n < 2 for n in counts.values()) and c["rare"]["count"] >= c["never"]["count"]
    assert [r["count"] for r in c["rare"]["ranked"]] == sorted(r["count"] for r in c["rare"]["ranked"])
    by_id = {t: b for b, t in built.mergeable_ranks.items()}
    ids = built.encode_ordinary(en.read_text() + tr.read_text())
    for row in c["only_inside"]["ranked"]:
        assert row["id"] not in ids and row["id_inside"] in ids
        assert by_id[row["id"]] in by_id[row["id_inside"]] and row["count"] == ids.count(row["id_inside"])
    per = c["per_file"]
    assert per[str(en)]["token_tax"] == 1.0 and per[str(tr)]["token_tax"] > 1.0
    assert per[str(en)]["tokens"] == len(built.encode_ordinary(en.read_text()))
    # a token the corpus produces is reached whatever the search says
    assert c["tokens_produced"] == len(ids)


def test_cli_report_json_and_html(built, tmp_path, capsys):
    path = tmp_path / "built.json"
    built.save(path)  # a tokenizer.json keeps the pattern (a bare .tiktoken file needs it named)
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat\n", encoding="utf-8")
    out, page = tmp_path / "a.json", tmp_path / "a.html"
    assert main(["audit", "-t", str(path), str(corpus), "--json", str(out), "--html", str(page), "-q"]) == 0
    text = capsys.readouterr().out
    assert "unreachable (no text produces them): 16  (14 proven, 2 by the split pattern, checked); undecided: 0" in text
    assert "'a1'  -> [" in text and "on the corpus (1 file(s)" in text
    a = json.loads(out.read_text(encoding="utf-8"))
    assert a["unreachable"]["count"] == 16 and a["tokenizer"] == "built.json"
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "unreachable by the split pattern (checked): 2" in html
    assert "&#x27;a1&#x27;" in html


def test_refusals(tmp_path, capsys, vocab_file):
    with pytest.raises(ValueError, match="WordPiece"):
        audit.audit(fastbpe.load(vocab_file("bert-base-uncased/vocab.txt")))
    special = tmp_path / "s.txt"
    special.write_text("a <|endoftext|> b", encoding="utf-8")
    assert main(["audit", "-t", "gpt2", str(special), "-q"]) == 2
    assert "special-token text '<|endoftext|>'" in capsys.readouterr().err
