"""The event contract: one envelope, a closed set of families, and an in-memory log.

Envelope (schemaVersion 1)::

    {schemaVersion, runId, sequence, eventId, timestamp, type, phaseId?, nodeId?, agentId?,
     parentId?, payload}

``sequence`` is monotonic per run starting at 1; ``eventId`` is ``<runId>:<sequence>`` and so stable
across re-reads. Families: ``run.*``, ``phase.*``, ``agent.queued|started|output.delta|completed|
failed|cached``, ``log``, ``warning``, ``artifact.created``. Provider-specific names never appear
here: adapters translate them. Status is always a projection of these events (see ``state.py``, which
also says which ``run.*`` events end a run).

An ``agent.queued`` event carries ``promptPreview``: the prompt's first 300 characters with
credential-shaped text masked (:func:`workflow_mcp._redact.prompt_preview`), never the whole prompt.
Each live agent call emits one ``agent.started`` whose payload carries the call's ``label``,
``phase``, ``model`` and, with an agent definition, ``agentType``, ``agentSource`` and ``agentFile``, and
``provider``: the name of the provider routing sends it to (a configured name such as ``reviewer``,
a preset such as ``gemini``, or a registered provider; a fallback that takes over after a failure
is reported as the call's progress, naming it).

An agent call that ends without a result emits one ``agent.failed`` whose ``payload.reason`` says why:
``cancelled`` (its run was cancelled or paused; projections count the call as cancelled, not failed),
``error``, ``provider_failed``, ``stalled``, ``no_structured_output``, ``schema_validation`` or
``auth_required``. There is no separate ``agent.cancelled`` type, so every consumer of the closed set
keeps working.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "EVENT_TYPES",
    "SCHEMA_VERSION",
    "Event",
    "EventLog",
    "utc_now",
]

SCHEMA_VERSION: Final = 1

EVENT_TYPES: Final = frozenset(
    {
        "run.queued",
        "run.started",
        "run.completed",
        "run.failed",
        "run.cancellation_requested",
        "run.cancelled",
        "run.interrupted",
        "run.paused",
        "run.resumed",
        "checkpoint.requested",
        "checkpoint.resolved",
        "phase.started",
        "phase.completed",
        "phase.failed",
        "agent.queued",
        "agent.started",
        "agent.output.delta",
        "agent.completed",
        "agent.failed",
        "agent.cached",
        "agent.delivered",
        "log",
        "warning",
        "artifact.created",
    }
)


_clock: list[Any] = [-1, -1, "", ""]  # [second, millisecond, date part of that second, stamp of that ms]


def utc_now() -> str:
    """ISO 8601 UTC timestamp with milliseconds, e.g. ``2026-11-30T10:00:00.123Z``."""
    ms = time.time_ns() // 1_000_000
    clock = _clock
    if ms == clock[1]:  # events come in bursts: many share a millisecond
        return str(clock[3])
    whole, frac = divmod(ms, 1000)
    if whole != clock[0]:  # formatting the date part once a second keeps events cheap
        clock[0] = whole
        clock[2] = _dt.datetime.fromtimestamp(whole, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    clock[1] = ms
    clock[3] = stamp = f"{clock[2]}.{frac:03d}Z"
    return stamp


@dataclass(frozen=True)
class Event:
    """One durable event. ``payload`` is a JSON object whose shape depends on ``type``."""

    run_id: str
    sequence: int
    type: str
    payload: dict[str, Any] = field(default_factory=dict)
    timestamp: str = ""
    phase_id: str | None = None
    node_id: str | None = None
    agent_id: str | None = None
    parent_id: str | None = None
    schema_version: int = SCHEMA_VERSION

    @property
    def event_id(self) -> str:
        return f"{self.run_id}:{self.sequence}"

    def to_json(self) -> dict[str, Any]:
        """The wire envelope (camelCase keys; absent optional ids omitted)."""
        out: dict[str, Any] = {
            "schemaVersion": self.schema_version,
            "runId": self.run_id,
            "sequence": self.sequence,
            "eventId": self.event_id,
            "timestamp": self.timestamp,
            "type": self.type,
        }
        if self.phase_id is not None:
            out["phaseId"] = self.phase_id
        if self.node_id is not None:
            out["nodeId"] = self.node_id
        if self.agent_id is not None:
            out["agentId"] = self.agent_id
        if self.parent_id is not None:
            out["parentId"] = self.parent_id
        out["payload"] = self.payload
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        """Inverse of :meth:`to_json`. Raises ``KeyError``/``TypeError`` on a malformed envelope."""
        return cls(
            run_id=str(data["runId"]),
            sequence=int(data["sequence"]),
            type=str(data["type"]),
            payload=dict(data.get("payload") or {}),
            timestamp=str(data.get("timestamp", "")),
            phase_id=data.get("phaseId"),
            node_id=data.get("nodeId"),
            agent_id=data.get("agentId"),
            parent_id=data.get("parentId"),
            schema_version=int(data.get("schemaVersion", SCHEMA_VERSION)),
        )


PersistFn = Callable[[list[Event]], None]


_new_event = object.__new__


class EventLog:
    """The events of one run: appended in order, persisted before they are published.

    ``persist`` (e.g. a store's ``append_many``) receives the events emitted during one turn of the
    event loop as one batch (group commit); only after it returns are they published to
    subscribers. Without ``persist`` events are published at once. ``subscribe()`` replays everything
    published so far and then follows live events until :meth:`close`.
    """

    #: A batch this large is committed at once instead of at the end of the loop turn.
    MAX_BATCH = 1024

    def __init__(
        self,
        run_id: str,
        *,
        persist: PersistFn | None = None,
        start_sequence: int = 0,
        on_persist_error: Callable[[Exception], None] | None = None,
    ) -> None:
        self.run_id = run_id
        self._persist = persist
        self._on_persist_error = on_persist_error
        self.persist_error: Exception | None = None
        self._events: list[Event] = []
        self._pending: list[Event] = []
        self._sequence = start_sequence
        self._changed = asyncio.Event()
        self._closed = False

    @property
    def events(self) -> list[Event]:
        """The published (durable) events so far."""
        return list(self._events)

    @property
    def last_sequence(self) -> int:
        return self._sequence

    def emit(
        self,
        type: str,
        payload: dict[str, Any] | None = None,
        *,
        phase_id: str | None = None,
        node_id: str | None = None,
        agent_id: str | None = None,
        parent_id: str | None = None,
    ) -> Event:
        """Create one event; it is persisted and published with the rest of this loop turn's batch."""
        self._sequence += 1
        # Built as the frozen dataclass's own __init__ would, minus a setattr call per field: a run
        # emits four events per agent call, and this is most of the host's cost per call.
        event = _new_event(Event)
        event.__dict__.update(
            run_id=self.run_id,
            sequence=self._sequence,
            type=type,
            payload=payload if payload is not None else {},
            timestamp=utc_now(),
            phase_id=phase_id,
            node_id=node_id,
            agent_id=agent_id,
            parent_id=parent_id,
            schema_version=SCHEMA_VERSION,
        )
        self._pending.append(event)
        if len(self._pending) == 1 and self._persist is not None:
            try:
                asyncio.get_running_loop().call_soon(self.flush)
            except RuntimeError:
                self.flush()
        elif self._persist is None or len(self._pending) >= self.MAX_BATCH:
            self.flush()
        return event

    def flush(self) -> None:
        """Persist (one batch) and then publish every pending event."""
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        if self._persist is not None:
            try:
                self._persist(batch)
            except Exception as exc:  # the store refused the batch: it is not durable, so not published
                self.persist_error = exc
                if self._on_persist_error is not None:
                    self._on_persist_error(exc)
                return
        self._events.extend(batch)
        self._changed.set()

    def close(self) -> None:
        """No more events will come (pending ones are flushed); live subscribers end after the last."""
        self.flush()
        self._closed = True
        self._changed.set()

    async def subscribe(self, after: int = 0) -> AsyncIterator[Event]:
        """Every event with ``sequence > after``, then live ones until :meth:`close`."""
        index = 0
        while True:
            while index < len(self._events):
                event = self._events[index]
                index += 1
                if event.sequence > after:
                    yield event
            if self._closed:
                return
            self._changed.clear()
            if index < len(self._events) or self._closed:
                continue
            await self._changed.wait()
