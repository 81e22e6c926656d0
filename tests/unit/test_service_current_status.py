"""``WorkflowService.current_status``: a run executed elsewhere, read again and again while its log
grows, always has the state a full projection of its log gives (it is folded forward, never stale)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import pytest

from workflow_mcp import FakeProvider, MemoryStore, SqliteStore, WorkflowService, load_workflow
from workflow_mcp.errors import RunNotFoundError
from workflow_mcp.store.base import InterruptedEvent

pytestmark = pytest.mark.anyio

SOURCE = (
    "export const meta = { name: 'fan', description: 'd', phases: [{ title: 'A' }, { title: 'B' }] }\n"
    "phase('A')\n"
    "const xs = await parallel([1, 2, 3].map((i) => () => agent('a' + i, { label: 'a' + i })))\n"
    "log('half way')\n"
    "phase('B')\n"
    "return [xs, await agent('b', { label: 'b' })]\n"
)


class OwnedElsewhere(MemoryStore):
    """A store whose unfinished runs all belong to another live process: a recovery pass marks none of
    them interrupted (a reader's status is truthful about dead owners only)."""

    def recover(self, active: Collection[str], interrupted: InterruptedEvent) -> list[str]:
        return []


async def test_a_run_read_in_parts_has_the_state_of_its_whole_log_at_every_point(tmp_path: Path) -> None:
    runner = WorkflowService(SqliteStore(tmp_path / "ran.db"), cwd=str(tmp_path))
    handle = runner.start_run(load_workflow(source=SOURCE), provider=FakeProvider())
    await handle.result()
    record = runner.store.get_run(handle.run_id)
    events = runner.store.events(handle.run_id, 0)
    await runner.shutdown()
    assert record is not None and len(events) > 10

    store = OwnedElsewhere()  # the same run as another process's reader sees it: its log grows
    store.create_run(record)
    reader = WorkflowService(store, cwd=str(tmp_path))
    with pytest.raises(RunNotFoundError):
        reader.current_status("run_unknown")
    for end in (1, 4, 5, 9, len(events) - 1, len(events)):
        store.append_many([e for e in events if store.last_sequence(record.run_id) < e.sequence <= end])
        seen = reader.current_status(record.run_id)
        assert seen.to_json() == reader.status(record.run_id).to_json()
        assert seen.last_sequence == end
    assert seen.status == "completed" and seen.counts()["completed"] == 4
    seen.logs.append("changed by the caller")  # a copy: the kept projection is not touched
    assert reader.current_status(record.run_id).logs == ["half way"]
