"""PNG charts for ``report.py`` (needs matplotlib; ``report.py`` works without it)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _grouped_bars(ax, groups: list[str], series: dict[str, list[float]], ylabel: str):
    x = np.arange(len(groups))
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        ax.bar(x - 0.4 + width * (i + 0.5), [v if v is not None else 0 for v in values], width, label=name)
    ax.set_xticks(x, groups, rotation=30, ha="right", fontsize="small")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize="small")


def _save(fig, path: Path, written: list[Path]):
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)


def save_all(res: dict, out: Path) -> list[Path]:
    written: list[Path] = []
    if res.get("encode"):
        rows = res["encode"]
        peers = sorted({k for r in rows for k in r["mbps"]}, key=lambda k: (k != "fastbpe", k != "tiktoken", k))
        groups = [f"{r['vocab']}\n{r['language']}" for r in rows]
        fig, ax = plt.subplots(figsize=(max(7, 0.7 * len(rows)), 4.5))
        _grouped_bars(ax, groups, {p: [r["mbps"].get(p) for r in rows] for p in peers}, "MB/s (one thread)")
        ax.set_title("Encode throughput per vocabulary and language")
        _save(fig, out / "encode_throughput.png", written)
    if res.get("batch"):
        rows = res["batch"]
        fig, ax = plt.subplots(figsize=(5.5, 4))
        for p in rows[0]["mbps"]:
            ax.plot([r["threads"] for r in rows], [r["mbps"][p] for r in rows], marker="o", label=p)
        ax.set_xlabel("threads")
        ax.set_ylabel("MB/s")
        ax.set_xticks([r["threads"] for r in rows])
        ax.set_title("Batch encode scaling (cl100k_base)")
        ax.legend()
        _save(fig, out / "batch_scaling.png", written)
    trainers = {k: v for k, v in (res.get("train") or {}).get("trainers", {}).items() if "error" not in v}
    if trainers:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
        names = list(trainers)
        a1.barh(names, [trainers[n]["seconds"] for n in names], color="#4a90d9")
        a1.set_xlabel("seconds")
        a1.set_title(f"Training time (vocab {res['train']['vocab']})")
        a2.barh(names, [trainers[n]["peak_rss_mb"] for n in names], color="#d98c4a")
        a2.set_xlabel("peak RSS (MB)")
        a2.set_title("Peak memory")
        a2.set_yticklabels([])
        _save(fig, out / "training.png", written)
    c = res.get("course") or {}
    if c.get("vocab_curve"):
        fig, ax = plt.subplots(figsize=(6.5, 4.5))
        curve = c["vocab_curve"]
        ax.plot([p["vocab_size"] for p in curve], [p["tokens"] for p in curve], marker="o", label="fastbpe, trained here")
        for i, p in enumerate(c.get("reference_points", [])):
            ax.scatter([p["vocab_size"]], [p["tokens"]], marker="s", zorder=3)
            # alternate above/below: cl100k and o200k land on nearly the same point
            ax.annotate(p["name"], (p["vocab_size"], p["tokens"]), textcoords="offset points",
                        xytext=(-20, 8 if i % 2 == 0 else -14), fontsize="small")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("vocabulary size (log scale)")
        ax.set_ylabel(f"tokens for {c['held_out_bytes'] / 1e6:.2f} MB of held-out text")
        ax.set_title("Bigger vocabulary, shorter sequences: diminishing returns")
        ax.legend(fontsize="small")
        _save(fig, out / "vocab_size_vs_tokens.png", written)
    if c.get("languages"):
        langs = list(c["parallel_bytes"])
        names = list(c["languages"])
        fig, ax = plt.subplots(figsize=(7, 4.5))
        _grouped_bars(ax, names, {lang: [c["languages"][n][lang]["tokens"] for n in names] for lang in langs}, "tokens")
        ax.set_title(f"The same {c['parallel_lines']:,} messages in three languages")
        _save(fig, out / "tokens_by_language.png", written)
    return written
