"""The ``acp`` provider: any agent that speaks the Agent Client Protocol (codex-acp, claude-agent-acp,
``gemini --experimental-acp``, ``opencode acp``, ``goose acp`` …), driven through the official
Python SDK (``agent-client-protocol``). Install with ``pip install 'workflow-mcp[acp]'``; the agent
program itself comes from its vendor (e.g. ``npm install -g @zed-industries/codex-acp``).

Each agent() call is one ACP *session* and one prompt turn (protocol version 1):

- **Process.** The configured ``command`` (with ``args``) starts with only the allowlisted
  environment (:func:`~.policy.allowed_env`: the base set, the known agent's credential names and
  ``env``, plus ``set_env``) in a process group of its own, so closing kills the node wrapper *and*
  the native agent it spawned. ``initialize`` runs once per process. By default one process is
  shared by up to ``max_sessions`` concurrent sessions and more are started as the fan-out grows
  (``reuse = false``: one process per call, closed after it). Measured with codex-acp against the
  mock at a 20-way fan-out: one process per call peaks at 2.3 GiB RSS, the pool of 8 at 0.44 GiB,
  for the same wall time.
- **Prompt and model.** ``session/new`` in the call's ``cwd``; ``model`` and ``effort`` are set
  through the session's config options of category ``model`` and ``thought_level`` when the agent
  offers them (a model the agent does not list is an execution error naming what it offers; an
  agent without a model choice runs its own default and the call reports that as progress).
- **Agent definitions.** An ``agentType``'s instructions are the session's system prompt where the
  agent takes one (``_meta.systemPrompt`` of ``session/new``: claude-agent-acp; the
  ``system_prompt_meta`` setting says so for another agent), otherwise a clearly framed preamble of
  the first prompt (``<agent-instructions>`` … ``</agent-instructions>``, then the task). Its model
  and effort arrive as the request's. Tool lists are each agent's own business, but an agent whose
  tools include none that edits files has its edit, delete and move permission requests refused.
- **Events.** ``agent_message_chunk`` → ``output.delta``; tool calls, their updates, plans and
  thoughts → ``progress`` (the engine's stall watchdog counts them). The answer is the agent's
  *last* message: the text streamed after its last tool call, thought or plan.
- **Structured output.** The agent is told to answer with only a JSON value matching the schema
  (the portable schema, shown verbatim). Its last message is parsed as JSON (a ```json fence is
  tolerated). A non-JSON answer is asked again in the same session, up to ``json_retries`` times,
  then returned with ``has_structured=False`` and the reason. The engine validates the value and
  re-asks with its feedback (``attempt > 1``), which continues the same session.
- **Policy.** ``session/request_permission`` is answered from the policy by
  :func:`decide_permission`: only what the policy allows is allowed; anything it cannot vouch for is
  rejected (fail closed: nobody is there to approve). Each decision is a ``progress`` event. What
  an agent does without asking is its own sandbox's business: for a known agent the policy also
  becomes its own flags (:attr:`KnownAgent.policy_args`; codex-acp: ``sandbox_mode``, network,
  writable roots, ``approval_policy``), appended after ``args`` so settings cannot widen it.
- **Cancellation.** When ``context.signal`` fires (or the call's task is cancelled), the turn is
  cancelled (``session/cancel``) and its end awaited for at most ``cancel_timeout_s``; the call
  ends with :class:`asyncio.CancelledError`. A turn cancelled from outside the call
  (:meth:`ACPProvider.interrupt_session`, an operator's skip) resolves ``skipped``.
- **Outcomes.** ``AUTH_REQUIRED`` (JSON-RPC -32000) or an upstream HTTP 401 →
  :class:`~.base.ProviderAuthError` naming the agent (the run should pause for a login); an upstream
  API or transport failure (5xx, overload, rate limit, connection) or the agent process dying →
  ``provider_failed``; any other error → :class:`~.base.AgentExecutionError`.
- **Usage and session.** Token usage when the agent reports it in the prompt response (ACP's
  per-turn ``usage``); the session id is ``AgentResult.session``, and a request with ``session``
  resumes it (``session/resume``, else ``session/load``) when the agent can.

Settings (``[providers.acp]``): ``command`` (the agent program; default: the first known ACP agent
on PATH, see :data:`KNOWN_AGENTS`), ``args`` (list; default the known agent's), ``env`` (extra
environment names to pass),
``set_env`` (table of fixed environment values, e.g. ``CODEX_HOME``; never put a secret here),
``cwd`` (the process's working directory), ``agent_name`` (the name in messages and auth pauses;
default the agent's own), ``login_hint`` (how to log in), ``model``, ``effort``,
``session_config`` (table: config option id → value, set on every session), ``mode`` (a session
mode id), ``max_sessions`` (per process, default 8), ``reuse`` (default true), ``json_retries``
(default 2), ``rpc_timeout_s`` (bound on each protocol request, default 60),
``cancel_timeout_s`` (bound on a cancelled turn ending, default 15), ``system_prompt_meta`` (bool:
the agent takes ``_meta.systemPrompt``; default from the known agent).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import signal
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, TypeVar

from ._probe import dist_version
from .base import (
    AgentContext,
    AgentExecutionError,
    AgentRequest,
    AgentResult,
    Checkpoint,
    CheckpointAsk,
    ProviderAuthError,
    ProviderCapabilities,
    ProviderEvent,
    TokenUsage,
)
from .config import ProviderConfigError
from .policy import DEFAULT_POLICY, Policy, allowed_env
from .registry import Availability, ProviderStartError

__all__ = [
    "KNOWN_AGENTS",
    "ACPProvider",
    "KnownAgent",
    "PermissionAsk",
    "PermissionDecision",
    "answer_checkpoint",
    "codex_policy_args",
    "decide_permission",
    "parse_json_answer",
]

T = TypeVar("T")

INSTALL: Final = "pip install 'workflow-mcp[acp]'"
AUTH_REQUIRED: Final = -32000
"""ACP's JSON-RPC error code for "Authentication required"."""


