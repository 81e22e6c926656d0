"""``workflow_plan`` (a run's cost preview by dry run) and the server's ``--confirm-above N``: a new run
whose preview makes more than N agent calls starts only once the user confirms it (form elicitation) or
the caller accepts the count with ``confirmAgentCalls``. In-memory client."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import ElicitResult

from workflow_mcp.server import ServerPolicy

from mcp_kit import HELLO, Env, approve, call, connect, data, text

pytestmark = pytest.mark.anyio

FOUR = (
    "export const meta = { name: 'four', description: 'four calls in two phases' }\n"
    "phase('Fan out')\n"
    "const out = await parallel([1, 2, 3].map((i) => () => agent('call ' + i, { label: 'c' + i })))\n"
    "phase('Sum up')\n"
    "return [out, await agent('sum', { label: 'sum', schema: { type: 'object', properties: "
    "{ n: { type: 'integer' } }, required: ['n'] } })]\n"
)


async def test_workflow_plan_previews_a_run_without_starting_one(env: Env) -> None:
    env.workflow("four", FOUR)
    async with connect(env.trusted_server()) as c:
        result = await call(c, "workflow_plan", {"name": "four", "provider": "fake", "tokenBudget": 100_000})
    preview = data(result)
    assert not result.is_error
    assert preview["agentCalls"] == 4 and preview["byPhase"] == {"Fan out": 3, "Sum up": 1}
    assert preview["byProvider"]["fake"]["calls"] == 4
    assert preview["estimatedTokens"] == {"input": 80_000, "output": 8_000}  # 4 × the defaults
    assert preview["budget"] == {
        "total": 100_000,
        "estimatedSpent": 8_000,
        "wouldHit": False,
        "refusedCalls": 0,
    }
    assert preview["cap"] == {"limit": 1000, "admitted": 4, "wouldHit": False}
    assert text(result).startswith("four: 4 agent call(s)")
    assert env.service.list_runs() == []  # a preview records nothing


async def test_workflow_plan_asks_to_approve_an_unapproved_source_first(env: Env) -> None:
    asked = approve(True)
    async with connect(env.server(), elicitation_callback=asked) as c:
        result = await call(c, "workflow_plan", {"script": HELLO, "args": {"who": "x"}})
        refused = await call(c, "workflow_plan", {"script": HELLO.replace("greets", "greets again")})
    assert data(result)["agentCalls"] == 1
    assert len(asked.asked) == 2 and "dry run" in asked.asked[0]  # type: ignore[attr-defined]
    assert not refused.is_error  # approve(True) approved the second source too
    async with connect(env.server()) as c:
        unapproved = await call(c, "workflow_plan", {"script": HELLO.replace("greets", "greets thrice")})
    assert unapproved.is_error and "never been approved" in text(unapproved)


async def test_workflow_plan_refuses_bad_arguments_as_invalid_params(env: Env) -> None:
    async with connect(env.trusted_server()) as c:
        with pytest.raises(MCPError, match="give exactly one of name, path or script"):
            await c.call_tool("workflow_plan", {})
        with pytest.raises(MCPError, match="unknown provider 'nope'"):
            await c.call_tool("workflow_plan", {"script": HELLO, "provider": "nope"})
        with pytest.raises(MCPError, match="invalid fakeScript"):
            await c.call_tool("workflow_plan", {"script": HELLO, "fakeScript": {"rules": 5}})


def confirm(answer: dict[str, Any] | None, action: str = "accept") -> Any:
    """An elicitation callback: approves every source, answers the run confirmation with ``answer``."""

    async def callback(context: Any, params: Any) -> ElicitResult:
        callback.asked.append(params.message)  # type: ignore[attr-defined]
        if "approve" in str(params.requested_schema):
            return ElicitResult(action="accept", content={"approve": True})
        return ElicitResult(action=action, content=answer)  # type: ignore[arg-type]

    callback.asked = []  # type: ignore[attr-defined]
    return callback


RUN = {"name": "four", "provider": "fake", "waitMs": 20_000}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_run_over_confirm_above_starts_once_the_user_confirms_it(env: Env, mode: str) -> None:
    env.workflow("four", FOUR)
    server = env.trusted_server(policy=ServerPolicy(confirm_above=3))
    yes = confirm({"start": True})
    async with connect(server, mode=mode, elicitation_callback=yes) as c:
        result = await call(c, "workflow_run", RUN)
    assert data(result)["status"] == "completed", text(result)
    (question,) = yes.asked
    assert "'four'" in question and "4 agent call(s)" in question and "more than the 3" in question


async def test_a_declined_confirmation_starts_nothing(env: Env) -> None:
    env.workflow("four", FOUR)
    server = env.trusted_server(policy=ServerPolicy(confirm_above=3))
    async with connect(server, elicitation_callback=confirm({"start": False})) as c:
        no = await call(c, "workflow_run", RUN)
    async with connect(server, elicitation_callback=confirm(None, action="decline")) as c:
        declined = await call(c, "workflow_run", RUN)
    assert no.is_error and "did not confirm" in text(no) and "Nothing was started" in text(no)
    assert declined.is_error and "answer: decline" in text(declined)
    assert env.service.list_runs() == []


async def test_a_client_without_elicitation_starts_an_over_limit_run_with_confirm_agent_calls(
    env: Env,
) -> None:
    env.workflow("four", FOUR)
    env.workflow("hello", HELLO)
    server = env.trusted_server(policy=ServerPolicy(confirm_above=3))
    async with connect(server) as c:
        refused = await call(c, "workflow_run", RUN)
        too_few = await call(c, "workflow_run", {**RUN, "confirmAgentCalls": 3})
        accepted = await call(c, "workflow_run", {**RUN, "confirmAgentCalls": 4})
        within = await call(c, "workflow_run", {**RUN, "name": "hello"})
    assert refused.is_error and "cannot ask the user" in text(refused)
    assert "confirmAgentCalls: 4" in text(refused)
    assert too_few.is_error
    assert data(accepted)["status"] == "completed"
    assert not within.is_error  # one call: under the limit, nothing to confirm
    assert len(env.service.list_runs()) == 2
