"""The structured results of the workflow-library tools (``workflow_create``, ``workflow_create_draft``,
``workflow_get``, ``workflow_delete``), published as their output schemas. Wire names are camelCase."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ._models import ProblemOut, _Model

__all__ = ["DeleteOutcome", "DraftCreated", "LibraryFailure", "WorkflowCreated", "WorkflowDefinition"]

Reason = Literal[
    "not_found",
    "version_not_found",
    "already_exists",
    "invalid_source",
    "invalid_version",
    "invalid_input",
    "cancelled",
    "confirmation_invalid",
    "target_changed",
    "write_failed",
]


class LibraryFailure(_Model):
    """A refused or failed library call (an ``isError`` result): branch on ``reason``."""

    reason: Reason
    message: str
    errors: list[ProblemOut] = Field(
        default_factory=list, description="The loader's errors (invalid_source)."
    )


class WorkflowCreated(_Model):
    status: Literal["created"] = "created"
    name: str
    version: str = Field(description="Canonical semver (no leading v, no build metadata).")
    scope: Literal["project", "personal"]
    file: str = Field(description="Relative to the project directory, or ~/.claude/workflows/… for personal.")
    source_hash: str
    tags: list[str]
    category: str | None = None
    previous_version: str | None = Field(
        default=None, description="The version this one replaced in the file."
    )
    promoted_draft: str | None = Field(default=None, description="The id of the draft this create removed.")


class DraftCreated(_Model):
    status: Literal["created", "overwritten"]
    draft_id: str
    name: str
    run_as: str = Field(description="The workflow_run `name` that runs this draft: <name>@draft.")
    source_hash: str
    created_at: str
    updated_at: str
    expires_at: str | None = None
    notice: str


class WorkflowDefinition(_Model):
    name: str
    kind: Literal["permanent", "draft"]
    version: str | None = Field(description="null: a hand-written file the library has no version of.")
    current: bool = Field(description="Whether this is the source in the workflow file now.")
    scope: Literal["project", "personal"] | None
    file: str | None
    source: str
    source_hash: str
    tags: list[str]
    category: str | None
    author: str | None
    fields: dict[str, Any]
    versions: list[str] = Field(description="Every stored version, highest semver precedence first.")
    global_instructions: str | None = Field(description="The configured Markdown; null when absent.")
    draft_id: str | None = None
    created_at: str | None = None
    expires_at: str | None = None


class DeleteOutcome(_Model):
    status: Literal["deleted", "confirmation_required"]
    name: str
    kind: Literal["permanent", "draft"]
    version: str | None
    file: str | None
    removed_file: bool = False
    removed_directory: bool = False
    confirm_token: str | None = Field(
        default=None,
        description="confirmation_required: call workflow_delete again with this confirmToken (single "
        "use, valid 10 minutes) once the user agreed.",
    )
    expires_at: str | None = None
    message: str | None = None
