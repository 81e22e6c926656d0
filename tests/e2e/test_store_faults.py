"""The command line when the store is contended or failing: concurrent resumes of one run,
concurrent queries after SIGKILLed runs, a full disk, the file-size limit, a read-only database and
damaged pages. Real CLI processes, real kernel faults; every wait is bounded."""

from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from store_faults import (
    damage_event_pages,
    file_size_limit,
    fill_disk,
    immutable,
    read_only_mount,
    runs_of_a_killed_owner,
    tiny_tmpfs,
)

CLI = str(Path(sys.executable).with_name("workflow-mcp"))
CLAUDE_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude"
WAIT_S = 90

SLOW = """export const meta = { name: 'slow', description: 'six agent calls, one at a time' }
const out = []
for (let i = 0; i < 6; i++) out.push(await agent('step ' + i, { label: 's' + i }))
return out
"""
BIG = """export const meta = { name: 'big', description: 'agent results of 50 KB each' }
const out = []
for (let i = 0; i < 40; i++) out.push((await agent('p'.repeat(50000) + i)).length)
return out
"""
SMALL = "export const meta = { name: 'small', description: 'one call' }\nreturn await agent('hi')\n"


def env_for(home: Path, tmp: Path) -> dict[str, str]:
    return {**os.environ, "WORKFLOW_MCP_HOME": str(home), "HOME": str(tmp / "home")}


def cli(
    *argv: str, home: Path, tmp: Path, preexec: Callable[[], object] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, *argv],
        cwd=tmp,
        env=env_for(home, tmp),
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        preexec_fn=preexec,
        check=False,
    )


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def fake(tmp: Path, delay_ms: int) -> Path:
    return write(tmp / "fake.json", json.dumps({"default": {"text": "{prompt}", "delayMs": delay_ms}}))


