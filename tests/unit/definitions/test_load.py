"""load_workflow / validate_workflow: limits, decoding, the meta grammar, refused constructs, warnings."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path

import pytest

from workflow_mcp.definitions import (
    Phase,
    Workflow,
    WorkflowMeta,
    get_profile,
    load_workflow,
    validate_workflow,
)
from workflow_mcp.errors import WorkflowLoadError, WorkflowNotFoundError

META = "export const meta = { name: 'n', description: 'd' }\n"


def meta_with(entries: str, rest: str = "") -> str:
    return f"export const meta = {{ name: 'n', description: 'd', {entries} }}\n{rest}"


def load_error(source: str, *, check_syntax: bool = True) -> WorkflowLoadError:
    with pytest.raises(WorkflowLoadError) as caught:
        load_workflow(source=source, check_syntax=check_syntax)
    return caught.value


def warnings_of(source: str) -> list[tuple[str, str, int | None, int | None]]:
    wf = load_workflow(source=source, check_syntax=False)
    return [(w.rule, w.message, w.line, w.column) for w in wf.warnings]


# -- literal families --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "'single'",
        '"double"',
        "`template`",
        "`two\nlines`",
        "42",
        "3.25",
        ".5",
        "5.",
        "1e3",
        "1E-3",
        "0x1F",
        "0o17",
        "0b101",
        "1_000_000",
        "0",
        "10n",
        "0x1Fn",
        "/ab+c/gi",
        "/[/]\\//",
        "true",
        "false",
        "null",
        "-5",
        "-0.5",
        "-(5)",
        "(5)",
        "[]",
        "[1, 'two', [3], { four: 4 }]",
        "[1, 2,]",
        "{}",
        "{ a: { b: { c: [null] } } }",
        "{ 'quoted-key': 1, 42: 'numeric key', 1.5: 'x', 0x10: 'hex key' }",
        "{ /* a comment */ a: 1, // another\n b: 2 }",
        "[/* c */ 1, /* c */]",
    ],
)
def test_every_pure_literal_family_is_accepted_in_meta(value: str) -> None:
    wf = load_workflow(source=meta_with(f"custom: {value}"))
    assert wf.meta == WorkflowMeta(name="n", description="d")


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("+5", "`+5`"),
        ("!0", "`!0`"),
        ("~1", "`~1`"),
        ("-x", "`-x`"),
        ("- -5", "`- -5`"),
        ("-10n", "negative BigInt"),
        ("typeof 1", "`typeof 1`"),
        ("void 0", "`void 0`"),
        ("undefined", "`undefined`"),
        ("NaN", "`NaN`"),
        ("Infinity", "`Infinity`"),
        ("NAME", "`NAME`"),
        ("String(1)", "call"),
        ("new Date(0)", "call"),
        ("() => 1", "function"),
        ("function () {}", "function"),
        ("1 + 1", "`1 + 1`"),
        ("true ? 1 : 2", "`true ? 1 : 2`"),
        ("Math.PI", "property access"),
        ("this", "`this`"),
        ("`a${1}b`", "interpolation"),
        ("String.raw`x`", "`String.raw`x``"),
        ("[1, , 2]", "sparse"),
        ("[, 1]", "sparse"),
        ("[1, ...[2]]", "spread"),
        ("{ ...{ a: 1 } }", "spread"),
        ("{ [k]: 1 }", "computed key"),
        ("{ ['k']: 1 }", "computed key"),
        ("{ shorthand }", "shorthand"),
        ("{ m() { return 1 } }", "method"),
        ("{ async m() {} }", "method"),
        ("{ *g() {} }", "method"),
        ("{ get g() { return 1 } }", "getter"),
        ("{ set s(v) {} }", "setter"),
    ],
)
def test_a_value_that_is_not_a_pure_literal_is_refused_with_meta_pure_literal(
    value: str, fragment: str
) -> None:
    error = load_error(meta_with(f"custom: {value}"), check_syntax=False)
    assert error.rule == "meta-pure-literal"
    assert fragment in error.detail
    assert "pure literal" in error.detail
    assert error.line == 1 and error.column is not None


def test_a_pure_literal_error_points_at_the_offending_value() -> None:
    source = "export const meta = {\n  name: 'n',\n  description: 'd',\n  custom: { ok: 1, bad: NAME },\n}\n"
    error = load_error(source)
    assert (error.rule, error.line, error.column) == ("meta-pure-literal", 4, 25)


@pytest.mark.parametrize(
    "entry",
    [
        "__proto__: {}",
        "'__proto__': 1",
        "constructor: 'x'",
        "'constructor': 'x'",
        "\\u0063onstructor: 'x'",
        "prototype: 1",
        "custom: { prototype: 1 }",
        "custom: [{ deep: { constructor: 1 } }]",
    ],
)
def test_the_keys_proto_constructor_and_prototype_are_refused_at_any_depth(entry: str) -> None:
    error = load_error(meta_with(entry))
    assert error.rule == "meta-forbidden-key"


def test_legacy_octal_numbers_in_meta_are_syntax_errors_even_without_the_realm() -> None:
    error = load_error(meta_with("custom: 017"), check_syntax=False)
    assert error.rule == "syntax"
    assert "0o17" in error.detail


# -- statement shape ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        ("export let meta = { name: 'n', description: 'd' }\n", "meta-not-const"),
        ("export var meta = { name: 'n', description: 'd' }\n", "meta-not-const"),
        ("const helper = 1\n" + META, "meta-first-statement"),
        (";\n" + META, "meta-first-statement"),
        ("export const metadata = { name: 'n', description: 'd' }\n", "meta-first-statement"),
        ("const meta = { name: 'n', description: 'd' }\n", "meta-first-statement"),
        ("export default { name: 'n', description: 'd' }\n", "meta-first-statement"),
        ("export const { meta } = { meta: 1 }\n", "meta-first-statement"),
        ("export function meta() {}\n", "meta-first-statement"),
        ("export const meta = { name: 'n', description: 'd' }, other = 1\n", "meta-single-declarator"),
        ("export const meta = ['name', 'description']\n", "meta-not-object"),
        ("export const meta = Object.freeze({ name: 'n', description: 'd' })\n", "meta-not-object"),
        ("export const meta = 'n'\n", "meta-not-object"),
        ("export const meta\n", "meta-not-object"),
        ("", "empty-file"),
        ("\ufeff  \n\t\n", "empty-file"),
        ("// only a comment\n/* and another */\n", "meta-first-statement"),
    ],
)
def test_the_first_statement_must_be_exactly_export_const_meta_object(source: str, rule: str) -> None:
    error = load_error(source, check_syntax=False)
    assert error.rule == rule
    assert "meta" in error.detail or "empty" in error.detail


def test_a_bom_and_comments_may_precede_meta() -> None:
    wf = load_workflow(source="\ufeff// c\n/* block\n */\n" + META + "return 1\n")
    assert wf.meta.name == "n"


def test_parentheses_around_the_meta_object_are_transparent_as_in_acorn() -> None:
    assert load_workflow(source="export const meta = ({ name: 'n', description: 'd' })\n").meta.name == "n"


def test_an_escaped_identifier_spelling_meta_declares_meta() -> None:
    assert (
        load_workflow(source="export const m\\u0065ta = { name: 'n', description: 'd' }\n").meta.name == "n"
    )


def test_the_error_for_a_misplaced_meta_names_the_rule_and_the_fix() -> None:
    error = load_error("const helper = 1\n" + META)
    assert (error.line, error.column) == (1, 1)
    assert "first statement" in error.detail and "move the meta declaration to the top" in error.detail
    assert error.to_json() == {
        "rule": "meta-first-statement",
        "message": error.detail,
        "path": None,
        "line": 1,
        "column": 1,
    }


# -- name and description --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entries", "rule", "fragment"),
    [
        ("description: 'd'", "meta-name", "missing"),
        ("name: 42, description: 'd'", "meta-name", "found a number"),
        ("name: null, description: 'd'", "meta-name", "found null"),
        ("name: ['n'], description: 'd'", "meta-name", "found an array"),
        ("name: { n: 1 }, description: 'd'", "meta-name", "found an object"),
        ("name: /n/, description: 'd'", "meta-name", "found a regular expression"),
        ("name: '', description: 'd'", "meta-name", "must not be empty"),
        ("name: ``, description: 'd'", "meta-name", "must not be empty"),
        ("name: 'n'", "meta-description", "missing"),
        ("name: 'n', description: ''", "meta-description", "must not be empty"),
        ("name: 'n', description: true", "meta-description", "found a boolean"),
        ("name: 'n', description: 10n", "meta-description", "found a BigInt"),
    ],
)
def test_name_and_description_must_be_non_empty_strings(entries: str, rule: str, fragment: str) -> None:
    error = load_error(f"export const meta = {{ {entries} }}\n")
    assert error.rule == rule
    assert fragment in error.detail


def test_whitespace_names_are_valid_and_never_trimmed() -> None:
    wf = load_workflow(source="export const meta = { name: '  x ', description: ' ' }\n")
    assert (wf.meta.name, wf.meta.description) == ("  x ", " ")


def test_a_template_without_substitutions_is_a_string_name() -> None:
    assert load_workflow(source="export const meta = { name: `t`, description: `d` }\n").meta.name == "t"


# -- normalization ---------------------------------------------------------------------------


def test_normalized_meta_keeps_only_the_known_string_fields() -> None:
    wf = load_workflow(
        source=meta_with(
            "title: 'T', whenToUse: 'W', phases: [{ title: 'A', detail: 'x', model: 'haiku', extra: 1 }], "
            "custom: { anything: [1] }, tags: ['a']"
        )
    )
    assert wf.meta.to_json() == {
        "name": "n",
        "description": "d",
        "title": "T",
        "whenToUse": "W",
        "phases": [{"title": "A", "detail": "x", "model": "haiku"}],
    }
    assert wf.meta.phases == (Phase("A", "x", "haiku"),)


def test_title_and_when_to_use_that_are_not_strings_are_dropped() -> None:
    wf = load_workflow(source=meta_with("title: 5, whenToUse: null"))
    assert wf.meta.to_json() == {"name": "n", "description": "d"}


def test_phases_are_omitted_when_absent_or_not_an_array_and_empty_when_all_entries_are_invalid() -> None:
    assert "phases" not in load_workflow(source=META).meta.to_json()
    assert "phases" not in load_workflow(source=meta_with("phases: 'A'")).meta.to_json()
    assert "phases" not in load_workflow(source=meta_with("phases: { title: 'A' }")).meta.to_json()
    assert load_workflow(source=meta_with("phases: [1, 'x', null]")).meta.to_json()["phases"] == []


def test_invalid_phase_entries_are_dropped_and_non_string_detail_or_model_removed() -> None:
    wf = load_workflow(
        source=meta_with(
            "phases: [{ title: 'A' }, { detail: 'no title' }, 'str', { title: 7 }, [{ title: 'in array' }], "
            "{ title: 'B', detail: 3, model: null }, { title: '' }]"
        )
    )
    assert wf.meta.to_json()["phases"] == [{"title": "A"}, {"title": "B"}, {"title": ""}]


def test_a_repeated_meta_key_keeps_the_last_value_and_warns() -> None:
    wf = load_workflow(source="export const meta = { name: 'first', description: 'd', name: 'last' }\n")
    assert wf.meta.name == "last"
    assert [(w.rule, w.line, w.column) for w in wf.warnings] == [("meta-duplicate-key", 1, 56)]


# -- string escapes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("literal", "expected"),
    [
        (r"'a\nb'", "a\nb"),
        (r"'\t\r\b\f\v'", "\t\r\b\f\v"),
        (r"'\x41'", "A"),
        (r"'\u0041'", "A"),
        (r"'\u{41}'", "A"),
        (r"'\u{1F600}'", "\U0001f600"),
        (r"'\uD83D\uDE00'", "\U0001f600"),
        (r"'\0'", "\0"),
        ("'a\\\nb'", "ab"),
        ("'a\\\r\nb'", "ab"),
        ("'a\\\u2028b'", "ab"),
        (r"'\'\"\\'", "'\"\\"),
        (r"'\q\$'", "q$"),
        ("'raw\u2028separator'", "raw\u2028separator"),
        ('"\\u00e9t\\u00E9"', "été"),
        ("'ünïcödé 😀'", "ünïcödé 😀"),
        ("`t\\`q`", "t`q"),
        ("`a\r\nb\rc`", "a\nb\nc"),
        ("`a\\r\\nb`", "a\r\nb"),
        ("`\\${not}`", "${not}"),
    ],
)
def test_string_escapes_are_decoded_like_javascript(literal: str, expected: str) -> None:
    wf = load_workflow(source=f"export const meta = {{ name: 'n', description: {literal} }}\n")
    assert wf.meta.description == expected


@pytest.mark.parametrize(
    "literal", [r"'\01'", r"'\1'", r"'\8'", r"'\x4'", r"'\u12'", r"'\u{110000}'", r"`\01`"]
)
def test_escapes_that_strict_mode_refuses_are_syntax_errors(literal: str) -> None:
    error = load_error(f"export const meta = {{ name: 'n', description: {literal} }}\n", check_syntax=False)
    assert error.rule == "syntax"
    assert "escape" in error.detail


# -- limits and decoding --------------------------------------------------------------------------


def padded_file(tmp_path: Path, size: int, filler: bytes = b"x") -> Path:
    head = (META + "return 1\n// ").encode()
    path = tmp_path / "w.js"
    path.write_bytes(head + filler * (size - len(head)))
    return path


def test_a_file_of_exactly_524288_bytes_loads(tmp_path: Path) -> None:
    path = padded_file(tmp_path, 524_288)
    assert path.stat().st_size == get_profile().max_file_bytes == 524_288
    assert load_workflow(path).meta.name == "n"


def test_a_file_of_524289_bytes_is_refused_before_decoding(tmp_path: Path) -> None:
    path = padded_file(tmp_path, 524_289, filler=b"\xff")  # not UTF-8: decoding would fail differently
    report = validate_workflow(path)
    assert [e.rule for e in report.errors] == ["file-too-large"]
    assert "524,289 bytes" in report.errors[0].detail and "524,288" in report.errors[0].detail
    assert report.errors[0].path == str(path)


def test_the_inline_limit_counts_utf16_code_units_not_characters_or_bytes() -> None:
    base = META + "// "
    astral = "\U0001f600"  # one character, two UTF-16 code units, four UTF-8 bytes
    pairs, odd = divmod(524_288 - len(base), 2)
    fits = base + astral * pairs + "x" * odd
    assert len(fits.encode("utf-16-le")) // 2 == 524_288 and len(fits.encode()) > 524_288
    assert load_workflow(source=fits, check_syntax=False).meta.name == "n"
    over = fits + "x"
    assert len(over) < 524_288  # far fewer characters than code units
    error = load_error(over, check_syntax=False)
    assert error.rule == "source-too-large"
    assert "524,289 UTF-16 code units" in error.detail


def test_invalid_utf8_is_refused_with_its_position(tmp_path: Path) -> None:
    path = tmp_path / "w.js"
    path.write_bytes(META.encode() + b"const s = 'ok \xc3\x28'\n")
    with pytest.raises(WorkflowLoadError) as caught:
        load_workflow(path)
    error = caught.value
    assert (error.rule, error.line, error.column) == ("not-utf8", 2, 15)
    assert "UTF-8" in error.detail


def test_an_inline_source_with_a_lone_surrogate_is_refused() -> None:
    error = load_error(META + "// \ud800\n")
    assert error.rule == "not-utf8"


def test_a_missing_file_raises_workflow_not_found(tmp_path: Path) -> None:
    with pytest.raises(WorkflowNotFoundError, match="not found"):
        load_workflow(tmp_path / "absent.js")


def test_a_directory_or_a_fifo_is_not_a_workflow_file(tmp_path: Path) -> None:
    with pytest.raises(WorkflowNotFoundError, match="not a regular file"):
        load_workflow(tmp_path)
    fifo = tmp_path / "pipe.js"
    os.mkfifo(fifo)
    with pytest.raises(WorkflowNotFoundError, match="not a regular file"):
        load_workflow(fifo)  # returns at once: opening never waits for a writer


def test_direct_paths_need_not_end_in_js(tmp_path: Path) -> None:
    path = tmp_path / "workflow.txt"
    path.write_text(META)
    assert load_workflow(path).path == str(path)


def test_neither_path_nor_source_is_a_caller_error() -> None:
    with pytest.raises(ValueError, match="path or source"):
        load_workflow()


# -- the loaded workflow -----------------------------------------------------------------------


def test_the_body_blanks_the_whole_meta_statement_and_keeps_every_offset(tmp_path: Path) -> None:
    raw = ("\ufeff// lead\n" + META + "return 1\n").encode()
    path = tmp_path / "w.js"
    path.write_bytes(raw)
    wf = load_workflow(path)
    assert wf.source == raw.decode()
    # Claude Code 2.1.332 extracts the meta statement: `typeof meta` is 'undefined' in the body.
    assert wf.body == "\ufeff// lead\n" + " " * len(META.rstrip("\n")) + "\nreturn 1\n"
    assert len(wf.body) == len(wf.source)
    assert wf.source_hash == hashlib.sha256(raw).hexdigest()
    assert (wf.path, wf.profile, wf.name) == (str(path), "claude-code/2.1.332", "n")


def test_an_inline_source_hashes_its_utf8_encoding_and_has_no_path() -> None:
    source = META + "return 'é'\n"
    wf = load_workflow(source=source)
    assert wf.source_hash == hashlib.sha256(source.encode()).hexdigest()
    assert wf.path is None


def test_a_workflow_is_a_frozen_value() -> None:
    wf = load_workflow(source=META)
    assert isinstance(wf, Workflow)
    with pytest.raises(dataclasses.FrozenInstanceError):
        wf.body = ""  # type: ignore[misc]


def test_top_level_await_and_return_are_valid() -> None:
    wf = load_workflow(source=META + "const x = await Promise.resolve(1)\nif (x) return x\nreturn 2\n")
    assert wf.meta.name == "n"


# -- refused constructs ------------------------------------------------------------------------


def test_a_real_dynamic_import_is_refused_with_its_position() -> None:
    error = load_error(META + "const fs = await import('node:fs')\n")
    assert (error.rule, error.line, error.column) == ("dynamic-import", 2, 18)
    assert "import()" in error.detail


@pytest.mark.parametrize(
    "rest",
    [
        "const s = \"import('fs')\"\n",
        "// import('x')\n/* import('y') */\n",
        "const t = `import(${1})`\n",
        "const r = /import\\(/\n",
        "const o = { import: 1 }\nconst v = o.import\n",
    ],
)
def test_import_text_in_strings_comments_templates_regexes_and_names_is_fine(rest: str) -> None:
    assert load_workflow(source=META + rest).meta.name == "n"


def test_profile_2_1_209_warns_about_import_instead_of_refusing() -> None:
    wf = load_workflow(source=META + "await import('x')\n", profile="claude-code/2.1.209", check_syntax=False)
    assert [w.rule for w in wf.warnings] == ["dynamic-import"]
    assert wf.profile == "claude-code/2.1.209"


@pytest.mark.parametrize(
    ("rest", "line", "column"),
    [
        ("await using res = { [Symbol.asyncDispose]: async () => {} }\n", 2, 1),
        ("async function f() {\n  await using a = b, c = d\n}\n", 3, 3),
        ("for (await using x of y) {}\n", 2, 6),
        ("await /* same line */ using z = w\n", 2, 1),
    ],
)
def test_await_using_declarations_are_refused_with_their_position(rest: str, line: int, column: int) -> None:
    for check in (True, False):
        error = load_error(META + rest, check_syntax=check)
        assert (error.rule, error.line, error.column) == ("await-using", line, column)


def test_await_using_in_strings_and_comments_is_fine() -> None:
    source = META + "const s = 'await using x = y'\n// await using z = 1\nconst t = `await using`\nreturn s\n"
    assert load_workflow(source=source).meta.name == "n"


def test_await_using_is_detected_where_the_grammar_reports_an_error() -> None:
    error = load_error(META + "await using\n", check_syntax=False)
    assert error.rule in ("await-using", "syntax")
    error = load_error(META + "if (a) { await using x = y;; ) }\n", check_syntax=False)
    assert error.rule == "await-using"


def test_a_with_statement_is_refused_even_without_the_realm() -> None:
    for check in (True, False):
        error = load_error(META + "with (Math) { log(max(1, 2)) }\n", check_syntax=check)
        assert (error.rule, error.line, error.column) == ("with-statement", 2, 1)


def test_validation_lists_every_independent_error_in_source_order() -> None:
    report = validate_workflow(source="export const meta = { name: '' }\nawait import('x')\nwith (a) {}\n")
    assert [(e.rule, e.line) for e in report.errors] == [
        ("meta-name", 1),
        ("dynamic-import", 2),
        ("with-statement", 3),
    ]
    assert report.valid is False and report.meta is None


# -- syntax ------------------------------------------------------------------------------------


def test_a_parse_error_is_reported_with_its_position_without_the_realm() -> None:
    error = load_error(META + "const x = (1 +\nlet y = )\n", check_syntax=False)
    assert error.rule == "syntax" and error.line is not None and error.line >= 2


def test_a_hard_wrapped_string_is_a_syntax_error_at_the_string() -> None:
    source = META + 'const s = "this string was\nhard wrapped"\nreturn s\n'
    for check in (True, False):
        error = load_error(source, check_syntax=check)
        assert (error.rule, error.line, error.column) == ("syntax", 2, 11)


def test_early_errors_only_v8_knows_are_reported_by_the_realm() -> None:
    error = load_error(META + "const a = 1\nconst a = 2\n")
    assert (error.rule, error.line, error.column) == ("syntax", 3, 7)
    assert "already been declared" in error.detail
    error = load_error(META + "const n = 017\n")
    assert (error.rule, error.line) == ("syntax", 2)
    assert load_workflow(source=META + "const a = 1\nconst a = 2\n", check_syntax=False).meta.name == "n"


def test_a_file_that_ends_inside_a_bracket_points_at_its_end() -> None:
    error = load_error(META + "const x = (")
    assert (error.rule, error.line, error.column) == ("syntax", 2, 12)
    assert "ends in the middle" in error.detail


def test_columns_count_utf16_code_units() -> None:
    error = load_error(META + "const s = '😀'; await import('x')\n")
    assert (error.rule, error.line, error.column) == ("dynamic-import", 2, 23)


# -- warnings ----------------------------------------------------------------------------------


def test_agent_types_are_named_as_environment_dependencies_once_each() -> None:
    found = warnings_of(
        META
        + "await agent('a', { agentType: 'security-auditor' })\n"
        + "await agent('b', { 'agentType': `planner`, model: 'haiku' })\n"
        + "await agent('c', { agentType: 'security-auditor' })\n"
        + "other('d', { agentType: 'not-an-agent-call' })\n"
        + "await agent('e', { agentType: kind })\n"
    )
    assert [(rule, line, column) for rule, _, line, column in found] == [
        ("agent-type", 2, 20),
        ("agent-type", 3, 20),
    ]
    assert "'security-auditor'" in found[0][1] and "'planner'" in found[1][1]


def test_nested_workflow_names_and_script_paths_are_dependencies() -> None:
    found = warnings_of(
        META + "await workflow('validate', { a: 1 })\nawait workflow({ scriptPath: './child.js' }, {})\n"
        "await workflow(name)\n"
    )
    assert [(rule, line) for rule, _, line, _ in found] == [("nested-workflow", 2), ("nested-script-path", 3)]
    assert "'validate'" in found[0][1] and "'./child.js'" in found[1][1]


@pytest.mark.parametrize(
    ("literal", "path"),
    [
        ("'/home/alice/notes.md'", "/home/alice/notes.md"),
        ("'read /Users/bob/project/x.ts please'", "/Users/bob/project/x.ts"),
        ("'C:\\\\Users\\\\carol\\\\x'", "C:\\Users\\carol\\x"),
        ("`at /root/.ssh`", "/root/.ssh"),
        ("'D:\\\\build\\\\out'", "D:\\build\\out"),
        ("'C:/Users/dan/x'", "C:/Users/dan/x"),
    ],
)
def test_absolute_machine_paths_in_strings_are_portability_warnings(literal: str, path: str) -> None:
    found = warnings_of(META + f"const p = {literal}\n")
    assert [rule for rule, *_ in found] == ["absolute-path"]
    assert repr(path) in found[0][1]


def test_paths_in_comments_and_relative_paths_are_not_warned() -> None:
    source = "// see /home/alice/x\nconst p = 'src/home/x'\nconst q = '/tmp/x'\n"
    source += "const u = 'https://example.com/home/x'\nconst v = 'file:///home/x'\nconst r = /\\/home\\/x/\n"
    assert warnings_of(META + source) == []


def test_calls_that_throw_at_run_time_in_claude_are_warned() -> None:
    found = warnings_of(
        META + "Date.now()\nMath.random()\nnew Date()\nnew Date\nDate()\n"
        "new Date(0)\nDate.UTC(1)\nconst s = 'Date.now()'\n"
    )
    assert [(rule, line) for rule, _, line, _ in found] == [
        ("nondeterministic-call", 2),
        ("nondeterministic-call", 3),
        ("nondeterministic-call", 4),
        ("nondeterministic-call", 6),
    ]


def test_validation_report_json_has_the_documented_shape() -> None:
    report = validate_workflow(source=META + "await agent('x', { agentType: 'a' })\n")
    assert report.to_json() == {
        "valid": True,
        "meta": {"name": "n", "description": "d"},
        "errors": [],
        "warnings": [
            {
                "rule": "agent-type",
                "message": report.warnings[0].message,
                "line": 2,
                "column": 20,
            }
        ],
    }
    bad = validate_workflow(source="export let meta = {}\n")
    assert bad.to_json() == {
        "valid": False,
        "meta": None,
        "errors": [
            {"rule": "meta-not-const", "message": bad.errors[0].detail, "path": None, "line": 1, "column": 8}
        ],
        "warnings": [],
    }


def test_validate_reports_a_file_error_with_the_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.js"
    path.write_text("export var meta = { name: 'n', description: 'd' }\n")
    report = validate_workflow(path)
    assert report.errors[0].path == str(path)
    assert str(report.errors[0]).startswith(f"{path}:1:8: ")


# -- speed -------------------------------------------------------------------------------------


def test_a_100_kb_workflow_with_many_calls_validates_with_its_dependency_warnings() -> None:
    """Speed is measured by benchmarks/engine.py, not here; this checks a large file is handled."""
    step = (
        "phase('step')\n"
        "const r = await agent(`Review file /home/u/{i}.txt`, { label: 'r', agentType: 'a' })\n"
        "const rs = await parallel([1, 2, 3].map((n) => () => agent('sub ' + n, { model: 'haiku' })))\n"
        "if (!r) log('missing') // import('x')\n"
    )
    body = ""
    i = 0
    while len(body) < 100_000:
        body += step.replace("{i}", str(i)).replace("const r", f"const r{i}")
        i += 1
    source = META + body
    report = validate_workflow(source=source, check_syntax=False)
    assert report.valid
    assert {w.rule for w in report.warnings} >= {"agent-type", "absolute-path"}


# -- the string decoder against V8 -------------------------------------------------------------

_PIECES = [
    "a", "é", "😀", " ", "$", "\u2028",
    "\\n", "\\t", "\\r", "\\b", "\\f", "\\v", "\\0", "\\x41", "\\xff", "\\u0041", "\\u00e9",
    "\\uD83D", "\\uDE00", "\\uD83D\\uDE00", "\\u{1F600}", "\\u{0}", "\\u{10FFFF}", "\\\\",
    "\\'", '\\"', "\\q", "\\$", "\\`", "\\\n", "\\\r\n", "\\\u2028",
]  # fmt: skip
_TEMPLATE_ONLY = ["\r\n", "\r", "\n", "'", '"']


def _corpus() -> list[str]:
    import random

    rng = random.Random(20261130)
    literals: list[str] = []
    for i in range(400):
        quote = "'\"`"[i % 3]
        pieces = _PIECES + (_TEMPLATE_ONLY if quote == "`" else [])
        literals.append(quote + "".join(rng.choice(pieces) for _ in range(rng.randint(0, 6))) + quote)
    return literals


def test_string_decoding_matches_node_on_a_generated_corpus(tmp_path: Path) -> None:
    import json
    import subprocess

    from workflow_mcp.realm.worker import node_path

    literals = _corpus()
    script = tmp_path / "eval.js"
    script.write_text(
        "'use strict'\nprocess.stdout.write(JSON.stringify([\n" + ",\n".join(literals) + "\n]))\n"
    )
    done = subprocess.run([node_path(), str(script)], capture_output=True, text=True, timeout=60, check=True)
    expected = json.loads(done.stdout)
    from workflow_mcp.definitions._js import decode_string

    assert [decode_string(lit[1:-1], template=lit[0] == "`") for lit in literals] == expected
    # Through the loader, every literal without a lone surrogate (those are refused, see below).
    whole = [
        (lit, value)
        for lit, value in zip(literals, expected, strict=True)
        if not any("\ud800" <= ch <= "\udfff" for ch in value)
    ]
    titles = ", ".join(f"{{ title: {lit} }}" for lit, _ in whole)
    wf = load_workflow(source=f"export const meta = {{ name: 'n', description: 'd', phases: [{titles}] }}\n")
    assert wf.meta.phases is not None
    assert [p.title for p in wf.meta.phases] == [value for _, value in whole]


def test_the_definitions_package_exports_exactly_its_curated_public_names() -> None:
    import workflow_mcp.definitions as definitions

    assert set(definitions.__all__) == {
        "DEFAULT_PROFILE",
        "PROFILES",
        "AgentCatalog",
        "AgentDefinition",
        "AgentFileProblem",
        "Diagnostic",
        "DiscoveredWorkflow",
        "Discovery",
        "Phase",
        "Profile",
        "ValidationReport",
        "Workflow",
        "WorkflowMeta",
        "WorkflowWarning",
        "find_agents",
        "find_workflows",
        "get_profile",
        "load_workflow",
        "resolve_workflow",
        "validate_workflow",
    }
    assert all(hasattr(definitions, name) for name in definitions.__all__)


def test_importing_the_package_does_not_load_tree_sitter_or_the_realm() -> None:
    import subprocess
    import sys

    probe = (
        "import sys, workflow_mcp.definitions; "
        "print(sorted(m for m in ('tree_sitter', 'workflow_mcp.realm.worker') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_discarded_meta_keys_and_dropped_phases_are_warnings_not_errors() -> None:
    report = validate_workflow(
        source=(
            "export const meta = { name: 'n', description: 'd', tags: ['x'], title: 5,\n"
            "  phases: [{ title: 'Keep' }, { detail: 'no title' }] }\nreturn 1\n"
        ),
        check_syntax=False,
    )
    assert report.valid
    messages = [w.message for w in report.warnings if w.rule == "meta-discarded"]
    assert any("meta.tags" in m for m in messages)
    assert any("meta.title must be a string" in m for m in messages)
    assert any("meta.phases[1]" in m for m in messages)
    assert report.meta is not None and [p.title for p in report.meta.phases or ()] == ["Keep"]
