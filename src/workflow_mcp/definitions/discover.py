"""Find the workflows visible from a directory, with Claude Code's precedence.

Rules (seed "Discovery and precedence", observed in Claude Code 2.1.209; unchanged in 2.1.332):

1. Only files whose names end in ``.js`` are workflows; ``.mjs``, ``.cjs`` and ``.ts`` are near misses,
   reported and skipped.
2. Personal workflows live in ``~/.claude/workflows``.
3. Project workflows live in ``.claude/workflows`` of every directory from the repository root (the
   nearest ancestor of the current directory holding ``.git``, file or directory; without one, the
   current directory alone) down to the current directory.
4. For one exact, case-sensitive, untrimmed ``meta.name``: the definition nearest the current directory
   wins, and any project definition beats a personal one.
5. The surviving list is sorted with JavaScript ``localeCompare`` on the raw name (ICU root collation,
   computed by the realm).
6. Symbolic links are followed; the target must be a readable regular file within the size limit.
7. Plugin workflows (measured in 2.1.332, ``docs/PROFILE.md`` "Plugins"): every enabled plugin's
   ``workflows/*.js`` (top level only), visible as ``<plugin>:<meta.name>`` (the file name plays no
   part); see :mod:`~workflow_mcp.definitions.plugins` for which plugins are enabled and where they are
   read from. A personal or project workflow beats a plugin one of exactly that visible name (seed rule
   9). Plugins are read in Claude's order (:class:`~workflow_mcp.definitions.plugins.PluginSet`) and each
   plugin's ``workflows/`` in directory order (the order the operating system lists it, as Claude reads
   it — not sorted); when two plugin files give one visible name, the later one wins and the name keeps
   the place of its first file (measured: two marketplaces holding one plugin name, four plugins whose
   manifests share a name, five files of one plugin declaring one name). Plugin workflows come first in
   the list in that order, followed by the personal and project ones in ``localeCompare`` order (Claude
   lists them so; seed rule 10).
8. Personal workflows live in ``$CLAUDE_CONFIG_DIR/workflows`` when that is set (measured), and an
   explicit ``home`` means ``<home>/.claude/workflows``.

A caller may narrow what discovery reads with ``reachable`` (a predicate on real paths, e.g. an MCP
server's project roots): a directory or file it refuses is skipped before it is read, as if absent, so
no result, diagnostic or not-found message mentions it.

Choices of this project (the seed leaves them open): an invalid file is reported and does not take part
in precedence (a farther valid definition of the same name is used); two files in one directory with
the same name resolve to the first file name in code-point order; a project directory that is the
personal directory (the home directory inside the repository) counts once, as personal.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from workflow_mcp.definitions._analysis import (
    Analysis,
    Workflow,
    analyze_file,
    check_analyses,
    check_and_collate_bodies,
    finish_unchecked,
    pending_bodies,
)
from workflow_mcp.definitions._meta import WorkflowMeta
from workflow_mcp.definitions.plugins import (
    Plugin,
    PluginProblem,
    _settings_files,
    claude_config_dir,
    find_plugins,
)
from workflow_mcp.definitions.profile import Profile, get_profile
from workflow_mcp.errors import WorkflowLoadError, WorkflowNotFoundError

__all__ = [
    "Diagnostic",
    "DiagnosticKind",
    "DiscoveredWorkflow",
    "Discovery",
    "Reachable",
    "discovery_inputs",
    "find_workflows",
    "resolve_workflow",
]

NEAR_MISS_SUFFIXES = (".mjs", ".cjs", ".ts")
WORKFLOWS_DIR = (".claude", "workflows")

Source = Literal["personal", "project", "plugin"]
Reachable = Callable[[str], bool]
"""Whether discovery may read the file or directory at a real path (symbolic links resolved)."""
DiagnosticKind = Literal["near-miss", "invalid", "shadowed", "unreadable", "plugin-disabled", "plugin-broken"]


@dataclass(frozen=True)
class DiscoveredWorkflow:
    """A workflow that won precedence for its name.

    ``name`` is the visible name (a plugin's workflows: ``<plugin>:<meta.name>``); ``source`` is
    ``"personal"``, ``"project"`` or ``"plugin"``; ``path`` is the file's path as found (a symbolic link
    is not replaced by its target); ``workflow`` is the loaded definition (its ``source_hash`` identifies
    exactly what was discovered); ``plugin`` is the plugin that ships it (``None`` for local ones).
    """

    name: str
    description: str
    source: Source
    path: str
    meta: WorkflowMeta
    workflow: Workflow = field(repr=False, compare=False)
    plugin: Plugin | None = None

    def to_json(self) -> dict[str, object]:
        """``{"name", "description", "source", "path"}``, plus ``"plugin"`` (``<plugin>@<marketplace>``)
        and ``"pluginVersion"`` for a plugin's workflow."""
        doc: dict[str, object] = {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "path": self.path,
        }
        if self.plugin is not None:
            doc["plugin"] = self.plugin.id
            doc["pluginVersion"] = self.plugin.version
        return doc


