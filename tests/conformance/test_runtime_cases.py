"""The shared runtime conformance cases (cases/runtime/*/), run through the public Python API.

Each case is materialized in a fresh temporary directory exactly as ``shared/tools/conformance.py``
does for the CLI (``files`` relative to the run's working directory, ``workflow.js`` copied next to
them, ``HOME`` at ``<tmp>/home``) and run with :class:`WorkflowService` over a :class:`MemoryStore`. Two
layout fields place the run: ``cwd`` (relative to the temporary directory: the run starts there and
``workflow.js`` is placed there) and ``gitDirs`` (directories to ``git init`` first). The ``plugins-*``
cases add three more: ``plugins`` (the ``claude plugin …`` steps, laid out by ``claude_plugins.py`` as
Claude leaves them), ``env`` (e.g. ``CLAUDE_CONFIG_DIR``) and ``launch`` (start the workflow of that
visible name instead of ``workflow.js``).
The checks mirror the tool's: status, exact result, ``error_matches``, ``provider_calls`` (count of
``agent.started``), ``log_messages``, ``log_matches`` and ``phase_started_titles``. One difference
makes the check stricter, not looser: the tool searches ``error_matches`` in the CLI's whole stderr
(which also holds the JSONL events); here it must match the run's failure message itself.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from claude_plugins import apply_plugin_steps, case_environment
from workflow_mcp import (
    FakeProvider,
    MemoryStore,
    RunFailedError,
    RunOptions,
    WorkflowService,
    load_workflow,
    project_state,
)
from workflow_mcp.engine.run import MISSING
from workflow_mcp.events import Event

CASES_DIR = Path(__file__).parent / "cases" / "runtime"
CASES = sorted(d.name for d in CASES_DIR.iterdir() if (d / "case.json").is_file())
RUN_TIMEOUT_S = 90


def materialize(case_dir: Path, case: dict[str, Any], tmp: Path) -> Path:
    for rel, text in case.get("files", {}).items():
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    for rel in case.get("gitDirs", []):
        (tmp / rel).mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(tmp / rel)], check=True, timeout=30)
    (tmp / "home").mkdir(exist_ok=True)
    cwd = run_dir(case, tmp)
    cwd.mkdir(parents=True, exist_ok=True)
    workflow = cwd / "workflow.js"
    shutil.copy(case_dir / "workflow.js", workflow)
    apply_plugin_steps(case, tmp, cwd)
    return workflow


def home_of(case: dict[str, Any], tmp: Path) -> str | None:
    """``<tmp>/home``, or ``None`` when the case sets ``CLAUDE_CONFIG_DIR`` (which then decides)."""
    return None if "CLAUDE_CONFIG_DIR" in case.get("env", {}) else str(tmp / "home")


def run_dir(case: dict[str, Any], tmp: Path) -> Path:
    """The directory a case's run starts in (its ``cwd`` layout field, else the temporary directory)."""
    return tmp / str(case.get("cwd", ""))


def options_for(case: dict[str, Any], tmp: Path) -> RunOptions:
    opts = case.get("options", {})
    return RunOptions(
        cwd=str(run_dir(case, tmp)),
        home=home_of(case, tmp),
        concurrency=opts.get("concurrency"),
        token_budget=opts.get("tokenBudget"),
        sync_timeout_ms=opts.get("syncTimeoutMs"),
    )


async def run_case(case_dir: Path, tmp: Path) -> tuple[str, Any, str | None, list[Event], list[Event]]:
    """Run one case; returns (status, result, failure message, live events, stored events)."""
    case = json.loads((case_dir / "case.json").read_text())
    path = materialize(case_dir, case, tmp)
    service = WorkflowService(MemoryStore(), cwd=str(run_dir(case, tmp)), home=home_of(case, tmp))
    launch = case.get("launch")
    handle = service.start_run(
        service.find_workflow(launch).workflow if launch else load_workflow(path),
        provider=FakeProvider(case.get("fake")),
        args=case.get("args", MISSING),
        options=options_for(case, tmp),
    )
    try:
        result, message = await asyncio.wait_for(handle.result(), RUN_TIMEOUT_S), None
    except RunFailedError as exc:
        result, message = None, exc.message
    stored = service.events(handle.run_id)
    # The state the service kept as the run's events were committed is the projection of its log.
    assert service.status(handle.run_id).to_json() == project_state(stored, run_id=handle.run_id).to_json()
    return handle.status, result, message, handle.log.events, stored


def test_every_runtime_case_folder_has_a_case_file_and_a_workflow() -> None:
    assert len(CASES) >= 33
    for name in CASES:
        assert (CASES_DIR / name / "workflow.js").is_file(), name


@pytest.mark.timeout(RUN_TIMEOUT_S + 30)
@pytest.mark.parametrize("name", CASES)
def test_a_runtime_case_runs_as_the_case_expects(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_dir = CASES_DIR / name
    case = json.loads((case_dir / "case.json").read_text())
    expect = case["expect"]
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    for key, value in case_environment(case, tmp_path).items():
        monkeypatch.setenv(key, value)
    status, result, message, events, stored = asyncio.run(run_case(case_dir, tmp_path))

    assert status == expect["status"], message
    if expect["status"] == "completed":
        if "result" in expect:
            assert result == expect["result"]
    else:
        assert message is not None
        if "error_matches" in expect:
            assert re.search(expect["error_matches"], message), message
    if "provider_calls" in expect:
        assert sum(1 for e in events if e.type == "agent.started") == expect["provider_calls"]
    logs = [str(e.payload.get("message", "")) for e in events if e.type == "log"]
    if "log_messages" in expect:
        assert logs == expect["log_messages"]
    for pattern in expect.get("log_matches", []):
        assert any(re.search(pattern, m) for m in logs), (pattern, logs)
    if "phase_started_titles" in expect:
        titles = [e.payload.get("title") for e in events if e.type == "phase.started"]
        assert titles == expect["phase_started_titles"]
    # Durability: what subscribers saw is exactly what the store holds.
    assert [e.to_json() for e in stored] == [e.to_json() for e in events]
