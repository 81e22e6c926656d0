"""One executor per run: claims taken with the run, released by its terminal event, recoverable when
the owner dies (pid reuse and other hosts included); recovery that records each run once however many
processes run it; and appends that refuse a second writer instead of interleaving."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from workflow_mcp.errors import ClaimLostError, RunClaimedError, SequenceConflictError
from workflow_mcp.events import Event
from workflow_mcp.store import LEASE_TTL_S, MemoryStore, RunRecord, SqliteStore
from workflow_mcp.store.base import RunStore
from workflow_mcp.store.sqlite import migrations

from store_faults import runs_of_a_killed_owner
from store_kinds import made_store


def record(run_id: str, **fields: object) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        workflow_name="wf",
        source_hash="h",
        source="export const meta = {}",
        created_at=f"2026-11-30T10:00:00.{len(run_id):03d}Z",
        **fields,  # type: ignore[arg-type]
    )


def ev(run_id: str, seq: int, type: str) -> Event:
    return Event(run_id=run_id, sequence=seq, type=type, timestamp="2026-11-30T10:00:00.000Z")


def interrupted(rec: RunRecord, sequence: int, reason: str) -> Event:
    return Event(run_id=rec.run_id, sequence=sequence, type="run.interrupted", payload={"reason": reason})


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    made: RunStore = made_store(request, tmp_path)
    yield made
    made.close()


def finished_run(store: RunStore, run_id: str) -> None:
    store.create_run(record(run_id))
    store.append_many([ev(run_id, 1, "run.started"), ev(run_id, 2, "run.interrupted")])


def test_a_second_resume_of_a_run_being_resumed_is_refused_naming_the_process_and_the_resuming_run(
    store: RunStore,
) -> None:
    finished_run(store, "run_a")
    store.create_run(record("run_b", resumed_from="run_a"))
    with pytest.raises(RunClaimedError) as caught:
        store.create_run(record("run_c", resumed_from="run_a"))
    refused = caught.value
    assert (refused.run_id, refused.holder_run, refused.pid) == ("run_a", "run_b", os.getpid())
    assert refused.host == socket.gethostname() and refused.since
    assert f"run run_a is already being resumed by process {os.getpid()}" in str(refused)
    assert store.get_run("run_c") is None  # refused as a whole: no run was recorded


def test_resuming_a_run_that_is_still_running_is_refused(store: RunStore) -> None:
    store.create_run(record("run_a"))
    store.append(ev("run_a", 1, "run.started"))
    with pytest.raises(RunClaimedError, match="run run_a is still running in process"):
        store.create_run(record("run_b", resumed_from="run_a"))


def test_the_holders_terminal_event_releases_both_claims(store: RunStore) -> None:
    finished_run(store, "run_a")
    store.create_run(record("run_b", resumed_from="run_a"))
    store.append_many([ev("run_b", 1, "run.started"), ev("run_b", 2, "run.completed")])
    store.create_run(record("run_c", resumed_from="run_a"))  # run_a is free again
    store.create_run(record("run_d", resumed_from="run_b"))  # and so is run_b


def test_a_second_resume_of_an_origin_outside_the_store_is_refused_until_the_first_ends(
    store: RunStore,
) -> None:
    # An imported Claude Code run has no row here: the claim is the resuming run's own.
    store.create_run(record("run_a", resumed_from="claude:wf_1"))
    with pytest.raises(RunClaimedError) as caught:
        store.create_run(record("run_b", resumed_from="claude:wf_1"))
    assert (caught.value.run_id, caught.value.holder_run) == ("claude:wf_1", "run_a")
    assert f"run claude:wf_1 is already being resumed by process {os.getpid()}" in str(caught.value)
    assert store.get_run("run_b") is None
    store.create_run(record("run_c", resumed_from="claude:wf_2"))  # another origin is free
    store.append_many([ev("run_a", 1, "run.started"), ev("run_a", 2, "run.interrupted")])
    store.create_run(record("run_d", resumed_from="claude:wf_1"))  # released with run_a's end


def test_a_paused_run_releases_its_claim_and_can_be_resumed(store: RunStore) -> None:
    store.create_run(record("run_a"))
    store.append_many([ev("run_a", 1, "run.started"), ev("run_a", 2, "run.paused")])
    store.create_run(record("run_b", resumed_from="run_a"))


def test_recovery_ends_only_unfinished_runs_that_are_not_active(store: RunStore) -> None:
    for run_id in ("run_a", "run_b", "run_c"):
        store.create_run(record(run_id))
        store.append(ev(run_id, 1, "run.started"))
    store.append(ev("run_c", 2, "run.completed"))
    assert store.recover({"run_a"}, interrupted) == ["run_b"]
    assert [e.type for e in store.events("run_b")] == ["run.started", "run.interrupted"]
    assert store.recover({"run_a"}, interrupted) == []  # recorded once
    assert store.last_run_event("run_a") == "run.started"


def test_a_second_writer_gets_a_sequence_conflict_and_nothing_interleaves(tmp_path: Path) -> None:
    first = SqliteStore(tmp_path / "state.db")
    second = SqliteStore(tmp_path / "state.db")
    try:
        first.create_run(record("run_a"))
        first.append_many([ev("run_a", 1, "run.started"), ev("run_a", 2, "log")])
        second.append(ev("run_a", 3, "log"))
        with pytest.raises(SequenceConflictError, match="sequence 3 is not after 3"):
            first.append_many([ev("run_a", 3, "log"), ev("run_a", 4, "log")])
        assert [e.sequence for e in first.events("run_a")] == [1, 2, 3]
    finally:
        first.close()
        second.close()


def test_the_memory_store_refuses_a_repeated_sequence_as_a_conflict() -> None:
    store = MemoryStore()
    store.create_run(record("run_a"))
    store.append(ev("run_a", 1, "run.started"))
    with pytest.raises(SequenceConflictError):  # a repeat inside one batch: test_batches.py
        store.append_many([ev("run_a", 1, "log"), ev("run_a", 2, "log")])
    assert store.last_sequence("run_a") == 1


# -- SQLite: owners in other processes ---------------------------------------------------------


def test_runs_of_a_sigkilled_owner_are_recovered_and_their_claims_taken_over(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    (run_id,) = runs_of_a_killed_owner(db, 1)
    store = SqliteStore(db)
    try:
        store.create_run(record("run_b", resumed_from=run_id))  # the dead owner's claim is no claim
        assert store.recover({"run_b"}, interrupted) == [run_id]
        assert "pid" in store.events(run_id)[-1].payload["reason"]
        assert store.recover({"run_b"}, interrupted) == []
    finally:
        store.close()


def claimed_by(db: Path, run_id: str, *, pid: int, host: str, process: str, heartbeat_at: float) -> None:
    """A run whose claim belongs to the owner described (written as another process would)."""
    store = SqliteStore(db)
    store.create_run(record(run_id))
    store.append(ev(run_id, 1, "run.started"))
    store.close()  # a clean close: the run is left unfinished, its claim points at no owner
    raw = sqlite3.connect(db)
    raw.execute(
        "INSERT OR REPLACE INTO owners (owner_id, pid, host, process, opened_at, heartbeat_at) "
        "VALUES (?,?,?,?,?,?)",
        ("elsewhere", pid, host, process, "2026-11-30T10:00:00.000Z", heartbeat_at),
    )
    raw.execute("UPDATE run_claims SET owner_id = 'elsewhere' WHERE run_id = ?", (run_id,))
    raw.commit()
    raw.close()


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="process identity needs /proc")
def test_a_reused_pid_is_not_mistaken_for_the_owner(tmp_path: Path) -> None:
    import time

    db = tmp_path / "state.db"
    # pid 1 is alive, but it is not the process that claimed the run (another start time).
    claimed_by(
        db, "run_a", pid=1, host=socket.gethostname(), process="other-boot:1", heartbeat_at=time.time()
    )
    store = SqliteStore(db)
    try:
        assert store.recover(set(), interrupted) == ["run_a"]
        assert store.events("run_a")[-1].payload["reason"].startswith("the process that owned the run (pid 1")
    finally:
        store.close()


def test_an_owner_on_another_host_keeps_its_claim_while_its_lease_is_fresh(tmp_path: Path) -> None:
    import time

    db = tmp_path / "state.db"
    claimed_by(db, "run_a", pid=4242, host="another-host", process="", heartbeat_at=time.time())
    claimed_by(db, "run_b", pid=4242, host="another-host", process="", heartbeat_at=time.time())
    raw = sqlite3.connect(db)
    raw.execute("UPDATE run_claims SET owner_id = 'stale' WHERE run_id = 'run_b'")
    raw.execute(
        "INSERT INTO owners (owner_id, pid, host, process, opened_at, heartbeat_at) "
        "VALUES ('stale', 4343, 'another-host', '', '2026-11-30T10:00:00.000Z', ?)",
        (time.time() - LEASE_TTL_S - 1,),
    )
    raw.commit()
    raw.close()
    store = SqliteStore(db)
    try:
        with pytest.raises(RunClaimedError, match="process 4242 on another-host"):
            store.create_run(record("run_c", resumed_from="run_a"))
        assert store.recover(set(), interrupted) == ["run_b"]
    finally:
        store.close()


def test_concurrent_recoveries_record_each_interrupted_run_once(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    killed = runs_of_a_killed_owner(db, 20)
    stores = [SqliteStore(db) for _ in range(4)]
    barrier = threading.Barrier(len(stores))
    found: list[list[str]] = [[] for _ in stores]

    def recover(i: int) -> None:
        barrier.wait(timeout=30)
        found[i] = stores[i].recover(set(), interrupted)

    threads = [threading.Thread(target=recover, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    try:
        assert sorted(r for f in found for r in f) == killed
        for run_id in killed:
            assert [e.type for e in stores[0].events(run_id)].count("run.interrupted") == 1
    finally:
        for s in stores:
            s.close()


def test_recovery_with_nothing_to_recover_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    store = SqliteStore(db)
    finished_run(store, "run_a")
    watcher = sqlite3.connect(db)
    before = watcher.execute("PRAGMA data_version").fetchone()[0]
    assert store.recover(set(), interrupted) == []
    assert watcher.execute("PRAGMA data_version").fetchone()[0] == before
    watcher.close()
    store.close()


def test_a_clean_close_removes_the_owner_row_and_a_kill_leaves_it(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    store = SqliteStore(db)
    finished_run(store, "run_a")
    store.close()
    runs_of_a_killed_owner(db, 1)
    raw = sqlite3.connect(db)
    try:
        assert raw.execute("SELECT count(*) FROM owners").fetchone()[0] == 1  # only the killed one
    finally:
        raw.close()


def test_an_owner_renews_its_lease_and_a_store_that_owns_nothing_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    reader = SqliteStore(db)
    watcher = sqlite3.connect(db)
    before = watcher.execute("PRAGMA data_version").fetchone()[0]
    reader.heartbeat()
    assert watcher.execute("PRAGMA data_version").fetchone()[0] == before
    owner = SqliteStore(db)
    try:
        owner.create_run(record("run_a"))
        (first,) = watcher.execute("SELECT heartbeat_at FROM owners").fetchone()
        watcher.execute("UPDATE owners SET heartbeat_at = heartbeat_at - 100")
        watcher.commit()
        owner.heartbeat()
        (renewed,) = watcher.execute("SELECT heartbeat_at FROM owners").fetchone()
        assert renewed >= first
    finally:
        watcher.close()
        owner.close()
        reader.close()


def previous_release_database(db: Path, runs: dict[str, int]) -> None:
    """A database as the release before claims (schema version 2) leaves it: each of ``runs`` (run id
    to owner pid, on this host) started and never ended."""
    raw = sqlite3.connect(db, isolation_level=None)
    for number, sql in migrations():
        if number > 2:
            break
        raw.executescript(sql)
        raw.execute(f"PRAGMA user_version = {number}")
    for run_id, pid in runs.items():
        raw.execute(
            "INSERT INTO runs (run_id, workflow_name, source_hash, source, created_at, owner_pid, owner_host) "
            "VALUES (?, 'wf', 'h', 'export const meta = {}', '2026-11-30T10:00:00.000Z', ?, ?)",
            (run_id, pid, socket.gethostname()),
        )
        raw.execute(
            "INSERT INTO events (run_id, sequence, type, timestamp, body) VALUES (?, 1, 'run.started', ?, ?)",
            (run_id, "2026-11-30T10:00:00.000Z", json.dumps(ev(run_id, 1, "run.started").to_json())),
        )
    raw.close()


def test_a_database_of_the_previous_release_upgrades_and_recovers_only_runs_whose_process_is_gone(
    tmp_path: Path,
) -> None:
    db = tmp_path / "state.db"
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead_pid = int(gone.stdout)
    previous_release_database(db, {"run_dead": dead_pid, "run_alive": 1})
    fresh = SqliteStore(tmp_path / "fresh.db")
    newest = fresh.schema()
    fresh.close()
    store = SqliteStore(db)
    try:
        assert store.schema() == newest
        assert sorted(r.run_id for r in store.list_runs()) == ["run_alive", "run_dead"]
        assert store.recover(set(), interrupted) == ["run_dead"]
        assert f"(pid {dead_pid})" in store.events("run_dead")[-1].payload["reason"]
        assert store.recover(set(), interrupted) == []
        assert store.last_run_event("run_alive") == "run.started"  # pid 1 lives: still its run
        store.create_run(record("run_next", resumed_from="run_dead"))  # resumable, and now claimed
        with pytest.raises(RunClaimedError, match="as run run_next"):
            store.create_run(record("run_other", resumed_from="run_dead"))
    finally:
        store.close()


def test_an_owner_row_records_the_lease_of_its_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKFLOW_MCP_LEASE_S", "2.5")
    store = SqliteStore(tmp_path / "state.db")
    try:
        store.create_run(record("run_a"))
        raw = sqlite3.connect(tmp_path / "state.db")
        try:
            assert raw.execute("SELECT lease_s FROM owners").fetchall() == [(2.5,)]
        finally:
            raw.close()
    finally:
        store.close()


def test_an_owner_whose_lease_expired_and_whose_run_was_taken_over_writes_nothing_more(
    tmp_path: Path,
) -> None:
    # A process on another host (a shared state file) paused past its lease wakes up still running
    # its run; meanwhile another process judged it gone and resumed the run. Nothing it writes may land.
    import time

    db = tmp_path / "state.db"
    paused = SqliteStore(db)
    other = SqliteStore(db)
    try:
        paused.create_run(record("run_1"))
        paused.append(ev("run_1", 1, "run.started"))
        raw = sqlite3.connect(db)
        raw.execute(
            "UPDATE owners SET host = 'another-host', heartbeat_at = ?", (time.time() - LEASE_TTL_S - 1,)
        )
        raw.commit()
        raw.close()
        other.create_run(record("run_2", resumed_from="run_1"))  # no recovery ran: the claim is taken
        paused.heartbeat()
        with pytest.raises(ClaimLostError, match=r"run_1 was taken over .*run run_2 holds its claim"):
            paused.append(ev("run_1", 2, "agent.queued"))
        other.append_many([ev("run_2", 1, "run.started"), ev("run_2", 2, "run.completed")])
        with pytest.raises(ClaimLostError, match="its claim was dropped"):
            paused.append(ev("run_1", 2, "run.failed"))
        assert [e.sequence for e in other.events("run_1")] == [1]
        paused.create_run(record("run_3"))
        paused.append_many([ev("run_3", 1, "run.started"), ev("run_3", 2, "run.completed")])
        paused.append(ev("run_3", 3, "log"))  # after its end a run is no longer fenced as executing
        assert [e.sequence for e in other.events("run_3")] == [1, 2, 3]
    finally:
        paused.close()
        other.close()
