"""``RunStore.events_of_types``: a run's events of some types, read through the type index, equal to
its whole log filtered, on every store; a damaged row is the stand-in every read gives."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp.events import Event
from workflow_mcp.store import SqliteStore
from workflow_mcp.store.base import RunStore

from store_kinds import made_store
from store_kinds import run_record as record

TYPES = ("agent.completed", "agent.cached", "checkpoint.resolved")


def ev(run_id: str, seq: int, type: str, payload: dict[str, Any] | None = None, **ids: Any) -> Event:
    return Event(
        run_id=run_id,
        sequence=seq,
        type=type,
        payload=payload or {},
        timestamp=f"2026-11-30T10:00:{seq % 60:02d}.000Z",
        **ids,
    )


def mixed_log(run_id: str, calls: int = 5) -> list[Event]:
    """A run of ``calls`` agents (queued, started, a delta, completed — every other one replayed),
    a log line each and a checkpoint decision, then its end."""
    events = [ev(run_id, 1, "run.started")]
    for i in range(calls):
        aid = f"ag_{i:04d}"
        base = {"label": f"n{i}", "key": f"v2:{i}", "contentKey": f"c1:{i}"}
        events.append(ev(run_id, len(events) + 1, "agent.queued", base, agent_id=aid))
        if i % 2:
            done = {**base, "result": f"r{i}", "turn": i, "fromRunId": "run_0", "tokenUsage": {}}
            events.append(ev(run_id, len(events) + 1, "agent.cached", done, agent_id=aid))
        else:
            events.append(ev(run_id, len(events) + 1, "agent.started", base, agent_id=aid))
            events.append(ev(run_id, len(events) + 1, "agent.output.delta", {"text": "o"}, agent_id=aid))
            done = {**base, "outcome": "completed", "result": f"r{i}", "turn": i, "tokenUsage": {}}
            events.append(ev(run_id, len(events) + 1, "agent.completed", done, agent_id=aid))
        events.append(ev(run_id, len(events) + 1, "log", {"message": f"line {i}"}))
    decision = {"checkpointId": "cp_1", "decision": "allow", "source": "elicitation"}
    events.append(ev(run_id, len(events) + 1, "checkpoint.resolved", decision, agent_id="ag_0000"))
    events.append(ev(run_id, len(events) + 1, "run.completed", {"result": 1}))
    return events


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    made: RunStore = made_store(request, tmp_path)
    yield made
    made.close()


def test_the_events_of_some_types_are_the_whole_log_filtered_in_order(store: RunStore) -> None:
    for run_id in ("run_a", "run_b"):
        store.create_run(record(run_id))
        store.append_many(mixed_log(run_id, calls=5 if run_id == "run_a" else 3))
    whole = store.events("run_a")
    assert store.events_of_types("run_a", TYPES) == [e for e in whole if e.type in TYPES]
    assert [e.type for e in store.events_of_types("run_a", ["agent.cached"])] == ["agent.cached"] * 2
    assert store.events_of_types("run_a", {"run.started", "run.completed"}) == [whole[0], whole[-1]]
    assert all(e.run_id == "run_b" for e in store.events_of_types("run_b", TYPES))  # never another run's


def test_no_types_an_unknown_type_or_an_unknown_run_give_no_events(store: RunStore) -> None:
    store.create_run(record("run_a"))
    store.append_many(mixed_log("run_a"))
    assert store.events_of_types("run_a", ()) == []
    assert store.events_of_types("run_a", ["no.such.type"]) == []
    assert store.events_of_types("run_nope", TYPES) == []


def damage(db_path: Path, sql: str) -> None:
    db = sqlite3.connect(db_path)
    db.execute(sql)
    db.commit()
    db.close()


def test_a_damaged_body_of_a_wanted_type_is_its_stand_in_as_every_read_gives_it(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state.db")
    try:
        store.create_run(record("run_a"))
        store.append_many(mixed_log("run_a"))
        completed = [e for e in store.events("run_a") if e.type == "agent.completed"][1]
        damage(
            tmp_path / "state.db",
            f"UPDATE events SET body = CAST(X'7BFF' AS TEXT) WHERE sequence = {completed.sequence}",
        )
        found = store.events_of_types("run_a", TYPES)
        assert found == [e for e in store.events("run_a") if e.type in TYPES]
        stand_in = next(e for e in found if e.sequence == completed.sequence)
        assert stand_in.type == "agent.completed" and stand_in.payload["damaged"]["columns"] == ["body"]
    finally:
        store.close()


def test_a_damaged_type_cell_is_read_and_its_sound_body_decides_the_type(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state.db")
    try:
        store.create_run(record("run_a"))
        store.append_many(mixed_log("run_a"))
        cached = next(e for e in store.events("run_a") if e.type == "agent.cached")
        log = next(e for e in store.events("run_a") if e.type == "log")
        # Not UTF-8 text, and a number: neither is a known type, so the index cannot vouch for them.
        damage(tmp_path / "state.db", f"UPDATE events SET type = X'FF00' WHERE sequence = {cached.sequence}")
        damage(tmp_path / "state.db", f"UPDATE events SET type = 7 WHERE sequence = {log.sequence}")
        found = store.events_of_types("run_a", TYPES)
        assert cached in found  # its body is sound: it is the event, whatever its type cell holds
        assert found == [e for e in store.events("run_a") if e.type in TYPES]
        assert log in store.events_of_types("run_a", ["log"])
    finally:
        store.close()
