"""The workflow library through the MCP Inspector CLI (a client we did not write, without elicitation)
against ``workflow-mcp serve`` over stdio: create → list (by tag) → get → run → delete by token."""

from __future__ import annotations

from typing import Any

import pytest
from test_mcp_inspector import NPX, inspector

from mcp_serve_kit import Site

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(NPX is None, reason="npx (Node.js) is not installed, so the MCP Inspector cannot run"),
]


def _call(site: Site, tool: str, *args: str) -> dict[str, Any]:
    flags = [a for arg in args for a in ("--tool-arg", arg)]
    return inspector(site, "--method", "tools/call", "--tool-name", tool, *flags)


def test_the_inspector_drives_the_library_create_list_describe_run_and_delete(site: Site) -> None:
    """Without elicitation, workflow_delete answers confirmation_required with a single-use token, and
    the second call with that token deletes."""
    source = "export const meta = { name: 'shipit', description: 'ships' }\nreturn await agent('ship')\n"
    created = _call(site, "workflow_create", f"script={source}", "version=v2.0.0", 'tags=["ops"]')
    assert created["isError"] is False, created
    assert created["structuredContent"]["version"] == "2.0.0"
    assert (site.project / ".claude/workflows/shipit.js").read_text() == source
    listed = _call(site, "workflow_list", 'tags=["OPS"]')
    assert [w["name"] for w in listed["structuredContent"]["workflows"]] == ["shipit"]
    got = _call(site, "workflow_get", "name=shipit")
    assert got["structuredContent"]["source"] == source
    ran = _call(site, "workflow_run", "name=shipit", "provider=fake", "waitMs=20000")
    assert ran["structuredContent"]["status"] == "completed"
    asked = _call(site, "workflow_delete", "name=shipit")
    assert asked["structuredContent"]["status"] == "confirmation_required"
    token = asked["structuredContent"]["confirmToken"]
    deleted = _call(site, "workflow_delete", "name=shipit", f"confirmToken={token}")
    assert deleted["structuredContent"]["status"] == "deleted"
    assert not (site.project / ".claude/workflows/shipit.js").exists()
    replay = _call(site, "workflow_delete", "name=shipit", f"confirmToken={token}")
    assert replay["isError"] is True and replay["structuredContent"]["reason"] == "confirmation_invalid"
