"""The portable → strict schema bridge: what strict providers are asked for, and how their answers
map back to what the workflow's schema describes."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from workflow_mcp.providers.schema import WRAP_KEY, to_strict

STRICT_KEYWORDS = {
    "type",
    "description",
    "title",
    "enum",
    "const",
    "$ref",
    "anyOf",
    "$defs",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
}


def assert_strict(schema: Mapping[str, Any], root: bool = True) -> None:
    """OpenAI strict-mode rules: root is an object; every object closes and requires every key;
    only supported keywords appear."""
    if root:
        assert schema.get("type") == "object", schema
        assert "anyOf" not in schema
    unknown = set(schema) - STRICT_KEYWORDS
    assert not unknown, f"unsupported keywords {unknown} in {schema}"
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else (kinds or [])
    if "object" in kinds:
        assert schema["additionalProperties"] is False, schema
        assert sorted(schema["required"]) == sorted(schema["properties"]), schema
        for sub in schema["properties"].values():
            assert_strict(sub, root=False)
    if "items" in schema:
        assert_strict(schema["items"], root=False)
    for branch in schema.get("anyOf", []):
        assert_strict(branch, root=False)
    for sub in schema.get("$defs", {}).values():
        assert_strict(sub, root=False)


REVIEW = {
    "type": "object",
    "properties": {
        "issues": {"type": "array", "items": {"type": "string"}},
        "severity": {"type": "string", "enum": ["low", "high"]},
    },
    "required": ["issues"],
}

SCHEMAS: list[Any] = [
    REVIEW,
    {"type": "array", "items": {"type": "integer"}},
    {"type": "string", "minLength": 2},
    {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    {"type": "object"},
    {"type": "object", "additionalProperties": {"type": "number"}},
    {"type": "object", "properties": {"a": {}}, "required": ["a"]},
    {"type": "object", "properties": {"n": {"type": ["integer", "null"]}}},
    {"type": "object", "properties": {"k": {"const": "x"}}},
    {
        "type": "object",
        "properties": {"node": {"$ref": "#/$defs/node"}},
        "required": ["node"],
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                },
                "required": ["name"],
            }
        },
    },
    {
        "type": "object",
        "properties": {"x": {"allOf": [{"type": "string"}, {"minLength": 1}]}},
        "required": ["x"],
    },
    {
        "type": "object",
        "properties": {"t": {"type": "array", "prefixItems": [{"type": "string"}]}},
        "required": ["t"],
    },
    {
        "type": "object",
        "properties": {"u": {"type": "array", "uniqueItems": True, "items": {"type": "string"}}},
    },
    {"type": "object", "properties": {"o": {"oneOf": [{"type": "string"}, {"type": "null"}]}}},
    {
        "type": "object",
        "properties": {"d": {"type": "string", "format": "uri", "default": "x"}},
        "required": ["d"],
    },
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: str(s)[:60])
def test_every_rewritten_schema_follows_strict_mode_rules_and_is_itself_a_valid_schema(schema: Any) -> None:
    strict = to_strict(schema).schema
    assert_strict(strict)
    Draft202012Validator.check_schema(strict)


def test_the_portable_schema_is_never_modified() -> None:
    schema = copy.deepcopy(SCHEMAS[9])
    to_strict(schema)
    assert schema == SCHEMAS[9]


def roundtrip(schema: Any, strict_answer: Any) -> Any:
    """Check the answer is valid under the strict schema, then project it back."""
    bridge = to_strict(schema)
    Draft202012Validator(bridge.schema).validate(strict_answer)
    return bridge.project(strict_answer)


def test_an_optional_property_is_required_and_nullable_and_its_synthetic_null_becomes_omission() -> None:
    strict = to_strict(REVIEW).schema
    assert strict["required"] == ["issues", "severity"]
    assert strict["properties"]["severity"]["type"] == ["string", "null"]
    assert strict["properties"]["severity"]["enum"] == ["low", "high", None]
    assert roundtrip(REVIEW, {"issues": ["a"], "severity": None}) == {"issues": ["a"]}
    assert roundtrip(REVIEW, {"issues": [], "severity": "low"}) == {"issues": [], "severity": "low"}


def test_an_optional_property_that_itself_accepts_null_keeps_an_explicit_null() -> None:
    schema = {"type": "object", "properties": {"n": {"type": ["integer", "null"]}}}
    assert roundtrip(schema, {"n": None}) == {"n": None}
    assert roundtrip(schema, {"n": 3}) == {"n": 3}


def test_a_required_property_keeps_its_type_without_null() -> None:
    strict = to_strict(REVIEW).schema
    assert strict["properties"]["issues"] == {"type": "array", "items": {"type": "string"}}


def test_a_top_level_array_is_wrapped_in_an_object_and_unwrapped() -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    bridge = to_strict(schema)
    assert bridge.wrapped
    assert bridge.schema["required"] == [WRAP_KEY]
    assert roundtrip(schema, {WRAP_KEY: [1, 2, 3]}) == [1, 2, 3]


@pytest.mark.parametrize(
    ("schema", "answer", "expected"),
    [
        ({"type": "string"}, {WRAP_KEY: "hi"}, "hi"),
        ({"type": "integer"}, {WRAP_KEY: 4}, 4),
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, {WRAP_KEY: 4}, 4),
        ({"enum": ["a", "b"]}, {WRAP_KEY: "b"}, "b"),
    ],
)
def test_every_top_level_non_object_schema_is_wrapped_and_unwrapped(
    schema: Any, answer: Any, expected: Any
) -> None:
    assert roundtrip(schema, answer) == expected


def test_nested_objects_close_and_project_recursively() -> None:
    schema = {
        "type": "object",
        "properties": {
            "files": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "line": {"type": "integer"}},
                    "required": ["path"],
                },
            }
        },
        "required": ["files"],
    }
    answer = {"files": [{"path": "a.ts", "line": None}, {"path": "b.ts", "line": 3}]}
    assert roundtrip(schema, answer) == {"files": [{"path": "a.ts"}, {"path": "b.ts", "line": 3}]}


def test_a_free_form_object_travels_as_a_json_string_and_is_parsed_back() -> None:
    schema = {"type": "object"}
    bridge = to_strict(schema)
    assert bridge.schema["properties"][WRAP_KEY]["type"] == "string"
    assert "JSON" in bridge.schema["properties"][WRAP_KEY]["description"]
    assert roundtrip(schema, {WRAP_KEY: '{"any": [1, {"k": null}]}'}) == {"any": [1, {"k": None}]}


def test_a_map_object_travels_as_a_json_string_whose_description_carries_the_portable_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"scores": {"type": "object", "additionalProperties": {"type": "number"}}},
        "required": ["scores"],
    }
    bridge = to_strict(schema)
    assert '"additionalProperties":{"type":"number"}' in bridge.schema["properties"]["scores"]["description"]
    assert roundtrip(schema, {"scores": '{"a": 1.5}'}) == {"scores": {"a": 1.5}}


def test_an_any_schema_property_travels_as_json_text() -> None:
    schema = {"type": "object", "properties": {"a": {}}, "required": ["a"]}
    assert roundtrip(schema, {"a": "[1, 2]"}) == {"a": [1, 2]}
    assert roundtrip(schema, {"a": '"text"'}) == {"a": "text"}


def test_json_text_that_does_not_parse_is_returned_as_is_for_the_engine_to_reject() -> None:
    schema = {"type": "object", "properties": {"a": {}}, "required": ["a"]}
    assert roundtrip(schema, {"a": "{not json"}) == {"a": "{not json"}


@pytest.mark.parametrize("keyword", ["allOf", "not", "if"])
def test_keywords_strict_mode_cannot_express_make_the_sub_schema_opaque(keyword: str) -> None:
    sub = {keyword: [{"type": "string"}] if keyword == "allOf" else {"type": "string"}}
    schema = {"type": "object", "properties": {"x": sub}, "required": ["x"]}
    strict = to_strict(schema).schema
    assert strict["properties"]["x"]["type"] == "string"
    assert roundtrip(schema, {"x": "5"}) == {"x": 5}


def test_unsupported_constraints_are_dropped_and_restated_in_the_description() -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "minLength": 3, "description": "who"}},
        "required": ["name"],
    }
    prop = to_strict(schema).schema["properties"]["name"]
    assert "minLength" not in prop
    assert prop["description"].startswith("who (Constraints: ")
    assert '"minLength":3' in prop["description"]


def test_an_unsupported_format_is_dropped_and_a_supported_one_kept() -> None:
    schema = {
        "type": "object",
        "properties": {"u": {"type": "string", "format": "uri"}, "d": {"type": "string", "format": "date"}},
        "required": ["u", "d"],
    }
    props = to_strict(schema).schema["properties"]
    assert "format" not in props["u"] and '"format":"uri"' in props["u"]["description"]
    assert props["d"]["format"] == "date"


def test_one_of_becomes_any_of_and_each_branch_projects() -> None:
    schema = {
        "type": "object",
        "properties": {
            "v": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                        "required": ["a"],
                    },
                    {"type": "integer"},
                ]
            }
        },
        "required": ["v"],
    }
    strict = to_strict(schema).schema
    assert "anyOf" in strict["properties"]["v"] and "oneOf" not in strict["properties"]["v"]
    assert roundtrip(schema, {"v": {"a": "x", "b": None}}) == {"v": {"a": "x"}}
    assert roundtrip(schema, {"v": 7}) == {"v": 7}


def test_an_optional_reference_becomes_a_nullable_any_of_and_defs_are_rewritten() -> None:
    schema = SCHEMAS[9]
    strict = to_strict(schema).schema
    assert strict["$defs"]["node"]["required"] == ["name", "children"]
    answer = {"node": {"name": "root", "children": [{"name": "leaf", "children": None}]}}
    assert roundtrip(schema, answer) == {"node": {"name": "root", "children": [{"name": "leaf"}]}}


def test_an_optional_const_becomes_nullable_through_any_of() -> None:
    schema = {"type": "object", "properties": {"k": {"const": "x"}}}
    assert roundtrip(schema, {"k": None}) == {}
    assert roundtrip(schema, {"k": "x"}) == {"k": "x"}


def test_a_closed_object_is_still_closed_and_an_open_one_is_closed() -> None:
    open_schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
        "additionalProperties": True,
    }
    assert to_strict(open_schema).schema["additionalProperties"] is False
    assert not to_strict(open_schema).wrapped


def test_projection_never_raises_on_a_value_of_the_wrong_shape() -> None:
    bridge = to_strict(REVIEW)
    assert bridge.project("not an object") == "not an object"
    assert bridge.project({"issues": "x", "unknown": 1}) == {"issues": "x", "unknown": 1}
    wrapped = to_strict({"type": "array"})
    assert wrapped.project([1]) == [1]
