"""Import the compiled core once, with an ImportError that says how to build it."""

_HOW_TO_BUILD = (
    "fastbpe's Cython extension is not built. Install the package with "
    "`pip install .` (or `pip install -e .`) from the project root, or build it in place "
    "with `python setup.py build_ext --inplace`; a C compiler and the Python headers are "
    "needed."
)

try:
    from . import _core  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(f"{_HOW_TO_BUILD} (original error: {exc})") from exc
