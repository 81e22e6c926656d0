"""The server reaches the runtime only through WorkflowService (DESIGN.md, "Import rules"): no module
of ``workflow_mcp.server`` imports the engine, the realm or the store."""

from __future__ import annotations

import ast
from pathlib import Path

import workflow_mcp.server

FORBIDDEN = ("workflow_mcp.engine", "workflow_mcp.realm", "workflow_mcp.store")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = "workflow_mcp.server"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.add(module)
    return found


def test_server_modules_import_neither_engine_nor_realm_nor_store() -> None:
    folder = Path(workflow_mcp.server.__file__).parent
    offenders = {
        f"{path.name}: {module}"
        for path in folder.glob("*.py")
        for module in _imports(path)
        if module.startswith(FORBIDDEN)
    }
    assert offenders == set()
