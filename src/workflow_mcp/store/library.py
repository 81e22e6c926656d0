"""The workflow library's sidecar: :class:`SqliteLibraryStore` (tables of migration 4, in the state
database), :class:`PostgresLibraryStore` (the same tables in a PostgreSQL store's database, shared by
every server on it) and :class:`MemoryLibraryStore` (the in-memory twin). All implement
:class:`~workflow_mcp.store.base.LibraryStore`; ``tests/unit/store/test_library_store.py`` runs one
contract against each.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from typing import Any

from ..errors import StoreError
from .base import DeleteConfirmation, LibraryDraft, LibraryStore, LibraryVersion, RunStore
from .postgres import PostgresStore
from .sqlite import SqliteStore

__all__ = ["MemoryLibraryStore", "PostgresLibraryStore", "SqliteLibraryStore", "library_store_for"]

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


class SqliteLibraryStore:
    """The library tables of a :class:`~workflow_mcp.store.sqlite.SqliteStore`'s database, written
    through its transactions (so its read-only, full-disk and damage handling apply unchanged)."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def add_version(self, entry: LibraryVersion) -> bool:
        with self._store._transaction(f"storing library workflow {entry.name}@{entry.version}") as db:
            found = db.execute(
                "SELECT 1 FROM library_versions WHERE root = ? AND name = ? AND version = ?",
                (entry.root, entry.name, entry.version),
            ).fetchone()
            if found is not None:
                return False
            db.execute(
                f"INSERT INTO library_versions ({_VERSION_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
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
                ),
            )
            return True

    def versions(self, root: str | None = None, name: str | None = None) -> list[LibraryVersion]:
        where, params = _where(root=root, name=name)
        rows = self._store._read(
            "reading library versions",
            f"SELECT {_VERSION_COLUMNS} FROM library_versions{where} ORDER BY created_at, version",
            params,
        )
        return [_version_of(tuple(r)) for r in rows]

    def remove_version(self, root: str, name: str, version: str) -> bool:
        with self._store._transaction(f"deleting library workflow {name}@{version}") as db:
            cursor = db.execute(
                "DELETE FROM library_versions WHERE root = ? AND name = ? AND version = ?",
                (root, name, version),
            )
            return cursor.rowcount > 0

    def put_draft(self, draft: LibraryDraft) -> tuple[LibraryDraft, bool]:
        with self._store._transaction(f"storing the draft of {draft.name}") as db:
            row = db.execute(
                "SELECT draft_id, created_at FROM library_drafts WHERE root = ? AND name = ?",
                (draft.root, draft.name),
            ).fetchone()
            stored = draft if row is None else replace(draft, draft_id=row[0], created_at=row[1])
            db.execute("DELETE FROM library_drafts WHERE root = ? AND name = ?", (draft.root, draft.name))
            db.execute(
                f"INSERT INTO library_drafts ({_DRAFT_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    stored.draft_id,
                    stored.root,
                    stored.name,
                    stored.source,
                    stored.source_hash,
                    json.dumps(list(stored.tags), ensure_ascii=False),
                    stored.category,
                    stored.author,
                    json.dumps(stored.fields, ensure_ascii=False),
                    stored.owner,
                    stored.created_at,
                    stored.updated_at,
                    stored.expires_at,
                ),
            )
            return stored, row is None

    def drafts(self, root: str | None = None) -> list[LibraryDraft]:
        where, params = _where(root=root)
        rows = self._store._read(
            "reading library drafts",
            f"SELECT {_DRAFT_COLUMNS} FROM library_drafts{where} ORDER BY created_at, draft_id",
            params,
        )
        return [_draft_of(tuple(r)) for r in rows]

    def get_draft(self, draft_id: str) -> LibraryDraft | None:
        rows = self._store._read(
            "reading a library draft",
            f"SELECT {_DRAFT_COLUMNS} FROM library_drafts WHERE draft_id = ?",
            (draft_id,),
        )
        return _draft_of(tuple(rows[0])) if rows else None

    def remove_draft(self, draft_id: str) -> bool:
        with self._store._transaction(f"deleting draft {draft_id}") as db:
            return db.execute("DELETE FROM library_drafts WHERE draft_id = ?", (draft_id,)).rowcount > 0

    def add_confirmation(self, confirmation: DeleteConfirmation) -> None:
        c = confirmation
        with self._store._transaction(f"recording a delete confirmation for {c.name}") as db:
            db.execute(
                f"INSERT INTO library_confirmations ({_CONFIRMATION_COLUMNS}) VALUES (?,?,?,?,?,?,?,?)",
                (c.token_hash, c.root, c.name, c.version, c.draft_id, c.file, c.source_hash, c.expires_at),
            )

    def take_confirmation(self, token_hash: str) -> DeleteConfirmation | None:
        with self._store._transaction("taking a delete confirmation") as db:
            row = db.execute(
                f"SELECT {_CONFIRMATION_COLUMNS} FROM library_confirmations WHERE token_hash = ?",
                (token_hash,),
            ).fetchone()
            if row is None:
                return None
            db.execute("DELETE FROM library_confirmations WHERE token_hash = ?", (token_hash,))
        return _confirmation_of(tuple(row))


