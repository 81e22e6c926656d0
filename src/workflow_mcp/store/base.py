"""The run store boundary: runs, their events, their journal and their artifacts.

Two implementations: :class:`~workflow_mcp.store.sqlite.SqliteStore` (WAL, numbered migrations) and
:class:`~workflow_mcp.store.memory.MemoryStore` (the in-memory twin for tests). The store holds data,
not behaviour: run status is never stored, it is projected from the events.

One executor per run (DESIGN: "starting or resuming a run takes an exclusive, crash-safe claim"):
``create_run`` claims the new run, and the run it resumes, for the store's owner; the transaction that
stores the run's terminal event releases both; ``recover`` ends the runs whose owner is gone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import EventBatchError, StoreError
from ..events import Event
from ..state import TERMINAL_EVENTS

__all__ = [
    "JOURNALED_TYPES",
    "JOURNAL_COLUMNS",
    "RELEASING_TYPES",
    "STATUS_BATCH",
    "DeleteConfirmation",
    "InterruptedEvent",
    "JournalDamage",
    "JournalRow",
    "LibraryDraft",
    "LibraryStore",
    "LibraryVersion",
    "RunRecord",
    "RunStore",
    "StoreError",
    "batch_journal_rows",
    "check_batch",
    "journal_row_for",
    "journal_row_from_cells",
    "merge_journal_rows",
    "release_order",
    "sound_journal_row",
]

#: The run events after which a run has no executor (its status is ``state.TERMINAL``): storing one
#: releases the claims its run holds.
RELEASING_TYPES = TERMINAL_EVENTS

#: Runs whose statuses :meth:`RunStore.last_run_events` reads in one query (a page of listed runs is
#: one query; a longer list one per this many, within SQLite's 999 bound parameters).
STATUS_BATCH = 500

# agent.started adds nothing a resume needs (a started call without a result is simply not reusable),
# so the journal follows queued → completed | cached | failed.
JOURNALED_TYPES = frozenset({"agent.queued", "agent.completed", "agent.cached", "agent.failed"})
"""The event types that write a call's journal entry."""

#: ``(record, sequence, reason) -> the run.interrupted event`` that ``recover`` stores for an orphan.
InterruptedEvent = Callable[["RunRecord", int, str], Event]


@dataclass(frozen=True)
class RunRecord:
    """The immutable facts of one run, written once when it is created."""

    run_id: str
    workflow_name: str
    source_hash: str
    source: str
    created_at: str
    workflow_path: str | None = None
    args_json: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    provider: str = ""
    profile: str = ""
    cwd: str | None = None
    resumed_from: str | None = None
    resume_policy: str | None = None
    idempotency_key: str | None = None
    owner: str | None = None
    owner_pid: int | None = None
    owner_host: str | None = None
    damaged: tuple[str, ...] = ()
    """The columns of the stored row that could not be read as what they hold (bytes that are not UTF-8,
    a non-text value in a text column, …); their fields hold stand-ins. ``store repair`` rewrites them."""

    def to_json(self) -> dict[str, Any]:
        """The record with camelCase keys (``runs export`` writes it)."""
        return {
            "runId": self.run_id,
            "workflowName": self.workflow_name,
            "workflowPath": self.workflow_path,
            "sourceHash": self.source_hash,
            "source": self.source,
            "createdAt": self.created_at,
            "argsJson": self.args_json,
            "options": self.options,
            "provider": self.provider,
            "profile": self.profile,
            "cwd": self.cwd,
            "resumedFrom": self.resumed_from,
            "resumePolicy": self.resume_policy,
            "idempotencyKey": self.idempotency_key,
            "owner": self.owner,
            "ownerPid": self.owner_pid,
            "ownerHost": self.owner_host,
        } | ({"damaged": list(self.damaged)} if self.damaged else {})


@dataclass(frozen=True)
class JournalRow:
    """One agent call's identity and outcome. ``status``: started | completed | failed | cached."""

    run_id: str
    agent_id: str
    ordinal: int
    key: str
    content_key: str
    status: str
    label: str = ""
    result_json: str | None = None
    tokens: dict[str, int] = field(default_factory=dict)
    side_effects: bool = False
    source_run: str | None = None

    def upsert_values(self) -> tuple[Any, ...]:
        """The parameters of a store's journal upsert, in the order both stores' statements name them:
        ``(run_id, agent_id, ordinal, key, content_key, status, label, result_json, tokens as JSON,
        side_effects, source_run)`` (SQLite binds the bool as 0/1)."""
        return (
            self.run_id,
            self.agent_id,
            self.ordinal,
            self.key,
            self.content_key,
            self.status,
            self.label,
            self.result_json,
            json.dumps(self.tokens) if self.tokens else "{}",
            self.side_effects,
            self.source_run,
        )


