"""A batch of events (``append_many``, the group commit every run uses) whose own order is broken — a
gap, a duplicate, a sequence that goes back — is refused with an error naming the run, the event and
both sequences, and nothing of it is stored: not its events, not the journal rows they imply."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from workflow_mcp.errors import EventBatchError, SequenceConflictError
from workflow_mcp.events import Event
from workflow_mcp.store.base import RunStore

from store_kinds import made_store
from store_kinds import run_record as record


def ev(seq: int, run_id: str = "run_1", type: str = "log", agent_id: str | None = None) -> Event:
    payload: dict[str, object] = {"label": "x", "result": seq} if agent_id else {"message": str(seq)}
    return Event(
        run_id=run_id,
        sequence=seq,
        type=type,
        timestamp="2026-11-30T10:00:00.000Z",
        agent_id=agent_id,
        payload=payload,
    )


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    made = made_store(request, tmp_path)
    made.create_run(record("run_1"))
    made.append_many([ev(1, type="run.started"), ev(2)])
    yield made
    made.close()


BROKEN = [
    ([3, 5], 1, 5, 3, "gap", "skips 4"),
    ([3, 4, 7], 2, 7, 4, "gap", "skips 5 to 6"),
    ([3, 3], 1, 3, 3, "duplicate", "repeats it"),
    ([3, 4, 2], 2, 2, 4, "out of order", "goes back"),
    ([4, 3], 1, 3, 4, "out of order", "goes back"),
]


@pytest.mark.parametrize(
    ("sequences", "index", "sequence", "previous", "problem", "says"), BROKEN, ids=[str(b[0]) for b in BROKEN]
)
def test_a_batch_whose_own_sequence_is_broken_is_refused_naming_it_and_stores_nothing(
    store: RunStore, sequences: list[int], index: int, sequence: int, previous: int, problem: str, says: str
) -> None:
    before = store.events("run_1")
    batch = [ev(s, type="agent.completed", agent_id=f"ag_{i}") for i, s in enumerate(sequences)]
    with pytest.raises(EventBatchError) as refused:
        store.append_many(batch)
    error = refused.value
    assert (error.run_id, error.index, error.sequence, error.previous, error.problem) == (
        "run_1",
        index,
        sequence,
        previous,
        problem,
    )
    assert str(error).startswith(
        f"run run_1: events refused by the store: event {index} of the batch has sequence {sequence} "
        f"after {previous}, which {says} ({problem})"
    )
    assert "nothing of the batch was stored" in str(error)
    assert store.events("run_1") == before
    assert store.journal("run_1") == []
    store.append_many([ev(3), ev(4, type="agent.completed", agent_id="ag_0")])  # the run goes on
    assert [e.sequence for e in store.events("run_1")] == [1, 2, 3, 4]
    assert [r.agent_id for r in store.journal("run_1")] == ["ag_0"]


def test_a_batch_of_two_runs_is_checked_run_by_run(store: RunStore) -> None:
    store.create_run(record("run_2"))
    store.append_many([ev(3), ev(1, "run_2"), ev(4), ev(2, "run_2")])
    assert [e.sequence for e in store.events("run_1")] == [1, 2, 3, 4]
    assert [e.sequence for e in store.events("run_2")] == [1, 2]
    with pytest.raises(EventBatchError, match=r"run run_2: .* event 3 .* sequence 5 after 3, which skips 4 "):
        store.append_many([ev(5), ev(3, "run_2"), ev(6), ev(5, "run_2")])
    with pytest.raises(
        EventBatchError, match=r"run run_1: .* event 2 .* sequence 5 after 5, which repeats it"
    ):
        store.append_many([ev(5), ev(3, "run_2"), ev(5)])
    assert store.last_sequence("run_1") == 4 and store.last_sequence("run_2") == 2


def test_a_batch_may_start_after_a_hole_a_refused_batch_left_but_never_at_or_before_the_last(
    store: RunStore,
) -> None:
    # A refused batch's sequences are never reused: the run's next batch (its end) starts after them.
    store.append_many([ev(7), ev(8)])
    assert [e.sequence for e in store.events("run_1")] == [1, 2, 7, 8]
    with pytest.raises(SequenceConflictError):
        store.append_many([ev(8), ev(9)])
    assert store.last_sequence("run_1") == 8