def _where(mark: str = "?", **columns: str | None) -> tuple[str, list[str]]:
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


# A replaced draft keeps its id and creation date; `xmax = 0` holds for a row this statement inserted
# (PostgreSQL's mark of an updated row version), so the caller learns whether the draft is new.
_PUT_DRAFT = (
    f"INSERT INTO library_drafts ({_DRAFT_COLUMNS}) VALUES ({', '.join(['%s'] * 13)}) "
    "ON CONFLICT (root, name) DO UPDATE SET source = excluded.source, source_hash = excluded.source_hash, "
    "tags = excluded.tags, category = excluded.category, author = excluded.author, "
    "fields = excluded.fields, owner = excluded.owner, updated_at = excluded.updated_at, "
    "expires_at = excluded.expires_at "
    "RETURNING draft_id, created_at, (xmax = 0)"
)


class PostgresLibraryStore:
    """The library tables (PostgreSQL migration 4) of a :class:`~workflow_mcp.store.postgres.PostgresStore`'s
    database, written through its transactions (its error translation, read-only refusal and reconnect
    apply unchanged). Every rule holds across servers because each write is one statement the database
    decides: a version's primary key admits one of concurrent creates of one ``name@version``
    (``ON CONFLICT DO NOTHING``), a draft is replaced in place (``ON CONFLICT (root, name) DO UPDATE``),
    and a confirmation is taken by ``DELETE … RETURNING``, so of concurrent takes on any servers exactly
    one gets it."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def add_version(self, entry: LibraryVersion) -> bool:
        with self._store._transaction(f"storing library workflow {entry.name}@{entry.version}") as db:
            cursor = db.execute(
                f"INSERT INTO library_versions ({_VERSION_COLUMNS}) VALUES ({', '.join(['%s'] * 11)}) "
                "ON CONFLICT (root, name, version) DO NOTHING",
                _version_row(entry),
            )
            return cursor.rowcount == 1

    def versions(self, root: str | None = None, name: str | None = None) -> list[LibraryVersion]:
        where, params = _where("%s", root=root, name=name)
        rows = self._store._read(
            "reading library versions",
            f"SELECT {_VERSION_COLUMNS} FROM library_versions{where} ORDER BY created_at, version",
            params,
        )
        return [_version_of(tuple(r)) for r in rows]

    def remove_version(self, root: str, name: str, version: str) -> bool:
        with self._store._transaction(f"deleting library workflow {name}@{version}") as db:
            cursor = db.execute(
                "DELETE FROM library_versions WHERE root = %s AND name = %s AND version = %s",
                (root, name, version),
            )
            return cursor.rowcount > 0

    def put_draft(self, draft: LibraryDraft) -> tuple[LibraryDraft, bool]:
        with self._store._transaction(f"storing the draft of {draft.name}") as db:
            row = db.execute(_PUT_DRAFT, _draft_row(draft)).fetchone()
        if row is None:  # pragma: no cover - RETURNING always yields the row it wrote
            raise StoreError(f"storing the draft of {draft.name} returned nothing")
        return replace(draft, draft_id=row[0], created_at=row[1]), bool(row[2])

    def drafts(self, root: str | None = None) -> list[LibraryDraft]:
        where, params = _where("%s", root=root)
        rows = self._store._read(
            "reading library drafts",
            f"SELECT {_DRAFT_COLUMNS} FROM library_drafts{where} ORDER BY created_at, draft_id",
            params,
        )
        return [_draft_of(tuple(r)) for r in rows]

    def get_draft(self, draft_id: str) -> LibraryDraft | None:
        rows = self._store._read(
            "reading a library draft",
            f"SELECT {_DRAFT_COLUMNS} FROM library_drafts WHERE draft_id = %s",
            (draft_id,),
        )
        return _draft_of(tuple(rows[0])) if rows else None

    def remove_draft(self, draft_id: str) -> bool:
        with self._store._transaction(f"deleting draft {draft_id}") as db:
            return db.execute("DELETE FROM library_drafts WHERE draft_id = %s", (draft_id,)).rowcount > 0

    def add_confirmation(self, confirmation: DeleteConfirmation) -> None:
        c = confirmation
        with self._store._transaction(f"recording a delete confirmation for {c.name}") as db:
            db.execute(
                f"INSERT INTO library_confirmations ({_CONFIRMATION_COLUMNS}) VALUES ({', '.join(['%s'] * 8)})",
                (c.token_hash, c.root, c.name, c.version, c.draft_id, c.file, c.source_hash, c.expires_at),
            )

    def take_confirmation(self, token_hash: str) -> DeleteConfirmation | None:
        with self._store._transaction("taking a delete confirmation") as db:
            row = db.execute(
                f"DELETE FROM library_confirmations WHERE token_hash = %s RETURNING {_CONFIRMATION_COLUMNS}",
                (token_hash,),
            ).fetchone()
        return _confirmation_of(tuple(row)) if row is not None else None


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
