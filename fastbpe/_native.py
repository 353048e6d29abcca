"""Import the compiled core once, with an ImportError that says how to build it.

The probe is ``_encode``, the extension ``Encoding`` needs (it cimports the kernel
modules, so their absence fails here too)."""

_HOW_TO_BUILD = (
    "fastbpe's Cython extension is not built. Install the package with "
    "`pip install .` (or `pip install -e .`) from the project root, or build it in place "
    "with `python setup.py build_ext --inplace`; a C compiler and the Python headers are "
    "needed."
)

try:
    from . import _encode  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(f"{_HOW_TO_BUILD} (original error: {exc})") from exc
