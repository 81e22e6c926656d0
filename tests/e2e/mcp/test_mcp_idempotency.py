"""An idempotency key names one request: the same parameters get the same run (also from a restarted
server: the key lives in the SQLite state file), other parameters are refused naming the run. A real
SDK client over real stdio."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from mcp_kit import call, connect, data
from mcp_serve_kit import Site

pytestmark = pytest.mark.anyio

FIRST: dict[str, Any] = {
    "name": "hello",
    "provider": "fake",
    "args": {"who": "a"},
    "idempotencyKey": "k-1",
    "waitMs": 20_000,
}


@pytest.mark.parametrize(
    "change",
    [
        {"args": {"who": "b"}},
        {"name": "steps"},
        {"tokenBudget": 10},
        {"concurrency": 1},
        {"fakeScript": {"default": {"text": "x"}}},
        {"args": None},
    ],
    ids=["args", "workflow", "token-budget", "concurrency", "fake-script", "args-null"],
)
async def test_a_key_reused_with_other_parameters_is_refused_naming_its_run(
    site: Site, change: dict[str, Any]
) -> None:
    async with connect(site.stdio()) as c:
        first = data(await call(c, "workflow_run", FIRST))
        again = data(await call(c, "workflow_run", {**FIRST, "waitMs": 0}))
        with pytest.raises(MCPError) as caught:
            await c.call_tool("workflow_run", {**FIRST, **change})
    assert first["status"] == "completed" and again["runId"] == first["runId"] and again["deduplicated"]
    error = caught.value.error
    assert error.code == INVALID_PARAMS
    assert (
        f"idempotency key 'k-1' was used for run {first['runId']} with different parameters" in error.message
    )


async def test_the_key_survives_a_restart_with_the_state_file(site: Site) -> None:
    async with connect(site.stdio()) as c:
        first = data(await call(c, "workflow_run", FIRST))
    async with connect(site.stdio()) as c:
        again = data(await call(c, "workflow_run", FIRST))
        with pytest.raises(MCPError) as caught:
            await c.call_tool("workflow_run", {**FIRST, "args": {"who": "c"}})
        listed = data(await call(c, "workflow_run_status", {"runId": first["runId"]}))
    assert again["runId"] == first["runId"] and again["deduplicated"] and again["result"] == first["result"]
    assert caught.value.error.code == INVALID_PARAMS and first["runId"] in caught.value.error.message
    assert listed["status"] == "completed"
    assert (site.state / "state.db").is_file()


async def test_agent_run_keys_are_compared_the_same_way(site: Site) -> None:
    call_args = {"prompt": "hi", "provider": "fake", "idempotencyKey": "a-1", "label": "one"}
    async with connect(site.stdio()) as c:
        first = data(await call(c, "agent_run", call_args))
        again = data(await call(c, "agent_run", call_args))
        with pytest.raises(MCPError) as caught:
            await c.call_tool("agent_run", {**call_args, "prompt": "something else"})
    assert again["runId"] == first["runId"]
    assert caught.value.error.code == INVALID_PARAMS and first["runId"] in caught.value.error.message
