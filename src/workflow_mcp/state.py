"""``project_state(events)``: the pure projection of a run's events to its current state, and the
one vocabulary of run statuses.

Status is never stored separately: it is whatever the events say. Shape of :class:`RunState.to_json`::

    {runId, status, workflow, startedAt, endedAt, phases: [{title, status}], currentPhase,
     agents: [{agentId, label, phase, state, cached, tokens, preview}], counts: {queued, running,
     completed, failed, cancelled, cached}, logs: [str], tokenUsage: {input, output, cacheRead,
     cacheWrite, replayedOutput}, lastSequence, result?, error?, pausedReason?,
     worktrees?: [{agentId, label, path, head?}]}

``worktrees`` lists the worktrees kept because an agent changed or committed something there
(``artifact.created`` events of kind ``worktree``, also those recovery kept after a crash).

Statuses (:data:`RunStatus`, DESIGN "Run lifecycle"): ``queued → running → completed | failed |
cancelled``, plus ``paused`` and ``interrupted``. :data:`TERMINAL` and :data:`RESUMABLE` are the only
definitions of which statuses have ended and which a resume is offered for; the service, the stores
(their SQL too, through :data:`STATUS_OF_EVENT`), the engine, the MCP server and the CLI all use them.

An agent call's state is one of :data:`AgentStatus`. A call stopped because its run was cancelled or
paused is ``cancelled``, not ``failed``: the event contract keeps one ``agent.failed`` event for every
call that ended without a result, and its ``reason`` (``cancelled``, ``error``, ``provider_failed``,
``stalled``, …) says why, so no consumer of ``agent.failed`` had to change. A call still queued or
running when its run ends (a terminal ``run.*`` event) is ``cancelled`` too: it never finishes under
that run id (a resume runs it again).

:class:`StateProjector` keeps a state current one event at a time (what a live run's service does as
its events are committed); :func:`project_state` folds a whole log through it, so both give the same
state for the same events.

Phases are the run's phase list as Claude Code 2.1.332 shows it: ``meta.phases`` first (``pending``
until an agent runs in them), then each new title from phase() or an agent's ``phase`` option, in
first-use order. A phase still ``running`` when the run ends takes the run's terminal status
(``completed``, ``failed``, ``cancelled``, ``paused``, ``interrupted``): no phase of an ended run
reads as running. ``currentPhase`` is the latest new phase() title or the phase of the latest queued
agent call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final, Literal, get_args

from .events import Event

__all__ = [
    "RESUMABLE",
    "RUN_STATUSES",
    "STATUS_OF_EVENT",
    "TERMINAL",
    "TERMINAL_EVENTS",
    "AgentState",
    "AgentStatus",
    "RunState",
    "RunStatus",
    "StateProjector",
    "project_state",
    "status_of",
]

RunStatus = Literal["queued", "running", "paused", "completed", "failed", "cancelled", "interrupted"]
"""A run's status: always a projection of its ``run.*`` events (DESIGN "Run lifecycle and events")."""

RUN_STATUSES: Final[tuple[RunStatus, ...]] = get_args(RunStatus)

TERMINAL: Final[frozenset[RunStatus]] = frozenset(
    {"completed", "failed", "cancelled", "interrupted", "paused"}
)
"""The statuses in which nothing runs the run any more: waiting for it returns at once, its store claim
is released, recovery leaves it alone. A resume continues it as a new run, so under its own id a
terminal run never changes again. Every other status (``queued``, ``running``) is still going."""

RESUMABLE: Final[frozenset[RunStatus]] = TERMINAL - {"completed"}
"""The terminal statuses a resume is offered for (``workflow-mcp resume``, ``resumeFromRunId``): the run
stopped before its result, and its finished calls replay."""

STATUS_OF_EVENT: Final[Mapping[str, RunStatus]] = MappingProxyType(
    {
        "run.queued": "queued",
        "run.started": "running",
        "run.resumed": "running",
        "run.paused": "paused",
        "run.completed": "completed",
        "run.failed": "failed",
        "run.cancelled": "cancelled",
        "run.interrupted": "interrupted",
    }
)
"""The ``run.*`` events that set a run's status, and the status each sets. The newest of them is the
run's status (``run.cancellation_requested`` sets none: the run runs until it stops)."""

TERMINAL_EVENTS: Final[frozenset[str]] = frozenset(t for t, s in STATUS_OF_EVENT.items() if s in TERMINAL)
"""The event types that end a run (its status becomes :data:`TERMINAL`)."""

AgentStatus = Literal["queued", "running", "completed", "failed", "cancelled", "cached"]
"""An agent call's state in a projection (see the module docstring for ``cancelled``)."""

