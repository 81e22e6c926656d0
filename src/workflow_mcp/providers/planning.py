"""The provider of a cost preview (``workflow-mcp plan``): a dry run on the synthesizing fake provider
that notes, for every call, where the configuration would route it and what it would cost.

:class:`PlanningProvider` answers each call with a :class:`~workflow_mcp.providers.fake.FakeProvider`
(synthesized answers, or a fake script's) and records a :class:`PlannedCall`: the provider routing
would choose (:func:`planned_route`: ``--provider``, else the first matching ``[[rules]]``, else
``default``), the model that provider would be asked for (after ``[providers.X.models]``), what would
stop the call before it runs (an unmapped Claude alias, a schema call to a provider without structured
output), and the tokens it is expected to use. Those tokens are what the dry run charges the budget —
a fake script's ``tokens`` where it gives them, else the caller's estimate — so budget-guarded loops
stop where a real run would. Nothing here starts an agent or reads a credential.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from .base import AgentContext, AgentRequest, AgentResult, TokenUsage
from .config import ProviderConfig
from .fake import FakeProvider
from .named import resolve_provider
from .registry import load_factory
from .routing import AUTO_PICK_ORDER, CLAUDE_ALIASES, ModelAliasError

__all__ = ["PlannedCall", "PlannedRoute", "PlanningProvider", "planned_route"]


@dataclass(frozen=True)
class PlannedRoute:
    """Where one call would go: ``provider`` (``auto``: nothing is configured, so the first ready of
    codex, claude, acp), ``model`` as that provider is asked for it (``None``: its default), and the
    ``problem`` that would refuse the call before any agent runs (``None``: none)."""

    provider: str
    model: str | None
    problem: str | None = None


@dataclass(frozen=True)
class PlannedCall:
    """One provider call of the dry run (a schema re-ask is a call of its own, ``attempt`` > 1).
    ``usage`` is what the call is expected to use; ``estimated`` is false when a fake script gave it."""

    agent_id: str
    label: str
    phase: str | None
    attempt: int
    workflow_model: str | None
    route: PlannedRoute
    usage: TokenUsage
    estimated: bool
    basis: str = ""


@dataclass
class _Traits:
    structured_output: bool
    accepts_claude_models: bool


def _traits(name: str, config: ProviderConfig) -> _Traits | None:
    """What provider ``name`` (a registered, named or preset provider under ``config``) can do, from
    the factory of the provider it uses (``None``: not known or not importable here; nothing is
    probed or started)."""
    try:
        factory = load_factory(resolve_provider(name, config).use)
    except Exception:  # an unknown or uninstalled provider: the preview says so, it does not fail
        return None
    caps = getattr(factory, "capabilities", None)
    return _Traits(
        structured_output=bool(getattr(caps, "structured_output", False)),
        accepts_claude_models=bool(getattr(factory, "accepts_claude_models", False)),
    )


def planned_route(
    config: ProviderConfig, forced: str | None, auto: str | None = None
) -> Callable[[AgentRequest], PlannedRoute]:
    """The routing decision of a run in ``config`` (``forced``: ``--provider``; ``auto``: the provider an
    unconfigured run would pick, if known), as a function of the call."""
    traits: dict[str, _Traits | None] = {}

    def route(request: AgentRequest) -> PlannedRoute:
        name: str | None = forced
        if name is None:
            for rule in config.rules:
                if rule.matches(
                    phase=request.phase,
                    label=request.label,
                    model=request.model,
                    agent_type=request.agent_type,
                ):
                    name = rule.provider
                    break
        name = name or config.default or auto or "auto"
        if name not in traits:
            traits[name] = None if name == "auto" else _traits(name, config)
        known = traits[name]
        problem: str | None = None
        if name == "auto":
            problem = (
                f"{config.where} names no default provider and no rule matches this call: a run would be "
                'refused; add default = "<provider>" or pass --provider'
                if config.configured
                else "no provider serves this call (nothing is configured and none of "
                + ", ".join(AUTO_PICK_ORDER)
                + " is ready): a run would be refused; install or configure one, or pass --provider"
            )
        elif known is None:
            problem = f"provider {name!r} is not installed here"
        aliases = config.models.get(name, {})
        model = request.model
        if model is None:
            default = config.settings.get(name, {}).get("model")
            model = default if isinstance(default, str) else None
        elif model in aliases:
            model = aliases[model]
        elif model in CLAUDE_ALIASES and known is not None and not known.accepts_claude_models:
            problem = str(ModelAliasError(model, name, config.where))
        if request.schema is not None and known is not None and not known.structured_output:
            problem = (
                f"agent() asked for structured output (a schema) but provider {name!r} cannot produce it; "
                "route schema calls to a provider that can"
            )
        return PlannedRoute(name, model, problem)

    return route


class PlanningProvider:
    """Answers like ``fake`` and records each call's :class:`PlannedCall` in :attr:`calls`.

    ``route`` decides where a call would go (:func:`planned_route`); ``estimate(request, route)`` gives
    ``(usage, basis)`` for a call whose answer names no tokens (``basis`` says where the figure came
    from, e.g. ``history`` or ``defaults``)."""

    def __init__(
        self,
        fake: FakeProvider,
        route: Callable[[AgentRequest], PlannedRoute],
        estimate: Callable[[AgentRequest, PlannedRoute], tuple[TokenUsage, str]] | None = None,
    ) -> None:
        self.name = fake.name
        self.fake = fake
        self.capabilities = fake.capabilities
        self.route = route
        self.estimate = estimate
        self.calls: list[PlannedCall] = []

    def route_of(self, request: AgentRequest) -> str:
        """The provider ``request`` would be routed to (the ``provider`` of its ``agent.started``)."""
        return self.route(request).provider

    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        route = self.route(request)
        result = await self.fake.execute(request, context)
        usage, basis, estimated = result.usage, "fake script", False
        if not (usage.input or usage.output) and self.estimate is not None:
            (usage, basis), estimated = self.estimate(request, route), True
        self.calls.append(
            PlannedCall(
                agent_id=request.agent_id,
                label=request.label,
                phase=request.phase,
                attempt=request.attempt,
                workflow_model=request.model,
                route=route,
                usage=usage,
                estimated=estimated,
                basis=basis,
            )
        )
        return replace(result, usage=usage)

    async def aclose(self) -> None:
        await self.fake.aclose()
