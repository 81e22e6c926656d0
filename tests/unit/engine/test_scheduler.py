"""Admission: the call cap counts refused calls, budget admission refuses while the budget is spent,
and the concurrency limit is at least one (engine/scheduler.py)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from workflow_mcp.engine.budget import Budget
from workflow_mcp.engine.scheduler import CallRefused, Scheduler


def scheduler(cap: int = 3, budget: Budget | None = None, concurrency: int = 2) -> Scheduler:
    return Scheduler(cap=cap, concurrency=concurrency, budget=budget or Budget(), profile_name="p/1")


def test_the_cap_admits_exactly_cap_calls_and_names_itself_and_the_profile() -> None:
    s = scheduler(cap=2)
    s.admit()
    s.admit()
    with pytest.raises(CallRefused, match=r"at most 2 agent calls.*profile p/1") as refused:
        s.admit()
    assert refused.value.code is None
    assert (s.admitted, s.refused_for_cap, s.refused_for_budget) == (2, 1, 0)


def test_budget_admission_refuses_while_the_budget_is_spent_and_a_zero_budget_never_does() -> None:
    budget = Budget(total=10)
    s = scheduler(budget=budget)
    s.admit()
    budget.charge(10)
    with pytest.raises(CallRefused, match=r"10 of 10 output tokens") as refused:
        s.admit()
    assert refused.value.code == "budget_exceeded"
    assert (s.admitted, s.refused_for_budget) == (1, 1)
    unlimited = scheduler(budget=Budget(total=0))
    unlimited.budget.charge(1_000)
    unlimited.admit()


def test_the_cap_is_checked_before_the_budget() -> None:
    budget = Budget(total=1, spent=5)
    s = scheduler(cap=0, budget=budget)
    with pytest.raises(CallRefused, match="call cap"):
        s.admit()
    assert (s.refused_for_cap, s.refused_for_budget) == (1, 0)


def test_the_concurrency_limit_is_at_least_one() -> None:
    assert scheduler(concurrency=0).concurrency == 1
    assert scheduler(concurrency=5).concurrency == 5


async def _holder(s: Scheduler, name: str, order: list[str], gate: asyncio.Event) -> None:
    if not s.take_slot():
        await s.wait_slot()
    order.append(name)
    try:
        await gate.wait()
    finally:
        s.release()


def test_slots_bound_what_holds_one_and_go_to_waiters_in_arrival_order() -> None:
    asyncio.run(_slots_bound_what_holds_one_and_go_to_waiters_in_arrival_order())


async def _slots_bound_what_holds_one_and_go_to_waiters_in_arrival_order() -> None:
    s = scheduler(concurrency=2)
    gate = asyncio.Event()
    order: list[str] = []
    tasks = [asyncio.create_task(_holder(s, f"c{i}", order, gate)) for i in range(5)]
    for _ in range(5):
        await asyncio.sleep(0)
    assert order == ["c0", "c1"] and s.in_use == 2
    assert not s.take_slot()  # a newcomer never takes a slot while others wait
    gate.set()
    await asyncio.gather(*tasks)
    assert order == ["c0", "c1", "c2", "c3", "c4"]
    assert s.in_use == 0 and s.take_slot() and s.take_slot() and not s.take_slot()


def test_a_call_cancelled_while_waiting_holds_no_slot_and_keeps_its_place_for_nobody() -> None:
    asyncio.run(_a_call_cancelled_while_waiting_holds_no_slot_and_keeps_its_place_for_nobody())


async def _a_call_cancelled_while_waiting_holds_no_slot_and_keeps_its_place_for_nobody() -> None:
    s = scheduler(concurrency=1)
    assert s.take_slot()
    waiting = [asyncio.create_task(s.wait_slot()) for _ in range(3)]
    await asyncio.sleep(0)
    waiting[1].cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting[1]
    s.release()  # to the first waiter
    await waiting[0]
    assert not waiting[2].done() and s.in_use == 1
    s.release()  # the cancelled one is skipped: the third gets it
    await waiting[2]
    s.release()
    assert s.in_use == 0


def test_a_slot_handed_to_a_call_cancelled_before_it_ran_goes_on_to_the_next() -> None:
    asyncio.run(_a_slot_handed_to_a_call_cancelled_before_it_ran_goes_on_to_the_next())


async def _a_slot_handed_to_a_call_cancelled_before_it_ran_goes_on_to_the_next() -> None:
    s = scheduler(concurrency=1)
    assert s.take_slot()
    first = asyncio.create_task(s.wait_slot())
    second = asyncio.create_task(s.wait_slot())
    await asyncio.sleep(0)
    s.release()  # handed to ``first``, which has not run yet
    first.cancel()  # and is cancelled before it resumes
    with contextlib.suppress(asyncio.CancelledError):
        await first
    await second  # the slot went on, not lost
    assert s.in_use == 1
    s.release()
    assert s.in_use == 0
