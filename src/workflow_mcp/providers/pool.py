"""The provider pool: agent providers built once per configuration, shared by the runs that use that
configuration, and closed together.

A provider that holds a process or a connection (codex's app-server, ACP agent processes, an HTTP
client) is expensive to start and must be stopped: building one per run leaks a process per run, and
building one per request builds it twice. The pool keys each provider by what decides it — the
provider name asked for (``None``: the configuration routes each call) and the configuration that
applies in the run's directory (:func:`~workflow_mcp.providers.config.load_config`: routing, settings,
model maps and policy) — so runs under one configuration share one provider, a changed
``workflow-mcp.toml`` gets a new one, and :meth:`ProviderPool.aclose` stops them all.

The ``fake`` provider is the exception: it is built for each run, because its ``sequence`` counters
are per-run state (a run's scripted answers must not depend on the runs before it) and it holds
nothing to release.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import InvalidInputError
from .base import AgentProvider
from .config import ProviderConfig, load_config
from .fake import FakeProvider
from .routing import build_router

__all__ = ["ProviderPool"]


class ProviderPool:
    """Providers by configuration (module docstring). One pool per event loop.

    ``environ`` is the environment configuration is read with (default ``os.environ``); ``on_pick``
    hears the one-line notice naming the provider chosen when nothing is configured (the CLI prints
    it on stderr). ``fake_clock`` is the clock (seconds since the epoch) of the fake providers it
    builds (default ``time.time``): a test moves it past a scripted usage limit's ``resetsAt``.
    """

    def __init__(
        self,
        *,
        environ: Mapping[str, str] | None = None,
        on_pick: Callable[[str], None] | None = None,
        fake_clock: Callable[[], float] | None = None,
    ) -> None:
        self._environ = environ
        self._on_pick = on_pick
        self._fake_clock = fake_clock
        self._built: dict[tuple[str | None, str], AgentProvider] = {}

    def get(
        self, name: str | None, *, cwd: str, fake_script: Mapping[str, Any] | None = None
    ) -> AgentProvider:
        """The provider for a run in ``cwd``: ``name`` forced for every call (``fake`` scripted by
        ``fake_script``), or with ``name=None`` the routing the configuration in ``cwd`` decides.
        Built on first use of a configuration, the same instance afterwards.

        Raises (before any agent runs): :class:`~workflow_mcp.errors.InvalidInputError` for a fake
        script that is malformed or given with another provider, and the errors of
        :func:`~workflow_mcp.providers.routing.build_router` (configuration, unknown or unavailable
        provider; each names the file and key).
        """
        if name == "fake":
            return FakeProvider(fake_script, clock=self._fake_clock)
        if fake_script is not None:
            raise InvalidInputError(
                f"a fake script applies only to provider 'fake', not {name or 'routing'!r}"
            )
        config = load_config(cwd, self._environ)
        key = (name, _fingerprint(config))
        provider = self._built.get(key)
        if provider is None:
            provider = build_router(
                provider=name, cwd=cwd, environ=self._environ, config=config, on_pick=self._on_pick
            )
            self._built[key] = provider
        return provider

    def __len__(self) -> int:
        """How many providers the pool holds (built and not yet closed)."""
        return len(self._built)

    async def aclose(self) -> None:
        """Close every provider built so far (their agent processes stop); never raises. The pool
        stays usable: a later :meth:`get` builds afresh."""
        built, self._built = list(self._built.values()), {}
        await asyncio.gather(*(p.aclose() for p in built), return_exceptions=True)


def _fingerprint(config: ProviderConfig) -> str:
    """A stable text of everything in ``config`` that decides a provider (values are plain data)."""
    return json.dumps(dataclasses.asdict(config), sort_keys=True, default=_plain)


def _plain(value: Any) -> Any:
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, frozenset | set):
        return sorted(value, key=repr)
    return repr(value)
