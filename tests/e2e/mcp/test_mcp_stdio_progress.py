"""Progress over real stdio (MCP "Progress"): ``workflow_run`` sends ``notifications/progress`` only for a
request that carried a ``progressToken``, each naming that token, with the progress going up."""

from __future__ import annotations

import json

import pytest

from mcp_serve_kit import RawStdio, Site

pytestmark = pytest.mark.anyio


async def test_progress_notifications_go_only_to_a_request_that_sent_a_progress_token(site: Site) -> None:
    raw = await RawStdio.start(site)
    await raw.initialize()
    arguments = {"name": "steps", "provider": "fake", "args": {"n": 20}, "waitMs": 20_000}
    quiet = await raw.request("tools/call", {"name": "workflow_run", "arguments": arguments})
    quiet_lines = len(raw.stdout_lines)
    asked = await raw.request(
        "tools/call", {"name": "workflow_run", "arguments": arguments, "_meta": {"progressToken": "tok-7"}}
    )
    status, _ = await raw.close()
    assert status == 0
    assert quiet["result"]["structuredContent"]["status"] == "completed"
    assert asked["result"]["structuredContent"]["status"] == "completed"
    messages = [json.loads(line) for line in raw.stdout_lines if line.strip()]
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    before = [json.loads(line) for line in raw.stdout_lines[:quiet_lines] if line.strip()]
    assert not any(m.get("method") == "notifications/progress" for m in before)
    assert progress and {p["progressToken"] for p in progress} == {"tok-7"}
    values = [p["progress"] for p in progress]
    assert values == sorted(set(values))
    assert "20/20 agent calls done" in progress[-1]["message"]
