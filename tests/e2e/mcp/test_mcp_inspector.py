"""The MCP Inspector CLI (a client we did not write) against ``workflow-mcp serve`` over stdio."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest

from mcp_serve_kit import CLI, Site

NPX = shutil.which("npx")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(NPX is None, reason="npx (Node.js) is not installed, so the MCP Inspector cannot run"),
]
INSPECTOR = "@modelcontextprotocol/inspector"


def inspector(site: Site, *args: str) -> dict[str, Any]:
    assert NPX is not None
    command = [
        NPX,
        "-y",
        INSPECTOR,
        "--cli",
        "-e",
        f"WORKFLOW_MCP_HOME={site.state}",
        "-e",
        f"HOME={site.home}",
        CLI,
        "serve",
        "--trust",
        str(site.project),
        *args,
    ]
    done = subprocess.run(command, cwd=site.project, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout))


def test_the_inspector_lists_every_tool_with_its_schemas(site: Site) -> None:
    listed = inspector(site, "--method", "tools/list")
    tools = {t["name"]: t for t in listed["tools"]}
    assert {"workflow_list", "workflow_run", "workflow_run_events", "workflow_run_await"} <= set(tools)
    assert all("outputSchema" in t and "annotations" in t for t in tools.values())


def test_the_inspector_calls_workflow_run_and_gets_the_structured_outcome(site: Site) -> None:
    path = site.project / ".claude" / "workflows" / "hello.js"
    result = inspector(
        site,
        "--method",
        "tools/call",
        "--tool-name",
        "workflow_run",
        "--tool-arg",
        f"path={path}",
        "--tool-arg",
        "provider=fake",
        "--tool-arg",
        "waitMs=20000",
        "--tool-arg",
        'args={"who": "inspector"}',
    )
    assert result["isError"] is False
    assert result["structuredContent"]["status"] == "completed"
    assert result["structuredContent"]["result"] == {"a": "hello inspector", "args": {"who": "inspector"}}
