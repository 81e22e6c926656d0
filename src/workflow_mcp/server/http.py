"""Streamable HTTP transport: loopback by default, bearer tokens, Host/Origin checks, one principal
per token.

Tokens come from ``WORKFLOW_MCP_TOKEN`` (comma-separated) or, when that is unset, from the file
``$WORKFLOW_MCP_HOME/http-token`` (one per line), which is generated with 0600 permissions on first
use and refused when others can read it. An entry is ``TOKEN`` or ``NAME=TOKEN``; each token is its
own principal (``http:NAME``, or ``http:`` + a hash prefix of the token) and sees only the runs it
started. Tokens are compared by SHA-256 digest and never logged.

Every request is checked in this order, before the MCP layer sees it:

1. ``Host`` must name the bound address (or a loopback name) and port → else 403 ``forbidden_host``
   (DNS-rebinding protection);
2. ``Origin``, when present, must be ``http://`` + one of those → else 403 ``forbidden_origin``;
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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import InvalidInputError
from ._policy import Principal, _write_private
from .mcp import PRINCIPAL_SCOPE_KEY, WorkflowMcpServer

__all__ = ["HttpGuard", "TokenSet", "load_tokens", "serve_http"]

TOKEN_ENV = "WORKFLOW_MCP_TOKEN"
TOKEN_FILE = "http-token"
MIN_TOKEN_LENGTH = 16
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


@dataclass(frozen=True)
class TokenSet:
    """Known tokens by SHA-256 hex digest → owner; ``source`` says where they came from."""

    owners: Mapping[str, str]
    source: str

    def principal_for(self, token: str) -> Principal | None:
        owner = self.owners.get(hashlib.sha256(token.encode()).hexdigest())
        return Principal(owner=owner, scoped=True) if owner is not None else None


def load_tokens(state_dir: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> TokenSet:
    """Tokens from ``WORKFLOW_MCP_TOKEN`` or the token file under ``state_dir`` (generated if missing).

    Raises:
        InvalidInputError: a malformed or too short token, or a token file others can read.
    """
    environ = os.environ if env is None else env
    raw = environ.get(TOKEN_ENV)
    if raw:
        return TokenSet(_parse(raw.split(","), TOKEN_ENV), TOKEN_ENV)
    path = Path(state_dir) / TOKEN_FILE
    if not path.exists():
        _write_private(str(path), secrets.token_urlsafe(32) + "\n")
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise InvalidInputError(
            f"the token file {path} is readable by other users (mode {stat.S_IMODE(mode):o}); run "
            f"`chmod 600 {path}` and start again"
        )
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    return TokenSet(_parse([ln for ln in lines if ln and not ln.startswith("#")], str(path)), str(path))


def _parse(entries: list[str], source: str) -> dict[str, str]:
    owners: dict[str, str] = {}
    for entry in (e.strip() for e in entries):
        if not entry:
            continue
        name, sep, token = entry.partition("=")
        if not sep:
            name, token = "", entry
        if name and not _NAME.match(name):
            raise InvalidInputError(f"{source}: token name {name!r} must be letters, digits, '.', '_' or '-'")
        if len(token) < MIN_TOKEN_LENGTH or any(c.isspace() for c in token):
            raise InvalidInputError(
                f"{source}: every token needs at least {MIN_TOKEN_LENGTH} characters and no spaces"
            )
        digest = hashlib.sha256(token.encode()).hexdigest()
        owners[digest] = f"http:{name or digest[:12]}"
    if not owners:
        raise InvalidInputError(f"{source} holds no token")
    return owners


def _host_names(host: str) -> list[str]:
    names = list(_LOOPBACK)
    bound = f"[{host}]" if ":" in host and not host.startswith("[") else host
    if bound not in names and bound not in ("0.0.0.0", "[::]"):
        names.append(bound)
    return names


class HttpGuard:
    """ASGI middleware in front of the MCP app: Host, Origin and bearer-token checks (module docstring)."""

    def __init__(self, app: ASGIApp, tokens: TokenSet, *, host: str, port: int) -> None:
        self.app = app
        self.tokens = tokens
        names = _host_names(host)
        self.allowed_hosts = frozenset(f"{n}:{port}" for n in names)
        self.allowed_origins = frozenset(f"http://{n}:{port}" for n in names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host")
        if host not in self.allowed_hosts:
            await _refuse(
                send,
                403,
                "forbidden_host",
                f"Host {host!r} is not served here; connect to http://{sorted(self.allowed_hosts)[0]}/mcp",
            )
            return
        origin = headers.get("origin")
        if origin is not None and origin not in self.allowed_origins:
            await _refuse(send, 403, "forbidden_origin", f"Origin {origin!r} may not call this server")
            return
        scheme, _, token = (headers.get("authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            await _refuse(
                send,
                401,
                "unauthorized",
                f"missing bearer token: send 'Authorization: Bearer <token>' (the token is in {self.tokens.source})",
                challenge='Bearer realm="workflow-mcp"',
            )
            return
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
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, error: str, message: str, *, challenge: str | None = None) -> None:
    body = json.dumps({"error": error, "message": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if challenge is not None:
        headers.append((b"www-authenticate", challenge.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def serve_http(server: WorkflowMcpServer, *, host: str, port: int, tokens: TokenSet) -> None:
    """Serve ``server`` over Streamable HTTP at ``http://host:port/mcp`` until SIGINT/SIGTERM, then
    cancel the runs this process still runs (they stay resumable)."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    # HttpGuard does the Host/Origin checks (with 403s); the SDK's own check would only repeat them.
    app = server.streamable_http_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False), host=host
    )
    guarded: Any = HttpGuard(app, tokens, host=host, port=port)
    config = uvicorn.Config(guarded, host=host, port=port, log_level="warning", lifespan="on")
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"workflow-mcp: warning: listening on {host}, not loopback; workflow JavaScript runs in Node's vm, "
            "which is not a security boundary: put an OS sandbox around this server",
            file=sys.stderr,
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
                    f"workflow-mcp: serving MCP (Streamable HTTP) at http://{host}:{port}/mcp; "
                    f"bearer tokens from {tokens.source}",
                    file=sys.stderr,
                    flush=True,
                )

    web = _Server(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # non-POSIX loops
            loop.add_signal_handler(sig, setattr, web, "should_exit", True)
    try:
        await web.serve()
    finally:
        await asyncio.shield(server.aclose("the MCP server stopped"))
