"""After a SIGKILL: what the next command says, and what becomes of the killed run's worktrees.

The agent is a real plugin provider (``tests/fixtures/agent_plugin``, found through the
``workflow_mcp.providers`` entry point) that commits, writes or does nothing in its worktree and then
holds the call; the test kills the real CLI once every agent says it holds its worktree.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

CLI = str(Path(sys.executable).with_name("workflow-mcp"))
PLUGIN = Path(__file__).resolve().parents[1] / "fixtures" / "agent_plugin"
BOUND_S = 60

WORKFLOW = """export const meta = { name: 'crash-worktrees', description: 'three agents in worktrees, killed mid-run' }
return await parallel([
  () => agent('commit', { label: 'committer', isolation: 'worktree' }),
  () => agent('write', { label: 'writer', isolation: 'worktree' }),
  () => agent('idle', { label: 'idle', isolation: 'worktree' }),
])
"""


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
    (tmp_path / "home").mkdir()
    return root


def env(tmp_path: Path) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(PLUGIN), os.environ.get("PYTHONPATH", "")) if p)
    return {
        **os.environ,
        "WORKFLOW_MCP_HOME": str(tmp_path / "state"),
        "HOME": str(tmp_path / "home"),
        "PYTHONPATH": path,
    }


def cli(*argv: str, cwd: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, *argv], cwd=cwd, env=env(tmp_path), capture_output=True, text=True, timeout=BOUND_S
    )


def killed_run(repo: Path, tmp_path: Path) -> tuple[str, dict[str, str]]:
    """Run the workflow through the CLI and SIGKILL it once all three agents hold their worktrees.
    Returns the run id and each agent's worktree by label."""
    wf = tmp_path / "crash.js"
    wf.write_text(WORKFLOW)
    proc = subprocess.Popen(
        [CLI, "run", str(wf), "--provider", "committer", "--concurrency", "3", "--events", "jsonl"],
        cwd=repo,
        env=env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    run_id: str | None = None
    trees: dict[str, str] = {}
    seen: list[str] = []
    deadline = time.monotonic() + BOUND_S
    try:
        while run_id is None or len(trees) < 3:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line is not None, f"the run ended before it was killed: {''.join(seen)}"
            seen.append(line)
            if line.startswith("{") and json.loads(line)["type"] == "run.started":
                run_id = json.loads(line)["runId"]
            elif line.startswith("agent "):
                _, label, _, where = line.split()
                trees[label] = where
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=BOUND_S)
    return run_id, trees


def test_after_a_crash_the_next_command_keeps_worktrees_with_commits_or_changes_and_says_which_runs_it_marked(
    repo: Path, tmp_path: Path
) -> None:
    run_id, trees = killed_run(repo, tmp_path)
    base = git("rev-parse", "HEAD", cwd=repo).strip()
    assert git("status", "--porcelain", cwd=Path(trees["committer"])) == ""  # committed, then clean

    listed = cli("runs", "list", cwd=repo, tmp_path=tmp_path)

    assert listed.returncode == 0 and f"{run_id}\tinterrupted" in listed.stdout
    notice = [line for line in listed.stderr.splitlines() if "interrupted" in line]
    assert notice == [
        f"workflow-mcp: marked 1 run interrupted (its process died): {run_id}; resume it with "
        f"`workflow-mcp resume {run_id}`; kept 2 worktrees an agent changed or committed in: "
        f"{trees['committer']}, {trees['writer']}"
    ]
    worktrees = git("worktree", "list", cwd=repo)
    assert trees["committer"] in worktrees and trees["writer"] in worktrees
    assert trees["idle"] not in worktrees and not Path(trees["idle"]).exists()  # unchanged: removed
    committed = git("rev-parse", "HEAD", cwd=Path(trees["committer"])).strip()
    assert committed != base and git("log", "-1", "--format=%s", committed, cwd=repo).strip() == "agent work"
    assert (Path(trees["writer"]) / "half-done.txt").exists()

    shown = cli("runs", "show", run_id, "--json", cwd=repo, tmp_path=tmp_path)
    assert shown.returncode == 0 and "interrupted" not in shown.stderr  # only the pass that marked it says so
    state = json.loads(shown.stdout)
    assert state["status"] == "interrupted"
    assert state["worktrees"] == [
        {"agentId": "ag_0001", "label": "committer", "path": trees["committer"], "head": committed},
        {"agentId": "ag_0002", "label": "writer", "path": trees["writer"], "head": base},
    ]
    text = cli("runs", "show", run_id, cwd=repo, tmp_path=tmp_path).stdout
    assert f"kept worktree of committer: {trees['committer']}" in text


def test_a_command_with_nothing_to_recover_says_nothing_about_it(repo: Path, tmp_path: Path) -> None:
    wf = tmp_path / "ok.js"
    wf.write_text("export const meta = { name: 'ok', description: 'd' }\nreturn await agent('hi')\n")
    ran = cli("run", str(wf), "--provider", "fake", "--events", "none", cwd=repo, tmp_path=tmp_path)
    assert ran.returncode == 0 and ran.stderr.startswith("workflow-mcp: run run_")
    assert ran.stderr.count("\n") == 1  # only the run id
    listed = cli("runs", "list", cwd=repo, tmp_path=tmp_path)
    assert listed.returncode == 0 and listed.stderr == ""
