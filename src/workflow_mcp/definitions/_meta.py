"""The ``export const meta = { … }`` statement: its shape, its pure-literal value and its normalization.

Private; the public names are re-exported by :mod:`workflow_mcp.definitions.load`.

Rules (seed "Source and metadata grammar", profile claude-code/2.1.209, refined by PROFILE-FACTS for
claude-code/2.1.332):

* the first AST statement (comments and a BOM are not statements) is exactly one exported ``const``
  declarator named ``meta`` whose initializer is an object literal;
* values are pure literals: strings, numbers, BigInts, regular expressions, booleans, ``null``,
  templates without substitutions, a unary minus on a number, arrays without holes or spreads and
  objects with non-computed keys (identifier, string or number);
* everything else is refused: references (``undefined``, ``NaN`` and ``Infinity`` are identifiers),
  calls, other unary operators, spreads, holes, computed keys, shorthand properties, methods, getters,
  setters, and the keys ``__proto__``, ``constructor`` and ``prototype`` at any depth.

Parentheses are transparent, as in Acorn's default AST (``(5)`` is the literal ``5``). A unary minus on
a BigInt is refused (the profile only documents negative numbers). Duplicate keys follow JavaScript:
the last one wins; the loader reports them as warnings.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from workflow_mcp.definitions._js import (
    EscapeError,
    Source,
    decode_identifier,
    decode_string,
    is_bigint,
    is_legacy_octal,
    number_key,
)
from workflow_mcp.errors import WorkflowLoadError

if TYPE_CHECKING:
    from tree_sitter import Node

    from workflow_mcp.definitions.profile import Profile

__all__ = ["MetaStatement", "Phase", "WorkflowMeta", "read_meta_statement"]

FORBIDDEN_KEYS = frozenset({"__proto__", "constructor", "prototype"})

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

_SHAPE = "`export const meta = { name: '…', description: '…' }`"


@dataclass(frozen=True)
class Phase:
    """One entry of ``meta.phases``: a ``title`` and optional ``detail`` and ``model`` strings."""

    title: str
    detail: str | None = None
    model: str | None = None

    def to_json(self) -> dict[str, str]:
        """``{"title", "detail"?, "model"?}``; absent keys are omitted."""
        out = {"title": self.title}
        if self.detail is not None:
            out["detail"] = self.detail
        if self.model is not None:
            out["model"] = self.model
        return out


@dataclass(frozen=True)
class WorkflowMeta:
    """A workflow's normalized metadata, exactly the fields Claude Code keeps.

    ``name`` and ``description`` are non-empty strings, never trimmed. ``title`` and ``when_to_use``
    are kept when they are strings. ``phases`` is ``None`` when the source has no array ``phases``;
    otherwise it holds the entries that are objects with a string ``title`` (others are dropped).
    """

    name: str
    description: str
    title: str | None = None
    when_to_use: str | None = None
    phases: tuple[Phase, ...] | None = None

    def to_json(self) -> dict[str, object]:
        """``{"name", "description", "title"?, "whenToUse"?, "phases"?: [Phase.to_json()]}``; absent keys
        are omitted."""
        out: dict[str, object] = {"name": self.name, "description": self.description}
        if self.title is not None:
            out["title"] = self.title
        if self.when_to_use is not None:
            out["whenToUse"] = self.when_to_use
        if self.phases is not None:
            out["phases"] = [p.to_json() for p in self.phases]
        return out


class _Scalar:
    """A literal whose value the normalized metadata never needs (number, regex, boolean, …)."""

    __slots__ = ("kind",)

    def __init__(self, kind: str) -> None:
        self.kind = kind


_Value = Union[str, "_Object", list["_Value"], _Scalar]
_Frame = Generator["Node", _Value, _Value]
"""An array or object being read: yields each child node, is sent the child's value."""


class _Object:
    __slots__ = ("entries", "nodes")

    def __init__(self) -> None:
        self.entries: dict[str, _Value] = {}
        self.nodes: dict[str, Node] = {}


class MetaStatement:
    """What reading the meta statement produced: the normalized ``meta``, the byte span of the whole
    statement (blanked in the executable body: Claude Code 2.1.332 extracts it, so ``meta`` is not a
    binding the body can see) and the repeated keys (key, later key node)."""

    __slots__ = ("dropped", "duplicates", "export_start", "meta", "statement_end")

    def __init__(
        self,
        meta: WorkflowMeta,
        export_start: int,
        duplicates: tuple[tuple[str, Node], ...],
        statement_end: int = -1,
        dropped: tuple[tuple[str, Node], ...] = (),
    ) -> None:
        self.dropped = dropped
        self.meta = meta
        self.export_start = export_start
        self.duplicates = duplicates
        self.statement_end = statement_end


