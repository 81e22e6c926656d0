"""The stores the shared store contract tests run over: ``memory``, ``sqlite`` and ``postgres`` (a fresh
schema of the session's real PostgreSQL server; skipped, saying why, where it is not installed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflow_mcp.store import MemoryStore, SqliteStore
from workflow_mcp.store.base import RunStore

STORE_KINDS = ["memory", "sqlite", "postgres"]


def made_store(request: pytest.FixtureRequest, tmp_path: Path) -> RunStore:
    """A new, empty store of the kind ``request.param`` names."""
    if request.param == "memory":
        return MemoryStore()
    if request.param == "sqlite":
        return SqliteStore(tmp_path / "state.db")
    from workflow_mcp.store.postgres import PostgresStore

    return PostgresStore(request.getfixturevalue("postgres_url"))
