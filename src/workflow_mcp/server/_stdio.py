"""The stdio transport, answering every line it cannot pass on.

The SDK's ``stdio_server`` parses each stdin line with pydantic's JSON parser and, when that fails,
hands the exception to the session, which logs it and drops the line: a request whose line is not JSON,
holds a lone UTF-16 surrogate escape (``"\\ud800"``, valid JSON with no UTF-8 form) or nests more than
200 levels (the parser's own limit) got no answer at all, and its client waited forever.
:class:`AnsweringStream` wraps the transport's read stream (the SDK itself is not changed): such a line
is parsed again with the standard library, and

- a request holding a lone surrogate, a non-finite number or a value nested deeper than
  :data:`~workflow_mcp.definitions.profile.MAX_VALUE_DEPTH` gets invalid params (-32602) naming the
  rule (``lone-surrogate``, ``non-finite-number``, ``too-deep``);
- a request nested deeper than the parser's 200 levels but within the limit is passed on as parsed;
- a line that is not JSON gets a parse error (-32700, ``id`` null: none can be read), and JSON that is
  not a JSON-RPC message gets invalid request (-32600, with its id when it has one).

Notifications and responses that cannot be used are dropped (JSON-RPC answers neither), with a line
on stderr. The server keeps serving either way.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared._stream_protocols import ReadStream
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from .._nesting import top_level
from ..definitions.profile import MAX_VALUE_DEPTH

__all__ = ["AnsweringStream", "Parsed", "serve_stdio_lines", "too_deep_refusal", "triage"]


async def serve_stdio_lines(lowlevel: Server[Any]) -> None:
    """Serve ``lowlevel`` over the process's stdin/stdout (the SDK's transport), answering the lines
    the transport cannot parse (see the module docstring)."""
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(
            AnsweringStream(read_stream, write_stream.send),
            write_stream,
            lowlevel.create_initialization_options(),
        )


class AnsweringStream:
    """A transport read stream whose unparsable lines are answered through ``reply`` (or passed on
    when they are usable after all) instead of reaching the session as exceptions it drops. Everything
    else, the sender's context (``last_context``) included, is the wrapped stream's."""

    def __init__(
        self, inner: ReadStream[SessionMessage | Exception], reply: Callable[[SessionMessage], Any]
    ) -> None:
        self._inner = inner
        self._reply = reply

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, ValidationError):
                return item
            line = _line_of(item)
            if line is None:
                return item  # not a line the transport read (nothing to answer from)
            usable, answer = triage(line)
            if usable is not None:
                return usable
            if answer is not None:
                await self._reply(answer)

    def __aiter__(self) -> AnsweringStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> AnsweringStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        result: bool | None = await self._inner.__aexit__(*exc)
        return result


@dataclass(frozen=True)
class Parsed:
    """A JSON value pydantic parsed from a line but found no JSON-RPC message in."""

    value: Any


def _line_of(exc: ValidationError) -> str | Parsed | None:
    """The line pydantic could not parse, or the JSON object it parsed but found no JSON-RPC message
    in (the input of a top-level ``missing`` error of some union member), else ``None``."""
    errors = exc.errors(include_url=False)
    for e in errors:
        raw = e.get("input")
        if e["type"] == "json_invalid":
            if isinstance(raw, bytes | bytearray):
                return bytes(raw).decode("utf-8", "replace")
            return raw if isinstance(raw, str) else None
        if e["type"] == "missing" and len(e["loc"]) == 2 and isinstance(raw, dict):
            return Parsed(raw)
        if e["type"] == "model_type" and len(e["loc"]) == 1:
            return Parsed(raw)  # valid JSON, but no object (a batch, a number)
    return None


def triage(line: str | Parsed) -> tuple[SessionMessage | None, SessionMessage | None]:
    """What to do with a line the SDK's parser refused (or the JSON object it read from one):
    ``(message, None)`` to pass it on, ``(None, answer)`` to answer it, ``(None, None)`` to drop it (a
    notification or response)."""
    try:
        value: Any = line.value if isinstance(line, Parsed) else json.loads(line)
    except RecursionError:
        value = (
            top_level(line) if isinstance(line, str) else None
        )  # deeper than Python's parser goes: far past the limit
        if value is None:
            return None, _error(None, PARSE_ERROR, "Parse error: the line is not one JSON value")
        return None, _refusal(value, _too_deep())
    except ValueError as exc:
        return None, _error(None, PARSE_ERROR, f"Parse error: the line is not JSON ({exc})")
    if not isinstance(value, dict):
        return None, _error(None, INVALID_REQUEST, "Invalid request: a JSON-RPC message is one JSON object")
    problem = _problem(value.get("params"))
    if problem is not None:
        return None, _refusal(value, problem)
    try:
        message = jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError as exc:
        return None, _refusal(
            value, (INVALID_REQUEST, f"Invalid request: not a JSON-RPC 2.0 message ({_first(exc)})")
        )
    return SessionMessage(message), None


def _problem(params: Any) -> tuple[int, str] | None:
    """Why a request's ``params`` cannot be used, or ``None``. Every value in ``params`` (a tool's
    ``arguments`` one by one) is bounded like a run's args."""
    values: list[Any] = []
    if isinstance(params, Mapping):
        for key, value in params.items():
            if key == "arguments" and isinstance(value, Mapping):
                values.extend(value.values())
                values.extend(value.keys())
            else:
                values.extend((key, value))
    elif params is not None:
        values.append(params)
    stack = [(v, 1 if isinstance(v, dict | list) else 0) for v in values]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return INVALID_PARAMS, (
                    "Invalid params: the arguments hold a lone UTF-16 surrogate (an unpaired \\uD800-\\uDFFF "
                    "escape), which has no UTF-8 form (rule lone-surrogate); send whole characters"
                )
        elif isinstance(item, float) and (item != item or item in (float("inf"), float("-inf"))):
            return INVALID_PARAMS, (
                "Invalid params: the arguments hold NaN or Infinity, which JSON does not allow "
                "(rule non-finite-number)"
            )
        elif isinstance(item, dict | list):
            if depth > MAX_VALUE_DEPTH:
                return _too_deep()
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((c, depth + 1 if isinstance(c, dict | list) else depth) for c in children)
    return None


