"""A run paused for a usage limit: workflow_run_status and workflow_run_await say when the limit
resets (``resetsAt``), in the structured result and in the text."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflow_mcp.events import Event
from workflow_mcp.server import SourceTrust, create_server
from workflow_mcp.service import WorkflowService
from workflow_mcp.store.base import RunRecord
from workflow_mcp.store.memory import MemoryStore

from mcp_kit import call, connect, data, text

pytestmark = pytest.mark.anyio

STAMP = "2026-01-01T00:00:00.000Z"
RESETS = "2026-01-01T05:00:00Z"
SOURCE = "export const meta = { name: 'w', description: 'one call' }\nreturn await agent('a')\n"


def paused_run(tmp_path: Path, payload: dict[str, object]) -> WorkflowService:
    store = MemoryStore()
    store.create_run(
        RunRecord(
            run_id="run_paused", workflow_name="w", source_hash="0" * 64, source=SOURCE, created_at=STAMP
        )
    )
    store.append_many(
        [
            Event(run_id="run_paused", sequence=1, type="run.started", payload={}, timestamp=STAMP),
            Event(run_id="run_paused", sequence=2, type="run.paused", payload=payload, timestamp=STAMP),
        ]
    )
    (tmp_path / "project").mkdir()
    return WorkflowService(store, cwd=str(tmp_path / "project"))


async def test_a_usage_limit_pause_shows_when_the_limit_resets(tmp_path: Path) -> None:
    service = paused_run(tmp_path, {"reason": "usage_limit", "resetsAt": RESETS})
    async with connect(create_server(service)) as c:
        status = await call(c, "workflow_run_status", {"runId": "run_paused"})
        outcome = await call(c, "workflow_run_await", {"runId": "run_paused", "waitMs": 0})
    assert data(status)["status"] == "paused" and data(status)["pausedReason"] == "usage_limit"
    assert data(status)["resetsAt"] == RESETS and f"resets at {RESETS}" in text(status)
    assert data(outcome)["resetsAt"] == RESETS and f"resets at {RESETS}" in text(outcome)


async def test_a_pause_without_a_reset_time_has_no_resets_at(tmp_path: Path) -> None:
    service = paused_run(tmp_path, {"reason": "auth_required"})
    async with connect(create_server(service)) as c:
        status = data(await call(c, "workflow_run_status", {"runId": "run_paused"}))
    assert status["pausedReason"] == "auth_required" and "resetsAt" not in status


async def test_cancelling_a_paused_run_closes_it_and_a_resume_of_it_is_refused_naming_the_rule(
    tmp_path: Path,
) -> None:
    service = paused_run(tmp_path, {"reason": "usage_limit", "resetsAt": RESETS, "resumable": True})
    trust = SourceTrust(approvals_path=str(tmp_path / "approvals.json"), allow_inline=True)
    async with connect(create_server(service, trust=trust)) as c:
        cancelled = await call(c, "workflow_run_cancel", {"runId": "run_paused", "reason": "gave up"})
        again = await call(c, "workflow_run_cancel", {"runId": "run_paused"})
        status = data(await call(c, "workflow_run_status", {"runId": "run_paused"}))
        resumed = await c.call_tool("workflow_run", {"resumeFromRunId": "run_paused", "waitMs": 0})
    assert data(cancelled) == {"runId": "run_paused", "outcome": "closed", "status": "cancelled"}
    assert (
        text(cancelled)
        == "Run run_paused is cancelled: it had ended paused or interrupted and will not be resumed."
    )
    assert data(again)["outcome"] == "cancelled" and "nothing to cancel" in text(again)
    assert status["status"] == "cancelled" and "pausedReason" not in status and "resetsAt" not in status
    assert resumed.is_error
    assert "run run_paused was cancelled while paused (gave up), so it is not resumed" in text(resumed)


async def test_cancelling_a_paused_run_another_run_already_resumes_names_that_run(tmp_path: Path) -> None:
    service = paused_run(tmp_path, {"reason": "usage_limit", "resumable": True})
    service.store.create_run(
        RunRecord(
            run_id="run_next",
            workflow_name="w",
            source_hash="0" * 64,
            source="",
            created_at=STAMP,
            resumed_from="run_paused",
        )
    )
    service.store.append(
        Event(
            run_id="run_paused",
            sequence=3,
            type="log",
            timestamp=STAMP,
            payload={"message": "resumed as run run_next", "resumedAs": "run_next"},
        )
    )
    async with connect(create_server(service)) as c:
        refused = await c.call_tool("workflow_run_cancel", {"runId": "run_paused"})
    assert refused.is_error
    assert text(refused) == (
        "run run_paused was not cancelled: it was resumed as run run_next, which carries on its work; cancel "
        "that run instead (workflow_run_cancel `run_next`)"
    )
