"""A small OpenAI-compatible HTTP server on 127.0.0.1 for tests.

Why a real server and not a mock: the code under test goes through the real
`openai` client (HTTP, JSON, SSE streaming, timeouts), so what we test is what
runs in production against vLLM/Ollama/OpenAI, with nothing monkeypatched.

Usage in a test:

    from tests.fake_llm import FakeLLM, fake_llm   # fake_llm is a pytest fixture

    def test_x(fake_llm):                 # already started and wired into settings
        fake_llm.reply('{"a": 1}')                       # every request gets this
        fake_llm.reply('{"b": 2}', when="why matched")   # requests whose messages contain this text
        fake_llm.reply(lambda body: "...")               # computed from the request body
        fake_llm.mode = "error"       # HTTP 500 on every request
        fake_llm.mode = "timeout"     # sleeps past settings.LLM_TIMEOUT_S (set short by the fixture)
        fake_llm.mode = "malformed"   # 200 with a reply that is not JSON
        fake_llm.mode = "garbage"     # 200 whose HTTP body / SSE frames are not JSON at all (a broken proxy)
        fake_llm.requests             # list of decoded request bodies received
        fake_llm.token_delay_s = 0.05 # pause between streamed tokens (to disconnect mid-stream)
        fake_llm.aborted_streams      # streams the client closed before the last token
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

Reply = str | Callable[[dict[str, Any]], str]


class FakeLLM:
    def __init__(self, *, model: str = "fake-model", timeout_sleep_s: float = 3.0) -> None:
        self.model = model
        self.mode = "ok"  # ok | error | timeout | malformed | garbage
        self.timeout_sleep_s = timeout_sleep_s
        self.token_delay_s = 0.0
        self.aborted_streams = 0
        self.tokens_sent = 0
        self.requests: list[dict[str, Any]] = []
        self._rules: list[tuple[str | None, Reply]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- programming ---------------------------------------------------------
    def reply(self, reply: Reply, *, when: str | None = None) -> None:
        """Add a reply; the newest matching rule wins. `when` matches any message's text (case-insensitive)."""
        with self._lock:
            self._rules.insert(0, (when.lower() if when else None, reply))

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
            self.requests.clear()
            self.mode = "ok"

    def _answer(self, body: dict[str, Any]) -> str:
        text = " ".join(str(m.get("content", "")) for m in body.get("messages", [])).lower()
        with self._lock:
            rules = list(self._rules)
        for when, reply in rules:
            if when is None or when in text:
                return reply(body) if callable(reply) else reply
        return "{}"

    # --- lifecycle -----------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self._server is not None, "FakeLLM not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeLLM:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                return

            def _send(self, status: int, payload: bytes, ctype: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, json.dumps({"object": "list", "data": [
                        {"id": fake.model, "object": "model", "owned_by": "fake"}]}).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._send(400, b'{"error": {"message": "bad json"}}')
                    return
                with fake._lock:
                    fake.requests.append(body)
                    mode = fake.mode
                if mode == "error":
                    self._send(500, b'{"error": {"message": "internal error", "type": "server_error"}}')
                    return
                if mode == "timeout":
                    time.sleep(fake.timeout_sleep_s)
                if mode == "garbage":
                    if body.get("stream"):
                        self.send_response(200)
                        self.send_header("Content-Type", "text/event-stream")
                        self.send_header("Connection", "close")
                        self.end_headers()
                        self.close_connection = True
                        self.wfile.write(b"data: {oops this is not json\n\n")
                        self.wfile.flush()
                    else:
                        self._send(200, b"<html>502 bad gateway</html>")
                    return
                content = "this is {not json" if mode == "malformed" else fake._answer(body)
                if body.get("stream"):
                    self._stream(content)
                else:
                    self._send(200, json.dumps(_completion(fake.model, content)).encode())

            def _stream(self, content: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for i, tok in enumerate(_tokens(content)):
                        if i and fake.token_delay_s:
                            time.sleep(fake.token_delay_s)
                        chunk = _chunk(fake.model, tok, first=(i == 0))
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                        self.wfile.flush()
                        with fake._lock:
                            fake.tokens_sent += 1
                    self.wfile.write(f"data: {json.dumps(_chunk(fake.model, None, finish=True))}\n\n".encode())
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    with fake._lock:
                        fake.aborted_streams += 1

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _tokens(content: str) -> list[str]:
    """Split into word-ish tokens that concatenate back to the exact content."""
    out, cur = [], ""
    for ch in content:
        cur += ch
        if ch == " ":
            out.append(cur)
            cur = ""
    if cur:
        out.append(cur)
    return out or [""]


def _completion(model: str, content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _chunk(model: str, text: str | None, *, first: bool = False, finish: bool = False) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if first:
        delta["role"] = "assistant"
    if text is not None:
        delta["content"] = text
    return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": "stop" if finish else None}]}


@pytest.fixture
def fake_llm(settings):
    """A started FakeLLM wired into settings (OPENAI_BASE_URL, LLM_MODEL, a 1 s LLM_TIMEOUT_S)."""
    server = FakeLLM().start()
    settings.OPENAI_BASE_URL = server.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.LLM_MODEL = server.model
    settings.LLM_TIMEOUT_S = 1.0
    server.timeout_sleep_s = 2.5
    yield server
    server.stop()
