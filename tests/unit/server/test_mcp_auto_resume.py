"""A server's automatic resume goes through the server's own policy: at its run cap the resume is
deferred (no attempt spent) until a slot frees; a provider the server does not offer is a warning on
the paused run, never a run. Driven with a hand-moved clock through the in-memory SDK client."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from workflow_mcp._auto_resume import AutoResumeSettings
from workflow_mcp.providers.pool import ProviderPool
from workflow_mcp.server import ServerPolicy
from workflow_mcp.service import WorkflowService
from workflow_mcp.store.memory import MemoryStore

from mcp_kit import Env, call, connect, data

pytestmark = pytest.mark.anyio

RESET = "2026-01-01T05:00:00Z"
RESET_EPOCH = 1767243600.0
TWO_CALLS = (
    "export const meta = { name: 'two-calls', description: 'a then b' }\n"
    "const a = await agent('first', { label: 'a' })\n"
    "const b = await agent('second', { label: 'b' })\n"
    "return [a, b]\n"
)
LIMITED = {
    "rules": [{"match": {"label": "b"}, "respond": {"fail": "usage_limit", "resetsAt": RESET}}],
    "default": {"echo": True},
}
SLOW = {"default": {"delayMs": 60_000}}


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock(RESET_EPOCH - 60)


@pytest.fixture
def site(env: Env, clock: Clock) -> Env:
    # The same project, over a service whose fake providers read the hand-moved clock.
    env.service = WorkflowService(
        MemoryStore(), cwd=str(env.project), home=str(env.home), providers=ProviderPool(fake_clock=clock)
    )
    env.workflow("two-calls", TWO_CALLS)
    return env


def notes(env: Env, run_id: str) -> list[dict[str, Any]]:
    return [e.payload for e in env.service.events(run_id) if "autoResume" in e.payload]


async def run(c: Any, script: dict[str, Any], wait_ms: int = 20_000) -> dict[str, Any]:
    return data(
        await call(
            c,
            "workflow_run",
            {"name": "two-calls", "provider": "fake", "fakeScript": script, "waitMs": wait_ms},
        )
    )


async def test_at_its_run_cap_the_server_defers_the_resume_until_a_run_ends(site: Env, clock: Clock) -> None:
    server = site.server(trust=(str(site.project),), policy=ServerPolicy(max_runs=1))
    resumer = server.auto_resumer(AutoResumeSettings(attempts=1, backoff_s=30), clock=clock)
    async with connect(server) as c:
        paused = await run(c, LIMITED)
        assert paused["status"] == "paused"
        busy = await run(c, SLOW, wait_ms=0)
        clock.now = RESET_EPOCH
        assert await resumer.tick() == []
        (deferred,) = notes(site, paused["runId"])
        assert deferred["message"].startswith(
            "auto-resume deferred: this server is at its limit of concurrent runs"
        )
        await call(c, "workflow_run_cancel", {"runId": busy["runId"]})
        await asyncio.wait_for(site.service.live[busy["runId"]].wait(), 30)
        clock.now += 30
        (resumed,) = await resumer.tick()
        done = data(await call(c, "workflow_run_await", {"runId": resumed, "waitMs": 20_000}))
    assert done["status"] == "completed" and done["result"] == ["first", "second"]
    assert notes(site, paused["runId"])[-1]["autoResume"] == {
        "attempt": 1,
        "attempts": 1,
        "resumedAs": resumed,
    }


async def test_a_provider_the_server_does_not_offer_is_a_warning_and_no_run(site: Env, clock: Clock) -> None:
    async with connect(site.server(trust=(str(site.project),))) as c:
        paused = await run(c, LIMITED)
    narrow = site.server(trust=(str(site.project),), policy=ServerPolicy(providers=("codex",)))
    resumer = narrow.auto_resumer(AutoResumeSettings(attempts=1), clock=clock)
    clock.now = RESET_EPOCH
    before = len(site.service.list_runs())
    assert await resumer.tick() == [] and len(site.service.list_runs()) == before
    (warning,) = notes(site, paused["runId"])
    assert warning["message"].startswith(
        "auto-resume attempt 1 of 1 could not start: the run uses provider 'fake', which this server does not offer"
    )


async def test_a_restarted_server_takes_on_a_stored_paused_run_through_its_own_policy(
    site: Env, clock: Clock
) -> None:
    async with connect(site.server(trust=(str(site.project),))) as c:
        paused = await run(c, LIMITED)
    await site.service.shutdown()
    # The restarted server: a new service over the same store, the run in it but not in its hands.
    site.service = WorkflowService(
        site.service.store,
        cwd=str(site.project),
        home=str(site.home),
        providers=ProviderPool(fake_clock=clock),
    )
    assert paused["runId"] not in site.service.live
    narrow = site.server(trust=(str(site.project),), policy=ServerPolicy(providers=("codex",)))
    refused = narrow.auto_resumer(AutoResumeSettings(attempts=1), clock=clock, owners={None})
    server = site.server(trust=(str(site.project),))
    resumer = server.auto_resumer(AutoResumeSettings(), clock=clock, owners={None})
    assert await resumer.tick() == [] and resumer.waiting() == {paused["runId"]: RESET_EPOCH}
    clock.now = RESET_EPOCH
    assert await refused.tick() == []  # a server that does not offer its provider does not resume it
    (warning,) = notes(site, paused["runId"])
    assert "which this server does not offer" in warning["message"]
    (resumed,) = await resumer.tick()
    async with connect(server) as c:
        done = data(await call(c, "workflow_run_await", {"runId": resumed, "waitMs": 20_000}))
    assert done["status"] == "completed" and done["result"] == ["first", "second"]
    assert notes(site, paused["runId"])[-1]["autoResume"]["resumedAs"] == resumed