class _Reader:
    def __init__(self, src: Source, path: str | None, max_depth: int, profile: str) -> None:
        self.src = src
        self.path = path
        self.max_depth = max_depth
        self.profile = profile
        self.duplicates: list[tuple[str, Node]] = []
        self.dropped: list[tuple[str, Node]] = []  # (what was discarded and why, where)

    def fail(self, rule: str, message: str, node: Node) -> WorkflowLoadError:
        line, column = self.src.position(node)
        return WorkflowLoadError(rule, message, path=self.path, line=line, column=column)

    def impure(self, what: str, node: Node, hint: str = "") -> WorkflowLoadError:
        message = f"meta must be a pure literal, but it contains {what}"
        message += f"; {hint}" if hint else "; write the value out as a literal"
        return self.fail("meta-pure-literal", message, node)

    # -- values ------------------------------------------------------------------------------
    # Arrays and objects are generators that yield each child node and receive its value, driven by
    # an explicit stack: a meta nested thousands deep costs no Python recursion, and the depth limit
    # is a rule, not a RecursionError.
    def value(self, node: Node) -> _Value:
        """The literal value of ``node``, read iteratively; deeper than ``max_depth`` is refused."""
        stack: list[tuple[_Frame, int]] = []
        current: Node | None = node
        sent: _Value | None = None  # the value of the child the top frame asked for; None: a new frame
        while True:
            if current is not None:
                opened = self._open(current, stack[-1][1] if stack else 0)
                current = None
                if isinstance(opened, tuple):
                    stack.append(opened)
                    sent = None
                elif not stack:
                    return opened
                else:
                    sent = opened
            frame = stack[-1][0]
            try:
                current = next(frame) if sent is None else frame.send(sent)
            except StopIteration as stop:
                stack.pop()
                if not stack:
                    result: _Value = stop.value
                    return result
                sent = stop.value

    def _open(self, node: Node, depth: int) -> _Value | tuple[_Frame, int]:
        """A scalar's value, or a frame (and its depth) for an array or object. ``depth`` counts the
        arrays, objects and parentheses around ``node``."""
        node, parens = _unwrap_counting(node)
        kind = node.type
        depth += parens + (kind in ("array", "object"))
        if depth > self.max_depth:
            raise self.fail(
                "meta-too-deep",
                f"meta is nested more than {self.max_depth:,} levels deep (arrays, objects and "
                "parentheses); Claude Code's recursive parser overflows its stack near there (profile "
                f"{self.profile}). Flatten the value, or keep large data outside meta (pass it "
                "through args)",
                node,
            )
        if kind == "array":
            return self.array(node), depth
        if kind == "object":
            return self.object(node), depth
        if kind == "string":
            return self.string(node)
        if kind == "template_string":
            for child in node.named_children:
                if child.type == "template_substitution":
                    raise self.impure(
                        "a template with `${…}` interpolation",
                        child,
                        "use a plain string or a template without substitutions",
                    )
            return self.decode(node, self.src.text(node)[1:-1], template=True)
        if kind == "number":
            return self.number(node)
        if kind == "regex":
            return _Scalar("regular expression")
        if kind in ("true", "false"):
            return _Scalar("boolean")
        if kind == "null":
            return _Scalar("null")
        if kind == "unary_expression":
            return self.unary(node)
        raise self.impure(_describe(node, self.src), node)

    def string(self, node: Node) -> str:
        return self.decode(node, self.src.text(node)[1:-1], template=False)

    def decode(self, node: Node, body: str, *, template: bool) -> str:
        try:
            text = decode_string(body, template=template)
        except EscapeError as exc:
            raise self.fail("syntax", f"invalid escape sequence in a meta string: {exc}", node) from None
        self.check_surrogates(text, node)
        return text

    def check_surrogates(self, text: str, node: Node) -> None:
        """Refuse a lone UTF-16 surrogate (an unpaired ``\\uD800``-``\\uDFFF`` escape) in a meta string
        or key: it has no UTF-8 form, so no store, JSON-RPC message or terminal can carry it (and
        Claude Code 2.1.332, measured, lists such a name but cannot launch the workflow by it)."""
        lone = _LONE_SURROGATE.search(text)
        if lone is not None:
            raise self.fail(
                "meta-lone-surrogate",
                f"this meta string holds the lone surrogate U+{ord(lone.group()):04X} (an unpaired "
                "\\uD800-\\uDFFF escape), which has no UTF-8 form; remove it, write the whole "
                "character (e.g. \\u{1F600}) or pair it with its other half",
                node,
            )

    def number(self, node: Node) -> _Scalar:
        text = self.src.text(node)
        if is_legacy_octal(text):
            raise self.fail(
                "syntax",
                f"the number {text} is a legacy octal or leading-zero literal, which module code refuses; "
                "write 0o17 for octal or drop the leading zero",
                node,
            )
        return _Scalar("BigInt" if is_bigint(text) else "number")

    def unary(self, node: Node) -> _Scalar:
        operator = node.child_by_field_name("operator")
        argument = node.child_by_field_name("argument")
        op = self.src.text(operator) if operator is not None else "?"
        argument = _unwrap(argument) if argument is not None else None
        if op == "-" and argument is not None and argument.type == "number":
            text = self.src.text(argument)
            if is_bigint(text):
                raise self.impure(
                    f"the negative BigInt -{text}",
                    node,
                    "only a minus sign on a plain number is a literal (profile claude-code/2.1.332)",
                )
            self.number(argument)
            return _Scalar("number")
        raise self.impure(
            f"the unary expression `{self.src.text(node)}`",
            node,
            "only a minus sign directly on a number (such as -5) is allowed; write the value itself",
        )

    def array(self, node: Node) -> _Frame:
        items: list[_Value] = []
        expecting = True  # after `[` or `,` a value is due; a comma there is a hole
        for child in node.children:
            kind = child.type
            if kind in ("[", "]", "comment"):
                continue
            if kind == ",":
                if expecting:
                    raise self.impure(
                        "a sparse array (a hole between commas)",
                        child,
                        "remove the extra comma or write null",
                    )
                expecting = True
                continue
            if kind == "spread_element":
                raise self.impure("a spread `...` in an array", child, "list the values out")
            items.append((yield child))
            expecting = False
        return items

    def object(self, node: Node) -> _Frame:
        obj = _Object()
        for child in node.named_children:
            kind = child.type
            if kind == "comment":
                continue
            if kind == "pair":
                key_node = child.child_by_field_name("key")
                value_node = child.child_by_field_name("value")
                if key_node is None or value_node is None:
                    raise self.impure("an incomplete property", child)
                key = self.key(key_node)
                if key in FORBIDDEN_KEYS:
                    raise self.fail(
                        "meta-forbidden-key",
                        f"meta may not use the key {key!r} (anywhere in meta, Claude Code refuses "
                        "__proto__, constructor and prototype); rename the key",
                        key_node,
                    )
                if key in obj.entries:
                    self.duplicates.append((key, key_node))
                obj.entries[key] = yield value_node
                obj.nodes[key] = child
            elif kind == "spread_element":
                raise self.impure("a spread `...` in an object", child, "write the properties out")
            elif kind in ("shorthand_property_identifier", "shorthand_property_identifier_pattern"):
                name = self.src.text(child)
                raise self.impure(
                    f"the shorthand property `{name}` (a variable reference)",
                    child,
                    f"write `{name}: <literal value>`",
                )
            elif kind == "method_definition":
                accessor = next((c.type for c in child.children if c.type in ("get", "set")), None)
                what = {"get": "a getter", "set": "a setter"}.get(accessor or "", "a method")
                raise self.impure(f"{what} `{self.src.text(child)[:40]}`", child, "use a plain `key: value`")
            else:
                raise self.impure(_describe(child, self.src), child)
        return obj

    def key(self, node: Node) -> str:
        kind = node.type
        if kind == "property_identifier":
            name = decode_identifier(self.src.text(node))
            self.check_surrogates(name, node)
            return name
        if kind == "string":
            return self.string(node)
        if kind == "number":
            self.number(node)
            return number_key(self.src.text(node))
        if kind == "computed_property_name":
            raise self.impure(
                f"the computed key `{self.src.text(node)}`",
                node,
                "write the key as a name or a quoted string",
            )
        raise self.impure(f"the key `{self.src.text(node)}`", node)


