"""The completion order a resume replays, read back from the events that name each call
(``store.base.release_order``) and the deliveries (``engine.journal.delivery_turns``): a call replayed
in the realm is named by its ``agent.cached`` as it is taken, then by the ``agent.delivered`` that
released it, and its place is the last."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workflow_mcp.engine.journal import delivery_turns
from workflow_mcp.events import Event
from workflow_mcp.store import MemoryStore, SqliteStore
from workflow_mcp.store.base import RunRecord, release_order

RUN = "run_1"


def ev(sequence: int, kind: str, payload: dict[str, object], agent: str | None = None) -> Event:
    return Event(RUN, sequence, kind, payload, agent_id=agent)


def test_a_call_is_placed_where_it_is_last_named_and_a_body_that_does_not_read_names_nothing() -> None:
    completed = [(1, "ag_1"), (2, "ag_2"), (3, "ag_3"), (6, "ag_4")]
    delivered = [
        (4, json.dumps({"payload": {"turn": 1, "agentIds": ["ag_2", "ag_1"]}})),
        (5, b"\xff not json"),
        (7, {"turn": 2, "agentIds": ["ag_3", 7]}),
    ]
    assert release_order(completed, delivered) == ["ag_2", "ag_1", "ag_4", "ag_3"]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_store_reads_the_same_order_and_the_deliveries_from_the_events(kind: str, tmp_path: Path) -> None:
    events = [
        ev(1, "run.started", {}),
        ev(2, "agent.cached", {"label": "a", "result": "A"}, "ag_1"),
        ev(3, "agent.cached", {"label": "b", "result": "B"}, "ag_2"),
        ev(4, "agent.queued", {"label": "c"}, "ag_3"),
        ev(5, "agent.delivered", {"turn": 1, "agentIds": ["ag_2"]}),
        ev(6, "agent.completed", {"label": "c", "result": "C", "turn": 2}, "ag_3"),
        ev(7, "agent.delivered", {"turn": 3, "agentIds": ["ag_1"]}),
    ]
    store = MemoryStore() if kind == "memory" else SqliteStore(tmp_path / "state.db")
    store.create_run(RunRecord(run_id=RUN, workflow_name="w", source_hash="h", source="", created_at="2026"))
    store.append_many(events)
    assert store.completion_order(RUN) == ["ag_2", "ag_3", "ag_1"]
    assert delivery_turns(events) == {"ag_2": 1, "ag_3": 2, "ag_1": 3}
