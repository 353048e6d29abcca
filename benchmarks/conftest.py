"""The benchmarks' tests find vocabularies exactly as the tests do: ``vocab_file`` from
``tests/conftest.py`` (the shared folder when present, else the copies fastbpe ships and
``tests/data``), so a fresh clone times real vocabularies instead of skipping.

One rule in one place: the fixture is loaded from that file, not rewritten here.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "_fastbpe_tests_conftest", Path(__file__).resolve().parents[1] / "tests" / "conftest.py")
_tests_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_tests_conftest)

vocab_file = _tests_conftest.vocab_file
