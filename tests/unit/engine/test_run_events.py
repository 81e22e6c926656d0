"""The event contract of a run: the envelope, the order of families, and the agent lifecycle."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from workflow_mcp import MemoryStore, RunFailedError, WorkflowService
from workflow_mcp.engine.run import RunOptions
from workflow_mcp.events import EVENT_TYPES, Event
from workflow_mcp.providers import FakeProvider
from workflow_mcp.realm.scripted import ScriptedWorkflow
from workflow_mcp.state import TERMINAL_EVENTS

from helpers import Outcome, arun, run_source, start_scripted, workflow

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")

# One run that touches every family: phases, logs, a fan-out, schema re-asks, every failure mode
# and a budget refusal.
MIXED = """
phase('One')
log('hello')
const s = { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] }
const a = await parallel([
  () => agent('ok'),
  () => agent('api', { label: 'api' }),
  () => agent('skip', { label: 'skip' }),
  () => agent('err', { label: 'err' }),
  () => agent('re-asked', { label: 'reask', schema: s }),
  () => agent('bad schema', { schema: 5 }),
])
phase('Two')
await agent('spend', { label: 'spend' })
let refused = 'no'
try { await agent('refused') } catch (e) { refused = 'yes' }
return { a, refused }
"""
MIXED_SCRIPT = {
    "rules": [
        {"match": {"label": "api"}, "respond": {"fail": "provider", "message": "HTTP 500"}},
        {"match": {"label": "skip"}, "respond": {"fail": "skip"}},
        {"match": {"label": "err"}, "respond": {"fail": "error", "message": "disk full"}},
        {
            "match": {"label": "reask"},
            "respond": {"sequence": [{"result": {"n": "x"}}, {"result": {"n": 2}}]},
        },
        {"match": {"label": "spend"}, "respond": {"text": "spent", "tokens": {"output": 500}}},
    ],
    "default": {"echo": True},
}


@pytest.fixture(scope="module")
def mixed() -> tuple[Outcome, FakeProvider]:
    provider = FakeProvider(MIXED_SCRIPT)
    outcome = run_source(MIXED, provider=provider, token_budget=100, concurrency=3)
    assert outcome.status == "completed", outcome.error
    assert outcome.result == {"a": ["ok", None, None, None, {"n": 2}, None], "refused": "yes"}
    return outcome, provider


def test_sequences_run_from_1_without_gaps_and_event_ids_are_run_id_colon_sequence(
    mixed: tuple[Outcome, FakeProvider],
) -> None:
    outcome, _ = mixed
    run_id = outcome.handle.run_id
    assert [e.sequence for e in outcome.events] == list(range(1, len(outcome.events) + 1))
    for e in outcome.events:
        envelope = e.to_json()
        assert envelope["runId"] == run_id
        assert envelope["eventId"] == f"{run_id}:{e.sequence}"
        assert envelope["schemaVersion"] == 1
        assert e.type in EVENT_TYPES
        assert TIMESTAMP.match(e.timestamp), e.timestamp
        assert Event.from_json(envelope) == e
    stamps = [e.timestamp for e in outcome.events]
    assert stamps == sorted(stamps)


def test_a_run_starts_with_run_started_and_ends_with_exactly_one_terminal_event(
    mixed: tuple[Outcome, FakeProvider],
) -> None:
    outcome, _ = mixed
    types = outcome.types()
    assert types[0] == "run.started"
    assert types[-1] == "run.completed"
    assert sum(1 for t in types if t in TERMINAL_EVENTS) == 1
    assert outcome.of("run.completed")[0].payload["result"] == outcome.result


def test_agent_started_appears_only_for_calls_that_reached_the_provider(
    mixed: tuple[Outcome, FakeProvider],
) -> None:
    outcome, provider = mixed
    started = [e.agent_id for e in outcome.of("agent.started")]
    assert len(started) == len(set(started))
    assert set(started) == {c.agent_id for c in provider.calls}
    # a schema re-ask is another provider call of the same agent, not another agent
    assert len(provider.calls) == len(started) + 1


def test_every_queued_agent_ends_in_exactly_one_of_completed_failed_or_cached(
    mixed: tuple[Outcome, FakeProvider],
) -> None:
    outcome, _ = mixed
    ends = ("agent.completed", "agent.failed", "agent.cached")
    queued = {e.agent_id: e.sequence for e in outcome.of("agent.queued")}
    assert queued
    for agent_id, at in queued.items():
        own = [e for e in outcome.events if e.agent_id == agent_id]
        assert own[0].type == "agent.queued" and own[0].sequence == at
        assert [e.type for e in own if e.type in ends] == [own[-1].type]
        assert own[-1].type in ends
    agent_events = [e for e in outcome.events if e.type.startswith("agent.")]
    assert all(e.agent_id in queued for e in agent_events)


def test_agent_events_carry_their_phase_and_the_failure_reason(mixed: tuple[Outcome, FakeProvider]) -> None:
    outcome, _ = mixed
    for e in outcome.events:
        if e.type in ("agent.queued", "agent.started", "agent.completed", "agent.failed"):
            assert e.phase_id == e.payload["phase"]
    reasons = {e.payload["label"]: e.payload["reason"] for e in outcome.of("agent.failed")}
    assert reasons == {"api": "provider_failed", "err": "error"}
    outcomes = {e.payload["label"]: e.payload["outcome"] for e in outcome.of("agent.completed")}
    assert outcomes["skip"] == "skipped"
    assert outcomes["reask"] == "completed"
    assert [e.payload["title"] for e in outcome.of("phase.started")] == ["One", "Two"]


def test_a_live_subscriber_sees_exactly_the_logged_events_and_can_start_after_a_sequence() -> None:
    async def scenario() -> tuple[list[Event], list[Event], list[Event]]:
        async def script(realm: ScriptedWorkflow) -> int:
            realm.log("a")
            await realm.agent("x")
            realm.log("b")
            return 1

        handle = start_scripted(script)
        live = [e async for e in handle.events()]
        tail = [e async for e in handle.events(after=3)]
        return live, tail, handle.log.events

    live, tail, logged = arun(scenario())
    assert live == logged
    assert tail == [e for e in logged if e.sequence > 3]


def test_a_failed_run_ends_with_run_failed_carrying_the_error_name_and_message() -> None:
    outcome = run_source("throw new TypeError('bad input')")
    assert outcome.types()[-1] == "run.failed"
    assert outcome.failure["name"] == "TypeError"
    assert outcome.failure["message"] == "bad input"
    # the message names where it was thrown (the inline source's line 2, column 7)
    assert outcome.error == "TypeError: bad input (at workflow.js:2:7)"
    assert outcome.failure["location"] == {
        "path": None,
        "line": 2,
        "column": 7,
        "reported": "workflow.js:2:7",
    }
    with pytest.raises(RunFailedError):
        arun(outcome.handle.result())


def test_a_replayed_call_is_cached_and_never_started(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[Event], list[Event], FakeProvider]:
        service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
        wf = workflow("const a = await agent('one')\nconst b = await agent('two')\nreturn [a, b]")
        first = service.start_run(wf, provider=FakeProvider({"default": {"echo": True}}))
        await asyncio.wait_for(first.result(), 30)
        provider = FakeProvider({"default": {"text": "never"}})
        again = service.start_run(
            wf, provider=provider, resume_from=first.run_id, options=RunOptions(cwd=str(tmp_path))
        )
        assert await asyncio.wait_for(again.result(), 30) == ["one", "two"]
        return first.log.events, again.log.events, provider

    first, again, provider = arun(scenario())
    assert provider.calls == []
    # Replayed in the realm (the Node worker): each call's agent.cached as it is taken, each
    # delivery of its result an agent.delivered.
    assert [e.type for e in again if e.type.startswith("agent.")] == [
        "agent.cached",
        "agent.delivered",
        "agent.cached",
        "agent.delivered",
    ]
    recorded = {e.payload["key"]: e.agent_id for e in first if e.type == "agent.completed"}
    for cached in (e for e in again if e.type == "agent.cached"):
        assert cached.payload["fromAgentId"] == recorded[cached.payload["key"]]
