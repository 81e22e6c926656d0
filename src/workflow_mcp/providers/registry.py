"""The provider registry: providers found by name through the ``workflow_mcp.providers`` entry-point
group, imported lazily, probed for availability without starting anything.

A provider package registers a *factory* (the same way ours do, in ``pyproject.toml``)::

    [project.entry-points."workflow_mcp.providers"]
    mine = "my_package.provider:MyProvider"

The target is loaded only when that provider is probed or used, so a heavy SDK is imported only
when chosen. It is either a :class:`ProviderFactory` (``name``, ``capabilities``, ``probe()``,
``create()``; ours are the provider classes themselves, with classmethods) or any callable
returning an :class:`~workflow_mcp.providers.base.AgentProvider` when called with the provider's
settings as keyword arguments (then it is assumed available once imported).

Errors: :class:`UnknownProviderError` (no such name: lists the registered ones) and
:class:`ProviderUnavailableError` (registered but not usable here: says how to install or fix it).
"""

from __future__ import annotations

import importlib.metadata
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, runtime_checkable

from ..errors import InvalidInputError
from .base import AgentProvider, ProviderCapabilities, ProviderSetupError
from .policy import DEFAULT_POLICY, Policy

__all__ = [
    "ENTRY_POINT_GROUP",
    "Availability",
    "FakeFactory",
    "Origin",
    "ProviderFactory",
    "ProviderInfo",
    "ProviderNotLoggedInError",
    "ProviderStartError",
    "ProviderUnavailableError",
    "UnknownProviderError",
    "available",
    "discover",
    "get_provider",
    "load_factory",
    "provider_names",
    "register_provider",
    "unregister_provider",
]

ENTRY_POINT_GROUP: Final = "workflow_mcp.providers"

Origin = Literal["registered", "configured", "preset"]
"""Where a provider name comes from (:mod:`~workflow_mcp.providers.named`)."""


class UnknownProviderError(InvalidInputError):
    """Raised when no provider is registered under ``name``; ``known`` lists those that are."""

    def __init__(self, name: str, known: list[str], *, where: str = "") -> None:
        self.name = name
        self.known = known
        prefix = f"{where}: " if where else ""
        super().__init__(
            f"{prefix}unknown provider {name!r}; registered providers: {', '.join(known) or 'none'} "
            f"(entry-point group {ENTRY_POINT_GROUP})"
        )


class ProviderUnavailableError(InvalidInputError):
    """Raised when provider ``name`` is registered but cannot run here (its SDK or binary is
    missing, or its settings point at nothing); the message carries ``reason`` and the fix."""

    def __init__(self, name: str, reason: str, *, install: str | None = None, where: str = "") -> None:
        self.name = name
        self.reason = reason
        self.install = install
        prefix = f"{where}: " if where else ""
        fix = f"; install it with: {install}" if install else ""
        super().__init__(f"{prefix}provider {name!r} is not available: {reason}{fix}")


class ProviderNotLoggedInError(InvalidInputError):
    """Raised before a run starts when provider ``name`` reports itself logged out (no credentials
    its probe can see); the message says how to log in. Nothing was started or recorded."""

    def __init__(self, name: str, problem: str | None, *, where: str = "") -> None:
        self.name = name
        prefix = f"{where}: " if where else ""
        fix = (problem or "log in first").removeprefix("installed but not logged in: ")
        super().__init__(
            f"{prefix}provider {name!r} is not logged in: {fix}; nothing was started "
            "(`workflow-mcp providers` shows what each provider sees)"
        )


class ProviderStartError(ProviderSetupError):
    """Raised by a provider *during a call* when its program cannot start (binary gone, SDK
    broken, app-server refusing to initialise). Routing falls back on it; without a fallback the
    agent() call rejects with this message (an execution error)."""


@dataclass(frozen=True)
class Availability:
    """What a probe found, without starting the provider or revealing a secret.

    ``available``: the SDK imports and the program exists. ``version``: of the program or SDK.
    ``location``: the binary path or module. ``logged_in``: ``True``/``False`` when it can be told
    from files and environment *names* alone, ``None`` when unknown or not applicable; ``login``
    says what was seen (e.g. ``"OPENAI_API_KEY is set"``), never a value. ``problem``: why it is
    unavailable or looks logged out, with the fix; ``install``: the install command.
    """

    available: bool
    version: str | None = None
    location: str | None = None
    logged_in: bool | None = None
    login: str | None = None
    problem: str | None = None
    install: str | None = None

    @property
    def ready(self) -> bool:
        """Available and not known to be logged out: fit to be picked without configuration."""
        return self.available and self.logged_in is not False


