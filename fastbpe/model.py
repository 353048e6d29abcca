"""Which encoding an OpenAI model uses, with tiktoken's tables and rules.

A model name is looked up whole first, then by prefix: the first prefix of
``MODEL_PREFIX_TO_ENCODING`` (in its order) that starts the name wins, so new dated
versions (``gpt-4o-2024-05-13``) and fine-tunes (``ft:gpt-4o:org::id``) resolve
without a table update, and so do names of models that do not exist
(``gpt-3.5-turbo-FAKE``), as in tiktoken. Anything else is a KeyError.

The tables are data copied in meaning from tiktoken's ``tiktoken/model.py`` and
tested against it for every entry.

>>> encoding_name_for_model("gpt-4o-mini")
'o200k_base'
>>> encoding_name_for_model("text-davinci-003")
'p50k_base'
"""
from __future__ import annotations

from .registry import get_encoding

_O200K, _CL100K, _P50K, _P50K_EDIT, _R50K = "o200k_base", "cl100k_base", "p50k_base", "p50k_edit", "r50k_base"

#: Prefix -> encoding name; order matters (the first match wins).
MODEL_PREFIX_TO_ENCODING: dict[str, str] = {
    # reasoning
    "o1-": _O200K,
    "o3-": _O200K,
    "o4-mini-": _O200K,
    # chat
    "gpt-5": _O200K,
    "gpt-4.5-": _O200K,
    "gpt-4.1-": _O200K,
    "chatgpt-4o-": _O200K,
    "gpt-4o-": _O200K,
    "gpt-4-": _CL100K,
    "gpt-3.5-turbo-": _CL100K,
    "gpt-35-turbo-": _CL100K,        # Azure deployment names
    "gpt-oss-": "o200k_harmony",
    # fine-tuned models ("ft:<base>:<org>...")
    "ft:gpt-4o": _O200K,
    "ft:gpt-4": _CL100K,
    "ft:gpt-3.5-turbo": _CL100K,
    "ft:davinci-002": _CL100K,
    "ft:babbage-002": _CL100K,
}

#: Whole model name -> encoding name.
MODEL_TO_ENCODING: dict[str, str] = {
    # reasoning and chat
    **dict.fromkeys(["o1", "o3", "o4-mini", "gpt-5", "gpt-4.1", "gpt-4o"], _O200K),
    **dict.fromkeys(["gpt-4", "gpt-3.5-turbo", "gpt-3.5", "gpt-35-turbo"], _CL100K),
    # base models and embeddings
    **dict.fromkeys(
        ["davinci-002", "babbage-002", "text-embedding-ada-002", "text-embedding-3-small", "text-embedding-3-large"],
        _CL100K,
    ),
    # deprecated text and code models
    **dict.fromkeys(["text-davinci-003", "text-davinci-002"], _P50K),
    **dict.fromkeys(
        ["text-davinci-001", "text-curie-001", "text-babbage-001", "text-ada-001", "davinci", "curie", "babbage", "ada"],
        _R50K,
    ),
    **dict.fromkeys(
        ["code-davinci-002", "code-davinci-001", "code-cushman-002", "code-cushman-001", "davinci-codex",
         "cushman-codex"],
        _P50K,
    ),
    **dict.fromkeys(["text-davinci-edit-001", "code-davinci-edit-001"], _P50K_EDIT),
    # deprecated embeddings
    **dict.fromkeys(
        [f"text-similarity-{m}-001" for m in ("davinci", "curie", "babbage", "ada")]
        + [f"text-search-{m}-doc-001" for m in ("davinci", "curie", "babbage", "ada")]
        + ["code-search-babbage-code-001", "code-search-ada-code-001"],
        _R50K,
    ),
    # open models
    "gpt2": "gpt2",
    "gpt-2": "gpt2",
}


def encoding_name_for_model(model_name: str) -> str:
    """The name of the encoding ``model_name`` uses; KeyError if it is not known.

    >>> encoding_name_for_model("my-model")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
      ...
    KeyError: "Could not map model 'my-model' to an encoding; use fastbpe.get_encoding(name) with one of ..."
    """
    if not isinstance(model_name, str):
        raise TypeError(f"model name must be a str, not {type(model_name).__name__}")
    if model_name in MODEL_TO_ENCODING:
        return MODEL_TO_ENCODING[model_name]
    for prefix, encoding_name in MODEL_PREFIX_TO_ENCODING.items():
        if model_name.startswith(prefix):
            return encoding_name
    raise KeyError(
        f"Could not map model {model_name!r} to an encoding; use fastbpe.get_encoding(name) with one of "
        f"{list(dict.fromkeys(MODEL_TO_ENCODING.values()))}"
    )


def encoding_for_model(model_name: str):
    """The ``Encoding`` ``model_name`` uses (``get_encoding`` of its name); KeyError if
    the model is not known.

    >>> encoding_for_model("gpt-4").name
    'cl100k_base'
    """
    return get_encoding(encoding_name_for_model(model_name))
