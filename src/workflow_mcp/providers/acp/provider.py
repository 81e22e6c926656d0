"""The ``acp`` provider itself (the package docstring tells what it does): sessions, turns,
structured answers and outcomes over the processes of :mod:`.pool`."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import json
import os
import re
import shutil
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, TypeVar

from .._kit import (
    FailureKind,
    FailureTable,
    ProviderBase,
    ask_again,
    at_least,
    dist_version,
    failure_error,
    failure_outcome,
    load_sdk,
    more_than,
)
from ..base import (
    AgentContext,
    AgentExecutionError,
    AgentRequest,
    AgentResult,
    ImageInput,
    ProviderAuthError,
    ProviderCapabilities,
    ProviderEvent,
    ProviderSetupError,
    TokenUsage,
)
from ..config import ProviderConfigError
from ..policy import allowed_env
from ..registry import Availability, ProviderStartError
from ..schema import parse_answer
from .agents import find_known_agent, known_agent, none_found
from .pool import AgentProcess, ProcessPool, Turn, error_detail

__all__ = [
    "AGENT_PREAMBLE",
    "AUTH_REQUIRED",
    "FEEDBACK_SUFFIX",
    "INSTALL",
    "JSON_INSTRUCTION",
    "JSON_REASK",
    "ACPProvider",
    "ACPSettings",
]

T = TypeVar("T")

INSTALL: Final = "pip install 'workflow-mcp[acp]'"
AUTH_REQUIRED: Final = -32000
"""ACP's JSON-RPC error code for "Authentication required"."""

FAILURES: Final = FailureTable(
    "acp",
    kinds={
        "unauthorized": "auth",
        "usagelimitexceeded": "usage_limit",
        "ratelimitexceeded": "rate_limit",
        "serveroverloaded": "overloaded",
        "internalservererror": "api",
        "flexunavailable": "api",
        "httpconnectionfailed": "api",
        "responsestreamconnectionfailed": "api",
        "responsestreamdisconnected": "api",
        "responsetoomanyfailedattempts": "api",
    },
)
"""Upstream error kinds an ACP agent relays in its JSON-RPC error's ``data`` (codex-acp's
``codex_error_info``, normalised: lower case, no separators) as ours. An agent that names no kind
is judged by its message (:data:`_API_FAILURE_TEXT`, :data:`_UNAUTHORIZED_TEXT`)."""
_API_FAILURE_TEXT: Final = re.compile(
    r"\b(5\d\d|429)\b|overloaded|rate limit|high demand|connection (refused|reset|failed|error)"
    r"|stream disconnected|timed out",
    re.IGNORECASE,
)
_UNAUTHORIZED_TEXT: Final = re.compile(
    r"\b401\b|unauthori[sz]ed|invalid api key|authentication required", re.I
)

JSON_INSTRUCTION: Final = (
    "\n\nWhen you have finished, reply with only a JSON value that matches the JSON Schema below: no "
    "prose before or after it and no code fence. JSON Schema:\n{schema}"
)
JSON_REASK: Final = (
    "Your last reply was not a JSON value ({problem}). Reply again with only the JSON value that matches "
    "the JSON Schema given before: no prose and no code fence."
)
FEEDBACK_SUFFIX: Final = "\n\nReply with only the corrected JSON value: no prose and no code fence."
AGENT_PREAMBLE: Final = (
    "You act as the agent described by the instructions between the two <agent-instructions> lines; "
    "they are your system prompt for this session, not part of the task.\n"
    "<agent-instructions>\n{instructions}\n</agent-instructions>\n\nThe task:\n{prompt}"
)


@dataclass(frozen=True)
class ACPSettings:
    """``[providers.acp]`` (package docstring), checked by :func:`~.._kit.check_settings`."""

    command: str | None = None
    args: list[str] | None = None
    env: list[str] = field(default_factory=list)
    set_env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    agent_name: str | None = None
    login_hint: str | None = None
    model: str | None = None
    effort: str | None = None
    session_config: dict[str, str | bool] = field(default_factory=dict)
    mode: str | None = None
    max_sessions: int = field(default=8, metadata=at_least(1))
    reuse: bool = True
    json_retries: int = field(default=2, metadata=at_least(0))
    rpc_timeout_s: float = field(default=60.0, metadata=more_than(0))
    cancel_timeout_s: float = field(default=15.0, metadata=more_than(0))
    system_prompt_meta: bool | None = None


