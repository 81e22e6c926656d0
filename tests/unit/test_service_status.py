"""The service speaks one status vocabulary and keeps each live run's state as its events are committed:
awaiting a run that has ended — ``paused`` included — returns at once, without spinning, whichever
process owns it; a wait on a run that is still going sleeps until its deadline; and the state kept for a
live run is exactly what projecting its stored log gives, after every batch."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from workflow_mcp import FakeProvider, MemoryStore, RunOptions, WorkflowService, load_workflow, project_state
from workflow_mcp.engine.run import RunHandle
from workflow_mcp.events import Event
from workflow_mcp.state import RunState
from workflow_mcp.store.sqlite import SqliteStore

from helpers import PAUSES, LoggedOutAfterFirst

T = TypeVar("T")
BOUND_S = 60.0
CPU_BUDGET_S = 0.1
# The wait a call on a paused run is given and must not serve: "at once" is any time well under it, so a
# loaded machine's slow second never reads as waiting (CPU_BUDGET_S guards against a busy wait).
WAIT_MS = 25_000
AT_ONCE_S = WAIT_MS / 1000 / 2

PARKED = (
    "export const meta = { name: 'parked', description: 'one call that waits' }\n"
    "return await agent('wait for me')\n"
)
BUSY = """export const meta = { name: 'busy', description: 'phases, logs, a fan-out, a failure', phases: [{ title: 'A' }, { title: 'B' }] }
phase('A')
log('starting')
const xs = await parallel(Array.from({ length: 12 }, (_, i) => () => agent('n' + i, { label: 'n' + i })))
phase('B')
const bad = await agent('bad', { label: 'bad' })
log('bad gave ' + bad)
return xs.length
"""


def run(coro: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, BOUND_S)

    return asyncio.run(bounded())


async def cpu_and_wall(wait: Callable[[], Awaitable[T]]) -> tuple[T, float, float]:
    """``(result, CPU seconds of this process, wall seconds)`` of one awaited call."""
    cpu, wall = time.process_time(), time.perf_counter()
    out = await wait()
    return out, time.process_time() - cpu, time.perf_counter() - wall


async def paused_run(service: WorkflowService, cwd: Path) -> RunHandle:
    handle = service.start_run(
        load_workflow(source=PAUSES), provider=LoggedOutAfterFirst(), options=RunOptions(cwd=str(cwd))
    )
    assert await asyncio.wait_for(handle.wait(), BOUND_S) == "paused"
    return handle


def test_awaiting_a_paused_run_returns_at_once_using_almost_no_cpu(tmp_path: Path) -> None:
    async def go() -> None:
        service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
        handle = await paused_run(service, tmp_path)
        state, cpu, wall = await cpu_and_wall(lambda: service.await_run(handle.run_id, WAIT_MS))
        assert state.status == "paused" and state.paused_reason == "auth_required"
        assert cpu < CPU_BUDGET_S, f"awaiting a paused run burnt {cpu:.2f} s of CPU"
        assert wall < AT_ONCE_S, f"awaiting a paused run took {wall:.2f} s of its {WAIT_MS} ms wait"
        events, cpu, wall = await cpu_and_wall(
            lambda: service.wait_events(handle.run_id, 10_000, None, WAIT_MS)
        )
        assert events == [] and cpu < CPU_BUDGET_S and wall < AT_ONCE_S

    run(go())


def test_awaiting_another_processes_paused_run_returns_at_once_using_almost_no_cpu(tmp_path: Path) -> None:
    db = tmp_path / "state" / "state.db"

    async def go() -> None:
        owner = WorkflowService(SqliteStore(db), cwd=str(tmp_path))
        handle = await paused_run(owner, tmp_path)
        reader = WorkflowService(SqliteStore(db), cwd=str(tmp_path))  # sees the run only in the store
        state, cpu, wall = await cpu_and_wall(lambda: reader.await_run(handle.run_id, WAIT_MS))
        assert state.status == "paused"
        assert cpu < CPU_BUDGET_S and wall < AT_ONCE_S, (cpu, wall)

    run(go())


def test_a_paused_run_is_listed_paused_and_cancelling_it_closes_it_asking_nothing_of_anyone(
    tmp_path: Path,
) -> None:
    async def go() -> None:
        store = MemoryStore()
        service = WorkflowService(store, cwd=str(tmp_path))
        handle = await paused_run(service, tmp_path)
        assert service.run_status(handle.run_id) == "paused"
        assert [r.status for r in service.list_runs()] == ["paused"]
        assert service.cancel(handle.run_id) == "closed"  # nothing runs it: it is cancelled at once
        assert store.cancel_requests([handle.run_id]) == {}  # no request is left for anyone to act on
        assert [r.status for r in service.list_runs()] == ["cancelled"]
        assert service.cancel(handle.run_id) == "cancelled"  # and it never changes again

    run(go())


def test_a_bounded_wait_on_a_running_run_sleeps_until_its_deadline(tmp_path: Path) -> None:
    db = tmp_path / "state" / "state.db"

    async def go() -> None:
        owner = WorkflowService(SqliteStore(db), cwd=str(tmp_path))
        provider = FakeProvider({"default": {"delayMs": 120_000}})
        handle = owner.start_run(
            load_workflow(source=PARKED), provider=provider, options=RunOptions(cwd=str(tmp_path))
        )
        follow = handle.events()
        async for event in follow:
            if event.type == "agent.started":
                break
        await follow.aclose()  # type: ignore[attr-defined]  # an async generator underneath
        reader = WorkflowService(SqliteStore(db), cwd=str(tmp_path))
        for service in (owner, reader):  # followed live, and polled from the store
            state, cpu, wall = await cpu_and_wall(lambda s=service: s.await_run(handle.run_id, 1_000))  # type: ignore[misc]
            assert state.status == "running"
            assert wall >= 0.99, wall
            assert cpu < CPU_BUDGET_S, f"a one-second wait burnt {cpu:.2f} s of CPU"
        handle.cancel("done")
        assert await asyncio.wait_for(handle.wait(), BOUND_S) == "cancelled"

    run(go())


def test_the_state_kept_for_a_live_run_is_the_projection_of_its_stored_log_after_every_batch(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    service = WorkflowService(store, cwd=str(tmp_path))
    compared: list[int] = []

    def check(event: Event) -> None:
        kept = service.status(event.run_id).to_json()
        assert kept == project_state(store.events(event.run_id), run_id=event.run_id).to_json()
        compared.append(event.sequence)

    script = {"rules": [{"match": {"label": "bad"}, "respond": {"fail": "provider", "message": "HTTP 500"}}]}

    async def go() -> RunState:
        handle = service.start_run(
            load_workflow(source=BUSY),
            provider=FakeProvider(script),
            options=RunOptions(cwd=str(tmp_path), concurrency=3),
            on_event=check,
        )
        return await service.await_run(handle.run_id, int(BOUND_S * 1000))

    final = run(go())
    assert final.status == "completed" and final.result == 12
    assert final.counts()["completed"] == 12 and final.counts()["failed"] == 1
    assert compared == list(range(1, final.last_sequence + 1))
    assert final.to_json() == project_state(store.events(final.run_id)).to_json()


def test_progress_while_awaiting_a_live_run_sees_its_state_move_forward_to_the_end(tmp_path: Path) -> None:
    seen: list[tuple[int, str, dict[str, int]]] = []

    async def on_progress(state: RunState) -> None:
        seen.append((state.last_sequence, state.status, state.counts()))

    async def go() -> tuple[RunState, Any]:
        service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
        handle = service.start_run(
            load_workflow(source=BUSY), provider=FakeProvider(), options=RunOptions(cwd=str(tmp_path))
        )
        return await service.await_run(handle.run_id, int(BOUND_S * 1000), on_progress=on_progress), service

    final, _ = run(go())
    sequences = [s for s, _, _ in seen]
    assert sequences and sequences == sorted(set(sequences))
    assert seen[-1][0] == final.last_sequence and seen[-1][1] == "completed"
    assert seen[-1][2]["completed"] == 13


def test_progress_while_awaiting_another_processes_run_reads_each_new_event_once(tmp_path: Path) -> None:
    db = tmp_path / "state" / "state.db"
    seen: list[int] = []

    async def on_progress(state: RunState) -> None:
        seen.append(state.last_sequence)

    async def go() -> tuple[RunState, list[Event]]:
        owner = WorkflowService(SqliteStore(db), cwd=str(tmp_path))
        steps = (
            "export const meta = { name: 'steps', description: 'calls in turn' }\n"
            "for (let i = 0; i < 6; i++) { log('step ' + i); await agent('step ' + i) }\nreturn 6\n"
        )
        handle = owner.start_run(
            load_workflow(source=steps),
            provider=FakeProvider({"default": {"echo": True, "delayMs": 60}}),
            options=RunOptions(cwd=str(tmp_path)),
        )
        reader = WorkflowService(SqliteStore(db), cwd=str(tmp_path))  # polls the store
        final = await reader.await_run(handle.run_id, int(BOUND_S * 1000), on_progress=on_progress)
        await handle.wait()
        return final, owner.events(handle.run_id)

    final, stored = run(go())
    assert final.status == "completed" and final.result == 6
    assert final.to_json() == project_state(stored).to_json()
    assert seen and seen == sorted(set(seen)) and seen[-1] == stored[-1].sequence


class CountingStore(SqliteStore):
    """A SQLite store that counts the reads a waiter makes, and says when it has looked up the newest
    sequence ``looks`` times."""

    def __init__(self, path: Path, looks: int) -> None:
        super().__init__(path)
        self.reads = 0
        self.lookups = 0
        self.looks = looks
        self.looked = asyncio.Event()

    def events(self, run_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        self.reads += 1
        return super().events(run_id, after, limit)

    def last_sequence(self, run_id: str) -> int:
        self.lookups += 1
        if self.lookups >= self.looks:
            self.looked.set()
        return super().last_sequence(run_id)


def test_waiting_for_events_of_another_processes_run_looks_up_its_newest_sequence_and_reads_once_it_grew(
    tmp_path: Path,
) -> None:
    db = tmp_path / "state" / "state.db"

    async def go() -> None:
        owner = WorkflowService(SqliteStore(db), cwd=str(tmp_path))
        provider = FakeProvider({"default": {"delayMs": 120_000}})
        handle = owner.start_run(
            load_workflow(source=PARKED), provider=provider, options=RunOptions(cwd=str(tmp_path))
        )
        follow = handle.events()
        async for event in follow:
            if event.type == "agent.started":
                break
        await follow.aclose()  # type: ignore[attr-defined]  # an async generator underneath
        store = CountingStore(db, looks=5)
        reader = WorkflowService(store, cwd=str(tmp_path))
        after = owner.event_count(handle.run_id)
        waiting = asyncio.create_task(reader.wait_events(handle.run_id, after, None, WAIT_MS))
        await asyncio.wait_for(store.looked.wait(), BOUND_S)  # idle: only lookups so far
        reads_while_idle = store.reads
        handle.cancel("stop")
        cancelled_at = time.perf_counter()
        events = await asyncio.wait_for(waiting, BOUND_S)
        woke_after = time.perf_counter() - cancelled_at
        assert events and events[0].sequence == after + 1
        assert reads_while_idle <= 2, f"{reads_while_idle} event reads before the log grew"
        assert store.reads == reads_while_idle + 1
        assert woke_after < AT_ONCE_S, woke_after
        assert await asyncio.wait_for(handle.wait(), BOUND_S) == "cancelled"

    run(go())
