"""Deterministic minimal instances of a JSON Schema (draft 2020-12), for the fake provider.

``synthesize_instance(schema)`` returns the smallest plausible value the schema accepts: the first
``enum`` value, only the required properties, the minimum lengths and counts, numbers closest to 0.
It exists so that any real workflow can be dry-run against :class:`~workflow_mcp.providers.FakeProvider`
(conformance README, "The fake provider script": ``synthesize: true``).

How it works: a generator proposes candidate values for each (sub)schema in preference order, and
every candidate is checked with ``jsonschema``'s ``Draft202012Validator`` (resolving ``$ref`` against
the root schema); the first one that validates wins. Generation is best effort for the hard
keywords (``pattern``, ``not``, ``if``/``then``/``else``, ``oneOf`` overlaps, ``dependentSchemas``,
``unevaluated*``); verification is not: a value is returned only if it validates, otherwise
:class:`~workflow_mcp.errors.InvalidInputError` is raised.

Decisions:
- ``format`` is not asserted by the verifying validator (jsonschema's default, and what the engine
  does), but ``date``, ``date-time``, ``time``, ``email``, ``uri``, ``uuid``, ``hostname``, ``ipv4``,
  ``ipv6`` and ``duration`` still get valid-looking strings.
- Among a list of types the first non-null type is preferred; ``null`` is the last resort. OpenAPI's
  ``nullable: true`` (not a 2020-12 keyword) only adds ``null`` as a last resort.
- A schema with no ``type`` gets the type its keywords imply (``properties`` → object, ``items`` →
  array, ``minLength`` → string, ``minimum`` → number), else ``null``; ``true`` and ``{}`` give ``null``.
- Only local references (``#``, ``#/json/pointer``, ``#anchor``, ``$defs`` or ``definitions``) are
  followed; a chain that would enter the same ``$ref`` a third time is cut (cycle safety), so a
  recursive schema gets its non-recursive minimum (``{"children": []}``) or an error.
- ``pattern`` is read with the stdlib regex parser (jsonschema checks patterns with Python ``re``
  too); a match is proposed, then padded with ``x`` to ``minLength``.
- The search is bounded: 64 candidates per subschema and 20,000 validations per call; beyond that
  the schema is reported as too complex rather than searched for ever.
"""

from __future__ import annotations

import copy
import importlib
import json
import math
import re
from collections.abc import Iterator, Mapping
from fractions import Fraction
from itertools import islice
from typing import Any, Final
from urllib.parse import unquote

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from ..errors import InvalidInputError

__all__ = ["synthesize_instance"]

# The stdlib regex parser has no public API; it is used only to propose example strings, and every
# proposal is verified with ``re.search`` through jsonschema, so a change there degrades gracefully.
_sre_parser: Any = importlib.import_module("re._parser")
_sre_constants: Any = importlib.import_module("re._constants")

_NOTHING: Final = object()
_CANDIDATES_PER_SCHEMA: Final = 64  # candidates tried per (sub)schema before giving up
_BRANCH_CANDIDATES: Final = 16  # candidates taken from each anyOf/oneOf/if branch
_REF_REENTRIES: Final = 2  # how often one $ref may appear in the current chain
_MAX_REF_DEPTH: Final = 64
_MAX_MERGED_BRANCHES: Final = 64
_CHECK_BUDGET: Final = 20_000  # validations per synthesize_instance() call, so pathological schemas end

_ALL_TYPES: Final = ("null", "boolean", "integer", "number", "string", "array", "object")
_ANY_VALUES: Final[tuple[Any, ...]] = (None, False, True, 0, 1, "", "x", [], {})

_OBJECT_KEYWORDS: Final = frozenset(
    {
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "minProperties",
        "maxProperties",
        "propertyNames",
        "dependentRequired",
        "dependentSchemas",
        "unevaluatedProperties",
    }
)
_ARRAY_KEYWORDS: Final = frozenset(
    {"items", "prefixItems", "minItems", "maxItems", "contains", "uniqueItems", "unevaluatedItems"}
)
_STRING_KEYWORDS: Final = frozenset({"minLength", "maxLength", "pattern", "format"})
_NUMBER_KEYWORDS: Final = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)

_LOWER_BOUNDS: Final = frozenset(
    {"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains"}
)
_UPPER_BOUNDS: Final = frozenset(
    {"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains"}
)


