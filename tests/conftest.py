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


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[object]:
    """One real PostgreSQL server for the whole session (``tests/postgres_server.py``); the tests that
    use it are skipped, saying why, where the server binaries are not installed."""
    import sys
    from pathlib import Path

    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    from postgres_server import PG_MISSING, pg_bin, running_postgres

    if pg_bin() is None:
        pytest.skip(PG_MISSING)
    pytest.importorskip("psycopg", reason="psycopg is not installed: pip install -e '.[postgres]'")
    with running_postgres() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_cluster: object) -> str:
    """A URL to an empty schema of the session's PostgreSQL server (a fresh one per test)."""
    url: str = postgres_cluster.fresh_schema()  # type: ignore[attr-defined]
    return url
