"""Nested ``workflow()`` resolution (profile claude-code/2.1.332, PROFILE-FACTS "Nested workflow()").

``workflow(name, args)`` resolves through discovery (personal and project directories, nearest
wins); ``workflow({scriptPath}, args)`` loads a file (relative paths from the run's cwd). Each call of
the same child gets its own synthetic phase: ``▸ name``, then ``▸ name #2``, ``▸ name #3``…
Unknown names, unreadable paths and invalid children raise, which rejects the parent's call.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..definitions.profile import Profile
from ..errors import WorkflowLoadError, WorkflowNotFoundError

__all__ = ["ChildResolver", "ChildWorkflow"]


@dataclass(frozen=True)
class ChildWorkflow:
    name: str
    phase: str
    body: str
    path: str


class ChildResolver:
    def __init__(self, cwd: str, home: str | None, profile: Profile) -> None:
        self.cwd = cwd
        self.home = home
        self.profile = profile
        self._calls: dict[str, int] = {}

    def resolve(self, target: dict[str, Any]) -> ChildWorkflow:
        """Load the child named by ``target`` (``{"name"}`` or ``{"scriptPath"}``).

        Raises:
            WorkflowNotFoundError: unknown name or missing file.
            WorkflowLoadError: the child file breaks a loading rule.
        """
        from ..definitions.discover import resolve_workflow
        from ..definitions.load import load_workflow

        path = ""
        if "scriptPath" in target:
            path = os.path.join(self.cwd, os.path.expanduser(str(target["scriptPath"])))
            if not os.path.isfile(path):
                raise WorkflowNotFoundError(
                    f"workflow scriptPath {target['scriptPath']!r} is not a readable file"
                )
        try:
            if "scriptPath" in target:
                wf = load_workflow(path, profile=self.profile)
            else:
                wf = resolve_workflow(
                    str(target.get("name", "")), self.cwd, self.home, profile=self.profile
                ).workflow
                path = str(wf.path)
        except WorkflowLoadError as exc:
            raise WorkflowLoadError(
                exc.rule, f"nested workflow: {exc.detail}", path=exc.path, line=exc.line, column=exc.column
            ) from None
        n = self._calls.get(wf.meta.name, 0) + 1
        self._calls[wf.meta.name] = n
        phase = f"▸ {wf.meta.name}" if n == 1 else f"▸ {wf.meta.name} #{n}"
        return ChildWorkflow(name=wf.meta.name, phase=phase, body=wf.body, path=path)
