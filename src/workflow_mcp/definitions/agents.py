"""Agent definitions: the agent types an ``agent({agentType})`` call may name, resolved exactly as
Claude Code 2.1.332 resolves them (measured with the oracle; cases ``agents-*`` and
``tests/conformance/pending/NOTES.md#agent-discovery``, ``#agent-frontmatter``).

Discovery (:func:`find_agents`):

- **Project** definitions: ``.claude/agents/`` of the working directory and of each ancestor up to
  the git repository root (the nearest ancestor holding ``.git``, a file or a folder; nothing above
  it is read); outside a repository, of every ancestor. **Personal** definitions:
  ``$CLAUDE_CONFIG_DIR/agents`` when that variable is set, else ``~/.claude/agents`` (an explicit
  ``home`` means ``<home>/.claude/agents``).
- Every file below an agents folder whose name ends in lower-case ``.md`` is read, subfolders,
  dot-files and dot-folders included (``.MD``, ``.markdown``, ``.md.bak`` are not).
- **Plugin** definitions (measured, ``docs/PROFILE.md`` "Plugins"): every ``*.md`` below each enabled
  plugin's ``agents/`` folder, named ``<plugin>:<name>`` — a file in a subfolder adds the folder names
  (``agents/sub/deep.md`` defining ``deep`` is ``<plugin>:sub:deep``). Plugin names hold ``:`` and
  local ones may not, so they never collide (a local ``wfp:helper`` is not loaded; the plugin's is).
- For one name: the nearest project folder wins, any project definition beats a personal one, a
  definition beats a built-in of the same name; two files of one folder: the one whose path (within
  the folder) sorts last wins.

A file (:func:`parse_agent_file`) defines an agent when it starts with a ``---`` line (a UTF-8 BOM may
precede it; profile 2.1.209: not even that), has a closing ``---`` line, and its YAML frontmatter gives
a non-empty string ``name`` and a non-empty string ``description``; the Markdown body, trimmed, is the
agent's instructions. Only the frontmatter ``name`` counts, exactly (case, whitespace); a name with
``:`` (plugin style) is not loaded under profile 2.1.332 (2.1.209 loads it). YAML that does not parse is
read again with each offending ``key: value`` line's value taken as a plain string (Claude tolerates
``description: Use when: x``, ``[unclosed``, ``*alias``); what still fails (tab or stray indentation,
an unclosed quote) is not loaded. Claude skips such files silently; here each becomes an
:class:`AgentFileProblem` (file and line), which runs report as ``warning`` events and ``validate`` /
``workflow_describe`` list.

Tools: ``tools`` absent or ``"*"`` means the provider's default tools; a string is split at commas
and spaces (``Bash(git:*)`` keeps ``Bash``), a YAML list is taken item by item, any other value (``5``,
``''``, ``[]``) means no tools at all. Names Claude does not know are dropped; a list that names tools
and resolves to none refuses the call before any provider (``Agent 'x' would be spawned with zero
tools — refusing. …``, case ``agents-zero-tools-refused``). ``disallowedTools`` is removed from them.

Built-in types, case-sensitive (``agents-builtin-types``): ``general-purpose``, ``Explore``, ``Plan``,
``claude``, ``statusline-setup``. Their instructions here are workflow-mcp's own words; Explore and
Plan are read-only (no Edit, Write or NotebookEdit), statusline-setup runs on ``sonnet`` with Read and
Edit only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Literal

from ..errors import AgentCallRefusedError
from .models import normalize_effort, normalize_model
from .plugins import claude_config_dir, find_plugins
from .profile import Profile, get_profile

__all__ = [
    "BUILTIN_AGENTS",
    "AgentCatalog",
    "AgentDefinition",
    "AgentFileProblem",
    "AgentSource",
    "AgentToolsError",
    "AgentTypeUse",
    "AgentTypesReport",
    "UnknownAgentTypeError",
    "check_agent_types",
    "find_agents",
    "parse_agent_file",
    "personal_agents_dir",
]

AgentSource = Literal["built-in", "project", "personal", "plugin"]
AGENTS_DIR: Final = (".claude", "agents")
MAX_AGENT_FILE_BYTES: Final = 1_048_576
"""An agent file larger than this is not read (workflow-mcp's own bound; reported as a problem)."""

# Tool names Claude Code 2.1.332 gives a workflow agent when its definition lists them (measured one
# by one with the oracle, 2026-12-01: each alone in `tools:`). KillShell and KillBash are older names
# of TaskStop.
_GIVEN_TOOLS: Final = {
    "Bash": "Bash",
    "Edit": "Edit",
    "Read": "Read",
    "Write": "Write",
    "Glob": "Glob",
    "Grep": "Grep",
    "NotebookEdit": "NotebookEdit",
    "WebFetch": "WebFetch",
    "WebSearch": "WebSearch",
    "Skill": "Skill",
    "ListAgents": "ListAgents",
    "ReportFindings": "ReportFindings",
    "TaskStop": "TaskStop",
    "KillShell": "TaskStop",
    "KillBash": "TaskStop",
    "Monitor": "Monitor",
    "SendMessage": "SendMessage",
    "CronCreate": "CronCreate",
    "CronDelete": "CronDelete",
    "CronList": "CronList",
    "EnterWorktree": "EnterWorktree",
    "ExitWorktree": "ExitWorktree",
}
# Known, never given to a workflow agent, and not counted as a problem (the agent runs without them).
_WITHHELD_TOOLS: Final = frozenset({"Agent", "Workflow", "ToolSearch"})
# Known but "matched no tools in this session": counts toward the zero-tools refusal.
_UNMATCHED_TOOLS: Final = frozenset({"Task"})

_NAME_LINE: Final = re.compile(r"^([^\s#:][^:]*):[ \t]+(\S.*?)[ \t]*$")
_TOOL_TOKEN: Final = re.compile(r"[^\s,()]+(?:\([^)]*\))?")


class UnknownAgentTypeError(AgentCallRefusedError):
    """Raised when ``agentType`` names no built-in and no discovered definition: the call is refused
    before any provider is contacted. The message is Claude Code 2.1.332's, word for word (workflows
    match on it): ``agent({agentType}): agent type 'x' not found. Available agents: a, B, c`` (sorted
    case-insensitively)."""

    def __init__(self, agent_type: str, available: Iterable[str]) -> None:
        self.agent_type = agent_type
        self.available = sorted(available, key=lambda n: (n.lower(), n))
        super().__init__(
            f"agent({{agentType}}): agent type '{agent_type}' not found. Available agents: "
            + ", ".join(self.available)
        )


class AgentToolsError(AgentCallRefusedError):
    """Raised when a definition's ``tools`` list names tools and none of them resolves: the call is
    refused before any provider, with Claude Code 2.1.332's message (name ``TelemetrySafeError``)."""

    js_name = "TelemetrySafeError"

    def __init__(
        self, name: str, unrecognized: Iterable[str], unmatched: Iterable[str], path: str | None
    ) -> None:
        self.agent_type = name
        self.unrecognized = tuple(unrecognized)
        self.unmatched = tuple(unmatched)
        self.path = path
        parts: list[str] = []
        if self.unrecognized:
            parts.append(f"unrecognized [{', '.join(self.unrecognized)}]")
        if self.unmatched:
            parts.append(f"recognized but matched no tools in this session [{', '.join(self.unmatched)}]")
        super().__init__(
            f"Agent '{name}' would be spawned with zero tools — refusing. Its tools list resolved to "
            f"nothing: {'; '.join(parts)}. Fix the agent's tools frontmatter or pass a different subagent_type."
        )


@dataclass(frozen=True)
class AgentDefinition:
    """One agent type.

    ``instructions`` is the Markdown body, trimmed (``None`` for a built-in without instructions of its
    own); ``tools`` the resolved tool names in their order (``None``: the provider's defaults; ``()``:
    none); ``disallowed_tools`` names removed from them; ``model`` the normalized model (``None``: the
    run's default; see :mod:`~workflow_mcp.definitions.models`); ``effort`` a valid effort or ``None``.
    ``tools_error`` is set when the call must be refused for want of tools. ``source`` is ``built-in``,
    ``project``, ``personal`` or ``plugin`` (then ``plugin`` is its ``<plugin>@<marketplace>`` id);
    ``path`` and ``line`` (of the ``name:`` key) locate a file definition.
    """

    name: str
    description: str
    source: AgentSource
    instructions: str | None = None
    tools: tuple[str, ...] | None = None
    disallowed_tools: tuple[str, ...] = ()
    model: str | None = None
    effort: str | None = None
    path: str | None = None
    line: int | None = None
    tools_error: AgentToolsError | None = field(default=None, compare=False, repr=False)
    plugin: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"name", "description", "source", "path", "line", "tools", "disallowedTools", "model",
        "effort"}`` (``tools`` ``null`` for the provider's defaults), plus ``"plugin"`` for a plugin's."""
        doc: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "path": self.path,
            "line": self.line,
            "tools": list(self.tools) if self.tools is not None else None,
            "disallowedTools": list(self.disallowed_tools),
            "model": self.model,
            "effort": self.effort,
        }
        if self.plugin is not None:
            doc["plugin"] = self.plugin
        return doc


@dataclass(frozen=True)
class AgentFileProblem:
    """An agent file that defines no agent (Claude Code skips it without a word): ``path``, the 1-based
    ``line`` the problem was found on, and ``message``."""

    path: str
    line: int
    message: str

    def to_json(self) -> dict[str, Any]:
        """``{"path", "line", "message"}``."""
        return {"path": self.path, "line": self.line, "message": self.message}

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


_READ_ONLY: Final = (
    "Bash",
    "Read",
    "Glob",
    "Grep",
    "WebFetch",
    "WebSearch",
    "Skill",
    "ListAgents",
    "ReportFindings",
)

BUILTIN_AGENTS: Final[Mapping[str, AgentDefinition]] = {
    d.name: d
    for d in (
        AgentDefinition(
            name="general-purpose",
            description="General-purpose agent: researches, searches and changes files as the task needs.",
            source="built-in",
            instructions=(
                "You are a general-purpose agent working on one task of a workflow script. Investigate "
                "with the tools you have, make the changes the task asks for, and end with a concise "
                "answer: it is handed back to the script as your result."
            ),
        ),
        AgentDefinition(
            name="Explore",
            description="Read-only agent that searches and reads a code base to answer a question.",
            source="built-in",
            tools=_READ_ONLY,
            instructions=(
                "You are a read-only exploration agent working on one task of a workflow script. Search "
                "and read the code base to answer it; never create, edit, move or delete files. End with "
                "a concise report of what you found, naming files by their paths."
            ),
        ),
        AgentDefinition(
            name="Plan",
            description="Read-only agent that designs an implementation plan.",
            source="built-in",
            tools=_READ_ONLY,
            instructions=(
                "You are a read-only planning agent working on one task of a workflow script. Study the "
                "code base and design how to carry the task out: the steps, the files to change and the "
                "risks. Never create, edit, move or delete files. End with the plan."
            ),
        ),
        AgentDefinition(
            name="claude",
            description="An unattended Claude agent.",
            source="built-in",
            instructions=(
                "You are an agent running unattended as one task of a workflow script: nobody can answer "
                "questions, so make reasonable assumptions and say which. End with a concise answer."
            ),
        ),
        AgentDefinition(
            name="statusline-setup",
            description="Claude Code's status line setup agent (no special meaning outside Claude Code).",
            source="built-in",
            tools=("Read", "Edit"),
            model="sonnet",
        ),
    )
}


@dataclass(frozen=True)
class AgentCatalog:
    """The agent types visible from one directory (:func:`find_agents`): ``definitions`` by name
    (built-ins included), ``problems`` (files that define nothing, sorted by path) and ``searched``
    (the agents folders read, nearest project folder first, then personal, plugins last)."""

    definitions: Mapping[str, AgentDefinition]
    problems: tuple[AgentFileProblem, ...] = ()
    searched: tuple[str, ...] = ()

    def get(self, name: str) -> AgentDefinition | None:
        """The definition called exactly ``name``, or ``None``."""
        return self.definitions.get(name)

    def resolve(self, agent_type: str) -> AgentDefinition:
        """The definition ``agent_type`` names (exact, case-sensitive).

        Raises:
            UnknownAgentTypeError: nothing has that name (the message lists what does).
        """
        found = self.definitions.get(agent_type)
        if found is None:
            raise UnknownAgentTypeError(agent_type, self.definitions)
        return found

    def available(self) -> list[str]:
        """Every agent type name, sorted case-insensitively (as Claude lists them)."""
        return sorted(self.definitions, key=lambda n: (n.lower(), n))


@dataclass(frozen=True)
class AgentTypeUse:
    """One ``agentType`` string a workflow passes to agent() (found by the loader's scan), at
    ``line``:``column``, and the definition it resolves to from the directory checked (``None``: it
    does not resolve there, and the call would be refused)."""

    name: str
    line: int | None
    column: int | None
    definition: AgentDefinition | None

    def to_json(self) -> dict[str, Any]:
        """``{"name", "line", "column", "resolves", "source", "path", "definitionLine"}``."""
        d = self.definition
        return {
            "name": self.name,
            "line": self.line,
            "column": self.column,
            "resolves": d is not None,
            "source": d.source if d is not None else None,
            "path": d.path if d is not None else None,
            "definitionLine": d.line if d is not None else None,
        }


@dataclass(frozen=True)
class AgentTypesReport:
    """What :func:`check_agent_types` found: each agent type a workflow asks for (``uses``, in source
    order, once per name), the agent files that define nothing (``problems``), the folders read
    (``searched``) and the directory resolved from (``cwd``)."""

    cwd: str
    uses: tuple[AgentTypeUse, ...] = ()
    problems: tuple[AgentFileProblem, ...] = ()
    searched: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """``{"cwd", "agentTypes": [AgentTypeUse.to_json()], "agentFileProblems": [{"path", "line",
        "message"}], "searched": [str]}``."""
        return {
            "cwd": self.cwd,
            "agentTypes": [u.to_json() for u in self.uses],
            "agentFileProblems": [p.to_json() for p in self.problems],
            "searched": list(self.searched),
        }


def check_agent_types(
    warnings: Iterable[Any],
    cwd: str | os.PathLike[str],
    home: str | os.PathLike[str] | None = None,
    *,
    profile: Profile | str | None = None,
    environ: Mapping[str, str] | None = None,
    reachable: Callable[[str], bool] | None = None,
) -> AgentTypesReport:
    """Resolve every agent type a workflow asks for from ``cwd``: ``warnings`` are the loader's
    (``Workflow.warnings`` or ``ValidationReport.warnings``), whose ``agent-type`` entries carry the
    literal ``agentType`` strings the file passes to agent(). Agent folders are read only when there
    is one. Never raises."""
    found: dict[str, tuple[int | None, int | None]] = {}
    for w in warnings:
        subject = getattr(w, "subject", None)
        if getattr(w, "rule", None) == "agent-type" and isinstance(subject, str) and subject not in found:
            found[subject] = (getattr(w, "line", None), getattr(w, "column", None))
    where = os.path.abspath(cwd)
    if not found:
        return AgentTypesReport(where)
    catalog = find_agents(cwd, home, profile=profile, environ=environ, reachable=reachable)
    uses = tuple(
        AgentTypeUse(name, line, column, catalog.get(name)) for name, (line, column) in found.items()
    )
    return AgentTypesReport(where, uses, catalog.problems, catalog.searched)


def personal_agents_dir(
    home: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Path:
    """The personal agents folder: ``<home>/.claude/agents`` for an explicit ``home``, else
    ``$CLAUDE_CONFIG_DIR/agents`` when set (measured, NOTES.md#personal-agents-dir), else
    ``~/.claude/agents``."""
    return claude_config_dir(home, environ) / "agents"


def find_agents(
    cwd: str | os.PathLike[str],
    home: str | os.PathLike[str] | None = None,
    *,
    profile: Profile | str | None = None,
    environ: Mapping[str, str] | None = None,
    reachable: Callable[[str], bool] | None = None,
) -> AgentCatalog:
    """Every agent type visible from ``cwd`` (module docstring for the rules). Never raises: an
    unreadable folder or file, or one that defines no agent, becomes an :class:`AgentFileProblem`.
    ``reachable`` (a predicate on real paths) skips, unread, folders and files it refuses."""
    prof = profile if isinstance(profile, Profile) else get_profile(profile)
    here = Path(os.path.abspath(cwd))
    folders: list[tuple[AgentSource, Path]] = [
        ("project", d.joinpath(*AGENTS_DIR)) for d in _project_dirs(here)
    ]
    folders.append(("personal", personal_agents_dir(home, environ)))
    definitions: dict[str, AgentDefinition] = dict(BUILTIN_AGENTS)
    problems: list[AgentFileProblem] = []
    searched: list[str] = []
    seen: set[str] = set()
    for plugin in find_plugins(here, home, environ=environ, reachable=reachable).plugins:
        folder = Path(plugin.root) / "agents"
        real = os.path.realpath(folder)
        if real in seen or (reachable is not None and not reachable(real)):
            continue
        seen.add(real)
        searched.append(str(folder))
        for path in _agent_files(folder, problems, reachable, sort=False):
            found = _load(path, "plugin", prof, problems)
            if found is not None:
                identity = ":".join((plugin.name, *path.relative_to(folder).parent.parts, found.name))
                definitions[identity] = replace(found, name=identity, plugin=plugin.id)
    # Farthest first, so nearer folders overwrite: personal, then the project folders from the root down.
    for source, folder in reversed(folders):
        real = os.path.realpath(folder)
        if real in seen or (reachable is not None and not reachable(real)):
            continue
        seen.add(real)
        searched.append(str(folder))
        for path in _agent_files(folder, problems, reachable):
            found = _load(path, source, prof, problems)
            if found is not None:
                definitions[found.name] = found
    problems.sort(key=lambda p: (p.path, p.line))
    searched.reverse()
    return AgentCatalog(definitions, tuple(problems), tuple(searched))


def parse_agent_file(
    text: str, path: str, *, profile: Profile | str | None = None
) -> AgentDefinition | AgentFileProblem:
    """The definition in ``text`` (the content of the agent file at ``path``), or the problem that
    makes Claude Code skip it (module docstring for the rules)."""
    prof = profile if isinstance(profile, Profile) else get_profile(profile)
    if text.startswith("\ufeff"):
        if not prof.agent_file_bom:
            return AgentFileProblem(
                path, 1, "starts with a byte-order mark, which this profile does not load"
            )
        text = text[1:]
    lines = text.split("\n")
    if lines[0].rstrip("\r").rstrip() != "---":
        return AgentFileProblem(
            path, 1, "does not start with a `---` line, so it has no frontmatter and defines no agent"
        )
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip("\r").rstrip() == "---"), None)
    if end is None:
        return AgentFileProblem(path, 1, "its frontmatter has no closing `---` line, so it defines no agent")
    front = "\n".join(line.rstrip("\r") for line in lines[1:end])
    body = "\n".join(lines[end + 1 :])
    data = _frontmatter(front)
    if isinstance(data, AgentFileProblem):
        return AgentFileProblem(path, data.line + 1, data.message)
    if not isinstance(data, dict):
        return AgentFileProblem(path, 2, "its frontmatter is not a mapping of `key: value` lines")
    name = data.get("name")
    name_line = _key_line(front, "name")
    if not isinstance(name, str) or not name:
        what = (
            "has no `name`"
            if name is None
            else f"has a `name` that is not a non-empty string ({_yaml_kind(name)})"
        )
        return AgentFileProblem(path, name_line or 2, f"its frontmatter {what}, so it defines no agent")
    if ":" in name and not prof.agent_colon_names:
        return AgentFileProblem(
            path,
            name_line or 2,
            f"its name {name!r} holds ':', and Claude Code {prof.name.split('/')[-1]} does not load such names",
        )
    description = data.get("description")
    if not isinstance(description, str) or not description:
        what = (
            "has no `description`"
            if description is None
            else f"has a `description` that is not a non-empty string ({_yaml_kind(description)})"
        )
        return AgentFileProblem(
            path,
            _key_line(front, "description") or name_line or 2,
            f"its frontmatter {what}, so it defines no agent",
        )
    tools, unrecognized, unmatched = _tools(data.get("tools"), resolve=True)
    disallowed, _, _ = _tools(data.get("disallowedTools"), resolve=False)
    tools_error = (
        AgentToolsError(name, unrecognized, unmatched, path)
        if tools == () and (unrecognized or unmatched)
        else None
    )
    return AgentDefinition(
        name=name,
        description=description,
        source="project",
        instructions=body.strip(_JS_TRIM),
        tools=tools,
        disallowed_tools=disallowed or (),
        model=normalize_model(data.get("model"), strict=False),
        effort=normalize_effort(data.get("effort"), prof.efforts)
        if isinstance(data.get("effort"), str)
        else None,
        path=path,
        line=name_line or 1,
        tools_error=tools_error,
    )


# -- internals ---------------------------------------------------------------------------------

_JS_TRIM: Final = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


def _project_dirs(here: Path) -> list[Path]:
    """The working directory and its ancestors up to the git root (all of them outside a repository),
    nearest first."""
    chain = [here, *here.parents]
    for index, directory in enumerate(chain):
        if os.path.lexists(directory / ".git"):
            return chain[: index + 1]
    return chain


def _agent_files(
    folder: Path,
    problems: list[AgentFileProblem],
    reachable: Callable[[str], bool] | None,
    *,
    sort: bool = True,
) -> list[Path]:
    """Every ``*.md`` file below ``folder`` (symbolic links followed, each real folder once), sorted by
    its path within ``folder`` in code-point order; with ``sort=False`` in directory order (what the
    file system lists, as Claude reads a plugin's ``agents/``: of two files of one name the last wins,
    measured)."""
    found: list[tuple[str, Path]] = []
    visited: set[str] = set()

    def walk(directory: Path, rel: str) -> None:
        real = os.path.realpath(directory)
        if real in visited or (reachable is not None and not reachable(real)):
            return
        visited.add(real)
        try:
            with os.scandir(directory) as it:
                entries = list(it)
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as exc:
            problems.append(
                AgentFileProblem(str(directory), 1, f"cannot list the agents folder: {exc.strerror or exc}")
            )
            return
        for entry in entries:
            path = directory / entry.name
            try:
                is_dir = entry.is_dir()  # follows symbolic links
            except OSError:
                is_dir = False
            if is_dir:
                walk(path, f"{rel}{entry.name}/")
            elif entry.name.endswith(".md") and (reachable is None or reachable(os.path.realpath(path))):
                found.append((rel + entry.name, path))

    walk(folder, "")
    if sort:
        found.sort(key=lambda pair: pair[0])
    return [path for _, path in found]


def _load(
    path: Path, source: AgentSource, profile: Profile, problems: list[AgentFileProblem]
) -> AgentDefinition | None:
    try:
        size = path.stat().st_size
        if size > MAX_AGENT_FILE_BYTES:
            problems.append(
                AgentFileProblem(
                    str(path),
                    1,
                    f"is {size:,} bytes; workflow-mcp reads agent files of at most {MAX_AGENT_FILE_BYTES:,} bytes",
                )
            )
            return None
        data = path.read_bytes()
    except OSError as exc:
        problems.append(AgentFileProblem(str(path), 1, f"cannot be read: {exc.strerror or exc}"))
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        problems.append(AgentFileProblem(str(path), line, "is not UTF-8 text"))
        return None
    parsed = parse_agent_file(text, str(path), profile=profile)
    if isinstance(parsed, AgentFileProblem):
        problems.append(parsed)
        return None
    return parsed if source == "project" else replace(parsed, source=source)


def _frontmatter(front: str) -> Any:
    """The parsed frontmatter, or an :class:`AgentFileProblem` whose ``line`` counts within it.

    On a YAML error, each ``key: value`` line whose value does not parse on its own is re-read with
    that value quoted as a plain string, and the whole is parsed again (what Claude tolerates)."""
    yaml, loader = _yaml()
    try:
        return yaml.load(front, Loader=loader)
    except yaml.YAMLError as first:
        lines = front.split("\n")
        changed = False
        for i, line in enumerate(lines):
            m = _NAME_LINE.match(line)
            if m is None or m.group(2)[0] in "\"'":
                continue
            try:
                yaml.load(line, Loader=loader)
            except yaml.YAMLError:
                lines[i] = f"{m.group(1)}: {_quoted(m.group(2))}"
                changed = True
        if changed:
            try:
                return yaml.load("\n".join(lines), Loader=loader)
            except yaml.YAMLError:
                pass
        mark = getattr(first, "problem_mark", None) or getattr(first, "context_mark", None)
        line_no = (mark.line + 1) if mark is not None else 1
        problem = getattr(first, "problem", None) or str(first).split("\n")[0]
        return AgentFileProblem(
            "", line_no, f"its frontmatter is not valid YAML ({problem}), so it defines no agent"
        )


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _yaml() -> tuple[Any, Any]:
    """PyYAML and its fastest safe loader, imported on first use (``import workflow_mcp`` stays cheap)."""
    import yaml

    return yaml, getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _key_line(front: str, key: str) -> int | None:
    """The 1-based line of the last top-level ``key:`` in the frontmatter, counting its opening ``---``."""
    found = None
    for i, line in enumerate(front.split("\n")):
        if line.startswith(key + ":"):
            found = i + 2
    return found


def _tools(raw: Any, *, resolve: bool) -> tuple[tuple[str, ...] | None, list[str], list[str]]:
    """(names, unrecognized, unmatched) of a ``tools``/``disallowedTools`` value. ``None`` names: the
    defaults (absent, ``null`` or ``"*"``). ``resolve``: map names to the tools Claude gives."""
    if raw is None:
        return None, [], []
    if isinstance(raw, str):
        if raw.strip() == "*":
            return None, [], []
        tokens = _TOOL_TOKEN.findall(raw)
    elif isinstance(raw, list):
        tokens = [
            t for item in raw for t in (_TOOL_TOKEN.findall(item) if isinstance(item, str) else [str(item)])
        ]
    else:
        return (), [], []
    if not resolve:
        return tuple(dict.fromkeys(tokens)), [], []
    names: dict[str, None] = {}
    unrecognized: list[str] = []
    unmatched: list[str] = []
    for token in tokens:
        base = token.split("(", 1)[0]
        if base in _GIVEN_TOOLS:
            names[_GIVEN_TOOLS[base]] = None
        elif base in _UNMATCHED_TOOLS:
            unmatched.append(token)
        elif base not in _WITHHELD_TOOLS:
            unrecognized.append(token)
    return tuple(names), unrecognized, unmatched


def _yaml_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "an empty string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__
