"""The one place that talks to an OpenAI-compatible chat endpoint.

Why one module: people search (query parsing, why-matched) and the rules lawyer
(streamed answers) must share the same configuration, timeout and failure
contract, so every caller can fall back to its deterministic path on exactly one
exception type (LLMError) instead of catching half of the openai package.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from django.conf import settings

if TYPE_CHECKING:
    from openai import OpenAI


class LLMError(RuntimeError):
    """The LLM was not configured, failed, timed out, or answered something unusable."""


def is_configured() -> bool:
    return bool(settings.OPENAI_BASE_URL and settings.LLM_MODEL)


@lru_cache(maxsize=8)
def _client(base_url: str, api_key: str, timeout: float) -> OpenAI:
    from openai import OpenAI  # noqa: PLC0415 - heavy: the OpenAI client loads only when an LLM is configured and called

    # max_retries=0: callers have a deterministic fallback, so a retry only adds latency.
    return OpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout, max_retries=0)


def get_client(timeout: float | None = None) -> OpenAI:
    if not is_configured():
        raise LLMError("LLM is not configured (set OPENAI_BASE_URL and LLM_MODEL)")
    t = float(timeout if timeout is not None else settings.LLM_TIMEOUT_S)
    return _client(settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY or "not-needed", t)


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)


def parse_json_object(text: str) -> dict[str, Any]:
    """Models often wrap JSON in fences or prose; accept the first {...} object, reject everything else."""
    s = _FENCE.sub("", (text or "").strip())
    try:
        value = json.loads(s)
    except ValueError:
        start, end = s.find("{"), s.rfind("}")
        if start < 0 or end <= start:
            raise LLMError("LLM reply is not JSON") from None
        try:
            value = json.loads(s[start:end + 1])
        except ValueError as exc:
            raise LLMError(f"LLM reply is malformed JSON: {exc}") from None
    if not isinstance(value, dict):
        raise LLMError("LLM reply is JSON but not an object")
    return value


def chat_text(*, system: str, user: str, timeout: float | None = None, temperature: float = 0.0) -> str:
    client = get_client(timeout)
    try:
        resp = client.chat.completions.create(
            model=settings.LLM_MODEL, temperature=temperature,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        )
    except Exception as exc:
        raise LLMError(f"LLM request failed: {type(exc).__name__}: {exc}") from exc
    try:
        content = resp.choices[0].message.content
    except (AttributeError, IndexError, TypeError) as exc:
        raise LLMError("LLM reply has no choices") from exc
    if not content:
        raise LLMError("LLM reply is empty")
    return content


def chat_json(*, system: str, user: str, timeout: float | None = None) -> dict[str, Any]:
    """One chat completion whose reply must be a JSON object; LLMError otherwise."""
    return parse_json_object(chat_text(system=system, user=user, timeout=timeout))


def stream_chat(*, system: str, user: str, timeout: float | None = None) -> Iterator[str]:
    """Yield text tokens as they arrive. A failure before or during the stream raises LLMError."""
    client = get_client(timeout)
    stream = None
    try:
        stream = client.chat.completions.create(
            model=settings.LLM_MODEL, temperature=0.0, stream=True,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        )
        for chunk in stream:
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            text = getattr(delta, "content", None)
            if text:
                yield text
    except LLMError:
        raise
    except Exception as exc:
        raise LLMError(f"LLM stream failed: {type(exc).__name__}: {exc}") from exc
    finally:
        # closing this generator (the caller's client went away) must close the HTTP stream now, so the
        # server sees the disconnect and stops generating; otherwise it runs on until garbage collection
        if stream is not None:
            stream.close()
