"""Claude Code plugins: which are enabled from a directory, and the folder each one is read from.

Measured in Claude Code 2.1.332 with the oracle (``docs/PROFILE.md``, "Plugins"; cases
``tests/conformance/cases/runtime/plugins-*``):

- **Claude's folder** is ``$CLAUDE_CONFIG_DIR`` when that is set, else ``~/.claude``
  (:func:`claude_config_dir`; an explicit ``home`` means ``<home>/.claude``). Personal workflows,
  personal agents and plugins are all read from it.
- **Enabled** plugins are the ``enabledPlugins`` entries (``"<plugin>@<marketplace>": true``) of the
  user settings (``<config>/settings.json``), the project settings (``.claude/settings.json`` of the
  working directory only — not of the repository root), and the local settings
  (``.claude/settings.local.json`` of the repository root and of the working directory), later files
  overriding earlier ones: ``false`` in the project or local settings hides a plugin the user enabled.
  **Order**: plugins come in the order of their first entry in those files (user settings first, in
  the file's key order — the order of ``claude plugin install``), as Claude merges them; a later plugin
  wins a visible name two plugins ship (measured with two marketplaces holding one plugin name and with
  four plugins whose manifests share a name).
  Enabling is what counts: a plugin enabled in settings is visible even without ``claude plugin
  install`` having run, and a project-scope install is visible from any directory whose settings
  enable it.
- **Where a plugin is read from**: for a marketplace added from a directory, the plugin's folder in that
  directory, live (an edit there shows at once; the copy under ``<config>/plugins/cache`` is not read).
  Marketplaces are the ones recorded in ``<config>/plugins/known_marketplaces.json`` (or the user
  settings' ``extraKnownMarketplaces``); a marketplace a repository declares in its own settings is not
  used. For a marketplace added from a git URL (measured with a repository served over loopback HTTP;
  ``file://`` and a bare repository's path are refused by ``claude plugin marketplace add``) the
  install's ``installPath`` from ``<config>/plugins/installed_plugins.json`` is read — the copy under
  ``<config>/plugins/cache``, not the marketplace's clone under ``<config>/plugins/marketplaces`` — and
  a plugin enabled in settings but never installed from it is not visible. GitHub and URL-catalog
  marketplaces (``claude plugin install`` refuses a relative entry in a URL catalog) are treated the
  same way here, not measured.
- A plugin whose folder is gone or whose ``.claude-plugin/plugin.json`` is not a JSON object with a
  ``name`` is skipped by Claude without a word; here each is a :class:`PluginProblem`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

__all__ = [
    "Plugin",
    "PluginProblem",
    "PluginSet",
    "claude_config_dir",
    "find_plugins",
]

MAX_SETTINGS_BYTES: Final = 1_048_576
"""Settings, manifests and plugin registries larger than this are not read (workflow-mcp's own bound)."""

Scope = Literal["user", "project", "local"]
ProblemKind = Literal["disabled", "broken"]


@dataclass(frozen=True)
class Plugin:
    """One enabled plugin: ``id`` (``<plugin>@<marketplace>``, as settings name it), ``name`` (its
    manifest's name: the prefix of every workflow and agent it ships, ``<name>:<workflow>``),
    ``version`` (the manifest's, else the install's), ``root`` (the folder read) and ``enabled_by`` (the
    settings file whose entry decided, with its ``scope``)."""

    id: str
    name: str
    marketplace: str
    version: str | None
    root: str
    scope: Scope
    enabled_by: str

    def to_json(self) -> dict[str, Any]:
        """``{"id", "name", "marketplace", "version", "root", "scope", "enabledBy"}``."""
        return {
            "id": self.id,
            "name": self.name,
            "marketplace": self.marketplace,
            "version": self.version,
            "root": self.root,
            "scope": self.scope,
            "enabledBy": self.enabled_by,
        }


@dataclass(frozen=True)
class PluginProblem:
    """A plugin that contributes nothing: ``kind`` ``disabled`` (a settings file says ``false``) or
    ``broken`` (enabled, but its folder, marketplace or manifest cannot be used); ``path`` is the file
    or folder concerned."""

    plugin: str
    kind: ProblemKind
    path: str
    message: str

    def to_json(self) -> dict[str, Any]:
        """``{"plugin", "kind", "path", "message"}``."""
        return {"plugin": self.plugin, "kind": self.kind, "path": self.path, "message": self.message}


@dataclass(frozen=True)
class PluginSet:
    """What :func:`find_plugins` found: the enabled plugins in Claude's order (the order of their first
    ``enabledPlugins`` entry across user, project and local settings), and the problems."""

    config_dir: str
    plugins: tuple[Plugin, ...] = ()
    problems: tuple[PluginProblem, ...] = ()


def claude_config_dir(
    home: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Path:
    """Claude Code's folder: ``<home>/.claude`` for an explicit ``home``, else ``$CLAUDE_CONFIG_DIR``
    when set (measured: personal workflows, agents and plugins all move with it), else ``~/.claude``."""
    if home is not None:
        return Path(home) / ".claude"
    env = os.environ if environ is None else environ
    config = env.get("CLAUDE_CONFIG_DIR")
    if config:
        return Path(config).expanduser()
    return Path.home() / ".claude"


def find_plugins(
    cwd: str | os.PathLike[str],
    home: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    reachable: Callable[[str], bool] | None = None,
) -> PluginSet:
    """The plugins enabled for a session started in ``cwd`` (module docstring for the rules). Never
    raises: unreadable settings, unknown marketplaces, missing folders and broken manifests become
    :class:`PluginProblem` entries. ``reachable`` (a predicate on real paths) makes a plugin whose
    folder it refuses absent, unread and unmentioned."""
    config = claude_config_dir(home, environ)
    here = Path(os.path.abspath(cwd))
    problems: list[PluginProblem] = []
    decided: dict[str, tuple[bool, Scope, str]] = {}
    for scope, path in _settings_files(config, here):
        data = _read_json(path, problems)
        entries = data.get("enabledPlugins") if isinstance(data, dict) else None
        if not isinstance(entries, dict):
            continue
        for plugin_id, value in entries.items():
            if isinstance(value, bool):
                decided[str(plugin_id)] = (value, scope, str(path))
    user = _read_json(config / "settings.json", [])
    known = _known_marketplaces(config, user, problems)
    installed = _read_json(config / "plugins" / "installed_plugins.json", problems)
    installs = installed.get("plugins") if isinstance(installed, dict) else None
    plugins: list[Plugin] = []
    for plugin_id in decided:  # first-entry order, as a JavaScript object merge keeps it
        on, scope, settings = decided[plugin_id]
        if not on:
            problems.append(
                PluginProblem(
                    plugin_id, "disabled", settings, f"plugin {plugin_id!r} is disabled by {settings}"
                )
            )
            continue
        found = _locate(plugin_id, scope, settings, known, installs, problems)
        if found is None:
            continue
        root, install_version = found
        if reachable is not None and not reachable(os.path.realpath(root)):
            continue
        manifest = _manifest(plugin_id, root, problems)
        if manifest is None:
            continue
        name, version = manifest
        plugins.append(
            Plugin(
                id=plugin_id,
                name=name,
                marketplace=plugin_id.rpartition("@")[2],
                version=version or install_version,
                root=root,
                scope=scope,
                enabled_by=settings,
            )
        )
    return PluginSet(str(config), tuple(plugins), tuple(problems))


# -- internals ---------------------------------------------------------------------------------


def _settings_files(config: Path, here: Path) -> list[tuple[Scope, Path]]:
    """User, project and local settings, in the order they override each other."""
    root = next((p for p in (here, *here.parents) if os.path.lexists(p / ".git")), None)
    files: list[tuple[Scope, Path]] = [
        ("user", config / "settings.json"),
        ("project", here / ".claude" / "settings.json"),
    ]
    if root is not None and root != here:
        files.append(("local", root / ".claude" / "settings.local.json"))
    files.append(("local", here / ".claude" / "settings.local.json"))
    return files


def _read_json(path: Path, problems: list[PluginProblem], plugin: str = "") -> Any:
    """The JSON in ``path``; ``None`` when it is absent; a problem when it is unusable."""
    try:
        size = path.stat().st_size
        if size > MAX_SETTINGS_BYTES:
            problems.append(
                PluginProblem(
                    plugin, "broken", str(path), f"{path} is {size:,} bytes; not read (at most 1 MiB)"
                )
            )
            return None
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(PluginProblem(plugin, "broken", str(path), f"cannot read {path}: {exc}"))
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        problems.append(PluginProblem(plugin, "broken", str(path), f"{path} is not valid JSON ({exc})"))
        return None


def _known_marketplaces(config: Path, user: Any, problems: list[PluginProblem]) -> dict[str, Any]:
    known: dict[str, Any] = {}
    extra = user.get("extraKnownMarketplaces") if isinstance(user, dict) else None
    if isinstance(extra, dict):
        known.update({k: v for k, v in extra.items() if isinstance(v, dict)})
    recorded = _read_json(config / "plugins" / "known_marketplaces.json", problems)
    if isinstance(recorded, dict):
        known.update({k: v for k, v in recorded.items() if isinstance(v, dict)})
    return known


def _locate(
    plugin_id: str,
    scope: Scope,
    settings: str,
    known: dict[str, Any],
    installs: Any,
    problems: list[PluginProblem],
) -> tuple[str, str | None] | None:
    """``(folder, version of the install)`` of an enabled plugin, or ``None`` (a problem recorded)."""
    name, at, market = plugin_id.rpartition("@")
    if not at or not name or not market:
        problems.append(
            PluginProblem(
                plugin_id,
                "broken",
                settings,
                f"{plugin_id!r} in {settings} is not a <plugin>@<marketplace> id",
            )
        )
        return None
    entries = installs.get(plugin_id) if isinstance(installs, dict) else None
    install_paths = [
        (str(e["installPath"]), e.get("version") if isinstance(e.get("version"), str) else None)
        for e in (entries if isinstance(entries, list) else [])
        if isinstance(e, dict) and isinstance(e.get("installPath"), str)
    ]
    entry = known.get(market)
    source = entry.get("source") if isinstance(entry, dict) else None
    if isinstance(source, dict) and source.get("source") == "directory":
        location = entry.get("installLocation") or source.get("path") if isinstance(entry, dict) else None
        if isinstance(location, str):
            folder = _marketplace_plugin_folder(Path(location), name)
            if folder is not None:
                version = install_paths[0][1] if install_paths else None
                return folder, version
        problems.append(
            PluginProblem(
                plugin_id,
                "broken",
                str(location),
                f"plugin {plugin_id!r} is enabled by {settings} but marketplace {market!r} "
                f"({location}) has no folder for it",
            )
        )
        return None
    for path, version in install_paths:
        if os.path.isdir(path):
            return path, version
    if entry is None and not install_paths:
        why = f"marketplace {market!r} is not known (add it with `claude plugin marketplace add`)"
    else:
        why = (
            "it is not installed, or its installed folder is gone (reinstall it with `claude plugin install`)"
        )
    problems.append(
        PluginProblem(
            plugin_id, "broken", settings, f"plugin {plugin_id!r} is enabled by {settings} but {why}"
        )
    )
    return None


def _marketplace_plugin_folder(location: Path, name: str) -> str | None:
    data = _read_json(location / ".claude-plugin" / "marketplace.json", [])
    listed = data.get("plugins") if isinstance(data, dict) else None
    for item in listed if isinstance(listed, list) else []:
        if isinstance(item, dict) and item.get("name") == name and isinstance(item.get("source"), str):
            folder = (location / item["source"]).resolve()
            return str(folder) if folder.is_dir() else None
    return None


def _manifest(plugin_id: str, root: str, problems: list[PluginProblem]) -> tuple[str, str | None] | None:
    """``(name, version)`` from the plugin's manifest (no manifest: the id's name, no version)."""
    path = Path(root) / ".claude-plugin" / "plugin.json"
    if not path.exists():
        return plugin_id.rpartition("@")[0], None
    before = len(problems)
    data = _read_json(path, problems, plugin_id)
    if len(problems) > before:
        return None
    name = data.get("name") if isinstance(data, dict) else None
    if not isinstance(name, str) or not name or ":" in name:
        problems.append(
            PluginProblem(
                plugin_id,
                "broken",
                str(path),
                f"{path} must be a JSON object whose `name` is a non-empty string without ':'",
            )
        )
        return None
    version = data.get("version")
    return name, version if isinstance(version, str) else None
