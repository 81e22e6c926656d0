"""The SQLite and PostgreSQL migration lists build the same database: the same tables, each with the
same columns in the same order, the same NULL rules, the same primary key and a column type of the
same family — so one set of statements (the library store's, the run stores' queries) reads and writes
both. Real databases: a new SQLite file and a fresh schema of the session's real PostgreSQL server."""

from __future__ import annotations

from pathlib import Path

import psycopg

from workflow_mcp.store.postgres import PostgresStore
from workflow_mcp.store.postgres import migrations as postgres_migrations
from workflow_mcp.store.sqlite import SqliteStore
from workflow_mcp.store.sqlite import migrations as sqlite_migrations

# (table, column) -> (type family, NOT NULL, position in the primary key: 0 = not in it)
Columns = dict[str, list[tuple[str, str, bool, int]]]

# Where each database keeps its schema version: PRAGMA user_version in SQLite, a table in PostgreSQL.
ONLY_POSTGRES = {"workflow_mcp_schema"}

FAMILY = {
    "text": "text",
    "integer": "integer",
    "bigint": "integer",
    "boolean": "integer",  # SQLite keeps a flag as 0 or 1
    "real": "real",
    "double precision": "real",
    "blob": "bytes",
    "bytea": "bytes",
}


def sqlite_columns(path: Path) -> Columns:
    store = SqliteStore(path)
    store.close()
    import sqlite3

    db = sqlite3.connect(path)
    try:
        tables = [
            str(r[0])
            for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        out: Columns = {}
        for table in tables:
            out[table] = [
                (str(name), FAMILY[str(kind).lower()], bool(notnull) or pk > 0, int(pk))
                for _, name, kind, notnull, _default, pk in db.execute(f"PRAGMA table_info({table})")
            ]
        return out
    finally:
        db.close()


def postgres_columns(url: str) -> Columns:
    PostgresStore(url).close()  # runs the migrations
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT c.table_name, c.column_name, c.data_type, c.is_nullable = 'NO', "
            "coalesce(k.ordinal_position, 0) FROM information_schema.columns c "
            "LEFT JOIN information_schema.table_constraints t ON t.table_schema = c.table_schema "
            "AND t.table_name = c.table_name AND t.constraint_type = 'PRIMARY KEY' "
            "LEFT JOIN information_schema.key_column_usage k ON k.constraint_name = t.constraint_name "
            "AND k.table_schema = c.table_schema AND k.column_name = c.column_name "
            "WHERE c.table_schema = current_schema() ORDER BY c.table_name, c.ordinal_position"
        ).fetchall()
    out: Columns = {}
    for table, name, kind, notnull, pk in rows:
        if table not in ONLY_POSTGRES:
            out.setdefault(str(table), []).append((str(name), FAMILY[str(kind)], bool(notnull), int(pk)))
    return out


def test_the_sqlite_and_postgresql_migrations_define_the_same_tables_and_columns(
    tmp_path: Path, postgres_url: str
) -> None:
    ours, theirs = sqlite_columns(tmp_path / "state.db"), postgres_columns(postgres_url)
    assert sorted(ours) == sorted(theirs)
    for table, columns in ours.items():
        assert columns == theirs[table], table
    assert {"runs", "events", "journal", "library_versions", "library_drafts"} <= set(ours)


def test_both_migration_lists_are_numbered_alike() -> None:
    assert [n for n, _ in sqlite_migrations()] == [n for n, _ in postgres_migrations()]
