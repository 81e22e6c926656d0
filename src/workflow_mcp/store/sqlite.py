"""SQLite run store: ``$WORKFLOW_MCP_HOME/state.db`` (default ``~/.workflow-mcp/state.db``).

WAL mode with ``synchronous=NORMAL``: a committed event survives a killed process. Each
:meth:`SqliteStore.append` commits before it returns, so an event is durable before anyone sees it.
Schema changes are numbered SQL files in ``migrations/``, applied in order and recorded in
``PRAGMA user_version``; a database from a newer release is refused, never modified.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from ..events import Event
from .base import JournalRow, RunRecord, StoreError, journal_row_for

__all__ = ["SqliteStore", "default_home", "migrations"]


def default_home() -> Path:
    """``$WORKFLOW_MCP_HOME`` or ``~/.workflow-mcp``."""
    env = os.environ.get("WORKFLOW_MCP_HOME")
    return Path(env).expanduser() if env else Path.home() / ".workflow-mcp"


def migrations() -> list[tuple[int, str]]:
    """``[(number, sql)]`` in order, from ``store/migrations/NNNN_*.sql``."""
    out = []
    folder = resources.files(__package__).joinpath("migrations")
    for entry in folder.iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:4].isdigit():
            out.append((int(name[:4]), entry.read_text(encoding="utf-8")))
    return sorted(out)


_RUN_COLUMNS = (
    "run_id, workflow_name, workflow_path, source_hash, source, args_json, options_json, provider, profile, "
    "cwd, created_at, resumed_from, resume_policy, idempotency_key, owner, owner_pid, owner_host"
)


# agent.started adds nothing a resume needs (a started call without a result is simply not reusable),
# so the journal follows queued → completed | cached | failed.
_JOURNALED = frozenset({"agent.queued", "agent.completed", "agent.cached", "agent.failed"})
# json.dumps() with keyword arguments builds a new encoder on every call; one encoder serves all.
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_UPSERT_JOURNAL = (
    "INSERT INTO journal (run_id, agent_id, ordinal, key, content_key, status, label, result_json, "
    "tokens_json, side_effects, source_run) VALUES (?,?,?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT(run_id, agent_id) DO UPDATE SET status = excluded.status, "
    "result_json = COALESCE(excluded.result_json, journal.result_json), "
    "tokens_json = excluded.tokens_json, source_run = COALESCE(excluded.source_run, journal.source_run), "
    "key = CASE WHEN excluded.key != '' THEN excluded.key ELSE journal.key END, "
    "content_key = CASE WHEN excluded.content_key != '' THEN excluded.content_key ELSE journal.content_key END, "
    "label = CASE WHEN excluded.label != '' THEN excluded.label ELSE journal.label END, "
    "side_effects = MAX(journal.side_effects, excluded.side_effects)"
)


class SqliteStore:
    """The durable store. Thread-safe for one process (one connection behind a lock)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_home() / "state.db"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"the state directory {self.path.parent} cannot be created ({exc.strerror or exc}); "
                "point WORKFLOW_MCP_HOME at a writable directory"
            ) from exc
        if not os.access(self.path.parent, os.W_OK):
            raise StoreError(
                f"the state directory {self.path.parent} is not writable; SQLite needs to write its "
                "journal there. Point WORKFLOW_MCP_HOME at a writable directory"
            )
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=10)
            self._lock = threading.RLock()
            self._check_version()  # before anything that could write: a refused database stays as it is
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"the state database {self.path} cannot be opened ({exc}); it is left untouched. "
                "Move it aside or point WORKFLOW_MCP_HOME elsewhere."
            ) from exc
        self._ordinals: dict[str, dict[str, int]] = {}
        self._last_seq: dict[str, int] = {}

    def _check_version(self) -> None:
        current = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        steps = migrations()
        newest = steps[-1][0] if steps else 0
        if current > newest:
            self._db.close()
            raise StoreError(
                f"the state database {self.path} has schema version {current}, newer than this release "
                f"understands ({newest}); upgrade workflow-mcp"
            )

    def _migrate(self) -> None:
        steps = migrations()
        if int(self._db.execute("PRAGMA user_version").fetchone()[0]) >= (steps[-1][0] if steps else 0):
            return
        # Several processes may open a fresh database at once: take the write lock first, then
        # read the version again, so each migration runs exactly once.
        self._db.execute("BEGIN IMMEDIATE")
        try:
            current = int(self._db.execute("PRAGMA user_version").fetchone()[0])
            for number, sql in steps:
                if number <= current:
                    continue
                for statement in _split_sql(sql):
                    self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {number}")
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    # -- runs ------------------------------------------------------------------------------
    def create_run(self, record: RunRecord) -> None:
        """Record a new run.

        Raises:
            StoreError: the run id, or the owner's idempotency key, is already used.
        """
        try:
            self._insert_run(record)
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"run {record.run_id} cannot be created: {exc}") from exc

    def _insert_run(self, record: RunRecord) -> None:
        with self._lock:
            self._db.execute(
                f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES ({', '.join('?' * 17)})",
                (
                    record.run_id,
                    record.workflow_name,
                    record.workflow_path,
                    record.source_hash,
                    record.source,
                    record.args_json,
                    json.dumps(record.options),
                    record.provider,
                    record.profile,
                    record.cwd,
                    record.created_at,
                    record.resumed_from,
                    record.resume_policy,
                    record.idempotency_key,
                    record.owner,
                    record.owner_pid,
                    record.owner_host,
                ),
            )

    def _record(self, row: tuple[Any, ...]) -> RunRecord:
        return RunRecord(
            run_id=row[0],
            workflow_name=row[1],
            workflow_path=row[2],
            source_hash=row[3],
            source=row[4],
            args_json=row[5],
            options=json.loads(row[6] or "{}"),
            provider=row[7],
            profile=row[8],
            cwd=row[9],
            created_at=row[10],
            resumed_from=row[11],
            resume_policy=row[12],
            idempotency_key=row[13],
            owner=row[14],
            owner_pid=row[15],
            owner_host=row[16],
        )

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._lock:
            row = self._db.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return self._record(row) if row else None

    def find_idempotent(self, owner: str | None, key: str) -> RunRecord | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {_RUN_COLUMNS} FROM runs WHERE owner IS ? AND idempotency_key = ?", (owner, key)
            ).fetchone()
        return self._record(row) if row else None

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY created_at DESC, run_id DESC LIMIT ?", (limit,)
            ).fetchall()
        return [self._record(r) for r in rows]

    # -- events ----------------------------------------------------------------------------
    def append(self, event: Event) -> None:
        """Commit one event (and the journal row it implies)."""
        self.append_many([event])

    def append_many(self, events: list[Event]) -> None:
        """Commit a batch of events in one transaction: all or none."""
        rows = [
            (
                e.run_id,
                e.sequence,
                e.type,
                e.timestamp,
                e.agent_id,
                _encode(e.to_json()),
            )
            for e in events
        ]
        with self._lock:
            for e in events:  # sequences are strictly increasing per run
                last = self._last_seq.get(e.run_id)
                if last is None:
                    last = self.last_sequence(e.run_id)
                if e.sequence <= last:
                    raise StoreError(f"run {e.run_id}: event sequence {e.sequence} is not after {last}")
                self._last_seq[e.run_id] = e.sequence
            self._db.execute("BEGIN")
            try:
                self._db.executemany(
                    "INSERT INTO events (run_id, sequence, type, timestamp, agent_id, body) VALUES (?,?,?,?,?,?)",
                    rows,
                )
                journal = [self._journal_row(e) for e in events if e.agent_id and e.type in _JOURNALED]
                self._db.executemany(_UPSERT_JOURNAL, [j for j in journal if j is not None])
                self._db.execute("COMMIT")
            except BaseException as exc:
                # Whatever went wrong (a constraint, an unencodable string, an interrupt), the
                # transaction is rolled back so the connection stays usable.
                self._db.execute("ROLLBACK")
                self._ordinals.clear()
                self._last_seq.clear()
                if isinstance(exc, sqlite3.IntegrityError | UnicodeError):
                    raise StoreError(f"events refused by the store: {exc}") from exc
                raise

    def _ordinal(self, event: Event) -> int:
        per_run = self._ordinals.setdefault(event.run_id, {})
        agent_id = event.agent_id or ""
        if agent_id in per_run:
            return per_run[agent_id]
        if not per_run:
            for aid, ordinal in self._db.execute(
                "SELECT agent_id, ordinal FROM journal WHERE run_id = ?", (event.run_id,)
            ):
                per_run[str(aid)] = int(ordinal)
            if agent_id in per_run:
                return per_run[agent_id]
        n = len(per_run)
        per_run[agent_id] = n
        return n

    def _journal_row(self, event: Event) -> tuple[Any, ...] | None:
        jr = journal_row_for(event, self._ordinal(event))
        if jr is None:
            return None
        return (
            jr.run_id,
            jr.agent_id,
            jr.ordinal,
            jr.key,
            jr.content_key,
            jr.status,
            jr.label,
            jr.result_json,
            json.dumps(jr.tokens),
            int(jr.side_effects),
            jr.source_run,
        )

    def flush(self) -> None:
        """Every append is already committed; nothing is pending."""

    def events(self, run_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        sql = "SELECT body FROM events WHERE run_id = ? AND sequence > ? ORDER BY sequence"
        params: tuple[Any, ...] = (run_id, after)
        if limit is not None:
            sql += " LIMIT ?"
            params = (run_id, after, limit)
        with self._lock:
            rows = self._db.execute(sql, params).fetchall()
        out = []
        for (body,) in rows:
            try:
                out.append(Event.from_json(json.loads(body)))
            except (ValueError, KeyError, TypeError) as exc:
                raise StoreError(f"run {run_id}: a stored event is damaged ({exc})") from exc
        return out

    def last_sequence(self, run_id: str) -> int:
        with self._lock:
            row = self._db.execute("SELECT MAX(sequence) FROM events WHERE run_id = ?", (run_id,)).fetchone()
        return int(row[0] or 0)

    def last_run_event(self, run_id: str) -> str | None:
        """Type of the newest ``run.*`` event (what status projection needs for listings)."""
        with self._lock:
            row = self._db.execute(
                "SELECT type FROM events WHERE run_id = ? AND type LIKE 'run.%' "
                "AND type != 'run.cancellation_requested' ORDER BY sequence DESC LIMIT 1",
                (run_id,),
            ).fetchone()
        return str(row[0]) if row else None

    def unfinished_runs(self) -> list[RunRecord]:
        """Runs whose newest ``run.*`` event says they are still going (queued or running)."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_RUN_COLUMNS} FROM runs r WHERE COALESCE((SELECT type FROM events e "
                "WHERE e.run_id = r.run_id AND e.type LIKE 'run.%' AND e.type != 'run.cancellation_requested' "
                "ORDER BY e.sequence DESC LIMIT 1), 'run.queued') "
                "NOT IN ('run.completed', 'run.failed', 'run.cancelled', 'run.interrupted', 'run.paused')"
            ).fetchall()
        return [self._record(r) for r in rows]

    def journal(self, run_id: str) -> list[JournalRow]:
        with self._lock:
            rows = self._db.execute(
                "SELECT run_id, agent_id, ordinal, key, content_key, status, label, result_json, tokens_json, "
                "side_effects, source_run FROM journal WHERE run_id = ? ORDER BY ordinal",
                (run_id,),
            ).fetchall()
        return [
            JournalRow(
                run_id=r[0],
                agent_id=r[1],
                ordinal=r[2],
                key=r[3],
                content_key=r[4],
                status=r[5],
                label=r[6],
                result_json=r[7],
                tokens=json.loads(r[8] or "{}"),
                side_effects=bool(r[9]),
                source_run=r[10],
            )
            for r in rows
        ]

    # -- cross-process cancellation --------------------------------------------------------
    def request_cancel(self, run_id: str, reason: str) -> None:
        from ..events import utc_now

        with self._lock:
            self._db.execute(
                "INSERT OR IGNORE INTO cancel_requests (run_id, reason, requested_at) VALUES (?,?,?)",
                (run_id, reason, utc_now()),
            )

    def cancel_requests(self, run_ids: list[str]) -> dict[str, str]:
        """``{run_id: reason}`` for those of ``run_ids`` someone asked to cancel.

        Raises:
            StoreError: the database cannot be read.
        """
        if not run_ids:
            return {}
        marks = ",".join("?" * len(run_ids))
        try:
            with self._lock:
                rows = self._db.execute(
                    f"SELECT run_id, reason FROM cancel_requests WHERE run_id IN ({marks})", run_ids
                ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"the state database {self.path} cannot be read: {exc}") from exc
        return {str(r[0]): str(r[1]) for r in rows}

    # -- artifacts -------------------------------------------------------------------------
    def put_artifact(self, run_id: str, artifact_id: str, name: str, mime_type: str, data: bytes) -> None:
        from ..events import utc_now

        with self._lock, _integrity(f"artifact {artifact_id} of run {run_id}"):
            self._db.execute(
                "INSERT INTO artifacts (run_id, artifact_id, name, mime_type, created_at, data) VALUES (?,?,?,?,?,?)",
                (run_id, artifact_id, name, mime_type, utc_now(), data),
            )

    def get_artifact(self, run_id: str, artifact_id: str) -> tuple[str, str, bytes] | None:
        with self._lock:
            row = self._db.execute(
                "SELECT name, mime_type, data FROM artifacts WHERE run_id = ? AND artifact_id = ?",
                (run_id, artifact_id),
            ).fetchone()
        return (str(row[0]), str(row[1]), bytes(row[2])) if row else None

    def schema(self) -> list[tuple[str, str]]:
        """``[(name, sql)]`` of every table and index, for the exact-schema test."""
        with self._lock:
            rows = self._db.execute(
                "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type, name"
            ).fetchall()
        return [(str(n), str(s)) for n, s in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()


@contextlib.contextmanager
def _integrity(what: str) -> Iterator[None]:
    try:
        yield
    except sqlite3.IntegrityError as exc:
        raise StoreError(f"{what} cannot be stored: {exc}") from exc


def _split_sql(sql: str) -> list[str]:
    lines = [ln for ln in sql.splitlines() if not ln.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
