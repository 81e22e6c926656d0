"""One damaged event row (written with sqlite3 directly, as another program or a bad disk might): every
read of the run's events survives it, the event shows as a stand-in naming its sequence and columns,
`store check` reports it, `store repair` rewrites it keeping every other event, and a resume says
which call runs again. Real CLI processes on a real SQLite file."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

CLI = str(Path(sys.executable).with_name("workflow-mcp"))
WF = "export const meta = { name: 'steps', description: 'two agent calls' }\nreturn [await agent('a'), await agent('b')]\n"


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKFLOW_MCP_HOME": str(cwd / "state"), "HOME": str(cwd / "home")}
    return subprocess.run([CLI, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def connect(tmp_path: Path) -> sqlite3.Connection:
    return sqlite3.connect(tmp_path / "state" / "state.db")


def two_runs(tmp_path: Path) -> list[str]:
    (tmp_path / "steps.js").write_text(WF)
    for _ in range(2):
        assert cli("run", "steps.js", "--provider", "fake", "--events", "none", cwd=tmp_path).returncode == 0
    db = connect(tmp_path)
    try:
        return [r[0] for r in db.execute("SELECT run_id FROM runs ORDER BY created_at")]
    finally:
        db.close()


def first_completed(tmp_path: Path, run_id: str) -> int:
    """The sequence of the run's first agent.completed event (call ag_0001, label 'a')."""
    db = connect(tmp_path)
    try:
        row = db.execute(
            "SELECT sequence FROM events WHERE run_id = ? AND type = 'agent.completed' ORDER BY sequence LIMIT 1",
            (run_id,),
        ).fetchone()
        return int(row[0])
    finally:
        db.close()


def damage(tmp_path: Path, run_id: str, sequence: int, column: str, sql_value: str, *params: Any) -> None:
    db = connect(tmp_path)
    try:
        db.execute(
            f"UPDATE events SET {column} = {sql_value} WHERE run_id = ? AND sequence = ?",
            (*params, run_id, sequence),
        )
        db.commit()
    finally:
        db.close()


