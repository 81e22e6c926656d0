"""Every conformance case, run through the installed ``workflow-mcp`` executable exactly as a user
would run it: the shared cases by the shared conformance tool (``conformance_tool.py``, a verbatim
copy of ``shared/tools/conformance.py``), and the project's own cases that place the run in a
directory of the case's layout (``cwd``, ``gitDirs``: fields the shared tool does not know) by the
same steps, starting the CLI in that directory."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from claude_plugins import apply_plugin_steps, case_environment

from conformance_tool import events_of

HERE = Path(__file__).resolve().parent
TOOL = HERE / "conformance_tool.py"
CASES = (HERE.parent / "conformance" / "cases").resolve()
SHARED = HERE.parents[2] / "shared"  # the shared folder lies beside the repository
SHARED_TOOL = SHARED / "tools" / "conformance.py"
OUR_HEADER_LINES = 3  # lines 2-4 of the copy are ours (ruff/format opt-outs and a note)
LAYOUT_FIELDS = ("cwd", "gitDirs", "plugins", "env", "launch")


def cli() -> Path:
    path = Path(sys.executable).parent / "workflow-mcp"
    assert path.is_file(), f"the workflow-mcp executable is not installed next to {sys.executable}"
    return path


def placed(case_dir: Path) -> bool:
    """Whether a runtime case uses the layout fields (its run starts in a directory of its own)."""
    case = json.loads((case_dir / "case.json").read_text())
    return any(k in case for k in LAYOUT_FIELDS)


def placed_cases() -> list[str]:
    runtime = CASES / "runtime"
    return sorted(d.name for d in runtime.iterdir() if (d / "case.json").is_file() and placed(d))


def environment(tmp: Path) -> dict[str, str]:
    """The user's environment, with HOME and the state directory inside the case's directory; Claude's
    own configuration folder is not inherited (personal agents live in ``HOME/.claude/agents``)."""
    env = {k: v for k, v in os.environ.items() if k != "CLAUDE_CONFIG_DIR"}
    env.update({"HOME": str(tmp / "home"), "WORKFLOW_MCP_HOME": str(tmp / "state")})
    return env


@pytest.mark.skipif(not SHARED_TOOL.is_file(), reason="the shared tool is not on this machine")
def test_the_copied_tool_is_the_shared_tool_verbatim_apart_from_its_header() -> None:
    ours = TOOL.read_text().splitlines()
    shared = SHARED_TOOL.read_text().splitlines()
    assert ours[0] == shared[0]
    assert ours[1 + OUR_HEADER_LINES :] == shared[1:]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_the_installed_cli_passes_every_conformance_case_the_shared_tool_can_run(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CLAUDE_CONFIG_DIR"}
    if store == "postgres":  # every run the tool starts is stored in a real PostgreSQL server
        env["WORKFLOW_MCP_DATABASE_URL"] = request.getfixturevalue("postgres_url")
    cases = tmp_path / "cases"
    skipped = {f"runtime/{name}" for name in placed_cases()}
    shutil.copytree(
        CASES, cases, ignore=lambda d, names: [n for n in names if f"{Path(d).name}/{n}" in skipped]
    )
    done = subprocess.run(
        [sys.executable, str(TOOL), str(cli()), str(cases)],
        capture_output=True,
        text=True,
        timeout=840,
        cwd=HERE,
        env=env,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-2000:]
    summary = re.fullmatch(r"(\d+) passed, (\d+) failed", lines[-1])
    assert summary is not None, done.stdout[-2000:]
    assert done.returncode == 0, done.stdout[-4000:]
    assert summary.group(2) == "0", done.stdout[-4000:]
    assert int(summary.group(1)) >= 95
    if store == "postgres":
        import psycopg

        with psycopg.connect(env["WORKFLOW_MCP_DATABASE_URL"]) as conn:
            row = conn.execute("SELECT count(*) FROM runs").fetchone()
        assert row is not None and row[0] >= 50  # the runs went to PostgreSQL, not the SQLite file


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", placed_cases())
def test_the_installed_cli_passes_a_case_whose_run_starts_in_a_directory_of_its_layout(
    name: str, tmp_path: Path
) -> None:
    case_dir = CASES / "runtime" / name
    case: dict[str, Any] = json.loads((case_dir / "case.json").read_text())
    expect = case["expect"]
    for rel, text in case.get("files", {}).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    for rel in case.get("gitDirs", []):
        (tmp_path / rel).mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(tmp_path / rel)], check=True, timeout=30)
    run_dir = tmp_path / case.get("cwd", "")
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(case_dir / "workflow.js", run_dir / "workflow.js")
    apply_plugin_steps(case, tmp_path, run_dir)
    argv = [str(cli()), "run", case.get("launch", "workflow.js"), "--provider", "fake", "--events", "jsonl"]
    if "fake" in case:
        (tmp_path / "fake.json").write_text(json.dumps(case["fake"]))
        argv += ["--fake-script", str(tmp_path / "fake.json")]
    env = {**environment(tmp_path), **case_environment(case, tmp_path)}
    done = subprocess.run(argv, cwd=run_dir, env=env, capture_output=True, text=True, timeout=240)
    events = events_of(done.stderr)
    if expect["status"] == "completed":
        assert done.returncode == 0, done.stderr[-2000:]
        if "result" in expect:
            assert json.loads(done.stdout) == expect["result"]
    else:
        assert done.returncode != 0, done.stdout
        if "error_matches" in expect:
            assert re.search(expect["error_matches"], done.stderr), done.stderr[-2000:]
    if "provider_calls" in expect:
        assert sum(1 for e in events if e.get("type") == "agent.started") == expect["provider_calls"]
    logs = [str((e.get("payload") or {}).get("message", "")) for e in events if e.get("type") == "log"]
    if "log_messages" in expect:
        assert logs == expect["log_messages"]


def test_the_cases_that_need_their_layout_are_the_projects_own() -> None:
    plugins = [n for n in placed_cases() if n.startswith("plugins-")]
    assert len(plugins) >= 20
    assert placed_cases() == sorted(
        ["agents-nearest-wins-in-git-repo", "agents-walk-up-without-git", *plugins]
    )
    shared_runtime = SHARED / "conformance" / "runtime"
    if shared_runtime.is_dir():
        assert not {n for n in placed_cases() if (shared_runtime / n).exists()}


@pytest.mark.skipif(
    not (SHARED / "conformance").is_dir(), reason="the shared folder is not beside the repository"
)
def test_every_shared_case_is_copied_verbatim() -> None:
    """The project's tree holds every shared case byte for byte; the cases it adds (measured in Claude
    Code, each naming its oracle run in ``notes``) are the project's own."""
    shared = SHARED / "conformance"
    theirs = {p.relative_to(shared): p.read_bytes() for p in shared.rglob("*") if p.is_file()}
    ours = {p.relative_to(CASES): p.read_bytes() for p in CASES.rglob("*") if p.is_file()}
    assert {k: ours.get(k) for k in theirs} == theirs
    for extra in set(ours) - set(theirs):
        assert extra.parts[0] == "runtime", extra
        if extra.name == "case.json":
            assert "oracle" in json.loads(ours[extra])["notes"], extra
