"""A provider that needs a login pauses the run (resumable); after the login, resume completes it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from workflow_mcp import FakeProvider, MemoryStore, RunOptions, WorkflowService, load_workflow
from workflow_mcp.errors import RunFailedError
from workflow_mcp.providers.base import (
    AgentContext,
    AgentRequest,
    AgentResult,
    ProviderAuthError,
    ProviderCapabilities,
)

BODY = (
    "export const meta = { name: 'login', description: 'needs a login half way' }\n"
    "const a = await agent('first')\n"
    "const b = await parallel([() => agent('second'), () => agent('third')])\n"
    "return [a, ...b]\n"
)


@dataclass
class LoggedOutAfterFirst:
    name: str = "codex"
    capabilities: ProviderCapabilities = field(default_factory=ProviderCapabilities)
    calls: list[str] = field(default_factory=list)

    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        self.calls.append(request.prompt)
        if request.prompt == "first":
            return AgentResult(text="one")
        raise ProviderAuthError("codex", "token expired", login_hint="codex login")

    async def aclose(self) -> None:
        pass  # holds nothing


def test_an_auth_error_pauses_the_run_with_a_non_secret_context_and_resume_finishes_it(
    tmp_path: Path,
) -> None:
    async def go() -> None:
        service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
        wf = load_workflow(source=BODY)
        first = service.start_run(wf, provider=LoggedOutAfterFirst(), options=RunOptions(cwd=str(tmp_path)))
        assert await asyncio.wait_for(first.wait(), 30) == "paused"
        state = service.status(first.run_id)
        assert state.status == "paused" and state.paused_reason == "auth_required"
        (paused,) = [e for e in service.events(first.run_id) if e.type == "run.paused"]
        assert paused.payload["backend"] == "codex" and paused.payload["loginHint"] == "codex login"
        assert paused.payload["resumable"] is True
        try:
            await first.result()
        except RunFailedError as exc:  # what `workflow-mcp run` prints as "run R paused: <message>"
            assert exc.message == "codex needs authentication. Log in (codex login), then resume this run."
        assert service.recover() == []  # a paused run is not mistaken for an interrupted one

        provider = FakeProvider({"default": {"echo": True}})
        second = service.start_run(
            wf, provider=provider, options=RunOptions(cwd=str(tmp_path)), resume_from=first.run_id
        )
        assert await asyncio.wait_for(second.result(), 30) == ["one", "second", "third"]
        assert sorted(r.prompt for r in provider.calls) == ["second", "third"]  # "first" replayed

    asyncio.run(go())
