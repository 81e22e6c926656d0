"""Cancelling a run that has already ended ``paused`` or ``interrupted``, and the continuation marker
that keeps such a cancel and a resume of the same run from both succeeding.

A paused or interrupted run is waiting for someone to resume it. A user who gives up on it cancels
it: one ``run.cancelled`` event is appended to its log with payload ``{"reason", "resumable": false,
"endedAs": "paused"|"interrupted"}``; from then on its status is ``cancelled``, automatic resume leaves
it alone and :meth:`~workflow_mcp.service.WorkflowService.resume` refuses it
(:class:`~workflow_mcp.errors.RunCancelledError`). A run cancelled while it was running (the engine's
``run.cancelled``, with no ``resumable`` key) stays resumable, as before. Completed, failed and
cancelled runs never change.

Exactly one of a cancel and a resume of the same ended run wins, also across processes sharing a
store. Both write to the ended run's log at the sequence after the newest one they read *before*
their last check, so the store's sequence rule (``SequenceConflictError``) lets only the first write
through; the loser reads the log again and says why it lost:

- a resume first appends a ``log`` event ``{"message": "resumed as run R", "resumedAs": R}`` (the
  continuation marker), then creates run ``R`` (if that fails, a ``warning`` with ``"resumeFailed": R``
  follows); a cancel that finds a marker refuses (:class:`~workflow_mcp.errors.RunContinuedError`,
  naming ``R``: cancel that run instead);
- a resume that finds the cancel refuses with :class:`~workflow_mcp.errors.RunCancelledError`.

A marker naming a run the store does not hold and older than :data:`MARKER_STALE_S` is ignored (its
process stopped between the marker and the run).

workflow-mcp's rule: the compatibility profile (claude-code/2.1.332) records no paused state and no
cancel of an ended workflow, so there is no Claude behaviour to follow here. As before, a cancel
leaves no cancellation request in the store for anyone to act on.
"""

from __future__ import annotations

import datetime
from typing import Final

from .errors import (
    RunAlreadyResumedError,
    RunCancelledError,
    RunContinuedError,
    SequenceConflictError,
    StoreError,
)
from .events import Event, utc_now
from .state import STATUS_OF_EVENT, RunStatus
from .store.base import RunStore

__all__ = ["MARKER_STALE_S", "cancel_ended", "mark_continued", "note_start_failed", "refuse_cancelled"]

#: Seconds after which a continuation marker whose run was never stored no longer counts.
MARKER_STALE_S: Final = 60.0
#: How many times a write that lost a sequence race to an unrelated note is tried again.
WRITE_TRIES: Final = 50
#: Events first read from the end of an ended run's log (the window grows fourfold until it holds the
#: run's newest ``run.*`` event).
TAIL: Final = 64

#: The statuses a user may cancel an ended run from.
CANCELLABLE_ENDED: Final[frozenset[RunStatus]] = frozenset({"paused", "interrupted"})


def _tail(store: RunStore, run_id: str) -> tuple[Event | None, list[Event]]:
    """``(the newest run.* event, the events after it)``, read from the end of the log in growing
    windows: markers and notes only ever follow an ended run's last ``run.*`` event, so a long run's
    earlier events are never read."""
    last = store.last_sequence(run_id)
    window = TAIL
    while True:
        after = max(0, last - window)
        page = store.events(run_id, after, None)
        for index in range(len(page) - 1, -1, -1):
            if page[index].type in STATUS_OF_EVENT:
                return page[index], page[index + 1 :]
        if after == 0:
            return None, page
        window *= 4


def final_cancel(store: RunStore, run_id: str) -> Event | None:
    """The ``run.cancelled`` event that made ``run_id`` final (``resumable: false``), or ``None``.
    Reads the log only when the run's newest ``run.*`` event is ``run.cancelled``."""
    if store.last_run_event(run_id) != "run.cancelled":
        return None
    last, _ = _tail(store, run_id)
    if last is None or last.type != "run.cancelled" or last.payload.get("resumable") is not False:
        return None
    return last


def refuse_cancelled(store: RunStore, run_id: str) -> None:
    """Raise :class:`~workflow_mcp.errors.RunCancelledError` when ``run_id`` was cancelled after it
    had ended (see the module docstring)."""
    event = final_cancel(store, run_id)
    if event is not None:
        raise RunCancelledError(
            run_id, str(event.payload.get("endedAs") or "paused"), str(event.payload.get("reason") or "")
        )