def _too_deep() -> tuple[int, str]:
    return INVALID_PARAMS, (
        f"Invalid params: an argument is nested deeper than {MAX_VALUE_DEPTH} levels, the most workflow-mcp "
        "accepts (rule too-deep, MAX_VALUE_DEPTH); flatten it"
    )


def too_deep_refusal(ident: str | int | None, *, http_depth: int) -> dict[str, Any]:
    """The JSON-RPC error (a plain JSON object) answering request ``ident`` whose body nests deeper than
    ``http_depth`` levels, the most the Streamable HTTP transport's JSON reader goes: the same rule
    (too-deep) as on stdio, with both numbers."""
    if isinstance(ident, bool):
        ident = None
    message = (
        f"Invalid params: the request nests arrays and objects deeper than {http_depth} levels (its own "
        "object, params and arguments included), the most the Streamable HTTP transport reads; an "
        f"argument may nest at most {MAX_VALUE_DEPTH} levels over stdio (rule too-deep, MAX_VALUE_DEPTH); "
        "flatten it"
    )
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": INVALID_PARAMS, "message": message}}


def _refusal(value: Any, problem: tuple[int, str]) -> SessionMessage | None:
    """The error answering ``value`` (a request: it has an ``id`` and a ``method``); ``None`` for a
    notification or response, which JSON-RPC never answers."""
    if not isinstance(value, dict) or "id" not in value or value.get("method") is None:
        kind = "notification" if isinstance(value, dict) and "method" in value else "message"
        print(
            f"workflow-mcp: dropped a {kind} that cannot be used: {problem[1]}", file=sys.stderr, flush=True
        )
        return None
    ident = value["id"]
    if not isinstance(ident, str | int) or isinstance(ident, bool):
        ident = None
    return _error(ident, *problem)


def _error(ident: str | int | None, code: int, message: str) -> SessionMessage:
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=ident, error=ErrorData(code=code, message=message)))


def _first(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    if not errors:
        return str(exc)
    e = errors[0]
    return f"{'.'.join(str(p) for p in e['loc']) or 'message'}: {e['msg']}"
