"""Hostile meta literals: lone surrogates, deep nesting, huge key counts. Each is a clear refusal with a
rule and a line (or, for the key count, simply fast), never a crash, a hang or output that is not JSON.

Claude Code 2.1.332 measured with the oracle: a lone surrogate in ``meta.name`` lists the workflow but
cannot launch it ("not found"); meta nested 6,000 deep loads and 7,000 fails with "Script parse error:
Maximum call stack size exceeded".
"""

from __future__ import annotations

import json
import random
import time

import pytest

from workflow_mcp.definitions import get_profile, load_workflow, validate_workflow
from workflow_mcp.definitions._js import Source, parse
from workflow_mcp.errors import WorkflowLoadError

DEPTH = get_profile().max_meta_depth


def refusal(source: str) -> WorkflowLoadError:
    report = validate_workflow(source=source, check_syntax=False)
    assert not report.valid
    # The whole report is JSON that UTF-8 can carry (what `validate --json` and MCP send).
    json.dumps(report.to_json(), ensure_ascii=False).encode("utf-8")
    return report.errors[0]


# -- lone surrogates ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "at"),
    [
        ("export const meta = { name: '\\uD800', description: 'd' }\n", "'\\uD800'"),
        ("export const meta = { name: 'n', description: 'x\\uDFFF' }\n", "'x\\uDFFF'"),
        ("export const meta = {\n  name: 'n',\n  description: 'd',\n  title: `\\uD83D`,\n}\n", "`"),
        ("export const meta = { name: 'n', description: 'd', phases: [{ title: '\\u{D800}' }] }\n", "'\\u{"),
        ("export const meta = { name: 'n', description: 'd', '\\uDE00\\uD83D': 1 }\n", "'\\uDE00"),
        ("export const meta = { name: 'n', description: 'd', \\uD800: 1 }\n", "\\uD800"),
        ("export const meta = { name: 'n', description: 'd', x: [[{ y: '\\uDC00' }]] }\n", "'\\uDC00"),
    ],
    ids=["name", "description", "title", "phase-title", "string-key", "identifier-key", "nested-discarded"],
)
def test_a_lone_surrogate_anywhere_in_meta_is_refused_with_its_rule_and_position(
    source: str, at: str
) -> None:
    before = source[: source.index(at)]
    line, column = before.count("\n") + 1, len(before.rsplit("\n", 1)[-1]) + 1
    error = refusal(source)
    assert (error.rule, error.line, error.column) == ("meta-lone-surrogate", line, column)
    assert "lone surrogate U+D" in error.detail and "pair it" in error.detail


def test_an_escaped_surrogate_pair_is_one_character_and_loads() -> None:
    wf = load_workflow(
        source="export const meta = { name: '\\uD83D\\uDE00', description: '\\u{1F600}' }\n",
        check_syntax=False,
    )
    assert wf.meta.name == wf.meta.description == "\U0001f600"


def test_a_lone_surrogate_outside_meta_is_the_realms_business_not_the_loaders() -> None:
    # In the body it is just JavaScript: the realm turns it into U+FFFD when it crosses to the host.
    wf = load_workflow(source="export const meta = { name: 'n', description: 'd' }\nlog('\\uD800')\n")
    assert wf.meta.name == "n"


# -- deep nesting ------------------------------------------------------------------------------


def nested(kind: str, depth: int) -> str:
    """A meta whose key ``x`` holds ``depth`` levels of ``kind`` (the meta object is one more)."""
    opening, closing = {"array": ("[", "]"), "object": ("{a:", "}"), "parens": ("(", ")")}[kind]
    return (
        "export const meta = { name: 'n', description: 'd',\n  x: "
        + opening * depth
        + "1"
        + closing * depth
        + " }\nreturn 1\n"
    )


@pytest.mark.parametrize("kind", ["array", "object", "parens"])
def test_meta_nested_up_to_the_limit_loads(kind: str) -> None:
    wf = load_workflow(source=nested(kind, DEPTH - 1), check_syntax=False)
    assert wf.meta.name == "n"


@pytest.mark.parametrize("kind", ["array", "object", "parens"])
@pytest.mark.parametrize("depth", [DEPTH, 100_000])
def test_meta_nested_past_the_limit_is_refused_with_its_rule_and_line(kind: str, depth: int) -> None:
    started = time.process_time()  # this process's CPU: the work done, not how long the machine made it wait
    error = refusal(nested(kind, depth))
    assert time.process_time() - started < 10
    assert error.rule == "meta-too-deep" and error.line == 2 and error.column is not None
    assert f"{DEPTH:,} levels" in error.detail and "Flatten" in error.detail


