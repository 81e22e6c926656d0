"""The HTTP guard (Host/Origin/bearer checks in front of the MCP app) and the token sources, driven
as ASGI: a request goes in, the response (or the inner app's view of the request) comes out."""

from __future__ import annotations

import asyncio
import io
import json
import os
import stat
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp.errors import InvalidInputError
from workflow_mcp.server import Principal
from workflow_mcp.server.http import HttpGuard, TokenSet, ViewerSessions, _loop_error_handler, load_tokens
from workflow_mcp.server.mcp import PRINCIPAL_SCOPE_KEY

pytestmark = pytest.mark.anyio

ALICE = "nKzLOLLWXUBACWqsgZUE1PzGCnSrlg2qw6ajg_EGv08"
BOB = "11ZOyuMAuAdHa8Xl1cSUpIoq-wn5vk6JIKZHO875bNk"
STRANGER = "hJh1K3ihi8oTo9SZdUlPyAayljNE6OQ-mhj4HLRkd08"


class Inner:
    """The app behind the guard: records the principal each request reached it with."""

    def __init__(self) -> None:
        self.seen: list[Principal] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.seen.append(scope["state"][PRINCIPAL_SCOPE_KEY])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def request(app: Any, headers: dict[str, str]) -> tuple[int, dict[str, str], dict[str, Any] | str]:
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "state": {},
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start, body = sent[0], b"".join(m.get("body", b"") for m in sent[1:])
    heads = {k.decode(): v.decode() for k, v in start["headers"]}
    parsed: dict[str, Any] | str = (
        json.loads(body) if heads.get("content-type") == "application/json" else body.decode()
    )
    return start["status"], heads, parsed


def guard(inner: Inner) -> HttpGuard:
    tokens = load_tokens("/nonexistent", env={"WORKFLOW_MCP_TOKEN": f"alice={ALICE},{BOB}"})
    return HttpGuard(inner, tokens, host="127.0.0.1", port=8765)


async def test_a_request_without_a_token_gets_401_with_a_bearer_challenge() -> None:
    inner = Inner()
    status, headers, body = await request(guard(inner), {"host": "127.0.0.1:8765"})
    assert status == 401 and headers["www-authenticate"] == 'Bearer realm="workflow-mcp"'
    assert (
        isinstance(body, dict) and body["error"] == "unauthorized" and "WORKFLOW_MCP_TOKEN" in body["message"]
    )
    assert inner.seen == []


async def test_a_wrong_token_gets_401_invalid_token() -> None:
    inner = Inner()
    status, headers, body = await request(
        guard(inner), {"host": "127.0.0.1:8765", "authorization": "Bearer " + STRANGER}
    )
    assert status == 401 and 'error="invalid_token"' in headers["www-authenticate"]
    assert isinstance(body, dict) and body["error"] == "invalid_token" and inner.seen == []


@pytest.mark.parametrize(
    ("headers", "error"),
    [
        ({"host": "evil.example:8765"}, "forbidden_host"),
        ({"host": "127.0.0.1:9999"}, "forbidden_host"),
        ({"host": "localhost:8765", "origin": "https://evil.example"}, "forbidden_origin"),
    ],
)
async def test_foreign_hosts_and_origins_get_403_even_with_a_valid_token(
    headers: dict[str, str], error: str
) -> None:
    inner = Inner()
    status, _, body = await request(guard(inner), {**headers, "authorization": f"Bearer {ALICE}"})
    assert status == 403 and isinstance(body, dict) and body["error"] == error and inner.seen == []


async def test_each_token_reaches_the_app_as_its_own_scoped_principal() -> None:
    inner = Inner()
    app = guard(inner)
    for host, token in (("127.0.0.1:8765", ALICE), ("localhost:8765", BOB)):
        status, _, _ = await request(
            app, {"host": host, "origin": f"http://{host}", "authorization": f"Bearer {token}"}
        )
        assert status == 200
    alice, bob = inner.seen
    assert alice == Principal("http:alice", scoped=True)
    assert bob.scoped and bob.owner is not None and bob.owner.startswith("http:") and bob.owner != alice.owner


def test_a_generated_token_file_is_private_and_reused(tmp_path: Path) -> None:
    first = load_tokens(tmp_path, env={})
    path = tmp_path / "http-token"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    token = path.read_text().strip()
    assert len(token) >= 32 and first.principal_for(token) is not None
    assert load_tokens(tmp_path, env={}).owners == first.owners


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "http-token"
    path.write_text(STRANGER + "\n")
    path.chmod(0o644)
    with pytest.raises(InvalidInputError, match="chmod 600"):
        load_tokens(tmp_path, env={})


