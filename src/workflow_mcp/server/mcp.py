"""The MCP surface of workflow-mcp: tools, resources and the ``author-workflow`` prompt, on the
official ``mcp`` SDK (``mcp.server.mcpserver.MCPServer``).

Everything reaches the runtime through :class:`~workflow_mcp.service.WorkflowService`. Runs belong to
the service (the server process and the store), never to a request: a client that disconnects, or
cancels a waiting call, leaves its runs running.

Two error planes (STYLE.md 7): arguments that break a tool's input schema (or name no tool, or combine
targets wrongly, or name a path the server's :class:`~workflow_mcp.server._files.FileScope` refuses) are
JSON-RPC invalid-params errors; workflow and run failures are ``isError`` results whose text says what to
call next.

Files: every ``path``, ``cwd`` and workflow ``name`` (discovery reads only what the scope allows), and
every nested child of a run started here, passes the server's file scope (no tool reaches the state
directory; over HTTP nothing outside the project roots) and, before it runs, the same source approval.
Diagnostics quote a file only when it is a workflow source (:mod:`workflow_mcp.definitions.disclosure`).

Store-heavy and CPU-heavy work (projecting a run's whole log, listing runs, discovery, validation)
runs in worker threads, so one client's big request never stalls the others; projections of runs over
:data:`BIG_RUN_EVENTS` events share :data:`BIG_RUN_THREADS` threads, so many of them cannot take the
whole pool.

Tools: ``workflow_list``, ``workflow_describe``, ``workflow_validate``, ``workflow_run``, ``agent_run``,
``workflow_run_status``, ``workflow_run_events``, ``workflow_run_await``, ``workflow_run_cancel``,
``providers_list``, and the workflow library's ``workflow_create``, ``workflow_create_draft``,
``workflow_get``, ``workflow_delete`` (:mod:`workflow_mcp.library`, through the service; a refusal is an
``isError`` result whose ``structuredContent`` carries the typed ``reason``). Resources: ``workflow://definitions/{name}``, ``workflow://runs/{runId}``,
``workflow://runs/{runId}/events{?after}``, ``workflow://runs/{runId}/artifacts/{artifactId}`` and
the list of recent runs, with ``resources/updated`` for subscribed runs (``subscriptions/listen`` on
2026-07-28 connections, ``resources/subscribe`` on earlier ones); a client hears only of runs it may
read (:class:`~workflow_mcp.server._subscriptions.OwnedBus`). Prompt: ``author-workflow``.

Approval: whether the caller may see a run it names is checked before its stored source is read or
shown; an approval counts only for the principal that gave it (:class:`SourceTrust`), for nested
children too (:meth:`ChildGate.of`); each scoped client runs at most its share of the concurrent runs
(``policy.max_client_runs``), and refusals name only the caller's own count.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import hashlib
import json
import os
import re
import shlex
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, cast

import anyio.to_thread
from mcp.server.context import ServerRequestContext
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp.server.subscriptions import ResourcesListChanged, ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    CallToolResult,
    EmptyResult,
    GetPromptResult,
    InputRequiredResult,
    SubscribeRequestParams,
    TextContent,
    ToolAnnotations,
    UnsubscribeRequestParams,
)
from mcp.types import Resource as MCPResource
from pydantic import AnyUrl, BaseModel, ConfigDict, Field, ValidationError

from .. import __version__
from .._auto_resume import AutoResumer, AutoResumeSettings, ResumeDeferredError
from ..definitions.disclosure import NOT_A_WORKFLOW, redacted
from ..definitions.discover import Diagnostic, DiscoveredWorkflow
from ..definitions.load import Workflow
from ..errors import (
    CallNotServableError,
    IdempotencyKeyReusedError,
    InvalidInputError,
    LibraryError,
    PathRefusedError,
    RunContinuedError,
    RunNotConfirmedError,
    WorkflowLoadError,
    WorkflowMcpError,
    WorkflowNotFoundError,
)
from ..events import Event
from ..service import (
    MISSING,
    AttachmentError,
    ImageInputRefusedError,
    ProviderChoice,
    ProviderNotLoggedInError,
    RunLimits,
    RunOverrides,
    WorkflowService,
    request_fingerprint,
)
from ..state import RunState
from ._files import ChildGate, FileScope
from ._library_models import DeleteOutcome, DraftCreated, LibraryFailure, WorkflowCreated, WorkflowDefinition
from ._models import (
    AgentFileProblemOut,
    AgentTypeOut,
    CancelOutcome,
    Dependencies,
    DiagnosticOut,
    EventsPage,
    PlanPreview,
    ProblemOut,
    ProviderOut,
    ProvidersList,
    RunOutcome,
    RunSnapshot,
    WarningOut,
    WorkflowDescription,
    WorkflowList,
    WorkflowSummary,
    WorkflowValidation,
    dump,
)
from ._policy import LOCAL, Principal, ServerPolicy, SourceTrust
from ._prompt import author_workflow_guide
from ._render import (
    MAX_EVENTS_BYTES,
    TERMINAL,
    event_out,
    outcome_of,
    outcome_text,
    preview,
    snapshot_of,
    snapshot_text,
)
from ._stdio import serve_stdio_lines
from ._subscriptions import OwnedBus, ResourceSubscribers, connection_of
from .viewer import RUN_APP_TOOLS, RUN_APP_URI, run_app

__all__ = ["PRINCIPAL_SCOPE_KEY", "SourceApproval", "WorkflowMcpServer", "create_server"]

PRINCIPAL_SCOPE_KEY = "workflow_mcp.principal"
"""Key under the ASGI ``scope["state"]`` where the HTTP guard puts the request's :class:`Principal`."""

BIG_RUN_EVENTS = 20_000
"""Runs with more stored events than this are projected on the :data:`BIG_RUN_THREADS` shared threads
(projecting 20,000 events takes about half a second; a million, about half a minute)."""
BIG_RUN_THREADS = 2
"""Worker threads that projections of big runs share, whoever asks (each holds the GIL while it parses)."""

_T = TypeVar("_T")

RUN_URI = re.compile(r"^workflow://runs/(?P<run>[^/?#]+)(?:/(?P<rest>.*))?$")

_PRINCIPAL: ContextVar[Principal | None] = ContextVar("workflow_mcp_principal", default=None)
_APPROVAL: ContextVar[_Approval | None] = ContextVar("workflow_mcp_approval", default=None)
_CONFIRM: ContextVar[_Confirm | None] = ContextVar("workflow_mcp_confirm", default=None)

_INSTRUCTIONS = """\
workflow-mcp runs Claude Code dynamic-workflow files (.claude/workflows/<name>.js) durably on \
interchangeable agent providers. Find workflows with workflow_list, check one with workflow_validate, \
start it with workflow_run (waitMs 0 returns the run id at once), follow it with workflow_run_events \
(a durable cursor: pass nextCursor back as after) or workflow_run_await, stop it with \
workflow_run_cancel, and continue a failed or interrupted run with workflow_run resumeFromRunId. \
The author-workflow prompt explains how to write a workflow."""

_RO = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


class CheckpointAnswer(BaseModel):
    """What the user answers when an agent of a run asks permission (a human checkpoint)."""

    allow: bool = Field(description="Allow what the agent asks to do? No refuses it; the run goes on.")


CHECKPOINT_ELICIT_S = 600.0
"""How long a human checkpoint's elicitation may wait for the user; unanswered, the run pauses."""


class SourceApproval(BaseModel):
    """What the user answers when asked to approve a workflow source (form elicitation)."""

    approve: bool = Field(
        description="Run this workflow source? It executes JavaScript on this machine and starts agents."
    )


@dataclass(frozen=True)
class _Approval:
    """What the approval resolver found before ``workflow_run``'s body ran (same request)."""

    status: Literal["trusted", "ask", "unavailable", "unknown", "existing"]
    source_hash: str | None = None


class RunConfirmation(BaseModel):
    """What the user answers when a run's cost preview exceeds the server's ``--confirm-above``."""

    start: bool = Field(
        description="Start this run? Its preview makes more agent calls than may start unasked."
    )


@dataclass(frozen=True)
class _Confirm:
    """What the confirmation resolver found before ``workflow_run``'s body ran (same request):
    ``unneeded`` (no limit, nothing to preview, or the body refuses the call anyway), ``ok`` (within
    the limit, or confirmed with ``confirmAgentCalls``), ``ask`` (the user is asked), ``unavailable``
    (over the limit and the client cannot ask), ``failed`` (the preview itself failed: ``message``)."""

    status: Literal["unneeded", "ok", "ask", "unavailable", "failed"]
    calls: int = 0
    headline: str = ""
    message: str = ""


# -- argument types (the input schemas) --------------------------------------------------------
Name = Annotated[
    str | None, Field(description="A workflow name, resolved like Claude Code (project beats personal).")
]
PathArg = Annotated[str | None, Field(description="A workflow file path (relative to cwd).")]
Script = Annotated[str | None, Field(description="Inline workflow source (`export const meta = {…}` first).")]
Cwd = Annotated[
    str | None,
    Field(description="Directory to resolve names and relative paths from (default: the server's)."),
]
RunId = Annotated[str, Field(min_length=1, max_length=200, description="A run id returned by workflow_run.")]
WaitMs = Annotated[int, Field(ge=0, le=25_000, description="Longest wait in milliseconds (at most 25,000).")]


