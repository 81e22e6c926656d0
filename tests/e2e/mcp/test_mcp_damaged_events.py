"""A stored run with one damaged event row (written with sqlite3 directly): a real stdio server still
answers ``workflow_run_events`` (the event in its place as a stand-in recording the damage) and
``workflow_run_status``, with valid JSON-RPC on stdout."""

from __future__ import annotations

import json
import sqlite3
import subprocess

import pytest

from mcp_serve_kit import CLI, RawStdio, Site

pytestmark = pytest.mark.anyio


def stored_run(site: Site) -> tuple[str, int]:
    """Run ``steps`` (2 calls) through the CLI, damage its first agent.completed body; returns
    (run id, sequence)."""
    done = subprocess.run(
        [CLI, "run", "steps", '{"n": 2}', "--provider", "fake", "--events", "none"],
        cwd=site.project,
        env=site.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    db = sqlite3.connect(site.state / "state.db")
    try:
        rid, seq = db.execute(
            "SELECT run_id, sequence FROM events WHERE type = 'agent.completed' ORDER BY sequence LIMIT 1"
        ).fetchone()
        db.execute(
            "UPDATE events SET body = CAST(X'7BFFFE' AS TEXT) WHERE run_id = ? AND sequence = ?", (rid, seq)
        )
        db.commit()
    finally:
        db.close()
    return str(rid), int(seq)


async def test_events_and_status_of_a_run_with_a_damaged_event_are_answered_over_stdio(site: Site) -> None:
    rid, seq = stored_run(site)
    raw = await RawStdio.start(site)
    await raw.initialize()
    page = await raw.request("tools/call", {"name": "workflow_run_events", "arguments": {"runId": rid}})
    status = await raw.request("tools/call", {"name": "workflow_run_status", "arguments": {"runId": rid}})
    code, stderr = await raw.close()

    assert code == 0 and "Traceback" not in stderr
    result = page["result"]
    assert not result.get("isError"), result
    listed = result["structuredContent"]["events"]
    assert [e["sequence"] for e in listed] == list(range(1, len(listed) + 1))  # none dropped
    stand_in = listed[seq - 1]
    assert stand_in["payload"]["damaged"] == {
        "sequence": seq,
        "columns": ["body"],
        "note": stand_in["payload"]["damaged"]["note"],
    }
    assert stand_in["type"] == "agent.completed" and stand_in["agentId"] == "ag_0001"
    assert status["result"]["structuredContent"]["status"] == "completed"
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in raw.stdout_lines if line.strip())
