"""Fixtures for the real-provider integration tests: the bundled ``codex`` (openai-codex SDK)
against the loopback mock Responses API (``tests/mocks/mock_responses.py``), with an isolated
``CODEX_HOME`` in the test's temporary directory. Nothing here needs a network or a credential.

Skipped, with the reason, when the ``codex`` extra is not installed; CI installs it with
``pip install -e '.[test,codex]'``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

_TESTS = str(Path(__file__).resolve().parents[2])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from mocks.mock_responses import MockResponses  # noqa: E402

from workflow_mcp.providers.config import ProviderConfig  # noqa: E402
from workflow_mcp.providers.routing import RoutingProvider, build_router  # noqa: E402

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


@pytest.fixture
def codex(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[CodexSetup]:
    pytest.importorskip("openai_codex", reason=SKIP_REASON)
    # The mock provider's key name (env_key in codex's config); it reaches codex only because the
    # settings allowlist it. Any value works against the mock.
    monkeypatch.setenv("MOCK_API_KEY", "mock-key")
    cwd = tmp_path / "work"
    cwd.mkdir()
    with MockResponses() as mock:
        home = tmp_path / "codex-home"
        mock.codex_config(home)
        yield CodexSetup(
            mock=mock, home=home, cwd=cwd, settings={"codex_home": str(home), "env": ["MOCK_API_KEY"]}
        )
