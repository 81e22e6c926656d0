"""Bounded, redacted views of a run for MCP results, and their short text renderings.

A snapshot never carries the script, prompts, args, credentials or provider session ids: it is built
from the projected :class:`~workflow_mcp.state.RunState` (which holds none of them) and keeps only
labels, states, compact previews, log lines and token counts, each string and the whole result under
a hard byte cap.
"""

from __future__ import annotations

import fnmatch
import json
from typing import Any

from ..events import Event
from ..state import RESUMABLE, TERMINAL, RunState
from ._models import (
    AgentCall,
    CheckpointContext,
    PhaseOut,
    RunError,
    RunOutcome,
    RunSnapshot,
    TokenUsageOut,
    dump,
)

__all__ = [
    "MAX_EVENTS_BYTES",
    "MAX_SNAPSHOT_BYTES",
    "MAX_STRING",
    "TERMINAL",
    "clip",
    "event_out",
    "outcome_of",
    "outcome_text",
    "preview",
    "snapshot_of",
    "snapshot_text",
]

MAX_STRING = 500
"""Characters kept of any single string in a snapshot (labels, previews, log lines)."""
MAX_ERROR = 2000
MAX_SNAPSHOT_BYTES = 16_384
"""Upper bound of a snapshot's JSON size; older calls and log lines are dropped to fit."""
MAX_EVENTS_BYTES = 1_048_576
"""Upper bound of one page of ``workflow_run_events`` (at least one event is always returned)."""
MAX_OUTCOME_LOGS = 50


def clip(text: str | None, limit: int = MAX_STRING) -> str | None:
    if text is None:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


