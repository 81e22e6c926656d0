"""The SIGKILL chaos round shared by the CI test and ``benchmarks/durability.py``.

A workflow of 64 agent calls runs through the real CLI; the process is killed with SIGKILL after a
random number of ``agent.completed`` events (read from its own JSONL event stream, so the kill
point is chosen without sleeping), then ``workflow-mcp resume`` continues the newest run — and may be
killed again — until a run completes. Every completed call must be replayed, never executed again.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from workflow_mcp.store.sqlite import SqliteStore

CLI = str(Path(sys.executable).with_name("workflow-mcp"))

WORKFLOW = """export const meta = { name: 'chaos', description: '64 agent calls, killed at random points' }
const first = await parallel(Array.from({ length: 48 }, (_, i) => () => agent('task ' + i, { label: 't' + i })))
const rest = await pipeline(Array.from({ length: 8 }, (_, i) => i),
  (i) => agent('stage one ' + i, { label: 's1:' + i }),
  (prev, i) => agent('stage two ' + prev, { label: 's2:' + i }))
return { first, rest }
"""
FAKE = {"default": {"text": "{prompt}!", "delayMs": 15, "tokens": {"input": 3, "output": 2}}}
EXPECTED = {
    "first": [f"task {i}!" for i in range(48)],
    "rest": [f"stage two stage one {i}!!" for i in range(8)],
}
TOTAL_CALLS = 64


@dataclass
class ChaosReport:
    kill_times: list[float] = field(default_factory=list)
    completed_before_kills: int = 0
    provider_calls_total: int = 0
    distinct_calls: int = 0
    lost: int = 0
    ran_twice: int = 0
    result_ok: bool = False
    runs: list[str] = field(default_factory=list)


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "WORKFLOW_MCP_HOME": str(home / "state"), "HOME": str(home / "home")}


def _run_until(
    argv: list[str], cwd: Path, env: dict[str, str], kill_after: int | None
) -> tuple[int, str, list[dict]]:
    """Run the CLI; SIGKILL it after ``kill_after`` agent.completed events (None: let it finish)."""
    proc = subprocess.Popen(
        [CLI, *argv], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None and proc.stdout is not None
    events: list[dict] = []
    completed = 0
    killed = False
    for line in proc.stderr:
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        events.append(event)
        if event["type"] == "agent.completed":
            completed += 1
            if kill_after is not None and completed >= kill_after:
                os.kill(proc.pid, signal.SIGKILL)
                killed = True
                break
    out = proc.stdout.read()
    proc.wait(timeout=60)
    return (-9 if killed else proc.returncode), out, events


def chaos_round(tmp: Path, rng: random.Random, kills: int = 2) -> ChaosReport:
    """One round: ``kills`` SIGKILLs at random points, then resume to completion; returns the tally."""
    report = ChaosReport()
    (tmp / "home").mkdir(parents=True, exist_ok=True)
    wf = tmp / "chaos.js"
    wf.write_text(WORKFLOW)
    fake = tmp / "fake.json"
    fake.write_text(json.dumps(FAKE))
    env = _env(tmp)
    base = ["--provider", "fake", "--fake-script", str(fake), "--events", "jsonl"]
    argv = ["run", str(wf), "--concurrency", "4", *base]
    completed_keys: dict[str, int] = {}  # contentKey -> times executed to completion, all runs
    done_before: set[str] = set()  # calls completed by runs that were then killed
    final_live: set[str] = set()  # calls the completing run executed live
    started = 0
    code, out = 1, ""
    for attempt in range(kills + 6):
        remaining = TOTAL_CALLS - len(done_before)
        kill_after = rng.randint(1, remaining - 2) if attempt < kills and remaining > 3 else None
        t0 = time.perf_counter()
        code, out, events = _run_until(argv, tmp, env, kill_after)
        if kill_after is not None:
            report.kill_times.append(time.perf_counter() - t0)
        run_id = next(e["runId"] for e in events if e["type"] == "run.started")
        report.runs.append(run_id)
        # Count from the store, the source of truth: a killed process may have committed events it
        # never got to print.
        store = SqliteStore(tmp / "state" / "state.db")
        stored = [e.to_json() for e in store.events(run_id)]
        store.close()
        queued = {e["agentId"]: e["payload"]["contentKey"] for e in stored if e["type"] == "agent.queued"}
        this_run: set[str] = set()
        live: set[str] = set()
        for e in stored:
            if e["type"] == "agent.started":
                started += 1
                live.add(queued[e["agentId"]])
            elif e["type"] == "agent.completed":
                key = queued[e["agentId"]]
                completed_keys[key] = completed_keys.get(key, 0) + 1
                this_run.add(key)
        if code == 0:
            final_live = live
            break
        report.completed_before_kills += len(this_run)
        done_before |= this_run
        argv = ["resume", run_id, *base]
    report.provider_calls_total = started
    report.distinct_calls = len(completed_keys)
    report.ran_twice = sum(1 for n in completed_keys.values() if n > 1)
    report.lost = len(done_before & final_live)
    report.result_ok = code == 0 and json.loads(out) == EXPECTED and len(completed_keys) == TOTAL_CALLS
    return report
