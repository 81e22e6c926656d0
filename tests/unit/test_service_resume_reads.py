"""What a resume needs from its run's event log (the realm delivery of each answer) and whether any stored body is damaged is known, without reading the log, to
the service and store that ran the run; a service opened afresh on the same file reads them from the
log, and both resumes replay exactly the same way. Real SQLite file, real Node worker, fake provider."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Coroutine
from pathlib import Path
from typing import Any

from replayed import released
from workflow_mcp import WorkflowService
from workflow_mcp.events import Event
from workflow_mcp.service import ProviderChoice
from workflow_mcp.store import SqliteStore

BOUND_S = 60.0

# Answers that reach the workflow together (one realm delivery) and apart: a and b answer at once, c
# later; `trace` records what the workflow saw at each step, so a different grouping shows.
GROUPS = (
    "export const meta = { name: 'groups', description: 'answers delivered together and apart' }\n"
    "const trace = []\n"
    "const r = await parallel(['a', 'b', 'c'].map((x) => async () => {\n"
    "  const v = await agent('item ' + x, { label: x }); trace.push(x); return v }))\n"
    "return { r, trace }\n"
)
SCRIPT = {
    "rules": [{"match": {"label": "c"}, "respond": {"echo": True, "delayMs": 200}}],
    "default": {"echo": True},
}


class CountingStore(SqliteStore):
    """Counts the reads of the event log a resume could make."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.log_reads: list[str] = []

    def events_of_types(self, run_id: str, types: Collection[str]) -> list[Event]:
        self.log_reads.append("events_of_types")
        return super().events_of_types(run_id, types)

    def damaged_events(self, run_id: str) -> list[Event]:
        found = super().damaged_events(run_id)
        if self._written.get(run_id) is None:
            self.log_reads.append("damaged_events scan")
        return found


def arun(coro: Coroutine[Any, Any, Any]) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(coro, BOUND_S)

    return asyncio.run(bounded())


def replayed(events: list[Event]) -> list[tuple[str, Any]]:
    """What the workflow was handed, in order: each replayed result with its delivery, each live call."""
    return [
        *released(events),
        *((str(e.payload.get("label")), "live") for e in events if e.type == "agent.started"),
    ]


def test_a_resume_by_the_service_that_ran_the_run_reads_none_of_its_log_and_replays_as_a_fresh_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "groups.js"
    path.write_text(GROUPS)
    db = tmp_path / "state.db"

    async def first_and_resumed() -> tuple[str, Any, Any, list[Event], list[str]]:
        store = CountingStore(db)
        service = WorkflowService(store, cwd=str(tmp_path))
        try:
            first = await service.start(str(path), provider=ProviderChoice("fake", SCRIPT))
            result = await first.result()
            again = await service.resume(first.run_id)
            return first.run_id, result, await again.result(), service.events(again.run_id), store.log_reads
        finally:
            await service.shutdown()
            store.close()

    async def resumed_afresh(run_id: str) -> tuple[Any, list[Event], list[str]]:
        store = CountingStore(db)
        service = WorkflowService(store, cwd=str(tmp_path))
        try:
            again = await service.resume(run_id)
            return await again.result(), service.events(again.run_id), store.log_reads
        finally:
            await service.shutdown()
            store.close()

    run_id, result, warm, warm_events, warm_reads = arun(first_and_resumed())
    cold, cold_events, cold_reads = arun(resumed_afresh(run_id))
    assert result["trace"] == ["a", "b", "c"]
    assert warm == result and cold == result
    assert warm_reads == []
    assert cold_reads == ["events_of_types", "damaged_events scan"]
    assert replayed(warm_events) == replayed(cold_events)
    turns = [t for _, t in released(warm_events)]
    assert len(turns) == 3 and turns[0] == turns[1] != turns[2]  # a and b together, c apart


def test_a_run_with_more_answers_than_the_service_follows_is_read_from_its_log_when_resumed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "groups.js"
    path.write_text(GROUPS)
    store = CountingStore(tmp_path / "state.db")
    service = WorkflowService(store, cwd=str(tmp_path))
    service.LOG_FACTS_MAX_CALLS = 2  # the run answers 3 calls

    async def go() -> tuple[Any, Any, list[Event]]:
        try:
            first = await service.start(str(path), provider=ProviderChoice("fake", SCRIPT))
            result = await first.result()
            again = await service.resume(first.run_id)
            return result, await again.result(), service.events(again.run_id)
        finally:
            await service.shutdown()
            store.close()

    result, resumed, events = arun(go())
    assert resumed == result
    assert store.log_reads == ["events_of_types"]  # the turns; the bodies are still known intact
    turns = [t for _, t in released(events)]
    assert len(turns) == 3 and turns[0] == turns[1] != turns[2]  # the deliveries read from the log
