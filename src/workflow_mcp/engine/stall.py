"""The stall watchdog of a run's live agent calls: one timer for all of them.

Each provider attempt runs in a :class:`StallWindow` (an async context manager, like
``asyncio.timeout_at``): when no progress is reported for ``stall_s`` seconds, or its absolute ``limit``
(``agentTimeoutMs``) passes, the attempt's task is cancelled and the window raises ``TimeoutError`` on
exit (:meth:`StallWindow.expired` then says it was this window, not the provider's own timeout).

Why not one ``asyncio.timeout_at`` per attempt, rescheduled on each progress event: that arms and
cancels a loop timer per attempt and per event (most of which are output deltas), a measured 15-19 µs
of host CPU per zero-delay agent call. Here progress is one float store, and the run's one timer is
armed only when a window's deadline comes before the armed one; when it fires it expires the windows
that are due and re-arms for the next deadline (a window that made progress moved its own). The time
is the event loop's (``loop.time()``), so a virtual-time loop drives it exactly.
"""

from __future__ import annotations

import asyncio
import math
from types import TracebackType

__all__ = ["StallWatch", "StallWindow"]


class StallWatch:
    """The windows of one run's live attempts and the one loop timer that watches them. Bound to the
    running event loop when its first window opens; not thread-safe (the run's loop only)."""

    __slots__ = ("_armed", "_handle", "_loop", "_windows")

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._windows: set[StallWindow] = set()
        self._handle: asyncio.TimerHandle | None = None
        self._armed = math.inf  # loop time the timer fires at (inf: not armed)

    def window(self, stall_s: float, limit: float | None = None) -> StallWindow:
        """A window expiring ``stall_s`` seconds after its last progress (or entry), and in any case at
        loop time ``limit`` (``None``: no absolute limit)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return StallWindow(self, self._loop, stall_s, limit)

    def _arm(self, when: float) -> None:
        if when >= self._armed:
            return  # the armed timer fires first; it re-arms for this window then
        if self._handle is not None:
            self._handle.cancel()
        assert self._loop is not None
        self._armed = when
        self._handle = self._loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._armed = math.inf
        assert self._loop is not None
        now = self._loop.time()
        later = math.inf
        for window in list(self._windows):
            due = window.deadline()
            if due is None:
                continue  # paused: a human is deciding a checkpoint
            if due <= now:
                window._expire()
            elif due < later:
                later = due
        if later < math.inf:
            self._arm(later)


class StallWindow:
    """One attempt's window (see the module). Enter it in the attempt's own task; report progress
    with :meth:`progress`; :meth:`pause` and :meth:`resume` stop and restart it (a checkpoint a human
    decides does not count as a stall)."""

    __slots__ = (
        "_cancelling",
        "_expired",
        "_limit",
        "_loop",
        "_paused",
        "_progress",
        "_stall",
        "_task",
        "_watch",
    )

    def __init__(
        self, watch: StallWatch, loop: asyncio.AbstractEventLoop, stall_s: float, limit: float | None
    ) -> None:
        self._watch = watch
        self._loop = loop
        self._stall = stall_s
        self._limit = limit
        self._progress = 0.0
        self._paused = False
        self._expired = False
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0

    def deadline(self) -> float | None:
        """The loop time this window expires at (``None``: paused)."""
        if self._paused:
            return None
        due = self._progress + self._stall
        return due if self._limit is None or due < self._limit else self._limit

    def progress(self) -> None:
        """Progress now: the window restarts (its absolute limit stays)."""
        self._progress = self._loop.time()

    def pause(self) -> None:
        self._paused = True

    def resume(self) -> None:
        """Restart the window from now after :meth:`pause`."""
        self._paused = False
        self.progress()
        due = self.deadline()
        if due is not None and self in self._watch._windows:
            self._watch._arm(due)

    def expired(self) -> bool:
        """Whether this window cancelled its attempt (a ``TimeoutError`` from inside it that is not
        this window's is the provider's own)."""
        return self._expired

    def _expire(self) -> None:
        self._watch._windows.discard(self)
        self._expired = True
        assert self._task is not None
        self._task.cancel()

    async def __aenter__(self) -> StallWindow:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a stall window is entered in a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._progress = self._loop.time()
        self._watch._windows.add(self)
        due = self.deadline()
        if due is not None:
            self._watch._arm(due)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._watch._windows.discard(self)
        # As asyncio.Timeout does: our cancellation becomes TimeoutError unless someone else also
        # cancelled the task meanwhile (then the CancelledError is theirs and goes on).
        if (
            self._expired
            and self._task is not None
            and self._task.uncancel() <= self._cancelling
            and exc_type is asyncio.CancelledError
        ):
            raise TimeoutError from exc
