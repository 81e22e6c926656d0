"""Lay out what ``claude plugin …`` commands leave behind, for the ``plugins-*`` conformance cases.

A case's ``plugins`` field lists steps that ``tests/conformance/pending/oracle_check.py`` runs for real in
Claude Code (``claude plugin marketplace add DIR``, ``claude plugin install P@M [--scope S]``, ``claude
plugin disable P@M``, plus ``{"write"}``, ``{"remove"}``, ``{"cd"}`` and ``{"git"}`` — a folder served as a
git repository, named ``{git:<folder>}`` in later steps). The test runners cannot run
Claude, so this module writes the files those commands were measured to write (Claude Code 2.1.332,
``docs/PROFILE.md`` "Plugins"): ``<config>/plugins/known_marketplaces.json`` and the user settings'
``extraKnownMarketplaces`` for a directory marketplace (for a git one, ``{"source": "git", "url"}`` and
a clone under ``<config>/plugins/marketplaces/<name>``); a copy under
``<config>/plugins/cache/<marketplace>/<plugin>/<version>``, an ``installed_plugins.json`` entry and
``enabledPlugins`` in the scope's settings file (user: ``<config>/settings.json``; project:
``<cwd>/.claude/settings.json``; local: ``.claude/settings.local.json`` of the repository root) for an
install; ``enabledPlugins: false`` in the user settings for a disable.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any


def case_environment(case: dict[str, Any], root: Path) -> dict[str, str]:
    """The case's ``env`` entries with ``{root}`` replaced."""
    return {k: v.replace("{root}", str(root)) for k, v in case.get("env", {}).items()}


def config_dir(case: dict[str, Any], root: Path) -> Path:
    """Claude's folder for the case: its ``CLAUDE_CONFIG_DIR``, else ``<root>/home/.claude``."""
    return Path(case_environment(case, root).get("CLAUDE_CONFIG_DIR", str(root / "home" / ".claude")))


def apply_plugin_steps(case: dict[str, Any], root: Path, cwd: Path) -> None:
    """Carry out the case's ``plugins`` steps under ``root`` for a session in ``cwd``."""
    config = config_dir(case, root)
    here = cwd
    repos: dict[str, Path] = {}  # URL -> the folder it serves
    for step in case.get("plugins", []):
        if isinstance(step, dict):
            if "git" in step:
                repos[_git_url(step["git"])] = root / step["git"]
            if "cd" in step:
                here = root / step["cd"]
            for rel, text in step.get("write", {}).items():
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(_substitute(text, root))
            for rel in step.get("remove", []):
                target = root / rel
                if target.is_dir():
                    shutil.rmtree(target)
                else:
                    target.unlink(missing_ok=True)
            continue
        args = [_substitute(a, root) for a in step]
        if args[:2] == ["marketplace", "add"] and args[2] in repos:
            _add_git_marketplace(config, args[2], repos[args[2]])
        elif args[:2] == ["marketplace", "add"]:
            _add_marketplace(config, Path(args[2]))
        elif args[0] == "install":
            scope = args[args.index("--scope") + 1] if "--scope" in args else "user"
            _install(config, args[1], scope, here)
        elif args[0] == "disable":
            _enable(config / "settings.json", args[1], False)
        else:
            raise AssertionError(f"no emulation for `claude plugin {' '.join(step)}`")


def _git_url(rel: str) -> str:
    return f"http://127.0.0.1/git/{rel}.git"


def _substitute(text: str, root: Path) -> str:
    """``{root}`` is the case's directory; ``{git:<folder>}`` the URL the folder is served at."""
    while "{git:" in text:
        start = text.index("{git:")
        end = text.index("}", start)
        text = text[:start] + _git_url(text[start + 5 : end]) + text[end + 1 :]
    return text.replace("{root}", str(root))


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def _save(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))


def _add_marketplace(config: Path, location: Path) -> None:
    name = json.loads((location / ".claude-plugin" / "marketplace.json").read_text())["name"]
    source = {"source": "directory", "path": str(location)}
    known = _load(config / "plugins" / "known_marketplaces.json")
    known[name] = {"source": source, "installLocation": str(location), "lastUpdated": "2026-12-01T00:00:00Z"}
    _save(config / "plugins" / "known_marketplaces.json", known)
    settings = _load(config / "settings.json")
    settings.setdefault("extraKnownMarketplaces", {})[name] = {"source": source}
    _save(config / "settings.json", settings)


def _add_git_marketplace(config: Path, url: str, folder: Path) -> None:
    name = json.loads((folder / ".claude-plugin" / "marketplace.json").read_text())["name"]
    clone = config / "plugins" / "marketplaces" / name
    shutil.copytree(folder, clone)
    source = {"source": "git", "url": url}
    known = _load(config / "plugins" / "known_marketplaces.json")
    known[name] = {"source": source, "installLocation": str(clone), "lastUpdated": "2026-12-01T00:00:00Z"}
    _save(config / "plugins" / "known_marketplaces.json", known)
    settings = _load(config / "settings.json")
    settings.setdefault("extraKnownMarketplaces", {})[name] = {"source": source}
    _save(config / "settings.json", settings)


def _install(config: Path, plugin_id: str, scope: str, here: Path) -> None:
    name, _, market = plugin_id.rpartition("@")
    location = Path(_load(config / "plugins" / "known_marketplaces.json")[market]["installLocation"])
    listing = json.loads((location / ".claude-plugin" / "marketplace.json").read_text())
    entry = next(p for p in listing["plugins"] if p["name"] == name)
    folder = (location / entry["source"]).resolve()
    version = json.loads((folder / ".claude-plugin" / "plugin.json").read_text()).get("version", "unknown")
    cache = config / "plugins" / "cache" / market / name / version
    shutil.copytree(folder, cache, dirs_exist_ok=True)
    record: dict[str, Any] = {"scope": scope, "installPath": str(cache), "version": version}
    if scope != "user":
        record["projectPath"] = str(here)
    installed = _load(config / "plugins" / "installed_plugins.json") or {"version": 2, "plugins": {}}
    installed["plugins"].setdefault(plugin_id, []).append(record)
    _save(config / "plugins" / "installed_plugins.json", installed)
    if scope == "user":
        settings = config / "settings.json"
    elif scope == "project":
        settings = here / ".claude" / "settings.json"
    else:
        repo = next((p for p in (here, *here.parents) if os.path.lexists(p / ".git")), here)
        settings = repo / ".claude" / "settings.local.json"
    _enable(settings, plugin_id, True)


def _enable(settings: Path, plugin_id: str, on: bool) -> None:
    data = _load(settings)
    data.setdefault("enabledPlugins", {})[plugin_id] = on
    _save(settings, data)
