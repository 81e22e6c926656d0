"""Run persistence: the :class:`RunStore` boundary; SQLite (the embedded default), PostgreSQL (shared by
several servers; :mod:`.postgres`, imported on demand) and in-memory implementations."""

import os

from ._process import HEARTBEAT_S, LEASE_ENV, LEASE_TTL_S, heartbeat_every
from .base import JournalRow, RunRecord, RunStore, StoreError
from .memory import MemoryStore
from .sqlite import SqliteStore, default_home

DATABASE_URL_ENV = "WORKFLOW_MCP_DATABASE_URL"
"""The environment variable naming the database every command uses (``--database-url`` wins)."""


def database_url(explicit: str | None = None) -> str | None:
    """The database URL in force: ``explicit`` (``--database-url``), else ``$WORKFLOW_MCP_DATABASE_URL``,
    else ``None`` (the SQLite file ``$WORKFLOW_MCP_HOME/state.db``)."""
    return explicit or os.environ.get(DATABASE_URL_ENV) or None


def open_store(url: str | None = None) -> RunStore:
    """The store ``url`` names: ``postgresql://…`` (or ``postgres://…``) a :class:`~.postgres.PostgresStore`,
    ``None`` the SQLite file ``$WORKFLOW_MCP_HOME/state.db``.

    Raises:
        StoreError: another scheme, psycopg is missing, or the database cannot be opened (the message says).
    """
    if url is None:
        return SqliteStore()
    from .postgres import PostgresStore, is_postgres_url, redact

    if not is_postgres_url(url):
        raise StoreError(
            f"the database URL {redact(url)} is not a PostgreSQL URL: give postgresql://USER@HOST:PORT/DB "
            f"in --database-url or {DATABASE_URL_ENV}, or leave both unset for the SQLite file"
        )
    return PostgresStore(url)


__all__ = [
    "DATABASE_URL_ENV",
    "HEARTBEAT_S",
    "LEASE_ENV",
    "LEASE_TTL_S",
    "JournalRow",
    "MemoryStore",
    "RunRecord",
    "RunStore",
    "SqliteStore",
    "StoreError",
    "database_url",
    "default_home",
    "heartbeat_every",
    "open_store",
]
