"""One client's heavy request never stalls the others: projecting a run's whole log runs in a worker
thread, reading the store in pages; projections of big runs share a few threads of their own, so however
many arrive the rest of the pool stays free; and following a live run reads nothing back. Measured or
gated, never slept: the cheap call must finish while the heavy ones are still in flight."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from workflow_mcp.events import Event
from workflow_mcp.server import SourceTrust, create_server
from workflow_mcp.server.mcp import BIG_RUN_EVENTS, BIG_RUN_THREADS
from workflow_mcp.service import WorkflowService
from workflow_mcp.store.base import RunRecord
from workflow_mcp.store.sqlite import SqliteStore

from mcp_kit import BOUND_S, call, connect, data

pytestmark = pytest.mark.anyio

BIG_EVENTS = 150_000
STAMP = "2026-01-01T00:00:00.000Z"


class WatchedStore(SqliteStore):
    """A real SQLite store that says when the big run's log starts being read, can hold those reads
    until released, and counts the events it hands out per run."""

    def __init__(self, path: Path, *, hold: bool = False) -> None:
        super().__init__(path)
        self.reading_big = threading.Event()
        self.readers = threading.Semaphore(0)
        self.release = threading.Event()
        self.hold = hold
        self.handed: dict[str, int] = {}

    def events(self, run_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        if run_id == "run_big":
            self.reading_big.set()
            if self.hold:
                self.readers.release()
                assert self.release.wait(BOUND_S), "never released"
        out = super().events(run_id, after, limit)
        self.handed[run_id] = self.handed.get(run_id, 0) + len(out)
        return out


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


def service_of(tmp_path: Path, store: SqliteStore) -> WorkflowService:
    (tmp_path / "project").mkdir(exist_ok=True)
    return WorkflowService(store, cwd=str(tmp_path / "project"))


async def test_a_status_call_on_a_huge_run_does_not_stall_another_clients_call(tmp_path: Path) -> None:
    store = WatchedStore(tmp_path / "state" / "state.db")
    seed(store, "run_big", BIG_EVENTS)
    seed(store, "run_small", 3)
    server = create_server(service_of(tmp_path, store))
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


async def test_more_big_run_requests_than_worker_threads_leave_threads_for_everyone_else(
    tmp_path: Path,
) -> None:
    store = WatchedStore(tmp_path / "state" / "state.db", hold=True)
    seed(store, "run_big", BIG_RUN_EVENTS + 1)
    seed(store, "run_small", 3)
    server = create_server(service_of(tmp_path, store))
    pool = anyio.to_thread.current_default_thread_limiter()
    pool.total_tokens = 4  # the default pool, made small: 4 big requests would take all of it
    requests = [
        ("workflow_run_status", {"runId": "run_big"}),
        ("workflow_run_cancel", {"runId": "run_big"}),
    ] * 3
    try:
        async with connect(server) as a, connect(server) as b, anyio.create_task_group() as tg:
            for tool, arguments in requests:
                tg.start_soon(call, a, tool, arguments)
            for _ in range(BIG_RUN_THREADS):  # the big-run threads are all busy, holding the store read
                assert await anyio.to_thread.run_sync(store.readers.acquire, True, BOUND_S)
            with anyio.fail_after(BOUND_S / 2):
                small = data(await call(b, "workflow_run_status", {"runId": "run_small"}))
                listed = data(await call(b, "workflow_list", {}))
            assert pool.borrowed_tokens == 0  # the held big-run reads hold none of the default pool
            store.release.set()
    finally:
        store.release.set()
        pool.total_tokens = 40
    assert small["status"] == "completed" and listed["workflows"] == []


async def test_following_a_run_with_progress_reads_none_of_its_log_back_from_the_store(
    tmp_path: Path,
) -> None:
    store = WatchedStore(tmp_path / "state" / "state.db")
    service = service_of(tmp_path, store)
    flows = Path(service.cwd) / ".claude" / "workflows"
    flows.mkdir(parents=True)
    (flows / "chatty.js").write_text(
        "export const meta = { name: 'chatty', description: 'logs and calls agents in turn' }\n"
        "for (let i = 0; i < 300; i++) { log('line ' + i); await agent('step ' + i) }\n"
        "return 1\n"
    )
    server = create_server(service, trust=SourceTrust(trusted_dirs=(service.cwd,)))
    reported: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append(progress)

    async with connect(server) as c:
        result = await c.call_tool(
            "workflow_run",
            {"name": "chatty", "provider": "fake", "waitMs": 25_000},
            progress_callback=on_progress,
        )
    out = result.structured_content
    assert out is not None and out["status"] == "completed"
    (run_id,) = [r.run_id for r in service.list_runs()]
    total = service.event_count(run_id)
    assert total > 1_200 and len(reported) > 100  # many batches, each reported
    # The service keeps the run's state as its batches are committed: progress and the final outcome
    # come from it, so not one event is read back (re-projecting the log per batch read it hundreds of
    # times).
    assert store.handed.get(run_id, 0) == 0, (store.handed[run_id], total)
