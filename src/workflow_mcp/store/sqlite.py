"""SQLite run store: ``$WORKFLOW_MCP_HOME/state.db`` (default ``~/.workflow-mcp/state.db``).

WAL mode with ``synchronous=NORMAL``: a committed event survives a killed process. Each
:meth:`SqliteStore.append` commits before it returns, so an event is durable before anyone sees it.
Schema changes are numbered SQL files in ``migrations/``, applied in order and recorded in
``PRAGMA user_version``; a database from a newer release is refused, never modified.

Failure modes, each translated once here (``_faults.translate``):

- **Read-only** (an immutable file, a read-only mount): the store opens for reading (``mode=ro``, or
  ``immutable=1`` when SQLite cannot even create its ``-shm`` file, which hides a ``-wal``: then
  ``notices`` says so); queries work, every write raises :class:`StoreReadOnlyError` naming the path.
- **Disk full / file-size limit**: the failed transaction is rolled back (never "cannot rollback"),
  :class:`StoreFullError` says how much space is left, and every stored run stays readable.
- **Damage**: ``SQLITE_CORRUPT``/``SQLITE_NOTADB`` become :class:`StoreCorruptError`, the file is marked
  damaged (``state.db.damaged``) and nothing more is written to it by any process. When the file was
  not closed cleanly (an owner row whose process is gone), opening it runs ``PRAGMA quick_check``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import secrets
import sqlite3
import threading
import time
import weakref
from collections.abc import Collection, Iterator
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..errors import (
    ClaimLostError,
    RunClaimedError,
    SequenceConflictError,
    StoreCorruptError,
    StoreError,
    StoreReadOnlyError,
)
from ..events import EVENT_TYPES, Event, utc_now
from ..state import STATUS_OF_EVENT, TERMINAL_EVENTS
from . import _files
from ._faults import is_corruption, translate
from ._process import ProcessIdentity, lease_s, owner_alive, this_process
from .base import (
    JOURNAL_COLUMNS,
    JOURNALED_TYPES,
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

__all__ = [
    "EVENT_READ",
    "JOURNALED_TYPES",
    "RUN_READ",
    "UPSERT_JOURNAL",
    "SqliteStore",
    "default_home",
    "event_from_cells",
    "journal_entries",
    "migrations",
    "record_from_row",
]


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


RUN_COLUMNS = (
    "run_id, workflow_name, workflow_path, source_hash, source, args_json, options_json, provider, profile, "
    "cwd, created_at, resumed_from, resume_policy, idempotency_key, owner, owner_pid, owner_host"
)

_NAMES = [c.strip() for c in RUN_COLUMNS.split(",")]
_NOT_NULL = frozenset(
    {"run_id", "workflow_name", "source_hash", "source", "options_json", "provider", "profile", "created_at"}
)


def _reading(prefix: str = "") -> str:
    # Each cell as its bytes and its storage class: a cell that is not valid UTF-8 text (bytes written
    # by another program, a BLOB or a number in a TEXT column) would make sqlite3 raise for the whole
    # row (and so for every listing of runs); read this way it is only that cell that is damaged.
    return ", ".join(f"CAST({prefix}{c} AS BLOB), typeof({prefix}{c})" for c in _NAMES)


RUN_READ = _reading()
"""The columns of ``runs`` for :func:`record_from_row` (``SELECT {RUN_READ} FROM runs``)."""
_R_READ = _reading("r.")
RUN_READ_WIDTH = 2 * len(_NAMES)
"""How many values of a row :data:`RUN_READ` takes (columns after it follow at this index)."""


def _cell(column: str, raw: Any, kind: str, damaged: list[str]) -> Any:
    """The value of one ``runs`` cell, or a stand-in (``damaged`` names the column)."""
    if kind == "null":
        return _damaged(column, damaged, "") if column in _NOT_NULL else None
    if column == "owner_pid":
        try:
            return int(bytes(raw).decode("ascii")) if kind == "integer" else _damaged(column, damaged, None)
        except ValueError:
            return _damaged(column, damaged, None)
    data = bytes(raw)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _damaged(column, damaged, data.decode("utf-8", "replace"))
    return text if kind == "text" else _damaged(column, damaged, text)


def _damaged(column: str, damaged: list[str], stand_in: Any) -> Any:
    damaged.append(column)
    return stand_in


def record_from_row(row: tuple[Any, ...] | sqlite3.Row) -> RunRecord:
    """The :class:`RunRecord` of one ``SELECT {RUN_READ} FROM runs`` row. A cell that is not what its
    column holds (not valid UTF-8, not text, null where a value is required, options that are not a
    JSON object) is named in ``damaged`` and read as a stand-in (invalid bytes as U+FFFD), so one
    damaged cell never hides the rest of the run, or the other runs."""
    damaged: list[str] = []
    v = [_cell(c, row[2 * i], row[2 * i + 1], damaged) for i, c in enumerate(_NAMES)]
    try:
        options = json.loads(v[6] or "{}")
    except ValueError:
        options = None
    if not isinstance(options, dict):
        options = _damaged("options_json", damaged, {}) if "options_json" not in damaged else {}
    return RunRecord(
        run_id=v[0],
        workflow_name=v[1],
        workflow_path=v[2],
        source_hash=v[3],
        source=v[4],
        args_json=v[5],
        options=options,
        provider=v[7],
        profile=v[8],
        cwd=v[9],
        created_at=v[10],
        resumed_from=v[11],
        resume_policy=v[12],
        idempotency_key=v[13],
        owner=v[14],
        owner_pid=v[15],
        owner_host=v[16],
        damaged=tuple(damaged),
    )


EVENT_COLUMNS = ("type", "timestamp", "agent_id", "body")
EVENT_READ = "sequence, " + ", ".join(f"CAST({c} AS BLOB), typeof({c})" for c in EVENT_COLUMNS)
"""The columns of ``events`` for :func:`event_from_cells` (``SELECT {EVENT_READ} FROM events``): the
sequence, then each cell as its bytes and its storage class. Read this way only when the plain read of
a page fails: a damaged cell then stands for one event, not for the whole log."""


def _event_cell(column: str, raw: Any, kind: str, damaged: list[str]) -> str | None:
    """The text of one ``events`` cell (invalid bytes as U+FFFD), or ``None`` for a null ``agent_id``;
    ``damaged`` names the column when the cell is not what it holds."""
    if kind == "null":
        if column != "agent_id":
            damaged.append(column)
        return None
    data = bytes(raw)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        damaged.append(column)
        return data.decode("utf-8", "replace")
    if kind != "text":
        damaged.append(column)
    return text


def event_from_cells(run_id: str, row: tuple[Any, ...] | sqlite3.Row) -> tuple[Event, tuple[str, ...]]:
    """The event of one ``SELECT {EVENT_READ} FROM events`` row of ``run_id``, and the columns of that
    row that are damaged (``()``: none; the event is then exactly the stored one).

    A sound body is the event whatever its row's other cells hold (they are indexed copies of its
    fields, reported here and rewritten from it by repair). A damaged body is never dropped: its event
    keeps its run and sequence, and ``payload["damaged"]`` records ``{"sequence", "columns", "note"}``.
    When the body, read with invalid bytes as U+FFFD, is
    still this run's event at this sequence, that is the event (its other fields as stored); otherwise
    it is a stand-in of the type stored beside it (``warning`` when that is unreadable too) whose payload
    holds only the record of the damage and the stored text (``original``, at most 2,000 characters).
    ``store repair`` writes exactly this event back, so a read before and after repair agree.
    """
    sequence = int(row[0])
    damaged: list[str] = []
    type_, timestamp, agent_id, body = (
        _event_cell(c, row[1 + 2 * i], row[2 + 2 * i], damaged) for i, c in enumerate(EVENT_COLUMNS)
    )
    event: Event | None = None
    try:
        data = json.loads(body or "")
        event = Event.from_json(data) if isinstance(data, dict) else None
    except (ValueError, KeyError, TypeError):
        event = None
    if event is not None and (event.run_id != run_id or event.sequence != sequence):
        event = None
    if event is None and "body" not in damaged:
        damaged.append("body")
    columns = [c for c in EVENT_COLUMNS if c in damaged]
    if event is not None and "body" not in damaged:
        # A sound body is the whole envelope, and it is what every read shows: a damaged type, timestamp
        # or agent id beside it (the indexed copies) changes no event; repair rewrites them from it.
        return event, tuple(columns)
    note = {
        "sequence": sequence,
        "columns": columns,
        "note": f"event {sequence} of run {run_id} was stored damaged ({', '.join(columns)}: not valid UTF-8 "
        "text, not text, missing or not an event); invalid bytes read as U+FFFD",
    }
    if event is not None:
        return replace(event, payload={**event.payload, "damaged": note}), tuple(columns)
    payload: dict[str, Any] = {"damaged": note}
    if body:
        payload["original"] = body[:2000]
    stand_in = Event(
        run_id=run_id,
        sequence=sequence,
        type=type_ if type_ in EVENT_TYPES and "type" not in damaged else "warning",
        payload=payload,
        timestamp=timestamp if timestamp is not None and "timestamp" not in damaged else "",
        agent_id=agent_id if "agent_id" not in damaged else None,
    )
    return stand_in, tuple(columns)


_JOURNAL_INTEGERS = frozenset({"ordinal", "side_effects"})
_JOURNAL_READ = ", ".join(f"CAST({c} AS BLOB), typeof({c})" for c in JOURNAL_COLUMNS)
# The cells as sqlite3 reads them, and whether result_json is strict JSON (1; 0 or null: Python decides).
_JOURNAL_FAST_READ = (
    f"SELECT {', '.join(JOURNAL_COLUMNS)}, "
    "CASE WHEN typeof(result_json) = 'text' THEN json_valid(result_json) END "
    "FROM journal WHERE run_id = ? ORDER BY ordinal"
)


def _journal_cell(column: str, raw: Any, kind: str, damaged: list[str]) -> Any:
    """The value of one ``journal`` cell (``str``, ``int`` or ``None``); ``damaged`` names the column
    when it is not of its column's type (:func:`~workflow_mcp.store.base.journal_row_from_cells` checks
    the values)."""
    if kind == "null":
        return None
    wanted = "integer" if column in _JOURNAL_INTEGERS else "text"
    try:
        text = bytes(raw).decode("utf-8")
        if kind == wanted:
            return int(text) if wanted == "integer" else text
    except (UnicodeDecodeError, ValueError):
        pass
    damaged.append(column)
    return None


def journal_entries(
    db: sqlite3.Connection, run_id: str
) -> list[tuple[JournalRow | JournalDamage, tuple[bytes, str]]]:
    """Each stored journal entry of ``run_id`` by ordinal, read cell by cell (as bytes and storage class:
    a cell that is not UTF-8 text would otherwise make sqlite3 raise for the whole journal), with the
    raw ``agent_id`` cell that names its row (its bytes and storage class, for a statement that must
    reach a damaged row). Raises what ``db`` raises for damaged pages."""
    rows = db.execute(
        f"SELECT {_JOURNAL_READ} FROM journal WHERE run_id = ? ORDER BY ordinal", (run_id,)
    ).fetchall()
    out: list[tuple[JournalRow | JournalDamage, tuple[bytes, str]]] = []
    for row in rows:
        damaged: list[str] = []
        values = tuple(
            _journal_cell(c, row[2 * i], row[2 * i + 1], damaged) for i, c in enumerate(JOURNAL_COLUMNS)
        )
        out.append((journal_row_from_cells(run_id, values, damaged), (bytes(row[0] or b""), str(row[1]))))
    return out


def _is_decoding(exc: sqlite3.Error) -> bool:
    # How sqlite3 reports a TEXT cell that is not UTF-8 (CPython's "Could not decode to UTF-8 column").
    return isinstance(exc, sqlite3.OperationalError) and "decode" in str(exc)


# json.dumps() with keyword arguments builds a new encoder on every call; one encoder serves all.
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
UPSERT_JOURNAL = (
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
"""Writes one journal entry from the values :func:`~workflow_mcp.store.base.journal_row_for` gives, merging
it into the call's entry as each later event of the call does."""


