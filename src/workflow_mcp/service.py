"""``WorkflowService``: the one facade the CLI, the MCP server and the Python API use.

It joins definitions (load, validate, discover), the engine (runs), providers and the store. Every
run it starts is recorded in the store before its first event, and every event is committed before
it is published, so a run survives the process that started it: ``recover()`` marks runs left
``running`` by a dead process as ``interrupted``, and ``start_run(..., resume_from=…)`` continues any
earlier run from its journal. Starting or resuming a run claims it in the store (one executor per
run), so a second resume of the same run is refused instead of running its calls twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from .definitions.profile import get_profile
from .engine.journal import JournalRecord, Replay, ResumePolicy, json_value_problem
from .engine.nested import ChildCheck
from .engine.run import MISSING, RunHandle, RunOptions, new_run_id, run_workflow
from .engine.worktree import settle_left_worktrees
from .errors import InvalidInputError, StoreError, WorkflowMcpError, WorkflowNotFoundError
from .events import Event, utc_now
from .providers.base import AgentProvider
from .realm.worker import RealmWorker
from .state import RunState, project_state
from .store import HEARTBEAT_S
from .store.base import RunRecord, RunStore
from .store.sqlite import default_home

__all__ = ["ChildCheck", "RunSummary", "WorkflowService"]


@dataclass(frozen=True)
class RunSummary:
    """One line of ``runs list``: ``status`` is projected from the run's newest ``run.*`` event."""

    run_id: str
    workflow: str
    status: str
    created_at: str
    provider: str
    resumed_from: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "workflow": self.workflow,
            "status": self.status,
            "createdAt": self.created_at,
            "provider": self.provider,
            "resumedFrom": self.resumed_from,
        }


