"""Resuming a run is one use case whichever face asks: ``workflow_run`` with ``resumeFromRunId`` (the
in-memory SDK ``Client(server)``) and ``workflow-mcp resume`` (the real command line) continue a run
under its stored budget, args and fake script, replaying the same calls to the same result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from workflow_mcp.server import FileScope, SourceTrust, create_server
from workflow_mcp.service import WorkflowService
from workflow_mcp.store.sqlite import SqliteStore

from mcp_kit import all_events, call, connect, data, text

pytestmark = pytest.mark.anyio

CLI = str(Path(sys.executable).with_name("workflow-mcp"))
BUDGETED = (
    "export const meta = { name: 'budgeted', description: 'calls until its budget is spent' }\n"
    "let n = 0\n"
    "while (n < 50 && budget.remaining() > 0) { await agent('call ' + n, { label: 'c' + n }); n++ }\n"
    "return n\n"
)
TEN_TOKENS = {"default": {"text": "ok", "tokens": {"output": 10}}}


def cli(*argv: str, cwd: Path) -> tuple[Any, list[dict[str, Any]]]:
    """Run the command line (events as JSON lines); return its printed value and its events."""
    done = subprocess.run(
        [CLI, *argv, "--events", "jsonl"],
        cwd=cwd,
        env={**os.environ, "HOME": str(cwd / "home")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), [json.loads(line) for line in done.stderr.splitlines()]


@asynccontextmanager
async def served(project: Path, state: Path) -> AsyncIterator[Client]:
    """The in-memory SDK client of a server over the SQLite store in ``state`` that trusts ``project``;
    the server is closed (its runs and providers stopped) afterwards."""
    service = WorkflowService(SqliteStore(state / "state.db"), cwd=str(project), home=str(project / "home"))
    trusted = (str(project),)
    server = create_server(
        service,
        trust=SourceTrust(trusted_dirs=trusted),
        scope=FileScope.of(cwd=str(project), trust_dirs=trusted, state_dir=str(state), confined=False),
    )
    try:
        async with connect(server) as client:
            yield client
    finally:
        await server.aclose()
        service.store.close()


def labels(events: list[dict[str, Any]], kind: str) -> list[str]:
    return [e["payload"]["label"] for e in events if e["type"] == kind]


async def test_mcp_resume_replays_the_same_calls_to_the_same_result_as_cli_resume(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "budgeted.js").write_text(BUDGETED)
    (tmp_path / "fake.json").write_text(json.dumps(TEN_TOKENS))
    first, events = cli(
        "run",
        "budgeted.js",
        "--provider",
        "fake",
        "--fake-script",
        "fake.json",
        "--token-budget",
        "30",
        cwd=tmp_path,
    )
    run_id = events[0]["runId"]
    assert first == 3 and labels(events, "agent.started") == ["c0", "c1", "c2"]

    by_cli, cli_events = cli("resume", run_id, cwd=tmp_path)

    async with served(tmp_path, Path(os.environ["WORKFLOW_MCP_HOME"])) as c:  # the CLI's store
        by_mcp = data(await call(c, "workflow_run", {"resumeFromRunId": run_id, "waitMs": 20_000}))
        mcp_events = await all_events(c, by_mcp["runId"])

    assert by_mcp["status"] == "completed" and by_mcp["resumedFrom"] == run_id
    assert by_mcp["result"] == by_cli == 3
    assert labels(mcp_events, "agent.cached") == labels(cli_events, "agent.cached") == ["c0", "c1", "c2"]
    assert labels(mcp_events, "agent.started") == labels(cli_events, "agent.started") == []
    assert by_mcp["tokenUsage"]["replayedOutput"] == 30 and by_mcp["tokenUsage"]["output"] == 0


async def test_an_mcp_resume_that_widens_the_runs_budget_is_refused_and_says_how_to_get_more(
    tmp_path: Path,
) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "budgeted.js").write_text(BUDGETED)
    start = {"path": "budgeted.js", "provider": "fake", "fakeScript": TEN_TOKENS, "waitMs": 20_000}
    async with served(tmp_path / "project", tmp_path / "state") as c:
        first = data(await call(c, "workflow_run", {**start, "tokenBudget": 30}))
        assert first["result"] == 3
        again = {"resumeFromRunId": first["runId"], "waitMs": 20_000}
        wider = await call(c, "workflow_run", {**again, "tokenBudget": 100})
        narrower = data(await call(c, "workflow_run", {**again, "tokenBudget": 10}))
        # A new run of the file that reuses the journal takes the limits it is given.
        more = data(await call(c, "workflow_run", {**start, **again, "tokenBudget": 50}))
    assert wider.is_error
    assert f"run {first['runId']} ran with tokenBudget (--token-budget) 30" in text(wider)
    assert "resumeFromRunId" in text(wider)
    assert narrower["result"] == 1
    assert more["result"] == 5 and more["tokenUsage"]["replayedOutput"] == 30


async def test_workflow_run_without_a_provider_is_invalid_unless_it_continues_a_run(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "budgeted.js").write_text(BUDGETED)
    async with served(tmp_path / "project", tmp_path / "state") as c:
        with pytest.raises(MCPError) as caught:
            await c.call_tool("workflow_run", {"path": "budgeted.js"})
    assert caught.value.error.code == INVALID_PARAMS and "provider is required" in caught.value.error.message