@dataclass(frozen=True)
class KnownAgent:
    """An ACP agent this provider knows by its program name (the command's basename): the
    ``args`` it runs with when the settings give none, the environment names holding its
    credentials (always passed to it), ``policy_args`` turning the policy into its own flags
    (appended last, so settings cannot widen the policy), how to log in and how to install it."""

    command: str
    args: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    login_hint: str | None = None
    install: str | None = None
    policy_args: Callable[[Policy], tuple[str, ...]] | None = None
    system_prompt_meta: bool = False
    """Whether ``session/new`` takes a system prompt as ``_meta.systemPrompt`` (claude-agent-acp)."""


def codex_policy_args(policy: Policy) -> tuple[str, ...]:
    """The policy as Codex config overrides (``-c key=value``): sandbox mode, network and writable
    roots of workspace-write, and approvals (``never``: Codex refuses every escalation itself;
    ``auto-review``: ``on-request``, each escalation asked of us and answered by
    :func:`decide_permission`)."""
    values: dict[str, Any] = {
        "sandbox_mode": policy.sandbox,
        "approval_policy": "never" if policy.approvals == "never" else "on-request",
        "sandbox_workspace_write.network_access": policy.network,
        "sandbox_workspace_write.writable_roots": list(policy.writable_roots),
    }
    return tuple(arg for key, value in values.items() for arg in ("-c", f"{key}={json.dumps(value)}"))


