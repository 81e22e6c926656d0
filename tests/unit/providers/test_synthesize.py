"""synthesize_instance gives a deterministic minimal instance that validates (draft 2020-12)."""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from workflow_mcp.errors import InvalidInputError
from workflow_mcp.providers._synthesize import synthesize_instance

NODE = {
    "type": "object",
    "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#"}}},
    "required": ["value", "children"],
}

# (schema, the exact minimal instance expected)
MINIMAL: list[tuple[Any, Any]] = [
    (True, None),
    ({}, None),
    ({"type": "null"}, None),
    ({"type": "boolean"}, False),
    ({"type": "string"}, ""),
    ({"type": "string", "minLength": 3}, "xxx"),
    ({"type": "integer"}, 0),
    ({"type": "integer", "minimum": 5}, 5),
    ({"type": "integer", "maximum": -2}, -2),
    ({"type": "integer", "exclusiveMinimum": 5, "multipleOf": 4}, 8),
    ({"type": "integer", "minimum": 1, "multipleOf": 2.5}, 5),
    ({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}, 0.5),
    ({"type": "number", "minimum": -10, "maximum": -3, "multipleOf": 0.5}, -3),
    ({"type": "number", "minimum": 1.25}, 2),
    ({"type": ["null", "string"]}, ""),
    ({"type": ["integer", "null"], "minimum": 3}, 3),
    ({"type": "string", "nullable": True, "maxLength": 0}, ""),
    ({"enum": ["low", "high"]}, "low"),
    ({"const": {"k": [1]}}, {"k": [1]}),
    ({"type": "string", "format": "date"}, "2000-01-01"),
    ({"type": "string", "format": "date-time"}, "2000-01-01T00:00:00Z"),
    ({"type": "string", "format": "email"}, "user@example.com"),
    ({"type": "string", "format": "uri"}, "https://example.com/"),
    ({"type": "string", "format": "uuid"}, "00000000-0000-4000-8000-000000000000"),
    ({"type": "string", "format": "email", "minLength": 20}, "xxxxuser@example.com"),
    ({"type": "string", "pattern": "^[A-Z]{2}-\\d{3,}$"}, "XX-000"),
    ({"type": "string", "pattern": "^(foo|bar)\\1$"}, "foofoo"),
    ({"type": "array"}, []),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 3, "uniqueItems": True}, [0, 1, -1]),
    ({"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 2}, ["a", "a"]),
    (
        {
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "boolean"}],
            "minItems": 2,
            "items": False,
        },
        ["", False],
    ),
    ({"type": "array", "contains": {"type": "integer", "minimum": 7}, "minContains": 2}, [7, 7]),
    ({"type": "array", "contains": {"const": "x"}, "items": {"type": "string"}}, ["x"]),
    (
        {
            "type": "object",
            "properties": {
                "issues": {"type": "array", "items": {"type": "string"}},
                "severity": {"type": "string", "enum": ["low", "high"]},
            },
            "required": ["issues"],
        },
        {"issues": []},
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "boolean"}},
            "minProperties": 2,
        },
        {"a": "", "b": 0},
    ),
    ({"properties": {"name": {"type": "string", "minLength": 1}}, "required": ["name"]}, {"name": "x"}),
    ({"type": "object", "required": ["a"], "dependentRequired": {"a": ["b"]}}, {"a": None, "b": None}),
    (
        {
            "type": "object",
            "patternProperties": {"^x-": {"type": "integer"}},
            "additionalProperties": False,
            "minProperties": 1,
        },
        {"x-": 0},
    ),
    (
        {
            "$defs": {"severity": {"enum": ["low", "high"]}},
            "type": "object",
            "properties": {"s": {"$ref": "#/$defs/severity"}},
            "required": ["s"],
        },
        {"s": "low"},
    ),
    ({"definitions": {"n": {"type": "integer", "minimum": 2}}, "$ref": "#/definitions/n"}, 2),
    ({"$defs": {"n": {"$anchor": "count", "type": "integer", "minimum": 4}}, "$ref": "#count"}, 4),
    (NODE, {"value": 0, "children": []}),
    (
        {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"properties": {"a": {"minLength": 2}}, "required": ["b"]},
            ]
        },
        {"a": "xx", "b": None},
    ),
    ({"allOf": [{"type": "integer", "minimum": 2}, {"maximum": 9, "minimum": 4}]}, 4),
    ({"anyOf": [{"type": "string", "minLength": 2, "maxLength": 1}, {"type": "boolean"}]}, False),
    ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, 0.5),
    ({"not": {"type": "null"}}, False),
    ({"type": "string", "not": {"const": ""}}, "x"),
    ({"type": "integer", "not": {"enum": [0, 1]}}, -1),
    (
        {
            "type": "object",
            "required": ["x"],
            "properties": {"x": {"type": "integer"}},
            "if": {"properties": {"x": {"const": 0}}},
            "then": {"required": ["y"]},
        },
        {"x": 0, "y": None},
    ),
]


