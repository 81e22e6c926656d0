"""When a run's agent calls were queued, started and ended, folded from its events.

The projected :class:`~workflow_mcp.state.RunState` keeps no times; the run viewer, ``runs watch`` and
the live terminal view of ``run`` fold them from the same events with :class:`Timeline`. A plain value
over :mod:`workflow_mcp.events`: importing it loads no transport.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass, field

from .events import Event

__all__ = ["AgentTimes", "Timeline", "epoch_ms"]


def epoch_ms(timestamp: str | None) -> int | None:
    """Milliseconds since the Unix epoch of an event timestamp (ISO 8601, ``Z`` or offset), or
    ``None`` when absent or unreadable."""
    if not timestamp:
        return None
    try:
        when = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return int(when.timestamp() * 1000)


@dataclass(slots=True)
class AgentTimes:
    """When one agent call was queued, started and ended (epoch ms), as its events say, and what they
    say of it beside its state: ``model`` and ``provider`` as routed (``agent.started``; a provider
    named by the call's end is kept when its start named none), ``prompt_preview`` (``agent.queued``'s
    ``promptPreview``: bounded and masked, :func:`workflow_mcp._redact.prompt_preview`; ``None`` for a
    call stored before events carried one) and the ``error`` text of a failed call."""

    queued: int | None = None
    started: int | None = None
    ended: int | None = None
    model: str | None = None
    provider: str | None = None
    error: str | None = None
    prompt_preview: str | None = None


@dataclass
class Timeline:
    """The times of a run's agent calls, folded from its events (:meth:`fold`)."""

    agents: dict[str, AgentTimes] = field(default_factory=dict)
    run_started: int | None = None
    run_ended: int | None = None
    provider: str | None = None
    last_sequence: int = 0
    """The newest event folded in."""

    def fold(self, events: Iterable[Event], *, until: int) -> Timeline:
        """Fold ``events`` with ``last_sequence < sequence <= until`` (older ones were folded already);
        returns ``self``."""
        for event in events:
            if event.sequence > until:
                break
            if event.sequence <= self.last_sequence:
                continue
            self.last_sequence = event.sequence
            at = epoch_ms(event.timestamp)
            kind = event.type
            if kind in ("run.started", "run.resumed"):
                self.run_started = self.run_started or at
                provider = event.payload.get("provider")
                self.provider = provider if isinstance(provider, str) else self.provider
            elif kind in ("run.completed", "run.failed", "run.cancelled", "run.interrupted", "run.paused"):
                self.run_ended = at
            elif kind.startswith("agent.") and event.agent_id is not None:
                self._agent(event, kind, at)
        return self

    def _agent(self, event: Event, kind: str, at: int | None) -> None:
        times = self.agents.setdefault(event.agent_id or "", AgentTimes())
        payload = event.payload
        if kind == "agent.queued":
            times.queued = at
            preview = payload.get("promptPreview")
            times.prompt_preview = preview if isinstance(preview, str) else times.prompt_preview
        elif kind == "agent.started":
            times.started = at
            if times.queued is None:
                times.queued = at
            model = payload.get("model")
            times.model = model if isinstance(model, str) else times.model
            provider = payload.get("provider")
            times.provider = provider if isinstance(provider, str) else times.provider
        elif kind in ("agent.completed", "agent.failed", "agent.cached"):
            times.ended = at
            if times.queued is None:
                times.queued = at
                preview = payload.get("promptPreview")  # a call replayed in the realm: no agent.queued
                times.prompt_preview = preview if isinstance(preview, str) else times.prompt_preview
            if kind == "agent.cached" and times.started is None:
                times.started = at
            provider = payload.get("provider")
            if times.provider is None and isinstance(provider, str):
                times.provider = provider
            if kind == "agent.failed":
                message = payload.get("message") or payload.get("error") or payload.get("reason")
                times.error = str(message) if message is not None else None
