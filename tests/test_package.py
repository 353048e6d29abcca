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


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code`` (this checkout's
    fastbpe first on the path)."""
    from pathlib import Path

    root = str(Path(fastbpe.__file__).resolve().parents[1])
    proc = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sys.modules))"],
                          capture_output=True, text=True, env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"},
                          cwd=root, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.split())


def test_import_and_help_load_no_numpy():
    """``import fastbpe`` and ``fastbpe --help`` start without numpy (issue 37): the
    native core, whose array outputs need it, loads with the first Encoding."""
    mods = _modules_after("import fastbpe; fastbpe.Encoding; fastbpe.list_encoding_names()")
    assert "numpy" not in mods and "fastbpe._encode" not in mods
    mods = _modules_after("import runpy, sys\nsys.argv = ['fastbpe', '--help']\n"
                          "try:\n    runpy.run_module('fastbpe', run_name='__main__')\nexcept SystemExit:\n    pass")
    assert "fastbpe.cli" in mods and "numpy" not in mods
    # the first Encoding loads the core; encode_to_numpy's default dtype is still uint32
    mods = _modules_after("import fastbpe\nenc = fastbpe.get_encoding('gpt2')\n"
                          "a = enc.encode_to_numpy('hi there')\nassert a.dtype.name == 'uint32', a.dtype\n"
                          "assert enc.encode_to_numpy('hi', dtype='uint16').dtype.name == 'uint16'")
    assert "fastbpe._encode" in mods


def test_license_metadata_is_pep_639():
    """An SPDX ``license`` string and ``license-files`` with both notices (fastbpe's and
    the shipped OpenAI vocabularies'): setuptools >= 77 builds it without the
    deprecation warning of a ``{ text = ... }`` table (issue 37)."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]  # the checkout, also when fastbpe is installed
    meta = tomllib.loads((root / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "MIT"
    assert meta["project"]["license-files"] == ["LICENSE", "fastbpe/vocab/LICENSE"]
    assert all("MIT License" in (root / f).read_text() for f in meta["project"]["license-files"])
    assert "setuptools>=77" in meta["build-system"]["requires"]
