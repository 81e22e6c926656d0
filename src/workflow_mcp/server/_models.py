"""The structured results of the MCP tools: one pydantic model per tool, published as its
``outputSchema`` and returned as ``structuredContent``.

Wire names are camelCase (``runId``, ``tokenUsage``); Python code builds the models with snake_case
names. Optional fields are left out of the wire form when they were not set, so ``result`` appears
exactly when a run completed (a workflow may legitimately return ``null``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from pydantic.alias_generators import to_camel

from ..state import AgentStatus, RunStatus

__all__ = [
    "EVENT_ENVELOPE_SCHEMA",
    "AgentCall",
    "AgentFileProblemOut",
    "AgentTypeOut",
    "CancelOutcome",
    "Dependencies",
    "DiagnosticOut",
    "EventOut",
    "EventsPage",
    "PhaseOut",
    "PlanPreview",
    "ProblemOut",
    "ProviderOut",
    "ProvidersList",
    "RunError",
    "RunOutcome",
    "RunSnapshot",
    "RunStatus",
    "TokenUsageOut",
    "WarningOut",
    "WorkflowDescription",
    "WorkflowList",
    "WorkflowSummary",
    "WorkflowValidation",
    "dump",
]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


def dump(model: BaseModel) -> dict[str, Any]:
    """The wire form: camelCase keys, unset optional fields left out."""
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


# -- definitions -------------------------------------------------------------------------------
class WorkflowSummary(_Model):
    name: str
    description: str
    source: Literal["personal", "project", "plugin"] = Field(description="Where discovery found it.")
    path: str | None = Field(description="The file; null for a draft.")
    tags: list[str] = Field(
        description="Library tags of this exact source (kept in the sidecar, not the file)."
    )
    version: str | None = Field(default=None, description="Library version of this exact source, if any.")
    versions: list[str] = Field(
        default_factory=list, description="Stored library versions, highest semver precedence first."
    )
    category: str | None = Field(default=None, description="Library category of this exact source, if any.")
    kind: Literal["permanent", "draft"] = Field(
        default="permanent", description="draft: kept in the library only; run it as <name>@draft."
    )
    plugin: str | None = Field(
        default=None, description="For a plugin's workflow: the plugin's <plugin>@<marketplace> id."
    )
    plugin_version: str | None = Field(default=None, description="For a plugin's workflow: its version.")


class DiagnosticOut(_Model):
    path: str
    kind: str = Field(
        description="near-miss, invalid, shadowed, unreadable, plugin-disabled or plugin-broken."
    )
    message: str


class WorkflowList(_Model):
    cwd: str = Field(description="The directory discovery started from.")
    workflows: list[WorkflowSummary]
    diagnostics: list[DiagnosticOut]
    filters: dict[str, Any] = Field(default_factory=dict, description="The filters applied (trimmed).")
    hint: str | None = Field(default=None, description="When nothing matched: how to broaden the filters.")


class ProblemOut(_Model):
    rule: str = Field(description="Stable rule id, e.g. meta-first-statement or syntax.")
    message: str
    path: str | None = None
    line: int | None = Field(default=None, description="1-based.")
    column: int | None = Field(default=None, description="1-based, in UTF-16 code units.")


class WarningOut(_Model):
    rule: str
    message: str
    line: int | None = None
    column: int | None = None


class AgentTypeOut(_Model):
    name: str = Field(description="The agentType string, as the workflow passes it to agent().")
    line: int | None = None
    column: int | None = None
    resolves: bool = Field(description="Whether it names a built-in or an agent definition visible from cwd.")
    source: Literal["built-in", "project", "personal", "plugin"] | None = None
    path: str | None = Field(default=None, description="The .claude/agents/*.md file that defines it.")
    definition_line: int | None = Field(default=None, description="Line of the definition's `name:`.")


class AgentFileProblemOut(_Model):
    path: str
    line: int
    message: str = Field(description="Why the file defines no agent (Claude Code skips it silently).")


class WorkflowValidation(_Model):
    valid: bool
    meta: dict[str, Any] | None = Field(description="Normalized meta when the meta statement itself is fine.")
    errors: list[ProblemOut]
    warnings: list[WarningOut]
    source_hash: str | None = Field(default=None, description="SHA-256 of the source bytes.")
    agents: list[AgentTypeOut] = Field(
        default_factory=list,
        description="Each agentType it asks for, whether it resolves from cwd (or the server's directory) and from which file.",
    )
    agent_file_problems: list[AgentFileProblemOut] = Field(
        default_factory=list, description="Agent files that define no agent (file and line)."
    )


class Dependencies(_Model):
    workflows: list[str] = Field(description="Nested workflow names it calls (must be discoverable).")
    script_paths: list[str] = Field(description="Nested workflow({scriptPath}) files it calls.")
    agent_types: list[str] = Field(description="agentType values it asks for.")
    agents: list[AgentTypeOut] = Field(
        default_factory=list,
        description="Each agentType it asks for, whether it resolves from cwd (or the server's directory) and from which file.",
    )
    agent_file_problems: list[AgentFileProblemOut] = Field(
        default_factory=list, description="Agent files that define no agent (file and line)."
    )


class WorkflowDescription(_Model):
    name: str
    description: str
    meta: dict[str, Any] = Field(
        description="Normalized meta: name, description, title?, whenToUse?, phases?."
    )
    origin: Literal["personal", "project", "plugin", "file", "inline", "draft"]
    path: str | None
    source_hash: str
    profile: str
    dependencies: Dependencies
    warnings: list[WarningOut]
    sidecar: dict[str, Any] = Field(
        description="Library metadata kept outside the .js file (tags, versions)."
    )
    approved: bool = Field(description="Whether workflow_run may run this exact source without asking.")


# -- runs --------------------------------------------------------------------------------------
class TokenUsageOut(_Model):
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    replayed_output: int = Field(default=0, description="Output tokens of replayed (cached) calls.")


class RunError(_Model):
    name: str | None = None
    message: str


class CheckpointContext(_Model):
    checkpoint_id: str
    label: str | None = None
    tool: str
    title: str = ""
    command: str | None = None
    paths: list[str] = Field(default_factory=list)


class RunOutcome(_Model):
    run_id: str
    status: RunStatus
    terminal: bool = Field(
        description="True once the run has ended (completed, failed, cancelled, interrupted or paused); "
        "it never changes again under this run id (a resume starts a new run)."
    )
    workflow: str | None = None
    result: Any = Field(default=None, description="The workflow's return value; present only when completed.")
    error: RunError | None = None
    token_usage: TokenUsageOut | None = None
    logs: list[str] | None = Field(default=None, description="The last log lines (bounded).")
    deduplicated: bool | None = Field(
        default=None, description="True when idempotencyKey matched an earlier run (no new run started)."
    )
    resumed_from: str | None = None
    paused_reason: str | None = Field(
        default=None, description="Why a paused run paused (e.g. auth_required); resume it after fixing that."
    )
    checkpoint_context: CheckpointContext | None = Field(
        default=None,
        description="When paused with checkpoint_required: what an agent asks permission for. Answer it with "
        "workflow_run resumeFromRunId and checkpointReplies {checkpointId: allow|deny}.",
    )
    resets_at: str | None = Field(
        default=None,
        description="A run paused for a usage limit (usage_limit): when the provider said the limit resets "
        "(ISO 8601 UTC); resume it after that.",
    )


class PlanTokens(_Model):
    input: int
    output: int


class PlanWorkflow(_Model):
    name: str
    path: str | None = None
    source_hash: str


class PlanProvider(_Model):
    calls: int = Field(description="Agent calls routed to this provider.")
    models: dict[str, int] = Field(description="Calls per model as the provider is asked for it.")
    estimated_tokens: PlanTokens
    estimated_cost_usd: float | None = Field(description="null when a call's model has no price.")


class PlanBasis(_Model):
    history: int = Field(description="Calls estimated from past runs of this workflow.")
    history_runs: int
    defaults: int = Field(description="Calls estimated from the per-model defaults ([estimates]).")
    script: int = Field(description="Calls whose tokens the fake script gave.")


class PlanCap(_Model):
    limit: int
    admitted: int
    would_hit: bool


class PlanBudget(_Model):
    total: int | None
    estimated_spent: int
    would_hit: bool
    refused_calls: int


class PlanDryRun(_Model):
    status: str = Field(description="completed, failed, cancelled or timeout.")
    error: str | None = None


class PlanPreview(_Model):
    """workflow_plan: a run's cost preview, from a dry run on the synthesizing fake provider."""

    workflow: PlanWorkflow
    agent_calls: int = Field(description="agent() calls that would reach a provider.")
    refused_calls: int = Field(description="Calls refused before any provider (they count toward the cap).")
    provider_calls: int = Field(description="Provider calls, schema re-asks included.")
    by_phase: dict[str, int]
    by_provider: dict[str, PlanProvider]
    estimated_tokens: PlanTokens
    estimated_cost_usd: float | None
    unpriced_calls: int
    estimate_basis: PlanBasis
    cap: PlanCap
    budget: PlanBudget
    dry_run: PlanDryRun
    problems: list[str] = Field(
        description="What would refuse calls before they run (e.g. an unmapped alias)."
    )


