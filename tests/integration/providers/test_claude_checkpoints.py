"""Human checkpoints with the real Claude Code CLI (``claude-agent-sdk``'s bundled one) against the
loopback mock Messages API: under ``approvals = "ask"`` the SDK's ``can_use_tool`` prompt for a
``Bash`` command the policy cannot vouch for pauses the run with ``checkpoint_required``, is answered
on resume with ``checkpoint_replies`` (the command then runs), and a waiting asker answers it live.

Skipped, with the reason, when the ``claude`` extra is not installed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "claude_agent_sdk", reason="the claude extra is not installed (pip install -e '.[test,claude]')"
)

from mocks.mock_messages import Reply
from workflow_mcp import MemoryStore, RunOptions, WorkflowService, load_workflow
from workflow_mcp.events import Event
from workflow_mcp.providers.policy import Policy
from workflow_mcp.service import RunOverrides

from claude_kit import ClaudeSetup, claude_setup
from helpers import RUN_TIMEOUT_S, arun

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S * 2)

ASK = Policy(approvals="ask")
COMMAND = "python3 -c \"open('made-by-claude.txt', 'w').write('made')\""
SOURCE = (
    "export const meta = { name: 'gated', description: 'an agent that runs a command' }\n"
    "return await agent('make the file', { label: 'maker' })\n"
)


@pytest.fixture
def claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ClaudeSetup]:
    with claude_setup(tmp_path, monkeypatch) as setup:
        setup.mock.on(
            "^make the file$",
            Reply(tool=("Bash", {"command": COMMAND, "description": "make a file"}), text="the file is made"),
        )
        yield setup


class Site:
    def __init__(self, claude: ClaudeSetup) -> None:
        self.claude = claude
        self.service = WorkflowService(MemoryStore(), cwd=str(claude.cwd))

    async def start(self, asker: Any = None) -> tuple[str, str]:
        async with self.claude.router(provider="claude", policy=ASK) as router:
            handle = self.service.start_run(
                load_workflow(source=SOURCE), provider=router, options=RunOptions(cwd=str(self.claude.cwd))
            )
            if asker is not None:
                assert self.service.answer_checkpoints(handle.run_id, asker)
            return handle.run_id, await asyncio.wait_for(handle.wait(), RUN_TIMEOUT_S)

    async def resume(self, run_id: str, **replies: str) -> tuple[str, str]:
        async with self.claude.router(provider="claude", policy=ASK) as router:
            handle = await self.service.resume(
                run_id, RunOverrides(provider=router, checkpoint_replies=replies)
            )
            return handle.run_id, await asyncio.wait_for(handle.wait(), RUN_TIMEOUT_S)

    def events(self, run_id: str, kind: str) -> list[Event]:
        return [e for e in self.service.store.events(run_id) if e.type == kind]

    @property
    def made(self) -> bool:
        return (self.claude.cwd / "made-by-claude.txt").exists()


def test_a_bash_command_pauses_the_run_for_a_checkpoint_and_runs_once_the_resume_allows_it(
    claude: ClaudeSetup,
) -> None:
    site = Site(claude)

    async def scenario() -> None:
        first, status = await site.start()
        assert status == "paused" and not site.made
        state = site.service.status(first)
        assert state.paused_reason == "checkpoint_required" and state.checkpoint_context is not None
        asked = state.checkpoint_context
        assert {k: asked[k] for k in ("label", "tool", "title", "command", "paths")} == {
            "label": "maker",
            "tool": "execute",
            "title": "Bash: make a file",
            "command": COMMAND,
            "paths": [],
        }
        second, status = await site.resume(first, **{asked["checkpointId"]: "allow"})
        assert status == "completed" and site.made
        assert site.service.status(second).result == "the file is made"
        (resolved,) = site.events(second, "checkpoint.resolved")
        assert (resolved.payload["decision"], resolved.payload["source"]) == ("allow", "reply")

    arun(scenario())


def test_a_waiting_asker_answers_live_and_a_denial_reaches_the_model_as_the_tool_result(
    claude: ClaudeSetup,
) -> None:
    site = Site(claude)
    asked: list[Mapping[str, Any]] = []

    def asker(answer: bool) -> Any:
        async def ask(context: Mapping[str, Any]) -> bool:
            asked.append(context)
            return answer

        return ask

    async def scenario() -> None:
        run_id, status = await site.start(asker(False))
        assert status == "completed" and not site.made
        assert [c["command"] for c in asked] == [COMMAND]
        (resolved,) = site.events(run_id, "checkpoint.resolved")
        assert (resolved.payload["decision"], resolved.payload["source"]) == ("deny", "elicitation")
        follow_up = [r for r in claude.mock.received if r.after_tool_result]
        assert follow_up and "denied by a human checkpoint" in follow_up[-1].tool_results[0]

        run_id, status = await site.start(asker(True))
        assert status == "completed" and site.made
        assert site.service.status(run_id).result == "the file is made"

    arun(scenario())


def test_without_approvals_ask_the_command_is_denied_and_nobody_is_asked(claude: ClaudeSetup) -> None:
    async def scenario() -> None:
        service = WorkflowService(MemoryStore(), cwd=str(claude.cwd))
        async with claude.router() as router:  # the default policy: approvals "never"
            handle = service.start_run(
                load_workflow(source=SOURCE), provider=router, options=RunOptions(cwd=str(claude.cwd))
            )
            assert await asyncio.wait_for(handle.wait(), RUN_TIMEOUT_S) == "completed"
        assert not (claude.cwd / "made-by-claude.txt").exists()
        assert not [e for e in service.store.events(handle.run_id) if e.type.startswith("checkpoint.")]

    arun(scenario())
