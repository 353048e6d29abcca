"""Build the Cython core.

Every ``src_cython/fastbpe/<name>.pyx`` becomes the extension ``fastbpe.<name>``; the
folder mirrors the package so Cython finds each ``.pxd`` by its dotted name. Compiler
directives are set once here, for every module.
"""
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
SRC = Path("src_cython")

DIRECTIVES = {
    "language_level": 3,
    "boundscheck": False,
    "wraparound": False,
    "cdivision": True,
    "initializedcheck": False,
    "embedsignature": True,
}

extensions = [
    Extension(
        "fastbpe." + pyx.stem,
        [str(pyx)],
        depends=[str(h) for pat in ("*.h", "*.pxd") for h in (SRC / "fastbpe").glob(pat)],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3"],
    )
    for pyx in sorted((SRC / "fastbpe").glob("*.pyx"))
]

setup(
    ext_modules=cythonize(
        extensions,
        include_path=[str(SRC)],
        compiler_directives=DIRECTIVES,
    ),
)