class PhaseOut(_Model):
    title: str
    status: str


class AgentCall(_Model):
    agent_id: str
    label: str
    phase: str | None
    state: AgentStatus = Field(
        description="queued, running, completed, failed, cancelled (its run was cancelled or paused) or cached."
    )
    cached: bool
    preview: str | None = Field(description="A compact preview of the result or failure (bounded).")


class RunSnapshot(_Model):
    run_id: str
    status: RunStatus
    workflow: str | None
    started_at: str | None
    ended_at: str | None
    phases: list[PhaseOut]
    current_phase: str | None
    counts: dict[str, int] = Field(
        description="Agent calls by state: queued, running, completed, failed, cancelled, cached."
    )
    recent_calls: list[AgentCall]
    log_tail: list[str]
    token_usage: TokenUsageOut
    error: RunError | None = None
    paused_reason: str | None = None
    resets_at: str | None = Field(
        default=None,
        description="A run paused for a usage limit (usage_limit): when the provider said the limit resets "
        "(ISO 8601 UTC).",
    )
    last_sequence: int = Field(description="Sequence of the newest event: a cursor for workflow_run_events.")
    truncated: bool = Field(description="True when calls or log lines were dropped to respect the size caps.")


class EventOut(_Model):
    schema_version: int
    run_id: str
    sequence: int
    event_id: str
    timestamp: str
    type: str
    phase_id: str | None = None
    node_id: str | None = None
    agent_id: str | None = None
    parent_id: str | None = None
    payload: dict[str, Any]