def synthesize_instance(schema: Any) -> Any:
    """Return a deterministic minimal JSON value that validates against ``schema``.

    ``schema`` is a JSON Schema (draft 2020-12): a mapping or a boolean. The result is plain JSON
    data (``dict``, ``list``, ``str``, ``int``, ``float``, ``bool``, ``None``) and always passes
    ``Draft202012Validator(schema)``; the same schema always gives the same value.

    Raises :class:`~workflow_mcp.errors.InvalidInputError` when ``schema`` is not a valid JSON
    Schema, or when no candidate value could be found that validates (unsatisfiable schemas, or
    constraints beyond this best-effort generator, such as an exotic ``pattern``).
    """
    plain = _plain(schema)
    if not isinstance(plain, dict | bool):
        raise InvalidInputError(
            f"cannot synthesize a value: a JSON Schema must be an object or a boolean, "
            f"got {type(schema).__name__}"
        )
    try:
        Draft202012Validator.check_schema(plain)
    except SchemaError as exc:
        raise InvalidInputError(
            f"cannot synthesize a value: the schema is not a valid JSON Schema (draft 2020-12): {exc.message}"
        ) from exc
    try:
        value = _Synthesizer(plain).first(plain, ())
    except _BudgetExhaustedError as exc:
        raise InvalidInputError(
            f"cannot synthesize a value for the schema {_preview(plain)}: gave up after "
            f"{_CHECK_BUDGET} candidate checks; give the fake script an explicit `result` for this call"
        ) from exc
    if value is _NOTHING:
        raise InvalidInputError(
            "cannot synthesize a value that validates against the schema "
            f"{_preview(plain)}: it is unsatisfiable or beyond the fake provider's generator; "
            "give the fake script an explicit `result` for this call"
        )
    return value


class _BudgetExhaustedError(Exception):
    """Raised inside the synthesizer when it has spent its validation budget."""


