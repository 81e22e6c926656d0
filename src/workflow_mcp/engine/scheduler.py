"""Admission and concurrency of a run's agent() calls (profile claude-code/2.1.332, PROFILE-FACTS):

- the call cap: a run admits at most ``cap`` agent() calls — the profile's 1,000, or fewer with
  ``maxAgents`` — counting refused ones (a call refused for its schema or agent type was admitted
  first) and the calls of nested workflows;
- budget admission: a call is refused while ``total > 0 and spent >= total`` (output tokens; calls
  already running finish and still charge, :mod:`.budget`);
- concurrency: at most ``concurrency`` live provider calls at once, in admission order (replayed calls
  take no slot).

One :class:`Scheduler` per run, on the run's event loop.
"""

from __future__ import annotations

import asyncio

from .budget import Budget

__all__ = ["CallRefused", "Scheduler"]


class CallRefused(Exception):
    """Raised by :meth:`Scheduler.admit` when an agent() call is refused: ``message`` is what the call
    rejects with in the realm, ``code`` its error code (``budget_exceeded`` for budget admission,
    else ``None``)."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class Scheduler:
    """The cap (``cap`` calls), the budget (``budget``) and the concurrency limit of one run.
    ``profile_name`` names the profile in the cap's message."""

    def __init__(self, *, cap: int, concurrency: int, budget: Budget, profile_name: str) -> None:
        self.cap = cap
        self.concurrency = max(1, concurrency)
        self.budget = budget
        self.profile_name = profile_name
        self.admitted = 0
        self.refused_for_cap = 0
        self.refused_for_budget = 0
        self._slots = asyncio.Semaphore(self.concurrency)

    def admit(self) -> None:
        """Admit one agent() call toward the cap.

        Raises:
            CallRefused: the cap is reached, or the budget is spent (``code`` ``budget_exceeded``).
        """
        if self.admitted >= self.cap:
            self.refused_for_cap += 1
            raise CallRefused(
                f"agent() call cap reached: a run admits at most {self.cap:,} agent calls, refused ones "
                f"included (profile {self.profile_name}); do the work in fewer calls or split it into "
                "several runs"
            )
        if not self.budget.admits():
            self.refused_for_budget += 1
            raise CallRefused(
                f"the token budget is spent ({self.budget.spent:,} of {self.budget.total:,} output tokens); "
                "agent() refused (budget admission)",
                code="budget_exceeded",
            )
        self.admitted += 1

    def slot(self) -> asyncio.Semaphore:
        """The concurrency limit: ``async with scheduler.slot():`` around one live call."""
        return self._slots