EVENT_ENVELOPE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "One event: {schemaVersion, runId, sequence, eventId, timestamp, type, phaseId?, nodeId?, "
    "agentId?, parentId?, payload} (see EventOut).",
    "required": ["schemaVersion", "runId", "sequence", "eventId", "timestamp", "type", "payload"],
}
"""The published item schema of ``EventsPage.events``: the envelope's required keys only, so a client
that validates every structured result checks a page of 1,000 events cheaply (a ``$ref`` per event
made the Python SDK client four times slower than the server)."""


class EventsPage(_Model):
    run_id: str
    events: Annotated[
        list[dict[str, Any]],
        WithJsonSchema({"type": "array", "items": EVENT_ENVELOPE_SCHEMA}),
        Field(description="Event envelopes in sequence order."),
    ]
    next_cursor: int = Field(description="Pass as `after` to get the events that follow.")
    status: RunStatus
    terminal: bool
    has_more: bool = Field(description="More events are already stored after next_cursor.")


class CancelOutcome(_Model):
    run_id: str
    outcome: str = Field(
        description="cancelling (this server stops it), requested (another process owns it), closed (it "
        "had ended paused or interrupted and is now cancelled, never to be resumed) or the status it had "
        "already ended with."
    )
    status: RunStatus


class ProviderOut(_Model):
    name: str
    description: str
    available: bool = Field(description="Installed and usable here (its SDK or program was found).")
    ready: bool = Field(
        default=False, description="Available and not known to be logged out: a run on it can start."
    )
    logged_in: bool | None = Field(
        default=None, description="Whether it looks logged in (null: cannot be told, or not applicable)."
    )
    use: str | None = Field(
        default=None, description="The provider it runs: a named provider's `use`, a preset's `acp`."
    )
    origin: Literal["registered", "configured", "preset"] | None = Field(
        default=None,
        description="registered (an installed provider), configured (a [providers.NAME] table with use) "
        "or preset (a known ACP agent, usable when its program is on PATH).",
    )
    version: str | None = Field(default=None, description="The version of its program or SDK.")
    capabilities: dict[str, bool | None] | None = Field(
        default=None,
        description="The capability matrix: structuredOutput, images, sandboxControl, networkControl, "
        "sessionResume, tokenUsage, streaming, cancellation (null: not declared, or it depends on the agent).",
    )


class ProvidersList(_Model):
    providers: list[ProviderOut]