class ACPProvider(ProviderBase[ACPSettings]):
    """An :class:`~workflow_mcp.providers.base.AgentProvider` running ACP prompt turns (module
    docstring). Construct directly or through the registry (``get_provider("acp", settings)``).
    Nothing starts until the first :meth:`execute`; :meth:`aclose` stops every agent process (the
    whole process group). Use one instance per event loop. Raises
    :class:`~workflow_mcp.providers.config.ProviderConfigError` for bad settings.
    """

    name = "acp"
    settings_type = ACPSettings
    install_hint = INSTALL
    # Token usage only when the agent reports it (None: it depends on the agent); what the agent
    # reaches over the network is its own sandbox's business (only permission requests are ours).
    capabilities: Final = ProviderCapabilities(
        images=True, session_resume=True, streaming=True, network_control=False
    )
    accepts_claude_models: Final = False

    def setup(self) -> None:
        """The agent program (the configured one, else the first known one on PATH), its arguments,
        environment names and login hint, and the process pool (nothing is started)."""
        given = self.settings
        known = find_known_agent() if given.command is None else known_agent(given.command)
        if known is None and given.command is None:
            raise ProviderConfigError(self.source, "providers.acp.command", f"is required: {none_found()}")
        self.command = given.command or (known.command if known else "")
        self.args = tuple(given.args) if given.args is not None else (known.args if known else ())
        self.policy_args = known.policy_args(self.policy) if known and known.policy_args else ()
        self.env_names = (*(known.env if known else ()), *given.env)
        self.cwd = os.path.abspath(os.path.expanduser(given.cwd)) if given.cwd else None
        self.login_hint = given.login_hint or (known.login_hint if known else None)
        self.system_prompt_meta = (
            given.system_prompt_meta
            if given.system_prompt_meta is not None
            else bool(known and known.system_prompt_meta)
        )
        self._pool = ProcessPool(
            command=self.command,
            args=(*self.args, *self.policy_args),
            env=self._env,
            cwd=self.cwd,
            policy=self.policy,
            max_sessions=given.max_sessions,
            reuse=given.reuse,
            start_timeout_s=given.rpc_timeout_s,
            rpc_timeout_s=given.rpc_timeout_s,
        )
        self._closed = False

    # -- registry ------------------------------------------------------------------------------
    @classmethod
    def probe(cls, settings: Mapping[str, Any]) -> Availability:
        """Availability without starting the agent: the SDK importable and the agent program found
        (the configured ``command``, else the first of :data:`KNOWN_AGENTS` on PATH). Whether it is
        logged in cannot be told without starting it (``logged_in`` is ``None``): a missing login
        surfaces as ``AUTH_REQUIRED`` on the first call, which pauses the run."""
        if importlib.util.find_spec("acp") is None:
            return Availability(
                False, problem="the agent-client-protocol SDK is not installed", install=INSTALL
            )
        command = settings.get("command")
        if command is None:
            known = find_known_agent()
            if known is None:
                return Availability(
                    False, problem=none_found(), install="npm install -g @zed-industries/codex-acp"
                )
            command = known.command
        if not isinstance(command, str) or not command:
            return Availability(False, problem="providers.acp.command must be a program name or path")
        path = shutil.which(os.path.expanduser(command))
        if path is None:
            hint = known_agent(command)
            return Availability(
                False,
                location=command,
                problem=f"the ACP agent {command!r} is not an executable file or on PATH",
                install=hint.install if hint else None,
            )
        return Availability(
            True,
            version=dist_version("agent-client-protocol"),
            location=path,
            logged_in=None,
            login="unknown until the agent answers (AUTH_REQUIRED pauses the run)",
            install=INSTALL,
        )

    # -- the AgentProvider call ----------------------------------------------------------------
    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        """Run one ACP prompt turn for ``request`` (module docstring for the outcomes).

        Raises :class:`~workflow_mcp.providers.base.ProviderAuthError` (the agent needs a login),
        :class:`~workflow_mcp.providers.base.AgentExecutionError` (the agent refused the call),
        :class:`~workflow_mcp.providers.registry.ProviderStartError` (the agent cannot start), or
        :class:`asyncio.CancelledError` (the signal fired; the turn was cancelled).
        """
        self.begin(context)
        sdk = _sdk()
        cwd = os.path.abspath(request.cwd or self.cwd or os.getcwd())
        lease = await self._lease(sdk, request, cwd, context)
        keep = False
        try:
            result = await self._converse(sdk, lease, request, context)
            keep = result.outcome == "completed" and request.schema is not None and bool(request.agent_id)
            return result
        finally:
            self._pool.release(
                lease.proc, lease.session_id, (request.run_id, request.agent_id), remember=keep
            )

    async def interrupt_session(self, session_id: str) -> None:
        """Cancel the turn running in ``session_id`` from outside its agent() call (an operator's
        *skip*): that call resolves ``skipped``. Raises
        :class:`~workflow_mcp.providers.base.AgentExecutionError` when no turn runs there."""
        running = self._pool.turn_of(session_id)
        if running is not None:
            proc, _ = running
            await self._bounded(proc.conn.cancel(session_id=session_id), "session/cancel", proc)
            return
        raise AgentExecutionError(f"{self._label()}: no turn is running in session {session_id}")

    async def aclose(self) -> None:
        """Stop every agent process, killing each whole process group (idempotent). In-flight
        calls end with a provider failure."""
        self._closed = True
        await self._pool.aclose()

    @property
    def running_sessions(self) -> list[str]:
        """Ids of the sessions with a turn running now (for :meth:`interrupt_session`)."""
        return self._pool.running_sessions

    @property
    def processes(self) -> list[int]:
        """Process ids of the agent processes alive now (their process groups have the same ids)."""
        return self._pool.pids

    # -- sessions ------------------------------------------------------------------------------
    async def _lease(self, sdk: Any, request: AgentRequest, cwd: str, context: AgentContext) -> _Lease:
        """A process slot and a session for ``request``: the remembered session on a schema re-ask,
        the requested ``session`` when it can be resumed, else a new session."""
        schema_text = (
            JSON_INSTRUCTION.format(schema=json.dumps(dict(request.schema), ensure_ascii=False))
            if request.schema is not None
            else ""
        )
        key = (request.run_id, request.agent_id)
        if request.attempt > 1 and request.feedback and request.agent_id:
            known = self._pool.take_remembered(key)
            if known is not None:
                proc, session_id = known
                return _Lease(proc, session_id, request.feedback + FEEDBACK_SUFFIX)
        prompt = request.prompt + schema_text
        if request.instructions and not self.system_prompt_meta:
            prompt = AGENT_PREAMBLE.format(instructions=request.instructions, prompt=prompt)
        if request.feedback:
            prompt += "\n\n" + request.feedback
        if request.session:
            idle = self._pool.take_idle(request.session)
            if idle is not None:
                return _Lease(idle, request.session, prompt, request.images)
        proc = await self._pool.acquire()
        try:
            resumed = await self._resume(proc, request.session, cwd, context) if request.session else None
            if resumed is not None:
                return _Lease(proc, resumed, prompt, request.images)
            return _Lease(
                proc, await self._new_session(sdk, proc, request, cwd, context), prompt, request.images
            )
        except BaseException:
            self._pool.release(proc, "", key, remember=False)
            raise

    def _env(self) -> dict[str, str]:
        """A new agent process's environment: the allowlisted names, then ``set_env``."""
        env = allowed_env(self.policy, self.env_names)
        env.update(self.settings.set_env)
        return env

    async def _new_session(
        self, sdk: Any, proc: AgentProcess, request: AgentRequest, cwd: str, context: AgentContext
    ) -> str:
        meta = (
            {"systemPrompt": request.instructions}
            if request.instructions is not None and self.system_prompt_meta
            else {}
        )
        response = await self._rpc(
            proc.conn.new_session(cwd=cwd, mcp_servers=[], **meta), "session/new", proc
        )
        session_id = str(response.session_id)
        proc.session_cwds[session_id] = cwd
        if request.read_only:
            proc.read_only_sessions.add(session_id)
        options = [_plain(o) for o in (getattr(response, "config_options", None) or [])]
        try:
            await self._configure(proc, session_id, options, request, context)
        except BaseException:
            self._pool.forget(proc, session_id)
            raise
        return session_id

    async def _configure(
        self,
        proc: AgentProcess,
        session_id: str,
        options: list[dict[str, Any]],
        request: AgentRequest,
        context: AgentContext,
    ) -> None:
        """Model, effort, ``session_config`` and ``mode`` for a new session."""
        model = request.model or self.settings.model
        if model is not None:
            await self._choose(proc, session_id, options, "model", model, context, strict=True)
        effort = request.effort or self.settings.effort
        if effort is not None:
            await self._choose(proc, session_id, options, "thought_level", effort, context, strict=False)
        for option_id, value in self.settings.session_config.items():
            await self._rpc(
                proc.conn.set_config_option(config_id=option_id, session_id=session_id, value=value),
                f"session/set_config_option {option_id}",
                proc,
            )
        if self.settings.mode is not None:
            await self._rpc(
                proc.conn.set_session_mode(session_id=session_id, mode_id=self.settings.mode),
                "session/set_mode",
                proc,
            )

    async def _choose(
        self,
        proc: AgentProcess,
        session_id: str,
        options: list[dict[str, Any]],
        category: str,
        value: str,
        context: AgentContext,
        *,
        strict: bool,
    ) -> None:
        """Set the session's config option of ``category`` to ``value``. ``strict``: a value the
        agent does not offer is an execution error; otherwise it is reported and skipped."""
        option = next((o for o in options if o.get("category") == category), None)
        if option is None:
            option = next((o for o in options if o.get("id") == category), None)
        what = "model" if category == "model" else "effort"
        if option is None:
            await context.emit(
                ProviderEvent(
                    kind="progress",
                    text=f"{self._label()} offers no {what} choice; {what} {value!r} not applied",
                    data={"ignored": what},
                )
            )
            return
        if option.get("currentValue") == value:
            return
        values = _option_values(option)
        if values and value not in values:
            if strict:
                raise AgentExecutionError(
                    f"{self._label()} has no {what} {value!r}; it offers: {', '.join(values)} "
                    f"(map workflow model names in [providers.acp.models])"
                )
            await context.emit(
                ProviderEvent(
                    kind="progress",
                    text=f"{self._label()} has no {what} {value!r} (offers {', '.join(values)}); not applied",
                    data={"ignored": what},
                )
            )
            return
        await self._rpc(
            proc.conn.set_config_option(config_id=str(option["id"]), session_id=session_id, value=value),
            f"session/set_config_option {option['id']}",
            proc,
        )

    async def _resume(
        self, proc: AgentProcess, session_id: str, cwd: str, context: AgentContext
    ) -> str | None:
        """Reopen ``session_id`` in ``proc`` (``session/resume``, else ``session/load`` whose replayed
        history is ignored); ``None`` when the agent cannot, with a progress note saying why."""
        problem = "the agent cannot resume sessions"
        if proc.can_resume or proc.can_load:
            call = (
                proc.conn.resume_session(session_id=session_id, cwd=cwd, mcp_servers=[])
                if proc.can_resume
                else proc.conn.load_session(session_id=session_id, cwd=cwd, mcp_servers=[])
            )
            try:
                await self._rpc(call, "session/resume", proc)
            except ProviderAuthError:
                raise
            except AgentExecutionError as exc:
                problem = str(exc)
            else:
                proc.session_cwds[session_id] = cwd
                await context.emit(
                    ProviderEvent(kind="progress", text=f"resumed {self._label()} session {session_id}")
                )
                return session_id
        await context.emit(
            ProviderEvent(
                kind="progress",
                text=f"could not resume {self._label()} session {session_id} ({problem}); starting a new one",
            )
        )
        return None

    # -- turns ---------------------------------------------------------------------------------
    async def _converse(
        self, sdk: Any, lease: _Lease, request: AgentRequest, context: AgentContext
    ) -> AgentResult:
        """One prompt turn, plus up to ``json_retries`` format re-asks for a schema call."""
        usage = TokenUsage()
        prompt = lease.prompt
        images = lease.images
        if images and not lease.proc.takes_images:
            raise ProviderSetupError(
                f"{self._label()} takes no images (its initialize says promptCapabilities.image is false), "
                "and this call has image attachments; route it to a provider with image input"
            )
        asks = 0
        while True:
            outcome = await self._turn(sdk, lease.proc, lease.session_id, prompt, context, images)
            images = ()  # a format re-ask continues the same session: the images are there
            usage += outcome.usage
            if isinstance(outcome.result, AgentResult):
                return replace(outcome.result, usage=usage, session=lease.session_id)
            final = outcome.result
            if request.schema is None:
                return AgentResult(text=final, usage=usage, session=lease.session_id, message=outcome.note)
            ok, value, problem = parse_answer(final)
            if ok:
                return AgentResult(
                    structured=value, has_structured=True, usage=usage, session=lease.session_id
                )
            if not await ask_again(
                context, backend=self._label(), problem=problem, asks=asks, retries=self.settings.json_retries
            ):
                return AgentResult(
                    text=final,
                    usage=usage,
                    session=lease.session_id,
                    message=f"{self._label()}'s final message is not a JSON value ({problem})",
                )
            asks += 1
            prompt = JSON_REASK.format(problem=problem)

    async def _turn(
        self,
        sdk: Any,
        proc: AgentProcess,
        session_id: str,
        prompt: str,
        context: AgentContext,
        images: tuple[ImageInput, ...] = (),
    ) -> _TurnOutcome:
        """Send ``prompt`` and follow the turn to its end, forwarding its events in order."""
        turn = Turn(session_id)
        turn.checkpoint = context.checkpoint
        proc.turns[session_id] = turn
        prompt_task = asyncio.ensure_future(
            proc.conn.prompt(
                session_id=session_id,
                prompt=[
                    sdk.text_block(prompt),
                    *(sdk.image_block(data=image.base64, mime_type=image.mime_type) for image in images),
                ],
            )
        )
        cancel_wait = asyncio.ensure_future(context.signal.wait())
        ours = False
        try:
            while True:
                getter = asyncio.ensure_future(turn.events.get())
                done, _ = await asyncio.wait(
                    {getter, prompt_task, cancel_wait}, return_when=asyncio.FIRST_COMPLETED
                )
                if getter in done:
                    await context.emit(getter.result())
                    continue
                getter.cancel()
                if prompt_task in done:
                    break
                ours = True
                await self._cancel_turn(proc, turn, prompt_task)
                raise asyncio.CancelledError(context.signal.reason)
        except asyncio.CancelledError:
            if not ours:
                # Cancelled from outside (run cancellation, the stall watchdog): stop the turn too.
                self._pool.background(self._cancel_turn(proc, turn, prompt_task))
            raise
        finally:
            cancel_wait.cancel()
            if proc.turns.get(session_id) is turn:
                del proc.turns[session_id]
        while not turn.events.empty():
            await context.emit(turn.events.get_nowait())
        return await self._outcome(sdk, proc, turn, prompt_task, context)

    async def _outcome(
        self, sdk: Any, proc: AgentProcess, turn: Turn, task: asyncio.Future[Any], context: AgentContext
    ) -> _TurnOutcome:
        exc = task.exception()
        if exc is not None:
            if isinstance(exc, ConnectionError | EOFError | BrokenPipeError):
                await proc.settle()  # its exit code and last words, for the message
            return _TurnOutcome(self._failure(exc, proc))
        response = task.result()
        usage = _usage(getattr(response, "usage", None))
        reason = str(getattr(response, "stop_reason", "end_turn"))
        if reason == "cancelled":
            if context.signal.cancelled:
                raise asyncio.CancelledError(context.signal.reason)
            return _TurnOutcome(
                AgentResult(
                    outcome="skipped",
                    message=f"the {self._label()} turn was cancelled outside this run",
                ),
                usage,
            )
        note = None if reason == "end_turn" else f"{self._label()} stopped: {reason}"
        return _TurnOutcome(turn.final_message(), usage, note)

    async def _cancel_turn(self, proc: AgentProcess, turn: Turn, task: asyncio.Future[Any]) -> None:
        """``session/cancel``, then wait (bounded) for the turn to end. A turn that does not end in
        time retires its process: it takes no new sessions and closes when its last one ends."""
        turn.cancelling = True
        if task.done():
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(
                proc.conn.cancel(session_id=turn.session_id), self.settings.cancel_timeout_s
            )
        try:
            await asyncio.wait_for(asyncio.shield(task), self.settings.cancel_timeout_s)
        except TimeoutError:
            task.cancel()
            proc.retired = True
        except Exception:  # the turn ended with an error; nobody wants its answer any more
            pass

    def _failure(self, exc: BaseException, proc: AgentProcess) -> AgentResult:
        """Classify a failed prompt turn: raises for auth, usage-limit and execution errors,
        returns a ``provider_failed`` result for API/transport failures and a dead agent."""
        if isinstance(exc, _sdk().RequestError):
            detail = error_detail(exc)
            failed = failure_outcome(
                self._kind(exc), backend=self._label(), detail=detail, login_hint=self.login_hint
            )
            return replace(failed, message=f"{self._label()}: {detail}")
        if isinstance(exc, ConnectionError | EOFError | BrokenPipeError):
            proc.broken = True
            return AgentResult(outcome="provider_failed", message=f"{self._label()} {proc.describe_exit()}")
        raise AgentExecutionError(f"{self._label()}: {type(exc).__name__}: {exc}") from exc

    def _kind(self, exc: Any) -> FailureKind:
        """What a JSON-RPC error from the agent means (:data:`FAILURES`): ``AUTH_REQUIRED`` or the
        relayed upstream kind, else the message's words."""
        data = getattr(exc, "data", None)
        detail = error_detail(exc)
        kind = ""
        if isinstance(data, Mapping):
            raw = data.get("codex_error_info") or data.get("codexErrorInfo") or data.get("kind") or ""
            kind = re.sub(
                r"[^a-z]", "", str(next(iter(raw), "") if isinstance(raw, Mapping) else raw).lower()
            )
        if getattr(exc, "code", None) == AUTH_REQUIRED or _UNAUTHORIZED_TEXT.search(detail):
            return "auth"
        if kind in ("", "other") and _API_FAILURE_TEXT.search(detail):
            return "api"
        return FAILURES.kind(kind)

    # -- plumbing ------------------------------------------------------------------------------
    async def _rpc(self, call: Awaitable[T], what: str, proc: AgentProcess) -> T:
        """A protocol request bounded by ``rpc_timeout_s``, its errors translated."""
        try:
            return await asyncio.wait_for(call, self.settings.rpc_timeout_s)
        except TimeoutError as exc:
            raise AgentExecutionError(
                f"{self._label()} did not answer {what} within {self.settings.rpc_timeout_s:g} s"
            ) from exc
        except (ConnectionError, EOFError, BrokenPipeError) as exc:
            proc.broken = True
            await proc.settle()
            raise ProviderStartError(f"{self._label()} {proc.describe_exit()} during {what}") from exc
        except Exception as exc:
            if isinstance(exc, _sdk().RequestError):
                kind = self._kind(exc)
                # Outside a prompt turn (session/new, set_config_option…) a failure rejects the
                # call: only a login or a spent usage limit pauses the run.
                raise failure_error(
                    kind if kind in ("auth", "usage_limit") else "execution",
                    backend=self._label(),
                    detail=error_detail(exc),
                    login_hint=self.login_hint,
                ) from exc
            if isinstance(exc, AgentExecutionError):
                raise
            raise AgentExecutionError(f"{self._label()}: {what} failed: {type(exc).__name__}: {exc}") from exc

    async def _bounded(self, call: Awaitable[Any], what: str, proc: AgentProcess) -> None:
        with contextlib.suppress(Exception):
            await self._rpc(call, what, proc)

    def _label(self) -> str:
        return self.settings.agent_name or self._pool.agent_name or os.path.basename(self.command)


