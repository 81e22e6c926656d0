"""The SIGKILL chaos round shared by the CI test and ``benchmarks/durability.py``.

A workflow of 64 agent calls runs through the real CLI; the process is killed with SIGKILL after a
random number of ``agent.completed`` events (read from its own JSONL event stream, so the kill
point is chosen without sleeping), then ``workflow-mcp resume`` continues the newest run — and may be
killed again — until a run completes. Every completed call must be replayed, never executed again.

With ``concurrent=True`` every resume is started twice at once, as two users (or a retrying script)
would: the first process to start the run is its owner, the other must be refused (exit 2, "already
being resumed by process …"). The owner is held (SIGSTOP) from its ``run.started`` until the other
has given up, so the refusal is certain rather than a matter of timing, then continues and may itself
be killed. After the round the database must pass ``PRAGMA integrity_check``.
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from workflow_mcp.store.sqlite import SqliteStore

CLI = str(Path(sys.executable).with_name("workflow-mcp"))
WAIT_S = 120

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
    kills_during_resume: int = 0
    completed_before_kills: int = 0
    provider_calls_total: int = 0
    distinct_calls: int = 0
    lost: int = 0
    ran_twice: int = 0
    concurrent_resumes: int = 0
    refused: int = 0
    both_ran: int = 0
    integrity: str = ""
    result_ok: bool = False
    runs: list[str] = field(default_factory=list)


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "WORKFLOW_MCP_HOME": str(home / "state"), "HOME": str(home / "home")}


class _Proc:
    """A CLI process whose stderr lines a thread forwards to a shared queue (``None`` at the end)."""

    def __init__(
        self, argv: list[str], cwd: Path, env: dict[str, str], lines: queue.Queue[tuple[_Proc, str | None]]
    ):
        self.popen = subprocess.Popen(
            [CLI, *argv], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.stderr: list[str] = []
        self.run_id: str | None = None
        self._lines = lines
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.popen.stderr is not None
        for line in self.popen.stderr:
            self.stderr.append(line)
            self._lines.put((self, line))
        self._lines.put((self, None))

    def finish(self) -> tuple[int, str]:
        assert self.popen.stdout is not None
        out = self.popen.stdout.read()
        code = self.popen.wait(timeout=WAIT_S)
        self._thread.join(timeout=WAIT_S)
        return code, out


def _launch(
    argv: list[str], cwd: Path, env: dict[str, str], kill_after: int | None, pair: bool, report: ChaosReport
) -> tuple[int, str, str, bool]:
    """Run the CLI (twice at once when ``pair``); SIGKILL the owner after ``kill_after``
    agent.completed events. Returns ``(exit code, stdout, run id, killed)`` of the owner."""
    lines: queue.Queue[tuple[_Proc, str | None]] = queue.Queue()
    procs = [_Proc(argv, cwd, env, lines) for _ in range(2 if pair else 1)]
    owner: _Proc | None = None
    ended: set[_Proc] = set()
    completed = 0
    killed = False
    deadline = time.monotonic() + WAIT_S
    while len(ended) < len(procs):
        proc, line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        if line is None:
            ended.add(proc)
            continue
        if not line.startswith("{") or killed:
            continue
        event = json.loads(line)
        if event["type"] == "run.started" and owner is None:
            owner, proc.run_id = proc, event["runId"]
            others = [p for p in procs if p is not proc]
            if others:
                # Hold the owner until every other resume has met its claim and given up.
                os.kill(proc.popen.pid, signal.SIGSTOP)
                try:
                    for other in others:
                        code, _ = other.finish()
                        ended.add(other)
                        text = "".join(other.stderr)
                        if code == 2 and "is already being resumed by process" in text:
                            report.refused += 1
                        else:
                            report.both_ran += 1
                finally:
                    os.kill(proc.popen.pid, signal.SIGCONT)
        elif event["type"] == "run.started" and proc is not owner:
            report.both_ran += 1  # a second process started the same resume: the bug this prevents
        elif event["type"] == "agent.completed" and proc is owner:
            completed += 1
            if kill_after is not None and completed >= kill_after:
                os.kill(proc.popen.pid, signal.SIGKILL)
                killed = True
    assert owner is not None and owner.run_id is not None, [("".join(p.stderr))[-2000:] for p in procs]
    code, out = owner.finish()
    for p in procs:
        if p is not owner and p.popen.returncode is None:
            p.finish()
    return (-9 if killed else code), out, owner.run_id, killed


def chaos_round(tmp: Path, rng: random.Random, kills: int = 2, *, concurrent: bool = False) -> ChaosReport:
    """One round: ``kills`` SIGKILLs at random points (the first during the first run, the others
    during resumes), then resume to completion; with ``concurrent`` every resume is started twice at
    once. Returns the tally."""
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
        pair = concurrent and attempt > 0
        report.concurrent_resumes += pair
        t0 = time.perf_counter()
        code, out, run_id, killed = _launch(argv, tmp, env, kill_after, pair, report)
        if killed:
            report.kill_times.append(time.perf_counter() - t0)
            report.kills_during_resume += attempt > 0
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
    db = sqlite3.connect(tmp / "state" / "state.db")
    try:
        report.integrity = "; ".join(str(r[0]) for r in db.execute("PRAGMA integrity_check").fetchall())
    finally:
        db.close()
    return report
