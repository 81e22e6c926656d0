"""Several processes on one SQLite file while a served run executes: a command-line ``resume`` and a
second ``workflow-mcp serve`` are refused naming the run and the process that holds it, start nothing
and change nothing; the second server sees the run live and can cancel it across processes, after
which the command line resumes it. Real stdio servers (the SDK client), a real CLI, one real file."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import subprocess
from pathlib import Path

import anyio
import pytest

from mcp_kit import BOUND_S, PARK, call, connect, data, text, wait_for_event
from mcp_serve_kit import CLI, Site

pytestmark = pytest.mark.anyio


def _resume(site: Site, run_id: str) -> subprocess.CompletedProcess[str]:
    """``workflow-mcp resume RUN_ID`` answering every call at once (not the run's parking script)."""
    script = site.home / "answer.json"
    script.write_text(json.dumps({"default": {"text": "{prompt}"}}))
    return subprocess.run(
        [CLI, "resume", run_id, "--provider", "fake", "--fake-script", str(script), "--events", "none"],
        cwd=site.project,
        env=site.env(),
        capture_output=True,
        text=True,
        timeout=BOUND_S,
        check=False,
    )


def _holder(message: str, run_id: str) -> int:
    """The process id a refusal names as holding ``run_id``."""
    found = re.search(rf"run {run_id} is still running \(?(?:in )?process (\d+) on ", message)
    assert found, message
    return int(found.group(1))


async def test_a_run_served_by_one_process_is_refused_to_every_other_and_cancellable_from_them(
    site: Site,
) -> None:
    async with connect(site.stdio()) as owner, connect(site.stdio()) as other:
        run_id = data(
            await call(
                owner, "workflow_run", {"name": "steps", "provider": "fake", "fakeScript": PARK, "waitMs": 0}
            )
        )["runId"]
        await wait_for_event(owner, run_id, "agent.started")  # the owner is inside the parked call

        refused = await anyio.to_thread.run_sync(_resume, site, run_id)
        assert refused.returncode == 2, refused.stderr
        holder = _holder(refused.stderr, run_id)
        assert "serve" in Path(f"/proc/{holder}/cmdline").read_text()  # the owning server, named
        assert f"`workflow-mcp runs cancel {run_id}`" in refused.stderr and "Traceback" not in refused.stderr

        second = await call(other, "workflow_run", {"resumeFromRunId": run_id, "provider": "fake"})
        assert second.is_error and _holder(text(second), run_id) == holder
        seen = data(await call(other, "workflow_run_status", {"runId": run_id}))
        assert seen["status"] == "running"
        with contextlib.closing(sqlite3.connect(f"file:{site.state / 'state.db'}?mode=ro", uri=True)) as db:
            assert db.execute("SELECT count(*) FROM runs").fetchone() == (1,)  # neither refusal made a run

        assert data(await call(other, "workflow_run_cancel", {"runId": run_id}))["runId"] == run_id
        ended = data(await call(owner, "workflow_run_await", {"runId": run_id, "waitMs": 20_000}))
        assert ended["status"] == "cancelled"

    resumed = await anyio.to_thread.run_sync(_resume, site, run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == 5
