"""Run status as the command line shows it: calls stopped by a cancellation are counted as cancelled,
not failed, in ``runs show`` and in the live progress view."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workflow_mcp.cli_watch import LiveRunView
from workflow_mcp.events import Event

from helpers import STOPPED, STOPPED_SCRIPT

CLI = str(Path(sys.executable).with_name("workflow-mcp"))
BOUND_S = 60


def environment(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "WORKFLOW_MCP_HOME": str(tmp_path / "state"), "HOME": str(tmp_path / "home")}


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, *argv], cwd=cwd, env=environment(cwd), capture_output=True, text=True, timeout=BOUND_S
    )


async def cancelled_run(tmp_path: Path) -> tuple[str, list[Event]]:
    """Runs STOPPED at concurrency 2 in a `workflow-mcp run` process, cancels it from another process
    (`runs cancel`) once one call failed and two are running (the fourth is queued), and returns the
    run id and the events the run printed."""
    (tmp_path / "stopped.js").write_text(STOPPED)
    (tmp_path / "script.json").write_text(json.dumps(STOPPED_SCRIPT))
    proc = await asyncio.create_subprocess_exec(
        CLI,
        "run",
        "stopped.js",
        "--provider",
        "fake",
        "--fake-script",
        "script.json",
        "--concurrency",
        "2",
        "--events",
        "jsonl",
        cwd=tmp_path,
        env=environment(tmp_path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    events: list[Event] = []
    async with asyncio.timeout(BOUND_S):
        while not (
            sum(e.type == "agent.started" for e in events) == 3
            and sum(e.type == "agent.failed" for e in events) == 1
        ):
            line = await proc.stderr.readline()
            assert line, "the run ended early"
            events.append(Event.from_json(json.loads(line)))
        cancel = await asyncio.to_thread(cli, "runs", "cancel", events[0].run_id, cwd=tmp_path)
        assert cancel.returncode == 0, cancel.stderr
        _, rest = await proc.communicate()
    assert proc.returncode == 1
    events += [
        Event.from_json(json.loads(line)) for line in rest.decode().splitlines() if line.startswith("{")
    ]
    assert events[-1].type == "run.cancelled"
    return events[0].run_id, events


def test_runs_show_counts_calls_stopped_by_a_cancellation_as_cancelled(tmp_path: Path) -> None:
    run_id, _ = asyncio.run(cancelled_run(tmp_path))
    shown = cli("runs", "show", run_id, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"{run_id}  stopped  cancelled" in shown.stdout
    assert "0 completed, 0 replayed, 1 failed, 3 cancelled, 0 running, 0 queued" in shown.stdout
    doc = json.loads(cli("runs", "show", run_id, "--json", cwd=tmp_path).stdout)
    assert doc["counts"]["cancelled"] == 3 and doc["counts"]["failed"] == 1


def test_the_progress_view_counts_calls_stopped_by_a_cancellation_as_cancelled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id, _ = asyncio.run(cancelled_run(tmp_path))
    stored = cli("runs", "events", run_id, "--json", cwd=tmp_path)
    view = LiveRunView("stopped")
    view.start()
    for line in stored.stdout.splitlines():
        view.update(Event.from_json(json.loads(line)))
    view.stop()
    shown = capsys.readouterr().err
    assert "queued: 0  running: 0  done: 0  failed: 1  cancelled: 3  replayed: 0" in shown
    assert "run cancelled" in shown
