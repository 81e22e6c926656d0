"""``workflow-mcp serve --sandbox bwrap``: every run's worker runs under bubblewrap."""

from __future__ import annotations

import shutil

import pytest

from mcp_kit import call, connect, data
from mcp_serve_kit import Site

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        shutil.which("bwrap") is None,
        reason="bubblewrap (bwrap) is not installed here; CI installs the Debian package bubblewrap",
    ),
]


async def test_a_stdio_server_with_sandbox_bwrap_runs_workflows(site: Site) -> None:
    async with connect(site.stdio("--sandbox", "bwrap")) as c:
        out = data(
            await call(
                c,
                "workflow_run",
                {"name": "hello", "provider": "fake", "args": {"who": "io"}, "waitMs": 20_000},
            )
        )
    assert out["status"] == "completed" and out["result"] == {"a": "hello io", "args": {"who": "io"}}


async def test_a_stdio_server_whose_sandbox_cannot_start_fails_the_run_naming_the_package(site: Site) -> None:
    params = site.stdio("--sandbox", "bwrap")
    assert params.env is not None
    params.env["WORKFLOW_MCP_BWRAP"] = "/nonexistent/bwrap"
    params.env["PATH"] = "/nonexistent"
    async with connect(params) as c:
        result = await call(c, "workflow_run", {"name": "hello", "provider": "fake", "waitMs": 20_000})
    text = " ".join(getattr(block, "text", "") for block in result.content)
    assert result.is_error is True
    assert "install the package bubblewrap" in text
