"""Unknown tool arguments are refused, not ignored: a real SDK client over real stdio, a real server."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from mcp_kit import call, connect, data
from mcp_serve_kit import Site

pytestmark = pytest.mark.anyio


async def test_a_misspelt_argument_is_invalid_params_naming_it_and_the_accepted_ones(site: Site) -> None:
    async with connect(site.stdio()) as c:
        with pytest.raises(MCPError) as caught:
            await c.call_tool("workflow_run", {"name": "hello", "provider": "fake", "tokenbudget": 5})
        error = caught.value.error
        assert error.code == INVALID_PARAMS
        assert "unknown argument 'tokenbudget' for workflow_run" in error.message
        assert "tokenBudget" in error.message and "idempotencyKey" in error.message
        with pytest.raises(MCPError) as agent:
            await c.call_tool("agent_run", {"prompt": "hi", "provider": "fake", "lable": "x", "modle": "y"})
        assert agent.value.error.code == INVALID_PARAMS
        assert "unknown arguments 'lable', 'modle' for agent_run" in agent.value.error.message
        ok = data(await call(c, "workflow_run", {"name": "hello", "provider": "fake", "waitMs": 20_000}))
    assert ok["status"] == "completed"


async def test_every_tool_publishes_an_input_schema_without_additional_properties(site: Site) -> None:
    async with connect(site.stdio()) as c:
        tools = (await c.list_tools()).tools
    assert len(tools) >= 10
    for tool in tools:
        assert tool.input_schema.get("additionalProperties") is False, tool.name


async def test_an_unknown_prompt_argument_or_prompt_is_invalid_params_not_an_internal_error(
    site: Site,
) -> None:
    async with connect(site.stdio()) as c:
        with pytest.raises(MCPError) as caught:
            await c.get_prompt("author-workflow", {"tsk": "review code"})
        with pytest.raises(MCPError) as unknown:
            await c.get_prompt("author-workflw", {})
        guide = await c.get_prompt("author-workflow", {"task": "review code"})
    assert caught.value.error.code == INVALID_PARAMS
    assert "unknown argument 'tsk' for prompt author-workflow; it accepts: task" in caught.value.error.message
    assert (
        unknown.value.error.code == INVALID_PARAMS
        and "available: author-workflow" in unknown.value.error.message
    )
    assert guide.messages
