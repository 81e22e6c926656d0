"""agent() schemas and structured output, as Claude Code 2.1.332 treats them (measured with the
oracle, cases ``schema-*`` and ``tests/conformance/pending/NOTES.md#structured-output``).

Before any provider is contacted, :func:`check_schema` refuses (and the call still counts toward the
1,000-call cap):

- a schema that is not a JSON object: ``true``, numbers and strings with a ``TypeError``; an array as
  an invalid schema (``data must be object,boolean``). ``false`` and ``null`` mean no schema at all:
  a plain text call;
- an object that fails the draft-07 meta-schema, or (Ajv's strict mode) holds a keyword draft-07 does
  not know (``strict mode: unknown keyword: "foo"``: ``$anchor``, ``prefixItems``, ``x-…`` …), names a
  ``$schema`` other than draft-07, or a ``$ref`` that resolves to nothing — all "invalid", with Ajv's
  wording where this module can give it;
- a root that does not declare ``type: 'object'`` (``{}``, type lists, ``anyOf``/``$ref`` roots,
  arrays, primitives) as "unusable": no API accepts such a tool input schema.

Refusals are named ``TelemetrySafeError`` (profile 2.1.209: invalid schemas are ``TypeError`` and no
root is refused). Structured output is then (:func:`coerce_top_level`) converted where Claude converts
it — a *top-level* property whose value is a string and whose schema does not allow a string:
``'true'``/``'false'``, numbers whose JavaScript spelling is the string itself (``'5'``, ``'-5'``,
``'0.5'``; not ``'5.0'``, ``'05'``, ``' 5 '``, ``'1e3'``), JSON array and object text; never ``'null'``,
nested values, ``additionalProperties``, or properties without types whose schema holds more than
annotations (``const``, ``enum``, ``allOf`` …) — and validated with ``jsonschema`` under
draft-07 semantics (:func:`validate`): ``format`` is not checked, ``default`` is not applied,
``nullable: true`` admits ``null`` (as Ajv does).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any, Final
from urllib.parse import unquote

from ..definitions.models import js_number
from ..definitions.profile import Profile
from ..errors import AgentCallRefusedError

__all__ = ["SchemaRefusedError", "check_schema", "coerce_top_level", "validate"]

DRAFT_07_IDS: Final = frozenset(
    {"http://json-schema.org/draft-07/schema#", "http://json-schema.org/draft-07/schema"}
)
# Ajv 8's default (draft-07) vocabularies: core, validation, applicator, format, metadata, content.
KNOWN_KEYWORDS: Final = frozenset(
    {
        "$schema", "$id", "$defs", "$vocabulary", "$comment", "definitions", "$ref",
        "type", "nullable", "const", "enum", "multipleOf", "maximum", "minimum", "exclusiveMaximum",
        "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxProperties", "minProperties",
        "required", "maxItems", "minItems", "uniqueItems",
        "not", "anyOf", "oneOf", "allOf", "if", "then", "else", "propertyNames", "additionalProperties",
        "dependencies", "properties", "patternProperties", "additionalItems", "items", "contains",
        "format", "title", "description", "default", "deprecated", "readOnly", "writeOnly", "examples",
        "contentMediaType", "contentEncoding", "contentSchema",
    }
)  # fmt: skip
_ONE: Final = (
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "additionalProperties",
    "additionalItems",
    "contains",
)
_LIST: Final = ("anyOf", "oneOf", "allOf")
_MAP: Final = ("properties", "patternProperties")

INVALID_PREFIX: Final = "agent({schema}) received an invalid JSON Schema: "
UNUSABLE: Final = (
    "agent({schema}) received an unusable JSON Schema — the API only accepts an object-rooted tool input "
    "schema, so every request would be rejected: the root schema must declare type: 'object' (the API "
    "rejects any other root type for a tool input schema); wrap arrays or primitives in an object "
    "property. The subagent was not started — fix the schema and call agent() again."
)


class SchemaRefusedError(AgentCallRefusedError):
    """Raised by :func:`check_schema` when agent() must reject before any provider is contacted.
    The message is Claude Code 2.1.332's (``agent({schema}) received an invalid JSON Schema: …`` or
    ``… an unusable JSON Schema …``); ``js_name`` is ``TelemetrySafeError`` (profile 2.1.209:
    ``TypeError``), or ``TypeError`` for a schema that is not an object at all."""


def check_schema(schema: Any, profile: Profile) -> Mapping[str, Any] | None:
    """The schema an agent() call validates against, ``None`` for a plain text call (``null`` or
    ``false``), after the checks of the module docstring. A schema's verdict is remembered (a
    fan-out asks the same schema many times).

    Raises:
        SchemaRefusedError: the call must reject (module docstring).
    """
    if schema is None or schema is False:
        return None
    if not isinstance(schema, dict):
        return _check(schema, profile)
    try:
        key = (profile.name, json.dumps(schema, sort_keys=True))
    except (TypeError, ValueError, RecursionError):
        return _check(schema, profile)
    verdict = _VERDICTS.get(key)
    if verdict is None:
        try:
            _check(schema, profile)
            verdict = ""
        except SchemaRefusedError as exc:
            verdict = exc
        if len(_VERDICTS) > 256:
            _VERDICTS.clear()
        _VERDICTS[key] = verdict
    if isinstance(verdict, SchemaRefusedError):
        raise SchemaRefusedError(str(verdict), js_name=verdict.js_name)
    return schema


_VERDICTS: dict[tuple[str, str], SchemaRefusedError | str] = {}


def _check(schema: Any, profile: Profile) -> Mapping[str, Any] | None:
    name = "TelemetrySafeError" if profile.telemetry_safe_errors else "TypeError"
    if isinstance(schema, list):
        raise SchemaRefusedError(INVALID_PREFIX + "data must be object,boolean", js_name=name)
    if not isinstance(schema, dict):
        raise SchemaRefusedError(
            # Claude's first line is a JavaScript engine accident (a WeakMap key); ours says the fix.
            "WeakMap keys must be objects or non-registered symbols\n"
            f"agent() schema must be a JSON Schema object such as {{type: 'object', properties: {{…}}}}, not "
            f"{_kind(schema)}",
            js_name="TypeError",
        )
    if profile.schema_strict_keywords and "$schema" in schema:
        declared = schema["$schema"]
        if not isinstance(declared, str):
            raise SchemaRefusedError(INVALID_PREFIX + "data/$schema must be string", js_name=name)
        if declared not in DRAFT_07_IDS:
            raise SchemaRefusedError(INVALID_PREFIX + f'no schema with key or ref "{declared}"', js_name=name)
    meta = _meta_validator()
    try:
        first = next(iter(meta.iter_errors(schema)), None)
    except RecursionError:
        raise SchemaRefusedError(
            INVALID_PREFIX + "the schema is nested too deeply to check against the draft-07 meta-schema; "
            "flatten it (name repeated parts under $defs and use $ref)",
            js_name=name,
        ) from None
    if first is not None:
        raise SchemaRefusedError(INVALID_PREFIX + _ajv_text(first, "data"), js_name=name)
    try:
        for problem in _compile_problems(schema, profile.schema_strict_keywords):
            raise SchemaRefusedError(INVALID_PREFIX + problem, js_name=name)
    except RecursionError:
        raise SchemaRefusedError(
            INVALID_PREFIX + "the schema is nested too deeply to compile; flatten it", js_name=name
        ) from None
    if profile.schema_object_root and schema.get("type") != "object":
        raise SchemaRefusedError(UNUSABLE, js_name=name)
    return schema


def coerce_top_level(schema: Mapping[str, Any], value: Any) -> Any:
    """``value`` with each top-level string property converted where Claude Code 2.1.332 converts it
    (module docstring); ``value`` itself when nothing changes. Never raises."""
    properties = schema.get("properties")
    if not isinstance(value, dict) or not isinstance(properties, dict):
        return value
    out: dict[str, Any] | None = None
    for key, item in value.items():
        sub = properties.get(key)
        if not isinstance(item, str) or sub is None or _allows_string(sub, schema, 0):
            continue
        converted = _convert(item)
        if converted is not _NO:
            if out is None:
                out = dict(value)
            out[key] = converted
    return value if out is None else out


def validate(schema: Mapping[str, Any], value: Any) -> str | None:
    """Why ``value`` does not match ``schema`` in Ajv's words (``/n: must be integer``, ``root: must
    have required property 'b'``), or ``None`` when it matches."""
    validator = _validator(schema)
    try:
        first = next(iter(validator.iter_errors(value)), None)
    except RecursionError:
        return "root: the value is nested too deeply to validate against the schema"
    if first is None:
        return None
    return _ajv_text(first, "")


# -- internals ---------------------------------------------------------------------------------

_NO: Final = object()
_VALIDATORS: dict[str, Any] = {}


def _validator(schema: Mapping[str, Any]) -> Any:
    cache_key = json.dumps(schema, sort_keys=True)
    v = _VALIDATORS.get(cache_key)
    if v is None:
        v = _nullable_validator()(schema)
        if len(_VALIDATORS) > 256:
            _VALIDATORS.clear()
        _VALIDATORS[cache_key] = v
    return v


_NULLABLE: list[Any] = []
_META: list[Any] = []


def _meta_validator() -> Any:
    """Draft-07's meta-schema as Ajv applies it (``regex`` formats checked; an ``enum`` needs at least
    one value: measured, ``data/properties/a/enum must NOT have fewer than 1 items``)."""
    if not _META:
        from jsonschema import Draft7Validator

        meta = json.loads(json.dumps(Draft7Validator.META_SCHEMA))
        meta["properties"]["enum"] = {"type": "array", "items": True, "minItems": 1}
        _META.append(Draft7Validator(meta, format_checker=Draft7Validator.FORMAT_CHECKER))
    return _META[0]


def _nullable_validator() -> Any:
    """Draft-07 with Ajv's ``nullable: true`` (``null`` passes the ``type`` check)."""
    if not _NULLABLE:
        from jsonschema import Draft7Validator, validators

        type_keyword = Draft7Validator.VALIDATORS["type"]

        def nullable_type(validator: Any, types: Any, instance: Any, schema: Any) -> Iterator[Any]:
            if instance is None and schema.get("nullable") is True:
                return
            yield from type_keyword(validator, types, instance, schema)

        _NULLABLE.append(validators.extend(Draft7Validator, {"type": nullable_type}))  # type: ignore[no-untyped-call]
    return _NULLABLE[0]


