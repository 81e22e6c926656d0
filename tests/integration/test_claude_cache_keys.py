"""Our v2 cache keys are Claude Code's, byte for byte.

Each golden fixture (``tests/fixtures/claude``, recorded with the real Claude Code through the shared
oracle) is run through our runtime with the fake model script the oracle's mock used, and the ``key``
of every ``agent.queued`` event is compared with the keys in the ``journal.jsonl`` Claude wrote.
A key hashes the key before it in its chain, so one equal key per call proves the whole chain equal;
the per-chain order is checked as well for the three basic shapes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workflow_mcp.definitions.load import load_workflow
from workflow_mcp.engine.run import RunOptions, run_workflow
from workflow_mcp.providers import FakeProvider

from claude_cases import ClaudeCase, case_names, git_repo
from helpers import arun

KNOWN_GAPS: dict[str, str] = {}

# Labels per chain, in call order (the parent chain also hashes the joined slot chains).
CHAINS = {
    "plain": [["facts", "summary", "review"]],
    "parallel": [["first", "after"], ["first", "p0"], ["first", "p1"]],
    "pipeline": [["draft:alpha", "polish:alpha", "combine"], ["draft:beta", "polish:beta", "combine"]],
}


def _cases() -> list[Any]:
    out = []
    for name in case_names(resumed_in_claude=False):
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[name])] if name in KNOWN_GAPS else []
        out.append(pytest.param(name, marks=marks, id=name))
    return out


def _queued(case: ClaudeCase, root: Path) -> list[tuple[str, str]]:
    """(label, key) of every agent.queued event of our run of the case, in emission order."""
    workflow = load_workflow(case.script, profile=case.profile)
    project = case.project(root)
    git_repo(project)  # like the oracle's project: worktree calls need a repository
    options = RunOptions(
        profile=case.profile, cwd=str(project), home=str(root / "home"), worktree_root=str(root / "worktrees")
    )

    async def go() -> list[tuple[str, str]]:
        handle = run_workflow(workflow, provider=FakeProvider(case.fake), args=case.args, options=options)
        await handle.wait()
        return [
            (str(e.payload["label"]), str(e.payload["key"]))
            for e in handle.log.events
            if e.type == "agent.queued"
        ]

    return arun(go())


@pytest.mark.parametrize("name", _cases())
def test_every_agent_call_gets_the_v2_key_claude_journaled(name: str, tmp_path: Path) -> None:
    case = ClaudeCase(name)
    ours = _queued(case, tmp_path)
    journal = case.journal()
    started = [(line.get("label"), str(line["key"])) for line in journal if line.get("type") == "started"]
    # calls Claude refused before launching them: journaled `failed` with an empty agentId
    refused = {
        str(line["key"]) for line in journal if line.get("type") == "failed" and not line.get("agentId")
    }
    our_keys = [key for _, key in ours if key]

    assert len(set(our_keys)) == len(our_keys)
    assert {key for _, key in started} <= set(our_keys)
    assert set(our_keys) <= {key for _, key in started} | refused
    if case.profile == "claude-code/2.1.332":
        # started lines carry the label: each call has Claude's key for that very call
        by_label = dict(ours)
        assert {label: by_label.get(str(label)) for label, _ in started} == dict(started)
    else:
        # 2.1.209 keeps one chain in call order: the whole sequence matches
        assert [key for key in our_keys if key not in refused] == [key for _, key in started]


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_each_chain_advances_in_the_same_order_as_in_claude(name: str, tmp_path: Path) -> None:
    case = ClaudeCase(name)
    ours = [label for label, _ in _queued(case, tmp_path)]
    theirs = [str(line["label"]) for line in case.journal() if line.get("type") == "started"]
    for chain in CHAINS[name]:
        assert sorted(chain, key=theirs.index) == chain
        assert sorted(chain, key=ours.index) == chain


def test_the_profile_facts_example_keys_are_reproduced(tmp_path: Path) -> None:
    """PROFILE-FACTS: `agent('first')` → v2:9f3809c9…, then slot 0 `agent('p0')` → v2:38d1c85a…."""
    by_label = dict(_queued(ClaudeCase("parallel"), tmp_path))
    assert by_label["first"].startswith("v2:9f3809c9")
    assert by_label["p0"].startswith("v2:38d1c85a")
