"""A loopback mock of an OpenAI-compatible endpoint for the ``openai`` provider's tests: Chat
Completions (``POST /v1/chat/completions``) and the Responses API without streaming
(``POST /v1/responses``), both answered with plain JSON (no SSE).

It runs in-process on a free port (``with MockChat() as mock:``). Answers are scripted per prompt,
the text of the last user message: the first rule whose regular expression is found in it answers;
without a match, a request carrying a JSON schema (``response_format`` or ``text.format``) gets JSON
built from that schema (strings ``"<token>-structured"`` where the prompt has ``ECHO:<token>``),
a prompt with ``ECHO:<token>`` gets ``<token>-done``, anything else ``mock final answer``.

:class:`Reply` says what to answer: text, a JSON value (serialised as the message content), a
refusal, an HTTP error status, a delay, ``hold`` (keep the request open until :meth:`release`:
cancellation tests) and the usage to report. ``auth_error = True`` answers 401 the way the OpenAI
API refuses a bad key. Every wait is bounded; :meth:`MockChat.wait_for_prompt` blocks on a
condition variable, so no test sleeps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mocks.base import UNSET, MockHandler, MockModelServer, fill, openai_error, reply_text, tokens_of

__all__ = ["MockChat", "Received", "Reply"]


@dataclass(frozen=True)
class Reply:
    """One scripted answer: ``text``, ``json`` (any JSON value sent as the content), ``echo`` (the
    prompt itself), ``refusal`` (a refusal message instead of content), ``status`` (an HTTP error
    with ``message`` and the OpenAI error ``code``, e.g. ``insufficient_quota``), ``headers`` (extra
    response headers, e.g. ``(("retry-after", "2"),)``), ``delay_s``, ``hold``, ``tokens`` = (prompt,
    completion, cached)."""

    text: str | None = None
    json: Any = UNSET
    echo: bool = False
    refusal: str | None = None
    status: int = 200
    message: str = "mock error"
    code: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0
    hold: bool = False
    tokens: tuple[int, int, int] = (12, 4, 2)


@dataclass(frozen=True)
class Received:
    """A request: ``api`` (``chat`` or ``responses``), the ``prompt`` (last user message), the
    JSON ``schema`` asked for (or ``None``), the ``model``, the ``authorization`` header and the
    whole ``body``."""

    n: int
    api: str
    prompt: str
    schema: Mapping[str, Any] | None
    model: str | None
    authorization: str | None
    body: Mapping[str, Any] = field(repr=False)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def last_prompt(body: Mapping[str, Any]) -> str:
    """The last user message of a Chat Completions (``messages``) or Responses (``input``) body."""
    items = body.get("messages")
    if items is None:
        items = body.get("input")
        if isinstance(items, str):
            return items
    last = ""
    for item in items or []:
        if isinstance(item, dict) and item.get("role") == "user":
            last = _text(item.get("content"))
    return last


def _schema(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        inner = fmt.get("json_schema") or {}
        return inner.get("schema") if isinstance(inner, dict) else None
    text = body.get("text")
    if isinstance(text, dict):
        tf = text.get("format") or {}
        if tf.get("type") == "json_schema":
            return tf.get("schema")
    return None


class MockChat(MockModelServer[Received, Reply]):
    """The mock server (module docstring). ``on(pattern, reply)`` adds a rule (``reply``: a
    :class:`Reply` or a function of :class:`Received` returning one)."""

    name = "mock-chat"

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(_Handler, host, port)

    def _record(self, api: str, body: Mapping[str, Any], authorization: str | None) -> Received:
        return self.record(
            lambda n: Received(
                n=n,
                api=api,
                prompt=last_prompt(body),
                schema=_schema(body),
                model=body.get("model"),
                authorization=authorization,
                body=body,
            )
        )

    def auth_reply(self) -> Reply:
        return Reply(status=401, message="Incorrect API key provided: sk-mock***.")

    def default_reply(self, rec: Received) -> Reply:
        tok, echoed = tokens_of(rec.prompt)
        if rec.schema is not None:
            return Reply(json=fill(rec.schema, tok))
        return Reply(text=f"{tok}-done" if echoed else "mock final answer")


def _content(reply: Reply, rec: Received) -> str | None:
    if reply.refusal is not None:
        return None
    return reply_text(reply, rec.prompt)


class _Handler(MockHandler):
    def _json(self, code: int, obj: Any, headers: tuple[tuple[str, str], ...] = ()) -> None:
        if not any(name.lower().startswith("retry-after") for name, _ in headers):
            headers = (("retry-after-ms", "5"), *headers)  # the SDK's retries wait this long, not seconds
        self.send_json(code, obj, headers)

    def do_POST(self) -> None:
        body = self.read_body()
        path = self.path_only
        api = (
            "chat"
            if path.endswith("/chat/completions")
            else "responses"
            if path.endswith("/responses")
            else ""
        )
        if not api:
            return self._json(404, {"error": {"message": "mock 404"}})
        mock = self.mock
        rec = mock._record(api, body, self.headers.get("authorization"))
        reply = mock.choose(rec)
        mock.hold(reply.hold, reply.delay_s)
        n = mock.next_id()
        try:
            if reply.status != 200:
                return self._json(
                    reply.status,
                    openai_error(reply.message, reply.code),
                    reply.headers,
                )
            content = _content(reply, rec)
            prompt_tokens, completion_tokens, cached = reply.tokens
            if api == "chat":
                return self._json(
                    200, _chat(n, rec, content, reply.refusal, prompt_tokens, completion_tokens, cached)
                )
            return self._json(
                200, _response(n, rec, content, reply.refusal, prompt_tokens, completion_tokens, cached)
            )
        except (BrokenPipeError, ConnectionResetError):
            return None


def _chat(
    n: int, rec: Received, content: str | None, refusal: str | None, prompt: int, completion: int, cached: int
) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-mock{n}",
        "object": "chat.completion",
        "created": 0,
        "model": rec.model or "mock-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }


def _response(
    n: int, rec: Received, content: str | None, refusal: str | None, prompt: int, completion: int, cached: int
) -> dict[str, Any]:
    part = (
        {"type": "refusal", "refusal": refusal}
        if refusal is not None
        else {"type": "output_text", "text": content or "", "annotations": []}
    )
    return {
        "id": f"resp_mock{n}",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": rec.model or "mock-model",
        "output": [
            {
                "type": "message",
                "id": f"msg_mock{n}",
                "status": "completed",
                "role": "assistant",
                "content": [part],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        },
    }
