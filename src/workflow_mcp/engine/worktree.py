"""Per-call git worktrees for ``isolation: 'worktree'`` (created above the provider).

Each such agent() call gets a fresh detached worktree of the run's repository at ``HEAD``; the
provider works there (``AgentRequest.cwd``). Afterwards one rule, :func:`settle_worktree`, decides its
fate: a worktree git confirms unchanged (no modified or untracked file, ``HEAD`` still at the commit it
was created from) is removed; any other one (new commits, changed files, or git could not tell) is kept
and its path reported, so nothing an agent wrote is ever thrown away. The rule is the same when the
call ends (:func:`finish_worktree`) and after a crash (:func:`settle_left_worktrees`, which the
service's recovery calls for a run whose process died). Outside a git repository the call fails with a
clear error (profile claude-code/2.1.332 fails the same way). The run's executor calls
:func:`create_worktree` and :func:`finish_worktree` where the call runs: in this process, or on the
Ray node that runs it (:mod:`~workflow_mcp.engine.executor`).

Layout under the worktree root::

    <root>/<run_id>/<agent_id>/            the worktree
    <root>/<run_id>/<agent_id>.base.json   {"root": repository, "base": commit}, written before the
                                           worktree is added, so a crash never leaves one unjudgeable;
                                           removed with the worktree, marked "kept" when it is kept
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import WorkflowMcpError

__all__ = [
    "Worktree",
    "WorktreeError",
    "create_worktree",
    "finish_worktree",
    "settle_left_worktrees",
    "settle_worktree",
]

#: Seconds one git command may take before the worktree is judged as git could not tell (kept).
GIT_TIMEOUT_S = 120

_BASE_SUFFIX = ".base.json"


class WorktreeError(WorkflowMcpError):
    """Raised when a worktree cannot be created (not a git repository, git missing, git failed)."""


@dataclass(frozen=True)
class Worktree:
    """A created worktree: ``path``, the repository ``root`` and the ``base`` commit it started at."""

    path: str
    root: str
    base: str


def _git(*argv: str, cwd: str) -> tuple[int, str, str]:
    """``(exit status, stdout, stderr)`` of one git command (status 127 when git cannot run at all)."""
    try:
        done = subprocess.run(
            ["git", *argv],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return 127, "", str(exc)
    return done.returncode, done.stdout.strip(), done.stderr.strip()


def _base_file(path: Path) -> Path:
    return path.with_name(path.name + _BASE_SUFFIX)


def _create(cwd: str, root_dir: str, run_id: str, agent_id: str) -> Worktree:
    code, top, err = _git("rev-parse", "--show-toplevel", cwd=cwd)
    if code == 127:
        raise WorktreeError(f"isolation: 'worktree' needs git, which could not run: {err}")
    if code != 0 or not top:
        raise WorktreeError(
            f"isolation: 'worktree' needs a git repository, and {cwd} is not inside one; "
            "run the workflow from a repository or drop the isolation option"
        )
    code, base, _ = _git("rev-parse", "HEAD", cwd=top)
    if code != 0:
        raise WorktreeError(f"isolation: 'worktree' needs a commit to start from; {top} has none yet")
    path = Path(root_dir, run_id, agent_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # The base is on disk before the worktree exists: after a crash, recovery compares against it.
        _base_file(path).write_text(json.dumps({"root": top, "base": base}), encoding="utf-8")
    except OSError as exc:
        raise WorktreeError(
            f"isolation: 'worktree' could not prepare {path.parent} for the call's worktree: {exc}"
        ) from exc
    code, _, err = _git("worktree", "add", "--detach", str(path), base, cwd=top)
    if code != 0:
        with contextlib.suppress(OSError):
            _base_file(path).unlink()
        raise WorktreeError(f"git worktree add failed for {path}: {err}")
    return Worktree(path=str(path), root=top, base=base)


async def create_worktree(cwd: str, root_dir: str, run_id: str, agent_id: str) -> Worktree:
    """Create ``<root_dir>/<run_id>/<agent_id>`` as a detached worktree of ``cwd``'s repository at its
    ``HEAD``, recording that commit next to it (git runs in a worker thread).

    Raises:
        WorktreeError: git cannot run, ``cwd`` is not inside a git repository, the repository has no
            commit, or ``git worktree add`` failed.
    """
    return await asyncio.to_thread(_create, cwd, root_dir, run_id, agent_id)


def settle_worktree(tree: Worktree) -> dict[str, object]:
    """The one rule for a finished (or abandoned) worktree: remove it when git confirms the agent
    changed nothing — a clean status and ``HEAD`` still at ``tree.base`` — and keep it otherwise (new
    commits, modified or untracked files, or a git command that failed). Blocking (runs git).

    Returns the event payload part ``{"path", "changed", "kept", "head"?, "error"?}``: ``changed`` is
    ``True`` for a kept worktree (an agent's work, or work git could not rule out).
    """
    s_code, status, s_err = _git("status", "--porcelain", "--untracked-files=all", cwd=tree.path)
    h_code, head, h_err = _git("rev-parse", "HEAD", cwd=tree.path)
    if s_code != 0 or h_code != 0 or not head:
        _mark_kept(tree)
        return {"path": tree.path, "changed": True, "kept": True, "error": s_err or h_err or "git failed"}
    if status or head != tree.base:
        _mark_kept(tree)
        return {"path": tree.path, "changed": True, "kept": True, "head": head}
    code, _, err = _git("worktree", "remove", "--force", tree.path, cwd=tree.root)
    if code != 0:
        _mark_kept(tree)
        return {"path": tree.path, "changed": False, "kept": True, "error": err}
    _forget_base(tree)
    return {"path": tree.path, "changed": False, "kept": False}


def _forget_base(tree: Worktree) -> None:
    with contextlib.suppress(OSError):
        _base_file(Path(tree.path)).unlink()


def _mark_kept(tree: Worktree) -> None:
    """Record that ``tree`` was judged and kept (its event says where), so recovery does not report
    it a second time."""
    with contextlib.suppress(OSError):
        _base_file(Path(tree.path)).write_text(
            json.dumps({"root": tree.root, "base": tree.base, "kept": True}), encoding="utf-8"
        )


async def finish_worktree(tree: Worktree) -> dict[str, object]:
    """:func:`settle_worktree` in a worker thread, for the engine when the call ends."""
    return await asyncio.to_thread(settle_worktree, tree)


def settle_left_worktrees(
    root_dir: str | os.PathLike[str], run_id: str
) -> list[tuple[str, dict[str, object]]]:
    """After a crash: pass every worktree run ``run_id`` left under ``root_dir`` through
    :func:`settle_worktree`, then remove the run's folder if nothing is left in it. Blocking (runs
    git). A worktree without its base record (made by an older release) is kept: whether its agent
    committed cannot be told.

    Returns ``(agent_id, payload)`` for each worktree judged now, payloads as :func:`settle_worktree`'s
    (one the run's own call already judged and kept is left alone: its event reported it).
    """
    folder = Path(root_dir, run_id)
    if not folder.is_dir():
        return []
    out: list[tuple[str, dict[str, object]]] = []
    for entry in sorted(folder.iterdir()):
        if entry.name.endswith(_BASE_SUFFIX):
            tree_path = entry.with_name(entry.name[: -len(_BASE_SUFFIX)])
            if not tree_path.exists():  # the crash came before `git worktree add` finished
                with contextlib.suppress(OSError):
                    entry.unlink()
            continue
        if not entry.is_dir():
            continue
        record = _record(entry)
        if record is None:
            unknown = "no record of the commit it started from, so whether its agent committed is unknown"
            out.append((entry.name, {"path": str(entry), "changed": True, "kept": True, "error": unknown}))
        elif not record[1]:
            out.append((entry.name, settle_worktree(record[0])))
    with contextlib.suppress(OSError):
        folder.rmdir()
    return out


def _record(path: Path) -> tuple[Worktree, bool] | None:
    """``(the worktree at path as its base record describes it, whether it was already kept)``, or
    ``None`` without a usable record."""
    try:
        record = json.loads(_base_file(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    root, base = record.get("root"), record.get("base")
    if not isinstance(root, str) or not isinstance(base, str) or not base:
        return None
    return Worktree(path=str(path), root=root, base=base), record.get("kept") is True
