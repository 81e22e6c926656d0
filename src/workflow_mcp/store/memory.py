"""The in-memory twin of :class:`~workflow_mcp.store.sqlite.SqliteStore` (same behaviour, no file).

Its one owner is the store itself (one process, one service): a claim is held until the holder's
terminal event is appended, and ``recover`` ends the unfinished runs that are not ``active``.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Collection

from ..errors import RunClaimedError, SequenceConflictError, StoreError
from ..events import Event, utc_now
from ..state import STATUS_OF_EVENT, TERMINAL, status_of
from .base import (
    RELEASING_TYPES,
    InterruptedEvent,
    JournalDamage,
    JournalRow,
    RunRecord,
    check_batch,
    journal_row_for,
    merge_journal_rows,
    release_order,
)

__all__ = ["MemoryStore"]


class MemoryStore:
    """Runs, events, journal, claims and artifacts in dictionaries (see :class:`~workflow_mcp.store.RunStore`)."""

    def __init__(self) -> None:
        self._runs: dict[str, RunRecord] = {}
        self._events: dict[str, list[Event]] = {}
        self._journal: dict[str, dict[str, JournalRow]] = {}
        self._artifacts: dict[tuple[str, str], tuple[str, str, bytes, str]] = {}
        self._cancels: dict[str, str] = {}
        self._claims: dict[str, tuple[str, str]] = {}  # run_id -> (holder_run, claimed_at)
        self._lock = threading.RLock()

    def create_run(self, record: RunRecord) -> None:
        """Record a new run and claim it (and the stored run it resumes), all or nothing. An origin
        outside the store (``claude:<runId>``) is refused while a run resuming it holds its claim.

        Raises:
            RunClaimedError: the run ``record.resumed_from`` is claimed (by a run not yet ended), or
                (an origin outside the store) a run resuming it is.
            StoreError: the run id, or the owner's idempotency key, is already used.
        """
        with self._lock:
            if record.run_id in self._runs:
                raise StoreError(f"run {record.run_id} already exists")
            if record.idempotency_key is not None and self.find_idempotent(
                record.owner, record.idempotency_key
            ):
                raise StoreError(f"idempotency key {record.idempotency_key!r} is already used")
            resumed = record.resumed_from
            if resumed is not None and resumed in self._runs:
                held = self._claims.get(resumed)
                if held is not None:
                    raise RunClaimedError(
                        resumed, holder_run=held[0], pid=os.getpid(), host=socket.gethostname(), since=held[1]
                    )
                self._claims[resumed] = (record.run_id, utc_now())
            elif resumed is not None:
                for other in self._runs.values():
                    own = self._claims.get(other.run_id)
                    if other.resumed_from == resumed and own is not None and own[0] == other.run_id:
                        raise RunClaimedError(
                            resumed,
                            holder_run=other.run_id,
                            pid=os.getpid(),
                            host=socket.gethostname(),
                            since=own[1],
                        )
            self._claims[record.run_id] = (record.run_id, utc_now())
            self._runs[record.run_id] = record
            self._events[record.run_id] = []
            self._journal[record.run_id] = {}

    def get_run(self, run_id: str) -> RunRecord | None:
        return self._runs.get(run_id)

    def find_idempotent(self, owner: str | None, key: str) -> RunRecord | None:
        for r in self._runs.values():
            if r.owner == owner and r.idempotency_key == key:
                return r
        return None

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        runs = sorted(self._runs.values(), key=lambda r: (r.created_at, r.run_id), reverse=True)
        return runs[:limit]

    def append(self, event: Event) -> None:
        with self._lock:
            if event.run_id not in self._runs:
                raise StoreError(f"events refused by the store: no run {event.run_id}")
            events = self._events.setdefault(event.run_id, [])
            if events and event.sequence <= events[-1].sequence:
                raise SequenceConflictError(event.run_id, event.sequence, events[-1].sequence)
            events.append(event)
            if event.type in RELEASING_TYPES:
                for run_id in [r for r, (holder, _) in self._claims.items() if holder == event.run_id]:
                    del self._claims[run_id]
            if event.type.startswith("agent.") and event.type != "agent.output.delta" and event.agent_id:
                rows = self._journal.setdefault(event.run_id, {})
                old = rows.get(event.agent_id)
                row = journal_row_for(event, old.ordinal if old else len(rows))
                if row is not None:
                    if old is not None:
                        row = merge_journal_rows(old, row)
                    rows[event.agent_id] = row

    def append_many(self, events: list[Event]) -> None:
        """All or none, like the SQLite transaction (the same checks: :func:`check_batch`, then each
        run's sequence after its newest stored one)."""
        check_batch(events)
        with self._lock:
            last: dict[str, int] = {}
            for e in events:
                if e.run_id not in self._runs:
                    raise StoreError(f"events refused by the store: no run {e.run_id}")
                before = last.get(e.run_id, self.last_sequence(e.run_id))
                if e.sequence <= before:
                    raise SequenceConflictError(e.run_id, e.sequence, before)
                last[e.run_id] = e.sequence
            for event in events:
                self.append(event)

    def flush(self) -> None:
        """Nothing is ever pending."""

    def events(self, run_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        out = [e for e in self._events.get(run_id, []) if e.sequence > after]
        return out if limit is None else out[:limit]

    def damaged_events(self, run_id: str) -> list[Event]:
        """Always ``[]``: events held in memory are never stored damaged."""
        return []

    def events_of_types(self, run_id: str, types: Collection[str]) -> list[Event]:
        """The events of ``run_id`` whose type is one of ``types``, in order."""
        wanted = set(types)
        return [e for e in self._events.get(run_id, []) if e.type in wanted]

    def last_sequence(self, run_id: str) -> int:
        events = self._events.get(run_id)
        return events[-1].sequence if events else 0

    def last_run_event(self, run_id: str) -> str | None:
        for e in reversed(self._events.get(run_id, [])):
            if e.type in STATUS_OF_EVENT:
                return e.type
        return None

    def last_run_events(self, run_ids: Collection[str]) -> dict[str, str | None]:
        """:meth:`last_run_event` of each of ``run_ids`` (``None`` for an unknown run)."""
        with self._lock:
            return {run_id: self.last_run_event(run_id) for run_id in run_ids}

    def unfinished_runs(self) -> list[RunRecord]:
        """Runs whose status is not ``state.TERMINAL`` (queued or running)."""
        return [r for r in self._runs.values() if status_of(self.last_run_event(r.run_id)) not in TERMINAL]

    def recover(self, active: Collection[str], interrupted: InterruptedEvent) -> list[str]:
        """Store ``interrupted(record, sequence, reason)`` for each unfinished run not in ``active`` (in
        memory the owner is this store, so a run it no longer runs has stopped without its end)."""
        with self._lock:
            marked = []
            for record in self.unfinished_runs():
                if record.run_id in active:
                    continue
                reason = "the run stopped without recording its end (its last events were not stored)"
                self.append(interrupted(record, self.last_sequence(record.run_id) + 1, reason))
                marked.append(record.run_id)
            return marked

    def heartbeat(self) -> None:
        """Nothing to renew: the owner is this process."""

    def write_problem(self) -> StoreError | None:
        """Memory can always be written."""
        return None

    def completion_order(self, run_id: str) -> list[str]:
        events = self._events.get(run_id, [])
        return release_order(
            (
                (e.sequence, e.agent_id)
                for e in events
                if e.type in ("agent.completed", "agent.cached") and e.agent_id is not None
            ),
            ((e.sequence, e.payload) for e in events if e.type == "agent.delivered"),
        )

    def journal(self, run_id: str) -> list[JournalRow]:
        return sorted(self._journal.get(run_id, {}).values(), key=lambda r: r.ordinal)

    def journal_damage(self, run_id: str) -> list[JournalDamage]:
        """Always ``[]``: entries held as values cannot be damaged."""
        return []

    def journal_entries(self, run_id: str) -> list[JournalRow | JournalDamage]:
        """:meth:`journal` (entries held as values are never damaged)."""
        return list(self.journal(run_id))

    def request_cancel(self, run_id: str, reason: str) -> None:
        self._cancels.setdefault(run_id, reason)

    def cancel_requests(self, run_ids: list[str]) -> dict[str, str]:
        return {r: self._cancels[r] for r in run_ids if r in self._cancels}

    def put_artifact(self, run_id: str, artifact_id: str, name: str, mime_type: str, data: bytes) -> None:
        if (run_id, artifact_id) in self._artifacts:
            raise StoreError(f"artifact {artifact_id} of run {run_id} cannot be stored: it already exists")
        self._artifacts[(run_id, artifact_id)] = (name, mime_type, data, utc_now())

    def get_artifact(self, run_id: str, artifact_id: str) -> tuple[str, str, bytes] | None:
        a = self._artifacts.get((run_id, artifact_id))
        return (a[0], a[1], a[2]) if a else None

    def close(self) -> None:
        """Nothing to release."""
