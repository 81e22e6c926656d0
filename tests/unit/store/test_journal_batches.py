"""A batch of events writes one journal row per call (a replayed call's ``agent.queued`` and
``agent.cached`` share a batch), and what it leaves is exactly what storing the same events one at a
time leaves, on every store; ``journal_entries`` is ``journal`` and ``journal_damage`` in one read."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp.events import Event
from workflow_mcp.store.base import JournalRow, RunStore, batch_journal_rows, merge_journal_rows

from store_kinds import STORE_KINDS, made_store, run_record


def ev(run_id: str, seq: int, type: str, agent_id: str | None = None, **payload: Any) -> Event:
    return Event(
        run_id=run_id,
        sequence=seq,
        type=type,
        timestamp="2026-11-30T10:00:00.000Z",
        agent_id=agent_id,
        payload=payload,
    )


def calls(run_id: str) -> list[list[Event]]:
    """The batches of one run: calls whose events share a batch, span two, mix with other events."""
    e: list[tuple[str, str | None, dict[str, Any]]] = [
        ("agent.queued", "ag_a", {"label": "a", "key": "v2:a", "contentKey": "c1:a", "sideEffects": True}),
        ("agent.cached", "ag_a", {"result": {"n": 1}, "tokenUsage": {"output": 3}, "fromRunId": "run_0"}),
        ("log", None, {"message": "between"}),
        ("agent.queued", "ag_b", {"label": "b", "key": "v2:b", "contentKey": "c1:b"}),
        ("agent.started", "ag_b", {}),
        ("agent.queued", "ag_c", {"label": "c", "key": "v2:c", "contentKey": ""}),
        ("agent.failed", "ag_c", {"error": "boom", "tokenUsage": {"input": 2}}),
        # the next batch: ag_b ends, ag_c (failed) is queued again under the same id, ag_d is whole
        ("agent.completed", "ag_b", {"label": "", "result": "b", "tokenUsage": {"input": 1, "output": 2}}),
        ("agent.queued", "ag_c", {"label": "", "key": "", "contentKey": "c1:c2", "sideEffects": False}),
        ("agent.completed", "ag_c", {"result": None, "outcome": "timeout"}),
        ("agent.queued", "ag_d", {"label": "d", "key": "v2:d", "contentKey": "c1:d"}),
        ("agent.completed", "ag_d", {"result": [1, "two"], "tokenUsage": {"input": 5}}),
    ]
    events = [ev(run_id, i + 2, t, a, **p) for i, (t, a, p) in enumerate(e)]
    return [[ev(run_id, 1, "run.started")], events[:7], events[7:]]


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    made = made_store(request, tmp_path)
    yield made
    made.close()


def without_run(rows: list[JournalRow]) -> list[JournalRow]:
    return [dataclasses.replace(r, run_id="") for r in rows]


def test_a_batch_leaves_the_journal_that_its_events_stored_one_by_one_leave(store: RunStore) -> None:
    store.create_run(run_record("run_each"))
    store.create_run(run_record("run_batch"))
    for batch in calls("run_each"):
        for event in batch:
            store.append(event)
    for batch in calls("run_batch"):
        store.append_many(batch)
    each, batched = store.journal("run_each"), store.journal("run_batch")
    assert without_run(batched) == without_run(each)
    a, b, c, d = batched
    assert (a.status, a.result_json, a.source_run, a.side_effects) == ("cached", '{"n":1}', "run_0", True)
    assert (a.key, a.content_key, a.label, a.tokens) == ("v2:a", "c1:a", "a", {"output": 3})
    assert (b.status, b.label, b.result_json, b.tokens) == (
        "completed",
        "b",
        '"b"',
        {"input": 1, "output": 2},
    )
    # a later event's empty key keeps the stored one; a non-empty one replaces it
    assert (c.status, c.key, c.content_key, c.ordinal) == ("timeout", "v2:c", "c1:c2", 2)
    assert (d.ordinal, d.result_json) == (3, '[1,"two"]')
    assert store.journal_entries("run_batch") == batched
    assert store.journal_damage("run_batch") == []


def test_a_batch_writes_one_journal_row_per_call_in_the_order_of_each_calls_first_event() -> None:
    numbers: dict[str, int] = {}

    def ordinal(event: Event) -> int:
        return numbers.setdefault(event.agent_id or "", len(numbers))

    rows = batch_journal_rows(calls("run_1")[1], ordinal)
    assert [(r.agent_id, r.ordinal, r.status) for r in rows] == [
        ("ag_a", 0, "cached"),
        ("ag_b", 1, "queued"),  # agent.started writes no journal row
        ("ag_c", 2, "failed"),
    ]
    assert rows[0].result_json == '{"n":1}' and rows[0].side_effects is True
    assert rows[2].tokens == {"input": 2}
    assert batch_journal_rows([ev("run_1", 1, "log", "ag_x", message="m")], ordinal) == []


def test_merging_keeps_the_identity_of_the_first_row_and_the_outcome_of_the_second() -> None:
    old = JournalRow("run_1", "ag_a", 4, "k", "c", "queued", "lab", None, {}, True, None)
    new = JournalRow("run_1", "ag_a", 9, "", "", "cached", "", "1", {"input": 1}, False, "run_0")
    assert merge_journal_rows(old, new) == JournalRow(
        "run_1", "ag_a", 4, "k", "c", "cached", "lab", "1", {"input": 1}, True, "run_0"
    )
    later = JournalRow("run_1", "ag_a", 9, "k2", "c2", "failed", "l2", None, {}, False, None)
    assert merge_journal_rows(new, later) == JournalRow(
        "run_1", "ag_a", 9, "k2", "c2", "failed", "l2", "1", {}, False, "run_0"
    )
