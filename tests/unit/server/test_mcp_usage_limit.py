"""A run paused for a usage limit: workflow_run_status and workflow_run_await say when the limit
resets (``resetsAt``), in the structured result and in the text."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflow_mcp.events import Event
from workflow_mcp.server import create_server
from workflow_mcp.service import WorkflowService
from workflow_mcp.store.base import RunRecord
from workflow_mcp.store.memory import MemoryStore

from mcp_kit import call, connect, data, text

pytestmark = pytest.mark.anyio

STAMP = "2026-01-01T00:00:00.000Z"
RESETS = "2026-01-01T05:00:00Z"


def paused_run(tmp_path: Path, payload: dict[str, object]) -> WorkflowService:
    store = MemoryStore()
    store.create_run(
        RunRecord(run_id="run_paused", workflow_name="w", source_hash="0" * 64, source="", created_at=STAMP)
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
