"""The SQLite run store (exact schema, durability, refusing damaged or newer databases) and its
in-memory twin, which must behave the same on every shared behaviour."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp.events import Event
from workflow_mcp.store import RunRecord, SqliteStore, StoreError
from workflow_mcp.store.base import RunStore

from store_kinds import made_store

MIGRATIONS = Path(__file__).resolve().parents[3] / "src" / "workflow_mcp" / "store" / "migrations"


def expected_schema() -> list[tuple[str, str]]:
    """``(name, sql)`` of every table and index the numbered migration files create, in the order
    ``SqliteStore.schema()`` uses (indexes, then tables, each by name). ``ALTER TABLE t ADD COLUMN c``
    is applied as SQLite records it: ``, c`` inserted before the parenthesis closing ``t``'s columns."""
    created: dict[str, tuple[str, str]] = {}
    files = sorted(MIGRATIONS.glob("[0-9][0-9][0-9][0-9]_*.sql"))
    assert files, f"no migrations in {MIGRATIONS}"
    for path in files:
        text = "\n".join(ln for ln in path.read_text().splitlines() if not ln.strip().startswith("--"))
        for statement in (s.strip() for s in text.split(";")):
            if not statement:
                continue
            added = re.match(r"ALTER TABLE (\w+) ADD COLUMN (.+)", statement, re.DOTALL)
            if added is not None:
                kind, sql = created[added.group(1)]
                close = sql.rindex(")")
                created[added.group(1)] = (kind, f"{sql[:close]}, {added.group(2)}{sql[close:]}")
                continue
            m = re.match(r"CREATE (?:UNIQUE )?(TABLE|INDEX) (\w+)", statement)
            assert m, (
                f"{path.name}: this test only understands CREATE TABLE/INDEX, ADD COLUMN: {statement[:60]}"
            )
            created[m.group(2)] = ("index" if m.group(1) == "INDEX" else "table", statement)
    return [(name, sql) for name, (_, sql) in sorted(created.items(), key=lambda kv: (kv[1][0], kv[0]))]


def newest_migration() -> int:
    return max(int(p.name[:4]) for p in MIGRATIONS.glob("[0-9][0-9][0-9][0-9]_*.sql"))


def record(run_id: str = "run_1", **fields: Any) -> RunRecord:
    base: dict[str, Any] = {
        "run_id": run_id,
        "workflow_name": "wf",
        "source_hash": "h",
        "source": "export const meta = {}",
        "created_at": "2026-11-30T10:00:00.000Z",
    }
    return RunRecord(**{**base, **fields})


def ev(
    seq: int, type: str, payload: dict[str, Any] | None = None, *, run_id: str = "run_1", **ids: Any
) -> Event:
    return Event(
        run_id=run_id,
        sequence=seq,
        type=type,
        payload=payload or {},
        timestamp=f"2026-11-30T10:00:{seq:02d}.000Z",
        **ids,
    )


def agent_lifecycle(run_id: str = "run_1") -> list[Event]:
    """Two agents queued in order a, b; b finishes first; a third is replayed; a fourth fails."""
    usage = {"input": 3, "output": 5, "cacheRead": 0, "cacheWrite": 0}
    return [
        ev(1, "run.started", {"workflow": {"name": "wf"}}, run_id=run_id),
        ev(
            2,
            "agent.queued",
            {"label": "a", "phase": None, "key": "v2:a", "contentKey": "c1:a"},
            run_id=run_id,
            agent_id="ag_a",
        ),
        ev(
            3,
            "agent.queued",
            {"label": "b", "phase": "P", "key": "v2:b", "contentKey": "c1:b"},
            run_id=run_id,
            agent_id="ag_b",
            phase_id="P",
        ),
        ev(4, "agent.started", {"label": "b", "phase": "P"}, run_id=run_id, agent_id="ag_b"),
        ev(5, "agent.output.delta", {"text": "partial"}, run_id=run_id, agent_id="ag_b"),
        ev(
            6,
            "agent.completed",
            {
                "label": "b",
                "outcome": "completed",
                "result": {"ok": "é"},
                "tokenUsage": usage,
                "key": "v2:b",
                "contentKey": "c1:b",
                "sideEffects": True,
            },
            run_id=run_id,
            agent_id="ag_b",
        ),
        ev(7, "agent.started", {"label": "a"}, run_id=run_id, agent_id="ag_a"),
        ev(
            8,
            "agent.completed",
            {
                "label": "a",
                "outcome": "skipped",
                "result": None,
                "tokenUsage": usage,
                "key": "v2:a",
                "contentKey": "c1:a",
                "sideEffects": False,
            },
            run_id=run_id,
            agent_id="ag_a",
        ),
        ev(
            9,
            "agent.queued",
            {"label": "c", "key": "v2:c", "contentKey": "c1:c"},
            run_id=run_id,
            agent_id="ag_c",
        ),
        ev(
            10,
            "agent.cached",
            {
                "label": "c",
                "result": "old",
                "tokenUsage": usage,
                "key": "v2:c",
                "contentKey": "c1:c",
                "fromRunId": "run_0",
                "fromAgentId": "ag_9",
            },
            run_id=run_id,
            agent_id="ag_c",
        ),
        ev(
            11,
            "agent.queued",
            {"label": "d", "key": "v2:d", "contentKey": "c1:d"},
            run_id=run_id,
            agent_id="ag_d",
        ),
        ev(12, "agent.started", {"label": "d"}, run_id=run_id, agent_id="ag_d"),
        ev(
            13,
            "agent.failed",
            {"label": "d", "reason": "error", "message": "boom", "tokenUsage": usage},
            run_id=run_id,
            agent_id="ag_d",
        ),
        ev(14, "log", {"message": "x"}, run_id=run_id),
        ev(15, "run.completed", {"result": 1}, run_id=run_id),
    ]


