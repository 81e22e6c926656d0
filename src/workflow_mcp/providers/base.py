"""The provider boundary: what the engine asks of an agent backend, and what it gets back.

A provider turns one :class:`AgentRequest` into one :class:`AgentResult`. It knows nothing of runs,
journals, budgets, the realm or the store; scheduling, caching, worktrees and nested workflows live
above this seam. Outcomes map onto Claude's agent() semantics (profile claude-code/2.1.332):

- ``completed``        the call finished; ``text`` or ``structured`` carries the answer.
- ``provider_failed``  API or terminal failure after the provider's own retries: agent() logs and
                       resolves ``null``.
- ``skipped``          the user skipped the call: agent() resolves ``null``.
- raising :class:`AgentExecutionError`: an execution error; agent() rejects with its message.
- raising :class:`AgentStalledError`: no progress within the stall window; the engine retries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ..errors import WorkflowMcpError

__all__ = [
    "EDIT_TOOLS",
    "AgentContext",
    "AgentExecutionError",
    "AgentProvider",
    "AgentRequest",
    "AgentResult",
    "AgentStalledError",
    "CancelSignal",
    "Checkpoint",
    "CheckpointAsk",
    "ImageInput",
    "ProviderAuthError",
    "ProviderCapabilities",
    "ProviderEvent",
    "ProviderSetupError",
    "ProviderUsageLimitError",
    "TokenUsage",
    "provider_for",
]

Outcome = Literal["completed", "provider_failed", "skipped"]
EDIT_TOOLS: frozenset[str] = frozenset({"Edit", "Write", "NotebookEdit"})
"""Claude Code's tools that change files: an agent allowed none of them is read-only."""


@dataclass(frozen=True)
class TokenUsage:
    """Token counts of one provider call. Only ``output`` charges the workflow budget
    (profile claude-code/2.1.332); the rest is recorded for cost reports."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        """The counts of two calls together, field by field (a call's re-asks, a turn's parts).
        A sum with no tokens on one side is the other value itself (the values are frozen)."""
        if not isinstance(other, TokenUsage):
            return NotImplemented
        if not (other.input or other.output or other.cache_read or other.cache_write):
            return self
        if not (self.input or self.output or self.cache_read or self.cache_write):
            return other
        return TokenUsage(
            input=self.input + other.input,
            output=self.output + other.output,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
        )

    def to_json(self) -> dict[str, int]:
        return {
            "input": self.input,
            "output": self.output,
            "cacheRead": self.cache_read,
            "cacheWrite": self.cache_write,
        }


@dataclass(frozen=True)
class ImageInput:
    """One image attached to an agent call: its bytes, their ``mime_type`` (``image/png``,
    ``image/jpeg``, ``image/gif`` or ``image/webp``; checked against the bytes by
    :func:`~workflow_mcp.providers.attachments.read_attachments`) and a ``name`` for messages and
    file names. Each provider passes it through its own image input (module of each provider)."""

    data: bytes = field(repr=False)
    mime_type: str
    name: str = "image"

    @property
    def base64(self) -> str:
        """The bytes in standard base64 (no line breaks), as the vendor APIs take them."""
        import base64

        return base64.b64encode(self.data).decode("ascii")

    @property
    def data_url(self) -> str:
        """``data:<mime type>;base64,<data>`` (OpenAI's ``image_url``)."""
        return f"data:{self.mime_type};base64,{self.base64}"


@dataclass(frozen=True)
class AgentRequest:
    """One agent() call as a provider sees it.

    ``prompt`` is already coerced to a string; ``label`` is the explicit label or the fallback label;
    ``phase`` is the effective phase title (``None`` before the first phase()). ``model`` is the
    normalized model name (``haiku``/``sonnet``/``opus`` for Claude's aliases, ``None`` for the run's
    default; :mod:`workflow_mcp.definitions.models`), from the option or else the agent definition;
    ``effort`` likewise, ``None`` when absent or invalid. ``schema`` is a JSON Schema (draft-07
    semantics, object root) when structured output is required. ``feedback`` carries the validation
    error of the previous attempt on a schema re-ask (``attempt`` counts from 1). ``options`` holds
    every other recognised option, unchanged.

    The agent definition ``agentType`` resolved to (:mod:`workflow_mcp.definitions.agents`):
    ``agent_type`` is its name; ``instructions`` its Markdown body (the agent's system prompt; ``None``
    without a definition, or for a built-in without instructions); ``tools`` the tool names it may use,
    Claude Code's names, already without ``disallowed_tools`` (``None``: the provider's defaults;
    ``()``: none); ``disallowed_tools`` the names the definition and the ``disallowedTools`` option
    remove. Each provider maps these through its own SDK (system prompt, developer instructions, tool
    lists, a narrower sandbox when no tool may edit files).

    ``images`` are the call's image attachments (``run_agent``/``agent_run``); only a provider whose
    ``capabilities.images`` is true is handed any.
    """

    prompt: str
    label: str
    run_id: str = ""
    agent_id: str = ""
    phase: str | None = None
    schema: Mapping[str, Any] | None = None
    model: str | None = None
    effort: str | None = None
    isolation: str | None = None
    agent_type: str | None = None
    instructions: str | None = None
    tools: tuple[str, ...] | None = None
    disallowed_tools: tuple[str, ...] = ()
    stall_ms: int | None = None
    cwd: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    attempt: int = 1
    feedback: str | None = None
    session: str | None = None
    images: tuple[ImageInput, ...] = ()

    @property
    def read_only(self) -> bool:
        """Whether the agent may not change files: none of its tools edits one (``Edit``, ``Write``,
        ``NotebookEdit``), counting ``disallowed_tools`` against the provider's defaults."""
        if self.tools is None:
            return set(self.disallowed_tools) >= EDIT_TOOLS
        return not (set(self.tools) - set(self.disallowed_tools)) & EDIT_TOOLS


@dataclass(frozen=True)
class AgentResult:
    """What one provider call produced. ``structured`` is meaningful only when ``has_structured``."""

    outcome: Outcome = "completed"
    text: str | None = None
    structured: Any = None
    has_structured: bool = False
    usage: TokenUsage = field(default_factory=TokenUsage)
    message: str | None = None
    session: str | None = None
    failure: Literal["rate_limit", "overloaded"] | None = None
    """For ``provider_failed``: the backend refused for load (HTTP 429 rate limit, 529/503 overload);
    the engine retries such an answer with backoff before it resolves ``null``."""
    retry_after_s: float | None = None
    """How long the backend asked to wait (``Retry-After``), when it said."""


@dataclass(frozen=True)
class ProviderEvent:
    """Something a provider reports during a call: ``kind`` is ``output.delta`` (``text``),
    ``progress`` (``text``) or ``retry`` (``text``: the backend is retrying after an API or transport
    error, e.g. codex's "Reconnecting... 2/5"). Deltas and progress are signs of life for the engine's
    stall window; a retry is not, so a backend that reconnects forever still stalls. Provider-specific
    names stay inside ``data``."""

    kind: Literal["output.delta", "progress", "retry"]
    text: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)


