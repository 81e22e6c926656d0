"""The run coordinator: one workflow run, from ``run.started`` to a terminal event.

``run_workflow(...)`` starts the run at once and returns a :class:`RunHandle` with an async event
iterator, an awaitable result and ``cancel(reason)``. The JavaScript runs in a realm worker; every
agent(), workflow(), phase() and log() arrives here as a data-only message, is scheduled (concurrency,
the 1,000-call cap, budget admission), optionally replayed from a journal, executed through the
provider, and answered.

Semantics follow profile claude-code/2.1.332 (PROFILE-FACTS):
- agent(): options are checked in Claude's order — ``disallowedTools``/``bashCommandClamp``, then
  ``agentType`` (resolved to an agent definition, :mod:`~workflow_mcp.definitions.agents`; an unknown
  type or a definition without usable tools rejects), then ``schema`` (:mod:`.structured`), then
  ``model`` (a non-string is a TypeError) — and every refusal happens before the provider is called
  and still counts toward the cap. ``model`` and ``effort`` are normalized as Claude normalizes them
  (:mod:`~workflow_mcp.definitions.models`; an option wins over the definition's); unknown options
  are ignored. Structured output is converted at the top level where Claude converts it, validated
  with ``jsonschema`` and re-asked up to 5 times, then rejects; a
  provider failure or a user skip resolves ``null`` (a failure also logs ``[label] failed: …``); an
  execution error rejects; a stall (no progress for ``stallMs``, default 180 s) retries up to 5 times,
  then rejects.
- budget: output tokens only; admission refuses a call when ``total > 0 and spent >= total``.
- at most 1,000 agent() calls per run, children included.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .._redact import PREVIEW_SOURCE_CHARS, prompt_preview
from ..definitions.agents import AgentCatalog, AgentDefinition, find_agents
from ..definitions.models import is_numeric_effort, js_string, normalize_effort, normalize_model
from ..definitions.profile import MAX_VALUE_DEPTH, Profile, default_concurrency, get_profile
from ..errors import AgentCallRefusedError, InvalidInputError, RealmError, RunFailedError, WorkflowMcpError
from ..events import Event, EventLog
from ..providers.base import (
    AgentContext,
    AgentExecutionError,
    AgentProvider,
    AgentRequest,
    AgentResult,
    AgentStalledError,
    CancelSignal,
    Checkpoint,
    CheckpointAsk,
    ImageInput,
    ProviderAuthError,
    ProviderEvent,
    ProviderSetupError,
    ProviderUsageLimitError,
    TokenUsage,
    provider_for,
)
from ..realm._body import run_body
from ..realm.channel import RealmChannel
from ..realm.messages import (
    AgentCallMessage,
    ChildEnded,
    Collated,
    Done,
    DoneError,
    Dropped,
    HandedBack,
    Log,
    Phase,
    Released,
    Returned,
    Took,
    WorkflowCallMessage,
)
from ..realm.sandbox import Sandbox
from ..realm.worker import (
    DEFAULT_HEAP_MB,
    MAX_MESSAGE_BYTES,
    MessageNotJsonError,
    MessageTooLargeError,
    RealmWorker,
    encode_message,
)
from ..state import RunStatus
from .backoff import RETRYABLE, RetryPolicy
from .budget import Budget
from .calls import AgentCall, ResolvedCall, agent_request
from .checkpoint import CheckpointAsker, CheckpointReply, checkpoint_id
from .executor import AgentExecutor, LocalExecutor
from .journal import (
    JournalRecord,
    Replay,
    content_key,
    images_key,
    json_value_problem,
    records_from_events,
)
from .nested import ChildCheck, ChildResolver
from .release import ReleaseOrder
from .scheduler import CallRefused, Scheduler
from .stall import StallWatch, StallWindow
from .structured import check_schema, coerce_top_level, validate
from .worktree import Worktree, WorktreeError

__all__ = ["MISSING", "CallCounts", "RunHandle", "RunOptions", "check_args", "new_run_id", "run_workflow"]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""Sentinel for "no args given": the workflow then sees ``args === undefined``."""


def new_run_id() -> str:
    """``run_`` + 12 hex digits of milliseconds since the epoch + 10 random hex digits (sortable)."""
    return f"run_{int(time.time() * 1000):012x}{secrets.token_hex(5)}"


@dataclass(frozen=True)
class RunOptions:
    """Limits and environment of one run.

    ``concurrency`` defaults to ``min(16, max(2, cpus - 2))``; ``token_budget`` is the budget target
    (``None``: ``budget.total`` is ``null``); ``sync_timeout_ms`` defaults to the profile's 30,000 ms;
    ``max_agents`` may lower (never raise) the profile's 1,000-call cap; ``agent_timeout_ms`` bounds
    one provider call (``None``: no bound beyond the stall window); ``heap_mb`` caps the realm's heap.
    ``stall_ms`` is the default stall window of calls without a ``stallMs`` option (``None``: the
    profile's 180,000 ms); ``retry`` how rate-limited answers are retried (:mod:`.backoff`).
    ``cwd``/``home`` anchor nested workflow discovery and provider working directories;
    ``worktree_root`` holds the per-call worktrees of ``isolation: 'worktree'`` (default: a
    ``workflow-mcp-worktrees`` folder in the system temporary directory). ``dry_run``: a cost preview's
    run, which creates no worktree (an isolated call runs in ``cwd``, on a provider that writes nothing).
    ``checkpoint_replies`` answers human checkpoints by id before they are reached (replies given on
    resume and decisions journaled by the resumed run; :mod:`.checkpoint`). ``sandbox`` is the OS
    sandbox of the run's realm worker (``"bwrap"``: bubblewrap, :mod:`workflow_mcp.realm.sandbox`).
    ``images`` are handed to every agent call of the run (``AgentRequest.images``): the image
    attachments of the one-call run of ``run_agent``; never part of a call's journal key.
    """

    concurrency: int | None = None
    token_budget: int | None = None
    sync_timeout_ms: int | None = None
    max_agents: int | None = None
    agent_timeout_ms: int | None = None
    stall_ms: int | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    heap_mb: int = DEFAULT_HEAP_MB
    profile: str | None = None
    cwd: str | None = None
    home: str | None = None
    worktree_root: str | None = None
    dry_run: bool = False
    checkpoint_replies: Mapping[str, CheckpointReply] = field(default_factory=dict[str, CheckpointReply])
    sandbox: Sandbox = "none"
    images: tuple[ImageInput, ...] = ()


@dataclass
class _Workflow:
    name: str
    body: str
    path: str | None
    source_hash: str
    phases: list[str] = field(default_factory=list)
    source: str | None = None


class RunHandle:
    """A live run. ``events()`` replays and follows its events; ``result()`` waits for the end."""

    def __init__(self, run: _Run) -> None:
        self._run = run
        self.run_id = run.run_id

    @property
    def log(self) -> EventLog:
        return self._run.log

    def events(self, after: int = 0) -> AsyncIterator[Event]:
        """Every event with ``sequence > after``, then live events until the run ends."""
        return self._run.log.subscribe(after)

    def set_checkpoint_asker(self, asker: CheckpointAsker | None) -> None:
        """Who answers this run's human checkpoints from now on (e.g. an MCP client waiting on the
        run, through an elicitation); ``None``: nobody, so the next checkpoint pauses the run with
        ``checkpoint_required``."""
        self._run.checkpoint_asker = asker

    async def wait(self) -> RunStatus:
        """Wait for the end; returns the final status (completed, failed, cancelled, paused)."""
        await asyncio.shield(self._run.task)
        return self._run.status

    async def result(self) -> Any:
        """The workflow's final JSON value.

        Raises:
            RunFailedError: when the run ends failed, cancelled or paused (``.status``, ``.message``).
        """
        await self.wait()
        if self._run.status != "completed":
            raise RunFailedError(self.run_id, self._run.status, self._run.error_message or self._run.status)
        return self._run.final_value

    @property
    def status(self) -> RunStatus:
        return self._run.status

    @property
    def done(self) -> bool:
        """Whether the run has ended and every one of its events has been handed to ``persist``."""
        return self._run.task.done()

    def cancel(self, reason: str = "cancelled by the user") -> None:
        """Request cancellation: in-flight provider calls get their signal, the worker is stopped, and
        the run ends ``cancelled`` (resumable). Idempotent."""
        self._run.request_cancel(reason)

    @property
    def realm_pid(self) -> int | None:
        """The process id of the run's Node worker once it is spawned (``None`` before that, and for an
        in-memory realm). The process is gone once the run has ended."""
        worker = self._run.worker
        return worker.pid if isinstance(worker, RealmWorker) else None

    @property
    def realm_sandbox(self) -> Sandbox | None:
        """The OS sandbox the run's Node worker was spawned under (``"none"`` or ``"bwrap"``; ``None``
        before it is spawned and for an in-memory realm)."""
        worker = self._run.worker
        return worker.sandbox if isinstance(worker, RealmWorker) else None

    @property
    def calls(self) -> CallCounts:
        """How many agent() calls the run admitted toward its cap and how many it refused at the cap or
        for a spent budget (a cost preview reads them)."""
        r = self._run
        q = r.scheduler
        return CallCounts(q.admitted, q.cap, q.refused_for_cap, q.refused_for_budget, r.budget.spent)


@dataclass(frozen=True)
class CallCounts:
    """``admitted``: agent() calls counted toward the run's ``cap`` (refused-before-provider ones
    included); ``at_cap`` / ``over_budget``: calls refused because the cap was reached / the budget was
    spent; ``spent``: ``budget.spent()`` in output tokens."""

    admitted: int
    cap: int
    at_cap: int
    over_budget: int
    spent: int


