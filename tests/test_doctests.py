"""Every module's ``>>>`` examples run: they are part of the specification and of the docs.

The modules are found by walking the package (``pkgutil.walk_packages``), so a new module
is covered without being listed; each must hold at least one example. Native extensions
are included (their docstrings are compiled in: ``fastbpe._jsonl`` has examples).
"""
import doctest
import importlib
import pkgutil

import pytest

import fastbpe

#: Modules that run no examples, each with the reason.
SKIP = {
    "fastbpe.__main__": "runs the CLI when imported (``python -m fastbpe``); cli's examples cover it",
    "fastbpe._native": "only imports the extensions, with an ImportError saying how to build them",
    "fastbpe.reference._bert_unicode": "generated tables (tools/gen_bert_unicode.py), no prose",
    "fastbpe.reference._nfc_table": "generated tables (tools/gen_nfc_table.py), no prose",
}

def _modules() -> list[str]:
    names = ["fastbpe"]
    for info in pkgutil.walk_packages(fastbpe.__path__, "fastbpe."):
        names.append(info.name)
    return sorted(set(names))


MODULES = _modules()


def test_the_walk_finds_the_layers():
    for name in ("fastbpe.bpe.encoding", "fastbpe.bpe.counting", "fastbpe.wordpiece.model",
                 "fastbpe.trainers.wordpiece", "fastbpe.io.atomic", "fastbpe.checks", "fastbpe.cli"):
        assert name in MODULES


@pytest.mark.parametrize("name", [m for m in MODULES if m not in SKIP])
def test_docstring_examples(name):
    """Every module's examples run. A Python module must have one; a native kernel
    module (``fastbpe._*``, built from ``src_cython/``) may have none, because its kernels
    are ``cdef`` functions with no Python face: they are tested through the modules that
    wrap them and against ``fastbpe.reference``."""
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    if (getattr(module, "__file__", "") or "").endswith(".py"):
        assert result.attempted > 0, f"{name} has no >>> example"
    assert result.failed == 0