_STATUS_OF = {
    "run.queued": "queued",
    "run.started": "running",
    "run.resumed": "running",
    "run.paused": "paused",
    "run.completed": "completed",
    "run.failed": "failed",
    "run.cancelled": "cancelled",
    "run.interrupted": "interrupted",
}


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
    """Facade over definitions, runs and the store.

    ``store`` is any :class:`~workflow_mcp.store.RunStore`; ``cwd``/``home`` anchor discovery.
    ``notify`` receives one line for the user whenever this service recorded something they did not
    ask for (a recovery pass that marked runs ``interrupted``); the CLI and the MCP server write it to
    stderr. Without it the service is silent.
    """

    def __init__(
        self,
        store: RunStore,
        *,
        cwd: str | None = None,
        home: str | None = None,
        notify: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.cwd = cwd or os.getcwd()
        self.home = home
        self.notify = notify
        self.live: dict[str, RunHandle] = {}
        self._starting: set[str] = set()  # runs being created: claimed in the store, not yet live
        self._settled: set[str] = set()  # ended runs whose missing terminal event recovery recorded
        self._watcher: asyncio.Task[None] | None = None
        self._agent_workflow: Workflow | None = None

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
        ``check_syntax=False`` skips the V8 compile (tree-sitter only), as in :meth:`load`."""
        return validate_workflow(path, source=source, profile=get_profile(profile), check_syntax=check_syntax)

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
            warnings, cwd or self.cwd, self.home, profile=get_profile(profile), reachable=reachable
        )

    def list_workflows(self, cwd: str | None = None, *, reachable: Reachable | None = None) -> Discovery:
        """Personal and project workflows visible from ``cwd`` (Claude's precedence and order).
        ``reachable`` (a predicate on real paths) skips, unread, what it refuses (an MCP server's file
        scope)."""
        return find_workflows(cwd or self.cwd, self.home, reachable=reachable)

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
            profile=get_profile(profile),
            check_syntax=check_syntax,
            reachable=reachable,
        )

    def load(
        self, target: str, *, cwd: str | None = None, profile: str | None = None, check_syntax: bool = True
    ) -> Workflow:
        """Load ``target``: a path to a file, or else a workflow name resolved through discovery.
        ``check_syntax=False`` leaves the V8 compile to the caller (the CLI does it in the run's own
        worker, so a run starts one Node process, not two).

        Raises:
            WorkflowNotFoundError: neither a file nor a known name.
            WorkflowLoadError: the file breaks a loading rule.
        """
        base = cwd or self.cwd
        prof = get_profile(profile)
        candidate = Path(base, target).expanduser()
        looks_like_path = target.endswith(".js") or os.sep in target or target.startswith(".")
        if candidate.is_file() or looks_like_path:
            if not candidate.exists():
                raise WorkflowNotFoundError(f"workflow file {target!r} does not exist")
            return load_workflow(str(candidate), profile=prof, check_syntax=check_syntax)
        return resolve_workflow(target, base, self.home, profile=prof).workflow

    def prepare(self, target: str, *, cwd: str | None = None, profile: str | None = None) -> PendingWorkflow:
        """Like :meth:`load`, leaving V8's syntax check of a file to the caller (the CLI runs it in the
        run's own worker, so a run starts one Node process, not two); the verdict and its wording are
        :meth:`load`'s. A name resolves through discovery, which has already checked it.

        Raises:
            WorkflowNotFoundError: neither a file nor a known name.
            WorkflowLoadError: the file breaks a static loading rule.
        """
        base = cwd or self.cwd
        prof = get_profile(profile)
        candidate = Path(base, target).expanduser()
        looks_like_path = target.endswith(".js") or os.sep in target or target.startswith(".")
        if candidate.is_file() or looks_like_path:
            if not candidate.exists():
                raise WorkflowNotFoundError(f"workflow file {target!r} does not exist")
            return prepare_workflow(str(candidate), profile=prof)
        return PendingWorkflow.of(resolve_workflow(target, base, self.home, profile=prof).workflow)

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
        provider_config: dict[str, Any] | None = None,
        child_check: ChildCheck | None = None,
    ) -> RunHandle:
        """Record and start a run; returns its live handle. Needs a running event loop.

        ``resume_from`` reuses the journal of an earlier run (any status) under ``policy``; a ready
        ``replay`` (e.g. an imported Claude Code run, with ``resume_from`` naming it) is used as is.
        ``idempotency_key`` returns the already-started run for a repeated key (``owner`` scopes
        keys). ``on_event`` sees each event after it is committed. ``provider_config`` (JSON) is
        recorded with the run so a resume can rebuild the same provider (e.g. a fake script).
        ``child_check`` is asked about every nested ``workflow()`` child before it is read and before it
        runs (the MCP server passes its file scope and source approval; default: every child may run).

        Raises:
            WorkflowNotFoundError: ``resume_from`` names no stored run.
            InvalidInputError: ``policy`` is unknown, ``resume_from`` is still running, or ``args``
                cannot cross to the realm and the store (a non-finite number, a lone UTF-16
                surrogate, nested past 256 levels).
            RunClaimedError: another live process already resumes ``resume_from``.
            StoreError: the store cannot record the run (read-only, full or damaged; the message says).
        """
        if args is not MISSING:
            problem = json_value_problem(args)
            if problem is not None:
                raise InvalidInputError(
                    f"the run's args cannot be used: {problem}; pass plain JSON (finite numbers, "
                    "whole characters, at most 256 levels deep)"
                )
        if idempotency_key is not None:
            existing = self.store.find_idempotent(owner, idempotency_key)
            if existing is not None and existing.run_id in self.live:
                return self.live[existing.run_id]
        opts = options or RunOptions(cwd=self.cwd, home=self.home)
        if opts.cwd is None:
            opts = RunOptions(**{**opts.__dict__, "cwd": self.cwd, "home": opts.home or self.home})
        if opts.worktree_root is None:
            opts = RunOptions(**{**opts.__dict__, "worktree_root": str(default_home() / "worktrees")})
        if resume_from is not None and replay is None:
            if policy not in ("content", "prefix"):
                raise InvalidInputError(f"unknown resume policy {policy!r}: use 'content' or 'prefix'")
            self._refuse_resuming_a_live_run(resume_from)
            replay = self.replay_for(resume_from, policy)
        run_id = new_run_id()
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
                if v is not None and k not in ("cwd", "home", "worktree_root")
            }
            | ({"providerConfig": provider_config} if provider_config else {}),
            provider=getattr(provider, "name", ""),
            profile=get_profile(opts.profile).name,
            cwd=opts.cwd,
            resumed_from=resume_from,
            resume_policy=policy if resume_from else None,
            idempotency_key=idempotency_key,
            owner=owner,
            owner_pid=os.getpid(),
            owner_host=socket.gethostname(),
        )
        self._starting.add(run_id)
        try:
            self.store.create_run(record)  # claims the run, and the run it resumes
        except BaseException:
            self._starting.discard(run_id)
            raise

        def persist(batch: list[Event]) -> None:
            self.store.append_many(batch)
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
        )
        self.live[run_id] = handle
        self._starting.discard(run_id)
        self._ensure_watcher()
        return handle

    def cancel(self, run_id: str, reason: str = "cancelled by the user") -> str:
        """Cancel a run wherever it runs: directly when this process owns it, else through the store
        (the owning process notices within ``CANCEL_POLL_S``). Returns what happened:
        ``cancelling`` (this process), ``requested`` (another process) or the final status when the
        run had already ended.

        Raises:
            WorkflowNotFoundError: unknown run id.
        """
        handle = self.live.get(run_id)
        if handle is not None and handle.status == "running":
            handle.cancel(reason)
            return "cancelling"
        if self.store.get_run(run_id) is None:
            raise WorkflowNotFoundError(f"no stored run {run_id!r}; `workflow-mcp runs list` shows the runs")
        self.recover()
        last = self.store.last_run_event(run_id)
        status = _STATUS_OF.get(last or "", "queued")
        if status in ("completed", "failed", "cancelled", "interrupted"):
            return status
        self.store.request_cancel(run_id, reason)
        return "requested"

    CANCEL_POLL_S = 0.25

    def _ensure_watcher(self) -> None:
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.get_running_loop().create_task(self._watch_cancellations())

    async def _watch_cancellations(self) -> None:
        """While this process owns running runs: apply cancellations other processes asked for and
        renew the store lease every ``HEARTBEAT_S``. A run that ended without its terminal event
        stored (e.g. a full disk) is recorded ``interrupted`` as soon as the store takes writes again."""
        loop = asyncio.get_running_loop()
        renewed = loop.time()
        while True:
            running = [rid for rid, h in self.live.items() if h.status == "running"]
            unsettled = [
                rid
                for rid, h in self.live.items()
                if h.done and h.log.persist_error is not None and rid not in self._settled
            ]
            if not running and not unsettled:
                return
            if loop.time() - renewed >= HEARTBEAT_S:
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
            self._agent_workflow = load_workflow(source=self.AGENT_RUN_SOURCE, path="<agent_run>")
        return self._agent_workflow

    def run_agent(
        self,
        prompt: str,
        options: dict[str, Any] | None = None,
        *,
        provider: AgentProvider,
        run_options: RunOptions | None = None,
        idempotency_key: str | None = None,
        owner: str | None = None,
        on_event: Callable[[Event], None] | None = None,
    ) -> RunHandle:
        """One agent call (``options`` as agent()'s: label, schema, model, effort, agentType, …)
        through ``provider`` — routing, schema validation and re-asks, events and the journal exactly
        as inside a workflow. The handle's ``result()`` is the agent's answer (``None`` on a provider
        failure or skip).

        Raises:
            InvalidInputError: ``options`` is not a JSON object.
        """
        if options is not None and not isinstance(options, dict):
            raise InvalidInputError('agent options must be a JSON object, e.g. {"label": "triage"}')
        return self.start_run(
            self.agent_workflow(),
            provider=provider,
            args={"prompt": prompt, "options": options or {}},
            options=run_options,
            idempotency_key=idempotency_key,
            owner=owner,
            on_event=on_event,
        )

    def _refuse_resuming_a_live_run(self, run_id: str) -> None:
        """Resuming a run that is still going would run its in-flight calls twice."""
        record = self.store.get_run(run_id)
        if record is None:
            return
        if run_id in self.live and self.live[run_id].status == "running":
            raise InvalidInputError(f"run {run_id} is still running here; wait for it or cancel it first")
        self.recover()
        if self.store.last_run_event(run_id) in ("run.started", "run.queued", "run.resumed"):
            raise InvalidInputError(
                f"run {run_id} is still running (process {record.owner_pid} on {record.owner_host}); "
                f"wait for it, or cancel it with `workflow-mcp runs cancel {run_id}`, then resume"
            )

    def replay_for(self, run_id: str, policy: ResumePolicy) -> Replay:
        """The replay index built from ``run_id``'s journal (results it computed or replayed)."""
        if self.store.get_run(run_id) is None:
            raise WorkflowNotFoundError(f"no stored run {run_id!r}; `workflow-mcp runs list` shows the runs")
        records: list[JournalRecord] = []
        for row in self.store.journal(run_id):
            if row.status not in ("completed", "cached") or row.result_json is None:
                continue
            try:
                result = json.loads(row.result_json)
            except ValueError:
                continue
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
                )
            )
        return Replay(records, policy)

    def args_of(self, run_id: str) -> Any:
        """The stored args of a run (``MISSING`` when it had none)."""
        record = self.store.get_run(run_id)
        if record is None:
            raise WorkflowNotFoundError(f"no stored run {run_id!r}")
        return MISSING if record.args_json is None else json.loads(record.args_json)

    #: Events read per store query when a whole log is needed: the store is shared by every client of a
    #: server, and one query over a million events would hold it for seconds.
    EVENT_PAGE = 5_000

    def status(self, run_id: str) -> RunState:
        """The projected state of a stored run. The log is read in pages of :attr:`EVENT_PAGE` events;
        this is CPU work in proportion to the run's events, so async callers run it in a thread.

        Raises:
            WorkflowNotFoundError: unknown run id.
        """
        if self.store.get_run(run_id) is None:
            raise WorkflowNotFoundError(f"no stored run {run_id!r}; `workflow-mcp runs list` shows the runs")
        return project_state(self._all_events(run_id), run_id=run_id)

    def _all_events(self, run_id: str) -> Iterator[Event]:
        """Every event of ``run_id`` in order, read :attr:`EVENT_PAGE` at a time (the store's lock is
        held for one page, never for the whole log)."""
        after = 0
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

    @property
    def state_dir(self) -> str:
        """The state directory: the folder of a file store, else ``$WORKFLOW_MCP_HOME``."""
        path = getattr(self.store, "path", None)
        return str(Path(path).parent) if isinstance(path, str | os.PathLike) else str(default_home())

    def events(self, run_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        if self.store.get_run(run_id) is None:
            raise WorkflowNotFoundError(f"no stored run {run_id!r}")
        return self.store.events(run_id, after, limit)

    def list_runs(self, limit: int = 50) -> list[RunSummary]:
        out = []
        for r in self.store.list_runs(limit):
            last = self.store.last_run_event(r.run_id)
            out.append(
                RunSummary(
                    run_id=r.run_id,
                    workflow=r.workflow_name,
                    status=_STATUS_OF.get(last or "", "queued"),
                    created_at=r.created_at,
                    provider=r.provider,
                    resumed_from=r.resumed_from,
                )
            )
        return out

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
        return self._starting | {rid for rid, h in self.live.items() if not h.done}

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

    def load_source(
        self, source: str, *, profile: str | None = None, label: str | None = None, check_syntax: bool = True
    ) -> Workflow:
        """Load an inline workflow ``source`` (``label`` names it in messages; ``check_syntax=False`` skips
        the V8 compile as in :meth:`load`).

        Raises:
            WorkflowLoadError: the source breaks a loading rule.
        """
        return load_workflow(label, source=source, profile=get_profile(profile), check_syntax=check_syntax)

    def load_stored(self, run_id: str) -> Workflow:
        """The workflow a stored run ran: its recorded source, loaded again (for a resume).

        Raises:
            WorkflowNotFoundError: unknown run id.
            WorkflowLoadError: the stored source no longer loads (e.g. under a newer profile).
        """
        record = self.store.get_run(run_id)
        if record is None:
            raise WorkflowNotFoundError(f"no stored run {run_id!r}; `workflow-mcp runs list` shows the runs")
        return load_workflow(record.workflow_path, source=record.source, profile=record.profile or None)

    def make_options(
        self,
        *,
        concurrency: int | None = None,
        token_budget: int | None = None,
        max_agents: int | None = None,
        agent_timeout_ms: int | None = None,
        profile: str | None = None,
        cwd: str | None = None,
    ) -> RunOptions:
        """Run options for :meth:`start_run` (``cwd`` defaults to the service's; ``home`` is the service's),
        so callers need not import the engine."""
        return RunOptions(
            concurrency=concurrency,
            token_budget=token_budget,
            max_agents=max_agents,
            agent_timeout_ms=agent_timeout_ms,
            profile=profile,
            cwd=cwd or self.cwd,
            home=self.home,
        )

    def owner_of(self, run_id: str) -> str | None:
        """The ``owner`` a run was started with (``None``: the local user).

        Raises:
            WorkflowNotFoundError: unknown run id.
        """
        record = self.store.get_run(run_id)
        if record is None:
            raise WorkflowNotFoundError(f"no stored run {run_id!r}")
        return record.owner

    def find_idempotent_run(self, key: str, owner: str | None = None) -> str | None:
        """The id of the run ``owner`` started with idempotency ``key``, or ``None``."""
        record = self.store.find_idempotent(owner, key)
        return record.run_id if record is not None else None

    def list_runs_of(self, owner: str | None, limit: int = 50) -> list[RunSummary]:
        """Recent runs started by ``owner`` (exactly; ``None`` is the local user), newest first."""
        scan = min(max(limit * 20, 200), 5000)  # the store has no owner index yet: scan a bounded window
        ids = [r.run_id for r in self.store.list_runs(scan) if r.owner == owner][:limit]
        by_id = {s.run_id: s for s in self.list_runs(scan)}
        return [by_id[i] for i in ids if i in by_id]

    def run_status(self, run_id: str) -> str:
        """The run's status from its newest ``run.*`` event (cheaper than :meth:`status`).

        Raises:
            WorkflowNotFoundError: unknown run id.
        """
        handle = self.live.get(run_id)
        if handle is not None and handle.status == "running":
            return "running"
        if self.store.get_run(run_id) is None:
            raise WorkflowNotFoundError(f"no stored run {run_id!r}")
        return _STATUS_OF.get(self.store.last_run_event(run_id) or "", "queued")

    def artifact(self, run_id: str, artifact_id: str) -> tuple[str, str, bytes] | None:
        """``(name, mime_type, data)`` of one stored artifact, or ``None``."""
        return self.store.get_artifact(run_id, artifact_id)

    def _has_ended(self, run_id: str) -> bool:
        return self.run_status(run_id) in ("completed", "failed", "cancelled", "interrupted")

    async def wait_events(
        self, run_id: str, after: int = 0, limit: int | None = None, wait_ms: int = 0
    ) -> list[Event]:
        """The durable events with ``sequence > after`` (at most ``limit``); when there are none yet
        and the run has not ended, wait up to ``wait_ms`` milliseconds for the next one.

        Events always come from the store (persisted before published), so a cursor taken from one
        answer never skips or repeats an event in the next, whichever process owns the run. A live run
        of this process is followed through its event log; a run owned by another process is polled
        every ``STORE_POLL_S``. Cancelling the wait never affects the run.

        Raises:
            WorkflowNotFoundError: unknown run id.
        """
        events = self.events(run_id, after, limit)
        if events or wait_ms <= 0 or self._has_ended(run_id):
            return events
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_ms / 1000
        handle = self.live.get(run_id)
        if handle is not None:
            follow = handle.events(after)
            try:
                async with asyncio.timeout(wait_ms / 1000):
                    await anext(follow, None)
            except TimeoutError:
                pass
            finally:
                await follow.aclose()  # type: ignore[attr-defined]  # an async generator underneath
            return self.events(run_id, after, limit)
        self.recover()  # a run whose process died is interrupted, not waited for
        while True:
            events = self.events(run_id, after, limit)
            remaining = deadline - loop.time()
            if events or remaining <= 0 or self._has_ended(run_id):
                return events
            await asyncio.sleep(min(self.STORE_POLL_S, remaining))

    async def await_run(
        self,
        run_id: str,
        wait_ms: int,
        *,
        on_events: Callable[[list[Event]], Awaitable[None]] | None = None,
    ) -> RunState:
        """Wait up to ``wait_ms`` milliseconds for the run to end; return its projected state (terminal
        or not). ``on_events`` is awaited with each batch of new events while waiting (progress).
        Cancelling the wait never cancels the run.

        Raises:
            WorkflowNotFoundError: unknown run id.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, wait_ms) / 1000
        cursor = self.store.last_sequence(run_id)
        while not self._has_ended(run_id):
            remaining_ms = int((deadline - loop.time()) * 1000)
            if remaining_ms <= 0:
                break
            if on_events is None:
                handle = self.live.get(run_id)
                if handle is not None:
                    try:
                        async with asyncio.timeout(remaining_ms / 1000):
                            await handle.wait()
                    except TimeoutError:
                        break
                    continue
            batch = await self.wait_events(run_id, cursor, 1000, remaining_ms)
            if batch:
                cursor = batch[-1].sequence
                if on_events is not None:
                    await on_events(batch)
        return await asyncio.to_thread(self.status, run_id)  # a long log must not stall the event loop

    def prune_finished(self, keep: int = 100) -> int:
        """Forget the in-memory handles of finished runs beyond the newest ``keep`` (their events and
        results stay in the store), so a long-lived server does not grow with every run. Returns how
        many were dropped."""
        finished = [rid for rid, handle in self.live.items() if handle.status != "running"]
        dropped = finished[: max(0, len(finished) - keep)]
        for rid in dropped:
            del self.live[rid]
        return len(dropped)

    async def shutdown(self, reason: str = "the server stopped", timeout_s: float = 5.0) -> list[str]:
        """Cancel every run this process still runs (each ends ``cancelled`` and stays resumable) and
        wait up to ``timeout_s`` for them to record their last event. Returns the cancelled run ids."""
        running = [h for h in self.live.values() if h.status == "running"]
        for handle in running:
            handle.cancel(reason)
        if running:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await asyncio.gather(*(h.wait() for h in running), return_exceptions=True)
        return [h.run_id for h in running]


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