def _unwrap(node: Node) -> Node:
    """The expression inside parentheses (Acorn's default AST has no parenthesized nodes)."""
    return _unwrap_counting(node)[0]


def _unwrap_counting(node: Node) -> tuple[Node, int]:
    """The expression inside parentheses and how many pairs of them surround it."""
    parens = 0
    while node.type == "parenthesized_expression":
        inner = [c for c in node.named_children if c.type != "comment"]
        if len(inner) != 1:
            break
        node = inner[0]
        parens += 1
    return node, parens


def _describe(node: Node, src: Source) -> str:
    kind = node.type
    text = src.text(node)
    short = text if len(text) <= 40 else text[:37] + "..."
    if kind == "undefined":
        return "`undefined`, which is an identifier, not a literal (omit the key instead)"
    if kind == "identifier":
        return f"the variable reference `{short}`"
    if kind in ("call_expression", "new_expression"):
        return f"the call `{short}`"
    if kind in ("arrow_function", "function_expression", "function", "generator_function", "class"):
        return f"a function or class `{short}`"
    if kind == "member_expression":
        return f"the property access `{short}`"
    return f"the expression `{short}`"


def read_meta_statement(root: Node, src: Source, path: str | None, profile: Profile) -> MetaStatement:
    """Read and normalize the meta statement, the first statement of ``root``, under ``profile``
    (its ``max_meta_depth`` bounds the nesting).

    Raises:
        WorkflowLoadError: ``empty-file``, ``meta-first-statement``, ``meta-not-const``,
            ``meta-single-declarator``, ``meta-not-object``, ``meta-pure-literal``,
            ``meta-forbidden-key``, ``meta-too-deep``, ``meta-lone-surrogate``, ``meta-name``,
            ``meta-description`` or ``syntax`` (bad escapes).
    """
    reader = _Reader(src, path, profile.max_meta_depth, profile.name)
    statements = [c for c in root.named_children if c.type not in ("comment", "hash_bang_line")]
    if not statements:
        start = f"a workflow file starts with {_SHAPE} followed by its script"
        if not src.data.lstrip(b"\xef\xbb\xbf \t\r\n\f\v"):
            raise WorkflowLoadError("empty-file", f"the file is empty; {start}", path=path, line=1, column=1)
        raise reader.fail("meta-first-statement", f"the file has only comments; {start}", root)
    first = statements[0]
    wrong_first = (
        f"the first statement must be {_SHAPE} (only comments may come before it), "
        "but the file starts with {found}; move the meta declaration to the top"
    )
    if first.type != "export_statement":
        raise reader.fail(
            "meta-first-statement", wrong_first.replace("{found}", _statement_words(first, src)), first
        )
    declaration = first.child_by_field_name("declaration")
    if declaration is None:
        raise reader.fail(
            "meta-first-statement", wrong_first.replace("{found}", f"`{_first_line(src.text(first))}`"), first
        )
    if declaration.type == "variable_declaration" or (
        declaration.type == "lexical_declaration" and _kind(declaration, src) != "const"
    ):
        keyword = "var" if declaration.type == "variable_declaration" else _kind(declaration, src)
        raise reader.fail(
            "meta-not-const",
            f"meta must be declared with const, not {keyword}; write {_SHAPE}",
            declaration,
        )
    if declaration.type != "lexical_declaration":
        raise reader.fail(
            "meta-first-statement", wrong_first.replace("{found}", f"`{_first_line(src.text(first))}`"), first
        )
    declarators = [c for c in declaration.named_children if c.type == "variable_declarator"]
    if len(declarators) != 1:
        raise reader.fail(
            "meta-single-declarator",
            f"the meta statement declares {len(declarators)} variables; it must declare meta alone — "
            "move the other declarations to their own statement",
            declarators[1] if len(declarators) > 1 else declaration,
        )
    declarator = declarators[0]
    name_node = declarator.child_by_field_name("name")
    if (
        name_node is None
        or name_node.type != "identifier"
        or decode_identifier(src.text(name_node)) != "meta"
    ):
        found = src.text(name_node) if name_node is not None else "nothing"
        raise reader.fail(
            "meta-first-statement",
            f"the first statement must declare a constant named meta, but it declares `{found}`; "
            f"write {_SHAPE}",
            name_node or declarator,
        )
    value = declarator.child_by_field_name("value")
    if value is None:
        raise reader.fail("meta-not-object", f"meta has no initializer; write {_SHAPE}", declarator)
    literal = _unwrap(value)
    if literal.type != "object":
        raise reader.fail(
            "meta-not-object",
            f"meta must be initialized with an object literal `{{ … }}`, found {_describe(literal, src)}; "
            f"write {_SHAPE}",
            literal,
        )
    obj = reader.value(value)
    assert isinstance(obj, _Object)  # `literal` is an object literal
    meta = _normalize(obj, literal, reader)
    export_keyword = first.children[0]
    return MetaStatement(
        meta, export_keyword.start_byte, tuple(reader.duplicates), first.end_byte, tuple(reader.dropped)
    )