def check_args(args: Any) -> None:
    """Refuse run args that cannot cross to the realm and the store.

    Raises:
        InvalidInputError: ``args`` holds a non-finite number or a lone UTF-16 surrogate, or is nested
            deeper than :data:`~workflow_mcp.definitions.profile.MAX_VALUE_DEPTH` levels.
    """
    if args is MISSING:
        return
    problem = json_value_problem(args)
    if problem is not None:
        raise InvalidInputError(
            f"the run's args cannot be used: {problem}; pass plain JSON (finite numbers, "
            f"whole characters, at most {MAX_VALUE_DEPTH} levels deep)"
        )


def run_workflow(
    workflow: Any,
    *,
    provider: AgentProvider,
    args: Any = MISSING,
    options: RunOptions | None = None,
    run_id: str | None = None,
    persist: Callable[[list[Event]], None] | None = None,
    replay: Replay | None = None,
    resumed_from: str | None = None,
    workflow_meta: Mapping[str, Any] | None = None,
    worker: RealmChannel | None = None,
    child_check: ChildCheck | None = None,
    executor: AgentExecutor | None = None,
) -> RunHandle:
    """Start running ``workflow`` (a loaded ``definitions.Workflow``) and return its handle.

    ``args`` is any JSON value (omit it for ``undefined``). ``persist`` receives each batch of events
    before they are published (the store's ``append_many``: a group commit per event-loop turn). ``replay`` reuses recorded results on resume.
    ``worker`` is an already spawned, unstarted realm to use (a
    :class:`~workflow_mcp.realm.channel.RealmChannel`: a Node worker, or the in-memory
    :class:`~workflow_mcp.realm.scripted.ScriptedRealm`; else a Node worker is spawned).
    ``child_check`` is asked about every nested ``workflow()`` child before it is read and before it
    runs (see :class:`~workflow_mcp.engine.nested.ChildCheck`); a refusal rejects the parent's call.
    ``executor`` carries out each live provider attempt (:mod:`~workflow_mcp.engine.executor`; default
    :class:`~workflow_mcp.engine.executor.LocalExecutor`, in this process).
    Must be called with a running event loop.

    Raises:
        InvalidInputError: ``args`` cannot be used (see :func:`check_args`); nothing was started.
    """
    check_args(args)
    opts = options or RunOptions()
    wf = _Workflow(
        name=workflow.meta.name,
        body=workflow.body,
        path=workflow.path,
        source_hash=workflow.source_hash,
        phases=[p.title for p in (workflow.meta.phases or ())],
        source=workflow.source,
    )
    run = _Run(
        run_id or new_run_id(),
        wf,
        provider,
        args,
        opts,
        persist,
        replay,
        resumed_from,
        dict(workflow_meta) if workflow_meta is not None else workflow.meta.to_json(),
    )
    run.children.check = child_check
    if executor is not None:
        run.executor = executor
    run.worker = worker
    run.task = asyncio.get_running_loop().create_task(run.main())
    return RunHandle(run)


class _RejectCall(Exception):
    """agent()/workflow() must reject in the realm with this error."""

    def __init__(self, message: str, name: str = "Error", code: str | None = None) -> None:
        super().__init__(message)
        self.error = {"name": name, "message": message}
        if code is not None:
            self.error["code"] = code


