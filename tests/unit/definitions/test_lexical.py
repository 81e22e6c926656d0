"""Where tree-sitter and V8 could read a source differently, V8 decides or the file is refused.

The static checks read tree-sitter's tree; the realm runs what V8 reads. Each case below is a construct
the two lexers (or Claude Code's loader) read differently, measured in the oracle where Claude is
involved (docs/PROFILE.md, "Lexical edges").
"""

from __future__ import annotations

import re

import pytest

from workflow_mcp.definitions import _lexical, _scan, load_workflow, validate_workflow
from workflow_mcp.errors import WorkflowLoadError

META = "export const meta = { name: 'n', description: 'd' }\n"


def refusal(body: str, profile: str | None = None) -> tuple[str, int | None, int | None]:
    """The first error of ``validate`` — which ``load`` must raise, word for word."""
    report = validate_workflow(source=META + body, profile=profile)
    assert not report.valid, "validate accepted the file"
    first = report.errors[0]
    with pytest.raises(WorkflowLoadError) as caught:
        load_workflow(source=META + body, profile=profile)
    assert caught.value.to_json() == first.to_json()
    return first.rule, first.line, first.column


HTML_COMMENTS = [
    pytest.param("const x = 1 <!-- 2\nreturn x", (2, 13), id="open-after-code"),
    pytest.param("let a = 3\nconst b = a <!--a\nreturn [a, b]", (3, 13), id="open-valid-both-ways"),
    pytest.param("const y = 2\n--> a note\nreturn y", (3, 1), id="close-at-line-start"),
    pytest.param("const y = 2\n   --> a note\nreturn y", (3, 4), id="close-after-blanks"),
    pytest.param("const y = 3\n/* a */ --> note\nreturn y", (3, 9), id="close-after-a-block-comment"),
    pytest.param("let a = 3\nconst b = a\n-->a\nreturn [a, b]", (4, 1), id="close-valid-both-ways"),
    pytest.param(";--> note\nreturn 1", (2, 2), id="close-leading-once-the-meta-is-blanked"),
    pytest.param(
        "const x = 1 <!-- `\nlet r\ntry { await import('x') } catch (e) { r = e.constructor.constructor('return process')() }\n"
        "return r\n// `",
        (2, 13),
        id="open-hiding-an-import-in-what-tree-sitter-reads-as-a-template",
    ),
]


@pytest.mark.parametrize(("body", "where"), HTML_COMMENTS)
@pytest.mark.parametrize("profile", ["claude-code/2.1.332", "claude-code/2.1.209"])
def test_an_html_like_comment_is_refused_under_every_profile(
    body: str, where: tuple[int, int], profile: str
) -> None:
    rule, line, column = refusal(body, profile)
    assert (rule, (line, column)) == ("html-comment", where)


def test_the_html_comment_refusal_names_the_construct_and_the_fix() -> None:
    report = validate_workflow(source=META + "const x = 1 <!-- 2\nreturn x")
    message = report.errors[0].detail
    assert "`<!--`" in message and "Claude Code" in message and "//" in message


INERT_LOOKALIKES = [
    pytest.param("return '<!-- not a comment -->'", id="in-a-string"),
    pytest.param("return `<!--\n--> in a template`", id="in-a-template"),
    pytest.param("// <!-- in a comment\n/* -->\n--> */\nreturn 1", id="in-comments"),
    pytest.param("return /<!--|-->/.source", id="in-a-regex"),
    pytest.param("let x = 3\nwhile (x-->0) {}\nreturn x", id="decrement-then-greater-mid-line"),
    pytest.param(
        "return 'import(\"x\")' + `import('y')` + /import/.source // import('z')", id="import-as-text"
    ),
    pytest.param("return /[import]/v.source", id="import-in-a-v-flag-class"),
    pytest.param("return /(?<import>a)\\k<import>/.source", id="import-as-a-regex-group-name"),
    pytest.param(
        "const o = { import: 1, using: 2 }\nreturn o.import + o.using", id="import-as-property-names"
    ),
    pytest.param("const using = 1\nreturn using", id="using-as-an-identifier"),
]


@pytest.mark.parametrize("body", INERT_LOOKALIKES)
def test_lookalikes_inside_literals_and_comments_are_accepted(body: str) -> None:
    report = validate_workflow(source=META + body)
    assert report.valid, [e.to_json() for e in report.errors]


@pytest.mark.parametrize("terminator", ["\u2028", "\u2029", "\r"])
def test_a_line_terminator_that_ends_a_line_comment_ends_it_for_the_import_check_too(terminator: str) -> None:
    # V8 and Claude Code (measured) end a // comment at U+2028 and U+2029: what follows is code.
    rule, _, _ = refusal(f"// note{terminator}await import('x')\nreturn 1")
    assert rule == "dynamic-import"


def test_a_hashbang_at_the_very_start_is_accepted_and_stays_out_of_the_body() -> None:
    wf = load_workflow(source="#!/usr/bin/env node\n" + META + "return 9")
    assert wf.body.startswith(" " * len("#!/usr/bin/env node") + "\n")
    assert wf.source.startswith("#!")


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("\ufeff#!/usr/bin/env node\n" + META + "return 10", id="after-a-bom"),
        pytest.param("// hi\n#!/x\n" + META + "return 12", id="after-a-comment"),
        pytest.param(META + "#!/usr/bin/env node\nreturn 11", id="after-the-meta"),
    ],
)
def test_a_hashbang_anywhere_else_is_a_syntax_error_as_in_claude(source: str) -> None:
    report = validate_workflow(source=source)
    assert [e.rule for e in report.errors] == ["syntax"]


def test_string_raw_with_invalid_escapes_is_valid_because_v8_says_so() -> None:
    # tree-sitter cannot parse it; V8 and Claude Code (measured) accept it.
    report = validate_workflow(source=META + "return String.raw`a\\u{zz}b\\xg`")
    assert report.valid
    assert [w.rule for w in report.warnings] == ["parser-gap"]


def test_a_refused_file_reports_only_errors_v8_confirms() -> None:
    # tree-sitter's error inside String.raw is not a syntax error for V8: the refusal is the import.
    report = validate_workflow(source=META + "const t = String.raw`\\u{zz}`\nawait import('x')")
    assert [(e.rule, e.line) for e in report.errors] == [("dynamic-import", 3)]


def test_a_fooled_static_check_is_caught_by_v8(monkeypatch: pytest.MonkeyPatch) -> None:
    # Defence in depth: should tree-sitter ever read a real import() as text (here simulated: every
    # `import` counts as inert and the scan finds nothing), V8 reads the mark as code and refuses.
    monkeypatch.setattr(_lexical, "_is_inert", lambda node: True)
    monkeypatch.setattr(_scan, "_TOKENS", re.compile(rb"(?!)"))
    body = "const a = 1\nawait import('x')\nreturn a"
    rule, line, column = refusal(body)
    assert (rule, line, column) == ("hidden-code", 3, 7)
    message = validate_workflow(source=META + body).errors[0].detail
    assert "V8 reads this `import` as code" in message


def test_every_refusal_names_a_rule_and_a_line() -> None:
    for param in HTML_COMMENTS:
        (body, _where) = param.values
        report = validate_workflow(source=META + str(body))
        assert all(e.rule and e.line is not None for e in report.errors)
