"""What a diagnostic may quote: a workflow source, yes; any other file, nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workflow_mcp.definitions.disclosure import NOT_A_WORKFLOW, is_workflow_source, redacted
from workflow_mcp.definitions.load import validate_workflow

SECRET = "TOPSECRET-41c2"


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        (f"root:{SECRET}:19000:0:99999:7:::\n", "meta-first-statement"),  # a label statement
        (f"const token = '{SECRET}'\n", "meta-first-statement"),
        (f"export const other = '{SECRET}'\n", "meta-first-statement"),
        (f"// {SECRET}\n", "meta-first-statement"),
        (b"\xff" + SECRET.encode(), "not-utf8"),
    ],
)
def test_a_file_that_is_not_a_workflow_source_is_reported_without_its_content(
    tmp_path: Path, text: str | bytes, rule: str
) -> None:
    path = tmp_path / "f.js"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    report = validate_workflow(path, check_syntax=False)
    assert not is_workflow_source(report)
    shown = redacted(report)
    (error,) = shown.errors
    assert error.rule == rule and error.detail == NOT_A_WORKFLOW and shown.warnings == ()
    assert SECRET not in json.dumps(shown.to_json())
    assert error.line == report.errors[0].line and error.column == report.errors[0].column


@pytest.mark.parametrize(
    "text",
    [
        "export const meta = { name: 'a', description: foo() }\n",  # meta-pure-literal
        "export const meta = { name: 'a' }\n",  # meta-description
        "export const meta = { name: 'a', description: 'b' }\nconst = 1\n",  # a syntax error after meta
    ],
)
def test_a_workflow_source_keeps_its_diagnostics(tmp_path: Path, text: str) -> None:
    path = tmp_path / "w.js"
    path.write_text(text)
    report = validate_workflow(path, check_syntax=False)
    assert is_workflow_source(report) and redacted(report) is report


def test_inline_sources_are_the_callers_own_text_and_never_redacted() -> None:
    report = validate_workflow(source=f"const token = '{SECRET}'\n", check_syntax=False)
    assert redacted(report) is report
