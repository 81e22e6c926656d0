"""The ``codex`` provider: OpenAI Codex through its official Python SDK (``openai-codex``), which
drives ``codex app-server`` over JSON-RPC. Install with ``pip install 'workflow-mcp[codex]'`` (the
SDK bundles the ``codex`` binary through ``openai-codex-cli-bin``).

One app-server process per provider instance, started on the first call and shared by every
concurrent call; each agent() call is one Codex *thread* and one *turn*:

- **Prompt and model.** The prompt is the turn's input. ``model`` passes through (routing has
  already applied ``[providers.codex.models]``); a bare Claude alias (``sonnet``, ``opus``,
  ``haiku``) is refused, never guessed. ``effort`` maps through the ``efforts`` setting (default:
  the same name: low, medium, high, xhigh, max).
- **Agent definitions.** An ``agentType``'s instructions become the thread's developer instructions
  (after the ``developer_instructions`` setting); its model and effort arrive as the request's. Codex
  has no per-tool switches: an agent whose tools include none that edits files (Explore, Plan, a
  definition listing ``Read, Grep``) runs in a read-only sandbox, whatever the policy allows.
- **Structured output.** The portable schema goes through :func:`~.schema.to_strict` as the turn's
  ``output_schema``; the final message is read by :func:`~.schema.parse_answer` and projected back. The engine validates
  the result against the portable schema; a re-ask (``attempt > 1``) continues the same thread
  with the engine's feedback, so the model sees its previous answer.
- **Events.** ``item/agentMessage/delta`` → ``output.delta``; an ``error`` notification Codex will
  retry after (``willRetry``: "Reconnecting... 2/5", "waiting for network") → ``retry``, which is
  *not* a sign of life; every other notification (items started and completed, reasoning, plans,
  command output) → ``progress``, which the engine's stall watchdog counts as a sign of life.
- **Usage.** The thread's token counters, per turn: input, output (reasoning included, as charged),
  cached input → ``cache_read``.
- **Session.** The thread id is ``AgentResult.session``; a request with ``session`` resumes that
  thread (``thread/resume``).
- **Cancellation.** When ``context.signal`` fires (or the call's task is cancelled, e.g. by the
  stall watchdog), the turn is interrupted (``turn/interrupt``) and the call ends with
  :class:`asyncio.CancelledError`.
- **Policy.** Sandbox, network and writable roots from :class:`~.policy.Policy` (default
  workspace-write, no network) become the thread's sandbox mode and ``sandbox_workspace_write``
  config. Approvals: ``never`` → ``approvalPolicy: never`` (Codex asks nobody; a request that
  comes anyway is declined: fail closed); ``auto-review`` → ``on-request`` reviewed by Codex's
  ``auto_review``; ``ask`` → ``on-request`` reviewed by ``user``: commands run in the sandbox
  without asking, and what would leave it (``item/commandExecution/requestApproval``, e.g. a
  command the model marks ``require_escalated``) is answered from the policy where it can
  (:func:`~.policy.decide_permission`; a network request is ``fetch``, a file change ``edit``),
  else becomes the run's human checkpoint (``context.checkpoint``: tool ``execute``, title the
  model's justification, command the command line Codex would run). Allowed → ``accept`` (once);
  denied → ``decline`` (the model is told and the turn goes on); no answer because the run is
  pausing (``checkpoint_required``) → ``cancel``. The request is answered whenever the decision
  comes, never on the SDK's reader thread, so other calls on the app-server go on meanwhile; the
  call's signal or cancellation ends the wait. The app-server sees only the allowlisted environment
  (:func:`~.policy.allowed_env` plus Codex's own names): the rest is unset through ``env -u``
  (names only, never a value, on the command line).
- **Outcomes.** A turn that fails on an API or transport problem (5xx, overload, rate or usage
  limit, connection) after Codex's own retries → ``provider_failed``; HTTP 401 or ``unauthorized``
  → :class:`~.base.ProviderAuthError` (the run should pause for a login); any other failure (bad
  request, context window, sandbox, policy) → :class:`~.base.AgentExecutionError`; a turn
  interrupted by someone else → ``skipped``.

Settings (``[providers.codex]``): ``bin`` (a codex binary; default the bundled one), ``codex_home``
(``CODEX_HOME``), ``model``, ``effort`` (default effort), ``efforts`` (table), ``config`` (table of
Codex config overrides, ``-c key=value``; ``features.shell_snapshot`` defaults to false here), ``env`` (extra environment names to pass),
``ephemeral`` (bool: threads not saved, so not resumable), ``developer_instructions``,
``rpc_timeout_s`` (bound on each app-server request, default 60), ``interrupt_timeout_s`` (bound on
an interrupt taking effect, default 15), ``max_workers`` (threads for app-server requests, 32).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import threading
import tomllib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Final, TypeVar

from ._kit import (
    HTTP_STATUSES,
    FailureTable,
    ProgramSettings,
    ProviderBase,
    at_least,
    dist_version,
    failure_outcome,
    load_sdk,
    map_effort,
    more_than,
    one_of,
    probe_program,
    ready,
    upstream_message,
)
from .base import (
    AgentContext,
    AgentExecutionError,
    AgentRequest,
    AgentResult,
    CheckpointAsk,
    ProviderCapabilities,
    ProviderEvent,
    TokenUsage,
)
from .policy import PermissionAsk, PermissionDecision, allowed_env, answer_checkpoint, decide_permission
from .registry import Availability, ProviderStartError
from .routing import CLAUDE_ALIASES, ModelAliasError
from .schema import StrictSchema, parse_answer, to_strict

# The SDK is an optional extra, imported only when a call needs it; its objects are typed ``Any``
# here so that type-checking this package never requires the extra.
Codex = Any
Thread = Any
TurnHandle = Any

__all__ = ["CodexProvider", "CodexSettings"]

T = TypeVar("T")

INSTALL: Final = "pip install 'workflow-mcp[codex]'"
LOGIN_HINT: Final = "codex login"
CREDENTIAL_ENV: Final = (
    "CODEX_HOME",
    "CODEX_API_KEY",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_ORGANIZATION",
    "OPENAI_PROJECT",
    "RUST_LOG",
)
"""Environment names the codex process may see besides the policy's base set."""
_EFFORTS: Final = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
FAILURES: Final = FailureTable(
    "codex",
    kinds={
        "unauthorized": "auth",
        "usageLimitExceeded": "usage_limit",
        "rateLimitExceeded": "rate_limit",
        "serverOverloaded": "overloaded",
        "internalServerError": "api",
        "flexUnavailable": "api",
        "httpConnectionFailed": "api",
        "responseStreamConnectionFailed": "api",
        "responseStreamDisconnected": "api",
        "responseTooManyFailedAttempts": "api",
    },
    statuses={401: HTTP_STATUSES[401]},
)
"""Codex's error kinds (``codexErrorInfo``) as ours; other kinds (bad request, context window,
sandbox) are execution errors. Only a 401 is read from the HTTP status: Codex names every other
failure by kind."""


