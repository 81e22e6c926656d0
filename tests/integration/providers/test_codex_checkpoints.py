"""Human checkpoints with real Codex (the SDK's bundled ``codex app-server``) against the loopback
mock Responses API: under ``approvals = "ask"`` the mock model asks for a command outside the
sandbox (``exec_command`` with ``sandbox_permissions: require_escalated``), Codex sends
``item/commandExecution/requestApproval``, and that request becomes a checkpoint of the run. An
approval lets the command run (the mock sees its output in the next request); a denial does not;
an unattended run pauses with ``checkpoint_required`` and is answered on resume. A call waiting at a
checkpoint holds up no other call on the same app-server, and cancelling the run ends the wait.

Skipped, with the reason, when the ``codex`` extra is not installed."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from mocks.mock_responses import Received, Reply
from workflow_mcp import MemoryStore, RunOptions, WorkflowService, load_workflow
from workflow_mcp.events import Event
from workflow_mcp.providers.base import AgentRequest
from workflow_mcp.providers.codex import CodexProvider
from workflow_mcp.providers.policy import Policy
from workflow_mcp.service import RunOverrides

from codex_kit import CodexSetup
from helpers import RUN_TIMEOUT_S, arun, call_provider

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S * 2)

ASK = Policy(approvals="ask")
SHELL = "echo made > made-by-codex.txt; echo RAN-BY-CODEX"
ASKED_COMMAND = f"/bin/bash -lc '{SHELL}'"  # the command line Codex says it would run
SOURCE = (
    "export const meta = { name: 'gated', description: 'an agent that runs a command' }\n"
    "return await agent('make the file', { label: 'maker' })\n"
)


def model(rec: Received) -> Reply:
    """The mock model: first ask to run the command outside the sandbox, then report what the
    command's output (or its refusal) was."""
    if rec.function_outputs:
        return Reply(text="saw: " + " | ".join(str(o.get("output")) for o in rec.function_outputs))
    arguments = {"cmd": SHELL, "sandbox_permissions": "require_escalated", "justification": "make the file"}
    return Reply(function_call=("exec_command", arguments, None))


class Site:
    """A service over a memory store; the ``codex`` provider under ``policy`` reaches the mock."""

    def __init__(self, codex: CodexSetup, policy: Policy = ASK) -> None:
        codex.mock.on("make the file", model)
        self.codex = codex
        self.policy = policy
        self.service = WorkflowService(MemoryStore(), cwd=str(codex.cwd))

    async def start(self, asker: Any = None, source: str = SOURCE) -> tuple[str, str]:
        async with self.codex.router(provider="codex", policy=self.policy) as router:
            handle = self.service.start_run(
                load_workflow(source=source), provider=router, options=RunOptions(cwd=str(self.codex.cwd))
            )
            if asker is not None:
                assert self.service.answer_checkpoints(handle.run_id, asker)
            return handle.run_id, await asyncio.wait_for(handle.wait(), RUN_TIMEOUT_S)

    async def resume(self, run_id: str, **replies: str) -> tuple[str, str]:
        async with self.codex.router(provider="codex", policy=self.policy) as router:
            handle = await self.service.resume(
                run_id, RunOverrides(provider=router, checkpoint_replies=replies)
            )
            return handle.run_id, await asyncio.wait_for(handle.wait(), RUN_TIMEOUT_S)

    def events(self, run_id: str, kind: str) -> list[Event]:
        return [e for e in self.service.store.events(run_id) if e.type == kind]

    @property
    def made(self) -> bool:
        return (self.codex.cwd / "made-by-codex.txt").exists()

    def outputs(self) -> list[str]:
        """What the mock model was told the command gave, request by request."""
        return [str(o.get("output")) for r in self.codex.mock.received for o in r.function_outputs]


