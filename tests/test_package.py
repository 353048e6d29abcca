import subprocess
import sys

import fastbpe


def test_version():
    assert fastbpe.__version__


def test_import_without_extension_says_how_to_build(tmp_path):
    # Copy the pure-Python package without its compiled modules and import it.
    import shutil
    from pathlib import Path

    src = Path(fastbpe.__file__).parent
    dst = tmp_path / "fastbpe"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    proc = subprocess.run(
        [sys.executable, "-c", "import fastbpe"],
        cwd=tmp_path, capture_output=True, text=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode != 0
    assert "ImportError" in proc.stderr
    assert "pip install" in proc.stderr and "build_ext --inplace" in proc.stderr