def test_the_depth_limit_is_counted_through_mixed_nesting() -> None:
    levels = ["[", "{a:", "("] * (DEPTH // 3 + 1)
    closing = {"[": "]", "{a:": "}", "(": ")"}
    value = "".join(levels) + "1" + "".join(closing[x] for x in reversed(levels))
    error = refusal(f"export const meta = {{ name: 'n', description: 'd', x: {value} }}\n")
    assert error.rule == "meta-too-deep"


def units(text: str) -> int:
    """Length in UTF-16 code units (how columns count)."""
    return len(text.encode("utf-16-le")) // 2


# -- many keys ---------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["k", "ké😀"])
def test_twenty_thousand_meta_keys_on_one_line_validate_in_well_under_a_second(key: str) -> None:
    keys = ", ".join(f"'{key}{i}': {i}" for i in range(20_000))
    source = f"export const meta = {{ name: 'n', description: 'd', {keys} }}\nreturn 1\n"
    # CPU seconds of this process: the work validating took, which a loaded machine does not stretch the
    # way it stretches wall time (benchmarks/validate.py keeps the wall-clock figure).
    started = time.process_time()
    report = validate_workflow(source=source, check_syntax=False)
    cpu = time.process_time() - started
    assert report.valid and len(report.warnings) == 20_000
    last = report.warnings[-1]
    assert last.rule == "meta-discarded" and last.line == 1
    assert last.column == units(source.split("\n")[0]) - units(f"'{key}19999': 19999 }}") + 1
    assert cpu < 3.0, f"{cpu:.2f} s of CPU"  # ~0.3 s measured; quadratic took 60 s


def test_positions_count_utf16_code_units_on_any_line() -> None:
    rng = random.Random(7)
    alphabet = ["a", " ", "é", "€", "😀", "\n", "x"]
    for _ in range(50):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        data = ("let q = " + repr(text.replace("\n", " ")) + "\nlet z = 1\n").encode("utf-8")
        src = Source(data)
        stack = [parse(data).root_node]
        while stack:
            node = stack.pop()
            stack.extend(node.children)
            line, column = src.position(node)
            prefix = data[node.start_byte - node.start_point[1] : node.start_byte].decode("utf-8")
            assert (line, column) == (node.start_point[0] + 1, len(prefix.encode("utf-16-le")) // 2 + 1)


def test_each_profile_has_its_own_measured_depth_limit() -> None:
    old = get_profile("claude-code/2.1.209").max_meta_depth
    assert old < DEPTH
    loaded = load_workflow(source=nested("array", old - 1), profile="claude-code/2.1.209", check_syntax=False)
    assert loaded.meta.name == "n"
    report = validate_workflow(source=nested("array", old), profile="claude-code/2.1.209", check_syntax=False)
    assert [e.rule for e in report.errors] == ["meta-too-deep"]
    assert "profile claude-code/2.1.209" in report.errors[0].detail


# -- fuzzing the meta object -------------------------------------------------------------------

HOSTILE = [
    "'\\uD800'",
    "'\\uDBFF\\uDBFF'",
    "`\\uDC00`",
    "'\\u{DFFF}'",
    "\\uD800",
    "'\\uD83D\\uDE00'",
    "[" * 5_000 + "]" * 5_000,
    "{a:" * 5_000 + "1" + "}" * 5_000,
    "(" * 5_000 + "1" + ")" * 5_000,
    "[" * 3_999 + "]" * 3_999,
    "-(-1)",
    "1e999",
    "NaN",
    "__proto__",
]


def test_randomly_placed_hostile_meta_values_are_named_refusals_or_load() -> None:
    rng = random.Random(20261201)
    started = time.process_time()
    for _ in range(300):
        parts = ["name: 'n'", "description: 'd'"]
        for _ in range(rng.randint(1, 4)):
            value = rng.choice(HOSTILE)
            key = rng.choice(["x", "'k'", "title", "phases", rng.choice(HOSTILE[:6])])
            parts.insert(rng.randint(0, len(parts)), f"{key}: {value}")
        source = "export const meta = {\n  " + ",\n  ".join(parts) + "\n}\nreturn 1\n"
        report = validate_workflow(source=source, check_syntax=False)
        json.dumps(report.to_json(), ensure_ascii=False).encode("utf-8")
        for error in report.errors:
            assert error.rule and error.line is not None and error.column is not None, error
        if report.meta is not None:
            json.dumps(report.meta.to_json(), ensure_ascii=False).encode("utf-8")
    assert time.process_time() - started < 60