def _sql_list(types: Collection[str]) -> str:
    """``('a', 'b')``: a SQL list of event type names (our constants, checked to be plain names)."""
    assert all(t.replace(".", "").replace("_", "").isalpha() for t in types), types
    return "(" + ", ".join(f"'{t}'" for t in sorted(types)) + ")"


# A run's status is its newest event of STATUS_OF_EVENT (state.py). Found through the events_type index
# (run_id, type): a run has a handful of those events however many others it has, while walking its
# log backwards from the newest event reads every agent and log event since (~0.2 s at a million
# events). INDEXED BY keeps SQLite from choosing that walk for the ORDER BY … LIMIT 1.
_STATUS_EVENTS = _sql_list(STATUS_OF_EVENT)
_LAST_RUN_EVENT = (
    f"SELECT sequence, type FROM events INDEXED BY events_type WHERE run_id = ? AND type IN {_STATUS_EVENTS} "
    "ORDER BY sequence DESC LIMIT 1"
)
_NEWEST_RUN_EVENT = (
    f"(SELECT type FROM events e INDEXED BY events_type WHERE e.run_id = r.run_id AND e.type IN {_STATUS_EVENTS} "
    "ORDER BY e.sequence DESC LIMIT 1)"
)


def _newest_status_of(run: str, column: str) -> str:
    """A scalar subquery: ``column`` of the newest status event of the run ``run`` (a SQL expression),
    found through the ``events_type`` index as :data:`_LAST_RUN_EVENT` finds it."""
    return (
        f"(SELECT e.{column} FROM events e INDEXED BY events_type WHERE e.run_id = {run} "
        f"AND e.type IN {_STATUS_EVENTS} ORDER BY e.sequence DESC LIMIT 1)"
    )


