"""Refuse before any agent runs what the configuration certainly cannot serve.

:func:`refuse_unservable` reads the agent() calls a workflow's source states outright
(:func:`~workflow_mcp.definitions.calls.agent_call_sites`) and asks the routing provider whether
each would be refused before reaching a provider: a Claude model alias (``model: 'sonnet'``, or the
model of the ``agentType`` it names) routed to a provider with no mapping for it, or a schema call
routed to a provider without structured output. The first such call refuses the whole run with
:class:`~workflow_mcp.errors.CallNotServableError` (exit 2 in the CLI, invalid params over MCP), so a
run never "completes" on a pile of ``null`` slots. Calls whose options or route are only known at
run time are left to the run-time checks, which reject the call with the same words.

The look is conservative, so it never refuses a run that could work:

- *Spread options.* ``{ ...opts, model: 'sonnet' }``: only what is written after the last spread is
  certain; every other option counts as unknown (a routing rule that looks at it leaves the route open).
- *Nested workflows.* A child named by a literal (``workflow('name')``, ``workflow({ scriptPath })``) is
  found as the engine finds it (discovery from the run's directory; a path relative to it) and its calls
  are looked at the same way, down to :data:`MAX_NESTED_DEPTH` levels. A child the host's
  :class:`~workflow_mcp.engine.nested.ChildCheck` may not read or run, one that is missing or does
  not load, and a workflow that includes itself are left to the run, which rejects the call with its
  own words; so a refusal never names a file the host would not read.
"""

from __future__ import annotations

import os
from typing import Final

from .definitions.agents import AgentCatalog, find_agents
from .definitions.calls import NestedCallSite, agent_call_sites, nested_workflow_sites
from .definitions.discover import resolve_workflow
from .definitions.load import Workflow, load_workflow
from .definitions.models import normalize_model
from .engine.nested import ChildCheck
from .errors import CallNotServableError, WorkflowMcpError
from .providers.base import AgentProvider, AgentRequest
from .providers.routing import RoutingProvider

__all__ = ["MAX_NESTED_DEPTH", "refuse_unservable"]

MAX_NESTED_DEPTH: Final = 8
"""workflow-mcp limit: how many levels of nested workflows the pre-run look follows (deeper calls are
left to the run-time checks)."""


def refuse_unservable(
    workflow: Workflow,
    provider: AgentProvider,
    *,
    cwd: str,
    home: str | None,
    profile: str | None,
    child_check: ChildCheck | None = None,
) -> None:
    """Raise :class:`CallNotServableError` for the first agent() call of ``workflow`` or of a nested
    workflow it names literally that routing would certainly refuse (module docstring). Providers
    other than the configuration's router (the fake, one a caller built) are never judged here. Reads
    agent definitions from ``cwd`` only when a call names a literal ``agentType``, and the children
    ``child_check`` allows (``None``: every child, as the engine runs them); starts nothing (children
    are parsed, not compiled)."""
    if not isinstance(provider, RoutingProvider):
        return
    where = workflow.path or workflow.name + " (inline)"
    todo: list[tuple[Workflow, str, str, int]] = [(workflow, where, "", 0)]
    seen = {os.path.realpath(workflow.path)} if workflow.path else set()
    catalog: list[AgentCatalog] = []
    while todo:
        current, at, via, depth = todo.pop(0)
        _refuse_calls(current, at, via, provider, cwd=cwd, home=home, profile=profile, catalog=catalog)
        if depth >= MAX_NESTED_DEPTH:
            continue
        for site in nested_workflow_sites(current.body):
            child = _child(site, cwd=cwd, home=home, profile=profile, check=child_check)
            if child is None or child.path is None or os.path.realpath(child.path) in seen:
                continue
            seen.add(os.path.realpath(child.path))
            called = f" (a nested workflow, run by workflow() at {at}:{site.line}:{site.column})"
            todo.append((child, str(child.path), called, depth + 1))


def _child(
    site: NestedCallSite, *, cwd: str, home: str | None, profile: str | None, check: ChildCheck | None
) -> Workflow | None:
    """The child ``site`` names, found as the engine finds it, or ``None`` when it is not certain to
    be the one that runs (missing, unloadable, or not for ``check`` to read and run)."""

    def reachable(path: str) -> bool:
        try:
            if check is not None:
                check.readable(path)
        except WorkflowMcpError:
            return False
        return True

    try:
        if site.script_path is not None:
            if "\x00" in site.script_path:
                return None
            real = os.path.realpath(os.path.join(cwd, os.path.expanduser(site.script_path)))
            if not reachable(real) or not os.path.isfile(real):
                return None
            child, visible = load_workflow(real, profile=profile, check_syntax=False), None
        else:
            found = resolve_workflow(
                site.name or "", cwd, home, profile=profile, check_syntax=False, reachable=reachable
            )
            child, visible = found.workflow, found.name
            if child.path is None or not reachable(os.path.realpath(child.path)):
                return None
        if check is not None:
            check.runnable(visible or child.meta.name, os.path.realpath(str(child.path)), child.source_hash)
    except (WorkflowMcpError, OSError, ValueError):
        return None
    return child


def _refuse_calls(
    workflow: Workflow,
    where: str,
    via: str,
    provider: RoutingProvider,
    *,
    cwd: str,
    home: str | None,
    profile: str | None,
    catalog: list[AgentCatalog],
) -> None:
    for site in agent_call_sites(workflow.body):
        unknown = set(site.dynamic) - {"...", "schema"}
        model = normalize_model(site.model) if site.model else None
        if site.agent_type is not None:
            if not catalog:
                catalog.append(find_agents(cwd, home, profile=profile))
            definition = catalog[0].get(site.agent_type)
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
            raise CallNotServableError(f"{where}:{site.line}:{site.column}{via}", str(refused))
