"""ACP agent processes live as long as the service's provider pool, not as long as a run: runs on the
``acp`` provider share the agent process the pool started for their configuration, and closing the MCP
server stops it. Counted as child processes of this test, against the scripted stub agent."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from workflow_mcp import MemoryStore, WorkflowService
from workflow_mcp.server import FileScope, SourceTrust, create_server

from acp_kit import SDK_SKIP_REASON, STUB_AGENT, registered, still_running
from helpers import RUN_TIMEOUT_S, arun

pytestmark = [
    pytest.mark.timeout(RUN_TIMEOUT_S * 2),
    pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads child processes from /proc"),
]

pytest.importorskip("acp", reason=SDK_SKIP_REASON)

HELLO = "export const meta = { name: 'hello', description: 'one agent call' }\nreturn await agent('hello ' + args)\n"


def agent_processes() -> list[int]:
    """Live (non-zombie) stub agents among this process's descendants (Linux /proc)."""
    parents: dict[int, int] = {}
    commands: dict[int, bytes] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            commands[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(entry)] = int(fields[1])

    def descends(pid: int) -> bool:
        seen = 0
        while pid in parents and seen < 64:
            pid, seen = parents[pid], seen + 1
            if pid == os.getpid():
                return True
        return False

    return sorted(pid for pid in parents if STUB_AGENT.encode() in commands.get(pid, b"") and descends(pid))


def test_five_acp_runs_share_one_agent_process_and_none_is_left_after_the_server_closes(
    tmp_path: Path,
) -> None:
    state = Path(os.environ["WORKFLOW_MCP_HOME"])
    state.mkdir(parents=True, exist_ok=True)
    # The user's own configuration: the only place a command may be set.
    (state / "config.toml").write_text(
        f"[providers.acp]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(STUB_AGENT)}]\n"
    )
    project = tmp_path / "project"
    project.mkdir()
    (project / "hello.js").write_text(HELLO)

    async def go() -> tuple[list[str], list[int]]:
        service = WorkflowService(MemoryStore(), cwd=str(project), home=str(tmp_path))
        trusted = (str(project),)
        server = create_server(
            service,
            trust=SourceTrust(trusted_dirs=trusted),
            scope=FileScope.of(cwd=str(project), trust_dirs=trusted, state_dir=str(state), confined=False),
        )
        results: list[str] = []
        try:
            with anyio.fail_after(RUN_TIMEOUT_S):
                async with Client(server) as client:
                    for i in range(5):
                        out = await client.call_tool(
                            "workflow_run",
                            {"path": "hello.js", "provider": "acp", "args": i, "waitMs": 20_000},
                        )
                        assert out.structured_content is not None and not out.is_error, out.content
                        assert out.structured_content["status"] == "completed", out.structured_content
                        results.append(out.structured_content["result"])
            alive = agent_processes()
        finally:
            await server.aclose()
        return results, alive

    with registered():
        results, alive = arun(go())
    assert results == [f"hello {i}" for i in range(5)]
    assert len(alive) == 1  # one agent process, started once for the configuration, served every run
    assert still_running(alive) == [] and agent_processes() == []