_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


_new_row = object.__new__


def _journal_row(
    run_id: str,
    agent_id: str,
    ordinal: int,
    key: str,
    content_key: str,
    status: str,
    label: str,
    result_json: str | None,
    tokens: dict[str, int],
    side_effects: bool,
    source_run: str | None,
) -> JournalRow:
    """``JournalRow(...)`` built as the frozen dataclass's own ``__init__`` would, minus a setattr call
    per field: a run writes and a resume reads an entry per agent call."""
    row: JournalRow = _new_row(JournalRow)
    row.__dict__.update(
        run_id=run_id,
        agent_id=agent_id,
        ordinal=ordinal,
        key=key,
        content_key=content_key,
        status=status,
        label=label,
        result_json=result_json,
        tokens=tokens,
        side_effects=side_effects,
        source_run=source_run,
    )
    return row


#: The columns of a stored journal entry after its run id, in the order
#: :func:`journal_row_from_cells` takes them.
JOURNAL_COLUMNS = (
    "agent_id",
    "ordinal",
    "key",
    "content_key",
    "status",
    "label",
    "result_json",
    "tokens_json",
    "side_effects",
    "source_run",
)


@dataclass(frozen=True)
class JournalDamage:
    """A stored journal entry that cannot be read as one (written by another program or a bad disk):
    ``agent_id`` as far as it is readable (``None``: not at all), its ``ordinal`` (``None``: unreadable)
    and the damaged ``columns`` (names of :data:`JOURNAL_COLUMNS`). Reads of the journal skip it, so
    the call it recorded is not replayed: a resume runs it again and says so (:attr:`message`)."""

    run_id: str
    agent_id: str | None
    ordinal: int | None
    columns: tuple[str, ...]

    @property
    def message(self) -> str:
        """``journal entry ag_0001 (ordinal 0) of run R is damaged (result_json)``."""
        which = self.agent_id if self.agent_id else "with an unreadable agent id"
        at = f" (ordinal {self.ordinal})" if self.ordinal is not None else ""
        return f"journal entry {which}{at} of run {self.run_id} is damaged ({', '.join(self.columns)})"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def journal_row_from_cells(
    run_id: str, values: tuple[Any, ...], damaged: list[str]
) -> JournalRow | JournalDamage:
    """The journal entry of ``run_id`` whose cells are ``values`` (in :data:`JOURNAL_COLUMNS` order:
    text as ``str``, integers as ``int``, SQL null as ``None``), or what is damaged in it.

    ``damaged`` arrives naming the columns the caller could not even read as their type (bytes that are
    not UTF-8, a BLOB or a number in a text column) and gains those whose value is not what the column
    holds: an empty agent id or status, an ordinal that is not a non-negative integer, a
    ``result_json`` that is not JSON, a ``tokens_json`` that is not a JSON object of integers, a
    ``side_effects`` that is not 0 or 1. Any damage makes the whole entry a :class:`JournalDamage`: a
    result half-read must never be replayed as the call's answer."""
    cells = dict(zip(JOURNAL_COLUMNS, values, strict=True))

    def check(column: str, ok: bool) -> None:
        if not ok and column not in damaged:
            damaged.append(column)

    agent_id, ordinal = cells["agent_id"], cells["ordinal"]
    check("agent_id", isinstance(agent_id, str) and agent_id != "")
    check("ordinal", _is_int(ordinal) and ordinal >= 0)
    for column in ("key", "content_key", "label"):
        check(column, isinstance(cells[column], str))
    check("status", isinstance(cells["status"], str) and cells["status"] != "")
    for column in ("result_json", "source_run"):
        check(column, cells[column] is None or isinstance(cells[column], str))
    if "result_json" not in damaged and cells["result_json"] is not None:
        try:
            json.loads(cells["result_json"])
        except ValueError:
            check("result_json", False)
    tokens: object = None
    if isinstance(cells["tokens_json"], str):
        try:
            tokens = json.loads(cells["tokens_json"])
        except ValueError:
            tokens = None
    check(
        "tokens_json",
        isinstance(tokens, dict) and all(isinstance(k, str) and _is_int(v) for k, v in tokens.items()),
    )
    side_effects = cells["side_effects"]
    check("side_effects", isinstance(side_effects, bool) or side_effects in (0, 1))
    if damaged:
        return JournalDamage(
            run_id=run_id,
            agent_id=agent_id if isinstance(agent_id, str) and "agent_id" not in damaged else None,
            ordinal=ordinal if _is_int(ordinal) and "ordinal" not in damaged else None,
            columns=tuple(c for c in JOURNAL_COLUMNS if c in damaged),
        )
    assert isinstance(tokens, dict)
    return JournalRow(
        run_id=run_id,
        agent_id=agent_id,
        ordinal=ordinal,
        key=cells["key"],
        content_key=cells["content_key"],
        status=cells["status"],
        label=cells["label"],
        result_json=cells["result_json"],
        tokens=tokens,
        side_effects=bool(side_effects),
        source_run=cells["source_run"],
    )


