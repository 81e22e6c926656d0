"""``SqliteStore.damaged_events`` does not scan the bodies of a run whose every event the store wrote
itself while no other connection committed to the file (a server resuming a run it ran); any other
connection's commit — damage written by another program included — makes it scan again, so damage is
never missed. Real SQLite files; the other program is a raw ``sqlite3`` connection."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from workflow_mcp.errors import StoreError
from workflow_mcp.events import Event
from workflow_mcp.store import SqliteStore

from store_kinds import run_record


def log(run_id: str, sequence: int, message: str) -> Event:
    return Event(
        run_id=run_id,
        sequence=sequence,
        type="log",
        timestamp="2026-11-30T10:00:00.000Z",
        payload={"message": message},
    )


def logs(run_id: str, first: int, last: int) -> list[Event]:
    return [log(run_id, i, f"line {i}") for i in range(first, last + 1)]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    made = SqliteStore(tmp_path / "state.db")
    made.create_run(run_record("run_1"))
    made.append_many(logs("run_1", 1, 5))
    yield made
    made.close()


def damage(path: Path, run_id: str, sequence: int) -> None:
    db = sqlite3.connect(path)
    db.execute(
        "UPDATE events SET body = CAST(X'7BFF' AS TEXT) WHERE run_id = ? AND sequence = ?", (run_id, sequence)
    )
    db.commit()
    db.close()


def body_reads(store: SqliteStore, run_id: str) -> tuple[list[Event], list[str]]:
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)  # what the store asks SQLite, nothing changed
    try:
        found = store.damaged_events(run_id)
    finally:
        store._db.set_trace_callback(None)
    return found, [s for s in statements if "body" in s]


def test_a_run_the_store_wrote_itself_is_known_undamaged_without_reading_its_bodies(
    store: SqliteStore,
) -> None:
    store.append_many(logs("run_1", 6, 9))
    assert body_reads(store, "run_1") == ([], [])


def test_damage_another_program_wrote_after_the_store_wrote_the_run_is_found_by_the_open_store(
    store: SqliteStore,
) -> None:
    damage(store.path, "run_1", 3)
    found, reads = body_reads(store, "run_1")
    assert [e.sequence for e in found] == [3] and found[0].payload["damaged"]["columns"] == ["body"]
    assert reads  # the bodies were scanned
    # Writing more of the run does not make the store forget that it no longer wrote all of it.
    store.append_many(logs("run_1", 6, 7))
    assert [e.sequence for e in store.damaged_events("run_1")] == [3]


def test_damage_written_between_two_batches_of_the_store_is_found(store: SqliteStore) -> None:
    damage(store.path, "run_1", 2)
    store.append_many(logs("run_1", 6, 7))  # the store notices the other commit when it writes
    assert [e.sequence for e in store.damaged_events("run_1")] == [2]


def test_any_other_commit_to_the_file_makes_every_run_scanned_again(
    store: SqliteStore, tmp_path: Path
) -> None:
    other = SqliteStore(tmp_path / "state.db")  # another store (another process, or another server)
    try:
        other.create_run(run_record("run_2"))
        other.append_many(logs("run_2", 1, 2))
    finally:
        other.close()
    found, reads = body_reads(store, "run_1")
    assert found == [] and reads


def test_a_run_stored_by_an_earlier_opening_is_scanned(store: SqliteStore, tmp_path: Path) -> None:
    store.close()
    reopened = SqliteStore(tmp_path / "state.db")
    try:
        found, reads = body_reads(reopened, "run_1")
        assert found == [] and reads
    finally:
        reopened.close()


def test_a_refused_batch_leaves_the_run_scanned_again(store: SqliteStore) -> None:
    with pytest.raises(StoreError):  # a lone surrogate cannot be stored
        store.append_many([log("run_1", 6, "\ud800")])
    found, reads = body_reads(store, "run_1")
    assert found == [] and reads