def preview(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return clip(text, limit) or ""


def _usage(state: RunState) -> TokenUsageOut:
    u = state.token_usage
    return TokenUsageOut(
        input=u.get("input", 0),
        output=u.get("output", 0),
        cache_read=u.get("cacheRead", 0),
        cache_write=u.get("cacheWrite", 0),
        replayed_output=u.get("replayedOutput", 0),
    )


def _error(state: RunState) -> RunError | None:
    if state.error is None:
        return None
    name = state.error.get("name")
    return RunError(
        name=str(name) if name else None,
        message=clip(str(state.error.get("message") or "the run failed"), MAX_ERROR) or "",
    )


def _workflow_name(state: RunState) -> str | None:
    name = state.workflow.get("name")
    return str(name) if name is not None else None


def outcome_of(
    state: RunState,
    *,
    deduplicated: bool | None = None,
    resumed_from: str | None = None,
    workflow: str | None = None,
) -> RunOutcome:
    """The run handle (while it runs) or its terminal outcome; ``result`` only when completed.
    ``workflow`` names the workflow while the run has not recorded its first event yet."""
    fields: dict[str, Any] = {
        "run_id": state.run_id,
        "status": state.status,
        "terminal": state.status in TERMINAL,
        "workflow": _workflow_name(state) or workflow,
        "token_usage": _usage(state),
    }
    if state.status in TERMINAL:
        fields["logs"] = [clip(line) or "" for line in state.logs[-MAX_OUTCOME_LOGS:]]
    if state.status == "completed" and state.has_result:
        fields["result"] = state.result
    error = _error(state)
    if error is not None:
        fields["error"] = error
    if deduplicated is not None:
        fields["deduplicated"] = deduplicated
    if resumed_from is not None:
        fields["resumed_from"] = resumed_from
    if state.paused_reason is not None:
        fields["paused_reason"] = clip(state.paused_reason)
    if state.checkpoint_context is not None:
        fields["checkpoint_context"] = _checkpoint(state.checkpoint_context)
    if state.resets_at is not None:
        fields["resets_at"] = clip(state.resets_at, 64)
    return RunOutcome(**fields)


def _checkpoint(raw: dict[str, Any]) -> CheckpointContext | None:
    try:
        return CheckpointContext(
            checkpoint_id=str(raw["checkpointId"]),
            label=clip(str(raw["label"])) if raw.get("label") is not None else None,
            tool=str(raw.get("tool") or "other"),
            title=clip(str(raw.get("title") or "")) or "",
            command=clip(str(raw["command"])) if raw.get("command") is not None else None,
            paths=[clip(str(p)) or "" for p in raw.get("paths") or []],
        )
    except (KeyError, TypeError):
        return None


def outcome_text(outcome: RunOutcome) -> str:
    """One short paragraph saying what happened and what to call next."""
    rid = outcome.run_id
    wf = f" ({outcome.workflow})" if outcome.workflow else ""
    again = (
        " (an earlier run with this idempotencyKey; no new run was started)" if outcome.deduplicated else ""
    )
    if outcome.status == "completed":
        return f"Run {rid}{wf} completed{again}. Result: {preview(outcome.result, 1000)}"
    if outcome.status == "failed":
        message = outcome.error.message if outcome.error else "unknown error"
        return (
            f"Run {rid}{wf} failed{again}: {message}\n"
            f"Next: read workflow_run_status (runId {rid!r}) for the calls and logs, fix the workflow or its "
            f"args, then call workflow_run again with resumeFromRunId {rid!r} to replay every call that "
            "already finished instead of paying for it again."
        )
    if outcome.status in RESUMABLE:
        why = {
            "cancelled": "was cancelled",
            "interrupted": "was interrupted (its server process stopped)",
            "paused": "paused because a provider needs a login (auth_required); log in first"
            if outcome.paused_reason == "auth_required"
            else _checkpoint_why(outcome)
            if outcome.paused_reason == "checkpoint_required"
            else f"paused for a usage limit that resets at {outcome.resets_at}; resume it after that"
            if outcome.paused_reason == "usage_limit" and outcome.resets_at
            else f"paused ({outcome.paused_reason or 'no reason recorded'}); remove the cause first",
        }[outcome.status]
        return (
            f"Run {rid}{wf} {why}{again}. To continue it, call workflow_run with resumeFromRunId {rid!r} "
            "(and the same workflow); finished calls are replayed."
        )
    return (
        f"Run {rid}{wf} is {outcome.status}{again}. Follow it with workflow_run_events (runId {rid!r}, "
        "after 0), wait for the end with workflow_run_await, or stop it with workflow_run_cancel."
    )


def _checkpoint_why(outcome: RunOutcome) -> str:
    cp = outcome.checkpoint_context
    if cp is None:
        return "paused for a human checkpoint (checkpoint_required)"
    what = cp.command or cp.title or cp.tool
    return (
        f"paused for a human checkpoint (checkpoint_required): an agent ({cp.label}) asks permission to "
        f"{cp.tool}: {what}. Ask the user; pass checkpointReplies {{{cp.checkpoint_id!r}: 'allow' or "
        "'deny'} with the resume"
    )


def snapshot_of(
    state: RunState, *, last_n: int = 20, label_glob: str | None = None, log_lines: int = 20
) -> RunSnapshot:
    """A bounded, redacted snapshot (see the module docstring)."""
    agents = list(state.agents.values())
    if label_glob:
        agents = [a for a in agents if fnmatch.fnmatchcase(a.label, label_glob)]
    calls = [
        AgentCall(
            agent_id=a.agent_id,
            label=clip(a.label, 200) or "",
            phase=clip(a.phase, 200) if isinstance(a.phase, str) else None,
            state=a.state,
            cached=a.cached,
            preview=clip(a.preview, 300),
        )
        for a in (agents[-last_n:] if last_n > 0 else [])
    ]
    logs = [clip(line) or "" for line in (state.logs[-log_lines:] if log_lines > 0 else [])]
    fields: dict[str, Any] = {
        "run_id": state.run_id,
        "status": state.status,
        "workflow": clip(_workflow_name(state), 200),
        "started_at": state.started_at,
        "ended_at": state.ended_at,
        "phases": [
            PhaseOut(title=clip(p["title"], 200) or "", status=p["status"]) for p in state.phases[-50:]
        ],
        "current_phase": clip(state.current_phase, 200),
        "counts": state.counts(),
        "recent_calls": calls,
        "log_tail": logs,
        "token_usage": _usage(state),
        "last_sequence": state.last_sequence,
        "truncated": len(calls) < len(agents) or len(logs) < len(state.logs),
    }
    error = _error(state)
    if error is not None:
        fields["error"] = error
    if state.paused_reason is not None:
        fields["paused_reason"] = clip(state.paused_reason)
    if state.resets_at is not None:
        fields["resets_at"] = clip(state.resets_at, 64)
    snap = RunSnapshot(**fields)
    while len(json.dumps(dump(snap)).encode()) > MAX_SNAPSHOT_BYTES:  # ASCII-escaped: the worst case
        if snap.recent_calls:
            snap.recent_calls = snap.recent_calls[1:]
        elif snap.log_tail:
            snap.log_tail = snap.log_tail[1:]
        else:
            break
        snap.truncated = True
    return snap


def snapshot_text(snap: RunSnapshot) -> str:
    c = snap.counts
    head = f"Run {snap.run_id} ({snap.workflow}) is {snap.status}"
    if snap.current_phase:
        head += f", phase {snap.current_phase}"
    parts = [
        head + ".",
        f"Agents: {c.get('completed', 0)} completed, {c.get('cached', 0)} replayed, {c.get('failed', 0)} failed, "
        f"{c.get('cancelled', 0)} cancelled, {c.get('running', 0)} running, {c.get('queued', 0)} queued. "
        f"Output tokens: {snap.token_usage.output} (+{snap.token_usage.replayed_output} replayed).",
    ]
    if snap.error is not None:
        parts.append(f"Error: {snap.error.message}")
    if snap.paused_reason is not None:
        parts.append(
            f"Paused: {snap.paused_reason}"
            + (f"; the limit resets at {snap.resets_at}." if snap.resets_at else ".")
        )
    if snap.log_tail:
        parts.append("Last log: " + snap.log_tail[-1])
    return "\n".join(parts)


def event_out(event: Event) -> dict[str, Any]:
    """The wire envelope of one event (the shape :class:`EventOut` describes)."""
    return event.to_json()