_META_KEYS = frozenset({"name", "description", "title", "whenToUse", "phases"})


def _normalize(obj: _Object, node: Node, reader: _Reader) -> WorkflowMeta:
    name = _required(obj, "name", node, reader, "meta-name", "the workflow's name, e.g. name: 'review'")
    description = _required(
        obj, "description", node, reader, "meta-description", "one sentence saying what the workflow does"
    )
    title = obj.entries.get("title")
    when_to_use = obj.entries.get("whenToUse")
    raw_phases = obj.entries.get("phases")
    # Claude Code keeps only these keys and silently drops the rest; say so, without refusing.
    for key in obj.entries:
        if key not in _META_KEYS:
            reader.dropped.append(
                (
                    f"meta.{key} is not Claude Code metadata and is discarded when the workflow loads; "
                    "keep custom metadata outside the file (e.g. the workflow library's sidecar)",
                    obj.nodes[key],
                )
            )
    for key, value in (("title", title), ("whenToUse", when_to_use)):
        if value is not None and not isinstance(value, str):
            reader.dropped.append((f"meta.{key} must be a string; this one is discarded", obj.nodes[key]))
    phases: tuple[Phase, ...] | None = None
    if raw_phases is not None and not isinstance(raw_phases, list):
        reader.dropped.append(
            ("meta.phases must be an array of {title, detail?, model?}; discarded", obj.nodes["phases"])
        )
    if isinstance(raw_phases, list):
        kept: list[Phase] = []
        for index, entry in enumerate(raw_phases):
            if not (isinstance(entry, _Object) and isinstance(entry.entries.get("title"), str)):
                reader.dropped.append(
                    (f"meta.phases[{index}] has no string title and is dropped", obj.nodes["phases"])
                )
                continue
            if isinstance(entry, _Object) and isinstance(entry.entries.get("title"), str):
                detail = entry.entries.get("detail")
                model = entry.entries.get("model")
                kept.append(
                    Phase(
                        title=str(entry.entries["title"]),
                        detail=detail if isinstance(detail, str) else None,
                        model=model if isinstance(model, str) else None,
                    )
                )
        phases = tuple(kept)
    return WorkflowMeta(
        name=name,
        description=description,
        title=title if isinstance(title, str) else None,
        when_to_use=when_to_use if isinstance(when_to_use, str) else None,
        phases=phases,
    )


