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

import itertools
import json
import re
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["MockResponses", "Received", "Reply", "last_user_text"]

_UNSET: Any = object()
HOLD_LIMIT_S = 120.0  # a held request is answered with an error after this long at most


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
    json: Any = _UNSET
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


def fill(schema: Mapping[str, Any], tok: str) -> Any:
    """A value of ``schema`` (objects get every property): the default structured answer."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        return {k: fill(v, tok) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [fill(schema.get("items", {}), tok)]
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return tok + "-structured"


class MockResponses:
    """The mock server. Use as a context manager, or :meth:`start` / :meth:`stop`.

    ``on(pattern, reply)`` adds a rule (a regex searched in the prompt; ``reply`` a :class:`Reply`
    or a function of :class:`Received` returning one); ``default`` replaces the default policy.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = ThreadingHTTPServer((host, port), _Handler)
        self._server.daemon_threads = True
        self._server.mock = self  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None
        self._rules: list[tuple[re.Pattern[str], Reply | Callable[[Received], Reply], bool]] = []
        self._thread_prompts: dict[str, str] = {}
        self.default: Reply | Callable[[Received], Reply] | None = None
        self.auth_error = False
        self.base_delay_s = 0.0  # added to every answer (benchmarks: a model that takes time)
        self.received: list[Received] = []
        self._cond = threading.Condition()
        self._released = threading.Event()
        self._stopping = threading.Event()
        self._counter = itertools.count(1)
        self.in_flight = 0
        self.peak_in_flight = 0

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> MockResponses:
        self._thread = threading.Thread(target=self._server.serve_forever, name="mock-responses", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._released.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> MockResponses:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting ---------------------------------------------------------------------------
    def on(
        self, pattern: str, reply: Reply | Callable[[Received], Reply], *, whole_thread: bool = False
    ) -> None:
        """Answer prompts where ``pattern`` is found with ``reply``. ``whole_thread``: match the
        thread's first prompt instead, so later turns of that thread (re-asks) answer the same."""
        self._rules.append((re.compile(pattern), reply, whole_thread))

    def release(self) -> None:
        """Let every held request (and every later ``hold`` reply) answer at once."""
        self._released.set()

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        """Block until ``count`` requests arrived (``TimeoutError`` after ``timeout`` s)."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.received) >= count, timeout=timeout):
                raise TimeoutError(
                    f"the mock received {len(self.received)} of {count} requests in {timeout} s"
                )
            return list(self.received)

    def wait_for_prompt(self, pattern: str, timeout: float = 30.0) -> Received:
        """Block until a request whose prompt matches ``pattern`` arrived; return the first one."""
        regex = re.compile(pattern)

        def found() -> Received | None:
            return next((r for r in self.received if regex.search(r.prompt)), None)

        with self._cond:
            if not self._cond.wait_for(lambda: found() is not None, timeout=timeout):
                raise TimeoutError(f"no request matching {pattern!r} reached the mock in {timeout} s")
            hit = found()
            assert hit is not None
            return hit

    def prompts(self) -> list[str]:
        with self._cond:
            return [r.prompt for r in self.received]

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
        with self._cond:
            thread = meta.get("thread_id")
            if isinstance(thread, str):
                self._thread_prompts.setdefault(thread, prompt)
            rec = Received(
                n=len(self.received) + 1,
                path=path,
                prompt=prompt,
                thread_prompt=self._thread_prompts.get(thread, prompt) if isinstance(thread, str) else prompt,
                schema=fmt.get("schema") if fmt.get("type") == "json_schema" else None,
                thread_id=meta.get("thread_id"),
                turn_id=meta.get("turn_id"),
                model=body.get("model"),
                body=body,
            )
            self.received.append(rec)
            self._cond.notify_all()
        return rec

    def _choose(self, rec: Received) -> Reply:
        if self.auth_error:
            return Reply(
                status=401,
                message="Incorrect API key provided: sk-mock***. You can find your API key at the dashboard.",
                code="invalid_api_key",
            )
        for pattern, reply, whole_thread in self._rules:
            if pattern.search(rec.thread_prompt if whole_thread else rec.prompt):
                return reply(rec) if callable(reply) else reply
        if self.default is not None:
            return self.default(rec) if callable(self.default) else self.default
        toks = re.findall(r"ECHO:([A-Za-z0-9_-]+)", rec.prompt)
        tok = toks[-1] if toks else "mock"
        if rec.schema is not None:
            return Reply(json=fill(rec.schema, tok))
        return Reply(text=f"{tok}-done" if toks else "mock final answer")

    def _wait(self, reply: Reply) -> None:
        if reply.hold:
            self._released.wait(HOLD_LIMIT_S)
        elif reply.delay_s + self.base_delay_s > 0:
            self._stopping.wait(reply.delay_s + self.base_delay_s)

    def _ids(self) -> tuple[str, str]:
        n = next(self._counter)
        return f"resp_mock{n}", f"msg_mock{n}"

    def _enter(self) -> None:
        with self._cond:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._cond:
            self.in_flight -= 1


def _answer_text(reply: Reply, rec: Received) -> str:
    if reply.json is not _UNSET:
        return json.dumps(reply.json, separators=(",", ":"))
    if reply.echo:
        return rec.prompt
    return reply.text if reply.text is not None else "mock final answer"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ThreadingHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def mock(self) -> MockResponses:
        return self.server.mock  # type: ignore[attr-defined,no-any-return]

    def _json(self, code: int, obj: Any, headers: tuple[tuple[str, str], ...] = ()) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.split("?")[0].endswith("/models"):
            return self._json(200, {"object": "list", "data": [], "models": []})
        self._json(404, {"error": {"message": "mock 404"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0) or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        if not self.path.split("?")[0].endswith("/responses"):
            return self._json(404, {"error": {"message": "mock 404"}})
        mock = self.mock
        rec = mock._record(self.path, body, {k.lower(): v for k, v in self.headers.items()})
        mock._enter()
        try:
            reply = mock._choose(rec)
            mock._wait(reply)
            if reply.status != 200:
                return self._json(
                    reply.status,
                    {
                        "error": {
                            "message": reply.message,
                            "type": reply.error_type,
                            "code": reply.code,
                            **dict(reply.error_fields),
                        }
                    },
                    reply.headers,
                )
            if reply.function_call is not None:
                self._stream_call(reply.function_call, reply.tokens)
            else:
                self._stream(_answer_text(reply, rec), reply.tokens)
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
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
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
            self.wfile.write(f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def _stream(self, answer: str, tokens: tuple[int, int]) -> None:
        rid, mid = self.mock._ids()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()

        def event(data: dict[str, Any]) -> None:
            self.wfile.write(f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

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


if __name__ == "__main__":  # pragma: no cover - python tests/mocks/mock_responses.py [PORT] [DELAY_MS]
    server = MockResponses(port=int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    server.base_delay_s = float(sys.argv[2]) / 1000 if len(sys.argv) > 2 else 0.0
    server.start()
    print(f"listening {server.base_url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()
