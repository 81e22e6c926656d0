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
from collections import deque

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
        self._free = self.concurrency  # slots nobody holds
        self._waiting: deque[asyncio.Future[None]] = deque()  # calls waiting for a slot, first in first

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

    def take_slot(self) -> bool:
        """Take a free slot at once if one is free and nobody waits for one (admission order);
        ``False``: :meth:`wait_slot` instead. Every slot taken is given back with :meth:`release`."""
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return True
        return False

    async def wait_slot(self) -> None:
        """Wait for a slot, behind every call that waited longer. A release hands its slot straight to
        the first waiter, so a later call never takes it first. Cancelled while waiting: no slot is
        held (one handed over in the meantime goes on to the next waiter)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # the slot was handed over just before the cancellation
            elif waiter in self._waiting:  # (a release may have dropped it already)
                self._waiting.remove(waiter)
            raise

    def release(self) -> None:
        """Give a slot back: to the first waiter still waiting, else to the free ones."""
        waiting = self._waiting
        while waiting:
            waiter = waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1

    @property
    def in_use(self) -> int:
        """Slots held now (live provider calls)."""
        return self.concurrency - self._free
