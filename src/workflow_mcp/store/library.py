"""The workflow library's sidecar: :class:`SqlLibraryStore`, one set of statements over a small
:class:`SqlDialect`, as :class:`SqliteLibraryStore` (tables of migration 4, in the state database) and
:class:`PostgresLibraryStore` (the same tables in a PostgreSQL store's database, shared by every server
on it), and :class:`MemoryLibraryStore` (the in-memory twin). All implement
:class:`~workflow_mcp.store.base.LibraryStore`; ``tests/unit/store/test_library_store.py`` runs one
contract against each.
"""

from __future__ import annotations

import json
import threading
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..errors import StoreError
from .base import DeleteConfirmation, LibraryDraft, LibraryStore, LibraryVersion, RunStore
from .postgres import PostgresStore
from .sqlite import SqliteStore

__all__ = [
    "POSTGRES",
    "SQLITE",
    "MemoryLibraryStore",
    "PostgresLibraryStore",
    "SqlDatabase",
    "SqlDialect",
    "SqlLibraryStore",
    "SqliteLibraryStore",
    "library_store_for",
]

_VERSION_COLUMNS = (
    "root, name, version, file, source, source_hash, tags, category, author, fields, created_at"
)
_DRAFT_COLUMNS = (
    "draft_id, root, name, source, source_hash, tags, category, author, fields, owner, created_at, "
    "updated_at, expires_at"
)
_CONFIRMATION_COLUMNS = "token_hash, root, name, version, draft_id, file, source_hash, expires_at"


def library_store_for(store: RunStore) -> LibraryStore:
    """The library store beside a run store: the same SQLite or PostgreSQL database (so the library
    outlives the process and, on PostgreSQL, is shared by every server on the database), or a new
    in-memory twin beside any other store (an in-memory run store keeps nothing either)."""
    if isinstance(store, SqliteStore):
        return SqliteLibraryStore(store)
    if isinstance(store, PostgresStore):
        return PostgresLibraryStore(store)
    return MemoryLibraryStore()


def _tags(raw: Any) -> tuple[str, ...]:
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return ()
    return tuple(str(t) for t in value) if isinstance(value, list) else ()


def _fields(raw: Any) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _version_of(row: tuple[Any, ...]) -> LibraryVersion:
    return LibraryVersion(
        root=row[0],
        name=row[1],
        version=row[2],
        file=row[3],
        source=row[4],
        source_hash=row[5],
        tags=_tags(row[6]),
        category=row[7],
        author=row[8],
        fields=_fields(row[9]),
        created_at=row[10],
    )


def _draft_of(row: tuple[Any, ...]) -> LibraryDraft:
    return LibraryDraft(
        draft_id=row[0],
        root=row[1],
        name=row[2],
        source=row[3],
        source_hash=row[4],
        tags=_tags(row[5]),
        category=row[6],
        author=row[7],
        fields=_fields(row[8]),
        owner=row[9],
        created_at=row[10],
        updated_at=row[11],
        expires_at=row[12],
    )


def _where(mark: str, **columns: str | None) -> tuple[str, list[str]]:
    given = {k: v for k, v in columns.items() if v is not None}
    if not given:
        return "", []
    return " WHERE " + " AND ".join(f"{k} = {mark}" for k in given), list(given.values())


def _confirmation_of(row: tuple[Any, ...]) -> DeleteConfirmation:
    return DeleteConfirmation(
        token_hash=row[0],
        root=row[1],
        name=row[2],
        version=row[3],
        draft_id=row[4],
        file=row[5],
        source_hash=row[6],
        expires_at=float(row[7]),
    )


def _version_row(entry: LibraryVersion) -> tuple[Any, ...]:
    return (
        entry.root,
        entry.name,
        entry.version,
        entry.file,
        entry.source,
        entry.source_hash,
        json.dumps(list(entry.tags), ensure_ascii=False),
        entry.category,
        entry.author,
        json.dumps(entry.fields, ensure_ascii=False),
        entry.created_at,
    )


def _draft_row(draft: LibraryDraft) -> tuple[Any, ...]:
    return (
        draft.draft_id,
        draft.root,
        draft.name,
        draft.source,
        draft.source_hash,
        json.dumps(list(draft.tags), ensure_ascii=False),
        draft.category,
        draft.author,
        json.dumps(draft.fields, ensure_ascii=False),
        draft.owner,
        draft.created_at,
        draft.updated_at,
        draft.expires_at,
    )


@dataclass(frozen=True)
class SqlDialect:
    """What the library's statements need to know of the SQL database they run on. The statements
    themselves are one text for both: the upserts (``INSERT … ON CONFLICT``) are SQLite's and
    PostgreSQL's common syntax, and each rule is decided by one statement or inside one write
    transaction, so it holds whichever process or server writes.

    ``mark``: the parameter placeholder (``?``, ``%s``). ``inserted``: an expression a ``RETURNING``
    clause can give that is true for a row the upsert inserted rather than updated (PostgreSQL's
    ``xmax = 0``), or ``None`` where the write transaction locks the whole database (SQLite's ``BEGIN
    IMMEDIATE``), so reading the row first and then writing it are one decision."""

    name: str
    mark: str
    inserted: str | None