@dataclass(frozen=True)
class Diagnostic:
    """A file discovery skipped. ``kind``: ``near-miss`` (``.mjs``/``.cjs``/``.ts``), ``invalid`` (broke a
    loading rule), ``shadowed`` (another definition of the same name wins), ``unreadable``, or a plugin
    that contributes nothing: ``plugin-disabled`` (a settings file turns it off) and ``plugin-broken``
    (enabled, but its marketplace, folder or manifest cannot be used)."""

    path: str
    kind: DiagnosticKind
    message: str

    def to_json(self) -> dict[str, object]:
        """``{"path", "kind", "message"}``."""
        return {"path": self.path, "kind": self.kind, "message": self.message}


@dataclass(frozen=True)
class Discovery:
    """The result of :func:`find_workflows`: winners in ``localeCompare`` order of their names, and
    diagnostics sorted by path."""

    workflows: list[DiscoveredWorkflow]
    diagnostics: list[Diagnostic]

    def get(self, name: str) -> DiscoveredWorkflow | None:
        """The workflow called exactly ``name``, or ``None``."""
        return next((w for w in self.workflows if w.name == name), None)

    def to_json(self) -> dict[str, object]:
        """``{"workflows": [{"name", "description", "source", "path"}],
        "diagnostics": [{"path", "kind", "message"}]}``."""
        return {
            "workflows": [w.to_json() for w in self.workflows],
            "diagnostics": [d.to_json() for d in self.diagnostics],
        }


def find_workflows(
    cwd: str | os.PathLike[str],
    home: str | os.PathLike[str] | None = None,
    *,
    profile: Profile | str | None = None,
    check_syntax: bool = True,
    reachable: Reachable | None = None,
    environ: Mapping[str, str] | None = None,
) -> Discovery:
    """Every workflow visible from ``cwd``, with personal workflows read from ``home`` (default: the
    user's home directory; ``$CLAUDE_CONFIG_DIR`` in ``environ``, default ``os.environ``, when no
    ``home`` is given), and the workflows of every enabled plugin. Invalid, shadowed, near-miss and
    unreadable files, disabled and broken plugins become diagnostics; nothing about one file is fatal.

    One realm call checks the syntax of every file and sorts the names (``check_syntax=False`` skips the
    V8 compile but still sorts through the realm). ``reachable`` skips, unread, every directory and file
    whose real path it refuses (see the module docstring).

    Raises:
        WorkflowNotFoundError: ``cwd`` is not a directory.
        RealmError: the Node worker could not run.
    """
    found = _discover(
        cwd,
        home,
        _profile(profile),
        check_syntax=check_syntax,
        sort=True,
        reachable=reachable,
        environ=environ,
    )
    return Discovery(workflows=found.ordered, diagnostics=found.diagnostics)


