"""``project_state``: the pure projection of a run's events to its state, the incremental projector it
uses, and the one status vocabulary."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from workflow_mcp import Event, FakeProvider, RunOptions, load_workflow, project_state, run_workflow
from workflow_mcp.state import (
    RESUMABLE,
    RUN_STATUSES,
    STATUS_OF_EVENT,
    TERMINAL,
    TERMINAL_EVENTS,
    RunState,
    StateProjector,
    status_of,
)

from helpers import PAUSES, STOPPED, STOPPED_SCRIPT, LoggedOutAfterFirst

BODY = """export const meta = {
  name: 'state-demo', description: 'phases, logs, agents', phases: [{ title: 'A' }, { title: 'B' }],
}
phase('A')
log('first line')
const a = await parallel([() => agent('one', { label: 'one' }), () => agent('two', { label: 'two' })])
phase('B')
const b = await agent('three', { label: 'three' })
const c = await agent('four', { label: 'api' })
return { a, b, c }
"""
SCRIPT = {
    "rules": [
        {
            "match": {"label": "api"},
            "respond": {"fail": "provider", "message": "HTTP 500", "tokens": {"output": 1}},
        }
    ],
    "default": {"echo": True, "tokens": {"input": 10, "output": 3, "cacheRead": 2}},
}


def run_events(source: str, script: dict[str, Any] | None = None) -> list[Event]:
    async def scenario() -> list[Event]:
        handle = run_workflow(
            load_workflow(source=source), provider=FakeProvider(script), options=RunOptions(concurrency=2)
        )
        await asyncio.wait_for(handle.wait(), 60)
        return handle.log.events

    return asyncio.run(scenario())


@pytest.fixture(scope="module")
def completed() -> list[Event]:
    return run_events(BODY, SCRIPT)


def test_projecting_the_same_events_twice_gives_equal_states_and_leaves_the_events_untouched(
    completed: list[Event],
) -> None:
    before = copy.deepcopy([e.to_json() for e in completed])
    first = project_state(completed).to_json()
    second = project_state(list(completed)).to_json()
    assert first == second
    assert [e.to_json() for e in completed] == before


@pytest.mark.parametrize("cut", [1, 5, -1])
def test_folding_a_log_in_two_parts_gives_the_state_of_folding_it_at_once(
    completed: list[Event], cut: int
) -> None:
    head = project_state(completed[:cut])
    continued = project_state(completed[cut:], into=head)
    assert continued is head
    assert continued.to_json() == project_state(completed).to_json()


def test_the_state_of_a_completed_run_has_its_result_counts_phases_and_logs(completed: list[Event]) -> None:
    state = project_state(completed)
    doc = state.to_json()
    assert doc["status"] == "completed"
    assert state.terminal
    assert doc["result"] == {"a": ["one", "two"], "b": "three", "c": None}
    assert doc["counts"] == {
        "queued": 0,
        "running": 0,
        "completed": 3,
        "failed": 1,
        "cancelled": 0,
        "cached": 0,
    }
    assert doc["phases"] == [{"title": "A", "status": "completed"}, {"title": "B", "status": "completed"}]
    assert doc["currentPhase"] == "B"
    assert doc["logs"][0] == "first line"
    assert any("HTTP 500" in line for line in doc["logs"])
    assert doc["tokenUsage"] == {
        "input": 30,
        "output": 10,
        "cacheRead": 6,
        "cacheWrite": 0,
        "replayedOutput": 0,
    }
    assert doc["workflow"]["name"] == "state-demo"
    assert doc["startedAt"] and doc["endedAt"]
    assert doc["lastSequence"] == completed[-1].sequence
    assert "error" not in doc
    labels = {a["label"]: a for a in doc["agents"]}
    assert labels["one"]["preview"] == "one" and labels["one"]["phase"] == "A"
    assert labels["api"]["state"] == "failed"


def test_a_prefix_of_the_events_projects_a_running_state_without_a_result(completed: list[Event]) -> None:
    cut = next(i for i, e in enumerate(completed) if e.type == "agent.started") + 1
    doc = project_state(completed[:cut]).to_json()
    assert doc["status"] == "running"
    assert "result" not in doc
    assert doc["counts"]["running"] == 1
    assert doc["endedAt"] is None


def test_the_state_of_a_failed_run_carries_the_error_and_no_result() -> None:
    events = run_events("export const meta = { name: 'f', description: 'd' }\nthrow new RangeError('out')")
    doc = project_state(events).to_json()
    assert doc["status"] == "failed"
    assert doc["error"]["name"] == "RangeError" and doc["error"]["message"] == "out"
    assert "result" not in doc


def ev(seq: int, type: str, payload: dict[str, Any] | None = None, agent_id: str | None = None) -> Event:
    return Event(run_id="run_x", sequence=seq, type=type, payload=payload or {}, agent_id=agent_id)


def test_replayed_tokens_are_kept_apart_from_live_tokens() -> None:
    usage = {"input": 5, "output": 7}
    events = [
        ev(1, "run.started", {"workflow": {"name": "w"}}),
        ev(2, "agent.queued", {"label": "a", "phase": None}, "ag_1"),
        ev(3, "agent.cached", {"label": "a", "result": "r", "tokenUsage": usage}, "ag_1"),
        ev(4, "agent.queued", {"label": "b", "phase": None}, "ag_2"),
        ev(5, "agent.started", {"label": "b"}, "ag_2"),
        ev(6, "agent.completed", {"label": "b", "result": "s", "tokenUsage": usage}, "ag_2"),
    ]
    doc = project_state(events).to_json()
    assert doc["tokenUsage"]["output"] == 7
    assert doc["tokenUsage"]["input"] == 5
    assert doc["tokenUsage"]["replayedOutput"] == 7
    assert doc["counts"]["cached"] == 1 and doc["counts"]["completed"] == 1
    assert [a["cached"] for a in doc["agents"]] == [True, False]


@pytest.mark.parametrize(
    ("types", "status"),
    [
        (["run.queued"], "queued"),
        (["run.started"], "running"),
        (["run.started", "run.paused"], "paused"),
        (["run.started", "run.paused", "run.resumed"], "running"),
        (["run.started", "run.cancellation_requested"], "running"),
        (["run.started", "run.cancellation_requested", "run.cancelled"], "cancelled"),
        (["run.started", "run.interrupted"], "interrupted"),
        (["run.started", "run.completed"], "completed"),
        (["run.started", "run.failed"], "failed"),
    ],
)
def test_status_is_whatever_the_run_events_say(types: list[str], status: str) -> None:
    events = [ev(i + 1, t) for i, t in enumerate(types)]
    assert project_state(events).status == status


def test_a_paused_run_reports_why_until_it_resumes() -> None:
    paused = [ev(1, "run.started"), ev(2, "run.paused", {"reason": "auth required"})]
    assert project_state(paused).to_json()["pausedReason"] == "auth required"
    assert "pausedReason" not in project_state([*paused, ev(3, "run.resumed")]).to_json()


def test_projecting_no_events_needs_a_run_id() -> None:
    with pytest.raises(ValueError):
        project_state([])
    assert project_state([], run_id="run_empty").to_json()["status"] == "queued"


def test_agent_counts_always_cover_every_state_and_sum_to_the_calls(completed: list[Event]) -> None:
    counts = project_state(completed).counts()
    assert list(counts) == ["queued", "running", "completed", "failed", "cancelled", "cached"]
    assert sum(counts.values()) == len(project_state(completed).agents)


def cancelled_events() -> list[Event]:
    """A run of four calls at concurrency 2: one fails, two run until the run is cancelled, one is still
    queued when it is."""

    async def scenario() -> list[Event]:
        handle = run_workflow(
            load_workflow(source=STOPPED),
            provider=FakeProvider(STOPPED_SCRIPT),
            options=RunOptions(concurrency=2),
        )

        async def two_running_one_failed() -> None:
            started = failed = 0
            async for event in handle.events():
                started += event.type == "agent.started"
                failed += event.type == "agent.failed"
                if started == 3 and failed == 1:
                    return

        await asyncio.wait_for(two_running_one_failed(), 60)
        handle.cancel("stopped by the test")
        await asyncio.wait_for(handle.wait(), 60)
        return handle.log.events

    return asyncio.run(scenario())


def test_calls_stopped_by_cancelling_their_run_are_counted_cancelled_not_failed() -> None:
    events = cancelled_events()
    stopped = [e for e in events if e.type == "agent.failed" and e.payload["reason"] == "cancelled"]
    assert len(stopped) == 2  # the event contract is unchanged: agent.failed, reason cancelled
    state = project_state(events)
    assert state.status == "cancelled"
    assert state.counts() == {
        "queued": 0,
        "running": 0,
        "completed": 0,
        "failed": 1,
        "cancelled": 3,  # the two running calls, and the one still queued when the run ended
        "cached": 0,
    }
    by_label = {a.label: a.state for a in state.agents.values()}
    assert by_label == {
        "broken": "failed",
        "slow-1": "cancelled",
        "slow-2": "cancelled",
        "slow-3": "cancelled",
    }


@pytest.fixture(scope="module")
def recorded_logs(completed: list[Event]) -> dict[str, list[Event]]:
    """Event logs recorded from real runs (the real Node realm and engine): completed with a failed
    call, failed, cancelled with calls in flight and queued, paused for a login, and resumed with
    replayed calls."""

    async def paused_then_resumed() -> tuple[list[Event], list[Event]]:
        from workflow_mcp import MemoryStore, WorkflowService

        service = WorkflowService(MemoryStore())
        wf = load_workflow(source=PAUSES)
        first = service.start_run(wf, provider=LoggedOutAfterFirst())
        await asyncio.wait_for(first.wait(), 60)
        second = service.start_run(
            wf, provider=FakeProvider({"default": {"echo": True}}), resume_from=first.run_id
        )
        await asyncio.wait_for(second.wait(), 60)
        return first.log.events, second.log.events

    paused, resumed = asyncio.run(paused_then_resumed())
    return {
        "completed": completed,
        "failed": run_events(
            "export const meta = { name: 'f', description: 'd' }\nthrow new RangeError('out')"
        ),
        "cancelled": cancelled_events(),
        "paused": paused,
        "resumed": resumed,
    }


def test_a_recorded_log_folded_one_event_at_a_time_gives_the_projection_of_every_prefix(
    recorded_logs: dict[str, list[Event]],
) -> None:
    for name, log in recorded_logs.items():
        assert project_state(log).status == name if name != "resumed" else "completed"
        projector = StateProjector(RunState(run_id=log[0].run_id))
        for k, event in enumerate(log, start=1):
            projector.apply(event)
            whole = project_state(log[:k])
            assert projector.state.to_json() == whole.to_json(), (name, k, event.type)
            counts = projector.state.counts()
            recount = {s: sum(1 for a in whole.agents.values() if a.state == s) for s in counts}
            assert counts == recount, (name, k)
            # any split point: folding the rest into the head gives the same state too
            head = project_state(log[:k])
            assert project_state(log[k:], into=head).to_json() == project_state(log).to_json(), (name, k)


def test_a_copy_of_a_state_does_not_change_with_later_events(completed: list[Event]) -> None:
    cut = len(completed) // 2
    projector = StateProjector(project_state(completed[:cut]))
    snapshot = projector.state.copy()
    before = snapshot.to_json()
    projector.apply_all(completed[cut:])
    assert snapshot.to_json() == before
    assert snapshot.to_json() == project_state(completed[:cut]).to_json()
    assert projector.state.to_json() == project_state(completed).to_json()


@pytest.mark.parametrize(
    ("newest", "status"),
    [
        (None, "queued"),
        ("run.started", "running"),
        ("run.paused", "paused"),
        ("run.interrupted", "interrupted"),
        ("run.cancelled", "cancelled"),
    ],
)
def test_a_runs_newest_status_event_names_its_status(newest: str | None, status: str) -> None:
    assert status_of(newest) == status


def test_the_status_vocabulary_says_which_statuses_have_ended_and_which_resume() -> None:
    assert set(RUN_STATUSES) - TERMINAL == {"queued", "running"}
    assert TERMINAL - {"completed"} == RESUMABLE
    assert {t for t, s in STATUS_OF_EVENT.items() if s in TERMINAL} == TERMINAL_EVENTS
    assert "run.paused" in TERMINAL_EVENTS and "run.cancellation_requested" not in STATUS_OF_EVENT


PHASE_LIST = """export const meta = {
  name: 'phase-list', description: 'meta phases, phase() and agent phase options',
  phases: [{ title: 'Scan' }, { title: 'Fix' }, { title: 'Unused' }],
}
phase('Scan')
await agent('in scan')
await agent('adhoc', { phase: 'Adhoc' })
phase('New')
const pending = agent('in new')
return await pending
"""


def test_the_phase_list_holds_meta_phases_first_then_new_titles_from_phase_and_agent_options() -> None:
    state = project_state(run_events(PHASE_LIST)).to_json()
    # a meta phase no agent ran in is still listed, and never entered
    assert state["phases"] == [
        {"title": "Scan", "status": "completed"},
        {"title": "Fix", "status": "pending"},
        {"title": "Unused", "status": "pending"},
        {"title": "Adhoc", "status": "completed"},
        {"title": "New", "status": "completed"},
    ]
    assert state["currentPhase"] == "New"


def test_a_meta_phase_is_pending_until_an_agent_runs_in_it_and_then_current() -> None:
    events = run_events(PHASE_LIST)
    first_agent = next(i for i, e in enumerate(events) if e.type == "agent.queued")
    before = project_state(events[:first_agent]).to_json()
    assert [p["status"] for p in before["phases"]] == ["pending", "pending", "pending"]
    assert before["currentPhase"] is None
    entered = project_state(events[: first_agent + 1]).to_json()
    assert entered["phases"][0] == {"title": "Scan", "status": "running"}
    assert entered["currentPhase"] == "Scan"


@pytest.mark.parametrize("end", ["run.paused", "run.interrupted"])
def test_a_phase_still_running_when_its_run_pauses_or_is_interrupted_takes_that_status(end: str) -> None:
    events = [
        ev(1, "run.started", {"workflow": {"name": "w"}, "phases": ["Plan", "Work"]}),
        ev(2, "agent.queued", {"label": "a", "phase": "Plan"}, "ag_1"),
        ev(3, "agent.completed", {"label": "a", "phase": "Plan", "result": "r"}, "ag_1"),
        ev(4, "phase.started", {"title": "Work", "source": "phase"}),
        ev(5, "agent.queued", {"label": "b", "phase": "Work"}, "ag_2"),
        ev(6, end, {"reason": "usage_limit"} if end == "run.paused" else {}),
    ]
    assert project_state(events[:-1]).phases == [
        {"title": "Plan", "status": "running"},
        {"title": "Work", "status": "running"},
    ]
    ended = end.removeprefix("run.")
    assert project_state(events).phases == [
        {"title": "Plan", "status": ended},
        {"title": "Work", "status": ended},
    ]


def test_a_resumed_pause_runs_its_phases_on() -> None:
    events = [
        ev(1, "run.started", {"workflow": {"name": "w"}}),
        ev(2, "phase.started", {"title": "Work", "source": "phase"}),
        ev(3, "run.paused", {"reason": "usage_limit"}),
        ev(4, "run.resumed"),
    ]
    assert project_state(events).phases == [{"title": "Work", "status": "running"}]