def _compile_problems(root: dict[str, Any], strict: bool) -> Iterator[str]:
    """What Ajv refuses while compiling ``root``: unknown keywords (``strict``) and ``$ref``s that
    resolve to nothing, in the order the schema is walked."""
    ids = {s["$id"] for s in _all_schemas(root) if isinstance(s.get("$id"), str)}
    seen: set[int] = set()

    def walk(node: Any) -> Iterator[str]:
        if not isinstance(node, dict) or id(node) in seen:
            return
        seen.add(id(node))
        if strict:
            for key in node:
                if key not in KNOWN_KEYWORDS:
                    yield f'strict mode: unknown keyword: "{key}"'
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = _pointer(root, ref) if ref.startswith("#") else (_NO if ref in ids else None)
            if target is None:
                yield f"can't resolve reference {ref} from id #"
            elif target is not _NO:
                yield from walk(target)
        for key in _ONE:
            yield from walk(node.get(key))
        for key in _LIST:
            items = node.get(key)
            for item in items if isinstance(items, list) else ():
                yield from walk(item)
        for key in _MAP:
            table = node.get(key)
            for item in table.values() if isinstance(table, dict) else ():
                yield from walk(item)
        items = node.get("items")
        for item in items if isinstance(items, list) else [items]:
            yield from walk(item)
        deps = node.get("dependencies")
        for item in deps.values() if isinstance(deps, dict) else ():
            yield from walk(item)

    yield from walk(root)


