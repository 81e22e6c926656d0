"""One damaged cell in the runs table (written with sqlite3 directly, as another program or a bad disk
might): the CLI lists and shows every run, names the damaged column, `store check` reports it and
`store repair` rewrites it, keeping the run's events. Real CLI processes on a real SQLite file."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

CLI = str(Path(sys.executable).with_name("workflow-mcp"))
WF = "export const meta = { name: 'steps', description: 'two agent calls' }\nreturn [await agent('a'), await agent('b')]\n"


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKFLOW_MCP_HOME": str(cwd / "state"), "HOME": str(cwd / "home")}
    return subprocess.run([CLI, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def three_runs(tmp_path: Path) -> list[str]:
    (tmp_path / "steps.js").write_text(WF)
    for _ in range(3):
        assert cli("run", "steps.js", "--provider", "fake", "--events", "none", cwd=tmp_path).returncode == 0
    db = sqlite3.connect(tmp_path / "state" / "state.db")
    try:
        return [r[0] for r in db.execute("SELECT run_id FROM runs ORDER BY created_at")]
    finally:
        db.close()


def damage(tmp_path: Path, run_id: str, column: str, sql_value: str) -> None:
    db = sqlite3.connect(tmp_path / "state" / "state.db")
    try:
        db.execute(f"UPDATE runs SET {column} = {sql_value} WHERE run_id = ?", (run_id,))
        db.commit()
    finally:
        db.close()


DAMAGE = [
    ("workflow_name", "CAST(X'FFFE41' AS TEXT)"),  # invalid UTF-8 in a TEXT cell
    ("cwd", "X'00FF'"),  # a BLOB in a TEXT column
    ("options_json", "'not json'"),
    ("source", "CAST(X'C3' AS TEXT)"),  # a cut-off character in the script
    ("provider", "X'66616B65'"),  # text stored as a BLOB
]


@pytest.mark.parametrize(("column", "sql_value"), DAMAGE, ids=[c for c, _ in DAMAGE])
def test_a_damaged_cell_is_listed_shown_checked_and_repaired_without_losing_events(
    tmp_path: Path, column: str, sql_value: str
) -> None:
    runs = three_runs(tmp_path)
    events_before = cli("runs", "events", runs[1], "--json", cwd=tmp_path).stdout.splitlines()
    damage(tmp_path, runs[1], column, sql_value)

    listed = cli("runs", "list", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    by_id = {r["runId"]: r for r in json.loads(listed.stdout)["runs"]}
    assert set(by_id) == set(runs)
    assert by_id[runs[1]]["damaged"] == [column] and "damaged" not in by_id[runs[0]]
    text = cli("runs", "list", cwd=tmp_path)
    assert text.returncode == 0 and f"damaged: {column}" in text.stdout
    shown = cli("runs", "show", runs[1], cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"damaged record: {column}" in shown.stdout and "completed" in shown.stdout
    assert json.loads(cli("runs", "show", runs[1], "--json", cwd=tmp_path).stdout)["damaged"] == [column]

    checked = cli("store", "check", cwd=tmp_path)
    assert checked.returncode == 1
    assert f"run {runs[1]}: damaged cells in its record: {column}" in checked.stderr

    repaired = cli("store", "repair", cwd=tmp_path)
    assert repaired.returncode == 0, repaired.stderr
    assert f"run {runs[1]}: rewrote the damaged cells {column}" in repaired.stderr
    assert "3 run(s) and" in repaired.stdout
    assert cli("store", "check", cwd=tmp_path).returncode == 0
    after = json.loads(cli("runs", "list", "--json", cwd=tmp_path).stdout)["runs"]
    assert {r["runId"] for r in after} == set(runs) and not any("damaged" in r for r in after)
    assert cli("runs", "events", runs[1], "--json", cwd=tmp_path).stdout.splitlines() == events_before
    backups = list((tmp_path / "state").glob("state.db.bak-*"))
    assert len(backups) == 1  # the original, damaged cell included, byte for byte


def test_a_run_whose_script_cell_is_damaged_is_not_resumed_from_it(tmp_path: Path) -> None:
    runs = three_runs(tmp_path)
    damage(tmp_path, runs[0], "source", "CAST(X'C3' AS TEXT)")
    resumed = cli("resume", runs[0], "--provider", "fake", cwd=tmp_path)
    assert resumed.returncode == 2
    assert "stored record is damaged (source)" in resumed.stderr and "Traceback" not in resumed.stderr
