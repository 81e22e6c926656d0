"""Admission: the call cap counts refused calls, budget admission refuses while the budget is spent,
and the concurrency limit is at least one (engine/scheduler.py)."""

from __future__ import annotations

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
