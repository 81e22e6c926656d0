"""A damaged ``type`` cell (the indexed copy of an event's type, written by another program or a bad
disk) beside a sound body: the store's status lookup, its list of unfinished runs and its recovery agree
with the projection of the log every read shows, so a finished run is never listed as running nor
recovered as interrupted. Real SQLite files written with a raw ``sqlite3`` connection."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from pathlib import Path

import pytest

from workflow_mcp.events import EVENT_TYPES, Event
from workflow_mcp.state import project_state, status_of
from workflow_mcp.store import RunRecord, SqliteStore
from workflow_mcp.store._process import this_process

from store_kinds import run_record


def record(run_id: str) -> RunRecord:
    # Owned by this process's pid with no claim: recovery treats it as orphaned once it is unfinished.
    return dataclasses.replace(run_record(run_id), owner_pid=os.getpid(), owner_host=this_process().host)


def ev(run_id: str, seq: int, type: str) -> Event:
    return Event(run_id=run_id, sequence=seq, type=type, timestamp="2026-11-30T10:00:00.000Z", payload={})


def interrupted(rec: RunRecord, sequence: int, reason: str) -> Event:
    return Event(run_id=rec.run_id, sequence=sequence, type="run.interrupted", payload={"reason": reason})


def store_with(path: Path, logs: dict[str, list[str]]) -> None:
    store = SqliteStore(path)
    for run_id, types in logs.items():
        store.create_run(record(run_id))
        store.append_many([ev(run_id, i + 1, t) for i, t in enumerate(types)])
    store.close()


def damage_type(path: Path, run_id: str, sequence: int, sql_value: str) -> None:
    raw = sqlite3.connect(path)
    raw.execute(f"UPDATE events SET type = {sql_value} WHERE run_id = ? AND sequence = ?", (run_id, sequence))
    raw.commit()
    raw.close()


DAMAGE = ["X'00FF'", "CAST(X'72756EFF' AS TEXT)", "5", "''", "'run.done'", "'zzz'"]


@pytest.mark.parametrize("sql_value", DAMAGE)
def test_a_finished_run_whose_terminal_type_cell_is_damaged_stays_finished_everywhere(
    tmp_path: Path, sql_value: str
) -> None:
    path = tmp_path / "state.db"
    store_with(path, {"run_done": ["run.queued", "run.started", "log", "run.completed"]})
    damage_type(path, "run_done", 4, sql_value)

    store = SqliteStore(path)
    try:
        events = store.events("run_done")
        assert project_state(events).status == "completed"
        assert status_of(store.last_run_event("run_done")) == "completed"
        assert store.unfinished_runs() == []
        assert store.recover([], interrupted) == []
        assert store.events("run_done") == events  # no run.interrupted appended to a finished run
    finally:
        store.close()


def test_a_damaged_type_cell_whose_body_is_no_status_event_changes_no_status(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store_with(
        path,
        {
            "run_done": ["run.queued", "run.started", "run.completed", "log"],
            "run_going": ["run.queued", "run.started", "log"],
        },
    )
    damage_type(path, "run_done", 4, "X'00'")
    damage_type(path, "run_going", 3, "X'00'")

    store = SqliteStore(path)
    try:
        assert store.last_run_event("run_done") == "run.completed"
        assert store.last_run_event("run_going") == "run.started"
        assert [r.run_id for r in store.unfinished_runs()] == ["run_going"]
        assert store.recover([], interrupted) == ["run_going"]
        assert store.events("run_going")[-1].type == "run.interrupted"
        assert store.events("run_done")[-1].type == "log"
    finally:
        store.close()


def test_a_damaged_type_cell_of_the_newest_status_event_still_gives_the_status_its_log_says(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    store_with(path, {"run_1": ["run.queued", "log", "run.started", "log"]})
    damage_type(path, "run_1", 3, "X'00'")  # the index alone would find run.queued

    store = SqliteStore(path)
    try:
        assert project_state(store.events("run_1")).status == "running"
        assert store.last_run_event("run_1") == "run.started"
        assert [r.run_id for r in store.unfinished_runs()] == ["run_1"]
    finally:
        store.close()


def test_a_sound_log_is_looked_up_by_the_index_and_lists_as_before(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store_with(path, {"run_a": ["run.queued", "run.started"], "run_b": ["run.queued", "run.failed"]})
    store = SqliteStore(path)
    try:
        assert store.last_run_event("run_a") == "run.started"
        assert store.last_run_event("run_b") == "run.failed"
        assert store.last_run_event("run_nope") is None
        assert [r.run_id for r in store.unfinished_runs()] == ["run_a"]
        plan = [str(r[3]) for r in store._db.execute("EXPLAIN QUERY PLAN " + _odd_rows_sql(), ("run_a",))]
        searches = [d for d in plan if d.startswith("SEARCH")]
        assert not [d for d in plan if d.startswith("SCAN")], plan  # index seeks, never a scan of the log
        # One seek per gap around the known types (one more than there are types).
        assert len(searches) == len(EVENT_TYPES) + 1, plan
        assert all("INDEX events_type (run_id=?" in d for d in searches), plan
    finally:
        store.close()


def _odd_rows_sql() -> str:
    from workflow_mcp.store import sqlite

    return sqlite._ODD_ROWS
