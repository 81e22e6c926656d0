"""isolation: 'worktree' — a git worktree per call, above the provider."""

from __future__ import annotations

import asyncio
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp.definitions.load import load_workflow
from workflow_mcp.engine.executor import LocalExecutor
from workflow_mcp.engine.run import RunOptions, run_workflow
from workflow_mcp.engine.worktree import Worktree, create_worktree, settle_left_worktrees, settle_worktree
from workflow_mcp.events import Event
from workflow_mcp.providers.base import AgentContext, AgentRequest, AgentResult, ProviderCapabilities


@dataclass
class WritingProvider:
    """Writes a file in its working directory when the prompt says so; records every cwd."""

    name: str = "writer"
    capabilities: ProviderCapabilities = field(default_factory=ProviderCapabilities)
    cwds: list[str] = field(default_factory=list)

    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        assert request.cwd is not None
        self.cwds.append(request.cwd)
        if request.prompt.startswith("write"):
            Path(request.cwd, "agent-output.txt").write_text("written by the agent\n")
        if request.prompt.startswith("commit"):
            commit(Path(request.cwd))
        return AgentResult(text=request.prompt)

    async def aclose(self) -> None:
        pass  # holds nothing


BODY = (
    "export const meta = { name: 'wt', description: 'worktree calls' }\n"
    "const a = await agent('write a file', { label: 'writer', isolation: 'worktree' })\n"
    "const b = await agent('read only', { label: 'reader', isolation: 'worktree' })\n"
    "const c = await agent('plain call', { label: 'plain' })\n"
    "return [a, b, c]\n"
)


def git(*argv: str, cwd: Path) -> str:
    return subprocess.run(["git", *argv], cwd=cwd, check=True, capture_output=True, text=True).stdout


