"""Build a >= 1 GB corpus of *distinct* text from Debian packages (issue 23's benchmarks).

    python benchmarks/debian_corpus.py --out /work/corpus [--max-mb 1300]

Downloads (``apt-get download``, no root install) ``linux-source-6.1`` and every
``manpages*`` package the apt lists know, unpacks them with ``dpkg-deb -x`` into
``OUT/x``, and writes, in the order of the sorted document paths:

* ``docs.jsonl``: one ``{"text": ...}`` object per document (``ensure_ascii=False``);
* ``docs.txt``: the same documents joined by ``<|endoftext|>`` (nothing before the
  first or after the last), i.e. ``docs="sep:<|endoftext|>"`` in the document model;
* ``quarter.jsonl`` / ``quarter.txt``: the first documents up to ~25% of the bytes (the
  "1x"; the full corpus is the "4x");
* ``README`` (what is in it, sizes), then ``READY``.

A document is one file: a kernel source/documentation file, or one man page (``.gz``
pages decompressed to their troff text). Kept only if it is non-empty, valid UTF-8,
has no NUL byte (binaries), does not contain the separator, and is not an exact
duplicate of an earlier one (sha256 of the bytes); symlinks are skipped. Left out on
purpose: the kernel's generated AMD GPU register headers ``*_sh_mask.h`` under
``drivers/gpu/drm/amd/include/asic_reg`` (320 MB of ``#define REG__FIELD_MASK 0x...``
lines; with them a quarter of the corpus would be one machine-written kind of text, and
it would pass 1.3 GB). The corpus is never committed: it is built where ``--out`` says.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import subprocess
import tarfile
from pathlib import Path

SEP = "<|endoftext|>"
KERNEL = "linux-source-6.1"


def download(debs: Path) -> None:
    """Fetch the .deb files that are not there yet."""
    debs.mkdir(parents=True, exist_ok=True)
    names = subprocess.run(["apt-cache", "search", "--names-only", "^manpages"],
                           capture_output=True, text=True, check=True).stdout.split("\n")
    wanted = [KERNEL] + sorted(line.split()[0] for line in names if line.strip())
    have = {p.name.split("_")[0] for p in debs.glob("*.deb")}
    missing = [w for w in wanted if w not in have]
    if missing:
        subprocess.run(["apt-get", "download", *missing], cwd=debs, check=True)


def unpack(debs: Path, root: Path) -> Path:
    """``dpkg-deb -x`` every package into ``root``; untar the kernel; return its tree."""
    if not (root / "usr").exists():
        for deb in sorted(debs.glob("*.deb")):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    src = root / "usr" / "src"
    tree = src / KERNEL
    if not tree.exists():
        with tarfile.open(src / f"{KERNEL}.tar.xz") as tar:
            tar.extractall(src, filter="data")
    return tree


def candidates(root: Path, kernel: Path) -> list[tuple[str, Path]]:
    """(document name, file) pairs, sorted by name: kernel files and man pages."""
    out = []
    for base, prefix in ((kernel, KERNEL), (root / "usr" / "share" / "man", "man")):
        for dirpath, _, files in os.walk(base):
            for f in files:
                p = Path(dirpath) / f
                if p.is_symlink() or not p.is_file():
                    continue
                name = f"{prefix}/{p.relative_to(base)}"
                if generated(name):
                    continue
                out.append((name.removesuffix(".gz") if f.endswith(".gz") else name, p))
    return sorted(out)


def generated(name: str) -> bool:
    """The machine-generated register headers left out (see the module doc).

    >>> generated("linux-source-6.1/drivers/gpu/drm/amd/include/asic_reg/gc/gc_9_0_sh_mask.h")
    True
    >>> generated("linux-source-6.1/drivers/gpu/drm/amd/include/asic_reg/gc/gc_9_0_offset.h")
    False
    """
    return "/drivers/gpu/drm/amd/include/asic_reg/" in name and name.endswith("_sh_mask.h")


def read_text(path: Path) -> str | None:
    """The file's text, or None when it is not a document we keep (see module doc)."""
    raw = path.read_bytes()
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError):
            return None
    if not raw or b"\x00" in raw:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if SEP in text else text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/work/corpus")
    ap.add_argument("--max-mb", type=float, default=1300.0,
                    help="stop adding documents (in sorted order) past this many MB")
    args = ap.parse_args()
    out = Path(args.out)
    download(out / "debs")
    kernel = unpack(out / "debs", out / "x")
    seen: set[bytes] = set()
    docs: list[tuple[str, str]] = []
    total = 0
    skipped = {"not text / invalid UTF-8 / empty / has separator": 0, "duplicate": 0}
    for name, path in candidates(out / "x", kernel):
        text = read_text(path)
        if text is None:
            skipped["not text / invalid UTF-8 / empty / has separator"] += 1
            continue
        raw = text.encode("utf-8")
        digest = hashlib.sha256(raw).digest()
        if digest in seen:
            skipped["duplicate"] += 1
            continue
        seen.add(digest)
        docs.append((name, text))
        total += len(raw)
        if total > args.max_mb * 1e6:
            break
    quarter, acc = 0, 0
    for quarter, (_, text) in enumerate(docs, 1):
        acc += len(text.encode("utf-8"))
        if acc >= total / 4:
            break
    sizes = {}
    for stem, part in (("docs", docs), ("quarter", docs[:quarter])):
        with open(out / f"{stem}.jsonl", "w", encoding="utf-8", newline="") as f:
            for _, text in part:
                f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
        with open(out / f"{stem}.txt", "w", encoding="utf-8", newline="") as f:
            f.write(SEP.join(text for _, text in part))
        sizes[stem] = (len(part), sum(len(t.encode("utf-8")) for _, t in part),
                       (out / f"{stem}.txt").stat().st_size, (out / f"{stem}.jsonl").stat().st_size)
    kernel_docs = sum(1 for n, _ in docs if n.startswith(KERNEL))
    lines = [
        "Benchmark corpus for fastbpe issue 23: distinct text, built by benchmarks/debian_corpus.py",
        f"Sources: Debian bookworm {KERNEL} (the kernel source tree: .c/.h/.rst/... files) and",
        "every manpages* package (English + many languages; .gz pages decompressed to troff).",
        "One document per file; kept: non-empty, valid UTF-8, no NUL, no separator, not an",
        "exact duplicate (sha256). Order: sorted document paths (kernel first, then man/).",
        f"Separator in the .txt files: {SEP!r} (docs=\"sep:{SEP}\"); .jsonl field: text.",
        f"Documents: {len(docs)} ({kernel_docs} kernel files, {len(docs) - kernel_docs} man pages);"
        f" skipped: {skipped}",
        "",
        f"{'file':<16}{'documents':>10}{'text bytes':>15}{'.txt bytes':>15}{'.jsonl bytes':>15}",
    ]
    for stem, (n, text_bytes, txt, jsonl) in sizes.items():
        lines.append(f"{stem:<16}{n:>10}{text_bytes:>15,}{txt:>15,}{jsonl:>15,}")
    lines.append("quarter = the first documents up to ~25% of the bytes (\"1x\"); docs = \"4x\".")
    (out / "README").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / "READY").touch()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
