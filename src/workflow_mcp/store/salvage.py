"""Getting runs out of a damaged state database: ``runs export``, ``store check``, ``store repair``.

Everything here reads through its own read-only connection and never trusts one failed read to
mean everything is lost: a table scan that hits a damaged page falls back to point lookups (runs by
rowid, events by sequence), so each run keeps whatever of it is still readable, and what is not is
reported per run.

``repair_store`` never works on the only copy: it first copies ``state.db`` (and its ``-wal``) to
``state.db.bak-<timestamp>``, then rebuilds the database with ``VACUUM INTO`` (enough when only
indexes are damaged) or, when that fails, by salvaging run after run into a fresh database, checks the
result with ``PRAGMA integrity_check``, and only then puts it in place.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO
from urllib.parse import quote

from ..errors import StoreCorruptError, StoreError, StoreFullError, StoreReadOnlyError
from ..events import Event
from . import _files
from ._process import ProcessIdentity, owner_alive
from .base import JournalDamage, RunRecord, journal_row_for
from .sqlite import (
    EVENT_READ,
    JOURNALED_TYPES,
    RUN_READ,
    UPSERT_JOURNAL,
    SqliteStore,
    event_from_cells,
    journal_entries,
    record_from_row,
)

__all__ = [
    "ExportReport",
    "RepairReport",
    "SalvagedRun",
    "check_store",
    "damaged_cells",
    "export_runs",
    "repair_store",
    "salvage_runs",
]

# A point-lookup probe stops after this many consecutive misses past the last known key.
_PROBE_MISSES = 256


@dataclass
class SalvagedRun:
    """What could be read of one run: its record (``None`` if unreadable), its readable events in
    order, and one line per thing that could not be read."""

    run_id: str
    record: RunRecord | None
    events: list[Event] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass
class ExportReport:
    """``runs``/``events`` written; ``problems``: one line per unreadable part (``"run R: …"``)."""

    runs: int = 0
    events: int = 0
    problems: list[str] = field(default_factory=list)


@dataclass
class RepairReport:
    """``backup``: the copy made first; ``method``: ``vacuum`` or ``salvage``; what was kept and lost."""

    backup: Path
    method: str
    runs: int
    events: int
    problems: list[str] = field(default_factory=list)


def _open(path: Path) -> tuple[sqlite3.Connection, str | None]:
    """A read-only connection to ``path`` (``immutable=1`` where SQLite cannot even make its ``-shm``),
    and what that connection cannot see (a non-empty ``-wal`` it ignores), or ``None``.

    Raises:
        StoreCorruptError: not even the header is readable.
        StoreError: there is no such file.
    """
    if not path.is_file():
        raise StoreError(f"there is no state database at {path}")
    uri = f"file:{quote(str(path.resolve()))}"
    unseen = None
    try:
        db = sqlite3.connect(f"{uri}?mode=ro", uri=True, isolation_level=None)
        try:
            db.execute("SELECT count(*) FROM sqlite_schema").fetchone()
        except sqlite3.OperationalError:
            db.close()
            unseen = _files.unread_wal(path)
            db = sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None)
            db.execute("SELECT count(*) FROM sqlite_schema").fetchone()
    except sqlite3.DatabaseError as exc:
        raise StoreCorruptError(str(path), str(exc), opened=False) from exc
    return db, unseen


def _run_ids(db: sqlite3.Connection, problems: list[str]) -> list[str]:
    try:
        return [str(r[0]) for r in db.execute("SELECT run_id FROM runs ORDER BY created_at, run_id")]
    except sqlite3.DatabaseError as exc:
        problems.append(f"the list of runs is damaged ({exc}); runs were looked up one by one")
    ids: list[str] = []
    try:
        top = int(db.execute("SELECT MAX(rowid) FROM runs").fetchone()[0] or 0)
    except sqlite3.DatabaseError:
        top = 0
    rowid, misses = 0, 0
    while rowid < top or misses < _PROBE_MISSES:
        rowid += 1
        try:
            row = db.execute("SELECT run_id FROM runs WHERE rowid = ?", (rowid,)).fetchone()
        except sqlite3.DatabaseError:
            row = None
        if row is None:
            misses += 1
            continue
        misses = 0
        ids.append(str(row[0]))
    return ids


def _record(db: sqlite3.Connection, run_id: str) -> RunRecord:
    row = db.execute(f"SELECT {RUN_READ} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        raise LookupError("its record is missing")
    return record_from_row(row)


def _damage_line(run_id: str, damaged: list[tuple[int, tuple[str, ...]]]) -> str:
    cells = "; ".join(f"{seq} ({', '.join(cols)})" for seq, cols in damaged[:20])
    more = f" and {len(damaged) - 20} more" if len(damaged) > 20 else ""
    return f"run {run_id}: damaged event cells at sequence {cells}{more}"


def _events(db: sqlite3.Connection, run_id: str, problems: list[str]) -> list[Event]:
    # Cell by cell (see event_from_cells): a damaged cell is one stand-in event, never a lost log.
    try:
        rows = db.execute(
            f"SELECT {EVENT_READ} FROM events WHERE run_id = ? ORDER BY sequence", (run_id,)
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        problems.append(f"run {run_id}: its events are damaged ({exc}); they were read one by one")
        return _probe_events(db, run_id, problems)
    out = []
    damaged: list[tuple[int, tuple[str, ...]]] = []
    for row in rows:
        event, columns = event_from_cells(run_id, row)
        out.append(event)
        if columns:
            damaged.append((event.sequence, columns))
    if damaged:
        problems.append(_damage_line(run_id, damaged) + ", kept as stand-ins that record the damage")
    return out


def _probe_events(db: sqlite3.Connection, run_id: str, problems: list[str]) -> list[Event]:
    try:
        top = int(
            db.execute("SELECT MAX(sequence) FROM events WHERE run_id = ?", (run_id,)).fetchone()[0] or 0
        )
    except sqlite3.DatabaseError:
        top = 0
    out: list[Event] = []
    lost = 0
    sequence, misses = 0, 0
    while sequence < top or misses < _PROBE_MISSES:
        sequence += 1
        try:
            row = db.execute(
                f"SELECT {EVENT_READ} FROM events WHERE run_id = ? AND sequence = ?", (run_id, sequence)
            ).fetchone()
            if row is None:
                misses += 1
                continue
            out.append(event_from_cells(run_id, row)[0])
            misses = 0
        except sqlite3.DatabaseError:
            lost += 1
            misses += 1
    if lost:
        problems.append(f"run {run_id}: {lost} event(s) could not be read")
    return out


def salvage_runs(db: sqlite3.Connection, run_ids: list[str] | None = None) -> Iterator[SalvagedRun]:
    """Each run (``run_ids``, or every run found, oldest first) with whatever of it is readable. A
    first item with ``run_id == ""`` carries problems that concern no single run."""
    general: list[str] = []
    ids = list(run_ids) if run_ids else _run_ids(db, general)
    if general:
        yield SalvagedRun("", None, problems=general)
    for run_id in ids:
        problems: list[str] = []
        record: RunRecord | None = None
        try:
            record = _record(db, run_id)
        except (sqlite3.DatabaseError, LookupError, ValueError) as exc:
            problems.append(f"run {run_id}: its record cannot be read ({exc})")
        events = _events(db, run_id, problems)
        if record is None and not events and run_ids:
            problems = [f"run {run_id}: no such run could be read"]
        yield SalvagedRun(run_id, record, events, problems)


def export_runs(path: Path, run_ids: list[str] | None, out: TextIO) -> ExportReport:
    """Write runs and their events as JSON lines to ``out``, best effort per run.

    Lines: ``{"kind": "run", "run": {…record…}}`` then one ``{"kind": "event", "event": {…}}`` per
    readable event (the event envelope), and ``{"kind": "problem", "runId", "message"}`` for each part
    that could not be read. Works on a damaged database (it only reads).

    Raises:
        StoreCorruptError: not even the file's header is readable.
        StoreError: there is no database at ``path``.
    """
    report = ExportReport()
    db, unseen = _open(path)
    if unseen is not None:
        problem = f"the export lacks the newest changes: {unseen}"
        out.write(
            json.dumps({"kind": "problem", "runId": None, "message": problem}, ensure_ascii=False) + "\n"
        )
        report.problems.append(problem)
    try:
        for run in salvage_runs(db, run_ids):
            if run.record is not None:
                out.write(json.dumps({"kind": "run", "run": run.record.to_json()}, ensure_ascii=False) + "\n")
            if run.record is not None or run.events:
                report.runs += 1
            for event in run.events:
                out.write(json.dumps({"kind": "event", "event": event.to_json()}, ensure_ascii=False) + "\n")
            report.events += len(run.events)
            for problem in run.problems:
                line = {"kind": "problem", "runId": run.run_id or None, "message": problem}
                out.write(json.dumps(line, ensure_ascii=False) + "\n")
            report.problems += run.problems
    finally:
        db.close()
    return report


def check_store(path: Path) -> list[str]:
    """``PRAGMA integrity_check`` of the database at ``path``: ``[]`` when it is sound, else SQLite's
    findings (and the file is marked damaged, so no workflow-mcp process writes to it any more).

    Raises:
        StoreCorruptError: not even the file's header is readable.
        StoreError: part of it cannot be read here (a ``-wal`` on a read-only location).
    """
    db, unseen = _open(path)
    if unseen is not None:
        db.close()
        raise StoreError(f"the state database {path} cannot be checked whole: {unseen}")
    try:
        try:
            found = [str(r[0]) for r in db.execute("PRAGMA integrity_check(100)").fetchall()]
        except sqlite3.DatabaseError as exc:
            found = [str(exc)]
    finally:
        db.close()
    if found == ["ok"]:
        return []
    _files.mark_damaged(path, f"PRAGMA integrity_check: {'; '.join(found)[:500]}")
    return found


def damaged_cells(path: Path) -> list[str]:
    """One line per run whose stored record holds cells that are not what their columns hold (bytes
    that are not UTF-8, a non-text value in a text column, options that are not a JSON object), and one
    per run whose events do (``run R: damaged event cells at sequence 5 (body); 7 (type)``: the same,
    or a body that is not the run's event): SQLite's integrity check passes over them, but they are
    damage all the same. ``[]``: none. Such runs are listed and shown with the damage named (an event
    as a stand-in, see :func:`~workflow_mcp.store.sqlite.event_from_cells`); ``repair_store`` rewrites
    them.

    Raises:
        StoreCorruptError: not even the file's header is readable.
        StoreError: there is no such file.
    """
    db, _ = _open(path)
    try:
        lines = [_cell_line(r) for r in _damaged_records(db)]
        for run_id, damaged in _damaged_events(db).items():
            cells = [(e.sequence, columns) for e, columns in damaged]
            lines.append(_damage_line(run_id, cells) + "; `workflow-mcp store repair` rewrites them")
        for run_id, entries in _damaged_journals(db).items():
            lines.append(
                f"run {run_id}: damaged journal entries: {_entries(entries)}; their calls run again on resume; "
                "`workflow-mcp store repair` rebuilds them from the run's events"
            )
        return lines
    finally:
        db.close()


def _damaged_events(db: sqlite3.Connection) -> dict[str, list[tuple[Event, tuple[str, ...]]]]:
    """``{run_id: [(stand-in event, damaged columns)]}`` for every run with damaged event cells (runs
    whose events sit on damaged pages are left to ``PRAGMA integrity_check``)."""
    out: dict[str, list[tuple[Event, tuple[str, ...]]]] = {}
    try:
        run_ids = [str(r[0]) for r in db.execute("SELECT run_id FROM runs ORDER BY created_at, run_id")]
    except sqlite3.DatabaseError:
        return out
    for run_id in run_ids:
        try:
            rows = db.execute(
                f"SELECT {EVENT_READ} FROM events WHERE run_id = ? ORDER BY sequence", (run_id,)
            )
            found = [(e, c) for e, c in (event_from_cells(run_id, r) for r in rows) if c]
        except sqlite3.DatabaseError:
            continue
        if found:
            out[run_id] = found
    return out


def _entries(entries: list[JournalDamage]) -> str:
    shown = "; ".join(
        f"{e.agent_id or '(unreadable agent id)'}"
        + (f" (ordinal {e.ordinal}: " if e.ordinal is not None else " (")
        + f"{', '.join(e.columns)})"
        for e in entries[:20]
    )
    return shown + (f" and {len(entries) - 20} more" if len(entries) > 20 else "")


def _damaged_journals(db: sqlite3.Connection) -> dict[str, list[JournalDamage]]:
    """``{run_id: [damaged journal entries]}`` for every run whose journal holds damaged cells (runs
    whose journal sits on damaged pages are left to ``PRAGMA integrity_check``)."""
    out: dict[str, list[JournalDamage]] = {}
    try:
        run_ids = [str(r[0]) for r in db.execute("SELECT DISTINCT run_id FROM journal ORDER BY run_id")]
    except sqlite3.DatabaseError:
        return out
    for run_id in run_ids:
        try:
            found = [e for e, _ in journal_entries(db, run_id) if isinstance(e, JournalDamage)]
        except sqlite3.DatabaseError:
            continue
        if found:
            out[run_id] = found
    return out


def _rebuild_journals(target: Path, backup: Path) -> list[str]:
    """In the rebuilt database at ``target``: delete each damaged journal entry and derive it again from
    its call's sound events (the journal is what the events imply: ``journal_row_for``, applied in order
    as every append applies it), keeping its ordinal where that is readable (an entry whose agent id is
    unreadable gives its ordinal to the first call left without an entry); one line per run."""
    lines = []
    db = sqlite3.connect(target, isolation_level=None)
    try:
        db.execute("BEGIN")
        for run_id in _damaged_journals(db):
            entries = journal_entries(db, run_id)
            damaged = [(e, raw) for e, raw in entries if isinstance(e, JournalDamage)]
            for _, (raw, kind) in damaged:
                db.execute(
                    "DELETE FROM journal WHERE run_id = ? AND CAST(agent_id AS BLOB) = ? AND typeof(agent_id) = ?",
                    (run_id, raw, kind),
                )
            kept = {e.agent_id: e.ordinal for e, _ in entries if not isinstance(e, JournalDamage)}
            wanted = {e.agent_id: e.ordinal for e, _ in damaged if e.agent_id is not None}
            top = max([o for o in kept.values()] + [e.ordinal or 0 for e, _ in damaged], default=-1)
            # An entry whose agent id is unreadable still holds its ordinal: ordinals follow the order
            # calls were queued, so the calls left without an entry take those in that order.
            spare = sorted(e.ordinal for e, _ in damaged if e.agent_id is None and e.ordinal is not None)
            ordinals: dict[str, int] = {}
            rows = db.execute(
                f"SELECT {EVENT_READ} FROM events WHERE run_id = ? AND type IN "
                f"({', '.join('?' * len(JOURNALED_TYPES))}) ORDER BY sequence",
                (run_id, *sorted(JOURNALED_TYPES)),
            )
            for cells in rows.fetchall():
                event, columns = event_from_cells(run_id, cells)
                agent_id = event.agent_id
                if columns or agent_id is None or agent_id in kept:
                    continue  # a damaged event rebuilds nothing; an intact entry stays as it is
                if agent_id not in ordinals:
                    known = wanted.get(agent_id)
                    if known is None and spare:
                        known = spare.pop(0)
                    if known is None:
                        top += 1
                    ordinals[agent_id] = known if known is not None else top
                jr = journal_row_for(event, ordinals[agent_id])
                if jr is not None:
                    db.execute(
                        UPSERT_JOURNAL,
                        (
                            jr.run_id, jr.agent_id, jr.ordinal, jr.key, jr.content_key, jr.status, jr.label,
                            jr.result_json, json.dumps(jr.tokens), int(jr.side_effects), jr.source_run,
                        ),
                    )  # fmt: skip
            rebuilt = ", ".join(sorted(ordinals)) or "none"
            lines.append(
                f"run {run_id}: removed {len(damaged)} damaged journal entr{'y' if len(damaged) == 1 else 'ies'} "
                f"({_entries([e for e, _ in damaged])}) and rebuilt from the run's sound events the entries of "
                f"{rebuilt}; a call no sound event records runs again on resume; the originals are in {backup}"
            )
        db.execute("COMMIT")
    finally:
        db.close()
    return lines


def _rewrite_events(
    target: Path, damaged: dict[str, list[tuple[Event, tuple[str, ...]]]], backup: Path
) -> list[str]:
    """Write each damaged event row of ``damaged`` as its stand-in (invalid bytes as U+FFFD; a body that
    is not the run's event becomes one whose payload records the damage) into the rebuilt database at
    ``target``, every other event as it was; one line per run."""
    lines = []
    db = sqlite3.connect(target, isolation_level=None)
    try:
        db.execute("BEGIN")
        for run_id, found in damaged.items():
            for event, _ in found:
                db.execute(
                    "UPDATE events SET type = ?, timestamp = ?, agent_id = ?, body = ? "
                    "WHERE run_id = ? AND sequence = ?",
                    (
                        event.type,
                        event.timestamp,
                        event.agent_id,
                        json.dumps(event.to_json(), ensure_ascii=False, separators=(",", ":")),
                        run_id,
                        event.sequence,
                    ),
                )
            cells = [(e.sequence, c) for e, c in found]
            lines.append(
                _damage_line(run_id, cells).replace(
                    "damaged event cells at", "rewrote the damaged event cells at"
                )
                + f" (invalid bytes as U+FFFD; a body that was not an event now records the damage in its "
                f"payload); its other events are kept as they were and the originals are in {backup}"
            )
        db.execute("COMMIT")
    finally:
        db.close()
    return lines


def _damaged_records(db: sqlite3.Connection) -> list[RunRecord]:
    out = []
    for rowid in _rowids(db):
        try:
            row = db.execute(f"SELECT {RUN_READ} FROM runs WHERE rowid = ?", (rowid,)).fetchone()
        except sqlite3.DatabaseError:
            continue  # a damaged page: PRAGMA integrity_check reports it
        if row is not None:
            record = record_from_row(row)
            if record.damaged:
                out.append(record)
    return out


def _rowids(db: sqlite3.Connection) -> list[int]:
    try:
        return [int(r[0]) for r in db.execute("SELECT rowid FROM runs ORDER BY rowid")]
    except sqlite3.DatabaseError:
        return []


def _cell_line(record: RunRecord) -> str:
    return (
        f"run {record.run_id or '(unreadable id)'}: damaged cells in its record: {', '.join(record.damaged)} "
        "(not valid UTF-8 text, not text, or missing); `workflow-mcp store repair` rewrites them"
    )


def _rewrite_cells(target: Path, damaged: list[RunRecord], backup: Path) -> list[str]:
    """Write each damaged cell of ``damaged`` (read from the original) as its stand-in into the rebuilt
    database at ``target``, matched by run id or, for an unreadable id, not at all; one line each."""
    lines = []
    db = sqlite3.connect(target, isolation_level=None)
    try:
        for record in damaged:
            if "run_id" in record.damaged:
                lines.append(
                    f"a run's id is damaged ({record.run_id!r}); it was kept as is, and the original is in {backup}"
                )
                continue
            for column in record.damaged:
                value: object = (
                    json.dumps(record.options, ensure_ascii=False)
                    if column == "options_json"
                    else getattr(record, column)  # the record's fields are named as the columns
                )
                db.execute(f"UPDATE runs SET {column} = ? WHERE run_id = ?", (value, record.run_id))
            note = (
                "; its script changed, so it no longer matches its sha256: start the file anew rather than "
                "resume it"
                if "source" in record.damaged
                else ""
            )
            lines.append(
                f"run {record.run_id}: rewrote the damaged cells {', '.join(record.damaged)} (invalid bytes as "
                f"U+FFFD, a non-text value as text, unreadable options as {{}}); its events are kept and the "
                f"original cells are in {backup}{note}"
            )
    finally:
        db.close()
    return lines


def _live_owners(db: sqlite3.Connection) -> list[ProcessIdentity]:
    try:
        rows = db.execute("SELECT pid, host, process, heartbeat_at FROM owners").fetchall()
    except sqlite3.DatabaseError:
        return []  # unreadable (or an old schema): the caller was told to stop other processes
    now = time.time()
    owners = [ProcessIdentity(int(r[0]), str(r[1]), str(r[2])) for r in rows]
    return [o for o, r in zip(owners, rows, strict=True) if owner_alive(o, float(r[3]), now)]


def _backup(path: Path, stamp: str) -> Path:
    """Copy ``path`` (and a non-empty ``-wal``) to ``<path>.bak-<stamp>``; on failure nothing of the
    copy is left."""
    backup = path.with_name(f"{path.name}.bak-{stamp}")
    made: list[Path] = []
    try:
        for suffix in ("", "-wal"):
            source = Path(f"{path}{suffix}")
            if source.exists() and (suffix == "" or source.stat().st_size > 0):
                target = Path(f"{backup}{suffix}")
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                made.append(target)
                with os.fdopen(fd, "wb") as dst, source.open("rb") as src:
                    shutil.copyfileobj(src, dst)
                    dst.flush()
                    os.fsync(dst.fileno())
    except BaseException:
        _remove(*made)
        raise
    return backup


def _remove(*paths: Path) -> None:
    """Remove each of ``paths`` and its SQLite side files, where they exist."""
    for path in paths:
        for name in (str(path), *(f"{path}{s}" for s in _files.SIDE_FILES)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)


_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _full(path: Path, exc: BaseException) -> StoreFullError | None:
    """The disk-full error of a repair whose files do not fit beside ``path`` (``None``: another cause)."""
    if isinstance(exc, StoreFullError):
        full = True
    elif isinstance(exc, OSError):
        full = exc.errno in _FULL
    else:
        full = isinstance(exc, sqlite3.OperationalError) and "full" in str(exc)
    if not full:
        return None
    free: int | None = None
    with contextlib.suppress(OSError):
        st = os.statvfs(path.parent)
        free = st.f_bavail * st.f_frsize
    return StoreFullError(
        str(path),
        directory=str(path.parent),
        free_bytes=free,
        then="repair again (`workflow-mcp store repair`): the database was left as it was",
    )


def _integrity(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return [str(r[0]) for r in db.execute("PRAGMA integrity_check(20)").fetchall()]
    finally:
        db.close()


def _vacuum(db: sqlite3.Connection, target: Path) -> bool:
    try:
        db.execute("VACUUM INTO ?", (str(target),))
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and "full" in str(exc):
            raise  # a salvage would not fit either (and would leave runs out): refuse instead
        return False
    if _integrity(target) != ["ok"]:
        return False
    clean = sqlite3.connect(target, isolation_level=None)
    try:
        # Leases and owners of the damaged file mean nothing in the new one (every owner has stopped).
        clean.execute("DELETE FROM run_claims")
        clean.execute("DELETE FROM owners")
    except sqlite3.OperationalError:
        pass  # a schema from before claims: migrated on the next open
    finally:
        clean.close()
    return True


def _salvage_into(db: sqlite3.Connection, target: Path, report: RepairReport) -> None:
    fresh = SqliteStore(target)
    try:
        for run in salvage_runs(db):
            report.problems += run.problems
            if run.record is None:
                if run.run_id:
                    report.problems.append(
                        f"run {run.run_id}: left out (its record, with its script, is lost)"
                    )
                continue
            try:
                fresh.import_run(run.record, run.events)
            except StoreFullError:
                raise  # not this run's damage: the rebuilt file does not fit, and no run may be left out
            except StoreError as exc:
                report.problems.append(f"run {run.run_id}: left out ({exc})")
                continue
            report.runs += 1
            report.events += len(run.events)
            _copy_artifacts(db, fresh, run.run_id, report)
    finally:
        fresh.close()


def _copy_artifacts(db: sqlite3.Connection, fresh: SqliteStore, run_id: str, report: RepairReport) -> None:
    try:
        ids = [str(r[0]) for r in db.execute("SELECT artifact_id FROM artifacts WHERE run_id = ?", (run_id,))]
    except sqlite3.DatabaseError as exc:
        report.problems.append(f"run {run_id}: its artifacts cannot be read ({exc})")
        return
    for artifact_id in ids:
        try:
            row = db.execute(
                "SELECT name, mime_type, data FROM artifacts WHERE run_id = ? AND artifact_id = ?",
                (run_id, artifact_id),
            ).fetchone()
            fresh.put_artifact(run_id, artifact_id, str(row[0]), str(row[1]), bytes(row[2]))
        except StoreFullError:
            raise
        except (sqlite3.DatabaseError, StoreError, TypeError) as exc:
            report.problems.append(f"run {run_id}: artifact {artifact_id} cannot be read ({exc})")


def repair_store(path: Path) -> RepairReport:
    """Back up, rebuild and replace the database at ``path``; returns what was kept and lost.

    Stop every other workflow-mcp process first: a live owner recorded in the file makes this refuse.

    Raises:
        StoreError: another process still owns runs in it, or the rebuilt database fails its check
            (the original and the backup are left as they were).
        StoreCorruptError: not even the file's header is readable (nothing can be salvaged; move it
            aside).
        StoreReadOnlyError: the backup cannot be written next to it (nothing was changed).
        StoreFullError: the backup or the rebuilt file does not fit on the disk (the database is left
            as it was, with neither of them beside it).
    """
    db, unseen = _open(path)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path.with_name(f"{path.name}.repair-{stamp}")
    try:
        if unseen is not None:
            raise StoreReadOnlyError(str(path), f"it cannot be repaired where it is: {unseen}")
        live = _live_owners(db)
        if live:
            who = ", ".join(f"pid {o.pid} on {o.host}" for o in live)
            raise StoreError(
                f"the state database {path} is still in use by workflow-mcp ({who}); stop it, then repair"
            )
        try:
            backup = _backup(path, stamp)
        except OSError as exc:
            if (full := _full(path, exc)) is not None:
                raise full from exc
            raise StoreReadOnlyError(
                str(path), f"its backup cannot be written ({exc.strerror or exc}), so nothing was repaired"
            ) from exc
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        try:
            report = _rebuild(db, target, backup)
        except BaseException as exc:
            _remove(target)  # the original is untouched
            if (full := _full(path, exc)) is not None:
                _remove(backup)  # a copy of an untouched file, taking the space the repair needs
                raise full from exc
            raise
    finally:
        db.close()
    os.chmod(target, 0o600)
    # The old -wal and -shm belong to the old file: SQLite would replay them onto the new one.
    for suffix in _files.SIDE_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")
    os.replace(target, path)
    _files.clear_damage(path)
    return report


def _rebuild(db: sqlite3.Connection, target: Path, backup: Path) -> RepairReport:
    """Build the repaired copy of ``db`` at ``target`` (``VACUUM INTO``, else a salvage), then rewrite
    its damaged cells, events and journals from what ``db`` still holds.

    Raises:
        StoreError: the rebuilt database fails its check (or cannot be written: ``StoreFullError``).
        sqlite3.OperationalError: ``VACUUM INTO`` or a rewrite hit a full disk.
    """
    damaged = _damaged_records(db)
    damaged_events = _damaged_events(db)
    report = RepairReport(backup=backup, method="vacuum", runs=0, events=0)
    if _vacuum(db, target):
        check = sqlite3.connect(target)
        try:
            report.runs = int(check.execute("SELECT count(*) FROM runs").fetchone()[0])
            report.events = int(check.execute("SELECT count(*) FROM events").fetchone()[0])
        finally:
            check.close()
    else:
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        report.method = "salvage"
        _salvage_into(db, target, report)
        found = _integrity(target)
        if found != ["ok"]:
            raise StoreError(f"the rebuilt database {target} failed its check ({'; '.join(found)})")
    report.problems += _rewrite_cells(target, damaged, backup)
    report.problems += _rewrite_events(target, damaged_events, backup)
    report.problems += _rebuild_journals(target, backup)
    return report
