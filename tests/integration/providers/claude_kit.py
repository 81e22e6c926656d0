"""Shared pieces of the ``claude`` provider integration tests (imported by name; ``conftest.py``
puts this folder on ``sys.path``): :class:`ClaudeSetup`, a started mock Messages API plus the
environment and settings that point the SDK's bundled Claude Code CLI at it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mocks.mock_messages import MockMessages
from workflow_mcp.providers.claude import ClaudeProvider
from workflow_mcp.providers.config import ProviderConfig
from workflow_mcp.providers.registry import register_provider, unregister_provider
from workflow_mcp.providers.routing import RoutingProvider, build_router

from helpers import call_provider

SKIP_REASON = "the claude extra is not installed (pip install -e '.[test,claude]')"
SLOW_FLAG = "WORKFLOW_MCP_CLAUDE_TESTS"


@dataclass
class ClaudeSetup:
    """A started mock and the provider settings that point the bundled claude CLI at it."""

    mock: MockMessages
    home: Path
    cwd: Path
    settings: dict[str, Any] = field(default_factory=dict)

    def config(self, **extra: Any) -> ProviderConfig:
        """A configuration whose ``claude`` settings reach the mock (``extra``: more fields)."""
        return ProviderConfig(settings={"claude": self.settings, **extra.pop("settings", {})}, **extra)

    def provider(self, **settings: Any) -> ClaudeProvider:
        return ClaudeProvider.create(
            {**self.settings, **settings}, policy=self.config().policy, source="test"
        )

    @contextlib.asynccontextmanager
    async def router(self, **extra: Any) -> AsyncIterator[RoutingProvider]:
        """``--provider claude`` (unless ``extra`` configures routing), closed on exit."""
        forced = extra.pop("provider", None if extra else "claude")
        router = build_router(provider=forced, config=self.config(**extra), cwd=str(self.cwd))
        try:
            yield router
        finally:
            await router.aclose()


@contextlib.contextmanager
def claude_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ClaudeSetup]:
    """The mock on a free loopback port; HOME and CLAUDE_CONFIG_DIR isolated in ``tmp_path``;
    ``ANTHROPIC_API_KEY=dummy``; Claude's own retries off; ``claude`` registered in-process (the
    same factory the entry point names)."""
    home = tmp_path / "home"
    config_dir = home / ".claude"
    config_dir.mkdir(parents=True)
    cwd = tmp_path / "work"
    cwd.mkdir()
    with MockMessages() as mock:
        for name in ("ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDECODE"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", mock.base_url)
        monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
        monkeypatch.setenv("DISABLE_AUTOUPDATER", "1")
        monkeypatch.setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            monkeypatch.setenv("IS_SANDBOX", "1")  # some CLI paths refuse to run as root otherwise
        register_provider("claude", ClaudeProvider)
        try:
            yield ClaudeSetup(mock=mock, home=home, cwd=cwd, settings={"config_dir": str(config_dir)})
        finally:
            unregister_provider("claude")


call = call_provider
"""One direct provider call, collecting its events."""
