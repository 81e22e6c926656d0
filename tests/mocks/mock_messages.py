"""A loopback mock of the Anthropic Messages API (``POST /v1/messages``, SSE or JSON) for the real
Claude Code CLI in tests (``claude-agent-sdk``'s bundled ``claude`` with ``ANTHROPIC_BASE_URL``).

Adapted from shared/oracle/mock_model.py (ours), made scriptable per prompt and run in-process on a
free port: ``with MockMessages() as mock:``.

The *prompt* of a request is the text of its last user message that has text, without Claude
Code's ``<system-reminder>`` blocks (a follow-up request after a tool result answers by the same
rule as its turn; a resumed session's new turn by its own prompt). The first rule whose regular expression is found in
the prompt answers; without a matching rule the default policy answers:

- when the ``StructuredOutput`` tool is offered (a ``--json-schema`` call): a ``StructuredOutput``
  tool_use with JSON built from the tool's input schema, then ``done`` once the tool result came back;
- a prompt with ``ECHO:<token>`` gets ``<token>-done``;
- anything else gets ``mock final answer``.

:class:`Reply` says what to answer: text, a JSON value (a ``StructuredOutput`` tool_use when the tool
is offered, else the JSON as text), a call of any offered tool (``tool_use``), an HTTP error status
with an Anthropic error body, or ``hold``
(keep the request open until :meth:`MockMessages.release` or :meth:`MockMessages.stop`).
``auth_error = True`` answers every request with 401 ``authentication_error``.

Requests that are not a conversation turn (``count_tokens``, GETs, requests offering no tools such
as the session-title request) are answered and not recorded.
Every wait is bounded; :meth:`MockMessages.wait_for_prompt` blocks on a condition variable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mocks.base import UNSET, MockHandler, MockModelServer, fill, reply_text, tokens_of

__all__ = ["MockMessages", "Received", "Reply", "prompt_of"]
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error"}


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    ``text``: the assistant message. ``json``: a value sent as a ``StructuredOutput`` tool_use when
    that tool is offered, else as compact JSON text. ``status``: an HTTP error status (``message`` is
    the error text). ``hold``: keep the request open until released. ``tokens``: ``(input, output,
    cache_read, cache_write)`` usage of the answer. ``tool``: ``(name, input)`` of a tool_use to answer
    with (e.g. ``("Bash", {"command": "touch a"})``); the follow-up request carrying its tool result is
    answered with ``text``.
    """

    text: str | None = None
    json: Any = UNSET
    status: int = 200
    message: str = "mock error"
    hold: bool = False
    tokens: tuple[int, int, int, int] = (10, 5, 0, 0)
    tool: tuple[str, dict[str, Any]] | None = None


@dataclass(frozen=True)
class Received:
    """A conversation request the mock received: its ``prompt`` (the turn's user text), ``model``,
    ``tools`` (names offered), whether the last message carries a ``tool_result`` and the body."""

    n: int
    prompt: str
    model: str | None
    tools: tuple[str, ...]
    after_tool_result: bool
    body: Mapping[str, Any] = field(repr=False)

    @property
    def tool_results(self) -> list[str]:
        """The text of each tool_result in the request's last message (what a tool answered)."""
        messages = self.body.get("messages") or []
        last = messages[-1] if messages else {}
        content = last.get("content") if isinstance(last, dict) else None
        out = []
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                out.append(inner if isinstance(inner, str) else "\n".join(_texts(inner)))
        return out

    @property
    def structured_tool(self) -> Mapping[str, Any] | None:
        for tool in self.body.get("tools") or []:
            if isinstance(tool, dict) and tool.get("name") == "StructuredOutput":
                return tool
        return None


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [str(b.get("text", "")) for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]


