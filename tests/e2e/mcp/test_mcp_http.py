"""``workflow-mcp serve --http`` with real clients: bearer tokens, Host/Origin checks, authorization
separation between tokens, disconnect/reconnect without gaps, idempotency across connections."""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
import pytest

from mcp_kit import BOUND_S, PARK, call, data, text, wait_for_event
from mcp_serve_kit import ALICE, BOB, INITIALIZE, STRANGER, Site, http_client, http_server, secret

pytestmark = pytest.mark.anyio

JSON_SSE = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def test_requests_without_or_with_a_wrong_token_are_refused_and_foreign_origins_forbidden(
    site: Site,
) -> None:
    async with http_server(site) as server, httpx2.AsyncClient(timeout=BOUND_S) as h:
        cases: list[tuple[dict[str, str], int, str]] = [
            ({}, 401, "unauthorized"),
            ({"Authorization": "Bearer " + STRANGER}, 401, "invalid_token"),
            ({"Authorization": "Basic " + secret(ALICE)}, 401, "unauthorized"),
            (
                {"Authorization": "Bearer " + secret(ALICE), "Origin": "https://evil.example"},
                403,
                "forbidden_origin",
            ),
            ({"Authorization": "Bearer " + secret(ALICE), "Host": "evil.example"}, 403, "forbidden_host"),
        ]
        for headers, status, error in cases:
            response = await h.post(server.url, json=INITIALIZE, headers={**JSON_SSE, **headers})
            assert (response.status_code, response.json()["error"]) == (status, error), headers
            if status == 401:
                assert response.headers["www-authenticate"].startswith('Bearer realm="workflow-mcp"')
        ok = await h.post(
            server.url, json=INITIALIZE, headers={**JSON_SSE, "Authorization": "Bearer " + secret(ALICE)}
        )
        assert ok.status_code == 200


async def test_client_b_cannot_read_await_or_cancel_client_a_run(site: Site) -> None:
    async with (
        http_server(site) as server,
        http_client(server.url, ALICE) as alice,
        http_client(server.url, BOB) as bob,
    ):
        with anyio.fail_after(BOUND_S):
            rid = data(
                await call(alice, "workflow_run", {"name": "hello", "provider": "fake", "fakeScript": PARK})
            )["runId"]
            await wait_for_event(alice, rid, "agent.started")
            for tool, extra in [
                ("workflow_run_status", {}),
                ("workflow_run_events", {"after": 0}),
                ("workflow_run_await", {"waitMs": 0}),
                ("workflow_run_cancel", {}),
            ]:
                refused = await call(bob, tool, {"runId": rid, **extra})
                assert refused.is_error and f"No run {rid!r} is visible to this client" in text(refused), tool
            assert rid not in str([r.uri for r in (await bob.list_resources()).resources])
            assert data(await call(alice, "workflow_run_status", {"runId": rid}))["status"] == "running"
            assert data(await call(alice, "workflow_run_cancel", {"runId": rid}))["status"] == "cancelled"


async def test_a_client_that_disconnects_and_reconnects_reads_every_event_exactly_once(site: Site) -> None:
    slow = {"default": {"delayMs": 30}}
    async with http_server(site) as server:
        async with http_client(server.url, ALICE) as first:
            rid = data(
                await call(
                    first,
                    "workflow_run",
                    {"name": "steps", "provider": "fake", "fakeScript": slow, "args": {"n": 10}},
                )
            )["runId"]
            page = data(
                await call(
                    first, "workflow_run_events", {"runId": rid, "after": 0, "limit": 3, "waitMs": 5000}
                )
            )
        seen: list[dict[str, Any]] = list(page["events"])
        cursor = page["nextCursor"]
        # The client is gone; the run is not. A new connection continues from the cursor.
        async with http_client(server.url, ALICE) as second:
            with anyio.fail_after(BOUND_S):
                while True:
                    page = data(
                        await call(
                            second, "workflow_run_events", {"runId": rid, "after": cursor, "waitMs": 5000}
                        )
                    )
                    seen += page["events"]
                    cursor = page["nextCursor"]
                    if page["terminal"] and not page["hasMore"]:
                        break
                everything = data(
                    await call(second, "workflow_run_events", {"runId": rid, "after": 0, "limit": 1000})
                )
    assert [e["sequence"] for e in seen] == list(range(1, len(seen) + 1))
    assert seen == everything["events"]
    assert seen[-1]["type"] == "run.completed" and seen[-1]["payload"]["result"] == 10


async def test_one_idempotency_key_used_concurrently_over_two_connections_yields_one_run(site: Site) -> None:
    arguments = {"name": "hello", "provider": "fake", "idempotencyKey": "release-7", "waitMs": 20_000}
    async with (
        http_server(site) as server,
        http_client(server.url, ALICE) as one,
        http_client(server.url, ALICE) as two,
    ):
        results: list[dict[str, Any]] = []

        async def run(client: Any) -> None:
            results.append(data(await call(client, "workflow_run", arguments)))

        with anyio.fail_after(BOUND_S):
            async with anyio.create_task_group() as tg:
                for client in (one, two, one, two):
                    tg.start_soon(run, client)
            later = data(await call(two, "workflow_run", arguments))
        listed = [
            r.uri for r in (await one.list_resources()).resources if r.uri.startswith("workflow://runs/")
        ]
    assert len({r["runId"] for r in [*results, later]}) == 1
    assert [r["deduplicated"] for r in results].count(False) == 1
    assert listed == [f"workflow://runs/{later['runId']}"]


async def test_the_generated_token_file_is_private_and_lets_its_holder_in(site: Site) -> None:
    async with http_server(site, tokens=None) as server:
        token_file = site.state / "http-token"
        assert oct(token_file.stat().st_mode & 0o777) == "0o600"
        token = token_file.read_text().strip()
        async with http_client(server.url, token) as c:
            out = data(await call(c, "workflow_run", {"name": "hello", "provider": "fake", "waitMs": 20_000}))
    assert out["status"] == "completed"
    assert any(str(token_file) in line for line in server.stderr)
