"""What `workflow-mcp run` loads: none of the MCP SDK, pydantic or the HTTP stack. A command-line run
pays only for the runtime; importing the `mcp` SDK alone costs about a second (its types are pydantic
models), which every CLI run once paid through the live view's shared timeline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# `workflow-mcp` exactly, plus a note of every module it loaded, written as it exits.
RUN_AND_NOTE_MODULES = """
import atexit, json, os, sys
atexit.register(lambda: open(os.environ["MODULES_OUT"], "w").write(json.dumps(sorted(sys.modules))))
from workflow_mcp.cli import main
sys.argv[0] = "workflow-mcp"
main()
"""

NOT_FOR_A_CLI_RUN = ("mcp", "mcp_types", "pydantic", "starlette", "uvicorn", "sse_starlette", "httpx")


def test_a_command_line_run_loads_no_mcp_sdk_pydantic_or_http_module(tmp_path: Path) -> None:
    script = tmp_path / "note.py"
    script.write_text(RUN_AND_NOTE_MODULES)
    workflow = tmp_path / "w.js"
    workflow.write_text("export const meta = { name: 'w', description: 'd' }\nreturn await agent('hi')\n")
    noted = tmp_path / "modules.json"
    env = {**os.environ, "WORKFLOW_MCP_HOME": str(tmp_path / "home"), "MODULES_OUT": str(noted)}
    for mode in ("jsonl", "progress"):
        done = subprocess.run(
            [sys.executable, str(script), "run", str(workflow), "--provider", "fake", "--events", mode],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == "hi"
        loaded = {m.split(".")[0] for m in json.loads(noted.read_text())}
        assert "workflow_mcp" in loaded  # the note is the run's own
        assert [m for m in NOT_FOR_A_CLI_RUN if m in loaded] == [], mode
