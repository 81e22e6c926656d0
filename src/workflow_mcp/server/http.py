"""Streamable HTTP transport: loopback by default, bearer tokens, Host/Origin checks, one principal
per token, bounded connections.

Tokens come from ``WORKFLOW_MCP_TOKEN`` (comma-separated) or, when that is unset, from the file
``$WORKFLOW_MCP_HOME/http-token`` (one per line), which is generated with 0600 permissions on first
use and refused when others can read it. An entry is ``TOKEN`` or ``NAME=TOKEN``; each token is its
own principal (``http:NAME``, or ``http:`` + a hash prefix of the token) and sees only the runs it
started. Tokens are compared by SHA-256 digest and never logged. A token must carry at least 128 bits
of entropy (:mod:`workflow_mcp.server._tokens`: 32 hex digits or 22 base64url characters, no runs,
repeats or words); two entries with one name, or one token given twice, are refused — either would
merge two clients into one.

What one client may hold is bounded (:class:`HttpLimits`, uvicorn's settings plus a request deadline
uvicorn lacks, and each token's fair share of open requests and sessions kept by
:class:`~workflow_mcp.server._shares.ClientLedger`, 429 beyond it): connections and in-flight requests
beyond ``max_connections`` get 503; a connection that
has not sent a complete request (head and body) within ``header_timeout_s`` (idle, or trickling bytes)
is closed; idle keep-alive connections close after ``keep_alive_s``. The soft limit on
file descriptors is raised to the hard limit at start, and running out of them (``EMFILE``) only pauses
accepting for a second: no per-connection error ends the process.

A WebSocket request is closed (code 1008) before anything sees it: nothing here speaks WebSocket.
Every HTTP request is checked in this order, before the MCP layer sees it:

1. ``Host`` must be one the server answers (:class:`~workflow_mcp.server._hosts.HostRules`: loopback
   names, the bound address, for a wildcard bind the connection's address and the machine's name, and
   ``--allowed-host`` entries) → else 403 ``forbidden_host`` (DNS-rebinding protection);
2. ``Origin``, when present, must be ``http(s)://`` + one of those → else 403 ``forbidden_origin``;
3. ``Authorization: Bearer <token>`` must carry a known token → else 401 with ``WWW-Authenticate``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import secrets
import signal
import socket
import stat
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import pydantic_core
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._nesting import top_level
from ..errors import InvalidInputError
from ._hosts import HostRules
from ._policy import LOCAL, Principal, _write_private
from ._shares import ClientLedger, Shares, fair_share
from ._stdio import too_deep_refusal
from ._tokens import token_problem
from .mcp import PRINCIPAL_SCOPE_KEY, WorkflowMcpServer
from .viewer import COOKIE, TOKEN_CHECK_KEY, VIEWER_BASE, LocalControl, viewer_app

__all__ = [
    "HttpGuard",
    "HttpLimits",
    "TokenSet",
    "ViewerSessions",
    "load_tokens",
    "raise_fd_limit",
    "serve_http",
    "serve_viewer",
    "with_viewer",
]

DEFAULT_MAX_SESSIONS = 256
"""Handshake-era Streamable HTTP sessions one server holds unless told otherwise (``--max-sessions``)."""
DEFAULT_SESSION_IDLE_S = 1800.0
"""Seconds a session may go without a request in flight before it is closed (the SDK's own default)."""

TOKEN_ENV = "WORKFLOW_MCP_TOKEN"
TOKEN_FILE = "http-token"
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


@dataclass(frozen=True)
class TokenSet:
    """Known tokens by SHA-256 hex digest → owner; ``source`` says where they came from."""

    owners: Mapping[str, str]
    source: str
    local: bool = False
    """Each token is the local user (``workflow-mcp ui``'s own token): it sees every run, as stdio does."""

    def principal_for(self, token: str) -> Principal | None:
        owner = self.owners.get(hashlib.sha256(token.encode()).hexdigest())
        if owner is None:
            return None
        return LOCAL if self.local else Principal(owner=owner, scoped=True)


def load_tokens(state_dir: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> TokenSet:
    """Tokens from ``WORKFLOW_MCP_TOKEN`` or the token file under ``state_dir`` (generated if missing,
    256 bits).

    Raises:
        InvalidInputError: a malformed entry, a token under 128 bits of entropy, two entries with one
            name, one token given twice, or a token file others can read; the message names the entry
            (never the token) and the rule.
    """
    environ = os.environ if env is None else env
    raw = environ.get(TOKEN_ENV)
    if raw:
        entries = [(f"{TOKEN_ENV} entry {i}", e) for i, e in enumerate(raw.split(","), start=1)]
        return TokenSet(_parse(entries, TOKEN_ENV), TOKEN_ENV)
    path = Path(state_dir) / TOKEN_FILE
    if not path.exists():
        _write_private(str(path), secrets.token_urlsafe(32) + "\n")
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise InvalidInputError(
            f"the token file {path} is readable by other users (mode {stat.S_IMODE(mode):o}); run "
            f"`chmod 600 {path}` and start again"
        )
    lines = [(f"{path} line {i}", ln.strip()) for i, ln in enumerate(path.read_text("utf-8").splitlines(), 1)]
    return TokenSet(_parse([(w, ln) for w, ln in lines if not ln.startswith("#")], str(path)), str(path))


def _parse(entries: list[tuple[str, str]], source: str) -> dict[str, str]:
    """``{sha256 digest: owner}`` of ``entries`` (``(where, text)`` pairs; blank texts skipped)."""
    owners: dict[str, str] = {}
    where_of_digest: dict[str, str] = {}
    where_of_owner: dict[str, str] = {}
    for where, entry in ((w, e.strip()) for w, e in entries):
        if not entry:
            continue
        name, sep, token = entry.partition("=")
        if not sep:
            name, token = "", entry
        label = f"{where} ({name})" if name else where
        if name and not _NAME.match(name):
            raise InvalidInputError(f"{where}: token name {name!r} must be letters, digits, '.', '_' or '-'")
        if (problem := token_problem(token)) is not None:
            raise InvalidInputError(f"{label}: the token is too weak: {problem}")
        digest = hashlib.sha256(token.encode()).hexdigest()
        if digest in where_of_digest:
            raise InvalidInputError(
                f"{label}: this token is also given at {where_of_digest[digest]}; one token is one client, "
                "so give each entry its own token"
            )
        owner = f"http:{name or digest[:12]}"
        if owner in where_of_owner:
            raise InvalidInputError(
                f"{label}: the name {name or digest[:12]!r} is also used at {where_of_owner[owner]}; each name "
                "is one client (it sees and cancels the runs of every token with that name), so give each "
                "token its own name"
            )
        owners[digest] = owner
        where_of_digest[digest] = label
        where_of_owner[owner] = label
    if not owners:
        raise InvalidInputError(f"{source} holds no token")
    return owners


VIEWER_SESSION_TTL_S = 12 * 3600.0
"""How long a viewer sign-in lasts (seconds); then the browser is asked to sign in again."""
MAX_VIEWER_SESSIONS = 1024
"""Viewer sign-ins one server keeps; a new one beyond it ends the oldest."""


class ViewerSessions:
    """The run viewer's browser sign-ins: an opaque 256-bit session id (the cookie) for a principal.

    The cookie is never the bearer token: browsers send a host's cookies to every port of it (cookies
    are not isolated by port), so another server on this machine that a signed-in browser visits under
    the same path receives them; what it receives opens this viewer only, never ``/mcp``, and ends with
    this process or after :data:`VIEWER_SESSION_TTL_S`. Ids are kept as SHA-256 digests, at most
    :data:`MAX_VIEWER_SESSIONS` (oldest ended first). ``clock`` returns monotonic seconds."""

    def __init__(
        self,
        *,
        ttl_s: float = VIEWER_SESSION_TTL_S,
        limit: int = MAX_VIEWER_SESSIONS,
        clock: Any = time.monotonic,
    ) -> None:
        self.ttl_s = ttl_s
        self.limit = limit
        self.clock = clock
        self._kept: dict[str, tuple[Principal, float]] = {}  # digest -> (principal, expires at); oldest first

    def open(self, principal: Principal) -> str:
        """A new session id for ``principal``."""
        session = secrets.token_urlsafe(32)
        self._kept[hashlib.sha256(session.encode()).hexdigest()] = (principal, self.clock() + self.ttl_s)
        while len(self._kept) > self.limit:
            del self._kept[next(iter(self._kept))]
        return session

    def principal(self, session: str) -> Principal | None:
        """The principal of a live ``session`` id, else ``None`` (unknown, ended or expired)."""
        if not session:
            return None
        digest = hashlib.sha256(session.encode()).hexdigest()
        found = self._kept.get(digest)
        if found is None:
            return None
        if found[1] <= self.clock():
            del self._kept[digest]
            return None
        return found[0]


class HttpGuard:
    """ASGI middleware in front of the MCP app: Host, Origin and bearer-token checks (module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        tokens: TokenSet,
        *,
        host: str,
        port: int,
        allowed_hosts: tuple[str, ...] = (),
        ledger: ClientLedger | None = None,
        viewer_base: str | None = None,
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.ledger = ledger
        self.viewer_base = viewer_base
        self.sessions = ViewerSessions()
        self.cookie_name = f"{COOKIE}_{port}"
        """The viewer's cookie, named for this port: a browser sends one host's cookies to all its ports."""
        self.hosts = HostRules.of(host, port, allowed_hosts)
        if self.hosts.any_host and not tokens.owners:  # '*' is safe only because every request needs a token
            raise InvalidInputError("--allowed-host '*' needs bearer tokens, and none are configured")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            # Nothing here speaks WebSocket: refuse it before any app sees it (with a WebSocket library
            # installed, uvicorn would hand one over, past every check below).
            await send({"type": "websocket.close", "code": 1008, "reason": "WebSocket is not served here"})
            return
        if scope["type"] != "http":  # the lifespan
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host")
        server = scope.get("server")
        local = str(server[0]) if isinstance(server, tuple | list) and server else None
        if not self.hosts.answers(host, local):
            await _refuse(
                send,
                403,
                "forbidden_host",
                f"Host {host!r} is not served here; connect to http://{self.hosts.example()}/mcp, or have the "
                "server's operator add the name with `workflow-mcp serve --allowed-host NAME`",
            )
            return
        origin = headers.get("origin")
        if origin is not None and not self.hosts.origin_allowed(origin, host, local):
            await _refuse(send, 403, "forbidden_origin", f"Origin {origin!r} may not call this server")
            return
        scheme, _, token = (headers.get("authorization") or "").partition(" ")
        principal: Principal | None = None
        if self.viewer_base is not None and _under(scope["path"], self.viewer_base):
            # -- the run viewer: a browser signs in once and then sends a session cookie -------------
            rest = scope["path"][len(self.viewer_base) :]
            if rest == "/login" or rest.startswith("/static/"):  # the sign-in form and its files
                scope.setdefault("state", {})[TOKEN_CHECK_KEY] = self._sign_in
                await self.app(scope, receive, send)
                return
            if not headers.get("authorization"):
                session = cookie_parser(headers.get("cookie") or "").get(self.cookie_name, "")
                principal = self.sessions.principal(session.strip())
                if principal is None and scope.get("method") == "GET" and not rest.startswith("/api/"):
                    # A browser without a (still valid) sign-in is sent to the form, not shown JSON.
                    await _redirect(send, f"{self.viewer_base}/login?next={quote(scope['path'])}")
                    return
                if principal is None:
                    await _refuse(
                        send,
                        401,
                        "unauthorized",
                        f"not signed in: sign in at {self.viewer_base}/login, or send 'Authorization: "
                        f"Bearer <token>' (the token is in {self.tokens.source})",
                        challenge='Bearer realm="workflow-mcp"',
                    )
                    return
        if principal is None and (scheme.lower() != "bearer" or not token.strip()):
            await _refuse(
                send,
                401,
                "unauthorized",
                f"missing bearer token: send 'Authorization: Bearer <token>' (the token is in {self.tokens.source})",
                challenge='Bearer realm="workflow-mcp"',
            )
            return
        if principal is None:
            principal = self.tokens.principal_for(token.strip())
        if principal is None:
            await _refuse(
                send,
                401,
                "invalid_token",
                f"the bearer token is not valid for this server (tokens come from {self.tokens.source})",
                challenge='Bearer realm="workflow-mcp", error="invalid_token"',
            )
            return
        state = scope.setdefault("state", {})
        state[PRINCIPAL_SCOPE_KEY] = principal
        owner = principal.owner or ""
        # The SDK binds each session to the credential that opened it (another token naming the
        # session gets 404): tell it who this is, by principal, never by token.
        scope["user"] = AuthenticatedUser(AccessToken(token=owner, client_id=owner, scopes=[]))
        if self.ledger is None:
            await self.app(scope, receive, send)
            return
        refusal = self.ledger.enter(owner)
        if refusal is not None:
            await _refuse(send, refusal.status, refusal.error, refusal.message)
            return
        try:
            if self.viewer_base is not None and _under(scope["path"], self.viewer_base):
                await self.app(scope, receive, send)  # the viewer holds no MCP session
            else:
                await self._in_session(scope, receive, send, headers, owner, self.ledger)
        finally:
            self.ledger.leave(owner)

    def _sign_in(self, token: str) -> tuple[str, str] | None:
        """The viewer's sign-in form asks: for one of this server's tokens, the cookie to set (its name,
        and a new session of the token's principal); ``None`` for any other token."""
        principal = self.tokens.principal_for(token.strip())
        if principal is None:
            return None
        return self.cookie_name, self.sessions.open(principal)

    async def _in_session(
        self, scope: Scope, receive: Receive, send: Send, headers: Headers, owner: str, ledger: ClientLedger
    ) -> None:
        """Serve one authenticated request, keeping the ledger's count of ``owner``'s sessions."""
        if scope.get("method") == "POST":
            receive, refused = await _depth_checked(receive, headers.get("content-length"))
            if refused is not None:
                await _send_json(send, *refused)
                return
        session_id = headers.get(MCP_SESSION_ID_HEADER)
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        status: int | None = None
        if session_id is None:
            # Only a handshake-era POST (no version header, or a pre-2026-07-28 one) can open a session.
            if scope.get("method") != "POST" or (
                version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS
            ):
                await self.app(scope, receive, send)
                return
            refusal = ledger.open_session(owner)
            if refusal is not None:
                await _refuse(send, refusal.status, refusal.error, refusal.message)
                return
            reserved = True

            async def watch_opening(message: Message) -> None:
                nonlocal reserved
                if message["type"] == "http.response.start" and reserved:
                    reserved = False
                    named = dict(message.get("headers") or []).get(MCP_SESSION_ID_HEADER.encode())
                    ok = message["status"] < 400 and named is not None
                    ledger.opened(owner, named.decode("latin-1") if ok and named is not None else None)
                await send(message)

            try:
                await self.app(scope, receive, watch_opening)
            finally:
                if reserved:
                    ledger.opened(owner, None)
            return
        if not ledger.session_request(owner, session_id):
            await self.app(scope, receive, send)  # not this client's session: the SDK answers 404
            return

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            ledger.session_response(session_id, status=status, deleted=scope.get("method") == "DELETE")


async def _depth_checked(receive: Receive, declared: str | None) -> tuple[Receive, tuple[int, Any] | None]:
    """Read a POST body and what answers it instead of the app, as ``(status, JSON value)``: past
    the SDK's body limit (``DEFAULT_MAX_REQUEST_BODY_SIZE``, 4 MiB), a 413 naming it (the SDK's own
    says only "Request body too large"); nested deeper than the SDK's JSON reader goes, a 400 with
    the JSON-RPC error for its ``id`` (:func:`~._stdio.too_deep_refusal`; the SDK would say only
    "Parse error: recursion limit exceeded" with no ``id``). Returns the ``receive`` that replays the
    body to the app, and that answer or ``None``. A body with fewer brackets than the reader's depth
    costs two counts."""
    held: list[Message] = []
    size, complete = 0, False
    # Refused before a byte of it is read (a length of more than 18 digits is past any limit).
    digits = declared is not None and declared.isascii() and declared.isdigit()
    if (
        digits
        and declared is not None
        and (len(declared) > 18 or int(declared) > DEFAULT_MAX_REQUEST_BODY_SIZE)
    ):
        size = DEFAULT_MAX_REQUEST_BODY_SIZE + 1
    while size <= DEFAULT_MAX_REQUEST_BODY_SIZE:
        message = await receive()
        held.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            complete = True
            break

    async def replay() -> Message:
        return held.pop(0) if held else await receive()

    if size > DEFAULT_MAX_REQUEST_BODY_SIZE:
        limit = DEFAULT_MAX_REQUEST_BODY_SIZE
        said = f"the request body is over {limit:,} bytes, the most this server reads (the MCP SDK's limit)"
        return replay, (413, {"error": "request_too_large", "message": said})
    if not complete:
        return replay, None
    body = b"".join(m.get("body", b"") for m in held if m["type"] == "http.request")
    if body.count(b"[") + body.count(b"{") < _SDK_JSON_DEPTH:
        return replay, None
    try:
        pydantic_core.from_json(body)
    except ValueError as exc:
        if "recursion limit" not in str(exc):
            return replay, None  # not JSON at all: the SDK's parse error says so
    else:
        return replay, None
    head = top_level(body.decode("utf-8", "replace"))
    ident = head.get("id") if head is not None else None
    refusal = too_deep_refusal(ident if isinstance(ident, str | int) else None, http_depth=_SDK_JSON_DEPTH)
    return replay, (400, refusal)


_SDK_JSON_DEPTH: Final = 200
"""How deep the MCP SDK's HTTP transport reads a request (``pydantic_core.from_json``'s recursion limit,
the message's own object, ``params`` and ``arguments`` included)."""


async def _send_json(send: Send, status: int, value: Any) -> None:
    body = json.dumps(value).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _under(path: str, base: str) -> bool:
    return path == base or path.startswith(base + "/")


async def _redirect(send: Send, location: str) -> None:
    headers = [(b"location", location.encode("latin-1", "replace")), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def _refuse(send: Send, status: int, error: str, message: str, *, challenge: str | None = None) -> None:
    body = json.dumps({"error": error, "message": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if challenge is not None:
        headers.append((b"www-authenticate", challenge.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@dataclass(frozen=True)
class HttpLimits:
    """What clients may hold of the HTTP server (the ``workflow-mcp serve`` options in parentheses).

    ``max_connections`` (``--max-connections``): open connections plus in-flight requests of everyone
    (uvicorn ``limit_concurrency``); a request beyond it is answered 503. ``max_client_connections``
    (``--max-client-connections``): requests and streams one client (bearer token) may have open at once,
    beyond it 429; ``None``: an equal share of half of ``max_connections`` among the configured tokens
    (:func:`~workflow_mcp.server._shares.fair_share`; the other half is headroom for idle keep-alive
    connections and requests not yet authenticated, which no client can be charged with). ``max_sessions`` (``--max-sessions``) and
    ``max_client_sessions`` (``--max-client-sessions``, ``None``: the equal share): handshake-era
    Streamable HTTP sessions in all and per client (the SDK's ``max_sessions``, plus the per-client count
    of :class:`~workflow_mcp.server._shares.ClientLedger`). ``session_idle_s`` (``--session-idle-timeout``):
    a session without a request in flight for this long is closed (the SDK's ``session_idle_timeout``).
    ``header_timeout_s`` (``--header-timeout``): seconds a connection has, from connecting or from its
    previous response, to deliver a complete request — head and body; then it is closed (uvicorn 0.54 has
    no such deadline: idle, slow-header and slow-body sockets were held forever). ``keep_alive_s``: an
    idle keep-alive connection closes after this (uvicorn ``timeout_keep_alive``). ``max_header_bytes``:
    the largest request head (h11), beyond it 400. ``backlog``: the listen queue.
    """

    max_connections: int = 256
    max_client_connections: int | None = None
    max_sessions: int = DEFAULT_MAX_SESSIONS
    max_client_sessions: int | None = None
    session_idle_s: float = DEFAULT_SESSION_IDLE_S
    header_timeout_s: float = 10.0
    keep_alive_s: int = 5
    max_header_bytes: int = 16_384
    backlog: int = 1024

    def shares(self, clients: int) -> Shares:
        """The per-client caps for ``clients`` configured tokens (defaults: equal shares)."""
        return Shares(
            # Half the connections are shared out; the other half is headroom for what no client can be
            # charged with: keep-alive connections between requests and requests not yet authenticated.
            client_requests=self.max_client_connections or fair_share(self.max_connections // 2, clients),
            sessions=self.max_sessions,
            client_sessions=self.max_client_sessions or fair_share(self.max_sessions, clients),
            session_idle_s=self.session_idle_s,
        )


class _Deferred:
    """The app of a guard built before the MCP app exists (so a bad ``--allowed-host`` fails first)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("the HTTP guard has no app yet")


def raise_fd_limit() -> int:
    """Raise the soft limit on open files (``RLIMIT_NOFILE``) to the hard limit (at most 65,536: every
    connection, worker pipe and database handle needs a descriptor). Returns the soft limit in force
    afterwards, ``-1`` where the platform has none."""
    try:
        import resource
    except ImportError:  # not POSIX
        return -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 65_536 if hard == resource.RLIM_INFINITY else min(hard, 65_536)
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    return -1 if soft == resource.RLIM_INFINITY else int(soft)


def _head_deadline_protocol(header_timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a deadline for each request's head and body (see :class:`HttpLimits`).

    uvicorn 0.54 has none: its keep-alive timer starts only after a first response and is cancelled by
    any byte received, so a socket that never sends a byte, or sends one now and then, was held forever.
    The deadline starts when the connection opens and after each response, and ends once a whole
    request (head and body) has arrived; a streamed response (SSE) is the server's time, not counted.
    """
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class RequestDeadlineProtocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _armed_after: object = None  # the cycle that was current when the deadline started

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def handle_events(self) -> None:
            super().handle_events()
            cycle = self.cycle
            if cycle is not None and cycle is not self._armed_after and not cycle.more_body:
                self._disarm()  # a new request arrived whole: the app has it now

        def on_response_complete(self) -> None:
            self._arm()  # for the next request; a pipelined one (handled inside) disarms it again
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._armed_after = self.cycle
            self._deadline = self.loop.call_later(header_timeout_s, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._deadline = None
            if not self.transport.is_closing():
                self.transport.close()

    return RequestDeadlineProtocol


def _loop_error_handler() -> Any:
    """The event loop's exception handler while serving HTTP: one line on stderr (the same line at most
    every 5 s), and nothing ever raised. asyncio's default handler logs through the root logger, whose
    handler (rich, set up by the SDK) imports a module to format the traceback; with every descriptor in
    use that import failed with EMFILE inside the accept loop, and the process exited. asyncio itself
    retries a failed ``accept()`` a second later."""
    last: dict[str, float] = {}

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        line = f"workflow-mcp: {context.get('message') or 'event loop error'}" + (f": {exc!r}" if exc else "")
        now = time.monotonic()
        if now - last.get(line, -1e9) < 5:
            return
        if len(last) >= 1024:  # lines naming peers differ; keep the memory of them bounded
            last.clear()
        last[line] = now
        with contextlib.suppress(OSError, ValueError):  # stderr closed or out of descriptors: stay up
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    return handle


async def serve_http(
    server: WorkflowMcpServer,
    *,
    host: str,
    port: int,
    tokens: TokenSet,
    limits: HttpLimits | None = None,
    allowed_hosts: tuple[str, ...] = (),
) -> None:
    """Serve ``server`` over Streamable HTTP at ``http://host:port/mcp`` until SIGINT/SIGTERM, then
    cancel the runs this process still runs (they stay resumable). ``limits`` bound what clients may hold
    (default :class:`HttpLimits`); ``allowed_hosts`` are the ``--allowed-host`` entries
    (:class:`~workflow_mcp.server._hosts.HostRules`).

    Raises:
        InvalidInputError: a malformed ``allowed_hosts`` entry, ``*`` with a loopback bind, or an
            address that cannot be bound (a port in use: ``cannot listen on HOST:PORT: …``).
    """
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    limits = limits or HttpLimits()
    shares = limits.shares(len(tokens.owners))
    guard = HttpGuard(
        _Deferred(),
        tokens,
        host=host,
        port=port,
        allowed_hosts=allowed_hosts,
        ledger=ClientLedger(shares),
        viewer_base=VIEWER_BASE,
    )
    fd_limit = raise_fd_limit()
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(_loop_error_handler())
    # HttpGuard does the Host/Origin checks (with 403s); the SDK's own check would only repeat them.
    app = server.streamable_http_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        host=host,
        max_sessions=shares.sessions,
        session_idle_timeout=shares.session_idle_s,
    )
    guard.app = with_viewer(app, viewer_app(server.service, server, base=VIEWER_BASE))
    guarded: Any = guard
    config = uvicorn.Config(
        guarded,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        http=_head_deadline_protocol(limits.header_timeout_s),
        limit_concurrency=limits.max_connections,
        timeout_keep_alive=limits.keep_alive_s,
        h11_max_incomplete_event_size=limits.max_header_bytes,
        backlog=limits.backlog,
        timeout_graceful_shutdown=5,
    )
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"workflow-mcp: warning: listening on {host}, not loopback; workflow JavaScript runs in Node's vm, "
            "which is not a security boundary: put an OS sandbox around this server",
            file=sys.stderr,
        )
    policy = server.policy
    limits_text = (
        f"at most {limits.max_connections} connections ({shares.client_requests} per client), "
        f"{shares.sessions} sessions ({shares.client_sessions} per client, closed after "
        f"{shares.session_idle_s:g} s idle), {limits.header_timeout_s:g} s to send a request, "
        f"{policy.max_runs or 'unlimited'} concurrent runs ({policy.max_client_runs or 'no cap'} per client), "
        f"{fd_limit if fd_limit >= 0 else 'unlimited'} file descriptors"
    )

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn re-raises SIGTERM after its shutdown, which would kill the process before the
            # runs are cancelled and recorded; this process handles the signals itself (below).
            yield

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:  # printed once the port accepts connections (scripts wait for it)
                print(
                    f"workflow-mcp: serving MCP (Streamable HTTP) at http://{host}:{port}/mcp and the run "
                    f"viewer at http://{host}:{port}{VIEWER_BASE}/; "
                    f"bearer tokens from {tokens.source}; answering {guard.hosts.describe()}; {limits_text}",
                    file=sys.stderr,
                    flush=True,
                )

    web = _Server(config)
    try:
        sock = _bound_socket(host, port)
    except InvalidInputError:
        await asyncio.shield(server.aclose("the MCP server did not start"))
        raise
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # non-POSIX loops
            loop.add_signal_handler(sig, setattr, web, "should_exit", True)
    try:
        await web.serve(sockets=[sock])
    finally:
        sock.close()
        await asyncio.shield(server.aclose("the MCP server stopped"))


def _bound_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` as uvicorn would bind it (IPv6 when ``host`` holds a
    ``:``), for ``uvicorn.Server.serve(sockets=…)``. Binding it here turns a port in use into an
    error naming it, where uvicorn would log its own and exit.

    Raises:
        InvalidInputError: the address cannot be bound (``cannot listen on HOST:PORT: Address already
            in use``).
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InvalidInputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.set_inheritable(True)
    return sock


# -- the run viewer ---------------------------------------------------------------------------------
def with_viewer(app: ASGIApp, viewer: ASGIApp, base: str = VIEWER_BASE) -> ASGIApp:
    """``app`` with ``viewer`` mounted at ``base``: requests under ``base`` go to the viewer, every
    other request (and the lifespan) to ``app``."""
    from starlette.routing import Mount, Router

    mounted = Router(routes=[Mount(base, app=viewer)], redirect_slashes=True)

    async def dispatch(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and _under(scope["path"], base):
            if scope["path"] == base:
                await _redirect(send, base + "/")
                return
            await mounted(scope, receive, send)
            return
        await app(scope, receive, send)

    return dispatch


async def serve_viewer(
    service: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    on_ready: Any = None,
    limits: HttpLimits | None = None,
) -> None:
    """Serve the run viewer alone (``workflow-mcp ui``) for the local user until SIGINT/SIGTERM.

    A fresh 256-bit token guards it (the same Host, Origin and bearer checks as ``serve --http``, so
    another user of this machine cannot read the runs through the loopback port); ``on_ready(url)`` is
    called once the port accepts connections, with the sign-in URL carrying the token in its fragment
    (``#token=…``, which browsers never send to a server). ``port`` 0 picks a free port. Runs resumed
    from the page run in this process and are cancelled (resumable) when it stops.

    The port answers anyone on the machine before a token is checked, so it keeps the connection limits
    of ``serve --http`` (:class:`HttpLimits`, default ``HttpLimits()``): ``max_connections``, the
    ``header_timeout_s`` deadline for each request's head and body, ``keep_alive_s``,
    ``max_header_bytes``, ``backlog``; the soft limit on open files is raised and running out of them
    only pauses accepting.
    """
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import RedirectResponse
    from starlette.routing import Route

    token = secrets.token_urlsafe(32)
    tokens = TokenSet(
        {hashlib.sha256(token.encode()).hexdigest(): "local"}, "the URL printed at start", local=True
    )

    async def root(request: Any) -> RedirectResponse:
        return RedirectResponse(VIEWER_BASE + "/", status_code=303)

    home = Starlette(routes=[Route("/", root)])
    app = with_viewer(home, viewer_app(service, LocalControl(service), base=VIEWER_BASE))
    sock = _bound_socket(host, port)
    bound = sock.getsockname()[1]
    guard: Any = HttpGuard(app, tokens, host=host, port=bound, viewer_base=VIEWER_BASE)
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"workflow-mcp: warning: the run viewer listens on {host}, not loopback: anyone who can reach it "
            "and learns the URL's token sees and controls every run of this state directory",
            file=sys.stderr,
        )
    limits = limits or HttpLimits()
    raise_fd_limit()
    asyncio.get_running_loop().set_exception_handler(_loop_error_handler())
    config = uvicorn.Config(
        guard,
        log_level="warning",
        lifespan="off",
        http=_head_deadline_protocol(limits.header_timeout_s),
        limit_concurrency=limits.max_connections,
        timeout_keep_alive=limits.keep_alive_s,
        h11_max_incomplete_event_size=limits.max_header_bytes,
        backlog=limits.backlog,
        timeout_graceful_shutdown=2,
    )
    where = f"[{host}]" if ":" in host else host
    url = f"http://{where}:{bound}{VIEWER_BASE}/login#token={token}"

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started and on_ready is not None:
                on_ready(url)

    web = _Server(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, setattr, web, "should_exit", True)
    try:
        await web.serve(sockets=[sock])
    finally:
        await asyncio.shield(service.shutdown("the run viewer stopped"))
