"""How a run ends: what happens to agent() calls the workflow leaves pending when it returns (profile
claude-code/2.1.332, measured: never dispatched, running ones cancelled, no waiting), and what a failed
run's message says about the throw (the file's line and column) for the workflow, a child and a call
the host refused."""

from __future__ import annotations

import asyncio
from pathlib import Path

from workflow_mcp import load_workflow
from workflow_mcp.providers import AgentContext, AgentRequest, AgentResult

from helpers import RecordingProvider, count, run_source

BOUND_S = 20


def gated_provider(seen: list[str | None]) -> RecordingProvider:
    """'hang' waits (bounded) for its cancel signal; 'gate' answers once 'hang' is running."""
    hanging = asyncio.Event()

    async def answer(request: AgentRequest, context: AgentContext) -> AgentResult:
        if request.label == "hang":
            hanging.set()
            await asyncio.wait_for(context.signal.wait(), BOUND_S)
            seen.append(context.signal.reason)
            raise asyncio.CancelledError(context.signal.reason)
        await asyncio.wait_for(hanging.wait(), BOUND_S)
        return AgentResult(text=request.label)

    return RecordingProvider(answer)


def test_a_call_still_running_when_the_workflow_returns_is_cancelled_and_the_run_completes_at_once() -> None:
    seen: list[str | None] = []
    body = (
        "agent('h', { label: 'hang' }).then(() => log('hang resolved'), () => log('hang rejected'))\n"
        "const g = await agent('g', { label: 'gate' })\n"
        "return 'returned after ' + g"
    )
    outcome = run_source(body, provider=gated_provider(seen), concurrency=2)
    assert (outcome.status, outcome.result) == ("completed", "returned after gate")
    assert seen == ["the workflow returned before this agent() call finished"]
    (failed,) = outcome.of("agent.failed")
    assert failed.payload["label"] == "hang" and failed.payload["reason"] == "cancelled"
    assert outcome.logs == []  # its continuations never run
    assert outcome.types()[-1] == "run.completed"


def test_calls_made_in_the_same_turn_as_the_return_never_reach_the_provider() -> None:
    seen: list[str | None] = []
    provider = gated_provider(seen)
    body = "agent('a', { label: 'a' })\nparallel([() => agent('b', { label: 'b' })])\nreturn 'at once'"
    outcome = run_source(body, provider=provider, concurrency=1)
    assert (outcome.status, outcome.result) == ("completed", "at once")
    assert provider.calls == [] and count(outcome.events, "agent.queued") == 0


def test_an_unawaited_child_starts_and_logs_but_its_agents_never_run(tmp_path: Path) -> None:
    (tmp_path / "kid.js").write_text(
        "export const meta = { name: 'kid', description: 'd' }\nlog('kid ran')\n"
        "await agent('kid agent')\nlog('kid after agent')\nreturn 1\n"
    )
    seen: list[str | None] = []
    provider = gated_provider(seen)
    outcome = run_source(
        "workflow({ scriptPath: 'kid.js' })\nreturn 'returned'", provider=provider, cwd=str(tmp_path)
    )
    assert (outcome.status, outcome.result) == ("completed", "returned")
    assert outcome.logs == ["▸ running dynamic workflow kid", "[kid] kid ran"]
    assert provider.calls == []


def test_a_failed_run_names_the_line_and_column_of_the_throw_in_the_file(tmp_path: Path) -> None:
    wf = tmp_path / "wf.js"
    wf.write_text(
        "export const meta = { name: 'wf', description: 'd' }\n\n\n   throw new RangeError('deep')\n"
    )
    outcome = run_source(load_workflow(wf))
    # Claude Code counts in the trimmed body (line 2, column 7); the file's own position is 4:10
    assert outcome.error == f"RangeError: deep (at {wf}:4:10; Claude Code reports workflow.js:2:7)"
    assert outcome.failure["location"] == {
        "path": str(wf),
        "line": 4,
        "column": 10,
        "reported": "workflow.js:2:7",
    }
    assert "at workflow.js:2:7" in outcome.failure["stack"]


def test_a_child_s_uncaught_throw_fails_the_run_naming_the_child_s_file(tmp_path: Path) -> None:
    child = tmp_path / "child.js"
    child.write_text(
        "export const meta = { name: 'child', description: 'd' }\nconst x = 1\nthrow new TypeError('boom')\n"
    )
    outcome = run_source("await workflow({ scriptPath: 'child.js' })", cwd=str(tmp_path))
    assert outcome.error == f"TypeError: boom (at {child}:3:7)"
    assert outcome.logs[-1].startswith("▸ child failed: TypeError: boom\n    at workflow.js:3:7")


def test_a_refused_agent_call_that_is_not_caught_fails_the_run_naming_the_call() -> None:
    outcome = run_source("const a = 1\n  await agent('x', { schema: 5 })")
    # the position of the `await` that received the rejection
    assert outcome.error is not None and outcome.error.endswith("(at workflow.js:3:3)")
    assert outcome.failure["name"] == "TypeError"


def test_thrown_values_that_are_not_errors_fail_the_run_as_claude_reports_them() -> None:
    results = {
        body: run_source(body).error
        for body in ("throw 'top string'", "throw 42", "throw { a: 1 }", "throw null")
    }
    assert results == {
        "throw 'top string'": "Error: top string",
        "throw 42": "Error: 42",
        "throw { a: 1 }": "Error",
        "throw null": "Error",
    }


def test_under_2_1_209_a_child_s_throw_reaches_the_parent_with_its_stack_as_the_message(
    tmp_path: Path,
) -> None:
    (tmp_path / "child.js").write_text(
        "export const meta = { name: 'child', description: 'd' }\nif (args.s) throw 'child string'\n"
        "throw new Error('child error msg')\n"
    )
    body = (
        "const out = []\nfor (const s of [true, false]) {\n"
        "  try { await workflow({ scriptPath: 'child.js' }, { s }) } catch (e) { out.push(e.message) }\n}\n"
        "return out"
    )
    old = run_source(body, cwd=str(tmp_path), profile="claude-code/2.1.209")
    assert old.result == ["Error: child string", "Error: child error msg\n    at workflow.js:3:7"]
    new = run_source(body, cwd=str(tmp_path))
    assert new.result == ["child string", "child error msg"]
