"""The resume matrix beyond the shared cases: every hashed option changed, insertions and deletions
before and after cached calls, started-only records, and both policies on each row.

Each row runs ``v1`` once (echo provider), then resumes a ``v2`` from it under each policy, and
checks which calls reached the provider (by prompt) and how many were replayed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp import FakeProvider, RunOptions, SqliteStore, WorkflowService, load_workflow
from workflow_mcp.engine.journal import ResumePolicy
from workflow_mcp.events import Event

HEAD = "export const meta = { name: 'matrix', description: 'resume matrix' }\n"
SCHEMA = "{ type: 'object', properties: { v: { type: 'string' } }, required: ['v'] }"
SCHEMA2 = "{ type: 'object', properties: { v: { type: 'integer' } }, required: ['v'] }"


def calls(*lines: str) -> str:
    return (
        HEAD
        + "const out = []\n"
        + "".join(f"out.push(await agent({line}))\n" for line in lines)
        + "return out\n"
    )


BASE = ["'a'", "'b'", "'c'"]

# (id, v1 calls, v2 calls, live prompts under content, live prompts under prefix)
ROWS: list[tuple[str, list[str], list[str], list[str], list[str]]] = [
    ("full-hit", BASE, BASE, [], []),
    ("label-only", BASE, ["'a'", "'b', { label: 'renamed' }", "'c'"], [], []),
    ("phase-only", BASE, ["'a'", "'b', { phase: 'Elsewhere' }", "'c'"], [], []),
    ("insert-before", BASE, ["'new'", *BASE], ["new"], ["new", "a", "b", "c"]),
    ("insert-middle", BASE, ["'a'", "'new'", "'b'", "'c'"], ["new"], ["new", "b", "c"]),
    ("insert-after", BASE, [*BASE, "'new'"], ["new"], ["new"]),
    ("delete-first", BASE, ["'b'", "'c'"], [], ["b", "c"]),
    ("delete-middle", BASE, ["'a'", "'c'"], [], ["c"]),
    ("delete-last", BASE, ["'a'", "'b'"], [], []),
    ("repeated-prompt-extra-occurrence", ["'a'", "'a'"], ["'a'", "'a'", "'a'"], ["a"], ["a"]),
    ("unknown-option-added", BASE, ["'a', { whatever: 1 }", "'b'", "'c'"], [], []),
    ("stallMs-added", BASE, ["'a', { stallMs: 60000 }", "'b'", "'c'"], [], []),
]
# Each hashed option (profile claude-code/2.1.332) changed on the middle call.
HASHED = {
    "schema": (f"'b', {{ schema: {SCHEMA} }}", f"'b', {{ schema: {SCHEMA2} }}"),
    "model": ("'b', { model: 'sonnet' }", "'b', { model: 'opus' }"),
    "effort": ("'b', { effort: 'low' }", "'b', { effort: 'high' }"),
    "agentType": ("'b', { agentType: 'Explore' }", "'b', { agentType: 'Plan' }"),  # two built-in types
    "disallowedTools": ("'b', { disallowedTools: ['Bash'] }", "'b', { disallowedTools: ['Write'] }"),
    "bashCommandClamp": (
        "'b', { bashCommandClamp: ['Bash(ls)'] }",
        "'b', { bashCommandClamp: ['Bash(pwd)'] }",
    ),
}
for option, (before, after) in HASHED.items():
    ROWS.append(
        (f"hashed-{option}-changed", ["'a'", before, "'c'"], ["'a'", after, "'c'"], ["b"], ["b", "c"])
    )


def run_pair(tmp: Path, v1: str, v2: str, policy: ResumePolicy) -> tuple[list[str], int, Any]:
    async def go() -> tuple[list[str], int, Any]:
        store = SqliteStore(tmp / f"{policy}.db")
        service = WorkflowService(store, cwd=str(tmp), home=str(tmp / "home"))
        fake = {
            "default": {"echo": True},
            "rules": [{"match": {"prompt": "^b$"}, "respond": {"synthesize": True}}],
        }
        options = RunOptions(cwd=str(tmp), concurrency=1)
        first = service.start_run(load_workflow(source=v1), provider=FakeProvider(fake), options=options)
        await asyncio.wait_for(first.wait(), 60)
        provider = FakeProvider(fake)
        second = service.start_run(
            load_workflow(source=v2),
            provider=provider,
            options=options,
            resume_from=first.run_id,
            policy=policy,
        )
        status = await asyncio.wait_for(second.wait(), 60)
        events: list[Event] = service.events(second.run_id)
        store.close()
        return [r.prompt for r in provider.calls], sum(e.type == "agent.cached" for e in events), status

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("v1", "v2", "content_live", "prefix_live"), [pytest.param(*r[1:], id=r[0]) for r in ROWS]
)
@pytest.mark.parametrize("policy", ["content", "prefix"])
def test_a_resumed_run_replays_exactly_the_calls_its_policy_allows(
    tmp_path: Path,
    policy: ResumePolicy,
    v1: list[str],
    v2: list[str],
    content_live: list[str],
    prefix_live: list[str],
) -> None:
    live, cached, status = run_pair(tmp_path, calls(*v1), calls(*v2), policy)
    expected = content_live if policy == "content" else prefix_live
    assert status == "completed"
    assert live == expected
    assert cached == len(v2) - len(expected)


def test_a_call_that_started_but_never_finished_runs_again(tmp_path: Path) -> None:
    """A started-only record (the process died mid-call, or the call was cancelled) is not reusable."""

    async def go() -> tuple[list[str], int]:
        store = SqliteStore(tmp_path / "state.db")
        service = WorkflowService(store, cwd=str(tmp_path))
        body = calls("'fast'", "'slow'")
        slow = {
            "rules": [{"match": {"prompt": "slow"}, "respond": {"text": "late", "delayMs": 30000}}],
            "default": {"echo": True},
        }
        first = service.start_run(
            load_workflow(source=body), provider=FakeProvider(slow), options=RunOptions(cwd=str(tmp_path))
        )
        async for event in first.events():
            if event.type == "agent.started" and event.payload["label"] == "slow":
                first.cancel("stop mid-call")
        assert await asyncio.wait_for(first.wait(), 30) == "cancelled"
        provider = FakeProvider({"default": {"echo": True}})
        second = service.start_run(
            load_workflow(source=body),
            provider=provider,
            options=RunOptions(cwd=str(tmp_path)),
            resume_from=first.run_id,
        )
        await asyncio.wait_for(second.wait(), 30)
        cached = sum(e.type == "agent.cached" for e in service.events(second.run_id))
        return [r.prompt for r in provider.calls], cached

    live, cached = asyncio.run(go())
    assert live == ["slow"] and cached == 1
