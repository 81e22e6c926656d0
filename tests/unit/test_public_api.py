"""The public API is the package ``__all__``: exactly the curated names, each one resolving."""

from __future__ import annotations

import subprocess
import sys

import pytest

import workflow_mcp

CURATED = [
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


def test_all_is_exactly_the_curated_list() -> None:
    assert workflow_mcp.__all__ == CURATED


@pytest.mark.parametrize("name", CURATED)
def test_every_public_name_resolves(name: str) -> None:
    value = getattr(workflow_mcp, name)
    assert value is not None
    assert getattr(value, "__name__", name) == name


def test_every_public_error_derives_from_the_one_root() -> None:
    errors = [n for n in CURATED if n.endswith("Error")]
    assert errors
    for name in errors:
        assert issubclass(getattr(workflow_mcp, name), workflow_mcp.WorkflowMcpError)


def test_an_unknown_name_raises_attribute_error() -> None:
    with pytest.raises(AttributeError):
        _ = workflow_mcp.run_everything


def test_star_import_gives_exactly_the_public_names() -> None:
    namespace: dict[str, object] = {}
    exec("from workflow_mcp import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == sorted(CURATED)


def test_importing_the_package_stays_cheap_and_loads_no_runtime_module() -> None:
    code = (
        "import sys, workflow_mcp\n"
        "heavy = sorted(m for m in sys.modules if m.startswith('workflow_mcp.'))\n"
        "print(','.join(heavy))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == ""