def _required(obj: _Object, key: str, node: Node, reader: _Reader, rule: str, what: str) -> str:
    if key not in obj.entries:
        raise reader.fail(rule, f"meta.{key} is missing; add {key}: '…' ({what})", node)
    value = obj.entries[key]
    at = obj.nodes[key].child_by_field_name("value") or node
    if not isinstance(value, str):
        raise reader.fail(rule, f"meta.{key} must be a string, found {_kind_of(value)}; {what}", at)
    if not value:
        raise reader.fail(rule, f"meta.{key} must not be empty; give {what}", at)
    return value


def _kind_of(value: _Value) -> str:
    if isinstance(value, _Scalar):
        return {"null": "null", "boolean": "a boolean"}.get(value.kind, f"a {value.kind}")
    if isinstance(value, list):
        return "an array"
    return "an object"


def _kind(declaration: Node, src: Source) -> str:
    kind = declaration.child_by_field_name("kind")
    return src.text(kind) if kind is not None else "?"


def _first_line(text: str) -> str:
    line = text.split("\n", 1)[0]
    return line if len(line) <= 60 else line[:57] + "..."


def _statement_words(node: Node, src: Source) -> str:
    if node.type == "ERROR":
        return "text that does not parse"
    return f"`{_first_line(src.text(node))}`"
