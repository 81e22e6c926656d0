"""Model and effort names, normalized as Claude Code 2.1.332 normalizes them (NOTES.md#model-names;
the end-to-end cases are tests/conformance/cases/runtime/model-* and effort-*)."""

from __future__ import annotations

from typing import Any

import pytest

from workflow_mcp.definitions.models import (
    ModelNameError,
    js_number,
    js_string,
    normalize_effort,
    normalize_model,
)
from workflow_mcp.definitions.profile import get_profile

EFFORTS = get_profile().efforts


@pytest.mark.parametrize(
    ("value", "model"),
    [
        ("haiku", "haiku"),
        ("HAIKU", "haiku"),
        (" haiku", "haiku"),
        ("haiku\n", "haiku"),
        ("haiku[1m]", "haiku"),
        ("Opus[1M]", "opus"),
        ("best", "opus"),
        ("Best", "opus"),
        ("opusplan", "sonnet"),
        ("OPUSPLAN", "sonnet"),
        ("inherit", None),
        ("", None),
        ("   ", None),
        (None, None),
        ("INHERIT", "INHERIT"),
        ("inherit ", "inherit"),
        ("default", "default"),
        ("GPT-5", "GPT-5"),
        ("ha iku", "ha iku"),
        ("x[1m]", "x"),
        ("sonnet[2m]", "sonnet"),
        ("claude-opus-4-1", "claude-opus-4-1"),
    ],
)
def test_a_model_name_is_normalized_as_claude_normalizes_it(value: Any, model: str | None) -> None:
    assert normalize_model(value) == model


@pytest.mark.parametrize("value", [42, ["haiku"], {}, True])
def test_a_non_string_model_option_is_a_type_error_whose_first_line_is_claudes(value: Any) -> None:
    with pytest.raises(ModelNameError) as caught:
        normalize_model(value)
    assert caught.value.js_name == "TypeError"
    first, fix = str(caught.value).split("\n")
    assert first == "e.toLowerCase is not a function. (In 'e.toLowerCase()', 'e.toLowerCase' is undefined)"
    assert "must be a string such as 'sonnet'" in fix
    assert normalize_model(value, strict=False) is None


@pytest.mark.parametrize(
    ("value", "effort"),
    [
        ("low", "low"),
        ("LOW", "low"),
        ("High", "high"),
        (["low"], "low"),
        ("xhigh", "xhigh"),
        (5, None),
        ("5", None),
        (1.5, None),
        ("", None),
        (" low", None),
        ("minimal", None),
        (True, None),
        ({}, None),
        (None, None),
    ],
)
def test_an_effort_is_its_lower_case_string_when_that_is_an_effort(value: Any, effort: str | None) -> None:
    assert normalize_effort(value, EFFORTS) == effort


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "null"),
        (True, "true"),
        (42, "42"),
        (1.5, "1.5"),
        (5.0, "5"),
        (1e21, "1e+21"),
        (1.5e22, "1.5e+22"),
        (1e-7, "1e-7"),
        (0.000001, "0.000001"),
        (123.456, "123.456"),
        (-0.0, "0"),
        (["a", None, 1], "a,,1"),
        ([["x", "y"], "z"], "x,y,z"),
        ({"a": 1}, "[object Object]"),
    ],
)
def test_js_string_is_javascripts_string_of_a_json_value(value: Any, text: str) -> None:
    assert js_string(value) == text


def test_js_number_spells_non_finite_numbers_as_javascript_does() -> None:
    assert [js_number(float(x)) for x in ("nan", "inf", "-inf")] == ["NaN", "Infinity", "-Infinity"]
