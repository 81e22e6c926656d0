"""A loopback mock of the OpenAI Responses API (``POST /v1/responses`` over SSE) for real agent
programs in tests: the bundled ``codex`` (through a custom model provider with ``base_url``) and any
ACP agent built on it.

Adapted from shared/notes/mocks/mock_responses.py (observed with codex 0.171 and the SDK's 0.163).
It runs in-process on a free port (``with MockResponses() as mock:``) or as a subprocess
(``python tests/mocks/mock_responses.py [PORT]``; it prints ``listening <base_url>`` first).

Answers are scripted per prompt. The *prompt* is the text of the last user message of a request
(codex resends the whole conversation and its own instructions on every request, so earlier text
never decides the answer). The first rule whose regular expression is found in the prompt answers;
without a matching rule the default policy answers:

- a request with ``text.format`` of type ``json_schema`` gets JSON built from the schema (strings
  ``"<token>-structured"``, numbers 1, booleans true, arrays of one item, every property present);
- a prompt with ``ECHO:<token>`` gets ``<token>-done``;
- anything else gets ``mock final answer``.

:class:`Reply` says what to answer: text, a JSON value (serialised as the message text, which is
how a strict ``json_schema`` answer arrives), an HTTP error status, a delay, or ``hold`` (keep the
request open until :meth:`MockResponses.release` or :meth:`MockResponses.stop`: cancellation tests).
``auth_error = True`` answers every request with 401, the way the OpenAI API refuses a bad key.

Every wait here is bounded; no test needs to sleep: :meth:`MockResponses.wait_for` blocks on a
condition variable until the n-th request arrived.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mocks.base import UNSET, MockHandler, MockModelServer, fill, openai_error, reply_text, tokens_of

__all__ = ["MockResponses", "Received", "Reply", "fill", "last_user_text"]


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    ``text``: the assistant message. ``json``: any JSON value sent as the message text (compact).
    ``echo``: answer with the prompt itself. ``status``: an HTTP error status (``message`` is the
    error text, ``code`` the OpenAI error code, ``error_type`` its ``type``, ``error_fields`` more
    fields of the error object such as ``resets_in_seconds``, ``headers`` extra response headers such
    as ``retry-after``). ``delay_s``: wait before answering (bounded by
    :meth:`MockResponses.stop`). ``hold``: keep the request open until released. ``tokens``:
    ``(input, output)`` usage reported in ``response.completed``. ``function_call``: ``(name,
    arguments, namespace)`` — answer with a ``function_call`` output item calling that tool (an MCP
    server's tools arrive in a ``namespace`` tool; ``None`` for a top-level one); the rule usually
    answers the follow-up request, which carries :attr:`Received.function_outputs`, with text.
    """

    text: str | None = None
    json: Any = UNSET
    echo: bool = False
    status: int = 200
    message: str = "mock error"
    code: str | None = None
    error_type: str = "invalid_request_error"
    error_fields: tuple[tuple[str, Any], ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0
    hold: bool = False
    tokens: tuple[int, int] = (10, 5)
    function_call: tuple[str, Mapping[str, Any], str | None] | None = None


@dataclass(frozen=True)
class Received:
    """A request the mock received: ``prompt`` (last user message), ``thread_prompt`` (the first
    prompt of its codex thread: a schema re-ask's prompt is the engine's feedback), ``schema`` (the strict
    ``json_schema`` sent, or ``None``), ``thread_id``/``turn_id`` from codex's turn metadata."""

    n: int
    path: str
    prompt: str
    thread_prompt: str
    schema: Mapping[str, Any] | None
    thread_id: str | None
    turn_id: str | None
    model: str | None
    body: Mapping[str, Any] = field(repr=False)

    @property
    def function_outputs(self) -> list[Mapping[str, Any]]:
        """The ``function_call_output`` items of the request's input (tool results codex sends back)."""
        inp = self.body.get("input")
        return [
            i
            for i in (inp if isinstance(inp, list) else [])
            if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]


def last_user_text(body: Mapping[str, Any]) -> str:
    """The text of the last ``role: user`` message of a Responses request (its prompt)."""
    inp = body.get("input")
    if isinstance(inp, str):
        return inp
    last = ""
    for item in inp or []:
        if not isinstance(item, dict) or item.get("role") != "user":
            continue
        content = item.get("content")
        if isinstance(content, str):
            last = content
        elif isinstance(content, list):
            last = "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and "text" in b)
    return last


class MockResponses(MockModelServer[Received, Reply]):
    """The mock server. Use as a context manager, or :meth:`start` / :meth:`stop`.

    ``on(pattern, reply)`` adds a rule (a regex searched in the prompt; ``reply`` a :class:`Reply`
    or a function of :class:`Received` returning one); ``default`` replaces the default policy.
    """

    name = "mock-responses"

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(_Handler, host, port)
        self._thread_prompts: dict[str, str] = {}
        self.default: Reply | Callable[[Received], Reply] | None = None
        self.base_delay_s = 0.0  # added to every answer (benchmarks: a model that takes time)
        self.in_flight = 0
        self.peak_in_flight = 0

    def codex_config(self, codex_home: Path, *, model: str = "mock-model") -> Path:
        """Write ``config.toml`` into ``codex_home`` pointing codex at this mock (no retries)."""
        codex_home.mkdir(parents=True, exist_ok=True)
        path = codex_home / "config.toml"
        path.write_text(
            f'model = "{model}"\n'
            'model_provider = "mock"\n'
            'approval_policy = "never"\n'
            'sandbox_mode = "read-only"\n'
            "\n[model_providers.mock]\n"
            'name = "Mock Responses"\n'
            f'base_url = "{self.base_url}"\n'
            'wire_api = "responses"\n'
            'env_key = "MOCK_API_KEY"\n'
            "request_max_retries = 0\n"
            "stream_max_retries = 0\n"
        )
        return path

    # -- answering (handler threads) ---------------------------------------------------------
    def _record(self, path: str, body: Mapping[str, Any], headers: Mapping[str, str]) -> Received:
        fmt = (body.get("text") or {}).get("format") or {}
        meta: dict[str, Any] = {}
        try:
            meta = json.loads(headers.get("x-codex-turn-metadata", "") or "{}")
        except ValueError:
            meta = {}
        prompt = last_user_text(body)
        thread = meta.get("thread_id")

        def build(n: int) -> Received:
            if isinstance(thread, str):
                self._thread_prompts.setdefault(thread, prompt)
            return Received(
                n=n,
                path=path,
                prompt=prompt,
                thread_prompt=self._thread_prompts.get(thread, prompt) if isinstance(thread, str) else prompt,
                schema=fmt.get("schema") if fmt.get("type") == "json_schema" else None,
                thread_id=meta.get("thread_id"),
                turn_id=meta.get("turn_id"),
                model=body.get("model"),
                body=body,
            )

        return self.record(build)

    def rule_text(self, rec: Received) -> str:
        return rec.thread_prompt

    def auth_reply(self) -> Reply:
        return Reply(
            status=401,
            message="Incorrect API key provided: sk-mock***. You can find your API key at the dashboard.",
            code="invalid_api_key",
        )

    def default_reply(self, rec: Received) -> Reply:
        if self.default is not None:
            return self.default(rec) if callable(self.default) else self.default
        tok, echoed = tokens_of(rec.prompt)
        if rec.schema is not None:
            return Reply(json=fill(rec.schema, tok))
        return Reply(text=f"{tok}-done" if echoed else "mock final answer")

    def _ids(self) -> tuple[str, str]:
        n = self.next_id()
        return f"resp_mock{n}", f"msg_mock{n}"

    def _enter(self) -> None:
        with self._cond:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._cond:
            self.in_flight -= 1


class _Handler(MockHandler):
    def do_GET(self) -> None:
        if self.path.split("?")[0].endswith("/models"):
            return self.send_json(200, {"object": "list", "data": [], "models": []})
        self.send_json(404, {"error": {"message": "mock 404"}})

    def do_POST(self) -> None:
        body = self.read_body()
        if not self.path_only.endswith("/responses"):
            return self.send_json(404, {"error": {"message": "mock 404"}})
        mock = self.mock
        rec = mock._record(self.path, body, {k.lower(): v for k, v in self.headers.items()})
        mock._enter()
        try:
            reply = mock.choose(rec)
            mock.hold(reply.hold, reply.delay_s + mock.base_delay_s)
            if reply.status != 200:
                return self.send_json(
                    reply.status,
                    {
                        "error": {
                            **openai_error(reply.message, reply.code)["error"],
                            "type": reply.error_type,
                            **dict(reply.error_fields),
                        }
                    },
                    reply.headers,
                )
            if reply.function_call is not None:
                self._stream_call(reply.function_call, reply.tokens)
            else:
                self._stream(reply_text(reply, rec.prompt), reply.tokens)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            mock._leave()
        self.close_connection = True

    def _stream_call(self, call: tuple[str, Mapping[str, Any], str | None], tokens: tuple[int, int]) -> None:
        rid, mid = self.mock._ids()
        name, arguments, namespace = call
        item: dict[str, Any] = {
            "type": "function_call",
            "id": mid,
            "call_id": f"call_{mid}",
            "name": name,
            "arguments": json.dumps(dict(arguments)),
            "status": "completed",
        }
        if namespace is not None:
            item["namespace"] = namespace
        self._events(rid, [item], tokens)

    def _events(self, rid: str, items: list[dict[str, Any]], tokens: tuple[int, int]) -> None:
        self.start_sse()
        usage = {
            "input_tokens": tokens[0],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": tokens[1],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens[0] + tokens[1],
        }
        events: list[dict[str, Any]] = [{"type": "response.created", "response": {"id": rid}}]
        for index, item in enumerate(items):
            events.append({"type": "response.output_item.added", "output_index": index, "item": item})
            events.append({"type": "response.output_item.done", "output_index": index, "item": item})
        events.append({"type": "response.completed", "response": {"id": rid, "usage": usage}})
        for data in events:
            self.sse(data["type"], data)

    def _stream(self, answer: str, tokens: tuple[int, int]) -> None:
        rid, mid = self.mock._ids()
        self.start_sse()

        def event(data: dict[str, Any]) -> None:
            self.sse(data["type"], data)

        item = {
            "type": "message",
            "role": "assistant",
            "id": mid,
            "content": [{"type": "output_text", "text": answer, "annotations": []}],
        }
        event({"type": "response.created", "response": {"id": rid}})
        event({"type": "response.output_item.added", "output_index": 0, "item": {**item, "content": []}})
        event(
            {
                "type": "response.output_text.delta",
                "item_id": mid,
                "output_index": 0,
                "content_index": 0,
                "delta": answer,
            }
        )
        event({"type": "response.output_item.done", "output_index": 0, "item": item})
        usage = {
            "input_tokens": tokens[0],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": tokens[1],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens[0] + tokens[1],
        }
        event({"type": "response.completed", "response": {"id": rid, "usage": usage}})


if __name__ == "__main__":  # pragma: no cover - cd tests && python -m mocks.mock_responses [PORT] [DELAY_MS]
    server = MockResponses(port=int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    server.base_delay_s = float(sys.argv[2]) / 1000 if len(sys.argv) > 2 else 0.0
    server.start()
    print(f"listening {server.base_url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()