@pytest.mark.parametrize("raw", ["short", "alice=short", "bad name=" + STRANGER, " , "])
def test_malformed_tokens_are_refused(raw: str) -> None:
    with pytest.raises(InvalidInputError):
        load_tokens("/nonexistent", env={"WORKFLOW_MCP_TOKEN": raw})


def test_tokens_are_kept_only_as_digests() -> None:
    tokens = load_tokens("/nonexistent", env={"WORKFLOW_MCP_TOKEN": f"alice={ALICE}"})
    assert isinstance(tokens, TokenSet) and ALICE not in json.dumps(dict(tokens.owners))


# -- token rules: 128 bits, one name per client, one client per token ---------------------------
@pytest.mark.parametrize(
    "weak",
    [
        "a" * 32,  # one letter repeated
        "ab" * 20,  # a repeated chunk, letters of one case
        "0123456789abcdef" * 2,  # 32 hex digits, but a run repeated
        "Password1234567890Abcdefg",  # a word and two runs
        "correcthorsebatterystaple",  # words
        "changeme-changeme-changeme",
        "Tr0ub4dor&3",  # too short for 128 bits from any alphabet
        "nKzLOLLWXUBACWqsgZUE1",  # 21 base64url characters: 126 bits
        "0f3a9c27e1b64d58a0c2e97b31d4f68",  # 31 hex digits: 124 bits
        "3f2b8c1e-9a4d-4e7b-8c2a-5d6e7f8091ab",  # a UUID: 122 random bits at most
        "0f3a9c27-e1b64d58-a0c2e97b-31d4f6",  # 30 hex digits between separators: 120 bits
        "AbCdEfGhIjKlMnOpQrStUv",  # a run in alternating case
        "Aa1Bb2Cc3Dd4Ee5Ff6Gg7Hh8",  # runs every third character
        "qazwsxedcrfvtgbyhnujmikolpQAZWSX",  # a keyboard walk down the columns
        "deadbeefcafebabe0123feedfacec0de",  # hexspeak
    ],
)
def test_a_token_under_128_bits_is_refused_with_the_rule_and_never_echoed(weak: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        load_tokens("/nonexistent", env={"WORKFLOW_MCP_TOKEN": f"{ALICE},carol={weak}"})
    message = str(caught.value)
    assert "WORKFLOW_MCP_TOKEN entry 2 (carol)" in message and "128 bits" in message
    assert "secrets.token_urlsafe(32)" in message and weak not in message


@pytest.mark.parametrize(
    "strong",
    [
        "nKzLOLLWXUBACWqsgZUE1P",  # 22 base64url characters
        "0f3a9c27e1b64d58a0c2e97b31d4f68b",  # 32 hex digits
        "0F3A9C27E1B64D58A0C2E97B31D4F68B",
        "0f3a9c27-e1b64d58-a0c2e97b-31d4f68b",  # 32 hex digits between separators
        "REcKQzBZtRD2N8aKc1Mzi6g=",  # base64 of 17 random bytes, with padding
    ],
)
def test_tokens_with_128_bits_from_a_random_source_are_accepted(strong: str) -> None:
    tokens = load_tokens("/nonexistent", env={"WORKFLOW_MCP_TOKEN": f"carol={strong}"})
    assert tokens.principal_for(strong) == Principal("http:carol", scoped=True)


def test_random_tokens_of_the_minimum_lengths_pass() -> None:
    # Seeded, so the test is deterministic: about 1 in 150,000 random 16-byte tokens falls under the
    # pattern estimate by chance (see server/_tokens.py); none of these 6,000 do.
    import base64
    import random

    from workflow_mcp.server._tokens import token_problem

    rng = random.Random(20261201)
    for _ in range(2000):
        raw16, raw32 = rng.randbytes(16), rng.randbytes(32)
        for token in (
            base64.urlsafe_b64encode(raw16).decode().rstrip("="),
            raw16.hex(),
            base64.urlsafe_b64encode(raw32).decode().rstrip("="),
        ):
            assert token_problem(token) is None, token


def test_two_tokens_with_one_name_are_refused_because_they_would_be_one_client() -> None:
    with pytest.raises(InvalidInputError) as caught:
        load_tokens("/nonexistent", env={"WORKFLOW_MCP_TOKEN": f"alice={ALICE},alice={BOB}"})
    message = str(caught.value)
    assert "entry 2 (alice)" in message and "also used at WORKFLOW_MCP_TOKEN entry 1" in message
    assert ALICE not in message and BOB not in message


@pytest.mark.parametrize("raw", [f"{ALICE},{ALICE}", f"alice={ALICE},bob={ALICE}"])
def test_one_token_given_twice_is_refused(raw: str) -> None:
    with pytest.raises(InvalidInputError, match="this token is also given at WORKFLOW_MCP_TOKEN entry 1"):
        load_tokens("/nonexistent", env={"WORKFLOW_MCP_TOKEN": raw})


def test_a_weak_token_in_the_token_file_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "http-token"
    path.write_text(f"# clients\nalice={ALICE}\nbob=password-password-1\n")
    path.chmod(0o600)
    with pytest.raises(InvalidInputError, match=r"http-token line 3 \(bob\): the token is too weak"):
        load_tokens(tmp_path, env={})


def test_the_generated_token_has_256_bits_and_passes_the_rule(tmp_path: Path) -> None:
    from workflow_mcp.server._tokens import token_problem

    load_tokens(tmp_path, env={})
    token = (tmp_path / "http-token").read_text().strip()
    assert len(token) == 43 and token_problem(token) is None


def test_the_serving_loops_error_handler_writes_one_line_per_message_and_never_raises(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = _loop_error_handler()
    loop = asyncio.new_event_loop()
    try:
        emfile = {"message": "socket.accept() out of system resource", "exception": OSError(24, "Too many")}
        for _ in range(3):
            handle(loop, emfile)
        for i in range(2_000):  # lines that differ (peers) are each written once
            handle(loop, {"message": f"peer {i} reset"})
        lines = capsys.readouterr().err.splitlines()
        assert lines[0] == "workflow-mcp: socket.accept() out of system resource: OSError(24, 'Too many')"
        assert len(lines) == 2_001 and lines[-1] == "workflow-mcp: peer 1999 reset"
        closed = io.StringIO()
        closed.close()
        monkeypatch.setattr("sys.stderr", closed)
        handle(loop, {"message": "with no usable stderr", "exception": OSError(24, "Too many")})
    finally:
        loop.close()


def guard_on(inner: Inner, host: str, allowed: tuple[str, ...] = ()) -> HttpGuard:
    tokens = load_tokens("/nonexistent", env={"WORKFLOW_MCP_TOKEN": f"alice={ALICE}"})
    return HttpGuard(inner, tokens, host=host, port=8765, allowed_hosts=allowed)


async def request_on(app: Any, headers: dict[str, str], local: str) -> int:
    """The status of a request that arrived on the local address ``local``."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "server": (local, 8765),
        "headers": [
            (k.lower().encode(), v.encode())
            for k, v in {**headers, "authorization": f"Bearer {ALICE}"}.items()
        ],
        "state": {},
    }
    await app(scope, receive, send)
    return int(sent[0]["status"])


@pytest.mark.parametrize(
    ("bind", "allowed", "host", "local", "status"),
    [
        # A wildcard bind answers the address the connection arrived on, and loopback names…
        ("0.0.0.0", (), "192.0.2.7:8765", "192.0.2.7", 200),
        ("0.0.0.0", (), "127.0.0.1:8765", "127.0.0.1", 200),
        ("::", (), "[2001:db8::7]:8765", "2001:db8::7", 200),
        ("::", (), "192.0.2.7:8765", "::ffff:192.0.2.7", 200),
        # …but not another address, another port, or a name nobody configured (DNS rebinding).
        ("0.0.0.0", (), "192.0.2.8:8765", "192.0.2.7", 403),
        ("0.0.0.0", (), "192.0.2.7:9999", "192.0.2.7", 403),
        ("0.0.0.0", (), "rebind.evil.example:8765", "192.0.2.7", 403),
        # --allowed-host NAME answers NAME with the port or without one (a proxy); NAME:PORT exactly.
        ("0.0.0.0", ("mcp.example",), "MCP.example:8765", "192.0.2.7", 200),
        ("0.0.0.0", ("mcp.example",), "mcp.example", "192.0.2.7", 200),
        ("0.0.0.0", ("mcp.example",), "mcp.example:9999", "192.0.2.7", 403),
        ("127.0.0.1", ("proxy.internal:443",), "proxy.internal:443", "127.0.0.1", 200),
        ("127.0.0.1", ("proxy.internal:443",), "proxy.internal:8765", "127.0.0.1", 403),
        # A specific bind answers its own name; '*' answers anything (tokens still required).
        ("mcp.example", (), "mcp.example:8765", "192.0.2.7", 200),
        ("192.0.2.7", (), "192.0.2.7:8765", "192.0.2.7", 200),
        ("0.0.0.0", ("*",), "anything.example:1234", "192.0.2.7", 200),
        # A loopback bind never answers the connection's address under another name.
        ("127.0.0.1", (), "127.0.0.2:8765", "127.0.0.2", 403),
    ],
)
async def test_the_host_check_answers_the_servers_own_names_and_the_allowed_hosts(
    bind: str, allowed: tuple[str, ...], host: str, local: str, status: int
) -> None:
    assert await request_on(guard_on(Inner(), bind, allowed), {"host": host}, local) == status


@pytest.mark.parametrize(
    ("allowed", "host", "origin", "status"),
    [
        (("mcp.example",), "mcp.example", "https://mcp.example", 200),
        (("mcp.example",), "mcp.example", "https://evil.example", 403),
        (("*",), "any.example:8765", "http://any.example:8765", 200),
        (("*",), "any.example:8765", "http://evil.example", 403),
    ],
)
async def test_origins_must_name_an_answered_host(
    allowed: tuple[str, ...], host: str, origin: str, status: int
) -> None:
    app = guard_on(Inner(), "0.0.0.0", allowed)
    assert await request_on(app, {"host": host, "origin": origin}, "192.0.2.7") == status


@pytest.mark.parametrize(
    ("bind", "entry", "match"),
    [
        ("127.0.0.1", "*", "loopback server"),
        ("localhost", "*", "loopback server"),
        ("0.0.0.0", "http://mcp.example", "not a host"),
        ("0.0.0.0", "mcp.example/mcp", "not a host"),
        ("0.0.0.0", "mcp.example:99999", "not a host"),
        ("0.0.0.0", "", "not a host"),
    ],
)
def test_malformed_allowed_hosts_and_a_wildcard_on_loopback_are_refused(
    bind: str, entry: str, match: str
) -> None:
    with pytest.raises(InvalidInputError, match=match):
        guard_on(Inner(), bind, (entry,))


def test_a_viewer_session_ends_after_its_lifetime_and_the_oldest_ends_beyond_the_limit() -> None:
    now = [1000.0]
    sessions = ViewerSessions(ttl_s=60, limit=2, clock=lambda: now[0])
    alice, bob = Principal(owner="http:alice", scoped=True), Principal(owner="http:bob", scoped=True)
    first = sessions.open(alice)
    assert first != sessions.open(alice) and len(first) >= 43  # 256 bits, never the token
    assert sessions.principal(first) == alice
    assert sessions.principal("") is None and sessions.principal(first + "x") is None
    now[0] += 60
    assert sessions.principal(first) is None  # expired
    a, b = sessions.open(alice), sessions.open(bob)
    c = sessions.open(bob)  # a third beyond the limit of two ends the oldest
    assert sessions.principal(a) is None and sessions.principal(b) == bob and sessions.principal(c) == bob


async def test_a_websocket_request_is_closed_before_any_app_sees_it_whatever_it_carries() -> None:
    # Nothing here speaks WebSocket; with a WebSocket library installed, uvicorn would hand the guard a
    # websocket scope, which must not reach the app past the Host, Origin and token checks.
    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["type"])

    tokens = load_tokens("/nonexistent", env={"WORKFLOW_MCP_TOKEN": f"alice={ALICE}"})
    guarded = HttpGuard(app, tokens, host="127.0.0.1", port=8765, viewer_base="/ui")
    for path, headers in (
        ("/mcp", [(b"host", b"evil.example")]),
        ("/ui/api/runs/run_x/events", [(b"host", b"127.0.0.1:8765")]),
        ("/mcp", [(b"host", b"127.0.0.1:8765"), (b"authorization", f"Bearer {ALICE}".encode())]),
    ):
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "websocket.connect"}

        async def send(message: MutableMapping[str, Any], sent: list[dict[str, Any]] = sent) -> None:
            sent.append(dict(message))

        await guarded({"type": "websocket", "path": path, "headers": headers, "state": {}}, receive, send)
        assert sent == [{"type": "websocket.close", "code": 1008, "reason": "WebSocket is not served here"}]
    assert reached == []
    await guarded({"type": "lifespan"}, receive, send)  # the lifespan still reaches the app
    assert reached == ["lifespan"]
