"""``--sandbox bwrap`` and ``[realm] sandbox`` as a user meets them on the command line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_cli import OK, cli, no_traceback, write

from helpers import BWRAP_MISSING

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason=BWRAP_MISSING)

NO_BWRAP = {"PATH": "/nonexistent", "WORKFLOW_MCP_BWRAP": ""}


def test_run_takes_sandbox_bwrap(tmp_path: Path) -> None:
    wf = write(tmp_path / "ok.js", OK)
    p = cli(
        "run", str(wf), "{}", "--provider", "fake", "--sandbox", "bwrap", "--events", "none", cwd=tmp_path
    )
    no_traceback(p)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {"got": {}, "r": "hi"}


def test_plan_takes_sandbox_bwrap(tmp_path: Path) -> None:
    wf = write(tmp_path / "ok.js", OK)
    p = cli("plan", str(wf), "--sandbox", "bwrap", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    refused = cli("plan", str(wf), "--sandbox", "bwrap", cwd=tmp_path, env=NO_BWRAP)
    no_traceback(refused)
    assert refused.returncode == 2 and "install the package bubblewrap" in refused.stderr


def test_a_resume_takes_sandbox_bwrap(tmp_path: Path) -> None:
    wf = write(tmp_path / "ok.js", OK)
    first = cli("run", str(wf), "--provider", "fake", "--events", "none", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    listed = cli("runs", "list", "--json", cwd=tmp_path)
    run_id = json.loads(listed.stdout)["runs"][0]["runId"]
    ok = cli("resume", run_id, "--sandbox", "bwrap", "--events", "none", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == {"r": "hi"}  # args undefined: the key is dropped
    p = cli("resume", run_id, "--sandbox", "bwrap", "--events", "none", cwd=tmp_path, env=NO_BWRAP)
    no_traceback(p)
    assert p.returncode == 2
    assert "install the package bubblewrap" in p.stderr


def test_a_missing_bwrap_is_one_line_naming_the_package(tmp_path: Path) -> None:
    wf = write(tmp_path / "ok.js", OK)
    p = cli("run", str(wf), "--provider", "fake", "--sandbox", "bwrap", cwd=tmp_path, env=NO_BWRAP)
    no_traceback(p)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1].startswith("workflow-mcp: --sandbox bwrap needs bubblewrap")
    assert "apt-get install bubblewrap" in p.stderr


def test_the_user_configuration_turns_the_sandbox_on_and_the_option_turns_it_off(tmp_path: Path) -> None:
    wf = write(tmp_path / "ok.js", OK)
    write(tmp_path / "state" / "config.toml", '[realm]\nsandbox = "bwrap"\n')
    on = cli("run", str(wf), "--provider", "fake", "--events", "none", cwd=tmp_path, env=NO_BWRAP)
    assert on.returncode == 2 and "needs bubblewrap" in on.stderr  # the configuration asked for it
    off = cli(
        "run",
        str(wf),
        "--provider",
        "fake",
        "--sandbox",
        "none",
        "--events",
        "none",
        cwd=tmp_path,
        env=NO_BWRAP,
    )
    assert off.returncode == 0, off.stderr


def test_a_project_file_cannot_turn_off_the_users_sandbox(tmp_path: Path) -> None:
    wf = write(tmp_path / "ok.js", OK)
    write(tmp_path / "state" / "config.toml", '[realm]\nsandbox = "bwrap"\n')
    write(tmp_path / "workflow-mcp.toml", '[realm]\nsandbox = "none"\n')
    p = cli("run", str(wf), "--provider", "fake", "--events", "none", cwd=tmp_path, env=NO_BWRAP)
    assert p.returncode == 2 and "needs bubblewrap" in p.stderr


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ('[realm]\nsandbox = "docker"\n', "realm.sandbox: must be one of none, bwrap, got 'docker'"),
        ('[realm]\nsandboxes = "bwrap"\n', "realm.sandboxes: unknown key; expected sandbox"),
        ('realm = "bwrap"\n', "realm: must be a table, got"),
    ],
)
def test_a_bad_realm_table_is_refused_naming_the_file_and_key(tmp_path: Path, toml: str, needle: str) -> None:
    wf = write(tmp_path / "ok.js", OK)
    config = write(tmp_path / "workflow-mcp.toml", toml)
    p = cli("run", str(wf), "--provider", "fake", "--events", "none", cwd=tmp_path)
    no_traceback(p)
    assert p.returncode == 2
    assert f"{config}: {needle}" in p.stderr


def test_an_unknown_sandbox_is_refused_by_the_option(tmp_path: Path) -> None:
    wf = write(tmp_path / "ok.js", OK)
    p = cli("run", str(wf), "--sandbox", "docker", cwd=tmp_path)
    assert p.returncode == 2
    assert "'docker' is not one of 'none', 'bwrap'" in p.stderr
