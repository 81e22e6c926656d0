"""A resumed run releases replayed results in the order the original run completed them: workflow state that depends on completion order replays identically, and a record the new run
never asks for holds the others only until the run can make no other progress."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from replayed import calls, interleaved, released, released_turns
from workflow_mcp import MemoryStore, WorkflowService
from workflow_mcp.events import Event
from workflow_mcp.service import ProviderChoice, RunOverrides

BOUND_S = 60.0

# The shape of conformance case pipeline-barrier-free: item a may go through every stage while item b
# is still in its first, and `trace` records the order the stages finished in.
PIPELINE = (
    "export const meta = { name: 'barrier-free', description: 'stages finish in completion order' }\n"
    "const trace = []\n"
    "const results = await pipeline(\n"
    "  ['a', 'b'],\n"
    "  async (item) => { const r = await agent('inspect ' + item, { label: 'inspect:' + item }); "
    "trace.push(item + '1'); return r },\n"
    "  async (prev, item) => { const r = await agent('verify ' + prev, { label: 'verify:' + item }); "
    "trace.push(item + '2'); return r },\n"
    ")\n"
    "return { results, trace }\n"
)


def slow(label: str, ms: int = 300) -> dict[str, Any]:
    """A fake script in which the call labelled ``label`` answers ``ms`` later than the others."""
    return {
        "rules": [{"match": {"label": label}, "respond": {"echo": True, "delayMs": ms}}],
        "default": {"echo": True},
    }


def arun(coro: Coroutine[Any, Any, Any]) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(coro, BOUND_S)

    return asyncio.run(bounded())


def labels(events: list[Event], kind: str) -> list[str]:
    return [str(e.payload.get("label")) for e in events if e.type == kind]


async def run(service: WorkflowService, path: str, script: dict[str, Any]) -> tuple[str, Any]:
    handle = await service.start(path, provider=ProviderChoice("fake", script))
    return handle.run_id, await handle.result()


async def resume(service: WorkflowService, run_id: str, script: dict[str, Any]) -> tuple[str, Any]:
    handle = await service.resume(run_id, RunOverrides(provider=ProviderChoice("fake", script)))
    return handle.run_id, await handle.result()


def test_a_resume_replays_the_original_completion_order_whatever_order_it_asks_in(tmp_path: Path) -> None:
    path = tmp_path / "wf.js"
    path.write_text(PIPELINE)
    service = WorkflowService(MemoryStore(), cwd=str(tmp_path))

    async def go() -> tuple[Any, Any, Any, list[Event], list[Event]]:
        first_id, first = await run(service, str(path), slow("inspect:a"))  # b goes first
        second_id, second = await resume(service, first_id, slow("inspect:b"))  # would let a go first
        third_id, third = await resume(service, second_id, {})  # a resume of the resume
        return first, second, third, service.events(second_id), service.events(third_id)

    first, second, third, resumed, again = arun(go())
    assert first["trace"] == ["b1", "b2", "a1", "a2"]
    assert second == first and third == first
    assert labels(resumed, "agent.started") == [] and labels(again, "agent.started") == []
    assert [label for label, _ in released(resumed)] == ["inspect:b", "verify:b", "inspect:a", "verify:a"]
    assert [label for label, _ in released(again)] == ["inspect:b", "verify:b", "inspect:a", "verify:a"]


def test_a_record_the_resumed_run_never_asks_for_holds_the_others_only_until_nothing_else_can_run(
    tmp_path: Path,
) -> None:
    path = tmp_path / "wf.js"
    path.write_text(PIPELINE)
    service = WorkflowService(MemoryStore(), cwd=str(tmp_path))

    async def go() -> tuple[Any, Any, list[Event]]:
        first_id, first = await run(service, str(path), slow("inspect:a"))
        # b's first stage asks another question now: its record (completed first) is never asked for,
        # so a's results wait behind it until the live call is done and only held results are left.
        path.write_text(PIPELINE.replace("'inspect ' + item", "'inspect ' + item + ' again'"))
        handle = await service.start(str(path), provider=ProviderChoice("fake", {}), resume_from=first_id)
        return first, await handle.result(), service.events(handle.run_id)

    first, second, events = arun(go())
    assert labels(events, "agent.started") == ["inspect:a", "inspect:b", "verify:a", "verify:b"]
    assert first["trace"] == ["b1", "b2", "a1", "a2"]
    assert second["results"] == ["verify inspect a again", "verify inspect b again"]


def test_held_results_are_released_when_the_workflow_returns_without_awaiting_them(tmp_path: Path) -> None:
    first_source = (
        "export const meta = { name: 'unawaited', description: 'two calls, the second one slow' }\n"
        "const late = agent('late', { label: 'late' })\n"
        "return [await agent('early', { label: 'early' }), await late]\n"
    )
    # The resumed source asks only for the call that completed second, and does not wait for it.
    second_source = first_source.replace(
        "return [await agent('early', { label: 'early' }), await late]", "return 'returned'"
    )
    path = tmp_path / "wf.js"
    path.write_text(first_source)
    service = WorkflowService(MemoryStore(), cwd=str(tmp_path))

    async def go() -> tuple[Any, Any, list[Event]]:
        first_id, first = await run(service, str(path), slow("late", 200))  # early completes first
        path.write_text(second_source)
        handle = await service.start(str(path), provider=ProviderChoice("fake", {}), resume_from=first_id)
        return first, await handle.result(), service.events(handle.run_id)

    first, second, events = arun(go())
    assert (first, second) == (["early", "late"], "returned")
    assert labels(events, "agent.started") == []


def test_a_result_held_back_when_a_resume_stops_is_replayed_by_the_next_resume(tmp_path: Path) -> None:
    source = (
        "export const meta = { name: 'held', description: 'two calls at once' }\n"
        "return await parallel([() => agent('x', { label: 'x' }), () => agent('y', { label: 'y' })])\n"
    )
    path = tmp_path / "wf.js"
    path.write_text(source)
    service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
    parked = {"rules": [{"match": {"label": "y"}, "respond": {"echo": True, "delayMs": 120_000}}]}

    async def go() -> tuple[Any, list[Event]]:
        first_id, _ = await run(service, str(path), slow("x", 200))  # y completes first, then x
        # y asks another question now and runs live (parked), so x's result is held behind y's record,
        # which is never asked for; the resume stops while x is still held.
        path.write_text(source.replace("agent('y',", "agent('y again',"))
        second = await service.start(str(path), provider=ProviderChoice("fake", parked), resume_from=first_id)
        seen: list[Event] = []
        while not any(e.type == "agent.started" for e in seen):
            seen += await service.wait_events(second.run_id, seen[-1].sequence if seen else 0, wait_ms=5_000)
        second.cancel("stopped while holding x")
        await second.wait()
        third_id, third = await resume(service, second.run_id, {})
        return third, service.events(third_id)

    third, events = arun(go())
    assert third == ["x", "y again"]
    assert labels(events, "agent.cached") == ["x"] and labels(events, "agent.started") == ["y"]


# Four calls that a zero-delay fake answers in one realm delivery; each continuation takes two steps,
# so `trace` shows whether their continuations interleaved (one delivery) or ran one after the other.
INTERLEAVED = interleaved("abcd")
ONE_DELIVERY = ["a1", "b1", "c1", "d1", "a2", "b2", "c2", "d2"]


def turns(events: list[Event], kind: str) -> dict[str, Any]:
    return {str(e.payload.get("label")): e.payload.get("turn") for e in events if e.type == kind}


def test_results_the_original_run_delivered_together_are_replayed_together(tmp_path: Path) -> None:
    path = tmp_path / "wf.js"
    path.write_text(INTERLEAVED)
    service = WorkflowService(MemoryStore(), cwd=str(tmp_path))

    async def go() -> tuple[Any, Any, list[Event], list[Event]]:
        first_id, first = await run(service, str(path), {})
        second_id, second = await resume(service, first_id, {})
        return first, second, service.events(first_id), service.events(second_id)

    first, second, original, resumed = arun(go())
    assert len(set(turns(original, "agent.completed").values())) == 1  # one delivery in the original
    assert first == ONE_DELIVERY
    # Replayed as one delivery too, not one realm turn per result (a1 a2 b1 b2 …).
    assert second == ONE_DELIVERY
    assert labels(resumed, "agent.started") == []
    assert len(set(released_turns(resumed).values())) == 1


def test_a_delivery_only_partly_replayed_sends_its_results_before_the_gap_together(tmp_path: Path) -> None:
    path = tmp_path / "wf.js"
    path.write_text(INTERLEAVED)
    service = WorkflowService(MemoryStore(), cwd=str(tmp_path))

    async def go() -> tuple[Any, Any, list[Event]]:
        first_id, first = await run(service, str(path), {})
        # c asks another question now: its record is never asked for, so it runs live. a and b, ranked
        # before it, go out in one delivery as they did; d waits behind c's record until nothing else
        # can run, then goes out alone.
        path.write_text(
            INTERLEAVED.replace("'ask ' + name", "'ask ' + name + (name === 'c' ? ' again' : '')")
        )
        handle = await service.start(str(path), provider=ProviderChoice("fake", {}), resume_from=first_id)
        return first, await handle.result(), service.events(handle.run_id)

    first, second, events = arun(go())
    assert first == ONE_DELIVERY
    assert labels(events, "agent.started") == ["c"]
    assert sorted(label for label, _ in released(events)) == ["a", "b", "d"]
    assert calls(events) == ["a", "b", "c", "d"]
    cached = released_turns(events)
    live = turns(events, "agent.completed")
    assert cached["a"] == cached["b"] and len({cached["a"], cached["d"], live["c"]}) == 3
    assert second == ["a1", "b1", "a2", "b2", "c1", "c2", "d1", "d2"]
