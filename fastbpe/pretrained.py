"""``fastbpe.from_pretrained``: a tokenizer as transformers users have it.

``path_or_name`` is a model folder (``tokenizer.json`` beside ``tokenizer_config.json``)
or a model name (``"meta-llama/Llama-3.2-1B"``) found in the local Hugging Face cache,
resolved offline as ``huggingface_hub`` does: ``<hub cache>/models--org--name/refs/main``
holds a commit, ``snapshots/<commit>/`` holds the files. The hub cache is
``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``. A name not
in the cache is downloaded with ``huggingface_hub`` (as transformers does) when that is
installed and the network is allowed (``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` unset
and ``local_files_only=False``); otherwise FileNotFoundError names every place looked at.

Decision: ``from_pretrained`` returns what ``fastbpe.load`` returns for the folder (an
``HFEncoding`` for a BPE tokenizer.json), with the folder's ``tokenizer_config.json`` as
``enc.config`` (a ``TokenizerConfig``: bos/eos/pad/unk, ``add_bos_token`` /
``add_eos_token``, the chat template kept as data). The config does not change the ids:
the tokenizer.json's post-processor is what HF's ``Tokenizer`` runs, and
``add_special_tokens=True`` applies it.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .loader import load

#: The files a tokenizer needs from a model repository (what is downloaded).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "chat_template.jinja", "chat_template.json")

_COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class TokenizerConfig:
    """What a ``tokenizer_config.json`` says about special tokens and chat (data only).

    >>> c = TokenizerConfig.from_dict({"bos_token": {"content": "<s>", "lstrip": False},
    ...                                "eos_token": "</s>", "add_bos_token": True})
    >>> c.bos_token, c.eos_token, c.pad_token, c.add_bos_token, c.add_eos_token
    ('<s>', '</s>', None, True, None)
    """

    bos_token: str | None = None
    eos_token: str | None = None
    pad_token: str | None = None
    unk_token: str | None = None
    add_bos_token: bool | None = None
    add_eos_token: bool | None = None
    #: A Jinja template string, or ``{name: template}`` when the file names several.
    chat_template: str | dict[str, str] | None = None
    model_max_length: int | None = None
    #: The whole file as read.
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, raw: dict, source: str = "tokenizer_config.json") -> TokenizerConfig:
        if not isinstance(raw, dict):
            raise ValueError(f"{source}: a JSON object expected, not {type(raw).__name__}")
        tokens = {k: _token_text(raw.get(k), f"{source}: {k}")
                  for k in ("bos_token", "eos_token", "pad_token", "unk_token")}
        flags = {k: _optional_bool(raw.get(k), f"{source}: {k}") for k in ("add_bos_token", "add_eos_token")}
        length = raw.get("model_max_length")
        if not isinstance(length, int) or isinstance(length, bool):
            length = None   # transformers writes a huge float for "no limit"
        return cls(**tokens, **flags, chat_template=_chat_template(raw.get("chat_template"), source),
                   model_max_length=length, raw=raw)

    @classmethod
    def from_folder(cls, folder: Path) -> TokenizerConfig:
        """The folder's ``tokenizer_config.json`` (empty when absent), with
        ``special_tokens_map.json`` filling tokens it leaves unset and
        ``chat_template.jinja`` / ``chat_template.json`` the template (newer transformers
        save it apart)."""
        raw = _read_json(folder / "tokenizer_config.json") or {}
        for key, value in (_read_json(folder / "special_tokens_map.json") or {}).items():
            raw.setdefault(key, value)
        if raw.get("chat_template") is None:
            if (folder / "chat_template.jinja").is_file():
                raw = {**raw, "chat_template": (folder / "chat_template.jinja").read_text(encoding="utf-8")}
            elif (folder / "chat_template.json").is_file():
                raw = {**raw, "chat_template": (_read_json(folder / "chat_template.json") or {}).get("chat_template")}
        return cls.from_dict(raw, str(folder / "tokenizer_config.json"))


def hub_cache() -> Path:
    """The Hugging Face hub cache folder, as ``huggingface_hub`` picks it."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def cached_snapshot(name: str, revision: str = "main", cache_dir: str | os.PathLike | None = None) -> Path | str:
    """The snapshot folder of model ``name`` at ``revision`` in the hub cache, or a
    string saying what was looked for and not found.

    >>> import tempfile
    >>> cached_snapshot("org/model", cache_dir=tempfile.mkdtemp(prefix="hub"))
    '.../hub.../models--org--model/refs/main: not found'
    """
    repo = Path(cache_dir).expanduser() if cache_dir is not None else hub_cache()
    repo = repo / ("models--" + name.replace("/", "--"))
    if _COMMIT.fullmatch(revision):
        commit = revision
    else:
        ref = repo / "refs" / revision
        if not ref.is_file():
            return f"{ref}: not found"
        commit = ref.read_text(encoding="utf-8").strip()
    snapshot = repo / "snapshots" / commit
    if not snapshot.is_dir():
        return f"{snapshot}: not found"
    return snapshot