def commit(tree: Path) -> None:
    """Do what a committing agent does: write a file and commit it, leaving a clean tree."""
    (tree / "feature.txt").write_text("the agent's feature\n")
    git("add", "feature.txt", cwd=tree)
    git(
        "-c",
        "user.name=agent",
        "-c",
        "user.email=agent@example.com",
        "commit",
        "-qm",
        "the agent's work",
        cwd=tree,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git("init", "-q", cwd=root)
    (root / "README").write_text("hello\n")
    git("add", ".", cwd=root)
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init", cwd=root)
    return root


def run(body: str, cwd: Path, worktrees: Path, provider: WritingProvider) -> tuple[str, object, list[Event]]:
    async def main() -> tuple[str, object, list[Event]]:
        handle = run_workflow(
            load_workflow(source=body),
            provider=provider,
            options=RunOptions(cwd=str(cwd), worktree_root=str(worktrees)),
        )
        status = await asyncio.wait_for(handle.wait(), 60)
        result = await handle.result() if status == "completed" else None
        return status, result, handle.log.events

    return asyncio.run(main())


def test_a_changed_worktree_is_kept_and_its_path_is_in_an_event_while_an_unchanged_one_is_removed(
    repo: Path, tmp_path: Path
) -> None:
    provider = WritingProvider()
    status, result, events = run(BODY, repo, tmp_path / "wt", provider)
    assert status == "completed" and result == ["write a file", "read only", "plain call"]
    writer_cwd, reader_cwd, plain_cwd = provider.cwds
    assert plain_cwd == str(repo)
    assert writer_cwd != str(repo) and reader_cwd != str(repo)
    kept = [e for e in events if e.type == "artifact.created"]
    assert len(kept) == 1 and kept[0].payload["path"] == writer_cwd and kept[0].payload["changed"] is True
    assert Path(writer_cwd, "agent-output.txt").read_text() == "written by the agent\n"
    assert not Path(reader_cwd).exists()  # unchanged: removed
    assert writer_cwd in git("worktree", "list", cwd=repo) and reader_cwd not in git(
        "worktree", "list", cwd=repo
    )
    assert not (repo / "agent-output.txt").exists()  # the repository itself is untouched


class OwningExecutor:
    """A local executor that keeps the worktrees it was asked to make and to judge, and the cwd of
    every attempt it ran."""

    def __init__(self) -> None:
        self.made: list[tuple[str, str]] = []
        self.judged: list[tuple[str, dict[str, object]]] = []
        self.cwds: list[str | None] = []

    async def execute(self, provider: Any, request: AgentRequest, context: AgentContext) -> AgentResult:
        self.cwds.append(request.cwd)
        return await LocalExecutor().execute(provider, request, context)

    async def create_worktree(self, cwd: str, root_dir: str, run_id: str, agent_id: str) -> Worktree:
        tree = await LocalExecutor().create_worktree(cwd, root_dir, run_id, agent_id)
        self.made.append((agent_id, tree.path))
        return tree

    async def finish_worktree(self, tree: Worktree) -> dict[str, object]:
        info = await LocalExecutor().finish_worktree(tree)
        self.judged.append((tree.path, info))
        return info


def test_the_runs_executor_makes_and_judges_every_worktree_and_its_attempts_run_there(
    repo: Path, tmp_path: Path
) -> None:
    executor = OwningExecutor()

    async def main() -> tuple[object, list[Event]]:
        handle = run_workflow(
            load_workflow(source=BODY),
            provider=WritingProvider(),
            options=RunOptions(cwd=str(repo), worktree_root=str(tmp_path / "wt")),
            executor=executor,
        )
        return await asyncio.wait_for(handle.result(), 60), handle.log.events

    result, events = asyncio.run(main())
    assert result == ["write a file", "read only", "plain call"]
    (writer, written), (reader, read) = executor.made
    assert (writer, reader) == ("ag_0001", "ag_0002")
    assert written == str(tmp_path / "wt" / events[0].run_id / "ag_0001")
    assert executor.cwds == [written, read, str(repo)]  # each attempt in its call's worktree
    assert [(path, info["kept"]) for path, info in executor.judged] == [(written, True), (read, False)]
    (kept,) = [e.payload for e in events if e.type == "artifact.created"]
    assert kept == {"kind": "worktree", "label": "writer", **executor.judged[0][1]}


def test_a_worktree_call_outside_a_git_repository_rejects_with_a_clear_message(tmp_path: Path) -> None:
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    body = (
        "export const meta = { name: 'wt', description: 'd' }\n"
        "try { await agent('write', { isolation: 'worktree' }); return 'ran' } catch (e) { return e.message }\n"
    )
    provider = WritingProvider()
    status, result, _ = run(body, plain, tmp_path / "wt", provider)
    assert status == "completed"
    assert isinstance(result, str) and "git repository" in result and str(plain) in result
    assert provider.cwds == []  # the provider was never called


def test_a_worktree_whose_agent_committed_and_left_a_clean_tree_is_kept_with_its_new_head(
    repo: Path, tmp_path: Path
) -> None:
    provider = WritingProvider()
    body = (
        "export const meta = { name: 'wt', description: 'a committing agent' }\n"
        "return await agent('commit a file', { label: 'committer', isolation: 'worktree' })\n"
    )
    status, _, events = run(body, repo, tmp_path / "wt", provider)
    assert status == "completed"
    (tree,) = provider.cwds
    assert git("status", "--porcelain", cwd=Path(tree)) == ""  # clean: only the commit says it changed
    kept = [e.payload for e in events if e.type == "artifact.created"]
    head = git("rev-parse", "HEAD", cwd=Path(tree)).strip()
    assert kept == [
        {"kind": "worktree", "label": "committer", "path": tree, "changed": True, "kept": True, "head": head}
    ]
    assert git("log", "-1", "--format=%s", head, cwd=repo).strip() == "the agent's work"


def test_after_a_crash_left_worktrees_go_through_the_same_rule_as_a_finished_call(
    repo: Path, tmp_path: Path
) -> None:
    root = tmp_path / "worktrees"

    async def create() -> list[Worktree]:
        return [await create_worktree(str(repo), str(root), "run_dead", f"ag_000{i}") for i in (1, 2, 3)]

    committed, dirty, clean = asyncio.run(create())
    commit(Path(committed.path))
    Path(dirty.path, "half-done.txt").write_text("an agent's unfinished work\n")
    legacy = root / "run_dead" / "ag_0004"  # an older release's worktree: no record of its base commit
    git("worktree", "add", "--detach", str(legacy), "HEAD", cwd=repo)

    settled = dict(settle_left_worktrees(root, "run_dead"))

    assert settled["ag_0001"]["kept"] and settled["ag_0001"]["head"] != committed.base
    assert settled["ag_0002"]["kept"] and settled["ag_0002"]["head"] == dirty.base
    assert settled["ag_0003"] == {"path": clean.path, "changed": False, "kept": False}
    legacy_outcome = settled["ag_0004"]
    assert legacy_outcome["kept"] and "whether its agent committed is unknown" in str(legacy_outcome["error"])
    listed = git("worktree", "list", cwd=repo)
    assert committed.path in listed and dirty.path in listed and clean.path not in listed
    assert not Path(clean.path).exists() and Path(dirty.path, "half-done.txt").exists()
    # A second pass (another recovery) judges nothing again: what was kept stays, unreported twice.
    assert [a for a, _ in settle_left_worktrees(root, "run_dead")] == ["ag_0004"]


def test_a_worktree_git_cannot_read_is_kept_not_removed(repo: Path, tmp_path: Path) -> None:
    async def create() -> Worktree:
        return await create_worktree(str(repo), str(tmp_path / "wt"), "run_x", "ag_0001")

    tree = asyncio.run(create())
    # The worktree's link to its repository is broken: git can say nothing about it.
    Path(tree.path, ".git").write_text("gitdir: /nonexistent\n")
    info = settle_worktree(tree)
    assert info["kept"] is True and info["changed"] is True and info.get("error")
    assert Path(tree.path).is_dir()
