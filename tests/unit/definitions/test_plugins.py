"""Plugin discovery (``definitions/plugins.py``): what Claude skips silently is a diagnostic here, a
local workflow shadows a plugin's of the same visible name, and a bare name points at the plugin's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workflow_mcp.definitions import find_workflows, resolve_workflow
from workflow_mcp.definitions.agents import find_agents
from workflow_mcp.definitions.plugins import find_plugins
from workflow_mcp.errors import WorkflowNotFoundError

HELLO = "export const meta = { name: 'hello', description: 'plugin' }\nreturn 1\n"


def market(tmp_path: Path, enabled: dict[str, bool], *, manifest: str | None = None) -> Path:
    """A directory marketplace ``m`` with plugin ``p`` (workflow ``hello``, agent ``helper``), known to
    the user's Claude folder ``home/.claude``, with ``enabled`` as the user settings' enabledPlugins."""
    folder = tmp_path / "mkt" / "p"
    (folder / ".claude-plugin").mkdir(parents=True)
    (folder / ".claude-plugin" / "plugin.json").write_text(
        manifest or json.dumps({"name": "p", "version": "2.0.0"})
    )
    (folder / "workflows").mkdir()
    (folder / "workflows" / "hello.js").write_text(HELLO)
    (folder / "agents").mkdir()
    (folder / "agents" / "helper.md").write_text("---\nname: helper\ndescription: d\n---\nBODY\n")
    (tmp_path / "mkt" / ".claude-plugin").mkdir()
    (tmp_path / "mkt" / ".claude-plugin" / "marketplace.json").write_text(
        json.dumps({"name": "m", "plugins": [{"name": "p", "source": "./p"}]})
    )
    config = tmp_path / "home" / ".claude"
    (config / "plugins").mkdir(parents=True)
    location = str(tmp_path / "mkt")
    (config / "plugins" / "known_marketplaces.json").write_text(
        json.dumps({"m": {"source": {"source": "directory", "path": location}, "installLocation": location}})
    )
    (config / "settings.json").write_text(json.dumps({"enabledPlugins": enabled}))
    (tmp_path / "proj" / ".git").mkdir(parents=True)
    return tmp_path / "proj"


def test_an_enabled_plugin_is_found_with_its_version_and_the_settings_that_enabled_it(tmp_path: Path) -> None:
    proj = market(tmp_path, {"p@m": True})
    (plugin,) = find_plugins(proj, tmp_path / "home").plugins
    assert (plugin.id, plugin.name, plugin.version, plugin.scope) == ("p@m", "p", "2.0.0", "user")
    assert plugin.enabled_by.endswith("settings.json")
    found = find_workflows(proj, tmp_path / "home")
    assert [(w.name, w.source, w.meta.name) for w in found.workflows] == [("p:hello", "plugin", "hello")]
    agent = find_agents(proj, tmp_path / "home").resolve("p:helper")
    assert (agent.source, agent.plugin, agent.instructions) == ("plugin", "p@m", "BODY")


@pytest.mark.parametrize(
    ("enabled", "manifest", "kind"),
    [
        ({"p@m": False}, None, "plugin-disabled"),
        ({"p@m": True}, "{not json", "plugin-broken"),
        ({"p@nowhere": True}, None, "plugin-broken"),
        ({"no-marketplace": True}, None, "plugin-broken"),
    ],
)
def test_a_disabled_or_broken_plugin_is_a_diagnostic_never_a_crash(
    tmp_path: Path, enabled: dict[str, bool], manifest: str | None, kind: str
) -> None:
    proj = market(tmp_path, enabled, manifest=manifest)
    found = find_workflows(proj, tmp_path / "home")
    assert found.workflows == []
    assert [d.kind for d in found.diagnostics] == [kind]


def test_a_project_workflow_of_the_same_visible_name_shadows_the_plugins(tmp_path: Path) -> None:
    proj = market(tmp_path, {"p@m": True})
    (proj / ".claude" / "workflows").mkdir(parents=True)
    (proj / ".claude" / "workflows" / "x.js").write_text(
        "export const meta = { name: 'p:hello', description: 'local' }\nreturn 2\n"
    )
    found = find_workflows(proj, tmp_path / "home")
    assert [(w.name, w.source) for w in found.workflows] == [("p:hello", "project")]
    (shadowed,) = [d for d in found.diagnostics if d.kind == "shadowed"]
    assert "beats a plugin's workflow" in shadowed.message


def test_a_bare_name_is_not_found_and_the_message_names_the_plugin_workflow(tmp_path: Path) -> None:
    proj = market(tmp_path, {"p@m": True})
    with pytest.raises(WorkflowNotFoundError, match="did you mean 'p:hello'"):
        resolve_workflow("hello", proj, tmp_path / "home")


def test_personal_workflows_follow_claude_config_dir_when_no_home_is_given(tmp_path: Path) -> None:
    (tmp_path / "cfg" / "workflows").mkdir(parents=True)
    (tmp_path / "cfg" / "workflows" / "a.js").write_text(
        "export const meta = { name: 'from-config', description: 'd' }\nreturn 1\n"
    )
    (tmp_path / "proj" / ".git").mkdir(parents=True)
    found = find_workflows(tmp_path / "proj", environ={"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")})
    assert [w.name for w in found.workflows] == ["from-config"]
