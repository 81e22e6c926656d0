"""Shared pieces of the library tests: a project, a personal home and a state directory under tmp,
and valid workflow sources of any name. Imported as ``library_kit``."""

from __future__ import annotations

import json
from pathlib import Path

from workflow_mcp.service import WorkflowService
from workflow_mcp.store.sqlite import SqliteStore


def source(name: str, description: str = "a library test workflow", body: str = "return args") -> str:
    """A valid workflow source named ``name`` (the meta values JSON-quoted, so any name is spelled exactly)."""
    return (
        f"export const meta = {{ name: {json.dumps(name)}, description: {json.dumps(description)} }}\n"
        f"{body}\n"
    )


class Places:
    """A project (with ``.git``), a personal Claude home and a state directory, all under tmp."""

    def __init__(self, root: Path) -> None:
        self.project = root / "project"
        self.home = root / "home"
        self.state = root / "state"
        for d in (self.project, self.home, self.state):
            d.mkdir(parents=True, exist_ok=True)
        (self.project / ".git").mkdir()

    @property
    def workflows(self) -> Path:
        return self.project / ".claude" / "workflows"

    @property
    def personal(self) -> Path:
        return self.home / ".claude" / "workflows"

    def service(self) -> WorkflowService:
        return WorkflowService(
            SqliteStore(self.state / "state.db"), cwd=str(self.project), home=str(self.home)
        )