def sound_journal_row(
    run_id: str,
    values: Sequence[Any],
    tokens_seen: dict[str, dict[str, int]],
    result_checked: bool = False,
) -> JournalRow | None:
    """The journal entry of ``run_id`` whose cells are ``values`` (:data:`JOURNAL_COLUMNS` order, as a
    driver returns them), or ``None`` when any cell is not what its column holds — then
    :func:`journal_row_from_cells` says which. The fast path of a journal read: the same checks on a
    sound entry, without their bookkeeping. ``tokens_seen`` memoizes the decoded ``tokens_json`` texts
    of one read (a run's calls mostly report the same usage); each entry gets its own copy.
    ``result_checked``: the database found ``result_json`` to be strict JSON (RFC 8259, which
    :func:`json.loads` reads too), so it is not parsed here."""
    agent_id, ordinal, key, content_key, status, label, result_json, tokens_json, side_effects, source_run = (
        values
    )
    if not (
        agent_id.__class__ is str
        and agent_id
        and ordinal.__class__ is int
        and ordinal >= 0
        and key.__class__ is str
        and content_key.__class__ is str
        and status.__class__ is str
        and status
        and label.__class__ is str
        and (result_json is None or result_json.__class__ is str)
        and tokens_json.__class__ is str
        and (side_effects.__class__ is bool or (side_effects.__class__ is int and side_effects in (0, 1)))
        and (source_run is None or source_run.__class__ is str)
    ):
        return None
    tokens = tokens_seen.get(tokens_json)
    if tokens is None:
        try:
            decoded = json.loads(tokens_json)
        except ValueError:
            return None
        if not (isinstance(decoded, dict) and all(_is_int(v) for v in decoded.values())):
            return None
        tokens = tokens_seen[tokens_json] = decoded
    if result_json is not None and not result_checked:
        try:
            json.loads(result_json)
        except ValueError:
            return None
    return _journal_row(
        run_id,
        agent_id,
        ordinal,
        key,
        content_key,
        status,
        label,
        result_json,
        dict(tokens),
        bool(side_effects),
        source_run,
    )


def merge_journal_rows(old: JournalRow, new: JournalRow) -> JournalRow:
    """The entry ``old`` becomes when a later event of the same call writes ``new``: the store's journal
    upsert, applied in memory (ordinal and identity of ``old``; status and tokens of ``new``; key,
    content key and label of ``new`` unless empty; result and source run of ``new`` unless ``None``;
    side effects if either had them). Lets a batch write one row per call instead of one per event."""
    return _journal_row(
        old.run_id,
        old.agent_id,
        old.ordinal,
        new.key or old.key,
        new.content_key or old.content_key,
        new.status,
        new.label or old.label,
        new.result_json if new.result_json is not None else old.result_json,
        new.tokens,
        old.side_effects or new.side_effects,
        new.source_run if new.source_run is not None else old.source_run,
    )


