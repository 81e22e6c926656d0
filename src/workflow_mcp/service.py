"""``WorkflowService``: the one facade the CLI, the MCP server and the Python API use.

It joins definitions (load, validate, discover), the engine (runs), providers and the store, and owns
every use case of a run: :meth:`~WorkflowService.start`, :meth:`~WorkflowService.resume` (the stored
source, args, limits, profile, directory, provider choice and fake script; overrides may only narrow
the limits), :meth:`~WorkflowService.cancel`, :meth:`~WorkflowService.await_run`, and the lifetime of
the providers runs use (built once per configuration by a
:class:`~workflow_mcp.providers.pool.ProviderPool`, shared by the runs, closed by
:meth:`~WorkflowService.shutdown`). The CLI and the MCP server call only this.

Every run it starts is recorded in the store before its first event, and every event is committed
before it is published, so a run survives the process that started it: ``recover()`` marks runs left
``running`` by a dead process as ``interrupted``, and :meth:`~WorkflowService.resume` continues any
earlier run from its journal. Starting or resuming a run claims it in the store (one executor per
run), so a second resume of the same run is refused instead of running its calls twice.

A run's syntax check runs in the run's own Node worker (one process per run, not two): a run from a
file or a stored source is prepared while its worker starts (:meth:`~WorkflowService.prepare_run`,
:meth:`~WorkflowService.prepare_resume`), then launched (:meth:`~WorkflowService.launch`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import hashlib
import json
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ._ended_runs import CANCELLABLE_ENDED, cancel_ended, mark_continued, note_start_failed, refuse_cancelled
from ._index import DiscoveryIndex
from ._plan import PlanReport, TokenEstimator, build_report, read_history
from ._preflight import refuse_unservable
from ._prices import PriceTable, load_prices, prices_path
from ._run_request import PreparedRun, ProviderChoice, RunLimits, RunOverrides
from .definitions.agents import AgentTypesReport, check_agent_types
from .definitions.discover import DiscoveredWorkflow, Discovery, Reachable, find_workflows, resolve_workflow
from .definitions.load import (
    PendingWorkflow,
    ValidationReport,
    Workflow,
    WorkflowWarning,
    load_workflow,
    prepare_workflow,
    validate_workflow,
)
from .definitions.profile import Profile, get_profile
from .engine.checkpoint import CheckpointAsker, CheckpointReply, journaled_decisions, parse_checkpoint_replies
from .engine.executor import AgentExecutor
from .engine.journal import JournalRecord, Replay, ResumePolicy, delivery_turns
from .engine.nested import ChildCheck
from .engine.run import MISSING, RunHandle, RunOptions, check_args, new_run_id, run_workflow
from .engine.worktree import settle_left_worktrees
from .errors import (
    IdempotencyKeyReusedError,
    InvalidInputError,
    RunFailedError,
    RunNotConfirmedError,
    RunNotFoundError,
    StoreError,
    StoreFullError,
    WorkflowMcpError,
    WorkflowNotFoundError,
)
from .events import Event, utc_now
from .library import Library, parse_draft_ref
from .providers.attachments import AttachmentError, read_attachments
from .providers.base import AgentProvider, AgentRequest, ImageInput
from .providers.pool import ProviderPool
from .providers.registry import ProviderInfo, ProviderNotLoggedInError, provider_names
from .realm.sandbox import Sandbox, check_sandbox
from .realm.worker import RealmWorker
from .state import TERMINAL, RunState, RunStatus, StateProjector, project_state, status_of
from .store import DATABASE_URL_ENV, HEARTBEAT_S, LEASE_TTL_S, database_url, heartbeat_every
from .store.base import JournalDamage, JournalRow, RunRecord, RunStore
from .store.library import MemoryLibraryStore, library_store_for
from .store.sqlite import default_home

if TYPE_CHECKING:
    from .engine.executor import RayCluster
    from .store.salvage import ExportReport, RepairReport

__all__ = [
    "DATABASE_URL_ENV",
    "MISSING",
    "AttachmentError",
    "ChildCheck",
    "ImageInputRefusedError",
    "PlanReport",
    "PreparedRun",
    "ProviderChoice",
    "ProviderNotLoggedInError",
    "RunLimits",
    "RunOverrides",
    "RunSummary",
    "WorkflowService",
    "check_store",
    "damaged_cells",
    "database_url",
    "export_runs",
    "provider_report",
    "read_fake_script",
    "repair_store",
    "request_fingerprint",
    "state_database",
]


@dataclass(frozen=True)
class RunSummary:
    """One line of ``runs list``: ``status`` is projected from the run's newest ``run.*`` event."""

    run_id: str
    workflow: str
    status: RunStatus
    created_at: str
    provider: str
    resumed_from: str | None
    damaged: tuple[str, ...] = ()
    """Columns of the run's stored record that are damaged (see ``RunRecord.damaged``)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "workflow": self.workflow,
            "status": self.status,
            "createdAt": self.created_at,
            "provider": self.provider,
            "resumedFrom": self.resumed_from,
            **({"damaged": list(self.damaged)} if self.damaged else {}),
        }


class _LiveState:
    """The projected state of a run this service executes, folded forward as each batch of its events
    is committed, so reading it never re-reads the log. Folds happen on the event loop; a reader in a
    worker thread takes a copy under the lock.

    ``stale``: a batch was refused by the store, so from then on the store, not this state, says what
    is durable (``status`` reads the store again). ``changed`` is set (and replaced) after every fold;
    ``ended`` once the state is terminal or stale."""

    __slots__ = ("changed", "ended", "lock", "projector", "stale")

    def __init__(self, run_id: str) -> None:
        self.projector = StateProjector(RunState(run_id=run_id))
        self.lock = threading.Lock()
        self.changed = asyncio.Event()
        self.ended = asyncio.Event()
        self.stale = False

    @property
    def state(self) -> RunState:
        return self.projector.state

    def fold(self, batch: Iterable[Event]) -> None:
        with self.lock:
            self.projector.apply_all(batch)
        self._wake(ended=self.projector.state.status in TERMINAL)

    def refused(self) -> None:
        self.stale = True
        self._wake(ended=True)

    def _wake(self, *, ended: bool) -> None:
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()
        if ended:
            self.ended.set()

    def snapshot(self) -> RunState:
        with self.lock:
            return self.projector.state.copy()


def _profile(name: str | None) -> Profile:
    """The profile called ``name`` (default the newest).

    Raises:
        InvalidInputError: no such profile (the message lists the known ones).
    """
    try:
        return get_profile(name)
    except KeyError as exc:
        raise InvalidInputError(str(exc.args[0])) from None


_database_url = database_url  # WorkflowService.open's parameter shadows the function


def _configured(options: RunOptions, sandbox: Sandbox | None = None) -> RunOptions:
    """``options`` with the ``[limits]`` of the configuration that applies in the run's directory
    (``workflow-mcp.toml``, else the user's ``config.toml``) filling what the caller left unset: the
    default agent timeout and stall window, and the rate-limit retry policy. The worker's sandbox is
    ``options.sandbox`` when set, else ``sandbox`` (the service's, e.g. ``--sandbox``), else the
    configuration's ``[realm] sandbox``.

    Raises:
        ProviderConfigError: the configuration file is malformed (file and key named).
    """
    from .engine.backoff import RetryPolicy
    from .providers.config import load_config

    conf = load_config(options.cwd)
    if options.sandbox == "none":
        chosen = sandbox if sandbox is not None else check_sandbox(conf.sandbox, "[realm] sandbox")
        if chosen != "none":
            options = dataclasses.replace(options, sandbox=chosen)
    limits = conf.limits
    if not limits:
        return options
    base = options.retry
    retry = RetryPolicy(
        retries=limits.get("rate_limit_retries", base.retries),
        base_ms=limits.get("rate_limit_base_ms", base.base_ms),
        max_ms=limits.get("rate_limit_max_ms", base.max_ms),
        max_retry_after_ms=base.max_retry_after_ms,
    )
    return dataclasses.replace(
        options,
        agent_timeout_ms=options.agent_timeout_ms or limits.get("agent_timeout_ms"),
        stall_ms=options.stall_ms or limits.get("stall_ms"),
        retry=retry,
    )


def _check_policy(policy: str) -> None:
    if policy not in ("content", "prefix"):
        raise InvalidInputError(f"unknown resume policy {policy!r}: use 'content' or 'prefix'")


IDEMPOTENCY_PARAMS = "idempotencyParams"

#: The event types a resume reads from the run it continues: each answer's realm delivery (``turn``)
#: and each journaled checkpoint decision (:meth:`WorkflowService._facts_of_log`).
_FACT_TYPES = ("agent.completed", "agent.cached", "agent.delivered", "checkpoint.resolved")
"""The key under a run record's options holding the fingerprint of the request its idempotency key came
with (runs started without a key have none)."""


def request_fingerprint(params: Mapping[str, Any]) -> str:
    """The SHA-256 (hex) of ``params`` as canonical JSON (sorted keys): what an idempotency key is
    compared by. Faces pass their request's parameters, defaults filled in and without the key itself
    or how long to wait; lone surrogates are hashed as written (``surrogatepass``)."""
    text = json.dumps(params, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _record_params(record: RunRecord) -> str:
    """The fingerprint of what a run does: its source, args, options, profile, directory and resume."""
    return request_fingerprint(
        {
            "sourceHash": record.source_hash,
            "args": record.args_json,
            "options": record.options,
            "profile": record.profile,
            "cwd": record.cwd,
            "resumedFrom": record.resumed_from,
            "resumePolicy": record.resume_policy,
        }
    )


def _damage_of(event: Event) -> dict[str, Any] | None:
    """The record of the damage of an event the store read as a stand-in, or ``None``."""
    damage = event.payload.get("damaged")
    if isinstance(damage, dict) and damage.get("sequence") == event.sequence and "columns" in damage:
        return damage
    return None


def _refuse_damaged(record: RunRecord) -> None:
    """A run is continued only as it was stored: one whose record has damaged cells is not.

    Raises:
        InvalidInputError: naming the damaged columns and what to do instead.
    """
    if record.damaged:
        raise InvalidInputError(
            f"run {record.run_id}'s stored record is damaged ({', '.join(record.damaged)}), so it cannot be "
            "continued as it was started; run `workflow-mcp store repair`, then start the file anew "
            f"(`workflow-mcp run FILE --resume-from {record.run_id}` still replays its recorded calls)"
        )


def _stored_args(record: RunRecord) -> Any:
    """The args run ``record`` was started with (``MISSING``: none, so ``args`` was ``undefined``)."""
    return MISSING if record.args_json is None else json.loads(record.args_json)


def _interrupted(record: RunRecord, sequence: int, reason: str) -> Event:
    """The ``run.interrupted`` event recovery stores for a run whose owner is gone (resumable)."""
    return Event(
        run_id=record.run_id,
        sequence=sequence,
        type="run.interrupted",
        payload={"reason": reason, "resumable": True},
        timestamp=utc_now(),
    )


class WorkflowService:
    """Facade over definitions, runs, providers and the store.

    ``store`` is any :class:`~workflow_mcp.store.RunStore`; ``cwd``/``home`` anchor discovery.
    ``notify`` receives one line for the user whenever this service recorded or chose something they
    did not ask for (a recovery pass that marked runs ``interrupted``, the provider picked when nothing
    is configured); the CLI and the MCP server write it to stderr. Without it the service is silent.
    ``providers`` is the pool the runs' providers come from (default: a new one).
    """

    def __init__(
        self,
        store: RunStore,
        *,
        cwd: str | None = None,
        home: str | None = None,
        notify: Callable[[str], None] | None = None,
        providers: ProviderPool | None = None,
        sandbox: Sandbox | None = None,
        executor: str | None = None,
        ray_address: str | None = None,
    ) -> None:
        self.store = store
        # Where live agent calls run (None: the user configuration's `executor`, else local).
        self.executor = executor
        self.ray_address = ray_address
        self._ray: RayCluster | None = None  # joined at the first run on Ray
        self.sandbox = sandbox  # the realm worker's OS sandbox (None: the configuration's [realm] sandbox)
        self.cwd = cwd or os.getcwd()
        self.home = home
        self.notify = notify
        # `is None`, not `or`: an empty pool has no providers yet, so it is falsy (it has a length).
        self.providers = providers if providers is not None else ProviderPool(on_pick=self._picked)
        self._closing: set[asyncio.Task[None]] = set()  # workers of prepared runs that were not launched
        self.live: dict[str, RunHandle] = {}
        self._states: dict[str, _LiveState] = {}  # the runs of self.live, their state kept as they go
        self._starting: set[str] = set()  # runs being created: claimed in the store, not yet live
        self._owners: dict[str, str | None] = {}  # the owner each run of self.live was started for
        self._settled: set[str] = set()  # ended runs whose missing terminal event recovery recorded
        # The run viewer's followed runs (executed elsewhere): their projection, folded forward per read.
        self._followed: collections.OrderedDict[str, RunState] = collections.OrderedDict()
        self._followed_lock = threading.Lock()
        self._watcher: asyncio.Task[None] | None = None
        self._agent_workflow: Workflow | None = None
        self._noting: set[asyncio.Task[None]] = set()  # notes waiting for their run to end
        self._library: Library | None = None
        self._index: DiscoveryIndex | None = None
        # Per stored run, what a resume reads from its event log, and the log length it was read at.
        # Kept up to date from the batches this service stores (a resume of a run it ran reads none).
        self._log_facts: dict[str, tuple[int, dict[str, CheckpointReply], dict[str, int]]] = {}
        self._facts_lock = threading.Lock()
        self._read_recovery = threading.Lock()
        self._read_recovered_at = -float("inf")  # time.monotonic() of the last read-time recovery pass

    @classmethod
    def open(
        cls,
        *,
        cwd: str | None = None,
        home: str | None = None,
        notify: Callable[[str], None] | None = None,
        sandbox: Sandbox | None = None,
        database_url: str | None = None,
        executor: str | None = None,
        ray_address: str | None = None,
    ) -> WorkflowService:
        """The service over the state database, ``$WORKFLOW_MCP_HOME/state.db`` (SQLite; created 0600 in
        a 0700 directory). ``store_notices`` then says what opening it changed or found (e.g. loose file
        modes tightened). ``sandbox`` runs every run's realm worker under that OS sandbox (``None``: the
        configuration's ``[realm] sandbox``; :mod:`workflow_mcp.realm.sandbox`). ``database_url``
        (default ``$WORKFLOW_MCP_DATABASE_URL``) names a PostgreSQL database shared with other
        servers instead (``postgresql://…``, :mod:`workflow_mcp.store.postgres`). ``executor``
        (``local`` or ``ray``; default the user configuration's ``executor``) and ``ray_address``
        (default its ``ray_address``, else ``$RAY_ADDRESS``) say where live agent calls run
        (:mod:`workflow_mcp.engine.executor`).

        Raises:
            StoreError: the database cannot be opened (damaged, from a newer release, unreachable; the
                message says).
        """
        from .store import open_store

        store = open_store(_database_url(database_url))
        return cls(
            store,
            cwd=cwd,
            home=home,
            notify=notify,
            sandbox=sandbox,
            executor=executor,
            ray_address=ray_address,
        )

    def _sandbox_for(self, cwd: str | None) -> Sandbox:
        """The worker sandbox of a run in ``cwd``: the service's, else the configuration's
        ``[realm] sandbox``.

        Raises:
            ProviderConfigError: the configuration file is malformed (file and key named).
        """
        if self.sandbox is not None:
            return self.sandbox
        from .providers.config import load_config

        return check_sandbox(load_config(cwd).sandbox, "[realm] sandbox")

    @property
    def database(self) -> str:
        """Where the runs are stored, for messages: the SQLite file or the PostgreSQL server (no password)."""
        where = getattr(self.store, "where", None)
        if isinstance(where, str):
            return where
        path = getattr(self.store, "path", None)
        return str(path) if path is not None else "memory"

    def _picked(self, notice: str) -> None:
        """The routing's line naming the provider it picked when nothing is configured, for ``notify``
        (the routing writes it as a command-line message; ``notify`` lines leave the prefix to the face)."""
        if self.notify is not None:
            self.notify(notice.removeprefix("workflow-mcp: "))

    @property
    def store_notices(self) -> list[str]:
        """What opening the store changed or found, one line each, for the user."""
        return list(getattr(self.store, "notices", ()))

    # -- definitions -------------------------------------------------------------------------
    def validate(
        self,
        path: str | None = None,
        *,
        source: str | None = None,
        profile: str | None = None,
        check_syntax: bool = True,
    ) -> ValidationReport:
        """Validate a file or inline source; never raises for an invalid workflow (see the report).
        ``check_syntax=False`` skips the V8 compile (tree-sitter only), as in :meth:`load`.

        Raises:
            InvalidInputError: ``profile`` names no known profile.
        """
        return validate_workflow(path, source=source, profile=_profile(profile), check_syntax=check_syntax)

    def agent_types(
        self,
        warnings: Iterable[WorkflowWarning],
        *,
        cwd: str | None = None,
        profile: str | None = None,
        reachable: Reachable | None = None,
    ) -> AgentTypesReport:
        """Resolve the agent types a workflow asks for (its loader ``warnings``) from ``cwd``, as a
        run started there would (:func:`~workflow_mcp.definitions.agents.check_agent_types`), with
        personal agents read from ``home``; ``reachable`` as in :meth:`list_workflows`."""
        return check_agent_types(
            warnings, cwd or self.cwd, self.home, profile=_profile(profile), reachable=reachable
        )

    def list_workflows(self, cwd: str | None = None, *, reachable: Reachable | None = None) -> Discovery:
        """Personal and project workflows visible from ``cwd`` (Claude's precedence and order).
        ``reachable`` (a predicate on real paths) skips, unread, what it refuses (an MCP server's file
        scope). Served from the live :attr:`index` (current on every call; refreshed by a watcher)."""
        return self.index.get(cwd or self.cwd, self.home, reachable=reachable)

    def find_workflow(
        self,
        name: str,
        *,
        cwd: str | None = None,
        profile: str | None = None,
        check_syntax: bool = True,
        reachable: Reachable | None = None,
    ) -> DiscoveredWorkflow:
        """The workflow ``name`` (exact, case-sensitive) resolves to from ``cwd`` by discovery alone,
        never a file path; ``reachable`` as in :meth:`list_workflows`.

        Raises:
            WorkflowNotFoundError: nothing visible (and reachable) has that name.
        """
        return resolve_workflow(
            name,
            cwd or self.cwd,
            self.home,
            profile=_profile(profile),
            check_syntax=check_syntax,
            reachable=reachable,
        )

    def load(
        self, target: str, *, cwd: str | None = None, profile: str | None = None, check_syntax: bool = True
    ) -> Workflow:
        """Load ``target``: a path to a file, or else a workflow name resolved through discovery.
        ``check_syntax=False`` leaves the V8 compile to the caller (the CLI does it in the run's own
        worker, so a run starts one Node process, not two).

        ``<name>@draft`` is the library's draft of that name.

        Raises:
            WorkflowNotFoundError: neither a file nor a known name.
            LibraryError: ``not_found`` for a ``<name>@draft`` with no live draft.
            WorkflowLoadError: the file breaks a loading rule.
            InvalidInputError: ``profile`` names no known profile.
        """
        file, prof = self._file_of(target, cwd, profile)
        if file is not None:
            return load_workflow(file, profile=prof, check_syntax=check_syntax)
        if parse_draft_ref(target) is not None:  # the library's draft of that name (no file)
            return self.library.draft_workflow(target, cwd=cwd)
        return resolve_workflow(target, cwd or self.cwd, self.home, profile=prof).workflow

    def _pending(self, target: str, *, cwd: str | None = None, profile: str | None = None) -> PendingWorkflow:
        """Like :meth:`load`, leaving V8's syntax check of a file to the caller (a run does it in its own
        worker, so it starts one Node process, not two); the verdict and its wording are :meth:`load`'s.
        A name resolves through discovery, which has already checked it.

        Raises:
            WorkflowNotFoundError: neither a file nor a known name.
            WorkflowLoadError: the file breaks a static loading rule.
        """
        file, prof = self._file_of(target, cwd, profile)
        if file is not None:
            return prepare_workflow(file, profile=prof)
        if parse_draft_ref(target) is not None:  # the library's draft of that name (no file)
            return PendingWorkflow.of(self.library.draft_workflow(target, cwd=cwd))
        return PendingWorkflow.of(resolve_workflow(target, cwd or self.cwd, self.home, profile=prof).workflow)

    def _file_of(self, target: str, cwd: str | None, profile: str | None) -> tuple[str | None, Profile]:
        """``(file, profile)``: the file ``target`` names (``None``: it is a workflow name).

        Raises:
            WorkflowNotFoundError: ``target`` looks like a path and no such file exists.
            InvalidInputError: ``profile`` is unknown.
        """
        prof = _profile(profile)
        candidate = Path(cwd or self.cwd, target).expanduser()
        looks_like_path = target.endswith(".js") or os.sep in target or target.startswith(".")
        if candidate.is_file() or looks_like_path:
            if not candidate.exists():
                raise WorkflowNotFoundError(f"workflow file {target!r} does not exist")
            return str(candidate), prof
        return None, prof

    # -- the workflow library ---------------------------------------------------------------
    @property
    def index(self) -> DiscoveryIndex:
        """The live discovery index :meth:`list_workflows` reads (:mod:`workflow_mcp._index`)."""
        if self._index is None:
            self._index = DiscoveryIndex(find_workflows)
        return self._index

    @property
    def library(self) -> Library:
        """The workflow library of ``cwd`` (:mod:`workflow_mcp.library`): its sidecar is the state
        database's library tables, SQLite or PostgreSQL (an in-memory twin beside an in-memory run
        store), its writers on this host are serialised across processes by ``<state dir>/library.lock``
        (on PostgreSQL the database decides races between hosts), and its global instructions are
        the first of ``$WORKFLOW_MCP_INSTRUCTIONS``, ``<cwd>/.workflow-mcp/instructions.md`` and
        ``<state dir>/instructions.md`` that exists."""
        if self._library is None:
            side = library_store_for(self.store)
            file_backed = not isinstance(side, MemoryLibraryStore)
            instructions = (
                [os.environ.get("WORKFLOW_MCP_INSTRUCTIONS", "")]
                if os.environ.get("WORKFLOW_MCP_INSTRUCTIONS")
                else []
            )
            instructions += [
                os.path.join(self.cwd, ".workflow-mcp", "instructions.md"),
                os.path.join(self.state_dir, "instructions.md"),
            ]
            self._library = Library(
                side,
                cwd=self.cwd,
                home=self.home,
                lock_path=os.path.join(self.state_dir, "library.lock") if file_backed else None,
                instructions=instructions,
            )
        return self._library

    def library_within(self, reachable: Reachable) -> Library:
        """:attr:`library` limited to the workflows directories ``reachable`` allows (an MCP server's
        file scope: over HTTP the personal directory is neither read nor written)."""
        return self.library.within(reachable)

    # -- runs --------------------------------------------------------------------------------
    def start_run(
        self,
        workflow: Workflow,
        *,
        provider: AgentProvider,
        args: Any = MISSING,
        options: RunOptions | None = None,
        resume_from: str | None = None,
        policy: ResumePolicy = "content",
        idempotency_key: str | None = None,
        owner: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        worker: RealmWorker | None = None,
        replay: Replay | None = None,
        provider_choice: ProviderChoice | None = None,
        child_check: ChildCheck | None = None,
        idempotency_params: str | None = None,
        run_id: str | None = None,
        artifacts: Sequence[tuple[str, ImageInput]] = (),
    ) -> RunHandle:
        """Record and start a run of a loaded ``workflow`` on a ``provider`` the caller built (and
        closes); returns its live handle. Needs a running event loop. :meth:`start` and :meth:`resume`
        are the use cases built on it.

        ``resume_from`` reuses the journal of an earlier run (any status) under ``policy``; a ready
        ``replay`` (e.g. an imported Claude Code run, with ``resume_from`` naming it) is used as is.
        ``idempotency_key`` returns the already-started run for a repeated key (``owner`` scopes
        keys). ``on_event`` sees each event after it is committed. ``provider_choice`` is recorded with
        the run so a resume makes the same choice (default: what ``provider`` stands for, a fake's
        script included). ``worker`` is a spawned realm worker the run takes over (else it spawns one).
        ``child_check`` is asked about every nested ``workflow()`` child before it is read and before it
        runs (the MCP server passes its file scope and source approval; default: every child may run).
        ``run_id``: the new run's id (default: a fresh one). ``artifacts`` (``(artifact_id, image)``
        pairs) are stored with the run after it is recorded and before anything of it runs.

        Raises:
            RunNotFoundError: ``resume_from`` names no stored run.
            InvalidInputError: ``policy`` is unknown, ``resume_from`` is still running, or ``args``
                cannot cross to the realm and the store (a non-finite number, a lone UTF-16
                surrogate, nested past ``MAX_VALUE_DEPTH``, 256 levels).
            RunClaimedError: another live process already resumes ``resume_from``.
            StoreError: the store cannot record the run (read-only, full or damaged; the message says).
        """
        check_args(args)
        opts = options or RunOptions(cwd=self.cwd, home=self.home)
        if opts.cwd is None:
            opts = RunOptions(**{**opts.__dict__, "cwd": self.cwd, "home": opts.home or self.home})
        if opts.worktree_root is None:
            opts = RunOptions(**{**opts.__dict__, "worktree_root": str(default_home() / "worktrees")})
        if opts.sandbox == "none":
            # The sandbox is a security setting: every way into a run applies it, this one included
            # (a caller's own RunOptions, the built-in agent_run workflow).
            opts = dataclasses.replace(opts, sandbox=self._sandbox_for(opts.cwd))
        if resume_from is not None and replay is None:
            _check_policy(policy)
            self._refuse_resuming_a_live_run(resume_from)
            replay = self.replay_for(resume_from, policy)
        run_id = run_id or new_run_id()
        record = RunRecord(
            run_id=run_id,
            workflow_name=workflow.meta.name,
            workflow_path=workflow.path,
            source_hash=workflow.source_hash,
            source=workflow.source,
            created_at=utc_now(),
            args_json=None if args is MISSING else json.dumps(args, ensure_ascii=False),
            options={
                k: v
                for k, v in opts.__dict__.items()
                if v is not None
                and k
                not in ("cwd", "home", "worktree_root", "retry", "checkpoint_replies", "sandbox", "images")
            }
            | {"providerConfig": (provider_choice or ProviderChoice.of_provider(provider)).to_json()},
            provider=getattr(provider, "name", ""),
            profile=_profile(opts.profile).name,
            cwd=opts.cwd,
            resumed_from=resume_from,
            resume_policy=policy if resume_from else None,
            idempotency_key=idempotency_key,
            owner=owner,
            owner_pid=os.getpid(),
            owner_host=socket.gethostname(),
        )
        if idempotency_key is not None:
            params = idempotency_params or _record_params(record)
            record = dataclasses.replace(record, options={**record.options, IDEMPOTENCY_PARAMS: params})
            existing = self.find_idempotent_run(idempotency_key, owner, params=params)
            if existing is not None and existing in self.live:
                return self.live[existing]
        executor = self._executor_for(provider_choice or ProviderChoice.of_provider(provider), opts)
        self._starting.add(run_id)
        try:
            self.store.create_run(record)  # claims the run, and the run it resumes
            # Stored before the run starts: a run that could not keep its inputs (a full disk) never
            # runs, so nothing is done that a resume could not hand the same inputs again.
            for artifact_id, image in artifacts:
                try:
                    self.store.put_artifact(run_id, artifact_id, image.name, image.mime_type, image.data)
                except StoreFullError as exc:
                    raise StoreFullError(
                        exc.path,
                        directory=exc.directory,
                        free_bytes=exc.free_bytes,
                        file_size_limit=exc.file_size_limit,
                        then=f"start it again: run {run_id} could not store its {artifact_id} and never ran",
                    ) from exc
        except BaseException:
            self._starting.discard(run_id)
            raise

        live = self._states[run_id] = _LiveState(run_id)
        self._remember_facts(run_id, (0, {}, {}))  # a new run's log is empty

        def persist(batch: list[Event]) -> None:
            try:
                self.store.append_many(batch)
            except BaseException:
                live.refused()
                self._forget_facts(run_id)
                raise
            live.fold(batch)
            self._fold_facts(run_id, batch)
            if on_event is not None:
                for event in batch:
                    on_event(event)

        handle = run_workflow(
            workflow,
            provider=provider,
            args=args,
            options=opts,
            run_id=run_id,
            persist=persist,
            replay=replay,
            resumed_from=resume_from,
            worker=worker,
            child_check=child_check,
            executor=executor,
        )
        self.live[run_id] = handle
        self._owners[run_id] = owner
        self._starting.discard(run_id)
        self._ensure_watcher()
        return handle

    # -- where agent calls run (engine/executor.py) ---------------------------------------------
    def _executor_for(self, choice: ProviderChoice, options: RunOptions) -> AgentExecutor | None:
        """The executor of a run (``None``: local): ``--executor``, else the user configuration's
        ``executor``. On Ray the run's provider is rebuilt on the workers from ``choice`` and the
        configuration in the run's directory; the cluster is joined once, at the first such run.

        Raises (before anything is recorded):
            ExecutorUnavailableError: Ray is not installed (names the extra), its address cannot be
                reached (names it), or a fake script that Ray cannot answer the same way.
            ProviderConfigError: the configuration file is malformed (file and key named).
        """
        from .providers.config import load_config

        conf = load_config(options.cwd)
        kind = self.executor or conf.executor
        if kind == "local" or options.dry_run:
            return None
        if kind != "ray":
            raise InvalidInputError(f"unknown executor {kind!r}: use 'local' or 'ray'")
        from .engine.executor import ProviderSpec, RayCluster, check_remote_script

        check_remote_script(choice.fake_script)
        if self._ray is None:  # not joined ahead by _join_ray: join now (blocks this thread)
            self._ray = RayCluster.connect(self.ray_address or conf.ray_address)
        return self._ray.executor(
            ProviderSpec(
                name=choice.name, cwd=options.cwd or self.cwd, config=conf, fake_script=choice.fake_script
            )
        )

    async def _join_ray(self, cwd: str) -> None:
        """Join the Ray cluster of the runs in ``cwd`` ahead of their start, in a thread (the event loop
        keeps serving meanwhile), when they run on Ray and it is not joined yet. Raises what
        :meth:`_executor_for` raises."""
        if self._ray is not None or self.executor == "local":
            return
        from .providers.config import load_config

        conf = load_config(cwd)
        if (self.executor or conf.executor) != "ray":
            return
        from .engine.executor import RayCluster

        joined = await asyncio.to_thread(RayCluster.connect, self.ray_address or conf.ray_address)
        if self._ray is None:
            self._ray = joined
        else:  # another start joined meanwhile
            await asyncio.to_thread(joined.close)

    # -- run use cases -----------------------------------------------------------------------
    def provider_names(self, cwd: str | None = None) -> list[str]:
        """Every provider name a run in ``cwd`` (default: the service's directory) may name, sorted:
        the registered ones (entry points and in-process registrations), the named ones its
        configuration defines and the presets (:mod:`workflow_mcp.providers.named`). A configuration
        that does not load adds no names (the run reports it)."""
        from .providers.config import load_config
        from .providers.named import known_names

        try:
            return known_names(load_config(cwd or self.cwd))
        except InvalidInputError:
            return provider_names()

    def provider_info(self, name: str, cwd: str | None = None) -> ProviderInfo:
        """What probing provider ``name`` finds (installed, version, login, capabilities) under the
        configuration of ``cwd`` (default: the service's directory), starting no agent. Call it
        outside the event loop (e.g. in a worker thread): a configured provider is built (and
        closed) to read the capabilities its settings declare.

        Raises:
            UnknownProviderError: no registered, configured or preset provider is called ``name``.
            ProviderConfigError: the configuration does not load, or ``name``'s ``use`` names nothing.
        """
        from .providers.config import load_config
        from .providers.named import probe_named, resolve_provider

        conf = load_config(cwd or self.cwd)
        return probe_named(resolve_provider(name, conf), built=True, source=conf.where)

    def provider(self, choice: ProviderChoice, *, cwd: str | None = None) -> AgentProvider:
        """The provider ``choice`` names for a run in ``cwd`` (default: the service's directory; the
        configuration there routes a choice without a name), from the service's pool: built once per
        configuration, shared by the runs, closed by :meth:`shutdown`.

        Raises (before any agent runs):
            InvalidInputError: a malformed fake script; an unknown or unavailable provider or a bad
                configuration (subclasses that name the configuration file and key).
        """
        return self.providers.get(choice.name, cwd=cwd or self.cwd, fake_script=choice.fake_script)

    def _provider_of(
        self, wanted: ProviderChoice | AgentProvider, cwd: str
    ) -> tuple[AgentProvider, ProviderChoice]:
        if isinstance(wanted, ProviderChoice):
            return self.provider(wanted, cwd=cwd), wanted
        return wanted, ProviderChoice.of_provider(wanted)  # the caller's own: the caller closes it

    async def prepare_run(
        self,
        target: str | Workflow,
        *,
        provider: ProviderChoice | AgentProvider | None = None,
        args: Any = MISSING,
        limits: RunLimits | None = None,
        ceiling: RunLimits | None = None,
        profile: str | None = None,
        cwd: str | None = None,
        resume_from: str | None = None,
        policy: ResumePolicy = "content",
        replay: Replay | None = None,
        child_check: ChildCheck | None = None,
    ) -> PreparedRun:
        """Check a new run without recording anything; :meth:`launch` starts it, :meth:`start` does both.

        ``target`` is a file path or a workflow name (resolved from ``cwd``, default the service's
        directory) — read while the run's Node worker starts, its syntax then checked in that worker —
        or an already loaded :class:`Workflow`. ``provider``: a :class:`ProviderChoice` (default: the
        configuration in ``cwd`` decides), or a provider the caller built and closes. ``limits`` are the
        run's own (:class:`RunLimits`), each at most ``ceiling``'s (a server's policy). ``profile``
        defaults to a loaded workflow's. ``resume_from`` reuses an earlier run's journal under
        ``policy`` (a new source with the limits given here; :meth:`prepare_resume` continues a run
        under its own); a ready ``replay`` (an imported Claude Code run) is used as is.
        ``child_check`` says which nested workflows the before-any-agent look (:mod:`._preflight`) may
        read (pass the one :meth:`launch` gets; ``None``: every child, as the engine runs them).

        Raises:
            WorkflowNotFoundError: ``target`` is neither a file nor a visible workflow name.
            RunNotFoundError: ``resume_from`` names no stored run.
            WorkflowLoadError: the workflow breaks a loading rule (V8's verdict included).
            InvalidInputError: an unknown profile or resume policy, ``resume_from`` still running, or
                a provider that cannot be built (see :meth:`provider`).
            RealmError: the run's Node worker could not start.
        """
        run_cwd = cwd or self.cwd
        await self._join_ray(run_cwd)
        if profile is None and isinstance(target, Workflow):
            profile = target.profile
        _profile(profile)
        journal = resume_from if replay is None else None
        if journal is not None:
            _check_policy(policy)
            self._refuse_resuming_a_live_run(journal)
        options = (
            (limits or RunLimits()).within(ceiling).options(profile=profile, cwd=run_cwd, home=self.home)
        )
        wanted = provider or ProviderChoice()
        if isinstance(target, Workflow):
            options = _configured(options, self.sandbox)
            agent, choice = self._provider_of(wanted, run_cwd)
            self._refuse_unservable(target, agent, options, child_check)
            if journal is not None:
                replay = self.replay_for(journal, policy)
            return PreparedRun(target, agent, choice, args, options, resume_from, policy, replay)
        name = target

        def read() -> tuple[PendingWorkflow, Replay | None]:
            pending = self._pending(name, cwd=run_cwd, profile=profile)
            return pending, self.replay_for(journal, policy) if journal is not None else replay

        return await self._prepare_in_own_worker(
            read,
            wanted,
            args=args,
            options=options,
            resume_from=resume_from,
            policy=policy,
            child_check=child_check,
        )

    async def prepare_resume(
        self,
        run_id: str,
        overrides: RunOverrides | None = None,
        *,
        ceiling: RunLimits | None = None,
        child_check: ChildCheck | None = None,
    ) -> PreparedRun:
        """Check the continuation of stored run ``run_id`` without recording anything; :meth:`launch`
        starts it, :meth:`resume` does both.

        The run continues as it was started: its stored source (checked by V8 in the new run's own
        worker), args, limits (``concurrency``, ``tokenBudget``, ``maxAgents``, ``agentTimeoutMs``,
        ``syncTimeoutMs``, heap), profile, directory and provider choice with its fake script, replaying
        every finished agent call of its journal. ``overrides`` (:class:`RunOverrides`) may narrow the
        limits, and replace the provider, args, directory or resume policy; ``ceiling`` (a server's
        policy) caps the limits; ``child_check`` is :meth:`prepare_run`'s.

        Raises:
            RunNotFoundError: no stored run ``run_id``.
            RunCancelledError: its user cancelled the run after it had ended (paused or interrupted).
            LimitWideningError: an override widens one of the run's limits.
            InvalidInputError: the run is still running, an unknown resume policy, or a provider that
                cannot be built (see :meth:`provider`).
            WorkflowLoadError: the stored source no longer loads (e.g. under a newer profile).
            RealmError: the run's Node worker could not start.
        """
        o = overrides or RunOverrides()
        record = self.store.get_run(run_id)
        if record is None:
            raise RunNotFoundError(run_id)
        _check_policy(o.policy)
        self._refuse_resuming_a_live_run(run_id)
        refuse_cancelled(self.store, run_id)  # checked again, atomically, when it is launched
        _refuse_damaged(record)
        profile = _profile(record.profile or None)
        limits = RunLimits.of_options(record.options).narrowed(o.limits, run_id=run_id, profile=profile)
        run_cwd = o.cwd or record.cwd or self.cwd
        await self._join_ray(run_cwd)
        stored = ProviderChoice.of_record(record)
        wanted = o.provider.instead_of(stored) if isinstance(o.provider, ProviderChoice) else o.provider
        options = limits.within(ceiling).options(profile=profile.name, cwd=run_cwd, home=self.home)
        replies = parse_checkpoint_replies(o.checkpoint_replies)
        journaled: dict[str, CheckpointReply] = {}

        def read() -> tuple[PendingWorkflow, Replay | None]:
            # In a thread while the worker boots: the run's log is read once, for both.
            journaled.update(self._checkpoint_decisions(run_id))
            pending = prepare_workflow(record.workflow_path, source=record.source, profile=profile)
            return pending, self.replay_for(run_id, o.policy)

        prepared = await self._prepare_in_own_worker(
            read,
            wanted or stored,
            args=o.args if o.args is not MISSING else _stored_args(record),
            options=options,
            resume_from=run_id,
            policy=o.policy,
            child_check=child_check,
        )
        prepared.options = dataclasses.replace(prepared.options, checkpoint_replies={**journaled, **replies})
        prepared.continues = True
        # An agent-run with image attachments: the same images, and a provider that takes them.
        images = self._stored_images(prepared.args) if record.workflow_path == AGENT_RUN_PATH else ()
        if images:
            try:
                _refuse_imageless(prepared.provider, "", (prepared.args or {}).get("options") or {})
            except BaseException:
                await prepared.discard()
                raise
            prepared.options = dataclasses.replace(prepared.options, images=images)
        return prepared

    def launch(
        self,
        prepared: PreparedRun,
        *,
        idempotency_key: str | None = None,
        owner: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        child_check: ChildCheck | None = None,
        idempotency_params: str | None = None,
    ) -> RunHandle:
        """Record and start a prepared run; returns its live handle. Synchronous, so nothing runs between
        a caller's last check (its run cap, an idempotency key) and the run's claim in the store. A
        repeated ``idempotency_key`` (scoped by ``owner``) returns the run already started with it when
        ``idempotency_params`` (a :func:`request_fingerprint` of the caller's request; default: of the
        run's own source, args, options, directory and resume) match the first use's, and raises
        :class:`~workflow_mcp.errors.IdempotencyKeyReusedError` otherwise.
        ``on_event`` and ``child_check`` are :meth:`start_run`'s.

        Raises:
            the errors of :meth:`start_run` (the prepared worker is then stopped).
        """
        try:
            existing = (
                self.find_idempotent_run(idempotency_key, owner, params=idempotency_params)
                if idempotency_key is not None
                else None
            )
        except IdempotencyKeyReusedError:
            self._discard_later(prepared)
            raise
        if existing is not None and existing in self.live:
            self._discard_later(prepared)
            return self.live[existing]
        run_id = self._mark_continuation(prepared)
        try:
            handle = self.start_run(
                prepared.workflow,
                provider=prepared.provider,
                args=prepared.args,
                options=prepared.options,
                resume_from=prepared.resume_from,
                policy=prepared.policy,
                idempotency_key=idempotency_key,
                owner=owner,
                on_event=on_event,
                worker=prepared.worker,
                replay=prepared.replay,
                provider_choice=prepared.choice,
                child_check=child_check,
                idempotency_params=idempotency_params,
                run_id=run_id,
            )
        except BaseException as exc:
            self._discard_later(prepared)
            self._unmark_continuation(prepared, run_id, exc)
            raise
        if handle.run_id != run_id:  # an idempotent repeat returned the run it started before
            self._unmark_continuation(prepared, run_id, "the same request had already started it")
        self._record_unused_replies(handle, prepared.options.checkpoint_replies)
        return handle

    # -- the continuation marker (a resume and a cancel of one ended run: one wins, _ended_runs) ----
    def _mark_continuation(self, prepared: PreparedRun) -> str | None:
        """The new run's id after the marker is on the run it continues; ``None`` for a new run."""
        if not prepared.continues or prepared.resume_from is None:
            return None
        run_id = new_run_id()
        try:
            mark_continued(self.store, prepared.resume_from, run_id, exclusive=prepared.exclusive)
        except BaseException:
            self._discard_later(prepared)
            raise
        return run_id

    def _unmark_continuation(self, prepared: PreparedRun, run_id: str | None, why: object) -> None:
        if run_id is not None and prepared.resume_from is not None:
            note_start_failed(self.store, prepared.resume_from, run_id, str(why))

    async def start(
        self,
        target: str | Workflow,
        *,
        provider: ProviderChoice | AgentProvider | None = None,
        args: Any = MISSING,
        limits: RunLimits | None = None,
        ceiling: RunLimits | None = None,
        profile: str | None = None,
        cwd: str | None = None,
        resume_from: str | None = None,
        policy: ResumePolicy = "content",
        idempotency_key: str | None = None,
        owner: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        child_check: ChildCheck | None = None,
    ) -> RunHandle:
        """Start a run: :meth:`prepare_run` then :meth:`launch` (arguments and errors are theirs)."""
        prepared = await self.prepare_run(
            target,
            provider=provider,
            args=args,
            limits=limits,
            ceiling=ceiling,
            profile=profile,
            cwd=cwd,
            resume_from=resume_from,
            policy=policy,
            child_check=child_check,
        )
        return self.launch(
            prepared, idempotency_key=idempotency_key, owner=owner, on_event=on_event, child_check=child_check
        )

    #: The longest a cost preview's dry run may take (a fake script's delays included).
    PLAN_TIMEOUT_S = 120.0

    async def plan(
        self,
        target: str | Workflow,
        *,
        provider: str | None = None,
        fake_script: Mapping[str, Any] | None = None,
        args: Any = MISSING,
        limits: RunLimits | None = None,
        ceiling: RunLimits | None = None,
        profile: str | None = None,
        cwd: str | None = None,
        child_check: ChildCheck | None = None,
        timeout_s: float | None = None,
    ) -> PlanReport:
        """The cost preview of a run (:class:`~workflow_mcp._plan.PlanReport`): a dry run of ``target``
        (as for :meth:`prepare_run`) with ``args`` and ``limits`` on the synthesizing fake provider
        (``fake_script`` steers its answers), recording nothing and starting no agent. Each call is
        routed as the configuration in ``cwd`` would route it with ``provider`` (``--provider``; ``None``:
        the configuration decides), and charged the tokens it is expected to use — from past runs of the
        same workflow in the store, else the per-model ``[estimates]`` — so budget-guarded loops stop
        where they would. Nested workflows run too, each asked of ``child_check``. The dry run is
        stopped after ``timeout_s`` seconds (default :attr:`PLAN_TIMEOUT_S`); the report then says so.

        Raises:
            WorkflowNotFoundError, WorkflowLoadError: as :meth:`prepare_run`.
            InvalidInputError: an unknown profile or provider, a malformed fake script or configuration.
            RealmError: the dry run's Node worker could not start.
        """
        from .providers.config import load_config
        from .providers.fake import FakeProvider
        from .providers.planning import PlanningProvider, planned_route
        from .providers.registry import UnknownProviderError

        run_cwd = cwd or self.cwd
        if profile is None and isinstance(target, Workflow):
            profile = target.profile
        _profile(profile)
        if provider is not None and provider not in self.provider_names(run_cwd):
            raise UnknownProviderError(provider, self.provider_names(run_cwd))
        conf = await asyncio.to_thread(load_config, run_cwd)
        auto = None
        if provider is None and not conf.configured:
            auto = await asyncio.to_thread(_auto_provider, conf.settings)
        planner = PlanningProvider(FakeProvider(fake_script), planned_route(conf, provider, auto))
        options = (
            (limits or RunLimits()).within(ceiling).options(profile=profile, cwd=run_cwd, home=self.home)
        )
        options = RunOptions(**{**options.__dict__, "dry_run": True})
        worker: RealmWorker | None = None
        if isinstance(target, Workflow):
            workflow = target
        else:
            name = target

            def read() -> tuple[PendingWorkflow, Replay | None]:
                return self._pending(name, cwd=run_cwd, profile=profile), None

            prepared = await self._prepare_in_own_worker(
                read, planner, args=args, options=options, resume_from=None, policy="content"
            )
            workflow, worker = prepared.workflow, prepared.worker
        history = await asyncio.to_thread(
            read_history, self.store, workflow.meta.name, include_fake=provider == "fake"
        )
        planner.estimate = TokenEstimator(history, conf.estimates)
        events: list[Event] = []
        handle = run_workflow(
            workflow,
            provider=planner,
            args=args,
            options=options,
            persist=events.extend,
            worker=worker,
            child_check=child_check,
        )
        limit = self.PLAN_TIMEOUT_S if timeout_s is None else timeout_s
        error: str | None = None
        try:
            async with asyncio.timeout(limit):
                await handle.result()
            status = "completed"
        except TimeoutError:
            handle.cancel("the dry run took too long")
            await handle.wait()
            status, error = "timeout", f"the dry run did not finish within {limit:g} s"
        except RunFailedError as exc:
            status, error = exc.status, exc.message
        return build_report(
            workflow={"name": workflow.meta.name, "path": workflow.path, "sourceHash": workflow.source_hash},
            events=events,
            planned=planner.calls,
            counts=handle.calls,
            token_budget=options.token_budget,
            estimates=conf.estimates,
            history=history,
            status=status,
            error=error,
        )

    async def confirm_preview(
        self,
        target: str | Workflow,
        *,
        above: int,
        confirm: Callable[[PlanReport], Awaitable[str | None]],
        provider: str | None = None,
        fake_script: Mapping[str, Any] | None = None,
        args: Any = MISSING,
        limits: RunLimits | None = None,
        ceiling: RunLimits | None = None,
        profile: str | None = None,
        cwd: str | None = None,
        child_check: ChildCheck | None = None,
    ) -> PlanReport:
        """Before a run is launched: its :meth:`plan` (same arguments); when the preview makes more than
        ``above`` agent calls, ``confirm(report)`` is awaited — a TTY prompt, an MCP elicitation — and
        answers ``None`` to go ahead or the reason it did not (``"you declined"``). Returns the report.

        Raises:
            RunNotConfirmedError: the preview exceeds ``above`` and ``confirm`` refused (its reason).
            the errors of :meth:`plan`.
        """
        report = await self.plan(
            target,
            provider=provider,
            fake_script=fake_script,
            args=args,
            limits=limits,
            ceiling=ceiling,
            profile=profile,
            cwd=cwd,
            child_check=child_check,
        )
        if report.agent_calls > above:
            refused = await confirm(report)
            if refused is not None:
                raise RunNotConfirmedError(str(report.workflow["name"]), report.agent_calls, above, refused)
        return report

    async def resume(
        self,
        run_id: str,
        overrides: RunOverrides | None = None,
        *,
        ceiling: RunLimits | None = None,
        idempotency_key: str | None = None,
        owner: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        child_check: ChildCheck | None = None,
    ) -> RunHandle:
        """Continue stored run ``run_id`` under its own options: :meth:`prepare_resume` then
        :meth:`launch` (arguments and errors are theirs). The new run replays every finished call."""
        prepared = await self.prepare_resume(run_id, overrides, ceiling=ceiling, child_check=child_check)
        return self.launch(
            prepared, idempotency_key=idempotency_key, owner=owner, on_event=on_event, child_check=child_check
        )

    async def prepare_claude_resume(
        self,
        path: str,
        live_copy: str | None = None,
        *,
        provider: ProviderChoice | AgentProvider | None = None,
        policy: ResumePolicy = "prefix",
        allow_side_effects: bool = False,
        allow_edits: bool = False,
    ) -> PreparedRun:
        """Import the Claude Code run at ``path`` (its ``wf_*.json`` record or transcript directory; only
        read, never written) and prepare its continuation here, replaying its journal under ``policy``
        (default ``prefix``, Claude's rule). ``live_copy`` runs a live workflow file instead of the saved
        script (byte-identical unless ``allow_edits``); ``allow_side_effects`` also replays recorded
        worktree calls. See :func:`~workflow_mcp.engine.claude_import.import_claude_run`.

        Raises:
            ClaudeImportError: (and its subclasses) the run cannot be read or does not match.
            InvalidInputError: a provider that cannot be built (see :meth:`provider`).
        """
        from .engine.claude_import import import_claude_run

        imported = import_claude_run(
            self,
            path,
            live_copy,
            policy=policy,
            allow_side_effects=allow_side_effects,
            allow_edits=allow_edits,
        )
        return await self.prepare_run(
            imported.workflow,
            provider=provider,
            args=imported.args,
            profile=imported.profile,
            resume_from=imported.resumed_from,
            policy=imported.replay.policy,
            replay=imported.replay,
        )

    async def _prepare_in_own_worker(
        self,
        read: Callable[[], tuple[PendingWorkflow, Replay | None]],
        wanted: ProviderChoice | AgentProvider,
        *,
        args: Any,
        options: RunOptions,
        resume_from: str | None,
        policy: ResumePolicy,
        child_check: ChildCheck | None = None,
    ) -> PreparedRun:
        """Start the run's Node worker first; while it boots, ``read()`` the source and the journal (in
        a thread) and build the provider; then take V8's verdict on the source from that same worker. A
        run costs one Node process, not two, and the host's share of its start overlaps Node's. The
        worker is stopped if anything fails."""
        options = _configured(options, self.sandbox)
        spawn = asyncio.create_task(RealmWorker.spawn(heap_mb=options.heap_mb, sandbox=options.sandbox))
        try:
            pending, replay = await asyncio.to_thread(read)  # meanwhile the loop starts the worker
            agent, choice = self._provider_of(wanted, options.cwd or self.cwd)
            worker = await spawn
        except BaseException:
            # Never leave the spawn pending: an event loop that closes cancels it mid-creation, and
            # Python 3.11 then waits forever for the half-made process transport.
            with contextlib.suppress(BaseException):
                await (await spawn).close()
            raise
        try:
            workflow = pending.complete(await worker.check(pending.sources) if pending.sources else [])
            self._refuse_unservable(workflow, agent, options, child_check)
        except BaseException:
            await worker.close()
            raise
        return PreparedRun(workflow, agent, choice, args, options, resume_from, policy, replay, worker)

    def _refuse_unservable(
        self,
        workflow: Workflow,
        provider: AgentProvider,
        options: RunOptions,
        child_check: ChildCheck | None = None,
    ) -> None:
        """Refuse (:class:`~workflow_mcp.errors.CallNotServableError`) a run whose source (or a nested
        workflow it names, as far as ``child_check`` lets it be read) certainly makes a call its
        provider configuration cannot serve (:mod:`._preflight`)."""
        refuse_unservable(
            workflow,
            provider,
            cwd=options.cwd or self.cwd,
            home=options.home,
            profile=options.profile,
            child_check=child_check,
        )

    def _discard_later(self, prepared: PreparedRun) -> None:
        """Stop a prepared run's worker that will not be launched (:meth:`shutdown` waits for it)."""
        if prepared.worker is None:
            return
        task = asyncio.get_running_loop().create_task(prepared.discard())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def cancel(self, run_id: str, reason: str = "cancelled by the user") -> str:
        """Cancel a run wherever it runs: directly when this process owns it, else through the store
        (the owning process notices within ``CANCEL_POLL_S``). Returns what happened:
        ``cancelling`` (this process), ``requested`` (another process), ``closed`` (the run had ended
        ``paused`` or ``interrupted`` and is now ``cancelled``: never resumed again, see
        :mod:`._ended_runs`) or the final status when the run had already ended otherwise (completed,
        failed and cancelled runs never change).

        Raises:
            RunNotFoundError: unknown run id.
            RunContinuedError: the ended run was already resumed (the message names the run to cancel).
        """
        handle = self.live.get(run_id)
        if handle is not None and handle.status == "running":
            handle.cancel(reason)
            return "cancelling"
        if self.store.get_run(run_id) is None:
            raise RunNotFoundError(run_id)
        self.recover()
        status = status_of(self.store.last_run_event(run_id))
        if status in CANCELLABLE_ENDED:
            return self._cancel_ended(run_id, reason)
        if status in TERMINAL:
            return status
        self.store.request_cancel(run_id, reason)
        return "requested"

    # -- cancelling an ended run (paused or interrupted: see _ended_runs) --------------------------
    def _cancel_ended(self, run_id: str, reason: str) -> str:
        outcome = cancel_ended(self.store, run_id, reason)
        if not isinstance(outcome, Event):
            return outcome  # it changed meanwhile (another process cancelled it first)
        live = self._states.get(run_id)
        if live is not None and not live.stale:
            live.fold([outcome])
        return "closed"

    CANCEL_POLL_S = 0.25

    def _ensure_watcher(self) -> None:
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.get_running_loop().create_task(self._watch_cancellations())

    async def _watch_cancellations(self) -> None:
        """While this process owns running runs: apply cancellations other processes asked for and
        renew the store lease every ``HEARTBEAT_S`` (a sixth of a shorter lease). A run that ended
        without its terminal event stored (e.g. a full disk) is recorded ``interrupted`` as soon as the
        store takes writes again."""
        loop = asyncio.get_running_loop()
        renewed = loop.time()
        every = min(HEARTBEAT_S, heartbeat_every(getattr(self.store, "lease_s", LEASE_TTL_S)))
        while True:
            running = [rid for rid, h in self.live.items() if h.status == "running"]
            unsettled = [
                rid
                for rid, h in self.live.items()
                if h.done and h.log.persist_error is not None and rid not in self._settled
            ]
            if not running and not unsettled:
                return
            if loop.time() - renewed >= every:
                renewed = loop.time()
                with contextlib.suppress(StoreError):  # the lease lapses; identity checks still hold
                    self.store.heartbeat()
                if unsettled:
                    with contextlib.suppress(StoreError):
                        self._recover()
                        self._settled.update(unsettled)
            try:
                requests = self.store.cancel_requests(running)
            except WorkflowMcpError:
                requests = {}  # the store went away; in-process cancellation still works
            for run_id, reason in requests.items():
                self.live[run_id].cancel(reason)
            await asyncio.sleep(self.CANCEL_POLL_S)

    #: The one-call workflow behind :meth:`run_agent` (and the MCP ``agent_run`` tool): a single
    #: agent() call is a run like any other — routed, validated, re-asked, journaled and resumable.
    AGENT_RUN_SOURCE = (
        "export const meta = { name: 'agent-run', description: 'One agent call, with routing, schema "
        "validation and retries' }\n"
        "return await agent(args.prompt, args.options)\n"
    )

    def agent_workflow(self) -> Workflow:
        """The built-in one-call workflow (loaded once)."""
        if self._agent_workflow is None:
            self._agent_workflow = load_workflow(source=self.AGENT_RUN_SOURCE, path=AGENT_RUN_PATH)
        return self._agent_workflow

    def run_agent(
        self,
        prompt: str,
        options: dict[str, Any] | None = None,
        *,
        provider: ProviderChoice | AgentProvider | None = None,
        limits: RunLimits | None = None,
        idempotency_key: str | None = None,
        owner: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        idempotency_params: str | None = None,
        attachments: Sequence[Mapping[str, Any] | ImageInput] | None = None,
        resolve_path: Callable[[str, str], str] | None = None,
    ) -> RunHandle:
        """One agent call (``options`` as agent()'s: label, schema, model, effort, agentType, …)
        through ``provider`` (as for :meth:`start`) — routing, schema validation and re-asks, events and
        the journal exactly as inside a workflow — under ``limits``. The handle's ``result()`` is the
        agent's answer (``None`` on a provider failure or skip).

        ``attachments`` are image attachments (``{"type": "image", "path"}`` relative to the service's
        directory, or ``{"type": "image", "data": <base64>, "mimeType"}``; rules and limits in
        :mod:`~workflow_mcp.providers.attachments`; ``resolve_path(raw, base)`` may refuse a path, as
        the MCP server's file scope does). They are stored with the run (its artifacts
        ``attachment-1`` …), so a resume hands the call the same images.

        Raises:
            InvalidInputError: ``options`` is not a JSON object, or the provider cannot be built.
            AttachmentError: an attachment breaks a rule (naming ``attachments[i].KEY``).
            ImageInputRefusedError: the call is routed to a provider without image input.
            PathRefusedError: ``resolve_path`` refused an attachment's path.
        """
        if options is not None and not isinstance(options, dict):
            raise InvalidInputError('agent options must be a JSON object, e.g. {"label": "triage"}')
        images = read_attachments(attachments, base=self.cwd, resolve=resolve_path)
        agent, choice = self._provider_of(provider or ProviderChoice(), self.cwd)
        run_id = new_run_id()
        args: dict[str, Any] = {"prompt": prompt, "options": options or {}}
        if images:
            _refuse_imageless(agent, prompt, options or {})
            args["attachments"] = [_attachment_ref(run_id, i, image) for i, image in enumerate(images)]
            if idempotency_key is not None and idempotency_params is None:
                # The stored args name this run's id; the request is the same whichever run it makes.
                idempotency_params = request_fingerprint(
                    {
                        "tool": "run_agent",
                        "prompt": prompt,
                        "options": options or {},
                        "provider": choice.to_json(),
                        "limits": dataclasses.asdict(limits or RunLimits()),
                        "cwd": self.cwd,
                        "attachments": [ref["sha256"] for ref in args["attachments"]],
                    }
                )
        run_options = (limits or RunLimits()).options(profile=None, cwd=self.cwd, home=self.home)
        handle = self.start_run(
            self.agent_workflow(),
            provider=agent,
            args=args,
            options=replace(run_options, images=images),
            idempotency_key=idempotency_key,
            owner=owner,
            on_event=on_event,
            provider_choice=choice,
            idempotency_params=idempotency_params,
            run_id=run_id,
            artifacts=[(f"attachment-{i + 1}", image) for i, image in enumerate(images)],
        )
        return handle

    def _stored_images(self, args: Any) -> tuple[ImageInput, ...]:
        """The image attachments a stored agent-run's ``args`` refer to, read back from the artifacts
        of the run that received them (``()`` for any other args).

        Raises:
            InvalidInputError: an attachment's artifact is missing or does not match its checksum.
        """
        refs = args.get("attachments") if isinstance(args, dict) else None
        if not isinstance(refs, list):
            return ()
        images: list[ImageInput] = []
        for ref in refs:
            found = self.store.get_artifact(str(ref.get("runId")), str(ref.get("artifactId")))
            if found is None or hashlib.sha256(found[2]).hexdigest() != ref.get("sha256"):
                raise InvalidInputError(
                    f"image attachment {ref.get('artifactId')} of run {ref.get('runId')} is missing or damaged "
                    "in the store; start the call again with its attachments"
                )
            images.append(ImageInput(data=found[2], mime_type=found[1], name=found[0]))
        return tuple(images)

    def _refuse_resuming_a_live_run(self, run_id: str) -> None:
        """Resuming a run that is still going would run its in-flight calls twice."""
        record = self.store.get_run(run_id)
        if record is None:
            return
        if run_id in self.live and self.live[run_id].status == "running":
            raise InvalidInputError(f"run {run_id} is still running here; wait for it or cancel it first")
        self.recover()
        if status_of(self.store.last_run_event(run_id)) not in TERMINAL:
            raise InvalidInputError(
                f"run {run_id} is still running (process {record.owner_pid} on {record.owner_host}); "
                f"wait for it, or cancel it with `workflow-mcp runs cancel {run_id}`, then resume"
            )

    def replay_for(self, run_id: str, policy: ResumePolicy) -> Replay:
        """The replay index built from ``run_id``'s journal (results it computed or replayed), plus the
        results it inherited and had not yet handed to its workflow when it stopped (see
        :meth:`_journal_records`).

        Raises:
            RunNotFoundError: unknown run id.
        """
        if self.store.get_run(run_id) is None:
            raise RunNotFoundError(run_id)
        entries = self.store.journal_entries(run_id)  # read once: the records and the damage notes
        records = self._journal_records(run_id, entries=entries)
        replay = Replay(records, policy, notes=self._damage_notes(run_id, records, entries))
        replay.realm_rows()  # the realm's replay table, made here: a resume reads while its worker starts
        return replay

    def damaged_events(self, run_id: str) -> list[Event]:
        """The events of ``run_id`` that were stored damaged, as the stand-ins the store reads them as
        (``payload["damaged"]``: ``{sequence, columns, note}``; see
        :func:`~workflow_mcp.store.sqlite.event_from_cells`); ``[]``: none. Costs a scan of the stored
        bodies, not a projection of the log.

        Raises:
            RunNotFoundError: unknown run id.
        """
        if self.store.get_run(run_id) is None:
            raise RunNotFoundError(run_id)
        return self.store.damaged_events(run_id)

    def damaged_journal(self, run_id: str) -> list[JournalDamage]:
        """The journal entries of ``run_id`` stored damaged, which no resume replays (their calls run
        again); ``[]``: none.

        Raises:
            RunNotFoundError: unknown run id.
        """
        if self.store.get_run(run_id) is None:
            raise RunNotFoundError(run_id)
        return self.store.journal_damage(run_id)

    def _damage_notes(
        self, run_id: str, records: list[JournalRecord], journal: list[JournalRow | JournalDamage]
    ) -> list[str]:
        """What a resume of ``run_id`` must say about its damaged events and journal entries
        (``journal``: its entries as :meth:`RunStore.journal_entries` read them): for each damaged
        journal entry, that its call will run again (the journal read leaves it out); for each damaged
        event, which call will run again (its result is in no intact journal entry) or is still
        replayed (the journal holds it)."""
        damaged = self.store.damaged_events(run_id)
        entries = [e for e in journal if isinstance(e, JournalDamage)]
        if not damaged and not entries:
            return []
        reusable = {r.agent_id: r for r in records if r.source_run_id == run_id}
        labels = {row.agent_id: row.label for row in journal if isinstance(row, JournalRow)}
        # Calls whose entry is gone (a call replayed in the realm has its agent.cached only).
        for event in self.store.events_of_types(run_id, ("agent.queued", "agent.cached")):
            if event.agent_id and not labels.get(event.agent_id):
                labels[event.agent_id] = str(event.payload.get("label") or "")
        notes = []
        for entry in entries:  # left out of the journal, so its call cannot be replayed from it
            if entry.agent_id is None:
                notes.append(f"{entry.message}: the call it recorded will run again")
                continue
            call = f"call {entry.agent_id}" + (
                f" ({labels[entry.agent_id]})" if labels.get(entry.agent_id) else ""
            )
            notes.append(f"{call} will run again: {entry.message}, so its result is not replayed")
        for event in damaged:
            damage = _damage_of(event) or {}
            columns = ", ".join(str(c) for c in damage.get("columns") or ())
            where = f"event {event.sequence} of run {run_id} is damaged ({columns})"
            agent_id = event.agent_id
            if agent_id is None:
                notes.append(
                    f"{where} and names no call: a call whose result only it recorded will run again "
                    "(`workflow-mcp store repair` rewrites it)"
                )
                continue
            call = f"call {agent_id}" + (f" ({labels[agent_id]})" if labels.get(agent_id) else "")
            if agent_id in reusable:
                notes.append(f"{where}; {call} is replayed from its intact journal entry")
            elif event.type in ("agent.completed", "agent.cached"):
                notes.append(f"{call} will run again: {where} and its result is in no intact journal entry")
        return notes

    #: How many runs back along ``resumed_from`` a replay looks for results a resume held unreleased.
    MAX_RESUME_CHAIN = 100

    def _checkpoint_decisions(self, run_id: str) -> dict[str, CheckpointReply]:
        """The human-checkpoint decisions journaled by ``run_id`` and the runs it resumed (nearest
        wins), replayed by its resume without asking again (engine/checkpoint.py)."""
        chain: list[str] = []
        current: str | None = run_id
        while current is not None and current not in chain and len(chain) < self.MAX_RESUME_CHAIN:
            chain.append(current)
            record = self.store.get_run(current)
            current = record.resumed_from if record is not None else None
        decisions: dict[str, CheckpointReply] = {}
        for rid in reversed(chain):
            decisions.update(self._facts_of_log(rid)[0])
        return decisions

    def _facts_of_log(self, run_id: str) -> tuple[dict[str, CheckpointReply], dict[str, int]]:
        """What a resume needs from ``run_id``'s event log — its journaled checkpoint decisions and the
        realm delivery of each of its answers (:func:`~workflow_mcp.engine.journal.delivery_turns`) —
        read from the events of those types only (:meth:`RunStore.events_of_types`), and again only
        when the log has grown since."""
        length = self.store.last_sequence(run_id)
        with self._facts_lock:
            known = self._log_facts.get(run_id)
            if known is not None and known[0] == length:
                return dict(known[1]), dict(known[2])
        events = self.store.events_of_types(run_id, _FACT_TYPES)
        facts = (length, journaled_decisions(events), delivery_turns(events))
        self._remember_facts(run_id, facts)
        return facts[1], facts[2]

    #: How many runs' log facts (:meth:`_facts_of_log`) the service keeps.
    LOG_FACTS_KEPT = 16
    #: The most answers a run's kept facts follow as it runs; a longer run's are read from its log
    #: when it is resumed (so a million-call run holds no million-entry map for the server's life).
    LOG_FACTS_MAX_CALLS = 100_000

    def _remember_facts(
        self, run_id: str, facts: tuple[int, dict[str, CheckpointReply], dict[str, int]]
    ) -> None:
        """Keep ``facts`` for ``run_id`` (the newest :attr:`LOG_FACTS_KEPT` runs kept)."""
        with self._facts_lock:
            self._log_facts.pop(run_id, None)
            while len(self._log_facts) >= self.LOG_FACTS_KEPT:
                self._log_facts.pop(next(iter(self._log_facts)))
            self._log_facts[run_id] = facts

    def _forget_facts(self, run_id: str) -> None:
        with self._facts_lock:
            self._log_facts.pop(run_id, None)

    def _fold_facts(self, run_id: str, batch: list[Event]) -> None:
        """Fold a batch this service stored for ``run_id`` into the facts it keeps of that run's log, so
        a resume of a run this service ran reads none of its log for them. Kept only while every batch
        follows the one before (a refused batch leaves a hole: the log is read again then)."""
        facts = [e for e in batch if e.type in _FACT_TYPES]
        with self._facts_lock:  # a resume reads them in a thread (_facts_of_log copies them out)
            known = self._log_facts.get(run_id)
            if known is None or not batch:
                return
            if batch[0].sequence != known[0] + 1:
                del self._log_facts[run_id]
                return
            if facts:
                known[1].update(journaled_decisions(facts))
                known[2].update(delivery_turns(facts))
                if len(known[2]) > self.LOG_FACTS_MAX_CALLS:
                    del self._log_facts[run_id]
                    return
            self._log_facts[run_id] = (batch[-1].sequence, known[1], known[2])

    def _journal_records(
        self, run_id: str, depth: int = 0, *, entries: list[JournalRow | JournalDamage] | None = None
    ) -> list[JournalRecord]:
        """The reusable records of ``run_id``: every call it completed or replayed, ranked by the order
        it did so; then, when it resumed another stored run, that run's records it never replayed —
        results it was still holding back to release them in their original order, or had not been
        asked for yet, when it stopped — ranked after its own in their original order. So a resume of a
        resume that was killed loses no completed result. (A run's own replayed rows stand for the
        inherited records with their content key, occurrence by occurrence, as the ``content`` policy
        matches them; ``prefix`` keys are unique.) ``entries``: the journal of ``run_id``, when already
        read."""
        records: list[JournalRecord] = []
        order = self.store.completion_order(run_id)
        rank = {agent_id: i for i, agent_id in enumerate(order)}
        turns = self._facts_of_log(run_id)[1]
        replayed: dict[str, int] = {}  # group (content key, else v2 key) -> rows replayed here
        for row in self.store.journal_entries(run_id) if entries is None else entries:
            if not isinstance(row, JournalRow):
                continue  # damaged: left out, so its call runs again (_damage_notes says so)
            if row.status not in ("completed", "cached") or row.result_json is None:
                continue
            try:
                result = json.loads(row.result_json)
            except ValueError:
                continue
            if row.status == "cached":
                group = row.content_key or row.key
                replayed[group] = replayed.get(group, 0) + 1
            records.append(
                JournalRecord(
                    key=row.key,
                    content_key=row.content_key,
                    agent_id=row.agent_id,
                    result=result,
                    tokens=row.tokens,
                    label=row.label,
                    side_effects=row.side_effects,
                    source_run_id=row.source_run or run_id,
                    completed=rank.get(row.agent_id, -1),
                    turn=turns.get(row.agent_id, -1),
                )
            )
        this = self.store.get_run(run_id)
        origin = this.resumed_from if this is not None else None
        if origin is None or depth >= self.MAX_RESUME_CHAIN or self.store.get_run(origin) is None:
            return records
        offset = len(order)
        later = max(turns.values(), default=-1) + 1  # the inherited records' deliveries come after
        # In call order, as this run took them: its first replayed rows of a group were those records.
        for record in self._journal_records(origin, depth + 1):
            group = record.content_key or record.key
            if replayed.get(group, 0) > 0:
                replayed[group] -= 1  # this run replayed it (its own row stands for it)
                continue
            records.append(
                replace(
                    record,
                    completed=offset + record.completed if record.completed >= 0 else -1,
                    turn=later + record.turn if record.turn >= 0 else -1,
                )
            )
        return records

    #: Events read per store query when a whole log is needed: the store is shared by every client of a
    #: server, and one query over a million events would hold it for seconds.
    EVENT_PAGE = 5_000

    def seconds_until_reset(self, run_id: str) -> float:
        """How long until the usage limit that paused run ``run_id`` resets: ``0`` when it has already
        reset, or the run did not pause for a usage limit, or the backend gave no reset time.

        Raises:
            RunNotFoundError: unknown run id.
        """
        import datetime

        state = self.status(run_id)
        if state.status != "paused" or state.paused_reason != "usage_limit" or not state.resets_at:
            return 0.0
        try:
            when = datetime.datetime.fromisoformat(state.resets_at.replace("Z", "+00:00"))
        except ValueError:
            return 0.0
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.UTC)
        return max(0.0, (when - datetime.datetime.now(datetime.UTC)).total_seconds())

    def status(self, run_id: str) -> RunState:
        """The projected state of a stored run (a copy: later events do not change it).

        For a run this service executes, the state it keeps as the run's events are committed (the same
        state a projection of the stored log gives, without reading it). For any other run the log is
        read in pages of :attr:`EVENT_PAGE` events; that is CPU work in proportion to the run's events,
        so async callers run it in a thread.

        Raises:
            RunNotFoundError: unknown run id.
        """
        live = self._states.get(run_id)
        if live is not None and not live.stale:
            return live.snapshot()
        if self.store.get_run(run_id) is None:
            raise RunNotFoundError(run_id)
        self._stored_status(run_id)  # a run whose owner is gone is recorded interrupted before projecting
        return project_state(self._all_events(run_id), run_id=run_id)

    # -- what calls cost: the user's price table (_prices) -----------------------------------------
    _price_table: tuple[tuple[str, int, int] | None, PriceTable] | None = None

    def prices(self) -> PriceTable:
        """The user's price table, ``$WORKFLOW_MCP_HOME/prices.toml`` (:mod:`workflow_mcp._prices`;
        empty, pricing nothing, without the file), read again whenever the file changes. Never fetched.

        Raises:
            PriceTableError: the file is unreadable or a key in it is not a price (file and key named).
        """
        path = prices_path()
        try:
            info = path.stat()
            stamp: tuple[str, int, int] | None = (str(path), info.st_mtime_ns, info.st_size)
        except OSError:
            stamp = None
        kept = self._price_table
        if kept is not None and kept[0] == stamp:
            return kept[1]
        table = load_prices(path)
        self._price_table = (stamp, table)
        return table

    # -- the run viewer's reads ---------------------------------------------------------------------
    FOLLOWED_RUNS = 64
    """Runs executed elsewhere whose projections :meth:`current_status` keeps between calls."""

    def current_status(self, run_id: str) -> RunState:
        """:meth:`status` for a reader that asks again and again (the run viewer, ``runs watch``): for a
        run another process executes, the projection is kept between calls (the newest
        :attr:`FOLLOWED_RUNS` runs) and folded forward with only the events stored since
        (:func:`~workflow_mcp.state.project_state`'s ``into``: a log folded in parts gives the state of
        folding it at once). Returns a copy; the same state :meth:`status` gives.

        Raises:
            RunNotFoundError: unknown run id.
        """
        live = self._states.get(run_id)
        if live is not None and not live.stale:
            return live.snapshot()
        with self._followed_lock:
            state = self._followed.pop(run_id, None)
            if state is None:
                if self.store.get_run(run_id) is None:
                    raise RunNotFoundError(run_id)
                state = RunState(run_id=run_id)
            if state.status not in TERMINAL:
                self._stored_status(run_id)  # a run whose owner is gone is recorded interrupted first
            project_state(self._all_events(run_id, after=state.last_sequence), into=state)
            self._followed[run_id] = state
            while len(self._followed) > self.FOLLOWED_RUNS:
                self._followed.popitem(last=False)
            return state.copy()

    def _all_events(self, run_id: str, after: int = 0) -> Iterator[Event]:
        """Every event of ``run_id`` after sequence ``after``, in order, read :attr:`EVENT_PAGE` at a time
        (the store's lock is held for one page, never for the whole log)."""
        while True:
            page = self.store.events(run_id, after, self.EVENT_PAGE)
            yield from page
            if len(page) < self.EVENT_PAGE:
                return
            after = page[-1].sequence

    def event_count(self, run_id: str) -> int:
        """How many events run ``run_id`` has stored (its newest sequence; one indexed lookup, 0 for an
        unknown run): what a projection of its log will cost."""
        return self.store.last_sequence(run_id)

    def running_count(self) -> int:
        """How many runs this process is running now (each holds its own Node worker)."""
        return sum(1 for handle in self.live.values() if handle.status == "running")

    def running_count_of(self, owner: str | None) -> int:
        """How many runs started by ``owner`` (exactly; ``None`` is the local user) this process is
        running now."""
        return sum(
            1
            for rid, handle in self.live.items()
            if handle.status == "running" and self._owners.get(rid) == owner
        )

    @property
    def state_dir(self) -> str:
        """The state directory: the folder of a file store, else ``$WORKFLOW_MCP_HOME``."""
        path = getattr(self.store, "path", None)
        return str(Path(path).parent) if isinstance(path, str | os.PathLike) else str(default_home())

    def events(self, run_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        if self.store.get_run(run_id) is None:
            raise RunNotFoundError(run_id)
        return self.store.events(run_id, after, limit)

    def list_runs(self, limit: int = 50) -> list[RunSummary]:
        """The newest ``limit`` runs, newest first, each with its stored status, truthful about dead
        owners as :meth:`run_status` is: the statuses of the whole list are one batched read
        (:meth:`RunStore.last_run_events`), and a second one for the unfinished runs not executed here
        when a recovery pass ran (at most one per :attr:`READ_RECOVERY_S`)."""
        return self._summaries(self.store.list_runs(limit))

    def _summaries(self, records: list[RunRecord]) -> list[RunSummary]:
        """:class:`RunSummary` of each of ``records``, in order, their statuses read in one batch."""
        statuses = {
            rid: status_of(t) for rid, t in self.store.last_run_events([r.run_id for r in records]).items()
        }
        active = self._active()
        unsure = [rid for rid, status in statuses.items() if status not in TERMINAL and rid not in active]
        if unsure and self._recover_for_read():
            statuses.update({rid: status_of(t) for rid, t in self.store.last_run_events(unsure).items()})
        return [
            RunSummary(
                run_id=r.run_id,
                workflow=r.workflow_name,
                status=statuses[r.run_id],
                created_at=r.created_at,
                provider=r.provider,
                resumed_from=r.resumed_from,
                damaged=r.damaged,
            )
            for r in records
        ]

    def damaged_columns(self, run_id: str) -> tuple[str, ...]:
        """The columns of ``run_id``'s stored record that are damaged (``()``: none; ``store repair``
        rewrites them).

        Raises:
            RunNotFoundError: unknown run id.
        """
        record = self.store.get_run(run_id)
        if record is None:
            raise RunNotFoundError(run_id)
        return record.damaged

    def recover(self) -> list[str]:
        """Record ``run.interrupted`` for every unfinished run whose owner is gone (its process died, or
        it stopped here without storing its end); returns their ids. Safe to call from any number of
        processes at once: the store re-checks inside one write transaction, so each run is recorded
        once. Queries never need write access: on a store that cannot be written (read-only, full,
        damaged) nothing is recorded and ``[]`` is returned.

        The worktrees a marked run left go through the rule of
        :func:`~workflow_mcp.engine.worktree.settle_worktree` (kept when an agent changed or committed
        something; each kept one is recorded as an ``artifact.created`` event of the run, so ``runs
        show`` lists it). The pass that marked runs, and only that one, says so through ``notify``:
        which runs, how to resume them, which worktrees it kept."""
        try:
            return self._recover()
        except StoreError:
            return []

    def _active(self) -> set[str]:
        # Copies first: reads call this from worker threads while the loop adds runs.
        return set(self._starting) | {rid for rid, h in list(self.live.items()) if not h.done}

    def _recover(self) -> list[str]:
        here: set[str] = set()  # runs of this process that ended without storing their end

        def interrupted(record: RunRecord, sequence: int, reason: str) -> Event:
            if record.owner_pid == os.getpid() and record.owner_host == socket.gethostname():
                here.add(record.run_id)
            return _interrupted(record, sequence, reason)

        marked = self.store.recover(self._active(), interrupted)
        kept = [path for run_id in marked for path in self._settle_worktrees(run_id)]
        if marked and self.notify is not None:
            self.notify(_recovery_notice(marked, here, kept))
        return marked

    def _settle_worktrees(self, run_id: str) -> list[str]:
        """Judge the worktrees interrupted run ``run_id`` left; record each kept one as an
        ``artifact.created`` event of the run (as the run would have) and return their paths."""
        kept = [
            (a, info)
            for a, info in settle_left_worktrees(default_home() / "worktrees", run_id)
            if info["kept"]
        ]
        if not kept:
            return []
        started = {
            e.agent_id: e
            for e in self._all_events(run_id)
            if e.type == "agent.started" and e.agent_id in {a for a, _ in kept}
        }
        last = self.store.last_sequence(run_id)
        events = []
        for offset, (agent_id, info) in enumerate(kept, start=1):
            call = started.get(agent_id)
            label = call.payload.get("label", "") if call is not None else ""
            events.append(
                Event(
                    run_id=run_id,
                    sequence=last + offset,
                    type="artifact.created",
                    payload={"kind": "worktree", "label": label, **info},
                    timestamp=utc_now(),
                    phase_id=call.phase_id if call is not None else None,
                    agent_id=agent_id,
                )
            )
        with contextlib.suppress(StoreError):  # the worktrees stay either way; the notice names them
            self.store.append_many(events)
        return [str(info["path"]) for _, info in kept]

    def store_problem(self) -> StoreError | None:
        """Why the store cannot record anything now (read-only, damaged), or ``None``."""
        return self.store.write_problem()

    # -- additions for the MCP server: lookups, owner scoping, bounded waits ------------------
    #: How often a wait on a run owned by another process re-reads the store.
    STORE_POLL_S = 0.1
    #: How often :meth:`wait_events` looks whether the log of a run owned by another process has grown
    #: (one indexed lookup of its newest sequence; the events are read once it has).
    EVENT_POLL_S = 0.02

    def load_source(
        self, source: str, *, profile: str | None = None, label: str | None = None, check_syntax: bool = True
    ) -> Workflow:
        """Load an inline workflow ``source`` (``label`` names it in messages; ``check_syntax=False`` skips
        the V8 compile as in :meth:`load`).

        Raises:
            WorkflowLoadError: the source breaks a loading rule.
        """
        return load_workflow(label, source=source, profile=_profile(profile), check_syntax=check_syntax)

    def load_stored(self, run_id: str, *, check_syntax: bool = True) -> Workflow:
        """The workflow a stored run ran: its recorded source, loaded again (its source hash and path
        are what source approval judges; ``check_syntax=False`` skips V8 as in :meth:`load`, which
        :meth:`prepare_resume` runs in the resumed run's own worker).

        Raises:
            RunNotFoundError: unknown run id.
            WorkflowLoadError: the stored source no longer loads (e.g. under a newer profile).
        """
        record = self.store.get_run(run_id)
        if record is None:
            raise RunNotFoundError(run_id)
        _refuse_damaged(record)
        return load_workflow(
            record.workflow_path,
            source=record.source,
            profile=record.profile or None,
            check_syntax=check_syntax,
        )

    def owner_of(self, run_id: str) -> str | None:
        """The ``owner`` a run was started with (``None``: the local user).

        Raises:
            RunNotFoundError: unknown run id.
        """
        record = self.store.get_run(run_id)
        if record is None:
            raise RunNotFoundError(run_id)
        return record.owner

    def find_idempotent_run(
        self, key: str, owner: str | None = None, *, params: str | None = None
    ) -> str | None:
        """The id of the run ``owner`` started with idempotency ``key``, or ``None``. ``params`` is the
        fingerprint of the new request's parameters (:func:`request_fingerprint`); a key is only ever
        good for the parameters it was first used with (runs stored before fingerprints: any).

        Raises:
            IdempotencyKeyReusedError: the run was started with other parameters than ``params``.
        """
        record = self.store.find_idempotent(owner, key)
        if record is None:
            return None
        stored = record.options.get(IDEMPOTENCY_PARAMS)
        if params is not None and stored is not None and stored != params:
            raise IdempotencyKeyReusedError(key, record.run_id)
        return record.run_id

    def list_runs_of(self, owner: str | None, limit: int = 50) -> list[RunSummary]:
        """Recent runs started by ``owner`` (exactly; ``None`` is the local user), newest first."""
        scan = min(max(limit * 20, 200), 5000)  # the store has no owner index yet: scan a bounded window
        return self._summaries([r for r in self.store.list_runs(scan) if r.owner == owner][:limit])

    def run_status(self, run_id: str) -> RunStatus:
        """The run's status from its newest ``run.*`` event (cheaper than :meth:`status`; for a run
        this service executes, read from the state it keeps, without a query).

        Raises:
            RunNotFoundError: unknown run id.
        """
        live = self._states.get(run_id)
        if live is not None and not live.stale:
            return live.state.status
        if self.store.get_run(run_id) is None:
            raise RunNotFoundError(run_id)
        return self._stored_status(run_id)

    #: How often (seconds) reads of unfinished runs that this service does not execute may look for gone
    #: owners (a recovery pass over the store): such a run reads ``interrupted`` at most this long after
    #: its owner is judged gone (its process died on this host, or its lease expired).
    READ_RECOVERY_S = 1.0

    def _stored_status(self, run_id: str) -> RunStatus:
        """The stored run's status, truthful about dead owners: a run that is not ``TERMINAL`` and not
        executed here is checked by a recovery pass (at most one per :attr:`READ_RECOVERY_S`; the store
        records each run once however many servers read it at once), then read again."""
        status = status_of(self.store.last_run_event(run_id))
        if status in TERMINAL or run_id in self._active() or not self._recover_for_read():
            return status
        return status_of(self.store.last_run_event(run_id))

    def _recover_for_read(self) -> bool:
        """Run :meth:`recover` unless a read did within :attr:`READ_RECOVERY_S`; whether it ran."""
        with self._read_recovery:
            now = time.monotonic()
            if now - self._read_recovered_at < self.READ_RECOVERY_S:
                return False
            self._read_recovered_at = now
        self.recover()
        return True

    def artifact(self, run_id: str, artifact_id: str) -> tuple[str, str, bytes] | None:
        """``(name, mime_type, data)`` of one stored artifact, or ``None``."""
        return self.store.get_artifact(run_id, artifact_id)

    def _has_ended(self, run_id: str) -> bool:
        return self.run_status(run_id) in TERMINAL

    def _following(self, run_id: str) -> tuple[RunHandle, _LiveState] | None:
        """The handle and kept state of a run this service still executes (its state is current)."""
        handle, live = self.live.get(run_id), self._states.get(run_id)
        if handle is None or live is None or live.stale or handle.done:
            return None
        return handle, live

    async def wait_events(
        self, run_id: str, after: int = 0, limit: int | None = None, wait_ms: int = 0
    ) -> list[Event]:
        """The durable events with ``sequence > after`` (at most ``limit``); when there are none yet
        and the run has not ended (:data:`~workflow_mcp.state.TERMINAL`), wait up to ``wait_ms``
        milliseconds for the next one.

        Events always come from the store (persisted before published), so a cursor taken from one
        answer never skips or repeats an event in the next, whichever process owns the run. A run this
        service executes wakes the wait as soon as its next batch is committed; for a run owned by another
        process the newest stored sequence is looked up every ``EVENT_POLL_S`` (20 ms) and the events
        are read once it has grown. Cancelling the wait never affects the run.

        Raises:
            RunNotFoundError: unknown run id.
        """
        events = self.events(run_id, after, limit)
        if events or wait_ms <= 0 or self._has_ended(run_id):
            return events
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_ms / 1000
        following = self._following(run_id)
        if following is not None:
            live = following[1]
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(deadline):
                    while live.state.last_sequence <= after and not live.ended.is_set():
                        await live.changed.wait()
            return self.events(run_id, after, limit)
        self.recover()  # a run whose process died is interrupted, not waited for
        while True:
            events = self.events(run_id, after, limit)
            remaining = deadline - loop.time()
            if events or remaining <= 0 or self._has_ended(run_id):
                return events
            # Every change a waiter can see, the run's end included, is a new event: until the log grows,
            # an indexed lookup of its newest sequence is all a poll costs.
            while self.store.last_sequence(run_id) <= after and (remaining := deadline - loop.time()) > 0:
                await asyncio.sleep(min(self.EVENT_POLL_S, remaining))

    def answer_checkpoints(self, run_id: str, asker: CheckpointAsker | None) -> bool:
        """Let ``asker`` answer the human checkpoints of live run ``run_id`` from now on (``None``:
        nobody; the next one pauses the run with ``checkpoint_required``). Returns whether the run
        is live here (a run that is not cannot be asked anything)."""
        handle = self.live.get(run_id)
        if handle is None:
            return False
        handle.set_checkpoint_asker(asker)
        return True

    async def await_run(
        self,
        run_id: str,
        wait_ms: int,
        *,
        on_progress: Callable[[RunState], Awaitable[None]] | None = None,
    ) -> RunState:
        """Wait up to ``wait_ms`` milliseconds for the run to end; return its projected state (a copy,
        terminal or not). A run that has already ended — any status of
        :data:`~workflow_mcp.state.TERMINAL`, ``paused`` included — returns at once.

        ``on_progress`` is awaited with the run's current state (read it, do not keep or change it)
        whenever new events were committed while waiting. A run this service executes is followed
        through the state it keeps (its log is never read again); a run owned by another process is
        read from the store every ``STORE_POLL_S``, each event once. Every wait sleeps and is bounded by
        ``wait_ms``; cancelling it never cancels the run.

        Raises:
            RunNotFoundError: unknown run id.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, wait_ms) / 1000
        live, handle = self._states.get(run_id), self.live.get(run_id)
        if live is not None and handle is not None and not live.stale:
            seen = live.state.last_sequence
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(deadline):
                    if on_progress is None:
                        await live.ended.wait()
                    else:
                        while not live.ended.is_set():
                            await live.changed.wait()
                            if live.state.last_sequence > seen:
                                seen = live.state.last_sequence
                                await on_progress(live.state)
                    await handle.wait()  # its end is stored; its worker is being stopped (a few ms)
            if not live.stale:
                return live.snapshot()
        return await self._await_stored(run_id, deadline, on_progress)

    async def _await_stored(
        self, run_id: str, deadline: float, on_progress: Callable[[RunState], Awaitable[None]] | None
    ) -> RunState:
        """:meth:`await_run` for a run this service does not execute: poll the store until the run has
        ended or ``deadline`` (loop time) has passed."""
        loop = asyncio.get_running_loop()
        self.recover()  # a run whose process died is interrupted, not waited for
        if on_progress is None:
            while self.run_status(run_id) not in TERMINAL and (remaining := deadline - loop.time()) > 0:
                await asyncio.sleep(min(self.STORE_POLL_S, remaining))
            return await asyncio.to_thread(self.status, run_id)  # a long log must not stall the loop
        state = await asyncio.to_thread(self.status, run_id)
        projector = StateProjector(state)
        while state.status not in TERMINAL and (remaining := deadline - loop.time()) > 0:
            await asyncio.sleep(min(self.STORE_POLL_S, remaining))
            seen = state.last_sequence
            # Only the events after the state's newest, folded in a thread (a busy run's new pages
            # must not stall the loop); this loop is the only writer of ``state``.
            await asyncio.to_thread(projector.apply_all, self._all_events(run_id, after=seen))
            if state.last_sequence > seen:
                await on_progress(state)
        return state

    def prune_finished(self, keep: int = 100) -> int:
        """Forget the in-memory handles of finished runs beyond the newest ``keep`` (their events and
        results stay in the store), so a long-lived server does not grow with every run. Returns how
        many were dropped."""
        finished = [rid for rid, handle in self.live.items() if handle.status != "running"]
        dropped = finished[: max(0, len(finished) - keep)]
        for rid in dropped:
            del self.live[rid]
            self._states.pop(rid, None)
            self._owners.pop(rid, None)
        return len(dropped)

    # -- checkpoint replies no checkpoint used ----------------------------------------------------
    def _record_unused_replies(self, handle: RunHandle, replies: Mapping[str, CheckpointReply]) -> None:
        """Once the run of ``handle`` has ended, record the checkpoint replies given to it
        (``checkpointReplies``; not the decisions it inherited) that none of its checkpoints used, as
        one ``warning`` event, instead of dropping them: ``{"message", "unusedCheckpointReplies":
        {"cp_…": "allow" | "deny"}}``."""
        given = {cid: reply for cid, reply in replies.items() if reply.source == "reply"}
        if not given:
            return

        async def record() -> None:
            await handle.wait()
            used = {
                e.payload.get("checkpointId")
                for e in self._all_events(handle.run_id)
                if e.type == "checkpoint.resolved" and e.payload.get("source") == "reply"
            }
            unused = {cid: "allow" if r.allow else "deny" for cid, r in given.items() if cid not in used}
            if not unused:
                return
            listed = ", ".join(f"{cid}={decision}" for cid, decision in unused.items())
            message = (
                f"checkpoint replies no checkpoint of this run asked for were not used: {listed} (a paused "
                "run names the checkpoint it waits for in checkpointContext.checkpointId)"
            )
            with contextlib.suppress(WorkflowMcpError):  # the store refusing the note loses nothing else
                self.note_ended_run(
                    handle.run_id, "warning", {"message": message, "unusedCheckpointReplies": unused}
                )

        task = asyncio.get_running_loop().create_task(record())
        self._noting.add(task)
        task.add_done_callback(self._noting.discard)

    # -- notes on ended runs ---------------------------------------------------------------------
    def note_ended_run(self, run_id: str, kind: str, payload: Mapping[str, Any]) -> Event:
        """Append one ``log`` or ``warning`` event (``kind``) to the log of run ``run_id``, which has
        ended (:data:`~workflow_mcp.state.TERMINAL`, so no engine writes its log any more): what the
        service did about it later, e.g. an automatic resume. ``payload`` is a JSON object with a
        ``message``. The status the log projects is unchanged (neither kind is a ``run.*`` event).

        Raises:
            RunNotFoundError: unknown run id.
            InvalidInputError: ``kind`` is not ``log``/``warning``, or the run has not ended.
            StoreError: the store refuses the write (nothing stored changes).
        """
        if kind not in ("log", "warning"):
            raise InvalidInputError(f"a note on an ended run is a log or warning event, not {kind!r}")
        if not self._has_ended(run_id):
            raise InvalidInputError(f"run {run_id} has not ended; only an ended run's log takes notes")
        event = Event(
            run_id=run_id,
            sequence=self.store.last_sequence(run_id) + 1,
            type=kind,
            payload=dict(payload),
            timestamp=utc_now(),
        )
        self.store.append_many([event])
        live = self._states.get(run_id)
        if live is not None and not live.stale:
            live.fold([event])
        return event

    async def shutdown(self, reason: str = "the server stopped", timeout_s: float = 5.0) -> list[str]:
        """Cancel every run this process still runs (each ends ``cancelled`` and stays resumable), wait
        up to ``timeout_s`` for them to record their last event, then close every provider the pool
        built (their agent processes stop). Returns the cancelled run ids. The service stays usable: a
        later run builds its provider afresh."""
        running = [h for h in self.live.values() if h.status == "running"]
        for handle in running:
            handle.cancel(reason)
        pending = [*(h.wait() for h in running), *self._closing, *self._noting]
        if pending:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await asyncio.gather(*pending, return_exceptions=True)
        await self.providers.aclose()  # after the runs: their agent processes stop with them
        if self._ray is not None:
            ray, self._ray = self._ray, None
            await asyncio.to_thread(ray.close)
        if self._index is not None:
            await asyncio.to_thread(self._index.close)  # its watcher restarts with the next listing
        return [h.run_id for h in running]


# -- the state database, and the providers installed here: what the CLI's admin commands ask ----------
def state_database() -> Path:
    """The state database's file: ``$WORKFLOW_MCP_HOME/state.db`` (default ``~/.workflow-mcp``)."""
    return default_home() / "state.db"


def check_store() -> list[str]:
    """SQLite's ``PRAGMA integrity_check`` of :func:`state_database`: ``[]`` when sound, else its findings.

    Raises:
        StoreError: the file cannot be opened at all.
    """
    from .store.salvage import check_store as check

    return check(state_database())


def damaged_cells() -> list[str]:
    """One line per run of :func:`state_database` whose record holds damaged cells (``[]``: none),
    which ``PRAGMA integrity_check`` does not see.

    Raises:
        StoreError: the file cannot be opened at all.
    """
    from .store.salvage import damaged_cells as cells

    return cells(state_database())


def repair_store() -> RepairReport:
    """Copy :func:`state_database` to ``state.db.bak-<timestamp>``, rebuild it (``VACUUM INTO``, or run by
    run when pages are damaged), check the result and put it in place. Other processes must be stopped.

    Raises:
        StoreError: it cannot be repaired (the original stays where it was; the message says why).
    """
    from .store.salvage import repair_store as repair

    return repair(state_database())


def export_runs(run_ids: list[str] | None, out: TextIO) -> ExportReport:
    """Write runs (all, or ``run_ids``) of :func:`state_database` and their events to ``out`` as JSON
    lines, reading what it can even from a damaged database (see ``workflow-mcp runs export``).

    Raises:
        StoreError: the file cannot be opened at all.
    """
    from .store.salvage import export_runs as export

    return export(state_database(), run_ids, out)


def read_fake_script(path: str) -> dict[str, Any]:
    """The fake provider's script in the UTF-8 JSON file ``path`` (the CLI's ``--fake-script``), checked.

    Raises:
        InvalidInputError: the file cannot be read, is not JSON or breaks the script format (the
            message starts with the file's path).
    """
    from .providers.fake import FakeProvider

    return FakeProvider.from_file(path).script


def provider_report(cwd: str) -> dict[str, Any]:
    """What ``workflow-mcp providers --json`` prints: ``{"config", "default", "autoPick", "policy",
    "providers": [ProviderInfo.to_json() …]}`` for the configuration that applies in ``cwd``: every
    registered provider, every named one the configuration defines and every preset (its ``origin``
    says which; ``use`` the provider it runs), sorted by name, each with its capability matrix.
    Probing starts no agent (at most a ``--version``).

    Raises:
        ProviderConfigError: the configuration file is malformed (file and key named).
    """
    from .providers.config import load_config
    from .providers.named import named_providers, probe_named
    from .providers.routing import AUTO_PICK_ORDER

    conf = load_config(cwd)
    infos = [probe_named(named, built=True, source=conf.where) for named in named_providers(conf)]
    auto = next(
        (i.name for n in AUTO_PICK_ORDER for i in infos if i.name == n and i.availability.ready), None
    )
    return {
        "config": conf.path,
        "default": conf.default,
        "autoPick": None if conf.configured else auto,
        "policy": conf.policy.to_mapping(),
        "providers": [i.to_json() for i in infos],
    }


def _auto_provider(settings: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The provider a run with no configuration would pick (the first ready of codex, claude, acp), or
    ``None``; probing starts no agent."""
    from .providers.registry import available
    from .providers.routing import AUTO_PICK_ORDER

    known = provider_names()
    for name in AUTO_PICK_ORDER:
        if name in known and available(name, settings.get(name, {})).availability.ready:
            return name
    return None


def _recovery_notice(marked: list[str], here: set[str], kept: list[str]) -> str:
    """The one line a recovery pass writes, e.g. ``marked 2 runs interrupted (their process died):
    run_a, run_b; resume them with `workflow-mcp resume RUN_ID```. ``here``: those of ``marked`` this
    process ran (they stopped without storing their end); ``kept``: the worktrees recovery kept. At most
    :data:`_NOTICE_IDS` ids are named (``runs list`` shows the rest)."""
    one = len(marked) == 1
    if not here:
        why = "its process died" if one else "their process died"
    elif here.issuperset(marked):
        why = "it stopped without recording its end" if one else "they stopped without recording their end"
    else:
        why = "their process died or they stopped without recording their end"
    ids = ", ".join(marked[:_NOTICE_IDS]) + (
        f" and {len(marked) - _NOTICE_IDS} more (`workflow-mcp runs list`)"
        if len(marked) > _NOTICE_IDS
        else ""
    )
    how = (
        f"resume it with `workflow-mcp resume {marked[0]}`"
        if one
        else "resume them with `workflow-mcp resume RUN_ID`"
    )
    line = f"marked {len(marked)} run{'' if one else 's'} interrupted ({why}): {ids}; {how}"
    if kept:
        noun = "worktree" if len(kept) == 1 else "worktrees"
        line += f"; kept {len(kept)} {noun} an agent changed or committed in: {', '.join(kept)}"
    return line


#: How many run ids a recovery notice names.
_NOTICE_IDS = 10


# -- image attachments of the one-call run ------------------------------------------------------

AGENT_RUN_PATH = "<agent_run>"
"""The path of the built-in one-call workflow behind ``run_agent`` and ``agent_run``."""


class ImageInputRefusedError(InvalidInputError):
    """Raised before a run starts when a call with image attachments is routed to a provider without
    image input (capability ``images``); the message names the provider and those that have it."""


def _refuse_imageless(agent: AgentProvider, prompt: str, options: Mapping[str, Any]) -> None:
    """Refuse (:class:`ImageInputRefusedError`) image attachments for a call whose route certainly
    ends at a provider without image input; a route only known at call time is checked then (the
    call rejects with the same words)."""
    label = options.get("label")
    agent_type = options.get("agentType")
    # Only the image check may fire: no schema and no model (a rule on the model leaves it open).
    request = AgentRequest(
        prompt=prompt,
        label=label if isinstance(label, str) else "",
        agent_type=agent_type if isinstance(agent_type, str) else None,
        images=(ImageInput(data=b"", mime_type="image/png"),),
    )
    refusal = getattr(agent, "refusal", None)
    if callable(refusal):
        unknown = ["model"] if isinstance(label, str) else ["model", "label"]
        found = refusal(request, unknown)
        if found is not None:
            raise ImageInputRefusedError(str(found))
        return
    if not agent.capabilities.images:
        raise ImageInputRefusedError(
            f"the call has image attachments but provider {getattr(agent, 'name', '?')!r} has no image input "
            "(capability images); use a provider that has it (openai, claude, acp; cli with images = true)"
        )


def _attachment_ref(run_id: str, index: int, image: ImageInput) -> dict[str, Any]:
    """What the run's args keep of an attachment: where its bytes are stored, and their checksum."""
    return {
        "type": "image",
        "mimeType": image.mime_type,
        "name": image.name,
        "bytes": len(image.data),
        "sha256": hashlib.sha256(image.data).hexdigest(),
        "runId": run_id,
        "artifactId": f"attachment-{index + 1}",
    }