def resolve_workflow(
    name: str,
    cwd: str | os.PathLike[str],
    home: str | os.PathLike[str] | None = None,
    *,
    profile: Profile | str | None = None,
    check_syntax: bool = True,
    reachable: Reachable | None = None,
    environ: Mapping[str, str] | None = None,
) -> DiscoveredWorkflow:
    """The workflow that ``name`` (exact and case-sensitive) resolves to from ``cwd``; ``reachable`` as
    in :func:`find_workflows` (what it refuses is neither a candidate nor named in the message).

    Raises:
        WorkflowNotFoundError: nothing visible has that name; the message lists near names and any
            invalid file that declares it.
        RealmError: the Node worker could not run.
    """
    found = _discover(
        cwd,
        home,
        _profile(profile),
        check_syntax=check_syntax,
        sort=False,
        reachable=reachable,
        environ=environ,
    )
    winner = found.winners.get(name)
    if winner is not None:
        return winner
    resolvable = set(found.winners)
    if found.profile.child_parse_error_at_call:
        resolvable.update(n for n, e in found.invalid_errors.items() if e.rule == "syntax")
    available = check_and_collate_bodies([], sorted(resolvable))[1] or []
    raise WorkflowNotFoundError(
        _not_found_message(name, Path(cwd), found),
        name=name,
        available=tuple(available),
        invalid=found.invalid_errors.get(name),
    )


# ---------------------------------------------------------------------------------------------


class _Found:
    __slots__ = ("diagnostics", "invalid_errors", "invalid_names", "ordered", "profile", "winners")

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.winners: dict[str, DiscoveredWorkflow] = {}
        self.ordered: list[DiscoveredWorkflow] = []
        self.diagnostics: list[Diagnostic] = []
        self.invalid_names: dict[str, Diagnostic] = {}
        # The load error of the first invalid file declaring each name (a syntax error if it has one).
        self.invalid_errors: dict[str, WorkflowLoadError] = {}


class _Candidate:
    __slots__ = ("analysis", "plugin", "rank", "source")

    def __init__(self, source: Source, rank: int, analysis: Analysis, plugin: Plugin | None = None) -> None:
        self.source = source
        # Plugins rank below everything (-1 - their position), 0 personal, then 1 for the repository
        # root up to the current directory.
        self.rank = rank
        self.analysis = analysis
        self.plugin = plugin

    def identity(self) -> str:
        assert self.analysis.meta is not None
        name = self.analysis.meta.name
        return name if self.plugin is None else f"{self.plugin.name}:{name}"


def _profile(profile: Profile | str | None) -> Profile:
    return profile if isinstance(profile, Profile) else get_profile(profile)


def _discover(
    cwd: str | os.PathLike[str],
    home: str | os.PathLike[str] | None,
    profile: Profile,
    *,
    check_syntax: bool,
    sort: bool,
    reachable: Reachable | None = None,
    environ: Mapping[str, str] | None = None,
) -> _Found:
    here = Path(cwd).resolve()
    if not here.is_dir():
        raise WorkflowNotFoundError(f"cannot discover workflows from {os.fspath(cwd)}: it is not a directory")
    config = claude_config_dir(home, environ).resolve()
    plugins = find_plugins(here, home, environ=environ, reachable=reachable)
    found = _Found(profile)
    found.diagnostics.extend(_plugin_diagnostic(p) for p in plugins.problems)
    candidates: list[_Candidate] = []
    # Plugin ranks are below every local one; they rise with Claude's plugin order when a later plugin
    # wins (fall with it under 2.1.209, where the first one does).
    last_wins = profile.plugin_workflows_last_wins
    count = len(plugins.plugins)
    dirs: list[tuple[Source, int, Path, Plugin | None]] = [
        ("plugin", i - count if last_wins else -1 - i, Path(p.root) / "workflows", p)
        for i, p in enumerate(plugins.plugins)
    ]
    dirs += [(source, rank, directory, None) for source, rank, directory in _workflow_dirs(here, config)]
    for source, rank, directory, plugin in dirs:
        if reachable is not None and not reachable(_real(directory)):
            continue
        for path in _listing(directory, found, reachable, sort=plugin is None):
            try:
                analysis = analyze_file(str(path), profile)
            except WorkflowNotFoundError as exc:
                found.diagnostics.append(Diagnostic(str(path), "unreadable", str(exc)))
                continue
            candidates.append(_Candidate(source, rank, analysis, plugin))

    analyses = [c.analysis for c in candidates]
    pending = pending_bodies(analyses) if check_syntax else []
    names = (
        sorted({a.meta.name for c in candidates if (a := c.analysis).meta is not None and c.plugin is None})
        if sort
        else None
    )
    ordered_names = check_analyses(pending, names)
    checked = {id(a) for a in pending}
    for analysis in analyses:
        if id(analysis) not in checked:
            finish_unchecked(analysis)

    by_name: dict[str, list[_Candidate]] = {}
    for candidate in candidates:
        analysis = candidate.analysis
        file = analysis.path or ""
        if analysis.errors:
            error = analysis.errors[0]
            where = f" (line {error.line}, column {error.column})" if error.line is not None else ""
            diagnostic = Diagnostic(file, "invalid", f"{error.detail}{where} [{error.rule}]")
            found.diagnostics.append(diagnostic)
            if analysis.meta is not None:
                found.invalid_names.setdefault(analysis.meta.name, diagnostic)
                syntax = next((e for e in analysis.errors if e.rule == "syntax"), error)
                found.invalid_errors.setdefault(analysis.meta.name, syntax)
            continue
        assert analysis.meta is not None
        by_name.setdefault(candidate.identity(), []).append(candidate)

    position = {id(c): i for i, c in enumerate(candidates)}
    plugin_order: list[str] = []
    for name, group in by_name.items():
        # Highest rank first: the nearest local directory, then plugins (the last in Claude's order
        # first; 2.1.209: the first). Within one local directory the first file name wins (listings are
        # sorted); within one plugin the last file in directory order (2.1.209: the first).
        group.sort(
            key=lambda c: (
                -c.rank,
                -position[id(c)] if c.plugin is not None and last_wins else position[id(c)],
            )
        )
        best = group[0]
        workflow = best.analysis.to_workflow()
        winner = DiscoveredWorkflow(
            name=name,
            description=workflow.meta.description,
            source=best.source,
            path=workflow.path or "",
            meta=workflow.meta,
            workflow=workflow,
            plugin=best.plugin,
        )
        if best.plugin is not None:
            plugin_order.append(name)
        found.winners[name] = winner
        for loser in group[1:]:
            found.diagnostics.append(
                Diagnostic(
                    loser.analysis.path or "", "shadowed", _shadow_reason(name, loser, best, last_wins)
                )
            )

    if ordered_names is not None:
        # Claude lists plugin workflows first (plugin by plugin in directory order, a name where its
        # first file is), then the local ones.
        found.ordered = [found.winners[n] for n in plugin_order]
        found.ordered += [found.winners[n] for n in ordered_names if n in found.winners]
    found.diagnostics.sort(key=lambda d: (d.path, d.kind))
    return found