class _Synthesizer:
    """Candidate generation plus verification against one root schema."""

    def __init__(self, root: dict[str, Any] | bool) -> None:
        self._root = root
        self._validator = Draft202012Validator(root)
        self._checks_left = _CHECK_BUDGET
        # first() per (schema, ref chain): nested combinators ask for the same subschema repeatedly
        self._first_cache: dict[str, Any] = {}

    # -- verification --------------------------------------------------------------------------

    def valid(self, schema: Any, instance: Any) -> bool:
        self._checks_left -= 1
        if self._checks_left < 0:
            raise _BudgetExhaustedError
        # evolve() keeps the root's reference resolver, so "#/$defs/..." resolves against the root.
        return bool(self._validator.evolve(schema=schema).is_valid(instance))

    def first(self, schema: Any, refs: tuple[str, ...]) -> Any:
        """The first candidate that validates against ``schema``, or ``_NOTHING``."""
        key = _canonical([schema, refs])
        if key in self._first_cache:
            found = self._first_cache[key]
            return found if found is _NOTHING else copy.deepcopy(found)
        found = _NOTHING
        for candidate in islice(self.candidates(schema, refs), _CANDIDATES_PER_SCHEMA):
            if self.valid(schema, candidate):
                found = candidate
                break
        self._first_cache[key] = found
        return found if found is _NOTHING else copy.deepcopy(found)

    def pick(self, schema: Any, refs: tuple[str, ...], avoid: list[Any]) -> Any:
        """The first valid candidate that is not JSON-equal to any value in ``avoid``."""
        if not avoid:
            return self.first(schema, refs)
        seen = [_canonical(value) for value in avoid]
        for candidate in islice(self.candidates(schema, refs), _CANDIDATES_PER_SCHEMA):
            if _canonical(candidate) not in seen and self.valid(schema, candidate):
                return candidate
        return _NOTHING

    # -- generation ----------------------------------------------------------------------------

    def candidates(self, schema: Any, refs: tuple[str, ...]) -> Iterator[Any]:
        """Candidate values for ``schema`` in preference order; not necessarily valid."""
        if schema is True:
            yield from _ANY_VALUES
            return
        if not isinstance(schema, dict):
            return  # False, or something check_schema would have refused
        inlined = self._inline(schema, refs)
        if inlined is None:
            return
        schema, refs = inlined

        if "allOf" in schema:
            merged: dict[str, Any] | None = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                if part is True:
                    continue
                if part is False or not isinstance(part, dict) or merged is None:
                    return
                resolved = self._inline(part, refs)
                if resolved is None:
                    return
                part, refs = resolved
                merged = _merge(merged, part)
            yield from self.candidates(merged, refs)
            return

        for key in ("anyOf", "oneOf"):
            if key in schema:
                base = {k: v for k, v in schema.items() if k != key}
                options = [base if b is True else _merge(base, b) for b in schema[key] if b is not False]
                yield from self._branches(options, refs)
                return

        if "if" in schema:
            base = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
            options = [base]
            for key in ("then", "else"):
                branch = schema.get(key, True)
                if isinstance(branch, dict):
                    options.append(_merge(base, branch))
            yield from self._branches(options, refs)
            return

        if "const" in schema:
            yield schema["const"]
            return
        if "enum" in schema:
            yield from schema["enum"]
            return

        explicit = schema.get("type")
        types: list[str]
        if isinstance(explicit, str):
            types = [explicit]
        elif isinstance(explicit, list):
            types = [t for t in explicit if t != "null"] + (["null"] if "null" in explicit else [])
        else:
            # keywords imply the intended type, although they also accept every other type
            implied = _implied_types(schema)
            types = [*implied, "null", *(t for t in _ALL_TYPES if t not in implied and t != "null")]
        if schema.get("nullable") is True and "null" not in types:
            types.append("null")
        for name in types:
            yield from self._typed(name, schema, refs)

    def _branches(self, options: list[dict[str, Any]], refs: tuple[str, ...]) -> Iterator[Any]:
        """Candidates for alternatives: first each option's own first valid value (cheap, cached),
        then a few more raw candidates of each for constraints the options do not see."""
        for option in options:
            value = self.first(option, refs)
            if value is not _NOTHING:
                yield value
        for option in options:
            yield from islice(self.candidates(option, refs), _BRANCH_CANDIDATES)

    def _inline(
        self, schema: dict[str, Any], refs: tuple[str, ...]
    ) -> tuple[dict[str, Any], tuple[str, ...]] | None:
        """Replace a top-level ``$ref``/``$dynamicRef`` by its target merged with the siblings.

        Returns ``None`` when the schema reduces to ``false`` or the reference chain is cyclic.
        """
        while True:
            key = "$ref" if "$ref" in schema else "$dynamicRef" if "$dynamicRef" in schema else None
            if key is None:
                return schema, refs
            ref = schema[key]
            rest = {k: v for k, v in schema.items() if k != key}
            if refs.count(ref) >= _REF_REENTRIES or len(refs) >= _MAX_REF_DEPTH:
                return None
            target = self._resolve(ref)
            if target is False:
                return None
            refs = (*refs, ref)
            # true, or a reference we cannot follow: generate from the siblings alone; the verifier
            # (which can follow it) decides.
            schema = _merge(rest, target) if isinstance(target, dict) else rest

    def _resolve(self, ref: Any) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#"):
            return None
        fragment = unquote(ref[1:])
        if fragment == "":
            return self._root
        if not fragment.startswith("/"):
            return _find_anchor(self._root, fragment)
        node: Any = self._root
        for token in fragment[1:].split("/"):
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                return None
        return node

    def _typed(self, name: str, schema: dict[str, Any], refs: tuple[str, ...]) -> Iterator[Any]:
        if name == "null":
            yield None
        elif name == "boolean":
            yield False
            yield True
        elif name == "integer":
            yield from _numbers(schema, integer=True)
        elif name == "number":
            yield from _numbers(schema, integer=False)
        elif name == "string":
            yield from _strings(schema)
        elif name == "array":
            yield from self._arrays(schema, refs)
        elif name == "object":
            yield from self._objects(schema, refs)

    def _arrays(self, schema: dict[str, Any], refs: tuple[str, ...]) -> Iterator[Any]:
        prefix: list[Any] = list(schema.get("prefixItems", []))
        items: Any = schema.get("items", True)
        contains: Any = schema.get("contains")
        min_contains = int(schema.get("minContains", 1)) if contains is not None else 0
        max_items = schema.get("maxItems")
        unique = schema.get("uniqueItems") is True
        size = int(schema.get("minItems", 0))

        result: list[Any] = []
        satisfied = 0
        index = 0
        while index < size or satisfied < min_contains:
            if max_items is not None and index >= max_items:
                return
            slot = prefix[index] if index < len(prefix) else items
            wanted = slot
            if satisfied < min_contains:
                wanted = {"allOf": [slot, contains]}
            value = self.pick(wanted, refs, result if unique else [])
            if value is _NOTHING and wanted is not slot and index < size:
                value = self.pick(slot, refs, result if unique else [])
            if value is _NOTHING:
                return
            if contains is not None and self.valid(contains, value):
                satisfied += 1
            result.append(value)
            index += 1
        yield result

    def _objects(self, schema: dict[str, Any], refs: tuple[str, ...]) -> Iterator[Any]:
        properties: dict[str, Any] = schema.get("properties", {})
        dependent: dict[str, list[str]] = schema.get("dependentRequired", {})
        min_properties = int(schema.get("minProperties", 0))

        names: list[str] = []

        def add(name: str) -> None:
            # dependentRequired pulls in more names; the closure is finite (names are strings).
            pending = [name]
            while pending:
                current = pending.pop(0)
                if current not in names:
                    names.append(current)
                    pending.extend(dependent.get(current, []))

        for name in schema.get("required", []):
            add(name)
        for name in properties:
            if len(names) >= min_properties:
                break
            add(name)
        if len(names) < min_properties:
            extra_names = self._extra_names(schema)
            while len(names) < min_properties:
                name = next((n for n in extra_names if n not in names), None)
                if name is None:
                    return
                add(name)

        minimal = self._fill(schema, names, refs)
        if minimal is not None:
            yield minimal
        # A fuller alternative, for schemas whose not/if/dependentSchemas want more than the minimum.
        fuller = list(names) + [n for n in properties if n not in names]
        if len(fuller) > len(names):
            complete = self._fill(schema, fuller, refs)
            if complete is not None:
                yield complete

    def _fill(self, schema: dict[str, Any], names: list[str], refs: tuple[str, ...]) -> dict[str, Any] | None:
        result: dict[str, Any] = {}
        for name in names:
            value = self.first(_property_schema(schema, name), refs)
            if value is _NOTHING:
                return None
            result[name] = value
        return result

    def _extra_names(self, schema: dict[str, Any]) -> list[str]:
        """Names for properties beyond the declared ones, in preference order (for minProperties)."""
        names: list[str] = []
        property_names = schema.get("propertyNames")
        if isinstance(property_names, dict):
            names.extend(
                v
                for v in islice(self.candidates(property_names, ()), _CANDIDATES_PER_SCHEMA)
                if isinstance(v, str)
            )
        for pattern in schema.get("patternProperties", {}):
            names.extend(_regex_examples(pattern))
        names.extend(f"property{i}" for i in range(1, 65))
        return [n for n in dict.fromkeys(names) if property_names is None or self.valid(property_names, n)]


