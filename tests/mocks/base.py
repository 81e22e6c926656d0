"""What the three loopback model servers share (:mod:`mocks.mock_chat`, :mod:`mocks.mock_messages`,
:mod:`mocks.mock_responses`): an in-process HTTP server on a free loopback port, prompt rules, the
record of requests received, held and delayed answers, and bounded waits on a condition variable
(no test sleeps to synchronise).

A server subclasses :class:`MockModelServer` with its own ``Reply`` and ``Received`` dataclasses and
its own request handler (a :class:`MockHandler`), and says how a request is recorded and, without a
matching rule, answered by default (:meth:`MockModelServer.default_reply`).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, Protocol, Self, TypeVar

__all__ = [
    "HOLD_LIMIT_S",
    "UNSET",
    "MockHandler",
    "MockModelServer",
    "fill",
    "openai_error",
    "reply_text",
    "tokens_of",
]

UNSET: Any = object()
"""A ``Reply.json`` that was not given (``None`` is a JSON value)."""
HOLD_LIMIT_S = 120.0
"""A held request is answered after this long at most, released or not."""


class _Received(Protocol):
    @property
    def prompt(self) -> str: ...


R = TypeVar("R", bound=_Received)
P = TypeVar("P")
Rule = Callable[[R], P]


def fill(schema: Mapping[str, Any], tok: str) -> Any:
    """A value of ``schema`` (objects get every property; strings ``"<tok>-structured"``, numbers
    1, booleans true, arrays of one item): the default structured answer."""
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


def openai_error(message: str, code: str | None) -> dict[str, Any]:
    """An OpenAI API error body (``{"error": {"message", "type", "code"}}``), as the SDKs read it."""
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


def reply_text(reply: Any, prompt: str) -> str:
    """The text a ``Reply`` answers with: its ``json`` value (compact), the ``prompt`` itself
    (``echo``), its ``text``, else ``"mock final answer"``."""
    if reply.json is not UNSET:
        return json.dumps(reply.json, separators=(",", ":"))
    if getattr(reply, "echo", False):
        return prompt
    return reply.text if reply.text is not None else "mock final answer"


def tokens_of(prompt: str) -> tuple[str, bool]:
    """``(token, found)``: the last ``ECHO:<token>`` of ``prompt`` (``"mock"`` when there is none)."""
    found = re.findall(r"ECHO:([A-Za-z0-9_-]+)", prompt)
    return (found[-1], True) if found else ("mock", False)


class MockModelServer(Generic[R, P]):
    """One loopback model server (``R``: what it records of a request; ``P``: its ``Reply``).

    Use as a context manager, or :meth:`start` / :meth:`stop`. ``on(pattern, reply)`` adds a rule
    (a regex searched in the prompt; ``reply`` a ``Reply`` or a function of the received request
    returning one); the first rule found answers, else :meth:`default_reply`. ``auth_error = True``
    answers every request the way the vendor refuses a bad key (:meth:`auth_reply`).
    """

    name = "mock"
    path_prefix = "/v1"
    """What the base URL ends with (the SDKs append their paths to it)."""

    def __init__(self, handler: type[MockHandler], host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._server.mock = self  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None
        self._rules: list[tuple[re.Pattern[str], P | Rule[R, P], bool]] = []
        self.auth_error = False
        self.received: list[R] = []
        self._cond = threading.Condition()
        self._released = threading.Event()
        self._stopping = threading.Event()
        self._counter = itertools.count(1)

    # -- lifecycle -------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path_prefix}"

    def start(self) -> Self:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name=self.name, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._released.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting -------------------------------------------------------------------------------
    def on(self, pattern: str, reply: P | Rule[R, P], *, whole_thread: bool = False) -> None:
        """Answer prompts where ``pattern`` is found with ``reply``. ``whole_thread``: match what
        :meth:`rule_text` gives for it instead of the prompt (a server that knows conversations)."""
        self._rules.append((re.compile(pattern), reply, whole_thread))

    def release(self) -> None:
        """Let every held request (and every later ``hold`` reply) answer at once."""
        self._released.set()

    def wait_for(self, count: int, timeout: float = 30.0) -> list[R]:
        """Block until ``count`` requests arrived (``TimeoutError`` after ``timeout`` s)."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.received) >= count, timeout=timeout):
                raise TimeoutError(
                    f"the mock received {len(self.received)} of {count} requests in {timeout} s"
                )
            return list(self.received)

    def wait_for_prompt(self, pattern: str, timeout: float = 30.0) -> R:
        """Block until a request whose prompt matches ``pattern`` arrived; return the first one."""
        regex = re.compile(pattern)

        def found() -> R | None:
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

    # -- answering (handler threads) -------------------------------------------------------------
    def record(self, build: Callable[[int], R]) -> R:
        """Record the request ``build(n)`` makes (``n`` counts from 1) and wake the waiters."""
        with self._cond:
            rec = build(len(self.received) + 1)
            self.received.append(rec)
            self._cond.notify_all()
        return rec

    def choose(self, rec: R) -> P:
        """The reply to ``rec``: the auth refusal, else the first matching rule, else the default."""
        if self.auth_error:
            return self.auth_reply()
        for pattern, reply, whole_thread in self._rules:
            if pattern.search(self.rule_text(rec) if whole_thread else rec.prompt):
                return reply(rec) if callable(reply) else reply
        return self.default_reply(rec)

    def rule_text(self, rec: R) -> str:
        """What a ``whole_thread`` rule is matched against (the prompt, unless a server knows more)."""
        return rec.prompt

    def auth_reply(self) -> P:
        raise NotImplementedError

    def default_reply(self, rec: R) -> P:
        raise NotImplementedError

    def hold(self, hold: bool, delay_s: float = 0.0) -> None:
        """Wait as a reply asks: until released (bounded by :data:`HOLD_LIMIT_S`) or ``delay_s``
        (cut short by :meth:`stop`)."""
        if hold:
            self._released.wait(HOLD_LIMIT_S)
        elif delay_s > 0:
            self._stopping.wait(delay_s)

    def next_id(self) -> int:
        return next(self._counter)


class MockHandler(BaseHTTPRequestHandler):
    """The HTTP side every mock shares: quiet logs, the request body, JSON answers."""

    protocol_version = "HTTP/1.1"
    server: ThreadingHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def mock(self) -> Any:
        """The server this request reached."""
        return self.server.mock  # type: ignore[attr-defined]

    @property
    def path_only(self) -> str:
        return self.path.split("?")[0]

    def read_body(self) -> Any:
        """The request's JSON body (``{}`` when it has none or it is not JSON)."""
        length = int(self.headers.get("content-length", 0) or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {}

    def send_json(self, code: int, obj: Any, headers: tuple[tuple[str, str], ...] = ()) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def start_sse(self) -> None:
        """Begin a ``text/event-stream`` answer (the connection closes after it)."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()

    def sse(self, event: str, data: Mapping[str, Any]) -> None:
        self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()
