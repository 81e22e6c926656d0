"""One executor per run over MCP: a second ``workflow_run`` resuming a run that is being resumed is an
``isError`` result that names the resuming run and says what to do; it starts nothing."""

from __future__ import annotations

import pytest

from mcp_kit import PARK, STEPS, Env, call, connect, data, text, wait_for_event

pytestmark = pytest.mark.anyio


async def test_resuming_a_run_that_is_already_being_resumed_is_refused_with_a_clear_error(env: Env) -> None:
    env.workflow("steps", STEPS)
    resume = {"provider": "fake", "fakeScript": PARK, "waitMs": 0}
    async with connect(env.trusted_server()) as c:
        first = data(
            await call(
                c, "workflow_run", {"name": "steps", "provider": "fake", "fakeScript": PARK, "waitMs": 0}
            )
        )["runId"]
        await wait_for_event(c, first, "agent.started")
        await call(c, "workflow_run_cancel", {"runId": first})
        assert (
            data(await call(c, "workflow_run_await", {"runId": first, "waitMs": 20_000}))["status"]
            == "cancelled"
        )
        resuming = data(await call(c, "workflow_run", {"resumeFromRunId": first, **resume}))["runId"]
        await wait_for_event(c, resuming, "agent.started")
        refused = await call(c, "workflow_run", {"resumeFromRunId": first, **resume})
        assert refused.is_error
        assert f"run {first} is already being resumed by process" in text(refused)
        assert f"as run {resuming}" in text(refused)
        assert len(env.service.list_runs()) == 2  # nothing was started for the refused call
        await call(c, "workflow_run_cancel", {"runId": resuming})
        assert (
            data(await call(c, "workflow_run_await", {"runId": resuming, "waitMs": 20_000}))["status"]
            == "cancelled"
        )
        again = data(await call(c, "workflow_run", {"resumeFromRunId": first, **resume}))  # released: allowed
        await call(c, "workflow_run_cancel", {"runId": again["runId"]})
