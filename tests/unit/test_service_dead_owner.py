"""A stored run whose owner is gone reads ``interrupted`` wherever it is read, without anyone calling
recovery first: ``status``, ``run_status`` and ``list_runs`` (what ``workflow_run_status``, ``runs show``
and ``runs list`` answer) look for gone owners before they answer, and of many readers on several
servers at once the run is recorded interrupted exactly once. An owner on another host is gone once its
lease expires; the lease is ``$WORKFLOW_MCP_LEASE_S``, refused clearly when it is not a lease."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from workflow_mcp import WorkflowService
from workflow_mcp.errors import StoreError
from workflow_mcp.events import Event
from workflow_mcp.store import LEASE_ENV, SqliteStore
from workflow_mcp.store.base import RunRecord
from workflow_mcp.store.postgres import PostgresStore

from store_faults import runs_of_a_killed_owner

BOUND_S = 30


def started(store: PostgresStore, run_id: str) -> None:
    """A run created (and claimed) by ``store``, at ``run.started``."""
    store.create_run(
        RunRecord(
            run_id=run_id, workflow_name="wf", source_hash="h", source="", created_at="2026-12-01T00:00:00Z"
        )
    )
    store.append(Event(run_id=run_id, sequence=1, type="run.started", payload={}))


def move_owner_elsewhere(url: str, age_s: float) -> None:
    """Make every owner row read as a process on another host whose lease was renewed ``age_s`` ago."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "UPDATE owners SET host = 'another-host', "
            "heartbeat_at = EXTRACT(EPOCH FROM clock_timestamp()) - %s",
            (age_s,),
        )


@pytest.fixture
def readers(postgres_url: str, tmp_path: Path) -> Iterator[list[WorkflowService]]:
    """Three services (three servers) reading one database; recovery on every read (no rate limit)."""
    stores = [PostgresStore(postgres_url) for _ in range(3)]
    services = [WorkflowService(s, cwd=str(tmp_path)) for s in stores]
    for service in services:
        service.READ_RECOVERY_S = 0
    try:
        yield services
    finally:
        for s in stores:
            s.close()


def test_a_run_whose_lease_expired_reads_interrupted_through_every_read(
    postgres_url: str, readers: list[WorkflowService]
) -> None:
    owner = PostgresStore(postgres_url)
    try:
        started(owner, "run_1")
        reader = readers[0]
        move_owner_elsewhere(postgres_url, age_s=reader.store.lease_s - 5)  # type: ignore[attr-defined]
        assert reader.run_status("run_1") == "running"  # the lease still holds
        assert reader.status("run_1").status == "running"
        move_owner_elsewhere(postgres_url, age_s=reader.store.lease_s + 1)  # type: ignore[attr-defined]
        assert reader.status("run_1").status == "interrupted"
        assert [s.status for s in readers[1].list_runs()] == ["interrupted"]
        assert readers[2].run_status("run_1") == "interrupted"
        (event,) = [e for e in reader.events("run_1") if e.type == "run.interrupted"]
        assert "another-host" in event.payload["reason"] and "lease" in event.payload["reason"]
    finally:
        owner.close()


def test_of_many_readers_on_several_servers_at_once_the_run_is_recorded_interrupted_once(
    postgres_url: str, readers: list[WorkflowService]
) -> None:
    owner = PostgresStore(postgres_url)
    try:
        for n in range(4):
            started(owner, f"run_{n}")
        move_owner_elsewhere(postgres_url, age_s=readers[0].store.lease_s + 1)  # type: ignore[attr-defined]
        barrier = threading.Barrier(9)
        seen: list[str] = []

        def read(i: int) -> None:
            barrier.wait(timeout=BOUND_S)
            service = readers[i % 3]
            if i % 2:
                seen.extend(service.run_status(f"run_{n}") for n in range(4))
            else:
                seen.extend(s.status for s in service.list_runs())

        threads = [threading.Thread(target=read, args=(i,)) for i in range(9)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=BOUND_S)
        assert seen == ["interrupted"] * 36
        for n in range(4):
            kinds = [e.type for e in readers[0].events(f"run_{n}")]
            assert kinds == ["run.started", "run.interrupted"], kinds
    finally:
        owner.close()


