"""Cancelling a run: one test per claim (the run ends cancelled, the events say so in order, every
in-flight provider call gets its signal, and cancelling is idempotent). Engine behaviour, so on the
scripted in-memory realm; a workflow waiting on a realm timer runs on Node."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from workflow_mcp.engine.run import RunHandle
from workflow_mcp.errors import RunFailedError
from workflow_mcp.providers import AgentContext, AgentRequest, AgentResult, FakeProvider
from workflow_mcp.realm.scripted import ScriptedWorkflow

from helpers import RecordingProvider, arun, start, start_scripted

BOUND_S = 20


async def until(handle: RunHandle, event_type: str, n: int = 1) -> None:
    """Wait (bounded) until ``n`` events of ``event_type`` have been logged."""

    async def scan() -> None:
        seen = 0
        async for event in handle.events():
            if event.type == event_type:
                seen += 1
                if seen == n:
                    return
        raise AssertionError(f"the run ended before {n} {event_type} events")

    await asyncio.wait_for(scan(), BOUND_S)


async def one_call(realm: ScriptedWorkflow) -> int:
    await realm.agent("slow", label="slow")
    return 1


def signal_watching_provider(seen: list[str | None]) -> RecordingProvider:
    async def answer(request: AgentRequest, context: AgentContext) -> AgentResult:
        await asyncio.wait_for(context.signal.wait(), BOUND_S)
        seen.append(context.signal.reason)
        raise asyncio.CancelledError(context.signal.reason)

    return RecordingProvider(answer)


def test_cancelling_during_a_long_provider_call_ends_the_run_cancelled_with_events_in_order() -> None:
    async def scenario() -> RunHandle:
        handle = start_scripted(
            one_call, provider=FakeProvider({"default": {"text": "late", "delayMs": 60_000}})
        )
        await until(handle, "agent.started")
        handle.cancel("the user changed their mind")
        await asyncio.wait_for(handle.wait(), BOUND_S)
        return handle

    handle = arun(scenario())
    assert handle.status == "cancelled"
    types = [e.type for e in handle.log.events]
    assert types[-1] == "run.cancelled"
    assert types.count("run.cancellation_requested") == 1
    assert types.index("run.cancellation_requested") < types.index("run.cancelled")
    requested, cancelled = handle.log.events[types.index("run.cancellation_requested")], handle.log.events[-1]
    assert requested.payload["reason"] == "the user changed their mind"
    assert cancelled.payload["reason"] == "the user changed their mind"
    with pytest.raises(RunFailedError) as caught:
        arun(handle.result())
    assert caught.value.status == "cancelled"


def test_every_in_flight_provider_call_sees_its_cancel_signal_with_the_reason() -> None:
    seen: list[str | None] = []

    async def scenario() -> RunHandle:
        async def three(realm: ScriptedWorkflow) -> Any:
            return await realm.parallel(*(lambda i=i: realm.agent(f"p{i}") for i in (1, 2, 3)))

        handle = start_scripted(three, provider=signal_watching_provider(seen), concurrency=3)
        await until(handle, "agent.started", 3)
        handle.cancel("stop now")
        await asyncio.wait_for(handle.wait(), BOUND_S)
        return handle

    handle = arun(scenario())
    assert handle.status == "cancelled"
    assert seen == ["stop now"] * 3


def test_cancelling_twice_requests_cancellation_once() -> None:
    async def scenario() -> RunHandle:
        handle = start_scripted(
            one_call, provider=FakeProvider({"default": {"text": "x", "delayMs": 60_000}})
        )
        await until(handle, "agent.started")
        handle.cancel("first")
        handle.cancel("second")
        await asyncio.wait_for(handle.wait(), BOUND_S)
        return handle

    handle = arun(scenario())
    requested = [e for e in handle.log.events if e.type == "run.cancellation_requested"]
    assert [e.payload["reason"] for e in requested] == ["first"]
    assert handle.log.events[-1].payload["reason"] == "first"


def test_cancelling_a_finished_run_changes_nothing() -> None:
    async def scenario() -> RunHandle:
        async def done(realm: ScriptedWorkflow) -> str:
            return "done"

        handle = start_scripted(done)
        assert await asyncio.wait_for(handle.result(), BOUND_S) == "done"
        handle.cancel("too late")
        return handle

    handle = arun(scenario())
    assert handle.status == "completed"
    assert handle.log.events[-1].type == "run.completed"
    assert not any(e.type == "run.cancellation_requested" for e in handle.log.events)


def test_cancelling_right_after_start_ends_cancelled_without_calling_the_provider() -> None:
    provider = FakeProvider()

    async def scenario() -> RunHandle:
        handle = start_scripted(one_call, provider=provider)
        handle.cancel("never mind")
        await asyncio.wait_for(handle.wait(), BOUND_S)
        return handle

    handle = arun(scenario())
    assert handle.status == "cancelled"
    assert provider.calls == []
    assert handle.log.events[-1].type == "run.cancelled"


def test_cancelling_while_the_workflow_waits_on_a_timer_ends_the_run_cancelled() -> None:
    async def scenario() -> RunHandle:
        handle = start("log('waiting')\nawait new Promise((r) => setTimeout(r, 60_000))\nreturn 1")
        await until(handle, "log")
        handle.cancel("bored")
        await asyncio.wait_for(handle.wait(), BOUND_S)
        return handle

    assert arun(scenario()).status == "cancelled"
