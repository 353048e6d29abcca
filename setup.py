"""Build the Cython core.

Every ``src_cython/fastbpe/<name>.pyx`` becomes the extension ``fastbpe.<name>``; the
folder mirrors the package so Cython finds each ``.pxd`` by its dotted name; the C
headers the kernels include live in ``src_cython/fastbpe/include``. Compiler directives
are set once here, for every module.
"""
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
SRC = Path("src_cython")
INCLUDE = SRC / "fastbpe" / "include"
# Every header and .pxd: a change to any of them rebuilds every module (cheap, and
# never stale: inline kernels are compiled into each module that cimports them).
DEPENDS = sorted(str(h) for pat in ("*.h", "*.pxd") for h in (SRC / "fastbpe").rglob(pat))

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
        depends=DEPENDS,
        include_dirs=[np.get_include(), str(INCLUDE)],
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