def batch_journal_rows(events: Sequence[Event], ordinal: Callable[[Event], int]) -> list[JournalRow]:
    """The journal rows a batch of events writes, one per call (``(run_id, agent_id)``) in the order of
    each call's first event: a call's later events in the batch are merged into its row
    (:func:`merge_journal_rows`), so the store writes what writing them one by one would leave.
    ``ordinal(event)`` numbers a call the first time it is asked about it."""
    rows: dict[tuple[str, str], JournalRow] = {}
    for event in events:
        if event.agent_id is None or event.type not in JOURNALED_TYPES:
            continue
        row = journal_row_for(event, ordinal(event))
        if row is None:
            continue
        at = (event.run_id, event.agent_id)
        before = rows.get(at)
        rows[at] = row if before is None else merge_journal_rows(before, row)
    return list(rows.values())


def release_order(completed: Iterable[tuple[int, str]], delivered: Iterable[tuple[int, Any]]) -> list[str]:
    """The order a run completed (or released) its calls: ``completed`` is ``(sequence, agent id)`` of
    its ``agent.completed``/``agent.cached`` events, ``delivered`` ``(sequence, body)`` of its
    ``agent.delivered`` events (the stored JSON text or its bytes, or the payload); a call is placed where it is
    last named (a call replayed in the realm is named first by its ``agent.cached``, as it was taken,
    then by the delivery that released it). A body that does not read names nothing. Raises nothing."""
    place: dict[str, tuple[int, int]] = {}
    for sequence, agent_id in completed:
        place[agent_id] = (sequence, 0)
    for sequence, body in delivered:
        payload = body
        if isinstance(body, str | bytes):
            try:
                payload = json.loads(body).get("payload")  # bytes that are not UTF-8: a ValueError
            except (ValueError, AttributeError, RecursionError):
                continue
        ids = payload.get("agentIds") if isinstance(payload, dict) else None
        if isinstance(ids, list):
            for i, agent_id in enumerate(ids):
                if isinstance(agent_id, str):
                    place[agent_id] = (sequence, i + 1)
    return sorted(place, key=place.__getitem__)


def check_batch(events: Sequence[Event]) -> None:
    """Refuse a batch of events that breaks its own order: within it, each event of a run has the
    sequence one more than the run's event before it (DESIGN: "sequence (monotonic per run)"; a batch
    is one writer's consecutive events, so a gap, a repeat or a step back in it is a writer's bug that
    must not reach the log). Where the batch starts is the store's check: after the run's newest
    stored event (:class:`~workflow_mcp.errors.SequenceConflictError`), and possibly after a hole,
    which is what a refused batch leaves (its sequences are never reused).

    Raises:
        EventBatchError: names the run, the event's place in the batch and both sequences.
    """
    last: dict[str, int] = {}
    for index, event in enumerate(events):
        before = last.get(event.run_id)
        if before is not None and event.sequence != before + 1:
            raise EventBatchError(event.run_id, index, event.sequence, before)
        last[event.run_id] = event.sequence


def journal_row_for(event: Event, ordinal: int) -> JournalRow | None:
    """The journal row an agent event implies (``None`` for other events)."""
    p = event.payload
    if event.agent_id is None:
        return None
    t = event.type
    if t == "agent.queued":
        status = "queued"
    elif t == "agent.started":
        status = "started"
    elif t == "agent.completed":
        status = "completed" if p.get("outcome", "completed") == "completed" else str(p.get("outcome"))
    elif t == "agent.cached":
        status = "cached"
    elif t == "agent.failed":
        status = "failed"
    else:
        return None
    has_result = t in ("agent.completed", "agent.cached")
    usage = p.get("tokenUsage")
    return _journal_row(
        event.run_id,
        event.agent_id,
        ordinal,
        str(p.get("key", "")),
        str(p.get("contentKey", "")),
        status,
        str(p.get("label", "")),
        _encode(p.get("result")) if has_result else None,
        {k: int(v) for k, v in dict(usage).items() if isinstance(v, int)} if usage else {},
        bool(p.get("sideEffects", False)),
        p.get("fromRunId") if t == "agent.cached" else None,
    )


