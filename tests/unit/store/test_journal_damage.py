"""A damaged journal entry (a cell written by another program or a bad disk) is left out of every
read of the journal and named by ``journal_damage``; the run's other entries still load, and the run's
next events are still stored. Real SQLite files written with a raw ``sqlite3`` connection, and the
session's real PostgreSQL server written with a raw ``psycopg`` connection."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp.events import Event
from workflow_mcp.store import RunRecord, SqliteStore
from workflow_mcp.store.base import JournalDamage


def record(run_id: str = "run_1") -> RunRecord:
    return RunRecord(
        run_id=run_id,
        workflow_name="wf",
        source_hash="h",
        source="export const meta = {}",
        created_at="2026-11-30T10:00:00.000Z",
    )


def ev(seq: int, type: str, agent_id: str, **payload: Any) -> Event:
    return Event(
        run_id="run_1",
        sequence=seq,
        type=type,
        timestamp="2026-11-30T10:00:00.000Z",
        agent_id=agent_id,
        payload=payload,
    )


def three_calls() -> list[Event]:
    out = []
    for i, name in enumerate(("a", "b", "c")):
        agent = f"ag_{name}"
        out.append(
            ev(2 * i + 1, "agent.queued", agent, label=name, key=f"v2:{name}", contentKey=f"c1:{name}")
        )
        out.append(
            ev(2 * i + 2, "agent.completed", agent, label=name, result={"n": i}, tokenUsage={"input": 1})
        )
    return out


# (column, SQL value, parameters): each a way another program or a bad disk can leave a cell.
SQLITE_DAMAGE = [
    ("agent_id", "CAST(X'FF' AS TEXT)"),  # not UTF-8
    ("agent_id", "X'61675F62'"),  # a BLOB where text is expected
    ("agent_id", "''"),
    ("ordinal", "'first'"),
    ("key", "X'00'"),
    ("content_key", "X'63313A62'"),  # a BLOB spelling its old text
    ("status", "CAST(X'C3' AS TEXT)"),
    ("label", "X'FF'"),
    ("result_json", "'{\"n\": 1'"),  # truncated JSON
    ("result_json", "X'7B7D'"),  # a BLOB where JSON is expected
    ("tokens_json", "'{cut'"),
    ("tokens_json", "'[1, 2]'"),  # JSON, but not an object of counts
    ("tokens_json", '\'{"input": "many"}\''),
    ("side_effects", "'yes'"),
    ("source_run", "X'FF'"),
]


@pytest.mark.parametrize(("column", "sql_value"), SQLITE_DAMAGE, ids=[f"{c}-{v}" for c, v in SQLITE_DAMAGE])
def test_a_damaged_sqlite_journal_cell_leaves_out_that_entry_only_and_names_it(
    tmp_path: Path, column: str, sql_value: str
) -> None:
    path = tmp_path / "state.db"
    store = SqliteStore(path)
    store.create_run(record())
    store.append_many(three_calls())
    intact = store.journal("run_1")
    store.close()
    raw = sqlite3.connect(path)
    raw.execute(f"UPDATE journal SET {column} = {sql_value} WHERE run_id = 'run_1' AND agent_id = 'ag_b'")
    raw.commit()
    raw.close()

    store = SqliteStore(path)
    try:
        assert store.journal("run_1") == [intact[0], intact[2]]
        (damage,) = store.journal_damage("run_1")
        assert damage.run_id == "run_1" and damage.columns == (column,)
        assert damage.agent_id == (None if column == "agent_id" else "ag_b")
        assert damage.ordinal == (None if column == "ordinal" else 1)
        assert "of run run_1 is damaged" in damage.message and column in damage.message
        # The run goes on: its next events are stored and journaled beside the damaged entry.
        store.append_many(
            [ev(7, "agent.queued", "ag_d", label="d"), ev(8, "agent.completed", "ag_d", result="d")]
        )
        rows = store.journal("run_1")
        assert [r.agent_id for r in rows] == ["ag_a", "ag_c", "ag_d"]
        assert rows[-1].ordinal == 3 and rows[-1].result_json == '"d"'
    finally:
        store.close()


def test_a_sound_journal_has_no_damage_and_reads_as_before(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state.db")
    try:
        store.create_run(record())
        store.append_many(three_calls())
        assert [r.agent_id for r in store.journal("run_1")] == ["ag_a", "ag_b", "ag_c"]
        assert store.journal("run_1")[1].tokens == {"input": 1}
        assert store.journal_damage("run_1") == []
        assert store.journal_damage("run_nope") == []
    finally:
        store.close()


def test_the_message_of_an_entry_with_an_unreadable_id_and_ordinal_still_names_the_run() -> None:
    damage = JournalDamage(run_id="run_9", agent_id=None, ordinal=None, columns=("agent_id", "ordinal"))
    assert (
        damage.message
        == "journal entry with an unreadable agent id of run run_9 is damaged (agent_id, ordinal)"
    )


POSTGRES_DAMAGE = [
    ("agent_id", "''"),
    ("ordinal", "-4"),
    ("status", "''"),
    ("result_json", "'{\"n\": 1'"),
    ("tokens_json", "'{cut'"),
    ("tokens_json", "'null'"),
]


@pytest.mark.parametrize(
    ("column", "sql_value"), POSTGRES_DAMAGE, ids=[f"{c}-{v}" for c, v in POSTGRES_DAMAGE]
)
def test_a_damaged_postgres_journal_value_leaves_out_that_entry_only_and_names_it(
    postgres_url: str, column: str, sql_value: str
) -> None:
    psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed: pip install -e '.[postgres]'")
    from workflow_mcp.store.postgres import PostgresStore

    store = PostgresStore(postgres_url)
    try:
        store.create_run(record())
        store.append_many(three_calls())
        intact = store.journal("run_1")
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f"UPDATE journal SET {column} = {sql_value} WHERE agent_id = 'ag_b'")
        assert store.journal("run_1") == [intact[0], intact[2]]
        (damage,) = store.journal_damage("run_1")
        assert damage.columns == (column,) and damage.run_id == "run_1"
        store.append_many([ev(7, "agent.queued", "ag_d", label="d")])
        assert [r.agent_id for r in store.journal("run_1")] == ["ag_a", "ag_c", "ag_d"]
    finally:
        store.close()
