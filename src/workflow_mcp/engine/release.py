"""Replay in the original order: a resumed run hands replayed results to the workflow in the order the
original run completed them, and in the realm deliveries it made, so workflow state that depends on
completion order (a trace array, a first-wins race, a shared counter) replays identically, and later
prompts built from it stay cache hits.

The rule: each reusable record carries its completion rank in the original run. A replayed result of
rank ``r`` is released only once every record ranked before ``r`` has been asked for and released (or
found unusable). Records the new run never asks for would hold the rest forever, so when the run can
make no further progress — nothing live in flight, the realm idle, only held results left — the held
ones are released, lowest rank first, one at a time.

Deliveries: the realm resolves every answer of one host message, in order, before the workflow's
continuations run, so answers delivered together interleave their continuations (``a1 b1 a2 b2``) and
answers delivered apart do not (``a1 a2 b1 b2``). Each record carries the delivery (``turn``) its answer
reached the original workflow in; results released together whose records share a delivery go out as
one message again (the run coordinator's ``_reserve``), and anything else — a live answer, a record
without a known delivery, one released later than its delivery's others — is a message of its own. A
delivery only partly replayed (one of its calls now runs live, or asks another question) therefore
sends the replayed results ranked before the gap together, and the ones after it once the rank order
lets them go.

:class:`ReleaseOrder` keeps the ranks; the run coordinator asks :meth:`ReleaseOrder.turn` before it
answers a replayed call, :meth:`ReleaseOrder.settle` once that answer has been handed to the realm,
and :meth:`ReleaseOrder.force` when it has found the run quiescent. Not thread-safe; one per run, on the
run's event loop.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from collections.abc import Iterable

__all__ = ["ReleaseOrder"]


class ReleaseOrder:
    """The completion ranks of a replay's records (``ranks``: non-negative, each once; a record with
    no known rank — ``-1`` — is never held)."""

    def __init__(self, ranks: Iterable[int]) -> None:
        self._known = frozenset(r for r in ranks if r >= 0)
        self._ranks = sorted(self._known)
        self._settled: set[int] = set()
        self._next = 0  # index into _ranks of the lowest rank neither settled nor granted
        self._waiting: dict[int, asyncio.Future[None]] = {}
        self._granted: set[int] = set()  # released to the caller, its answer not yet in the realm
        self.forced = 0  # ranks skipped because the run could make no progress without them
        self._open = False  # release_all(): the order no longer holds anything

    @property
    def waiting(self) -> int:
        """How many replayed calls are held now."""
        return len(self._waiting)

    @property
    def busy(self) -> bool:
        """Whether a released result has not yet been handed to the realm (no new release until then)."""
        return bool(self._granted)

    def _lowest(self) -> int | None:
        """The lowest rank neither settled nor granted (``None``: none is left)."""
        ranks, done = self._ranks, self._settled
        while self._next < len(ranks) and (ranks[self._next] in done or ranks[self._next] in self._granted):
            self._next += 1
        return ranks[self._next] if self._next < len(ranks) else None

    def _may_go(self, rank: int) -> bool:
        # Every earlier rank is settled or granted: granted ones are answered in rank order, in the
        # deliveries the original run made, so consecutive ranks may be released together without
        # changing the order the workflow sees them in.
        lowest = self._lowest()
        return lowest is None or lowest >= rank

    async def turn(self, rank: int) -> None:
        """Wait until the replayed result of ``rank`` may be released (at once for ``-1``, an
        unknown rank, or when every earlier-ranked record is settled or already released).
        The caller must :meth:`settle` ``rank`` after answering. Cancellation leaves it unsettled."""
        if self._open or rank not in self._known:
            return
        if self._may_go(rank):
            self._granted.add(rank)
            return
        future = asyncio.get_running_loop().create_future()
        self._waiting[rank] = future
        try:
            await future
        except asyncio.CancelledError:
            if rank in self._granted:  # released, but its caller stopped before answering
                self._granted.discard(rank)
                self._next = min(self._next, bisect_left(self._ranks, rank))
                self._wake()
            raise
        finally:
            self._waiting.pop(rank, None)

    def settle(self, rank: int) -> None:
        """``rank``'s record was answered to the realm (or found unusable): later ones may follow."""
        if rank < 0:
            return
        self._granted.discard(rank)
        self._settled.add(rank)
        self._wake()

    def force(self) -> bool:
        """The run can make no progress without a held result: settle every unsettled rank below the
        lowest held one, so it is released. Returns whether anything was released."""
        if self._granted or not self._waiting:
            return False
        first = min(self._waiting)
        for rank in self._ranks[self._next :]:
            if rank >= first:
                break
            if rank not in self._settled:
                self._settled.add(rank)
                self.forced += 1
        self._wake()
        return True

    def release_all(self) -> None:
        """Stop holding: every held call is released now and later ones at once (the workflow has
        returned, so no order is left to keep)."""
        self._open = True
        self._granted.clear()
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_result(None)

    def _wake(self) -> None:
        """Release every held rank that is next in order, lowest first."""
        while self._waiting:
            first = self._lowest()
            if first is None or first not in self._waiting:
                return
            future = self._waiting.pop(first)
            self._granted.add(first)
            if not future.done():
                future.set_result(None)
