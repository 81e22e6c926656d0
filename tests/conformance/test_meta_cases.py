"""The shared meta conformance cases (cases/meta/cases.json), run through the public API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workflow_mcp.definitions import load_workflow, validate_workflow
from workflow_mcp.errors import WorkflowLoadError

CASES_DIR = Path(__file__).parent / "cases" / "meta"
CASES: dict[str, dict[str, object]] = json.loads((CASES_DIR / "cases.json").read_text())["cases"]


def test_every_file_in_the_folder_has_a_case_and_every_case_a_file() -> None:
    assert sorted(p.name for p in CASES_DIR.glob("*.js")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c["valid"]))
def test_a_valid_case_loads_with_exactly_the_normalized_meta(name: str) -> None:
    workflow = load_workflow(CASES_DIR / name)
    assert workflow.meta.to_json() == CASES[name]["meta"]
    assert validate_workflow(CASES_DIR / name).to_json()["meta"] == CASES[name]["meta"]


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if not c["valid"]))
def test_an_invalid_case_is_refused_naming_the_rule_and_where(name: str) -> None:
    with pytest.raises(WorkflowLoadError) as caught:
        load_workflow(CASES_DIR / name)
    error = caught.value
    assert error.rule and error.detail
    assert error.path == str(CASES_DIR / name)
    if name != "invalid-empty-file.js":
        assert error.line is not None and error.column is not None
    report = validate_workflow(CASES_DIR / name)
    assert report.valid is False and report.errors[0].rule == error.rule


EXPECTED_RULES = {
    "invalid-await-using.js": "await-using",
    "invalid-call-initializer.js": "meta-not-object",
    "invalid-computed-key.js": "meta-pure-literal",
    "invalid-constructor-key.js": "meta-forbidden-key",
    "invalid-dynamic-import.js": "dynamic-import",
    "invalid-empty-description.js": "meta-description",
    "invalid-empty-file.js": "empty-file",
    "invalid-export-let.js": "meta-not-const",
    "invalid-export-var.js": "meta-not-const",
    "invalid-getter.js": "meta-pure-literal",
    "invalid-hard-wrapped-string.js": "syntax",
    "invalid-interpolated-template.js": "meta-pure-literal",
    "invalid-method.js": "meta-pure-literal",
    "invalid-missing-name.js": "meta-name",
    "invalid-multiple-declarators.js": "meta-single-declarator",
    "invalid-name-not-string.js": "meta-name",
    "invalid-not-object.js": "meta-not-object",
    "invalid-proto-key.js": "meta-forbidden-key",
    "invalid-prototype-key.js": "meta-forbidden-key",
    "invalid-sparse-array.js": "meta-pure-literal",
    "invalid-spread.js": "meta-pure-literal",
    "invalid-statement-before-meta.js": "meta-first-statement",
    "invalid-unary-not.js": "meta-pure-literal",
    "invalid-unary-plus.js": "meta-pure-literal",
    "invalid-undefined-value.js": "meta-pure-literal",
    "invalid-variable-reference.js": "meta-pure-literal",
    "invalid-with-statement.js": "with-statement",
    "invalid-wrong-name.js": "meta-first-statement",
}


def test_each_invalid_case_breaks_the_rule_this_project_names_for_it() -> None:
    assert sorted(EXPECTED_RULES) == sorted(n for n, c in CASES.items() if not c["valid"])
    found = {name: validate_workflow(CASES_DIR / name).errors[0].rule for name in EXPECTED_RULES}
    assert found == EXPECTED_RULES


def test_extra_a_file_of_524288_bytes_loads_and_one_of_524289_is_refused_before_decoding(
    tmp_path: Path,
) -> None:
    head = b"export const meta = { name: 'big', description: 'd' }\n// "
    exact = tmp_path / "exact.js"
    exact.write_bytes(head + b"x" * (524_288 - len(head)))
    assert load_workflow(exact).meta.name == "big"
    over = tmp_path / "over.js"
    over.write_bytes(head + b"\xff" * (524_289 - len(head)))
    assert [e.rule for e in validate_workflow(over).errors] == ["file-too-large"]


def test_extra_the_inline_limit_is_524288_utf16_code_units() -> None:
    head = "export const meta = { name: 'big', description: 'd' }\n// "
    pairs, odd = divmod(524_288 - len(head), 2)
    exact = head + "😀" * pairs + "x" * odd
    assert load_workflow(source=exact, check_syntax=False).meta.name == "big"
    assert [e.rule for e in validate_workflow(source=exact + "x", check_syntax=False).errors] == [
        "source-too-large"
    ]
