"""The ``claude`` provider: Claude Code through ``claude-agent-sdk``, which runs the Claude Code CLI
it bundles (``claude -p --output-format stream-json``). Install with
``pip install 'workflow-mcp[claude]'``.

Each agent() call is one ``ClaudeSDKClient`` query: one CLI process, one Claude Code session.

- **Prompt and model.** The prompt is the query's prompt. ``model`` passes through unchanged
  (routing has already applied ``[providers.claude.models]``): Claude's own aliases ``sonnet``,
  ``opus`` and ``haiku`` are native here. ``effort`` maps through the ``efforts`` setting (default:
  the same name when Claude knows it: low, medium, high, xhigh, max), else the ``effort`` setting.
- **Agent definitions.** An ``agentType``'s instructions are the session's system prompt
  (``system_prompt``, as Claude Code gives a workflow agent its definition's body), its tool list the
  session's tools (``tools``; ``StructuredOutput`` added for a schema call) and its disallowed tools
  join ``disallowed_tools``; its model and effort arrive as the request's.
- **Structured output.** The portable schema goes unchanged to the CLI's JSON-schema output format
  (``--json-schema``; Claude answers through its ``StructuredOutput`` tool and validates the value
  itself); ``ResultMessage.structured_output`` is the result. The engine validates it against the
  schema again; a re-ask (``attempt > 1``) resumes the same session with the engine's feedback.
- **Events.** Streamed text deltas (``include_partial_messages``) of the main conversation →
  ``output.delta``; tool calls and the CLI's system messages → ``progress``, except ``api_retry``
  (the CLI retrying an API error) → ``retry``, which the stall window does not count as progress.
- **Images.** Image attachments are ``image`` content blocks (``source: {"type": "base64",
  "media_type", "data"}``) after the prompt's text, in one user message sent as the SDK's
  streaming input; a re-ask that resumes the session sends its feedback alone.
- **Usage.** ``ResultMessage.usage``: input, output, cache reads and cache writes.
- **Session.** The Claude Code session id is ``AgentResult.session``; a request with ``session``
  resumes that session (``--resume``).
- **Cancellation.** When ``context.signal`` fires (or the call's task is cancelled), the client is
  interrupted, so the CLI aborts the turn and exits; should it not within ``interrupt_timeout_s``,
  the query task is cancelled and the SDK terminates the process. The call ends with
  :class:`asyncio.CancelledError`.
- **Policy.** The sandbox mode becomes Claude's permission mode: ``read-only`` → ``plan``,
  ``workspace-write`` → ``acceptEdits`` (``auto`` when approvals are ``auto-review``),
  ``danger-full-access`` → ``bypassPermissions`` — the only way to get it. A ``permission_mode``
  setting may narrow this, never widen it. With approvals ``never`` nobody answers a permission
  prompt: a tool use that needs one is denied (fail closed). With approvals ``ask`` the SDK's
  ``can_use_tool`` callback answers each prompt from the policy
  (:func:`~.acp.decide_permission`, the rules ACP agents get: Claude's ``Bash`` is ``execute``, its
  edit tools ``edit`` with their file path, ``WebFetch``/``WebSearch`` ``fetch``, …) and what the policy
  cannot vouch for becomes the run's human checkpoint (``context.checkpoint``); a checkpoint nobody
  answers denies the tool use and interrupts the turn while the run pauses. Without network,
  ``WebFetch`` and ``WebSearch`` are disallowed.
  Writable roots become ``--add-dir``. The CLI sees only the allowlisted environment
  (:func:`~.policy.allowed_env` plus Claude's own names): every other inherited name is blanked
  (set to the empty string; names only, never a value, leave this process).
- **Outcomes.** HTTP 401 or an ``authentication_failed`` answer → :class:`~.base.ProviderAuthError`
  (the run should pause until ``claude /login``); an API failure (5xx, overload, rate or billing
  limit, connection) after Claude's own retries, or a CLI process that dies → ``provider_failed``;
  any other error result (bad request, max turns, execution error) →
  :class:`~.base.AgentExecutionError`.

Settings (``[providers.claude]``): ``bin`` (a claude binary; default the SDK's bundled one),
``config_dir`` (``CLAUDE_CONFIG_DIR``), ``model``, ``effort`` (default effort), ``efforts``
(table), ``permission_mode``, ``max_turns``, ``env`` (extra environment names to pass),
``interrupt_timeout_s`` (bound on a cancelled CLI process ending, default 15).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import os
import shutil
import sys
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from ._kit import (
    HTTP_STATUSES,
    FailureKind,
    FailureTable,
    ProgramSettings,
    ProviderBase,
    failure_outcome,
    load_sdk,
    map_effort,
    more_than,
    one_of,
    probe_program,
    program_version,
    ready,
)
from .base import (
    AgentContext,
    AgentRequest,
    AgentResult,
    CheckpointAsk,
    ImageInput,
    ProviderCapabilities,
    ProviderEvent,
    TokenUsage,
)
from .config import ProviderConfigError
from .policy import PermissionAsk, Policy, allowed_env, decide_permission
from .registry import Availability, ProviderStartError

__all__ = ["ClaudeProvider", "ClaudeSettings", "permission_mode_for"]

INSTALL: Final = "pip install 'workflow-mcp[claude]'"
LOGIN_HINT: Final = "claude /login"
CREDENTIAL_ENV: Final = (
    "ANTHROPIC_*",
    "CLAUDE_*",
    "AWS_*",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "CLOUD_ML_REGION",
    "DISABLE_*",
    "IS_SANDBOX",
    "API_TIMEOUT_MS",
    "MAX_THINKING_TOKENS",
    "NODE_EXTRA_CA_CERTS",
)
"""Environment names the claude process may see besides the policy's base set (its credentials,
endpoints and switches; Bedrock and Vertex use the AWS and Google names)."""
_EFFORTS: Final = ("low", "medium", "high", "xhigh", "max")
# Permission modes each sandbox allows, narrowest first; the last is the default.
_MODES: Final[Mapping[str, tuple[str, ...]]] = {
    "read-only": ("plan",),
    "workspace-write": ("plan", "dontAsk", "default", "acceptEdits"),
    "danger-full-access": ("plan", "dontAsk", "default", "acceptEdits", "auto", "bypassPermissions"),
}
FAILURES: Final = FailureTable(
    "claude",
    kinds={
        "authentication_failed": "auth",
        "billing_error": "usage_limit",
        "rate_limit": "rate_limit",
        "overloaded": "overloaded",
        "server_error": "api",
    },
    statuses=HTTP_STATUSES,
)
"""Claude's failure kinds (``AssistantMessage.error``) and HTTP statuses (``api_error_status``) as
ours: out of credits pauses like a usage limit; a 400 is a bad request (the call rejects) even
though the CLI's ``terminal_reason`` calls every failed API request ``api_error``."""
_REMEMBERED_SESSIONS: Final = 4096


