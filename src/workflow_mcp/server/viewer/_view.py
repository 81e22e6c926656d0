"""What the run viewer shows, as JSON-ready values: a run's page (phases, agents with their times,
tokens by phase and provider, logs, result) and the slim form of one event for the live stream.

Everything comes from the service: the run's projected :class:`~workflow_mcp.state.RunState` (status,
labels, agent states, tokens, previews, logs, result) and its durable events, read up to the state's
``lastSequence`` only, for what a state does not keep — when each call was queued, started and ended,
its model, and its error text. So a page and the events after its ``lastSequence`` never overlap and
never leave a gap.

Bounded and redacted like ``workflow_run_status`` (:mod:`workflow_mcp.server._render`): no script,
args, credential or provider session id ever appears (the state holds none, and only named payload
fields of an event are kept); of a prompt, only the bounded, masked preview its ``agent.queued`` event
stored, in one agent's details; every string is clipped (labels 200 characters, previews 300,
errors 2,000, log lines 500), the page keeps the newest :data:`MAX_LOG_LINES` log lines, and the
result is shown to :data:`MAX_RESULT_BYTES` of JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..._prices import PriceTable
from ...events import Event
from ...state import RESUMABLE, TERMINAL, RunState
from ...timeline import AgentTimes, Timeline, epoch_ms
from .._render import MAX_ERROR, MAX_STRING, clip

__all__ = [
    "MAX_LOG_LINES",
    "MAX_RESULT_BYTES",
    "AgentTimes",
    "Timeline",
    "agent_view",
    "event_view",
    "run_view",
    "summary_view",
]

MAX_LOG_LINES = 200
"""Log lines a run page shows (the newest; the live stream appends later ones)."""
MAX_RESULT_BYTES = 262_144
"""Bytes of the final result's JSON a run page shows; a longer result is cut and says so."""
_EVENT_FIELDS = ("label", "phase", "title", "status", "reason", "outcome", "model", "provider", "message")


def _phase_of(phase: str | None) -> str:
    return phase if isinstance(phase, str) and phase else "(no phase)"


def _call_cost(
    agent: Any, times: AgentTimes | None, run_provider: str | None, prices: PriceTable
) -> float | None:
    """What one call cost (a replayed one: nothing new), ``None`` when the table does not price it."""
    if agent.cached:
        return 0.0
    provider = (times.provider if times is not None else None) or run_provider
    return prices.cost(provider, times.model if times is not None else None, agent.tokens)


def _money(amount: float | None) -> float | None:
    return None if amount is None else round(amount, 6)


def agent_view(
    agent: Any, times: AgentTimes | None, run_provider: str | None, prices: PriceTable | None = None
) -> dict[str, Any]:
    """One agent call as the run page shows it: ``{agentId, label, phase, state, cached, tokens,
    preview, promptPreview, model, provider, queuedAt, startedAt, endedAt, error}`` (times in epoch ms
    or ``None``). ``promptPreview`` is the one its ``agent.queued`` event stored (the prompt's first
    300 characters, credential-shaped text masked; ``None`` when not stored); ``provider`` and
    ``model`` are those its ``agent.started`` event names as routed, else the run's provider. ``cost``
    (in the table's currency) is ``None`` when ``prices`` does not price the call."""
    t = times or AgentTimes()
    return {
        "agentId": agent.agent_id,
        "label": clip(agent.label, 200) or "",
        "phase": _phase_of(agent.phase),
        "state": agent.state,
        "cached": agent.cached,
        "tokens": {k: int(v) for k, v in agent.tokens.items()},
        "preview": clip(agent.preview, 300),
        "promptPreview": clip(t.prompt_preview, 300),
        "model": clip(t.model, 200),
        "provider": t.provider or run_provider,
        "queuedAt": t.queued,
        "startedAt": t.started,
        "endedAt": t.ended,
        "error": clip(t.error, MAX_ERROR),
        "cost": _money(_call_cost(agent, times, run_provider, prices or PriceTable())),
    }


_Call = tuple[str, str, str | None, dict[str, int], float | None]
"""``(agentId, phase, provider, tokens, cost)`` of one call."""


def _tokens_by(calls: list[_Call], index: int) -> list[dict[str, Any]]:
    """Token totals and cost of ``calls`` grouped by field ``index`` (a group's cost is ``None`` when
    one of its calls' is)."""
    totals: dict[str, dict[str, Any]] = {}
    costs: dict[str, list[float | None]] = {}
    for call in calls:
        name = str(call[index] or "(unknown)")
        row = totals.setdefault(name, {"input": 0, "output": 0, "agents": 0})
        row["input"] += int(call[3].get("input", 0))
        row["output"] += int(call[3].get("output", 0))
        row["agents"] += 1
        costs.setdefault(name, []).append(call[4])
    return [
        {"name": name, **row, "cost": _money(PriceTable.total(costs[name]))} for name, row in totals.items()
    ]


def _calls(state: RunState, timeline: Timeline, prices: PriceTable) -> list[_Call]:
    out = []
    for a in state.agents.values():
        times = timeline.agents.get(a.agent_id)
        provider = (times.provider if times is not None else None) or timeline.provider
        out.append(
            (
                a.agent_id,
                _phase_of(a.phase),
                provider,
                a.tokens,
                _call_cost(a, times, timeline.provider, prices),
            )
        )
    return out


