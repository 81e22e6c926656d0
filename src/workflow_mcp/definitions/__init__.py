"""Workflow definitions: load and validate one file, discover what is visible from a directory, the
agent definitions ``agentType`` names, and the compatibility profiles whose measured rules all follow.

Importing this package is cheap: tree-sitter and the Node realm are loaded on first use.
"""

from __future__ import annotations

from workflow_mcp.definitions.agents import AgentCatalog, AgentDefinition, AgentFileProblem, find_agents
from workflow_mcp.definitions.discover import (
    Diagnostic,
    DiscoveredWorkflow,
    Discovery,
    find_workflows,
    resolve_workflow,
)
from workflow_mcp.definitions.load import (
    Phase,
    ValidationReport,
    Workflow,
    WorkflowMeta,
    WorkflowWarning,
    load_workflow,
    validate_workflow,
)
from workflow_mcp.definitions.profile import DEFAULT_PROFILE, PROFILES, Profile, get_profile

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILES",
    "AgentCatalog",
    "AgentDefinition",
    "AgentFileProblem",
    "Diagnostic",
    "DiscoveredWorkflow",
    "Discovery",
    "Phase",
    "Profile",
    "ValidationReport",
    "Workflow",
    "WorkflowMeta",
    "WorkflowWarning",
    "find_agents",
    "find_workflows",
    "get_profile",
    "load_workflow",
    "resolve_workflow",
    "validate_workflow",
]
