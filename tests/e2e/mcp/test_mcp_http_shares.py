"""Each client of a real ``workflow-mcp serve --http`` (one bearer token each) gets a fair share:
one client holding every stream, session or run slot it may still leaves the other its own, and every
refusal names the limit and only the caller's own count. Every wait is bounded; the only timed wait is
the server's own session idle timeout being measured."""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
import httpx2
import pytest

from mcp_kit import BOUND_S, PARK, call, data, text
from mcp_serve_kit import ALICE, BOB, INITIALIZE, HttpServer, Site, http_client, http_server, secret

pytestmark = pytest.mark.anyio


def headers(token: str, **extra: str) -> dict[str, str]:
    return {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {secret(token)}",
        **extra,
    }


async def open_session(h: httpx2.AsyncClient, server: HttpServer, token: str) -> httpx2.Response:
    """A handshake-era ``initialize`` without a session id: opens a session when admitted."""
    return await h.post(server.url, json=INITIALIZE, headers=headers(token))


async def test_one_clients_open_streams_leave_the_other_its_share(site: Site) -> None:
    # Half of 16 connections between two tokens: 4 each (the rest is headroom for idle connections).
    async with (
        http_server(site, args=("--max-connections", "16")) as server,
        http_client(server.url, ALICE) as alice,
        http_client(server.url, BOB) as bob,
        contextlib.AsyncExitStack() as streams,
        httpx2.AsyncClient(timeout=BOUND_S) as h,
    ):
        with anyio.fail_after(BOUND_S):
            for _ in range(4):  # Alice holds every stream her share allows
                await streams.enter_async_context(alice.listen(resources_list_changed=True))
            refused = await h.post(server.url, json=INITIALIZE, headers=headers(ALICE))
            with pytest.raises(Exception):  # noqa: B017 (the SDK surfaces the 429 as its own error)
                async with alice.listen(resources_list_changed=True):
                    pass
            # Bob is served, and may hold his own streams.
            async with bob.listen(resources_list_changed=True):
                providers = data(await call(bob, "providers_list", {}))
        assert refused.status_code == 429
        body = refused.json()
        assert body["error"] == "client_connection_limit"
        assert "already has 4 requests or streams open" in body["message"]
        assert "--max-client-connections 4" in body["message"]
        assert any(p["name"] == "fake" for p in providers["providers"])
        banner = await server.stderr_line("serving MCP")
    assert "at most 16 connections (4 per client)" in banner


async def test_runs_past_a_clients_share_are_refused_naming_only_its_own_count(site: Site) -> None:
    parked = {"name": "hello", "provider": "fake", "fakeScript": PARK}
    async with (
        http_server(site, args=("--max-runs", "4")) as server,
        http_client(server.url, ALICE) as alice,
        http_client(server.url, BOB) as bob,
    ):
        with anyio.fail_after(BOUND_S):
            hers = [data(await call(alice, "workflow_run", parked))["runId"] for _ in range(2)]
            third = await call(alice, "workflow_run", parked)
            agent = await call(alice, "agent_run", {"prompt": "hi", "provider": "fake"})
            his = [data(await call(bob, "workflow_run", parked))["runId"] for _ in range(2)]
            for rid in hers:
                await call(alice, "workflow_run_cancel", {"runId": rid})
            again = data(await call(alice, "workflow_run", parked))["runId"]
            for client, rid in ((alice, again), *((bob, r) for r in his)):
                await call(client, "workflow_run_cancel", {"runId": rid})
    for refused in (third, agent):
        assert refused.is_error
        assert "This client already runs 2 run(s)" in text(refused) and "max_client_runs 2" in text(refused)
        assert "--max-client-runs N" in text(refused)
    assert len(his) == 2 and again