def _property_schema(schema: dict[str, Any], name: str) -> Any:
    """The schema a property value must satisfy: ``properties``, matching ``patternProperties``,
    else ``additionalProperties`` (JSON Schema 2020-12 §10.3.2)."""
    parts: list[Any] = []
    properties: dict[str, Any] = schema.get("properties", {})
    if name in properties:
        parts.append(properties[name])
    for pattern, sub in schema.get("patternProperties", {}).items():
        if re.search(pattern, name):
            parts.append(sub)
    if not parts:
        parts.append(schema.get("additionalProperties", True))
    return parts[0] if len(parts) == 1 else {"allOf": parts}


# -- numbers -----------------------------------------------------------------------------------


def _numbers(schema: dict[str, Any], *, integer: bool) -> Iterator[Any]:
    low, low_exclusive = _bound(schema, "minimum", "exclusiveMinimum", lower=True)
    high, high_exclusive = _bound(schema, "maximum", "exclusiveMaximum", lower=False)
    multiple = schema.get("multipleOf")
    step: Fraction | None = None
    if isinstance(multiple, int | float) and not isinstance(multiple, bool) and multiple > 0:
        step = _fraction(multiple)
        if integer:
            # integer multiples of p/q (lowest terms) are exactly the multiples of p
            step = Fraction(step.numerator)
    elif integer:
        step = Fraction(1)

    if step is not None:
        yield from _multiples(step, low, low_exclusive, high, high_exclusive, 16)
    if integer:
        return
    if step is None:
        yield from _multiples(Fraction(1), low, low_exclusive, high, high_exclusive, 8)
        # non-integers, for oneOf [number, integer] and tight exclusive bounds
        if low is not None and high is not None:
            yield _number((low + high) / 2)
        if low is not None:
            yield _number(low + Fraction(1, 2))
        if high is not None:
            yield _number(high - Fraction(1, 2))
        yield 0.5
        yield -0.5