@runtime_checkable
class ProviderFactory(Protocol):
    """What an entry point resolves to: a provider's class-level facts and its constructor.

    ``probe(settings)`` (what :func:`available` calls) never raises and never starts a process
    that does work (at most a ``--version``); ``create(settings, policy=, source=)`` validates ``settings`` (raising
    :class:`~workflow_mcp.providers.config.ProviderConfigError` naming ``source`` and the key) and
    returns a provider that starts its program lazily, on its first call.
    """

    name: str
    capabilities: ProviderCapabilities

    def probe(self, settings: Mapping[str, Any]) -> Availability: ...

    def create(self, settings: Mapping[str, Any], *, policy: Policy, source: str) -> AgentProvider: ...


@dataclass(frozen=True)
class ProviderInfo:
    """One registered provider: ``name``, where it is registered (``target``), its declared
    ``capabilities`` and what :func:`probe` found."""

    name: str
    target: str
    capabilities: ProviderCapabilities
    availability: Availability
    accepts_claude_models: bool = False
    use: str = ""
    """The registered provider a named provider runs (``""``: the name itself)."""
    origin: Origin = "registered"
    """``registered``, ``configured`` (a ``[providers.NAME]`` table with ``use``) or ``preset``."""

    def to_json(self) -> dict[str, Any]:
        """``{"name", "use", "origin", "target", "available", "ready", "version", "location",
        "loggedIn", "login", "problem", "install", "capabilities": {"structuredOutput", "images",
        "sandboxControl", "networkControl", "sessionResume", "tokenUsage", "streaming",
        "cancellation"}}`` (``workflow-mcp providers --json``; a capability is ``true``, ``false`` or
        ``null`` when the provider does not declare it)."""
        a = self.availability
        caps = self.capabilities
        return {
            "name": self.name,
            "use": self.use or self.name,
            "origin": self.origin,
            "target": self.target,
            "available": a.available,
            "ready": a.ready,
            "version": a.version,
            "location": a.location,
            "loggedIn": a.logged_in,
            "login": a.login,
            "problem": a.problem,
            "install": a.install,
            "capabilities": {
                "structuredOutput": caps.structured_output,
                "images": caps.images,
                "sandboxControl": caps.sandbox_control,
                "networkControl": caps.network_control,
                "sessionResume": caps.session_resume,
                "tokenUsage": caps.token_usage,
                "streaming": caps.streaming,
                "cancellation": caps.cancellation,
            },
        }