def discovery_inputs(
    cwd: str | os.PathLike[str],
    home: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> list[Path]:
    """Every file and directory whose content decides what :func:`find_workflows` returns from ``cwd``
    (they may not exist): the personal and project workflows directories, the settings and plugin
    records that enable plugins, and each enabled plugin's ``workflows`` directory. A cache of
    discovery is current while none of them changed (:mod:`workflow_mcp._index`)."""
    here = Path(cwd).resolve()
    config = claude_config_dir(home, environ).resolve()
    paths = [directory for _, _, directory in _workflow_dirs(here, config)]
    paths += [path for _, path in _settings_files(config, here)]
    paths += [config / "plugins" / "installed_plugins.json", config / "plugins" / "known_marketplaces.json"]
    plugins = find_plugins(here, home, environ=environ)
    for plugin in plugins.plugins:
        root = Path(plugin.root)
        paths += [root, root / ".claude-plugin", root / "workflows"]
    for problem in plugins.problems:  # a broken plugin comes back when what it lacked appears
        paths += [Path(problem.path), Path(problem.path).parent]
    return paths


def _plugin_diagnostic(problem: PluginProblem) -> Diagnostic:
    kind: DiagnosticKind = "plugin-disabled" if problem.kind == "disabled" else "plugin-broken"
    return Diagnostic(problem.path, kind, problem.message)


def _workflow_dirs(here: Path, config: Path) -> list[tuple[Source, int, Path]]:
    personal = config / "workflows"
    dirs: list[tuple[Source, int, Path]] = [("personal", 0, personal)]
    root = next((p for p in (here, *here.parents) if os.path.lexists(p / ".git")), here)
    chain = [here, *here.parents][: len(here.parts) - len(root.parts) + 1]
    chain.reverse()  # from the repository root down to the current directory
    seen = {_real(personal)}
    for rank, directory in enumerate(chain, start=1):
        workflows = directory.joinpath(*WORKFLOWS_DIR)
        real = _real(workflows)
        if real in seen:
            continue
        seen.add(real)
        dirs.append(("project", rank, workflows))
    return dirs


def _real(path: Path) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return str(path)


def _listing(
    directory: Path, found: _Found, reachable: Reachable | None = None, *, sort: bool = True
) -> list[Path]:
    """The ``.js`` entries of ``directory`` that are regular files (symbolic links followed), sorted by
    name (with ``sort=False``: in directory order, as the operating system lists them); near misses and
    unreadable entries go to ``found.diagnostics``; entries whose real path ``reachable`` refuses are
    skipped without a word."""
    try:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name) if sort else list(it)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        found.diagnostics.append(
            Diagnostic(
                str(directory), "unreadable", f"cannot list the workflow directory: {exc.strerror or exc}"
            )
        )
        return []
    paths: list[Path] = []
    for entry in entries:
        path = directory / entry.name
        is_js = entry.name.endswith(".js")
        near = entry.name.endswith(NEAR_MISS_SUFFIXES)
        if not (is_js or near):
            continue
        if reachable is not None and not reachable(_real(path)):
            continue
        try:
            mode = os.stat(path).st_mode  # follows symbolic links; a loop raises ELOOP
        except OSError as exc:
            found.diagnostics.append(
                Diagnostic(
                    str(path), "unreadable", f"cannot read: {exc.strerror or exc} (a broken or looping link?)"
                )
            )
            continue
        if not stat.S_ISREG(mode):
            if is_js and not stat.S_ISDIR(mode):
                found.diagnostics.append(
                    Diagnostic(
                        str(path), "unreadable", "not a regular file (a device, pipe or socket); skipped"
                    )
                )
            continue
        if near:
            stem = entry.name.rsplit(".", 1)[0]
            suffix = entry.name.rsplit(".", 1)[1]
            found.diagnostics.append(
                Diagnostic(
                    str(path),
                    "near-miss",
                    f"skipped: only .js files are workflows (Claude Code ignores .{suffix} files); "
                    f"rename it to {stem}.js to use it",
                )
            )
            continue
        paths.append(path)
    return paths