@dataclass(frozen=True)
class CodexSettings(ProgramSettings):
    """``[providers.codex]`` (module docstring), checked by :func:`~._kit.check_settings`."""

    codex_home: str | None = None
    effort: str | None = field(default=None, metadata=one_of(_EFFORTS))
    efforts: dict[str, str] = field(default_factory=dict, metadata=one_of(_EFFORTS))
    config: dict[str, Any] = field(default_factory=dict)
    ephemeral: bool = False
    developer_instructions: str | None = None
    rpc_timeout_s: float = field(default=60.0, metadata=more_than(0))
    interrupt_timeout_s: float = field(default=15.0, metadata=more_than(0))
    max_workers: int = field(default=32, metadata=at_least(1))


_REMEMBERED_THREADS: Final = 4096
_COMMAND_APPROVAL: Final = "item/commandExecution/requestApproval"
_FILE_APPROVAL: Final = "item/fileChange/requestApproval"
_PERMISSIONS_APPROVAL: Final = "item/permissions/requestApproval"


class CodexProvider(ProviderBase[CodexSettings]):
    """An :class:`~workflow_mcp.providers.base.AgentProvider` running Codex turns (module docstring).

    Construct directly or through the registry (``get_provider("codex", settings)``). Nothing starts
    until the first :meth:`execute`; :meth:`aclose` stops the app-server. Use one instance per event
    loop. Raises :class:`~workflow_mcp.providers.config.ProviderConfigError` for bad settings.
    """

    name = "codex"
    settings_type = CodexSettings
    install_hint = INSTALL
    capabilities: Final = ProviderCapabilities(sandbox_control=True, session_resume=True, streaming=True)
    accepts_claude_models: Final = False

    def setup(self) -> None:
        """The expanded ``codex_home`` and the threads for app-server requests (the app-server
        itself starts with the first call)."""
        home = self.settings.codex_home
        self.codex_home = os.path.expanduser(home) if home else None
        self._executor = ThreadPoolExecutor(
            max_workers=self.settings.max_workers, thread_name_prefix="workflow-mcp-codex"
        )
        self._codex: Codex | None = None
        self._start_lock = threading.Lock()
        self._threads: OrderedDict[tuple[str, str], Thread] = OrderedDict()
        self._totals: OrderedDict[str, TokenUsage] = OrderedDict()
        self._active: dict[str, TurnHandle] = {}
        self._desk = _ApprovalDesk(ask=self.policy.approvals == "ask")
        self._closed = False

    # -- registry ------------------------------------------------------------------------------
    @classmethod
    def probe(cls, settings: Mapping[str, Any]) -> Availability:
        """Availability without starting Codex: the SDK importable, the binary present (its
        version from the bundling package, or ``--version`` for a configured ``bin``), and a login
        seen from file and variable *names* only (``$CODEX_HOME/auth.json``, ``CODEX_API_KEY``,
        ``OPENAI_API_KEY``, or a custom model provider in Codex's config)."""
        try:
            found = importlib.util.find_spec("openai_codex") is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return Availability(False, problem="the openai-codex SDK is not installed", install=INSTALL)
        binary = settings.get("bin")
        version: str | None
        if binary:
            probed = probe_program(str(binary))
            if isinstance(probed, Availability):
                return probed
            path, version = probed
        else:
            try:
                path = str(_module("codex_cli_bin").bundled_codex_path())
            except (ImportError, FileNotFoundError) as exc:
                return Availability(
                    False, problem=f"the bundled codex binary is missing ({exc})", install=INSTALL
                )
            version = dist_version("openai-codex-cli-bin")
        return ready(version=version, location=path, login=_login_state(settings), install=INSTALL)

    # -- the AgentProvider call ------------------------------------------------------------------
    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        """Run one Codex turn for ``request`` (module docstring for the mapping of outcomes).

        Raises :class:`~workflow_mcp.providers.base.ProviderAuthError`,
        :class:`~workflow_mcp.providers.base.AgentExecutionError`,
        :class:`~workflow_mcp.providers.registry.ProviderStartError` (Codex cannot start), or
        :class:`asyncio.CancelledError` (the signal fired; the turn was interrupted).
        """
        self.begin(context)
        model = self._model(request.model)
        effort = self._effort(request.effort)
        strict = to_strict(request.schema) if request.schema is not None else None
        codex = await self._client()
        sdk = _sdk()
        # The turn's notifications and the approval requests of its thread, in arrival order.
        queue: asyncio.Queue[Any] = asyncio.Queue()
        try:
            thread, prompt, resumed = await self._thread(codex, request, model)
        except sdk.TransportClosedError as exc:
            return self._transport_failure(exc)
        if resumed is not None:
            await context.emit(ProviderEvent(kind="progress", text=resumed))
        # Routed before the turn starts: its first approval request may come before turn/start's answer.
        inbox = _Inbox(queue, lambda approval: self._answer_soon(approval, "cancel"))
        route = self._desk.open(thread.id, asyncio.get_running_loop(), inbox.put)
        try:
            try:
                handle = await self._call(
                    lambda: thread.turn(
                        prompt,
                        model=model,
                        effort=_effort_enum(effort),
                        output_schema=strict.schema if strict is not None else None,
                    )
                )
            except sdk.TransportClosedError as exc:
                return self._transport_failure(exc)
            except sdk.CodexError as exc:  # foreign errors are translated once, here
                raise AgentExecutionError(f"codex refused the turn: {exc}") from exc
            self._active[handle.id] = handle
            try:
                return await self._follow(thread, handle, queue, strict, request, context)
            finally:
                self._active.pop(handle.id, None)
        finally:
            self._desk.close(thread.id, route)
            inbox.close()

    async def aclose(self) -> None:
        """Stop the app-server (idempotent). In-flight calls end with a provider failure."""
        self._closed = True
        codex, self._codex = self._codex, None
        if codex is not None:
            await asyncio.get_running_loop().run_in_executor(None, codex.close)
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def interrupt_turn(self, thread_id: str, turn_id: str) -> None:
        """Interrupt a running turn from outside its agent() call (an operator's *skip*): that call
        resolves ``skipped``. Raises :class:`~workflow_mcp.providers.base.AgentExecutionError` when
        Codex refuses (no such turn)."""
        handle = self._active.get(turn_id)
        if handle is None or handle.thread_id != thread_id:
            raise AgentExecutionError(f"codex turn {turn_id} of thread {thread_id} is not running here")
        try:
            await self._call(handle.interrupt, timeout=self.settings.interrupt_timeout_s)
        except _sdk().CodexError as exc:
            raise AgentExecutionError(f"codex could not interrupt turn {turn_id}: {exc}") from exc

    # -- internals -------------------------------------------------------------------------------
    def _model(self, model: str | None) -> str | None:
        if model is None:
            return self.settings.model
        if model in CLAUDE_ALIASES:
            raise ModelAliasError(model, "codex", self.source)
        return model

    def _effort(self, effort: str | None) -> str | None:
        return map_effort(effort, table=self.settings.efforts, known=_EFFORTS, default=self.settings.effort)

    @property
    def running(self) -> bool:
        """Whether the app-server is running (it starts with the first call)."""
        return self._codex is not None

    async def _call(self, fn: Callable[[], T], timeout: float | None = None) -> T:
        """Run a blocking SDK request on our own executor (never the loop's default one, so that
        many waiting turns cannot starve an interrupt), bounded by ``rpc_timeout_s``."""
        loop = asyncio.get_running_loop()
        limit = self.settings.rpc_timeout_s if timeout is None else timeout
        try:
            return await asyncio.wait_for(loop.run_in_executor(self._executor, fn), limit)
        except TimeoutError as exc:
            raise AgentExecutionError(f"codex app-server did not answer within {limit:g} s") from exc

    async def _client(self) -> Codex:
        if self._closed:
            raise AgentExecutionError("the codex provider is closed")
        if self._codex is not None:
            return self._codex
        return await self._call(self._start)

    def _start(self) -> Codex:
        with self._start_lock:
            if self._codex is not None:
                return self._codex
            sdk = load_sdk("openai_codex", package="openai-codex", install=INSTALL)
            config = self._codex_config(sdk.CodexConfig)
            try:
                codex = sdk.Codex(config)
            except FileNotFoundError as exc:
                raise ProviderStartError(f"codex: {exc}; install it with {INSTALL}") from exc
            except (OSError, ValueError, RuntimeError, sdk.CodexError) as exc:
                raise ProviderStartError(f"codex app-server did not start: {exc}") from exc
            if not self._desk.install(codex):
                codex.close()
                raise ProviderStartError(
                    f"openai-codex {dist_version('openai-codex') or '(unknown version)'} offers no way to "
                    "answer an approval request later, which approvals = 'ask' needs (openai-codex 0.163 "
                    "does); use approvals = 'never' or 'auto-review', or that SDK version"
                )
            self._codex = codex
            return codex

    def _codex_config(self, config_cls: Any) -> Any:
        env = allowed_env(self.policy, (*CREDENTIAL_ENV, *self.settings.env))
        if self.codex_home:
            env["CODEX_HOME"] = self.codex_home
        binary = self.settings.bin
        if binary is None:
            bundled = _module("codex_cli_bin")
            binary = str(bundled.bundled_codex_path())
            extra = bundled.bundled_path_dir()
            if extra is not None:
                env["PATH"] = os.pathsep.join(p for p in (str(extra), env.get("PATH", "")) if p)
        flat = dict(_flatten(self.settings.config))
        # One thread per agent() call: Codex's per-thread login-shell snapshot (it sources the
        # user's rc files, outside our environment allowlist) would dominate fan-out cost (3.7×
        # the wall time at 20 turns in benchmarks/providers.py). Settings can turn it back on.
        flat.setdefault("features.shell_snapshot", False)
        overrides = tuple(f"{k}={_toml_value(v)}" for k, v in flat.items())
        argv = [binary]
        for kv in overrides:
            argv += ["--config", kv]
        argv += ["app-server", "--listen", "stdio://"]
        # The SDK starts the process with os.environ plus `env`: unset everything else by name.
        env_tool = shutil.which("env")
        if env_tool is not None:
            drop = sorted((set(os.environ) | set(env)) - set(env))
            unset = [a for name in drop for a in ("-u", name)]
            argv = [env_tool, *unset, *argv]
        return config_cls(launch_args_override=tuple(argv), env=env, cwd=None)

    def _sandbox(self, *, read_only: bool = False) -> Any:
        """The thread's sandbox mode: the policy's, narrowed to read-only for an agent that may not
        edit files (an agent definition without Edit, Write or NotebookEdit; never widened)."""
        return _wire().SandboxMode("read-only" if read_only else self.policy.sandbox)

    def _developer_instructions(self, request: AgentRequest) -> str | None:
        """The ``developer_instructions`` setting, then the agent definition's instructions."""
        parts = [p for p in (self.settings.developer_instructions, request.instructions) if p]
        return "\n\n".join(parts) if parts else None

    def _approvals(self) -> dict[str, Any]:
        """The thread's ``approvalPolicy`` and ``approvalsReviewer``: ``never`` asks nobody (the
        SDK's ``ApprovalMode.deny_all``); ``auto-review`` lets Codex's reviewer decide escalations
        (``on-request`` reviewed by ``auto_review``, the SDK's ``ApprovalMode.auto_review``); ``ask``
        sends them to this client (``on-request`` reviewed by ``user``), where each becomes a
        human checkpoint."""
        wire = _wire()
        value = "never" if self.policy.approvals == "never" else "on-request"
        reviewer = {"never": None, "auto-review": "auto_review", "ask": "user"}[self.policy.approvals]
        return {
            "approval_policy": wire.AskForApproval(root=wire.AskForApprovalValue(value)),
            "approvals_reviewer": None if reviewer is None else wire.ApprovalsReviewer(reviewer),
        }

    def _thread_config(self) -> dict[str, Any]:
        return {
            "sandbox_workspace_write": {
                "network_access": self.policy.network,
                "writable_roots": list(self.policy.writable_roots),
            }
        }

    async def _thread(
        self, codex: Codex, request: AgentRequest, model: str | None
    ) -> tuple[Thread, str, str | None]:
        """(thread, prompt, progress note): a re-ask continues its thread with the feedback; a
        ``session`` resumes that thread; otherwise a new thread."""
        codex_error = _sdk().CodexError
        key = (request.run_id, request.agent_id)
        if request.attempt > 1 and request.feedback:
            known = self._threads.get(key) if request.agent_id else None
            if known is not None:
                return known, request.feedback, None
        prompt = request.prompt if not request.feedback else f"{request.prompt}\n\n{request.feedback}"
        # The SDK's Codex.thread_start/thread_resume offer only its two ApprovalModes; the same
        # requests through its client carry the approval policy ``ask`` needs (see _approvals).
        wire, client = _wire(), codex._client
        common: dict[str, Any] = {
            "model": model,
            "cwd": request.cwd,
            "sandbox": self._sandbox(read_only=request.read_only),
            **self._approvals(),
            "config": self._thread_config(),
            "developer_instructions": self._developer_instructions(request),
        }
        note = None
        thread: Thread | None = None
        if request.session:
            session = request.session
            params = wire.ThreadResumeParams(thread_id=session, **common)
            try:
                resumed = await self._call(lambda: client.thread_resume(session, params))
                thread = _sdk().Thread(client, resumed.thread.id)
                note = f"resumed codex thread {session}"
            except codex_error as exc:
                note = f"could not resume codex thread {session} ({exc}); starting a new one"
        if thread is None:
            params = wire.ThreadStartParams(ephemeral=self.settings.ephemeral, **common)
            try:
                started = await self._call(lambda: client.thread_start(params))
            except codex_error as exc:
                raise AgentExecutionError(f"codex could not start a thread: {exc}") from exc
            thread = _sdk().Thread(client, started.thread.id)
        if request.agent_id:
            self._threads[key] = thread
            while len(self._threads) > _REMEMBERED_THREADS:
                self._threads.popitem(last=False)
        return thread, prompt, note

    async def _follow(
        self,
        thread: Thread,
        handle: TurnHandle,
        queue: asyncio.Queue[Any],
        strict: StrictSchema | None,
        request: AgentRequest,
        context: AgentContext,
    ) -> AgentResult:
        """Consume the turn's notifications until it completes, forwarding progress and answering
        its approval requests one at a time, in arrival order (so a checkpoint's place in the call
        is stable); interrupt the turn when the signal fires or this task is cancelled."""
        loop = asyncio.get_running_loop()
        done = object()
        _start_consumer(handle, loop, queue, done)
        messages: list[tuple[str, str | None]] = []
        usage_total: TokenUsage | None = None
        completed: Any = None
        cancel_wait = asyncio.ensure_future(context.signal.wait())
        interrupted_by_us = False
        try:
            while True:
                getter = asyncio.ensure_future(queue.get())
                finished, _ = await asyncio.wait({getter, cancel_wait}, return_when=asyncio.FIRST_COMPLETED)
                if getter not in finished:
                    getter.cancel()
                    interrupted_by_us = True
                    await self._interrupt(handle)
                    await self._drain(queue, done)
                    raise asyncio.CancelledError(context.signal.reason)
                item = getter.result()
                if item is done:
                    break
                if isinstance(item, BaseException):
                    return self._transport_failure(item)
                if isinstance(item, _Approval):
                    await self._decide(item, request, context)
                    continue
                method, payload = item.method, item.payload
                if method == "item/agentMessage/delta":
                    await context.emit(ProviderEvent(kind="output.delta", text=payload.delta))
                elif method in ("item/started", "item/completed"):
                    root = getattr(payload.item, "root", payload.item)
                    kind = str(getattr(root, "type", "item"))
                    if method == "item/completed" and kind == "agentMessage":
                        phase = getattr(root, "phase", None)
                        messages.append((root.text, getattr(phase, "value", phase)))
                    if kind not in ("userMessage", "agentMessage"):
                        await context.emit(
                            ProviderEvent(
                                kind="progress",
                                text=f"codex {method.split('/')[1]}: {kind}",
                                data={"item": kind},
                            )
                        )
                elif method == "thread/tokenUsage/updated":
                    usage_total = _usage(payload.token_usage.total)
                elif method == "turn/completed":
                    completed = payload.turn
                elif method == "error" and getattr(payload, "will_retry", False):
                    # Codex retrying its stream ("Reconnecting... 3/5", "waiting for network"): not
                    # progress, so a backend that retries forever still meets the stall window.
                    error = getattr(payload, "error", None)
                    detail = getattr(error, "additional_details", None)
                    text = str(getattr(error, "message", "") or "retrying") + (
                        f" ({detail})" if detail else ""
                    )
                    await context.emit(ProviderEvent(kind="retry", text=f"codex: {text}"))
                else:
                    # Reasoning deltas, plan updates, command output…: proof of life for the
                    # engine's stall watchdog (a long silent think is not a stall).
                    await context.emit(ProviderEvent(kind="progress", text=f"codex {method}"))
        except asyncio.CancelledError:
            if not interrupted_by_us:
                # Cancelled from outside (run cancellation, the stall watchdog): stop the turn too.
                self._interrupt_soon(handle)
            raise
        finally:
            cancel_wait.cancel()
        usage = self._turn_usage(thread.id, usage_total)
        return self._result(thread.id, completed, messages, usage, strict, context)

    def _turn_usage(self, thread_id: str, total: TokenUsage | None) -> TokenUsage:
        if total is None:
            return TokenUsage()
        before = self._totals.pop(thread_id, TokenUsage())
        self._totals[thread_id] = total
        while len(self._totals) > _REMEMBERED_THREADS:
            self._totals.popitem(last=False)
        return TokenUsage(
            input=max(0, total.input - before.input),
            output=max(0, total.output - before.output),
            cache_read=max(0, total.cache_read - before.cache_read),
            cache_write=max(0, total.cache_write - before.cache_write),
        )

    def _result(
        self,
        thread_id: str,
        turn: Any,
        messages: list[tuple[str, str | None]],
        usage: TokenUsage,
        strict: StrictSchema | None,
        context: AgentContext,
    ) -> AgentResult:
        status = getattr(getattr(turn, "status", None), "value", None)
        if status == "failed" or turn is None:
            error = getattr(turn, "error", None)
            kind, http = _error_kind(error)
            detail = _error_message(error) if error is not None else "the turn ended without completing"
            failure = FAILURES.kind(kind, status=http)
            if failure == "api" and http in (429, 503, 529):
                # Codex's own retries spent on a 429 or an overloaded answer: the engine backs off too.
                failure = HTTP_STATUSES[http]
            return failure_outcome(
                failure,
                backend="codex",
                detail=detail,
                login_hint=LOGIN_HINT,
                # A plan's usage limit or an exhausted quota: the run pauses until it resets.
                resets_at=_reset_time(detail) if failure == "usage_limit" else None,
                usage=usage,
                session=thread_id,
            )
        if status == "interrupted":
            if context.signal.cancelled:
                raise asyncio.CancelledError(context.signal.reason)
            return AgentResult(
                outcome="skipped",
                message="the codex turn was interrupted outside this run",
                usage=usage,
                session=thread_id,
            )
        final = _final_message(messages)
        if strict is None:
            return AgentResult(text=final or "", usage=usage, session=thread_id)
        if final is None:
            return AgentResult(text="", usage=usage, session=thread_id, message="codex gave no final message")
        ok, value, problem = parse_answer(final)
        if not ok:
            return AgentResult(
                text=final,
                usage=usage,
                session=thread_id,
                message=f"codex's final message is not a JSON value ({problem})",
            )
        return AgentResult(
            structured=strict.project(value), has_structured=True, usage=usage, session=thread_id
        )

    def _transport_failure(self, exc: BaseException) -> AgentResult:
        """The app-server died or closed the turn's stream: a terminal failure (agent() → null).
        The next call starts a new app-server."""
        codex, self._codex = self._codex, None
        if codex is not None:
            self._executor.submit(codex.close)
        return AgentResult(outcome="provider_failed", message=f"codex app-server failed: {exc}")

    async def _interrupt(self, handle: TurnHandle) -> None:
        # RuntimeError: the provider was closed meanwhile (its executor no longer takes work).
        with contextlib.suppress(_sdk().CodexError, AgentExecutionError, RuntimeError):
            await self._call(handle.interrupt, timeout=self.settings.interrupt_timeout_s)

    def _interrupt_soon(self, handle: TurnHandle) -> None:
        def interrupt() -> None:
            with contextlib.suppress(Exception):  # best effort from a worker thread; nobody waits
                handle.interrupt()

        with contextlib.suppress(RuntimeError):  # the executor is already shut down
            self._executor.submit(interrupt)

    async def _drain(self, queue: asyncio.Queue[Any], done: object) -> None:
        """Wait (bounded) for the interrupted turn's stream to end, so its thread is released;
        an approval request still coming is refused (``cancel``)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.settings.interrupt_timeout_s):
                while True:
                    item = await queue.get()
                    if isinstance(item, _Approval):
                        self._answer_soon(item, "cancel")
                    elif item is done or isinstance(item, BaseException):
                        return

    # -- approval requests (approvals = "ask") ---------------------------------------------------
    async def _decide(
        self,
        approval: _Approval,
        request: AgentRequest,
        context: AgentContext,
    ) -> None:
        """Answer one approval request of this call's turn: the policy decides what it can
        (:func:`~.policy.decide_permission`); the rest goes to the run's human checkpoint. Allowed →
        ``accept`` (this once); denied → ``decline`` (the model sees the refusal and the turn goes
        on); no answer because the run is pausing → ``cancel`` (Codex ends the turn too). The wait
        for a human ends when the call's signal fires (the engine's checkpoint returns ``None``) or
        this task is cancelled (the request is then answered ``cancel``)."""
        ask = approval.ask()
        policy = self.policy.narrow({"sandbox": "read-only"}) if request.read_only else self.policy
        decision = decide_permission(policy, ask, cwd=request.cwd or os.getcwd())
        pausing = False
        try:
            if decision.ask:
                if context.checkpoint is None:
                    decision = PermissionDecision(
                        False, None, f"{decision.reason}, but nobody can be asked here"
                    )
                else:
                    answer = await context.checkpoint(
                        CheckpointAsk(
                            tool=ask.kind or "other", title=ask.title, command=ask.command, paths=ask.paths
                        )
                    )
                    if answer is None:
                        pausing = True
                        decision = PermissionDecision(
                            False, None, "the run is pausing for a human checkpoint"
                        )
                    else:
                        decision = answer_checkpoint(ask, answer, "a human checkpoint")
        except BaseException:
            self._answer_soon(approval, "cancel")
            raise
        answer_with = "accept" if decision.allow else "cancel" if pausing else "decline"
        with contextlib.suppress(_sdk().CodexError, AgentExecutionError, RuntimeError):
            # A dead transport fails the turn anyway; RuntimeError: the provider was closed meanwhile.
            await self._call(lambda: self._desk.answer(approval, answer_with))
        verdict = "allowed" if decision.allow else "denied"
        await context.emit(
            ProviderEvent(
                kind="progress",
                text=f"permission {verdict}: {ask.kind} {ask.title}".rstrip() + f" ({decision.reason})",
                data={"permission": ask.kind, "allowed": decision.allow, "paths": list(ask.paths)},
            )
        )

    def _answer_soon(self, approval: _Approval, decision: str) -> None:
        """Answer from a worker thread; nobody waits (the call is ending)."""

        def answer() -> None:
            with contextlib.suppress(Exception):  # best effort: the transport may be gone
                self._desk.answer(approval, decision)

        with contextlib.suppress(RuntimeError):  # the executor is already shut down
            self._executor.submit(answer)


def _start_consumer(
    handle: TurnHandle, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any], done: object
) -> None:
    """Read the turn's notifications on a dedicated thread (the SDK's stream blocks) and hand
    each to the loop. The thread ends with the turn (``turn/completed``) or the transport."""

    def post(item: Any) -> bool:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
            return True
        except RuntimeError:  # the loop is closed: nobody is listening any more
            return False

    def consume() -> None:
        try:
            for notification in handle.stream():
                if not post(notification):
                    return
        except Exception as exc:  # the transport failed: report it to the waiting call
            post(exc)
            return
        post(done)

    threading.Thread(target=consume, name=f"codex-turn-{handle.id}", daemon=True).start()


class _Approval(dict[str, Any]):
    """One approval request from Codex (``item/commandExecution/requestApproval`` or
    ``item/fileChange/requestApproval``), answered later. It stands in for the answer the SDK's
    reader thread would write at once, so that :class:`_ApprovalDesk` can hold that write back
    and learn the request's id from it; it is never written itself."""

    def __init__(self, method: str, params: Mapping[str, Any]) -> None:
        super().__init__()
        self.method = method
        self.params = params
        self.request_id: Any = None

    @property
    def thread_id(self) -> str:
        return str(self.params.get("threadId", ""))

    def ask(self) -> PermissionAsk:
        """What the request asks, in the policy's terms. A command is ``execute`` (its ``reason``
        is the title; ``command`` the command line Codex would run), or ``fetch`` when it asks for
        network access (``networkApprovalContext``: host and protocol). A file change is ``edit``
        of the ``grantRoot`` it asks to write under, if it names one: Codex asks about a patch its
        sandbox refused, which the policy (whose writable roots the sandbox has) refuses too, so
        a human is never asked about it. The options are Codex's ``accept`` (this once) and
        ``decline``."""
        params = self.params
        reason = str(params.get("reason") or "")
        options = (("accept", "allow_once"), ("decline", "reject_once"))
        if self.method == _FILE_APPROVAL:
            root = params.get("grantRoot")
            paths = (str(root),) if root else ()
            return PermissionAsk(kind="edit", title=reason or "apply a patch", paths=paths, options=options)
        command = params.get("command")
        network = params.get("networkApprovalContext")
        if isinstance(network, Mapping):
            title = reason or f"network access to {network.get('host')} ({network.get('protocol')})"
            return PermissionAsk(kind="fetch", title=title, options=options, command=command)
        if params.get("kind") == "writeStdin":
            reason = reason or "write to the input of a running command"
        return PermissionAsk(
            kind="execute",
            title=reason or "run a command",
            options=options,
            command=command if isinstance(command, str) else None,
        )