def test_an_escalated_command_pauses_the_run_for_a_checkpoint_and_runs_once_the_resume_allows_it(
    codex: CodexSetup,
) -> None:
    site = Site(codex)

    async def scenario() -> None:
        first, status = await site.start()
        assert status == "paused" and not site.made
        state = site.service.status(first)
        assert state.paused_reason == "checkpoint_required" and state.checkpoint_context is not None
        asked = state.checkpoint_context
        assert {k: asked[k] for k in ("label", "tool", "title", "command", "paths")} == {
            "label": "maker",
            "tool": "execute",
            "title": "make the file",
            "command": ASKED_COMMAND,
            "paths": [],
        }
        assert asked["checkpointId"].startswith("cp_")
        assert [e.payload["checkpointId"] for e in site.events(first, "checkpoint.requested")] == [
            asked["checkpointId"]
        ]
        assert site.outputs() == []  # the command never ran, and the model heard nothing of it

        second, status = await site.resume(first, **{asked["checkpointId"]: "allow"})
        assert status == "completed", site.service.status(second).error
        assert site.made
        (output,) = site.outputs()
        assert "RAN-BY-CODEX" in output
        assert site.service.status(second).result == f"saw: {output}"
        (resolved,) = site.events(second, "checkpoint.resolved")
        assert {k: resolved.payload[k] for k in ("checkpointId", "decision", "source")} == {
            "checkpointId": asked["checkpointId"],  # the same request in the resumed run: the same id
            "decision": "allow",
            "source": "reply",
        }
        assert site.events(second, "checkpoint.requested") == []

    arun(scenario())


def test_a_denied_checkpoint_refuses_the_command_and_the_model_hears_the_refusal(codex: CodexSetup) -> None:
    site = Site(codex)

    async def no(context: Mapping[str, Any]) -> bool | None:
        return False

    async def scenario() -> None:
        run_id, status = await site.start(no)
        assert status == "completed"
        assert not site.made
        (output,) = site.outputs()
        assert "rejected by user" in output and "RAN-BY-CODEX" not in output
        (resolved,) = site.events(run_id, "checkpoint.resolved")
        assert (resolved.payload["decision"], resolved.payload["source"]) == ("deny", "elicitation")

    arun(scenario())


def test_a_waiting_asker_answers_live_and_the_run_never_pauses(codex: CodexSetup) -> None:
    site = Site(codex)
    asked: list[Mapping[str, Any]] = []

    async def yes(context: Mapping[str, Any]) -> bool | None:
        asked.append(context)
        return True

    async def scenario() -> None:
        run_id, status = await site.start(yes)
        assert status == "completed" and site.made
        (output,) = site.outputs()
        assert "RAN-BY-CODEX" in output
        (resolved,) = site.events(run_id, "checkpoint.resolved")
        assert (resolved.payload["decision"], resolved.payload["source"]) == ("allow", "elicitation")
        assert site.events(run_id, "run.paused") == []

    arun(scenario())
    assert [c["command"] for c in asked] == [ASKED_COMMAND]


def test_a_call_waiting_at_a_checkpoint_holds_up_no_other_call_on_the_app_server(codex: CodexSetup) -> None:
    # The approval request stays open while the human decides; the SDK's single reader thread
    # must keep reading, or the other agent's turn could not finish and this asker would time out.
    site = Site(codex)
    source = (
        "export const meta = { name: 'two', description: 'a gated agent beside a plain one' }\n"
        "return await parallel([() => agent('make the file', { label: 'maker' }),"
        " () => agent('ECHO:other', { label: 'other' })])\n"
    )
    other_done = asyncio.Event()

    def on_event(event: Event) -> None:
        if event.type == "agent.completed" and event.payload.get("label") == "other":
            other_done.set()

    async def after_the_other_one(context: Mapping[str, Any]) -> bool | None:
        await asyncio.wait_for(other_done.wait(), RUN_TIMEOUT_S)
        return True

    async def scenario() -> None:
        async with codex.router(provider="codex", policy=ASK) as router:
            handle = site.service.start_run(
                load_workflow(source=source),
                provider=router,
                options=RunOptions(cwd=str(codex.cwd)),
                on_event=on_event,
            )
            assert site.service.answer_checkpoints(handle.run_id, after_the_other_one)
            assert await asyncio.wait_for(handle.wait(), RUN_TIMEOUT_S) == "completed"
        result = site.service.status(handle.run_id).result
        assert result[1] == "other-done" and "RAN-BY-CODEX" in result[0]
        assert site.made

    arun(scenario())


