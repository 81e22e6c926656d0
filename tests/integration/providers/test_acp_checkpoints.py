"""Human checkpoints with the real ACP stub agent (a process over stdio, the real SDK on both
sides): under ``approvals = "ask"`` a permission request the policy cannot vouch for pauses the run
with ``checkpoint_required``, is answered on resume with ``checkpoint_replies``, is journaled, and
replays on a later resume without asking; a waiting asker answers it live."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp import MemoryStore, RunOptions, WorkflowService, load_workflow
from workflow_mcp.errors import InvalidInputError
from workflow_mcp.events import Event
from workflow_mcp.providers.config import ProviderConfig
from workflow_mcp.providers.policy import Policy
from workflow_mcp.providers.routing import build_router
from workflow_mcp.service import RunOverrides

from acp_kit import SDK_SKIP_REASON, stub_settings
from helpers import RUN_TIMEOUT_S, arun

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S * 2)

pytest.importorskip("acp", reason=SDK_SKIP_REASON)

ASK = Policy(approvals="ask")


def source(prompt: str) -> str:
    return (
        "export const meta = { name: 'gated', description: 'an agent that runs commands' }\n"
        f"return await agent({prompt!r}, {{ label: 'runner' }})\n"
    )


class Site:
    """A service over a memory store, the stub agent behind the ``acp`` provider and ``policy``."""

    def __init__(self, tmp_path: Path, policy: Policy = ASK) -> None:
        self.cwd = tmp_path
        self.service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
        self.config = ProviderConfig(settings={"acp": stub_settings()}, policy=policy)

    async def start(self, prompt: str, asker: Any = None) -> tuple[str, str]:
        router = build_router(provider="acp", config=self.config)
        try:
            handle = self.service.start_run(
                load_workflow(source=source(prompt)), provider=router, options=RunOptions(cwd=str(self.cwd))
            )
            if asker is not None:
                assert self.service.answer_checkpoints(handle.run_id, asker)
            return handle.run_id, await asyncio.wait_for(handle.wait(), RUN_TIMEOUT_S)
        finally:
            await router.aclose()

    async def resume(self, run_id: str, **replies: str) -> tuple[str, str]:
        router = build_router(provider="acp", config=self.config)
        try:
            handle = await self.service.resume(
                run_id, RunOverrides(provider=router, checkpoint_replies=replies)
            )
            return handle.run_id, await asyncio.wait_for(handle.wait(), RUN_TIMEOUT_S)
        finally:
            await router.aclose()

    def events(self, run_id: str, kind: str) -> list[Event]:
        return [e for e in self.service.store.events(run_id) if e.type == kind]

    def context(self, run_id: str) -> dict[str, Any]:
        state = self.service.status(run_id)
        assert state.status == "paused" and state.paused_reason == "checkpoint_required"
        assert state.checkpoint_context is not None
        return state.checkpoint_context


def test_a_checkpoint_pauses_the_run_is_answered_on_resume_and_replays_on_the_next_without_asking(
    tmp_path: Path,
) -> None:
    site = Site(tmp_path)

    async def scenario() -> None:
        first, status = await site.start("run touch a.txt ;; touch b.txt")
        assert status == "paused"
        asked = site.context(first)
        assert {k: asked[k] for k in ("label", "tool", "command", "paths")} == {
            "label": "runner",
            "tool": "execute",
            "command": "touch a.txt",
            "paths": [],
        }
        assert asked["checkpointId"].startswith("cp_")
        assert not (tmp_path / "a.txt").exists()  # refused until a human decides
        (paused,) = site.events(first, "run.paused")
        assert paused.payload["checkpointContext"] == asked
        assert [e.payload["checkpointId"] for e in site.events(first, "checkpoint.requested")] == [
            asked["checkpointId"]
        ]

        second, status = await site.resume(first, **{asked["checkpointId"]: "allow"})
        assert status == "paused"  # the same agent then asks about its second command
        assert (tmp_path / "a.txt").exists() and not (tmp_path / "b.txt").exists()
        asked2 = site.context(second)
        assert asked2["command"] == "touch b.txt" and asked2["checkpointId"] != asked["checkpointId"]
        (resolved,) = site.events(second, "checkpoint.resolved")
        assert {k: resolved.payload[k] for k in ("checkpointId", "decision", "source")} == {
            "checkpointId": asked["checkpointId"],
            "decision": "allow",
            "source": "reply",
        }

        third, status = await site.resume(second, **{asked2["checkpointId"]: "allow"})
        assert status == "completed"
        assert site.service.status(third).result == "allow_once,allow_once"
        assert (tmp_path / "b.txt").exists()
        # The first decision came from the journal: nobody was asked about it again.
        assert [
            (e.payload["checkpointId"], e.payload["source"])
            for e in site.events(third, "checkpoint.resolved")
        ] == [
            (asked["checkpointId"], "journal"),
            (asked2["checkpointId"], "reply"),
        ]
        assert site.events(third, "checkpoint.requested") == []

    arun(scenario())


def test_a_denied_checkpoint_refuses_the_request_and_the_command_never_runs(tmp_path: Path) -> None:
    site = Site(tmp_path)

    async def scenario() -> None:
        first, _ = await site.start("run touch a.txt")
        cid = site.context(first)["checkpointId"]
        second, status = await site.resume(first, **{cid: "deny"})
        assert status == "completed"
        assert site.service.status(second).result == "reject_once"
        assert not (tmp_path / "a.txt").exists()

    arun(scenario())


def test_a_waiting_asker_answers_the_checkpoint_live_and_the_run_never_pauses(tmp_path: Path) -> None:
    site = Site(tmp_path)
    asked: list[Mapping[str, Any]] = []

    async def yes(context: Mapping[str, Any]) -> bool | None:
        asked.append(context)
        return True

    async def scenario() -> None:
        run_id, status = await site.start("run touch a.txt", asker=yes)
        assert status == "completed"
        assert site.service.status(run_id).result == "allow_once"
        (resolved,) = site.events(run_id, "checkpoint.resolved")
        assert resolved.payload["source"] == "elicitation" and resolved.payload["decision"] == "allow"
        assert site.events(run_id, "run.paused") == []

    arun(scenario())
    assert [c["command"] for c in asked] == ["touch a.txt"]
    assert (tmp_path / "a.txt").exists()


def test_an_asker_without_an_answer_leaves_the_run_paused_for_the_checkpoint(tmp_path: Path) -> None:
    site = Site(tmp_path)

    async def no_answer(context: Mapping[str, Any]) -> bool | None:
        return None  # e.g. the user declined the elicitation

    async def scenario() -> None:
        run_id, status = await site.start("run touch a.txt", asker=no_answer)
        assert status == "paused"
        assert site.context(run_id)["command"] == "touch a.txt"

    arun(scenario())
    assert not (tmp_path / "a.txt").exists()


@pytest.mark.parametrize(
    ("approvals", "prompt", "answer"),
    [
        ("never", "run touch a.txt", "reject_once"),  # nobody may be asked: refused, no checkpoint
        ("auto-review", "run touch a.txt", "allow_once"),  # the agent's own review is trusted
        ("ask", "permission edit src/a.ts", "allow_once"),  # the policy vouches for it: nobody is asked
        ("ask", "permission edit /etc/passwd", "reject_once"),  # the policy refuses it: nobody is asked
    ],
)
def test_the_policy_decides_what_it_can_and_only_the_rest_is_asked(
    tmp_path: Path, approvals: str, prompt: str, answer: str
) -> None:
    site = Site(tmp_path, Policy(approvals=approvals))  # type: ignore[arg-type]

    async def scenario() -> None:
        run_id, status = await site.start(prompt)
        assert status == "completed"
        assert site.service.status(run_id).result == answer
        assert site.events(run_id, "checkpoint.requested") == []

    arun(scenario())


def test_a_malformed_checkpoint_reply_is_refused_before_the_resume_starts(tmp_path: Path) -> None:
    site = Site(tmp_path)

    async def scenario() -> None:
        first, _ = await site.start("run touch a.txt")
        with pytest.raises(InvalidInputError, match="not a checkpoint id"):
            await site.resume(first, **{"a.txt": "allow"})
        with pytest.raises(InvalidInputError, match="allow or deny"):
            await site.resume(first, **{site.context(first)["checkpointId"]: "maybe"})

    arun(scenario())
