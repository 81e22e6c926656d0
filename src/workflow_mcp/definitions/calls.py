"""The agent() calls a workflow's source states outright, read without running it.

:func:`agent_call_sites` finds every ``agent(prompt, { … })`` call whose options are an object
literal and reads the options written as plain literals: ``model``, ``agentType``, ``label``,
``phase`` and whether a ``schema`` is given. It is what lets a run be refused *before* any agent runs
when its configuration cannot serve a call it will certainly make (an unmapped Claude model alias, a
schema call to a provider without structured output). A value computed at run time is simply not
known here (``None``); the run-time checks still apply to every call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._js import Source, parse
from ._scan import _literal_string

if TYPE_CHECKING:
    from tree_sitter import Node

__all__ = ["AgentCallSite", "agent_call_sites"]


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
    "agent_type"}`` …); spread elements (``...opts``) or non-literal options add ``"..."``: then any
    option may be set."""


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
        return AgentCallSite(line, column, dynamic=frozenset({"..."} if len(positional) >= 2 else ()))
    values: dict[str, str | None] = {}
    dynamic: set[str] = set()
    schema = False
    for member in positional[1].named_children:
        if member.type == "spread_element":
            dynamic.add("...")
            continue
        if member.type == "shorthand_property_identifier":
            name = src.text(member)
            if name == "schema":
                schema = True
            elif name in _OPTIONS:
                dynamic.add(_OPTIONS[name])
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
        elif name in _OPTIONS:
            literal = _literal_string(value, src)
            if literal is None:
                dynamic.add(_OPTIONS[name])
            values[_OPTIONS[name]] = literal
    return AgentCallSite(line, column, schema=schema, dynamic=frozenset(dynamic), **values)
