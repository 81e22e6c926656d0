"""Whole-file AST scans: constructs refused before launch, and portability warnings.

Private. A regular expression finds candidate tokens in the raw bytes (fast, even on a 512 KB file);
the syntax tree then decides what each candidate is, so text inside strings, templates, regular
expressions and comments never counts.

Refused (profile claude-code/2.1.332, PROFILE-FACTS "Loading"; seed "JavaScript execution realm"):
a real ``import()`` call, ``await using`` declarations and ``with`` statements.
Warned (seed "Environment dependencies"): string ``agentType`` values passed to ``agent()``, nested
``workflow('name')`` names and ``workflow({ scriptPath })`` paths, absolute machine paths in string
literals, and calls that throw at run time in Claude (``Date.now()``, ``Math.random()``, argless
``Date()``/``new Date()``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from workflow_mcp.definitions._js import EscapeError, Source, decode_string, next_leaf, prev_leaf

if TYPE_CHECKING:
    from typing import Protocol

    from tree_sitter import Node

    class _Add(Protocol):
        def __call__(
            self, rule: str, message: str, node: Node, *, error: bool = ..., key: str = ...
        ) -> None: ...


__all__ = ["Finding", "scan"]

_TOKENS = re.compile(rb"\b(?:import|using|with|agentType|workflow|Date|Math|Intl)\b")
# Absolute paths that only exist on one machine: POSIX home directories and Windows drive paths
# (written `C:\\…` inside a JavaScript string, or with forward slashes).
_ABSOLUTE_PATH = re.compile(
    rb"(?<![\w./~\\-])(?:/(?:home|Users|root)/[^\s'\"`/]"
    rb"|[A-Za-z]:\\\\[\w$]|[A-Za-z]:/(?:Users|Documents and Settings|Program Files|home)/)"
)
_PATH_END = re.compile(r"[\s'\"`,;)\]}]")


@dataclass(frozen=True)
class Finding:
    """One scan result. ``error`` findings refuse the file; the others are warnings."""

    rule: str
    message: str
    line: int
    column: int
    error: bool
    key: str  # what identifies the finding for de-duplication


def scan(root: Node, src: Source, *, import_refused: bool, profile: str) -> list[Finding]:
    """Every finding in source order, warnings de-duplicated per subject (first occurrence kept)."""
    findings: list[Finding] = []
    seen: set[tuple[str, str]] = set()

    def add(rule: str, message: str, node: Node, *, error: bool = False, key: str = "") -> None:
        if not error:
            if (rule, key) in seen:
                return
            seen.add((rule, key))
        line, column = src.position(node)
        findings.append(Finding(rule, message, line, column, error, key))

    data = src.data
    for match in _TOKENS.finditer(data):
        word = match.group().decode()
        leaf = root.descendant_for_byte_range(match.start(), match.end())
        if leaf is None or leaf.start_byte != match.start() or leaf.end_byte != match.end():
            continue  # part of a longer token: a string, a comment, a regex, a longer name
        node = _outermost(leaf)
        parent = node.parent
        if word == "import":
            if node.type == "import" and parent is not None and parent.type == "call_expression":
                if import_refused:
                    add(
                        "dynamic-import",
                        "import() is refused before launch (profile claude-code/2.1.332): the workflow "
                        "realm has no module loader; remove the import and use agent() or args instead",
                        node,
                        error=True,
                    )
                else:
                    add(
                        "dynamic-import",
                        f"import() throws at run time under profile {profile} and refuses the whole file "
                        "in Claude Code 2.1.332 and later; remove it",
                        node,
                        key="import",
                    )
        elif word == "using":
            if _is_await_using(leaf, src):
                add(
                    "await-using",
                    "`await using` declarations are refused before launch (Claude Code's workflow loader "
                    "rejects them); release the resource explicitly with try/finally",
                    prev_leaf(leaf) or leaf,
                    error=True,
                )
        elif word == "with":
            if leaf.type == "with" and parent is not None and parent.type == "with_statement":
                add(
                    "with-statement",
                    "`with` statements are not allowed: workflow code is strict-mode module code; "
                    "refer to the object's properties explicitly",
                    leaf,
                    error=True,
                )
        elif word == "agentType":
            value = _option_value(node, src, callee="agent")
            if node.type == "string_fragment" and node.parent is not None:
                node = node.parent  # report the quoted key at its opening quote
            if value is not None:
                add(
                    "agent-type",
                    f"agent() asks for agentType {value!r}: that agent type must exist wherever the "
                    "workflow runs (an environment dependency, not an error in the file)",
                    node,
                    key=value,
                )
        elif word == "workflow":
            _nested_workflow(node, src, add)
        elif word in ("Date", "Math"):
            what = _nondeterministic(node, src)
            if what is not None:
                add(
                    "nondeterministic-call",
                    f"{what} throws at run time in Claude Code (resume replays the workflow "
                    "deterministically); pass a timestamp or seed through args instead",
                    node,
                    key=what,
                )
        elif word == "Intl":
            what = _intl_clock(node, src)
            if what is not None:
                add(
                    "nondeterministic-call",
                    f"{what} with no date formats the current time: it reads the clock, which Claude Code "
                    "allows here too, so a resumed run may see another value; pass a timestamp through "
                    "args and format that instead",
                    node,
                    key=what,
                )
    for match in _ABSOLUTE_PATH.finditer(data):
        leaf = root.descendant_for_byte_range(match.start(), match.start() + 1)
        if leaf is None or leaf.type != "string_fragment":
            continue
        literal = leaf.parent
        if literal is None or literal.type not in ("string", "template_string"):
            continue
        raw = data[match.start() : literal.end_byte - 1].decode("utf-8", errors="replace")
        end = _PATH_END.search(raw)
        raw = raw[: end.start()] if end else raw
        try:
            path = decode_string(raw)
        except EscapeError:
            path = raw
        add(
            "absolute-path",
            f"the string mentions the absolute path {path!r}, which exists on one machine only; "
            "pass paths through args or make them relative to the working directory",
            leaf,
            key=path,
        )
    findings.sort(key=lambda f: (f.line, f.column))
    return findings


def _outermost(leaf: Node) -> Node:
    # A named node wrapping exactly the token (tree-sitter's `import` node wraps the `import` token).
    node = leaf
    while (
        node.parent is not None
        and node.parent.start_byte == leaf.start_byte
        and (node.parent.end_byte == leaf.end_byte)
    ):
        node = node.parent
    return node


def _is_await_using(leaf: Node, src: Source) -> bool:
    # `await [no LineTerminator] using [no LineTerminator] BindingIdentifier`. Checked on tokens, so
    # it also holds where the grammar produced an ERROR node around the declaration.
    if leaf.type not in ("using", "identifier"):
        return False
    before = prev_leaf(leaf)
    after = next_leaf(leaf)
    if before is None or after is None or before.type != "await":
        return False
    row = leaf.start_point[0]
    if before.end_point[0] != row or after.start_point[0] != row:
        return False
    return after.type == "identifier" or (after.is_named and src.text(after).isidentifier())


def _option_value(node: Node, src: Source, *, callee: str) -> str | None:
    """The string value of ``node`` when it is a key of an object passed to ``callee(…)``."""
    key = node
    if key.type == "string_fragment":
        if key.parent is None or key.parent.type != "string":
            return None
        key = key.parent
    if key.type not in ("property_identifier", "string"):
        return None
    pair = key.parent
    if pair is None or pair.type != "pair" or not _same(pair.child_by_field_name("key"), key):
        return None
    obj = pair.parent
    args = obj.parent if obj is not None and obj.type == "object" else None
    call = args.parent if args is not None and args.type == "arguments" else None
    if call is None or call.type != "call_expression":
        return None
    function = call.child_by_field_name("function")
    if function is None or function.type != "identifier" or src.text(function) != callee:
        return None
    return _literal_string(pair.child_by_field_name("value"), src)


def _nested_workflow(node: Node, src: Source, add: _Add) -> None:
    call = node.parent
    if node.type != "identifier" or call is None or call.type != "call_expression":
        return
    if not _same(call.child_by_field_name("function"), node):
        return
    args = call.child_by_field_name("arguments")
    first = next((c for c in args.named_children if c.type != "comment"), None) if args else None
    if first is None:
        return
    name = _literal_string(first, src)
    if name is not None:
        add(
            "nested-workflow",
            f"workflow({name!r}) needs a workflow named {name!r} to be discoverable wherever this "
            "workflow runs (an environment dependency)",
            first,
            key=name,
        )
        return
    if first.type != "object":
        return
    for pair in first.named_children:
        if pair.type != "pair":
            continue
        key = pair.child_by_field_name("key")
        key_name = _literal_string(key, src) if key is not None and key.type == "string" else None
        if key is not None and key.type == "property_identifier":
            key_name = src.text(key)
        if key_name == "scriptPath":
            path = _literal_string(pair.child_by_field_name("value"), src)
            if path is not None:
                add(
                    "nested-script-path",
                    f"workflow({{ scriptPath: {path!r} }}) needs that file to exist wherever this "
                    "workflow runs (an environment dependency)",
                    pair,
                    key=path,
                )


def _nondeterministic(node: Node, src: Source) -> str | None:
    if node.type != "identifier":
        return None
    parent = node.parent
    if parent is None:
        return None
    name = src.text(node)
    if parent.type == "member_expression" and _same(parent.child_by_field_name("object"), node):
        prop = parent.child_by_field_name("property")
        call = parent.parent
        if prop is None or call is None or call.type != "call_expression":
            return None
        if not _same(call.child_by_field_name("function"), parent):
            return None
        member = f"{name}.{src.text(prop)}"
        return f"{member}()" if member in ("Date.now", "Math.random") else None
    if name != "Date":
        return None
    if parent.type == "new_expression" and _same(parent.child_by_field_name("constructor"), node):
        args = parent.child_by_field_name("arguments")
        return "new Date()" if args is None or not _has_arguments(args) else None
    if parent.type == "call_expression" and _same(parent.child_by_field_name("function"), node):
        args = parent.child_by_field_name("arguments")
        return "Date()" if args is None or not _has_arguments(args) else None
    return None


def _intl_clock(node: Node, src: Source) -> str | None:
    """``Intl.DateTimeFormat(…).format()`` / ``.formatToParts()`` called with no date (which formats
    the current time), written as one chain; ``None`` for anything else."""
    member = node.parent
    if node.type != "identifier" or member is None or member.type != "member_expression":
        return None
    prop = member.child_by_field_name("property")
    if not _same(member.child_by_field_name("object"), node) or prop is None:
        return None
    if src.text(prop) != "DateTimeFormat":
        return None
    made = member.parent
    if made is None or made.type not in ("new_expression", "call_expression"):
        return None
    field = "constructor" if made.type == "new_expression" else "function"
    if not _same(made.child_by_field_name(field), member):
        return None
    access = made.parent
    if (
        access is None
        or access.type != "member_expression"
        or not _same(access.child_by_field_name("object"), made)
    ):
        return None
    method = access.child_by_field_name("property")
    call = access.parent
    if method is None or src.text(method) not in ("format", "formatToParts"):
        return None
    if (
        call is None
        or call.type != "call_expression"
        or not _same(call.child_by_field_name("function"), access)
    ):
        return None
    args = call.child_by_field_name("arguments")
    if args is not None and _has_arguments(args):
        return None
    return f"Intl.DateTimeFormat().{src.text(method)}()"


def _has_arguments(args: Node) -> bool:
    return any(c.type != "comment" for c in args.named_children)


def _literal_string(node: Node | None, src: Source) -> str | None:
    if node is None:
        return None
    if node.type == "string":
        body, template = src.text(node)[1:-1], False
    elif node.type == "template_string" and not any(
        c.type == "template_substitution" for c in node.named_children
    ):
        body, template = src.text(node)[1:-1], True
    else:
        return None
    try:
        return decode_string(body, template=template)
    except EscapeError:
        return None


def _same(a: Node | None, b: Node) -> bool:
    return a is not None and a.start_byte == b.start_byte and a.end_byte == b.end_byte and a.type == b.type
