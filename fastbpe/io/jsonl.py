"""JSON Lines blocks → packed documents (the slow, exact path; a native scanner may take
the common lines first)."""
from __future__ import annotations

import numpy as np

from ..reference import documents as spec


def documents_of_block(part: bytes, field: str, source: str, first_line: int, errors: str):
    """``(data, ends)``: the ``field`` of every non-blank line of ``part`` (whole lines),
    packed as UTF-8; errors name ``source`` and the 1-based line (``first_line`` is the
    0-based number of the part's first line)."""
    docs = []
    for i, raw in enumerate(part.split(b"\n")):
        if not raw.strip(b" \t\r"):
            continue
        try:
            line = raw.decode("utf-8", errors=errors)
        except UnicodeDecodeError as exc:
            raise ValueError(f"{source}, line {first_line + i + 1}: not valid UTF-8 at column {exc.start + 1}; "
                             "pass errors='replace' to replace invalid bytes") from None
        try:
            docs.extend(spec.jsonl_documents([line], field, source))
        except ValueError as exc:
            msg = str(exc).replace(f"{source}, line 1:", f"{source}, line {first_line + i + 1}:", 1)
            raise ValueError(msg) from None
    from .documents import fix_document

    packed = [fix_document(d).encode("utf-8") for d in docs]
    return b"".join(packed), np.cumsum([len(p) for p in packed], dtype=np.int64)
