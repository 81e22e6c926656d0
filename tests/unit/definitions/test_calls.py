"""The agent() calls a source states outright (definitions.calls), read without running it."""

from __future__ import annotations

from workflow_mcp.definitions.calls import NestedCallSite, agent_call_sites, nested_workflow_sites


def test_literal_options_are_read_and_computed_ones_are_named_unknown() -> None:
    source = (
        "const s = { type: 'object' }\n"
        "await agent('a', { model: 'sonnet', label: `l`, phase: 'P', agentType: 'rev', schema: s })\n"
        "await agent('b', { model: args.m, schema: args.x ? s : null, 'label': x })\n"
        "await agent('c', { ...opts })\n"
        "await agent('d', opts)\n"
        "await agent('e', { schema: null })\n"
        "other.agent('f', { model: 'opus' })\n"
    )
    a, b, c, d, e = agent_call_sites(source)
    assert (a.line, a.column) == (2, 7)
    assert (a.model, a.label, a.phase, a.agent_type, a.schema, a.dynamic) == (
        "sonnet",
        "l",
        "P",
        "rev",
        True,
        frozenset(),
    )
    assert b.model is None and not b.schema and b.dynamic == {"model", "label"}
    every = {"...", "schema", "model", "agent_type", "label", "phase"}
    assert c.dynamic == every and d.dynamic == every
    assert not e.schema and e.dynamic == frozenset()


def test_only_options_written_after_the_last_spread_are_certain() -> None:
    source = (
        "await agent('a', { model: 'haiku', label: 'gone', ...o, model: 'opus', schema: s })\n"
        "await agent('b', { model: 'opus', ...o })\n"
        "await agent('c', { ...o, label: args.l })\n"
    )
    a, b, c = agent_call_sites(source)
    assert (a.model, a.label, a.schema) == ("opus", None, True)
    assert a.dynamic == {"...", "agent_type", "label", "phase"}
    assert b.model is None and b.dynamic == {"...", "schema", "model", "agent_type", "label", "phase"}
    assert c.label is None and "label" in c.dynamic


def test_nested_workflow_calls_naming_their_child_literally_are_found() -> None:
    source = (
        "await workflow('review', {})\n"
        "await workflow({ scriptPath: './child.js' })\n"
        "await workflow({ name: `lint` })\n"
        "await workflow(args.name)\n"
        "await workflow({ ...o, scriptPath: 'x.js' })\n"
        "await workflow({ name: 'a', scriptPath: args.p })\n"
        "other.workflow('no')\n"
    )
    assert nested_workflow_sites(source) == [
        NestedCallSite(1, 7, name="review"),
        NestedCallSite(2, 7, script_path="./child.js"),
        NestedCallSite(3, 7, name="lint"),
    ]
