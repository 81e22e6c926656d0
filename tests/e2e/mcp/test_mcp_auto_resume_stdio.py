"""``workflow-mcp serve --auto-resume`` over real stdio: a run that pauses for a usage limit is resumed
by the server itself once the limit's ``resetsAt`` has passed, and the continuation completes — also
when the run paused under an earlier server process (a restart)."""

from __future__ import annotations

import datetime
import math
import subprocess
import time
from typing import Any

import anyio
import pytest

from mcp_kit import BOUND_S, all_events, call, connect, data
from mcp_serve_kit import CLI, Site

pytestmark = pytest.mark.anyio

TWO_CALLS = (
    "export const meta = { name: 'two-calls', description: 'a then b' }\n"
    "const a = await agent('first', { label: 'a' })\n"
    "const b = await agent('second', { label: 'b' })\n"
    "return [a, b]\n"
)
RESET_IN_S = 6  # the real wait this test makes (the limit must actually reset), counted once connected


def limited_until(moment: float) -> dict[str, Any]:
    stamp = datetime.datetime.fromtimestamp(moment, tz=datetime.UTC).isoformat().replace("+00:00", "Z")
    return {
        "rules": [{"match": {"label": "b"}, "respond": {"fail": "usage_limit", "resetsAt": stamp}}],
        "default": {"echo": True},
    }


async def test_a_usage_limit_paused_run_is_resumed_by_the_server_after_its_reset(site: Site) -> None:
    site.workflow("two-calls", TWO_CALLS)
    async with connect(site.stdio("--auto-resume")) as c:
        await c.list_tools()
        reset = math.ceil(time.time()) + RESET_IN_S
        paused = data(
            await call(
                c,
                "workflow_run",
                {
                    "name": "two-calls",
                    "provider": "fake",
                    "fakeScript": limited_until(reset),
                    "waitMs": 20_000,
                },
            )
        )
        assert paused["status"] == "paused" and paused["pausedReason"] == "usage_limit"
        run_id = paused["runId"]
        notes: list[dict[str, Any]] = []
        with anyio.fail_after(BOUND_S):
            while not notes:  # the note is written when the server resumes the run, after the reset
                notes = [e for e in await all_events(c, run_id) if "autoResume" in e["payload"]]
                if not notes:
                    await anyio.sleep(0.1)
        assert time.time() >= reset
        (note,) = notes
        resumed = note["payload"]["autoResume"]["resumedAs"]
        assert note["type"] == "log" and note["payload"]["autoResume"]["attempt"] == 1
        done = data(await call(c, "workflow_run_await", {"runId": resumed, "waitMs": 20_000}))
        status = data(await call(c, "workflow_run_status", {"runId": run_id}))
    assert done["status"] == "completed" and done["result"] == ["first", "second"]
    assert status["status"] == "paused"  # the paused run's own record is unchanged


def test_serve_refuses_a_bad_auto_resume_table_before_serving_naming_the_file_and_key(site: Site) -> None:
    config = site.project / "workflow-mcp.toml"
    config.write_text("[auto_resume]\nattempts = 0\n")
    done = subprocess.run(
        [CLI, "serve", "--auto-resume"],
        cwd=site.project,
        env=site.env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BOUND_S,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert f"{config}: auto_resume.attempts: must be an integer from 1 to 1000, got 0" in done.stderr


async def test_a_run_paused_before_a_restart_is_resumed_by_the_restarted_server_once(site: Site) -> None:
    site.workflow("two-calls", TWO_CALLS)
    async with connect(site.stdio("--auto-resume")) as c:
        await c.list_tools()
        reset = math.ceil(time.time()) + RESET_IN_S
        paused = data(
            await call(
                c,
                "workflow_run",
                {
                    "name": "two-calls",
                    "provider": "fake",
                    "fakeScript": limited_until(reset),
                    "waitMs": 20_000,
                },
            )
        )
        assert paused["status"] == "paused" and paused["pausedReason"] == "usage_limit"
    assert time.time() < reset, "the first server must stop before the reset for this test to mean anything"
    run_id = paused["runId"]
    async with connect(site.stdio("--auto-resume")) as c:  # the restarted server
        notes: list[dict[str, Any]] = []
        with anyio.fail_after(BOUND_S):
            while not notes:
                notes = [e for e in await all_events(c, run_id) if "autoResume" in e["payload"]]
                if not notes:
                    await anyio.sleep(0.1)
        assert time.time() >= reset
        (note,) = notes
        resumed = note["payload"]["autoResume"]["resumedAs"]
        done = data(await call(c, "workflow_run_await", {"runId": resumed, "waitMs": 20_000}))
        events = await all_events(c, run_id)
    assert done["status"] == "completed" and done["result"] == ["first", "second"]
    assert [e["payload"].get("resumedAs") for e in events if e["payload"].get("resumedAs")] == [resumed]
