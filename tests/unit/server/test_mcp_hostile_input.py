"""Hostile workflow sources over MCP: ``workflow_validate`` answers with the rule and the line, and
``workflow_run`` refuses with an error result naming them; every message stays valid JSON."""

from __future__ import annotations

import pytest

from mcp_kit import HELLO, Env, call, connect, data, text

SURROGATE = "export const meta = { name: 'n', description: '\\uDFFF' }\nreturn 1\n"
DEEP = (
    "export const meta = { name: 'deep', description: 'd',\n  x: "
    + "(" * 50_000
    + "1"
    + ")" * 50_000
    + " }\n"
)

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("source", "rule", "line"),
    [(SURROGATE, "meta-lone-surrogate", 1), (DEEP, "meta-too-deep", 2)],
    ids=["lone-surrogate", "deep-nesting"],
)
@pytest.mark.parametrize("by", ["script", "path"])
async def test_validate_and_run_refuse_a_hostile_meta_with_its_rule_and_line(
    env: Env, source: str, rule: str, line: int, by: str
) -> None:
    path = env.workflow("hostile", source)
    target = {"script": source} if by == "script" else {"path": str(path)}
    async with connect(env.trusted_server()) as c:  # bounded by BOUND_S
        checked = await call(c, "workflow_validate", target)
        ran = await call(c, "workflow_run", {**target, "provider": "fake", "waitMs": 10_000})
    assert not checked.is_error
    report = data(checked)
    assert report["valid"] is False
    assert [(e["rule"], e["line"]) for e in report["errors"]] == [(rule, line)]
    assert ran.is_error and f"[{rule}]" in text(ran) and f":{line}:" in text(ran)


async def test_run_args_holding_a_lone_surrogate_are_refused_naming_it(env: Env) -> None:
    env.workflow("hello", HELLO)
    async with connect(env.trusted_server()) as c:
        ran = await call(c, "workflow_run", {"name": "hello", "args": {"who": "\ud800"}, "provider": "fake"})
    assert ran.is_error
    assert "the run's args cannot be used: it holds a lone UTF-16 surrogate" in text(ran)
    assert "Error executing tool" not in text(ran)


async def test_a_lone_surrogate_made_at_run_time_comes_back_as_u_fffd(env: Env) -> None:
    source = "export const meta = { name: 'lone', description: 'd' }\nreturn { ['\\uD800']: 'a\\uDFFF' }\n"
    env.workflow("lone", source)
    async with connect(env.trusted_server()) as c:
        ran = await call(c, "workflow_run", {"name": "lone", "provider": "fake", "waitMs": 10_000})
    assert not ran.is_error, text(ran)
    assert data(ran)["result"] == {"\ufffd": "a\ufffd"}