def _odd_type(run: str) -> str:
    """Rows of the run ``run`` (a SQL expression) whose ``type`` cell is no event type: a damaged cell
    (bytes that are not UTF-8, a BLOB, a number). The body beside it may still be a status event, which
    the status lookup above cannot see. One index range per gap between the known type names (a number
    sorts before every text, a BLOB after), so a sound log costs one seek per gap, not a scan."""
    known = sorted(EVENT_TYPES)
    assert _sql_list(known)  # plain names, safe to inline
    ranges = [f"type < '{known[0]}'"]
    ranges += [f"type > '{a}' AND type < '{b}'" for a, b in itertools.pairwise(known)]
    ranges.append(f"type > '{known[-1]}'")
    return "(" + " OR ".join(f"({run} AND {r})" for r in ranges) + ")"


_ODD_ROWS = f"SELECT {EVENT_READ} FROM events WHERE {_odd_type('run_id = ?1')} ORDER BY sequence DESC"
# Unfinished by the status lookup; each such run is then checked in Python against what every read of
# its log shows (_newest_status), so a finished run whose terminal event has a damaged type cell is not
# taken for a running one. The other way round needs no check: no status event ever follows a terminal
# one in a run's log (a resume is a new run), so a terminal event the index finds is the run's last.
_UNFINISHED = f"COALESCE({_NEWEST_RUN_EVENT}, 'run.queued') NOT IN {_sql_list(TERMINAL_EVENTS)}"


def _newest_status(db: sqlite3.Connection, run_id: str) -> str | None:
    """The type of ``run_id``'s newest :data:`~workflow_mcp.state.STATUS_OF_EVENT` event as every read
    of its log shows it (:func:`event_from_cells`): the indexed lookup, unless a row after it has a
    damaged ``type`` cell beside a body that is a newer status event."""
    row = db.execute(_LAST_RUN_EVENT, (run_id,)).fetchone()
    found, newest = (int(row[0]), str(row[1])) if row else (0, None)
    for cells in db.execute(_ODD_ROWS, (run_id,)):
        if int(cells[0]) <= found:
            break
        event, _ = event_from_cells(run_id, cells)
        if event.type in STATUS_OF_EVENT:
            return event.type
    return newest


