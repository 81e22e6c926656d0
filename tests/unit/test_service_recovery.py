"""The service's side of recovery: a run whose last events the store refused (a full disk) ends
``interrupted`` in the store as soon as writes work again, even in a long-lived process; a live run of
this process is never mistaken for an orphan."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest

import workflow_mcp.service as service_module
from workflow_mcp import FakeProvider, MemoryStore, RunOptions, WorkflowService, load_workflow
from workflow_mcp.errors import StoreFullError
from workflow_mcp.events import Event, utc_now
from workflow_mcp.store.base import RunRecord

HOST = socket.gethostname()
BODY = (
    "export const meta = { name: 'two', description: 'two calls' }\n"
    "const a = await agent('first')\n"
    "return [a, await agent('second')]\n"
)


class FillingStore(MemoryStore):
    """A memory store whose disk fills up on demand: while ``full``, every append is refused the way
    the SQLite store refuses it (nothing stored, :class:`StoreFullError`)."""

    full = False

    def append_many(self, events: list[Event]) -> None:
        if self.full:
            raise StoreFullError("/state/state.db", directory="/state", free_bytes=0)
        super().append_many(events)

    def append(self, event: Event) -> None:
        if self.full:
            raise StoreFullError("/state/state.db", directory="/state", free_bytes=0)
        super().append(event)


async def poll(condition: object, deadline_s: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while not condition():  # type: ignore[operator]
        assert loop.time() < end, "condition not reached in time"
        await asyncio.sleep(0.02)


def test_a_run_that_could_not_store_its_end_is_recorded_interrupted_once_writes_work_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service_module, "HEARTBEAT_S", 0.05)
    store = FillingStore()

    async def go() -> None:
        notices: list[str] = []
        service = WorkflowService(store, cwd=str(tmp_path), notify=notices.append)
        provider = FakeProvider({"rules": [{"match": {"prompt": "second"}, "respond": {"delayMs": 200}}]})
        handle = service.start_run(
            load_workflow(source=BODY), provider=provider, options=RunOptions(cwd=str(tmp_path))
        )
        await poll(
            lambda: any(
                e.type == "agent.started" and e.agent_id == "ag_0002" for e in store.events(handle.run_id)
            )
        )
        store.full = True
        assert await asyncio.wait_for(handle.wait(), 30) == "failed"
        assert store.last_run_event(handle.run_id) == "run.started"  # its end was not stored
        assert service.recover() == []  # still full: nothing recorded, no error
        store.full = False
        await poll(lambda: store.last_run_event(handle.run_id) == "run.interrupted")
        (mark,) = [e for e in store.events(handle.run_id) if e.type == "run.interrupted"]
        assert "without recording its end" in mark.payload["reason"]
        assert service.recover() == []  # nothing left to mark, nothing more to say
        assert notices == [
            f"marked 1 run interrupted (it stopped without recording its end): {handle.run_id}; "
            f"resume it with `workflow-mcp resume {handle.run_id}`"
        ]

    asyncio.run(asyncio.wait_for(go(), 60))


def test_recovery_never_interrupts_a_run_this_process_is_still_running(tmp_path: Path) -> None:
    async def go() -> None:
        service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
        provider = FakeProvider({"default": {"delayMs": 300}})
        handle = service.start_run(
            load_workflow(source=BODY), provider=provider, options=RunOptions(cwd=str(tmp_path))
        )
        assert service.recover() == []
        assert await asyncio.wait_for(handle.result(), 30) == ["first", "second"]
        assert service.recover() == []

    asyncio.run(asyncio.wait_for(go(), 60))


def test_one_recovery_pass_names_every_run_it_marked_in_one_line_and_the_next_pass_says_nothing(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    run_ids = [f"run_left_{i:02d}" for i in range(12)]
    for rid in run_ids:  # runs another service over this store started and never finished
        store.create_run(
            RunRecord(rid, "two", "sha", BODY, utc_now(), owner_pid=os.getpid(), owner_host=HOST)
        )
        store.append(Event(run_id=rid, sequence=1, type="run.started", timestamp=utc_now()))
    notices: list[str] = []
    service = WorkflowService(store, cwd=str(tmp_path), notify=notices.append)

    assert service.recover() == run_ids
    assert service.recover() == []

    assert notices == [
        "marked 12 runs interrupted (they stopped without recording their end): "
        + ", ".join(run_ids[:10])
        + " and 2 more (`workflow-mcp runs list`); resume them with `workflow-mcp resume RUN_ID`"
    ]
