"""The README's MCP tools table is the server's tool list: a real SDK client over real stdio."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mcp_kit import call, connect, data
from mcp_serve_kit import Site

pytestmark = pytest.mark.anyio

README = Path(__file__).resolve().parents[3] / "README.md"


async def test_the_readme_documents_every_tool_the_server_lists_and_every_provider(site: Site) -> None:
    async with connect(site.stdio()) as c:
        listed = {t.name for t in (await c.list_tools()).tools}
        providers = {p["name"] for p in data(await call(c, "providers_list", {}))["providers"]}
    text = README.read_text()
    section = text[text.index("## MCP server") : text.index("## Connecting MCP clients")]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", section, re.M))
    assert documented == listed
    row = next(line for line in section.splitlines() if line.startswith("| `workflow_run` |"))
    assert all(f"`{name}`" in row for name in providers), providers
