"""isolation: 'worktree' — a git worktree per call, above the provider."""

from __future__ import annotations

import asyncio
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from workflow_mcp.definitions.load import load_workflow
from workflow_mcp.engine.run import RunOptions, run_workflow
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


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git("init", "-q", cwd=root)
    (root / "README").write_text("hello\n")
    git("add", ".", cwd=root)
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init", cwd=root)
    return root


def run(body: str, cwd: Path, worktrees: Path, provider: WritingProvider) -> tuple[str, object, list]:
    async def main() -> tuple[str, object, list]:
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


def test_after_a_crash_recovery_removes_unchanged_worktrees_and_keeps_changed_ones(
    repo: Path, tmp_path: Path
) -> None:
    from workflow_mcp.service import _prune_worktrees

    folder = tmp_path / "worktrees" / "run_dead"
    clean, dirty = folder / "ag_0001", folder / "ag_0002"
    for tree in (clean, dirty):
        git("worktree", "add", "--detach", str(tree), "HEAD", cwd=repo)
    (dirty / "half-done.txt").write_text("an agent's unfinished work\n")
    _prune_worktrees(folder)
    assert not clean.exists() and str(clean) not in git("worktree", "list", cwd=repo)
    assert (dirty / "half-done.txt").exists() and str(dirty) in git("worktree", "list", cwd=repo)
