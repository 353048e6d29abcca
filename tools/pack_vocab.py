"""Write the vocabularies shipped in ``fastbpe/vocab/``: tiktoken's public ``.tiktoken``
files, xz-compressed, each checked against the sha256 tiktoken expects.

    python tools/pack_vocab.py ../shared/vocab

Why xz: the four files are 7 MB as text, 3.2 MB gzipped and 2.3 MB as xz; a wheel
(a zip) does not shrink them further. Unpacking o200k_base costs ~60 ms against ~20 ms
for gzip, paid once per process and small beside parsing the file. The output is
reproducible: the same input gives the same bytes (no timestamps in the xz format).
"""
from __future__ import annotations

import hashlib
import lzma
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fastbpe._openai_public import RANKS_FILES  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "fastbpe" / "vocab"


def main(src: str) -> None:
    for ranks_name, info in RANKS_FILES.items():
        path = next((Path(src) / f for f in info.file_names if (Path(src) / f).is_file()), None)
        if path is None:
            raise SystemExit(f"none of {info.file_names} in {src}")
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != info.sha256:
            raise SystemExit(f"{path}: sha256 is not tiktoken's for {ranks_name}")
        packed = lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)
        (OUT / f"{ranks_name}.tiktoken.xz").write_bytes(packed)
        print(f"{ranks_name}: {len(data):,} -> {len(packed):,} bytes")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/vocab")