def permission_mode_for(policy: Policy, asked: str | None = None) -> str:
    """Claude's permission mode under ``policy`` (module docstring); ``asked`` (a setting) may only
    narrow it. Raises :class:`ValueError` when ``asked`` is wider than the policy allows."""
    allowed = _MODES[policy.sandbox]
    if policy.sandbox == "workspace-write" and policy.approvals == "auto-review":
        allowed = (*allowed, "auto")
    if asked is None:
        return "bypassPermissions" if policy.sandbox == "danger-full-access" else allowed[-1]
    if asked not in allowed:
        raise ValueError(
            f"{asked!r} is wider than the policy's sandbox {policy.sandbox!r} allows "
            f"(one of {', '.join(allowed)})"
        )
    return asked


@dataclass
class _Turn:
    """What one query produced, gathered while it streams."""

    session: str | None = None
    result: Any = None  # the ResultMessage
    auth_failed: bool = False
    api_error: str | None = None
    texts: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ClaudeSettings(ProgramSettings):
    """``[providers.claude]`` (module docstring), checked by :func:`~._kit.check_settings`."""

    config_dir: str | None = None
    effort: str | None = field(default=None, metadata=one_of(_EFFORTS))
    efforts: dict[str, str] = field(default_factory=dict, metadata=one_of(_EFFORTS))
    permission_mode: str | None = None
    max_turns: int | None = None
    interrupt_timeout_s: float = field(default=15.0, metadata=more_than(0))


