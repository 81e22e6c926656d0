"""Two ``workflow-mcp serve --http`` processes on one PostgreSQL database: a run started through server A
is followed, awaited and cancelled through server B; when A is killed with SIGKILL mid-run, B marks the
run interrupted and resumes it with no completed result lost and no completed call run twice."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from mcp_kit import BOUND_S, PARK, all_events, call, data, wait_for_event
from mcp_serve_kit import ALICE, HttpServer, Site, http_client, http_server, secret

pytestmark = pytest.mark.anyio

FAN = """export const meta = { name: 'fan', description: 'six calls at once' }
return await parallel([0, 1, 2, 3, 4, 5].map((i) => () => agent('task ' + i, { label: 't' + i })))
"""
# t4 and t5 park until the run ends; the others answer at once.
PARKED = {"delayMs": 120_000}
HALF_PARKED = {
    "rules": [{"match": {"label": "t4"}, "respond": PARKED}, {"match": {"label": "t5"}, "respond": PARKED}],
    "default": {"text": "done {label}"},
}
QUICK = {"default": {"text": "done {label}"}}


@asynccontextmanager
async def two_servers(site: Site, url: str) -> AsyncIterator[tuple[HttpServer, HttpServer]]:
    args = ("--database-url", url)
    async with http_server(site, args=args) as a, http_server(site, args=args) as b:
        yield a, b


def labels(events: list[dict[str, Any]], kind: str) -> list[str]:
    return sorted(e["payload"]["label"] for e in events if e["type"] == kind)


async def test_a_run_started_on_one_server_is_followed_awaited_and_cancelled_through_another(
    site: Site, postgres_url: str
) -> None:
    async with (
        two_servers(site, postgres_url) as (a, b),
        http_client(a.url, ALICE) as on_a,
        http_client(b.url, ALICE) as on_b,
    ):
        with anyio.fail_after(BOUND_S):
            rid = data(
                await call(on_a, "workflow_run", {"name": "hello", "provider": "fake", "fakeScript": PARK})
            )["runId"]
            await wait_for_event(on_b, rid, "agent.started")  # followed through B
            assert data(await call(on_b, "workflow_run_status", {"runId": rid}))["status"] == "running"
            waited = data(await call(on_b, "workflow_run_await", {"runId": rid, "waitMs": 200}))
            assert waited["status"] == "running"
            cancelled = data(await call(on_b, "workflow_run_cancel", {"runId": rid}))
            # B asks through the database; A, which executes the run, stops it within its poll interval.
            assert cancelled["status"] in ("running", "cancelled")
            done = data(await call(on_b, "workflow_run_await", {"runId": rid, "waitMs": 20_000}))
            assert done["status"] == "cancelled"
            # A executed the run, and it saw the cancellation B asked for through the database.
            assert data(await call(on_a, "workflow_run_status", {"runId": rid}))["status"] == "cancelled"


async def test_a_run_of_a_sigkilled_server_is_resumed_on_another_losing_nothing_and_repeating_nothing(
    site: Site, postgres_url: str
) -> None:
    site.workflow("fan", FAN)
    async with (
        two_servers(site, postgres_url) as (a, b),
        http_client(a.url, ALICE) as on_a,
        http_client(b.url, ALICE) as on_b,
    ):
        with anyio.fail_after(BOUND_S):
            rid = data(
                await call(
                    on_a,
                    "workflow_run",
                    {"name": "fan", "provider": "fake", "fakeScript": HALF_PARKED, "concurrency": 6},
                )
            )["runId"]
            await wait_for_event(on_b, rid, "agent.completed", count=4)
            await wait_for_event(on_b, rid, "agent.started", count=6)
            a.proc.send_signal(signal.SIGKILL)
            await a.proc.wait()

            # B finds A gone (its process, on this host) and records the run interrupted.
            awaited = data(await call(on_b, "workflow_run_await", {"runId": rid, "waitMs": 20_000}))
            assert awaited["status"] == "interrupted"
            assert data(await call(on_b, "workflow_run_status", {"runId": rid}))["status"] == "interrupted"
            before = await all_events(on_b, rid)
            assert labels(before, "agent.completed") == ["t0", "t1", "t2", "t3"]

            resumed = data(
                await call(
                    on_b,
                    "workflow_run",
                    {"resumeFromRunId": rid, "provider": "fake", "fakeScript": QUICK, "waitMs": 20_000},
                )
            )
            assert resumed["status"] == "completed", resumed
            assert resumed["result"] == [f"done t{i}" for i in range(6)]
            events = await all_events(on_b, resumed["runId"])
            after = await all_events(on_b, rid)
    # 0 completed results lost: the four finished calls are replayed from the journal ...
    assert labels(events, "agent.cached") == ["t0", "t1", "t2", "t3"]
    # ... and 0 completed calls run twice: only the two A never finished run again.
    assert labels(events, "agent.started") == ["t4", "t5"]
    # The killed run's own log is kept as it was; the one event after it names the run continuing it.
    assert after[: len(before)] == before
    assert [(e["type"], e["payload"].get("resumedAs")) for e in after[len(before) :]] == [
        ("log", resumed["runId"])
    ]


async def test_a_run_id_no_stored_run_can_have_is_not_found_in_the_viewer_and_the_tools(
    site: Site, postgres_url: str
) -> None:
    # PostgreSQL text holds no NUL character: looking one up failed inside the database, which the
    # viewer answered with a 500 and a traceback on the server's stderr.
    import httpx2

    async with (
        http_server(site, args=("--database-url", postgres_url)) as server,
        http_client(server.url, ALICE) as alice,
        httpx2.AsyncClient(timeout=BOUND_S) as h,
    ):
        with anyio.fail_after(BOUND_S):
            bearer = {"Authorization": f"Bearer {secret(ALICE)}"}
            base = f"http://127.0.0.1:{server.port}/ui"
            for path in ("/api/runs/run_x%00y", "/runs/run_x%00y", "/api/runs/run_x%00y/events"):
                answer = await h.get(base + path, headers=bearer)
                assert answer.status_code == 404, (path, answer.text)
            status = await alice.call_tool("workflow_run_status", {"runId": "run_x\u0000y"})
            assert status.is_error and "No run" in status.content[0].text, status.content  # type: ignore[union-attr]
            assert not any("Traceback" in line for line in server.stderr), "".join(server.stderr)
