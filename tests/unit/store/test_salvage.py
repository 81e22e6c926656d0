"""``runs export`` reads what it can of each run, even from damaged pages; ``store repair`` copies the
file first, rebuilds it, and leaves a sound database with every readable run."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp.errors import StoreError, StoreReadOnlyError
from workflow_mcp.events import Event
from workflow_mcp.store import RunRecord, SqliteStore
from workflow_mcp.store.salvage import check_store, export_runs, repair_store

from store_faults import damage_event_pages, read_only_mount


def record(run_id: str) -> RunRecord:
    return RunRecord(
        run_id=run_id, workflow_name="wf", source_hash="h", source="export const meta = {}", created_at=run_id
    )


def fill(db: Path, runs: dict[str, int], size: int = 300) -> None:
    store = SqliteStore(db)
    for run_id, count in runs.items():
        store.create_run(record(run_id))
        store.append_many(
            [Event(run_id, 1, "run.started", timestamp="t")]
            + [Event(run_id, i, "log", {"message": "x" * size}, timestamp="t") for i in range(2, count)]
            + [
                Event(
                    run_id,
                    count,
                    "agent.completed",
                    {"result": i, "contentKey": "c"},
                    timestamp="t",
                    agent_id="ag",
                )
                for i in (0,)
            ]
        )
    store.close()


def lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_an_export_holds_every_run_record_and_event_in_order(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    fill(db, {"run_a": 5, "run_b": 3})
    out = io.StringIO()
    report = export_runs(db, None, out)
    got = lines(out.getvalue())
    assert (report.runs, report.events, report.problems) == (2, 8, [])
    assert [(x["kind"], x.get("run", x.get("event"))["runId"]) for x in got] == (  # type: ignore[index]
        [("run", "run_a")] + [("event", "run_a")] * 5 + [("run", "run_b")] + [("event", "run_b")] * 3
    )
    store = SqliteStore(db)
    try:
        assert [Event.from_json(x["event"]) for x in got[1:6]] == store.events("run_a")
        assert got[0]["run"] == store.get_run("run_a").to_json()  # type: ignore[union-attr]
    finally:
        store.close()


def test_an_export_of_named_runs_reports_the_ones_it_cannot_find(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    fill(db, {"run_a": 3})
    out = io.StringIO()
    report = export_runs(db, ["run_a", "run_nope"], out)
    assert report.runs == 1 and report.problems == ["run run_nope: no such run could be read"]
    assert lines(out.getvalue())[-1] == {
        "kind": "problem",
        "runId": "run_nope",
        "message": "run run_nope: no such run could be read",
    }


def test_an_export_of_a_damaged_database_keeps_the_intact_runs_and_names_the_damage(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    fill(db, {"run_a": 400, "run_b": 3, "run_c": 3})
    damage_event_pages(db, share=0.4)
    out = io.StringIO()
    report = export_runs(db, None, out)
    got = lines(out.getvalue())
    for intact in ("run_b", "run_c"):
        assert sum(1 for x in got if x["kind"] == "event" and x["event"]["runId"] == intact) == 3
    damaged = [x for x in got if x["kind"] == "event" and x["event"]["runId"] == "run_a"]
    assert 0 < len(damaged) < 400  # the readable part of the damaged run is kept
    assert report.problems and all("run run_a" in p for p in report.problems)
    assert any(x["kind"] == "problem" for x in got)


def test_check_finds_damage_and_marks_the_file(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    fill(db, {"run_a": 3})
    assert check_store(db) == []
    fill(tmp_path / "other.db", {"run_a": 400})
    damage_event_pages(tmp_path / "other.db")
    assert check_store(tmp_path / "other.db")
    assert (tmp_path / "other.db.damaged").exists()


def test_repair_backs_up_the_damaged_file_first_and_rebuilds_every_readable_run(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    fill(db, {"run_a": 400, "run_b": 3, "run_c": 3})
    damage_event_pages(db, share=0.4)
    damaged = db.read_bytes()
    check_store(db)
    report = repair_store(db)
    assert report.method == "salvage"
    assert report.backup.read_bytes() == damaged
    assert report.runs == 3 and report.problems
    assert check_store(db) == [] and not (tmp_path / "state.db.damaged").exists()
    store = SqliteStore(db)
    try:
        assert store.write_problem() is None
        assert len(store.events("run_b")) == 3
        assert [r.result_json for r in store.journal("run_b")] == ["0"]  # the journal is rebuilt
        store.create_run(record("run_d"))  # writable again
    finally:
        store.close()


def test_repair_of_a_sound_database_is_a_vacuum_that_keeps_everything(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    fill(db, {"run_a": 5, "run_b": 3})
    report = repair_store(db)
    assert (report.method, report.runs, report.events, report.problems) == ("vacuum", 2, 8, [])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.db", report.backup.name]


def test_repair_refuses_while_another_process_owns_runs(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    fill(db, {"run_a": 3})
    holder = SqliteStore(db)
    holder.create_run(record("run_b"))  # this store now owns a run
    try:
        with pytest.raises(StoreError, match="still in use by workflow-mcp"):
            repair_store(db)
        assert not list(tmp_path.glob("state.db.bak-*"))
    finally:
        holder.close()
    assert sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0] == 2


def test_repair_on_a_read_only_mount_says_the_backup_cannot_be_written_and_changes_nothing(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "state"
    folder.mkdir()
    fill(folder / "state.db", {"run_a": 3})
    with read_only_mount(folder, tmp_path / "ro") as ro:
        with pytest.raises(StoreReadOnlyError) as caught:
            repair_store(ro / "state.db")
        assert f"the state database {ro / 'state.db'} is read-only (its backup cannot be written" in str(
            caught.value
        )
    assert sorted(p.name for p in folder.iterdir()) == ["state.db"]
