"""The executor seam: every live provider attempt of a run goes through its executor, with the call's
context unchanged; replayed and refused calls never reach it (engine/executor.py)."""

from __future__ import annotations

from typing import Any

from workflow_mcp.engine.executor import AgentExecutor, LocalExecutor
from workflow_mcp.engine.worktree import Worktree
from workflow_mcp.providers import AgentContext, AgentProvider, AgentRequest, AgentResult, FakeProvider
from workflow_mcp.realm.scripted import AgentRejected, ScriptedWorkflow

from helpers import run_scripted


class CountingExecutor:
    """Runs calls locally and keeps what it was handed."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, int]] = []
        self.contexts: list[AgentContext] = []

    async def execute(
        self, provider: AgentProvider, request: AgentRequest, context: AgentContext
    ) -> AgentResult:
        self.attempts.append((request.prompt, request.attempt))
        self.contexts.append(context)
        return await LocalExecutor().execute(provider, request, context)

    async def create_worktree(self, cwd: str, root_dir: str, run_id: str, agent_id: str) -> Worktree:
        return await LocalExecutor().create_worktree(cwd, root_dir, run_id, agent_id)

    async def finish_worktree(self, tree: Worktree) -> dict[str, object]:
        return await LocalExecutor().finish_worktree(tree)


def test_every_live_attempt_goes_through_the_runs_executor_and_refused_calls_do_not() -> None:
    executor = CountingExecutor()
    checked: AgentExecutor = executor  # the seam's protocol
    schema = {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}
    provider = FakeProvider(
        {
            "rules": [
                {
                    "match": {"prompt": "shape"},
                    "respond": {"sequence": [{"result": {"n": "x"}}, {"result": {"n": 2}}]},
                }
            ],
            "default": {"echo": True},
        }
    )

    async def script(realm: ScriptedWorkflow) -> Any:
        out: list[Any] = [await realm.agent("plain"), await realm.agent("shape", schema=schema)]
        try:
            await realm.agent("refused", schema=5)
        except AgentRejected as exc:
            out.append(exc.name)
        return out

    outcome = run_scripted(script, provider=provider, executor=checked)
    assert outcome.result == ["plain", {"n": 2}, "TypeError"]
    # The schema re-ask is a second attempt of the same call; the refused call never ran.
    assert executor.attempts == [("plain", 1), ("shape", 1), ("shape", 2)]
    assert all(context.signal is not None for context in executor.contexts)
