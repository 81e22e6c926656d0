"""Checkpoint replies given on resume that none of the run's checkpoints used are recorded as one
``warning`` event of that run (``unusedCheckpointReplies``), not silently dropped."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from workflow_mcp import MemoryStore, RunOptions, WorkflowService, load_workflow
from workflow_mcp.providers.base import (
    AgentContext,
    AgentRequest,
    AgentResult,
    CheckpointAsk,
    ProviderCapabilities,
)
from workflow_mcp.service import RunOverrides

from helpers import RUN_TIMEOUT_S, arun

SOURCE = (
    "export const meta = { name: 'gated', description: 'asks once' }\n"
    "return await agent('run make', { label: 'runner' })\n"
)
BOGUS = "cp_0123456789abcdef"


class AsksPermission:
    """Asks one human checkpoint per call and answers with the decision."""

    name = "asker"
    capabilities = ProviderCapabilities()

    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        assert context.checkpoint is not None
        allowed = await context.checkpoint(CheckpointAsk(tool="execute", title="make", command="make"))
        if allowed is None:
            raise asyncio.CancelledError
        return AgentResult(text=f"allowed={allowed}")

    async def aclose(self) -> None:
        pass  # holds nothing


async def paused(service: WorkflowService, tmp_path: Path) -> tuple[str, str]:
    handle = service.start_run(
        load_workflow(source=SOURCE), provider=AsksPermission(), options=RunOptions(cwd=str(tmp_path))
    )
    assert await asyncio.wait_for(handle.wait(), RUN_TIMEOUT_S) == "paused"
    context = service.status(handle.run_id).checkpoint_context
    assert context is not None
    return handle.run_id, str(context["checkpointId"])


async def resumed(service: WorkflowService, run_id: str, replies: dict[str, str]) -> tuple[str, Any]:
    handle = await service.resume(run_id, RunOverrides(provider=AsksPermission(), checkpoint_replies=replies))
    result = await asyncio.wait_for(handle.result(), RUN_TIMEOUT_S)
    await service.shutdown()  # waits for the notes of ended runs too
    return handle.run_id, result


def warnings(service: WorkflowService, run_id: str) -> list[dict[str, Any]]:
    return [e.payload for e in service.events(run_id) if e.type == "warning"]


def test_a_reply_no_checkpoint_asked_for_is_recorded_and_the_used_one_is_not(tmp_path: Path) -> None:
    async def go() -> None:
        service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
        first, asked = await paused(service, tmp_path)
        second, result = await resumed(service, first, {asked: "allow", BOGUS: "deny"})
        assert result == "allowed=True"
        (note,) = warnings(service, second)
        assert note["unusedCheckpointReplies"] == {BOGUS: "deny"}
        assert note["message"].startswith(
            f"checkpoint replies no checkpoint of this run asked for were not used: {BOGUS}=deny"
        )
        assert service.status(second).status == "completed"

    arun(go())


def test_a_resume_whose_replies_were_all_used_records_nothing(tmp_path: Path) -> None:
    async def go() -> None:
        service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
        first, asked = await paused(service, tmp_path)
        second, result = await resumed(service, first, {asked: "deny"})
        assert result == "allowed=False" and warnings(service, second) == []
        # The next resume inherits the decision from the journal: not a reply, so never "unused".
        third, _ = await resumed(service, second, {})
        assert warnings(service, third) == []

    arun(go())
