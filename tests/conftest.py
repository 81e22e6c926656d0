"""Every test runs with its own WORKFLOW_MCP_HOME, so nothing touches the user's real state."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    monkeypatch.setenv("WORKFLOW_MCP_HOME", str(tmp_path_factory.mktemp("workflow-mcp-home")))
    yield


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: a test that takes several seconds")