@dataclass
class _Registry:
    extra: dict[str, Any] = field(default_factory=dict)
    loaded: dict[str, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


_REGISTRY = _Registry()


def register_provider(name: str, factory: Any) -> None:
    """Register ``factory`` under ``name`` in this process, ahead of the entry points (embedding
    and tests). ``factory`` follows the same rules as an entry-point target."""
    with _REGISTRY.lock:
        _REGISTRY.extra[name] = factory
        _REGISTRY.loaded.pop(name, None)


def unregister_provider(name: str) -> None:
    """Undo :func:`register_provider` for ``name`` (entry points are untouched)."""
    with _REGISTRY.lock:
        _REGISTRY.extra.pop(name, None)


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


def provider_names() -> list[str]:
    """Every registered provider name, sorted."""
    with _REGISTRY.lock:
        extra = set(_REGISTRY.extra)
    return sorted(set(_entry_points()) | extra)


def _target(name: str) -> str:
    with _REGISTRY.lock:
        if name in _REGISTRY.extra:
            return f"registered in process: {_REGISTRY.extra[name]!r}"
    ep = _entry_points().get(name)
    return ep.value if ep is not None else ""


def load_factory(name: str) -> Any:
    """The factory registered as ``name``, imported on first use and cached.

    Raises :class:`UnknownProviderError` for an unregistered name, and
    :class:`ProviderUnavailableError` when its module cannot be imported.
    """
    with _REGISTRY.lock:
        if name in _REGISTRY.extra:
            return _REGISTRY.extra[name]
        if name in _REGISTRY.loaded:
            return _REGISTRY.loaded[name]
    ep = _entry_points().get(name)
    if ep is None:
        raise UnknownProviderError(name, provider_names())
    try:
        factory = ep.load()
    except ImportError as exc:
        raise ProviderUnavailableError(name, f"its module does not import ({exc})") from exc
    with _REGISTRY.lock:
        _REGISTRY.loaded[name] = factory
    return factory


def available(name: str, settings: Mapping[str, Any] | None = None) -> ProviderInfo:
    """Probe provider ``name`` with its ``settings``; never raises for an installed-but-broken
    provider (the problem is reported in the result). Raises :class:`UnknownProviderError` for
    an unregistered name."""
    target = _target(name)
    try:
        factory = load_factory(name)
    except ProviderUnavailableError as exc:
        return ProviderInfo(
            name, target, ProviderCapabilities(), Availability(False, problem=exc.reason, install=exc.install)
        )
    caps = getattr(factory, "capabilities", None)
    if not isinstance(caps, ProviderCapabilities):
        caps = ProviderCapabilities()
    probe_fn = getattr(factory, "probe", None)
    if callable(probe_fn):
        try:
            found = probe_fn(dict(settings or {}))
        except Exception as exc:  # a third-party probe must not break discovery
            found = Availability(False, problem=f"its probe failed: {type(exc).__name__}: {exc}")
        if not isinstance(found, Availability):
            found = Availability(
                False, problem=f"its probe returned {type(found).__name__}, not Availability"
            )
    else:
        found = Availability(True)
    return ProviderInfo(name, target, caps, found, bool(getattr(factory, "accepts_claude_models", False)))


def discover(settings: Mapping[str, Mapping[str, Any]] | None = None) -> list[ProviderInfo]:
    """:func:`available` for every registered provider (``settings`` by provider name), sorted by name."""
    conf = settings or {}
    return [available(name, conf.get(name)) for name in provider_names()]


def get_provider(
    name: str,
    config: Mapping[str, Any] | None = None,
    *,
    policy: Policy = DEFAULT_POLICY,
    source: str = "",
) -> AgentProvider:
    """A ready-to-use provider ``name`` built from its ``config`` settings under ``policy``.

    ``source`` names where the settings came from, for error messages. Nothing is started yet:
    the provider spawns its program on its first call. Raises :class:`UnknownProviderError`,
    :class:`ProviderUnavailableError` (with the install command), or the factory's
    :class:`~workflow_mcp.providers.config.ProviderConfigError` for bad settings.
    """
    settings = dict(config or {})
    info = available(name, settings)
    if not info.availability.available:
        raise ProviderUnavailableError(
            name,
            info.availability.problem or "not installed",
            install=info.availability.install,
            where=source,
        )
    factory = load_factory(name)
    create = getattr(factory, "create", None)
    provider = (
        create(settings, policy=policy, source=source or "provider settings")
        if callable(create)
        else factory(**settings)
    )
    if not isinstance(provider, AgentProvider):
        raise ProviderUnavailableError(
            name,
            f"its factory returned {type(provider).__name__}, not an AgentProvider (one with name, "
            "capabilities, execute() and aclose())",
        )
    return provider


class FakeFactory:
    """The ``fake`` entry point: the deterministic :class:`~workflow_mcp.providers.fake.FakeProvider`.

    Settings: ``script`` — a path to a fake-script JSON file, or the script as an inline table.
    Always available; never logged in or out (``logged_in`` is ``None``).
    """

    name: Final = "fake"
    capabilities: Final = ProviderCapabilities(
        structured_output=True, streaming=True, cancellation=True, network_control=True, token_usage=True
    )
    accepts_claude_models: Final = True

    @classmethod
    def probe(cls, settings: Mapping[str, Any]) -> Availability:
        try:
            version = importlib.metadata.version("workflow-mcp")
        except importlib.metadata.PackageNotFoundError:
            version = None
        return Availability(True, version=version, location="workflow_mcp.providers.fake")

    @classmethod
    def create(cls, settings: Mapping[str, Any], *, policy: Policy, source: str) -> AgentProvider:
        from .config import ProviderConfigError
        from .fake import FakeProvider

        unknown = sorted(set(settings) - {"script"})
        if unknown:
            raise ProviderConfigError(
                source, f"providers.fake.{unknown[0]}", "unknown setting; expected: script"
            )
        script = settings.get("script")
        if isinstance(script, str):
            return FakeProvider.from_file(script)
        if script is None or isinstance(script, Mapping):
            return FakeProvider(script)
        raise ProviderConfigError(source, "providers.fake.script", "must be a file path or an inline table")