AGENT_STATUSES: Final[tuple[AgentStatus, ...]] = get_args(AgentStatus)


def status_of(newest_run_event: str | None) -> RunStatus:
    """The status a run's newest :data:`STATUS_OF_EVENT` event gives it (``None``, no such event yet:
    ``queued``)."""
    return STATUS_OF_EVENT.get(newest_run_event or "", "queued")


_PREVIEW = 200


@dataclass(slots=True)
class AgentState:
    """One agent call as seen through its events."""

    agent_id: str
    label: str = ""
    phase: str | None = None
    state: AgentStatus = "queued"
    cached: bool = False
    tokens: dict[str, int] = field(default_factory=dict)
    preview: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "agentId": self.agent_id,
            "label": self.label,
            "phase": self.phase,
            "state": self.state,
            "cached": self.cached,
            "tokens": dict(self.tokens),
            "preview": self.preview,
        }


def _no_counts() -> dict[AgentStatus, int]:
    return dict.fromkeys(AGENT_STATUSES, 0)


@dataclass
class RunState:
    """The projected state of one run (see the module docstring for the JSON shape).

    Change it only through :class:`StateProjector` (or :func:`project_state`), which keeps the agent
    counts in step with the agents."""

    run_id: str
    status: RunStatus = "queued"
    workflow: dict[str, Any] = field(default_factory=dict)
    started_at: str | None = None
    ended_at: str | None = None
    phases: list[dict[str, str]] = field(default_factory=list)
    current_phase: str | None = None
    agents: dict[str, AgentState] = field(default_factory=dict)
    logs: list[str] = field(default_factory=list)
    token_usage: dict[str, int] = field(
        default_factory=lambda: {
            "input": 0,
            "output": 0,
            "cacheRead": 0,
            "cacheWrite": 0,
            "replayedOutput": 0,
        }
    )
    result: Any = None
    has_result: bool = False
    error: dict[str, Any] | None = None
    paused_reason: str | None = None
    #: When a run paused for a usage limit resets (ISO 8601 UTC), if the backend said.
    resets_at: str | None = None
    #: What a run paused ``checkpoint_required`` waits for an answer to (non-secret: checkpointId,
    #: label, tool, title, command, paths).
    checkpoint_context: dict[str, Any] | None = None
    worktrees: list[dict[str, Any]] = field(default_factory=list)
    last_sequence: int = 0
    #: The type of the newest event folded in (not part of :meth:`to_json`).
    last_type: str | None = None
    _counts: dict[AgentStatus, int] = field(default_factory=_no_counts, repr=False, compare=False)

    @property
    def terminal(self) -> bool:
        """Whether the run has ended (its status is in :data:`TERMINAL`)."""
        return self.status in TERMINAL

    def counts(self) -> dict[str, int]:
        """Agent calls by state: ``{queued, running, completed, failed, cancelled, cached}`` (kept as the
        events are folded, so this costs the same for 10 calls as for 1,000)."""
        return {status: n for status, n in self._counts.items()}

    def copy(self) -> RunState:
        """An independent copy (later folds into this state do not change it). Results and error
        values are shared: the projection never changes them in place."""
        return replace(
            self,
            workflow=dict(self.workflow),
            phases=[dict(p) for p in self.phases],
            agents={k: replace(a, tokens=dict(a.tokens)) for k, a in self.agents.items()},
            logs=list(self.logs),
            token_usage=dict(self.token_usage),
            error=None if self.error is None else dict(self.error),
            worktrees=[dict(w) for w in self.worktrees],
            _counts=dict(self._counts),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "runId": self.run_id,
            "status": self.status,
            "workflow": dict(self.workflow),
            "startedAt": self.started_at,
            "endedAt": self.ended_at,
            "phases": [dict(p) for p in self.phases],
            "currentPhase": self.current_phase,
            "agents": [a.to_json() for a in self.agents.values()],
            "counts": self.counts(),
            "logs": list(self.logs),
            "tokenUsage": dict(self.token_usage),
            "lastSequence": self.last_sequence,
        }
        if self.has_result:
            out["result"] = self.result
        if self.error is not None:
            out["error"] = dict(self.error)
        if self.paused_reason is not None:
            out["pausedReason"] = self.paused_reason
        if self.resets_at is not None:
            out["resetsAt"] = self.resets_at
        if self.checkpoint_context is not None:
            out["checkpointContext"] = dict(self.checkpoint_context)
        if self.worktrees:
            out["worktrees"] = [dict(w) for w in self.worktrees]
        return out


