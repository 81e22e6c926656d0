"""Named providers: what a provider name in the configuration, a rule or ``--provider`` runs.

A name resolves (:func:`resolve_provider`), in this order, to

1. a **configured** provider: a ``[providers.NAME]`` table of the user's own file with ``use`` naming
   the registered provider (``acp``, ``cli``, ``codex``, ``claude``, ``openai``, ``fake`` or a third
   party's) or the preset that builds it, and the rest of the table as that provider's settings::

       [providers.reviewer]
       use = "acp"
       command = "/opt/agents/bin/reviewer-acp"

2. a **registered** provider of that name (the ``workflow_mcp.providers`` entry points), with the
   ``[providers.NAME]`` table as its settings;
3. a **preset**: a named ACP provider with a known command (:data:`PRESETS`: ``gemini`` runs
   ``gemini --experimental-acp``, ``opencode`` runs ``opencode acp``, ``qwen`` runs ``qwen --acp``,
   ``goose`` runs ``goose acp``, ``codex-acp``, ``claude-agent-acp``), usable when its program is
   on ``PATH``; a ``[providers.NAME]`` table without ``use`` adds settings to it (a model, an
   alias map, or — in the user's file — another ``command`` path).

Settings errors name the named provider's own key (``providers.reviewer.max_sessions``), never the
key of the provider it uses.

Errors: :class:`~workflow_mcp.providers.registry.UnknownProviderError` (a name none of these
knows, listing those that are known) and
:class:`~workflow_mcp.providers.config.ProviderConfigError` (a ``use`` that names nothing usable:
another named provider, or a registered name given a different ``use``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Final

from ..errors import InvalidInputError
from ._kit import check_settings, program_version
from .acp.agents import KNOWN_AGENTS, KnownAgent
from .base import AgentProvider
from .config import ProviderConfig, ProviderConfigError
from .policy import DEFAULT_POLICY, Policy
from .registry import (
    Origin,
    ProviderInfo,
    UnknownProviderError,
    available,
    get_provider,
    load_factory,
    provider_names,
)

__all__ = [
    "PRESETS",
    "NamedProvider",
    "Origin",
    "build_named",
    "check_named",
    "named_providers",
    "probe_named",
    "resolve_provider",
]

PRESETS: Final[Mapping[str, KnownAgent]] = {k.preset: k for k in KNOWN_AGENTS if k.preset is not None}
"""Preset name -> the known ACP agent it runs (its command, default arguments, credential
environment names, login and install hints: :mod:`workflow_mcp.providers.acp.agents`)."""


@dataclass(frozen=True)
class NamedProvider:
    """What provider ``name`` runs: the registered provider ``use`` with ``settings``.
    ``origin`` says where the name comes from (module docstring); ``key`` is the configuration key
    that defines it (``providers.NAME``, ``""`` for a registered provider or preset without a table)."""

    name: str
    use: str
    settings: Mapping[str, Any]
    origin: Origin
    key: str = ""

    @property
    def found(self) -> bool | None:
        """For a preset, whether its program is on ``PATH`` (or its configured ``command`` exists);
        ``None`` for the others (their probe says)."""
        if self.origin != "preset":
            return None
        return shutil.which(str(self.settings.get("command", ""))) is not None


def resolve_provider(name: str, conf: ProviderConfig, *, where: str = "") -> NamedProvider:
    """The provider ``name`` runs under ``conf`` (module docstring). ``where`` prefixes an unknown
    name's error (``"workflow-mcp.toml: rules[0].provider"``).

    Raises :class:`UnknownProviderError` for a name that is neither configured, registered nor a
    preset, and :class:`ProviderConfigError` for a ``use`` that cannot be followed.
    """
    registered = provider_names()
    table = dict(conf.settings.get(name, {}))
    key = f"providers.{name}" if name in conf.settings else ""
    use = conf.uses.get(name)
    if use is not None and use != name:
        if name in registered:
            raise ProviderConfigError(
                conf.where,
                f"{key}.use",
                f"{name!r} is the name of a registered provider; give the provider that uses {use!r} "
                "a name of its own",
            )
        if use in registered:
            return NamedProvider(name, use, table, "configured", key)
        if use in PRESETS:
            return NamedProvider(name, "acp", {"command": PRESETS[use].command, **table}, "configured", key)
        if use in conf.uses:
            problem = f"names the named provider {use!r}; use names a registered provider or a preset"
        else:
            problem = (
                f"unknown provider {use!r}; registered providers: {', '.join(registered) or 'none'}; "
                f"presets: {', '.join(PRESETS)}"
            )
        raise ProviderConfigError(conf.where, f"{key}.use", problem)
    if name in registered:
        return NamedProvider(name, name, table, "registered", key)
    if name in PRESETS:
        return NamedProvider(name, "acp", {"command": PRESETS[name].command, **table}, "preset", key)
    raise UnknownProviderError(name, known_names(conf), where=where)


def known_names(conf: ProviderConfig) -> list[str]:
    """Every name :func:`resolve_provider` knows under ``conf``, sorted: the configured, the
    registered and the presets."""
    return sorted({*conf.uses, *provider_names(), *PRESETS})


def named_providers(conf: ProviderConfig) -> list[NamedProvider]:
    """Every provider a name can run under ``conf``, sorted by name: each configured one, each
    registered one and each preset (found on ``PATH`` or not: :attr:`NamedProvider.found`).

    Raises :class:`ProviderConfigError` for a configured ``use`` that cannot be followed."""
    return [resolve_provider(name, conf) for name in known_names(conf)]


def probe_named(
    named: NamedProvider, *, built: bool = False, source: str = "provider settings"
) -> ProviderInfo:
    """What probing ``named`` finds (:func:`~workflow_mcp.providers.registry.available` of the
    provider it uses, with its settings), under its own name; starts nothing.

    With ``built`` (the capability matrix; called outside a running event loop), a *configured*
    provider's capabilities are those of the provider its settings build (a ``cli`` provider
    declares them in its table; it is closed at once), and settings it refuses make it unavailable
    with that error (``source`` names the file). Otherwise, and for the others, they are their
    provider's declared ones."""
    info = available(named.use, named.settings)
    try:
        check_named(named, source=source)
    except ProviderConfigError as exc:
        # Settings the provider refuses say so, not what a probe makes of them (a `command` given
        # as a string is no "no command configured").
        return replace(
            info,
            name=named.name,
            use=named.use,
            origin=named.origin,
            availability=replace(
                info.availability, available=False, version=None, problem=str(exc), install=None
            ),
        )
    if built and named.origin == "configured" and info.availability.available:
        info = _built_capabilities(named, info, source)
    preset = PRESETS.get(named.name) if named.origin == "preset" else None
    if preset is not None and preset.reports_version and info.availability.location:
        # The agent program's own version (the acp provider's probe gives its SDK's).
        version = program_version(info.availability.location)
        if version is not None:
            info = replace(info, availability=replace(info.availability, version=version))
    return replace(info, name=named.name, use=named.use, origin=named.origin)