def events(tmp_path: Path, run_id: str) -> list[dict[str, Any]]:
    done = cli("runs", "events", run_id, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


DAMAGE = [
    ("body", "CAST(X'7BFFFE' AS TEXT)"),  # invalid UTF-8 that is not JSON either
    ("body", "X'7B7D'"),  # a BLOB in the TEXT column
    ("body", "'not json'"),
    ("body", "42"),  # a number
    ("type", "X'00FF'"),
    ("timestamp", "CAST(X'C3' AS TEXT)"),
    ("agent_id", "CAST(X'FF' AS TEXT)"),
]


@pytest.mark.parametrize(("column", "sql_value"), DAMAGE, ids=[f"{c}-{v}" for c, v in DAMAGE])
def test_a_damaged_event_cell_is_a_stand_in_everywhere_then_checked_and_repaired(
    tmp_path: Path, column: str, sql_value: str
) -> None:
    runs = two_runs(tmp_path)
    before = events(tmp_path, runs[1])
    seq = first_completed(tmp_path, runs[1])
    damage(tmp_path, runs[1], seq, column, sql_value)

    read = events(tmp_path, runs[1])
    assert [e["sequence"] for e in read] == [e["sequence"] for e in before]  # nothing dropped
    assert [e for e in read if e["sequence"] != seq] == [e for e in before if e["sequence"] != seq]
    assert events(tmp_path, runs[0]) != []  # the other run is untouched
    shown = cli("runs", "show", runs[1], cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    as_json = json.loads(cli("runs", "show", runs[1], "--json", cwd=tmp_path).stdout)
    assert as_json["status"] == "completed" and as_json["result"] == ["a", "b"]
    assert as_json["counts"]["completed"] == 2 or column == "body"
    if column == "body":
        stand_in = read[seq - 1]
        assert stand_in["payload"]["damaged"]["columns"] == [column]
        assert stand_in["payload"]["damaged"]["sequence"] == seq
        assert stand_in["type"] == "agent.completed" and stand_in["agentId"] == "ag_0001"
        assert f"damaged events: {seq} ({column})" in shown.stdout
        assert as_json["damagedEvents"] == [{"sequence": seq, "columns": [column]}]
        text = cli("runs", "events", runs[1], cwd=tmp_path)
        assert text.returncode == 0 and "damaged" in text.stdout
    else:  # a sound body is the event: the indexed copy beside it changes nothing read
        assert read == before and "damagedEvents" not in as_json
    assert "damagedEvents" not in json.loads(cli("runs", "show", runs[0], "--json", cwd=tmp_path).stdout)

    exported = cli("runs", "export", runs[1], cwd=tmp_path)
    assert exported.returncode == 1 and "1 problem(s)" in exported.stderr  # every event, the damage named
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [x["event"] for x in lines if x["kind"] == "event"] == read
    assert any(f"damaged event cells at sequence {seq} ({column})" in x.get("message", "") for x in lines)

    checked = cli("store", "check", cwd=tmp_path)
    assert checked.returncode == 1
    assert f"run {runs[1]}: damaged event cells at sequence {seq} ({column})" in checked.stderr
    assert runs[0] not in checked.stderr

    repaired = cli("store", "repair", cwd=tmp_path)
    assert repaired.returncode == 0, repaired.stderr
    assert f"run {runs[1]}: rewrote the damaged event cells at sequence {seq} ({column})" in repaired.stderr
    assert cli("store", "check", cwd=tmp_path).returncode == 0
    after = events(tmp_path, runs[1])
    assert after == read  # the stand-in, now stored whole; every other event as it was
    db = connect(tmp_path)
    try:  # the indexed copies agree with the body again
        row = db.execute(
            "SELECT typeof(type), typeof(timestamp), type, timestamp, agent_id FROM events "
            "WHERE run_id = ? AND sequence = ?",
            (runs[1], seq),
        ).fetchone()
    finally:
        db.close()
    stored = after[seq - 1]
    assert row == ("text", "text", stored["type"], stored["timestamp"], stored.get("agentId"))
    assert len(list((tmp_path / "state").glob("state.db.bak-*"))) == 1


def test_invalid_bytes_inside_a_json_body_keep_the_event_with_u_fffd(tmp_path: Path) -> None:
    runs = two_runs(tmp_path)
    seq = first_completed(tmp_path, runs[0])
    db = connect(tmp_path)
    try:
        (body,) = db.execute(
            "SELECT body FROM events WHERE run_id = ? AND sequence = ?", (runs[0], seq)
        ).fetchone()
    finally:
        db.close()
    raw = str(body).encode().replace(b'"result":"a"', b'"result":"\xff"')
    damage(tmp_path, runs[0], seq, "body", "CAST(? AS TEXT)", raw)

    stand_in = events(tmp_path, runs[0])[seq - 1]
    assert stand_in["type"] == "agent.completed" and stand_in["payload"]["result"] == "\ufffd"
    assert stand_in["payload"]["damaged"]["columns"] == ["body"]
    assert cli("store", "repair", cwd=tmp_path).returncode == 0
    assert events(tmp_path, runs[0])[seq - 1] == stand_in
    assert cli("store", "check", cwd=tmp_path).returncode == 0


def test_a_body_that_is_not_json_becomes_a_payload_recording_the_damage(tmp_path: Path) -> None:
    runs = two_runs(tmp_path)
    seq = first_completed(tmp_path, runs[0])
    damage(tmp_path, runs[0], seq, "body", "'{cut off'")
    assert cli("store", "repair", cwd=tmp_path).returncode == 0
    db = connect(tmp_path)
    try:
        stored = json.loads(
            db.execute(
                "SELECT body FROM events WHERE run_id = ? AND sequence = ?", (runs[0], seq)
            ).fetchone()[0]
        )
    finally:
        db.close()
    assert stored["type"] == "agent.completed" and stored["agentId"] == "ag_0001"
    assert stored["payload"]["original"] == "{cut off"
    assert stored["payload"]["damaged"]["columns"] == ["body"]


def resume_output(tmp_path: Path, run_id: str) -> tuple[str, list[dict[str, Any]]]:
    resumed = cli("resume", run_id, "--provider", "fake", "--events", "none", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    db = connect(tmp_path)
    try:
        (new,) = db.execute("SELECT run_id FROM runs WHERE resumed_from = ?", (run_id,)).fetchone()
    finally:
        db.close()
    return resumed.stdout + resumed.stderr, events(tmp_path, str(new))


def test_resuming_a_run_whose_result_event_and_journal_entry_are_damaged_says_the_call_runs_again(
    tmp_path: Path,
) -> None:
    runs = two_runs(tmp_path)
    seq = first_completed(tmp_path, runs[0])
    damage(tmp_path, runs[0], seq, "body", "CAST(X'7BFF' AS TEXT)")
    db = connect(tmp_path)
    try:  # the journal entry of that call is gone too: nothing intact holds its result
        db.execute("DELETE FROM journal WHERE run_id = ? AND agent_id = 'ag_0001'", (runs[0],))
        db.commit()
    finally:
        db.close()

    _, log = resume_output(tmp_path, runs[0])
    warnings = [e["payload"]["message"] for e in log if e["type"] == "warning"]
    assert any(
        w.startswith("call ag_0001 (a) will run again: event") and f"event {seq} of run {runs[0]}" in w
        for w in warnings
    ), warnings
    by_agent = {(e["agentId"], e["type"]) for e in log if e.get("agentId")}
    assert ("ag_0001", "agent.completed") in by_agent  # ran again
    assert ("ag_0002", "agent.cached") in by_agent and ("ag_0002", "agent.completed") not in by_agent
    assert log[-1]["type"] == "run.completed" and log[-1]["payload"]["result"] == ["a", "b"]


def test_resuming_a_run_whose_result_event_is_damaged_replays_it_from_the_journal_and_says_so(
    tmp_path: Path,
) -> None:
    runs = two_runs(tmp_path)
    seq = first_completed(tmp_path, runs[0])
    damage(tmp_path, runs[0], seq, "body", "X'00'")

    _, log = resume_output(tmp_path, runs[0])
    warnings = [e["payload"]["message"] for e in log if e["type"] == "warning"]
    assert (
        f"event {seq} of run {runs[0]} is damaged (body); call ag_0001 (a) is replayed from its intact journal entry"
        in warnings
    )
    assert not any(e["type"] == "agent.completed" for e in log)  # nothing ran twice


def test_a_damaged_type_cell_of_a_runs_terminal_event_neither_lists_it_running_nor_interrupts_it(
    tmp_path: Path,
) -> None:
    runs = two_runs(tmp_path)
    before = events(tmp_path, runs[0])
    assert before[-1]["type"] == "run.completed"
    damage(tmp_path, runs[0], before[-1]["sequence"], "type", "X'00FF'")

    listed = cli("runs", "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    statuses = dict(line.split("\t")[:2] for line in listed.stdout.splitlines() if line.startswith("run_"))
    assert statuses == {runs[0]: "completed", runs[1]: "completed"}
    # Each CLI process above recovered the runs of gone owners: the finished one was left as it was.
    assert events(tmp_path, runs[0]) == before
    assert json.loads(cli("runs", "show", runs[0], "--json", cwd=tmp_path).stdout)["status"] == "completed"
