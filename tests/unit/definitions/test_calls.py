"""The agent() calls a source states outright (definitions.calls), read without running it."""

from __future__ import annotations

from workflow_mcp.definitions.calls import agent_call_sites


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
    assert c.dynamic == {"..."} and d.dynamic == {"..."}
    assert not e.schema and e.dynamic == frozenset()