def _result_text(state: RunState) -> tuple[str | None, bool]:
    if not state.has_result:
        return None, False
    text = json.dumps(state.result, ensure_ascii=False, indent=2, default=str)
    if len(text.encode()) <= MAX_RESULT_BYTES:
        return text, False
    return text.encode()[:MAX_RESULT_BYTES].decode("utf-8", "ignore"), True


def summary_view(
    state: RunState, timeline: Timeline, prices: PriceTable | None = None, calls: list[_Call] | None = None
) -> dict[str, Any]:
    """The run-level part of a page: ``{runId, status, workflow, provider, startedAt, endedAt,
    counts, done, total, tokenUsage, cost, currency, currentPhase, phases, pausedReason?, resetsAt?,
    error?, resumable, terminal, lastSequence}``. ``cost`` is what the run's calls cost so far by
    ``prices`` (in ``currency``), ``None`` unless every call is priced."""
    table = prices or PriceTable()
    if calls is None:
        calls = _calls(state, timeline, table)
    counts = state.counts()
    out: dict[str, Any] = {
        "runId": state.run_id,
        "status": state.status,
        "workflow": clip(str(state.workflow.get("name") or ""), 200),
        "provider": timeline.provider,
        "startedAt": timeline.run_started,
        "endedAt": timeline.run_ended if state.status in TERMINAL else None,
        "counts": counts,
        "done": sum(counts[k] for k in ("completed", "failed", "cancelled", "cached")),
        "total": sum(counts.values()),
        "tokenUsage": dict(state.token_usage),
        "cost": _money(PriceTable.total(call[4] for call in calls)),
        "currency": table.currency,
        "currentPhase": clip(state.current_phase, 200),
        "phases": [{"title": clip(p["title"], 200) or "", "status": p["status"]} for p in state.phases],
        "terminal": state.status in TERMINAL,
        "resumable": state.status in RESUMABLE,
        "lastSequence": state.last_sequence,
    }
    if state.paused_reason is not None:
        out["pausedReason"] = clip(state.paused_reason)
    if state.resets_at is not None:
        out["resetsAt"] = clip(state.resets_at, 64)
    if state.error is not None:
        out["error"] = {
            "kind": clip(str(state.error.get("kind") or state.error.get("type") or "error"), 200),
            "message": clip(str(state.error.get("message") or ""), MAX_ERROR),
        }
    return out


def run_view(
    state: RunState,
    events: Iterable[Event] | Timeline,
    *,
    agents: bool = True,
    prices: PriceTable | None = None,
) -> dict[str, Any]:
    """The whole run page: :func:`summary_view` plus ``agents`` (:func:`agent_view`, in call order),
    ``lanes`` (``[{title, status, agentIds}]``, the run's phases in order and any phase an agent names),
    ``tokensByPhase``/``tokensByProvider`` (``[{name, input, output, agents, cost}]``, ``cost`` as
    :func:`summary_view`'s, by ``prices``), ``logs`` (the newest
    :data:`MAX_LOG_LINES`, each clipped), ``logsDropped``, ``result`` (pretty JSON text or ``None``) and
    ``resultTruncated``. ``events`` are the run's events in order (only those up to the state's
    ``lastSequence`` count), or their :class:`Timeline` folded up to it. Without ``agents``: the page's
    summary only, ``agents`` and each lane's ``agentIds`` empty (what the live page re-reads)."""
    timeline = events if isinstance(events, Timeline) else Timeline().fold(events, until=state.last_sequence)
    table = prices or PriceTable()
    calls = _calls(state, timeline, table)
    out = summary_view(state, timeline, table, calls)
    lanes: dict[str, dict[str, Any]] = {
        p["title"]: {"title": p["title"], "status": p["status"], "agentIds": []} for p in out["phases"]
    }
    for agent_id, phase, *_ in calls:
        lane = lanes.setdefault(phase, {"title": phase, "status": "", "agentIds": []})
        if agents:
            lane["agentIds"].append(agent_id)
    # The summary alone (what a live page re-reads) builds no per-call view.
    every = (
        [
            agent_view(a, timeline.agents.get(a.agent_id), timeline.provider, table)
            for a in state.agents.values()
        ]
        if agents
        else []
    )
    result, cut = _result_text(state)
    logs = state.logs[-MAX_LOG_LINES:]
    out.update(
        agents=every,
        lanes=list(lanes.values()),
        tokensByPhase=_tokens_by(calls, 1),
        tokensByProvider=_tokens_by(calls, 2),
        logs=[clip(line, MAX_STRING) or "" for line in logs],
        logsDropped=len(state.logs) - len(logs),
        result=result,
        resultTruncated=cut,
    )
    return out


def event_view(event: Event) -> dict[str, Any]:
    """The slim form of one event the live stream sends: ``{sequence, type, at (epoch ms), agentId?,
    phase?, payload: {only label, phase, title, status, reason, outcome, model, provider, message,
    each clipped}}`` — never a prompt, result body or key."""
    payload: Mapping[str, Any] = event.payload
    kept: dict[str, Any] = {}
    for name in _EVENT_FIELDS:
        value = payload.get(name)
        if isinstance(value, str):
            kept[name] = clip(value, MAX_ERROR if name == "message" else 200)
    if event.type == "log":
        kept["message"] = clip(str(payload.get("message", "")), MAX_STRING)
    out: dict[str, Any] = {"sequence": event.sequence, "type": event.type, "at": epoch_ms(event.timestamp)}
    if event.agent_id is not None:
        out["agentId"] = event.agent_id
    if event.phase_id is not None:
        out["phase"] = clip(event.phase_id, 200)
    out["payload"] = kept
    return out
