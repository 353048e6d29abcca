"""The one-line examples in the reference's docstrings are part of the specification."""
import doctest
import importlib

import pytest

MODULES = ["fastbpe.reference.patterns", "fastbpe.reference.bpe", "fastbpe.reference.core", "fastbpe.reference.documents",
           "fastbpe.io.documents", "fastbpe.io.streams", "fastbpe.io.cuts", "fastbpe.corpus", "fastbpe.train",
           "fastbpe.encoding", "fastbpe.special", "fastbpe.unstable", "fastbpe.reference.wordpiece", "fastbpe.wordpiece",
           "fastbpe.reference.jsonl", "fastbpe.io.jsonl", "fastbpe._jsonl"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0
    assert result.failed == 0
