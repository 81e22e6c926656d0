"""One agent() call as the run coordinator carries it: what it resolved to (:class:`ResolvedCall`)
and the admitted call itself (:class:`AgentCall`), the values that cross from admission to execution
and into the call's events."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..definitions.agents import AgentDefinition
from ..providers.base import AgentRequest

__all__ = ["AgentCall", "ResolvedCall", "agent_request"]


@dataclass(frozen=True, slots=True)
class ResolvedCall:
    """What one agent() call resolved to before it is queued: the schema (``None``: a text call),
    the normalized model and effort, the agent definition and its effective tool lists."""

    schema: Mapping[str, Any] | None
    model: str | None
    effort: str | None
    definition: AgentDefinition | None
    tools: tuple[str, ...] | None
    disallowed_tools: tuple[str, ...]


@dataclass(slots=True)
class AgentCall:
    """One admitted agent() call. ``agent_id`` names it in events (``ag_0001``…); ``opts`` are its
    normalized options (what a provider finds in ``AgentRequest.options``, ``label``/``phase``
    aside); ``key`` is its v2 cache key (``""``: not keyable) and ``content_key`` its ``c1:`` key;
    ``side_effects`` is true for an ``isolation: 'worktree'`` call.

    Not frozen, but never changed once built: it is built once per call on the engine's hot path,
    and a frozen dataclass's ``__init__`` costs an ``object.__setattr__`` call per field (about four
    times a plain one's)."""

    agent_id: str
    prompt: str
    label: str
    phase: str | None
    opts: dict[str, Any]
    resolved: ResolvedCall
    key: str
    content_key: str
    side_effects: bool

    @property
    def base(self) -> dict[str, Any]:
        """The fields every event of the call carries: ``{label, phase}``."""
        return {"label": self.label, "phase": self.phase}


_REQUEST_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in dataclasses.fields(AgentRequest) if f.default is not dataclasses.MISSING
}
_REQUEST_FACTORIES = tuple(
    (f.name, f.default_factory)
    for f in dataclasses.fields(AgentRequest)
    if f.default_factory is not dataclasses.MISSING
)
_new = object.__new__


def agent_request(**values: Any) -> AgentRequest:
    """The :class:`~workflow_mcp.providers.base.AgentRequest` ``AgentRequest(**values)`` builds,
    built as its frozen dataclass's own ``__init__`` would minus a ``setattr`` call per field (as
    :meth:`~workflow_mcp.events.EventLog.emit` builds events): the engine builds one per provider
    attempt, a measurable part of the host's cost per call. Fields not in ``values`` take their
    defaults. The names are not checked here, on the hot path: every key of ``values`` must be a
    field (a test holds the engine's request to the dataclass's own)."""
    request: AgentRequest = _new(AgentRequest)
    fields = request.__dict__
    fields.update(_REQUEST_DEFAULTS)
    for name, factory in _REQUEST_FACTORIES:
        if name not in values:
            fields[name] = factory()
    fields.update(values)
    return request