class WorkflowMcpServer(MCPServer[Any]):
    """The workflow-mcp MCP server. Build it with :func:`create_server`."""

    def __init__(
        self,
        service: WorkflowService,
        *,
        policy: ServerPolicy | None = None,
        trust: SourceTrust | None = None,
        principal: Principal | None = LOCAL,
        scope: FileScope | None = None,
    ) -> None:
        self._bus = OwnedBus(lambda: _PRINCIPAL.get() or self.default_principal)
        super().__init__(
            name="workflow-mcp",
            version=__version__,
            instructions=_INSTRUCTIONS,
            log_level="WARNING",
            subscriptions=self._bus,
            extensions=[run_app()],
        )
        self.service = service
        self.policy = policy or ServerPolicy()
        self.trust = trust or SourceTrust()
        self.scope = scope or FileScope.of(
            cwd=service.cwd, trust_dirs=self.trust.trusted_dirs, state_dir=service.state_dir, confined=False
        )
        self.children = ChildGate(self.scope, self.trust)
        self._big_runs = anyio.CapacityLimiter(BIG_RUN_THREADS)
        self.default_principal = principal
        self.resource_subscribers = ResourceSubscribers()
        self._pending_updates: set[tuple[str, str | None]] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._auto_resume_task: asyncio.Task[None] | None = None  # serve --auto-resume
        self.middleware.append(self._principal_middleware)
        self._tool_names: set[str] = set()
        self._tool_arguments: dict[str, tuple[str, ...]] = {}
        self._register_tools()
        for name in RUN_APP_TOOLS:  # the run viewer App renders these results (text results stay whole)
            tool = self._tool_manager.get_tool(name)
            assert tool is not None
            tool.meta = {**(tool.meta or {}), "ui": {"resourceUri": RUN_APP_URI}}
        self._register_resources()
        self._register_prompt()
        # resources/subscribe is removed from the 2026-07-28 protocol (subscriptions/listen replaces
        # it and MCPServer serves that); handshake-era clients still use it, and MCPServer has no
        # public way to serve it, so it is added on the low-level server the SDK documents for this.
        lowlevel = self._lowlevel_server
        lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, self._on_subscribe)
        lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, self._on_unsubscribe)

    # -- the caller -------------------------------------------------------------------------
    async def _principal_middleware(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        principal = _principal_of_request(ctx.request) or self.default_principal
        token = _PRINCIPAL.set(principal)
        try:
            return await call_next(ctx)
        finally:
            _PRINCIPAL.reset(token)

    def _principal(self) -> Principal:
        principal = _PRINCIPAL.get() or self.default_principal
        if principal is None:
            raise MCPError(code=INVALID_REQUEST, message="unauthenticated: send the server's bearer token")
        return principal

    def _visible(self, run_id: str) -> str | None:
        """``None`` when the caller may see ``run_id``; else the message explaining why not."""
        principal = self._principal()
        try:
            owner = self.service.owner_of(run_id)
        except WorkflowNotFoundError:
            owner, exists = None, False
        else:
            exists = True
        if exists and principal.may_see(owner):
            return None
        return (
            f"No run {run_id!r} is visible to this client: it does not exist, or another client started "
            "it (each HTTP token sees only its own runs). Call workflow_run to start one; the resource "
            "list shows your recent runs."
        )

    # -- tool plumbing ----------------------------------------------------------------------
    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """Arguments that break a tool's input schema, and unknown tools, are invalid-params errors."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError):
                raise
            if isinstance(exc.__cause__, ValidationError):
                errors = exc.__cause__.errors(include_url=False, include_input=False)
                unknown = [str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden" and e["loc"]]
                if unknown:
                    accepted = ", ".join(self._tool_arguments.get(name, ()))
                    raise MCPError(
                        code=INVALID_PARAMS,
                        message=f"unknown argument{'s' if len(unknown) > 1 else ''} "
                        f"{', '.join(map(repr, unknown))} for {name}; it accepts: {accepted}",
                        data={"unknown": unknown, "accepted": list(self._tool_arguments.get(name, ()))},
                    ) from exc
                raise MCPError(
                    code=INVALID_PARAMS,
                    message=f"invalid arguments for {name}: {_describe_errors(errors)}",
                    data={"errors": [{"loc": list(e["loc"]), "msg": e["msg"]} for e in errors]},
                ) from exc
            if name not in self._tool_names:
                raise MCPError(
                    code=INVALID_PARAMS,
                    message=f"unknown tool {name!r}; available: {', '.join(sorted(self._tool_names))}",
                ) from exc
            raise

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context[Any, Any] | None = None
    ) -> GetPromptResult | InputRequiredResult:
        """Unknown prompts and unknown prompt arguments are invalid-params errors, as for tools (the SDK
        would pass an unknown argument to the prompt function and answer an internal error)."""
        prompt = self._prompt_manager.get_prompt(name)
        if prompt is None:
            available = ", ".join(sorted(p.name for p in self._prompt_manager.list_prompts()))
            raise MCPError(code=INVALID_PARAMS, message=f"unknown prompt {name!r}; available: {available}")
        accepted = [a.name for a in prompt.arguments or ()]
        unknown = sorted(set(arguments or {}) - set(accepted))
        if unknown:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                f"for prompt {name}; it accepts: {', '.join(accepted) or 'none'}",
            )
        return await super().get_prompt(name, arguments, context)

    def _add(self, fn: Any, name: str, title: str, description: str, annotations: ToolAnnotations) -> None:
        """Register ``fn`` as tool ``name``, refusing unknown arguments. The SDK builds each tool's
        argument model from the signature with pydantic's default ``extra='ignore'`` (a typo such as
        ``tokenbudget`` ran with no budget) and offers no option for it, so the model is swapped for a
        subclass with ``extra='forbid'``: unknown arguments fail validation (invalid params, see
        :meth:`call_tool`) and the published input schema says ``additionalProperties: false``."""
        self.add_tool(fn, name=name, title=title, description=description, annotations=annotations)
        tool = self._tool_manager.get_tool(name)
        assert tool is not None
        loose = tool.fn_metadata.arg_model
        config = {"model_config": ConfigDict(extra="forbid"), "__module__": __name__}
        strict = cast("type[ArgModelBase]", type(loose.__name__, (loose,), config))
        tool.fn_metadata.arg_model = strict
        tool.parameters = strict.model_json_schema(by_alias=True)
        self._tool_arguments[name] = tuple(f.alias or n for n, f in strict.model_fields.items())
        self._tool_names.add(name)

    def _register_tools(self) -> None:
        self._add(
            self.workflow_list,
            "workflow_list",
            "List workflows",
            "Workflows visible from the server's working directory (or `cwd`): personal "
            "(~/.claude/workflows) and project (.claude/workflows up to the repository root), with Claude "
            "Code's precedence. Filters: `query` (case-insensitive, name/description), `tags` (all must "
            "match). Invalid, shadowed and near-miss files come back as diagnostics.",
            _RO,
        )
        self._add(
            self.workflow_describe,
            "workflow_describe",
            "Describe a workflow",
            "One workflow's normalized meta, source hash, dependencies (nested workflows, script paths, "
            "agent types), warnings, sidecar metadata, and whether workflow_run may run it without asking. "
            "Give exactly one of `name`, `path` or `script`.",
            _RO,
        )
        self._add(
            self.workflow_validate,
            "workflow_validate",
            "Validate a workflow",
            "Check a workflow against Claude Code's loading rules without running it: errors with rule and "
            "line:column, and warnings. Give exactly one of `name`, `path` or `script` (inline source). An "
            "invalid workflow is a normal result with valid=false.",
            _RO,
        )
        self._add(
            self.workflow_run,
            "workflow_run",
            "Run a workflow",
            "Start a workflow run by `name`, `path` or inline `script` with `args` (any JSON) on a "
            "`provider` (see providers_list; `fake` is a deterministic dry run, optionally scripted with "
            "`fakeScript`). Limits are ceilings intersected with the server's policy. `waitMs` 0 returns "
            "{runId, status} at once; up to 25,000 waits in the foreground (with progress notifications when "
            "you pass a progress token) and returns the outcome if the run ends in time. `idempotencyKey` "
            "makes a retried call return the same run. `resumeFromRunId` replays the finished calls of an "
            "earlier run (omit name/path/script to rerun its stored source). A source that was never "
            "approved is first shown to the user for approval.",
            ToolAnnotations(
                read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
            ),
        )
        self._add(
            self.workflow_plan,
            "workflow_plan",
            "Preview a run's cost",
            "A dry run of a workflow (`name`, `path` or inline `script`, with `args` and limits as for "
            "workflow_run) on the synthesizing fake provider: no agent starts and nothing is recorded. "
            "Returns the agent calls it would make (in all, per phase, per provider and model after the "
            "configuration's routing; `provider` routes as that provider would), estimated tokens and cost "
            "(from past runs of the same workflow, else per-model defaults in [estimates]), whether the run "
            "would reach the 1,000-call cap or its token budget, and what would refuse calls before they run. "
            "`fakeScript` steers the dry run's answers. The workflow's JavaScript runs, so an unapproved "
            "source is first shown to the user for approval.",
            ToolAnnotations(
                read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
            ),
        )
        self._add(
            self.agent_run,
            "agent_run",
            "Run one agent call",
            "One agent call outside any workflow, with the same routing, schema validation (re-asked up to "
            "5 times), events and durability as agent() inside one: `prompt`, optional `schema`, `label`, "
            "`model`, `effort`, `agentType`, on a `provider` (see providers_list). Waits up to `waitMs` "
            "(default 25,000) and returns the answer as the run's `result`; a longer call keeps running — "
            "follow it with workflow_run_await.",
            ToolAnnotations(
                read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
            ),
        )
        self._add(
            self.workflow_run_status,
            "workflow_run_status",
            "Run status",
            "A bounded snapshot of a run: status, phases, current phase, the last `lastN` agent calls "
            "(optionally filtered by `labelGlob`) with compact result previews, the last `logLines` log "
            "lines and token usage. Never includes the script, prompts or args.",
            _RO,
        )
        self._add(
            self.workflow_run_events,
            "workflow_run_events",
            "Run events",
            "The run's durable event log from a cursor: events with sequence > `after` (at most `limit`), "
            "and `nextCursor` to pass back as `after`. With `waitMs`, waits for the next event when none is "
            "there yet. A client that reconnects and continues from its last cursor misses nothing and sees "
            "nothing twice.",
            _RO,
        )
        self._add(
            self.workflow_run_await,
            "workflow_run_await",
            "Await a run",
            "Wait up to `waitMs` for a run to end and return its outcome (result when completed, error when "
            "failed), or its current status if it is still running. Cancelling this call never cancels the run.",
            _RO,
        )
        self._add(
            self.workflow_run_cancel,
            "workflow_run_cancel",
            "Cancel a run",
            "Stop a running run. In-flight agent calls are stopped; the run ends `cancelled` and can be "
            "continued later with workflow_run resumeFromRunId. A run that had ended `paused` or "
            "`interrupted` becomes `cancelled` for good (outcome `closed`): it is never resumed.",
            ToolAnnotations(
                read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
            ),
        )
        self._add(
            self.providers_list,
            "providers_list",
            "List providers",
            "The agent providers workflow_run accepts.",
            _RO,
        )
        self._register_library_tools()

    # -- definitions tools ------------------------------------------------------------------
    async def workflow_list(
        self,
        cwd: Cwd = None,
        query: Annotated[
            str | None, Field(description="Case-insensitive text to find in name or description.")
        ] = None,
        tags: Annotated[
            list[str] | None, Field(description="Library tags that must all be present (case-insensitive).")
        ] = None,
        category: Annotated[
            str | None, Field(description="Case-insensitive text to find in the library category.")
        ] = None,
        includeDrafts: Annotated[
            bool, Field(description="Also list the library's drafts (run them as <name>@draft).")
        ] = False,
    ) -> Annotated[CallToolResult, WorkflowList]:
        base = self._base(cwd)
        try:
            workflows, diagnostics = await anyio.to_thread.run_sync(self._discover, base)
            listing = await anyio.to_thread.run_sync(
                lambda: self.service.library_within(self.scope.allows).list(
                    workflows,
                    query=query,
                    category=category,
                    tags=tags or (),
                    include_drafts=includeDrafts,
                    cwd=base,
                )
            )
        except WorkflowMcpError as exc:
            return _error_result(
                f"Cannot list workflows from {base!r}: {exc}. Pass an existing directory as cwd."
            )
        plugins = {w.name: w.plugin for w in workflows if w.plugin is not None}
        items = []
        for row in listing.workflows:
            item = WorkflowSummary(
                name=row.name,
                description=row.description,
                source=row.source,
                path=row.path,
                tags=list(row.tags),
                version=row.version,
                versions=list(row.versions),
                category=row.category,
                kind=row.kind,
            )
            plugin = plugins.get(row.name) if row.kind == "permanent" else None
            if plugin is not None:
                item.plugin, item.plugin_version = plugin.id, plugin.version
            items.append(item)
        out = WorkflowList(
            cwd=os.path.abspath(base),
            workflows=items,
            diagnostics=[DiagnosticOut(path=d.path, kind=d.kind, message=d.message) for d in diagnostics],
            filters=listing.filters,
        )
        if listing.hint is not None:
            out.hint = listing.hint
        lines = [f"{len(items)} workflow(s) visible from {out.cwd}" + (":" if items else ".")]
        lines += [
            f"- {w.name}{'@draft' if w.kind == 'draft' else ''} ({w.source}"
            + (f", {w.version}" if w.version else "")
            + (f", tags: {', '.join(w.tags)}" if w.tags else "")
            + f"): {preview(w.description, 160)}"
            for w in items
        ]
        if listing.hint is not None:
            lines.append(listing.hint)
        if out.diagnostics:
            lines.append(f"{len(out.diagnostics)} file(s) skipped (see diagnostics).")
        return _result("\n".join(lines), out)

    async def workflow_describe(
        self, name: Name = None, path: PathArg = None, script: Script = None, cwd: Cwd = None
    ) -> Annotated[CallToolResult, WorkflowDescription]:
        _one_target(name, path, script)
        try:
            workflow, origin = await self._load(name, path, script, cwd)
        except WorkflowMcpError as exc:
            return _load_error(exc)
        base = self._base(cwd)
        agents = await anyio.to_thread.run_sync(
            lambda: self.service.agent_types(workflow.warnings, cwd=base, reachable=self.scope.allows)
        )
        deps = _dependencies(workflow)
        deps.agents = [AgentTypeOut.model_validate(u.to_json()) for u in agents.uses]
        deps.agent_file_problems = [AgentFileProblemOut.model_validate(p.to_json()) for p in agents.problems]
        out = WorkflowDescription(
            name=workflow.meta.name,
            description=workflow.meta.description,
            meta=dict(workflow.meta.to_json()),
            origin=origin,
            path=workflow.path,
            source_hash=workflow.source_hash,
            profile=workflow.profile,
            dependencies=deps,
            warnings=[WarningOut.model_validate(w.to_json()) for w in workflow.warnings],
            sidecar=await anyio.to_thread.run_sync(lambda: self._sidecar_of(workflow)),
            approved=self.trust.allows(workflow.source_hash, workflow.path, self._principal().owner),
        )
        text = (
            f"{out.name} ({origin}{', ' + out.path if out.path else ''}): {preview(out.description, 300)}\n"
            f"sha256 {out.source_hash[:16]}…; {len(out.warnings)} warning(s); "
            f"nested workflows: {', '.join(deps.workflows) or 'none'}; "
            f"agent types: {', '.join(_agent_line(a) for a in deps.agents) or 'none'}; "
            f"{'approved to run' if out.approved else 'not approved yet (workflow_run will ask)'}."
        )
        return _result(text, out)

    async def workflow_validate(
        self, name: Name = None, path: PathArg = None, script: Script = None, cwd: Cwd = None
    ) -> Annotated[CallToolResult, WorkflowValidation]:
        _one_target(name, path, script)
        base = self._base(cwd)
        file = self._file(path, base) if path is not None else None
        try:
            if name is not None:
                target, _ = await self._load(name, None, None, cwd, check_syntax=False)
                file = target.path
                if file is None:  # a library draft (<name>@draft): its stored source
                    script = target.source
            checked, source_hash = await anyio.to_thread.run_sync(
                lambda: (self.service.validate(file, source=script), _hash_of(file, script))
            )
        except WorkflowLoadError as exc:  # a named workflow resolves only when it loads
            return _load_error(exc)
        except WorkflowMcpError as exc:
            return _error_result(f"{exc}. Call workflow_list to see the workflows visible from {base!r}.")
        report = redacted(checked)  # a file that is not a workflow source is not quoted, nor hashed
        agents = await anyio.to_thread.run_sync(
            lambda: self.service.agent_types(report.warnings, cwd=base, reachable=self.scope.allows)
        )
        out = WorkflowValidation(
            valid=report.valid,
            meta=dict(report.meta.to_json()) if report.meta is not None else None,
            errors=[ProblemOut.model_validate(e.to_json()) for e in report.errors],
            warnings=[WarningOut.model_validate(w.to_json()) for w in report.warnings],
            source_hash=source_hash if report is checked else None,
            agents=[AgentTypeOut.model_validate(u.to_json()) for u in agents.uses],
            agent_file_problems=[AgentFileProblemOut.model_validate(p.to_json()) for p in agents.problems],
        )
        label = file or "<inline>"
        if report.valid:
            meta = report.meta
            text = f"valid: {meta.name if meta else label} — {preview(meta.description if meta else '', 200)}"
        else:
            text = f"invalid ({len(out.errors)} error(s)):\n" + "\n".join(
                f"{e.path or label}:{e.line or '?'}:{e.column or '?'}: {e.message} [{e.rule}]"
                for e in out.errors
            )
        if out.agents:
            text += "\nagent types: " + ", ".join(_agent_line(a) for a in out.agents)
        if out.warnings:
            text += f"\n{len(out.warnings)} warning(s): " + "; ".join(
                f"[{w.rule}] line {w.line}" for w in out.warnings
            )
        return _result(text, out)

    # -- runs -------------------------------------------------------------------------------
    async def _approval_for(
        self,
        ctx: Context[Any, Any],
        name: str | None = None,
        path: str | None = None,
        script: str | None = None,
        cwd: str | None = None,
        resumeFromRunId: str | None = None,
        idempotencyKey: str | None = None,
        provider: str | None = None,
        fakeScript: dict[str, Any] | None = None,
        args: Any = None,
        concurrency: int | None = None,
        tokenBudget: int | None = None,
        maxAgents: int | None = None,
        agentTimeoutMs: int | None = None,
        resumePolicy: str = "content",
    ) -> Any:
        """Resolver of workflow_run's ``approval``: runs before the body (and again on each retry of
        the 2026-07-28 input-required flow). Returns an :class:`_Approval`, or ``Elicit`` to ask the
        user when the source is neither trusted nor approved and the client can ask. Malformed
        arguments are refused here already, so the user is never asked about a call that cannot run."""
        self._run_choice(name, path, script, resumeFromRunId, provider, fakeScript, self._base(cwd))
        principal = self._principal()
        params = _run_params(
            ctx, name, path, script, cwd, args, provider, fakeScript,
            (concurrency, tokenBudget, maxAgents, agentTimeoutMs), resumeFromRunId, resumePolicy,
        )  # fmt: skip
        if idempotencyKey is not None and self._idempotent(idempotencyKey, principal.owner, params):
            decision = _Approval("existing")
        elif resumeFromRunId is not None and self._visible(resumeFromRunId) is not None:
            # Visibility before anything is read or shown: a prompt naming another client's stored
            # workflow (or its absence) would tell this client about that run. The body refuses it.
            decision = _Approval("unknown")
        else:
            try:
                source_hash, file, label = await self._identify(name, path, script, cwd, resumeFromRunId)
            except WorkflowMcpError:
                decision = _Approval("unknown")  # the body loads it again and reports the problem
            else:
                return self._source_decision(
                    ctx,
                    source_hash,
                    file,
                    principal.owner,
                    f"Run workflow {label} (sha256 {source_hash[:16]}…) with provider "
                    f"{provider or 'of the run it continues'!r}? "
                    "Its JavaScript runs on this machine and starts agents. Approving remembers this "
                    "exact source; a changed file asks again.",
                )
        _APPROVAL.set(decision)
        return decision

    def _source_decision(
        self, ctx: Context[Any, Any], source_hash: str, file: str | None, owner: str | None, question: str
    ) -> Any:
        """Trusted or approved for ``owner`` → ``trusted``; else ``Elicit(question)`` when the client
        can ask the user, else ``unavailable``. Sets :data:`_APPROVAL` for the body either way."""
        if self.trust.allows(source_hash, file, owner):
            decision = _Approval("trusted", source_hash)
        elif _can_elicit(ctx):
            _APPROVAL.set(_Approval("ask", source_hash))
            return Elicit(question, SourceApproval)
        else:
            decision = _Approval("unavailable", source_hash)
        _APPROVAL.set(decision)
        return decision

    async def workflow_run(
        self,
        ctx: Context[Any, Any],
        approval: Annotated[ElicitationResult[SourceApproval], Resolve(_approval_resolver)],
        confirmation: Annotated[ElicitationResult[RunConfirmation], Resolve(_confirmation_resolver)],
        provider: Annotated[
            str | None,
            Field(
                min_length=1,
                description="Agent provider name (see providers_list). Required, except with resumeFromRunId "
                "alone, which keeps the provider (and fake script) of the run it continues.",
            ),
        ] = None,
        name: Name = None,
        path: PathArg = None,
        script: Script = None,
        cwd: Cwd = None,
        args: Annotated[
            Any, Field(description="The workflow's `args`: any JSON value (omit for undefined).")
        ] = None,
        fakeScript: Annotated[
            dict[str, Any] | None,
            Field(
                description="Fake provider script: {rules: [{match, respond}], default} (provider fake only)."
            ),
        ] = None,
        concurrency: Annotated[
            int | None, Field(ge=1, description="Agents running at once (ceiling).")
        ] = None,
        tokenBudget: Annotated[int | None, Field(ge=0, description="budget.total in output tokens.")] = None,
        maxAgents: Annotated[int | None, Field(ge=1, description="Lower the 1,000 agent-call cap.")] = None,
        agentTimeoutMs: Annotated[int | None, Field(ge=1, description="Bound each agent call.")] = None,
        idempotencyKey: Annotated[
            str | None,
            Field(min_length=1, max_length=200, description="Retries with this key return the same run."),
        ] = None,
        resumeFromRunId: Annotated[
            str | None,
            Field(
                min_length=1,
                description="Replay the finished agent calls of this earlier run. Alone, it continues that "
                "run as it was started (its stored source, args, limits, provider and fake script; limits "
                "given here may only narrow its own); with name, path or script, it runs that source with "
                "the args and limits given here.",
            ),
        ] = None,
        resumePolicy: Annotated[
            Literal["content", "prefix"],
            Field(
                description="content: reuse any call with the same prompt and options; prefix: Claude's rule."
            ),
        ] = "content",
        waitMs: Annotated[
            int,
            Field(ge=0, le=25_000, description="0: return the run id at once; else wait up to this long."),
        ] = 0,
        confirmAgentCalls: Annotated[
            int | None,
            Field(
                ge=0,
                description="On a server started with --confirm-above N: the agent calls you accept (from "
                "workflow_plan's agentCalls); a run whose preview makes at most this many starts without "
                "asking the user.",
            ),
        ] = None,
        checkpointReplies: Annotated[
            dict[str, Literal["allow", "deny"]] | None,
            Field(
                description="With resumeFromRunId alone: answers to the human checkpoints the run paused on "
                '(reason checkpoint_required), by checkpointContext.checkpointId, e.g. {"cp_…": "allow"}. '
                "Decisions the run already recorded replay without asking.",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, RunOutcome]:
        principal = self._principal()
        base = self._base(cwd)
        targets, choice = self._run_choice(name, path, script, resumeFromRunId, provider, fakeScript, base)
        if checkpointReplies and (targets or resumeFromRunId is None):
            raise MCPError(
                code=INVALID_PARAMS,
                message="checkpointReplies answers a paused run: pass it with resumeFromRunId alone "
                "(no name, path or script)",
            )
        wait_ms = min(waitMs, self.policy.max_wait_ms)
        run_args = args if "args" in _raw_arguments(ctx) else MISSING
        params = _run_params(
            ctx, name, path, script, cwd, args, provider, fakeScript,
            (concurrency, tokenBudget, maxAgents, agentTimeoutMs), resumeFromRunId, resumePolicy,
        )  # fmt: skip

        existing = self._idempotent(idempotencyKey, principal.owner, params) if idempotencyKey else None
        if existing is not None:
            return await self._finish(ctx, existing, wait_ms, deduplicated=True)
        if resumeFromRunId is not None and (problem := self._visible(resumeFromRunId)) is not None:
            return _error_result(problem)

        try:
            if targets:
                workflow, _ = await self._load(name, path, script, cwd)
            else:
                assert resumeFromRunId is not None
                stored = resumeFromRunId
                # Approval judges the stored source's hash and path; V8 checks it in the resumed run's worker.
                workflow = await anyio.to_thread.run_sync(
                    lambda: self.service.load_stored(stored, check_syntax=False)
                )
        except WorkflowMcpError as exc:
            return _load_error(exc)
        refused = self._approve(workflow, approval, principal)
        if refused is not None:
            return _error_result(refused)
        unconfirmed = self._confirmed(workflow, confirmation)
        if unconfirmed is not None:
            return _error_result(unconfirmed)

        limits = RunLimits(
            concurrency=concurrency,
            token_budget=tokenBudget,
            max_agents=maxAgents,
            agent_timeout_ms=agentTimeoutMs,
        )
        try:
            if targets:
                prepared = await self.service.prepare_run(
                    workflow,
                    provider=choice,
                    args=run_args,
                    limits=limits,
                    ceiling=self._ceiling(),
                    cwd=base,
                    resume_from=resumeFromRunId,
                    policy=resumePolicy,
                    child_check=self.children.of(principal.owner),
                )
            else:
                assert resumeFromRunId is not None
                overrides = RunOverrides(
                    limits=limits,
                    provider=choice,
                    args=run_args,
                    cwd=base if cwd is not None else None,
                    policy=resumePolicy,
                    checkpoint_replies=checkpointReplies or {},
                )
                prepared = await self.service.prepare_resume(
                    resumeFromRunId,
                    overrides,
                    ceiling=self._ceiling(),
                    child_check=self.children.of(principal.owner),
                )
        except WorkflowMcpError as exc:
            if isinstance(exc, WorkflowLoadError):
                return _load_error(exc)
            if isinstance(exc, CallNotServableError | ProviderNotLoggedInError):
                # Refused before any agent runs: the call as given cannot work (invalid params).
                raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc
            return _error_result(f"The run could not start: {exc}")
        # No await between these checks and launch: concurrent calls with one key start one run, and
        # concurrent calls never start more runs than the cap.
        refusal = self._disallowed(prepared.choice) or self._at_run_cap(principal)
        try:
            existing = self._idempotent(idempotencyKey, principal.owner, params) if idempotencyKey else None
        except MCPError:
            await prepared.discard()
            raise
        if refusal is not None or existing is not None:
            await prepared.discard()
            if existing is not None:
                return await self._finish(ctx, existing, wait_ms, deduplicated=True)
            return _error_result(refusal or "")
        try:
            handle = self.service.launch(
                prepared,
                idempotency_key=idempotencyKey,
                idempotency_params=params,
                owner=principal.owner,
                on_event=self._events_of(principal.owner),
                child_check=self.children.of(principal.owner),
            )
        except WorkflowMcpError as exc:
            return _error_result(f"The run could not start: {exc}")
        self._publish_later(None, principal.owner)
        self.service.prune_finished()
        return await self._finish(
            ctx,
            handle.run_id,
            wait_ms,
            deduplicated=False if idempotencyKey else None,
            resumed_from=resumeFromRunId,
            workflow=workflow.meta.name,
        )

    # -- the run viewer's buttons ------------------------------------------------------------------
    async def cancel_run(self, principal: Principal, run_id: str) -> str:
        """Cancel ``run_id`` for the run viewer's Cancel button (the viewer checked that ``principal``
        may see it); returns the service's outcome (:meth:`WorkflowService.cancel`)."""
        return self.service.cancel(run_id, "cancelled from the run viewer")

    async def resume_run(self, principal: Principal, run_id: str) -> str:
        """Resume stopped run ``run_id`` as a new run of ``principal``, under this server's rules exactly
        as ``workflow_run resumeFromRunId`` applies them (the source approved for the caller, the
        server's limits as a ceiling, its providers, its run caps); returns the new run's id.

        Raises:
            InvalidInputError: the source is not approved for the caller, the provider is not offered,
                or the caller is at its run cap (the message says what to do).
            WorkflowMcpError: the service's errors of :meth:`WorkflowService.prepare_resume`.
        """
        workflow = await anyio.to_thread.run_sync(
            lambda: self.service.load_stored(run_id, check_syntax=False)
        )
        if not self.trust.allows(workflow.source_hash, workflow.path, principal.owner):
            raise InvalidInputError(
                f"the source of run {run_id} is not approved for you; approve it with `workflow-mcp approvals "
                f"add --sha256 {workflow.source_hash}` on the server, then press Resume again"
            )
        prepared = await self.service.prepare_resume(run_id, ceiling=self._ceiling())
        refusal = self._disallowed(prepared.choice) or self._at_run_cap(principal)
        if refusal is not None:
            await prepared.discard()
            raise InvalidInputError(refusal)
        handle = self.service.launch(
            prepared,
            owner=principal.owner,
            on_event=self._events_of(principal.owner),
            child_check=self.children.of(principal.owner),
        )
        self._publish_later(None, principal.owner)
        return handle.run_id

    def _idempotent(self, key: str, owner: str | None, params: str) -> str | None:
        """The run started with idempotency ``key`` and the same parameters, or ``None``.

        Raises:
            MCPError: invalid params: ``key`` started a run with other parameters.
        """
        try:
            return self.service.find_idempotent_run(key, owner, params=params)
        except IdempotencyKeyReusedError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc), data={"runId": exc.run_id}) from exc

    def _approve(
        self, workflow: Workflow, approval: ElicitationResult[SourceApproval], principal: Principal
    ) -> str | None:
        """``None`` when ``workflow`` may run for ``principal``; else the isError text explaining what to
        do. An approval counts for the principal that gave it only."""
        if self.trust.allows(workflow.source_hash, workflow.path, principal.owner):
            return None
        decision = _APPROVAL.get() or _Approval("unknown")
        label = f"{workflow.meta.name!r}" + (f" ({workflow.path})" if workflow.path else " (inline script)")
        if decision.status == "ask" and isinstance(approval, AcceptedElicitation):
            answer = approval.data
            if isinstance(answer, SourceApproval) and answer.approve:
                if decision.source_hash != workflow.source_hash:
                    return (
                        f"The source of {label} changed while you were asked to approve it; call workflow_run "
                        "again to approve the current source."
                    )
                self.trust.approve(
                    workflow.source_hash, name=workflow.meta.name, path=workflow.path, by=principal.owner
                )
                return None
        if decision.status == "unknown":
            return f"Workflow {label} could not be identified for approval; call workflow_run again."
        how = _preapproval(workflow, principal)
        if decision.status == "ask":
            action = getattr(approval, "action", "accept")
            if action == "accept":
                return f"The user did not approve running {label} (answered no); nothing was started. {how}"
            # A headless client often answers every elicitation with `cancel` on its own: say what came
            # back, never that the user refused.
            return (
                f"Approving {label} was asked and the client answered `{action}` (no approval); nothing was "
                f"started. {how}"
            )
        return (
            f"Workflow {label} (sha256 {workflow.source_hash[:16]}…) has never been approved, and this client "
            f"cannot ask the user (it declares no form elicitation); nothing was started. {how}"
        )

    # -- cost preview and confirmation ---------------------------------------------------------
    async def _confirmation_for(
        self,
        ctx: Context[Any, Any],
        approval: Any,
        name: str | None,
        path: str | None,
        script: str | None,
        cwd: str | None,
        resume: str | None,
        provider: str | None,
        fake_script: dict[str, Any] | None,
        limits: RunLimits,
        accepted: int | None,
    ) -> Any:
        """Resolver of workflow_run's ``confirmation``: on a server with ``--confirm-above N``, preview a
        new run (once its source is approved) and ask the user (``Elicit``) when it makes more than N
        agent calls and ``confirmAgentCalls`` does not cover them. Returns a :class:`_Confirm` or
        ``Elicit``."""
        limit = self.policy.confirm_above
        # What the approval resolver found arrives as an accepted outcome holding it (or the answer).
        value = approval.data if isinstance(approval, AcceptedElicitation) else approval
        trusted = isinstance(value, _Approval) and value.status == "trusted"
        accepted_source = isinstance(value, SourceApproval) and value.approve
        if limit is None or not (name or path or script) or not (trusted or accepted_source):
            return self._confirm(_Confirm("unneeded"))
        try:
            workflow, _ = await self._load(name, path, script, cwd)
        except (WorkflowMcpError, MCPError):
            return self._confirm(_Confirm("unneeded"))  # the body reports it

        seen: list[Any] = []

        async def decide(report: Any) -> str | None:
            seen.append(report)
            if accepted is not None and accepted >= report.agent_calls:
                return None
            return "the user is asked" if _can_elicit(ctx) else "this client cannot ask the user"

        run_args = _raw_arguments(ctx).get("args", MISSING)
        try:
            report = await self.service.confirm_preview(
                workflow,
                above=limit,
                confirm=decide,
                provider=provider,
                fake_script=fake_script,
                args=run_args,
                limits=limits,
                ceiling=self._ceiling(),
                cwd=self._base(cwd),
                child_check=self.children,
            )
        except RunNotConfirmedError as exc:
            headline = seen[0].headline() if seen else f"{exc.calls} agent call(s)"
            found = _Confirm("ask" if _can_elicit(ctx) else "unavailable", exc.calls, headline)
            if found.status == "unavailable":
                return self._confirm(found)
            self._confirm(found)
            return Elicit(
                f"Start workflow {workflow.meta.name!r}? Its dry run makes {found.headline} — more than the "
                f"{limit} agent calls this server starts without asking.",
                RunConfirmation,
            )
        except WorkflowMcpError as exc:
            return self._confirm(_Confirm("failed", message=str(exc)))
        return self._confirm(_Confirm("ok", report.agent_calls, report.headline()))

    def _confirm(self, found: _Confirm) -> _Confirm:
        _CONFIRM.set(found)
        return found

    def _confirmed(self, workflow: Workflow, confirmation: Any) -> str | None:
        """``None`` when the run may start as far as ``--confirm-above`` goes; else the isError text."""
        found = _CONFIRM.get() or _Confirm("unneeded")
        label = repr(workflow.meta.name)
        if found.status in ("unneeded", "ok"):
            return None
        if found.status == "failed":
            return f"The cost preview of {label} could not run: {found.message}; nothing was started."
        limit = self.policy.confirm_above
        how = (
            f"call workflow_plan to see the preview, then call workflow_run again with confirmAgentCalls: "
            f"{found.calls} to start it"
        )
        if found.status == "ask":
            answer = confirmation.data if isinstance(confirmation, AcceptedElicitation) else None
            if isinstance(answer, RunConfirmation) and answer.start:
                return None
            action = getattr(confirmation, "action", "decline")
            return (
                f"The user did not confirm starting {label} (answer: {action}); its dry run makes "
                f"{found.headline}, more than this server's limit of {limit} calls without asking. Nothing "
                f"was started. Ask the user; to start it anyway, {how}."
            )
        return (
            f"Workflow {label} would make {found.headline} — more than the {limit} agent calls this server "
            f"starts without asking (--confirm-above), and this client cannot ask the user (no form "
            f"elicitation). Nothing was started; {how}."
        )

    async def _plan_approval_for(
        self, ctx: Context[Any, Any], name: str | None, path: str | None, script: str | None, cwd: str | None
    ) -> Any:
        """Resolver of workflow_plan's ``approval``: the dry run executes the workflow's JavaScript, so
        its source passes the same approval as workflow_run's."""
        _one_target(name, path, script)
        try:
            source_hash, file, label = await self._identify(name, path, script, cwd, None)
        except WorkflowMcpError:
            decision = _Approval("unknown")
        else:
            return self._source_decision(
                ctx,
                source_hash,
                file,
                self._principal().owner,
                f"Preview workflow {label} (sha256 {source_hash[:16]}…)? Its JavaScript runs on this "
                "machine in a dry run (no agent starts). Approving remembers this exact source for "
                "workflow_run too; a changed file asks again.",
            )
        _APPROVAL.set(decision)
        return decision

    async def workflow_plan(
        self,
        ctx: Context[Any, Any],
        approval: Annotated[ElicitationResult[SourceApproval], Resolve(_plan_approval_resolver)],
        name: Name = None,
        path: PathArg = None,
        script: Script = None,
        cwd: Cwd = None,
        args: Annotated[
            Any, Field(description="The workflow's `args`: any JSON value (omit for undefined).")
        ] = None,
        provider: Annotated[
            str | None,
            Field(
                min_length=1,
                description="Route the calls as a run on this provider would (default: the configuration).",
            ),
        ] = None,
        fakeScript: Annotated[
            dict[str, Any] | None,
            Field(description="Fake provider script steering the dry run's answers: {rules, default}."),
        ] = None,
        concurrency: Annotated[int | None, Field(ge=1, description="Agents running at once.")] = None,
        tokenBudget: Annotated[int | None, Field(ge=0, description="budget.total in output tokens.")] = None,
        maxAgents: Annotated[int | None, Field(ge=1, description="Lower the 1,000 agent-call cap.")] = None,
    ) -> Annotated[CallToolResult, PlanPreview]:
        principal = self._principal()
        _one_target(name, path, script)
        base = self._base(cwd)
        if provider is not None and provider not in self._allowed_providers():
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"unknown provider {provider!r}; available: {', '.join(self._allowed_providers())} "
                "(see providers_list)",
            )
        if fakeScript is not None:
            self._provider("fake", fakeScript, base)  # a malformed script is an invalid-params error
        try:
            workflow, _ = await self._load(name, path, script, cwd)
        except WorkflowMcpError as exc:
            return _load_error(exc)
        refused = self._approve(workflow, approval, principal)
        if refused is not None:
            return _error_result(refused.replace("workflow_run", "workflow_plan"))
        try:
            report = await self.service.plan(
                workflow,
                provider=provider,
                fake_script=fakeScript,
                args=args if "args" in _raw_arguments(ctx) else MISSING,
                limits=RunLimits(concurrency=concurrency, token_budget=tokenBudget, max_agents=maxAgents),
                ceiling=self._ceiling(),
                cwd=base,
                child_check=self.children,
            )
        except WorkflowMcpError as exc:
            return _error_result(
                f"The preview could not run: {exc}. Fix that, then call workflow_plan again."
            )
        return _result("\n".join(report.lines()), PlanPreview.model_validate(report.to_json()))

    async def _projection(self, run_id: str, work: Callable[[], _T]) -> _T:
        """``work()`` (a projection of ``run_id``'s whole log) in a worker thread. A run of more than
        :data:`BIG_RUN_EVENTS` events is projected on one of :data:`BIG_RUN_THREADS` threads shared by
        all clients, so however many of those requests arrive, the other worker threads stay free for
        every other request (anyio's default pool has 40)."""
        big = self.service.event_count(run_id) > BIG_RUN_EVENTS
        return await anyio.to_thread.run_sync(work, limiter=self._big_runs if big else None)

    def _at_run_cap(self, principal: Principal) -> str | None:
        """``None`` while ``principal`` may start another run; else the isError text. A scoped client
        (an HTTP token) is held to its share (``policy.max_client_runs``) and is told only its own count;
        everyone to the server's ``policy.max_runs``."""
        limit, share = self.policy.max_runs, self.policy.max_client_runs
        after = (
            "Wait for one of your runs to end (workflow_run_await) or cancel one (workflow_run_cancel), then "
            "call again."
        )
        if principal.scoped:
            mine = self.service.running_count_of(principal.owner)
            if share is not None and mine >= share:
                return (
                    f"This client already runs {mine} run(s), its share of this server's concurrent runs "
                    f"(max_client_runs {share}); nothing was started. {after} The server's operator sets the "
                    "share with `workflow-mcp serve --max-client-runs N`."
                )
            if limit is not None and self.service.running_count() >= limit:
                return (
                    f"This server is running its limit of concurrent runs (max_runs {limit}; each holds its own "
                    f"Node worker, about 50 MB); this client runs {mine} of them; nothing was started. Call "
                    "again once a run ends. The server's operator can raise the limit with "
                    "`workflow-mcp serve --max-runs N`."
                )
            return None
        running = self.service.running_count()
        if limit is None or running < limit:
            return None
        return (
            f"This server already runs {running} run(s), its limit of concurrent runs (max_runs {limit}; each "
            "run holds its own Node worker, about 50 MB); nothing was started. Wait for a run to end "
            "(workflow_run_await) or cancel one (workflow_run_cancel), then call again. The server's operator "
            "can raise the limit with `workflow-mcp serve --max-runs N`."
        )

    def _allowed_providers(self) -> list[str]:
        names = self.service.provider_names()
        if self.policy.providers is not None:
            names = [n for n in names if n in self.policy.providers]
        return names

    def _provider(self, name: str, fake_script: Mapping[str, Any] | None, cwd: str) -> ProviderChoice:
        """The provider a call names for a run in ``cwd``: ``fake`` (scripted by ``fakeScript``), or any
        other allowed provider, which the service builds now (once per configuration, from its pool) so
        a configuration problem is an invalid-params error before anything starts.

        Raises:
            MCPError: invalid params: a provider the server does not offer, a malformed ``fakeScript``,
                ``fakeScript`` with another provider, or a provider that cannot run here.
        """
        allowed = self._allowed_providers()
        if name not in allowed:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"unknown provider {name!r}; available: {', '.join(allowed)} (see providers_list)",
            )
        if fake_script is not None and name != "fake":
            raise MCPError(code=INVALID_PARAMS, message="fakeScript is only for provider 'fake'")
        choice = ProviderChoice(name, fake_script)
        try:
            self.service.provider(choice, cwd=cwd)
        except WorkflowMcpError as exc:
            if name == "fake":
                raise MCPError(code=INVALID_PARAMS, message=f"invalid fakeScript: {exc}") from exc
            raise MCPError(code=INVALID_PARAMS, message=f"provider {name!r} cannot run here: {exc}") from exc
        return choice

    def _run_choice(
        self,
        name: str | None,
        path: str | None,
        script: str | None,
        resume: str | None,
        provider: str | None,
        fake_script: Mapping[str, Any] | None,
        cwd: str,
    ) -> tuple[int, ProviderChoice | None]:
        """How many targets workflow_run names, and the provider it asks for (``None``: the provider of
        the run it continues, allowed only with ``resumeFromRunId`` alone).

        Raises:
            MCPError: invalid params (see :func:`_run_targets` and :meth:`_provider`).
        """
        targets = _run_targets(name, path, script, resume)
        if provider is None:
            if targets:
                raise MCPError(
                    code=INVALID_PARAMS,
                    message="provider is required (see providers_list); only resumeFromRunId alone may omit it, "
                    "to keep the provider of the run it continues",
                )
            if fake_script is not None:
                raise MCPError(code=INVALID_PARAMS, message="fakeScript is only for provider 'fake'")
            return targets, None
        return targets, self._provider(provider, fake_script, cwd)

    def _ceiling(self) -> RunLimits:
        """The server's limits, a ceiling on every run it starts or resumes."""
        p = self.policy
        return RunLimits(
            concurrency=p.max_concurrency,
            token_budget=p.max_token_budget,
            max_agents=p.max_agents,
            agent_timeout_ms=p.max_agent_timeout_ms,
        )

    def _disallowed(self, choice: ProviderChoice) -> str | None:
        """``None`` when this server offers the provider a prepared run would use; else the isError text
        (a resume keeps the provider of a run this server may not have started)."""
        allowed = self.policy.providers
        if allowed is None or choice.name in allowed:
            return None
        used = repr(choice.name) if choice.name else "the configured routing"
        return (
            f"The run would use provider {used}, which this server does not offer; nothing was started. Call "
            f"workflow_run again with provider set to one of {', '.join(allowed)} (see providers_list)."
        )

    async def _finish(
        self,
        ctx: Context[Any, Any],
        run_id: str,
        wait_ms: int,
        *,
        deduplicated: bool | None = None,
        resumed_from: str | None = None,
        workflow: str | None = None,
    ) -> CallToolResult:
        """Wait (bounded, with progress) and render the run's outcome. While this client waits and can
        ask its user (form elicitation), the run's human checkpoints are put to the user; an
        elicitation still open when the wait ends is waited for (at most :data:`CHECKPOINT_ELICIT_S`)."""
        asking: set[asyncio.Task[Any]] = set()
        attached = (
            wait_ms > 0
            and _can_elicit(ctx)
            and self.service.answer_checkpoints(run_id, _checkpoint_asker(ctx, run_id, asking))
        )
        try:
            state = await self.service.await_run(run_id, wait_ms, on_progress=_progress_reporter(ctx))
        finally:
            if attached:
                self.service.answer_checkpoints(run_id, None)
        if asking:
            await asyncio.wait(asking, timeout=CHECKPOINT_ELICIT_S)
            state = await self.service.await_run(run_id, 0)
        outcome = outcome_of(state, deduplicated=deduplicated, resumed_from=resumed_from, workflow=workflow)
        return _result(outcome_text(outcome), outcome, is_error=outcome.status == "failed")

    async def agent_run(
        self,
        ctx: Context[Any, Any],
        prompt: Annotated[str, Field(min_length=1, description="The agent's prompt.")],
        provider: Annotated[
            str, Field(min_length=1, description="Agent provider name (see providers_list).")
        ],
        schema: Annotated[
            dict[str, Any] | None,
            Field(description="JSON Schema (2020-12) the answer must satisfy; re-asked up to 5 times."),
        ] = None,
        label: Annotated[str | None, Field(description="A label for events and routing rules.")] = None,
        model: Annotated[
            str | None, Field(description="Model (Claude aliases need a configured mapping).")
        ] = None,
        effort: Annotated[
            Literal["low", "medium", "high", "xhigh", "max"] | None, Field(description="Reasoning effort.")
        ] = None,
        agentType: Annotated[str | None, Field(description="Agent type, as in agent() options.")] = None,
        fakeScript: Annotated[
            dict[str, Any] | None, Field(description="Fake provider script (provider fake only).")
        ] = None,
        idempotencyKey: Annotated[
            str | None,
            Field(min_length=1, max_length=200, description="Retries with this key return the same run."),
        ] = None,
        waitMs: Annotated[
            int,
            Field(ge=0, le=25_000, description="0: return the run id at once; else wait up to this long."),
        ] = 25_000,
        attachments: Annotated[
            list[dict[str, Any]] | None,
            Field(
                max_length=20,
                description='Image attachments: {"type": "image", "path": "<file in the project>"} or '
                '{"type": "image", "data": "<base64>", "mimeType": "image/png"}; PNG, JPEG, GIF or WebP, '
                "5 MiB each, 20 at most, for a provider with image input (providers_list: images).",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, RunOutcome]:
        principal = self._principal()
        choice = self._provider(provider, fakeScript, self.service.cwd)
        options = {
            k: v
            for k, v in {
                "schema": schema,
                "label": label,
                "model": model,
                "effort": effort,
                "agentType": agentType,
            }.items()
            if v is not None
        }
        params = request_fingerprint(
            {"tool": "agent_run", "prompt": prompt, "provider": provider, "fakeScript": fakeScript, **options}
            | ({"attachments": attachments} if attachments else {})
        )
        existing = self._idempotent(idempotencyKey, principal.owner, params) if idempotencyKey else None
        if existing is not None:
            return await self._finish(ctx, existing, min(waitMs, self.policy.max_wait_ms), deduplicated=True)
        if (full := self._at_run_cap(principal)) is not None:
            return _error_result(full)
        try:
            handle = self.service.run_agent(
                prompt,
                options,
                provider=choice,
                limits=RunLimits(agent_timeout_ms=self.policy.max_agent_timeout_ms),
                idempotency_key=idempotencyKey,
                idempotency_params=params,
                owner=principal.owner,
                on_event=self._events_of(principal.owner),
                attachments=attachments,
                resolve_path=self.scope.resolve,  # an attachment's path obeys the file scope
            )
        except IdempotencyKeyReusedError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc
        except (AttachmentError, ImageInputRefusedError) as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc
        except PathRefusedError as exc:
            raise MCPError(code=INVALID_PARAMS, message=f"attachments: {exc}") from exc
        except WorkflowMcpError as exc:
            return _error_result(f"The agent call could not start: {exc}")
        self._publish_later(None, principal.owner)
        return await self._finish(
            ctx, handle.run_id, min(waitMs, self.policy.max_wait_ms), workflow="agent-run"
        )

    async def workflow_run_status(
        self,
        runId: RunId,
        lastN: Annotated[int, Field(ge=0, le=200, description="Most recent agent calls to include.")] = 20,
        labelGlob: Annotated[
            str | None, Field(description="Only calls whose label matches this glob.")
        ] = None,
        logLines: Annotated[int, Field(ge=0, le=200, description="Most recent log lines to include.")] = 20,
    ) -> Annotated[CallToolResult, RunSnapshot]:
        if (problem := self._visible(runId)) is not None:
            return _error_result(problem)
        snap = await self._projection(
            runId,
            lambda: snapshot_of(
                self.service.status(runId), last_n=lastN, label_glob=labelGlob, log_lines=logLines
            ),
        )
        return _result(snapshot_text(snap), snap)

    async def workflow_run_events(
        self,
        runId: RunId,
        after: Annotated[int, Field(ge=0, description="Cursor: only events with a greater sequence.")] = 0,
        limit: Annotated[int, Field(ge=1, le=1000, description="Most events to return.")] = 200,
        waitMs: WaitMs = 0,
    ) -> Annotated[CallToolResult, EventsPage]:
        if (problem := self._visible(runId)) is not None:
            return _error_result(problem)
        events = await self.service.wait_events(runId, after, limit, min(waitMs, self.policy.max_wait_ms))
        # The status is read before `hasMore` is: a run's events are stored before its status is
        # terminal, so a terminal page with no more events stored really is the last one (read after,
        # the run could end in between, and the page say terminal with its last events unread).
        status = self.service.run_status(runId)

        def render() -> tuple[list[dict[str, Any]], int, bool]:
            page: list[dict[str, Any]] = []
            size = 0
            for event in events:
                item = event_out(event)
                size += len(json.dumps(item, ensure_ascii=False).encode())
                if page and size > MAX_EVENTS_BYTES:
                    break
                page.append(item)
            cursor = int(page[-1]["sequence"]) if page else after
            return page, cursor, bool(self.service.events(runId, cursor, 1))

        page, cursor, has_more = await anyio.to_thread.run_sync(render)
        out = EventsPage(
            run_id=runId,
            events=page,
            next_cursor=cursor,
            status=status,
            terminal=status in TERMINAL,
            has_more=has_more,
        )
        kinds = ", ".join(sorted({str(e["type"]) for e in page})) or "none"
        text = (
            f"{len(page)} event(s) of run {runId} after {after} (types: {kinds}); nextCursor {cursor}; "
            f"run {status}" + ("; more are stored" if out.has_more else "")
        )
        return _result(text, out)

    async def workflow_run_await(
        self, ctx: Context[Any, Any], runId: RunId, waitMs: WaitMs = 25_000
    ) -> Annotated[CallToolResult, RunOutcome]:
        if (problem := self._visible(runId)) is not None:
            return _error_result(problem)
        return await self._finish(ctx, runId, min(waitMs, self.policy.max_wait_ms))

    async def workflow_run_cancel(
        self,
        runId: RunId,
        reason: Annotated[str, Field(max_length=500, description="Recorded with the cancellation.")] = (
            "cancelled through MCP"
        ),
    ) -> Annotated[CallToolResult, CancelOutcome]:
        if (problem := self._visible(runId)) is not None:
            return _error_result(problem)
        try:
            outcome = self.service.cancel(runId, reason)
        except RunContinuedError as exc:
            return _error_result(str(exc).replace("`workflow-mcp runs cancel ", "workflow_run_cancel `"))
        state = (
            await self.service.await_run(runId, 2_000)
            if outcome == "cancelling"
            else await self._projection(runId, lambda: self.service.status(runId))
        )
        out = CancelOutcome(run_id=runId, outcome=outcome, status=state.status)
        if outcome == "closed":
            text = f"Run {runId} is cancelled: it had ended paused or interrupted and will not be resumed."
        elif outcome not in ("cancelling", "requested"):
            text = f"Run {runId} had already ended ({outcome}); nothing to cancel."
        elif state.status in TERMINAL:
            text = f"Run {runId} is {state.status}; continue it later with workflow_run resumeFromRunId {runId!r}."
        else:
            text = (
                f"Run {runId}: cancellation requested; it stops once its in-flight calls notice (status "
                f"{state.status}). Confirm with workflow_run_await."
            )
        return _result(text, out)

    async def providers_list(self) -> Annotated[CallToolResult, ProvidersList]:
        descriptions = {
            "fake": "Deterministic fake: text calls echo the prompt, schema calls get a minimal valid answer; "
            "script it with fakeScript. No model, no network, no cost.",
            "codex": "OpenAI Codex through its official SDK (codex app-server).",
            "claude": "Claude through the Claude Agent SDK.",
            "acp": "Any Agent Client Protocol agent (a configured command).",
            "openai": "Any OpenAI-compatible chat endpoint.",
        }
        out_list = []
        for name in self._allowed_providers():
            try:
                info = await anyio.to_thread.run_sync(self.service.provider_info, name)
            except WorkflowMcpError as exc:  # a configuration that does not load: said, not raised
                out_list.append(ProviderOut(name=name, description=f"Not available: {exc}", available=False))
                continue
            note = descriptions.get(info.use or name, "")
            if info.origin != "registered":
                note = f"{info.origin.capitalize()}: runs {info.use}. {note}".strip()
            a = info.availability
            if not a.available and a.problem:
                note = (note + " Not available: " + a.problem).strip()
            elif a.logged_in is False:
                note = (note + " Not logged in: " + (a.problem or "log in first")).strip()
            matrix = info.to_json()["capabilities"]
            out_list.append(
                ProviderOut(
                    name=name,
                    description=note,
                    available=a.available,
                    ready=a.ready,
                    logged_in=a.logged_in,
                    use=info.use or name,
                    origin=info.origin,
                    version=a.version,
                    capabilities=matrix,
                )
            )
        out = ProvidersList(providers=out_list)
        ready = [p.name for p in out.providers if p.ready]
        logged_out = [p.name for p in out.providers if p.available and p.logged_in is False]
        text = "Providers ready: " + (", ".join(ready) or "none")
        if logged_out:
            text += "; not logged in: " + ", ".join(logged_out)
        return _result(text, out)

    # -- the workflow library ---------------------------------------------------------------
    def _register_library_tools(self) -> None:
        write = ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        )
        self._add(
            self.workflow_create,
            "workflow_create",
            "Create a workflow",
            "Store `script` (a whole workflow source) as a permanent workflow: validated with Claude Code's "
            "loading rules first (an invalid source is refused with the loader's errors, nothing written), "
            "then written unchanged as .claude/workflows/<slug>.js (`personal`: ~/.claude/workflows). "
            "`version` is semver (v1.0.0 and build metadata are stored as 1.0.0; default 1.0.0); a name "
            "that exists needs a new version, and earlier versions stay retrievable with workflow_get. "
            "`tags`, `category`, `author`, `fields` are kept in the library, never in the file. A draft of "
            "the same name is promoted (removed). Failures carry a typed `reason`.",
            write,
        )
        self._add(
            self.workflow_create_draft,
            "workflow_create_draft",
            "Create a draft",
            "Keep `script` as the draft of its name: validated like workflow_create but stored only in the "
            "library (Claude Code's discovery and workflow_list do not see it; includeDrafts lists it). Run "
            "it with workflow_run name=<name>@draft — a draft you create is approved for you. Storing a "
            "draft of the same name again overwrites it (status overwritten, creation date kept). "
            "`expiresInSeconds` forgets it after that long; otherwise it stays until deleted or promoted "
            "with workflow_create.",
            write,
        )
        self._add(
            self.workflow_get,
            "workflow_get",
            "Get a workflow's source",
            "The source and library metadata of workflow `name`: the current file, a stored `version` "
            "(semver; v1.0.0 means 1.0.0), or its draft (`draft`, or name=<name>@draft); with the global "
            "instructions (globalInstructions, null when none are configured) and every stored version.",
            _RO,
        )
        self._add(
            self.workflow_delete,
            "workflow_delete",
            "Delete a workflow",
            "Delete workflow `name`: its current file (and catalog entry), one stored `version`, or its "
            "`draft`. The user confirms the resolved target first: through elicitation when this client "
            "supports it, otherwise this call returns status confirmation_required with a confirmToken to "
            "pass back (single use, valid 10 minutes). If the target changed before the answer, nothing "
            "is deleted (reason target_changed). Only files in the workflows directories are removed.",
            ToolAnnotations(
                read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
            ),
        )

        for name in ("workflow_create", "workflow_create_draft", "workflow_get", "workflow_delete"):
            tool = self._tool_manager.get_tool(name)
            assert tool is not None and tool.fn_metadata.output_schema is not None
            tool.fn_metadata.output_schema = _or_library_failure(tool.fn_metadata.output_schema)

    async def _library_call(self, work: Callable[[], _T]) -> _T | CallToolResult:
        """``work()`` in a worker thread; a :class:`LibraryError` becomes an ``isError`` result with its
        typed reason in ``structuredContent``."""
        try:
            return await anyio.to_thread.run_sync(work)
        except LibraryError as exc:
            return _library_failure(exc)

    async def workflow_create(
        self,
        script: Annotated[str, Field(min_length=1, description="The whole workflow source (.js text).")],
        version: Annotated[
            str | None, Field(description="Semantic version, e.g. 1.0.0 (default 1.0.0 for a new name).")
        ] = None,
        tags: Annotated[list[str] | None, Field(description="Library tags.")] = None,
        category: Annotated[str | None, Field(description="Library category.")] = None,
        author: Annotated[str | None, Field(description="Who wrote it.")] = None,
        fields: Annotated[
            dict[str, Any] | None, Field(description="Free-form library metadata (any JSON object).")
        ] = None,
        personal: Annotated[bool, Field(description="Write to ~/.claude/workflows instead.")] = False,
        cwd: Cwd = None,
    ) -> Annotated[CallToolResult, WorkflowCreated]:
        base = self._base(cwd)
        created = await self._library_call(
            lambda: self.service.library_within(self.scope.allows).create(
                script, version=version, tags=tags or (), category=category, author=author,
                fields=fields, personal=personal, cwd=base,
            )
        )  # fmt: skip
        if isinstance(created, CallToolResult):
            return created
        e = created.entry
        out = WorkflowCreated(
            status="created", name=e.name, version=e.version, scope=created.scope, file=created.file,
            source_hash=e.source_hash, tags=list(e.tags), category=e.category,
        )  # fmt: skip
        if created.previous_version is not None:
            out.previous_version = created.previous_version
        if created.promoted_draft is not None:
            out.promoted_draft = created.promoted_draft
        text = f"created {e.name}@{e.version} as {created.file}" + (
            f" (replacing {created.previous_version})" if created.previous_version else ""
        )
        if created.promoted_draft:
            text += "; its draft was promoted and removed"
        return _result(text + ". Run it with workflow_run name=" + json.dumps(e.name) + ".", out)

    async def workflow_create_draft(
        self,
        script: Annotated[str, Field(min_length=1, description="The whole workflow source (.js text).")],
        tags: Annotated[list[str] | None, Field(description="Library tags.")] = None,
        category: Annotated[str | None, Field(description="Library category.")] = None,
        author: Annotated[str | None, Field(description="Who wrote it.")] = None,
        fields: Annotated[dict[str, Any] | None, Field(description="Free-form library metadata.")] = None,
        expiresInSeconds: Annotated[
            int | None, Field(ge=1, le=31_536_000, description="Forget the draft after this many seconds.")
        ] = None,
        personal: Annotated[bool, Field(description="A draft of the personal directory.")] = False,
        cwd: Cwd = None,
    ) -> Annotated[CallToolResult, DraftCreated]:
        base = self._base(cwd)
        owner = self._principal().owner
        saved = await self._library_call(
            lambda: self.service.library_within(self.scope.allows).create_draft(
                script, tags=tags or (), category=category, author=author, fields=fields, owner=owner,
                expires_in_s=expiresInSeconds, personal=personal, cwd=base,
            )
        )  # fmt: skip
        if isinstance(saved, CallToolResult):
            return saved
        d = saved.draft
        # The client wrote this source: it may run it without being asked (for that client only).
        await anyio.to_thread.run_sync(
            lambda: self.trust.approve(d.source_hash, name=f"{d.name}@draft", path=None, by=owner)
        )
        notice = (
            "Drafts are kept in the library only: Claude Code does not see them and workflow_list shows "
            "them only with includeDrafts. Promote it with workflow_create."
        )
        out = DraftCreated(
            status=saved.status, draft_id=d.draft_id, name=d.name, run_as=f"{d.name}@draft",
            source_hash=d.source_hash, created_at=d.created_at, updated_at=d.updated_at,
            expires_at=d.expires_at, notice=notice,
        )  # fmt: skip
        text = f"draft {saved.status}: {d.name} ({d.draft_id}). Run it with workflow_run name={json.dumps(out.run_as)}. {notice}"
        return _result(text, out)

    async def workflow_get(
        self,
        name: Annotated[str, Field(min_length=1, max_length=220, description="The workflow's meta.name.")],
        version: Annotated[str | None, Field(description="A stored semantic version.")] = None,
        draft: Annotated[bool, Field(description="The draft of this name instead.")] = False,
        cwd: Cwd = None,
    ) -> Annotated[CallToolResult, WorkflowDefinition]:
        base = self._base(cwd)
        found = await self._library_call(
            lambda: self.service.library_within(self.scope.allows).describe(
                name, version=version, draft=draft, cwd=base
            )
        )
        if isinstance(found, CallToolResult):
            return found
        out = WorkflowDefinition(
            name=found.name, kind=found.kind, version=found.version, current=found.current, scope=found.scope,
            file=found.file, source=found.source, source_hash=found.source_hash, tags=list(found.tags),
            category=found.category, author=found.author, fields=found.fields, versions=list(found.versions),
            global_instructions=found.global_instructions, draft_id=found.draft_id,
            created_at=found.created_at, expires_at=found.expires_at,
        )  # fmt: skip
        label = f"{found.name}@{found.version}" if found.version else found.name
        head = f"{label} ({found.kind}{', current' if found.current else ''}"
        head += f", {found.file})" if found.file else ")"
        if found.global_instructions is not None:
            head += f"\n\nGlobal instructions (apply them when you run it):\n{found.global_instructions}"
        return _result(f"{head}\n\n```js\n{found.source}```", out)

    async def _delete_question(
        self,
        ctx: Context[Any, Any],
        name: str,
        version: str | None,
        draft: bool,
        personal: bool,
        confirmToken: str | None,
        cwd: str | None,
    ) -> Any:
        """Resolver of workflow_delete's ``answer``: when the client can ask its user (and no
        ``confirmToken`` was given), resolve the target without deleting anything and ask about exactly
        it (name, version, file, source hash); else ``None`` (the body answers with a token). The
        target asked about is kept for the body (:data:`_DELETE_ASKED`), which deletes only that."""
        _DELETE_ASKED.set(None)
        if confirmToken is not None or not _can_elicit(ctx):
            return None
        base = self._base(cwd)
        try:
            preview = await anyio.to_thread.run_sync(
                lambda: self.service.library_within(self.scope.allows).prepare_delete(
                    name, version=version, draft=draft, personal=True if personal else None, cwd=base,
                    record=False,
                )
            )  # fmt: skip
        except LibraryError:
            return None  # the body resolves it again and reports the typed reason
        _DELETE_ASKED.set(preview)
        return Elicit(f"{preview.message} (sha256 {preview.source_hash[:12]}…)", DeleteAnswer)

    async def workflow_delete(
        self,
        ctx: Context[Any, Any],
        answer: Annotated[ElicitationResult[DeleteAnswer], Resolve(_delete_resolver)],
        name: Annotated[str, Field(min_length=1, max_length=220, description="The workflow's meta.name.")],
        version: Annotated[
            str | None, Field(description="One stored semantic version (default: the current file).")
        ] = None,
        draft: Annotated[bool, Field(description="Delete the draft of this name instead.")] = False,
        personal: Annotated[bool, Field(description="Look in ~/.claude/workflows only.")] = False,
        confirmToken: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=200,
                description="The token a confirmation_required answer gave, once the user agreed.",
            ),
        ] = None,
        cwd: Cwd = None,
    ) -> Annotated[CallToolResult, DeleteOutcome]:
        base = self._base(cwd)
        lib = self.service.library_within(self.scope.allows)
        holder = self._principal().owner or ""  # a token confirms only for the client it was given to
        asked = _DELETE_ASKED.get()
        if confirmToken is not None:
            token = confirmToken
        else:
            prompt = await self._library_call(
                lambda: lib.prepare_delete(
                    name, version=version, draft=draft, personal=True if personal else None, cwd=base,
                    holder=holder,
                )
            )  # fmt: skip
            if isinstance(prompt, CallToolResult):
                return prompt
            token = prompt.token
            if asked is None:
                out = DeleteOutcome(
                    status="confirmation_required", name=prompt.name, kind=prompt.kind,
                    version=prompt.version, file=prompt.file, confirm_token=prompt.token,
                    expires_at=prompt.expires_at, message=prompt.message,
                )  # fmt: skip
                return _result(
                    f"{prompt.message}\nAsk the user; if they agree, call workflow_delete again with "
                    f"confirmToken={json.dumps(prompt.token)} before {prompt.expires_at}.",
                    out,
                )
            agreed = (
                isinstance(answer, AcceptedElicitation)
                and isinstance(answer.data, DeleteAnswer)
                and answer.data.confirm
            )
            if not agreed:
                await anyio.to_thread.run_sync(lambda: lib.discard_delete(token, holder=holder))
                return _library_failure(
                    LibraryError(
                        "cancelled", f"the user did not confirm deleting {prompt.name!r}; nothing was deleted"
                    )
                )
            if (prompt.source_hash, prompt.file, prompt.version, prompt.kind) != (
                asked.source_hash, asked.file, asked.version, asked.kind,
            ):  # fmt: skip
                await anyio.to_thread.run_sync(lambda: lib.discard_delete(token, holder=holder))
                return _library_failure(
                    LibraryError(
                        "target_changed",
                        f"{prompt.name!r} changed while the user was asked (its source or file is not the "
                        "one shown); nothing was deleted — call workflow_delete again",
                    )
                )
        deleted = await self._library_call(lambda: lib.confirm_delete(token, cwd=base, holder=holder))
        if isinstance(deleted, CallToolResult):
            return deleted
        out = DeleteOutcome(
            status="deleted", name=deleted.name, kind=deleted.kind, version=deleted.version, file=deleted.file,
            removed_file=deleted.removed_file, removed_directory=deleted.removed_directory,
        )  # fmt: skip
        what = f"{deleted.name}@{deleted.version}" if deleted.version else deleted.name
        text = f"deleted {'the draft of ' if deleted.kind == 'draft' else ''}{what}" + (
            f" ({deleted.file})" if deleted.file else ""
        )
        return _result(text + ".", out)

    def _sidecar_of(self, workflow: Workflow) -> dict[str, Any]:
        """The library metadata of this exact source (``{}`` when the library has none)."""
        if workflow.path is None:
            return {}
        lib = self.service.library_within(self.scope.allows)
        entry = lib.entry_for(workflow.path, workflow.meta.name, workflow.source_hash)
        if entry is None:
            return {}
        return {
            "version": entry.version,
            "versions": list(lib.versions_of(workflow.path, workflow.meta.name)),
            "tags": list(entry.tags),
            "category": entry.category,
            "author": entry.author,
            "fields": entry.fields,
        }

    # -- loading ----------------------------------------------------------------------------
    async def _load(
        self,
        name: str | None,
        path: str | None,
        script: str | None,
        cwd: str | None,
        *,
        check_syntax: bool = True,
    ) -> tuple[Workflow, Literal["personal", "project", "plugin", "file", "inline", "draft"]]:
        """Load one target in a worker thread (discovery and the V8 syntax check block). A ``name``
        ending in ``@draft`` is the library's draft of that name (no file: approved by source hash).

        Raises:
            MCPError: invalid params, a ``path`` or ``cwd`` the file scope refuses.
            WorkflowNotFoundError: no such file, or no such name visible (inside the roots).
            WorkflowLoadError: the file breaks a loading rule (quoting it only if it is a workflow source).
        """
        base = self._base(cwd)
        if script is not None:
            return await anyio.to_thread.run_sync(
                lambda: self.service.load_source(script, check_syntax=check_syntax)
            ), "inline"
        if path is not None:
            file = self._file(path, base)
            if not os.path.isfile(file):
                raise WorkflowNotFoundError(f"workflow file {path!r} does not exist (relative to {base})")
            return await anyio.to_thread.run_sync(lambda: self._load_file(file, check_syntax)), "file"
        assert name is not None
        if name.endswith("@draft"):
            return await anyio.to_thread.run_sync(
                lambda: self.service.library_within(self.scope.allows).draft_workflow(name, cwd=base)
            ), "draft"
        if os.sep in name or name.endswith(".js"):
            raise WorkflowNotFoundError(f"{name!r} is not a workflow name; pass a file as `path` instead")
        found = await anyio.to_thread.run_sync(lambda: self._resolve_name(name, base, check_syntax))
        return found.workflow, found.source

    def _base(self, cwd: str | None) -> str:
        """The real directory names and relative paths resolve from: ``cwd`` (relative to the server's
        directory) or the server's directory.

        Raises:
            MCPError: invalid params when the file scope refuses it (rule and roots named).
        """
        try:
            return self.scope.resolve(cwd or ".", self.service.cwd)
        except PathRefusedError as exc:
            raise MCPError(code=INVALID_PARAMS, message=f"cwd: {exc}") from exc

    def _file(self, path: str, base: str) -> str:
        """The real path of the file ``path`` (relative to ``base``), read through that real path.

        Raises:
            MCPError: invalid params when the file scope refuses it (rule and roots named).
        """
        try:
            return self.scope.resolve(path, base)
        except PathRefusedError as exc:
            raise MCPError(code=INVALID_PARAMS, message=f"path: {exc}") from exc

    def _load_file(self, file: str, check_syntax: bool) -> Workflow:
        try:
            return self.service.load(file, check_syntax=check_syntax)
        except WorkflowLoadError:
            report = self.service.validate(file, check_syntax=False)
            shown = redacted(report)
            if shown is report or not shown.errors:
                raise
            raise shown.errors[0] from None

    def _resolve_name(self, name: str, base: str, check_syntax: bool) -> DiscoveredWorkflow:
        """The workflow ``name`` resolves to from ``base`` by discovery. Discovery reads only what the file
        scope allows (over HTTP nothing outside the project roots, e.g. no personal workflow; never the
        state directory), so neither the winner nor a not-found message involves any other file.

        Raises:
            WorkflowNotFoundError: no reachable definition (over HTTP the message says where names resolve).
        """
        try:
            return self.service.find_workflow(
                name, cwd=base, check_syntax=check_syntax, reachable=self.scope.allows
            )
        except WorkflowNotFoundError as exc:
            raise self.scope.not_found(exc) from None

    def _discover(self, base: str) -> tuple[list[DiscoveredWorkflow], list[Diagnostic]]:
        """Discovery from ``base`` of what the file scope allows; an invalid file that is not a workflow
        source is reported without quoting it."""
        found = self.service.list_workflows(base, reachable=self.scope.allows)
        diagnostics = []
        for d in found.diagnostics:
            if d.kind == "invalid" and (quiet := self._unquoted(d.path)) is not None:
                d = Diagnostic(d.path, d.kind, quiet)
            diagnostics.append(d)
        return found.workflows, diagnostics

    def _unquoted(self, path: str) -> str | None:
        """``None`` when the invalid file ``path`` is a workflow source (its diagnostic may quote it);
        else the diagnostic text that replaces the one discovery wrote."""
        try:
            report = self.service.validate(path, check_syntax=False)
        except WorkflowMcpError:
            return f"{NOT_A_WORKFLOW} [unreadable]"
        shown = redacted(report)
        if shown is report:
            return None
        e = shown.errors[0]
        where = f" (line {e.line}, column {e.column})" if e.line is not None else ""
        return f"{e.detail}{where} [{e.rule}]"

    async def _identify(
        self, name: str | None, path: str | None, script: str | None, cwd: str | None, resume: str | None
    ) -> tuple[str, str | None, str]:
        """``(source_hash, file, label)`` of what workflow_run would run (V8's verdict is cached, so the
        load that follows compiles nothing again)."""
        if script is not None:
            inline = await anyio.to_thread.run_sync(lambda: self.service.load_source(script))
            return inline.source_hash, None, f"{inline.meta.name!r} (inline script)"
        if path is None and name is None:
            assert resume is not None
            workflow = await anyio.to_thread.run_sync(
                lambda: self.service.load_stored(resume, check_syntax=False)
            )
            return workflow.source_hash, workflow.path, f"{workflow.meta.name!r} (stored source of {resume})"
        # With V8's verdict, so a file validate accepts is never refused here (the verdict is cached,
        # so the load that follows compiles nothing again).
        workflow, _ = await self._load(name, path, None, cwd)
        return workflow.source_hash, workflow.path, f"{workflow.meta.name!r} ({workflow.path})"

    # -- notifications ----------------------------------------------------------------------
    def _events_of(self, owner: str | None) -> Callable[[Event], None]:
        """The service's ``on_event`` for a run of ``owner`` started here: each committed event tells
        the listeners that may see the run (:class:`~workflow_mcp.server._subscriptions.OwnedBus`)."""

        def on_event(event: Event) -> None:
            self._publish_later(event.run_id, owner)

        return on_event

    def _publish_later(self, run_id: str | None, owner: str | None) -> None:
        """Tell, soon and once per loop turn, the listeners that may see runs of ``owner`` that the run
        ``run_id`` changed (``None``: that their run list did)."""
        key = (run_id or "", owner)
        if key in self._pending_updates:
            return
        first = not self._pending_updates
        self._pending_updates.add(key)
        if first:
            asyncio.get_running_loop().call_soon(self._flush_updates)

    def _flush_updates(self) -> None:
        pending, self._pending_updates = self._pending_updates, set()
        task = asyncio.get_running_loop().create_task(self._publish(pending))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _publish(self, updates: Iterable[tuple[str, str | None]]) -> None:
        for run_id, owner in updates:
            if not run_id:
                await self._bus.publish_owned(ResourcesListChanged(), owner)
                continue
            for uri in (f"workflow://runs/{run_id}", f"workflow://runs/{run_id}/events"):
                await self._bus.publish_owned(ResourceUpdated(uri=uri), owner)
                for connection in self.resource_subscribers.of(uri):
                    try:
                        await connection.send_resource_updated(uri)
                    except Exception:  # fan-out boundary: a gone client must not stop the others
                        self.resource_subscribers.discard(connection, uri)

    async def _on_subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams
    ) -> EmptyResult:
        uri = str(params.uri)
        match = RUN_URI.match(uri)
        if match is None:
            raise MCPError(
                code=INVALID_PARAMS, message=f"only run resources (workflow://runs/…) send updates, not {uri}"
            )
        if (problem := self._visible(match["run"])) is not None:
            raise MCPError(code=INVALID_PARAMS, message=problem)
        self.resource_subscribers.add(connection_of(ctx.session), uri)
        return EmptyResult()

    async def _on_unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        self.resource_subscribers.discard(connection_of(ctx.session), str(params.uri))
        return EmptyResult()

    # -- resources --------------------------------------------------------------------------
    def _register_resources(self) -> None:
        self.resource(
            "workflow://definitions/{name}",
            name="workflow-definition",
            title="Workflow definition",
            description="The source of a workflow visible from the server's working directory.",
            mime_type="text/javascript",
        )(self._definition_resource)
        self.resource(
            "workflow://runs/{runId}",
            name="run",
            title="Run snapshot",
            description="A bounded, redacted snapshot of a run (as workflow_run_status returns).",
            mime_type="application/json",
        )(self._run_resource)
        self.resource(
            "workflow://runs/{runId}/events{?after}",
            name="run-events",
            title="Run events",
            description="A page of the run's durable event log after the cursor `after` (default 0).",
            mime_type="application/json",
        )(self._events_resource)
        self.resource(
            "workflow://runs/{runId}/artifacts/{artifactId}",
            name="run-artifact",
            title="Run artifact",
            description="One artifact a run produced.",
            mime_type="application/octet-stream",
        )(self._artifact_resource)

    async def _definition_resource(self, name: str) -> str:
        try:
            workflow, _ = await self._load(name, None, None, None, check_syntax=False)
        except WorkflowMcpError as exc:
            raise ResourceNotFoundError(str(exc)) from exc
        return workflow.source

    async def _run_resource(self, runId: str) -> str:
        if (problem := self._visible(runId)) is not None:
            raise ResourceNotFoundError(problem)
        return await self._projection(
            runId, lambda: json.dumps(dump(snapshot_of(self.service.status(runId))), ensure_ascii=False)
        )

    async def _events_resource(self, runId: str, after: int = 0) -> str:
        if (problem := self._visible(runId)) is not None:
            raise ResourceNotFoundError(problem)

        def page() -> str:
            events = self.service.events(runId, after, 1000)
            cursor = events[-1].sequence if events else after
            return json.dumps(
                {
                    "runId": runId,
                    "events": [e.to_json() for e in events],
                    "nextCursor": cursor,
                    "hasMore": bool(self.service.events(runId, cursor, 1)),
                },
                ensure_ascii=False,
            )

        return await anyio.to_thread.run_sync(page)

    async def _artifact_resource(self, runId: str, artifactId: str) -> bytes:
        return (await self._artifact(runId, artifactId))[2]

    async def _artifact(self, run_id: str, artifact_id: str) -> tuple[str, str, bytes]:
        if (problem := self._visible(run_id)) is not None:
            raise ResourceNotFoundError(problem)
        found = self.service.artifact(run_id, artifact_id)
        if found is None:
            raise ResourceNotFoundError(f"run {run_id} has no artifact {artifact_id!r}")
        return found

    async def read_resource(
        self, uri: AnyUrl | str, context: Context[Any, Any] | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        """Artifacts keep their own MIME type (a template declares one type for all)."""
        match = RUN_URI.match(str(uri))
        if (
            match is not None
            and (rest := match["rest"] or "").startswith("artifacts/")
            and "/" not in rest[10:]
        ):
            _, mime, data = await self._artifact(match["run"], rest[10:])
            return [ReadResourceContents(content=data, mime_type=mime)]
        return await super().read_resource(uri, context)

    async def list_resources(self) -> list[MCPResource]:
        """The static resources plus the caller's recent runs."""
        resources = await super().list_resources()
        principal = _PRINCIPAL.get() or self.default_principal
        if principal is None:
            return resources
        runs = await anyio.to_thread.run_sync(
            lambda: (
                self.service.list_runs(50)
                if not principal.scoped
                else self.service.list_runs_of(principal.owner, 50)
            )
        )
        for r in runs:
            resources.append(
                MCPResource(
                    uri=f"workflow://runs/{r.run_id}",
                    name=f"run {r.run_id}",
                    title=f"{r.workflow} — {r.status}",
                    description=f"Run of {r.workflow} on {r.provider or 'unknown provider'}, started {r.created_at}.",
                    mime_type="application/json",
                )
            )
        return resources

    # -- prompt -----------------------------------------------------------------------------
    def _register_prompt(self) -> None:
        def author_workflow(
            task: Annotated[str | None, Field(description="What the workflow should do.")] = None,
        ) -> str:
            return author_workflow_guide(task)

        self.prompt(
            name="author-workflow",
            title="Author a workflow",
            description="A self-contained guide to writing a Claude Code-compatible workflow file for this "
            "runtime's profile, optionally for a given task.",
        )(author_workflow)

    # -- lifecycle --------------------------------------------------------------------------
    async def run_stdio_async(self) -> None:
        """Serve stdin/stdout with the SDK's transport; every request gets an answer, also one whose line
        the SDK cannot parse (:mod:`workflow_mcp.server._stdio`)."""
        await serve_stdio_lines(self._lowlevel_server)

    # -- unattended resume (serve --auto-resume) ---------------------------------------------
    def start_auto_resume(
        self, settings: AutoResumeSettings, *, owners: Collection[str | None] | None = None
    ) -> AutoResumer:
        """Resume this server's usage-limit-paused runs once their limit has reset, in a task the server
        owns (:meth:`aclose` stops it first). Each resume is the run's own continuation
        (``WorkflowService.resume``: its stored options, for its owner) under this server's policy: its
        ceiling on limits, its providers, its file scope for nested workflows, and its run cap (a
        server at its cap defers the resume, see :class:`~workflow_mcp._auto_resume.AutoResumer`).
        ``owners``: whose runs already paused in the store it takes on too (``None`` for the local user;
        see :class:`~workflow_mcp._auto_resume.AutoResumer`). Needs a running event loop."""
        resumer = self.auto_resumer(settings, owners=owners)
        self._auto_resume_task = asyncio.get_running_loop().create_task(resumer.run())
        return resumer

    def auto_resumer(
        self,
        settings: AutoResumeSettings,
        *,
        clock: Callable[[], float] | None = None,
        owners: Collection[str | None] | None = None,
    ) -> AutoResumer:
        """The :class:`~workflow_mcp._auto_resume.AutoResumer` :meth:`start_auto_resume` runs, not
        started: its resumes go through this server's policy (drive it with ``tick()``; ``clock`` is
        seconds since the epoch, default ``time.time``)."""
        return AutoResumer(self.service, settings, resume=self._resume_unattended, clock=clock, adopt=owners)

    async def _resume_unattended(self, run_id: str) -> str:
        owner = self.service.owner_of(run_id)
        principal = Principal(owner=owner, scoped=owner is not None)
        prepared = await self.service.prepare_resume(
            run_id, ceiling=self._ceiling(), child_check=self.children.of(owner)
        )
        prepared.exclusive = True  # servers sharing the store resume it once between them
        refused = self._disallowed(prepared.choice)
        busy = self._at_run_cap(principal)
        if refused is not None or busy is not None:
            await prepared.discard()
            if refused is not None:
                used = repr(prepared.choice.name) if prepared.choice.name else "the configured routing"
                raise InvalidInputError(f"the run uses provider {used}, which this server does not offer")
            raise ResumeDeferredError("this server is at its limit of concurrent runs")
        handle = self.service.launch(
            prepared, owner=owner, on_event=self._events_of(owner), child_check=self.children.of(owner)
        )
        self._publish_later(None, owner)
        self.service.prune_finished()
        return handle.run_id

    async def aclose(self, reason: str = "the MCP server stopped") -> list[str]:
        """Stop: cancel the runs this process still runs (they stay resumable). Returns their ids."""
        if self._auto_resume_task is not None:  # first, so nothing is resumed while runs are stopped
            self._auto_resume_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._auto_resume_task
        stopped = await self.service.shutdown(reason)
        for task in list(self._tasks):
            task.cancel()
        return stopped


async def _approval_resolver(
    ctx: Context[Any, Any],
    name: str | None = None,
    path: str | None = None,
    script: str | None = None,
    cwd: str | None = None,
    resumeFromRunId: str | None = None,
    idempotencyKey: str | None = None,
    provider: str = "",
    fakeScript: dict[str, Any] | None = None,
    args: Any = None,
    concurrency: int | None = None,
    tokenBudget: int | None = None,
    maxAgents: int | None = None,
    agentTimeoutMs: int | None = None,
    resumePolicy: str = "content",
) -> Any:
    """The ``Resolve`` of workflow_run's ``approval`` parameter (module level: the SDK inspects it
    before any server exists); delegates to the server the request reached."""
    server = ctx.mcp_server
    assert isinstance(server, WorkflowMcpServer)
    return await server._approval_for(
        ctx, name, path, script, cwd, resumeFromRunId, idempotencyKey, provider, fakeScript,
        args, concurrency, tokenBudget, maxAgents, agentTimeoutMs, resumePolicy,
    )  # fmt: skip


async def _confirmation_resolver(
    ctx: Context[Any, Any],
    approval: Annotated[ElicitationResult[SourceApproval], Resolve(_approval_resolver)],
    name: str | None = None,
    path: str | None = None,
    script: str | None = None,
    cwd: str | None = None,
    resumeFromRunId: str | None = None,
    provider: str | None = None,
    fakeScript: dict[str, Any] | None = None,
    concurrency: int | None = None,
    tokenBudget: int | None = None,
    maxAgents: int | None = None,
    agentTimeoutMs: int | None = None,
    confirmAgentCalls: int | None = None,
) -> Any:
    """The ``Resolve`` of workflow_run's ``confirmation`` parameter: after the source's approval, the
    cost preview the server's ``--confirm-above`` asks for (see ``_confirmation_for``)."""
    server = ctx.mcp_server
    assert isinstance(server, WorkflowMcpServer)
    limits = RunLimits(
        concurrency=concurrency,
        token_budget=tokenBudget,
        max_agents=maxAgents,
        agent_timeout_ms=agentTimeoutMs,
    )
    return await server._confirmation_for(
        ctx,
        approval,
        name,
        path,
        script,
        cwd,
        resumeFromRunId,
        provider,
        fakeScript,
        limits,
        confirmAgentCalls,
    )


async def _plan_approval_resolver(
    ctx: Context[Any, Any],
    name: str | None = None,
    path: str | None = None,
    script: str | None = None,
    cwd: str | None = None,
) -> Any:
    """The ``Resolve`` of workflow_plan's ``approval`` parameter."""
    server = ctx.mcp_server
    assert isinstance(server, WorkflowMcpServer)
    return await server._plan_approval_for(ctx, name, path, script, cwd)


def create_server(
    service: WorkflowService,
    *,
    policy: ServerPolicy | None = None,
    trust: SourceTrust | None = None,
    principal: Principal | None = LOCAL,
    scope: FileScope | None = None,
) -> WorkflowMcpServer:
    """The MCP server over ``service``.

    ``principal`` is who calls when the transport says nothing (stdio: the local user, who sees every
    run); the HTTP transport sets a per-request principal from the bearer token, and passes ``None``
    here so a request without one is refused. ``scope`` says which files tools may reach (default:
    anything but the service's state directory, as for stdio; :func:`run_server` confines HTTP servers
    to their project roots).
    """
    return WorkflowMcpServer(service, policy=policy, trust=trust, principal=principal, scope=scope)


# -- helpers -----------------------------------------------------------------------------------
def _principal_of_request(request: Any) -> Principal | None:
    scope = getattr(request, "scope", None)
    if not isinstance(scope, Mapping):
        return None
    state = scope.get("state")
    found = state.get(PRINCIPAL_SCOPE_KEY) if isinstance(state, Mapping) else None
    return found if isinstance(found, Principal) else None


def _run_params(
    ctx: Context[Any, Any],
    name: str | None,
    path: str | None,
    script: str | None,
    cwd: str | None,
    args: Any,
    provider: str | None,
    fake_script: Mapping[str, Any] | None,
    limits: tuple[int | None, ...],
    resume: str | None,
    policy: str,
) -> str:
    """The fingerprint of a workflow_run request an idempotency key is compared by: every argument but
    the key and ``waitMs``, defaults filled in (``args`` omitted is not ``args: null``)."""
    return request_fingerprint(
        {
            "tool": "workflow_run",
            "target": [name, path, script, cwd],
            "args": [args] if "args" in _raw_arguments(ctx) else [],
            "provider": [provider or None, fake_script],
            "limits": list(limits),
            "resume": [resume, policy],
        }
    )


def _raw_arguments(ctx: Context[Any, Any]) -> Mapping[str, Any]:
    params = ctx.request_context.params or {}
    raw = params.get("arguments") if isinstance(params, Mapping) else None
    return raw if isinstance(raw, Mapping) else {}


def _checkpoint_asker(
    ctx: Context[Any, Any], run_id: str, asking: set[asyncio.Task[Any]]
) -> Callable[[Mapping[str, Any]], Awaitable[bool | None]]:
    """An asker (service.answer_checkpoints) that puts a checkpoint to this client's user: accepted →
    the user's yes or no; declined, cancelled, failed or unanswered in :data:`CHECKPOINT_ELICIT_S` →
    ``None`` (the run pauses with ``checkpoint_required``). Never raises."""

    async def ask(context: Mapping[str, Any]) -> bool | None:
        what = context.get("command") or context.get("title") or context.get("tool")
        paths = context.get("paths") or []
        message = (
            f"An agent of run {run_id} ({context.get('label')}) asks permission to {context.get('tool')}: "
            f"{what}" + (f" (paths: {', '.join(map(str, paths))})" if paths else "") + ". Allow it?"
        )
        task = asyncio.ensure_future(ctx.elicit(message, CheckpointAnswer))
        asking.add(task)
        try:
            async with asyncio.timeout(CHECKPOINT_ELICIT_S):
                answer = await asyncio.shield(task)
        except (
            TimeoutError,
            MCPError,
            ValidationError,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
        ):
            return None
        finally:
            if not task.done():
                task.cancel()
            asking.discard(task)
        if isinstance(answer, AcceptedElicitation) and isinstance(answer.data, CheckpointAnswer):
            return answer.data.allow
        return None

    return ask


def _preapproval(workflow: Workflow, principal: Principal) -> str:
    """What the user runs to let ``workflow`` start without being asked (the isError text's last part)."""
    who = f" --client {principal.owner.removeprefix('http:')}" if principal.owner is not None else ""
    if workflow.path is not None:
        return (
            f"To pre-approve this exact source, the user runs `workflow-mcp approvals add{who} "
            f"{shlex.quote(workflow.path)}` (or starts the server with `--trust DIR` for its directory); "
            "then call workflow_run again."
        )
    # --allow-inline-scripts is refused over HTTP, so a scoped client is never offered it.
    local = (
        ""
        if principal.scoped
        else (
            " (or, for a server whose clients are the user's own agents, starts it with "
            "`workflow-mcp serve --allow-inline-scripts`)"
        )
    )
    return (
        f"To pre-approve this exact script, the user runs `workflow-mcp approvals add{who} --sha256 "
        f"{workflow.source_hash}`{local}; then call workflow_run again."
    )


def _can_elicit(ctx: Context[Any, Any]) -> bool:
    caps = ctx.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    # A bare `elicitation: {}` (before modes existed) means form support; url-only does not.
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def _progress_reporter(ctx: Context[Any, Any]) -> Callable[[RunState], Awaitable[None]] | None:
    """Progress notifications for one wait, or ``None`` when the client asked for none (then nothing
    is computed per batch). Each reads the run's state as the service keeps it (never the log)."""
    if not _asked_for_progress(ctx):
        return None

    async def report(state: RunState) -> None:
        c = state.counts()
        done = c["completed"] + c["cached"] + c["failed"] + c["cancelled"]
        total = done + c["running"] + c["queued"]
        where = f"phase {state.current_phase}: " if state.current_phase else ""
        await ctx.report_progress(
            state.last_sequence, None, f"{where}{done}/{total} agent calls done; last event {state.last_type}"
        )

    return report


def _asked_for_progress(ctx: Context[Any, Any]) -> bool:
    """Whether the request carries a ``progressToken`` (MCP "Progress": notifications only for a
    request that asked). In-process dispatch (the SDK's ``Client(server)``) hands the caller's progress
    callback to the request's dispatch context instead of sending a token; that counts as asking. The
    SDK has no public accessor for it, so the context is looked at through its wrappers (``_inner``);
    the in-memory progress tests keep this honest."""
    request = ctx.request_context
    if request.meta is not None and request.meta.get("progress_token") is not None:
        return True
    outbound = getattr(request.session, "_request_outbound", None)
    for _ in range(8):  # a few wrappers at most
        if getattr(outbound, "_on_progress", None) is not None:
            return True
        outbound = getattr(outbound, "_inner", None)
        if outbound is None:
            break
    return False


def _run_targets(name: str | None, path: str | None, script: str | None, resume: str | None) -> int:
    targets = sum(x is not None for x in (name, path, script))
    if targets > 1 or (targets == 0 and resume is None):
        raise MCPError(
            code=INVALID_PARAMS,
            message="give exactly one of name, path or script (or resumeFromRunId alone to rerun a stored run)",
        )
    return targets


def _one_target(name: str | None, path: str | None, script: str | None) -> None:
    if sum(x is not None for x in (name, path, script)) != 1:
        raise MCPError(code=INVALID_PARAMS, message="give exactly one of name, path or script")


def _result(text: str, model: BaseModel, *, is_error: bool = False) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=dump(model), is_error=is_error
    )


