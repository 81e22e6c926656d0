"""The portable → strict JSON Schema bridge for providers with strict structured outputs.

Workflow files give agent() any JSON Schema (draft 2020-12). Providers built on OpenAI's strict
structured outputs (Codex's ``output_schema``, the ``openai`` provider) accept only a subset
("Structured Outputs: supported schemas"): the root is an object; every object lists every
property in ``required`` and sets ``additionalProperties: false``; only some keywords are allowed.
:func:`to_strict` rewrites a portable schema into that subset and :meth:`StrictSchema.project`
maps the provider's answer back to what the portable schema describes:

- an optional property becomes required and nullable; a ``null`` the model put there only because
  the strict schema forced the key (the portable property does not accept ``null``) is dropped
  again, so the workflow sees the key omitted;
- a top-level schema that is not a plain object (an array, a string, an ``anyOf``, …) is wrapped as
  ``{"value": <schema>}`` and unwrapped;
- a sub-schema strict mode cannot express (``{}``/``true``, a free-form or map object,
  ``patternProperties``, ``allOf``, ``not``, ``if``, tuple ``prefixItems``, ``false``) becomes a
  string holding JSON (the portable schema in its description) and is parsed back;
- ``oneOf`` becomes ``anyOf``; keywords strict mode rejects (``minLength``, ``uniqueItems``,
  ``default``, ``examples``, …) are dropped and restated in the description.

The bridge only shapes what the model is asked for. The engine still validates the projected value
against the *portable* schema and re-asks on mismatch (profile claude-code/2.1.332: up to 5 times),
so a dropped constraint is still enforced. Projection never raises: a value that does not fit is
returned as far as it fits, for that validation to report.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .._nesting import loads

__all__ = ["WRAP_KEY", "StrictSchema", "parse_answer", "to_strict"]

WRAP_KEY: Final = "value"
"""The property that carries a wrapped top-level value."""

# Keywords OpenAI strict mode accepts, by where they may appear (anything else is restated in
# the description and dropped; the engine's own validation still enforces it).
_COMMON: Final = frozenset({"type", "description", "title", "enum", "const", "$ref", "anyOf"})
_BY_TYPE: Final[Mapping[str, frozenset[str]]] = {
    "string": frozenset({"pattern", "format"}),
    "number": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}),
    "integer": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}),
    "array": frozenset({"items", "minItems", "maxItems"}),
    "object": frozenset({"properties", "required", "additionalProperties"}),
}
_FORMATS: Final = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
# Keywords that make a schema inexpressible in strict mode: the sub-schema travels as JSON text.
_OPAQUE: Final = frozenset(
    {
        "allOf",
        "not",
        "if",
        "then",
        "else",
        "patternProperties",
        "prefixItems",
        "dependentSchemas",
        "dependentRequired",
        "unevaluatedProperties",
        "unevaluatedItems",
        "propertyNames",
        "contains",
        "$dynamicRef",
    }
)
_SILENT: Final = frozenset({"$schema", "$id", "$comment", "$anchor", "$defs", "definitions"})
_HINT_LIMIT: Final = 2000


@dataclass(frozen=True)
class _Node:
    """How one strict sub-schema maps back: ``kind`` is ``plain`` (nothing to undo), ``object``
    (``props`` and the ``optional`` keys whose forced ``null`` is dropped), ``array`` (``items``),
    ``json`` (a JSON string to parse), ``any_of`` (``branches``) or ``ref`` (``ref`` names a
    ``$defs`` entry)."""

    kind: str
    props: Mapping[str, _Node] = field(default_factory=dict)
    optional: frozenset[str] = frozenset()
    items: _Node | None = None
    branches: tuple[_Node, ...] = ()
    ref: str | None = None
    json_type: frozenset[str] = frozenset()


_PLAIN: Final = _Node("plain")


@dataclass(frozen=True)
class StrictSchema:
    """A strict rewrite of a portable schema.

    ``schema`` is what to send (a fresh dict, root always an object); ``wrapped`` is true when the
    portable root was not a plain object and the answer sits under :data:`WRAP_KEY`.
    """

    schema: dict[str, Any]
    wrapped: bool
    _root: _Node
    _defs: Mapping[str, _Node]

    def project(self, value: Any) -> Any:
        """Map a value produced under :attr:`schema` back to the portable shape: unwrap, drop
        synthetic ``null`` of optional properties, parse JSON-string stand-ins. Never raises."""
        out = self._project(self._root, value, 0)
        if self.wrapped and isinstance(out, dict):
            return out.get(WRAP_KEY)
        return out

    def _project(self, node: _Node, value: Any, depth: int) -> Any:
        if depth > 200:
            return value
        if node.kind == "ref":
            target = self._defs.get(node.ref or "")
            return value if target is None else self._project(target, value, depth + 1)
        if node.kind == "json":
            if isinstance(value, str):
                try:
                    return loads(value, what="a JSON-string stand-in")
                except ValueError:
                    return value
            return value
        if node.kind == "object" and isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if item is None and key in node.optional:
                    continue
                child = node.props.get(key)
                out[key] = item if child is None else self._project(child, item, depth + 1)
            return out
        if node.kind == "array" and isinstance(value, list) and node.items is not None:
            return [self._project(node.items, item, depth + 1) for item in value]
        if node.kind == "any_of":
            for branch in node.branches:
                if self._fits(branch, value, depth):
                    return self._project(branch, value, depth + 1)
        return value

    def _fits(self, node: _Node, value: Any, depth: int) -> bool:
        """A structural guess at which ``anyOf`` branch produced ``value``."""
        if node.kind == "ref":
            target = self._defs.get(node.ref or "")
            return target is not None and depth < 200 and self._fits(target, value, depth + 1)
        if node.kind == "object":
            return isinstance(value, dict) and set(value) <= set(node.props)
        if node.kind == "array":
            return isinstance(value, list)
        if node.kind == "json":
            return isinstance(value, str)
        if node.kind == "any_of":
            return any(self._fits(b, value, depth + 1) for b in node.branches)
        kind = _json_type(value)
        return (
            not node.json_type or kind in node.json_type or (kind == "integer" and "number" in node.json_type)
        )


def to_strict(schema: Mapping[str, Any] | bool) -> StrictSchema:
    """Rewrite ``schema`` (a portable JSON Schema, already checked by the engine) for strict mode.

    Returns a :class:`StrictSchema` whose ``schema`` is a new dict; ``schema`` itself is not
    modified. ``$defs`` (and legacy ``definitions``) entries referenced as ``#/$defs/<name>`` are
    rewritten too and kept at the root. Never raises for a valid JSON Schema.
    """
    builder = _Builder(schema if isinstance(schema, Mapping) else {})
    root_defs = {}
    if isinstance(schema, Mapping):
        for key in ("$defs", "definitions"):
            defs = schema.get(key)
            if isinstance(defs, Mapping):
                for name, sub in defs.items():
                    root_defs[str(name)] = sub
    defs_out: dict[str, Any] = {}
    defs_nodes: dict[str, _Node] = {}
    for name, sub in root_defs.items():
        strict_sub, node = builder.convert(sub, path=f"$defs/{name}")
        defs_out[name] = strict_sub
        defs_nodes[name] = node

    wrapped = not _is_plain_object(schema)
    if wrapped:
        inner, node = builder.convert(schema, path="")
        strict: dict[str, Any] = {
            "type": "object",
            "properties": {WRAP_KEY: inner},
            "required": [WRAP_KEY],
            "additionalProperties": False,
        }
        root = _Node("object", props={WRAP_KEY: node})
    else:
        strict, root = builder.convert(schema, path="")
    if defs_out:
        strict["$defs"] = defs_out
    return StrictSchema(schema=strict, wrapped=wrapped, _root=root, _defs=defs_nodes)


def _is_plain_object(schema: Mapping[str, Any] | bool) -> bool:
    """A root strict mode accepts as is: ``type: object`` with properties, and nothing opaque."""
    if not isinstance(schema, Mapping):
        return False
    if schema.get("type") != "object" or "$ref" in schema or "anyOf" in schema or "oneOf" in schema:
        return False
    return _object_is_strictable(schema)


def _object_is_strictable(schema: Mapping[str, Any]) -> bool:
    if any(k in schema for k in _OPAQUE):
        return False
    props = schema.get("properties")
    if not isinstance(props, Mapping) or not props:
        return False  # a free-form object: strict mode cannot leave keys open
    extra = schema.get("additionalProperties", True)
    # An explicit schema for extra keys (a map) cannot be kept; ``true``/absent only widens what
    # the portable schema accepts, so closing the object is still a valid answer.
    return extra is True or extra is False


class _Builder:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root

    def convert(self, schema: Any, path: str) -> tuple[dict[str, Any], _Node]:
        if schema is True or schema is False or not isinstance(schema, Mapping):
            return self._opaque(schema, "any JSON value" if schema is not False else "no value")
        if not schema or any(k in schema for k in _OPAQUE):
            return self._opaque(schema)
        if "$ref" in schema:
            return self._ref(schema)
        branches = schema.get("anyOf", schema.get("oneOf"))
        if branches is not None:
            return self._any_of(schema, branches, path)
        kind = schema.get("type")
        if kind is None and ("enum" in schema or "const" in schema):
            return self._keep(schema, None), _Node("plain", json_type=_enum_types(schema))
        if kind is None:
            kind = _infer_type(schema)
            if kind is None:
                return self._opaque(schema)
        kinds = [kind] if isinstance(kind, str) else list(kind)
        if "object" in kinds:
            if len(kinds) > 1 or not _object_is_strictable(schema):
                return self._opaque(schema)
            return self._object(schema, path)
        if "array" in kinds:
            if len(kinds) > 2 or (len(kinds) == 2 and "null" not in kinds):
                return self._opaque(schema)
            return self._array(schema, kinds, path)
        return self._keep(schema, kinds), _Node("plain", json_type=frozenset(kinds))

    # -- shapes ------------------------------------------------------------------------------
    def _object(self, schema: Mapping[str, Any], path: str) -> tuple[dict[str, Any], _Node]:
        props: Mapping[str, Any] = schema["properties"]
        required = {r for r in schema.get("required", ()) if isinstance(r, str)}
        out_props: dict[str, Any] = {}
        nodes: dict[str, _Node] = {}
        optional: set[str] = set()
        for name, sub in props.items():
            strict_sub, node = self.convert(sub, f"{path}/{name}")
            if name not in required:
                strict_sub = _nullable(strict_sub)
                if not _accepts_null(sub, self.root):
                    optional.add(name)
            out_props[name] = strict_sub
            nodes[name] = node
        out = self._keep(schema, ["object"])
        out["properties"] = out_props
        out["required"] = list(props)
        out["additionalProperties"] = False
        return out, _Node("object", props=nodes, optional=frozenset(optional))

    def _array(self, schema: Mapping[str, Any], kinds: list[str], path: str) -> tuple[dict[str, Any], _Node]:
        items = schema.get("items", True)
        strict_items, node = self.convert(items, f"{path}/items")
        out = self._keep(schema, kinds)
        out["items"] = strict_items
        return out, _Node("array", items=node)

    def _any_of(self, schema: Mapping[str, Any], branches: Any, path: str) -> tuple[dict[str, Any], _Node]:
        if not isinstance(branches, list) or not branches or "type" in schema:
            return self._opaque(schema)
        outs: list[dict[str, Any]] = []
        nodes: list[_Node] = []
        for i, branch in enumerate(branches):
            strict_branch, node = self.convert(branch, f"{path}/anyOf/{i}")
            outs.append(strict_branch)
            nodes.append(node)
        out: dict[str, Any] = {"anyOf": outs}
        hint = self._hint(schema, allowed=frozenset({"description", "title", "anyOf", "oneOf"}))
        if hint:
            out["description"] = hint
        return out, _Node("any_of", branches=tuple(nodes))

    def _ref(self, schema: Mapping[str, Any]) -> tuple[dict[str, Any], _Node]:
        ref = schema["$ref"]
        for prefix in ("#/$defs/", "#/definitions/"):
            if isinstance(ref, str) and ref.startswith(prefix) and "/" not in ref[len(prefix) :]:
                name = ref[len(prefix) :]
                out: dict[str, Any] = {"$ref": f"#/$defs/{name}"}
                if isinstance(schema.get("description"), str):
                    out["description"] = schema["description"]
                return out, _Node("ref", ref=name)
        return self._opaque(schema)

    def _opaque(self, schema: Any, what: str = "a JSON value") -> tuple[dict[str, Any], _Node]:
        try:
            text = json.dumps(schema, separators=(",", ":"), sort_keys=True, default=str)
        except (TypeError, ValueError):
            text = str(schema)
        if len(text) > _HINT_LIMIT:
            text = text[:_HINT_LIMIT] + "…"
        desc = f"{what} encoded as a JSON string, matching this JSON Schema: {text}"
        if isinstance(schema, Mapping) and isinstance(schema.get("description"), str):
            desc = f"{schema['description']} ({desc})"
        return {"type": "string", "description": desc}, _Node("json")

    # -- keywords ----------------------------------------------------------------------------
    def _keep(self, schema: Mapping[str, Any], kinds: list[str] | None) -> dict[str, Any]:
        allowed = set(_COMMON)
        for k in kinds or ():
            allowed |= _BY_TYPE.get(k, frozenset())
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key in allowed and key not in ("properties", "items", "anyOf", "$ref"):
                out[key] = copy.deepcopy(value)
        if "format" in out and out["format"] not in _FORMATS:
            del out["format"]
        if kinds is not None:
            out["type"] = kinds[0] if len(kinds) == 1 else kinds
        hint = self._hint(schema, frozenset(allowed))
        if hint:
            out["description"] = hint
        return out

    def _hint(self, schema: Mapping[str, Any], allowed: frozenset[str]) -> str | None:
        """The description, plus the constraints strict mode cannot carry (so the model still
        hears them; the engine enforces them)."""
        dropped = {
            k: v
            for k, v in schema.items()
            if k not in allowed and k not in _SILENT and k not in ("properties", "items", "oneOf")
        }
        if schema.get("format") is not None and schema.get("format") not in _FORMATS:
            dropped["format"] = schema["format"]
        base = schema.get("description") if isinstance(schema.get("description"), str) else None
        if not dropped:
            return base
        try:
            extra = json.dumps(dropped, separators=(",", ":"), sort_keys=True, default=str)
        except (TypeError, ValueError):
            extra = str(dropped)
        note = f"Constraints: {extra[:_HINT_LIMIT]}"
        return f"{base} ({note})" if base else note


def _nullable(strict: dict[str, Any]) -> dict[str, Any]:
    """``strict`` also accepting ``null`` (for an optional property made required)."""
    if "anyOf" in strict:
        if not any(b.get("type") == "null" for b in strict["anyOf"] if isinstance(b, Mapping)):
            strict = {**strict, "anyOf": [*strict["anyOf"], {"type": "null"}]}
        return strict
    if "$ref" in strict or "type" not in strict:
        return {"anyOf": [strict, {"type": "null"}]}
    kind = strict["type"]
    kinds = [kind] if isinstance(kind, str) else list(kind)
    out = dict(strict)
    if "null" not in kinds:
        out["type"] = [*kinds, "null"]
    if "enum" in out and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    if "const" in out:
        out = {"anyOf": [strict, {"type": "null"}]}
    return out


def _accepts_null(schema: Any, root: Mapping[str, Any], depth: int = 0) -> bool:
    """Whether the portable ``schema`` itself accepts ``null`` (then a ``null`` answer is kept)."""
    if schema is True or (isinstance(schema, Mapping) and not schema):
        return True
    if not isinstance(schema, Mapping) or depth > 50:
        return False
    ref = schema.get("$ref")
    if isinstance(ref, str):
        for prefix, key in (("#/$defs/", "$defs"), ("#/definitions/", "definitions")):
            if ref.startswith(prefix):
                target = (root.get(key) or {}).get(ref[len(prefix) :])
                return _accepts_null(target, root, depth + 1)
        return False
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and any(_accepts_null(b, root, depth + 1) for b in branches):
            return True
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if "enum" in schema and isinstance(schema["enum"], list) and None in schema["enum"]:
        return True
    return "const" in schema and schema["const"] is None


def _infer_type(schema: Mapping[str, Any]) -> str | None:
    if "properties" in schema or "additionalProperties" in schema or "required" in schema:
        return "object"
    if "items" in schema or "minItems" in schema or "maxItems" in schema:
        return "array"
    if "pattern" in schema or "format" in schema or "minLength" in schema or "maxLength" in schema:
        return "string"
    if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")):
        return "number"
    return None


def _enum_types(schema: Mapping[str, Any]) -> frozenset[str]:
    values = schema["enum"] if "enum" in schema else [schema.get("const")]
    return frozenset(_json_type(v) for v in values) if isinstance(values, list) else frozenset()


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


_FENCE: Final = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\r?\n(.*?)\r?\n?[ \t]*```", re.DOTALL)
_JSON_FENCES: Final = frozenset({"", "json", "jsonc"})


def parse_answer(text: str) -> tuple[bool, Any, str | None]:
    """``(ok, value, problem)``: a model's structured answer read from its reply text, the one rule
    every provider uses (those without a schema-enforcing API, and as the fallback of those with
    one, whose servers may ignore it).

    1. The whole reply (surrounding white space aside) as JSON: any JSON value, so a JSON string
       that merely *contains* a fence is never mistaken for one.
    2. Else the *last* fenced block labelled ``json``, ``jsonc`` (any case) or unlabelled: a model
       told to answer with only JSON still often wraps it in a fence, or explains first and ends
       with the fenced answer; when it shows several blocks, the last is its answer. A block in
       another language (```python) is never taken. CRLF line ends are accepted.

    ``problem`` says why there is no value: ``"the reply is empty"``, ``"not JSON: …"`` (no fenced
    block either) or ``"the fenced block is not JSON: …"``. Never raises.
    """
    stripped = text.strip()
    if not stripped:
        return False, None, "the reply is empty"
    try:
        return True, loads(stripped, what="the reply"), None
    except ValueError as exc:
        first = f"not JSON: {exc}"
    blocks = [body for lang, body in _FENCE.findall(stripped) if lang.lower() in _JSON_FENCES]
    if not blocks:
        return False, None, first
    try:
        return True, loads(blocks[-1].strip(), what="the fenced block"), None
    except ValueError as exc:
        return False, None, f"the fenced block is not JSON: {exc}"
