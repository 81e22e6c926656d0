"""Refuse before any agent runs what the configuration certainly cannot serve (issue 12, item 1).

:func:`refuse_unservable` reads the agent() calls a workflow's source states outright
(:func:`~workflow_mcp.definitions.calls.agent_call_sites`) and asks the routing provider whether
each would be refused before reaching a provider: a Claude model alias (``model: 'sonnet'``, or the
model of the ``agentType`` it names) routed to a provider with no mapping for it, or a schema call
routed to a provider without structured output. The first such call refuses the whole run with
:class:`~workflow_mcp.errors.CallNotServableError` (exit 2 in the CLI, invalid params over MCP), so a
run never "completes" on a pile of ``null`` slots. Calls whose options or route are only known at
run time are left to the run-time checks, which reject the call with the same words.
"""

from __future__ import annotations

from .definitions.agents import AgentCatalog, find_agents
from .definitions.calls import agent_call_sites
from .definitions.load import Workflow
from .definitions.models import normalize_model
from .errors import CallNotServableError
from .providers.base import AgentProvider, AgentRequest
from .providers.routing import RoutingProvider

__all__ = ["refuse_unservable"]


def refuse_unservable(
    workflow: Workflow, provider: AgentProvider, *, cwd: str, home: str | None, profile: str | None
) -> None:
    """Raise :class:`CallNotServableError` for the first agent() call of ``workflow`` that routing
    would certainly refuse (module docstring). Providers other than the configuration's router (the
    fake, one a caller built) are never judged here. Reads agent definitions from ``cwd`` only when a
    call names a literal ``agentType``; starts nothing."""
    if not isinstance(provider, RoutingProvider):
        return
    catalog: AgentCatalog | None = None
    for site in agent_call_sites(workflow.body):
        if "..." in site.dynamic:
            continue  # a spread may set any option
        unknown = set(site.dynamic)
        model = normalize_model(site.model) if site.model else None
        if site.agent_type is not None:
            if catalog is None:
                catalog = find_agents(cwd, home, profile=profile)
            definition = catalog.get(site.agent_type)
            if definition is None:
                continue  # refused at run time with Claude's own words (and counted toward the cap)
            if site.model is None and "model" not in unknown:
                model = definition.model
        elif "agent_type" in unknown and site.model is None:
            unknown.add("model")  # the model of an agent type only known at run time
        if "model" in unknown:
            model = None
        if site.label is None:
            unknown.add("label")  # the fallback label comes from the prompt, at run time
        if site.phase is None:
            unknown.add("phase")  # the current phase() title, at run time
        request = AgentRequest(
            prompt="",
            label=site.label or "",
            phase=site.phase,
            schema={"type": "object"} if site.schema else None,
            model=model,
            agent_type=site.agent_type,
        )
        refused = provider.refusal(request, unknown)
        if refused is not None:
            where = f"{workflow.path or workflow.name + ' (inline)'}:{site.line}:{site.column}"
            raise CallNotServableError(where, str(refused))