_CLAUDE_ENV: Final = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "CLAUDE_CONFIG_DIR",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "IS_SANDBOX",
)
KNOWN_AGENTS: Final[tuple[KnownAgent, ...]] = (
    KnownAgent(
        "codex-acp",
        # Codex's per-session login-shell snapshot sources the user's rc files (outside the
        # environment allowlist) and doubles a 20-way fan-out's wall time against a mock model.
        ("-c", "features.shell_snapshot=false"),
        env=("CODEX_HOME", "CODEX_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "RUST_LOG"),
        login_hint="codex login",
        install="npm install -g @zed-industries/codex-acp",
        policy_args=codex_policy_args,
    ),
    KnownAgent(
        "claude-agent-acp",
        env=_CLAUDE_ENV,
        login_hint="claude /login",
        install="npm install -g @agentclientprotocol/claude-agent-acp",
        system_prompt_meta=True,
    ),
    KnownAgent("claude-code-acp", env=_CLAUDE_ENV, login_hint="claude /login", system_prompt_meta=True),
    KnownAgent(
        "gemini",
        ("--experimental-acp",),
        env=(
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "GOOGLE_CLOUD_PROJECT",
            "GOOGLE_CLOUD_LOCATION",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "GOOGLE_GENAI_USE_VERTEXAI",
        ),
        login_hint="gemini (log in once interactively) or set GEMINI_API_KEY",
    ),
    KnownAgent("opencode", ("acp",), env=("OPENCODE_*",), login_hint="opencode auth login"),
    KnownAgent("goose", ("acp",), env=("GOOSE_*",), login_hint="goose configure"),
)
"""ACP agents found on PATH without configuration, in this order (issue 4's list)."""

_SETTINGS: Final[Mapping[str, tuple[type, ...]]] = {
    "command": (str,),
    "args": (list,),
    "env": (list,),
    "set_env": (dict,),
    "cwd": (str,),
    "agent_name": (str,),
    "login_hint": (str,),
    "model": (str,),
    "effort": (str,),
    "session_config": (dict,),
    "mode": (str,),
    "max_sessions": (int,),
    "reuse": (bool,),
    "json_retries": (int,),
    "rpc_timeout_s": (int, float),
    "cancel_timeout_s": (int, float),
    "system_prompt_meta": (bool,),
}
# Upstream error kinds (codex_error_info, normalised: lower case, no separators) that are API or
# transport failures after the agent's own retries: agent() resolves null.
_API_FAILURES: Final = frozenset(
    {
        "internalservererror",
        "serveroverloaded",
        "ratelimitexceeded",
        "usagelimitexceeded",
        "flexunavailable",
        "httpconnectionfailed",
        "responsestreamconnectionfailed",
        "responsestreamdisconnected",
        "responsetoomanyfailedattempts",
    }
)
_API_FAILURE_TEXT: Final = re.compile(
    r"\b(5\d\d|429)\b|overloaded|rate limit|high demand|connection (refused|reset|failed|error)"
    r"|stream disconnected|timed out",
    re.IGNORECASE,
)
_UNAUTHORIZED_TEXT: Final = re.compile(
    r"\b401\b|unauthori[sz]ed|invalid api key|authentication required", re.I
)
_REMEMBERED_SESSIONS: Final = 256
_STDERR_TAIL: Final = 4096
_STDOUT_LIMIT: Final = 16 * 1024 * 1024
_CLOSE_TIMEOUT_S: Final = 3.0

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


# -- permissions ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PermissionAsk:
    """What an agent asked permission for (``session/request_permission``): the tool ``kind``
    (ACP ToolKind: read, edit, delete, move, search, execute, think, fetch, switch_mode, other;
    ``None`` when not given), its ``title``, the file ``paths`` it touches, and the ``options``
    offered as ``(optionId, kind)`` pairs (kind: allow_once, allow_always, reject_once,
    reject_always). ``command`` is the command line an ``execute`` call would run, when its
    ``rawInput`` names one."""

    kind: str | None
    title: str = ""
    paths: tuple[str, ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    command: str | None = None


@dataclass(frozen=True)
class PermissionDecision:
    """The answer: ``allow`` or not, the ``option_id`` selected (``None``: answered ``cancelled``,
    when no fitting option was offered), and the ``reason`` in words. ``ask``: the policy cannot
    vouch for the request but ``approvals = "ask"`` lets a human decide (the decision stands as a
    refusal until one does)."""

    allow: bool
    option_id: str | None
    reason: str
    ask: bool = False


def decide_permission(policy: Policy, ask: PermissionAsk, *, cwd: str) -> PermissionDecision:
    """Answer a permission request from ``policy`` alone (DESIGN.md "Security defaults"; issue 4:
    fail closed when nobody can approve). Nobody is asked, so only what the policy vouches for is
    allowed:

    - ``read``, ``search``, ``think``: allowed (every sandbox mode reads).
    - ``edit``, ``delete``, ``move``: denied under ``read-only``; allowed under
      ``danger-full-access``; under ``workspace-write`` allowed only when the request names its
      paths and every one lies in ``cwd`` or a ``writable_roots`` entry.
    - ``fetch``: allowed only with ``network``.
    - ``execute``, ``switch_mode``, ``other`` or no kind: what the command does cannot be checked
      here, so allowed only under ``danger-full-access`` or when ``approvals`` is ``auto-review``
      (the agent's own review is trusted); with ``approvals = "ask"`` denied with ``ask`` set, for a
      human checkpoint to decide; with ``approvals = "never"`` denied. The policy only narrows what
      is asked: what it allows or denies outright is never put to a human.

    An allowed request selects ``allow_once`` (else ``allow_always``); a denied one selects
    ``reject_once`` (else ``reject_always``, else the answer is ``cancelled``). Never raises.
    """
    verdict, reason = _judge(policy, ask, cwd)
    if verdict is None:
        return _refusal(ask, reason, ask_human=True)
    allow = verdict
    kinds = dict((kind, option) for option, kind in reversed(ask.options))
    if allow:
        option = kinds.get("allow_once") or kinds.get("allow_always")
        if option is not None:
            return PermissionDecision(True, option, reason)
        reason = f"{reason}, but the agent offered no allow option"
    return _refusal(ask, reason)


def answer_checkpoint(ask: PermissionAsk, allow: bool, source: str) -> PermissionDecision:
    """The answer to a request a human checkpoint decided (``source``: who decided, in words)."""
    if allow:
        kinds = dict((kind, option) for option, kind in reversed(ask.options))
        option = kinds.get("allow_once") or kinds.get("allow_always")
        if option is not None:
            return PermissionDecision(True, option, f"allowed by {source}")
        return _refusal(ask, f"allowed by {source}, but the agent offered no allow option")
    return _refusal(ask, f"denied by {source}")


def _refusal(ask: PermissionAsk, reason: str, *, ask_human: bool = False) -> PermissionDecision:
    kinds = dict((kind, option) for option, kind in reversed(ask.options))
    option = kinds.get("reject_once") or kinds.get("reject_always")
    return PermissionDecision(False, option, reason, ask=ask_human)


def _judge(policy: Policy, ask: PermissionAsk, cwd: str) -> tuple[bool | None, str]:
    kind = ask.kind or "other"
    if kind in ("read", "search", "think"):
        return True, f"{kind} is allowed by every sandbox mode"
    if kind in ("edit", "delete", "move"):
        if policy.sandbox == "read-only":
            return False, f"{kind} is denied by the read-only sandbox"
        if policy.sandbox == "danger-full-access":
            return True, f"{kind} is allowed by danger-full-access"
        if not ask.paths:
            return False, f"{kind} names no path, so it cannot be checked against the writable roots"
        roots = [os.path.abspath(cwd), *(os.path.abspath(r) for r in policy.writable_roots)]
        for path in ask.paths:
            full = os.path.abspath(os.path.join(cwd, path))
            if not any(_within(full, root) for root in roots):
                return False, f"{kind} of {full} is outside the working directory and the writable roots"
        return True, f"{kind} inside the writable roots is allowed by workspace-write"
    if kind == "fetch":
        if policy.network:
            return True, "fetch is allowed: the policy allows network access"
        return False, "fetch is denied: the policy denies network access"
    if policy.sandbox == "danger-full-access":
        return True, f"{kind} is allowed by danger-full-access"
    if policy.approvals == "auto-review":
        return True, f"{kind} is allowed: approvals are auto-review"
    if policy.approvals == "ask":
        return None, f"{kind} cannot be checked against the policy, so a human is asked (approvals: ask)"
    return False, f"{kind} cannot be checked against the policy and nobody can approve it (approvals: never)"


def _within(path: str, root: str) -> bool:
    path, root = os.path.normpath(path), os.path.normpath(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


# -- structured answers -----------------------------------------------------------------------------
_FENCE: Final = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n(.*?)\n?[ \t]*```", re.DOTALL)


def parse_json_answer(text: str) -> tuple[bool, Any, str | None]:
    """``(ok, value, problem)`` for an agent's final message: the whole text as JSON, else the last
    fenced block (```json … ``` or an unlabelled fence). ``problem`` says why it is not JSON."""
    stripped = text.strip()
    if not stripped:
        return False, None, "the reply is empty"
    try:
        return True, json.loads(stripped), None
    except ValueError as exc:
        first = f"not JSON: {exc}"
    blocks = [body for lang, body in _FENCE.findall(stripped) if lang.lower() in ("", "json", "jsonc")]
    if blocks:
        try:
            return True, json.loads(blocks[-1].strip()), None
        except ValueError as exc:
            return False, None, f"the fenced block is not JSON: {exc}"
    return False, None, first


# -- the provider -----------------------------------------------------------------------------------
class ACPProvider:
    """An :class:`~workflow_mcp.providers.base.AgentProvider` running ACP prompt turns (module
    docstring). Construct directly or through the registry (``get_provider("acp", settings)``).
    Nothing starts until the first :meth:`execute`; :meth:`aclose` stops every agent process (the
    whole process group). Use one instance per event loop. Raises
    :class:`~workflow_mcp.providers.config.ProviderConfigError` for bad settings.
    """

    name: Final = "acp"
    capabilities: Final = ProviderCapabilities(
        structured_output=True,
        images=False,
        sandbox_control=False,
        session_resume=True,
        streaming=True,
        cancellation=True,
    )
    accepts_claude_models: Final = False
    install_hint: Final = INSTALL

    def __init__(
        self,
        *,
        command: str | None = None,
        args: Sequence[str] | None = None,
        env: Sequence[str] = (),
        set_env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        agent_name: str | None = None,
        login_hint: str | None = None,
        model: str | None = None,
        effort: str | None = None,
        session_config: Mapping[str, str | bool] | None = None,
        mode: str | None = None,
        max_sessions: int = 8,
        reuse: bool = True,
        json_retries: int = 2,
        rpc_timeout_s: float = 60.0,
        cancel_timeout_s: float = 15.0,
        system_prompt_meta: bool | None = None,
        policy: Policy = DEFAULT_POLICY,
        source: str = "provider settings",
    ) -> None:
        known = _find_known() if command is None else _known(command)
        if command is None:
            if known is None:
                raise ProviderConfigError(source, "providers.acp.command", f"is required: {_none_found()}")
            command = known.command
        if max_sessions < 1:
            raise ProviderConfigError(source, "providers.acp.max_sessions", "must be at least 1")
        if json_retries < 0:
            raise ProviderConfigError(source, "providers.acp.json_retries", "must be 0 or more")
        for key, value in (("rpc_timeout_s", rpc_timeout_s), ("cancel_timeout_s", cancel_timeout_s)):
            if value <= 0:
                raise ProviderConfigError(
                    source, f"providers.acp.{key}", "must be a positive number of seconds"
                )
        self.command = command
        self.args = tuple(args) if args is not None else (known.args if known else ())
        self.policy_args = known.policy_args(policy) if known and known.policy_args else ()
        self.env_names = (*(known.env if known else ()), *env)
        self.set_env = dict(set_env or {})
        self.cwd = os.path.abspath(os.path.expanduser(cwd)) if cwd else None
        self.agent_name = agent_name
        self.login_hint = login_hint or (known.login_hint if known else None)
        self.model = model
        self.effort = effort
        self.session_config = dict(session_config or {})
        self.mode = mode
        self.max_sessions = max_sessions
        self.reuse = reuse
        self.json_retries = json_retries
        self.rpc_timeout_s = float(rpc_timeout_s)
        self.cancel_timeout_s = float(cancel_timeout_s)
        self.system_prompt_meta = (
            system_prompt_meta if system_prompt_meta is not None else bool(known and known.system_prompt_meta)
        )
        self.policy = policy
        self.source = source
        self._procs: list[_AgentProcess] = []  # the pool: processes taking new sessions
        self._spawned: set[_AgentProcess] = set()  # every process not yet closed
        self._spawn_lock = asyncio.Lock()
        self._remembered: OrderedDict[tuple[str, str], tuple[_AgentProcess, str]] = OrderedDict()
        self._idle: OrderedDict[str, _AgentProcess] = OrderedDict()
        self._background: set[asyncio.Task[Any]] = set()
        self._reported_name: str | None = None  # the agent's own name, from initialize
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
            known = _find_known()
            if known is None:
                return Availability(
                    False, problem=_none_found(), install="npm install -g @zed-industries/codex-acp"
                )
            command = known.command
        if not isinstance(command, str) or not command:
            return Availability(False, problem="providers.acp.command must be a program name or path")
        path = shutil.which(os.path.expanduser(command))
        if path is None:
            hint = _known(command)
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

    @classmethod
    def create(cls, settings: Mapping[str, Any], *, policy: Policy, source: str) -> ACPProvider:
        """A provider from ``[providers.acp]`` settings (module docstring); raises
        :class:`~workflow_mcp.providers.config.ProviderConfigError` naming ``source`` and the key."""
        for key, value in settings.items():
            kinds = _SETTINGS.get(key)
            if kinds is None:
                raise ProviderConfigError(
                    source, f"providers.acp.{key}", f"unknown setting; expected one of {', '.join(_SETTINGS)}"
                )
            if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
                raise ProviderConfigError(
                    source, f"providers.acp.{key}", f"must be {' or '.join(k.__name__ for k in kinds)}"
                )
        for key in ("args", "env"):
            if key in settings and not all(isinstance(v, str) and v for v in settings[key]):
                raise ProviderConfigError(
                    source, f"providers.acp.{key}", "must be a list of non-empty strings"
                )
        if "set_env" in settings and not all(isinstance(v, str) for v in settings["set_env"].values()):
            raise ProviderConfigError(source, "providers.acp.set_env", "must map names to string values")
        if "session_config" in settings and not all(
            isinstance(v, str | bool) for v in settings["session_config"].values()
        ):
            raise ProviderConfigError(
                source, "providers.acp.session_config", "must map config option ids to strings or booleans"
            )
        return cls(**dict(settings), policy=policy, source=source)

    # -- the AgentProvider call ----------------------------------------------------------------
    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        """Run one ACP prompt turn for ``request`` (module docstring for the outcomes).

        Raises :class:`~workflow_mcp.providers.base.ProviderAuthError` (the agent needs a login),
        :class:`~workflow_mcp.providers.base.AgentExecutionError` (the agent refused the call),
        :class:`~workflow_mcp.providers.registry.ProviderStartError` (the agent cannot start), or
        :class:`asyncio.CancelledError` (the signal fired; the turn was cancelled).
        """
        if context.signal.cancelled:
            raise asyncio.CancelledError(context.signal.reason)
        if self._closed:
            raise AgentExecutionError(f"{self._label()}: the acp provider is closed")
        sdk = _sdk()
        cwd = os.path.abspath(request.cwd or self.cwd or os.getcwd())
        lease = await self._lease(sdk, request, cwd, context)
        keep = False
        try:
            result = await self._converse(sdk, lease, request, context)
            keep = result.outcome == "completed" and request.schema is not None and bool(request.agent_id)
            return result
        finally:
            self._release(lease, request, keep=keep)

    async def interrupt_session(self, session_id: str) -> None:
        """Cancel the turn running in ``session_id`` from outside its agent() call (an operator's
        *skip*): that call resolves ``skipped``. Raises
        :class:`~workflow_mcp.providers.base.AgentExecutionError` when no turn runs there."""
        for proc in self._spawned:
            turn = proc.turns.get(session_id)
            if turn is not None:
                await self._bounded(proc.conn.cancel(session_id=session_id), "session/cancel", proc)
                return
        raise AgentExecutionError(f"{self._label()}: no turn is running in session {session_id}")

    async def aclose(self) -> None:
        """Stop every agent process, killing each whole process group (idempotent). In-flight
        calls end with a provider failure."""
        self._closed = True
        self._procs = []
        self._remembered.clear()
        self._idle.clear()
        # Closing the processes first ends every pending request, so background work (cancels,
        # session closes, closes already under way) finishes at once; then wait for it, bounded.
        await asyncio.gather(*(p.close() for p in list(self._spawned)), return_exceptions=True)
        tasks = list(self._background)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=_CLOSE_TIMEOUT_S * 2)
            for task in pending:
                task.cancel()
        self._spawned.clear()

    @property
    def running_sessions(self) -> list[str]:
        """Ids of the sessions with a turn running now (for :meth:`interrupt_session`)."""
        return [session for proc in self._spawned for session in proc.turns]

    @property
    def processes(self) -> list[int]:
        """Process ids of the agent processes alive now (their process groups have the same ids)."""
        return [p.pid for p in self._spawned if p.alive]

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
            known = self._remembered.pop(key, None)
            if known is not None and known[0].usable:
                proc, session_id = known
                self._idle.pop(session_id, None)
                proc.active += 1
                return _Lease(proc, session_id, request.feedback + FEEDBACK_SUFFIX)
        prompt = request.prompt + schema_text
        if request.instructions and not self.system_prompt_meta:
            prompt = AGENT_PREAMBLE.format(instructions=request.instructions, prompt=prompt)
        if request.feedback:
            prompt += "\n\n" + request.feedback
        if request.session:
            idle = self._idle.pop(request.session, None)
            if idle is not None and idle.usable and request.session not in idle.turns:
                idle.active += 1
                return _Lease(idle, request.session, prompt)
        proc = await self._acquire()
        try:
            resumed = await self._resume(proc, request.session, cwd, context) if request.session else None
            if resumed is not None:
                return _Lease(proc, resumed, prompt)
            return _Lease(proc, await self._new_session(sdk, proc, request, cwd, context), prompt)
        except BaseException:
            self._release(_Lease(proc, "", ""), request, keep=False)
            raise

    async def _acquire(self) -> _AgentProcess:
        if not self.reuse:
            proc = await self._spawn()
            proc.active += 1
            return proc
        async with self._spawn_lock:
            for dead in [p for p in self._procs if not p.alive]:
                self._procs.remove(dead)
                self._background_task(self._close(dead))
            for proc in self._procs:
                if proc.usable and proc.active < self.max_sessions:
                    proc.active += 1
                    return proc
            proc = await self._spawn()
            proc.active += 1
            self._procs.append(proc)
            return proc

    def _release(self, lease: _Lease, request: AgentRequest, *, keep: bool) -> None:
        proc = lease.proc
        proc.active = max(0, proc.active - 1)
        if lease.session_id:
            if keep and self.reuse and proc.usable:
                key = (request.run_id, request.agent_id)
                self._remembered[key] = (proc, lease.session_id)
                self._remembered.move_to_end(key)
                self._idle[lease.session_id] = proc
                while len(self._remembered) > _REMEMBERED_SESSIONS:
                    _, (old_proc, old_session) = self._remembered.popitem(last=False)
                    self._forget(old_proc, old_session)
            elif self.reuse and proc.usable:
                self._forget(proc, lease.session_id)
        if not self.reuse or (proc.retired and proc.active == 0) or not proc.alive:
            if proc in self._procs:
                self._procs.remove(proc)
            self._background_task(self._close(proc))

    def _forget(self, proc: _AgentProcess, session_id: str) -> None:
        """Close an idle session the agent keeps in memory (when it can close sessions)."""
        self._idle.pop(session_id, None)
        proc.session_cwds.pop(session_id, None)
        proc.read_only_sessions.discard(session_id)
        if proc.can_close and proc.usable:
            self._background_task(
                self._bounded(proc.conn.close_session(session_id=session_id), "session/close", proc)
            )

    async def _spawn(self) -> _AgentProcess:
        env = allowed_env(self.policy, self.env_names)
        env.update(self.set_env)
        argv = (*self.args, *self.policy_args)
        proc = _AgentProcess(self.command, argv, env, self.cwd or os.getcwd(), self.policy)
        self._spawned.add(proc)
        try:
            await proc.start(_sdk(), self.rpc_timeout_s)
        except BaseException:
            await self._close(proc)
            raise
        self._reported_name = self._reported_name or proc.agent_name
        return proc

    async def _close(self, proc: _AgentProcess) -> None:
        try:
            await proc.close()
        finally:
            self._spawned.discard(proc)

    async def _new_session(
        self, sdk: Any, proc: _AgentProcess, request: AgentRequest, cwd: str, context: AgentContext
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
            self._forget(proc, session_id)
            raise
        return session_id

    async def _configure(
        self,
        proc: _AgentProcess,
        session_id: str,
        options: list[dict[str, Any]],
        request: AgentRequest,
        context: AgentContext,
    ) -> None:
        """Model, effort, ``session_config`` and ``mode`` for a new session."""
        model = request.model or self.model
        if model is not None:
            await self._choose(proc, session_id, options, "model", model, context, strict=True)
        effort = request.effort or self.effort
        if effort is not None:
            await self._choose(proc, session_id, options, "thought_level", effort, context, strict=False)
        for option_id, value in self.session_config.items():
            await self._rpc(
                proc.conn.set_config_option(config_id=option_id, session_id=session_id, value=value),
                f"session/set_config_option {option_id}",
                proc,
            )
        if self.mode is not None:
            await self._rpc(
                proc.conn.set_session_mode(session_id=session_id, mode_id=self.mode), "session/set_mode", proc
            )

    async def _choose(
        self,
        proc: _AgentProcess,
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
        self, proc: _AgentProcess, session_id: str, cwd: str, context: AgentContext
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
        asks = 0
        while True:
            outcome = await self._turn(sdk, lease.proc, lease.session_id, prompt, context)
            usage += outcome.usage
            if isinstance(outcome.result, AgentResult):
                return replace(outcome.result, usage=usage, session=lease.session_id)
            final = outcome.result
            if request.schema is None:
                return AgentResult(text=final, usage=usage, session=lease.session_id, message=outcome.note)
            ok, value, problem = parse_json_answer(final)
            if ok:
                return AgentResult(
                    structured=value, has_structured=True, usage=usage, session=lease.session_id
                )
            if asks >= self.json_retries:
                return AgentResult(
                    text=final,
                    usage=usage,
                    session=lease.session_id,
                    message=f"{self._label()}'s final message is not a JSON value ({problem})",
                )
            asks += 1
            await context.emit(
                ProviderEvent(
                    kind="progress",
                    text=f"{self._label()} replied without JSON ({problem}); asking again ({asks} of {self.json_retries})",
                    data={"reask": asks},
                )
            )
            prompt = JSON_REASK.format(problem=problem)

    async def _turn(
        self, sdk: Any, proc: _AgentProcess, session_id: str, prompt: str, context: AgentContext
    ) -> _TurnOutcome:
        """Send ``prompt`` and follow the turn to its end, forwarding its events in order."""
        turn = _Turn(session_id)
        turn.checkpoint = context.checkpoint
        proc.turns[session_id] = turn
        prompt_task = asyncio.ensure_future(
            proc.conn.prompt(session_id=session_id, prompt=[sdk.text_block(prompt)])
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
                self._background_task(self._cancel_turn(proc, turn, prompt_task))
            raise
        finally:
            cancel_wait.cancel()
            if proc.turns.get(session_id) is turn:
                del proc.turns[session_id]
        while not turn.events.empty():
            await context.emit(turn.events.get_nowait())
        return await self._outcome(sdk, proc, turn, prompt_task, context)

    async def _outcome(
        self, sdk: Any, proc: _AgentProcess, turn: _Turn, task: asyncio.Future[Any], context: AgentContext
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

    async def _cancel_turn(self, proc: _AgentProcess, turn: _Turn, task: asyncio.Future[Any]) -> None:
        """``session/cancel``, then wait (bounded) for the turn to end. A turn that does not end in
        time retires its process: it takes no new sessions and closes when its last one ends."""
        turn.cancelling = True
        if task.done():
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.conn.cancel(session_id=turn.session_id), self.cancel_timeout_s)
        try:
            await asyncio.wait_for(asyncio.shield(task), self.cancel_timeout_s)
        except TimeoutError:
            task.cancel()
            proc.retired = True
        except Exception:  # the turn ended with an error; nobody wants its answer any more
            pass

    def _failure(self, exc: BaseException, proc: _AgentProcess) -> AgentResult:
        """Classify a failed prompt turn: raises for auth and execution errors, returns a
        ``provider_failed`` result for API/transport failures and a dead agent."""
        request_error = _sdk().RequestError
        if isinstance(exc, request_error):
            translated = self._translate(exc)
            if isinstance(translated, _Retryable):
                return AgentResult(outcome="provider_failed", message=str(translated))
            raise translated from exc
        if isinstance(exc, ConnectionError | EOFError | BrokenPipeError):
            proc.broken = True
            return AgentResult(outcome="provider_failed", message=f"{self._label()} {proc.describe_exit()}")
        raise AgentExecutionError(f"{self._label()}: {type(exc).__name__}: {exc}") from exc

    def _translate(self, exc: Any) -> Exception:
        """A JSON-RPC error from the agent as our error: ProviderAuthError, a retryable provider
        failure (:class:`_Retryable`), or AgentExecutionError."""
        code = getattr(exc, "code", None)
        data = getattr(exc, "data", None)
        detail = _error_detail(exc)
        kind = ""
        if isinstance(data, Mapping):
            raw = data.get("codex_error_info") or data.get("codexErrorInfo") or data.get("kind") or ""
            kind = re.sub(
                r"[^a-z]", "", str(next(iter(raw), "") if isinstance(raw, Mapping) else raw).lower()
            )
        if code == AUTH_REQUIRED or kind == "unauthorized" or _UNAUTHORIZED_TEXT.search(detail):
            return ProviderAuthError(self._label(), detail, login_hint=self.login_hint)
        if kind in _API_FAILURES or (kind in ("", "other") and _API_FAILURE_TEXT.search(detail)):
            return _Retryable(f"{self._label()}: {detail}")
        return AgentExecutionError(f"{self._label()}: {detail}")

    # -- plumbing ------------------------------------------------------------------------------
    async def _rpc(self, call: Awaitable[T], what: str, proc: _AgentProcess) -> T:
        """A protocol request bounded by ``rpc_timeout_s``, its errors translated."""
        try:
            return await asyncio.wait_for(call, self.rpc_timeout_s)
        except TimeoutError as exc:
            raise AgentExecutionError(
                f"{self._label()} did not answer {what} within {self.rpc_timeout_s:g} s"
            ) from exc
        except (ConnectionError, EOFError, BrokenPipeError) as exc:
            proc.broken = True
            await proc.settle()
            raise ProviderStartError(f"{self._label()} {proc.describe_exit()} during {what}") from exc
        except Exception as exc:
            if isinstance(exc, _sdk().RequestError):
                translated = self._translate(exc)
                if isinstance(translated, _Retryable):
                    raise AgentExecutionError(str(translated)) from exc
                raise translated from exc
            if isinstance(exc, AgentExecutionError):
                raise
            raise AgentExecutionError(f"{self._label()}: {what} failed: {type(exc).__name__}: {exc}") from exc

    async def _bounded(self, call: Awaitable[Any], what: str, proc: _AgentProcess) -> None:
        with contextlib.suppress(Exception):
            await self._rpc(call, what, proc)

    def _background_task(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _label(self) -> str:
        return self.agent_name or self._reported_name or os.path.basename(self.command)


@dataclass
class _Lease:
    proc: _AgentProcess
    session_id: str
    prompt: str


@dataclass
class _TurnOutcome:
    """A finished turn: ``result`` is the final message text, or an :class:`AgentResult` that ends
    the call (provider failure, skip)."""

    result: str | AgentResult
    usage: TokenUsage = field(default_factory=TokenUsage)
    note: str | None = None


class _Retryable(Exception):
    """An upstream API or transport failure reported by the agent (agent() resolves null)."""


class _Turn:
    """One prompt turn in flight: the session updates it received, in order, as events to
    forward, and the agent's messages split at tool calls, thoughts and plans."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.events: asyncio.Queue[ProviderEvent] = asyncio.Queue()
        self.messages: list[list[str]] = []
        self.cancelling = False
        self.checkpoint: Checkpoint | None = None
        self._in_message = False
        self._message_id: str | None = None

    def on_update(self, update: Any) -> None:
        """Record one ``session/update`` (called synchronously, in arrival order)."""
        kind = str(getattr(update, "session_update", ""))
        if kind == "agent_message_chunk":
            content = getattr(update, "content", None)
            text = getattr(content, "text", None)
            if not isinstance(text, str):
                return
            message_id = getattr(update, "message_id", None)
            if not self._in_message or (message_id is not None and message_id != self._message_id):
                self.messages.append([])
            self._in_message = True
            self._message_id = message_id
            self.messages[-1].append(text)
            self.events.put_nowait(ProviderEvent(kind="output.delta", text=text))
            return
        if kind in ("tool_call", "tool_call_update"):
            self._in_message = False
            title = getattr(update, "title", None) or ""
            tool = getattr(update, "kind", None)
            status = getattr(update, "status", None)
            words = " ".join(str(w) for w in (title, f"({tool})" if tool else "", status or "") if w)
            self.events.put_nowait(
                ProviderEvent(
                    kind="progress",
                    text=f"tool {words}".strip(),
                    data={
                        "update": kind,
                        "toolCallId": getattr(update, "tool_call_id", None),
                        "kind": tool,
                        "status": status,
                    },
                )
            )
        elif kind in ("agent_thought_chunk", "plan"):
            self._in_message = False
            self.events.put_nowait(
                ProviderEvent(
                    kind="progress", text="thinking" if kind != "plan" else "plan", data={"update": kind}
                )
            )

    def final_message(self) -> str:
        return "".join(self.messages[-1]) if self.messages else ""


class _Client:
    """The client side of one agent connection: routes ``session/update`` to the turn running in
    that session and answers ``session/request_permission`` from the policy. File system and
    terminal methods are not offered (``clientCapabilities`` says so), so the SDK answers them
    "method not found"."""

    def __init__(self, proc: _AgentProcess) -> None:
        self._proc = proc

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        turn = self._proc.turns.get(session_id)
        if turn is not None:
            turn.on_update(update)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        schema = _module("acp.schema")
        turn = self._proc.turns.get(session_id)
        ask = PermissionAsk(
            kind=getattr(tool_call, "kind", None),
            title=str(getattr(tool_call, "title", None) or ""),
            paths=tuple(str(loc.path) for loc in (getattr(tool_call, "locations", None) or ())),
            options=tuple((str(o.option_id), str(o.kind)) for o in options),
            command=_command_of(getattr(tool_call, "raw_input", None)),
        )
        if turn is None or turn.cancelling:
            decision = PermissionDecision(
                False, None, "the turn is being cancelled" if turn else "no turn runs here"
            )
        else:
            policy = self._proc.policy
            if session_id in self._proc.read_only_sessions:
                policy = policy.narrow({"sandbox": "read-only"})  # an agent without edit tools
            decision = decide_permission(policy, ask, cwd=self._proc.cwd_of(session_id))
            if decision.ask:
                decision = await _checkpoint(turn, ask, decision)
        if turn is not None:
            verdict = "allowed" if decision.allow else "denied"
            turn.events.put_nowait(
                ProviderEvent(
                    kind="progress",
                    text=f"permission {verdict}: {ask.kind or 'other'} {ask.title}".rstrip()
                    + f" ({decision.reason})",
                    data={"permission": ask.kind, "allowed": decision.allow, "paths": list(ask.paths)},
                )
            )
        if decision.option_id is None:
            return schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=decision.option_id)
        )


async def _checkpoint(turn: _Turn, ask: PermissionAsk, refusal: PermissionDecision) -> PermissionDecision:
    """Put a request the policy left to a human (``approvals = "ask"``) to the run's checkpoint; with
    no checkpoint, or none answered (the run is pausing), it stays refused."""
    if turn.checkpoint is None:
        return PermissionDecision(False, refusal.option_id, f"{refusal.reason}, but nobody can be asked here")
    answer = await turn.checkpoint(
        CheckpointAsk(tool=ask.kind or "other", title=ask.title, command=ask.command, paths=ask.paths)
    )
    if answer is None:
        return PermissionDecision(False, None, "the run is pausing for a human checkpoint")
    return answer_checkpoint(ask, answer, "a human checkpoint")


def _command_of(raw: Any) -> str | None:
    """The command line in a tool call's ``rawInput`` (``{"command": "ls -l"}`` or a list of words)."""
    command = raw.get("command") if isinstance(raw, dict) else None
    if isinstance(command, str):
        return command
    if isinstance(command, list) and all(isinstance(w, str) for w in command):
        return " ".join(command)
    return None


class _AgentProcess:
    """One running agent program and its ACP connection, in a process group of its own."""

    def __init__(
        self, command: str, args: tuple[str, ...], env: dict[str, str], cwd: str, policy: Policy
    ) -> None:
        self.command = command
        self.args = args
        self.env = env
        self.cwd = cwd
        self.policy = policy
        self.turns: dict[str, _Turn] = {}
        self.session_cwds: dict[str, str] = {}
        self.read_only_sessions: set[str] = set()  # sessions of agents that may not edit files
        self.active = 0
        self.retired = False
        self.broken = False
        self.agent_name: str | None = None
        self.can_resume = False
        self.can_load = False
        self.can_close = False
        self.conn: Any = None
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr: collections.deque[bytes] = collections.deque()
        self._stderr_size = 0
        self._stderr_task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def pid(self) -> int:
        return self._proc.pid if self._proc is not None else -1

    @property
    def alive(self) -> bool:
        return (
            self._proc is not None and self._proc.returncode is None and not self.broken and not self._closed
        )

    @property
    def usable(self) -> bool:
        return self.alive and not self.retired

    def cwd_of(self, session_id: str) -> str:
        return self.session_cwds.get(session_id, self.cwd)

    async def start(self, sdk: Any, timeout: float) -> None:
        """Spawn the program and ``initialize``. Raises
        :class:`~workflow_mcp.providers.registry.ProviderStartError` when it cannot start."""
        try:
            self._proc = await asyncio.create_subprocess_exec(
                self.command,
                *self.args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,  # its own process group: closing kills its children too
                limit=_STDOUT_LIMIT,
            )
        except OSError as exc:
            raise ProviderStartError(f"the ACP agent {self.command!r} could not start: {exc}") from exc
        self._stderr_task = asyncio.ensure_future(self._drain_stderr())
        self.conn = sdk.connect_to_agent(_Client(self), self._proc.stdin, self._proc.stdout)
        schema = _module("acp.schema")
        try:
            init = await asyncio.wait_for(
                self.conn.initialize(
                    protocol_version=sdk.PROTOCOL_VERSION,
                    client_capabilities=schema.ClientCapabilities(
                        fs=schema.FileSystemCapabilities(read_text_file=False, write_text_file=False),
                        terminal=False,
                    ),
                    client_info=schema.Implementation(
                        name="workflow-mcp", version=dist_version("workflow-mcp") or "0"
                    ),
                ),
                timeout,
            )
        except TimeoutError as exc:
            raise ProviderStartError(
                f"the ACP agent {self.command!r} did not initialize within {timeout:g} s"
            ) from exc
        except (ConnectionError, EOFError, BrokenPipeError) as exc:
            await self.settle()
            raise ProviderStartError(f"the ACP agent {self.command!r} {self.describe_exit()}") from exc
        except sdk.RequestError as exc:
            raise ProviderStartError(
                f"the ACP agent {self.command!r} refused initialize: {_error_detail(exc)}"
            ) from exc
        info = getattr(init, "agent_info", None)
        self.agent_name = getattr(info, "name", None) or None
        caps = getattr(init, "agent_capabilities", None)
        sessions = getattr(caps, "session_capabilities", None)
        self.can_load = bool(getattr(caps, "load_session", False))
        self.can_resume = getattr(sessions, "resume", None) is not None
        self.can_close = getattr(sessions, "close", None) is not None

    async def _drain_stderr(self) -> None:
        """Keep the last few KiB of the agent's stderr (for failure messages); never let the pipe
        fill up and block the agent."""
        assert self._proc is not None and self._proc.stderr is not None
        with contextlib.suppress(Exception):
            while chunk := await self._proc.stderr.read(4096):
                self._stderr.append(chunk)
                self._stderr_size += len(chunk)
                while self._stderr_size > _STDERR_TAIL and len(self._stderr) > 1:
                    self._stderr_size -= len(self._stderr.popleft())

    async def settle(self) -> None:
        """After the connection broke: wait (bounded) for the exit and the rest of its stderr."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_CLOSE_TIMEOUT_S):
                if self._proc is not None:
                    await self._proc.wait()
                if self._stderr_task is not None:
                    await asyncio.shield(self._stderr_task)

    def describe_exit(self) -> str:
        code = self._proc.returncode if self._proc is not None else None
        lines = b"".join(self._stderr).decode("utf-8", "replace").strip().splitlines()
        last = f": {lines[-1][:300]}" if lines else ""
        state = f"exited with code {code}" if code is not None else "closed its connection"
        return f"{state}{last}"

    async def close(self) -> None:
        """Close the connection and kill the whole process group: TERM, then KILL after a bound
        (the node wrappers spawn native children that outlive a killed parent)."""
        if self._closed:
            return
        self._closed = True
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.conn.close(), _CLOSE_TIMEOUT_S)
        proc = self._proc
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
        _kill_group(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), _CLOSE_TIMEOUT_S)
        except TimeoutError:
            _kill_group(proc.pid, signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), _CLOSE_TIMEOUT_S)
        _kill_group(proc.pid, signal.SIGKILL)  # whatever of the group outlived its leader
        if self._stderr_task is not None:
            self._stderr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._stderr_task


def _kill_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if hasattr(os, "killpg"):
            os.killpg(pid, sig)
        else:  # pragma: no cover - Windows has no process groups of this kind
            os.kill(pid, sig)


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



def _error_detail(exc: Any) -> str:
    """The agent's error message; an upstream JSON error body is reduced to its ``error.message``."""
    data = getattr(exc, "data", None)
    message = str(exc)
    if isinstance(data, Mapping):
        inner = data.get("message") or data.get("details")
        if isinstance(inner, str) and inner:
            message = inner
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        body = json.loads(message)
        nested = body.get("error", {}).get("message")
        if isinstance(nested, str) and nested:
            return nested
    return message


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


def _known(command: str) -> KnownAgent | None:
    base = os.path.basename(command)
    return next((k for k in KNOWN_AGENTS if k.command == base), None)


def _find_known() -> KnownAgent | None:
    return next((k for k in KNOWN_AGENTS if shutil.which(k.command)), None)


def _none_found() -> str:
    names = ", ".join(k.command for k in KNOWN_AGENTS)
    return f"no ACP agent configured and none found on PATH (looked for {names}); set [providers.acp] command"


def _module(name: str) -> Any:
    return importlib.import_module(name)


def _sdk() -> Any:
    """The ``acp`` module (the ``[acp]`` extra); :class:`ProviderStartError` without it."""
    try:
        return _module("acp")
    except ImportError as exc:
        raise ProviderStartError(
            f"the agent-client-protocol SDK does not import ({exc}); install it with {INSTALL}"
        ) from exc
