"""A recorded result is checked before it is replayed, from our own store as from a Claude import: one
that does not fit the call (wrong shape for its schema, not a string for a text call, NaN, nested too
deeply) runs live with a ``warning`` event, and under ``prefix`` ends the replayed prefix."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from workflow_mcp.engine.journal import JournalRecord, Replay, ResumePolicy
from workflow_mcp.engine.run import records_from_events, run_workflow
from workflow_mcp.providers import AgentContext, AgentRequest, AgentResult

from helpers import Outcome, RecordingProvider, arun, finish, run_source, workflow

SCHEMA = "{ type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] }"
BODY = f"""
const first = await agent('count', {{ label: 'first', schema: {SCHEMA} }})
const second = await agent('say', {{ label: 'second' }})
return [first, second]
"""


def answering() -> RecordingProvider:
    async def answer(request: AgentRequest, context: AgentContext) -> AgentResult:
        if request.schema is not None:
            return AgentResult(structured={"n": 7}, has_structured=True)
        return AgentResult(text="said")

    return RecordingProvider(answer)


def recorded() -> list[JournalRecord]:
    outcome = run_source(BODY, provider=answering())
    assert outcome.result == [{"n": 7}, "said"]
    return records_from_events(outcome.events)


def resumed(
    records: list[JournalRecord], policy: ResumePolicy = "content"
) -> tuple[Outcome, RecordingProvider]:
    provider = answering()

    async def go() -> Outcome:
        return await finish(run_workflow(workflow(BODY), provider=provider, replay=Replay(records, policy)))

    outcome = arun(go())
    assert outcome.status == "completed", outcome.error
    assert outcome.result == [{"n": 7}, "said"]
    return outcome, provider


def with_result(records: list[JournalRecord], label: str, result: Any) -> list[JournalRecord]:
    return [dataclasses.replace(r, result=result) if r.label == label else r for r in records]


def test_untouched_records_replay_without_a_warning() -> None:
    outcome, provider = resumed(recorded())
    assert provider.calls == [] and outcome.of("warning") == []


@pytest.mark.parametrize(
    ("label", "result", "says"),
    [
        (
            "first",
            {"n": "seven"},
            "does not match the call's schema (/n: must be integer)",
        ),
        ("first", {"m": 1}, "does not match the call's schema (root: must have required property 'n')"),
        (
            "second",
            {"text": "said"},
            "a call without a schema resolves to a string, but the record holds an object",
        ),
        ("second", float("nan"), "it holds NaN, which JSON does not allow"),
    ],
    ids=["wrong-type", "missing-key", "object-for-text", "nan"],
)
def test_a_recorded_result_that_does_not_fit_its_call_runs_live_with_a_warning(
    label: str, result: Any, says: str
) -> None:
    outcome, provider = resumed(with_result(recorded(), label, result))
    warnings = [str(e.payload["message"]) for e in outcome.of("warning")]
    assert [r.label for r in provider.calls] == [label]
    (warning,) = warnings
    assert warning.startswith(f"[{label}] the recorded result is not replayed: ") and says in warning
    assert warning.endswith("the call runs live")


def test_a_result_nested_deeper_than_the_realm_ever_sends_runs_live() -> None:
    deep: Any = {"n": 1}
    for _ in range(300):
        deep = {"n": 1, "x": deep}
    outcome, provider = resumed(with_result(recorded(), "first", deep))
    assert [r.label for r in provider.calls] == ["first"]
    assert "nested deeper than 256 levels" in str(outcome.of("warning")[0].payload["message"])


def test_under_the_prefix_policy_a_refused_record_ends_the_replayed_prefix() -> None:
    outcome, provider = resumed(with_result(recorded(), "first", {"n": "x"}), policy="prefix")
    assert [r.label for r in provider.calls] == ["first", "second"]
    assert [e.payload["label"] for e in outcome.of("agent.cached")] == []


def test_a_live_structured_output_holding_nan_is_asked_again() -> None:
    answers = iter([{"n": float("nan")}, {"n": 3}])

    async def answer(request: AgentRequest, context: AgentContext) -> AgentResult:
        return AgentResult(structured=next(answers), has_structured=True)

    provider = RecordingProvider(answer)
    outcome = run_source(f"return await agent('count', {{ schema: {SCHEMA} }})", provider=provider)
    assert outcome.result == {"n": 3}
    assert len(provider.calls) == 2 and "NaN" in str(provider.calls[1].feedback)


def test_a_schema_too_deep_to_check_rejects_the_call_with_a_clear_message() -> None:
    body = """
let s = { type: 'string' }
for (let i = 0; i < 250; i++) s = { type: 'array', items: s }
try { await agent('x', { schema: s }) } catch (e) { return [e.name, e.message] }
"""
    outcome = run_source(body)
    assert outcome.status == "completed", outcome.error
    name, message = outcome.result
    assert name == "TelemetrySafeError"
    assert message == (
        "agent({schema}) received an invalid JSON Schema: the schema is nested too deeply to check against "
        "the draft-07 meta-schema; flatten it (name repeated parts under $defs and use $ref)"
    )
