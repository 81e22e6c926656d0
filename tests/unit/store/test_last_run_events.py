"""``RunStore.last_run_events``: the newest status event of many runs in one read, equal to
``last_run_event`` of each on every store (an unknown run: ``None``; a damaged type cell decides as
every read shows it); and ``WorkflowService.list_runs`` reads the statuses of a page that way, not run
by run."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest

from workflow_mcp import WorkflowService
from workflow_mcp.events import Event
from workflow_mcp.store import RunRecord, SqliteStore
from workflow_mcp.store.base import STATUS_BATCH, RunStore

from store_kinds import made_store


def record(run_id: str, at: int = 0) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        workflow_name="wf",
        source_hash="h",
        source="export const meta = {}",
        created_at=f"2026-11-30T10:{at // 60 % 60:02d}:{at % 60:02d}.000Z",
    )


def log(run_id: str, *types: str) -> list[Event]:
    return [
        Event(run_id=run_id, sequence=i, type=t, payload={}, timestamp="2026-11-30T10:00:00.000Z")
        for i, t in enumerate(types, start=1)
    ]


LOGS = {
    "run_done": ("run.started", "agent.queued", "log", "run.completed"),
    "run_going": ("run.started", "agent.queued", "agent.started", "run.cancel_requested", "log"),
    "run_paused": ("run.started", "run.paused"),
    "run_resumed": ("run.started", "run.paused", "run.resumed", "log"),
    "run_quiet": ("log",),
}


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    made: RunStore = made_store(request, tmp_path)
    yield made
    made.close()


def test_the_statuses_of_many_runs_are_each_runs_last_run_event(store: RunStore) -> None:
    for i, (run_id, types) in enumerate(LOGS.items()):
        store.create_run(record(run_id, i))
        store.append_many(log(run_id, *types))
    store.create_run(record("run_new", 9))  # no event yet
    ids = [*LOGS, "run_new", "run_unknown"]
    batched = store.last_run_events(ids)
    assert batched == {run_id: store.last_run_event(run_id) for run_id in ids}
    assert batched["run_done"] == "run.completed" and batched["run_resumed"] == "run.resumed"
    assert batched["run_going"] == "run.started"  # a cancellation request is no status
    assert batched["run_quiet"] is None and batched["run_new"] is None and batched["run_unknown"] is None
    assert store.last_run_events([]) == {}
    assert store.last_run_events(["run_done", "run_done"]) == {"run_done": "run.completed"}


def test_a_list_longer_than_one_batch_is_read_whole(store: RunStore) -> None:
    ids = [f"run_{i:04d}" for i in range(STATUS_BATCH + 3)]
    for i, run_id in enumerate(ids):
        store.create_run(record(run_id, i))
        store.append_many(log(run_id, "run.started", *(("run.completed",) if i % 2 else ())))
    batched = store.last_run_events(ids)
    assert len(batched) == len(ids)
    assert all(batched[r] == ("run.completed" if i % 2 else "run.started") for i, r in enumerate(ids))


def test_a_damaged_type_cell_decides_as_every_read_of_the_log_shows_it(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state.db")
    try:
        for i, run_id in enumerate(("run_a", "run_b")):
            store.create_run(record(run_id, i))
            store.append_many(log(run_id, "run.started", "log", "run.completed"))
        db = sqlite3.connect(tmp_path / "state.db")
        db.execute("UPDATE events SET type = X'FF00' WHERE run_id = 'run_a' AND sequence = 3")
        db.execute("UPDATE events SET type = 7 WHERE run_id = 'run_b' AND sequence = 2")
        db.commit()
        db.close()
        batched = store.last_run_events(["run_a", "run_b"])
        assert batched == {"run_a": store.last_run_event("run_a"), "run_b": store.last_run_event("run_b")}
        assert batched == {"run_a": "run.completed", "run_b": "run.completed"}  # the bodies are sound
    finally:
        store.close()


class CountingStore(SqliteStore):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.single = 0
        self.batched = 0

    def last_run_event(self, run_id: str) -> str | None:
        self.single += 1
        return super().last_run_event(run_id)

    def last_run_events(self, run_ids: Collection[str]) -> dict[str, str | None]:
        self.batched += 1
        return super().last_run_events(run_ids)


def test_listing_runs_reads_the_statuses_of_the_page_in_one_batch(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "state.db")
    try:
        for i in range(30):
            store.create_run(record(f"run_{i:02d}", i))
            store.append_many(log(f"run_{i:02d}", "run.started", "run.completed" if i % 3 else "run.failed"))
        service = WorkflowService(store, cwd=str(tmp_path))
        listed = service.list_runs(25)
        assert [r.run_id for r in listed] == [f"run_{i:02d}" for i in range(29, 4, -1)]
        assert [r.status for r in listed] == ["completed" if i % 3 else "failed" for i in range(29, 4, -1)]
        assert (store.batched, store.single) == (1, 0)
    finally:
        store.close()