def _preview(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


class StateProjector:
    """Folds one run's events, in sequence order, into :attr:`state`, one event at a time.

    ``apply`` costs what the event holds, never what the run already has (the agent counts are kept
    as calls change state), so a caller that follows a live run keeps its state current for the price
    of its events. :func:`project_state` is this projector over a whole log: same events, same state.
    """

    __slots__ = ("state",)

    def __init__(self, state: RunState) -> None:
        self.state = state

    def apply_all(self, events: Iterable[Event]) -> RunState:
        """Fold ``events`` in order; returns :attr:`state`."""
        state, handlers = self.state, _HANDLERS
        for event in events:
            state.last_sequence = event.sequence
            state.last_type = event.type
            handler = handlers.get(event.type)
            if handler is not None:
                handler(self, event)
        return state

    def apply(self, event: Event) -> None:
        """Fold one event (the next in sequence order) into :attr:`state`."""
        self.apply_all((event,))

    # -- run events ------------------------------------------------------------------------------
    def _run_event(self, event: Event) -> RunState:
        state = self.state
        state.status = STATUS_OF_EVENT[event.type]
        if state.status in TERMINAL:
            self._cancel_unfinished()
            state.ended_at = event.timestamp
        return state

    def _queued(self, event: Event) -> None:
        self._run_event(event).workflow = dict(event.payload.get("workflow") or {})

    def _started(self, event: Event) -> None:
        state, p = self._run_event(event), event.payload
        state.started_at = state.started_at or event.timestamp
        if p.get("workflow"):
            state.workflow = dict(p["workflow"])
        for title in p.get("phases") or []:
            if not any(ph["title"] == title for ph in state.phases):
                state.phases.append({"title": str(title), "status": "pending"})

    def _resumed(self, event: Event) -> None:
        state = self._run_event(event)
        state.paused_reason = state.resets_at = state.checkpoint_context = None
        for ph in state.phases:  # what the pause closed runs on
            if ph["status"] == "paused":
                ph["status"] = "running"

    def _paused(self, event: Event) -> None:
        state = self._run_event(event)
        state.paused_reason = str(event.payload.get("reason") or "")
        resets = event.payload.get("resetsAt")
        state.resets_at = resets if isinstance(resets, str) else None
        checkpoint = event.payload.get("checkpointContext")
        state.checkpoint_context = dict(checkpoint) if isinstance(checkpoint, dict) else None  # pyright: ignore[reportUnknownArgumentType]
        _close_phases(state, "paused")

    def _completed(self, event: Event) -> None:
        state = self._run_event(event)
        state.result = event.payload.get("result")
        state.has_result = True
        _close_phases(state, "completed")

    def _failed(self, event: Event) -> None:
        state = self._run_event(event)
        state.error = dict(event.payload.get("error") or {})
        _close_phases(state, "failed")

    def _cancelled(self, event: Event) -> None:
        state = self._run_event(event)
        # A paused run its user cancelled waits for nothing any more.
        state.paused_reason = state.resets_at = state.checkpoint_context = None
        _close_phases(state, "cancelled")

    def _interrupted(self, event: Event) -> None:
        _close_phases(self._run_event(event), "interrupted")

    def _cancel_unfinished(self) -> None:
        """A call still queued or running when its run ends never finishes under this run id."""
        counts = self.state._counts
        for a in self.state.agents.values():
            if a.state in ("queued", "running"):
                counts[a.state] -= 1
                counts["cancelled"] += 1
                a.state = "cancelled"

    # -- phases and logs ---------------------------------------------------------------------------
    def _phase_started(self, event: Event) -> None:
        state = self.state
        title = str(event.payload.get("title"))
        declared = event.payload.get("source") == "meta"  # listed before it is entered
        found = next((ph for ph in state.phases if ph["title"] == title), None)
        if found is None:
            state.phases.append({"title": title, "status": "pending" if declared else "running"})
        elif not declared:
            found["status"] = "running"
        if not declared:
            state.current_phase = title

    def _phase_ended(self, event: Event) -> None:
        title = str(event.payload.get("title"))
        for ph in self.state.phases:
            if ph["title"] == title:
                ph["status"] = "completed" if event.type == "phase.completed" else "failed"

    def _log(self, event: Event) -> None:
        self.state.logs.append(str(event.payload.get("message", "")))

    def _artifact(self, event: Event) -> None:
        p = event.payload
        if p.get("kind") == "worktree" and p.get("kept"):
            kept = {
                "agentId": event.agent_id,
                "label": str(p.get("label", "")),
                "path": str(p.get("path", "")),
            }
            self.state.worktrees.append(kept | ({"head": str(p["head"])} if p.get("head") else {}))

    # -- agent calls ---------------------------------------------------------------------------------
    def _agent_queued(self, event: Event) -> None:
        self._agent(event, "queued")
        phase = event.payload.get("phase")
        if isinstance(phase, str):
            _enter_phase(self.state, phase)

    def _agent_started(self, event: Event) -> None:
        self._agent(event, "running")

    def _agent_cached(self, event: Event) -> None:
        self._agent_result(event, replayed=True)

    def _agent_completed(self, event: Event) -> None:
        self._agent_result(event, replayed=False)

    def _agent_result(self, event: Event, *, replayed: bool) -> None:
        p = event.payload
        a = self._agent(event, "cached" if replayed else "completed")
        a.cached = a.cached or replayed
        a.preview = _preview(p.get("result"))
        usage = dict(p.get("tokenUsage") or {})
        a.tokens = {k: int(v) for k, v in usage.items()}
        self._add_tokens(usage, replayed=replayed)

    def _agent_failed(self, event: Event) -> None:
        # One event for every call that ended without a result; a cancelled one (its run was
        # cancelled or paused) did not fail.
        p = event.payload
        a = self._agent(event, "cancelled" if p.get("reason") == "cancelled" else "failed")
        a.preview = _preview(p.get("message"))
        self._add_tokens(dict(p.get("tokenUsage") or {}), replayed=False)

    def _agent(self, event: Event, new: AgentStatus) -> AgentState:
        state = self.state
        agent_id = event.agent_id or ""
        a = state.agents.get(agent_id)
        if a is None:
            a = AgentState(agent_id=agent_id, state=new)
            state.agents[agent_id] = a
        else:
            state._counts[a.state] -= 1
            a.state = new
        state._counts[new] += 1
        p = event.payload
        if "label" in p:
            a.label = str(p["label"])
        if "phase" in p:
            a.phase = p["phase"]
        return a

    def _add_tokens(self, usage: dict[str, Any], *, replayed: bool) -> None:
        totals = self.state.token_usage
        if replayed:
            totals["replayedOutput"] += int(usage.get("output", 0))
            return
        for key in ("input", "output", "cacheRead", "cacheWrite"):
            totals[key] += int(usage.get(key, 0))


# Event type -> what folding it does (types not listed change nothing but the newest sequence).
_HANDLERS: Final[Mapping[str, Callable[[StateProjector, Event], None]]] = MappingProxyType(
    {
        "run.queued": StateProjector._queued,
        "run.started": StateProjector._started,
        "run.resumed": StateProjector._resumed,
        "run.paused": StateProjector._paused,
        "run.completed": StateProjector._completed,
        "run.failed": StateProjector._failed,
        "run.cancelled": StateProjector._cancelled,
        "run.interrupted": StateProjector._interrupted,
        "phase.started": StateProjector._phase_started,
        "phase.completed": StateProjector._phase_ended,
        "phase.failed": StateProjector._phase_ended,
        "log": StateProjector._log,
        "artifact.created": StateProjector._artifact,
        "agent.queued": StateProjector._agent_queued,
        "agent.started": StateProjector._agent_started,
        "agent.cached": StateProjector._agent_cached,
        "agent.completed": StateProjector._agent_completed,
        "agent.failed": StateProjector._agent_failed,
    }
)
assert set(STATUS_OF_EVENT) <= set(_HANDLERS), "every status event is folded"


def project_state(
    events: Iterable[Event], run_id: str | None = None, *, into: RunState | None = None
) -> RunState:
    """Fold ``events`` (in sequence order) into a :class:`RunState`. Pure: same events, same state.

    ``into`` continues a projection: the state of the events before these, updated in place and
    returned (folding a log in two parts gives the state of folding it at once), so a caller following a
    run projects each event once.

    Raises:
        ValueError: no events, and neither ``run_id`` nor ``into`` says which run.
    """
    if into is not None:
        return StateProjector(into).apply_all(events)
    it = iter(events)
    if run_id is None:
        first = next(it, None)
        if first is None:
            raise ValueError("project_state needs at least one event or a run_id")
        projector = StateProjector(RunState(run_id=first.run_id))
        projector.apply(first)
    else:
        projector = StateProjector(RunState(run_id=run_id))
    return projector.apply_all(it)


def _enter_phase(state: RunState, title: str) -> None:
    for ph in state.phases:
        if ph["title"] == title and ph["status"] == "pending":
            ph["status"] = "running"
    state.current_phase = title


def _close_phases(state: RunState, status: str) -> None:
    for ph in state.phases:
        if ph["status"] == "running":
            ph["status"] = "completed" if status == "completed" else status