def _bound(
    schema: dict[str, Any], inclusive_key: str, exclusive_key: str, *, lower: bool
) -> tuple[Fraction | None, bool]:
    """The tighter of an inclusive and an exclusive bound, as (value, exclusive)."""
    best: tuple[Fraction | None, bool] = (None, False)
    for key, exclusive in ((inclusive_key, False), (exclusive_key, True)):
        raw = schema.get(key)
        if not isinstance(raw, int | float) or isinstance(raw, bool) or not math.isfinite(raw):
            continue
        value = Fraction(raw)
        current, current_exclusive = best
        if (
            current is None
            or (lower and (value > current or (value == current and exclusive)))
            or (not lower and (value < current or (value == current and exclusive)))
        ):
            best = (value, exclusive or (value == current and current_exclusive))
    return best


def _multiples(
    step: Fraction,
    low: Fraction | None,
    low_exclusive: bool,
    high: Fraction | None,
    high_exclusive: bool,
    limit: int,
) -> list[int | float]:
    """Up to ``limit`` multiples of ``step`` inside the bounds, closest to 0 first."""
    k_min = None if low is None else math.floor(low / step) + 1 if low_exclusive else math.ceil(low / step)
    k_max = (
        None if high is None else math.ceil(high / step) - 1 if high_exclusive else math.floor(high / step)
    )
    if k_min is not None and k_max is not None and k_min > k_max:
        return []
    ks: list[int] = []
    if k_min is not None and k_min > 0:
        stop = k_min + limit if k_max is None else min(k_max + 1, k_min + limit)
        ks = list(range(k_min, stop))
    elif k_max is not None and k_max < 0:
        stop = k_max - limit if k_min is None else max(k_min - 1, k_max - limit)
        ks = list(range(k_max, stop, -1))
    else:
        ks = [0]
        distance = 1
        while len(ks) < limit:
            up_ok = k_max is None or distance <= k_max
            down_ok = k_min is None or -distance >= k_min
            if not (up_ok or down_ok):
                break
            ks.extend(k for k, ok in ((distance, up_ok), (-distance, down_ok)) if ok)
            distance += 1
    return [_number(step * k) for k in ks[:limit]]


def _fraction(value: int | float) -> Fraction:
    # repr() gives the shortest decimal that round-trips, so 0.1 becomes 1/10, not its binary value.
    return Fraction(value) if isinstance(value, int) else Fraction(repr(value))


def _number(value: Fraction) -> int | float:
    return int(value) if value.denominator == 1 else float(value)


# -- strings -----------------------------------------------------------------------------------

_FORMATS: Final[dict[str, str]] = {
    "date": "2000-01-{day:02d}",
    "date-time": "2000-01-01T00:00:{second:02d}Z",
    "time": "00:00:{second:02d}Z",
    "duration": "P{day}D",
    "email": "user{suffix}@example.com",
    "idn-email": "user{suffix}@example.com",
    "hostname": "host{suffix}.example.com",
    "idn-hostname": "host{suffix}.example.com",
    "ipv4": "192.0.2.{day}",
    "ipv6": "2001:db8::{day:x}",
    "uri": "https://example.com/{suffix}",
    "uri-reference": "https://example.com/{suffix}",
    "iri": "https://example.com/{suffix}",
    "iri-reference": "https://example.com/{suffix}",
    "uri-template": "https://example.com/{suffix}",
    "uuid": "00000000-0000-4000-8000-{index:012d}",
    "json-pointer": "/{suffix}",
    "relative-json-pointer": "{index}",
    "regex": "x{suffix}",
}


