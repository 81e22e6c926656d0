"""The scheduler: the concurrency limit and what a run reports about it (engine behaviour, so on the
scripted in-memory realm; slot order is the realm's and runs on Node)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

import pytest

from workflow_mcp.definitions.profile import default_concurrency
from workflow_mcp.providers import AgentContext, AgentRequest, AgentResult, FakeProvider
from workflow_mcp.realm.scripted import ScriptedWorkflow

from helpers import RecordingProvider, run_scripted, run_source


@dataclass
class Occupancy:
    limit: int
    active: int = 0
    peak: int = 0


def gated_provider(occupancy: Occupancy) -> RecordingProvider:
    """Each call waits until ``limit`` calls are in flight at once (then the gate stays open), so a
    scheduler that admits more than ``limit`` is caught with all of them in flight."""
    gate = asyncio.Event()

    async def answer(request: AgentRequest, context: AgentContext) -> AgentResult:
        occupancy.active += 1
        occupancy.peak = max(occupancy.peak, occupancy.active)
        if occupancy.active >= occupancy.limit:
            gate.set()
        try:
            await gate.wait()
        finally:
            occupancy.active -= 1
        return AgentResult(text=request.prompt)

    return RecordingProvider(answer)


@pytest.mark.parametrize("limit", [1, 3, 5])
def test_no_more_than_the_concurrency_limit_of_provider_calls_run_at_once(limit: int) -> None:
    occupancy = Occupancy(limit)
    provider = gated_provider(occupancy)

    async def script(realm: ScriptedWorkflow) -> Any:
        return await realm.parallel(*(lambda i=i: realm.agent(f"p{i}") for i in range(12)))

    outcome = run_scripted(script, provider=provider, concurrency=limit)
    assert outcome.result == [f"p{i}" for i in range(12)]
    assert occupancy.peak == limit
    assert len(provider.calls) == 12
    (started,) = outcome.of("run.started")
    assert started.payload["concurrency"] == limit


def test_nested_fan_outs_share_the_one_concurrency_limit() -> None:
    occupancy = Occupancy(4)
    provider = gated_provider(occupancy)

    async def script(realm: ScriptedWorkflow) -> Any:
        def inner(i: int) -> Awaitable[list[Any]]:
            return realm.parallel(*(lambda j=j: realm.agent(f"{i}:{j}") for j in range(3)))

        return await realm.parallel(*(lambda i=i: inner(i) for i in range(3)))

    outcome = run_scripted(script, provider=provider, concurrency=4)
    assert outcome.result == [[f"{i}:{j}" for j in range(3)] for i in range(3)]
    assert occupancy.peak == 4


def test_without_a_limit_the_run_uses_the_profile_default_concurrency() -> None:
    async def script(realm: ScriptedWorkflow) -> int:
        return 1

    outcome = run_scripted(script, provider=FakeProvider())
    (started,) = outcome.of("run.started")
    assert started.payload["concurrency"] == default_concurrency()
    assert 2 <= started.payload["concurrency"] <= 16


@pytest.mark.parametrize(("cpus", "expected"), [(1, 2), (4, 2), (6, 4), (18, 16), (64, 16)])
def test_the_default_concurrency_is_min_16_max_2_cpus_minus_2(cpus: int, expected: int) -> None:
    assert default_concurrency(cpus=cpus) == expected


def test_results_keep_slot_order_whatever_order_calls_finish_in() -> None:
    order: list[str] = []
    release = {name: asyncio.Event() for name in ("a", "b", "c")}

    async def answer(request: AgentRequest, context: AgentContext) -> AgentResult:
        # c finishes first, then b, then a: each finishing call releases the one before it.
        if request.prompt == "c":
            release["c"].set()
        await release[request.prompt].wait()
        order.append(request.prompt)
        if request.prompt == "c":
            release["b"].set()
        elif request.prompt == "b":
            release["a"].set()
        return AgentResult(text=request.prompt.upper())

    outcome = run_source(
        "return await parallel(['a', 'b', 'c'].map((p) => () => agent(p)))",
        provider=RecordingProvider(answer),
        concurrency=3,
    )
    assert outcome.result == ["A", "B", "C"]
    assert order == ["c", "b", "a"]