def prompt_of(body: Mapping[str, Any]) -> str:
    """The text of the last user message that has any, without ``<system-reminder>`` blocks (a
    message carrying only tool results is passed over, so a follow-up after a tool call keeps its
    turn's prompt; a resumed session's new turn has its own)."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            texts = [
                t for t in _texts(message.get("content")) if not t.lstrip().startswith("<system-reminder>")
            ]
            if any(t.strip() for t in texts):
                return "\n".join(texts).strip()
    return ""


class MockMessages(MockModelServer[Received, Reply]):
    """The mock server. Use as a context manager, or :meth:`start` / :meth:`stop`.

    ``on(pattern, reply)`` adds a rule (a regex searched in the prompt; ``reply`` a :class:`Reply`
    or a function of :class:`Received` returning one).
    """

    name = "mock-messages"
    path_prefix = ""  # ANTHROPIC_BASE_URL: the CLI appends /v1/messages

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(_Handler, host, port)

    # -- answering (handler threads) ---------------------------------------------------------
    def _record(self, body: Mapping[str, Any]) -> Received:
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        content = last.get("content") if isinstance(last, dict) else None
        after = isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        )
        tools = tuple(str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict))
        return self.record(
            lambda n: Received(
                n=n,
                prompt=prompt_of(body),
                model=body.get("model"),
                tools=tools,
                after_tool_result=after,
                body=body,
            )
        )

    def auth_reply(self) -> Reply:
        return Reply(status=401, message="invalid x-api-key")

    def default_reply(self, rec: Received) -> Reply:
        tok, echoed = tokens_of(rec.prompt)
        tool = rec.structured_tool
        if tool is not None:
            return Reply(json=fill(tool.get("input_schema") or {}, tok))
        return Reply(text=f"{tok}-done" if echoed else "mock final answer")

    def _id(self, prefix: str) -> str:
        return f"{prefix}_mock{self.next_id()}"


class _Handler(MockHandler):
    def _json(self, code: int, obj: Any) -> None:
        self.send_json(code, obj, (("x-should-retry", "false"),) if code >= 400 else ())

    def do_GET(self) -> None:
        self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "mock"}})

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        body = self.read_body()
        path = self.path_only
        if path.endswith("/count_tokens"):
            return self._json(200, {"input_tokens": 42})
        if not path.endswith("/v1/messages"):
            return self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "mock"}})
        mock = self.mock
        if not body.get("tools"):
            # An auxiliary request (Claude Code's session title, …): not a conversation turn.
            if mock.auth_error:
                return self._json(
                    401,
                    {
                        "type": "error",
                        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
                    },
                )
            return self._answer(body, ("text", "Mock title"), (0, 0, 0, 0))
        rec = mock._record(body)
        reply = mock.choose(rec)
        try:
            mock.hold(reply.hold)
            if reply.status != 200:
                kind = _ERROR_TYPES.get(reply.status, "api_error")
                return self._json(
                    reply.status, {"type": "error", "error": {"type": kind, "message": reply.message}}
                )
            if reply.tool is not None and not rec.after_tool_result:
                return self._answer(body, ("tool", reply.tool), reply.tokens)
            if reply.json is not UNSET and rec.structured_tool is not None:
                if rec.after_tool_result:
                    return self._answer(body, ("text", "done"), (0, 0, 0, 0))
                return self._answer(body, ("tool", ("StructuredOutput", reply.json)), reply.tokens)
            self._answer(body, ("text", reply_text(reply, rec.prompt)), reply.tokens)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def _answer(
        self, body: Mapping[str, Any], what: tuple[str, Any], tokens: tuple[int, int, int, int]
    ) -> None:
        model = body.get("model", "mock")
        mid = self.mock._id("msg")
        kind, payload = what
        if kind == "text":
            block: dict[str, Any] = {"type": "text", "text": payload}
            stop = "end_turn"
        else:
            name, value = payload
            block = {"type": "tool_use", "id": self.mock._id("toolu"), "name": name, "input": value}
            stop = "tool_use"
        usage = {
            "input_tokens": tokens[0],
            "output_tokens": tokens[1],
            "cache_read_input_tokens": tokens[2],
            "cache_creation_input_tokens": tokens[3],
        }
        if not body.get("stream"):
            return self._json(
                200,
                {
                    "id": mid,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [block],
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                },
            )
        self.start_sse()
        sse = self.sse

        start = {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": 0},
        }
        sse("message_start", {"type": "message_start", "message": start})
        if kind == "text":
            sse(
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            )
            delta = {"type": "text_delta", "text": payload}
        else:
            sse(
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {**block, "input": {}}},
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
        sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": tokens[1]},
            },
        )
        sse("message_stop", {"type": "message_stop"})