class CancelSignal:
    """A one-shot cancellation flag a provider awaits or polls. ``reason`` is set when fired.

    The event a waiter awaits is made by the first :meth:`wait`: most calls end without anyone
    waiting on their signal, and the engine makes one signal per call."""

    __slots__ = ("_event", "_fired", "reason")

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None
        self._fired = False
        self.reason: str | None = None

    @property
    def cancelled(self) -> bool:
        return self._fired

    def cancel(self, reason: str = "cancelled") -> None:
        if not self._fired:
            self._fired = True
            self.reason = reason
            if self._event is not None:
                self._event.set()

    async def wait(self) -> None:
        if self._fired:
            return
        if self._event is None:
            self._event = asyncio.Event()
        await self._event.wait()


@dataclass(frozen=True)
class CheckpointAsk:
    """A permission request a provider could not answer from the policy and, under
    ``approvals = "ask"``, hands to a human: the ``tool`` kind (ACP ToolKind, e.g. ``execute``,
    ``edit``; ``other`` when unknown), its ``title``, the ``command`` it would run (``None`` when it
    names none) and the file ``paths`` it touches. Nothing here may carry a secret: it is shown to
    the user and stored in the run's events (``checkpointContext``)."""

    tool: str
    title: str = ""
    command: str | None = None
    paths: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """``{"tool", "title", "command", "paths"}`` (JSON-ready)."""
        return {"tool": self.tool, "title": self.title, "command": self.command, "paths": list(self.paths)}


Checkpoint = Callable[[CheckpointAsk], Awaitable[bool | None]]
"""The engine's answer to a :class:`CheckpointAsk`: ``True`` allow, ``False`` deny, ``None`` nobody
can answer now (the run is pausing with ``checkpoint_required``; the provider refuses the request
and the call ends cancelled). Never raises."""


@dataclass(frozen=True)
class AgentContext:
    """Per-call context: the cancel ``signal``, ``emit`` for progress events and, when the run can
    hold a human checkpoint, ``checkpoint`` (``None``: nobody can be asked, so fail closed)."""

    signal: CancelSignal
    emit: Callable[[ProviderEvent], Awaitable[None]]
    checkpoint: Checkpoint | None = None


@dataclass(frozen=True)
class ProviderCapabilities:
    """What a provider can honour; routing checks these before any call is made, and
    ``workflow-mcp providers`` prints them (the capability matrix).

    ``structured_output``: answers a schema call with a JSON value; ``images``: takes image input;
    ``sandbox_control``: enforces the policy's sandbox (read-only, workspace-write) itself;
    ``network_control``: enforces the policy's ``network`` switch itself; ``session_resume``: a call
    can continue an earlier call's session; ``token_usage``: reports tokens per call; ``streaming``:
    streams output and progress while it works (the stall watchdog judges silence only then);
    ``cancellation``: a running call can be cancelled. ``None`` (``network_control``,
    ``token_usage``): not declared by the provider, or it depends on the agent program.
    """

    structured_output: bool = True
    images: bool = False
    sandbox_control: bool = False
    session_resume: bool = False
    streaming: bool = False
    cancellation: bool = True
    network_control: bool | None = None
    token_usage: bool | None = None