async def test_at_the_servers_run_limit_a_client_is_told_only_its_own_count(site: Site) -> None:
    parked = {"name": "hello", "provider": "fake", "fakeScript": PARK}
    async with (
        http_server(site, args=("--max-runs", "3", "--max-client-runs", "3")) as server,
        http_client(server.url, ALICE) as alice,
        http_client(server.url, BOB) as bob,
    ):
        with anyio.fail_after(BOUND_S):
            hers = [data(await call(alice, "workflow_run", parked))["runId"] for _ in range(2)]
            his = data(await call(bob, "workflow_run", parked))["runId"]
            refused = await call(bob, "workflow_run", parked)
            for rid in hers:
                await call(alice, "workflow_run_cancel", {"runId": rid})
            await call(bob, "workflow_run_cancel", {"runId": his})
    assert refused.is_error
    assert "its limit of concurrent runs (max_runs 3;" in text(
        refused
    ) and "this client runs 1 of them" in text(refused)
    assert "2" not in text(refused).replace("50 MB", "")


def in_session(token: str, response: httpx2.Response) -> dict[str, str]:
    return headers(
        token, **{"Mcp-Session-Id": response.headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
    )


async def test_sessions_past_a_clients_share_are_refused_until_one_ends(site: Site) -> None:
    async with (
        http_server(site, args=("--max-sessions", "4")) as server,
        httpx2.AsyncClient(timeout=BOUND_S) as h,
    ):
        with anyio.fail_after(BOUND_S):
            first, second = [await open_session(h, server, ALICE) for _ in range(2)]
            refused = await open_session(h, server, ALICE)
            # Bob can neither use nor end one of Alice's sessions…
            hijack = await h.delete(server.url, headers=in_session(BOB, first))
            # …and holds his own share, through the SDK client.
            async with http_client(server.url, BOB, mode="legacy") as bob:
                await call(bob, "providers_list", {})
            # Alice ends one session: room for another.
            ended = await h.delete(server.url, headers=in_session(ALICE, first))
            third = await open_session(h, server, ALICE)
        banner = await server.stderr_line("serving MCP")
    assert first.status_code == second.status_code == 200
    assert refused.status_code == 429
    body: dict[str, Any] = refused.json()
    assert body["error"] == "client_session_limit" and "already holds 2 MCP sessions" in body["message"]
    assert "--max-client-sessions 2" in body["message"] and "1800 s without a request" in body["message"]
    assert hijack.status_code == 404
    assert ended.status_code == 200 and third.status_code == 200
    assert "4 sessions (2 per client, closed after 1800 s idle)" in banner


async def test_idle_sessions_expire_and_make_room(site: Site) -> None:
    args = ("--max-sessions", "4", "--session-idle-timeout", "1")
    async with http_server(site, args=args) as server, httpx2.AsyncClient(timeout=BOUND_S) as h:
        with anyio.fail_after(BOUND_S):
            first, second = [await open_session(h, server, ALICE) for _ in range(2)]
            opened: list[httpx2.Response] = []
            while len(opened) < 2:  # refused (her share is full) until both have been idle a second
                response = await open_session(h, server, ALICE)
                if response.status_code == 200:
                    opened.append(response)
                else:
                    assert response.status_code == 429, response.text
                    await anyio.sleep(0.1)  # measuring the server's idle timeout, not synchronising
            ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
            expired = await h.post(server.url, json=ping, headers=in_session(ALICE, first))
    assert first.status_code == second.status_code == 200
    assert expired.status_code == 404  # the SDK closed it too: the client must initialize again


async def test_at_the_servers_session_limit_a_client_is_told_only_its_own_count(site: Site) -> None:
    args = ("--max-sessions", "3", "--max-client-sessions", "3")
    async with http_server(site, args=args) as server, httpx2.AsyncClient(timeout=BOUND_S) as h:
        with anyio.fail_after(BOUND_S):
            for _ in range(2):
                assert (await open_session(h, server, ALICE)).status_code == 200
            assert (await open_session(h, server, BOB)).status_code == 200
            refused = await open_session(h, server, BOB)
            async with http_client(server.url, BOB) as modern:  # 2026-07-28: no session needed
                providers = data(await call(modern, "providers_list", {}))
    assert refused.status_code == 503
    body = refused.json()
    assert body["error"] == "session_limit" and "--max-sessions 3" in body["message"]
    assert "this client holds 1" in body["message"] and "2" not in body["message"]
    assert any(p["name"] == "fake" for p in providers["providers"])
