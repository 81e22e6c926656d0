"""A user can give up on a paused or interrupted run: cancelling it records ``run.cancelled`` (final,
durable), automatic resume leaves it alone and ``resume`` refuses it naming the rule; completed, failed
and cancelled runs never change; and a cancel racing a resume of the same ended run has exactly one
winner, whose loser says why — also when the two come from different processes sharing a store."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp import MemoryStore, WorkflowService
from workflow_mcp._auto_resume import AutoResumer
from workflow_mcp._ended_runs import MARKER_STALE_S
from workflow_mcp.errors import InvalidInputError, RunCancelledError, RunContinuedError
from workflow_mcp.events import Event, utc_now
from workflow_mcp.service import ProviderChoice
from workflow_mcp.store.base import RunRecord
from workflow_mcp.store.sqlite import SqliteStore

from paused_runs import RESET_EPOCH, TWO_CALLS, Clock, arun, paused_run, service_over


def run_events(service: WorkflowService, run_id: str) -> list[str]:
    return [e.type for e in service.events(run_id) if e.type.startswith("run.")]


def test_cancelling_a_paused_run_ends_it_cancelled_for_good_and_resume_refuses_it(tmp_path: Path) -> None:
    db = tmp_path / "state.db"

    async def go() -> None:
        clock = Clock(RESET_EPOCH - 60)
        service = service_over(SqliteStore(db), tmp_path, clock)
        run_id = await paused_run(service, tmp_path)
        assert service.cancel(run_id, "not worth the wait") == "closed"
        state = service.status(run_id)
        assert state.status == "cancelled" and state.paused_reason is None and state.resets_at is None
        (cancelled,) = [e for e in service.events(run_id) if e.type == "run.cancelled"]
        assert cancelled.payload == {"reason": "not worth the wait", "resumable": False, "endedAs": "paused"}
        assert run_events(service, run_id)[-2:] == ["run.paused", "run.cancelled"]
        with pytest.raises(RunCancelledError) as refused:
            await service.resume(run_id)
        assert str(refused.value) == (
            f"run {run_id} was cancelled while paused (not worth the wait), so it is not resumed; to reuse "
            f"its finished agent calls, start the workflow anew with `workflow-mcp run FILE --resume-from "
            f"{run_id}`"
        )
        assert [r.run_id for r in service.list_runs()] == [run_id]  # nothing was started
        # Starting the file anew may still reuse its finished calls.
        fresh = await service.start(
            str(tmp_path / "two.js"),
            provider=ProviderChoice("fake", {"default": {"echo": True}}),
            resume_from=run_id,
        )
        assert await fresh.result() == ["first", "second"]
        assert [e.payload["label"] for e in service.events(fresh.run_id) if e.type == "agent.cached"] == ["a"]

    arun(go())
    # Durable: another process reading the store sees the same, and may not resume it either.
    reader = WorkflowService(SqliteStore(db), cwd=str(tmp_path))
    (first,) = [r for r in reader.list_runs() if r.status == "cancelled"]
    assert reader.cancel(first.run_id) == "cancelled"  # it never changes again
    with pytest.raises(RunCancelledError):
        arun(reader.resume(first.run_id))


def test_cancelling_an_interrupted_run_ends_it_cancelled_for_good(tmp_path: Path) -> None:
    store = MemoryStore()
    record = RunRecord(
        "run_left",
        "two-calls",
        "sha",
        TWO_CALLS,
        utc_now(),
        owner_pid=os.getpid(),
        owner_host=socket.gethostname(),
    )
    store.create_run(record)  # a run another service over this store started and never finished
    store.append(Event(run_id="run_left", sequence=1, type="run.started", timestamp=utc_now()))
    service = WorkflowService(store, cwd=str(tmp_path))
    assert service.cancel("run_left") == "closed"  # recovery marks it interrupted first
    assert run_events(service, "run_left") == ["run.started", "run.interrupted", "run.cancelled"]
    assert service.events("run_left")[-1].payload["endedAs"] == "interrupted"
    with pytest.raises(RunCancelledError, match="was cancelled while interrupted"):
        arun(service.resume("run_left"))


def test_completed_failed_and_running_cancelled_runs_are_left_as_they_are(tmp_path: Path) -> None:
    async def go() -> None:
        service = service_over(MemoryStore(), tmp_path, Clock(RESET_EPOCH - 60))
        ok = await service.start(
            str(tmp_path / "two.js"), provider=ProviderChoice("fake", {"default": {"echo": True}})
        )
        assert await ok.wait() == "completed"
        (tmp_path / "bad.js").write_text(
            "export const meta = { name: 'bad', description: 'throws' }\nthrow new Error('boom')\n"
        )
        bad = await service.start(str(tmp_path / "bad.js"), provider=ProviderChoice("fake", {}))
        assert await bad.wait() == "failed"
        slow = await service.start(
            str(tmp_path / "two.js"), provider=ProviderChoice("fake", {"default": {"delayMs": 120_000}})
        )
        assert service.cancel(slow.run_id) == "cancelling"
        assert await slow.wait() == "cancelled"
        for handle, status in ((ok, "completed"), (bad, "failed"), (slow, "cancelled")):
            before = len(service.events(handle.run_id))
            assert service.cancel(handle.run_id) == status
            assert len(service.events(handle.run_id)) == before
        # A run cancelled while it ran stays resumable, as before.
        again = await service.resume(slow.run_id, owner=None)
        assert again.run_id != slow.run_id
        again.cancel("done")
        await again.wait()

    arun(go())


def test_a_paused_run_that_was_resumed_is_not_cancelled_and_the_refusal_names_the_run_to_cancel(
    tmp_path: Path,
) -> None:
    async def go() -> None:
        clock = Clock(RESET_EPOCH - 60)
        service = service_over(MemoryStore(), tmp_path, clock)
        run_id = await paused_run(service, tmp_path)
        clock.now = RESET_EPOCH
        resumed = await service.resume(run_id)
        (marker,) = [e for e in service.events(run_id) if e.payload.get("resumedAs")]
        assert marker.type == "log" and marker.payload["resumedAs"] == resumed.run_id
        assert await resumed.wait() == "completed"  # the clock is at the reset: the limit is over
        with pytest.raises(RunContinuedError) as refused:
            service.cancel(run_id)
        assert str(refused.value) == (
            f"run {run_id} was not cancelled: it was resumed as run {resumed.run_id}, which carries on its "
            f"work; cancel that run instead (`workflow-mcp runs cancel {resumed.run_id}`)"
        )
        assert service.run_status(run_id) == "paused"

    arun(go())


def test_a_cancel_that_lands_while_an_auto_resume_is_prepared_wins_and_the_resume_says_so(
    tmp_path: Path,
) -> None:
    async def go() -> None:
        clock = Clock(RESET_EPOCH - 60)
        service = service_over(MemoryStore(), tmp_path, clock)
        run_id = await paused_run(service, tmp_path)
        outcomes: list[str] = []

        async def resume_with_a_cancel_in_between(rid: str) -> str:
            prepared = await service.prepare_resume(rid)  # checks passed: it was paused
            outcomes.append(service.cancel(rid, "gave up"))  # the user's cancel lands now
            return service.launch(prepared).run_id

        resumer = AutoResumer(service, resume=resume_with_a_cancel_in_between, clock=clock)
        clock.now = RESET_EPOCH
        assert await resumer.tick() == []
        assert outcomes == ["closed"]
        assert service.run_status(run_id) == "cancelled"
        assert [r.run_id for r in service.list_runs()] == [run_id]  # no continuation was recorded
        (lost,) = [e for e in service.events(run_id) if "autoResume" in e.payload]
        assert lost.type == "log" and lost.payload["message"].startswith(
            f"auto-resume left this run alone: run {run_id} was cancelled while paused (gave up)"
        )
        clock.now += 10_000
        assert await resumer.tick() == [] and resumer.waiting() == {}  # never tried again
        await service.shutdown()  # also stops the prepared worker the lost resume left

    arun(go())


def test_a_cancel_of_a_run_the_auto_resume_already_resumed_loses_and_says_which_run_to_cancel(
    tmp_path: Path,
) -> None:
    async def go() -> None:
        clock = Clock(RESET_EPOCH - 60)
        service = service_over(MemoryStore(), tmp_path, clock)
        run_id = await paused_run(service, tmp_path)
        resumer = AutoResumer(service, clock=clock)
        clock.now = RESET_EPOCH
        (resumed,) = await resumer.tick()
        with pytest.raises(RunContinuedError, match=f"resumed as run {resumed}"):
            service.cancel(run_id)
        assert service.run_status(run_id) == "paused"
        assert await service.live[resumed].result() == ["first", "second"]
        await service.shutdown()

    arun(go())


STORE_KINDS = ["sqlite", "postgres"]


def racing_store(kind: str, where: str, hook: str) -> Any:
    """A store (SQLite file or PostgreSQL schema ``where``) that, once armed, lets another process's
    write land right after this one's next ``hook`` read (``last_run_event`` or ``events``): inside
    the window between a writer's last check and its write."""
    if kind == "sqlite":
        base: type[Any] = SqliteStore
    else:
        from workflow_mcp.store.postgres import PostgresStore

        base = PostgresStore

    class Racing(base):  # type: ignore[misc]
        meanwhile: Any = None

        def _fire(self) -> None:
            meanwhile, self.meanwhile = self.meanwhile, None
            if meanwhile is not None:
                meanwhile()

        def last_run_event(self, run_id: str) -> str | None:
            newest: str | None = super().last_run_event(run_id)
            if hook == "last_run_event":
                self._fire()
            return newest

        def events(self, run_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
            page: list[Event] = super().events(run_id, after, limit)
            if hook == "events":
                self._fire()
            return page

    return Racing(where)


def plain_store(kind: str, where: str) -> Any:
    if kind == "sqlite":
        return SqliteStore(where)
    from workflow_mcp.store.postgres import PostgresStore

    return PostgresStore(where)


def store_place(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(tmp_path / "state.db") if kind == "sqlite" else str(request.getfixturevalue("postgres_url"))


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_across_processes_a_cancel_landing_inside_the_resumes_window_wins_and_the_resume_is_refused(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    where = store_place(kind, request, tmp_path)

    async def go() -> None:
        clock = Clock(RESET_EPOCH - 60)
        run_id = await paused_run(service_over(plain_store(kind, where), tmp_path, clock), tmp_path)
        other = WorkflowService(
            plain_store(kind, where), cwd=str(tmp_path)
        )  # e.g. `workflow-mcp runs cancel`
        store = racing_store(kind, where, "last_run_event")
        racing = service_over(store, tmp_path, clock)
        prepared = await racing.prepare_resume(run_id)
        said: list[str] = []
        store.meanwhile = lambda: said.append(other.cancel(run_id, "gave up"))
        with pytest.raises(RunCancelledError, match=f"run {run_id} was cancelled while paused"):
            racing.launch(prepared)  # its marker's write conflicts with the cancel; it looks again
        assert said == ["closed"]
        assert other.run_status(run_id) == "cancelled"
        assert [r.run_id for r in other.list_runs()] == [run_id]  # no continuation was recorded
        assert not [e for e in other.events(run_id) if "resumedAs" in e.payload]
        await racing.shutdown()

    arun(go())


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_across_processes_a_resume_landing_inside_the_cancels_window_wins_and_the_cancel_is_refused(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    where = store_place(kind, request, tmp_path)

    async def go() -> None:
        clock = Clock(RESET_EPOCH - 60)
        owner = service_over(plain_store(kind, where), tmp_path, clock)
        run_id = await paused_run(owner, tmp_path)
        clock.now = RESET_EPOCH
        prepared = await owner.prepare_resume(run_id)
        started: list[str] = []
        store = racing_store(kind, where, "events")
        store.meanwhile = lambda: started.append(owner.launch(prepared).run_id)
        cancelling = WorkflowService(store, cwd=str(tmp_path))
        with pytest.raises(RunContinuedError) as refused:
            cancelling.cancel(run_id)
        (resumed,) = started
        assert f"it was resumed as run {resumed}, which carries on its work" in str(refused.value)
        assert await owner.live[resumed].result() == ["first", "second"]
        assert cancelling.run_status(run_id) == "paused"
        assert not [e for e in cancelling.events(run_id) if e.type == "run.cancelled"]
        await owner.shutdown()

    arun(go())


@pytest.mark.parametrize(("age", "cancelled"), [("old", True), ("new", False)])
def test_a_marker_whose_run_was_never_stored_blocks_a_cancel_only_while_it_is_fresh(
    tmp_path: Path, age: str, cancelled: bool
) -> None:
    async def go() -> None:
        store = MemoryStore()
        service = service_over(store, tmp_path, Clock(RESET_EPOCH - 60))
        run_id = await paused_run(service, tmp_path)
        # A resume that wrote its marker and had not (or, long ago, never) stored its run.
        stamp = "2020-01-01T00:00:00Z" if age == "old" else utc_now()  # older, or younger, than
        assert MARKER_STALE_S < 10**8  # MARKER_STALE_S
        store.append(
            Event(
                run_id=run_id,
                sequence=store.last_sequence(run_id) + 1,
                type="log",
                payload={"message": "resumed as run run_gone", "resumedAs": "run_gone"},
                timestamp=stamp,
            )
        )
        if cancelled:
            assert service.cancel(run_id) == "closed"
        else:
            with pytest.raises(RunContinuedError, match="resumed as run run_gone"):
                service.cancel(run_id)

    arun(go())


def test_a_resume_that_fails_to_start_after_its_marker_leaves_the_run_cancellable(tmp_path: Path) -> None:
    async def go() -> None:
        service = service_over(MemoryStore(), tmp_path, Clock(RESET_EPOCH - 60))
        run_id = await paused_run(service, tmp_path)
        prepared = await service.prepare_resume(run_id)
        prepared.args = float("nan")  # cannot cross to the realm: start_run refuses it
        with pytest.raises(InvalidInputError) as refused:
            service.launch(prepared)
        (failed,) = [e for e in service.events(run_id) if "resumeFailed" in e.payload]
        assert failed.type == "warning"
        assert (
            failed.payload["message"]
            == f"the resume as run {failed.payload['resumeFailed']} did not start: {refused.value}"
        )
        assert service.cancel(run_id) == "closed"
        await service.shutdown()

    arun(go())


def test_a_marker_far_from_the_end_of_a_long_log_is_still_found(tmp_path: Path) -> None:
    async def go() -> None:
        store = MemoryStore()
        service = service_over(store, tmp_path, Clock(RESET_EPOCH - 60))
        run_id = await paused_run(service, tmp_path)
        events = [
            Event(
                run_id=run_id,
                sequence=store.last_sequence(run_id) + 1,
                type="log",
                timestamp=utc_now(),
                payload={"message": "resumed as run run_next", "resumedAs": "run_next"},
            )
        ]
        events += [
            Event(
                run_id=run_id,
                sequence=events[0].sequence + i,
                type="log",
                timestamp=utc_now(),
                payload={"message": f"note {i}"},
            )
            for i in range(1, 1_000)  # far past the first windows read from the end
        ]
        store.append_many(events)
        with pytest.raises(RunContinuedError, match="resumed as run run_next"):
            service.cancel(run_id)

    arun(go())
