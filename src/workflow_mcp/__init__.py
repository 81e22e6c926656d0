"""workflow-mcp: run Claude Code dynamic-workflow files unchanged on any agent provider, durably.

The public API (guarded by a test; everything else is internal)::

    load_workflow, validate_workflow, find_workflows, resolve_workflow   definitions
    find_agents                                                           agent definitions (agentType)
    run_workflow, RunHandle, RunOptions                                   the engine
    project_state, RunState, Event                                        events and state
    AgentProvider, AgentRequest, AgentResult, TokenUsage, FakeProvider    providers
    WorkflowService, SqliteStore, MemoryStore                             runs that outlive a process
    WorkflowMcpError and its subclasses                                   errors
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "AgentProvider",
    "AgentRequest",
    "AgentResult",
    "Event",
    "FakeProvider",
    "InvalidInputError",
    "MemoryStore",
    "RealmError",
    "RunFailedError",
    "RunHandle",
    "RunOptions",
    "RunState",
    "SqliteStore",
    "TokenUsage",
    "WorkflowLoadError",
    "WorkflowMcpError",
    "WorkflowNotFoundError",
    "WorkflowService",
    "find_agents",
    "find_workflows",
    "load_workflow",
    "project_state",
    "resolve_workflow",
    "run_workflow",
    "validate_workflow",
]

# Lazy attribute access keeps `import workflow_mcp` (and the CLI's start-up) cheap.
_WHERE = {
    "AgentProvider": "providers.base",
    "AgentRequest": "providers.base",
    "AgentResult": "providers.base",
    "TokenUsage": "providers.base",
    "FakeProvider": "providers.fake",
    "Event": "events",
    "RunState": "state",
    "project_state": "state",
    "RunHandle": "engine.run",
    "RunOptions": "engine.run",
    "run_workflow": "engine.run",
    "WorkflowService": "service",
    "SqliteStore": "store.sqlite",
    "MemoryStore": "store.memory",
    "find_agents": "definitions.agents",
    "find_workflows": "definitions.discover",
    "resolve_workflow": "definitions.discover",
    "load_workflow": "definitions.load",
    "validate_workflow": "definitions.load",
    "InvalidInputError": "errors",
    "RealmError": "errors",
    "RunFailedError": "errors",
    "WorkflowLoadError": "errors",
    "WorkflowMcpError": "errors",
    "WorkflowNotFoundError": "errors",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'workflow_mcp' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"workflow_mcp.{where}"), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from .definitions.agents import find_agents
    from .definitions.discover import find_workflows, resolve_workflow
    from .definitions.load import load_workflow, validate_workflow
    from .engine.run import RunHandle, RunOptions, run_workflow
    from .errors import (
        InvalidInputError,
        RealmError,
        RunFailedError,
        WorkflowLoadError,
        WorkflowMcpError,
        WorkflowNotFoundError,
    )
    from .events import Event
    from .providers.base import AgentProvider, AgentRequest, AgentResult, TokenUsage
    from .providers.fake import FakeProvider
    from .service import WorkflowService
    from .state import RunState, project_state
    from .store.memory import MemoryStore
    from .store.sqlite import SqliteStore