# The owners open in this process, by owner id: an owner row with this process's pid is alive exactly
# when its store is still open here (several stores, e.g. in tests, may share one process).
_OPEN_OWNERS: set[str] = set()


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
    """Closes the connection once: on :meth:`SqliteStore.close` or at interpreter exit. A clean
    close deletes the owner row (the clean-shutdown mark)."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock, owner_id: str) -> None:
        self.db = db
        self.lock = lock
        self.owner_id = owner_id
        self.registered = False
        self.closed = False

    def __call__(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            _OPEN_OWNERS.discard(self.owner_id)
            if self.registered:
                # Best effort: a full disk or a damaged file keeps the row, and the next open checks.
                with contextlib.suppress(sqlite3.Error):
                    self.db.execute("DELETE FROM owners WHERE owner_id = ?", (self.owner_id,))
            with contextlib.suppress(sqlite3.Error):
                self.db.close()


class SqliteStore:
    """The durable store. Thread-safe for one process (one connection behind a lock).

    ``notices`` lists what the open could not make right but did not refuse (e.g. a state directory
    other users can read). Raises :class:`StoreError` (or a subclass) when the file cannot be opened.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        #: The lease this store's owner row records (seconds): how long others that cannot check its
        #: process identity wait, unrenewed, before judging it gone.
        self.lease_s = lease_s()
        self.path = Path(path) if path is not None else default_home() / "state.db"
        self._lock = threading.RLock()
        self._owner_id = secrets.token_hex(8)
        self._ordinals: dict[str, dict[str, int]] = {}
        # The runs whose every stored event this connection wrote (run id -> its newest sequence), and
        # the PRAGMA data_version they were written under: see damaged_events.
        self._written: dict[str, int] = {}
        self._data_version: int | None = None
        self._executing: set[str] = set()  # runs this store claimed to execute, until their end is stored
        # The executing runs whose claim a batch found still this store's under the current data_version:
        # only another connection's commit (or this store's own next claim) can take a claim away.
        self._fenced: set[str] = set()
        self._read_only: str | None = None
        self._damaged: str | None = _files.read_damage(self.path)
        self._unread_wal: str | None = None  # read as an immutable file, blind to a non-empty -wal
        self.notices: list[str] = []
        home = self.path.parent
        try:
            self.notices += _files.prepare_home(home)
        except OSError as exc:
            raise StoreError(
                f"the state directory {home} cannot be created ({exc.strerror or exc}); "
                "point WORKFLOW_MCP_HOME at a writable directory"
            ) from exc
        exists = self.path.exists()
        if exists and not os.access(self.path, os.W_OK):
            self._read_only = "the file cannot be written: an immutable attribute or a read-only mount"
        elif not os.access(home, os.W_OK):
            if not exists:
                raise StoreError(
                    f"the state directory {home} is not writable; SQLite needs to write its journal there. "
                    "Point WORKFLOW_MCP_HOME at a writable directory"
                )
            self._read_only = f"its directory {home} cannot be written"
        try:
            if self._read_only is None:
                _files.create_private_file(self.path)
                _files.tighten_files(self.path)
        except OSError as exc:
            raise StoreError(
                f"the state database {self.path} cannot be created ({exc.strerror or exc})"
            ) from exc
        self._closer: _Closer | None = None
        try:
            self._db = self._connect()
            self._closer = _Closer(self._db, self._lock, self._owner_id)
            _OPEN_OWNERS.add(self._owner_id)
            self._check_version()  # before anything that could write: a refused database stays as it is
            if self.write_problem() is None:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute("PRAGMA foreign_keys=ON")
                self._migrate()
            elif int(self._db.execute("PRAGMA user_version").fetchone()[0]) < self._newest():
                if self._unread_wal is not None:  # the schema itself is among the unreadable changes
                    raise StoreReadOnlyError(str(self.path), f"{self._read_only}; {self._unread_wal}")
                raise StoreReadOnlyError(
                    str(self.path),
                    f"{self._read_only or 'it is marked damaged'}; it predates this release's schema and "
                    "cannot be upgraded",
                )
            self._check_if_unclean()
        except sqlite3.Error as exc:
            self.close()
            if is_corruption(exc):
                raise StoreCorruptError(str(self.path), str(exc), opened=False) from exc
            error = translate(exc, self.path, "opening it")
            if type(error) is not StoreError:
                raise error from exc
            raise StoreError(
                f"the state database {self.path} cannot be opened ({exc}); it is left untouched. "
                "Move it aside or point WORKFLOW_MCP_HOME elsewhere."
            ) from exc
        except BaseException:
            self.close()
            raise
        closer = self._closer
        self._finalizer = weakref.finalize(self, closer)

    # -- opening ---------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._read_only is None:
            return sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=10)
        uri = f"file:{quote(str(self.path.resolve()))}"
        db = sqlite3.connect(
            f"{uri}?mode=ro", uri=True, isolation_level=None, check_same_thread=False, timeout=10
        )
        try:
            db.execute("SELECT count(*) FROM sqlite_schema").fetchone()
            return db
        except sqlite3.OperationalError:
            # A WAL database whose -shm cannot be created (a read-only directory): nobody can be
            # writing it, so reading it as an immutable file is safe, but blind to its -wal.
            db.close()
            self._unread_wal = _files.unread_wal(self.path)
            if self._unread_wal is not None:
                self.notices.append(f"the state database {self.path} is read in part: {self._unread_wal}")
            return sqlite3.connect(
                f"{uri}?immutable=1", uri=True, isolation_level=None, check_same_thread=False
            )

    @staticmethod
    def _newest() -> int:
        steps = migrations()
        return steps[-1][0] if steps else 0

    def _check_version(self) -> None:
        current = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        newest = self._newest()
        if current > newest:
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
            if self._db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
            raise

    def _check_if_unclean(self) -> None:
        """An owner row whose process is gone means the file was not closed cleanly: check its pages."""
        if self._damaged is not None:
            return
        try:
            with self._lock, self._guard("checking how it was last closed"):
                gone = [o for o in self._owners() if not self._alive(o)]
                if not gone:
                    return
                problems = [str(r[0]) for r in self._db.execute("PRAGMA quick_check(5)").fetchall()]
        except StoreCorruptError:
            return  # _guard has marked it
        if problems != ["ok"]:
            self._mark_damaged(f"PRAGMA quick_check after an unclean shutdown: {'; '.join(problems)[:500]}")

    # -- faults ----------------------------------------------------------------------------
    def _mark_damaged(self, detail: str) -> None:
        if self._damaged is None:
            self._damaged = detail
            if self._closer is not None:
                self._closer.registered = False  # not even the clean-close mark is written any more
            _files.mark_damaged(self.path, detail)

    def _error(self, exc: sqlite3.Error, what: str) -> StoreError:
        error = translate(exc, self.path, what)
        if isinstance(error, StoreCorruptError):
            self._mark_damaged(error.detail)
        return error

    @contextlib.contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise self._error(exc, what) from exc

    def write_problem(self) -> StoreError | None:
        """Why nothing can be written now: :class:`StoreReadOnlyError`, :class:`StoreCorruptError`, or ``None``."""
        if self._damaged is not None:
            return StoreCorruptError(str(self.path), self._damaged)
        if self._read_only is not None:
            return StoreReadOnlyError(str(self.path), self._read_only)
        return None

    @contextlib.contextmanager
    def _transaction(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``: the write lock first, so what is read inside is
        what the commit changes). Whatever fails, the transaction is rolled back only if SQLite has not
        already done so, so the first error is the one reported."""
        problem = self.write_problem()
        if problem is not None:
            raise problem
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                    self._db.execute("COMMIT")
                except BaseException:
                    if self._db.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            self._db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise self._error(exc, what) from exc

    def _read(self, what: str, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[Any]:
        with self._lock, self._guard(what):
            return self._db.execute(sql, params).fetchall()

    # -- owners and claims -----------------------------------------------------------------
    def _register(self, db: sqlite3.Connection, now: float) -> None:
        me = this_process()
        db.execute(
            "INSERT INTO owners (owner_id, pid, host, process, opened_at, heartbeat_at, lease_s) "
            "VALUES (?,?,?,?,?,?,?) ON CONFLICT(owner_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
            (self._owner_id, me.pid, me.host, me.process, utc_now(), now, self.lease_s),
        )
        if self._closer is not None:
            self._closer.registered = True

    def _owners(self) -> list[_Owner]:
        rows = self._db.execute(
            "SELECT owner_id, pid, host, process, heartbeat_at, lease_s FROM owners"
        ).fetchall()
        return [
            _Owner(str(r[0]), ProcessIdentity(int(r[1]), str(r[2]), str(r[3])), float(r[4]), float(r[5]))
            for r in rows
        ]

    def _alive(self, owner: _Owner) -> bool:
        if owner.owner_id == self._owner_id:
            return True
        if owner.identity.pid == os.getpid() and owner.identity.host == this_process().host:
            return owner.owner_id in _OPEN_OWNERS
        return owner_alive(owner.identity, owner.heartbeat_at, time.time(), owner.lease_s)

    def _held(self, db: sqlite3.Connection, run_id: str) -> RunClaimedError | None:
        """The refusal to give when a live owner holds ``run_id``'s claim, else ``None``."""
        row = db.execute(
            "SELECT c.holder_run, c.claimed_at, o.owner_id, o.pid, o.host, o.process, o.heartbeat_at, o.lease_s "
            "FROM run_claims c LEFT JOIN owners o ON o.owner_id = c.owner_id WHERE c.run_id = ?",
            (run_id,),
        ).fetchone()
        if row is None or row[2] is None:
            return None  # unclaimed, or its owner closed its store
        owner = _Owner(
            str(row[2]), ProcessIdentity(int(row[3]), str(row[4]), str(row[5])), float(row[6]), float(row[7])
        )
        if not self._alive(owner):
            return None
        return RunClaimedError(
            run_id,
            holder_run=str(row[0]),
            pid=owner.identity.pid,
            host=owner.identity.host,
            since=str(row[1]),
        )

    def _claim(self, db: sqlite3.Connection, run_id: str, holder_run: str) -> None:
        refused = self._held(db, run_id)
        if refused is not None:
            raise refused
        db.execute(
            "INSERT OR REPLACE INTO run_claims (run_id, holder_run, owner_id, claimed_at) VALUES (?,?,?,?)",
            (run_id, holder_run, self._owner_id, utc_now()),
        )
        self._fenced.discard(holder_run)

    def heartbeat(self) -> None:
        """Renew this store's lease (only once it owns something: a reader never writes)."""
        if self._closer is None or not self._closer.registered:
            return
        with self._transaction("renewing its lease") as db:
            self._register(db, time.time())

    # -- runs ------------------------------------------------------------------------------
    def create_run(self, record: RunRecord) -> None:
        """Record a new run and claim it (and the run it resumes) for this store.

        ``record.resumed_from`` names a stored run (claimed too) or an origin outside the store, such
        as an imported Claude Code run (``claude:<runId>``): that has no row to claim, so the new run
        is refused while another run resuming the same origin still holds its own claim.

        Raises:
            RunClaimedError: a live owner holds the claim of ``record.resumed_from``, or (an origin
                outside the store) of a run that resumes it.
            StoreError: the run id, or the owner's idempotency key, is already used.
        """
        resumed = record.resumed_from
        if resumed is not None:
            # Refuse at once, without waiting for the write lock (its holder may be busy or stopped).
            with self._lock, self._guard(f"reading the claim of run {resumed}"):
                refused = self._held(self._db, resumed) or self._origin_held(self._db, resumed)
            if refused is not None:
                raise refused
        with self._transaction(f"creating run {record.run_id}") as db:
            self._register(db, time.time())
            # Checked again inside the write transaction: the first look took no lock.
            if (
                resumed is not None
                and db.execute("SELECT 1 FROM runs WHERE run_id = ?", (resumed,)).fetchone()
            ):
                self._claim(db, resumed, record.run_id)
            elif resumed is not None and (refused := self._origin_held(db, resumed)) is not None:
                raise refused
            _insert_run(db, record)
            self._claim(db, record.run_id, record.run_id)
        self._executing.add(record.run_id)

    def _origin_held(self, db: sqlite3.Connection, origin: str) -> RunClaimedError | None:
        """For an ``origin`` with no run row: the refusal to give when a run resuming it is still
        claimed by a live owner, else ``None`` (a stored run's own claim answers for it)."""
        if db.execute("SELECT 1 FROM runs WHERE run_id = ?", (origin,)).fetchone():
            return None
        rows = db.execute(
            "SELECT r.run_id FROM runs r JOIN run_claims c ON c.run_id = r.run_id AND c.holder_run = r.run_id "
            "WHERE r.resumed_from = ?",
            (origin,),
        ).fetchall()
        for (run_id,) in rows:
            held = self._held(db, str(run_id))
            if held is not None:
                return RunClaimedError(
                    origin, holder_run=held.run_id, pid=held.pid, host=held.host, since=held.since
                )
        return None

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._read(f"reading run {run_id}", f"SELECT {RUN_READ} FROM runs WHERE run_id = ?", (run_id,))
        return record_from_row(rows[0]) if rows else None

    def find_idempotent(self, owner: str | None, key: str) -> RunRecord | None:
        rows = self._read(
            "looking up an idempotency key",
            f"SELECT {RUN_READ} FROM runs WHERE owner IS ? AND idempotency_key = ?",
            (owner, key),
        )
        return record_from_row(rows[0]) if rows else None

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        rows = self._read(
            "listing runs",
            f"SELECT {RUN_READ} FROM runs ORDER BY created_at DESC, run_id DESC LIMIT ?",
            (limit,),
        )
        return [record_from_row(r) for r in rows]

    # -- events ----------------------------------------------------------------------------
    def append(self, event: Event) -> None:
        """Commit one event (and the journal row it implies)."""
        self.append_many([event])

    def append_many(self, events: list[Event]) -> None:
        """Commit a batch of events in one transaction: all or none.

        Raises:
            EventBatchError: within the batch, a run's sequences are not consecutive (a gap, a
                duplicate, a step back: :func:`~workflow_mcp.store.base.check_batch`).
            SequenceConflictError: a sequence is not after the newest stored one of its run (checked
                inside the write transaction, so a second writer can never interleave a run's events).
            StoreError: an event cannot be stored (e.g. a lone surrogate), or the store refuses writes.
        """
        if not events:
            return
        check_batch(events)
        try:
            with self._transaction(f"storing events of run {events[0].run_id}") as db:
                self._insert_events(db, events)
        except BaseException as exc:
            self._ordinals.clear()  # the journal ordinals cached for the refused batch are void
            self._written.clear()  # and so is what it would have added to the written runs
            if isinstance(exc, UnicodeError):
                raise StoreError(f"events refused by the store: {exc}") from exc
            raise
        self._executing.difference_update(e.run_id for e in events if e.type in RELEASING_TYPES)

    def _insert_events(self, db: sqlite3.Connection, events: list[Event]) -> None:
        self._note_foreign_commits(db)
        last: dict[str, int] = {}
        for e in events:
            before = last.get(e.run_id)
            if before is None:
                before = _max_sequence(db, e.run_id)
                if before == 0 or self._written.get(e.run_id) == before:
                    self._written[e.run_id] = before  # every event of the run so far is ours
                else:
                    self._written.pop(e.run_id, None)
            if e.sequence <= before:
                raise SequenceConflictError(e.run_id, e.sequence, before)
            last[e.run_id] = e.sequence
        for run_id in sorted((last.keys() & self._executing) - self._fenced):
            # The fence of a lease: a run this store executes is written only while its claim is still
            # this store's (a process paused past its lease may wake to find another took the run over).
            # Read again only after another connection committed (see _note_foreign_commits).
            row = db.execute(
                "SELECT owner_id, holder_run FROM run_claims WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None or row[0] != self._owner_id or row[1] != run_id:
                raise ClaimLostError(run_id, None if row is None else str(row[1]))
            self._fenced.add(run_id)
        for run_id, sequence in last.items():
            if run_id in self._written:
                self._written[run_id] = sequence
        db.executemany(
            "INSERT INTO events (run_id, sequence, type, timestamp, agent_id, body) VALUES (?,?,?,?,?,?)",
            [(e.run_id, e.sequence, e.type, e.timestamp, e.agent_id, _encode(e.to_json())) for e in events],
        )
        # One upsert per call, not per event: a replayed call's queued and cached events share a batch.
        journal = batch_journal_rows(events, lambda e: self._ordinal(db, e))
        if journal:
            db.executemany(UPSERT_JOURNAL, [jr.upsert_values() for jr in journal])
        ended = [(e.run_id,) for e in events if e.type in RELEASING_TYPES]
        if ended:
            db.executemany("DELETE FROM run_claims WHERE holder_run = ?", ended)

    def _ordinal(self, db: sqlite3.Connection, event: Event) -> int:
        per_run = self._ordinals.setdefault(event.run_id, {})
        agent_id = event.agent_id or ""
        if agent_id in per_run:
            return per_run[agent_id]
        if not per_run:
            # Read as bytes: a damaged entry (an agent id that is not UTF-8, an ordinal that is not a
            # number) still holds its place, and never stops the run's next event from being stored.
            # A BLOB id never equals a text one in SQLite, so it gets a key no agent id can be.
            for i, (aid, kind, ordinal) in enumerate(
                db.execute(
                    "SELECT CAST(agent_id AS BLOB), typeof(agent_id), CAST(ordinal AS BLOB) FROM journal "
                    "WHERE run_id = ?",
                    (event.run_id,),
                )
            ):
                try:
                    number = int(bytes(ordinal or b"").decode("ascii"))
                except (UnicodeDecodeError, ValueError):
                    number = -1
                text = bytes(aid or b"").decode("utf-8", "replace") if kind == "text" else None
                per_run[text if text is not None else f"\0damaged {i}"] = number
            if agent_id in per_run:
                return per_run[agent_id]
        n = len(per_run)
        per_run[agent_id] = n
        return n

    def flush(self) -> None:
        """Every append is already committed; nothing is pending."""

    def events(self, run_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        """The events of ``run_id`` with ``sequence > after``, in order (at most ``limit``).

        The page is read and decoded in bulk; only when that fails (a cell that is not UTF-8 text, a
        body that is not this run's event) is it read again cell by cell, where each damaged row is the
        stand-in of :func:`event_from_cells`, in its place: nothing is dropped and nothing raises for it.

        Raises:
            StoreCorruptError: the pages holding them are damaged.
        """
        sql = "SELECT body FROM events WHERE run_id = ? AND sequence > ? ORDER BY sequence"
        params: tuple[Any, ...] = (run_id, after)
        if limit is not None:
            sql += " LIMIT ?"
            params = (run_id, after, limit)
        what = f"reading the events of run {run_id}"
        with self._lock:
            try:
                rows = self._db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                if not _is_decoding(exc):
                    raise self._error(exc, what) from exc
                return self.event_cells(run_id, after, limit)
        out = []
        try:
            for (body,) in rows:
                if body.__class__ is not str:
                    raise TypeError("a body that is not text")
                event = Event.from_json(json.loads(body))
                if event.run_id != run_id:
                    raise ValueError("an event of another run")
                out.append(event)
        except (ValueError, KeyError, TypeError):
            return self.event_cells(run_id, after, limit)
        return out

    def event_cells(self, run_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        """:meth:`events`, read cell by cell (the slow path: every row through :func:`event_from_cells`)."""
        return [e for e, _ in self.event_rows(run_id, after, limit)]

    def event_rows(
        self, run_id: str, after: int = 0, limit: int | None = None
    ) -> list[tuple[Event, tuple[str, ...]]]:
        """Each event of ``run_id`` after ``after`` (at most ``limit``) with its damaged columns."""
        sql = f"SELECT {EVENT_READ} FROM events WHERE run_id = ? AND sequence > ? ORDER BY sequence"
        params: tuple[Any, ...] = (run_id, after)
        if limit is not None:
            sql += " LIMIT ?"
            params = (run_id, after, limit)
        rows = self._read(f"reading the events of run {run_id}", sql, params)
        return [event_from_cells(run_id, r) for r in rows]

    def _note_foreign_commits(self, db: sqlite3.Connection) -> None:
        """Forget the written runs when another connection has committed since this one last looked
        (``PRAGMA data_version`` changed; it never changes for this connection's own commits)."""
        version = int(db.execute("PRAGMA data_version").fetchone()[0])
        if version != self._data_version:
            self._written.clear()
            self._fenced.clear()
            self._data_version = version

    def damaged_events(self, run_id: str) -> list[Event]:
        """The events of ``run_id`` whose stored body is damaged, as the stand-ins every read gives
        (:func:`event_from_cells`), in order; ``[]``: none.

        A run whose every event this store wrote itself, with no other connection committing to the
        file since (``PRAGMA data_version`` unchanged), has none: its bodies are the JSON text this
        store encoded from events (so a server resuming a run it ran reads none of its log for this).
        Otherwise every body is checked without decoding the log in Python: SQLite's JSON functions (a
        body that is this run's event at this sequence) and a UTF-8 check of each body's bytes pick the
        suspects, which are then read cell by cell."""
        what = f"reading the events of run {run_id}"
        with self._lock, self._guard(what):
            self._note_foreign_commits(self._db)
            written = self._written.get(run_id)
            if written is not None and written == _max_sequence(self._db, run_id):
                return []
        rows = self._read(
            what,
            "SELECT sequence, CASE WHEN typeof(body) = 'text' AND json_valid(body) THEN "
            "json_extract(body, '$.sequence', '$.runId') IS json_array(sequence, run_id) END, "
            "CAST(body AS BLOB) FROM events WHERE run_id = ? ORDER BY sequence",
            (run_id,),
        )
        suspects = []
        for sequence, valid, raw in rows:
            if valid:
                try:
                    bytes(raw).decode("utf-8")
                    continue
                except UnicodeDecodeError:
                    pass
            suspects.append(sequence)
        out = []
        for sequence in suspects:
            found = self._read(
                what, f"SELECT {EVENT_READ} FROM events WHERE run_id = ? AND sequence = ?", (run_id, sequence)
            )
            if found:
                event, columns = event_from_cells(run_id, found[0])
                if "body" in columns:
                    out.append(event)
        return out

    def events_of_types(self, run_id: str, types: Collection[str]) -> list[Event]:
        """The events of ``run_id`` whose type is one of ``types``, in order: :meth:`events` filtered,
        read through the ``events_type`` index, so what a resume needs of a long log (its answers'
        deliveries, its checkpoint decisions) costs the events of those types only.

        The type cell is the index's copy of the body's type: a row whose cell is not a known type
        (damaged) is read too and kept when its event (:func:`event_from_cells`, as every read gives
        it) is of ``types``. So the result is ``[e for e in events(run_id) if e.type in types]`` unless
        a cell was rewritten to another known type (``store repair`` rewrites the cells from the body).

        Raises:
            StoreCorruptError: the pages holding them are damaged.
        """
        wanted = sorted(set(types))
        if not wanted:
            return []
        known = sorted(EVENT_TYPES)
        where = (
            f"WHERE run_id = ? AND (type IN ({','.join('?' * len(wanted))}) OR typeof(type) != 'text' "
            f"OR type NOT IN ({','.join('?' * len(known))})) ORDER BY sequence"
        )
        params = (run_id, *wanted, *known)
        what = f"reading the events of run {run_id}"
        out: list[Event] = []
        with self._lock:
            try:
                rows = self._db.execute(f"SELECT sequence, body FROM events {where}", params).fetchall()
                for sequence, body in rows:
                    if body.__class__ is not str:
                        raise TypeError("a body that is not text")
                    event = Event.from_json(json.loads(body))
                    if event.run_id != run_id or event.sequence != sequence:
                        raise ValueError("not this run's event at this sequence")
                    if event.type in wanted:
                        out.append(event)
                return out
            except sqlite3.Error as exc:
                if not _is_decoding(exc):
                    raise self._error(exc, what) from exc
            except (ValueError, KeyError, TypeError):
                pass
        # The slow path, as :meth:`events` takes it: each row through the reader of damaged cells.
        rows = self._read(what, f"SELECT {EVENT_READ} FROM events {where}", params)
        return [e for e in (event_from_cells(run_id, r)[0] for r in rows) if e.type in wanted]

    def last_sequence(self, run_id: str) -> int:
        with self._lock, self._guard(f"reading run {run_id}"):
            return _max_sequence(self._db, run_id)

    def last_run_event(self, run_id: str) -> str | None:
        """Type of the newest event of :data:`~workflow_mcp.state.STATUS_OF_EVENT` (what the run's status
        is; ``None`` before its first). An index lookup, whatever the size of the run's log."""
        with self._lock, self._guard(f"reading run {run_id}"):
            return _newest_status(self._db, run_id)

    def last_run_events(self, run_ids: Collection[str]) -> dict[str, str | None]:
        """:meth:`last_run_event` of each of ``run_ids`` (``None`` for an unknown run): per
        :data:`~workflow_mcp.store.base.STATUS_BATCH` runs, one query for their newest status events
        through the ``events_type`` index and one for their rows with a damaged ``type`` cell (one
        seek per gap between type names per run), which decide as in :meth:`last_run_event`."""
        ids = list(dict.fromkeys(run_ids))
        out: dict[str, str | None] = {}
        with self._lock, self._guard("reading the status of runs"):
            for start in range(0, len(ids), STATUS_BATCH):
                chunk = ids[start : start + STATUS_BATCH]
                numbered = [f"?{i}" for i in range(1, len(chunk) + 1)]  # each bound once, used twice
                marks = ",".join(f"({n})" for n in numbered)
                found = {
                    str(row[0]): (int(row[1] or 0), None if row[2] is None else str(row[2]))
                    for row in self._db.execute(
                        f"WITH ids(run_id) AS (VALUES {marks}) SELECT ids.run_id, "
                        f"{_newest_status_of('ids.run_id', 'sequence')}, {_newest_status_of('ids.run_id', 'type')} "
                        "FROM ids",
                        chunk,
                    )
                }
                odd: dict[str, list[Any]] = {}
                held = "run_id IN (" + ",".join(numbered) + ")"
                for row in self._db.execute(
                    f"SELECT run_id, {EVENT_READ} FROM events WHERE {_odd_type(held)} ORDER BY run_id, sequence DESC",
                    chunk,
                ):
                    odd.setdefault(str(row[0]), []).append(row[1:])
                for run_id in chunk:
                    sequence, newest = found.get(run_id, (0, None))
                    for cells in odd.get(run_id, ()):
                        if int(cells[0]) <= sequence:
                            break
                        event, _ = event_from_cells(run_id, cells)
                        if event.type in STATUS_OF_EVENT:
                            newest = event.type
                            break
                    out[run_id] = newest
        return out

    def unfinished_runs(self) -> list[RunRecord]:
        """Runs whose newest ``run.*`` event says they are still going (queued or running)."""
        with self._lock, self._guard("listing unfinished runs"):
            rows = self._db.execute(f"SELECT {RUN_READ} FROM runs r WHERE {_UNFINISHED}").fetchall()
            records = [record_from_row(r) for r in rows]
            return [r for r in records if self._unfinished(r.run_id)]

    def _unfinished(self, run_id: str) -> bool:
        """Whether ``run_id``'s status, as every read of its log shows it, is not terminal (inside the
        caller's lock)."""
        return _newest_status(self._db, run_id) not in TERMINAL_EVENTS

    # -- recovery --------------------------------------------------------------------------
    def _orphans(self, active: Collection[str]) -> tuple[list[_Orphan], list[str]]:
        """The unfinished runs whose owner is gone, and the gone owners (read inside the caller's lock)."""
        owners = {o.owner_id: o for o in self._owners()}
        gone = {oid for oid, o in owners.items() if not self._alive(o)}
        me = this_process()
        orphans = []
        rows = self._db.execute(
            f"SELECT {_R_READ}, c.owner_id, c.holder_run FROM runs r LEFT JOIN run_claims c ON c.run_id = r.run_id "
            f"WHERE {_UNFINISHED}"
        ).fetchall()
        for row in rows:
            record, owner_id, holder = record_from_row(row), row[RUN_READ_WIDTH], row[RUN_READ_WIDTH + 1]
            if record.run_id in active or not self._unfinished(record.run_id):
                continue
            if owner_id is None:
                # Runs from before claims existed: the recorded pid decides, on this host only.
                if record.owner_host != me.host or record.owner_pid is None:
                    continue
                if record.owner_pid != me.pid and _pid_exists(record.owner_pid):
                    continue
                reason = f"the process that owned the run (pid {record.owner_pid}) is gone"
            elif owner_id == self._owner_id and holder != record.run_id:
                # Claimed here as the run a resume continues: its own executor is gone.
                reason = f"the process that owned the run (pid {record.owner_pid}) is gone"
            elif owner_id == self._owner_id:
                reason = "the run stopped in this process without recording its end (its last events were not stored)"
            elif owner_id in gone:
                o = owners[owner_id]
                reason = f"the process that owned the run (pid {o.identity.pid} on {o.identity.host}) is gone"
            elif owner_id not in owners:
                reason = (
                    f"the process that owned the run (pid {record.owner_pid}) ended without recording its end"
                )
            else:
                continue
            orphans.append(_Orphan(record, reason))
        return orphans, sorted(gone)

    def recover(self, active: Collection[str], interrupted: InterruptedEvent) -> list[str]:
        """Store ``interrupted(record, sequence, reason)`` for each unfinished run whose owner is gone;
        drop gone owners and their claims; return the recovered run ids (see :class:`RunStore`).

        A first read decides whether anything needs writing (a query on a healthy store writes
        nothing); the write transaction then reads everything again before it changes anything.

        Raises:
            StoreReadOnlyError, StoreFullError, StoreCorruptError: there is something to recover but
                it cannot be written.
        """
        with self._lock, self._guard("looking for interrupted runs"):
            orphans, gone = self._orphans(active)
        if not orphans and not gone:
            return []
        with self._transaction("recording interrupted runs") as db:
            orphans, gone = self._orphans(active)
            for orphan in orphans:
                run_id = orphan.record.run_id
                seq = _max_sequence(db, run_id) + 1
                self._insert_events(db, [interrupted(orphan.record, seq, orphan.reason)])
            if gone:
                marks = ",".join("?" * len(gone))
                db.execute(f"DELETE FROM run_claims WHERE owner_id IN ({marks})", gone)
                db.execute(f"DELETE FROM owners WHERE owner_id IN ({marks})", gone)
        self._executing.difference_update(o.record.run_id for o in orphans)
        return [o.record.run_id for o in orphans]

    def completion_order(self, run_id: str) -> list[str]:
        what = f"reading the completion order of run {run_id}"
        sql = (
            "SELECT sequence, {} FROM events WHERE run_id = ? AND type IN ('agent.completed', 'agent.cached') "
            "AND agent_id IS NOT NULL ORDER BY sequence"
        )
        # The deliveries of calls replayed in the realm (a handful per run; their bodies are id lists).
        delivered = self._read(
            what,
            "SELECT sequence, CAST(body AS BLOB) FROM events WHERE run_id = ? AND type = 'agent.delivered' "
            "ORDER BY sequence",
            (run_id,),
        )
        with self._lock:
            try:
                rows = [(int(r[0]), str(r[1])) for r in self._db.execute(sql.format("agent_id"), (run_id,))]
                return release_order(rows, delivered)
            except sqlite3.Error as exc:
                if not _is_decoding(exc):
                    raise self._error(exc, what) from exc
        # An agent id that is not UTF-8 text: that call has no place in the order (it is not replayed
        # by rank; resume says so), the others keep theirs.
        raw_rows = self._read(what, sql.format("CAST(agent_id AS BLOB), typeof(agent_id)"), (run_id,))
        out = []
        for sequence, raw, kind in raw_rows:
            damaged: list[str] = []
            text = _event_cell("agent_id", raw, kind, damaged)
            if text is not None and not damaged:
                out.append((int(sequence), text))
        return release_order(out, delivered)

    def journal(self, run_id: str) -> list[JournalRow]:
        """The readable journal entries of ``run_id`` by ordinal; one whose cells are damaged is left
        out (:meth:`journal_damage` names it), so it is not replayed and the others still are."""
        return [r for r in self.journal_entries(run_id) if isinstance(r, JournalRow)]

    def journal_damage(self, run_id: str) -> list[JournalDamage]:
        """The journal entries of ``run_id`` that :meth:`journal` leaves out, by ordinal."""
        return [r for r in self.journal_entries(run_id) if isinstance(r, JournalDamage)]

    def journal_entries(self, run_id: str) -> list[JournalRow | JournalDamage]:
        """Every journal entry of ``run_id`` by ordinal, each a :class:`JournalRow` or, when a cell is
        damaged, a :class:`JournalDamage`: :meth:`journal` and :meth:`journal_damage` in one read.

        The cells are read as sqlite3 gives them and checked by
        :func:`~workflow_mcp.store.base.sound_journal_row`; only when a cell is not UTF-8 text or not
        of its column's type is the journal read again cell by cell (:func:`journal_entries`), which
        names the damage.

        Raises:
            StoreCorruptError: the pages holding it are damaged.
        """
        what = f"reading the journal of run {run_id}"
        rows: list[Any] | None = None
        with self._lock:
            try:
                rows = self._db.execute(_JOURNAL_FAST_READ, (run_id,)).fetchall()
            except sqlite3.Error as exc:
                if not _is_decoding(exc):
                    raise self._error(exc, what) from exc
        if rows is not None:
            seen: dict[str, dict[str, int]] = {}
            out: list[JournalRow | JournalDamage] = []
            for row in rows:
                entry = sound_journal_row(run_id, row[:-1], seen, result_checked=row[-1] == 1)
                if entry is None:
                    break
                out.append(entry)
            else:
                return out
        with self._lock, self._guard(what):
            return [entry for entry, _ in journal_entries(self._db, run_id)]

    # -- cross-process cancellation --------------------------------------------------------
    def request_cancel(self, run_id: str, reason: str) -> None:
        with self._transaction(f"asking to cancel run {run_id}") as db:
            db.execute(
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
        rows = self._read(
            "reading cancellation requests",
            f"SELECT run_id, reason FROM cancel_requests WHERE run_id IN ({marks})",
            run_ids,
        )
        return {str(r[0]): str(r[1]) for r in rows}

    # -- artifacts -------------------------------------------------------------------------
    def put_artifact(self, run_id: str, artifact_id: str, name: str, mime_type: str, data: bytes) -> None:
        with self._transaction(f"storing artifact {artifact_id} of run {run_id}") as db:
            db.execute(
                "INSERT INTO artifacts (run_id, artifact_id, name, mime_type, created_at, data) VALUES (?,?,?,?,?,?)",
                (run_id, artifact_id, name, mime_type, utc_now(), data),
            )

    def get_artifact(self, run_id: str, artifact_id: str) -> tuple[str, str, bytes] | None:
        rows = self._read(
            f"reading artifact {artifact_id} of run {run_id}",
            "SELECT name, mime_type, data FROM artifacts WHERE run_id = ? AND artifact_id = ?",
            (run_id, artifact_id),
        )
        return (str(rows[0][0]), str(rows[0][1]), bytes(rows[0][2])) if rows else None

    # -- maintenance -----------------------------------------------------------------------
    def import_run(self, record: RunRecord, events: list[Event]) -> None:
        """Store a run salvaged from elsewhere (``store repair``): its record and events, no claim; the
        journal is rebuilt from the events.

        Raises:
            StoreError: the run id is already used, or an event is refused.
        """
        with self._transaction(f"importing run {record.run_id}") as db:
            _insert_run(db, record)
            if events:
                self._insert_events(db, events)
        self._ordinals.pop(record.run_id, None)

    def schema(self) -> list[tuple[str, str]]:
        """``[(name, sql)]`` of every table and index, for the exact-schema test."""
        rows = self._read(
            "reading its schema",
            "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type, name",
        )
        return [(str(n), str(s)) for n, s in rows]

    def close(self) -> None:
        """Close the connection; a clean close also deletes this store's owner row (see migration 3)."""
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()
        elif self._closer is not None:
            self._closer()


def _max_sequence(db: sqlite3.Connection, run_id: str) -> int:
    return int(db.execute("SELECT MAX(sequence) FROM events WHERE run_id = ?", (run_id,)).fetchone()[0] or 0)


def _insert_run(db: sqlite3.Connection, record: RunRecord) -> None:
    db.execute(
        f"INSERT INTO runs ({RUN_COLUMNS}) VALUES ({', '.join('?' * 17)})",
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


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _split_sql(sql: str) -> list[str]:
    lines = [ln for ln in sql.splitlines() if not ln.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
