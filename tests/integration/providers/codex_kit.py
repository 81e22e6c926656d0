"""Shared pieces of the provider integration tests (imported by name; ``conftest.py`` puts
``tests/`` and this folder on ``sys.path``): :class:`CodexSetup`, a started mock plus the codex
settings that reach it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mocks.mock_responses import MockResponses
from workflow_mcp.providers.config import ProviderConfig
from workflow_mcp.providers.routing import RoutingProvider, build_router

SKIP_REASON = "the codex extra is not installed (pip install -e '.[test,codex]')"


@dataclass
class CodexSetup:
    """A started mock and the provider settings that point the bundled codex at it."""

    mock: MockResponses
    home: Path
    cwd: Path
    settings: dict[str, Any] = field(default_factory=dict)

    def config(self, **extra: Any) -> ProviderConfig:
        """A configuration whose ``codex`` settings reach the mock (``extra``: more fields)."""
        return ProviderConfig(settings={"codex": self.settings, **extra.pop("settings", {})}, **extra)

    @contextlib.asynccontextmanager
    async def router(self, **extra: Any) -> AsyncIterator[RoutingProvider]:
        """``--provider codex`` (unless ``extra`` configures routing), closed on exit."""
        forced = extra.pop("provider", None if extra else "codex")
        router = build_router(provider=forced, config=self.config(**extra), cwd=str(self.cwd))
        try:
            yield router
        finally:
            await router.aclose()
