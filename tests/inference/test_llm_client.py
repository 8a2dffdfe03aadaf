"""inference.llm against a real local OpenAI-compatible server through the real openai client."""
import time

import pytest

from inference import llm
from tests.fake_llm import fake_llm  # noqa: F401 - fixture


def test_not_configured_raises(settings):
    settings.OPENAI_BASE_URL = ""
    settings.LLM_MODEL = ""
    assert llm.is_configured() is False
    with pytest.raises(llm.LLMError):
        llm.chat_json(system="s", user="u")


def test_chat_json_ok_and_rule_matching(fake_llm):
    fake_llm.reply('{"default": true}')
    fake_llm.reply('```json\n{"kind": "special"}\n```', when="SPECIAL")
    assert llm.is_configured()
    assert llm.chat_json(system="sys", user="plain") == {"default": True}
    assert llm.chat_json(system="sys", user="a special one") == {"kind": "special"}
    assert fake_llm.requests[-1]["messages"][0] == {"role": "system", "content": "sys"}


@pytest.mark.parametrize("mode", ["error", "timeout", "malformed"])
def test_failures_raise_llmerror(fake_llm, mode):
    fake_llm.reply('{"ok": 1}')
    fake_llm.mode = mode
    t0 = time.monotonic()
    with pytest.raises(llm.LLMError):
        llm.chat_json(system="s", user="u")
    assert time.monotonic() - t0 < 2.4  # the 1 s client timeout, no retries


def test_non_object_json_is_rejected(fake_llm):
    fake_llm.reply("[1, 2, 3]")
    with pytest.raises(llm.LLMError):
        llm.chat_json(system="s", user="u")


def test_stream_chat_yields_tokens(fake_llm):
    fake_llm.reply("The rule says you may move twice.")
    tokens = list(llm.stream_chat(system="s", user="u"))
    assert len(tokens) > 3
    assert "".join(tokens) == "The rule says you may move twice."
    assert fake_llm.requests[-1]["stream"] is True


def test_stream_chat_error_raises(fake_llm):
    fake_llm.mode = "error"
    with pytest.raises(llm.LLMError):
        list(llm.stream_chat(system="s", user="u"))
