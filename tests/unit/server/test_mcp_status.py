"""Run status through the MCP tools: one vocabulary (a paused run has ended: awaiting it returns at once,
without spinning, and says how to continue), and calls stopped by a cancellation counted as cancelled,
not failed. Driven through the in-memory SDK client over the real service, realm and fake provider."""

from __future__ import annotations

import time

import anyio
import pytest

from workflow_mcp import load_workflow

from helpers import PAUSES, STOPPED, STOPPED_SCRIPT, LoggedOutAfterFirst
from mcp_kit import BOUND_S, Env, call, connect, data, text, wait_for_event

pytestmark = pytest.mark.anyio

CPU_BUDGET_S = 0.1
# The longest wait a call may ask for, which an await on a paused run must not serve: "at once" is any
# time well under it, so a loaded machine's slow second never reads as waiting (CPU_BUDGET_S guards
# against a busy wait).
WAIT_MS = 25_000
AT_ONCE_S = WAIT_MS / 1000 / 2


async def paused_run(env: Env) -> str:
    handle = env.service.start_run(load_workflow(source=PAUSES), provider=LoggedOutAfterFirst())
    with anyio.fail_after(BOUND_S):
        assert await handle.wait() == "paused"
    return handle.run_id


async def test_awaiting_a_paused_run_returns_at_once_using_almost_no_cpu(env: Env) -> None:
    rid = await paused_run(env)
    async with connect(env.trusted_server()) as c:
        cpu, wall = time.process_time(), time.perf_counter()
        result = await call(c, "workflow_run_await", {"runId": rid, "waitMs": WAIT_MS})
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        page = data(await call(c, "workflow_run_events", {"runId": rid, "after": 1_000, "waitMs": WAIT_MS}))
    out = data(result)
    assert cpu < CPU_BUDGET_S, f"workflow_run_await on a paused run burnt {cpu:.2f} s of CPU"
    assert wall < AT_ONCE_S, f"workflow_run_await on a paused run took {wall:.2f} s of its {WAIT_MS} ms wait"
    assert out["status"] == "paused" and out["terminal"] is True and out["pausedReason"] == "auth_required"
    assert not result.is_error
    assert f"resumeFromRunId {rid!r}" in text(result) and "log in" in text(result)
    assert page["events"] == [] and page["status"] == "paused" and page["terminal"] is True


async def test_calls_stopped_by_a_cancellation_are_counted_cancelled_not_failed(env: Env) -> None:
    env.workflow("stopped", STOPPED)
    async with connect(env.trusted_server()) as c:
        rid = data(
            await call(
                c,
                "workflow_run",
                {"name": "stopped", "provider": "fake", "fakeScript": STOPPED_SCRIPT, "concurrency": 2},
            )
        )["runId"]
        await wait_for_event(c, rid, "agent.failed")
        await wait_for_event(c, rid, "agent.started", count=3)
        cancelled = data(await call(c, "workflow_run_cancel", {"runId": rid}))
        snapshot = await call(c, "workflow_run_status", {"runId": rid})
    snap = data(snapshot)
    assert cancelled["status"] == "cancelled"
    assert snap["counts"] == {
        "queued": 0,
        "running": 0,
        "completed": 0,
        "failed": 1,
        "cancelled": 3,  # two stopped while running, one still queued when the run ended
        "cached": 0,
    }
    states = {call_["label"]: call_["state"] for call_ in snap["recentCalls"]}
    assert states == {"broken": "failed", "slow-1": "cancelled", "slow-2": "cancelled", "slow-3": "cancelled"}
    assert "1 failed, 3 cancelled" in text(snapshot)
