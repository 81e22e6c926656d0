"""Plugin workflows over MCP: workflow_list marks them with their plugin and version and reports a
disabled plugin; workflow_run starts one by its visible name ``<plugin>:<name>`` under the same approval
rules as any other source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcp_kit import Env, call, connect, data, text

pytestmark = pytest.mark.anyio

HELLO = """export const meta = { name: 'hello', description: 'a plugin workflow' }
return await agent('hi', { agentType: 'wfp:helper', label: 'h' })
"""
HELPER = "---\nname: helper\ndescription: a plugin agent\nmodel: haiku\n---\nPLUGIN-INSTRUCTIONS\n"


def install(env: Env, *, enabled: dict[str, bool]) -> Path:
    """A directory marketplace ``localmkt`` with plugins ``wfp`` (a workflow and an agent) and ``off``,
    recorded and enabled as ``claude plugin marketplace add`` / ``install`` leave them."""
    market = env.root / "mkt"
    for name in ("wfp", "off"):
        folder = market / "plugins" / name
        (folder / ".claude-plugin").mkdir(parents=True)
        (folder / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": name, "version": "1.2.3"}))
        (folder / "workflows").mkdir()
        (folder / "workflows" / "hello.js").write_text(HELLO)
        (folder / "agents").mkdir()
        (folder / "agents" / "helper.md").write_text(HELPER)
    (market / ".claude-plugin").mkdir()
    (market / ".claude-plugin" / "marketplace.json").write_text(
        json.dumps(
            {"name": "localmkt", "plugins": [{"name": n, "source": f"./plugins/{n}"} for n in ("wfp", "off")]}
        )
    )
    config = env.home / ".claude"
    (config / "plugins").mkdir(parents=True)
    source = {"source": "directory", "path": str(market)}
    (config / "plugins" / "known_marketplaces.json").write_text(
        json.dumps({"localmkt": {"source": source, "installLocation": str(market)}})
    )
    (config / "settings.json").write_text(json.dumps({"enabledPlugins": enabled}))
    return market


async def test_workflow_list_marks_plugin_workflows_and_reports_a_disabled_plugin(env: Env) -> None:
    install(env, enabled={"wfp@localmkt": True, "off@localmkt": False})
    env.workflow("local", "export const meta = { name: 'local', description: 'a local one' }\nreturn 1\n")
    async with connect(env.trusted_server()) as c:
        out = data(await call(c, "workflow_list", {}))
    workflows: list[dict[str, Any]] = out["workflows"]
    assert [w["name"] for w in workflows] == ["wfp:hello", "local"]
    assert workflows[0]["source"] == "plugin"
    assert workflows[0]["plugin"] == "wfp@localmkt"
    assert workflows[0]["pluginVersion"] == "1.2.3"
    assert "plugin" not in workflows[1]
    kinds = {d["kind"] for d in out["diagnostics"]}
    assert kinds == {"plugin-disabled"}


async def test_a_plugin_workflow_runs_by_its_visible_name_with_its_plugin_agent(env: Env) -> None:
    market = install(env, enabled={"wfp@localmkt": True})
    async with connect(env.server(trust=(str(market),))) as c:
        out = data(
            await call(
                c,
                "workflow_run",
                {
                    "name": "wfp:hello",
                    "provider": "fake",
                    "fakeScript": {"default": {"text": "{agentType} {model} {instructions}"}},
                    "waitMs": 20_000,
                },
            )
        )
    assert out["status"] == "completed", out
    assert out["result"] == "wfp:helper haiku PLUGIN-INSTRUCTIONS"


async def test_a_plugin_workflow_outside_every_trusted_directory_is_not_run_without_approval(
    env: Env,
) -> None:
    install(env, enabled={"wfp@localmkt": True})
    async with connect(env.server(trust=(str(env.project),))) as c:
        result = await call(c, "workflow_run", {"name": "wfp:hello", "provider": "fake", "waitMs": 5_000})
    assert result.is_error, data(result)
    assert "approv" in text(result), text(result)
