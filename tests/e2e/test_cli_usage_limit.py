"""A usage limit the fake provider simulates, as the command line shows it: ``run`` stops with the run
paused and when the limit resets, and ``resume --wait`` waits for that reset and completes the run,
replaying the call that finished before the pause."""

from __future__ import annotations

import datetime
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

CLI = str(Path(sys.executable).with_name("workflow-mcp"))
BOUND_S = 60
TWO_CALLS = (
    "export const meta = { name: 'two-calls', description: 'a then b' }\n"
    "const a = await agent('first', { label: 'a' })\n"
    "const b = await agent('second', { label: 'b' })\n"
    "return [a, b]\n"
)
RESET_IN_S = 8  # the real wait `resume --wait` makes (a margin for a slow `run` start)


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKFLOW_MCP_HOME": str(cwd / "state"), "HOME": str(cwd / "home")}
    return subprocess.run([CLI, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=BOUND_S)


def test_run_pauses_for_the_usage_limit_and_resume_wait_completes_it_after_the_reset(tmp_path: Path) -> None:
    reset = math.ceil(time.time()) + RESET_IN_S
    stamp = datetime.datetime.fromtimestamp(reset, tz=datetime.UTC).isoformat().replace("+00:00", "Z")
    (tmp_path / "two.js").write_text(TWO_CALLS)
    (tmp_path / "limit.json").write_text(
        json.dumps(
            {
                "rules": [{"match": {"label": "b"}, "respond": {"fail": "usage_limit", "resetsAt": stamp}}],
                "default": {"echo": True},
            }
        )
    )
    first = cli("run", "two.js", "--fake-script", "limit.json", cwd=tmp_path)
    assert first.returncode == 1 and first.stdout == "", first.stderr
    assert f"fake reached its usage limit (it resets at {stamp})" in first.stderr
    run_id = first.stderr.split("workflow-mcp resume ")[-1].split()[0]
    shown = json.loads(cli("runs", "show", run_id, "--json", cwd=tmp_path).stdout)
    assert (shown["status"], shown["pausedReason"], shown["resetsAt"]) == ("paused", "usage_limit", stamp)

    second = cli("resume", run_id, "--wait", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert time.time() >= reset and json.loads(second.stdout) == ["first", "second"]
    assert f"run {run_id} paused for a usage limit; waiting" in second.stderr


def test_a_paused_run_cancelled_with_runs_cancel_is_never_resumed_and_resume_says_why(tmp_path: Path) -> None:
    (tmp_path / "two.js").write_text(TWO_CALLS)
    (tmp_path / "limit.json").write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "match": {"label": "b"},
                        "respond": {"fail": "usage_limit", "resetsAt": "2999-01-01T00:00:00Z"},
                    }
                ],
                "default": {"echo": True},
            }
        )
    )
    first = cli("run", "two.js", "--fake-script", "limit.json", cwd=tmp_path)
    assert first.returncode == 1, first.stderr
    run_id = first.stderr.split("workflow-mcp resume ")[-1].split()[0]

    cancel = cli("runs", "cancel", run_id, "--reason", "not worth the wait", cwd=tmp_path)
    assert cancel.returncode == 0, cancel.stderr
    assert (
        cancel.stdout == f"{run_id}: cancelled; it had ended paused or interrupted and will not be resumed\n"
    )
    assert json.loads(cli("runs", "show", run_id, "--json", cwd=tmp_path).stdout)["status"] == "cancelled"

    again = cli("runs", "cancel", run_id, cwd=tmp_path)
    assert again.returncode == 1 and f"{run_id}: already cancelled; nothing to cancel" in again.stdout

    resumed = cli("resume", run_id, "--wait", cwd=tmp_path)
    assert resumed.returncode == 2 and resumed.stdout == ""
    assert (
        f"run {run_id} was cancelled while paused (not worth the wait), so it is not resumed"
        in resumed.stderr
    )
    assert "Traceback" not in resumed.stderr


def test_runs_cancel_of_a_paused_run_that_was_resumed_names_the_run_to_cancel(tmp_path: Path) -> None:
    (tmp_path / "two.js").write_text(TWO_CALLS)
    limit = {"fail": "usage_limit", "resetsAt": "2999-01-01T00:00:00Z"}
    (tmp_path / "limit.json").write_text(
        json.dumps({"rules": [{"match": {"label": "b"}, "respond": limit}], "default": {"echo": True}})
    )
    first = cli("run", "two.js", "--fake-script", "limit.json", cwd=tmp_path)
    run_id = first.stderr.split("workflow-mcp resume ")[-1].split()[0]
    second = cli("resume", run_id, cwd=tmp_path)  # the limit still holds: the continuation pauses too
    assert second.returncode == 1, second.stderr
    next_id = second.stderr.split("workflow-mcp resume ")[-1].split()[0]
    assert next_id != run_id

    refused = cli("runs", "cancel", run_id, cwd=tmp_path)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr == (
        f"workflow-mcp: run {run_id} was not cancelled: it was resumed as run {next_id}, which carries on its "
        f"work; cancel that run instead (`workflow-mcp runs cancel {next_id}`)\n"
    )
    assert cli("runs", "cancel", next_id, cwd=tmp_path).returncode == 0
    assert json.loads(cli("runs", "show", next_id, "--json", cwd=tmp_path).stdout)["status"] == "cancelled"
    assert json.loads(cli("runs", "show", run_id, "--json", cwd=tmp_path).stdout)["status"] == "paused"