def build_named(named: NamedProvider, *, policy: Policy, source: str) -> AgentProvider:
    """The provider ``named`` runs, built under ``policy`` from its settings (nothing starts yet).

    Raises what :func:`~workflow_mcp.providers.registry.get_provider` raises; a settings error names
    ``providers.<named.name>.<key>`` in ``source``."""
    try:
        return get_provider(named.use, named.settings, policy=policy, source=source)
    except ProviderConfigError as exc:
        renamed = _own_key(named, exc)
        if renamed is exc:
            raise
        raise renamed from exc


def check_named(named: NamedProvider, *, source: str) -> None:
    """Check ``named``'s settings as building it would — every key a setting of the provider it
    uses, every value of its type, bounds and choices, and the provider's own rules (``check_more``:
    a ``cli`` provider's required ``command``) — without building it or starting anything.

    A name without a ``[providers.NAME]`` table is not checked (nothing was configured: the probe
    says what is missing), nor is a provider whose module does not import or that does not
    describe its settings with a ``settings_type`` dataclass (a third party's may not): its probe
    and its build say what is wrong.

    Raises :class:`ProviderConfigError` naming ``source`` and ``providers.<named.name>.<key>``."""
    if not named.key:
        return
    try:
        factory = load_factory(named.use)
    except InvalidInputError:  # not installed: its probe says so
        return
    spec = getattr(factory, "settings_type", None)
    if not (isinstance(spec, type) and dataclasses.is_dataclass(spec)):
        return
    try:
        check_settings(spec, named.settings, provider=named.use, source=source)
        more = getattr(factory, "check_more", None)
        if callable(more):
            more(named.settings, source)
    except ProviderConfigError as exc:
        renamed = _own_key(named, exc)
        if renamed is exc:
            raise
        raise renamed from exc


def _own_key(named: NamedProvider, exc: ProviderConfigError) -> ProviderConfigError:
    """``exc`` with the key of the provider ``named`` uses (``providers.cli.command``) as the named
    provider's own (``providers.mine.command``); ``exc`` itself when it names another key."""
    own = f"providers.{named.use}"
    if named.name == named.use or not (exc.key == own or exc.key.startswith(own + ".")):
        return exc
    return ProviderConfigError(exc.path, f"providers.{named.name}{exc.key[len(own) :]}", exc.problem)


def _built_capabilities(named: NamedProvider, info: ProviderInfo, source: str) -> ProviderInfo:
    """``info`` with the capabilities of the provider ``named`` builds (then closed: nothing was
    started), or unavailable with the reason when it cannot be built here. Inside a running event
    loop (where it could not be closed) ``info`` is returned as it is."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return info
    try:
        provider = build_named(named, policy=DEFAULT_POLICY, source=source)
    except InvalidInputError as exc:
        return replace(info, availability=replace(info.availability, available=False, problem=str(exc)))
    try:
        own = provider.capabilities
        # What the instance leaves undeclared (None) its factory may declare.
        undeclared = {
            f.name: getattr(info.capabilities, f.name) for f in fields(own) if getattr(own, f.name) is None
        }
        return replace(info, capabilities=replace(own, **undeclared))
    finally:
        asyncio.run(provider.aclose())
