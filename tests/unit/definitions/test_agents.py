"""find_agents / parse_agent_file: where agent definitions are read from, which files define an agent,
how names, tools, models and efforts are read, and the built-in types (Claude Code 2.1.332, measured;
the end-to-end cases are tests/conformance/cases/runtime/agents-*)."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflow_mcp.definitions.agents import (
    BUILTIN_AGENTS,
    AgentCatalog,
    AgentDefinition,
    AgentFileProblem,
    UnknownAgentTypeError,
    find_agents,
    parse_agent_file,
    personal_agents_dir,
)


def agent(name: str, *lines: str, body: str = "BODY") -> str:
    return "\n".join(["---", f"name: {name}", "description: d", *lines, "---", body, ""])


def make(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def customs(catalog: AgentCatalog) -> dict[str, str | None]:
    """Non-built-in names and the model each resolved to (the marker the tests give each file)."""
    return {n: d.model for n, d in catalog.definitions.items() if d.source != "built-in"}


def parsed(text: str, profile: str | None = None) -> AgentDefinition:
    found = parse_agent_file(text, "x.md", profile=profile)
    assert isinstance(found, AgentDefinition), found
    return found


def problem(text: str, profile: str | None = None) -> AgentFileProblem:
    found = parse_agent_file(text, "x.md", profile=profile)
    assert isinstance(found, AgentFileProblem), found
    return found


# -- where definitions come from -------------------------------------------------------------------


def test_inside_a_repository_folders_from_the_working_directory_up_to_the_root_are_read_nearest_first(
    tmp_path: Path,
) -> None:
    make(
        tmp_path,
        {
            ".claude/agents/above.md": agent("above", "model: opus"),
            "repo/.claude/agents/dup.md": agent("dup", "model: sonnet"),
            "repo/.claude/agents/root.md": agent("root", "model: sonnet"),
            "repo/sub/.claude/agents/dup.md": agent("dup", "model: haiku"),
        },
    )
    (tmp_path / "repo" / ".git").mkdir()
    (tmp_path / "repo" / "sub" / "deeper").mkdir()
    catalog = find_agents(tmp_path / "repo" / "sub" / "deeper", tmp_path / "home")
    assert customs(catalog) == {"dup": "haiku", "root": "sonnet"}
    assert catalog.searched[0] == str(tmp_path / "repo" / "sub" / "deeper" / ".claude" / "agents")
    assert catalog.searched[-1] == str(tmp_path / "home" / ".claude" / "agents")


def test_outside_a_repository_every_ancestor_is_read(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            ".claude/agents/top.md": agent("top", "model: sonnet"),
            "a/.claude/agents/mid.md": agent("mid", "model: haiku"),
            "a/b/.claude/agents/top.md": agent("top", "model: opus"),
        },
    )
    (tmp_path / "a" / "b" / "c").mkdir()
    assert customs(find_agents(tmp_path / "a" / "b" / "c", tmp_path / "home")) == {
        "top": "opus",
        "mid": "haiku",
    }


def test_a_project_definition_beats_a_personal_one_and_personal_ones_resolve(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "home/.claude/agents/shared.md": agent("shared", "model: opus"),
            "home/.claude/agents/mine.md": agent("mine", "model: opus"),
            "work/.claude/agents/shared.md": agent("shared", "model: haiku"),
        },
    )
    (tmp_path / "work" / ".git").mkdir()
    catalog = find_agents(tmp_path / "work", tmp_path / "home")
    assert customs(catalog) == {"shared": "haiku", "mine": "opus"}
    assert catalog.resolve("mine").source == "personal"
    assert catalog.resolve("shared").source == "project"


def test_the_personal_folder_is_claude_config_dir_agents_when_that_is_set(tmp_path: Path) -> None:
    assert personal_agents_dir(tmp_path / "h") == tmp_path / "h" / ".claude" / "agents"
    config = {"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    assert personal_agents_dir(None, config) == tmp_path / "cfg" / "agents"
    make(tmp_path, {"cfg/agents/x.md": agent("from-config"), "work/.git/HEAD": ""})
    catalog = find_agents(tmp_path / "work", environ=config)
    assert "from-config" in catalog.definitions


def test_only_lower_case_md_files_load_from_subfolders_dot_folders_and_dot_files_too(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            ".git/HEAD": "",
            ".claude/agents/upper.MD": agent("upper"),
            ".claude/agents/long.markdown": agent("markdown"),
            ".claude/agents/backup.md.bak": agent("bak"),
            ".claude/agents/noext": agent("noext"),
            ".claude/agents/.dot.md": agent("dotfile"),
            ".claude/agents/.hidden/in.md": agent("dot-folder"),
            ".claude/agents/a/b/deep.md": agent("deep"),
            ".claude/agents/x.md/inner.md": agent("folder-like-a-file"),
        },
    )
    assert set(customs(find_agents(tmp_path, tmp_path / "home"))) == {
        "dotfile",
        "dot-folder",
        "deep",
        "folder-like-a-file",
    }


def test_two_files_of_one_folder_with_one_name_the_one_sorting_last_wins(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            ".git/HEAD": "",
            ".claude/agents/c.md": agent("q", "model: sonnet"),
            ".claude/agents/d.md": agent("q", "model: haiku"),
            ".claude/agents/a.md": agent("q", "model: opus"),
            ".claude/agents/0/B/y.md": agent("r", "model: opus"),
            ".claude/agents/z.md": agent("r", "model: sonnet"),
        },
    )
    assert customs(find_agents(tmp_path, tmp_path / "home")) == {"q": "haiku", "r": "sonnet"}


def test_a_definition_named_like_a_built_in_replaces_it(tmp_path: Path) -> None:
    make(tmp_path, {".git/HEAD": "", ".claude/agents/e.md": agent("Explore", "model: haiku")})
    explore = find_agents(tmp_path, tmp_path / "home").resolve("Explore")
    assert explore.source == "project" and explore.model == "haiku"


def test_a_file_that_defines_no_agent_is_a_problem_naming_its_file_and_line(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            ".git/HEAD": "",
            ".claude/agents/ok.md": agent("ok"),
            ".claude/agents/tab.md": "---\nname: tab\ndescription: x\n\tbad: tab\n---\nB\n",
            ".claude/agents/README.md": "Notes about our agents.\n",
        },
    )
    catalog = find_agents(tmp_path, tmp_path / "home")
    assert set(customs(catalog)) == {"ok"}
    where = {(Path(p.path).name, p.line) for p in catalog.problems}
    assert where == {("README.md", 1), ("tab.md", 4)}
    assert all("defines no agent" in p.message for p in catalog.problems)


# -- what a file must hold -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "---\nname: a\ndescription: [unclosed\n---\nB\n",
        "---\nname: a\ndescription: a: b: c\n---\nB\n",
        "---\nname: a\ndescription: Use when: reviewing code\n---\nB\n",
        "---\nname: a\ndescription: *nope\n---\nB\n",
        "---\nname: a\ndescription: x\n...\n---\nB\n",
        "---\r\nname: a\r\ndescription: crlf\r\n---\r\nB\r\n",
        "\ufeff---\nname: a\ndescription: bom\n---\nB\n",
        '---\nname: a\ndescription: "   "\n---\nB\n',
        "---\nname: a\ndescription: x\nfoo: bar\n---\n",
    ],
    ids=["unclosed-list", "colons", "use-when", "alias", "doc-end", "crlf", "bom", "blank-desc", "extra-key"],
)
def test_files_claude_loads_define_an_agent(text: str) -> None:
    assert parsed(text).name == "a"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("\n---\nname: a\ndescription: x\n---\nB\n", 1),
        ("---\nname: a\ndescription: never closed\nB\n", 1),
        ("---\nname: a\ndescription: x\n\tbad: tab\n---\nB\n", 4),
        ("---\nname: a\n  description: x\n---\nB\n", 3),
        ('---\nname: a\ndescription: "unclosed\n---\nB\n', 3),
        ("---\ndescription: x\n---\nB\n", 2),
        ("---\nname: a\n---\nB\n", 2),
        ("---\nname: a\ndescription:\n---\nB\n", 3),
        ("---\nname: a\ndescription: 5\n---\nB\n", 3),
        ("---\nname: 123\ndescription: x\n---\nB\n", 2),
        ("---\nname: true\ndescription: x\n---\nB\n", 2),
        ("---\nname: [a, b]\ndescription: x\n---\nB\n", 2),
        ('---\nname: ""\ndescription: x\n---\nB\n', 2),
        ("---\nname: plug:helper\ndescription: x\n---\nB\n", 2),
    ],
    ids=[
        "leading-blank",
        "unterminated",
        "tab",
        "indented-key",
        "unclosed-quote",
        "no-name",
        "no-description",
        "null-description",
        "number-description",
        "number-name",
        "boolean-name",
        "list-name",
        "empty-name",
        "colon-name",
    ],
)
def test_files_claude_skips_are_problems_with_their_line(text: str, line: int) -> None:
    assert problem(text).line == line


def test_profile_2_1_209_loads_colon_names_and_skips_files_starting_with_a_byte_order_mark() -> None:
    assert (
        parsed("---\nname: plug:helper\ndescription: x\n---\nB\n", "claude-code/2.1.209").name
        == "plug:helper"
    )
    assert (
        "byte-order mark"
        in problem("\ufeff---\nname: a\ndescription: x\n---\nB\n", "claude-code/2.1.209").message
    )


def test_the_name_is_the_frontmatter_name_exactly_and_a_repeated_key_keeps_its_last_value() -> None:
    assert parsed('---\nname: "  ws name  "\ndescription: x\n---\nB\n').name == "  ws name  "
    assert parsed("---\nname: first\nname: second\ndescription: x\n---\nB\n").name == "second"


def test_the_body_trimmed_is_the_instructions_and_a_dash_line_inside_it_stays() -> None:
    found = parsed("---\nname: a\ndescription: x\n---\n\n  You audit.\n---\nMore.\n\n")
    assert found.instructions == "You audit.\n---\nMore."
    assert parsed("---\nname: a\ndescription: x\n---\n").instructions == ""


# -- tools, model, effort --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "tools"),
    [
        ("tools: Read, Grep", ("Read", "Grep")),
        ("tools: Read Grep", ("Read", "Grep")),
        ("tools: [Read, Glob]", ("Read", "Glob")),
        ("tools:\n  - Read\n  - Grep", ("Read", "Grep")),
        ('tools: "*"', None),
        ('tools: ""', ()),
        ("tools: []", ()),
        ("tools: 5", ()),
        ("tools: Read, NoSuchTool", ("Read",)),
        ("tools: Bash(git:*), Read", ("Bash", "Read")),
        ("tools: WebFetch, Task, Agent, Glob", ("WebFetch", "Glob")),
        ("tools: KillShell", ("TaskStop",)),
        ("tools: Agent", ()),
        ('tools: Read, "*"', ("Read",)),
    ],
)
def test_the_tools_line_resolves_to_the_tools_claude_gives_a_workflow_agent(
    line: str, tools: tuple[str, ...] | None
) -> None:
    found = parsed(agent("t", line))
    assert found.tools == tools
    assert found.tools_error is None


@pytest.mark.parametrize(
    ("line", "detail"),
    [
        ("tools: read, bash", "unrecognized [read, bash]"),
        ("tools: {Read", "unrecognized [{Read]"),
        ("tools: Task", "recognized but matched no tools in this session [Task]"),
        (
            "tools: Task, NoSuch",
            "unrecognized [NoSuch]; recognized but matched no tools in this session [Task]",
        ),
    ],
)
def test_a_tools_list_that_resolves_to_nothing_refuses_the_call_with_claudes_message(
    line: str, detail: str
) -> None:
    error = parsed(agent("t-lower", line)).tools_error
    assert error is not None and error.js_name == "TelemetrySafeError"
    assert str(error) == (
        f"Agent 't-lower' would be spawned with zero tools — refusing. Its tools list resolved to nothing: "
        f"{detail}. Fix the agent's tools frontmatter or pass a different subagent_type."
    )


def test_disallowed_tools_are_read_as_a_list_and_kept_beside_the_tools() -> None:
    found = parsed(agent("t", "tools: Read, Bash, Write", "disallowedTools: Write"))
    assert found.tools == ("Read", "Bash", "Write") and found.disallowed_tools == ("Write",)
    listed = parsed(agent("t", "disallowedTools:\n  - Edit\n  - Bash"))
    assert listed.tools is None and listed.disallowed_tools == ("Edit", "Bash")


@pytest.mark.parametrize(
    ("value", "model"),
    [
        ("sonnet", "sonnet"),
        ("Haiku", "haiku"),
        ("best", "opus"),
        ("opusplan", "sonnet"),
        ("inherit", None),
        ("gpt-5", "gpt-5"),
        ("5", None),
    ],
)
def test_the_frontmatter_model_is_normalized_like_the_option_and_a_non_string_is_the_default(
    value: str, model: str | None
) -> None:
    assert parsed(agent("m", f"model: {value}")).model == model


@pytest.mark.parametrize(("value", "effort"), [("low", "low"), ("MAX", "max"), ("ultra", None), ("5", None)])
def test_a_valid_frontmatter_effort_applies_and_any_other_is_ignored(value: str, effort: str | None) -> None:
    assert parsed(agent("e", f"effort: {value}")).effort == effort


# -- built-ins and resolution ----------------------------------------------------------------------


def test_the_built_in_types_are_the_five_claude_accepts_with_our_own_instructions() -> None:
    assert list(BUILTIN_AGENTS) == ["general-purpose", "Explore", "Plan", "claude", "statusline-setup"]
    assert BUILTIN_AGENTS["statusline-setup"].model == "sonnet"
    assert BUILTIN_AGENTS["statusline-setup"].tools == ("Read", "Edit")
    for read_only in ("Explore", "Plan"):
        tools = BUILTIN_AGENTS[read_only].tools
        assert tools is not None and not {"Edit", "Write", "NotebookEdit"} & set(tools)
    for name in ("general-purpose", "claude"):
        assert BUILTIN_AGENTS[name].tools is None and BUILTIN_AGENTS[name].instructions


def test_an_unknown_type_is_refused_with_claudes_message_listing_every_type_case_insensitively(
    tmp_path: Path,
) -> None:
    make(
        tmp_path,
        {".git/HEAD": "", ".claude/agents/h.md": agent("my-helper"), ".claude/agents/z.md": agent("Zeta")},
    )
    catalog = find_agents(tmp_path, tmp_path / "home")
    for wrong in ("explore", "General-Purpose", "", "my-helper "):
        with pytest.raises(UnknownAgentTypeError) as caught:
            catalog.resolve(wrong)
        assert str(caught.value) == (
            f"agent({{agentType}}): agent type '{wrong}' not found. Available agents: claude, Explore, "
            "general-purpose, my-helper, Plan, statusline-setup, Zeta"
        )
    assert catalog.available()[0] == "claude"
