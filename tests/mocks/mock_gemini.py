"""A loopback mock of the Gemini API (``POST /v1beta/models/{model}:generateContent`` and
``:streamGenerateContent?alt=sse``) for real agent programs that speak it: the Gemini CLI, pointed
at it with ``GOOGLE_GEMINI_BASE_URL`` and any ``GEMINI_API_KEY``.

It runs in-process on a free port (``with MockGemini() as mock:``). The *prompt* is the text of the
last user turn of a request. The first rule whose regular expression is found in it answers;
without one, a request asking for JSON (``generationConfig.responseJsonSchema``,
``responseSchema`` or ``responseMimeType = application/json``: the CLI's model-routing classifier)
gets JSON built from that schema (a schema-less one ``{}``), a prompt with ``ECHO:<token>`` gets
``<token>-done``, anything else ``mock final answer``. ``auth_error = True`` answers 400
``API_KEY_INVALID`` the way the Gemini API refuses a bad key. Every wait is bounded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mocks.base import UNSET, MockHandler, MockModelServer, fill, reply_text, tokens_of

__all__ = ["MockGemini", "Received", "Reply"]


@dataclass(frozen=True)
class Reply:
    """One scripted answer: ``text``, ``json`` (any JSON value sent as the text), ``status`` (an
    HTTP error with ``message`` and the Google error ``reason``), ``hold``, ``delay_s`` and the
    ``tokens`` = (prompt, candidates) usage."""

    text: str | None = None
    json: Any = UNSET
    status: int = 200
    message: str = "mock error"
    reason: str = "INTERNAL"
    hold: bool = False
    delay_s: float = 0.0
    tokens: tuple[int, int] = (7, 3)


@dataclass(frozen=True)
class Received:
    """A request: the ``model`` of its path, whether it ``stream``\\ s, the ``prompt`` (last user
    turn), the JSON ``schema`` asked for (``None``: none), the ``api_key`` header and the ``body``."""

    n: int
    model: str
    stream: bool
    prompt: str
    schema: Mapping[str, Any] | None
    api_key: str | None
    body: Mapping[str, Any] = field(repr=False, default_factory=dict)


def last_user_text(body: Mapping[str, Any]) -> str:
    """The text parts of the last ``user`` turn of ``contents``, joined by newlines."""
    for turn in reversed(body.get("contents") or []):
        if isinstance(turn, Mapping) and turn.get("role", "user") == "user":
            texts = [p["text"] for p in turn.get("parts") or [] if isinstance(p, Mapping) and "text" in p]
            if texts:
                return "\n".join(texts)
    return ""


class MockGemini(MockModelServer[Received, Reply]):
    """The Gemini API mock (module docstring); :attr:`base_url` is what ``GOOGLE_GEMINI_BASE_URL``
    takes (the SDK appends ``/v1beta/models/…``)."""

    name = "mock-gemini"
    path_prefix = ""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(_Handler, host, port)

    def _record(self, path: str, body: Mapping[str, Any], api_key: str | None) -> Received:
        config = body.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        if schema is None and config.get("responseMimeType") == "application/json":
            schema = {}
        model = path.split("/models/", 1)[-1].split(":", 1)[0]
        return self.record(
            lambda n: Received(
                n, model, ":streamGenerateContent" in path, last_user_text(body), schema, api_key, body
            )
        )

    def auth_reply(self) -> Reply:
        return Reply(
            status=400, message="API key not valid. Please pass a valid API key.", reason="API_KEY_INVALID"
        )

    def default_reply(self, rec: Received) -> Reply:
        token, found = tokens_of(rec.prompt)
        if rec.schema is not None:
            return Reply(json=fill(rec.schema, token))
        return Reply(text=f"{token}-done" if found else "mock final answer")


class _Handler(MockHandler):
    def do_GET(self) -> None:
        self.send_json(404, {"error": {"code": 404, "message": "mock 404", "status": "NOT_FOUND"}})

    def do_POST(self) -> None:
        body = self.read_body()
        if "/models/" not in self.path_only or ":" not in self.path_only.rsplit("/", 1)[-1]:
            return self.send_json(404, {"error": {"code": 404, "message": "mock 404", "status": "NOT_FOUND"}})
        if self.path_only.endswith(":countTokens"):
            return self.send_json(200, {"totalTokens": 7})
        mock: MockGemini = self.mock
        rec = mock._record(self.path, body, self.headers.get("x-goog-api-key"))
        reply = mock.choose(rec)
        mock.hold(reply.hold, reply.delay_s)
        try:
            if reply.status != 200:
                error = {
                    "code": reply.status,
                    "message": reply.message,
                    "status": "INVALID_ARGUMENT" if reply.status == 400 else "INTERNAL",
                    "details": [
                        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reply.reason}
                    ],
                }
                return self.send_json(reply.status, {"error": error})
            chunk = {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": reply_text(reply, rec.prompt)}]},
                        "finishReason": "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": {
                    "promptTokenCount": reply.tokens[0],
                    "candidatesTokenCount": reply.tokens[1],
                    "totalTokenCount": sum(reply.tokens),
                },
                "modelVersion": rec.model,
            }
            if not rec.stream:
                return self.send_json(200, chunk)
            self.start_sse()
            self.wfile.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True