class RunStore(Protocol):
    """Persistence of runs. ``append`` returns only once the event is durable (committed).

    Every write may raise :class:`~workflow_mcp.errors.StoreReadOnlyError`,
    :class:`~workflow_mcp.errors.StoreFullError` or :class:`~workflow_mcp.errors.StoreCorruptError`;
    a failed write changes nothing.
    """

    def create_run(self, record: RunRecord) -> None:
        """Record a new run and claim it for this store's owner; when ``record.resumed_from`` names a
        stored run, claim that one too (one transaction: both claims or neither). When it names an
        origin outside the store (an imported Claude Code run, ``claude:<runId>``), there is nothing to
        claim, so the run is refused while another run resuming that origin still holds its claim.

        Raises:
            RunClaimedError: a live owner holds the claim of ``record.resumed_from``, or of a run
                resuming the same origin outside the store.
            StoreError: the run id, or the owner's idempotency key, is already used.
        """
        ...

    def get_run(self, run_id: str) -> RunRecord | None: ...

    def find_idempotent(self, owner: str | None, key: str) -> RunRecord | None: ...

    def list_runs(self, limit: int = 50) -> list[RunRecord]: ...

    def append(self, event: Event) -> None: ...

    def append_many(self, events: list[Event]) -> None:
        """Commit ``events`` in one transaction, all or none; a run event of ``RELEASING_TYPES``
        releases the claims its run holds in that same transaction.

        Raises:
            EventBatchError: within the batch, a run's sequences are not consecutive (:func:`check_batch`).
            SequenceConflictError: a sequence is not after the newest stored one of its run.
        """
        ...

    def flush(self) -> None: ...

    def events(self, run_id: str, after: int = 0, limit: int | None = None) -> list[Event]: ...

    def damaged_events(self, run_id: str) -> list[Event]:
        """The events of ``run_id`` stored with a damaged body, as the stand-ins :meth:`events` reads
        them as (``payload["damaged"]``: ``{sequence, columns, note}``), in order; ``[]``: none."""
        ...

    def events_of_types(self, run_id: str, types: Collection[str]) -> list[Event]:
        """The events of ``run_id`` whose type is one of ``types`` (``EVENT_TYPES`` names), in order,
        as :meth:`events` reads them (a damaged row is its stand-in); ``[]``: none, or an unknown run.
        Read through an index on the type, so a resume's look at a long log (the ``turn`` of each
        ``agent.completed``/``agent.cached``, each ``checkpoint.resolved``) costs only those events."""
        ...

    def last_sequence(self, run_id: str) -> int: ...

    def last_run_event(self, run_id: str) -> str | None:
        """Type of the run's newest event of :data:`~workflow_mcp.state.STATUS_OF_EVENT` (``None``
        before its first); ``state.status_of`` turns it into the run's status."""
        ...

    def last_run_events(self, run_ids: Collection[str]) -> dict[str, str | None]:
        """:meth:`last_run_event` of each of ``run_ids`` (an unknown run: ``None``), read in one query
        per :data:`STATUS_BATCH` runs — what a page of listed runs costs, whatever its length."""
        ...

    def unfinished_runs(self) -> list[RunRecord]:
        """Runs whose status is not ``state.TERMINAL`` (queued or running)."""
        ...

    def recover(self, active: Collection[str], interrupted: InterruptedEvent) -> list[str]:
        """Store ``interrupted(record, sequence, reason)`` for each unfinished run whose owner is gone
        (a dead process, or this store's own run not in ``active``: it stopped without recording its
        end), drop the claims of gone owners, and return those run ids. One write transaction that
        re-checks everything inside it, so concurrent recoveries record each run once; nothing is
        written when there is nothing to recover.
        """
        ...

    def heartbeat(self) -> None:
        """Renew this store's lease (owners call it every ``HEARTBEAT_S`` while they run something)."""
        ...

    def write_problem(self) -> StoreError | None:
        """Why nothing can be written now (read-only, damaged), or ``None``."""
        ...

    def journal(self, run_id: str) -> list[JournalRow]:
        """The readable journal entries of ``run_id`` by ordinal; a damaged entry is left out (see
        :meth:`journal_damage`), never a failure of the whole read."""
        ...

    def journal_damage(self, run_id: str) -> list[JournalDamage]:
        """The journal entries of ``run_id`` that :meth:`journal` leaves out because a cell is damaged
        (by ordinal; ``[]``: none)."""
        ...

    def journal_entries(self, run_id: str) -> list[JournalRow | JournalDamage]:
        """Every journal entry of ``run_id`` by ordinal, intact (:class:`JournalRow`) or damaged
        (:class:`JournalDamage`): what :meth:`journal` and :meth:`journal_damage` give, in one read (a
        resume needs both)."""
        ...

    def completion_order(self, run_id: str) -> list[str]:
        """The agent ids of ``run_id``'s ``agent.completed`` and ``agent.cached`` events, in the order
        the run completed (or released) its calls, which a resume of it replays
        (``engine/release.py``): each where it was last named, by those events or by an
        ``agent.delivered`` (a call replayed in the realm: :func:`release_order`)."""
        ...

    def request_cancel(self, run_id: str, reason: str) -> None: ...

    def cancel_requests(self, run_ids: list[str]) -> dict[str, str]: ...

    def put_artifact(self, run_id: str, artifact_id: str, name: str, mime_type: str, data: bytes) -> None: ...

    def get_artifact(self, run_id: str, artifact_id: str) -> tuple[str, str, bytes] | None: ...

    def close(self) -> None: ...


