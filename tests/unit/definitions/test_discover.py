"""find_workflows / resolve_workflow: extensions, directories, precedence, order, links, diagnostics."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workflow_mcp.definitions import Discovery, find_workflows, resolve_workflow
from workflow_mcp.errors import WorkflowNotFoundError


def wf(name: str, description: str = "d", rest: str = "return 1\n") -> str:
    return f"export const meta = {{ name: {name!r}, description: {description!r} }}\n{rest}"


def make(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path.resolve()
    (base / "repo" / ".git").mkdir(parents=True)
    (base / "repo" / "pkg" / "sub").mkdir(parents=True)
    (base / "home").mkdir()
    return base


def discover(root: Path, cwd: str = "repo/pkg/sub") -> Discovery:
    return find_workflows(root / cwd, home=root / "home")


def listed(found: Discovery, root: Path) -> list[tuple[str, str, str]]:
    return [(w.name, w.source, os.path.relpath(w.path, root)) for w in found.workflows]


def diagnosed(found: Discovery, root: Path) -> list[tuple[str, str]]:
    return [(d.kind, os.path.relpath(d.path, root)) for d in found.diagnostics]


def test_only_js_files_are_workflows_and_mjs_cjs_ts_are_reported_near_misses(root: Path) -> None:
    make(
        root,
        {
            "repo/.claude/workflows/a.js": wf("a"),
            "repo/.claude/workflows/b.mjs": wf("b"),
            "repo/.claude/workflows/c.cjs": wf("c"),
            "repo/.claude/workflows/d.ts": wf("d"),
            "repo/.claude/workflows/e.JS": wf("e"),
            "repo/.claude/workflows/notes.md": "x",
        },
    )
    found = discover(root)
    assert listed(found, root) == [("a", "project", "repo/.claude/workflows/a.js")]
    assert diagnosed(found, root) == [
        ("near-miss", "repo/.claude/workflows/b.mjs"),
        ("near-miss", "repo/.claude/workflows/c.cjs"),
        ("near-miss", "repo/.claude/workflows/d.ts"),
    ]
    assert "rename it to b.js" in found.diagnostics[0].message


def test_the_nearest_project_definition_wins_and_the_others_are_shadowed(root: Path) -> None:
    make(
        root,
        {
            "home/.claude/workflows/review.js": wf("review", "personal"),
            "repo/.claude/workflows/review.js": wf("review", "root"),
            "repo/pkg/.claude/workflows/review.js": wf("review", "pkg"),
            "repo/pkg/sub/.claude/workflows/review.js": wf("review", "sub"),
        },
    )
    found = discover(root)
    assert [(w.description, w.source) for w in found.workflows] == [("sub", "project")]
    assert diagnosed(found, root) == [
        ("shadowed", "home/.claude/workflows/review.js"),
        ("shadowed", "repo/.claude/workflows/review.js"),
        ("shadowed", "repo/pkg/.claude/workflows/review.js"),
    ]
    messages = [d.message for d in found.diagnostics]
    assert "a project definition beats a personal one" in messages[0]
    assert "nearer the current directory" in messages[1]
    assert str(root / "repo/pkg/sub/.claude/workflows/review.js") in messages[1]


def test_a_project_definition_beats_a_personal_one_even_at_the_repository_root(root: Path) -> None:
    make(
        root,
        {
            "home/.claude/workflows/x.js": wf("x", "personal"),
            "repo/.claude/workflows/x.js": wf("x", "project"),
            "home/.claude/workflows/only.js": wf("only", "personal"),
        },
    )
    found = discover(root)
    assert [(w.name, w.description, w.source) for w in found.workflows] == [
        ("only", "personal", "personal"),
        ("x", "project", "project"),
    ]


def test_names_are_exact_case_sensitive_and_untrimmed(root: Path) -> None:
    make(
        root,
        {
            "home/.claude/workflows/1.js": wf("review"),
            "repo/.claude/workflows/2.js": wf("Review"),
            "repo/.claude/workflows/3.js": wf(" review"),
            "repo/.claude/workflows/4.js": wf("review "),
        },
    )
    found = discover(root)
    assert sorted(w.name for w in found.workflows) == sorted(["review", "Review", " review", "review "])
    assert found.diagnostics == []


def test_the_list_is_sorted_with_javascript_locale_compare_on_the_raw_name(root: Path) -> None:
    names = ["beta", "Beta", "alpha", "Alpha", "_x", "Zeta", "éclair", "eclair", "10", "9", "a-b", "ab"]
    make(root, {f"repo/.claude/workflows/f{i}.js": wf(n) for i, n in enumerate(names)})
    found = discover(root)
    assert [w.name for w in found.workflows] == [
        "_x",
        "10",
        "9",
        "a-b",
        "ab",
        "alpha",
        "Alpha",
        "beta",
        "Beta",
        "eclair",
        "éclair",
        "Zeta",
    ]


def test_without_a_git_repository_only_the_current_directory_is_a_project_directory(tmp_path: Path) -> None:
    base = tmp_path.resolve()
    make(
        base,
        {
            "top/.claude/workflows/far.js": wf("far"),
            "top/here/.claude/workflows/near.js": wf("near"),
        },
    )
    (base / "home").mkdir()
    found = find_workflows(base / "top" / "here", home=base / "home")
    assert [w.name for w in found.workflows] == ["near"]


def test_a_git_file_as_in_a_worktree_marks_the_repository_root(tmp_path: Path) -> None:
    base = tmp_path.resolve()
    make(
        base,
        {
            "outer/.claude/workflows/outside.js": wf("outside"),
            "outer/wt/.git": "gitdir: /elsewhere\n",
            "outer/wt/.claude/workflows/root.js": wf("root"),
            "outer/wt/a/b/.claude/workflows/deep.js": wf("deep"),
        },
    )
    (base / "home").mkdir()
    found = find_workflows(base / "outer" / "wt" / "a" / "b", home=base / "home")
    assert [w.name for w in found.workflows] == ["deep", "root"]


def test_directories_beside_the_path_to_cwd_are_not_searched(root: Path) -> None:
    make(
        root,
        {
            "repo/other/.claude/workflows/sibling.js": wf("sibling"),
            "repo/pkg/sub/deeper/.claude/workflows/below.js": wf("below"),
        },
    )
    assert discover(root).workflows == []


def test_invalid_files_are_diagnosed_never_fatal_and_do_not_shadow_a_valid_definition(root: Path) -> None:
    make(
        root,
        {
            "repo/.claude/workflows/review.js": wf("review", "far but valid"),
            "repo/pkg/sub/.claude/workflows/review.js": wf("review", rest="const a = 1\nconst a = 2\n"),
            "repo/pkg/sub/.claude/workflows/broken.js": "export let meta = { name: 'b', description: 'd' }\n",
            "repo/pkg/sub/.claude/workflows/empty.js": "",
        },
    )
    found = discover(root)
    assert [(w.name, w.description) for w in found.workflows] == [("review", "far but valid")]
    assert diagnosed(found, root) == [
        ("invalid", "repo/pkg/sub/.claude/workflows/broken.js"),
        ("invalid", "repo/pkg/sub/.claude/workflows/empty.js"),
        ("invalid", "repo/pkg/sub/.claude/workflows/review.js"),
    ]
    by_path = {os.path.relpath(d.path, root): d.message for d in found.diagnostics}
    assert "[meta-not-const]" in by_path["repo/pkg/sub/.claude/workflows/broken.js"]
    assert "already been declared" in by_path["repo/pkg/sub/.claude/workflows/review.js"]
    assert "(line 3, column 7)" in by_path["repo/pkg/sub/.claude/workflows/review.js"]


def test_an_oversized_file_is_an_invalid_diagnostic(root: Path) -> None:
    make(root, {"repo/.claude/workflows/big.js": wf("big") + "//" + "x" * 524_288})
    found = discover(root)
    assert found.workflows == []
    assert [(d.kind, "[file-too-large]" in d.message) for d in found.diagnostics] == [("invalid", True)]


def test_two_files_with_one_name_in_one_directory_resolve_to_the_first_file_name(root: Path) -> None:
    make(
        root,
        {
            "repo/.claude/workflows/b.js": wf("same", "from b"),
            "repo/.claude/workflows/a.js": wf("same", "from a"),
        },
    )
    found = discover(root)
    assert [w.description for w in found.workflows] == ["from a"]
    assert diagnosed(found, root) == [("shadowed", "repo/.claude/workflows/b.js")]
    assert "same directory" in found.diagnostics[0].message


def test_symbolic_links_to_files_are_followed_and_keep_the_link_path(root: Path) -> None:
    make(root, {"shared/review.js": wf("linked")})
    workflows = root / "repo/.claude/workflows"
    workflows.mkdir(parents=True)
    (workflows / "review.js").symlink_to(root / "shared/review.js")
    found = discover(root)
    assert listed(found, root) == [("linked", "project", "repo/.claude/workflows/review.js")]
    assert found.workflows[0].workflow.source == wf("linked")


def test_a_linked_workflows_directory_is_followed(root: Path) -> None:
    make(root, {"shared/wf/x.js": wf("x")})
    (root / "repo/.claude").mkdir()
    (root / "repo/.claude/workflows").symlink_to(root / "shared/wf", target_is_directory=True)
    assert [w.name for w in discover(root).workflows] == ["x"]


def test_broken_and_looping_links_are_unreadable_diagnostics(root: Path) -> None:
    workflows = root / "repo/.claude/workflows"
    workflows.mkdir(parents=True)
    (workflows / "broken.js").symlink_to(root / "nowhere.js")
    (workflows / "loop-a.js").symlink_to(workflows / "loop-b.js")
    (workflows / "loop-b.js").symlink_to(workflows / "loop-a.js")
    make(root, {"repo/.claude/workflows/ok.js": wf("ok")})
    found = discover(root)
    assert [w.name for w in found.workflows] == ["ok"]
    assert diagnosed(found, root) == [
        ("unreadable", "repo/.claude/workflows/broken.js"),
        ("unreadable", "repo/.claude/workflows/loop-a.js"),
        ("unreadable", "repo/.claude/workflows/loop-b.js"),
    ]


def test_entries_that_are_not_regular_files_are_skipped_without_blocking(root: Path) -> None:
    workflows = root / "repo/.claude/workflows"
    (workflows / "folder.js").mkdir(parents=True)
    os.mkfifo(workflows / "pipe.js")
    (workflows / "to-dir.js").symlink_to(root / "repo", target_is_directory=True)
    make(root, {"repo/.claude/workflows/ok.js": wf("ok")})
    found = discover(root)
    assert [w.name for w in found.workflows] == ["ok"]
    assert diagnosed(found, root) == [("unreadable", "repo/.claude/workflows/pipe.js")]


def test_a_home_directory_inside_the_repository_counts_once_as_personal(tmp_path: Path) -> None:
    base = tmp_path.resolve()
    make(base, {"me/.git/HEAD": "", "me/.claude/workflows/mine.js": wf("mine")})
    found = find_workflows(base / "me", home=base / "me")
    assert [(w.name, w.source) for w in found.workflows] == [("mine", "personal")]
    assert found.diagnostics == []


def test_discovery_json_has_the_documented_shape(root: Path) -> None:
    make(root, {"repo/.claude/workflows/a.js": wf("a", "desc"), "repo/.claude/workflows/b.ts": wf("b")})
    found = discover(root)
    assert found.to_json() == {
        "workflows": [
            {
                "name": "a",
                "description": "desc",
                "source": "project",
                "path": str(root / "repo/.claude/workflows/a.js"),
            }
        ],
        "diagnostics": [
            {
                "path": str(root / "repo/.claude/workflows/b.ts"),
                "kind": "near-miss",
                "message": found.diagnostics[0].message,
            }
        ],
    }


def test_a_discovered_workflow_carries_its_loaded_definition(root: Path) -> None:
    make(root, {"repo/.claude/workflows/a.js": wf("a", rest="await agent('x', { agentType: 'helper' })\n")})
    found = discover(root).workflows[0]
    assert found.meta == found.workflow.meta
    assert found.workflow.body.lstrip(" ").startswith("\nawait agent")
    assert [w.rule for w in found.workflow.warnings] == ["agent-type"]


def test_resolve_returns_the_winning_definition(root: Path) -> None:
    make(
        root,
        {
            "home/.claude/workflows/r.js": wf("review", "personal"),
            "repo/pkg/.claude/workflows/r.js": wf("review", "pkg"),
        },
    )
    winner = resolve_workflow("review", root / "repo/pkg/sub", home=root / "home")
    assert (winner.description, winner.source) == ("pkg", "project")
    assert discover(root).get("review") == winner


def test_resolving_an_unknown_name_lists_near_names(root: Path) -> None:
    make(root, {"repo/.claude/workflows/r.js": wf("review"), "repo/.claude/workflows/d.js": wf("deploy")})
    with pytest.raises(WorkflowNotFoundError, match=r"no workflow named 'Review'.*did you mean 'review'"):
        resolve_workflow("Review", root / "repo", home=root / "home")
    with pytest.raises(WorkflowNotFoundError, match=r"visible workflows: 'deploy', 'review'"):
        resolve_workflow("zzz", root / "repo", home=root / "home")


def test_resolving_a_name_only_an_invalid_file_declares_says_why(root: Path) -> None:
    make(root, {"repo/.claude/workflows/r.js": wf("review", rest="await import('x')\n")})
    with pytest.raises(WorkflowNotFoundError, match=r"r\.js declares it but is invalid: import\(\)"):
        resolve_workflow("review", root / "repo", home=root / "home")


def test_discovering_from_a_missing_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(WorkflowNotFoundError, match="not a directory"):
        find_workflows(tmp_path / "absent", home=tmp_path)


def test_home_defaults_to_the_users_home_directory(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make(root, {"home/.claude/workflows/p.js": wf("personal-default")})
    monkeypatch.setenv("HOME", str(root / "home"))
    found = find_workflows(root / "repo")
    assert [(w.name, w.source) for w in found.workflows] == [("personal-default", "personal")]


def test_rediscovering_unchanged_files_needs_no_realm_call(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make(root, {"repo/.claude/workflows/a.js": wf("a-cached"), "repo/.claude/workflows/b.js": wf("B-cached")})
    first = discover(root)
    monkeypatch.setenv("WORKFLOW_MCP_NODE", str(root / "no-such-node"))
    assert discover(root).to_json() == first.to_json()


def test_a_realm_that_cannot_run_is_an_error_not_a_pass(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from workflow_mcp.errors import RealmError

    make(root, {"repo/.claude/workflows/a.js": wf("never-checked-before")})
    monkeypatch.setenv("WORKFLOW_MCP_NODE", str(root / "no-such-node"))
    with pytest.raises(RealmError):
        discover(root)
