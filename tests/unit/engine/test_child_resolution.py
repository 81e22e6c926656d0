"""How ``workflow(name)`` rejects when the name does not resolve, in Claude Code's words (profile
claude-code/2.1.332, measured: case ``errors-child-resolution-messages``; 2.1.209 in NOTES.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import run_source

HINT = (
    "Workflow scripts must be plain JavaScript — common causes are TypeScript syntax (type annotations, "
    "interfaces, generics) and broken string quoting or escaping."
)


def child(tmp: Path, file: str, name: str, rest: str = "return 1\n", where: str = "project") -> None:
    folder = (tmp / "home" if where == "personal" else tmp) / ".claude" / "workflows"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / file).write_text(f"export const meta = {{ name: '{name}', description: 'd' }}\n{rest}")


def rejection(tmp: Path, name: str, profile: str | None = None) -> list[str]:
    body = f"try {{ await workflow({name!r}, {{}}); return 'resolved' }} catch (e) {{ return [e.name, e.message] }}"
    extra: dict[str, Any] = {} if profile is None else {"profile": profile}
    outcome = run_source(body, cwd=str(tmp), home=str(tmp / "home"), **extra)
    assert isinstance(outcome.result, list), outcome.error
    return outcome.result


def test_a_name_nothing_resolves_lists_the_available_names_in_locale_order(tmp_path: Path) -> None:
    for i, name in enumerate(["Beta", "alpha", "_x", "b10", "b9", "é", "e"]):
        child(tmp_path, f"w{i}.js", name)
    child(tmp_path, "p.js", "mine", where="personal")
    assert rejection(tmp_path, "Alpha") == [
        "Error",
        "workflow('Alpha'): no workflow with that name. Available: _x, alpha, b10, b9, Beta, e, é, mine",
    ]


def test_a_child_whose_code_does_not_parse_is_listed_and_rejects_with_the_line_and_a_caret(
    tmp_path: Path,
) -> None:
    child(tmp_path, "broken.js", "broken", "\tconst x = 1\n\tx = = 2\n")
    name, message = rejection(tmp_path, "broken")
    assert name == "Error"
    assert message == (
        "workflow('broken'): Script parse error: Unexpected token '=' (3:5)\n\n\tx = = 2\n     ^\n\n" + HINT
    )
    assert rejection(tmp_path, "other")[1].endswith("Available: broken")


def test_a_child_that_ends_in_the_middle_of_a_statement_points_at_the_end_of_the_file(
    tmp_path: Path,
) -> None:
    child(tmp_path, "cut.js", "cut", "return 1 +\n")
    assert rejection(tmp_path, "cut")[1] == (
        "workflow('cut'): Script parse error: Unexpected end of input (3:0)\n\n\n^\n\n" + HINT
    )


def test_under_2_1_209_a_child_whose_code_does_not_parse_is_not_found(tmp_path: Path) -> None:
    child(tmp_path, "broken.js", "broken", "const = 5\n")
    child(tmp_path, "ok.js", "ok")
    assert rejection(tmp_path, "broken", profile="claude-code/2.1.209") == [
        "Error",
        "workflow('broken'): no workflow with that name. Available: ok",
    ]


def test_a_child_that_breaks_another_loading_rule_adds_a_line_naming_its_file_and_rule(
    tmp_path: Path,
) -> None:
    child(tmp_path, "r.js", "review", "await import('x')\n")
    first, second = rejection(tmp_path, "review")[1].split("\n")
    assert first == "workflow('review'): no workflow with that name. Available: none " + (
        "(put .js files in .claude/workflows or ~/.claude/workflows)"
    )
    assert "r.js declares it but is invalid: " in second and second.endswith("]")