# -- SQLite only -------------------------------------------------------------------------------


def test_the_database_schema_is_exactly_what_the_migrations_create(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state.db")
    try:
        assert store.schema() == expected_schema()
    finally:
        store.close()


def test_a_new_database_is_at_the_newest_migration_and_in_wal_mode(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "state.db").close()
    db = sqlite3.connect(tmp_path / "state.db")
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == newest_migration()
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        db.close()


def test_reopening_a_database_keeps_its_schema_runs_events_and_journal(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state.db")
    store.create_run(record())
    store.append_many(agent_lifecycle())
    journal = store.journal("run_1")
    store.close()
    again = SqliteStore(tmp_path / "state.db")
    try:
        assert again.schema() == expected_schema()
        assert again.get_run("run_1") == record()
        assert [e.to_json() for e in again.events("run_1")] == [e.to_json() for e in agent_lifecycle()]
        assert again.journal("run_1") == journal
    finally:
        again.close()


def test_a_damaged_database_is_refused_with_a_clear_error_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    garbage = bytes(range(256)) * 64
    path.write_bytes(garbage)
    with pytest.raises(StoreError) as caught:
        SqliteStore(path)
    message = str(caught.value)
    assert str(path) in message
    assert "untouched" in message
    assert path.read_bytes() == garbage
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.db"]


def make_newer(path: Path, *, wal: bool) -> bytes:
    db = sqlite3.connect(path)
    if wal:
        db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE from_the_future (x)")
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()
    return path.read_bytes()


def test_a_database_from_a_newer_release_is_refused_naming_both_versions(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    before = make_newer(path, wal=True)
    with pytest.raises(StoreError) as caught:
        SqliteStore(path)
    message = str(caught.value)
    assert "99" in message and str(newest_migration()) in message
    assert "upgrade" in message
    assert path.read_bytes() == before


def test_a_refused_newer_database_in_rollback_journal_mode_is_never_modified(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    before = make_newer(path, wal=False)
    with pytest.raises(StoreError):
        SqliteStore(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.db"]


# -- the behaviour both stores share -----------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    made: RunStore = made_store(request, tmp_path)
    yield made
    made.close()


def test_a_created_run_reads_back_equal_and_an_unknown_run_is_none(store: RunStore) -> None:
    full = record(
        workflow_path="/w.js",
        args_json='{"a":1}',
        options={"concurrency": 2},
        provider="fake",
        profile="claude-code/2.1.332",
        cwd="/tmp",
        resumed_from="run_0",
        resume_policy="prefix",
        idempotency_key="k",
        owner="me",
        owner_pid=123,
        owner_host="h",
    )
    store.create_run(full)
    assert store.get_run("run_1") == full
    assert store.get_run("run_nope") is None
    assert store.find_idempotent("me", "k") == full
    assert store.find_idempotent("someone else", "k") is None


def test_appended_events_read_back_equal_in_order_with_after_and_limit(store: RunStore) -> None:
    store.create_run(record())
    events = agent_lifecycle()
    for e in events[:5]:
        store.append(e)
    store.append_many(events[5:])
    assert store.events("run_1") == events
    assert store.events("run_1", after=10) == events[10:]
    assert store.events("run_1", after=2, limit=3) == events[2:5]
    assert store.events("run_nope") == []


def test_last_sequence_is_zero_for_an_unknown_run_and_the_highest_appended_otherwise(store: RunStore) -> None:
    store.create_run(record())
    assert store.last_sequence("run_1") == 0
    store.append_many(agent_lifecycle()[:4])
    assert store.last_sequence("run_1") == 4
    assert store.last_sequence("run_nope") == 0


def test_the_journal_has_one_row_per_agent_in_queued_order_with_its_outcome(store: RunStore) -> None:
    store.create_run(record())
    store.append_many(agent_lifecycle())
    rows = {r.agent_id: r for r in store.journal("run_1")}
    assert [r.agent_id for r in store.journal("run_1")] == ["ag_a", "ag_b", "ag_c", "ag_d"]
    assert [r.ordinal for r in store.journal("run_1")] == [0, 1, 2, 3]
    b = rows["ag_b"]
    assert (b.status, b.key, b.content_key, b.label) == ("completed", "v2:b", "c1:b", "b")
    assert json.loads(b.result_json or "") == {"ok": "é"}
    assert b.tokens == {"input": 3, "output": 5, "cacheRead": 0, "cacheWrite": 0}
    assert b.side_effects is True
    assert rows["ag_a"].status == "skipped"
    c = rows["ag_c"]
    assert (c.status, c.source_run, json.loads(c.result_json or "")) == ("cached", "run_0", "old")
    d = rows["ag_d"]
    assert (d.status, d.result_json, d.key) == ("failed", None, "v2:d")


def test_the_last_run_event_ignores_cancellation_requests_and_unfinished_runs_are_listed(
    store: RunStore,
) -> None:
    for run_id in ("run_a", "run_b", "run_c"):
        store.create_run(record(run_id))
    store.append(ev(1, "run.started", run_id="run_a"))
    store.append(ev(2, "run.cancellation_requested", run_id="run_a"))
    store.append(ev(1, "run.started", run_id="run_b"))
    store.append(ev(2, "run.completed", run_id="run_b"))
    assert store.last_run_event("run_a") == "run.started"
    assert store.last_run_event("run_b") == "run.completed"
    assert store.last_run_event("run_c") is None
    assert sorted(r.run_id for r in store.unfinished_runs()) == ["run_a", "run_c"]


def test_runs_are_listed_newest_first_up_to_the_limit(store: RunStore) -> None:
    for i in range(5):
        store.create_run(record(f"run_{i}", created_at=f"2026-11-30T10:00:0{i}.000Z"))
    assert [r.run_id for r in store.list_runs(3)] == ["run_4", "run_3", "run_2"]


def test_artifacts_round_trip_as_bytes(store: RunStore) -> None:
    store.create_run(record())
    store.put_artifact("run_1", "art_1", "report.md", "text/markdown", b"\x00\xff# hi")
    assert store.get_artifact("run_1", "art_1") == ("report.md", "text/markdown", b"\x00\xff# hi")
    assert store.get_artifact("run_1", "art_2") is None


def test_a_cancel_request_is_kept_with_its_first_reason(store: RunStore) -> None:
    store.create_run(record())
    store.request_cancel("run_1", "first")
    store.request_cancel("run_1", "second")
    assert store.cancel_requests(["run_1", "run_other"]) == {"run_1": "first"}
    assert store.cancel_requests([]) == {}


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_for_duplicates(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    made: RunStore = made_store(request, tmp_path)
    yield made
    made.close()


def test_creating_a_run_id_twice_raises_store_error(store_for_duplicates: RunStore) -> None:
    store_for_duplicates.create_run(record())
    with pytest.raises(StoreError):
        store_for_duplicates.create_run(record())
    store_for_duplicates.create_run(record("run_2", idempotency_key="k", owner="o"))
    with pytest.raises(StoreError):
        store_for_duplicates.create_run(record("run_3", idempotency_key="k", owner="o"))


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_for_sequences(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    made: RunStore = made_store(request, tmp_path)
    yield made
    made.close()


def test_appending_a_sequence_that_is_not_after_the_last_raises_store_error(
    store_for_sequences: RunStore,
) -> None:
    store_for_sequences.create_run(record())
    store_for_sequences.append(ev(1, "run.started"))
    store_for_sequences.append(ev(5, "log"))
    with pytest.raises(StoreError):
        store_for_sequences.append(ev(5, "log"))
    with pytest.raises(StoreError):
        store_for_sequences.append(ev(3, "log"))
    assert [e.sequence for e in store_for_sequences.events("run_1")] == [1, 5]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_for_batches(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    made: RunStore = made_store(request, tmp_path)
    yield made
    made.close()


def test_a_batch_of_events_is_stored_all_or_none(store_for_batches: RunStore) -> None:
    store_for_batches.create_run(record())
    store_for_batches.append(ev(1, "run.started"))
    with pytest.raises(Exception):  # noqa: B017 - which error is the duplicate test's business
        store_for_batches.append_many([ev(2, "log"), ev(3, "log"), ev(1, "log")])
    assert [e.sequence for e in store_for_batches.events("run_1")] == [1]
    assert store_for_batches.last_sequence("run_1") == 1


def test_a_page_of_events_with_a_damaged_row_is_the_same_page_with_that_row_a_stand_in(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "state.db")
    try:
        store.create_run(record())
        store.append_many([ev(i, "log", {"message": f"line {i}"}) for i in range(1, 11)])
        sound = store.events("run_1", 3, 4)
        db = sqlite3.connect(tmp_path / "state.db")
        db.execute("UPDATE events SET body = CAST(X'7BFF' AS TEXT) WHERE sequence = 5")
        db.commit()
        db.close()
        paged = store.events("run_1", 3, 4)
        assert [e.sequence for e in paged] == [4, 5, 6, 7]
        assert [e for e in paged if e.sequence != 5] == [e for e in sound if e.sequence != 5]
        stand_in = paged[1]
        assert stand_in.type == "log" and stand_in.payload["damaged"]["columns"] == ["body"]
        assert stand_in.payload["original"] == "{\ufffd"
        assert store.events("run_1", 5) == sound[2:] + store.events("run_1", 7)  # pages after it: bulk path
        assert store.write_problem() is None  # a damaged cell is not a damaged file: writes go on
    finally:
        store.close()
