"""Plugin discovery (``definitions/plugins.py``): what Claude skips silently is a diagnostic here, a
local workflow shadows a plugin's of the same visible name, and a bare name points at the plugin's."""

from __future__ import annotations

import json
import os
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


def plugins_sharing_a_name(tmp_path: Path, ids: list[str], user: list[str], project: list[str]) -> Path:
    """A directory marketplace ``m`` whose plugins ``ids`` all declare the manifest name ``wfp`` and ship
    ``workflows/shared.js`` (returning the plugin's id), ``workflows/only.js`` (``wfp:only-<id>``) and an
    agent ``helper``; ``user`` and ``project`` list the ``enabledPlugins`` keys of each settings file, in
    that key order."""
    (tmp_path / "mkt" / ".claude-plugin").mkdir(parents=True)
    (tmp_path / "mkt" / ".claude-plugin" / "marketplace.json").write_text(
        json.dumps({"name": "m", "plugins": [{"name": i, "source": f"./{i}"} for i in ids]})
    )
    for i in ids:
        folder = tmp_path / "mkt" / i
        (folder / ".claude-plugin").mkdir(parents=True)
        (folder / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "wfp"}))
        (folder / "workflows").mkdir()
        (folder / "workflows" / "shared.js").write_text(
            f"export const meta = {{ name: 'shared', description: 'd' }}\nreturn '{i}'\n"
        )
        (folder / "workflows" / "only.js").write_text(
            f"export const meta = {{ name: 'only-{i}', description: 'd' }}\nreturn 1\n"
        )
        (folder / "agents").mkdir()
        (folder / "agents" / "helper.md").write_text(f"---\nname: helper\ndescription: d\n---\nFROM-{i}\n")
    config = tmp_path / "home" / ".claude"
    (config / "plugins").mkdir(parents=True)
    location = str(tmp_path / "mkt")
    (config / "plugins" / "known_marketplaces.json").write_text(
        json.dumps({"m": {"source": {"source": "directory", "path": location}, "installLocation": location}})
    )
    (config / "settings.json").write_text(json.dumps({"enabledPlugins": {f"{i}@m": True for i in user}}))
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    (proj / ".claude").mkdir()
    (proj / ".claude" / "settings.json").write_text(
        json.dumps({"enabledPlugins": {f"{i}@m": True for i in project}})
    )
    return proj


def test_plugins_come_in_the_settings_order_and_the_last_one_wins_a_shared_name(tmp_path: Path) -> None:
    # Measured (plugins-order-of-plugins): user settings ccc, aaa, bbb then project ddd; ddd wins.
    proj = plugins_sharing_a_name(tmp_path, ["aaa", "bbb", "ccc", "ddd"], ["ccc", "aaa", "bbb"], ["ddd"])
    home = tmp_path / "home"
    assert [p.id for p in find_plugins(proj, home).plugins] == ["ccc@m", "aaa@m", "bbb@m", "ddd@m"]
    found = find_workflows(proj, home)
    shared = next(w for w in found.workflows if w.name == "wfp:shared")
    assert shared.plugin is not None and shared.plugin.id == "ddd@m"
    shadowed = sorted(d.path for d in found.diagnostics if d.kind == "shadowed")
    assert shadowed == [str(tmp_path / "mkt" / i / "workflows" / "shared.js") for i in ("aaa", "bbb", "ccc")]
    assert all("the one enabled later wins" in d.message for d in found.diagnostics)
    # Each plugin's folder in directory order; a shared name stays where its first file was.
    order: list[str] = []
    for i in ("ccc", "aaa", "bbb", "ddd"):
        for entry in os.listdir(tmp_path / "mkt" / i / "workflows"):
            name = "wfp:shared" if entry == "shared.js" else f"wfp:only-{i}"
            if name not in order:
                order.append(name)
    assert [w.name for w in found.workflows] == order
    helper = find_agents(proj, home).definitions["wfp:helper"]
    assert helper.plugin == "ddd@m" and "FROM-ddd" in (helper.instructions or "")


def test_a_later_settings_entry_keeps_the_plugins_first_place(tmp_path: Path) -> None:
    # Measured (plugins-order-kept-when-project-settings-name-a-user-plugin): project settings naming a
    # user plugin again do not move it; a key keeps the place of its first entry.
    proj = plugins_sharing_a_name(tmp_path, ["aaa", "bbb"], ["bbb", "aaa"], ["bbb"])
    assert [p.id for p in find_plugins(proj, tmp_path / "home").plugins] == ["bbb@m", "aaa@m"]


