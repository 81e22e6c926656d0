"""A server that starts after another one was killed says, on stderr only, which runs it marked
``interrupted`` — once: the next start, with nothing left to recover, says nothing about it."""

from __future__ import annotations

import asyncio
import json
import signal

import pytest

from mcp_kit import BOUND_S, PARK
from mcp_serve_kit import RawStdio, Site, http_server

pytestmark = pytest.mark.anyio


async def killed_server_run(site: Site) -> str:
    """Start a parked run on a stdio server, SIGKILL the server; returns the run id."""
    raw = await RawStdio.start(site)
    await raw.initialize()
    started = await raw.request(
        "tools/call",
        {"name": "workflow_run", "arguments": {"name": "steps", "provider": "fake", "fakeScript": PARK}},
    )
    rid = str(started["result"]["structuredContent"]["runId"])
    await raw.request(
        "tools/call",
        {"name": "workflow_run_events", "arguments": {"runId": rid, "after": 1, "waitMs": 20_000}},
    )
    raw.proc.send_signal(signal.SIGKILL)
    async with asyncio.timeout(BOUND_S):
        await raw.proc.wait()
    return rid


def notice(rid: str) -> str:
    return (
        f"workflow-mcp: marked 1 run interrupted (its process died): {rid}; "
        f"resume it with `workflow-mcp resume {rid}`"
    )


async def test_the_next_stdio_server_says_on_stderr_which_runs_it_marked_interrupted(site: Site) -> None:
    rid = await killed_server_run(site)

    raw = await RawStdio.start(site)
    await raw.initialize()
    snap = await raw.request("tools/call", {"name": "workflow_run_status", "arguments": {"runId": rid}})
    status, stderr = await raw.close()

    assert status == 0 and snap["result"]["structuredContent"]["status"] == "interrupted"
    assert [line for line in stderr.splitlines() if "interrupted" in line] == [notice(rid)]
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in raw.stdout_lines if line.strip())
    assert not any("interrupted (" in line for line in raw.stdout_lines)

    again = await RawStdio.start(site)
    await again.initialize()
    _, stderr = await again.close()
    assert "marked" not in stderr and "serving MCP on stdio" in stderr


async def test_the_next_http_server_says_on_stderr_which_runs_it_marked_interrupted(site: Site) -> None:
    rid = await killed_server_run(site)
    async with http_server(site) as server:
        line = await server.stderr_line("interrupted")
    assert line.rstrip("\n") == notice(rid)
