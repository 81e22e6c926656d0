"""The oracle-measured ``plugins-*`` runtime cases and the realm cases of the third fidelity pass
(``FIDELITY``; ``tests/conformance/cases/runtime``) through the MCP server: each case's plugin steps
are laid out as ``claude plugin …`` leaves them
(``tests/claude_plugins.py``), its workflow is started with ``workflow_run`` (by path, or by the
case's ``launch`` name) on the fake provider, and the result, the log lines and the number of agent
calls must be what Claude Code gave. The Python API and the CLI run the same cases
(``tests/conformance/test_runtime_cases.py``, ``tests/e2e/test_cli_conformance.py``)."""

from __future__ import annotations

import gc
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from claude_plugins import apply_plugin_steps, case_environment
from workflow_mcp.server import LOCAL, FileScope, SourceTrust, create_server
from workflow_mcp.service import WorkflowService
from workflow_mcp.store.memory import MemoryStore

from mcp_kit import all_events, call, connect, data

pytestmark = pytest.mark.anyio

CASES_DIR = Path(__file__).resolve().parents[2] / "conformance" / "cases" / "runtime"
CASES = sorted(d.name for d in CASES_DIR.glob("plugins-*") if (d / "case.json").is_file())
# measured in Claude Code 2.1.332 on 2026-12-02 (docs/PROFILE.md, "Claude fidelity, part 3")
FIDELITY = [  # those whose values, failures and logs cross the MCP surface (the rest: Python API, CLI)
    "agent-options-not-an-object",
    "agent-phase-option-coercion",
    "args-boolean",
    "args-number",
    "errors-failed-run-empty-message",
    "errors-failed-run-error-subclass",
    "fanout-results-copied",
    "fanout-start-deferred",
    "pipeline-promise-items",
    "realm-intrinsics-frozen",
    "realm-late-work-after-return",
    "realm-log-exotic-values",
    "result-promise-values",
]
WAIT_MS = 25_000  # the most workflow_run waits


def lay_out(case: dict[str, Any], case_dir: Path, root: Path) -> Path:
    """The case's files, git folders and plugin steps under ``root``; returns the workflow's path."""
    for rel, text in case.get("files", {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for rel in case.get("gitDirs", []):
        (root / rel).mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(root / rel)], check=True, timeout=30)
    (root / "home").mkdir(exist_ok=True)
    cwd = root / case.get("cwd", "")
    cwd.mkdir(parents=True, exist_ok=True)
    workflow: Path = cwd / "workflow.js"
    workflow.write_text((case_dir / "workflow.js").read_text())
    apply_plugin_steps(case, root, cwd)
    return workflow


def test_every_plugins_case_is_here() -> None:
    assert len(CASES) >= 27


def test_every_fidelity_case_exists() -> None:
    assert [n for n in FIDELITY if not (CASES_DIR / n / "case.json").is_file()] == []


@pytest.mark.parametrize("name", CASES + FIDELITY)
async def test_a_plugins_case_runs_through_mcp_as_claude_ran_it(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, anyio_backend: str
) -> None:
    case_dir = CASES_DIR / name
    case = json.loads((case_dir / "case.json").read_text())
    expect = case["expect"]
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    for key, value in case_environment(case, tmp_path).items():
        monkeypatch.setenv(key, value)
    workflow = lay_out(case, case_dir, tmp_path)
    cwd = workflow.parent
    home = None if "CLAUDE_CONFIG_DIR" in case.get("env", {}) else str(tmp_path / "home")
    service = WorkflowService(MemoryStore(), cwd=str(cwd), home=home)
    everything = (str(tmp_path),)  # the case's plugins, personal and project files are all trusted
    server = create_server(
        service,
        trust=SourceTrust(trusted_dirs=everything),
        principal=LOCAL,
        scope=FileScope.of(
            cwd=str(cwd), trust_dirs=everything, state_dir=str(tmp_path / "state"), confined=False
        ),
    )
    arguments: dict[str, Any] = {
        "provider": "fake",
        "fakeScript": case.get("fake", {}),
        "cwd": str(cwd),
        "waitMs": WAIT_MS,
    }
    if "args" in case:
        arguments["args"] = case["args"]
    if case.get("launch"):
        arguments["name"] = case["launch"]
    else:
        arguments["path"] = str(workflow)
    try:
        async with connect(server) as client:
            out = data(await call(client, "workflow_run", arguments))
            events = await all_events(client, out["runId"])
    finally:
        await service.shutdown("the test ended", timeout_s=10)
        gc.collect()
    assert out["status"] == expect["status"], out
    if "error_matches" in expect:
        # Claude's failure summary is the error's stack: the run.failed event carries it
        (failed,) = [e for e in events if e["type"] == "run.failed"]
        assert re.search(expect["error_matches"], failed["payload"]["error"]["stack"]), failed
    if "result" in expect:
        assert out["result"] == expect["result"]
    if "provider_calls" in expect:
        assert sum(1 for e in events if e["type"] == "agent.started") == expect["provider_calls"]
    logs = [str(e["payload"].get("message", "")) for e in events if e["type"] == "log"]
    if "log_messages" in expect:
        assert logs == expect["log_messages"]
