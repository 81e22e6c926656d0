"""The engine's AgentRequest and AgentContext values: built without the frozen dataclass's per-field setattr calls,
and equal to what the dataclass builds, every field set."""

from __future__ import annotations

import dataclasses
from typing import Any

from workflow_mcp.engine.calls import agent_request
from workflow_mcp.providers import AgentContext, AgentRequest, AgentResult
from workflow_mcp.realm.scripted import ScriptedWorkflow

from helpers import RecordingProvider, run_scripted

FIELDS = {f.name for f in dataclasses.fields(AgentRequest)}


def test_an_agent_request_is_the_one_the_dataclass_builds_with_every_default_filled() -> None:
    given: dict[str, Any] = {
        "prompt": "p",
        "label": "l",
        "run_id": "run_1",
        "attempt": 2,
        "feedback": "again",
    }
    built = agent_request(**given)
    assert built == AgentRequest(**given)
    assert set(vars(built)) == FIELDS
    assert built.options == {} and built.options is not agent_request(**given).options  # a fresh dict
    every = {name: getattr(AgentRequest(prompt="q", label="m", options={"a": 1}), name) for name in FIELDS}
    assert agent_request(**every) == AgentRequest(**every)


def test_the_request_the_engine_sends_a_provider_has_every_field_of_the_dataclass() -> None:
    async def answer(request: AgentRequest, context: AgentContext) -> AgentResult:
        return AgentResult(text="ok")

    provider = RecordingProvider(answer)

    async def script(realm: ScriptedWorkflow) -> object:
        return await realm.agent("hello", label="greet", model="opus", stallMs=1000)

    outcome = run_scripted(script, provider=provider)
    assert outcome.result == "ok"
    (request,) = provider.calls
    assert set(vars(request)) == FIELDS
    assert request == AgentRequest(**{name: getattr(request, name) for name in FIELDS})
    assert (request.prompt, request.label, request.model, request.stall_ms) == (
        "hello",
        "greet",
        "opus",
        1000,
    )


def test_the_context_the_engine_gives_a_provider_is_the_one_the_dataclass_builds() -> None:
    seen: list[AgentContext] = []

    async def answer(request: AgentRequest, context: AgentContext) -> AgentResult:
        seen.append(context)
        return AgentResult(text="ok")

    async def script(realm: ScriptedWorkflow) -> object:
        return await realm.agent("hello")

    assert run_scripted(script, provider=RecordingProvider(answer)).result == "ok"
    (context,) = seen
    names = {f.name for f in dataclasses.fields(AgentContext)}
    assert set(vars(context)) == names
    assert context == AgentContext(**{name: getattr(context, name) for name in names})
    assert context.checkpoint is not None and not context.signal.cancelled