def test_cancelling_the_run_ends_the_wait_at_a_checkpoint(codex: CodexSetup) -> None:
    site = Site(codex)
    asked = asyncio.Event()

    async def never(context: Mapping[str, Any]) -> bool | None:
        asked.set()
        await asyncio.Event().wait()  # a human who never answers
        return None

    async def scenario() -> None:
        async with codex.router(provider="codex", policy=ASK) as router:
            handle = site.service.start_run(
                load_workflow(source=SOURCE), provider=router, options=RunOptions(cwd=str(codex.cwd))
            )
            assert site.service.answer_checkpoints(handle.run_id, never)
            await asyncio.wait_for(asked.wait(), RUN_TIMEOUT_S)
            assert site.service.cancel(handle.run_id) == "cancelling"
            assert await asyncio.wait_for(handle.wait(), 20) == "cancelled"
        assert not site.made and site.outputs() == []
        assert site.events(handle.run_id, "checkpoint.resolved") == []

    arun(scenario())


def test_without_approvals_ask_nobody_is_asked(codex: CodexSetup) -> None:
    site = Site(codex, Policy())  # the default policy: approvals "never"

    async def scenario() -> None:
        run_id, status = await site.start()
        assert status == "completed"
        assert not [e for e in site.service.store.events(run_id) if e.type.startswith("checkpoint.")]

    arun(scenario())
    # Codex decided the escalation itself (approval policy never) and told the model.
    assert [r for r in codex.mock.received if r.function_outputs]


def test_a_patch_the_sandbox_refused_is_refused_by_the_policy_without_asking(codex: CodexSetup) -> None:
    # Codex asks (item/fileChange/requestApproval) about a patch outside the writable roots; the
    # policy refuses edits there outright, so nobody is asked and the run does not pause.
    outside = codex.cwd.parent / "outside"
    outside.mkdir()
    patch = (
        f"apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {outside / 'o.txt'}\n+hi\n*** End Patch\nEOF\n"
    )

    def patcher(rec: Received) -> Reply:
        if rec.function_outputs:
            return Reply(text="saw: " + " | ".join(str(o.get("output")) for o in rec.function_outputs))
        return Reply(function_call=("exec_command", {"cmd": patch}, None))

    codex.mock.on("patch outside", patcher)
    site = Site(codex)
    source = SOURCE.replace("make the file", "patch outside")

    async def scenario() -> None:
        run_id, status = await site.start(source=source)
        assert status == "completed"
        assert not [e for e in site.service.store.events(run_id) if e.type.startswith("checkpoint.")]
        assert "patch rejected by user" in str(site.service.status(run_id).result)

    arun(scenario())
    assert not (outside / "o.txt").exists()


def test_a_call_without_a_checkpoint_to_ask_refuses_the_command(codex: CodexSetup) -> None:
    # A provider used on its own (no run, so no human checkpoint): fail closed.
    site = Site(codex)

    async def scenario() -> None:
        provider = CodexProvider.create(codex.settings, policy=ASK, source="test")
        try:
            result, events = await call_provider(
                provider, AgentRequest(prompt="make the file", label="maker", cwd=str(codex.cwd))
            )
        finally:
            await provider.aclose()
        assert "rejected by user" in (result.text or "")
        (said,) = [e for e in events if (e.text or "").startswith("permission ")]
        assert (said.text or "").startswith("permission denied: execute make the file")
        assert said.text.endswith("but nobody can be asked here)")
        assert said.data == {"permission": "execute", "allowed": False, "paths": []}

    arun(scenario())
    assert not site.made
