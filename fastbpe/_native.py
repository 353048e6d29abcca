"""The compiled core: checked for at import, loaded on first use.

``import fastbpe`` only checks that the extension ``_encode`` is there (a missing build
fails at once, with the instructions below); ``load()`` imports it when the first
``Encoding`` is made. Loading it imports numpy (its array outputs use numpy's C API),
which therefore costs nothing to a process that only imports fastbpe (``fastbpe
--help``, a module that names ``fastbpe.Encoding``)."""
import os
from importlib.machinery import EXTENSION_SUFFIXES

_HOW_TO_BUILD = (
    "fastbpe's Cython extension is not built. Install the package with "
    "`pip install .` (or `pip install -e .`) from the project root, or build it in place "
    "with `python setup.py build_ext --inplace`; a C compiler and the Python headers are "
    "needed."
)

# the file itself, beside this one: an import-system lookup could answer with another
# checkout's build (an editable install's finder maps fastbpe.* to its own folder)
_HERE = os.path.dirname(os.path.abspath(__file__))
if not any(os.path.exists(os.path.join(_HERE, "_encode" + suffix)) for suffix in EXTENSION_SUFFIXES):
    raise ImportError(f"{_HOW_TO_BUILD} (no _encode extension in {_HERE})")  # pragma: no cover - a subprocess test

_encode = None


def load():
    """The module ``fastbpe._encode`` (the native BPE core), imported once; an
    ImportError saying how to build it when it cannot be loaded."""
    global _encode
    if _encode is None:
        try:
            from . import _encode as module
        except ImportError as exc:  # pragma: no cover - a broken build
            raise ImportError(f"{_HOW_TO_BUILD} (original error: {exc})") from exc
        _encode = module
    return _encode
