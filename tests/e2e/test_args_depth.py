"""One args nesting limit, ``MAX_VALUE_DEPTH`` of definitions/profile.py, on every face and in every
document: the limit runs, one more level is refused naming it (MCP stdio: test_mcp_stdio_malformed.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from workflow_mcp import FakeProvider, SqliteStore, WorkflowService, load_workflow, run_workflow
from workflow_mcp.definitions.profile import MAX_VALUE_DEPTH
from workflow_mcp.errors import InvalidInputError
from workflow_mcp.providers import fake

CLI = str(Path(sys.executable).with_name("workflow-mcp"))
REPO = Path(__file__).resolve().parents[2]
DEPTH = """export const meta = { name: 'depth', description: 'how deep its args nest' }
let d = 0
for (let v = args; Array.isArray(v); v = v[0]) d++
return d
"""


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def deep_list(levels: int) -> list[object]:
    value: list[object] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKFLOW_MCP_HOME": str(cwd / "state"), "HOME": str(cwd / "home")}
    return subprocess.run([CLI, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def test_the_cli_runs_args_nested_at_the_limit_and_refuses_one_more_level(tmp_path: Path) -> None:
    wf = tmp_path / "depth.js"
    wf.write_text(DEPTH)
    ok = cli("run", str(wf), nested(MAX_VALUE_DEPTH), "--provider", "fake", "--events", "none", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == MAX_VALUE_DEPTH
    for levels in (MAX_VALUE_DEPTH + 1, 5_000):
        refused = cli("run", str(wf), nested(levels), "--provider", "fake", cwd=tmp_path)
        assert refused.returncode == 2
        assert f"nested deeper than {MAX_VALUE_DEPTH} levels" in refused.stderr
        assert "Traceback" not in refused.stderr


@pytest.mark.anyio
async def test_the_python_api_runs_args_nested_at_the_limit_and_refuses_one_more_level(
    tmp_path: Path,
) -> None:
    wf_path = tmp_path / "depth.js"
    wf_path.write_text(DEPTH)
    wf = load_workflow(str(wf_path))
    at_limit = json.loads(nested(MAX_VALUE_DEPTH))
    assert await run_workflow(wf, provider=FakeProvider(), args=at_limit).result() == MAX_VALUE_DEPTH
    service = WorkflowService(SqliteStore(tmp_path / "state.db"), cwd=str(tmp_path))
    handle = service.start_run(wf, provider=FakeProvider(), args=at_limit)
    assert await handle.result() == MAX_VALUE_DEPTH
    for too_deep in ([at_limit], deep_list(5_000)):
        with pytest.raises(InvalidInputError, match=f"nested deeper than {MAX_VALUE_DEPTH} levels"):
            run_workflow(wf, provider=FakeProvider(), args=too_deep)
        with pytest.raises(InvalidInputError, match=f"nested deeper than {MAX_VALUE_DEPTH} levels"):
            service.start_run(wf, provider=FakeProvider(), args=too_deep)
    assert [r.run_id for r in service.list_runs()] == [handle.run_id]  # nothing refused was stored
    await service.shutdown()


def test_every_document_and_copy_of_the_limit_says_the_same_number() -> None:
    assert fake._MAX_DEPTH == MAX_VALUE_DEPTH  # providers sit below definitions and repeat the number
    worker = (REPO / "src/workflow_mcp/realm/worker.js").read_text()
    assert f"let MAX_DEPTH = {MAX_VALUE_DEPTH}" in worker and "msg.maxValueDepth" in worker
    texts = {p: (REPO / p).read_text() for p in ("README.md", "docs/PROFILE.md", "src/workflow_mcp/cli.py")}
    stated = {
        (p, int(n.replace(",", "")))
        for p, t in texts.items()
        for n in re.findall(r"(?:more than|at most|deeper than) ([\d,]+) levels", t)
    }
    assert stated and {n for _, n in stated} == {MAX_VALUE_DEPTH}, stated