def resolve(path_or_name: str | os.PathLike, *, revision: str = "main", cache_dir=None,
            local_files_only: bool = False) -> Path:
    """The local folder (or file) holding the tokenizer of ``path_or_name``; see the
    module docstring for the order. FileNotFoundError names what was looked for."""
    if not isinstance(path_or_name, (str, os.PathLike)):
        raise TypeError(f"path_or_name must be a str or path, not {type(path_or_name).__name__}")
    if not isinstance(revision, str) or not revision:
        raise TypeError(f"revision must be a non-empty str, not {revision!r}")
    if os.path.exists(path_or_name):
        return Path(path_or_name)
    name = os.fspath(path_or_name)
    looked = [f"{name}: no such file or folder"]
    if _is_repo_name(name):
        found = cached_snapshot(name, revision, cache_dir)
        if isinstance(found, Path):
            return found
        looked.append(f"the Hugging Face cache ({found})")
        downloaded = _download(name, revision, cache_dir, local_files_only, looked)
        if downloaded is not None:
            return downloaded
    else:
        looked.append("not a model name (org/name) to look up in the Hugging Face cache")
    raise FileNotFoundError("no tokenizer for " + repr(name) + ": " + "; ".join(looked))


def from_pretrained(path_or_name: str | os.PathLike, *, revision: str = "main", cache_dir=None,
                    local_files_only: bool = False, name: str | None = None):
    """Load the tokenizer of a model folder or cached model name: ``fastbpe.load`` of
    the folder, with ``.config`` its ``TokenizerConfig`` (see the module docstring)."""
    where = resolve(path_or_name, revision=revision, cache_dir=cache_dir, local_files_only=local_files_only)
    enc = load(where, name=name if name is not None else _display_name(path_or_name, where))
    enc.config = TokenizerConfig.from_folder(where if where.is_dir() else where.parent)
    return enc


# ---------------------------------------------------------------------- helpers
def _is_repo_name(name: str) -> bool:
    """``org/name`` or ``name`` as the hub spells repository ids (no path syntax).

    >>> _is_repo_name("meta-llama/Llama-3.2-1B"), _is_repo_name("gpt2"), _is_repo_name("./x/y")
    (True, True, False)
    """
    return re.fullmatch(r"(?:[\w.-]+/)?[\w.-]+", name) is not None and ".." not in name and not name.startswith(".")


def _download(name: str, revision: str, cache_dir, local_files_only: bool, looked: list[str]) -> Path | None:
    offline = [v for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
               if os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")]
    if local_files_only or offline:
        looked.append("no download: " + ("local_files_only=True" if local_files_only else f"{offline[0]} is set"))
        return None
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        looked.append("no download: huggingface_hub is not installed")
        return None
    try:  # pragma: no cover - tests do not use the network
        return Path(snapshot_download(name, revision=revision, cache_dir=cache_dir,
                                      allow_patterns=list(TOKENIZER_FILES)))
    except Exception as exc:  # pragma: no cover - the hub's many error types, all reported the same
        looked.append(f"download failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return None


def _display_name(path_or_name, where: Path) -> str:
    return os.fspath(path_or_name) if not os.path.exists(path_or_name) else where.resolve().name


def _read_json(path: Path):
    if not path.is_file():
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON: {exc}") from None


def _token_text(value, where: str) -> str | None:
    """A special token as a string: transformers writes a string or an AddedToken
    object (``{"content": ..., "__type": "AddedToken"}``)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    raise ValueError(f"{where}: a token string or {{'content': ...}} expected, not {value!r}")


def _optional_bool(value, where: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise ValueError(f"{where}: true or false expected, not {value!r}")


def _chat_template(value, source: str):
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(t, dict) and isinstance(t.get("name"), str)
                                       and isinstance(t.get("template"), str) for t in value):
        return {t["name"]: t["template"] for t in value}
    raise ValueError(f"{source}: chat_template: a string or a list of {{name, template}} expected")
