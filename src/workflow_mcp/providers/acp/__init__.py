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
- **Images.** Image attachments are ``image`` content blocks (base64, with their MIME type) after
  the prompt's text block, for an agent whose ``initialize`` says ``promptCapabilities.image``; an
  agent that does not take them refuses such a call (a setup error naming the capability).
- **Events.** ``agent_message_chunk`` → ``output.delta``; tool calls, their updates, plans and
  thoughts → ``progress`` (the engine's stall watchdog counts them). The answer is the agent's
  *last* message: the text streamed after its last tool call, thought or plan.
- **Structured output.** The agent is told to answer with only a JSON value matching the schema
  (the portable schema, shown verbatim). Its last message is read by
  :func:`~workflow_mcp.providers.schema.parse_answer` (the whole text as JSON, else its last
  ```json fence). A non-JSON answer is asked again in the same session, up to ``json_retries``
  times, then returned with ``has_structured=False`` and the reason. The engine validates the value and
  re-asks with its feedback (``attempt > 1``), which continues the same session.
- **Policy.** ``session/request_permission`` is answered from the policy by
  :func:`~workflow_mcp.providers.policy.decide_permission`: only what the policy allows is allowed; anything it cannot vouch for is
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

The package: :mod:`.provider` (the provider: sessions, turns, answers, outcomes), :mod:`.pool` (the
agent processes and the pool that shares them), :mod:`.agents` (the known agents). The permission
policy lives in :mod:`workflow_mcp.providers.policy`.
"""

from __future__ import annotations

from ..policy import PermissionAsk, PermissionDecision, answer_checkpoint, decide_permission
from ..schema import parse_answer as parse_json_answer
from .agents import KNOWN_AGENTS, KnownAgent, codex_policy_args
from .provider import (
    AGENT_PREAMBLE,
    AUTH_REQUIRED,
    FEEDBACK_SUFFIX,
    INSTALL,
    JSON_INSTRUCTION,
    JSON_REASK,
    ACPProvider,
    ACPSettings,
)

__all__ = [
    "AGENT_PREAMBLE",
    "AUTH_REQUIRED",
    "FEEDBACK_SUFFIX",
    "INSTALL",
    "JSON_INSTRUCTION",
    "JSON_REASK",
    "KNOWN_AGENTS",
    "ACPProvider",
    "ACPSettings",
    "KnownAgent",
    "PermissionAsk",
    "PermissionDecision",
    "answer_checkpoint",
    "codex_policy_args",
    "decide_permission",
    "parse_json_answer",
]
