"""The one-line examples in the reference's docstrings are part of the specification."""
import doctest
import importlib

import pytest

MODULES = ["fastbpe.reference.patterns", "fastbpe.reference.bpe", "fastbpe.reference.core", "fastbpe._data", "fastbpe.train", "fastbpe.encoding", "fastbpe.special",
           "fastbpe.unstable", "fastbpe.reference.wordpiece", "fastbpe.wordpiece"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0
    assert result.failed == 0