def _error_result(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def _load_error(exc: WorkflowMcpError) -> CallToolResult:
    if isinstance(exc, WorkflowLoadError):
        return _error_result(
            f"The workflow does not load: {exc}\nNext: fix that line (workflow_validate lists every problem "
            "with its rule), then call again."
        )
    return _error_result(f"{exc}\nNext: call workflow_list to see the workflows this server can find.")


def _describe_errors(errors: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for e in errors[:5]:
        loc = ".".join(str(p) for p in e.get("loc", ())) or "(arguments)"
        parts.append(f"{loc}: {e.get('msg')}")
    more = f" (+{len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(parts) + more


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hash_of(file: str | None, script: str | None) -> str | None:
    if script is not None:
        return _sha256(script.encode("utf-8", "surrogatepass"))
    if file is not None:
        with contextlib.suppress(OSError):
            return _sha256(Path(file).read_bytes())
    return None


_QUOTED = r"('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
_DEPENDENCY_PATTERNS = {
    "nested-workflow": re.compile(r"^workflow\(" + _QUOTED + r"\)"),
    "nested-script-path": re.compile(r"^workflow\(\{ scriptPath: " + _QUOTED + r" \}\)"),
    "agent-type": re.compile(r"agentType " + _QUOTED),
}


def _agent_line(agent: AgentTypeOut) -> str:
    if not agent.resolves:
        return f"{agent.name!r} (not found: agent() would reject it)"
    return f"{agent.name!r} ({agent.source}{', ' + agent.path if agent.path else ''})"


def _dependencies(workflow: Workflow) -> Dependencies:
    """Nested workflows, script paths and agent types, read from the loader's dependency warnings."""
    found: dict[str, list[str]] = {rule: [] for rule in _DEPENDENCY_PATTERNS}
    for w in workflow.warnings:
        pattern = _DEPENDENCY_PATTERNS.get(w.rule)
        match = pattern.search(w.message) if pattern is not None else None
        if match is not None:
            with contextlib.suppress(ValueError, SyntaxError):
                value = ast.literal_eval(match.group(1))
                if isinstance(value, str) and value not in found[w.rule]:
                    found[w.rule].append(value)
    return Dependencies(
        workflows=found["nested-workflow"],
        script_paths=found["nested-script-path"],
        agent_types=found["agent-type"],
    )


class DeleteAnswer(BaseModel):
    """What the user answers when asked to confirm a workflow_delete (form elicitation)."""

    confirm: bool = Field(description="Delete it (this cannot be undone).")


def _or_library_failure(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` widened to also accept a :class:`LibraryFailure` (the ``structuredContent`` of an
    ``isError`` result), so clients that check every result against the output schema (the MCP
    Inspector does, errors included) accept the typed reason: ``{"type": "object", "anyOf": [ok, failure]}``."""
    ok = dict(schema)
    failure = LibraryFailure.model_json_schema(by_alias=True)
    defs = {**ok.pop("$defs", {}), **failure.pop("$defs", {})}
    widened: dict[str, Any] = {"type": "object", "anyOf": [ok, failure]}
    if defs:
        widened["$defs"] = defs
    return widened


def _library_failure(exc: LibraryError) -> CallToolResult:
    """An ``isError`` result carrying the typed reason as ``structuredContent``."""
    failure = LibraryFailure(
        reason=exc.reason, message=exc.detail, errors=[ProblemOut.model_validate(e) for e in exc.errors]
    )
    return CallToolResult(
        content=[TextContent(type="text", text=f"{exc}")],
        structured_content=dump(failure),
        is_error=True,
    )


_DELETE_ASKED: ContextVar[Any] = ContextVar("workflow_mcp_delete_asked", default=None)
"""The delete target workflow_delete's resolver asked the user about (a ``DeletePrompt``), for the body."""


async def _delete_resolver(
    ctx: Context[Any, Any],
    name: str,
    version: str | None = None,
    draft: bool = False,
    personal: bool = False,
    confirmToken: str | None = None,
    cwd: str | None = None,
) -> Any:
    """The ``Resolve`` of workflow_delete's ``answer`` (module level, as for workflow_run's)."""
    server = ctx.mcp_server
    assert isinstance(server, WorkflowMcpServer)
    return await server._delete_question(ctx, name, version, draft, personal, confirmToken, cwd)
