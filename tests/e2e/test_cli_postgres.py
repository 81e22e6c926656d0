"""Every command reads the same PostgreSQL database from ``--database-url`` or
``WORKFLOW_MCP_DATABASE_URL``; the SQLite-file commands refuse it clearly."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import OK, cli, no_traceback, write


def test_a_run_stored_in_postgresql_is_listed_shown_and_resumed_through_the_url(
    tmp_path: Path, postgres_url: str
) -> None:
    wf = write(tmp_path / "ok.js", OK)
    ran = cli(
        "run", str(wf), "--provider", "fake", "--database-url", postgres_url, "--events", "none", cwd=tmp_path
    )
    assert ran.returncode == 0, ran.stderr
    env = {"WORKFLOW_MCP_DATABASE_URL": postgres_url}
    listed = json.loads(cli("runs", "list", "--json", cwd=tmp_path, env=env).stdout)
    (run,) = listed["runs"]
    assert run["status"] == "completed" and run["workflow"] == "ok"
    # Not in the SQLite file: that one has no runs.
    assert json.loads(cli("runs", "list", "--json", cwd=tmp_path).stdout)["runs"] == []
    shown = cli("runs", "show", run["runId"], "--json", "--database-url", postgres_url, cwd=tmp_path)
    assert shown.returncode == 0 and json.loads(shown.stdout)["status"] == "completed"
    events = cli("runs", "events", run["runId"], "--json", cwd=tmp_path, env=env)
    assert [json.loads(line)["type"] for line in events.stdout.splitlines()][-1] == "run.completed"
    resumed = cli("resume", run["runId"], "--events", "none", cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"r": "hi"}
    assert len(json.loads(cli("runs", "list", "--json", cwd=tmp_path, env=env).stdout)["runs"]) == 2


def test_the_option_wins_over_the_environment(tmp_path: Path, postgres_url: str) -> None:
    env = {"WORKFLOW_MCP_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}
    p = cli("runs", "list", "--json", "--database-url", postgres_url, cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["runs"] == []


def test_an_unreachable_database_is_one_line_naming_it_without_the_password(tmp_path: Path) -> None:
    p = cli("runs", "list", "--database-url", "postgresql://me:hunter2@127.0.0.1:1/runs", cwd=tmp_path)
    no_traceback(p)
    assert p.returncode == 2
    assert "postgresql://me@127.0.0.1:1/runs cannot be reached" in p.stderr
    assert "hunter2" not in p.stderr


def test_a_url_of_another_database_is_refused(tmp_path: Path) -> None:
    p = cli("runs", "list", "--database-url", "mysql://db/runs", cwd=tmp_path)
    no_traceback(p)
    assert p.returncode == 2 and "is not a PostgreSQL URL" in p.stderr


def test_the_sqlite_file_commands_refuse_a_postgresql_database(tmp_path: Path, postgres_url: str) -> None:
    for argv in (["store", "check"], ["store", "repair"], ["runs", "export"]):
        p = cli(*argv, "--database-url", postgres_url, cwd=tmp_path)
        no_traceback(p)
        assert p.returncode == 2, argv
        assert "works on the SQLite file" in p.stderr and "pg_dump" in p.stderr


def test_the_library_lives_in_the_postgresql_database_of_the_url(tmp_path: Path, postgres_url: str) -> None:
    (tmp_path / ".git").mkdir()
    src = write(tmp_path / "deploy.src.js", OK)
    env = {"WORKFLOW_MCP_DATABASE_URL": postgres_url}
    made = cli("library", "create", str(src), "--version", "1.0.0", "--tags", "ops", cwd=tmp_path, env=env)
    assert made.returncode == 0, made.stderr
    again = cli(
        "library", "create", str(src), "--version", "1.0.0", "--database-url", postgres_url, cwd=tmp_path
    )
    no_traceback(again)
    assert again.returncode == 1 and "[already_exists]" in again.stderr
    listed = cli("library", "list", "--tag", "ops", "--json", "--database-url", postgres_url, cwd=tmp_path)
    assert [(w["name"], w["version"]) for w in json.loads(listed.stdout)["workflows"]] == [("ok", "1.0.0")]
    # The SQLite file holds no catalog: there the file is listed without its version and tags.
    bare = json.loads(cli("library", "list", "--json", cwd=tmp_path).stdout)["workflows"]
    assert [(w["name"], w["version"], w["tags"]) for w in bare] == [("ok", None, [])]
