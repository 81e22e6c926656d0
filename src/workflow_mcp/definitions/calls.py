"""The agent() calls a workflow's source states outright, read without running it.

:func:`agent_call_sites` finds every ``agent(prompt, { … })`` call whose options are an object
literal and reads the options written as plain literals: ``model``, ``agentType``, ``label``,
``phase`` and whether a ``schema`` is given. It is what lets a run be refused *before* any agent runs
when its configuration cannot serve a call it will certainly make (an unmapped Claude model alias, a
schema call to a provider without structured output). A value computed at run time is simply not
known here (``None``); the run-time checks still apply to every call.

Spread options (``{ ...opts, model: 'opus' }``) are read as JavaScript builds the object, in order: a
spread may set any option, so every option written *before* the last spread is unknown, and only those
written after it are certain. :func:`nested_workflow_sites` finds the ``workflow()`` calls whose child
is written as a literal (``workflow('name')``, ``workflow({ scriptPath: './child.js' })``), so the
same look can be taken into the children.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._js import Source, parse
from ._scan import _literal_string

if TYPE_CHECKING:
    from tree_sitter import Node

__all__ = ["AgentCallSite", "NestedCallSite", "agent_call_sites", "nested_workflow_sites"]


@dataclass(frozen=True)
class AgentCallSite:
    """One ``agent(…)`` call of the source. ``line``/``column`` are 1-based (UTF-16 columns). Each
    option is its literal string value, or ``None`` when absent or not a plain literal; ``schema`` is
    ``True`` when the ``schema`` option is an object literal or a variable (``{ schema }`` included);
    ``null``, ``false`` and other expressions leave it ``False``."""

    line: int
    column: int
    model: str | None = None
    agent_type: str | None = None
    label: str | None = None
    phase: str | None = None
    schema: bool = False
    dynamic: frozenset[str] = frozenset()
    """Options present with a value only known at run time, by field name (``{"label",
    "agent_type"}`` …); a spread element (``...opts``) or options that are not an object literal add
    ``"..."``: then any option not written after the last spread may be set, and each option field
    (``model``, ``agent_type``, ``label``, ``phase``, ``schema``) not written after it is listed too."""


@dataclass(frozen=True)
class NestedCallSite:
    """One ``workflow(…)`` call whose child is a literal: ``name`` (``workflow('review')`` or
    ``workflow({ name: 'review' })``) or ``script_path`` (``workflow({ scriptPath: './x.js' })``).
    ``line``/``column`` are 1-based (UTF-16 columns)."""

    line: int
    column: int
    name: str | None = None
    script_path: str | None = None


def nested_workflow_sites(body: str) -> list[NestedCallSite]:
    """Every ``workflow()`` call in ``body`` that names its child with a literal, in source order."""
    data = body.encode("utf-8", errors="surrogatepass")
    if b"workflow" not in data:
        return []
    src = Source(data)
    sites: list[NestedCallSite] = []
    stack: list[Node] = [parse(data).root_node]
    while stack:
        node = stack.pop()
        if node.type == "call_expression":
            site = _nested(node, src)
            if site is not None:
                sites.append(site)
        stack.extend(reversed(node.children))
    return sites


def _nested(call: Node, src: Source) -> NestedCallSite | None:
    function = call.child_by_field_name("function")
    if function is None or function.type != "identifier" or src.text(function) != "workflow":
        return None
    args = call.child_by_field_name("arguments")
    first = next((c for c in args.named_children if c.type != "comment"), None) if args is not None else None
    if first is None:
        return None
    line, column = src.position(call)
    name = _literal_string(first, src)
    if name is not None:
        return NestedCallSite(line, column, name=name)
    if first.type != "object":
        return None
    found: dict[str, str | None] = {}
    for member in first.named_children:
        if member.type == "spread_element":
            return None  # the spread may name another child
        if member.type != "pair":
            continue
        key = member.child_by_field_name("key")
        if key is None:
            continue
        key_name = (_literal_string(key, src) or "") if key.type == "string" else src.text(key)
        if key_name in ("name", "scriptPath"):
            found[key_name] = _literal_string(member.child_by_field_name("value"), src)
    if found.get("scriptPath") is not None:
        return NestedCallSite(line, column, script_path=found["scriptPath"])
    if "scriptPath" not in found and found.get("name") is not None:
        return NestedCallSite(line, column, name=found["name"])
    return None


def agent_call_sites(body: str) -> list[AgentCallSite]:
    """Every ``agent()`` call in ``body`` (a workflow body or whole source), in source order."""
    data = body.encode("utf-8", errors="surrogatepass")
    if b"agent" not in data:
        return []
    src = Source(data)
    sites: list[AgentCallSite] = []
    stack: list[Node] = [parse(data).root_node]
    while stack:
        node = stack.pop()
        if node.type == "call_expression":
            site = _site(node, src)
            if site is not None:
                sites.append(site)
        stack.extend(reversed(node.children))
    return sites


_OPTIONS = {"model": "model", "agentType": "agent_type", "label": "label", "phase": "phase"}


def _site(call: Node, src: Source) -> AgentCallSite | None:
    function = call.child_by_field_name("function")
    if function is None or function.type != "identifier" or src.text(function) != "agent":
        return None
    args = call.child_by_field_name("arguments")
    if args is None or args.type != "arguments":
        return None
    positional = [c for c in args.named_children if c.type != "comment"]
    line, column = src.position(call)
    if len(positional) < 2 or positional[1].type != "object":
        unknown = ("...", "schema", *_OPTIONS.values()) if len(positional) >= 2 else ()
        return AgentCallSite(line, column, dynamic=frozenset(unknown))
    values: dict[str, str | None] = {}
    dynamic: set[str] = set()
    schema = False
    for member in positional[1].named_children:
        if member.type == "spread_element":
            # Whatever the spread holds overrides what came before it: only later keys are certain.
            dynamic.update(("...", "schema", *_OPTIONS.values()))
            values.clear()
            schema = False
            continue
        if member.type == "shorthand_property_identifier":
            name = src.text(member)
            if name == "schema":
                schema = True
                dynamic.discard("schema")
            elif name in _OPTIONS:
                dynamic.add(_OPTIONS[name])
                values.pop(_OPTIONS[name], None)
            continue
        if member.type != "pair":
            continue
        key = member.child_by_field_name("key")
        value = member.child_by_field_name("value")
        if key is None:
            continue
        name = (_literal_string(key, src) or "") if key.type == "string" else src.text(key)
        if name == "schema":
            # An object literal, or a variable (``schema: reviewSchema``); any other expression
            # (a conditional, a call) may well be null at run time, so it decides nothing here.
            schema = value is not None and (
                value.type == "object" or (value.type == "identifier" and src.text(value) != "undefined")
            )
            dynamic.discard("schema")
        elif name in _OPTIONS:
            literal = _literal_string(value, src)
            if literal is None:
                dynamic.add(_OPTIONS[name])
            else:
                dynamic.discard(_OPTIONS[name])
            values[_OPTIONS[name]] = literal
    return AgentCallSite(line, column, schema=schema, dynamic=frozenset(dynamic), **values)
