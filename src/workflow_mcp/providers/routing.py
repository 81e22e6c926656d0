"""Routing: one :class:`AgentProvider` that sends each agent() call to the provider configuration
chooses, so the engine never changes.

For each :class:`AgentRequest` (:meth:`RoutingProvider.execute`):

1. **Choose.** The first rule of ``[[rules]]`` whose globs all match the call's phase, label,
   model and agentType names a provider; otherwise ``default``. ``--provider NAME`` (``forced``)
   overrides both. A name is a registered provider, a named one (``[providers.NAME] use = …``) or
   a preset (:mod:`~workflow_mcp.providers.named`); :meth:`RoutingProvider.route_of` says which
   name a call goes to (the ``provider`` of its ``agent.started`` event).
2. **Check before spawning.** A call needing a capability its provider lacks (a schema call to a
   provider without structured output) is refused (:class:`CapabilityError`) before that provider
   starts anything, naming the capability and a configured or ready provider that has it.
3. **Map the model.** ``[providers.NAME.models]`` maps a workflow model name to the provider's.
   Claude's aliases (``sonnet``, ``opus``, ``haiku``) are never guessed: a provider that does not
   take Claude model names needs a mapping, else :class:`ModelAliasError` names the file and the
   key to add. Other names pass unchanged.
4. **Fall back.** When the provider answers ``provider_failed`` or cannot start
   (:class:`~workflow_mcp.providers.registry.ProviderStartError`), the ``fallback`` providers
   are tried in order (those unable to take the call — no structured output for a schema call, no
   mapping for a Claude alias — are passed over), each attempt reported as a ``progress`` event.
   An execution error, an auth error (the run should pause, not switch accounts) or cancellation
   never falls back.

:func:`build_router` validates everything it can before any agent runs: unknown providers, missing
SDKs or binaries, settings the provider rejects, rules routing a Claude alias to a provider with no
mapping for it. Each error names the configuration file and key.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from ..errors import InvalidInputError
from .base import (
    AgentContext,
    AgentExecutionError,
    AgentProvider,
    AgentRequest,
    AgentResult,
    ProviderCapabilities,
    ProviderEvent,
    ProviderSetupError,
)
from .config import (
    CONFIG_FILE_NAME,
    NO_CONFIG,
    ProviderConfig,
    ProviderConfigError,
    load_config,
    user_config_path,
)
from .named import build_named, check_named, probe_named, resolve_provider
from .policy import Policy
from .registry import (
    ProviderInfo,
    ProviderNotLoggedInError,
    ProviderStartError,
    ProviderUnavailableError,
    available,
    load_factory,
    provider_names,
)

__all__ = [
    "AUTO_PICK_ORDER",
    "CLAUDE_ALIASES",
    "CapabilityError",
    "ModelAliasError",
    "NoProviderAvailableError",
    "RoutingProvider",
    "build_router",
]

CLAUDE_ALIASES: Final = frozenset({"sonnet", "opus", "haiku"})
"""Claude Code's model aliases; never mapped to another vendor's model by guesswork."""
AUTO_PICK_ORDER: Final = ("codex", "claude", "acp")
"""Without configuration, the first ready provider of these is used."""


class CapabilityError(ProviderSetupError):
    """Raised (the agent() call rejects) when the routed provider cannot honour the call, e.g. a
    schema call to a provider without structured output. Raised before the provider is called."""


class ModelAliasError(ProviderSetupError):
    """Raised when a call names a Claude model alias and the routed provider has no mapping for it.
    The message names the configuration file and the key to add."""

    def __init__(self, alias: str, provider: str, where: str) -> None:
        self.alias = alias
        self.provider = provider
        self.where = where
        if where == NO_CONFIG:
            place = (
                f"there is no configuration file: create {CONFIG_FILE_NAME} (or {user_config_path()}) with "
                f"[providers.{provider}.models]"
            )
        else:
            place = f"map it in {where} under [providers.{provider}.models]"
        super().__init__(
            f"model {alias!r} is a Claude model alias and provider {provider!r} does not run Claude models; "
            f'it is never guessed: {place}, e.g. {alias} = "<a {provider} model>"'
        )


class NoProviderAvailableError(InvalidInputError):
    """Raised when nothing chooses a provider and none of :data:`AUTO_PICK_ORDER` is ready; the
    message says, for each, what is missing and how to install or log in."""


@dataclass
class _Route:
    name: str
    provider: AgentProvider
    info: ProviderInfo
    models: Mapping[str, str]


class RoutingProvider:
    """An :class:`AgentProvider` dispatching each call by configuration (module docstring).

    ``routes`` maps provider names to built providers; ``config`` the parsed configuration;
    ``forced`` a provider chosen by the caller (CLI ``--provider``). Build it with
    :func:`build_router`. :meth:`aclose` closes every provider that has an ``aclose``.
    """

    def __init__(
        self, routes: Mapping[str, _Route], config: ProviderConfig, *, forced: str | None = None
    ) -> None:
        self._routes = dict(routes)
        self.config = config
        self.forced = forced
        self.default = forced or config.default
        used = list(self._routes.values())
        if forced is not None or (len(used) == 1 and not config.fallback):
            self.name = self.default or used[0].name
        else:
            self.name = "routing"
        caps = [r.provider.capabilities for r in used]
        self.capabilities = ProviderCapabilities(
            structured_output=any(c.structured_output for c in caps),
            images=all(c.images for c in caps),
            sandbox_control=all(c.sandbox_control for c in caps),
            session_resume=all(c.session_resume for c in caps),
            # The engine's stall watchdog judges silence only for streaming providers: claim it only
            # when every route streams, so a silent provider is never killed for being silent.
            streaming=all(c.streaming for c in caps),
            cancellation=all(c.cancellation for c in caps),
        )

    @property
    def providers(self) -> dict[str, AgentProvider]:
        """The built providers by name."""
        return {name: r.provider for name, r in self._routes.items()}

    def route_of(self, request: AgentRequest) -> str:
        """The name of the provider :meth:`execute` first sends ``request`` to (a fallback may take
        it after a failure; that is a ``progress`` event), or ``"routing"`` when nothing routes it."""
        try:
            return self.choose(request)[0]
        except CapabilityError:
            return self.name

    def choose(self, request: AgentRequest) -> tuple[str, str]:
        """The provider name for ``request`` and the configuration key that chose it."""
        if self.forced is not None:
            return self.forced, "--provider"
        for rule in self.config.rules:
            if rule.matches(
                phase=request.phase, label=request.label, model=request.model, agent_type=request.agent_type
            ):
                return rule.provider, rule.key
        if self.default is None:  # build_router never builds this; kept for direct construction
            raise CapabilityError(f"{self.config.where}: no rule matches this call and there is no `default`")
        return self.default, "default"

    def map_model(self, provider: str, model: str | None) -> str | None:
        """``model`` as provider ``provider`` names it. Raises :class:`ModelAliasError` for an
        unmapped Claude alias on a provider that does not take Claude model names."""
        if model is None:
            return None
        route = self._routes[provider]
        if model in route.models:
            return route.models[model]
        if model in CLAUDE_ALIASES and not route.info.accepts_claude_models:
            raise ModelAliasError(model, provider, self.config.where)
        return model

    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        """Route ``request`` (module docstring). Returns the first non-``provider_failed`` result, or
        the last ``provider_failed`` one; raises :class:`CapabilityError`, :class:`ModelAliasError`,
        or whatever the provider raises (never falling back on those)."""
        first, key = self.choose(request)
        self._check(first, key, request)
        chain = [first, *(n for n in self.config.fallback if n != first)] if self.forced is None else [first]
        last: AgentResult | None = None
        failure: str | None = None
        for index, name in enumerate(chain):
            if index > 0:
                try:
                    self._check(name, "fallback", request)
                except AgentExecutionError as exc:
                    await context.emit(ProviderEvent(kind="progress", text=f"fallback {name} skipped: {exc}"))
                    continue
                await context.emit(
                    ProviderEvent(
                        kind="progress",
                        text=f"provider {chain[index - 1]} failed ({failure}); falling back to {name}",
                        data={"fallback": name},
                    )
                )
            routed = replace(
                request,
                model=self.map_model(name, request.model),
                session=request.session if index == 0 else None,
            )
            try:
                result = await self._routes[name].provider.execute(routed, context)
            except (ProviderStartError, ProviderUnavailableError) as exc:
                if index + 1 >= len(chain):
                    # An agent() call must reject with an execution error, never a config error.
                    raise ProviderStartError(str(exc)) from exc
                failure = str(exc)
                continue
            if result.outcome != "provider_failed":
                return result
            last, failure = result, result.message or "provider failure"
        if last is None:  # every fallback was unusable and the first could not start
            raise CapabilityError(f"no provider could take this call ({failure})")
        return last

    def refusal(self, request: AgentRequest, unknown: Collection[str] = ()) -> AgentExecutionError | None:
        """The error :meth:`execute` would certainly raise for ``request`` before calling any provider
        (:class:`CapabilityError`, :class:`ModelAliasError`), or ``None`` when the call would pass or
        its route is not certain. ``unknown`` names the request fields (``phase``, ``label``,
        ``model``, ``agent_type``) whose value is only known at run time: a rule that looks at one of
        them (before a rule that certainly matches) leaves the route open. Starts nothing."""
        if self.forced is None:
            for rule in self.config.rules:
                looks = {
                    "phase": rule.phase,
                    "label": rule.label,
                    "model": rule.model,
                    "agent_type": rule.agent_type,
                }
                if any(glob is not None and field in unknown for field, glob in looks.items()):
                    return None
                if rule.matches(
                    phase=request.phase,
                    label=request.label,
                    model=request.model,
                    agent_type=request.agent_type,
                ):
                    break
        name, key = self.choose(request)
        try:
            self._check(name, key, request)
        except (CapabilityError, ModelAliasError) as exc:
            return exc
        return None

    def _check(self, name: str, key: str, request: AgentRequest) -> None:
        route = self._routes[name]
        for attribute, capability, asked in _needs(request):
            if getattr(route.provider.capabilities, attribute):
                continue
            raise CapabilityError(
                f"agent() asked for {asked} but provider {name!r} (chosen by {key} in {self.config.where}) "
                f"has no {capability} capability; route these calls to a provider that has it"
                f"{self._having(attribute)} (`workflow-mcp providers` shows each provider's capabilities)"
            )
        if request.images and not route.provider.capabilities.images:
            raise CapabilityError(self.image_refusal(name, key))
        self.map_model(name, request.model)

    def image_refusal(self, name: str, key: str) -> str:
        """Why a call with image attachments cannot go to provider ``name`` (chosen by ``key``),
        naming the capability and the configured providers that have it."""
        able = [n for n, r in self._routes.items() if r.provider.capabilities.images]
        where = (
            f"route it to one that has: {', '.join(able)}"
            if able
            else (
                "none of the configured providers has it (openai, claude and acp take images; cli when "
                "[providers.cli] images = true)"
            )
        )
        return (
            f"the call has image attachments but provider {name!r} (chosen by {key} in {self.config.where}) "
            f"has no image input (capability images); {where}"
        )

    def _having(self, attribute: str) -> str:
        """``", e.g. 'claude'"``: a provider with capability ``attribute`` — one this configuration
        routes to, else a registered one (not the fake) that is ready here (probed: at most a
        ``--version``) — or ``""`` when none is."""
        for name, route in self._routes.items():
            if getattr(route.provider.capabilities, attribute):
                return f", e.g. {name!r} (configured here)"
        for name in provider_names():
            if name == "fake" or name in self._routes:
                continue
            try:
                caps = getattr(load_factory(name), "capabilities", None)
            except InvalidInputError:  # its module does not import: not one to suggest
                continue
            if not isinstance(caps, ProviderCapabilities) or not getattr(caps, attribute):
                continue
            if available(name, self.config.settings.get(name, {})).availability.ready:
                return f", e.g. {name!r}"
        return ""

    async def aclose(self) -> None:
        """Close every provider that holds a process (idempotent)."""
        for route in self._routes.values():
            close = getattr(route.provider, "aclose", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    await close()


def build_router(
    *,
    provider: str | None = None,
    cwd: str | None = None,
    environ: Mapping[str, str] | None = None,
    config: ProviderConfig | None = None,
    policy: Mapping[str, Any] | Policy | None = None,
    on_pick: Callable[[str], None] | None = None,
) -> RoutingProvider:
    """Build the routing provider for ``cwd`` from configuration (:func:`load_config`).

    ``provider`` (the CLI's ``--provider``) overrides the configured choice; its settings, alias
    map and policy still apply. ``policy`` is what the caller asks for: it narrows the configured
    policy and may never widen it. Without configuration and ``provider``, the first ready provider
    of :data:`AUTO_PICK_ORDER` is used and ``on_pick`` hears a one-line notice saying which.

    Raises (all before any agent runs): :class:`~workflow_mcp.providers.config.ProviderConfigError`,
    :class:`~workflow_mcp.providers.registry.UnknownProviderError`,
    :class:`~workflow_mcp.providers.registry.ProviderUnavailableError`,
    :class:`~workflow_mcp.providers.policy.PolicyError`, :class:`NoProviderAvailableError`.
    """
    conf = config if config is not None else load_config(cwd or os.getcwd(), environ)
    effective = conf.policy.narrow(policy)
    where = conf.where
    wanted: dict[str, str] = {}  # provider name -> the key that names it
    forced = provider
    if forced is not None:
        wanted[forced] = "--provider"
    else:
        if conf.default is not None:
            wanted[conf.default] = "default"
        for rule in conf.rules:
            wanted.setdefault(rule.provider, f"{rule.key}.provider")
        if not conf.configured:
            picked = _auto_pick(conf)
            if on_pick is not None:
                on_pick(picked[1])
            conf = replace(conf, default=picked[0])
            wanted[picked[0]] = "default"
        for i, name in enumerate(conf.fallback):
            wanted.setdefault(name, f"fallback[{i}]")
        if conf.default is None:
            raise ProviderConfigError(
                where,
                "default",
                'is required when rules do not cover every call (add default = "<provider>")',
            )
    named = {
        name: resolve_provider(name, conf, where="" if key == "--provider" else f"{where}: {key}")
        for name, key in wanted.items()
    }
    for name in conf.settings:
        resolve_provider(name, conf, where=f"{where}: providers.{name}")
    routes: dict[str, _Route] = {}
    for name, key in wanted.items():
        check_named(named[name], source=where)  # a refused setting is named by its key, before any probe
        info = probe_named(named[name])
        if not info.availability.available:
            raise ProviderUnavailableError(
                name,
                info.availability.problem or "not installed",
                install=info.availability.install,
                where="--provider" if key == "--provider" else f"{where}: {key}",
            )
        if info.availability.logged_in is False:
            # Refused before any agent runs: a logged-out provider could only fail or pause every call.
            raise ProviderNotLoggedInError(
                name,
                info.availability.problem,
                where="--provider" if key == "--provider" else f"{where}: {key}",
            )
        built = build_named(named[name], policy=effective, source=where)
        routes[name] = _Route(name, built, info, conf.models.get(name, {}))
    for rule in conf.rules if forced is None else ():
        if rule.model in CLAUDE_ALIASES:
            route = routes[rule.provider]
            if rule.model not in route.models and not route.info.accepts_claude_models:
                raise ProviderConfigError(
                    where,
                    f"{rule.key}.model",
                    f"routes Claude alias {rule.model!r} to {rule.provider!r}, which has no mapping for it; "
                    f'add [providers.{rule.provider}.models] {rule.model} = "<a {rule.provider} model>"',
                )
    return RoutingProvider(routes, conf, forced=forced)


def _auto_pick(conf: ProviderConfig) -> tuple[str, str]:
    """(name, notice) for the first ready provider of :data:`AUTO_PICK_ORDER`."""
    known = provider_names()
    notes: list[str] = []
    for name in AUTO_PICK_ORDER:
        if name not in known:
            notes.append(f"{name}: not installed")
            continue
        info = available(name, conf.settings.get(name, {}))
        a = info.availability
        if a.ready:
            version = f" {a.version}" if a.version else ""
            return name, (
                f"workflow-mcp: no provider configured; using {name}{version} (the first available of "
                f"{', '.join(AUTO_PICK_ORDER)}); choose one with --provider or `default` in workflow-mcp.toml"
            )
        notes.append(
            f"{name}: {a.problem or 'not available'}" + (f" (install: {a.install})" if a.install else "")
        )
    raise NoProviderAvailableError(
        "no agent provider is available: "
        + "; ".join(notes)
        + ". Install one (e.g. pip install 'workflow-mcp[codex]' and log in with `codex login` or set "
        "OPENAI_API_KEY), configure one in workflow-mcp.toml, or pass --provider fake for a dry run "
        "with the deterministic fake provider"
    )


def _needs(request: AgentRequest) -> list[tuple[str, str, str]]:
    """(capability attribute, its name, what the call asks for) for each capability ``request``
    needs of its provider: structured output for a schema call."""
    needs: list[tuple[str, str, str]] = []
    if request.schema is not None:
        needs.append(("structured_output", "structured output", "structured output (a schema)"))
    return needs