class Proc:
    """A CLI process whose stderr JSONL events are read by a thread into a queue."""

    def __init__(self, argv: list[str], home: Path, tmp: Path) -> None:
        self.popen = subprocess.Popen(
            [CLI, *argv],
            cwd=tmp,
            env=env_for(home, tmp),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[tuple[Proc, str | None]] = queue.Queue()
        self.stderr: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stderr is not None
        for line in self.popen.stderr:
            self.stderr.append(line)
            self.lines.put((self, line))
        self.lines.put((self, None))

    def wait(self) -> int:
        code = self.popen.wait(timeout=WAIT_S)
        self._reader.join(timeout=WAIT_S)
        return code

    def text(self) -> str:
        return "".join(self.stderr)


def run_killed_after(argv: list[str], home: Path, tmp: Path, completed: int) -> str:
    """Start a run, SIGKILL it after ``completed`` agent.completed events; returns its run id."""
    proc = Proc(argv, home, tmp)
    run_id, seen = "", 0
    while True:
        _, line = proc.lines.get(timeout=WAIT_S)
        assert line is not None, proc.text()
        event = json.loads(line)
        run_id = run_id or event["runId"]
        seen += event["type"] == "agent.completed"
        if seen >= completed:
            proc.popen.kill()
            proc.wait()
            return run_id


def stored_events(db: Path) -> list[dict[str, Any]]:
    raw = sqlite3.connect(db)
    try:
        return [json.loads(b) for (b,) in raw.execute("SELECT body FROM events ORDER BY run_id, sequence")]
    finally:
        raw.close()


def executions(db: Path) -> Counter[str]:
    """How many times each call (by content key) ran to completion on the provider, in every run."""
    events = stored_events(db)
    keys = {
        (e["runId"], e["agentId"]): e["payload"]["contentKey"] for e in events if e["type"] == "agent.queued"
    }
    return Counter(keys[(e["runId"], e["agentId"])] for e in events if e["type"] == "agent.completed")


def digest(db: Path) -> str:
    parts = [Path(f"{db}{s}") for s in ("", "-wal")]
    return hashlib.sha256(b"".join(p.read_bytes() for p in parts if p.exists())).hexdigest()


def first_to_start(procs: list[Proc]) -> tuple[Proc, Proc]:
    """``(the process whose run.started came first, the other one)`` of two, within ``WAIT_S``."""
    deadline = time.monotonic() + WAIT_S
    ended: set[Proc] = set()
    while len(ended) < len(procs) and time.monotonic() < deadline:
        for p in procs:
            try:
                proc, line = p.lines.get(timeout=0.05)
            except queue.Empty:
                continue
            if line is None:
                ended.add(proc)
            elif line.startswith("{") and json.loads(line)["type"] == "run.started":
                (other,) = [q for q in procs if q is not proc]
                return proc, other
    raise AssertionError(f"no run started: {[p.text() for p in procs]}")


# -- one owner per run -------------------------------------------------------------------------


def test_two_concurrent_resumes_run_once_and_every_call_executes_exactly_once(tmp_path: Path) -> None:
    home = tmp_path / "state"
    wf = write(tmp_path / "slow.js", SLOW)
    base = ["--provider", "fake", "--fake-script", str(fake(tmp_path, 400)), "--events", "jsonl"]
    first = run_killed_after(["run", str(wf), *base], home, tmp_path, completed=2)
    both = [Proc(["resume", first, *base], home, tmp_path) for _ in range(2)]
    winner, loser = first_to_start(both)
    # Hold the owner (idle inside a 400 ms agent call) so the other one certainly meets its claim.
    os.kill(winner.popen.pid, signal.SIGSTOP)
    try:
        assert loser.wait() == 2, loser.text()
    finally:
        os.kill(winner.popen.pid, signal.SIGCONT)
    assert f"run {first} is already being resumed by process {winner.popen.pid}" in loser.text()
    assert "(since " in loser.text() and "Traceback" not in loser.text()
    assert winner.wait() == 0, winner.text()
    assert json.loads(winner.popen.stdout.read()) == [f"step {i}" for i in range(6)]  # type: ignore[union-attr]
    ran = executions(home / "state.db")
    assert len(ran) == 6 and set(ran.values()) == {1}, ran


def test_concurrent_queries_after_sigkilled_runs_all_succeed_and_record_each_interruption_once(
    tmp_path: Path,
) -> None:
    home = tmp_path / "state"
    wf = write(tmp_path / "slow.js", SLOW)
    base = ["--provider", "fake", "--fake-script", str(fake(tmp_path, 50)), "--events", "jsonl"]
    killed = [run_killed_after(["run", str(wf), *base], home, tmp_path, completed=1)]
    killed += runs_of_a_killed_owner(home / "state.db", 200)  # recovering them takes a while on main
    queries = [
        ["runs", "list", "--json"],
        ["runs", "list"],
        ["runs", "show", killed[0]],
        ["runs", "show", killed[1]],
    ]
    procs = [
        subprocess.Popen(
            [CLI, *q],
            cwd=tmp_path,
            env=env_for(home, tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for q in queries
    ]
    outcomes = [(p.wait(timeout=WAIT_S), p.communicate(timeout=WAIT_S)[1]) for p in procs]
    assert [code for code, _ in outcomes] == [0, 0, 0, 0], outcomes
    interrupted = Counter(
        e["runId"] for e in stored_events(home / "state.db") if e["type"] == "run.interrupted"
    )
    assert interrupted == {run_id: 1 for run_id in killed}


def test_two_concurrent_resumes_of_one_claude_run_run_its_new_calls_once(tmp_path: Path) -> None:
    session = tmp_path / "session"
    shutil.copytree(CLAUDE_FIXTURES / "plain" / "session", session)
    (record_path,) = (session / "workflows").glob("wf_*.json")
    source = (CLAUDE_FIXTURES / "plain" / "workflow.js").read_text()
    live = write(
        tmp_path / "live.js",
        source.replace(
            "return { facts, summary, review }",
            "const extra = await agent('one more: ' + review, { label: 'extra' })\n"
            "return { facts, summary, review, extra }",
        ),
    )
    home = tmp_path / "state"
    argv = ["resume", str(record_path), str(live), "--allow-edits", "--provider", "fake"]
    argv += ["--fake-script", str(fake(tmp_path, 400)), "--events", "jsonl"]
    winner, loser = first_to_start([Proc(argv, home, tmp_path) for _ in range(2)])
    os.kill(winner.popen.pid, signal.SIGSTOP)  # hold the owner so the other one meets its claim
    try:
        assert loser.wait() == 2, loser.text()
    finally:
        os.kill(winner.popen.pid, signal.SIGCONT)
    assert f"is already being resumed by process {winner.popen.pid}" in loser.text()
    assert winner.wait() == 0, winner.text()
    events = stored_events(home / "state.db")
    assert len({e["runId"] for e in events}) == 1  # the refused resume recorded nothing
    live_calls = [e for e in events if e["type"] == "agent.completed"]
    assert [e["payload"]["label"] for e in live_calls] == ["extra"]  # the new call ran once


# -- a full disk, the file-size limit ------------------------------------------------------------


def test_a_full_disk_fails_the_run_saying_so_and_the_store_stays_readable_and_resumable(
    tmp_path: Path,
) -> None:
    with tiny_tmpfs(tmp_path / "state", "8m") as home:
        assert (
            cli(
                "run", str(write(tmp_path / "small.js", SMALL)), "--provider", "fake", home=home, tmp=tmp_path
            ).returncode
            == 0
        )
        filler = fill_disk(home, leave=400 * 1024)
        p = cli(
            "run",
            str(write(tmp_path / "big.js", BIG)),
            "--provider",
            "fake",
            "--events",
            "jsonl",
            home=home,
            tmp=tmp_path,
        )
        assert p.returncode == 1, p.stderr
        assert f"bytes free at {home})" in p.stderr and "the disk is full (" in p.stderr
        assert "cannot rollback" not in p.stderr and "internal error" not in p.stderr
        run_id = json.loads(p.stderr.splitlines()[0])["runId"]
        listed = cli("runs", "list", "--json", home=home, tmp=tmp_path)
        assert listed.returncode == 0, listed.stderr
        assert run_id in listed.stdout
        filler.unlink()  # space is back
        # The run's end is on record: ``failed`` (with the cause) when that last event still fit,
        # ``interrupted`` (recovered now) when it did not.
        shown = json.loads(cli("runs", "show", run_id, "--json", home=home, tmp=tmp_path).stdout)
        assert shown["status"] in ("failed", "interrupted")
        if shown["status"] == "failed":
            assert "the disk is full (" in shown["error"]["message"]
        resumed = cli("resume", run_id, "--events", "none", home=home, tmp=tmp_path)
        assert resumed.returncode == 0, resumed.stderr
        assert json.loads(resumed.stdout) == [50000 + len(str(i)) for i in range(40)]


def test_approving_on_a_full_disk_exits_1_naming_the_file_and_the_earlier_approvals_stay(
    tmp_path: Path,
) -> None:
    with tiny_tmpfs(tmp_path / "state", "64k") as home:
        kept, new = write(tmp_path / "kept.js", SMALL), write(tmp_path / "new.js", SLOW)
        assert cli("approvals", "add", str(kept), home=home, tmp=tmp_path).returncode == 0
        filler = fill_disk(home)
        p = cli("approvals", "add", str(new), home=home, tmp=tmp_path)
        assert p.returncode == 1, p.stderr
        assert f"the source approvals file {home / 'approvals.json'} could not be written" in p.stderr
        assert "[ENOSPC]" in p.stderr and "internal error" not in p.stderr and "Traceback" not in p.stderr
        filler.unlink()
        listed = json.loads(cli("approvals", "list", "--json", home=home, tmp=tmp_path).stdout)
        assert [a["name"] for a in listed["approvals"]] == ["small"]


def test_a_result_that_cannot_be_written_to_a_full_stdout_names_the_stored_run(tmp_path: Path) -> None:
    home = tmp_path / "state"
    with open("/dev/full", "w") as full:
        p = subprocess.run(
            [CLI, "run", str(write(tmp_path / "small.js", SMALL)), "--provider", "fake", "--events", "none"],
            cwd=tmp_path, env=env_for(home, tmp_path), stdout=full, stderr=subprocess.PIPE, text=True,
            timeout=WAIT_S, check=False,
        )  # fmt: skip
    assert p.returncode == 1, p.stderr
    assert "internal error" not in p.stderr and "Traceback" not in p.stderr
    assert "could not be written to standard output: ENOSPC" in p.stderr
    run_id = p.stderr.split("run ", 1)[1].split()[0]
    shown = json.loads(cli("runs", "show", run_id, "--json", home=home, tmp=tmp_path).stdout)
    assert shown["status"] == "completed" and shown["result"] == "hi"
    with open("/dev/full", "w") as full:
        listed = subprocess.run(
            [CLI, "runs", "list"], cwd=tmp_path, env=env_for(home, tmp_path), stdout=full,
            stderr=subprocess.PIPE, text=True, timeout=WAIT_S, check=False,
        )  # fmt: skip
    assert listed.returncode == 1 and "internal error" not in listed.stderr
    assert "standard output" in listed.stderr and "ENOSPC" in listed.stderr


def test_an_export_to_a_full_disk_says_so_and_leaves_the_earlier_file_as_it_was(tmp_path: Path) -> None:
    home = tmp_path / "state"
    assert (
        cli(
            "run", str(write(tmp_path / "big.js", BIG)), "--provider", "fake", home=home, tmp=tmp_path
        ).returncode
        == 0
    )
    with tiny_tmpfs(tmp_path / "out", "256k") as out:
        earlier = write(out / "runs.jsonl", "an earlier export\n")
        exported = cli("runs", "export", "--out", str(earlier), home=home, tmp=tmp_path)
        assert exported.returncode == 1, exported.stderr
        assert f"cannot write --out {str(earlier)!r}" in exported.stderr and "ENOSPC" in exported.stderr
        assert "internal error" not in exported.stderr and "Traceback" not in exported.stderr
        assert earlier.read_text() == "an earlier export\n"
        assert [p.name for p in out.iterdir()] == ["runs.jsonl"]  # no partial file left beside it


def test_the_file_size_limit_fails_the_run_saying_so_and_the_store_stays_readable(tmp_path: Path) -> None:
    home = tmp_path / "state"
    assert (
        cli(
            "run", str(write(tmp_path / "small.js", SMALL)), "--provider", "fake", home=home, tmp=tmp_path
        ).returncode
        == 0
    )
    limit = (home / "state.db").stat().st_size + 512 * 1024
    big = write(tmp_path / "big.js", BIG)
    p = cli(
        "run",
        str(big),
        "--provider",
        "fake",
        "--events",
        "jsonl",
        home=home,
        tmp=tmp_path,
        preexec=file_size_limit(limit),
    )
    assert p.returncode == 1, p.stderr
    assert f"the file-size limit was reached ({limit:,} bytes, `ulimit -f`)" in p.stderr
    assert "internal error" not in p.stderr
    run_id = json.loads(p.stderr.splitlines()[0])["runId"]
    shown = cli("runs", "show", run_id, "--json", home=home, tmp=tmp_path)
    # Whether the run's own `run.failed` still fits under the limit depends on where the limit was
    # crossed: stored, the run is `failed` with the limit as its error; not stored, the next reader
    # records it `interrupted`. Either way it is resumable and the resume completes.
    assert shown.returncode == 0, shown.stderr
    state = json.loads(shown.stdout)
    assert state["status"] in ("failed", "interrupted")
    if state["status"] == "failed":
        assert "file-size limit" in json.dumps(state["error"])
    assert cli("resume", run_id, "--events", "none", home=home, tmp=tmp_path).returncode == 0


# -- a read-only database ----------------------------------------------------------------------


def test_an_immutable_database_lists_and_shows_runs_and_run_says_why_it_cannot(tmp_path: Path) -> None:
    home = tmp_path / "state"
    small = write(tmp_path / "small.js", SMALL)
    done = cli("run", str(small), "--provider", "fake", "--events", "jsonl", home=home, tmp=tmp_path)
    run_id = json.loads(done.stderr.splitlines()[0])["runId"]
    with immutable(home / "state.db"):
        listed = cli("runs", "list", "--json", home=home, tmp=tmp_path)
        assert listed.returncode == 0, listed.stderr
        assert [r["runId"] for r in json.loads(listed.stdout)["runs"]] == [run_id]
        assert cli("runs", "show", run_id, home=home, tmp=tmp_path).returncode == 0
        refused = cli("run", str(small), "--provider", "fake", home=home, tmp=tmp_path)
        assert refused.returncode == 2
        assert f"the state database {home / 'state.db'} is read-only" in refused.stderr
        assert "internal error" not in refused.stderr


def test_a_read_only_mount_lists_runs_and_run_says_why_it_cannot(tmp_path: Path) -> None:
    home = tmp_path / "state"
    small = write(tmp_path / "small.js", SMALL)
    assert cli("run", str(small), "--provider", "fake", home=home, tmp=tmp_path).returncode == 0
    with read_only_mount(home, tmp_path / "ro") as ro:
        listed = cli("runs", "list", "--json", home=ro, tmp=tmp_path)
        assert listed.returncode == 0 and len(json.loads(listed.stdout)["runs"]) == 1, listed.stderr
        refused = cli("run", str(small), "--provider", "fake", home=ro, tmp=tmp_path)
        assert refused.returncode == 2 and f"{ro / 'state.db'} is read-only" in refused.stderr


# -- damaged pages -----------------------------------------------------------------------------


def test_a_damaged_page_is_detected_nothing_more_is_written_and_export_and_repair_recover(
    tmp_path: Path,
) -> None:
    home = tmp_path / "state"
    many = write(
        tmp_path / "many.js",
        "export const meta = { name: 'many', description: '60 calls' }\n"
        "return (await parallel(Array.from({ length: 60 }, (_, i) => () => agent('q'.repeat(2000) + i)))).length\n",
    )
    small = write(tmp_path / "small.js", SMALL)
    first = cli("run", str(many), "--provider", "fake", "--events", "jsonl", home=home, tmp=tmp_path)
    damaged_run = json.loads(first.stderr.splitlines()[0])["runId"]
    second = cli("run", str(small), "--provider", "fake", "--events", "jsonl", home=home, tmp=tmp_path)
    intact_run = json.loads(second.stderr.splitlines()[0])["runId"]
    db = home / "state.db"
    damage_event_pages(db, share=0.5)

    shown = cli("runs", "show", damaged_run, home=home, tmp=tmp_path)
    assert shown.returncode == 1
    assert f"the state database {db} is damaged" in shown.stderr and "internal error" not in shown.stderr
    assert "workflow-mcp runs export" in shown.stderr and "workflow-mcp store repair" in shown.stderr

    before = digest(db)
    refused = cli("run", str(small), "--provider", "fake", home=home, tmp=tmp_path)
    assert refused.returncode == 2 and "is damaged" in refused.stderr
    assert digest(db) == before  # nothing more was written

    out = tmp_path / "runs.jsonl"
    exported = cli("runs", "export", "--out", str(out), home=home, tmp=tmp_path)
    assert exported.returncode == 1 and "problem(s)" in exported.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    intact = [x for x in lines if x["kind"] == "event" and x["event"]["runId"] == intact_run]
    assert [e["event"]["type"] for e in intact][-1] == "run.completed"
    assert any(x["kind"] == "problem" and x["runId"] == damaged_run for x in lines)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600

    repaired = cli("store", "repair", home=home, tmp=tmp_path)
    assert repaired.returncode == 0, repaired.stderr
    backups = list(home.glob("state.db.bak-*"))
    assert [
        b.name for b in backups if not b.name.endswith("-wal")
    ] and f"the original is at {home}" in repaired.stdout
    assert cli("store", "check", home=home, tmp=tmp_path).returncode == 0
    assert cli("runs", "show", intact_run, home=home, tmp=tmp_path).returncode == 0
    assert cli("run", str(small), "--provider", "fake", home=home, tmp=tmp_path).returncode == 0


def test_the_state_home_is_0700_and_the_database_0600_under_a_permissive_umask(tmp_path: Path) -> None:
    home = tmp_path / "new" / "state"
    small = write(tmp_path / "small.js", SMALL)
    done = cli(
        "run", str(small), "--provider", "fake", home=home, tmp=tmp_path, preexec=lambda: os.umask(0) and None
    )
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "state.db").stat().st_mode) == 0o600


def test_an_export_over_an_existing_file_makes_it_0600(tmp_path: Path) -> None:
    home = tmp_path / "state"
    assert (
        cli(
            "run", str(write(tmp_path / "small.js", SMALL)), "--provider", "fake", home=home, tmp=tmp_path
        ).returncode
        == 0
    )
    out = write(tmp_path / "runs.jsonl", "old\n")
    out.chmod(0o644)
    exported = cli("runs", "export", "--out", str(out), home=home, tmp=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    kinds = [json.loads(line)["kind"] for line in out.read_text().splitlines()]
    assert kinds[0] == "run" and "problem" not in kinds