def test_a_run_of_a_sigkilled_process_on_this_host_reads_interrupted_at_the_first_read(
    tmp_path: Path,
) -> None:
    (run_id,) = runs_of_a_killed_owner(tmp_path / "state.db", 1)
    store = SqliteStore(tmp_path / "state.db")
    try:
        service = WorkflowService(store, cwd=str(tmp_path))
        assert service.status(run_id).status == "interrupted"  # its process is gone: no lease to wait for
        assert [e.type for e in store.events(run_id)][-1] == "run.interrupted"
    finally:
        store.close()


@pytest.mark.parametrize("value", ["0", "0.5", "3601", "soon", "nan", "-3"])
def test_a_lease_that_is_not_one_is_refused_naming_the_variable_and_range(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LEASE_ENV, value)
    with pytest.raises(StoreError, match=rf"{LEASE_ENV}=.* is not a lease: give seconds from 1 to 3600"):
        SqliteStore(tmp_path / "state.db")
    assert not (tmp_path / "state.db").exists()  # refused before anything was created


def test_the_lease_comes_from_the_environment(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    default = SqliteStore(tmp_path / "a.db")
    default.close()
    assert default.lease_s == 30
    monkeypatch.setenv(LEASE_ENV, " 2.5 ")
    lite, pg = SqliteStore(tmp_path / "b.db"), PostgresStore(postgres_url)
    try:
        assert (lite.lease_s, pg.lease_s) == (2.5, 2.5)
    finally:
        lite.close()
        pg.close()


def test_a_run_whose_claim_was_taken_over_stops_with_the_reason_and_stores_nothing_more(
    tmp_path: Path,
) -> None:
    # This process stalled past its lease (as seen from another host sharing the state file), and that
    # host resumed the run: the run here ends at its next write, naming why, and writes nothing more.
    import asyncio
    import sqlite3
    import time

    from workflow_mcp.errors import RunFailedError
    from workflow_mcp.service import ProviderChoice
    from workflow_mcp.store import LEASE_TTL_S

    source = (
        "export const meta = { name: 'steps', description: 'six calls in a row' }\n"
        "for (let i = 0; i < 6; i++) await agent('step ' + i, { label: 's' + i })\n"
    )
    path = tmp_path / "steps.js"
    path.write_text(source)
    db = tmp_path / "state.db"

    async def scenario() -> tuple[str, int, int]:
        store = SqliteStore(db)
        service = WorkflowService(store, cwd=str(tmp_path))
        other = SqliteStore(db)
        try:
            handle = await service.start(
                str(path), provider=ProviderChoice("fake", {"default": {"delayMs": 200, "text": "ok"}})
            )
            cursor = 0
            while True:  # until the first call is done (each wait bounded by wait_ms)
                batch = await service.wait_events(handle.run_id, cursor, wait_ms=5_000)
                assert batch, "the run stalled"
                cursor = batch[-1].sequence
                if any(e.type == "agent.completed" for e in batch):
                    break
            raw = sqlite3.connect(db)
            raw.execute(
                "UPDATE owners SET host = 'another-host', heartbeat_at = ?", (time.time() - LEASE_TTL_S - 1,)
            )
            raw.commit()
            raw.close()
            other.create_run(
                RunRecord(
                    run_id="run_taken", workflow_name="steps", source_hash="h", source=source,
                    created_at="2026-12-01T00:00:00Z", resumed_from=handle.run_id,
                )
            )  # fmt: skip
            stored = len(other.events(handle.run_id))
            with pytest.raises(RunFailedError) as failed:
                await handle.result()
            return str(failed.value), stored, len(other.events(handle.run_id))
        finally:
            await service.shutdown("the test ended")
            other.close()

    message, before, after = asyncio.run(asyncio.wait_for(scenario(), BOUND_S))
    assert "was taken over by another server (run run_taken holds its claim now)" in message
    assert after == before  # not one event more: not the next call, not the failure
