"""What ``runs show`` and ``runs watch`` say of a run that ended without completing: a run killed
mid-phase reads ``interrupted`` in its phases too (never still ``running``), and a paused run says
why it paused and which command continues it. Real ``workflow-mcp`` processes, a real SIGKILL, the
fake provider and a real ``cli`` provider program."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

CLI = str(Path(sys.executable).with_name("workflow-mcp"))
BOUND_S = 60

PHASED = """export const meta = { name: 'phased', description: 'two calls in one phase', phases: [{ title: 'Work' }] }
phase('Work')
await agent('first', { label: 'first' })
return await agent('second', { label: 'held' })
"""
HOLD = {
    "rules": [{"match": {"label": "held"}, "respond": {"text": "late", "delayMs": 600000}}],
    "default": {"echo": True},
}
ONE_CALL = """export const meta = { name: 'one-call', description: 'one agent call' }
return await agent('hello', { label: 'only' })
"""


def environment(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "WORKFLOW_MCP_HOME": str(tmp_path / "state"), "HOME": str(tmp_path / "home")}


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, *argv], cwd=cwd, env=environment(cwd), capture_output=True, text=True, timeout=BOUND_S
    )


def killed_mid_phase(tmp_path: Path) -> str:
    """Runs PHASED in a real ``workflow-mcp run``, SIGKILLs it once its second call is running,
    and returns the run id."""
    (tmp_path / "phased.js").write_text(PHASED)
    (tmp_path / "hold.json").write_text(json.dumps(HOLD))
    proc = subprocess.Popen(
        [CLI, "run", "phased.js", "--fake-script", "hold.json", "--events", "jsonl"],
        cwd=tmp_path,
        env=environment(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    try:
        for line in proc.stderr:  # ends when the process does: bounded by the run's own end
            event = json.loads(line) if line.startswith("{") else {}
            if event.get("type") == "agent.started" and event["payload"]["label"] == "held":
                return str(event["runId"])
        raise AssertionError("the run ended before its second call started")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=BOUND_S)


def test_a_run_killed_mid_phase_shows_that_phase_interrupted_and_the_command_that_resumes_it(
    tmp_path: Path,
) -> None:
    run_id = killed_mid_phase(tmp_path)

    shown = cli("runs", "show", run_id, cwd=tmp_path)
    watched = cli("runs", "watch", run_id, cwd=tmp_path)
    as_json = json.loads(cli("runs", "show", run_id, "--json", cwd=tmp_path).stdout)

    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == f"{run_id}  phased  interrupted"
    assert "  phase Work: interrupted" in shown.stdout.splitlines()
    assert f"  interrupted: its process died; resume it with: workflow-mcp resume {run_id}" in shown.stdout
    assert as_json["phases"] == [{"title": "Work", "status": "interrupted"}]
    assert watched.returncode == 1
    row = next(line for line in watched.stdout.splitlines() if line.strip().startswith("Work"))
    assert row.split()[:2] == ["Work", "interrupted"]
    assert watched.stdout.endswith(f"resume it with: workflow-mcp resume {run_id}\n")  # a whole last line


def test_runs_show_says_a_run_paused_for_a_usage_limit_when_it_resets_and_how_to_resume_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "one.js").write_text(ONE_CALL)
    script = {
        "rules": [
            {
                "match": {"label": "only"},
                "respond": {
                    "fail": "usage_limit",
                    "resetsAt": "2099-01-01T05:00:00Z",
                    "message": "5-hour limit",
                },
            }
        ]
    }
    (tmp_path / "limit.json").write_text(json.dumps(script))
    ran = cli("run", "one.js", "--fake-script", "limit.json", "--events", "none", cwd=tmp_path)
    assert ran.returncode == 1, ran.stderr
    run_id = json.loads(cli("runs", "list", "--json", cwd=tmp_path).stdout)["runs"][0]["runId"]

    shown = cli("runs", "show", run_id, cwd=tmp_path)

    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[-2:] == [
        "  paused: usage_limit, resets at 2099-01-01T05:00:00Z",
        f"  resume it with: workflow-mcp resume {run_id} (--wait: once the limit resets)",
    ]


def test_runs_show_says_a_run_paused_for_a_login_and_to_log_in_before_resuming(tmp_path: Path) -> None:
    agent = tmp_path / "agent.sh"
    agent.write_text("#!/bin/sh\necho '401 not logged in' >&2\nexit 1\n")
    agent.chmod(0o755)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "config.toml").write_text(f'[providers.mine]\nuse = "cli"\ncommand = ["{agent}"]\n')
    (tmp_path / "one.js").write_text(ONE_CALL)
    ran = cli("run", "one.js", "--provider", "mine", "--events", "none", cwd=tmp_path)
    assert ran.returncode == 1 and "paused" in ran.stderr, ran.stderr
    run_id = json.loads(cli("runs", "list", "--json", cwd=tmp_path).stdout)["runs"][0]["runId"]

    shown = cli("runs", "show", run_id, cwd=tmp_path)

    assert shown.stdout.splitlines()[-2:] == [
        "  paused: auth_required: the provider needs a login",
        f"  log in, then resume it with: workflow-mcp resume {run_id}",
    ]