class ClaudeProvider(ProviderBase[ClaudeSettings]):
    """An :class:`~workflow_mcp.providers.base.AgentProvider` running Claude Code queries (module
    docstring).

    Construct directly or through the registry (``get_provider("claude", settings)``). Nothing
    starts until a call; every call is its own CLI process, so there is nothing to keep open and
    :meth:`aclose` only refuses further calls. Raises
    :class:`~workflow_mcp.providers.config.ProviderConfigError` for bad settings.
    """

    name = "claude"
    settings_type = ClaudeSettings
    install_hint = INSTALL
    capabilities: Final = ProviderCapabilities(
        images=True,
        sandbox_control=True,
        session_resume=True,
        streaming=True,
        network_control=True,
        token_usage=True,
    )
    accepts_claude_models: Final = True

    def setup(self) -> None:
        """The expanded ``config_dir`` and the permission mode the policy allows; raises
        :class:`~workflow_mcp.providers.config.ProviderConfigError` for a wider ``permission_mode``."""
        folder = self.settings.config_dir
        self.config_dir = os.path.expanduser(folder) if folder else None
        try:
            self.permission_mode = permission_mode_for(self.policy, self.settings.permission_mode)
        except ValueError as exc:
            raise ProviderConfigError(self.source, "providers.claude.permission_mode", str(exc)) from exc
        self._sessions: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._closed = False

    # -- registry ------------------------------------------------------------------------------
    @classmethod
    def probe(cls, settings: Mapping[str, Any]) -> Availability:
        """Availability without starting Claude: the SDK importable, the CLI present (the bundled
        one's version from its ``claude.version`` file, or ``--version`` for a configured ``bin``),
        and a login seen from variable *names* and the credentials file's presence only
        (``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``, ``CLAUDE_CODE_OAUTH_TOKEN``,
        ``$CLAUDE_CONFIG_DIR/.credentials.json`` or ``~/.claude/.credentials.json``)."""
        try:
            spec = importlib.util.find_spec("claude_agent_sdk")
        except (ImportError, ValueError):
            spec = None
        if spec is None or spec.origin is None:
            return Availability(False, problem="the claude-agent-sdk SDK is not installed", install=INSTALL)
        binary = settings.get("bin")
        version: str | None
        if binary:
            probed = probe_program(str(binary), "first")
            if isinstance(probed, Availability):
                return probed
            path, version = probed
        else:
            bundled = _bundled_cli(Path(spec.origin).parent)
            if bundled is None:
                return Availability(False, problem="the SDK's bundled claude CLI is missing", install=INSTALL)
            path = str(bundled)
            version = _bundled_version(bundled)
        return ready(version=version, location=path, login=_login_state(settings), install=INSTALL)

    # -- the AgentProvider call ------------------------------------------------------------------
    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        """Run one Claude Code query for ``request`` (module docstring for the outcomes).

        Raises :class:`~workflow_mcp.providers.base.ProviderAuthError`,
        :class:`~workflow_mcp.providers.base.AgentExecutionError`,
        :class:`~workflow_mcp.providers.registry.ProviderStartError` (the SDK or CLI is missing),
        or :class:`asyncio.CancelledError` (the signal fired; the CLI process was ended).
        """
        self.begin(context)
        sdk = _sdk()
        prompt, resume = self._prompt(request)
        options = sdk.ClaudeAgentOptions(
            **self._options(request, resume), **self._permission_handler(sdk, request, context)
        )
        turn = _Turn()
        clients: list[Any] = []
        images = request.images if resume is None or resume == request.session else ()
        consumer = asyncio.ensure_future(self._consume(sdk, prompt, options, turn, context, clients, images))
        cancel_wait = asyncio.ensure_future(context.signal.wait())
        try:
            finished, _ = await asyncio.wait({consumer, cancel_wait}, return_when=asyncio.FIRST_COMPLETED)
            if consumer not in finished:
                await self._stop(consumer, clients)
                raise asyncio.CancelledError(context.signal.reason)
            error = consumer.exception()
        except asyncio.CancelledError:
            await self._stop(consumer, clients)
            raise
        finally:
            cancel_wait.cancel()
        if turn.session and request.agent_id:
            self._sessions[(request.run_id, request.agent_id)] = turn.session
            while len(self._sessions) > _REMEMBERED_SESSIONS:
                self._sessions.popitem(last=False)
        return self._result(sdk, request, turn, error)

    async def aclose(self) -> None:
        """Refuse further calls (idempotent). Calls in flight finish on their own."""
        self._closed = True

    # -- internals -------------------------------------------------------------------------------
    def _prompt(self, request: AgentRequest) -> tuple[str, str | None]:
        """(prompt, session to resume): a re-ask resumes its own session with the feedback alone."""
        if request.attempt > 1 and request.feedback and request.agent_id:
            known = self._sessions.get((request.run_id, request.agent_id))
            if known is not None:
                return request.feedback, known
        prompt = request.prompt if not request.feedback else f"{request.prompt}\n\n{request.feedback}"
        return prompt, request.session

    def _effort(self, effort: str | None) -> str | None:
        return map_effort(effort, table=self.settings.efforts, known=_EFFORTS, default=self.settings.effort)

    def _options(self, request: AgentRequest, resume: str | None) -> dict[str, Any]:
        options: dict[str, Any] = {
            "cwd": request.cwd,
            "model": request.model or self.settings.model,
            "permission_mode": self.permission_mode,
            "resume": resume,
            "env": self._env(),
            "effort": self._effort(request.effort),
            "include_partial_messages": True,
            "add_dirs": list(self.policy.writable_roots) if self.policy.sandbox == "workspace-write" else [],
            "disallowed_tools": [
                *request.disallowed_tools,
                *(() if self.policy.network else ("WebFetch", "WebSearch")),
            ],
            "stderr": _ignore,
        }
        if request.instructions is not None:
            options["system_prompt"] = request.instructions
        if request.tools is not None:
            # The agent's tools are Claude Code's own names; a schema call also needs the tool
            # Claude Code answers through (as a workflow agent gets it).
            tools = list(request.tools)
            options["tools"] = [*tools, "StructuredOutput"] if request.schema is not None else tools
        if request.schema is not None:
            options["output_format"] = {"type": "json_schema", "schema": dict(request.schema)}
        if self.settings.max_turns is not None:
            options["max_turns"] = self.settings.max_turns
        if self.settings.bin is not None:
            options["cli_path"] = shutil.which(self.settings.bin) or self.settings.bin
        return options

    def _permission_handler(self, sdk: Any, request: AgentRequest, context: AgentContext) -> dict[str, Any]:
        """``{"can_use_tool": …}`` under approvals ``ask`` (module docstring, "Policy"), else ``{}``."""
        if self.policy.approvals != "ask":
            return {}
        policy = self.policy.narrow({"sandbox": "read-only"}) if request.read_only else self.policy
        cwd = request.cwd or os.getcwd()

        async def can_use_tool(tool_name: str, tool_input: dict[str, Any], _context: Any) -> Any:
            ask = _permission_ask(tool_name, tool_input)
            decision = decide_permission(policy, ask, cwd=cwd)
            allow, reason = decision.allow, decision.reason
            if decision.ask:
                answer = None
                if context.checkpoint is not None:
                    answer = await context.checkpoint(
                        CheckpointAsk(
                            tool=ask.kind or "other", title=ask.title, command=ask.command, paths=ask.paths
                        )
                    )
                if answer is None:
                    why = (
                        "the run is pausing for a human checkpoint"
                        if context.checkpoint
                        else "nobody can be asked"
                    )
                    return sdk.PermissionResultDeny(message=f"{reason}; {why}", interrupt=True)
                allow, reason = answer, f"{'allowed' if answer else 'denied'} by a human checkpoint"
            verdict = "allowed" if allow else "denied"
            await context.emit(
                ProviderEvent(
                    kind="progress",
                    text=f"permission {verdict}: {ask.kind} {ask.title} ({reason})",
                    data={"permission": ask.kind, "allowed": allow, "paths": list(ask.paths)},
                )
            )
            if allow:
                return sdk.PermissionResultAllow(updated_input=tool_input)
            return sdk.PermissionResultDeny(message=f"workflow-mcp policy: {reason}")

        return {"can_use_tool": can_use_tool}

    def _env(self) -> dict[str, str]:
        """The allowlisted environment; every other inherited name is blanked (the SDK starts the
        CLI with this process's environment plus these values)."""
        env = allowed_env(self.policy, (*CREDENTIAL_ENV, *self.settings.env))
        if self.config_dir:
            env["CLAUDE_CONFIG_DIR"] = self.config_dir
        for name in os.environ:
            if name not in env and name != "CLAUDECODE":  # the SDK drops CLAUDECODE itself
                env[name] = ""
        return env

    async def _consume(
        self,
        sdk: Any,
        prompt: str,
        options: Any,
        turn: _Turn,
        context: AgentContext,
        clients: list[Any],
        images: tuple[ImageInput, ...] = (),
    ) -> None:
        async with sdk.ClaudeSDKClient(options) as client:
            clients.append(client)
            await client.query(_with_images(prompt, images) if images else prompt)
            # Closed here even when the call is cancelled mid-stream, not later by the garbage
            # collector, whose finalizer would need this (by then closed) event loop.
            async with contextlib.aclosing(client.receive_response()) as messages:
                async for message in messages:
                    await self._take(sdk, message, turn, context)

    async def _take(self, sdk: Any, message: Any, turn: _Turn, context: AgentContext) -> None:
        session = getattr(message, "session_id", None)
        if isinstance(session, str) and session:
            turn.session = session
        if isinstance(message, sdk.StreamEvent):
            event = message.event
            delta = event.get("delta") if event.get("type") == "content_block_delta" else None
            if (
                message.parent_tool_use_id is None
                and isinstance(delta, dict)
                and delta.get("type") == "text_delta"
            ):
                await context.emit(ProviderEvent(kind="output.delta", text=str(delta.get("text", ""))))
        elif isinstance(message, sdk.AssistantMessage):
            if message.error == "authentication_failed":
                turn.auth_failed = True
            elif message.error is not None:
                turn.api_error = message.error
            for block in message.content:
                if isinstance(block, sdk.TextBlock):
                    turn.texts.append(block.text)
                elif isinstance(block, sdk.ToolUseBlock):
                    await context.emit(
                        ProviderEvent(
                            kind="progress", text=f"claude tool_use: {block.name}", data={"tool": block.name}
                        )
                    )
        elif isinstance(message, sdk.SystemMessage):
            if message.subtype == "api_retry":
                # The CLI retrying an API error (429, 5xx, no response): not progress for the stall window.
                data = getattr(message, "data", None) or {}
                detail = f"{data.get('error') or 'api error'} (attempt {data.get('attempt')} of {data.get('max_retries')})"
                await context.emit(ProviderEvent(kind="retry", text=f"claude: retrying {detail}"))
            else:
                await context.emit(ProviderEvent(kind="progress", text=f"claude system: {message.subtype}"))
        elif isinstance(message, sdk.ResultMessage):
            turn.result = message

    async def _stop(self, consumer: asyncio.Future[None], clients: list[Any]) -> None:
        """Interrupt the client's turn so the CLI ends it and exits on its own; cancel the query
        task (the SDK then ends the process) when that does not happen in time. Bounded."""
        if clients and not consumer.done():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(clients[0].interrupt(), self.settings.interrupt_timeout_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait({consumer}, timeout=self.settings.interrupt_timeout_s)
        if not consumer.done():
            consumer.cancel()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait({consumer}, timeout=self.settings.interrupt_timeout_s)
        if consumer.done() and not consumer.cancelled():
            consumer.exception()  # retrieved: the call is cancelled, its late error is moot

    def _result(
        self, sdk: Any, request: AgentRequest, turn: _Turn, error: BaseException | None
    ) -> AgentResult:
        result = turn.result
        usage = _usage(getattr(result, "usage", None))
        session = turn.session
        if isinstance(error, sdk.CLINotFoundError):
            raise ProviderStartError(f"claude: {error}; install it with {INSTALL}") from error
        status = getattr(result, "api_error_status", None)
        if isinstance(error, sdk.ResultError) and status is None:
            status = error.api_error_status
        failed = error is not None or bool(getattr(result, "is_error", False))
        if failed:
            detail = _detail(result, error, turn)
            terminal = getattr(result, "terminal_reason", None) or getattr(error, "terminal_reason", None)
            http = status if isinstance(status, int) else None
            kind: FailureKind = FAILURES.kind(
                "authentication_failed" if turn.auth_failed else None, turn.api_error, status=http
            )
            if kind == "execution" and http is None and terminal == "api_error":
                kind = "api"  # an API failure without an HTTP answer (no response, a timeout)
            if kind not in ("auth", "usage_limit") and _usage_limit(detail):
                kind = "usage_limit"  # a plan's usage limit, said in words: pause, never retry now
            if kind == "execution" and result is None:
                kind = "api"  # the CLI died without a result
            return failure_outcome(
                kind,
                backend="claude",
                detail=detail,
                login_hint=LOGIN_HINT,
                resets_at=_reset_time(detail),
                usage=usage,
                session=session,
            )
        if request.schema is None:
            text = result.result if isinstance(result.result, str) else "".join(turn.texts)
            return AgentResult(text=text, usage=usage, session=session)
        if result.structured_output is None:
            return AgentResult(
                text=result.result or "",
                usage=usage,
                session=session,
                message="claude gave no structured output",
            )
        return AgentResult(
            structured=result.structured_output, has_structured=True, usage=usage, session=session
        )


def _ignore(line: str) -> None:
    """The CLI's stderr: dropped (it may echo request details; the result carries the error)."""


def _detail(result: Any, error: BaseException | None, turn: _Turn) -> str:
    for candidate in (getattr(result, "result", None), *(getattr(result, "errors", None) or ())):
        if isinstance(candidate, str) and candidate.strip():
            return candidate.strip()
    if turn.texts:
        return turn.texts[-1].strip()
    if error is not None:
        return f"claude process failed: {str(error).splitlines()[0] if str(error) else type(error).__name__}"
    return "claude ended with an error result"


def _usage(raw: Any) -> TokenUsage:
    if not isinstance(raw, Mapping):
        return TokenUsage()

    def count(key: str) -> int:
        value = raw.get(key)
        return int(value) if isinstance(value, int | float) else 0

    return TokenUsage(
        input=count("input_tokens"),
        output=count("output_tokens"),
        cache_read=count("cache_read_input_tokens"),
        cache_write=count("cache_creation_input_tokens"),
    )


def _sdk() -> ModuleType:
    """The ``claude_agent_sdk`` module; :class:`ProviderStartError` without the ``[claude]`` extra."""
    return load_sdk("claude_agent_sdk", package="claude-agent-sdk", install=INSTALL)


def _bundled_cli(package: Path) -> Path | None:
    path = package / "_bundled" / ("claude.exe" if sys.platform == "win32" else "claude")
    return path if path.is_file() else None


def _bundled_version(cli: Path) -> str | None:
    try:
        words = (cli.parent / "claude.version").read_text().split()
    except OSError:
        return program_version(str(cli), "first")
    return words[0] if words else None


def _usage_limit(detail: str) -> bool:
    """Whether Claude's error text is a plan's usage limit ("Claude AI usage limit reached|<epoch>",
    "You've hit your limit · resets 3pm")."""
    lowered = detail.lower()
    return "usage limit reached" in lowered or "hit your limit" in lowered


# Claude Code's tools as ACP tool kinds, for the policy's permission rules (acp.decide_permission).
_TOOL_KINDS: Final[Mapping[str, str]] = {
    "Bash": "execute",
    "BashOutput": "execute",
    "KillShell": "execute",
    "Edit": "edit",
    "MultiEdit": "edit",
    "Write": "edit",
    "NotebookEdit": "edit",
    "Read": "read",
    "Glob": "search",
    "Grep": "search",
    "LS": "search",
    "WebFetch": "fetch",
    "WebSearch": "fetch",
    "TodoWrite": "think",
}


def _permission_ask(tool_name: str, tool_input: Mapping[str, Any]) -> PermissionAsk:
    """A Claude permission prompt (tool name and input) as the policy's question: its kind
    (``other`` for a tool not in :data:`_TOOL_KINDS`, e.g. an MCP tool), title (the tool and its
    ``description``), file path and command (non-secret: names and paths, never file contents)."""
    path = next(
        (tool_input[k] for k in ("file_path", "notebook_path", "path") if isinstance(tool_input.get(k), str)),
        None,
    )
    command = tool_input.get("command")
    description = tool_input.get("description")
    title = f"{tool_name}: {description}" if isinstance(description, str) and description else tool_name
    return PermissionAsk(
        kind=_TOOL_KINDS.get(tool_name, "other"),
        title=title,
        paths=(path,) if path else (),
        options=(("allow", "allow_once"), ("deny", "reject_once")),
        command=command if isinstance(command, str) else None,
    )


def _reset_time(detail: str) -> str | None:
    """The reset time Claude gives with a usage limit (``…|<epoch seconds>``), as ISO 8601 UTC."""
    import datetime
    import re

    found = re.search(r"\|(\d{9,11})\b", detail)
    if found is None:
        return None
    moment = datetime.datetime.fromtimestamp(int(found.group(1)), tz=datetime.UTC)
    return moment.isoformat().replace("+00:00", "Z")


def _login_state(settings: Mapping[str, Any]) -> tuple[bool | None, str | None, str | None]:
    """(logged_in, what was seen, problem) from names and file presence only; never reads a secret."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"):
        if os.environ.get(name):
            return True, f"{name} is set", None
    for name in ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"):
        if os.environ.get(name):
            return None, f"{name} is set (its cloud credentials)", None
    configured = settings.get("config_dir") or os.environ.get("CLAUDE_CONFIG_DIR") or "~/.claude"
    credentials = Path(os.path.expanduser(str(configured))) / ".credentials.json"
    if credentials.is_file():
        return True, f"credentials file {credentials}", None
    if sys.platform == "darwin":  # the login lives in the keychain, which we do not read
        return None, None, None
    return False, None, f"installed but not logged in: run `{LOGIN_HINT}` or set ANTHROPIC_API_KEY"


async def _with_images(prompt: str, images: tuple[ImageInput, ...]) -> AsyncIterator[dict[str, Any]]:
    """The prompt and its images as the one user message of the SDK's streaming input (the
    Messages API's ``text`` and ``image`` content blocks)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
    content += [
        {"type": "image", "source": {"type": "base64", "media_type": image.mime_type, "data": image.base64}}
        for image in images
    ]
    yield {"type": "user", "message": {"role": "user", "content": content}, "parent_tool_use_id": None}