@pytest.mark.parametrize(("schema", "expected"), MINIMAL)
def test_the_synthesized_instance_is_the_minimal_one_and_validates(schema: Any, expected: Any) -> None:
    value = synthesize_instance(schema)
    assert value == expected
    assert type(value) is type(expected)
    assert Draft202012Validator(schema).is_valid(value)


# Harder schemas: only validity is promised.
VALID_ONLY: list[Any] = [
    {"type": "string", "pattern": "^\\d+$", "minLength": 5, "maxLength": 8},
    {"type": "string", "pattern": "[^a-z]{3}"},
    {"type": "string", "pattern": "^(?:[a-f0-9]{8})-(?:[a-f0-9]{4})$"},
    {"type": "string", "pattern": "^\\w+@\\w+\\.com$"},
    {"type": "string", "minLength": 2, "maxLength": 2, "pattern": "^[0-9]+$"},
    {"type": "array", "items": {"type": "string"}, "minItems": 4, "uniqueItems": True},
    {"type": "array", "items": {"type": "string", "format": "date"}, "minItems": 3, "uniqueItems": True},
    {"type": "array", "items": {"type": "boolean"}, "minItems": 2, "uniqueItems": True},
    {"type": "array", "uniqueItems": True, "minItems": 5},
    {"type": "object", "minProperties": 3, "propertyNames": {"pattern": "^k"}},
    {"type": "number", "multipleOf": 0.1, "minimum": 0.25},
    {"type": "integer", "exclusiveMinimum": -1, "exclusiveMaximum": 1},
    {
        "type": "object",
        "properties": {"kind": {"const": "a"}},
        "required": ["kind"],
        "unevaluatedProperties": False,
    },
    {
        "type": "object",
        "properties": {"mode": {"enum": ["fast", "safe"]}, "level": {"type": "integer"}},
        "required": ["mode"],
        "if": {"properties": {"mode": {"const": "fast"}}},
        "then": {"required": ["level"], "properties": {"level": {"minimum": 3}}},
    },
    {
        "$defs": {
            "leaf": {"type": "string", "minLength": 1},
            "pair": {
                "type": "array",
                "prefixItems": [{"$ref": "#/$defs/leaf"}, {"$ref": "#/$defs/leaf"}],
                "minItems": 2,
            },
        },
        "type": "object",
        "properties": {"pairs": {"type": "array", "items": {"$ref": "#/$defs/pair"}, "minItems": 1}},
        "required": ["pairs"],
    },
    {
        "oneOf": [
            {"type": "object", "properties": {"t": {"const": "a"}}, "required": ["t"]},
            {
                "type": "object",
                "properties": {"t": {"const": "b"}, "n": {"type": "integer"}},
                "required": ["t", "n"],
            },
        ]
    },
    {"type": "object", "required": ["a"], "properties": {"a": {"anyOf": [{"type": "null"}, {"$ref": "#"}]}}},
]


@pytest.mark.parametrize("schema", VALID_ONLY)
def test_harder_schemas_still_get_an_instance_that_validates(schema: Any) -> None:
    assert Draft202012Validator(schema).is_valid(synthesize_instance(schema))


def test_the_same_schema_always_gives_the_same_instance() -> None:
    for schema, _ in MINIMAL:
        assert synthesize_instance(schema) == synthesize_instance(schema)


def test_a_mapping_schema_is_accepted_like_parsed_json() -> None:
    schema = MappingProxyType({"type": "object", "required": ["a"], "properties": {"a": {"const": 1}}})
    assert synthesize_instance(schema) == {"a": 1}


def test_an_invalid_schema_is_refused_naming_the_problem() -> None:
    with pytest.raises(InvalidInputError, match=r"not a valid JSON Schema \(draft 2020-12\)"):
        synthesize_instance({"type": "bogus-type"})
    with pytest.raises(InvalidInputError, match="must be an object or a boolean"):
        synthesize_instance("string")


@pytest.mark.parametrize(
    "schema",
    [
        False,
        {"type": "integer", "minimum": 3, "maximum": 2},
        {"type": "string", "minLength": 3, "maxLength": 2},
        {"allOf": [{"type": "string"}, {"type": "integer"}]},
        {"type": "object", "required": ["a"], "additionalProperties": False},
        {
            "$defs": {"n": {"type": "object", "properties": {"c": {"$ref": "#/$defs/n"}}, "required": ["c"]}},
            "$ref": "#/$defs/n",
        },
        {"$defs": {"loop": {"$ref": "#/$defs/loop"}}, "$ref": "#/$defs/loop"},
    ],
)
def test_an_unsatisfiable_or_cyclic_schema_raises_instead_of_looping(schema: Any) -> None:
    with pytest.raises(InvalidInputError, match=re.escape("give the fake script an explicit `result`")):
        synthesize_instance(schema)