def test_files_of_one_plugin_that_share_a_name_resolve_to_the_last_in_directory_order(tmp_path: Path) -> None:
    # Measured (five files of one plugin declaring `dup`): Claude keeps the last one its directory
    # listing returns, and lists the name where the first one was.
    proj = market(tmp_path, {"p@m": True})
    workflows = tmp_path / "mkt" / "p" / "workflows"
    (workflows / "hello.js").unlink()
    for stem in ("b", "a", "c", "e", "d"):
        (workflows / f"{stem}.js").write_text(
            f"export const meta = {{ name: 'dup', description: 'd' }}\nreturn '{stem}'\n"
        )
    for stem, name in (("k", "Kilo"), ("j", "juliet"), ("h", "_hotel")):
        (workflows / f"{stem}.js").write_text(f"export const meta = {{ name: '{name}', description: 'd' }}\n")
    listing = os.listdir(workflows)
    dups = [f for f in listing if f[0] in "abcde"]
    found = find_workflows(proj, tmp_path / "home")
    dup = next(w for w in found.workflows if w.name == "p:dup")
    assert dup.path == str(workflows / dups[-1])
    names = {"k.js": "p:Kilo", "j.js": "p:juliet", "h.js": "p:_hotel"}
    expected: list[str] = []
    for entry in listing:
        name = names.get(entry, "p:dup")
        if name not in expected:
            expected.append(name)
    assert [w.name for w in found.workflows] == expected
    losers = [d for d in found.diagnostics if d.kind == "shadowed"]
    assert sorted(d.path for d in losers) == sorted(str(workflows / f) for f in dups[:-1])
    assert all("comes later in directory order" in d.message for d in losers)


def test_under_profile_2_1_209_the_first_plugin_file_of_a_name_wins(tmp_path: Path) -> None:
    # Measured in Claude Code 2.1.209 (plugins-order-of-plugins: ccc's wfp:shared, ddd's wfp:helper;
    # five files of one plugin declaring `dup`: the first its directory listing returns).
    proj = plugins_sharing_a_name(tmp_path, ["aaa", "bbb", "ccc", "ddd"], ["ccc", "aaa", "bbb"], ["ddd"])
    home = tmp_path / "home"
    workflows = tmp_path / "mkt" / "ccc" / "workflows"
    for stem in ("b", "a", "c"):
        (workflows / f"dup-{stem}.js").write_text(
            f"export const meta = {{ name: 'dup', description: 'd' }}\nreturn '{stem}'\n"
        )
    found = find_workflows(proj, home, profile="claude-code/2.1.209")
    shared = next(w for w in found.workflows if w.name == "wfp:shared")
    assert shared.plugin is not None and shared.plugin.id == "ccc@m"
    dups = [f for f in os.listdir(workflows) if f.startswith("dup-")]
    assert next(w for w in found.workflows if w.name == "wfp:dup").path == str(workflows / dups[0])
    messages = [d.message for d in found.diagnostics if d.kind == "shadowed"]
    assert any("the one enabled first wins" in m for m in messages)
    assert any("comes first in directory order" in m for m in messages)
    # Plugin agents: the last plugin wins in 2.1.209 too.
    helper = find_agents(proj, home, profile="claude-code/2.1.209").definitions["wfp:helper"]
    assert helper.plugin == "ddd@m"


def test_agent_files_of_one_plugin_that_share_a_name_resolve_to_the_last_in_directory_order(
    tmp_path: Path,
) -> None:
    # Measured in 2.1.332: five files of one plugin's agents/ defining `dup`; the one the directory
    # listing returns last answers `wfp:dup` (its model reached the mock).
    proj = market(tmp_path, {"p@m": True})
    agents = tmp_path / "mkt" / "p" / "agents"
    for stem in ("b", "a", "c", "e", "d"):
        (agents / f"{stem}.md").write_text(
            f"---\nname: dup\ndescription: d\nmodel: m-{stem}\n---\nFROM-{stem}\n"
        )
    last = [f for f in os.listdir(agents) if f != "helper.md"][-1]
    dup = find_agents(proj, tmp_path / "home").definitions["p:dup"]
    assert dup.path == str(agents / last)
    assert dup.instructions == f"FROM-{last[0]}"
