"""Per-call git worktrees for ``isolation: 'worktree'`` (created above the provider).

Each such agent() call gets a fresh detached worktree of the run's repository at ``HEAD``; the
provider works there (``AgentRequest.cwd``). Afterwards an unchanged worktree is removed, and a
changed one (new commits, or modified/untracked files) is kept and its path reported in the call's
event, so nothing an agent wrote is ever thrown away. Outside a git repository the call fails
with a clear error (profile claude-code/2.1.332 fails the same way).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import WorkflowMcpError

__all__ = ["Worktree", "WorktreeError", "create_worktree", "finish_worktree"]


class WorktreeError(WorkflowMcpError):
    """Raised when a worktree cannot be created (not a git repository, git missing, git failed)."""


@dataclass(frozen=True)
class Worktree:
    """A created worktree: ``path``, the repository ``root`` and the ``base`` commit it started at."""

    path: str
    root: str
    base: str


async def _git(*argv: str, cwd: str) -> tuple[int, str, str]:
    try:
        proc = await asyncio.create_subprocess_exec(
            "git",
            *argv,
            cwd=cwd,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )
    except OSError as exc:
        raise WorktreeError(f"isolation: 'worktree' needs git, which could not run: {exc}") from exc
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    return proc.returncode or 0, out.decode().strip(), err.decode().strip()


async def create_worktree(cwd: str, root_dir: str, run_id: str, agent_id: str) -> Worktree:
    """Create ``<root_dir>/<run_id>/<agent_id>`` as a detached worktree of ``cwd``'s repository.

    Raises:
        WorktreeError: ``cwd`` is not inside a git repository, the repository has no commit, or
            ``git worktree add`` failed.
    """
    code, top, _ = await _git("rev-parse", "--show-toplevel", cwd=cwd)
    if code != 0 or not top:
        raise WorktreeError(
            f"isolation: 'worktree' needs a git repository, and {cwd} is not inside one; "
            "run the workflow from a repository or drop the isolation option"
        )
    code, base, _ = await _git("rev-parse", "HEAD", cwd=top)
    if code != 0:
        raise WorktreeError(f"isolation: 'worktree' needs a commit to start from; {top} has none yet")
    path = Path(root_dir, run_id, agent_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    code, _, err = await _git("worktree", "add", "--detach", str(path), base, cwd=top)
    if code != 0:
        raise WorktreeError(f"git worktree add failed for {path}: {err}")
    return Worktree(path=str(path), root=top, base=base)


async def finish_worktree(tree: Worktree) -> dict[str, object]:
    """Remove ``tree`` when the agent changed nothing; keep it otherwise.

    Returns the event payload part ``{"path", "changed", "kept", "head"?}``.
    """
    _, status, _ = await _git("status", "--porcelain", "--untracked-files=all", cwd=tree.path)
    _, head, _ = await _git("rev-parse", "HEAD", cwd=tree.path)
    changed = bool(status) or (bool(head) and head != tree.base)
    if changed:
        return {"path": tree.path, "changed": True, "kept": True, "head": head}
    code, _, err = await _git("worktree", "remove", "--force", tree.path, cwd=tree.root)
    return {"path": tree.path, "changed": False, "kept": code != 0, **({"error": err} if code else {})}
