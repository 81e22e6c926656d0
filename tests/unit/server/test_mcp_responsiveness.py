"""One client's heavy request never stalls the others: projecting a run's whole log runs in a worker
thread, reading the store in pages. Measured, not slept: the cheap call must finish while the heavy one
is still in flight."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from workflow_mcp.events import Event
from workflow_mcp.server import create_server
from workflow_mcp.service import WorkflowService
from workflow_mcp.store.base import RunRecord
from workflow_mcp.store.sqlite import SqliteStore

from mcp_kit import BOUND_S, call, connect, data

pytestmark = pytest.mark.anyio

BIG_EVENTS = 150_000
STAMP = "2026-01-01T00:00:00.000Z"


class WatchedStore(SqliteStore):
    """A real SQLite store that says when the big run's log starts being read."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.reading_big = threading.Event()

    def events(self, run_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        if run_id == "run_big":
            self.reading_big.set()
        return super().events(run_id, after, limit)


def seed(store: SqliteStore, run_id: str, n: int) -> None:
    store.create_run(
        RunRecord(run_id=run_id, workflow_name=run_id, source_hash="0" * 64, source="", created_at=STAMP)
    )
    events = [Event(run_id=run_id, sequence=1, type="run.started", payload={}, timestamp=STAMP)]
    events += [
        Event(run_id=run_id, sequence=i, type="log", payload={"message": f"line {i}"}, timestamp=STAMP)
        for i in range(2, n + 1)
    ]
    events.append(
        Event(run_id=run_id, sequence=n + 1, type="run.completed", payload={"result": n}, timestamp=STAMP)
    )
    store.append_many(events)


async def test_a_status_call_on_a_huge_run_does_not_stall_another_clients_call(tmp_path: Path) -> None:
    store = WatchedStore(tmp_path / "state.db")
    seed(store, "run_big", BIG_EVENTS)
    seed(store, "run_small", 3)
    server = create_server(WorkflowService(store, cwd=str(tmp_path)))
    timings: dict[str, float] = {}

    async def heavy(c: Any) -> None:
        start = time.perf_counter()
        out = data(await call(c, "workflow_run_status", {"runId": "run_big"}))
        timings["heavy"] = time.perf_counter() - start
        assert out["status"] == "completed" and out["logTail"][-1] == f"line {BIG_EVENTS}"

    async with connect(server) as a, connect(server) as b, anyio.create_task_group() as tg:
        tg.start_soon(heavy, a)
        with anyio.fail_after(BOUND_S):
            await anyio.to_thread.run_sync(store.reading_big.wait)
        start = time.perf_counter()
        small = data(await call(b, "workflow_run_status", {"runId": "run_small"}))
        timings["cheap"] = time.perf_counter() - start
        assert "heavy" not in timings, f"the cheap call waited for the heavy one: {timings}"
        assert small["status"] == "completed"
    assert timings["cheap"] < timings["heavy"] / 2, timings
