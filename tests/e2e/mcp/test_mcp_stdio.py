"""``workflow-mcp serve`` over real stdio: the SDK client, stdout hygiene, and what happens to runs
when the client goes away or the server dies."""

from __future__ import annotations

import asyncio
import json
import signal

import anyio
import pytest

from mcp_kit import BOUND_S, PARK, call, connect, data, wait_for_event
from mcp_serve_kit import RawStdio, Site

pytestmark = pytest.mark.anyio

NOISY = """export const meta = { name: 'noisy', description: 'writes to every console it can find' }
console.log('console.log from the workflow')
console.error('console.error from the workflow')
phase('Work')
const out = await parallel([1, 2, 3].map((i) => () => agent('task ' + i, { label: 'task-' + i })))
log('finished ' + out.length)
return out
"""


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_sdk_client_over_stdio_lists_tools_and_runs_a_workflow(site: Site, mode: str) -> None:
    async with connect(site.stdio(), mode=mode) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert {"workflow_run", "workflow_run_events", "workflow_list"} <= names
        listed = data(await call(c, "workflow_list", {}))
        assert [w["name"] for w in listed["workflows"]] == ["hello", "steps"]
        out = data(
            await call(
                c,
                "workflow_run",
                {"name": "hello", "provider": "fake", "args": {"who": "io"}, "waitMs": 20_000},
            )
        )
    assert out["status"] == "completed" and out["result"] == {"a": "hello io", "args": {"who": "io"}}


async def test_stdout_carries_only_json_rpc_during_a_full_run(site: Site) -> None:
    site.workflow("noisy", NOISY)
    raw = await RawStdio.start(site)
    await raw.initialize()
    run = await raw.request(
        "tools/call",
        {
            "name": "workflow_run",
            "arguments": {"name": "noisy", "provider": "fake", "waitMs": 20_000},
            "_meta": {"progressToken": "p1"},
        },
    )
    rid = run["result"]["structuredContent"]["runId"]
    assert run["result"]["structuredContent"]["status"] == "completed"
    await raw.request("tools/call", {"name": "workflow_run_events", "arguments": {"runId": rid}})
    await raw.request(
        "tools/call", {"name": "workflow_run", "arguments": {"provider": "fake"}}
    )  # invalid params
    status, stderr = await raw.close()
    assert status == 0
    messages = [json.loads(line) for line in raw.stdout_lines if line.strip()]
    assert len(messages) == len([line for line in raw.stdout_lines if line.strip()])
    assert all(isinstance(m, dict) and m.get("jsonrpc") == "2.0" for m in messages)
    assert any(m.get("method") == "notifications/progress" for m in messages)
    assert any(m.get("error", {}).get("code") == -32602 for m in messages)
    assert "serving MCP on stdio" in stderr
    # The workflow's console output is a durable log event (as in Claude Code), so it reaches stdout
    # only inside JSON-RPC messages, never as a line of its own.
    assert not any(line.startswith("console.log") for line in raw.stdout_lines)


async def test_closing_stdin_stops_the_server_and_its_unfinished_runs_stay_resumable(site: Site) -> None:
    async with connect(site.stdio()) as c:
        rid = data(
            await call(
                c, "workflow_run", {"name": "hello", "provider": "fake", "fakeScript": PARK, "waitMs": 0}
            )
        )["runId"]
        await wait_for_event(c, rid, "agent.started")
    # The client is gone (stdin closed): the server recorded the run as cancelled before exiting.
    async with connect(site.stdio()) as c:
        snap = data(await call(c, "workflow_run_status", {"runId": rid}))
        assert snap["status"] == "cancelled"
        # A resume keeps the run's fake script, which parks every call: answer them this time.
        answer = {"provider": "fake", "fakeScript": {}}
        resumed = data(await call(c, "workflow_run", {"resumeFromRunId": rid, **answer, "waitMs": 20_000}))
    assert resumed["status"] == "completed" and resumed["resumedFrom"] == rid


async def test_a_killed_servers_run_is_marked_interrupted_and_a_new_server_resumes_it(site: Site) -> None:
    raw = await RawStdio.start(site)
    await raw.initialize()
    started = await raw.request(
        "tools/call",
        {"name": "workflow_run", "arguments": {"name": "steps", "provider": "fake", "fakeScript": PARK}},
    )
    rid = started["result"]["structuredContent"]["runId"]
    await raw.request(
        "tools/call",
        {"name": "workflow_run_events", "arguments": {"runId": rid, "after": 1, "waitMs": 20_000}},
    )
    raw.proc.send_signal(signal.SIGKILL)
    async with asyncio.timeout(BOUND_S):
        await raw.proc.wait()
    async with connect(site.stdio()) as c:
        snap = data(await call(c, "workflow_run_status", {"runId": rid}))
        assert snap["status"] == "interrupted"
        with anyio.fail_after(BOUND_S):
            answer = {"provider": "fake", "fakeScript": {}}  # not the stored script, which parks every call
            resumed = data(
                await call(c, "workflow_run", {"resumeFromRunId": rid, **answer, "waitMs": 20_000})
            )
    assert resumed["status"] == "completed" and resumed["result"] == 5