def _all_schemas(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _all_schemas(value)
    elif isinstance(node, list):
        for value in node:
            yield from _all_schemas(value)


def _pointer(root: Any, ref: str) -> Any:
    """The value ``ref`` (``#`` or ``#/a/b``, JSON Pointer with ``~0``/``~1`` and percent escapes)
    points at in ``root``, or ``None``."""
    fragment = unquote(ref[1:])
    if fragment == "":
        return root
    if not fragment.startswith("/"):
        return None  # a plain-name fragment ($id anchor): not resolved here
    node = root
    for raw in fragment[1:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _deref(node: Any, root: Mapping[str, Any], depth: int = 0) -> Any:
    while (
        isinstance(node, dict)
        and isinstance(node.get("$ref"), str)
        and node["$ref"].startswith("#")
        and depth < 32
    ):
        target = _pointer(root, node["$ref"])
        if target is None:
            return node
        node, depth = target, depth + 1
    return node


def _allows_string(node: Any, root: Mapping[str, Any], depth: int) -> bool:
    """Whether a property schema keeps a string as it is (measured, cases ``schema-top-level-coercion``,
    ``schema-coercion-enum-const``, ``schema-coercion-refs-and-allof``): it declares ``string`` among
    its types, or an ``anyOf``/``oneOf`` branch keeps it; a schema without types converts only when it
    holds nothing but annotations (``{}``, ``{description}``) — ``const``, ``enum``, ``allOf`` … keep
    the string. ``$ref``s are followed first."""
    node = _deref(node, root)
    if not isinstance(node, dict) or depth > 32:
        return node is not True
    declared = node.get("type")
    if declared is not None:
        return declared == "string" or (isinstance(declared, list) and "string" in declared)
    branches = [b for key in ("anyOf", "oneOf") if isinstance(node.get(key), list) for b in node[key]]
    if branches:
        return any(_allows_string(b, root, depth + 1) for b in branches)
    return not set(node) <= _ANNOTATIONS


_ANNOTATIONS: Final = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly"}
)


def _convert(text: str) -> Any:
    if text == "true":
        return True
    if text == "false":
        return False
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if math.isfinite(number) and js_number(number) == text:
        return int(number) if number.is_integer() and abs(number) < 2**53 else number
    if text[:1] in ("[", "{"):
        try:
            parsed = json.loads(text, parse_constant=_refuse_constant)
        except (ValueError, RecursionError):
            return _NO
        if isinstance(parsed, list | dict):
            return parsed
    return _NO


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _ajv_text(error: Any, prefix: str) -> str:
    """Ajv's ``errorsText`` for a ``jsonschema`` error: ``<path> <message>``, an ``anyOf``/``oneOf``
    error preceded by the errors of its branches. ``prefix`` ``data`` gives ``data/properties/a/type``
    (meta-schema errors); ``''`` gives ``/n`` or ``root`` (output errors)."""
    parts: list[str] = []
    if error.validator in ("anyOf", "oneOf") and error.context:
        parts.extend(_ajv_one(e, prefix) for e in error.context if len(e.relative_path) == 0)
    parts.append(_ajv_one(error, prefix))
    return ", ".join(parts)


def _ajv_one(error: Any, prefix: str) -> str:
    path = "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in error.absolute_path)
    where = f"{prefix}{path}" if prefix else (f"{path}: " if path else "root: ")
    sep = " " if prefix else ""
    return f"{where}{sep}{_ajv_message(error)}"


def _ajv_message(error: Any) -> str:
    kw, value, instance = error.validator, error.validator_value, error.instance
    if kw == "type":
        return "must be " + (",".join(value) if isinstance(value, list) else str(value))
    if kw == "enum":
        return "must be equal to one of the allowed values"
    if kw == "const":
        return "must be equal to constant"
    if kw == "required":
        missing = next((k for k in value if isinstance(instance, dict) and k not in instance), value[0])
        return f"must have required property '{missing}'"
    if kw in ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"):
        more = "more" if kw.startswith("max") else "fewer"
        unit = {"Items": "items", "Length": "characters", "Properties": "properties"}[kw[3:]]
        return f"must NOT have {more} than {value} {unit}"
    if kw in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        op = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}[kw]
        return f"must be {op} {js_number(value) if isinstance(value, int | float) else value}"
    if kw == "multipleOf":
        return f"must be multiple of {value}"
    if kw == "pattern":
        return f'must match pattern "{value}"'
    if kw == "format":
        return f'must match format "{value}"'
    if kw == "uniqueItems" and isinstance(instance, list):
        later, earlier = _duplicate(instance)
        return f"must NOT have duplicate items (items ## {later} and {earlier} are identical)"
    if kw == "additionalProperties":
        return "must NOT have additional properties"
    if kw == "additionalItems":
        return f"must NOT have more than {len(error.schema.get('items') or [])} items"
    if kw == "not":
        return "must NOT be valid"
    if kw == "anyOf":
        return "must match a schema in anyOf"
    if kw == "oneOf":
        return "must match exactly one schema in oneOf"
    if kw == "contains":
        return "must contain at least 1 valid item(s)"
    if kw == "propertyNames":
        return "property name must be valid"
    if kw == "dependencies":
        return "must have the properties its dependencies name"
    if kw == "if":
        return (
            'must match "then" schema' if error.schema.get("then") is not None else 'must match "else" schema'
        )
    if kw is False or error.message.endswith("False schema does not allow"):
        return "boolean schema is false"
    return str(error.message)


def _duplicate(items: list[Any]) -> tuple[int, int]:
    """Ajv's pair for a duplicate: scanning from the end, the first item already seen later on."""
    seen: dict[str, int] = {}
    for i in range(len(items) - 1, -1, -1):
        key = json.dumps(items[i], sort_keys=True)
        if key in seen:
            return seen[key], i
        seen[key] = i
    return 0, 0


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__
