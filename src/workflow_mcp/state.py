"""``project_state(events)``: the pure projection of a run's events to its current state.

Status is never stored separately: it is whatever the events say. Shape of :class:`RunState.to_json`::

    {runId, status, workflow, startedAt, endedAt, phases: [{title, status}], currentPhase,
     agents: [{agentId, label, phase, state, cached, tokens, preview}], counts: {queued, running,
     completed, failed, cached}, logs: [str], tokenUsage: {input, output, cacheRead, cacheWrite,
     replayedOutput}, result?, error?, pausedReason?, worktrees?: [{agentId, label, path, head?}]}

``worktrees`` lists the worktrees kept because an agent changed or committed something there
(``artifact.created`` events of kind ``worktree``, also those recovery kept after a crash).

Statuses: queued, running, paused, completed, failed, cancelled, interrupted.

Phases are the run's phase list as Claude Code 2.1.332 shows it: ``meta.phases`` first (``pending``
until an agent runs in them), then each new title from phase() or an agent's ``phase`` option, in
first-use order. ``currentPhase`` is the latest new phase() title or the phase of the latest queued
agent call.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .events import Event

__all__ = ["AgentState", "RunState", "project_state"]

_PREVIEW = 200


@dataclass
class AgentState:
    """One agent call as seen through its events."""

    agent_id: str
    label: str = ""
    phase: str | None = None
    state: str = "queued"  # queued | running | completed | failed | cached
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


@dataclass
class RunState:
    """The projected state of one run (see the module docstring for the JSON shape)."""

    run_id: str
    status: str = "queued"
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
    worktrees: list[dict[str, Any]] = field(default_factory=list)
    last_sequence: int = 0

    @property
    def terminal(self) -> bool:
        return self.status in ("completed", "failed", "cancelled")

    def counts(self) -> dict[str, int]:
        out = {"queued": 0, "running": 0, "completed": 0, "failed": 0, "cached": 0}
        for a in self.agents.values():
            out[a.state] = out.get(a.state, 0) + 1
        return out

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
        if self.worktrees:
            out["worktrees"] = [dict(w) for w in self.worktrees]
        return out


def _preview(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


def _agent(state: RunState, event: Event) -> AgentState:
    agent_id = event.agent_id or ""
    a = state.agents.get(agent_id)
    if a is None:
        a = AgentState(agent_id=agent_id)
        state.agents[agent_id] = a
    p = event.payload
    if "label" in p:
        a.label = str(p["label"])
    if "phase" in p:
        a.phase = p["phase"]
    return a


def _add_tokens(state: RunState, usage: dict[str, Any], *, replayed: bool) -> None:
    if replayed:
        state.token_usage["replayedOutput"] += int(usage.get("output", 0))
        return
    for key in ("input", "output", "cacheRead", "cacheWrite"):
        state.token_usage[key] += int(usage.get(key, 0))


def project_state(
    events: Iterable[Event], run_id: str | None = None, *, into: RunState | None = None
) -> RunState:
    """Fold ``events`` (in sequence order) into a :class:`RunState`. Pure: same events, same state.

    ``into`` continues a projection: the state of the events before these, updated in place and
    returned (folding a log in two parts gives the state of folding it at once), so a caller following a
    run projects each event once.
    """
    state: RunState | None = into if into is not None else None if run_id is None else RunState(run_id=run_id)
    for event in events:
        if state is None:
            state = RunState(run_id=event.run_id)
        state.last_sequence = event.sequence
        t, p = event.type, event.payload
        if t == "run.queued":
            state.status = "queued"
            state.workflow = dict(p.get("workflow") or {})
        elif t == "run.started":
            state.status = "running"
            state.started_at = state.started_at or event.timestamp
            if p.get("workflow"):
                state.workflow = dict(p["workflow"])
            for title in p.get("phases") or []:
                if not any(ph["title"] == title for ph in state.phases):
                    state.phases.append({"title": str(title), "status": "pending"})
        elif t in ("run.resumed",):
            state.status = "running"
            state.paused_reason = None
        elif t == "run.paused":
            state.status = "paused"
            state.paused_reason = str(p.get("reason") or "")
            state.ended_at = event.timestamp
        elif t == "run.completed":
            state.status = "completed"
            state.ended_at = event.timestamp
            state.result = p.get("result")
            state.has_result = True
            _close_phases(state, "completed")
        elif t == "run.failed":
            state.status = "failed"
            state.ended_at = event.timestamp
            state.error = dict(p.get("error") or {})
            _close_phases(state, "failed")
        elif t == "run.cancelled":
            state.status = "cancelled"
            state.ended_at = event.timestamp
            _close_phases(state, "cancelled")
        elif t == "run.interrupted":
            state.status = "interrupted"
            state.ended_at = event.timestamp
        elif t == "phase.started":
            title = str(p.get("title"))
            declared = p.get("source") == "meta"  # listed before it is entered
            found = next((ph for ph in state.phases if ph["title"] == title), None)
            if found is None:
                state.phases.append({"title": title, "status": "pending" if declared else "running"})
            elif not declared:
                found["status"] = "running"
            if not declared:
                state.current_phase = title
        elif t in ("phase.completed", "phase.failed"):
            title = str(p.get("title"))
            for ph in state.phases:
                if ph["title"] == title:
                    ph["status"] = "completed" if t == "phase.completed" else "failed"
        elif t == "agent.queued":
            a = _agent(state, event)
            a.state = "queued"
            if isinstance(a.phase, str):
                _enter_phase(state, a.phase)
        elif t == "agent.started":
            _agent(state, event).state = "running"
        elif t == "agent.cached":
            a = _agent(state, event)
            a.state = "cached"
            a.cached = True
            a.preview = _preview(p.get("result"))
            usage = dict(p.get("tokenUsage") or {})
            a.tokens = {k: int(v) for k, v in usage.items()}
            _add_tokens(state, usage, replayed=True)
        elif t == "agent.completed":
            a = _agent(state, event)
            a.state = "completed"
            a.preview = _preview(p.get("result"))
            usage = dict(p.get("tokenUsage") or {})
            a.tokens = {k: int(v) for k, v in usage.items()}
            _add_tokens(state, usage, replayed=False)
        elif t == "agent.failed":
            a = _agent(state, event)
            a.state = "failed"
            a.preview = _preview(p.get("message"))
            usage = dict(p.get("tokenUsage") or {})
            _add_tokens(state, usage, replayed=False)
        elif t == "log":
            state.logs.append(str(p.get("message", "")))
        elif t == "artifact.created" and p.get("kind") == "worktree" and p.get("kept"):
            kept = {
                "agentId": event.agent_id,
                "label": str(p.get("label", "")),
                "path": str(p.get("path", "")),
            }
            state.worktrees.append(kept | ({"head": str(p["head"])} if p.get("head") else {}))
    if state is None:
        raise ValueError("project_state needs at least one event or a run_id")
    return state


def _enter_phase(state: RunState, title: str) -> None:
    for ph in state.phases:
        if ph["title"] == title and ph["status"] == "pending":
            ph["status"] = "running"
    state.current_phase = title


def _close_phases(state: RunState, status: str) -> None:
    for ph in state.phases:
        if ph["status"] == "running":
            ph["status"] = "completed" if status == "completed" else status
