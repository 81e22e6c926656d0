"""Automatic resume of usage-limit-paused runs already in the store (paused before the server started,
or by another process): taken on only for the owners the resumer adopts, once across several resumers
sharing a store, with the chain's earlier attempts counted from the store. Driven with a hand-moved
clock over a real SQLite file."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp import WorkflowService
from workflow_mcp._auto_resume import STORE_SCAN_S, AutoResumer, AutoResumeSettings
from workflow_mcp.service import ProviderChoice
from workflow_mcp.store.sqlite import SqliteStore

from paused_runs import (
    ALWAYS_LIMITED,
    LIMITED,
    RESET,
    RESET_EPOCH,
    Clock,
    arun,
    service_over,
)


def service_at(tmp_path: Path, clock: Clock) -> WorkflowService:
    return service_over(SqliteStore(tmp_path / "state.db"), tmp_path, clock)


def pause_before_start(tmp_path: Path, clock: Clock, owner: str | None = None, script: Any = LIMITED) -> str:
    """A run paused by an earlier process (e.g. `workflow-mcp run`, or a server since stopped)."""

    async def go() -> str:
        earlier = service_at(tmp_path, clock)
        handle = await earlier.start(
            str(tmp_path / "two.js"), provider=ProviderChoice("fake", script), owner=owner
        )
        assert await handle.wait() == "paused"
        await earlier.shutdown()
        return handle.run_id

    run_id: str = arun(go())
    return run_id


def resumed_from(service: WorkflowService, run_id: str) -> list[str]:
    return [r.run_id for r in service.store.list_runs() if r.resumed_from == run_id]


def test_a_run_paused_before_the_resumer_started_is_resumed_after_its_reset(tmp_path: Path) -> None:
    clock = Clock(RESET_EPOCH - 60)
    run_id = pause_before_start(tmp_path, clock)

    async def go() -> None:
        service = service_at(tmp_path, clock)  # the restarted server
        resumer = AutoResumer(service, clock=clock, adopt={None})
        assert await resumer.tick() == [] and resumer.waiting() == {run_id: RESET_EPOCH}
        clock.now = RESET_EPOCH
        (resumed,) = await resumer.tick()
        assert await service.live[resumed].result() == ["first", "second"]
        assert resumed_from(service, run_id) == [resumed]
        (note,) = [e for e in service.events(run_id) if "autoResume" in e.payload]
        assert note.payload["autoResume"] == {"attempt": 1, "attempts": 5, "resumedAs": resumed}
        clock.now += STORE_SCAN_S
        assert await resumer.tick() == []  # the next scan leaves it (and its completed resume) alone
        await service.shutdown()

    arun(go())


def test_without_adopt_a_stored_paused_run_is_left_to_a_resume_by_hand(tmp_path: Path) -> None:
    clock = Clock(RESET_EPOCH)
    run_id = pause_before_start(tmp_path, Clock(RESET_EPOCH - 60))

    async def go() -> None:
        service = service_at(tmp_path, clock)
        resumer = AutoResumer(service, clock=clock)
        assert await resumer.tick() == [] and resumer.waiting() == {}
        assert resumed_from(service, run_id) == []

    arun(go())


@pytest.mark.parametrize(
    ("owner", "adopt", "taken"),
    [
        (None, {None}, True),  # a stdio server: the local user's runs (CLI and stdio)
        ("alice", {None}, False),  # ... never an HTTP client's
        ("alice", {"alice", "bob"}, True),  # an HTTP server: its own tokens' runs
        (None, {"alice", "bob"}, False),  # ... never the local user's
        ("carol", {"alice", "bob"}, False),  # ... nor another server's clients'
    ],
)
def test_only_the_runs_of_the_owners_it_adopts_are_taken_on(
    tmp_path: Path, owner: str | None, adopt: set[str | None], taken: bool
) -> None:
    clock = Clock(RESET_EPOCH - 60)
    run_id = pause_before_start(tmp_path, clock, owner=owner)

    async def go() -> None:
        service = service_at(tmp_path, clock)
        resumer = AutoResumer(service, clock=clock, adopt=adopt)
        await resumer.tick()
        assert (run_id in resumer.waiting()) is taken
        clock.now = RESET_EPOCH
        started = await resumer.tick()
        assert len(started) == (1 if taken else 0)
        for new in started:
            assert service.owner_of(new) == owner  # resumed for its own owner
            assert await service.live[new].result() == ["first", "second"]
        await service.shutdown()

    arun(go())


def test_several_resumers_sharing_a_store_resume_a_stored_run_exactly_once(tmp_path: Path) -> None:
    clock = Clock(RESET_EPOCH - 60)
    run_id = pause_before_start(tmp_path, clock)

    async def go() -> None:
        services = [service_at(tmp_path, clock) for _ in range(3)]  # three servers, one store
        resumers = [AutoResumer(s, clock=clock, adopt={None}) for s in services]
        for r in resumers:
            assert await r.tick() == []
        clock.now = RESET_EPOCH
        # All three are due at once and all pass their first checks before any of them launches.
        started = await asyncio.gather(*(r.tick() for r in resumers))
        assert sorted(len(s) for s in started) == [0, 0, 1]
        (winner,) = next(s for s in started if s)
        assert resumed_from(services[0], run_id) == [winner]
        owner = next(s for s in services if winner in s.live)
        assert await owner.live[winner].result() == ["first", "second"]
        notes = [e.payload["message"] for e in services[0].events(run_id) if "autoResume" in e.payload]
        assert (
            notes[0]
            == f"auto-resume attempt 1 of 5: resumed as run {winner} (the usage limit reset at {RESET})"
        )
        assert len(notes) == 3 and all(f"is already resumed as run {winner}" in n for n in notes[1:]), notes
        for s in services:
            await s.shutdown()

    arun(go())


def test_a_restart_does_not_give_a_chain_more_attempts_and_a_chain_that_gave_up_stays_given_up(
    tmp_path: Path,
) -> None:
    clock = Clock(RESET_EPOCH)
    run_id = pause_before_start(tmp_path, clock, script=ALWAYS_LIMITED)
    settings = AutoResumeSettings(attempts=2, backoff_s=100, max_backoff_s=100)

    async def first_server() -> str:
        service = service_at(tmp_path, clock)
        resumer = AutoResumer(service, settings, clock=clock, adopt={None})
        assert await resumer.tick() == []  # the pause resets 60 s from now
        clock.now += 60
        (second,) = await resumer.tick()
        assert await service.live[second].wait() == "paused"
        await service.shutdown()
        return second

    second = arun(first_server())

    async def second_server() -> str:
        service = service_at(tmp_path, clock)
        resumer = AutoResumer(service, settings, clock=clock, adopt={None})
        await resumer.tick()
        # Attempt 1 was made by the first server: the next waits a whole backoff after the restart.
        assert resumer.waiting() == {second: clock.now + 100}
        clock.now += 101
        (third,) = await resumer.tick()
        assert await service.live[third].wait() == "paused"
        clock.now += 10_000
        assert await resumer.tick() == []
        (gave_up,) = [e for e in service.events(third) if "autoResume" in e.payload]
        assert gave_up.type == "warning" and gave_up.payload["autoResume"] == {"attempt": 2, "attempts": 2}
        await service.shutdown()
        return third

    third = arun(second_server())

    async def third_server() -> None:
        service = service_at(tmp_path, clock)
        resumer = AutoResumer(service, settings, clock=clock, adopt={None})
        assert await resumer.tick() == [] and resumer.waiting() == {}
        assert len([e for e in service.events(third) if "autoResume" in e.payload]) == 1  # not said again
        assert resumed_from(service, run_id) != [] and resumed_from(service, third) == []

    arun(third_server())


def test_a_stored_paused_run_its_user_cancelled_is_never_adopted(tmp_path: Path) -> None:
    clock = Clock(RESET_EPOCH - 60)
    run_id = pause_before_start(tmp_path, clock)

    async def go() -> None:
        service = service_at(tmp_path, clock)
        assert service.cancel(run_id) == "closed"
        resumer = AutoResumer(service, clock=clock, adopt={None})
        clock.now = RESET_EPOCH
        assert await resumer.tick() == [] and resumer.waiting() == {}

    arun(go())