SQLITE = SqlDialect("sqlite", "?", None)
POSTGRES = SqlDialect("postgresql", "%s", "(xmax = 0)")


class SqlDatabase(Protocol):
    """The SQL run store a library store writes through: its write transactions and its reads, so the
    store's error translation, read-only refusal, damage marking and reconnects apply unchanged."""

    def _transaction(self, what: str) -> AbstractContextManager[Any]: ...

    def _read(self, what: str, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[Any]: ...


class SqlLibraryStore:
    """The library tables (migration 4) of a SQL run store's database, in one set of statements over
    a :class:`SqlDialect`: a version's primary key admits one of concurrent creates of one
    ``name@version`` (``ON CONFLICT DO NOTHING``), a draft is replaced in place keeping its id and
    creation date (``ON CONFLICT (root, name) DO UPDATE``), and a confirmation is taken by the one
    ``DELETE`` that finds it, so of concurrent takes exactly one gets it."""

    def __init__(self, store: SqlDatabase, dialect: SqlDialect) -> None:
        self._store = store
        self.dialect = dialect
        m = dialect.mark
        self._add_version = (
            f"INSERT INTO library_versions ({_VERSION_COLUMNS}) VALUES ({', '.join([m] * 11)}) "
            "ON CONFLICT (root, name, version) DO NOTHING"
        )
        self._put_draft = (
            f"INSERT INTO library_drafts ({_DRAFT_COLUMNS}) VALUES ({', '.join([m] * 13)}) "
            "ON CONFLICT (root, name) DO UPDATE SET source = excluded.source, "
            "source_hash = excluded.source_hash, tags = excluded.tags, category = excluded.category, "
            "author = excluded.author, fields = excluded.fields, owner = excluded.owner, "
            "updated_at = excluded.updated_at, expires_at = excluded.expires_at"
        )
        if dialect.inserted is not None:
            self._put_draft += f" RETURNING draft_id, created_at, {dialect.inserted}"
        self._find_draft = f"SELECT draft_id, created_at FROM library_drafts WHERE root = {m} AND name = {m}"
        self._add_confirmation = (
            f"INSERT INTO library_confirmations ({_CONFIRMATION_COLUMNS}) VALUES ({', '.join([m] * 8)})"
        )

    def add_version(self, entry: LibraryVersion) -> bool:
        with self._store._transaction(f"storing library workflow {entry.name}@{entry.version}") as db:
            return int(db.execute(self._add_version, _version_row(entry)).rowcount) == 1

    def versions(self, root: str | None = None, name: str | None = None) -> list[LibraryVersion]:
        where, params = _where(self.dialect.mark, root=root, name=name)
        rows = self._store._read(
            "reading library versions",
            f"SELECT {_VERSION_COLUMNS} FROM library_versions{where} ORDER BY created_at, version",
            params,
        )
        return [_version_of(tuple(r)) for r in rows]

    def remove_version(self, root: str, name: str, version: str) -> bool:
        m = self.dialect.mark
        with self._store._transaction(f"deleting library workflow {name}@{version}") as db:
            cursor = db.execute(
                f"DELETE FROM library_versions WHERE root = {m} AND name = {m} AND version = {m}",
                (root, name, version),
            )
            return int(cursor.rowcount) > 0

    def put_draft(self, draft: LibraryDraft) -> tuple[LibraryDraft, bool]:
        with self._store._transaction(f"storing the draft of {draft.name}") as db:
            if self.dialect.inserted is None:  # the transaction holds the database: read, then write
                found = db.execute(self._find_draft, (draft.root, draft.name)).fetchone()
                db.execute(self._put_draft, _draft_row(draft))
                row = (draft.draft_id, draft.created_at, True) if found is None else (*found, False)
            else:
                row = db.execute(self._put_draft, _draft_row(draft)).fetchone()
        if row is None:  # pragma: no cover - RETURNING always yields the row it wrote
            raise StoreError(f"storing the draft of {draft.name} returned nothing")
        return replace(draft, draft_id=row[0], created_at=row[1]), bool(row[2])

    def drafts(self, root: str | None = None) -> list[LibraryDraft]:
        where, params = _where(self.dialect.mark, root=root)
        rows = self._store._read(
            "reading library drafts",
            f"SELECT {_DRAFT_COLUMNS} FROM library_drafts{where} ORDER BY created_at, draft_id",
            params,
        )
        return [_draft_of(tuple(r)) for r in rows]

    def get_draft(self, draft_id: str) -> LibraryDraft | None:
        rows = self._store._read(
            "reading a library draft",
            f"SELECT {_DRAFT_COLUMNS} FROM library_drafts WHERE draft_id = {self.dialect.mark}",
            (draft_id,),
        )
        return _draft_of(tuple(rows[0])) if rows else None

    def remove_draft(self, draft_id: str) -> bool:
        with self._store._transaction(f"deleting draft {draft_id}") as db:
            cursor = db.execute(
                f"DELETE FROM library_drafts WHERE draft_id = {self.dialect.mark}", (draft_id,)
            )
            return int(cursor.rowcount) > 0

    def add_confirmation(self, confirmation: DeleteConfirmation) -> None:
        c = confirmation
        with self._store._transaction(f"recording a delete confirmation for {c.name}") as db:
            db.execute(
                self._add_confirmation,
                (c.token_hash, c.root, c.name, c.version, c.draft_id, c.file, c.source_hash, c.expires_at),
            )

    def take_confirmation(self, token_hash: str) -> DeleteConfirmation | None:
        m = self.dialect.mark
        with self._store._transaction("taking a delete confirmation") as db:
            row = db.execute(
                f"SELECT {_CONFIRMATION_COLUMNS} FROM library_confirmations WHERE token_hash = {m}",
                (token_hash,),
            ).fetchone()
            if row is None:
                return None
            # Of concurrent takes that all read the row, only the one whose DELETE removes it gets it
            # (a second DELETE waits for the first's row lock, then finds nothing).
            deleted = db.execute(f"DELETE FROM library_confirmations WHERE token_hash = {m}", (token_hash,))
            if int(deleted.rowcount) != 1:
                return None
        return _confirmation_of(tuple(row))


class SqliteLibraryStore(SqlLibraryStore):
    """The library tables of a :class:`~workflow_mcp.store.sqlite.SqliteStore`'s database, written
    through its transactions (so its read-only, full-disk and damage handling apply unchanged)."""

    def __init__(self, store: SqliteStore) -> None:
        super().__init__(store, SQLITE)


class PostgresLibraryStore(SqlLibraryStore):
    """The library tables (PostgreSQL migration 4) of a :class:`~workflow_mcp.store.postgres.PostgresStore`'s
    database, shared by every server on it, written through its transactions (its error translation,
    read-only refusal and reconnect apply unchanged)."""

    def __init__(self, store: PostgresStore) -> None:
        super().__init__(store, POSTGRES)


class MemoryLibraryStore:
    """The in-memory twin of :class:`SqliteLibraryStore` (one lock; the same contract)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._versions: list[LibraryVersion] = []
        self._drafts: dict[str, LibraryDraft] = {}
        self._confirmations: dict[str, DeleteConfirmation] = {}
        #: When set, every write raises it (tests of a failing store: a full disk, a read-only file).
        self.fail_writes: StoreError | None = None

    def _check(self) -> None:
        if self.fail_writes is not None:
            raise self.fail_writes

    def add_version(self, entry: LibraryVersion) -> bool:
        with self._lock:
            self._check()
            key = (entry.root, entry.name, entry.version)
            if any((v.root, v.name, v.version) == key for v in self._versions):
                return False
            self._versions.append(entry)
            return True

    def versions(self, root: str | None = None, name: str | None = None) -> list[LibraryVersion]:
        with self._lock:
            found = [
                v
                for v in self._versions
                if (root is None or v.root == root) and (name is None or v.name == name)
            ]
        return sorted(found, key=lambda v: (v.created_at, v.version))

    def remove_version(self, root: str, name: str, version: str) -> bool:
        with self._lock:
            self._check()
            kept = [v for v in self._versions if (v.root, v.name, v.version) != (root, name, version)]
            removed = len(kept) != len(self._versions)
            self._versions = kept
            return removed

    def put_draft(self, draft: LibraryDraft) -> tuple[LibraryDraft, bool]:
        with self._lock:
            self._check()
            old = next(
                (d for d in self._drafts.values() if (d.root, d.name) == (draft.root, draft.name)), None
            )
            stored = (
                draft if old is None else replace(draft, draft_id=old.draft_id, created_at=old.created_at)
            )
            if old is not None:
                del self._drafts[old.draft_id]
            self._drafts[stored.draft_id] = stored
            return stored, old is None

    def drafts(self, root: str | None = None) -> list[LibraryDraft]:
        with self._lock:
            found = [d for d in self._drafts.values() if root is None or d.root == root]
        return sorted(found, key=lambda d: (d.created_at, d.draft_id))

    def get_draft(self, draft_id: str) -> LibraryDraft | None:
        with self._lock:
            return self._drafts.get(draft_id)

    def remove_draft(self, draft_id: str) -> bool:
        with self._lock:
            self._check()
            return self._drafts.pop(draft_id, None) is not None

    def add_confirmation(self, confirmation: DeleteConfirmation) -> None:
        with self._lock:
            self._check()
            self._confirmations[confirmation.token_hash] = confirmation

    def take_confirmation(self, token_hash: str) -> DeleteConfirmation | None:
        with self._lock:
            self._check()
            return self._confirmations.pop(token_hash, None)