def _strings(schema: dict[str, Any]) -> Iterator[str]:
    min_length = int(schema.get("minLength", 0))
    seeds: list[str] = []
    template = _FORMATS.get(str(schema.get("format")))
    if template is not None:
        seeds.extend(
            template.format(index=i, day=i + 1, second=i, suffix=str(i) if i else "") for i in range(8)
        )
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        examples = _regex_examples(pattern, min_length)
        seeds.extend(examples)
        # distinct variants for uniqueItems and propertyNames, valid when the pattern is not end-anchored
        if examples:
            seeds.extend(examples[0] + suffix for suffix in "123456789")
    width = max(min_length, 1)
    seeds.append("x" * min_length)
    seeds.extend(letter * width for letter in "xyzabcdefghijklmnopqrstuvw")
    seeds.extend("x" * (width - 1) + str(i) for i in range(10))
    # Padding goes where the format tolerates it: before "user@…" and "host.…", after a URI path.
    pad_first = schema.get("format") in ("email", "idn-email", "hostname", "idn-hostname")
    for seed in dict.fromkeys(seeds):
        if len(seed) >= min_length:
            yield seed
            continue
        pad = "x" * (min_length - len(seed))
        yield from (pad + seed, seed + pad) if pad_first else (seed + pad, pad + seed)


def _regex_examples(pattern: str, min_length: int = 0) -> list[str]:
    """Strings that probably contain a match of ``pattern``, shortest first (best effort)."""
    try:
        parsed = _sre_parser.parse(pattern)
    except (re.error, RecursionError, ValueError):
        return []
    examples: list[str] = []
    for extra in (0, 1, 2, max(min_length, 3), 8):
        for branch in (0, 1, 2):
            writer = _RegexWriter(extra, branch)
            try:
                examples.append(writer.write(parsed))
            except (ValueError, KeyError, IndexError, TypeError):
                continue
    return list(dict.fromkeys(examples))


_PREFERRED_CHARS: Final = "xyzabc0123456789XYZABC _-.:/@"


class _RegexWriter:
    """Writes one string matched by a parsed stdlib regex. ``extra`` extra repetitions per
    repeat (within its bounds); ``branch`` picks the alternative of every ``|`` (clamped)."""

    def __init__(self, extra: int, branch: int) -> None:
        self._extra = extra
        self._branch = branch
        self._groups: dict[int, str] = {}

    def write(self, items: Any) -> str:
        out: list[str] = []
        for op, arg in items:
            out.append(self._one(op.name, arg))
        return "".join(out)

    def _one(self, op: str, arg: Any) -> str:
        if op == "LITERAL":
            return chr(arg)
        if op == "NOT_LITERAL":
            return "x" if chr(arg) != "x" else "y"
        if op == "ANY":
            return "x"
        if op == "IN":
            return _class_char(arg)
        if op == "CATEGORY":
            return _class_char([(_sre_constants.CATEGORY, arg)])
        if op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, body = arg
            count = low + self._extra
            if high != _sre_constants.MAXREPEAT:
                count = min(count, high)
            return "".join(self.write(body) for _ in range(count))
        if op == "SUBPATTERN":
            group, _add_flags, _del_flags, body = arg
            text = self.write(body)
            if group is not None:
                self._groups[group] = text
            return text
        if op == "ATOMIC_GROUP":
            return self.write(arg)
        if op == "BRANCH":
            _, branches = arg
            return self.write(branches[min(self._branch, len(branches) - 1)])
        if op == "GROUPREF":
            return self._groups.get(arg, "")
        if op == "GROUPREF_EXISTS":
            group, yes, no = arg
            return self.write(yes if group in self._groups else (no or []))
        # AT (anchors, boundaries), ASSERT, ASSERT_NOT: zero-width, best effort
        return ""


def _class_char(items: Any) -> str:
    """A character matched by a character class (the ``IN`` node's items)."""
    negate = bool(items) and items[0][0].name == "NEGATE"
    body = items[1:] if negate else items

    def member(ch: str) -> bool:
        code = ord(ch)
        for op, arg in body:
            name = op.name
            if name == "LITERAL" and code == arg:
                return True
            if name == "RANGE" and arg[0] <= code <= arg[1]:
                return True
            if name == "CATEGORY" and _in_category(arg.name, ch):
                return True
        return False

    for ch in _PREFERRED_CHARS:
        if member(ch) != negate:
            return ch
    if not negate:
        for op, arg in body:
            if op.name == "LITERAL":
                return chr(arg)
            if op.name == "RANGE":
                return chr(arg[0])
    for code in range(33, 0x3000):
        if member(chr(code)) != negate:
            return chr(code)
    raise ValueError("empty character class")