class _Run:
    def __init__(
        self,
        run_id: str,
        wf: _Workflow,
        provider: AgentProvider,
        args: Any,
        options: RunOptions,
        persist: Callable[[list[Event]], None] | None,
        replay: Replay | None,
        resumed_from: str | None,
        meta: dict[str, Any],
    ) -> None:
        self.run_id = run_id
        self.wf = wf
        self.provider = provider
        # A router names each call's provider by its routing fields; any other provider is one name
        # (read once: ``provider_for`` per call looked both attributes up again).
        self._routed = callable(getattr(provider, "route_of", None))
        self._provider_name = str(getattr(provider, "name", type(provider).__name__))
        self.executor: AgentExecutor = LocalExecutor()
        self.args = args
        self.options = options
        self.images_key = images_key(options.images)
        self.profile: Profile = get_profile(options.profile)
        self.log = EventLog(run_id, persist=persist, on_persist_error=self._persist_failed)
        self.replay = replay
        self.resumed_from = resumed_from
        self.meta = meta
        self.budget = Budget(total=options.token_budget)
        self.scheduler = Scheduler(
            cap=min(self.profile.max_agent_calls, options.max_agents or self.profile.max_agent_calls),
            concurrency=options.concurrency or default_concurrency(self.profile),
            budget=self.budget,
            profile_name=self.profile.name,
        )
        self.sync_timeout_ms = options.sync_timeout_ms or self.profile.sync_timeout_ms
        self.cwd = options.cwd or os.getcwd()
        self.worktree_root = options.worktree_root or os.path.join(
            tempfile.gettempdir(), "workflow-mcp-worktrees"
        )
        self.children = ChildResolver(self.cwd, options.home, self.profile)
        # Agent definitions, read once per run (when the script names agentType, at the start).
        self.agents: AgentCatalog | None = None
        self.agents_lock = asyncio.Lock()
        # One child resolution at a time, in call order (asyncio.Lock is FIFO), off the event loop.
        self.children_lock = asyncio.Lock()
        self.agent_seq = 0
        self.seen_phases: set[str] = set()
        self.signals: dict[str, CancelSignal] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.agent_tasks: set[asyncio.Task[None]] = set()
        self.returned = False  # the workflow returned: no agent call is dispatched any more
        self.worker: RealmChannel | None = None
        self.task: asyncio.Task[None]
        self.status: RunStatus = "running"
        self.final_value: Any = None
        self.error_message: str | None = None
        self.cancel_reason: str | None = None
        self._terminal_emitted = False
        # Answers on their way to the realm, one entry per realm message (one realm turn each).
        self._outbox: list[_Delivery] = []
        self._deliveries = 0  # realm deliveries numbered so far (an answer's ``turn``)
        self._joining: dict[int, _Delivery] = {}  # realm call id -> the delivery its answer joins
        self.store_error: Exception | None = None
        self.limit_error: str | None = None  # a per-run limit was reached: the run fails with this
        self.pause_context: dict[str, Any] | None = None
        self.checkpoint_asker: CheckpointAsker | None = None
        self.call_keys: dict[str, str] = {}  # agent id -> v2 journal key (names its checkpoints)
        self.log_lines = 0
        self.log_chars = 0
        self.logs_dropped = 0
        self.deltas = 0  # agent.output.delta events recorded (profile max_output_deltas)
        # Replayed results are released in the original run's completion order (engine/release.py).
        self.order = ReleaseOrder(replay.ranks) if replay is not None and replay.ranks else None
        self._releasing: dict[int, int] = {}  # realm call id -> rank of the replayed result it gets
        self._reserved: dict[str, _Delivery] = {}  # agent id -> the delivery its answer joins
        self._ping: int | None = None  # the id of the quiescence probe sent to the realm, if any
        self._ping_seq = 0
        self._calls_since_ping = 0
        self._quiet_check = False
        self.calls_run = 0  # agent calls that reached the provider or the journal
        # Replay in the realm (:meth:`_replay_table`): the records sent to the realm (by index) while
        # it answers replayed calls itself, and the calls it answers that it has not released yet.
        self._realm_records: list[JournalRecord] | None = None
        self._realm_held: dict[int, _RealmHeld] = {}
        self._realm_pending = 0  # realm replay messages waiting for their turn on the loop
        self.realm_error: str | None = None  # the realm's replay went out of step: the run fails
        self.max_events = self.profile.max_run_events
        self.stall_watch = StallWatch()  # the stall windows of live attempts, on one loop timer
        self.setup_failures: dict[str, int] = {}  # ProviderSetupError messages and their counts

    # -- events ----------------------------------------------------------------------------
    def emit(
        self,
        type: str,
        payload: dict[str, Any] | None = None,
        *,
        phase_id: str | None = None,
        agent_id: str | None = None,
    ) -> None:
        """Emit one event; the one that reaches the profile's ``max_run_events`` stops the run (the
        events of stopping it still follow, a bounded few)."""
        if self.log.emit(type, payload, phase_id=phase_id, agent_id=agent_id).sequence == self.max_events:
            self._stop_for_limit(
                f"the run emitted {self.profile.max_run_events:,} events, the most one run may "
                f"(workflow-mcp limit, profile {self.profile.name}); emit fewer log lines, phases or "
                "agent calls, or split the work into several runs"
            )

    def _log(self, message: str, *, runtime: bool = False) -> None:
        """One ``log`` event: cut like Claude Code cuts long lines, dropped past the run's log limits."""
        p = self.profile
        if self.log_lines >= p.max_log_lines or self.log_chars >= p.max_log_chars:
            self.logs_dropped += 1
            if self.logs_dropped == 1:
                limit = (
                    f"{p.max_log_lines:,} log lines"
                    if self.log_lines >= p.max_log_lines
                    else f"{p.max_log_chars:,} characters of log text"
                )
                self.emit(
                    "warning",
                    {
                        "message": f"this run reached its log limit ({limit}, workflow-mcp limit, profile "
                        f"{p.name}); later log lines are dropped. Log less, or summarize in the result"
                    },
                )
            return
        text = clip_text(message, p.log_line_max_chars, p.log_line_keep_chars)
        self.log_lines += 1
        self.log_chars += len(text)
        self.emit("log", {"message": text, "source": "runtime"} if runtime else {"message": text})

    def _delta(self, text: str, agent_id: str, phase: str | None) -> None:
        """One ``agent.output.delta`` event (its text cut at 4,000 characters), dropped past the
        profile's ``max_output_deltas``: the first one dropped emits a ``warning`` naming the limit."""
        limit = self.profile.max_output_deltas
        self.deltas += 1
        if self.deltas > limit:
            if self.deltas == limit + 1:
                self.emit(
                    "warning",
                    {
                        "message": f"this run recorded {limit:,} streamed output deltas, the most one run "
                        f"records (workflow-mcp limit, profile {self.profile.name}); later deltas are "
                        "dropped. Every agent's whole result is still recorded when it finishes"
                    },
                    agent_id=agent_id,
                )
            return
        self.emit("agent.output.delta", {"text": well_formed(text[:4000])}, agent_id=agent_id, phase_id=phase)

    def _note_dropped_logs(self) -> None:
        if self.logs_dropped and not self._terminal_emitted:
            count, self.logs_dropped = self.logs_dropped, 0
            self.emit("warning", {"message": f"{count:,} log lines of this run were dropped (log limit)"})

    def _stop_for_limit(self, message: str) -> None:
        """A per-run limit was reached: stop at once, like a store failure, and fail with ``message``."""
        if self.limit_error is not None or self._terminal_emitted:
            return
        self.limit_error = message
        self._stop("limit", "the run reached a limit")

    def _stop(self, kind: _StopKind, reason: str) -> None:
        """Stop everything in flight, at once, because of ``kind``: a per-run ``limit`` was reached,
        the event ``store`` failed, the run is ``pausing`` or being ``cancelled``. Every live agent's
        signal is cancelled with ``reason`` (what its ``agent.failed`` says), every task of the run is
        cancelled and the realm is closed; :meth:`main` then records the terminal event the cause
        implies. The caller has recorded the cause first."""
        for signal in list(self.signals.values()):
            signal.cancel(reason)
        for task in list(self.tasks):
            task.cancel()
        if self.worker is not None:
            asyncio.get_running_loop().create_task(self.worker.close())

    # -- lifecycle -------------------------------------------------------------------------
    def _persist_failed(self, exc: Exception) -> None:
        """The store refused events: stop the run at once, so nothing happens that is not recorded."""
        if self.store_error is not None or self._terminal_emitted:
            return
        self.store_error = exc
        self._stop("store", "the event store failed")

    def _pause(self, context: dict[str, Any]) -> None:
        """Stop the run in the resumable ``paused`` state (profile-independent: e.g. auth required)."""
        if self.pause_context is not None or self.cancel_reason is not None or self._terminal_emitted:
            return
        self.pause_context = context
        self._stop("pausing", "the run is pausing")

    def _finish_paused(self) -> None:
        if self._terminal_emitted or self.pause_context is None:
            return
        self._note_dropped_logs()
        self._terminal_emitted = True
        self.status = "paused"
        ctx = self.pause_context
        if ctx.get("reason") == "checkpoint_required":
            cp = ctx.get("checkpointContext") or {}
            what = cp.get("command") or cp.get("title") or cp.get("tool")
            self.error_message = (
                f"an agent asks permission ({cp.get('tool')}: {what}); answer it by resuming this run with "
                f'checkpointReplies {{"{cp.get("checkpointId")}": "allow" | "deny"}} '
                f"(`workflow-mcp resume {self.run_id} --checkpoint-reply {cp.get('checkpointId')}=allow`)."
            )
        elif ctx.get("reason") == "usage_limit":
            when = f"it resets at {ctx['resetsAt']}" if ctx.get("resetsAt") else "no reset time was given"
            self.error_message = (
                f"{ctx.get('backend')} reached its usage limit ({when}); resume this run once it has reset "
                "(`workflow-mcp resume RUN_ID --wait` waits for the reset)."
            )
        else:
            hint = f" Log in ({ctx['loginHint']})" if ctx.get("loginHint") else " Log in"
            self.error_message = f"{ctx.get('backend')} needs authentication.{hint}, then resume this run."
        self.emit("run.paused", {**ctx, "resumable": True, "tokenUsage": self._usage()})

    def request_cancel(self, reason: str) -> None:
        if self.cancel_reason is not None or self._terminal_emitted:
            return
        self.cancel_reason = reason
        self.emit("run.cancellation_requested", {"reason": reason})
        self._stop("cancelled", reason)

    async def main(self) -> None:
        started: dict[str, Any] = {
            "workflow": {"name": self.wf.name, "path": self.wf.path, "sourceHash": self.wf.source_hash},
            "phases": self.wf.phases,
            "profile": self.profile.name,
            "provider": getattr(self.provider, "name", type(self.provider).__name__),
            "concurrency": self.scheduler.concurrency,
            "tokenBudget": self.budget.total,
            "meta": self.meta,
        }
        if self.resumed_from is not None:
            started["resumedFrom"] = self.resumed_from
            started["resumePolicy"] = self.replay.policy if self.replay is not None else None
        self.emit("run.started", started)
        for note in self.replay.notes if self.replay is not None else ():
            self.emit("warning", {"message": note})
        for title in self.wf.phases:
            self._phase(title, "meta")  # Claude lists meta.phases first, before any agent (measured)
        try:
            await self._drive()
        except asyncio.CancelledError:
            if self.cancel_reason is None:
                self.cancel_reason = "the host stopped the run"
            self._finish_cancelled()
        except WorkflowMcpError as exc:
            self._finish_failed("Error", str(exc))
        except Exception as exc:  # the run's top-level handler: a bug must fail the run, not hang it
            self._finish_failed("InternalError", f"{type(exc).__name__}: {exc}")
        finally:
            for task in list(self.tasks):
                task.cancel()
            if self.tasks:
                await asyncio.gather(*self.tasks, return_exceptions=True)
            if self.worker is not None:
                await self.worker.close()
            if not self._terminal_emitted:
                if self.pause_context is not None:
                    self._finish_paused()
                elif self.realm_error is not None:
                    self._finish_failed("RealmError", self.realm_error)
                elif self.limit_error is not None:
                    self._finish_failed("LimitError", self.limit_error)
                elif self.cancel_reason is not None:
                    self._finish_cancelled()
                else:
                    self._finish_failed("Error", "the run ended without a result")
            self.log.close()

    async def _drive(self) -> None:
        if self.cancel_reason is not None:
            return
        if self.worker is None:
            self.worker = await RealmWorker.spawn(heap_mb=self.options.heap_mb, sandbox=self.options.sandbox)
        worker = self.worker
        if self.cancel_reason is not None or self.pause_context is not None:
            return  # cancelled while the worker was starting: nothing has run
        if "agentType" in self.wf.body:
            await self._agent_catalog()  # read before the first call, so its warnings come first

        body = run_body(self.wf.source, self.wf.body) if self.wf.source is not None else None
        start: dict[str, Any] = {
            "t": "start",
            **(body.to_start() if body is not None else {"body": self.wf.body, "bodyLine": 1}),
            "filename": self.wf.path,  # where a failure's location points (None: an inline source)
            "budgetTotal": self.budget.total,
            "spent": self.budget.spent,
            "syncTimeoutMs": self.sync_timeout_ms,
            "maxFanoutItems": self.profile.max_fanout_items,
            "maxValueDepth": MAX_VALUE_DEPTH,
            "boundary": {
                "childDepth": self.profile.boundary_child_depth,
                "finalDepth": self.profile.boundary_final_depth,
                "childErrorMessageIsStack": self.profile.child_error_message_is_stack,
            },
            "profile": self.profile.name,
            "cacheKeyOptions": list(self.profile.cache_key_options),
            "flatCacheChain": self.profile.flat_cache_chain,
            "fanoutStartDeferred": self.profile.fanout_start_deferred,
            "logLine": {"max": self.profile.log_line_max_chars, "keep": self.profile.log_line_keep_chars},
            "logLimit": {"lines": self.profile.max_log_lines, "chars": self.profile.max_log_chars},
        }
        if self.args is not MISSING:
            start["args"] = json.dumps(self.args, ensure_ascii=False)
        try:
            text = encode_message(start, "the run's args with the workflow source")
        except MessageTooLargeError as exc:
            self._finish_failed(
                "RangeError", f"{exc}; pass large inputs as files and give their paths in args"
            )
            return
        except MessageNotJsonError:
            self._finish_failed("TypeError", "the run's args hold NaN or Infinity, which JSON does not allow")
            return
        try:
            tables = self._replay_table(worker)
        except (MessageTooLargeError, MessageNotJsonError, ValueError):
            # A record the realm could not be handed as it is (a key no JSON text holds): the host
            # replays every call itself.
            self._realm_records, tables = None, []
        for table in tables:
            worker.post_text(table)
        worker.post_text(text)
        while True:
            msg = await worker.receive()
            if self.store_error is not None:
                self._finish_failed(
                    "StoreError",
                    f"the run stopped because its events could not be stored: {self.store_error}",
                )
                return
            if self.limit_error is not None:
                self._finish_failed("LimitError", self.limit_error)
                return
            if self.realm_error is not None:
                self._finish_failed("RealmError", self.realm_error)
                return
            if msg is None:
                if self.pause_context is not None:
                    self._finish_paused()
                elif self.cancel_reason is not None:
                    self._finish_cancelled()
                else:
                    self._finish_failed("Error", self._death_message(worker))
                return
            if isinstance(msg, AgentCallMessage):
                self._calls_since_ping += 1
                if self.returned:
                    continue  # never dispatched: the workflow has returned
                if not msg.child and msg.phase is not None:
                    self._phase(msg.phase, "agent")  # an agent's phase joins the list (measured)
                self._spawn(self._answer(msg), agent=True)
            elif isinstance(msg, Took):
                self._calls_since_ping += len(msg.calls)
                if not self.returned:  # never dispatched: the workflow has returned
                    self._realm_soon(self._took, msg)
            elif isinstance(msg, Released):
                self._realm_soon(self._released, msg)
            elif isinstance(msg, HandedBack):
                self._realm_soon(self._handed_back, msg)
            elif isinstance(msg, WorkflowCallMessage):
                self._calls_since_ping += 1
                self._spawn(self._answer_workflow(msg))
            elif isinstance(msg, Collated):
                self._probed(msg)
            elif isinstance(msg, Returned):
                self._stop_agents()
            elif isinstance(msg, Log):
                self._log(f"[{msg.child}] {msg.message}" if msg.child else msg.message)
            elif isinstance(msg, Phase):
                self._phase(msg.title)
            elif isinstance(msg, ChildEnded):
                # The parent's log lines about a child, shaped like Claude Code 2.1.332's.
                if msg.ok:
                    self._log(f"▸ {msg.name} done", runtime=True)
                else:
                    self._log(f"▸ {msg.name} failed: {msg.message}", runtime=True)
            elif isinstance(msg, Dropped):
                self.logs_dropped += msg.lines  # counted in the worker, past the log limit
            elif isinstance(msg, Done):
                while self._realm_pending:  # what the realm replayed is recorded first
                    await asyncio.sleep(0)
                if self.realm_error is not None:
                    self._finish_failed("RealmError", self.realm_error)
                    return
                await self._done(msg)
                return
            else:  # hello or checked: answers to what a run never asks
                raise RealmError(f"the realm sent an unexpected {type(msg).__name__} message during a run")

    def _death_message(self, worker: RealmChannel) -> str:
        tail = worker.stderr_tail()
        if "out of memory" in tail or "Allocation failed" in tail or "allocation failure" in tail:
            return _memory_message(worker)
        return f"the realm worker exited unexpectedly (exit {worker.returncode}): {tail[-500:]}"

    def _stop_agents(self) -> None:
        """The workflow returned (profile claude-code/2.1.332, measured: realm-unawaited-*): agent()
        calls it left pending are never dispatched and running ones are cancelled; the run does not
        wait for them. workflow() resolutions still answer, so an unawaited child starts."""
        if self.returned:
            return
        self.returned = True
        reason = _RETURNED
        for agent_id in [a for a, _ in self.signals.items()]:
            self.signals[agent_id].cancel(reason)
        for task in list(self.agent_tasks):
            task.cancel()

    async def _done(self, msg: Done) -> None:
        self._stop_agents()
        if self.agent_tasks:
            await asyncio.gather(*self.agent_tasks, return_exceptions=True)
        if self.pause_context is not None:
            self._finish_paused()
            return
        if self.cancel_reason is not None:
            self._finish_cancelled()
            return
        if self.limit_error is not None:
            self._finish_failed("LimitError", self.limit_error)
            return
        if msg.ok:
            try:
                value = json.loads(msg.value or "")
            except (TypeError, ValueError, RecursionError):
                self._finish_failed("Error", "the realm returned a final value that is not JSON")
                return
            if self.order is not None:
                self.order.release_all()  # nothing will ask for the results they wait behind
            if self.limit_error is not None:
                self._finish_failed("LimitError", self.limit_error)
                return
            if len(self.setup_failures) == 1 and sum(self.setup_failures.values()) == self.calls_run:
                # Every agent call failed for one configuration reason: nothing the workflow returned
                # came from an agent, so the run did not do its work.
                (reason,) = self.setup_failures
                self._finish_failed(
                    "Error",
                    f"every agent call of this run ({self.calls_run}) failed for one reason: {reason}",
                )
                return
            self._note_dropped_logs()
            self.final_value = value
            self.status = "completed"
            self._terminal_emitted = True
            self.emit("run.completed", {"result": value, "tokenUsage": self._usage()})
        else:
            err = msg.error or DoneError("Error", "the workflow failed")
            name = err.name or "Error"
            message = err.message
            location = err.location
            if (
                name == "RangeError"
                and "Array buffer allocation failed" in message
                and self.worker is not None
            ):
                # An ArrayBuffer over the worker's memory limit (RLIMIT_DATA): the same failure as
                # a heap exhausted by strings or arrays, so the same message.
                name, message, location = "Error", _memory_message(self.worker), None
            self._finish_failed(
                name,
                message,
                stack=err.stack or "",
                location=location,
                summary=_thrown_summary(name, message, location) if err.stack is not None else None,
            )

    def _usage(self) -> dict[str, Any]:
        return {"spent": self.budget.spent, "replayed": self.budget.replayed, "total": self.budget.total}

    def _finish_failed(
        self,
        name: str,
        message: str,
        stack: str = "",
        *,
        location: dict[str, Any] | None = None,
        summary: str | None = None,
    ) -> None:
        if self._terminal_emitted:
            return
        self._note_dropped_logs()
        self._terminal_emitted = True
        self.status = "failed"
        if summary is not None:
            self.error_message = summary
        else:
            self.error_message = f"{name}: {message}" if name not in ("Error", "") else message
        payload: dict[str, Any] = {"error": {"name": name, "message": message}, "tokenUsage": self._usage()}
        if stack:
            payload["error"]["stack"] = stack[-4000:]
        if location is not None:
            payload["error"]["location"] = location
        self.emit("run.failed", payload)

    def _finish_cancelled(self) -> None:
        if self._terminal_emitted:
            return
        self._note_dropped_logs()
        self._terminal_emitted = True
        self.status = "cancelled"
        self.error_message = self.cancel_reason or "cancelled"
        self.emit("run.cancelled", {"reason": self.cancel_reason, "tokenUsage": self._usage()})

    def _spawn(self, coro: Any, *, agent: bool = False) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        if agent:
            self.agent_tasks.add(task)
        # One done callback (each is a loop callback of its own when the task ends).
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        self.agent_tasks.discard(task)
        if self.order is not None:
            self._check_quiet()

    # -- replay order -------------------------------------------------------------------------
    async def _release_turn(self, rank: int) -> None:
        """Wait until the replayed result of ``rank`` may be released (engine/release.py)."""
        assert self.order is not None
        self._check_quiet()
        await self.order.turn(rank)

    def _check_quiet(self) -> None:
        """Soon, see whether only held replays are left; if so, probe the realm (:meth:`_probe`)."""
        if self._quiet_check:
            return
        self._quiet_check = True
        asyncio.get_running_loop().call_soon(self._probe)

    def _stalled_on_order(self) -> bool:
        """Nothing but held replays is in flight: no live call, no child being resolved, no answer on
        its way to the realm, no release being answered."""
        order = self.order
        return (
            order is not None
            and order.waiting > 0
            and not order.busy
            and not self._outbox
            and len(self.tasks) <= order.waiting
        )

    def _probe(self) -> None:
        """Ask the realm to echo a probe: it answers after every answer sent before it has been handled
        (and the agent() calls those answers led to have been sent), so a probe that comes back with no
        call before it finds the workflow waiting on held results only."""
        self._quiet_check = False
        if self._ping is not None or self.worker is None or not self._stalled_on_order():
            return
        self._ping_seq += 1
        self._ping = self._ping_seq
        self._calls_since_ping = 0
        self.worker.post_text(encode_message({"t": "collate", "id": self._ping, "names": []}))

    def _probed(self, msg: Collated) -> None:
        """The realm echoed a probe: with no call since, release the lowest held result."""
        if msg.id != self._ping:
            return
        self._ping = None
        if self._calls_since_ping == 0 and self._stalled_on_order():
            assert self.order is not None
            self.order.force()
        else:
            self._check_quiet()

    def _phase(self, title: str, source: str = "phase") -> None:
        """Add ``title`` to the run's phase list, once (profile claude-code/2.1.332, measured:
        ``meta.phases`` first, then each new title from phase() or an agent's ``phase`` option, or a
        child's synthetic phase). ``source`` is ``meta``, ``phase``, ``agent`` or ``child``."""
        if title in self.seen_phases:
            return
        self.seen_phases.add(title)
        self.emit("phase.started", {"title": title, "source": source}, phase_id=title)

    # -- calls from the realm -----------------------------------------------------------------
    async def _answer_workflow(self, msg: WorkflowCallMessage) -> None:
        what = "the answer to workflow()"
        try:
            answer = await self._workflow(msg)
        except _RejectCall as exc:
            answer = {
                "t": "result",
                "id": msg.id,
                "r": {"ok": False, "error": exc.error, "spent": self.budget.spent},
            }
        except Exception as exc:  # a task's top-level handler: never leave the realm waiting
            answer = {
                "t": "result",
                "id": msg.id,
                "r": {
                    "ok": False,
                    "error": {"name": "Error", "message": f"workflow runtime error: {exc}"},
                    "spent": self.budget.spent,
                },
            }
        self._answer_realm(answer, msg.id, what)

    async def _answer(self, msg: AgentCallMessage) -> None:
        reply: dict[str, Any]
        try:
            value = await self._agent(msg)
            reply = {"ok": True, "value": value}
        except _RejectCall as exc:
            reply = {"ok": False, "error": exc.error}
        except Exception as exc:  # a task's top-level handler: a provider bug must not hang the run
            # Never leave the realm waiting: an unexpected failure rejects the call with its message.
            reply = {"ok": False, "error": {"name": "Error", "message": f"workflow runtime error: {exc}"}}
        reply["spent"] = self.budget.spent
        self._answer_realm({"t": "result", "id": msg.id, "r": reply}, msg.id, agent=msg.label)

    def _answer_realm(
        self, msg: dict[str, Any], call_id: int, what: str = "", *, agent: str | None = None
    ) -> None:
        """Queue an answer in its realm delivery (:meth:`_reserve`); the deliveries queued in one
        event-loop turn are posted at its end. An answer over the realm's message limit rejects the
        call instead, naming the limit. ``what`` names the answer in that error; ``agent`` (a label)
        names it as that agent's result instead, worded only when an error needs it."""
        error: dict[str, str] | None = None
        delivery = self._joining.pop(call_id, None)
        if delivery is None or delivery.posted:
            delivery = self._reserve(-1)
        rank = self._releasing.pop(call_id, None)
        if rank is not None:
            delivery.ranks.append(rank)
        try:
            text = encode_message(msg)
        except MessageTooLargeError as exc:
            fix = (
                "ask for less, or let the agent write large output to a file and return its path"
                if agent is not None
                else "pass the child workflow less data through its args"
            )
            named = MessageTooLargeError(
                exc.size, f"the result of agent [{agent}]" if agent is not None else what
            )
            error = {"name": "RangeError", "message": f"{named}; {fix}"}
        except MessageNotJsonError:
            named_json = MessageNotJsonError(f"the result of agent [{agent}]" if agent is not None else what)
            error = {"name": "TypeError", "message": str(named_json)}
        if error is not None:
            text = encode_message(
                {"t": "result", "id": call_id, "r": {"ok": False, "error": error, "spent": self.budget.spent}}
            )
        delivery.texts.append(text)

    def _reserve(self, recorded: int) -> _Delivery:
        """The realm delivery the next answer joins, numbered (its ``turn``) before the answer exists
        so the answer's ``agent.completed``/``agent.cached`` event can record it.

        A run that replays nothing sends every answer of an event-loop turn in one delivery. A replay
        keeps the original run's deliveries (engine/release.py): a replayed answer
        whose original delivery ``recorded`` is that of the delivery just before it joins it; any
        other answer (live, or replayed with ``recorded`` ``-1``) is a delivery of its own."""
        outbox = self._outbox
        if outbox:
            last = outbox[-1]
            if self.order is None or (recorded >= 0 and last.recorded == recorded):
                return last
        self._deliveries += 1
        delivery = _Delivery(self._deliveries, recorded if self.order is not None else -1)
        outbox.append(delivery)
        if len(outbox) == 1:
            asyncio.get_running_loop().call_soon(self._flush_outbox)
        return delivery

    def _flush_outbox(self) -> None:
        # Commit the events of this turn before the realm hears of their outcome: nothing the
        # workflow acts on can be missing from the journal after a crash.
        self.log.flush()
        deliveries, self._outbox = self._outbox, []
        try:
            for delivery in deliveries:
                delivery.posted = True
                self._post(delivery.texts)
        finally:
            if self.order is not None:
                for delivery in deliveries:
                    for rank in delivery.ranks:
                        self.order.settle(rank)  # in the realm: the next result may follow
                self._check_quiet()

    def _post(self, items: list[str]) -> None:
        """Post one delivery: one message, which the realm handles in one turn (answers are resolved
        in order, then the workflow's continuations run). A delivery over the message limit goes out
        as several batches, each within the limit."""
        if self.worker is None or not items:
            return
        if len(items) == 1:
            self.worker.post_text(items[0])
            return
        batch: list[str] = []
        size = 0
        for item in items:
            if batch and size + len(item) + 1 > _BATCH_BYTES:
                self.worker.post_text(_batch(batch))
                batch, size = [], 0
            batch.append(item)
            size += len(item) + 1
        self.worker.post_text(_batch(batch) if len(batch) > 1 else batch[0])

    async def _workflow(self, msg: WorkflowCallMessage) -> dict[str, Any]:
        target = msg.target
        try:
            # Discovery and the V8 check read files and start Node: never on the loop other runs and
            # every MCP client share.
            async with self.children_lock:
                child = await asyncio.to_thread(self.children.resolve, target)
        except WorkflowMcpError as exc:
            return {
                "t": "result",
                "id": msg.id,
                "r": {
                    "ok": False,
                    "error": {"name": "Error", "message": str(exc)},
                    "spent": self.budget.spent,
                },
            }
        self._log(f"▸ running dynamic workflow {child.name}", runtime=True)
        out: dict[str, Any] = {
            "t": "child",
            "id": msg.id,
            "name": child.name,
            "phase": child.phase,
            **run_body(child.source, child.body).to_start(),
            "filename": child.path,
            "spent": self.budget.spent,
        }
        return out

    def _normalize(self, opts: Mapping[str, Any]) -> dict[str, Any]:
        if not opts:
            return {}  # most calls pass no options
        known = {k: opts[k] for k in self.profile.agent_options if k in opts}
        if "isolation" in known and not isinstance(known["isolation"], str):
            known.pop("isolation")
        stall = known.get("stallMs")
        if stall is not None and (not isinstance(stall, int | float) or stall <= 0):
            known.pop("stallMs")
        return known

    async def _agent_catalog(self) -> AgentCatalog:
        """The agent definitions visible from the run's directory, read once (off the event loop);
        each agent file that defines nothing is reported once, as a ``warning`` naming file and line."""
        if self.agents is not None:
            return self.agents
        async with self.agents_lock:
            if self.agents is None:
                catalog = await asyncio.to_thread(
                    find_agents, self.cwd, self.options.home, profile=self.profile
                )
                for problem in catalog.problems:
                    self.emit(
                        "warning",
                        {
                            "message": f"agent file {problem}; it is skipped (Claude Code skips it silently)",
                            "path": problem.path,
                            "line": problem.line,
                        },
                    )
                self.agents = catalog
        return self.agents

    async def _resolve(self, msg: AgentCallMessage, opts: dict[str, Any]) -> ResolvedCall:
        """The checks and resolutions of one agent() call, in Claude Code 2.1.332's order (case
        ``agents-option-check-order``): tool lists, ``agentType``, ``schema``, ``model``; then effort.

        Raises:
            AgentCallRefusedError: the call rejects before any provider (unknown agent type, zero
                tools, an unusable or invalid schema, a non-string model, a malformed tool list).
        """
        if not opts and msg.agent_type is None:
            return _PLAIN_CALL  # most calls pass no options: nothing to check or resolve
        _check_options(opts, self.profile)
        definition: AgentDefinition | None = None
        # The realm sends String(agentType) of the option (null/undefined: none).
        agent_type = msg.agent_type if msg.agent_type is not None else _coerced(opts.get("agentType"))
        if isinstance(agent_type, str):
            definition = (await self._agent_catalog()).resolve(agent_type)
            if definition.tools_error is not None:  # a fresh error per call: calls run concurrently
                raise AgentCallRefusedError(
                    str(definition.tools_error), js_name=definition.tools_error.js_name
                )
        schema = check_schema(opts.get("schema"), self.profile)
        # null, undefined and '' leave the definition's model; 'inherit' means the run's default
        # (measured, cases agents-options-override-definition, agents-option-fallbacks).
        given = opts.get("model")
        model = normalize_model(given) if given not in (None, "") else None
        if given in (None, "") and definition is not None:
            model = definition.model
        effort = normalize_effort(opts.get("effort"), self.profile.efforts)
        if effort is None and definition is not None and not is_numeric_effort(opts.get("effort")):
            effort = definition.effort
        option_denied = tuple(opts.get("disallowedTools") or ())
        denied = tuple(dict.fromkeys((*(definition.disallowed_tools if definition else ()), *option_denied)))
        tools = definition.tools if definition is not None else None
        if tools is not None and denied:
            tools = tuple(t for t in tools if t not in denied)
        return ResolvedCall(schema, model, effort, definition, tools, denied)

    async def _agent(self, msg: AgentCallMessage) -> Any:
        if self.cancel_reason is not None or self.pause_context is not None or self.store_error is not None:
            raise _RejectCall("the run is stopping; no new agent calls are admitted")
        opts = self._normalize(msg.opts)
        label = msg.label
        phase = msg.phase
        prompt = msg.prompt
        key = msg.key
        ckey = content_key(prompt, msg.canon)
        if self.images_key:  # the same prompt with other images is another call: never its cached result
            key, ckey = f"{key}+{self.images_key}", f"{ckey}+{self.images_key}"
        try:
            self.scheduler.admit()
        except CallRefused as exc:
            raise _RejectCall(exc.message, code=exc.code) from None
        if msg.child and phase is not None:
            self._phase(phase, "child")  # a child's synthetic phase appears with its first agent
        try:
            resolved = await self._resolve(msg, opts)
        except AgentCallRefusedError as exc:
            raise _RejectCall(str(exc), name=exc.js_name) from None
        schema = resolved.schema
        if resolved is not _PLAIN_CALL:
            if schema is None:
                opts.pop("schema", None)  # schema: null or false runs as a plain text call (still keyed)
            for name, value in (("model", resolved.model), ("effort", resolved.effort)):
                # What a provider finds in ``options`` is what the call resolved to.
                if value is None:
                    opts.pop(name, None)
                else:
                    opts[name] = value
        self.agent_seq += 1
        agent_id = f"ag_{self.agent_seq:04d}"
        side_effects = opts.get("isolation") == "worktree"
        base = {"label": label, "phase": phase}
        self.emit(
            "agent.queued",
            {**base, "key": key, "contentKey": ckey, "promptPreview": prompt_preview(prompt)},
            agent_id=agent_id,
            phase_id=phase,
        )
        if self.replay is not None:
            record = self.replay.take(key, ckey, label)
            problem = _replay_problem(record.result, schema) if record is not None else None
            if problem is not None and record is not None:
                # A record's result is checked as a live answer is: one of the wrong shape (a
                # damaged or edited journal, a schema changed since) never reaches the workflow.
                self.replay.refuse(label)
                if self.order is not None:
                    self.order.settle(record.completed)  # asked for: later results need not wait
                self.emit(
                    "warning",
                    {
                        "message": f"[{label}] the recorded result is not replayed: {problem}; the call runs live"
                    },
                    agent_id=agent_id,
                )
                record = None
            if record is not None:
                self.calls_run += 1
                return await self._replayed(msg.id, _RealmHeld(agent_id, record, label, phase, key, ckey))
        scheduler = self.scheduler
        if not scheduler.take_slot():
            await scheduler.wait_slot()
        try:
            return await self._execute(
                AgentCall(agent_id, prompt, label, phase, opts, resolved, key, ckey, side_effects)
            )
        finally:
            scheduler.release()
            reserved = self._reserved.pop(agent_id, None)
            if reserved is not None:
                self._joining[msg.id] = reserved

    async def _replayed(self, call_id: int, held: _RealmHeld, *, recorded: bool = False) -> Any:
        """Answer realm call ``call_id`` with ``held``'s recorded result: once the release order lets
        it go, in the delivery it joins, recorded as ``agent.cached`` (``recorded``: the call's
        ``agent.cached`` is stored already, as the realm took it; its delivery is recorded as an
        ``agent.delivered`` instead)."""
        record = held.record
        if self.order is not None and record.completed >= 0:
            # Released in the order the original run completed its calls, each in its own
            # realm turn, so order-dependent workflow state replays identically.
            await self._release_turn(record.completed)
            self._releasing[call_id] = record.completed
        self.budget.charge(int(record.tokens.get("output", 0)), replayed=True)
        # The realm delivery this answer goes out in: with the others of its original
        # delivery that are released with it (engine/release.py).
        delivery = self._reserve(record.turn if self.order is not None else -1)
        self._joining[call_id] = delivery
        if recorded:
            self.emit("agent.delivered", {"turn": delivery.turn, "agentIds": [held.agent_id]})
        else:
            self._emit_cached(held, delivery.turn)
        return record.result

    def _emit_cached(self, held: _RealmHeld, turn: int | None, preview: str | None = None) -> None:
        """The call's ``agent.cached``: ``turn`` the delivery its result reached the workflow in
        (``None``: not yet known, an ``agent.delivered`` names it; the call then had no
        ``agent.queued`` and ``preview`` is its prompt preview)."""
        record = held.record
        payload: dict[str, Any] = {
            "label": held.label,
            "phase": held.phase,
            "key": held.key,
            "contentKey": held.ckey,
            "result": record.result,
            "tokenUsage": record.tokens,
            "fromAgentId": record.agent_id,
            "fromRunId": record.source_run_id,
        }
        if turn is not None:
            payload["turn"] = turn
        else:
            payload["promptPreview"] = preview
        self.emit("agent.cached", payload, agent_id=held.agent_id, phase_id=held.phase)

    # -- replay in the realm ------------------------------------------------------------------
    #: The replay table goes to the realm in messages of about this size.
    REALM_TABLE_CHUNK = 512 * 1024

    def _replay_table(self, worker: RealmChannel) -> list[str]:
        """The ``replay`` messages that let the realm answer replayed calls itself (worker.js "Replay
        in the realm"), sent before ``start``; ``[]`` when it cannot: no replay, a channel that does
        not replay (``replays_locally``), records without completion ranks (imported ones), or image
        attachments (they suffix every key).

        The realm answers a call itself only where the host would decide the same — a call of the
        top-level workflow with no options but ``label``/``phase``, admitted for sure, whose record
        this run's :class:`Replay` would take and could use — and announces it (``local``: the index
        of the record) in call order, so the host records it as it records its own replays
        (:meth:`_take_in_realm`, :meth:`_released`). Where it cannot be sure it hands its held calls
        and every later one to the host (:meth:`_handed_back`). Every decision keeps the host's
        rules; what goes is the round trip per call, and the host's recording runs beside the realm
        instead of between its turns.

        What the log records differs in shape, not in what a resume of this run reads from it: each
        such call has one event, its ``agent.cached`` (with the prompt preview an ``agent.queued``
        would carry, stored as the realm takes the record, in call order, so the journal keeps call
        order), and each delivery of recorded results one ``agent.delivered`` (its ``turn`` and
        ``agentIds``, in release order: where the run's completion order and the calls' deliveries
        are read from). The budget is charged as each result is released, as on the host. A result may
        reach the workflow before its event is committed; a crash in between loses only events that
        the next resume replays again from the same records."""
        if (
            self.replay is None
            or self.order is None
            or self.images_key
            or not getattr(worker, "replays_locally", False)
        ):
            return []
        records = self.replay.reachable()
        self._realm_records = records
        head = {
            "t": "replay",
            "policy": self.replay.policy,
            "cap": self.scheduler.cap - self.scheduler.admitted,
            "options": list(self.profile.agent_options),
            "neutral": ["label", "phase"],
            "previewChars": PREVIEW_SOURCE_CHARS,
        }
        messages: list[str] = []
        rows: list[list[Any]] = []
        size = 0
        for row in self.replay.realm_rows():
            rows.append(row)
            size += len(row[7] or "") + len(row[1]) + len(row[2]) + 48
            if size >= self.REALM_TABLE_CHUNK:
                messages.append(encode_message({**head, "records": rows}))
                rows, size = [], 0
        messages.append(encode_message({**head, "records": rows, "last": True}))
        return messages

    def _realm_soon(self, handle: Callable[[Any], None], msg: Any) -> None:
        """Handle a realm replay message after what came before it: a call message before it spawned
        a task whose first step (its agent id, its ``agent.queued``) is already queued on the loop,
        and this runs after it, so the run's calls keep the order the workflow made them in."""
        self._realm_pending += 1
        asyncio.get_running_loop().call_soon(self._realm_step, handle, msg)

    def _realm_step(self, handle: Callable[[Any], None], msg: Any) -> None:
        self._realm_pending -= 1
        if self._terminal_emitted or self.realm_error is not None:
            return
        try:
            handle(msg)
        except RealmError as exc:
            self.realm_error = str(exc)
            self._stop("limit", "the realm's replay went out of step")

    def _took(self, msg: Took) -> None:
        for call in msg.calls:
            self._take_in_realm(*call)

    def _realm_out_of_step(self, what: str) -> RealmError:
        return RealmError(f"the realm's replay is out of step with the host's: {what}")

    def _stopping(self) -> bool:
        return (
            self.cancel_reason is not None or self.pause_context is not None or self.store_error is not None
        )

    def _take_in_realm(
        self,
        call_id: int,
        index: int,
        label: str,
        phase: str | None,
        prompt: str,
        key: str,
        ckey: str | None,
    ) -> None:
        """The realm answers call ``call_id`` (of the top-level workflow, with no options but
        ``label``/``phase``) from record ``index``: record it as :meth:`_agent` would (admission, the
        take, its ``agent.cached``); its delivery once :meth:`_released`. ``prompt`` is the start of
        the prompt its preview depends on (``PREVIEW_SOURCE_CHARS``); ``ckey`` the call's content key,
        ``None`` when it is the record's (the call has the record's v2 key).

        Raises:
            RealmError: the host would not have taken that record (a realm bug): the run fails.
        """
        records = self._realm_records
        if records is None or not 0 <= index < len(records):
            raise self._realm_out_of_step(f"agent() call {call_id} names a record the host did not send")
        if self._stopping():
            return  # the run is stopping: nothing more is recorded
        record = records[index]
        if ckey is None:
            if not key or key != record.key or not record.content_key:
                raise self._realm_out_of_step(f"[{label}] has another v2 key than record {index}")
            ckey = record.content_key
        if phase is not None:
            self._phase(phase, "agent")  # an agent's phase joins the list (measured)
        try:
            self.scheduler.admit()
        except CallRefused as exc:
            raise self._realm_out_of_step(f"[{label}] was answered in the realm, but {exc.message}") from None
        assert self.replay is not None
        if self.replay.take(key, ckey, label) is not record:
            raise self._realm_out_of_step(f"[{label}] took record {index}, the host another")
        self.agent_seq += 1
        held = _RealmHeld(f"ag_{self.agent_seq:04d}", record, label, phase, key, ckey)
        self._emit_cached(held, None, prompt_preview(prompt))
        self.calls_run += 1
        self._realm_held[call_id] = held

    def _held_in_realm(self, call_id: int, what: str) -> _RealmHeld | None:
        """The call ``call_id`` the realm took and now ``what`` (taken off the held ones); ``None``
        when the run is stopping and never recorded it.

        Raises:
            RealmError: the realm names a call it never announced.
        """
        held = self._realm_held.pop(call_id, None)
        if held is None and not self._stopping():
            raise self._realm_out_of_step(f"it {what} call {call_id}, which it never announced")
        return held

    def _released(self, msg: Released) -> None:
        """The realm handed the recorded results of ``msg.ids`` to the workflow in one delivery:
        charge them and record the delivery (``agent.delivered``)."""
        self._deliveries += 1
        agent_ids: list[str] = []
        for call_id in msg.ids:
            held = self._held_in_realm(call_id, "released")
            if held is None:
                continue
            self.budget.charge(int(held.record.tokens.get("output", 0)), replayed=True)
            if self.order is not None:
                self.order.settle(held.record.completed)
            agent_ids.append(held.agent_id)
        if agent_ids:
            self.emit("agent.delivered", {"turn": self._deliveries, "agentIds": agent_ids})

    def _handed_back(self, msg: HandedBack) -> None:
        """The realm stopped replaying by itself: answer its held calls as :meth:`_agent` would."""
        self._realm_records = None
        if self.order is not None:
            for rank in msg.settled:
                self.order.settle(rank)
            self.order.forced += len(msg.settled)
        for call_id in msg.ids:
            held = self._held_in_realm(call_id, "handed back")
            if held is None:
                continue
            self._spawn(self._answer_replayed(call_id, held), agent=True)

    async def _answer_replayed(self, call_id: int, held: _RealmHeld) -> None:
        reply: dict[str, Any]
        try:
            reply = {"ok": True, "value": await self._replayed(call_id, held, recorded=True)}
        except Exception as exc:  # a task's top-level handler: never leave the realm waiting
            reply = {"ok": False, "error": {"name": "Error", "message": f"workflow runtime error: {exc}"}}
        reply["spent"] = self.budget.spent
        self._answer_realm({"t": "result", "id": call_id, "r": reply}, call_id, agent=held.label)

    async def _execute(self, call: AgentCall) -> Any:
        agent_id, prompt, label, phase, opts = call.agent_id, call.prompt, call.label, call.phase, call.opts
        resolved, key = call.resolved, call.key
        schema = resolved.schema
        definition = resolved.definition
        started: dict[str, Any] = {"label": label, "phase": phase, "model": resolved.model}
        if definition is not None:
            started["agentType"] = definition.name
            started["agentSource"] = definition.source
            if definition.path is not None:
                started["agentFile"] = definition.path
        # The provider routing sends the call to (by its configured name), read from the same fields
        # routing reads, so each call's provider is in the event log.
        started["provider"] = (
            provider_for(
                self.provider,
                label=label,
                phase=phase,
                model=resolved.model,
                agent_type=definition.name if definition is not None else None,
            )
            if self._routed
            else self._provider_name
        )
        self.emit("agent.started", started, agent_id=agent_id, phase_id=phase)
        self.calls_run += 1
        signal = CancelSignal()
        self.signals[agent_id] = signal
        self.call_keys[agent_id] = key
        totals = _NO_TOKENS
        feedback: str | None = None
        cwd = self.cwd
        tree: Worktree | None = None
        if opts.get("isolation") == "worktree" and not self.options.dry_run:
            try:
                # The executor owns the worktree: a Ray call's is made on the node that runs it.
                tree = await self.executor.create_worktree(
                    self.cwd, self.worktree_root, self.run_id, agent_id
                )
            except WorktreeError as exc:
                self._agent_failed(call, str(exc), totals, "error")
                self.signals.pop(agent_id, None)
                raise _RejectCall(str(exc)) from None
            cwd = tree.path
            if self.replay is not None:
                self.emit(
                    "warning",
                    {
                        "message": f"[{label}] has side effects (isolation: worktree) and runs live: "
                        "no completed result of it was recorded"
                    },
                    agent_id=agent_id,
                )
        try:
            failures = 0
            attempt = 0
            while True:
                attempt += 1
                request = agent_request(
                    prompt=prompt,
                    label=label,
                    run_id=self.run_id,
                    agent_id=agent_id,
                    phase=phase,
                    schema=schema,
                    model=resolved.model,
                    effort=resolved.effort,
                    isolation=opts.get("isolation"),
                    agent_type=definition.name if definition is not None else None,
                    instructions=definition.instructions if definition is not None else None,
                    tools=resolved.tools,
                    disallowed_tools=resolved.disallowed_tools,
                    stall_ms=opts.get("stallMs"),
                    cwd=cwd,
                    options={k: v for k, v in opts.items() if k not in ("label", "phase")} if opts else {},
                    attempt=attempt,
                    feedback=feedback,
                    images=self.options.images,
                )
                try:
                    result = await self._call_provider(request, signal, agent_id, phase)
                except (ProviderAuthError, ProviderUsageLimitError) as exc:
                    # The run pauses (resumable) until the user logs in or the usage limit resets:
                    # nothing is lost, nothing is retried against a refusing backend.
                    context = exc.to_json()
                    self._agent_failed(call, str(exc), totals, str(context["reason"]))
                    self._pause(context)
                    raise asyncio.CancelledError from None
                except AgentExecutionError as exc:
                    message = well_formed(str(exc))
                    if isinstance(exc, ProviderSetupError):
                        self.setup_failures[message] = self.setup_failures.get(message, 0) + 1
                    self._agent_failed(call, message, totals, "error")
                    raise _RejectCall(message) from None
                except AgentStalledError as exc:
                    message = well_formed(str(exc))
                    self._agent_failed(call, message, totals, "stalled")
                    raise _RejectCall(message) from None
                except asyncio.CancelledError:
                    reason = self.cancel_reason or (_RETURNED if self.returned else "cancelled")
                    self._agent_failed(call, reason, totals, "cancelled")
                    raise
                totals = totals + result.usage
                self.budget.charge(result.usage.output)
                if result.outcome == "provider_failed":
                    message = well_formed(result.message or "provider failure")
                    self._log(f"[{label}] failed: {message}", runtime=True)
                    self._agent_failed(call, message, totals, "provider_failed")
                    return None
                if result.outcome == "skipped":
                    self._agent_done(call, None, totals, outcome="skipped")
                    return None
                if schema is None:
                    value = (
                        well_formed(result.text)
                        if result.text is not None
                        else (
                            json.dumps(result.structured, ensure_ascii=False) if result.has_structured else ""
                        )
                    )
                    self._agent_done(call, value, totals)
                    return value
                if not result.has_structured:
                    # Claude Code 2.1.332's words, then the provider's own reason when it gave one.
                    message = "agent({schema}): subagent completed without calling StructuredOutput (after in-conversation nudge)"
                    if result.message:
                        message += f": {well_formed(result.message)}"
                    self._agent_failed(call, message, totals, "no_structured_output")
                    raise _RejectCall(message)
                value = (
                    coerce_top_level(schema, result.structured)
                    if self.profile.schema_coercion
                    else result.structured
                )
                problem = json_value_problem(value) or validate(schema, value)
                if problem is None:
                    self._agent_done(call, value, totals)
                    return value
                failures += 1
                if failures >= self.profile.schema_retries:
                    n = self.profile.schema_retries
                    message = (
                        f"agent({{schema}}): StructuredOutput retry cap ({n}) exceeded — {failures} failed calls "
                        "with no valid output"
                    )
                    if self.profile.telemetry_safe_errors:
                        message += f" — last StructuredOutput error: Output does not match required schema: {problem}"
                    else:
                        message += f"; last error: {problem}"
                    self._agent_failed(call, message, totals, "schema_validation")
                    raise _RejectCall(
                        message, name="TelemetrySafeError" if self.profile.telemetry_safe_errors else "Error"
                    )
                feedback = f"Your structured output did not match the schema: {problem}. Answer again."
        finally:
            self.signals.pop(agent_id, None)
            if tree is not None:
                info = await asyncio.shield(self.executor.finish_worktree(tree))
                if info.get("kept"):
                    # What the agent wrote is never thrown away: the worktree stays, and says where.
                    self.emit(
                        "artifact.created",
                        {"kind": "worktree", "label": label, **info},
                        agent_id=agent_id,
                        phase_id=phase,
                    )

    async def _call_provider(
        self, request: AgentRequest, signal: CancelSignal, agent_id: str, phase: str | None
    ) -> AgentResult:
        """One provider call under the stall window and ``agentTimeoutMs``, with rate-limited answers
        retried (:mod:`.backoff`: bounded exponential backoff with jitter, ``Retry-After`` honoured;
        each retry is a ``warning`` event). The last answer is returned as it came."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        policy = self.options.retry
        timeout_s = self.options.agent_timeout_ms / 1000 if self.options.agent_timeout_ms else None
        retry = 0
        while True:
            result = await self._attempt_provider(request, signal, agent_id, phase, started)
            if result.outcome != "provider_failed" or result.failure not in RETRYABLE:
                return result
            retry += 1
            wait = policy.delay(retry, result.retry_after_s)
            if wait is None or (timeout_s is not None and loop.time() + wait - started >= timeout_s):
                return result
            after = (
                f"Retry-After {result.retry_after_s:g} s" if result.retry_after_s is not None else "backoff"
            )
            what = (result.failure or "").replace("_", " ")
            self.emit(
                "warning",
                {
                    "message": f"[{request.label}] {what}: {result.message or 'refused'}; retrying in "
                    f"{wait:.1f} s ({after}; {retry} of {policy.retries})"
                },
                agent_id=agent_id,
            )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await signal.wait()
            if signal.cancelled:
                raise asyncio.CancelledError

    def _checkpoint_of(
        self,
        request: AgentRequest,
        signal: CancelSignal,
        scope: StallWindow,
    ) -> Checkpoint:
        """The human-checkpoint hook of one provider attempt (:mod:`.checkpoint`): a known decision,
        else the waiting client's answer, else the run pauses with ``checkpoint_required``. The stall
        window does not run while a human decides."""
        agent_id, phase = request.agent_id, request.phase
        asked = [0]

        async def checkpoint(ask: CheckpointAsk) -> bool | None:
            cid = checkpoint_id(self.call_keys.get(agent_id, agent_id), request.attempt, asked[0], ask)
            asked[0] += 1
            context: dict[str, Any] = {"checkpointId": cid, "label": request.label, **ask.to_json()}
            known = self.options.checkpoint_replies.get(cid)
            if known is not None:
                self._resolved(context, known.allow, known.source, agent_id, phase)
                return known.allow
            self.emit("checkpoint.requested", context, agent_id=agent_id, phase_id=phase)
            asker = self.checkpoint_asker
            if asker is not None and not signal.cancelled:
                scope.pause()
                answer_task = asyncio.ensure_future(asker(context))
                cancel_task = asyncio.ensure_future(signal.wait())
                try:
                    await asyncio.wait({answer_task, cancel_task}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    cancel_task.cancel()
                    if not answer_task.done():
                        answer_task.cancel()
                    scope.resume()
                if signal.cancelled:
                    return None
                answer = answer_task.result() if not answer_task.cancelled() else None
                if answer is not None:
                    self._resolved(context, answer, "elicitation", agent_id, phase)
                    return answer
            self._pause({"reason": "checkpoint_required", "checkpointContext": context})
            return None

        return checkpoint

    def _resolved(
        self, context: dict[str, Any], allow: bool, source: str, agent_id: str, phase: str | None
    ) -> None:
        self.emit(
            "checkpoint.resolved",
            {**context, "decision": "allow" if allow else "deny", "source": source},
            agent_id=agent_id,
            phase_id=phase,
        )

    async def _attempt_provider(
        self, request: AgentRequest, signal: CancelSignal, agent_id: str, phase: str | None, started: float
    ) -> AgentResult:
        """One provider answer with the stall watchdog (profile claude-code/2.1.332: no progress for
        ``stallMs``, default 180 s → retry, up to 5 retries, then reject) and ``agentTimeoutMs``.

        The window applies to every provider: output deltas and progress events reset it; a ``retry``
        event (the backend retrying after an error) does not, so a backend that reconnects forever
        still stalls, and its last retry message is named."""
        stall_ms = request.stall_ms or self.options.stall_ms or self.profile.stall_window_ms
        stall_s = stall_ms / 1000
        timeout_s = self.options.agent_timeout_ms / 1000 if self.options.agent_timeout_ms else None
        loop = asyncio.get_running_loop()
        limit = started + timeout_s if timeout_s is not None else None
        attempts = self.profile.stall_retries + 1
        retrying: list[str] = []
        last = ""
        for attempt in range(1, attempts + 1):
            if signal.cancelled:
                raise asyncio.CancelledError
            scope = self.stall_watch.window(stall_s, limit)

            async def emit(event: ProviderEvent, scope: StallWindow = scope) -> None:
                if event.kind == "retry":
                    retrying[:] = [event.text]
                    return
                scope.progress()
                if event.kind == "output.delta":
                    self._delta(event.text, agent_id, phase)

            try:
                async with scope:
                    # AgentContext(signal=…, emit=…, checkpoint=…), minus its frozen __init__'s
                    # setattr call per field (one per attempt, on the hot path).
                    context = _new(AgentContext)
                    context.__dict__.update(
                        signal=signal, emit=emit, checkpoint=self._checkpoint_of(request, signal, scope)
                    )
                    if type(self.executor) is LocalExecutor:  # what it does, minus a coroutine per attempt
                        return await self.provider.execute(request, context)
                    return await self.executor.execute(self.provider, request, context)
            except TimeoutError:
                if not scope.expired():
                    raise  # a provider's own timeout, not our watchdog
            if timeout_s is not None and loop.time() - started >= timeout_s:
                raise AgentExecutionError(
                    f"the agent did not finish within {self.options.agent_timeout_ms} ms (agentTimeoutMs)"
                )
            last = f"; the provider was retrying: {retrying[0]}" if retrying else ""
            if attempt < attempts:
                self.emit(
                    "warning",
                    {
                        "message": f"[{request.label}] stalled: no progress for {stall_ms:g} ms{last}; "
                        f"retrying ({attempt} of {self.profile.stall_retries})"
                    },
                    agent_id=agent_id,
                )
        raise AgentStalledError(
            f"agent stalled on all {self.profile.stall_retries + 1} attempts "
            f"(no progress for {stall_ms:g} ms each){last}"
        )

    def _agent_done(self, call: AgentCall, value: Any, usage: TokenUsage, outcome: str = "completed") -> None:
        payload = {
            "label": call.label,
            "phase": call.phase,
            "outcome": outcome,
            "result": value,
            "tokenUsage": usage.to_json(),
            "key": call.key,
            "contentKey": call.content_key,
            "sideEffects": call.side_effects,
        }
        if not call.side_effects:
            # The realm delivery the answer goes out in (a worktree call's answer waits for the
            # worktree to be finished, so its delivery is not known yet: it replays on its own).
            delivery = self._reserve(-1)
            self._reserved[call.agent_id] = delivery
            payload["turn"] = delivery.turn
        self.emit("agent.completed", payload, agent_id=call.agent_id, phase_id=call.phase)

    def _agent_failed(self, call: AgentCall, message: str, usage: TokenUsage, reason: str) -> None:
        self.emit(
            "agent.failed",
            {**call.base, "reason": reason, "message": message, "tokenUsage": usage.to_json()},
            agent_id=call.agent_id,
            phase_id=call.phase,
        )


_BATCH_BYTES = MAX_MESSAGE_BYTES - 64  # room for the batch envelope
_StopKind = Literal["limit", "store", "pausing", "cancelled"]


@dataclass(slots=True)
class _RealmHeld:
    """A replayed call: its agent id, the record it takes, and what its ``agent.cached`` names."""

    agent_id: str
    record: JournalRecord
    label: str
    phase: str | None
    key: str
    ckey: str


@dataclass(eq=False)
class _Delivery:
    """Answers that reach the realm as one message, so in one realm turn. ``turn`` numbers it in this
    run (recorded in the answers' events); ``recorded`` is the original delivery of the replayed
    answers it holds (``-1``: none, or not known); ``ranks`` the completion ranks it releases."""

    turn: int
    recorded: int
    texts: list[str] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    posted: bool = False


_RETURNED = "the workflow returned before this agent() call finished"
_new = object.__new__
_PLAIN_CALL = ResolvedCall(None, None, None, None, None, ())
"""What a call with no options and no agent type resolves to: no schema, model, effort or definition."""
_NO_TOKENS = TokenUsage()


def _batch(texts: list[str]) -> str:
    return '{"t":"batch","items":[' + ",".join(texts) + "]}"


def _thrown_summary(name: str, message: str, location: Mapping[str, Any] | None) -> str:
    """A failed run's message for what the workflow threw: ``Name: message`` as Claude Code 2.1.332
    reports it (a thrown string ``s`` is ``Error: s``, a thrown object or null bare ``Error``), then
    where it was thrown: the file's own line and column, and the position Claude Code's stack shows
    (it counts in the body after the meta statement, see realm/_body.py) when that differs."""
    text = f"{name}: {message}" if message else name
    if not location:
        return text
    where = f"{location.get('path') or 'workflow.js'}:{location.get('line')}:{location.get('column')}"
    reported = str(location.get("reported") or "")
    if reported and not where.endswith(reported.rpartition("workflow.js")[2]):
        return f"{text} (at {where}; Claude Code reports {reported})"
    return f"{text} (at {where})"


def _memory_message(worker: RealmChannel) -> str:
    limit = f"realm heap limit {worker.heap_mb} MB"
    if worker.memory_limited:
        limit += f", {worker.memory_mb} MB of memory in all"
    return (
        f"the workflow ran out of memory ({limit}); keep large intermediate data out of JavaScript "
        "(let agents write it to files) or raise the heap limit (--heap-mb)"
    )


def well_formed(text: str) -> str:
    """``text`` with every lone UTF-16 surrogate (U+D800-U+DFFF without its other half) replaced by
    U+FFFD. Providers can hand back such strings (a decoded ``\\ud800`` escape); UTF-8 cannot carry
    them, so neither the store nor an MCP message could, and the realm makes the same replacement on
    every string it hands the host (worker.js ``wellFormed``)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def clip_text(text: str, max_units: int, keep: int) -> str:
    """``text`` cut in the middle when longer than ``max_units`` UTF-16 code units: its first and last
    ``keep`` units around ``\n\n... [N characters truncated] ...\n\n`` (Claude Code 2.1.332's log
    lines, measured). A surrogate pair split at a cut becomes U+FFFD, as the realm's lines do."""
    if 2 * len(text) <= max_units:
        return text
    units = text.encode("utf-16-le", "surrogatepass")
    if len(units) // 2 <= max_units:
        return text
    head = units[: 2 * keep].decode("utf-16-le", "replace")
    tail = units[len(units) - 2 * keep :].decode("utf-16-le", "replace")
    return f"{head}\n\n... [{len(units) // 2 - 2 * keep} characters truncated] ...\n\n{tail}"


_CLAMP = re.compile(r"^Bash\(\S(?:[\s\S]*\S)?\)$")


def _coerced(value: Any) -> str | None:
    """``String(value)`` of an option that crossed the realm as JSON (``null``: none)."""
    return None if value is None else js_string(value)


def _typeof(value: Any) -> str:
    """JavaScript's ``typeof`` of a JSON value (arrays and ``null`` are objects)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object"


def _check_options(opts: Mapping[str, Any], profile: Profile) -> None:
    """Tool lists Claude Code 2.1.332 refuses before launch (measured with the oracle): anything but
    an array of non-empty strings (``null`` too), and a ``bashCommandClamp`` entry not written
    ``Bash(<command>)``. The messages are Claude's; the error is named ``TelemetrySafeError``.

    Raises:
        AgentCallRefusedError: the call rejects.
    """
    for name in ("disallowedTools", "bashCommandClamp"):
        if name not in opts or name not in profile.agent_options:
            continue
        value = opts[name]
        example = "['Bash', 'Write']" if name == "disallowedTools" else "['Bash(git status)']"
        if not isinstance(value, list) or not all(isinstance(x, str) and x for x in value):
            raise AgentCallRefusedError(
                f"agent() opts.{name} must be an array of non-empty tool-name strings (e.g. {example}); "
                f"got {_typeof(value)}. Refusing the spawn rather than running it un-narrowed.",
                js_name="TelemetrySafeError",
            )
        if name == "bashCommandClamp":
            bad = [x for x in value if not _CLAMP.match(x)]
            if bad:
                raise AgentCallRefusedError(
                    f"agent() opts.bashCommandClamp entries must read Bash(<command>); got {bad[0]!r}",
                    js_name="TelemetrySafeError",
                )


def _replay_problem(result: Any, schema: Any) -> str | None:
    """Why a recorded ``result`` cannot stand in for a call with ``schema``, or ``None``."""
    problem = json_value_problem(result)
    if problem is not None:
        return problem
    if schema is None:
        if not isinstance(result, str):
            return f"a call without a schema resolves to a string, but the record holds {_json_kind(result)}"
        return None
    problem = validate(schema, result)
    return None if problem is None else f"it does not match the call's schema ({problem})"


def _json_kind(value: Any) -> str:
    """``value``'s JSON type with its article: ``"an object"``, ``"an array"``, ``"null"``, …"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    return "an object"


__all__ += ["RealmError", "records_from_events"]