def _age_s(stamp: str) -> float:
    try:
        moment = datetime.datetime.fromisoformat(stamp)
    except ValueError:
        return float("inf")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return (datetime.datetime.now(datetime.UTC) - moment).total_seconds()


def _scan(store: RunStore, run_id: str) -> tuple[RunStatus | None, str | None]:
    """``(status from the newest run.* event, the run continuing it or None)``."""
    newest, after = _tail(store, run_id)
    status = None if newest is None else STATUS_OF_EVENT[newest.type]
    markers: dict[str, str] = {}  # run id -> marker timestamp, newest last
    for event in after:
        if event.type == "log" and isinstance(event.payload.get("resumedAs"), str):
            markers[event.payload["resumedAs"]] = event.timestamp
        elif event.type == "warning" and isinstance(event.payload.get("resumeFailed"), str):
            markers.pop(event.payload["resumeFailed"], None)
    for other, stamp in reversed(markers.items()):
        if store.get_run(other) is not None or _age_s(stamp) < MARKER_STALE_S:
            return status, other
    return status, None


def cancel_ended(store: RunStore, run_id: str, reason: str) -> Event | RunStatus:
    """Cancel ``run_id`` if it has ended ``paused`` or ``interrupted``: returns the ``run.cancelled``
    event stored, or the run's status when it is not one of those (nothing is written).

    Raises:
        RunContinuedError: a resume of the run won (it names the run continuing it).
        StoreError: the store refuses the write, or the log kept changing for :data:`WRITE_TRIES`
            tries.
    """
    for _ in range(WRITE_TRIES):
        sequence = store.last_sequence(run_id)  # read first: any later write makes ours conflict
        status, continued = _scan(store, run_id)
        if status not in CANCELLABLE_ENDED:
            return status or "queued"
        if continued is not None:
            raise RunContinuedError(run_id, continued)
        event = Event(
            run_id=run_id,
            sequence=sequence + 1,
            type="run.cancelled",
            payload={"reason": reason, "resumable": False, "endedAs": status},
            timestamp=utc_now(),
        )
        try:
            store.append_many([event])
        except SequenceConflictError:
            continue  # something was written meanwhile: look again
        return event
    raise StoreError(f"run {run_id} was not cancelled: its log changed {WRITE_TRIES} times while trying")


def mark_continued(store: RunStore, run_id: str, continued_as: str, *, exclusive: bool = False) -> Event:
    """Append the continuation marker to ended run ``run_id`` before run ``continued_as`` resumes it;
    returns the marker event. ``exclusive`` (an unattended resume): refuse when another run already
    continues it, so servers sharing a store resume a run once between them.

    Raises:
        RunCancelledError: the run was cancelled after it had ended (a cancel won).
        RunAlreadyResumedError: ``exclusive``, and another run already resumes it.
        StoreError: the store refuses the write, or the log kept changing for :data:`WRITE_TRIES` tries.
    """
    for _ in range(WRITE_TRIES):
        sequence = store.last_sequence(run_id)
        refuse_cancelled(store, run_id)
        if exclusive and (other := _scan(store, run_id)[1]) is not None:
            raise RunAlreadyResumedError(run_id, other)
        event = Event(
            run_id=run_id,
            sequence=sequence + 1,
            type="log",
            payload={"message": f"resumed as run {continued_as}", "resumedAs": continued_as},
            timestamp=utc_now(),
        )
        try:
            store.append_many([event])
        except SequenceConflictError:
            continue
        return event
    raise StoreError(f"run {run_id} was not resumed: its log changed {WRITE_TRIES} times while trying")


def note_start_failed(store: RunStore, run_id: str, continued_as: str, problem: str) -> Event | None:
    """Record on ``run_id`` that run ``continued_as``, announced by a marker, did not start (so the
    marker no longer counts); ``None`` when the store refuses that too (the marker then expires)."""
    for _ in range(WRITE_TRIES):
        event = Event(
            run_id=run_id,
            sequence=store.last_sequence(run_id) + 1,
            type="warning",
            payload={
                "message": f"the resume as run {continued_as} did not start: {problem}",
                "resumeFailed": continued_as,
            },
            timestamp=utc_now(),
        )
        try:
            store.append_many([event])
        except SequenceConflictError:
            continue
        except StoreError:
            return None
        return event
    return None