@dataclass
class _Lease:
    proc: AgentProcess
    session_id: str
    prompt: str
    images: tuple[ImageInput, ...] = ()


@dataclass
class _TurnOutcome:
    """A finished turn: ``result`` is the final message text, or an :class:`AgentResult` that ends
    the call (provider failure, skip)."""

    result: str | AgentResult
    usage: TokenUsage = field(default_factory=TokenUsage)
    note: str | None = None


def _usage(usage: Any) -> TokenUsage:
    """ACP's per-turn ``usage`` (unstable in protocol v1) as tokens, counts as reported."""
    if usage is None:
        return TokenUsage()
    return TokenUsage(
        input=int(getattr(usage, "input_tokens", 0) or 0),
        output=int(getattr(usage, "output_tokens", 0) or 0),
        cache_read=int(getattr(usage, "cached_read_tokens", 0) or 0),
        cache_write=int(getattr(usage, "cached_write_tokens", 0) or 0),
    )


def _plain(option: Any) -> dict[str, Any]:
    if isinstance(option, Mapping):
        return dict(option)
    dumped = option.model_dump(by_alias=True, exclude_none=True)
    return dumped if isinstance(dumped, dict) else {}


def _option_values(option: Mapping[str, Any]) -> list[str]:
    values: list[str] = []
    for entry in option.get("options") or []:
        if isinstance(entry, Mapping) and "options" in entry:
            values += [str(o.get("value")) for o in entry["options"] if isinstance(o, Mapping)]
        elif isinstance(entry, Mapping):
            values.append(str(entry.get("value")))
    return values


def _sdk() -> Any:
    """The ``acp`` module (the ``[acp]`` extra); :class:`ProviderStartError` without it."""
    return load_sdk("acp", package="agent-client-protocol", install=INSTALL)