def _shadow_reason(name: str, loser: _Candidate, winner: _Candidate, last_wins: bool) -> str:
    where = winner.analysis.path
    if loser.rank == winner.rank and loser.source == "plugin":
        why = "another file of the same plugin declares the same name and comes " + (
            "later in directory order (Claude Code keeps the last)"
            if last_wins
            else "first in directory order (Claude Code 2.1.209 keeps the first)"
        )
    elif loser.rank == winner.rank:
        why = "another file in the same directory declares the same name and comes first by file name"
    elif loser.source == "plugin" and winner.source != "plugin":
        why = "a personal or project workflow beats a plugin's workflow of the same visible name"
    elif loser.source == "plugin":
        which = "later" if last_wins else "first"
        why = (
            f"two enabled plugins ship it; the one enabled {which} wins (Claude Code's order: user, "
            "project, then local settings, each in its key order)"
        )
    elif loser.source == "personal":
        why = "a project definition beats a personal one"
    else:
        why = "the definition nearer the current directory wins"
    return f"{name!r} is shadowed by {where}: {why}"


def _not_found_message(name: str, cwd: Path, found: _Found) -> str:
    import difflib  # only on this error path: keeps the package import light

    message = f"no workflow named {name!r} is visible from {cwd}"
    invalid = found.invalid_names.get(name)
    if invalid is not None:
        message += f"; {invalid.path} declares it but is invalid: {invalid.message}"
    names = sorted(found.winners)
    near = [n for n in names if n.casefold() == name.casefold() or n.strip() == name.strip()]
    near += [
        n
        for n in names
        if n.partition(":")[2] == name and found.winners[n].plugin is not None and n not in near
    ]
    near += [n for n in difflib.get_close_matches(name, names, n=3, cutoff=0.6) if n not in near]
    if near:
        message += (
            "; did you mean " + ", ".join(repr(n) for n in near) + "? (names are exact and case-sensitive)"
        )
    elif names:
        shown = ", ".join(repr(n) for n in names[:20]) + (", …" if len(names) > 20 else "")
        message += f"; visible workflows: {shown}"
    else:
        message += "; none are installed (put .js files in .claude/workflows or ~/.claude/workflows)"
    return message
