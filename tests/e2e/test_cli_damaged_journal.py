"""One damaged journal cell (written with sqlite3 directly, as another program or a bad disk might):
the run is still shown, and a resume replays the run's other calls, runs the damaged entry's call
again and says so naming the run and the entry. Real CLI processes on a real SQLite file."""

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


def sql(tmp_path: Path, statement: str, *params: Any) -> list[Any]:
    db = sqlite3.connect(tmp_path / "state" / "state.db")
    try:
        rows = db.execute(statement, params).fetchall()
        db.commit()
        return rows
    finally:
        db.close()


DAMAGE = [
    ("result_json", "'[\"a'"),  # truncated JSON
    ("result_json", "X'2261'"),  # a BLOB where JSON is expected
    ("tokens_json", "CAST(X'7BFF' AS TEXT)"),
    ("key", "X'FF'"),
    ("agent_id", "CAST(X'FF' AS TEXT)"),
]


@pytest.mark.parametrize(("column", "sql_value"), DAMAGE, ids=[f"{c}-{v}" for c, v in DAMAGE])
def test_resuming_a_run_with_a_damaged_journal_entry_runs_that_call_again_and_says_so(
    tmp_path: Path, column: str, sql_value: str
) -> None:
    (tmp_path / "steps.js").write_text(WF)
    assert cli("run", "steps.js", "--provider", "fake", "--events", "none", cwd=tmp_path).returncode == 0
    ((run_id,),) = sql(tmp_path, "SELECT run_id FROM runs")
    sql(tmp_path, f"UPDATE journal SET {column} = {sql_value} WHERE agent_id = 'ag_0001'")

    shown = cli("runs", "show", run_id, "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    state = json.loads(shown.stdout)
    assert state["status"] == "completed" and state["result"] == ["a", "b"]
    agent = None if column == "agent_id" else "ag_0001"
    assert state["damagedJournal"] == [{"agentId": agent, "ordinal": 0, "columns": [column]}]
    text = cli("runs", "show", run_id, cwd=tmp_path)
    assert (
        f"damaged journal entries: {agent or '(unreadable agent id)'} ({column}) are not replayed"
        in text.stdout
    )

    resumed = cli("resume", run_id, "--provider", "fake", "--events", "none", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    ((new,),) = sql(tmp_path, "SELECT run_id FROM runs WHERE resumed_from = ?", run_id)
    done = cli("runs", "events", str(new), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    log = [json.loads(line) for line in done.stdout.splitlines()]
    warnings = [e["payload"]["message"] for e in log if e["type"] == "warning"]
    entry = (
        "journal entry "
        + ("with an unreadable agent id" if column == "agent_id" else "ag_0001")
        + " (ordinal 0)"
    )
    assert any(f"{entry} of run {run_id} is damaged ({column})" in w for w in warnings), warnings
    by_agent = {(e["agentId"], e["type"]) for e in log if e.get("agentId")}
    assert ("ag_0001", "agent.completed") in by_agent  # ran again
    assert ("ag_0002", "agent.cached") in by_agent and ("ag_0002", "agent.completed") not in by_agent
    assert log[-1]["type"] == "run.completed" and log[-1]["payload"]["result"] == ["a", "b"]


@pytest.mark.parametrize(("column", "sql_value"), DAMAGE, ids=[f"{c}-{v}" for c, v in DAMAGE])
def test_a_damaged_journal_entry_is_checked_then_rebuilt_from_the_runs_events(
    tmp_path: Path, column: str, sql_value: str
) -> None:
    (tmp_path / "steps.js").write_text(WF)
    assert cli("run", "steps.js", "--provider", "fake", "--events", "none", cwd=tmp_path).returncode == 0
    ((run_id,),) = sql(tmp_path, "SELECT run_id FROM runs")
    intact = sql(tmp_path, "SELECT * FROM journal ORDER BY ordinal")
    sql(tmp_path, f"UPDATE journal SET {column} = {sql_value} WHERE agent_id = 'ag_0001'")

    checked = cli("store", "check", cwd=tmp_path)
    assert checked.returncode == 1 and "Traceback" not in checked.stderr
    entry = "(unreadable agent id) (ordinal 0" if column == "agent_id" else "ag_0001 (ordinal 0"
    assert f"run {run_id}: damaged journal entries: {entry}: {column})" in checked.stderr, checked.stderr

    repaired = cli("store", "repair", cwd=tmp_path)
    assert repaired.returncode == 0, repaired.stderr
    assert f"run {run_id}: removed 1 damaged journal entry" in repaired.stderr
    assert "rebuilt from the run's sound events the entries of ag_0001" in repaired.stderr
    assert cli("store", "check", cwd=tmp_path).returncode == 0
    assert sql(tmp_path, "SELECT * FROM journal ORDER BY ordinal") == intact  # exactly as first written

    resumed = cli("resume", run_id, "--provider", "fake", "--events", "none", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    ((new,),) = sql(tmp_path, "SELECT run_id FROM runs WHERE resumed_from = ?", run_id)
    log = [
        json.loads(line)
        for line in cli("runs", "events", str(new), "--json", cwd=tmp_path).stdout.splitlines()
    ]
    assert not any(e["type"] == "agent.completed" for e in log)  # both calls replayed: nothing ran twice
    assert log[-1]["type"] == "run.completed" and log[-1]["payload"]["result"] == ["a", "b"]
