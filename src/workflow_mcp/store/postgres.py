"""PostgreSQL run store (``psycopg`` 3; ``pip install 'workflow-mcp[postgres]'``): one database that
several workflow-mcp processes, on one host or many, share.

Selected by ``WORKFLOW_MCP_DATABASE_URL=postgresql://…`` or ``--database-url`` (:func:`open_store`).
It keeps the :class:`~workflow_mcp.store.base.RunStore` contract of the SQLite store, row for row:

- every write is one transaction, committed before it returns; a failed one changes nothing;
- schema changes are the numbered files of ``postgres_migrations/`` (the same numbers as SQLite's),
  applied in order under an advisory lock (so servers starting together migrate once) and recorded in
  ``workflow_mcp_schema``; a database from a newer release is refused, never modified;
- **one executor per run**: ``create_run`` claims the run (and the run it resumes) for this store's
  owner in ``run_claims``; its ``owners`` row carries a lease renewed by :meth:`heartbeat`, judged by
  the database's clock. An owner on this host is alive while its process is (pid and start time, as
  for SQLite); an owner on another host while its lease is younger than the lease its row records
  (:data:`~workflow_mcp.store.LEASE_TTL_S`, or its ``$WORKFLOW_MCP_LEASE_S``). Once it is gone, :meth:`recover` (any server) records its
  runs ``interrupted`` and drops its claims, so another server can resume them;
- claims and recovery are decided under one advisory lock, a run's events under a per-run lock, so
  two servers never interleave a run's sequence; idempotency keys are unique per owner across every
  server (a unique index, ``NULLS NOT DISTINCT``).

Errors are translated once, here: an unreachable server, a refused login or a lost connection is a
:class:`~workflow_mcp.errors.StoreError` naming the server (never the password); a read-only server
(a hot standby) is :class:`~workflow_mcp.errors.StoreReadOnlyError`. A lost connection is reopened on
the next call.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
import time
import weakref
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from ..errors import ClaimLostError, RunClaimedError, SequenceConflictError, StoreError, StoreReadOnlyError
from ..events import EVENT_TYPES, Event, utc_now
from ..state import STATUS_OF_EVENT, TERMINAL_EVENTS
from ._process import ProcessIdentity, lease_s, owner_alive, this_process
from .base import (
    JOURNAL_COLUMNS,
    RELEASING_TYPES,
    STATUS_BATCH,
    InterruptedEvent,
    JournalDamage,
    JournalRow,
    RunRecord,
    batch_journal_rows,
    check_batch,
    journal_row_from_cells,
    release_order,
    sound_journal_row,
)
from .sqlite import event_from_cells, record_from_row

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "MIN_SERVER_VERSION",
    "PostgresStore",
    "is_postgres_url",
    "migrations",
    "redact",
    "version_problem",
]

_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(url: str) -> bool:
    """Whether ``url`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return url.startswith(_SCHEMES)


def redact(url: str) -> str:
    """``url`` without its password, for messages."""
    shown = url.split("://", 1)[0] + "://…"
    try:
        from psycopg import Error
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return shown
    try:
        parts = conninfo_to_dict(url)
    except Error:
        return shown
    if "password" in parts:
        parts["password"] = "***"
    host = parts.get("host") or "localhost"
    port = parts.get("port") or "5432"
    user = f"{parts['user']}@" if parts.get("user") else ""
    return f"postgresql://{user}{host}:{port}/{parts.get('dbname') or ''}"


MIN_SERVER_VERSION = 150000
"""PostgreSQL 15 (``server_version_num``): the first with ``NULLS NOT DISTINCT`` unique indexes."""


def version_problem(version_num: int, where: str) -> StoreError | None:
    """The refusal of a server older than :data:`MIN_SERVER_VERSION` (``version_num`` as
    ``server_version_num`` gives it, e.g. ``140011``), else ``None``."""
    if version_num >= MIN_SERVER_VERSION:
        return None
    major = version_num // 10000
    return StoreError(
        f"the PostgreSQL server {where} runs version {major}; workflow-mcp needs PostgreSQL 15 or later"
    )


def migrations() -> list[tuple[int, str]]:
    """``[(number, sql)]`` in order, from ``store/postgres_migrations/NNNN_*.sql``."""
    out = []
    folder = resources.files(__package__).joinpath("postgres_migrations")
    for entry in folder.iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:4].isdigit():
            out.append((int(name[:4]), entry.read_text(encoding="utf-8")))
    return sorted(out)


def _split_sql(sql: str) -> list[str]:
    lines = [ln for ln in sql.splitlines() if not ln.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


# Advisory lock keys (one 64-bit space per database): the migrations, and the claims of every run.
_MIGRATION_LOCK = 0x776D_6370_0001
_CLAIMS_LOCK = 0x776D_6370_0002

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_UPSERT_JOURNAL = (
    "INSERT INTO journal (run_id, agent_id, ordinal, key, content_key, status, label, result_json, "
    "tokens_json, side_effects, source_run) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) "
    "ON CONFLICT (run_id, agent_id) DO UPDATE SET status = excluded.status, "
    "result_json = COALESCE(excluded.result_json, journal.result_json), "
    "tokens_json = excluded.tokens_json, source_run = COALESCE(excluded.source_run, journal.source_run), "
    "key = CASE WHEN excluded.key != '' THEN excluded.key ELSE journal.key END, "
    "content_key = CASE WHEN excluded.content_key != '' THEN excluded.content_key ELSE journal.content_key END, "
    "label = CASE WHEN excluded.label != '' THEN excluded.label ELSE journal.label END, "
    "side_effects = journal.side_effects OR excluded.side_effects"
)
RUN_COLUMNS = (
    "run_id, workflow_name, workflow_path, source_hash, source, args_json, options_json, provider, profile, "
    "cwd, created_at, resumed_from, resume_policy, idempotency_key, owner, owner_pid, owner_host"
)
_R_COLUMNS = ", ".join("r." + c.strip() for c in RUN_COLUMNS.split(","))
_WIDTH = len(RUN_COLUMNS.split(","))


def _sql_list(types: Collection[str]) -> str:
    assert all(t.replace(".", "").replace("_", "").isalpha() for t in types), types
    return "(" + ", ".join(f"'{t}'" for t in sorted(types)) + ")"


_STATUS_EVENTS = _sql_list(STATUS_OF_EVENT)
_LAST_RUN_EVENT = (
    f"SELECT type FROM events WHERE run_id = %s AND type IN {_STATUS_EVENTS} ORDER BY sequence DESC LIMIT 1"
)
_UNFINISHED = (
    f"COALESCE((SELECT e.type FROM events e WHERE e.run_id = r.run_id AND e.type IN {_STATUS_EVENTS} "
    f"ORDER BY e.sequence DESC LIMIT 1), 'run.queued') NOT IN {_sql_list(TERMINAL_EVENTS)}"
)
_NOW = "SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8"
_READ_ONLY_FIX = "Point --database-url (or WORKFLOW_MCP_DATABASE_URL) at the primary server"

# The owners open in this process: an owner row with this process's pid is alive exactly when its
# store is still open here (several stores, e.g. in tests, may share one process).
_OPEN_OWNERS: set[str] = set()


def _cells(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row of plain values as the ``(bytes, storage class)`` cells the SQLite readers take."""
    out: list[Any] = []
    for v in values:
        if v is None:
            out += [None, "null"]
        elif isinstance(v, bool | int):
            out += [str(int(v)).encode(), "integer"]
        else:
            out += [str(v).encode("utf-8", "surrogatepass"), "text"]
    return tuple(out)


def _record(row: tuple[Any, ...]) -> RunRecord:
    return record_from_row(_cells(tuple(row[:_WIDTH])))


@dataclass(frozen=True)
class _Owner:
    owner_id: str
    identity: ProcessIdentity
    heartbeat_at: float
    lease_s: float


@dataclass(frozen=True)
class _Orphan:
    record: RunRecord
    reason: str


class _Closer:
    """Closes the connection once: on :meth:`PostgresStore.close` or at interpreter exit; a clean close
    deletes the owner row."""

    def __init__(self, store: PostgresStore) -> None:
        self.conn: psycopg.Connection[Any] | None = None
        self.owner_id = store._owner_id
        self.lock = store._lock
        self.registered = False
        self.closed = False

    def __call__(self) -> None:
        import psycopg

        with self.lock:
            if self.closed:
                return
            self.closed = True
            _OPEN_OWNERS.discard(self.owner_id)
            conn = self.conn
            if conn is None or conn.closed:
                return
            if self.registered:
                with contextlib.suppress(psycopg.Error):
                    conn.execute("DELETE FROM owners WHERE owner_id = %s", (self.owner_id,))
            with contextlib.suppress(psycopg.Error):
                conn.close()


class PostgresStore:
    """The shared durable store over one PostgreSQL database (see the module docstring). Thread-safe
    for one process (one connection behind a lock).

    ``lease_s`` (seconds; ``$WORKFLOW_MCP_LEASE_S``, default :data:`~workflow_mcp.store.LEASE_TTL_S`)
    is the lease this store's owner row records: how long a server on another host waits, unrenewed,
    before judging it gone (each owner is judged by the lease it recorded, never the judge's).

    Raises:
        StoreError: ``psycopg`` is not installed (the message names the extra), the server cannot be
            reached or refuses the login, the database's schema is newer than this release's, or
            ``$WORKFLOW_MCP_LEASE_S`` is not a lease.
    """

    def __init__(self, url: str) -> None:
        self.lease_s = lease_s()
        try:
            import psycopg  # noqa: F401 - checked here, used by every method
        except ImportError as exc:
            raise StoreError(
                "the PostgreSQL store needs psycopg 3: pip install 'workflow-mcp[postgres]'"
            ) from exc
        self.url = url
        self.where = redact(url)
        self.notices: list[str] = []
        self._lock = threading.RLock()
        self._owner_id = secrets.token_hex(8)
        self._ordinals: dict[str, dict[str, int]] = {}
        self._executing: set[str] = set()  # runs this store claimed to execute, until their end is stored
        self._read_only: str | None = None
        self._closer = _Closer(self)
        self._conn = self._connect()
        _OPEN_OWNERS.add(self._owner_id)
        try:
            self._migrate()
        except BaseException:
            self.close()
            raise
        self._finalizer = weakref.finalize(self, self._closer)

    # -- connection and errors ---------------------------------------------------------------
    def _connect(self) -> psycopg.Connection[Any]:
        import psycopg

        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise StoreError(
                f"the PostgreSQL database {self.where} cannot be reached: {str(exc).strip()}; check "
                "WORKFLOW_MCP_DATABASE_URL (or --database-url) and that the server runs"
            ) from exc
        except ValueError as exc:  # a URL psycopg cannot parse
            raise StoreError(f"the database URL {self.where} is not usable: {exc}") from exc
        self._closer.conn = conn
        read_only = conn.execute(
            "SELECT pg_is_in_recovery(), current_setting('transaction_read_only'), "
            "current_setting('server_version_num')::int"
        ).fetchone()
        if read_only is not None and (problem := version_problem(int(read_only[2]), self.where)) is not None:
            conn.close()
            raise problem
        if read_only is not None and (read_only[0] or read_only[1] == "on"):
            self._read_only = "the server only reads (a standby, or transaction_read_only is on)"
        return conn

    def _db(self) -> psycopg.Connection[Any]:
        """The connection, reopened when it was lost (a server restart, a network cut)."""
        if self._closer.closed:
            raise StoreError(f"the PostgreSQL store {self.where} is closed")
        if self._conn.closed or self._conn.broken:
            self._conn = self._connect()
        return self._conn

    def _error(self, exc: Exception, what: str) -> StoreError:
        import psycopg
        from psycopg import errors as pg

        if isinstance(exc, StoreError):
            return exc
        if isinstance(exc, pg.ReadOnlySqlTransaction):
            return StoreReadOnlyError(
                self.where, f"PostgreSQL refused to write ({str(exc).strip()}) while {what}", _READ_ONLY_FIX
            )
        if isinstance(exc, psycopg.DataError) and "NUL" in str(exc):
            return StoreError(
                f"{what} refused by the store: PostgreSQL text cannot hold the NUL character (U+0000); "
                "remove it from the value"
            )
        if isinstance(exc, psycopg.IntegrityError):
            return StoreError(f"{what} refused by the store: {str(exc).strip()}")
        if isinstance(exc, pg.DiskFull):
            return StoreError(f"the PostgreSQL server {self.where} is out of disk space while {what}: {exc}")
        if isinstance(exc, psycopg.OperationalError):
            return StoreError(
                f"the PostgreSQL database {self.where} went away while {what} ({str(exc).strip()}); "
                "nothing of it was stored, and the next call reconnects"
            )
        return StoreError(f"the PostgreSQL database {self.where} failed while {what}: {str(exc).strip()}")

    @contextlib.contextmanager
    def _guard(self, what: str) -> Iterator[psycopg.Connection[Any]]:
        import psycopg

        with self._lock:
            try:
                yield self._db()
            except (psycopg.Error, UnicodeError) as exc:
                if isinstance(exc, UnicodeError):
                    raise StoreError(f"events refused by the store: {exc}") from exc
                raise self._error(exc, what) from exc

    @contextlib.contextmanager
    def _transaction(self, what: str, *, claims: bool = False) -> Iterator[psycopg.Connection[Any]]:
        """One write transaction; ``claims``: under the advisory lock that orders claim decisions."""
        problem = self.write_problem()
        if problem is not None:
            raise problem
        with self._guard(what) as conn, conn.transaction():
            if claims:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_CLAIMS_LOCK,))
            yield conn

    def _read(self, what: str, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
        if any(_holds_nul(p) for p in params):
            return []  # PostgreSQL text holds no NUL character: no stored row has such a key
        with self._guard(what) as conn:
            return conn.execute(sql, params).fetchall()

    def write_problem(self) -> StoreError | None:
        """Why nothing can be written now (a read-only server), or ``None``."""
        if self._read_only is not None:
            return StoreReadOnlyError(self.where, self._read_only, _READ_ONLY_FIX)
        return None

    # -- schema --------------------------------------------------------------------------------
    def _migrate(self) -> None:
        steps = migrations()
        newest = steps[-1][0] if steps else 0
        with self._guard("applying its migrations") as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            found = conn.execute("SELECT to_regclass('workflow_mcp_schema') IS NOT NULL").fetchone()
            current = 0
            if found is not None and found[0]:
                row = conn.execute("SELECT max(version) FROM workflow_mcp_schema").fetchone()
                current = int(row[0]) if row is not None and row[0] is not None else 0
            if current > newest:
                raise StoreError(
                    f"the PostgreSQL database {self.where} has schema version {current}, newer than this "
                    f"release understands ({newest}); upgrade workflow-mcp"
                )
            if current == newest:
                return
            if self._read_only is not None:
                raise StoreReadOnlyError(
                    self.where, f"{self._read_only}; its schema cannot be upgraded", _READ_ONLY_FIX
                )
            conn.execute("CREATE TABLE IF NOT EXISTS workflow_mcp_schema (version INTEGER NOT NULL)")
            for number, sql in steps:
                if number <= current:
                    continue
                for statement in _split_sql(sql):
                    conn.execute(statement)
            conn.execute("DELETE FROM workflow_mcp_schema")
            conn.execute("INSERT INTO workflow_mcp_schema (version) VALUES (%s)", (newest,))

    def schema_version(self) -> int:
        """The migration the database is at."""
        rows = self._read("reading its schema version", "SELECT max(version) FROM workflow_mcp_schema")
        return int(rows[0][0] or 0)

    def tables(self) -> list[str]:
        """The tables of the store's schema (``search_path``'s first), sorted."""
        rows = self._read(
            "reading its schema",
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
            "ORDER BY table_name",
        )
        return [str(r[0]) for r in rows]

    # -- owners and claims ---------------------------------------------------------------------
    def _now(self, conn: psycopg.Connection[Any]) -> float:
        row = conn.execute(_NOW).fetchone()
        return float(row[0]) if row is not None else time.time()

    def _register(self, conn: psycopg.Connection[Any]) -> None:
        me = this_process()
        conn.execute(
            "INSERT INTO owners (owner_id, pid, host, process, opened_at, heartbeat_at, lease_s) "
            "VALUES (%s,%s,%s,%s,%s, EXTRACT(EPOCH FROM clock_timestamp()), %s) "
            "ON CONFLICT (owner_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
            (self._owner_id, me.pid, me.host, me.process, utc_now(), self.lease_s),
        )
        self._closer.registered = True

    def _owners(self, conn: psycopg.Connection[Any]) -> list[_Owner]:
        rows = conn.execute(
            "SELECT owner_id, pid, host, process, heartbeat_at, lease_s FROM owners"
        ).fetchall()
        return [
            _Owner(str(r[0]), ProcessIdentity(int(r[1]), str(r[2]), str(r[3])), float(r[4]), float(r[5]))
            for r in rows
        ]

    def _alive(self, owner: _Owner, now: float) -> bool:
        if owner.owner_id == self._owner_id:
            return True
        me = this_process()
        if owner.identity.pid == me.pid and owner.identity.host == me.host:
            return owner.owner_id in _OPEN_OWNERS
        return owner_alive(owner.identity, owner.heartbeat_at, now, owner.lease_s)

    def _held(self, conn: psycopg.Connection[Any], run_id: str) -> RunClaimedError | None:
        row = conn.execute(
            "SELECT c.holder_run, c.claimed_at, o.owner_id, o.pid, o.host, o.process, o.heartbeat_at, o.lease_s "
            "FROM run_claims c LEFT JOIN owners o ON o.owner_id = c.owner_id WHERE c.run_id = %s",
            (run_id,),
        ).fetchone()
        if row is None or row[2] is None:
            return None
        owner = _Owner(
            str(row[2]), ProcessIdentity(int(row[3]), str(row[4]), str(row[5])), float(row[6]), float(row[7])
        )
        if not self._alive(owner, self._now(conn)):
            return None
        return RunClaimedError(
            run_id,
            holder_run=str(row[0]),
            pid=owner.identity.pid,
            host=owner.identity.host,
            since=str(row[1]),
        )

    def _claim(self, conn: psycopg.Connection[Any], run_id: str, holder_run: str) -> None:
        refused = self._held(conn, run_id)
        if refused is not None:
            raise refused
        conn.execute(
            "INSERT INTO run_claims (run_id, holder_run, owner_id, claimed_at) VALUES (%s,%s,%s,%s) "
            "ON CONFLICT (run_id) DO UPDATE SET holder_run = excluded.holder_run, "
            "owner_id = excluded.owner_id, claimed_at = excluded.claimed_at",
            (run_id, holder_run, self._owner_id, utc_now()),
        )

    def _origin_held(self, conn: psycopg.Connection[Any], origin: str) -> RunClaimedError | None:
        if conn.execute("SELECT 1 FROM runs WHERE run_id = %s", (origin,)).fetchone():
            return None
        rows = conn.execute(
            "SELECT r.run_id FROM runs r JOIN run_claims c ON c.run_id = r.run_id AND c.holder_run = r.run_id "
            "WHERE r.resumed_from = %s",
            (origin,),
        ).fetchall()
        for (run_id,) in rows:
            held = self._held(conn, str(run_id))
            if held is not None:
                return RunClaimedError(
                    origin, holder_run=held.run_id, pid=held.pid, host=held.host, since=held.since
                )
        return None

    def heartbeat(self) -> None:
        """Renew this store's lease (only once it owns something: a reader never writes)."""
        if not self._closer.registered:
            return
        with self._transaction("renewing its lease") as conn:
            self._register(conn)

    # -- runs ----------------------------------------------------------------------------------
    def create_run(self, record: RunRecord) -> None:
        """Record a new run and claim it (and the run it resumes) for this store (see
        :meth:`~workflow_mcp.store.base.RunStore.create_run`).

        Raises:
            RunClaimedError: a live owner, on any server, holds the claim of ``record.resumed_from``.
            StoreError: the run id, or the owner's idempotency key, is already used (on any server).
        """
        resumed = record.resumed_from
        with self._transaction(f"creating run {record.run_id}", claims=True) as conn:
            self._register(conn)
            if (
                resumed is not None
                and conn.execute("SELECT 1 FROM runs WHERE run_id = %s", (resumed,)).fetchone()
            ):
                self._claim(conn, resumed, record.run_id)
            elif resumed is not None and (refused := self._origin_held(conn, resumed)) is not None:
                raise refused
            _insert_run(conn, record)
            self._claim(conn, record.run_id, record.run_id)
        self._executing.add(record.run_id)

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._read(
            f"reading run {run_id}", f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = %s", (run_id,)
        )
        return _record(rows[0]) if rows else None

    def find_idempotent(self, owner: str | None, key: str) -> RunRecord | None:
        rows = self._read(
            "looking up an idempotency key",
            f"SELECT {RUN_COLUMNS} FROM runs WHERE owner IS NOT DISTINCT FROM %s AND idempotency_key = %s",
            (owner, key),
        )
        return _record(rows[0]) if rows else None

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        rows = self._read(
            "listing runs",
            f"SELECT {RUN_COLUMNS} FROM runs ORDER BY created_at DESC, run_id DESC LIMIT %s",
            (limit,),
        )
        return [_record(r) for r in rows]

    # -- events --------------------------------------------------------------------------------
    def append(self, event: Event) -> None:
        """Commit one event (and the journal row it implies)."""
        self.append_many([event])

    def append_many(self, events: list[Event]) -> None:
        """Commit a batch of events in one transaction: all or none (see
        :meth:`~workflow_mcp.store.base.RunStore.append_many`).

        Raises:
            SequenceConflictError: a sequence is not after the newest stored one of its run (checked under
                the run's lock, so no other server can interleave).
            EventBatchError: within the batch, a run's sequences are not consecutive (:func:`check_batch`).
            StoreError: an event cannot be stored (e.g. a lone surrogate), or the store refuses writes.
        """
        if not events:
            return
        check_batch(events)
        try:
            with self._transaction(f"storing events of run {events[0].run_id}") as conn:
                self._insert_events(conn, events)
        except BaseException:
            self._ordinals.clear()  # the journal ordinals cached for the refused batch are void
            raise
        self._executing.difference_update(e.run_id for e in events if e.type in RELEASING_TYPES)

    def _insert_events(self, conn: psycopg.Connection[Any], events: list[Event]) -> None:
        last: dict[str, int] = {}
        for run_id in sorted({e.run_id for e in events}):  # a fixed order: no two batches deadlock
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (run_id,))
        for e in events:
            before = last.get(e.run_id)
            if before is None:
                before = _max_sequence(conn, e.run_id)
            if e.sequence <= before:
                raise SequenceConflictError(e.run_id, e.sequence, before)
            last[e.run_id] = e.sequence
        for run_id in sorted(last.keys() & self._executing):
            # The fence of a lease: a run this store executes is written only while its claim is still
            # this store's. A server paused past its lease may wake to find another one took the run over
            # (FOR SHARE: a takeover waits for this batch to commit, or this batch sees it).
            row = conn.execute(
                "SELECT owner_id, holder_run FROM run_claims WHERE run_id = %s FOR SHARE", (run_id,)
            ).fetchone()
            if row is None or row[0] != self._owner_id or row[1] != run_id:
                raise ClaimLostError(run_id, None if row is None else str(row[1]))
        rows = [(e.run_id, e.sequence, e.type, e.timestamp, e.agent_id, _encode(e.to_json())) for e in events]
        # One upsert per call, not per event: a replayed call's queued and cached events share a batch.
        journal_rows = [
            jr.upsert_values() for jr in batch_journal_rows(events, lambda e: self._ordinal(conn, e))
        ]
        # One round trip for the writes (libpq pipeline mode): the checks above already passed.
        with conn.pipeline(), conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO events (run_id, sequence, type, timestamp, agent_id, body) VALUES (%s,%s,%s,%s,%s,%s)",
                rows,
            )
            if journal_rows:
                cur.executemany(_UPSERT_JOURNAL, journal_rows)
            ended = [(e.run_id,) for e in events if e.type in RELEASING_TYPES]
            if ended:
                cur.executemany("DELETE FROM run_claims WHERE holder_run = %s", ended)

    def _ordinal(self, conn: psycopg.Connection[Any], event: Event) -> int:
        per_run = self._ordinals.setdefault(event.run_id, {})
        agent_id = event.agent_id or ""
        if agent_id in per_run:
            return per_run[agent_id]
        if not per_run:
            for aid, ordinal in conn.execute(
                "SELECT agent_id, ordinal FROM journal WHERE run_id = %s", (event.run_id,)
            ).fetchall():
                per_run[str(aid)] = int(ordinal)
            if agent_id in per_run:
                return per_run[agent_id]
        n = len(per_run)
        per_run[agent_id] = n
        return n

    def flush(self) -> None:
        """Every append is already committed; nothing is pending."""

    def events(self, run_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        """The events of ``run_id`` with ``sequence > after``, in order (at most ``limit``). A body
        that is not this run's event (written by another program) reads as the stand-in the SQLite
        store gives (``payload["damaged"]``), in its place."""
        return [e for e, _ in self._event_rows(run_id, after, limit)]

    def _event_rows(self, run_id: str, after: int, limit: int | None) -> list[tuple[Event, tuple[str, ...]]]:
        sql = "SELECT sequence, type, timestamp, agent_id, body FROM events WHERE run_id = %s AND sequence > %s ORDER BY sequence"
        params: tuple[Any, ...] = (run_id, after)
        if limit is not None:
            sql += " LIMIT %s"
            params = (run_id, after, limit)
        rows = self._read(f"reading the events of run {run_id}", sql, params)
        out: list[tuple[Event, tuple[str, ...]]] = []
        for sequence, type_, timestamp, agent_id, body in rows:
            try:
                event = Event.from_json(json.loads(body))
                if event.run_id == run_id and event.sequence == sequence:
                    out.append((event, ()))
                    continue
            except (ValueError, KeyError, TypeError):
                pass
            out.append(event_from_cells(run_id, (sequence, *_cells((type_, timestamp, agent_id, body)))))
        return out

    def damaged_events(self, run_id: str) -> list[Event]:
        """The events of ``run_id`` whose stored body is not this run's event at its sequence, as
        :meth:`events` reads them; ``[]``: none."""
        return [e for e, columns in self._event_rows(run_id, 0, None) if "body" in columns]

    def events_of_types(self, run_id: str, types: Collection[str]) -> list[Event]:
        """The events of ``run_id`` whose type is one of ``types``, in order, read through the
        ``events_type`` index (see :meth:`SqliteStore.events_of_types
        <workflow_mcp.store.sqlite.SqliteStore.events_of_types>`: a row whose type cell is not a known
        type is read too and kept when its event is of ``types``)."""
        wanted = sorted(set(types))
        if not wanted:
            return []
        rows = self._read(
            f"reading the events of run {run_id}",
            "SELECT sequence, type, timestamp, agent_id, body FROM events WHERE run_id = %s "
            "AND (type = ANY(%s) OR NOT type = ANY(%s)) ORDER BY sequence",
            (run_id, wanted, sorted(EVENT_TYPES)),
        )
        out: list[Event] = []
        for sequence, type_, timestamp, agent_id, body in rows:
            try:
                event = Event.from_json(json.loads(body))
                if event.run_id != run_id or event.sequence != sequence:
                    raise ValueError("not this run's event at this sequence")
            except (ValueError, KeyError, TypeError):
                event = event_from_cells(run_id, (sequence, *_cells((type_, timestamp, agent_id, body))))[0]
            if event.type in wanted:
                out.append(event)
        return out

    def last_sequence(self, run_id: str) -> int:
        if _holds_nul(run_id):
            return 0
        with self._guard(f"reading run {run_id}") as conn:
            return _max_sequence(conn, run_id)

    def last_run_event(self, run_id: str) -> str | None:
        rows = self._read(f"reading run {run_id}", _LAST_RUN_EVENT, (run_id,))
        return str(rows[0][0]) if rows else None

    def last_run_events(self, run_ids: Collection[str]) -> dict[str, str | None]:
        """:meth:`last_run_event` of each of ``run_ids`` (``None`` for an unknown run): one query per
        :data:`~workflow_mcp.store.base.STATUS_BATCH` runs, each run's newest status event found as
        :meth:`last_run_event` finds it (a lateral lookup per run)."""
        ids = list(dict.fromkeys(run_ids))
        out: dict[str, str | None] = {}
        for start in range(0, len(ids), STATUS_BATCH):
            chunk = ids[start : start + STATUS_BATCH]
            rows = self._read(
                "reading the status of runs",
                "SELECT ids.run_id, e.type FROM unnest(%s::text[]) AS ids(run_id) LEFT JOIN LATERAL "
                f"(SELECT type FROM events WHERE run_id = ids.run_id AND type IN {_STATUS_EVENTS} "
                "ORDER BY sequence DESC LIMIT 1) e ON true",
                (chunk,),
            )
            out.update({str(r[0]): None if r[1] is None else str(r[1]) for r in rows})
        return out

    def unfinished_runs(self) -> list[RunRecord]:
        rows = self._read("listing unfinished runs", f"SELECT {_R_COLUMNS} FROM runs r WHERE {_UNFINISHED}")
        return [_record(r) for r in rows]

    # -- recovery ------------------------------------------------------------------------------
    def _orphans(
        self, conn: psycopg.Connection[Any], active: Collection[str]
    ) -> tuple[list[_Orphan], list[str]]:
        now = self._now(conn)
        owners = {o.owner_id: o for o in self._owners(conn)}
        gone = {oid for oid, o in owners.items() if not self._alive(o, now)}
        me = this_process()
        orphans = []
        # Only claimed runs can be orphans: every run here was created with its claim (migration 3 came
        # with the first release of this store), and a claim goes only with its run's end or with its
        # recovery. So a pass reads the claims (the runs in flight), never every run ever stored.
        rows = conn.execute(
            f"SELECT {_R_COLUMNS}, c.owner_id, c.holder_run FROM run_claims c JOIN runs r "
            f"ON r.run_id = c.run_id WHERE {_UNFINISHED}"
        ).fetchall()
        for row in rows:
            record, owner_id, holder = _record(row), row[_WIDTH], row[_WIDTH + 1]
            if record.run_id in active:
                continue
            if owner_id == self._owner_id and holder != record.run_id:
                reason = f"the process that owned the run (pid {record.owner_pid}) is gone"
            elif owner_id == self._owner_id:
                reason = "the run stopped in this process without recording its end (its last events were not stored)"
            elif owner_id in gone:
                o = owners[owner_id]
                reason = f"the process that owned the run (pid {o.identity.pid} on {o.identity.host}) is gone"
                if o.identity.host != me.host:
                    reason += (
                        f": its lease was last renewed {now - o.heartbeat_at:.1f} s ago "
                        f"(lease {o.lease_s:g} s)"
                    )
            elif owner_id not in owners:
                reason = (
                    f"the process that owned the run (pid {record.owner_pid}) ended without recording its end"
                )
            else:
                continue
            orphans.append(_Orphan(record, reason))
        return orphans, sorted(gone)

    def recover(self, active: Collection[str], interrupted: InterruptedEvent) -> list[str]:
        """Store ``interrupted(record, sequence, reason)`` for each unfinished run whose owner is gone
        (its process on this host, or its lease from another host); drop gone owners and their claims;
        return the recovered run ids. A first read decides whether anything needs writing; the write
        transaction reads everything again under the claims lock, so concurrent recoveries on several
        servers record each run once.

        Raises:
            StoreError: there is something to recover but it cannot be written.
        """
        with self._guard("looking for interrupted runs") as conn:
            orphans, gone = self._orphans(conn, active)
        if not orphans and not gone:
            return []
        with self._transaction("recording interrupted runs", claims=True) as conn:
            orphans, gone = self._orphans(conn, active)
            events = [
                interrupted(o.record, _max_sequence(conn, o.record.run_id) + 1, o.reason) for o in orphans
            ]
            if events:
                self._insert_events(conn, events)
            if gone:
                conn.execute("DELETE FROM run_claims WHERE owner_id = ANY(%s)", (gone,))
                conn.execute("DELETE FROM owners WHERE owner_id = ANY(%s)", (gone,))
        self._executing.difference_update(e.run_id for e in events)
        return [o.record.run_id for o in orphans]

    def completion_order(self, run_id: str) -> list[str]:
        rows = self._read(
            f"reading the completion order of run {run_id}",
            "SELECT sequence, agent_id FROM events WHERE run_id = %s AND type IN ('agent.completed', 'agent.cached') "
            "AND agent_id IS NOT NULL ORDER BY sequence",
            (run_id,),
        )
        delivered = self._read(
            f"reading the completion order of run {run_id}",
            "SELECT sequence, body FROM events WHERE run_id = %s AND type = 'agent.delivered' ORDER BY sequence",
            (run_id,),
        )
        return release_order([(int(r[0]), str(r[1])) for r in rows], [(int(r[0]), r[1]) for r in delivered])

    def journal(self, run_id: str) -> list[JournalRow]:
        """The readable journal entries of ``run_id`` by ordinal; one another program wrote damaged (a
        ``result_json`` or ``tokens_json`` that is not JSON, an empty agent id…) is left out
        (:meth:`journal_damage` names it), so it is not replayed and the others still are."""
        return [r for r in self.journal_entries(run_id) if isinstance(r, JournalRow)]

    def journal_damage(self, run_id: str) -> list[JournalDamage]:
        """The journal entries of ``run_id`` that :meth:`journal` leaves out, by ordinal."""
        return [r for r in self.journal_entries(run_id) if isinstance(r, JournalDamage)]

    def journal_entries(self, run_id: str) -> list[JournalRow | JournalDamage]:
        """Every journal entry of ``run_id`` by ordinal, a :class:`JournalRow` or (a value another
        program wrote damaged) a :class:`JournalDamage`: :meth:`journal` and :meth:`journal_damage` in
        one read."""
        rows = self._read(
            f"reading the journal of run {run_id}",
            f"SELECT {', '.join(JOURNAL_COLUMNS)} FROM journal WHERE run_id = %s ORDER BY ordinal",
            (run_id,),
        )
        # PostgreSQL keeps each column's type and encoding, so only the values can be damaged.
        seen: dict[str, dict[str, int]] = {}
        return [
            sound_journal_row(run_id, r, seen) or journal_row_from_cells(run_id, tuple(r), []) for r in rows
        ]

    # -- cross-server cancellation -------------------------------------------------------------
    def request_cancel(self, run_id: str, reason: str) -> None:
        with self._transaction(f"asking to cancel run {run_id}") as conn:
            conn.execute(
                "INSERT INTO cancel_requests (run_id, reason, requested_at) VALUES (%s,%s,%s) "
                "ON CONFLICT (run_id) DO NOTHING",
                (run_id, reason, utc_now()),
            )

    def cancel_requests(self, run_ids: list[str]) -> dict[str, str]:
        """``{run_id: reason}`` for those of ``run_ids`` someone asked to cancel (on any server)."""
        if not run_ids:
            return {}
        rows = self._read(
            "reading cancellation requests",
            "SELECT run_id, reason FROM cancel_requests WHERE run_id = ANY(%s)",
            (list(run_ids),),
        )
        return {str(r[0]): str(r[1]) for r in rows}

    # -- artifacts -----------------------------------------------------------------------------
    def put_artifact(self, run_id: str, artifact_id: str, name: str, mime_type: str, data: bytes) -> None:
        with self._transaction(f"storing artifact {artifact_id} of run {run_id}") as conn:
            conn.execute(
                "INSERT INTO artifacts (run_id, artifact_id, name, mime_type, created_at, data) "
                "VALUES (%s,%s,%s,%s,%s,%s)",
                (run_id, artifact_id, name, mime_type, utc_now(), data),
            )

    def get_artifact(self, run_id: str, artifact_id: str) -> tuple[str, str, bytes] | None:
        rows = self._read(
            f"reading artifact {artifact_id} of run {run_id}",
            "SELECT name, mime_type, data FROM artifacts WHERE run_id = %s AND artifact_id = %s",
            (run_id, artifact_id),
        )
        return (str(rows[0][0]), str(rows[0][1]), bytes(rows[0][2])) if rows else None

    def close(self) -> None:
        """Close the connection; a clean close also deletes this store's owner row."""
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()
        else:
            self._closer()


def _holds_nul(value: Any) -> bool:
    """Whether ``value`` (a query parameter, or a list of them) is text holding U+0000."""
    if isinstance(value, str):
        return "\x00" in value
    return isinstance(value, list | tuple) and any(isinstance(v, str) and "\x00" in v for v in value)


def _max_sequence(conn: psycopg.Connection[Any], run_id: str) -> int:
    row = conn.execute("SELECT MAX(sequence) FROM events WHERE run_id = %s", (run_id,)).fetchone()
    return int(row[0] or 0) if row is not None else 0


def _insert_run(conn: psycopg.Connection[Any], record: RunRecord) -> None:
    conn.execute(
        f"INSERT INTO runs ({RUN_COLUMNS}) VALUES ({', '.join(['%s'] * _WIDTH)})",
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
