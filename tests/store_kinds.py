"""The stores the shared store contract tests run over: ``memory``, ``sqlite`` and ``postgres`` (a fresh
schema of the session's real PostgreSQL server; skipped, saying why, where it is not installed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflow_mcp.store import MemoryStore, SqliteStore
from workflow_mcp.store.base import RunRecord, RunStore

STORE_KINDS = ["memory", "sqlite", "postgres"]


def made_store(request: pytest.FixtureRequest, tmp_path: Path) -> RunStore:
    """A new, empty store of the kind ``request.param`` names."""
    if request.param == "memory":
        return MemoryStore()
    if request.param == "sqlite":
        return SqliteStore(tmp_path / "state.db")
    from workflow_mcp.store.postgres import PostgresStore

    return PostgresStore(request.getfixturevalue("postgres_url"))


def run_record(run_id: str) -> RunRecord:
    """A minimal record of a run ``run_id`` to store events under."""
    return RunRecord(
        run_id=run_id,
        workflow_name="wf",
        source_hash="h",
        source="export const meta = {}",
        created_at="2026-11-30T10:00:00.000Z",
    )
