"""Human checkpoints over real stdio: a ``workflow-mcp serve``
process whose user policy says ``approvals = "ask"``, the real ACP stub agent (its own process,
over stdio) asking permission to run commands, and the real ``mcp`` SDK client.

With elicitation the user is asked while the client waits and an accepted answer lets the command
run; without it the run pauses ``checkpoint_required`` with a ``checkpointContext``, a resume with
``checkpointReplies`` answers it, and a later resume replays the journaled decision without asking."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, ElicitResult

from mcp_kit import all_events, call, connect, data
from mcp_serve_kit import Site

pytestmark = pytest.mark.anyio

pytest.importorskip("acp", reason="the acp extra is not installed (pip install -e '.[test,acp]')")

STUB_AGENT = str(Path(__file__).resolve().parents[2] / "integration" / "providers" / "acp_stub_agent.py")
WAIT_MS = 20_000


def gated(site: Site, prompt: str) -> None:
    site.workflow(
        "gated",
        "export const meta = { name: 'gated', description: 'an agent that runs commands' }\n"
        f"return await agent({json.dumps(prompt)}, {{ label: 'runner' }})\n",
    )
    site.state.mkdir(parents=True, exist_ok=True)
    (site.state / "config.toml").write_text(
        'default = "acp"\n\n[policy]\napprovals = "ask"\n\n'
        f"[providers.acp]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(STUB_AGENT)}]\n"
    )


def answering(allow: bool) -> Any:
    """An elicitation callback answering every checkpoint with ``allow``; ``.asked`` keeps the questions."""

    async def callback(context: Any, params: Any) -> ElicitResult:
        callback.asked.append(params.message)  # type: ignore[attr-defined]
        return ElicitResult(action="accept", content={"allow": allow})

    callback.asked = []  # type: ignore[attr-defined]
    return callback


async def run(client: Any, **arguments: Any) -> dict[str, Any]:
    return data(await call(client, "workflow_run", {"provider": "acp", "waitMs": WAIT_MS, **arguments}))


async def test_an_accepted_elicitation_lets_the_agents_command_run(site: Site) -> None:
    gated(site, "run touch ran.txt")
    asked = answering(True)
    async with connect(site.stdio(), mode="legacy", elicitation_callback=asked) as c:
        out = await run(c, name="gated")
        events = await all_events(c, out["runId"])
    assert out["status"] == "completed" and out["result"] == "allow_once"
    assert (site.project / "ran.txt").exists()
    (question,) = asked.asked
    assert "touch ran.txt" in question and "execute" in question
    resolved = [e for e in events if e["type"] == "checkpoint.resolved"]
    assert [(e["payload"]["decision"], e["payload"]["source"]) for e in resolved] == [
        ("allow", "elicitation")
    ]


async def test_a_refused_elicitation_denies_the_command(site: Site) -> None:
    gated(site, "run touch ran.txt")
    async with connect(site.stdio(), mode="legacy", elicitation_callback=answering(False)) as c:
        out = await run(c, name="gated")
    assert out["status"] == "completed" and out["result"] == "reject_once"
    assert not (site.project / "ran.txt").exists()


async def test_without_elicitation_the_run_pauses_and_checkpoint_replies_complete_it(site: Site) -> None:
    gated(site, "run touch ran.txt")
    async with connect(site.stdio()) as c:
        paused = await run(c, name="gated")
        assert paused["status"] == "paused" and paused["pausedReason"] == "checkpoint_required"
        context = paused["checkpointContext"]
        assert {k: context[k] for k in ("label", "tool", "command")} == {
            "label": "runner",
            "tool": "execute",
            "command": "touch ran.txt",
        }
        assert not (site.project / "ran.txt").exists()
        done = await run(
            c, resumeFromRunId=paused["runId"], checkpointReplies={context["checkpointId"]: "allow"}
        )
    assert done["status"] == "completed" and done["result"] == "allow_once"
    assert (site.project / "ran.txt").exists()


async def test_a_second_resume_replays_the_recorded_decision_without_asking(site: Site) -> None:
    gated(site, "run touch a.txt ;; touch b.txt")
    async with connect(site.stdio()) as c:
        first = await run(c, name="gated")
        one = first["checkpointContext"]
        assert first["pausedReason"] == "checkpoint_required" and one["command"] == "touch a.txt"
        second = await run(
            c, resumeFromRunId=first["runId"], checkpointReplies={one["checkpointId"]: "allow"}
        )
        two = second["checkpointContext"]
        assert second["pausedReason"] == "checkpoint_required" and two["command"] == "touch b.txt"
        third = await run(
            c, resumeFromRunId=second["runId"], checkpointReplies={two["checkpointId"]: "allow"}
        )
        events = await all_events(c, third["runId"])
    assert third["status"] == "completed" and third["result"] == "allow_once,allow_once"
    assert [e for e in events if e["type"] == "checkpoint.requested"] == []  # nobody was asked
    resolved = [
        (e["payload"]["checkpointId"], e["payload"]["source"])
        for e in events
        if e["type"] == "checkpoint.resolved"
    ]
    assert resolved == [(one["checkpointId"], "journal"), (two["checkpointId"], "reply")]


async def test_checkpoint_replies_need_a_resume_of_a_stored_run(site: Site) -> None:
    gated(site, "run touch ran.txt")
    async with connect(site.stdio()) as c:
        with pytest.raises(MCPError, match="resumeFromRunId alone") as refused:
            await c.call_tool(
                "workflow_run", {"name": "gated", "provider": "acp", "checkpointReplies": {"cp_1": "allow"}}
            )
    assert refused.value.code == INVALID_PARAMS
    assert not (site.project / "ran.txt").exists()