class _Inbox:
    """Where the approval requests of one agent() call's thread arrive, on the event loop: on the
    call's queue while the call runs; refused (``refuse``) once it has ended, with any it never
    read, so that no request is left open."""

    def __init__(self, queue: asyncio.Queue[Any], refuse: Callable[[_Approval], None]) -> None:
        self._queue = queue
        self._refuse = refuse
        self._open = True

    def put(self, approval: _Approval) -> None:
        if self._open:
            self._queue.put_nowait(approval)
        else:
            self._refuse(approval)

    def close(self) -> None:
        self._open = False
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if isinstance(item, _Approval):
                self._refuse(item)


class _ApprovalDesk:
    """Codex's approval requests for one app-server, each handed to the agent() call whose thread
    asked and answered when that call decides — possibly much later (a human checkpoint).

    The SDK reads the app-server on a single thread and writes an approval handler's return value
    as the answer at once; its public API has no approval policy that asks the client nor a way to
    answer later. So the handler (:meth:`_handle`) returns an :class:`_Approval`, the desk's
    wrapper of the SDK's message writer (:meth:`_write`) holds that one write back, and the answer
    goes out later through the same writer (the SDK's framing and lock). The reader thread is
    never blocked: other turns' notifications and every request's answer keep flowing while a
    human decides (the JSON-RPC request stays open on Codex's side; it accepts the answer late).

    With approvals other than ``ask`` every request is declined at once, as before (Codex asks
    none under ``never``; the SDK's own default would accept). A request of a thread no call of
    this provider runs is declined; a permissions request (``item/permissions/requestApproval``)
    is granted nothing."""

    def __init__(self, ask: bool) -> None:
        self._ask = ask
        self._lock = threading.Lock()
        self._routes: dict[str, Callable[[_Approval], bool]] = {}
        self._write_message: Callable[[dict[str, Any]], None] | None = None

    def install(self, codex: Codex) -> bool:
        """Take over ``codex``'s approval answers; ``False`` when this SDK lacks what ``ask``
        needs (the client's ``_approval_handler`` and ``_write_message``)."""
        client = getattr(codex, "_client", None)
        if client is None or not hasattr(client, "_approval_handler"):
            return not self._ask
        if self._ask:
            write = getattr(client, "_write_message", None)
            if not callable(write):
                return False
            self._write_message = write
            client._write_message = self._write
        client._approval_handler = self._handle
        return True

    def open(
        self, thread_id: str, loop: asyncio.AbstractEventLoop, put: Callable[[_Approval], None]
    ) -> Callable[[_Approval], bool]:
        """Hand ``thread_id``'s approval requests to ``put``, called on ``loop``, until :meth:`close`."""

        def deliver(approval: _Approval) -> bool:
            try:
                loop.call_soon_threadsafe(put, approval)
                return True
            except RuntimeError:  # the loop is closed: nobody is listening any more
                return False

        with self._lock:
            self._routes[thread_id] = deliver
        return deliver

    def close(self, thread_id: str, route: Callable[[_Approval], bool]) -> None:
        with self._lock:
            if self._routes.get(thread_id) is route:
                del self._routes[thread_id]

    def answer(self, approval: _Approval, decision: str) -> None:
        """Write the answer (``accept``, ``decline`` or ``cancel``) to a held request; blocking.

        Raises :class:`openai_codex.TransportClosedError` when the app-server is gone."""
        assert self._write_message is not None
        self._write_message({"id": approval.request_id, "result": {"decision": decision}})

    def _handle(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        # The SDK's reader thread: never blocks here.
        if method in (_COMMAND_APPROVAL, _FILE_APPROVAL):
            return _Approval(method, params or {}) if self._ask else {"decision": "decline"}
        if method == _PERMISSIONS_APPROVAL:
            return {"permissions": {}}
        return {}

    def _write(self, payload: dict[str, Any]) -> None:
        result = payload.get("result")
        if not isinstance(result, _Approval):
            assert self._write_message is not None
            self._write_message(payload)
            return
        result.request_id = payload.get("id")
        with self._lock:
            route = self._routes.get(result.thread_id)
        if route is None or not route(result):
            self.answer(result, "decline")  # no call of ours runs that thread


def _usage(breakdown: Any) -> TokenUsage:
    cached = int(getattr(breakdown, "cached_input_tokens", 0) or 0)
    return TokenUsage(
        input=max(0, int(breakdown.input_tokens) - cached),
        output=int(breakdown.output_tokens),
        cache_read=cached,
        cache_write=int(getattr(breakdown, "cache_write_input_tokens", 0) or 0),
    )


def _final_message(messages: list[tuple[str, str | None]]) -> str | None:
    for text, phase in reversed(messages):
        if phase == "final_answer":
            return text
    for text, phase in reversed(messages):
        if phase is None:
            return text
    return messages[-1][0] if messages else None


def _error_kind(error: Any) -> tuple[str | None, int | None]:
    """(codexErrorInfo kind, HTTP status) of a ``TurnError``."""
    info = getattr(error, "codex_error_info", None)
    if info is None:
        return None, None
    raw = info.model_dump(by_alias=True, mode="json") if hasattr(info, "model_dump") else info
    if isinstance(raw, str):
        return raw, None
    if isinstance(raw, dict) and raw:
        kind = next(iter(raw))
        inner = raw[kind]
        status = inner.get("httpStatusCode") if isinstance(inner, dict) else None
        return str(kind), int(status) if isinstance(status, int) else None
    return None, None


_RESET: Final = re.compile(
    r"try again at (?:(?P<month>[A-Z][a-z]{2}) (?P<day>\d{1,2})(?:st|nd|rd|th), (?P<year>\d{4}) )?"
    r"(?P<hour>\d{1,2}):(?P<minute>\d{2}) (?P<half>[AP]M)"
)


def _reset_time(detail: str, now: datetime.datetime | None = None) -> str | None:
    """When a codex usage limit resets, from its message (``… or try again at Dec 2nd, 2026 8:26 AM``,
    or ``… at 8:26 AM`` the same day, in codex's local time, which is ours: ``TZ`` is passed through),
    as ISO 8601 UTC rounded up to the whole minute after it (the message drops the seconds, and a
    resume must not come before the reset); ``None`` when the message names no time."""
    found = _RESET.search(detail)
    if found is None:
        return None
    hour = int(found["hour"]) % 12 + (12 if found["half"] == "PM" else 0)
    try:
        if found["month"]:
            month = datetime.datetime.strptime(found["month"], "%b").month
            day = datetime.date(int(found["year"]), month, int(found["day"]))
        else:
            day = (now or datetime.datetime.now()).date()
        # Naive, so astimezone() reads it in the local zone with that date's offset (DST included).
        moment = datetime.datetime.combine(day, datetime.time(hour, int(found["minute"])))
        moment = (moment + datetime.timedelta(minutes=1)).astimezone(datetime.UTC)
    except (ValueError, OverflowError):
        return None
    return moment.isoformat().replace("+00:00", "Z")


def _error_message(error: Any) -> str:
    """The error's message; an upstream JSON error body is reduced to its ``error.message``."""
    return upstream_message(str(getattr(error, "message", "") or "codex turn failed"))


def _effort_enum(effort: str | None) -> Any:
    if effort is None:
        return None
    return _wire().ReasoningEffort(effort)


def _wire() -> Any:
    """The SDK's models of the app-server protocol (``openai_codex.generated.v2_all``)."""
    return _module("openai_codex.generated.v2_all")


def _module(name: str) -> ModuleType:
    import importlib

    return importlib.import_module(name)


def _sdk() -> Any:
    """The ``openai_codex`` module (raises ImportError without the ``[codex]`` extra)."""
    return _module("openai_codex")


def _flatten(table: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in table.items():
        full = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out += _flatten(value, full + ".")
        else:
            out.append((full, value))
    return out


def _toml_value(value: Any) -> str:
    # JSON scalars and arrays are valid TOML values (strings, numbers, booleans, arrays).
    return json.dumps(value)


def _login_state(settings: Mapping[str, Any]) -> tuple[bool | None, str | None, str | None]:
    """(logged_in, what was seen, problem) from names and files only; never reads a secret."""
    home = Path(
        os.path.expanduser(str(settings.get("codex_home") or os.environ.get("CODEX_HOME") or "~/.codex"))
    )
    auth = home / "auth.json"
    if auth.is_file():
        return True, f"auth file {auth}", None
    for name in ("CODEX_API_KEY", "OPENAI_API_KEY"):
        if os.environ.get(name):
            return True, f"{name} is set", None
    provider = _custom_model_provider(home, settings)
    if provider is not None:
        return None, f"custom model provider {provider!r} (its own credentials)", None
    return False, None, f"installed but not logged in: run `{LOGIN_HINT}` or set OPENAI_API_KEY"


def _custom_model_provider(home: Path, settings: Mapping[str, Any]) -> str | None:
    config = settings.get("config")
    if isinstance(config, Mapping) and isinstance(config.get("model_provider"), str):
        name = config["model_provider"]
        return None if name == "openai" else name
    try:
        with open(home / "config.toml", "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError, RecursionError):  # tomllib recurses into nested values
        return None
    name = data.get("model_provider")
    return name if isinstance(name, str) and name != "openai" else None