class AgentExecutionError(WorkflowMcpError):
    """Raised by a provider for an execution error: the workflow's agent() call rejects."""


class ProviderSetupError(AgentExecutionError):
    """Raised (the agent() call rejects) when a call cannot work with this configuration whatever
    the model answers: routed to a provider that cannot honour it (no structured output, an unmapped
    Claude model alias) or whose program cannot start. A run in which *every* agent call failed with
    the same one of these is reported failed with it, never completed on a pile of ``null`` slots."""


class ProviderAuthError(AgentExecutionError):
    """Raised by a provider when its backend refuses the call for want of a valid login (missing or
    expired credentials, HTTP 401): the run should pause until the user logs in, then resume.

    ``backend`` names the provider (``codex``, ``claude``, an ACP agent); ``detail`` is the
    backend's own non-secret reason; ``login_hint`` says how to log in (e.g. ``codex login``).
    Nothing here may carry a secret. It subclasses :class:`AgentExecutionError`, so an engine that
    does not pause yet rejects the agent() call with this message.
    """

    def __init__(self, backend: str, detail: str = "", *, login_hint: str | None = None) -> None:
        self.backend = backend
        self.detail = detail
        self.login_hint = login_hint
        message = f"{backend}: authentication required (missing or expired login)"
        if detail:
            message += f": {detail}"
        if login_hint:
            message += f"; log in with `{login_hint}`, then resume the run"
        super().__init__(message)

    def to_json(self) -> dict[str, str | None]:
        """The non-secret pause context: ``{"reason": "auth_required", "backend", "detail", "loginHint"}``."""
        return {
            "reason": "auth_required",
            "backend": self.backend,
            "detail": self.detail,
            "loginHint": self.login_hint,
        }


class ProviderUsageLimitError(AgentExecutionError):
    """Raised by a provider when its backend refuses the call because a usage or quota limit is
    spent (a plan's usage limit, an API key out of quota): the run should pause until the limit
    resets, then resume. ``resets_at`` is when it resets (ISO 8601, UTC) if the backend said;
    ``detail`` the backend's non-secret reason. Never a secret."""

    def __init__(self, backend: str, detail: str = "", *, resets_at: str | None = None) -> None:
        self.backend = backend
        self.detail = detail
        self.resets_at = resets_at
        message = f"{backend}: usage limit reached"
        if detail:
            message += f": {detail}"
        message += f"; it resets at {resets_at}" if resets_at else "; it resets when the backend says so"
        super().__init__(message)

    def to_json(self) -> dict[str, str | None]:
        """The pause context: ``{"reason": "usage_limit", "backend", "detail", "resetsAt"}``."""
        return {
            "reason": "usage_limit",
            "backend": self.backend,
            "detail": self.detail,
            "resetsAt": self.resets_at,
        }


class AgentStalledError(WorkflowMcpError):
    """Raised by a provider (or the engine's stall watchdog) when a call made no progress in time."""


@runtime_checkable
class AgentProvider(Protocol):
    """An agent backend. ``execute`` never returns partial results: it returns one
    :class:`AgentResult` or raises :class:`AgentExecutionError`; cancellation through
    ``context.signal`` ends it with :class:`asyncio.CancelledError`.

    ``aclose`` releases whatever the provider holds (agent processes, app-servers, HTTP clients) and
    refuses later calls; it is idempotent and never raises. Whoever built a provider closes it: the
    service's provider pool closes the ones it built when the service shuts down.
    """

    # Read-only members, so a class-level name (``ClassVar``) and a ``Final`` table satisfy them.
    @property
    def name(self) -> str: ...

    @property
    def capabilities(self) -> ProviderCapabilities: ...

    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult: ...

    async def aclose(self) -> None: ...


def provider_for(
    provider: AgentProvider, *, label: str, phase: str | None, model: str | None, agent_type: str | None
) -> str:
    """The name of the provider that takes a call with these routing fields first: a router's
    choice (a provider with a ``route_of(request) -> str`` method,
    :class:`~workflow_mcp.providers.routing.RoutingProvider`), else ``provider.name``. Starts
    nothing; builds a request only for a router. The ``provider`` of each ``agent.started`` event."""
    route_of = getattr(provider, "route_of", None)
    if callable(route_of):
        name = route_of(AgentRequest(prompt="", label=label, phase=phase, model=model, agent_type=agent_type))
        if isinstance(name, str):
            return name
    return str(getattr(provider, "name", type(provider).__name__))
