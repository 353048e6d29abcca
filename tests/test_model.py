"""encoding_for_model / encoding_name_for_model: tiktoken's tables and rules."""
import pytest

import fastbpe
from fastbpe import model

tiktoken_model = pytest.importorskip("tiktoken.model")

MADE_UP = [
    "gpt-4o-2024-05-13", "gpt-4-0314", "gpt-4-32k", "gpt-3.5-turbo-FAKE", "gpt-35-turbo-16k",
    "gpt-5-mini", "gpt-5", "gpt-4.1-nano", "gpt-4.5-preview", "chatgpt-4o-latest", "o1-mini", "o3-pro",
    "o4-mini-2025-04-16", "gpt-oss-120b", "ft:gpt-4o:org::abc", "ft:gpt-4:org", "ft:gpt-3.5-turbo-0613:x",
    "ft:davinci-002:x", "ft:babbage-002:x",
    # unknown: no entry, no prefix (tiktoken's KeyError)
    "", "gpt", "GPT-4", "gpt4", "o1x", "o2", "o4", "llama-3", "text-embedding-3-huge", " gpt-4", "ft:ada", "gpt-4o ",
]


def _tiktoken_name(name):
    try:
        return tiktoken_model.encoding_name_for_model(name)
    except KeyError:
        return KeyError


def _our_name(name):
    try:
        return fastbpe.encoding_name_for_model(name)
    except KeyError:
        return KeyError


def test_tables_are_tiktokens():
    assert model.MODEL_TO_ENCODING == tiktoken_model.MODEL_TO_ENCODING
    # the prefix order decides the first match
    assert list(model.MODEL_PREFIX_TO_ENCODING.items()) == list(tiktoken_model.MODEL_PREFIX_TO_ENCODING.items())
    assert set(model.MODEL_TO_ENCODING.values()) | set(model.MODEL_PREFIX_TO_ENCODING.values()) <= set(
        fastbpe.list_encoding_names()
    )


@pytest.mark.parametrize("name", list(tiktoken_model.MODEL_TO_ENCODING) + MADE_UP)
def test_same_answer_as_tiktoken(name):
    assert _our_name(name) == _tiktoken_name(name)


def test_unknown_model_is_a_key_error_that_says_what_to_do():
    with pytest.raises(KeyError, match="get_encoding") as info:
        fastbpe.encoding_for_model("llama-3")
    assert "llama-3" in str(info.value)
    with pytest.raises(TypeError, match="model name must be a str"):   # tiktoken: AttributeError
        fastbpe.encoding_name_for_model(4)


def test_encoding_for_model_is_the_registered_encoding():
    enc = fastbpe.encoding_for_model("gpt-4o-mini")
    assert enc is fastbpe.get_encoding("o200k_base")
    assert fastbpe.encoding_for_model("gpt-oss-20b").name == "o200k_harmony"