def _in_category(name: str, ch: str) -> bool:
    base = name.removeprefix("CATEGORY_")
    positive = {
        "DIGIT": ch.isdigit(),
        "SPACE": ch.isspace(),
        "WORD": ch.isalnum() or ch == "_",
        "LINEBREAK": ch == "\n",
    }
    if base.startswith("NOT_"):
        return not positive.get(base.removeprefix("NOT_"), False)
    return positive.get(base, False)


# -- schema merging ----------------------------------------------------------------------------


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """A schema close to ``allOf: [a, b]`` that the generator can read in one pass.

    Exact for type, bounds, required, properties, enum and not; for other conflicts ``a`` wins and
    verification against the original schema decides.
    """
    merged = dict(a)
    for key, value in b.items():
        if key not in merged:
            merged[key] = value
            continue
        mine = merged[key]
        if key == "type":
            merged[key] = _merge_types(mine, value)
        elif key in _LOWER_BOUNDS and _is_number(mine) and _is_number(value):
            merged[key] = max(mine, value)
        elif key in _UPPER_BOUNDS and _is_number(mine) and _is_number(value):
            merged[key] = min(mine, value)
        elif key == "required" and isinstance(mine, list) and isinstance(value, list):
            merged[key] = list(dict.fromkeys([*mine, *value]))
        elif key in ("properties", "patternProperties", "dependentRequired", "$defs") and (
            isinstance(mine, dict) and isinstance(value, dict)
        ):
            combined = dict(mine)
            for name, sub in value.items():
                if name not in combined:
                    combined[name] = sub
                elif key == "dependentRequired":
                    combined[name] = list(dict.fromkeys([*combined[name], *sub]))
                elif key != "$defs":
                    combined[name] = {"allOf": [combined[name], sub]}
            merged[key] = combined
        elif key in ("items", "additionalProperties", "contains", "propertyNames"):
            merged[key] = {"allOf": [mine, value]}
        elif key == "enum" and isinstance(mine, list) and isinstance(value, list):
            keys = [_canonical(v) for v in value]
            merged[key] = [v for v in mine if _canonical(v) in keys] or mine
        elif key == "not":
            merged[key] = {"anyOf": [mine, value]}
        elif key in ("anyOf", "oneOf") and isinstance(mine, list) and isinstance(value, list):
            pairs = [{"allOf": [x, y]} for x in mine for y in value]
            merged[key] = pairs[:_MAX_MERGED_BRANCHES]
        elif key == "allOf" and isinstance(mine, list) and isinstance(value, list):
            merged[key] = [*mine, *value]
    return merged


def _merge_types(a: Any, b: Any) -> Any:
    left = [a] if isinstance(a, str) else list(a)
    right = [b] if isinstance(b, str) else list(b)
    common = [t for t in left if t in right]
    if "integer" in left and "number" in right and "integer" not in common:
        common.append("integer")
    if "number" in left and "integer" in right and "integer" not in common:
        common.append("integer")
    return common if common else left


def _implied_types(schema: dict[str, Any]) -> list[str]:
    keys = schema.keys()
    implied: list[str] = []
    if keys & _OBJECT_KEYWORDS:
        implied.append("object")
    if keys & _ARRAY_KEYWORDS:
        implied.append("array")
    if keys & _STRING_KEYWORDS:
        implied.append("string")
    if keys & _NUMBER_KEYWORDS:
        implied.append("number")
    return implied


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _find_anchor(node: Any, name: str) -> Any:
    if isinstance(node, dict):
        if node.get("$anchor") == name or node.get("$dynamicAnchor") == name:
            return node
        children: Any = node.values()
    elif isinstance(node, list):
        children = node
    else:
        return None
    for child in children:
        found = _find_anchor(child, name)
        if found is not None:
            return found
    return None


# -- JSON helpers ------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """Deep copy into plain dict/list so that Mapping/tuple inputs behave like parsed JSON."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _canonical(value: Any) -> str:
    """A key under which JSON-equal values coincide (1 == 1.0, but true != 1)."""

    def normal(v: Any) -> Any:
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, dict):
            return {k: normal(x) for k, x in v.items()}
        if isinstance(v, list):
            return [normal(x) for x in v]
        return v

    return json.dumps(normal(value), sort_keys=True, default=repr)


def _preview(schema: Any) -> str:
    text = json.dumps(schema, sort_keys=True, default=repr)
    return text if len(text) <= 200 else text[:197] + "..."