# -- the workflow library's sidecar -------------------------------------------------------------
@dataclass(frozen=True)
class LibraryVersion:
    """One stored version of a library workflow: catalog metadata and the exact source it describes.

    ``root`` is the real path of the workflows directory holding the file, ``file`` its name there;
    ``version`` is canonical semver (``library.canonical_version``); ``created_at`` an ISO-8601 UTC time.
    """

    root: str
    name: str
    version: str
    file: str
    source: str
    source_hash: str
    tags: tuple[str, ...] = ()
    category: str | None = None
    author: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""


@dataclass(frozen=True)
class LibraryDraft:
    """A draft: a source kept only in the sidecar (never in a workflows directory). One per ``name`` and
    ``root``; ``expires_at`` (ISO-8601 UTC) ``None`` keeps it until it is deleted or promoted."""

    draft_id: str
    root: str
    name: str
    source: str
    source_hash: str
    tags: tuple[str, ...] = ()
    category: str | None = None
    author: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    owner: str | None = None
    created_at: str = ""
    updated_at: str = ""
    expires_at: str | None = None


@dataclass(frozen=True)
class DeleteConfirmation:
    """What a delete prompt showed: the target (a version's file, or a draft) and the source hash it
    had. ``token_hash`` is the SHA-256 of the token the caller holds; ``expires_at`` is Unix seconds."""

    token_hash: str
    root: str
    name: str
    source_hash: str
    expires_at: float
    version: str | None = None
    draft_id: str | None = None
    file: str | None = None


class LibraryStore(Protocol):
    """Persistence of the workflow library's sidecar (versions, drafts, pending delete confirmations).

    Implementations: :class:`~workflow_mcp.store.library.SqlLibraryStore` over the SQLite state
    database or a PostgreSQL store's database (migration 4 of each: ``SqliteLibraryStore``,
    ``PostgresLibraryStore``), and :class:`~workflow_mcp.store.library.MemoryLibraryStore`. Every write may raise
    :class:`~workflow_mcp.errors.StoreError` (or a subclass: full, read-only, corrupt); a failed write
    changes nothing.
    """

    def add_version(self, entry: LibraryVersion) -> bool:
        """Store ``entry``; ``False`` (nothing stored) when ``root``/``name``/``version`` is already
        stored. Atomic: of two concurrent adds of one key, exactly one returns ``True``."""
        ...

    def versions(self, root: str | None = None, name: str | None = None) -> list[LibraryVersion]:
        """Stored versions, of one directory and/or name when given, in the order they were added."""
        ...

    def remove_version(self, root: str, name: str, version: str) -> bool:
        """Forget one version; ``False`` when it was not stored."""
        ...

    def put_draft(self, draft: LibraryDraft) -> tuple[LibraryDraft, bool]:
        """Store ``draft``, replacing the draft of the same ``root`` and ``name`` (which keeps its id and
        ``created_at``). Returns the stored draft and whether it is new."""
        ...

    def drafts(self, root: str | None = None) -> list[LibraryDraft]:
        """Stored drafts (of one directory when given), oldest first."""
        ...

    def get_draft(self, draft_id: str) -> LibraryDraft | None: ...

    def remove_draft(self, draft_id: str) -> bool:
        """Forget a draft; ``False`` when it was not stored."""
        ...

    def add_confirmation(self, confirmation: DeleteConfirmation) -> None: ...

    def take_confirmation(self, token_hash: str) -> DeleteConfirmation | None:
        """Remove and return the confirmation of ``token_hash`` (``None``: never issued, or taken
        already). Atomic: of two concurrent takes, at most one gets it."""
        ...
