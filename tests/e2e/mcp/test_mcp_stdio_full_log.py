"""``workflow-mcp serve`` whose diagnostics (stderr) go to a full disk (``/dev/full``): they are dropped,
never fatal — the server starts, serves runs and answers as usual. A real stdio server, the SDK's
stdio client."""

from __future__ import annotations

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client

from mcp_kit import BOUND_S
from mcp_serve_kit import Site

pytestmark = pytest.mark.anyio

LOUD = """export const meta = { name: 'loud', description: 'logs and warns as it goes' }
log('a log line')
console.error('a console line')
return await agent('hi')
"""


async def test_a_server_whose_stderr_is_full_keeps_serving(site: Site) -> None:
    site.workflow("loud", LOUD)
    with open("/dev/full", "w") as full, anyio.fail_after(BOUND_S):
        async with stdio_client(site.stdio(), errlog=full) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            for _ in range(3):
                done = await s.call_tool(
                    "workflow_run", {"name": "loud", "provider": "fake", "waitMs": 20_000}
                )
                assert not done.is_error and done.structured_content is not None
                assert (done.structured_content["status"], done.structured_content["result"]) == (
                    "completed",
                    "hi",
                )
            refused = await s.call_tool("workflow_run_status", {"runId": "run_unknown"})
            assert refused.is_error
