"""Nested workflows pass the same approval and file scope as the workflow that calls them: a trusted
parent cannot run an unapproved child, whether the child is found by name (also through a client-chosen
``cwd``) or by ``scriptPath``."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from mcp_kit import Env, call, connect, data, text

pytestmark = pytest.mark.anyio

PARENT = """export const meta = { name: 'parent', description: 'calls a helper' }
return await workflow(args && args.scriptPath ? { scriptPath: args.scriptPath } : 'helper', {})
"""
HELPER = """export const meta = { name: 'helper', description: 'one agent call' }
return await agent('the helper ran', { label: 'helper-call' })
"""


def layout(env: Env) -> tuple[Path, Path, Path]:
    """``project/trusted/parent.js`` (trusted) and ``project/elsewhere/.claude/workflows/helper.js``
    (inside the project roots, under no --trust directory)."""
    trusted = env.project / "trusted"
    trusted.mkdir()
    parent = trusted / "parent.js"
    parent.write_text(PARENT)
    elsewhere = env.project / "elsewhere"
    helper = elsewhere / ".claude" / "workflows" / "helper.js"
    helper.parent.mkdir(parents=True)
    helper.write_text(HELPER)
    return trusted, parent, helper


def helper_calls(env: Env, run_id: str) -> list[Any]:
    return [e for e in env.service.events(run_id) if e.type.startswith("agent.")]


async def run_parent(env: Env, server: Any, parent: Path, **arguments: Any) -> dict[str, Any]:
    async with connect(server) as c:
        return data(
            await call(
                c, "workflow_run", {"path": str(parent), "provider": "fake", "waitMs": 20_000, **arguments}
            )
        )


@pytest.mark.parametrize("by", ["name through the client's cwd", "scriptPath"])
async def test_a_trusted_parent_cannot_run_an_unapproved_child(env: Env, by: str) -> None:
    trusted, parent, helper = layout(env)
    server = env.server(trust=(str(trusted),))
    arguments: dict[str, Any] = (
        {"cwd": str(helper.parents[2])} if by.startswith("name") else {"args": {"scriptPath": str(helper)}}
    )
    out = await run_parent(env, server, parent, **arguments)
    assert out["status"] == "failed"
    message = out["error"]["message"]
    assert "nested workflow 'helper'" in message and "is not approved to run" in message
    assert str(helper) in message and "--trust DIR" in message
    assert helper_calls(env, out["runId"]) == []  # the child never ran


@pytest.mark.parametrize("how", ["approved hash", "trusted directory"])
async def test_an_approved_or_trusted_child_runs(env: Env, how: str) -> None:
    trusted, parent, helper = layout(env)
    if how == "approved hash":
        server = env.server(trust=(str(trusted),))
        digest = hashlib.sha256(helper.read_bytes()).hexdigest()
        server.trust.approve(digest, name="helper", path=str(helper), by=None)
    else:
        server = env.server(trust=(str(trusted), str(helper.parent)))
    out = await run_parent(env, server, parent, cwd=str(helper.parents[2]))
    assert out["status"] == "completed" and out["result"] == "the helper ran"
    assert [e.type for e in helper_calls(env, out["runId"])][-1] == "agent.completed"


async def test_a_changed_child_is_not_covered_by_its_old_approval(env: Env) -> None:
    trusted, parent, helper = layout(env)
    server = env.server(trust=(str(trusted),))
    server.trust.approve(hashlib.sha256(helper.read_bytes()).hexdigest(), name="helper", path=None, by=None)
    helper.write_text(HELPER.replace("the helper ran", "something else"))
    out = await run_parent(env, server, parent, args={"scriptPath": str(helper)})
    assert out["status"] == "failed" and "is not approved to run" in out["error"]["message"]


async def test_a_child_outside_the_roots_of_a_confined_server_is_never_read(env: Env) -> None:
    trusted, parent, _ = layout(env)
    outside = env.root / "outside.js"
    outside.write_text("const token = 'TOPSECRET'\n")
    personal = env.home / ".claude" / "workflows" / "helper.js"
    personal.parent.mkdir(parents=True)
    personal.write_text(HELPER)
    server = env.server(trust=(str(trusted),), confined=True)
    by_path = await run_parent(env, server, parent, args={"scriptPath": str(outside)})
    by_name = await run_parent(env, server, parent)  # resolves to the personal helper, outside the roots
    for out in (by_path, by_name):
        assert out["status"] == "failed", out
        assert "[outside-roots]" in out["error"]["message"] and "TOPSECRET" not in out["error"]["message"]
        assert helper_calls(env, out["runId"]) == []


async def test_a_child_that_is_not_a_workflow_source_is_reported_without_quoting_it(env: Env) -> None:
    trusted, parent, _ = layout(env)
    notes = trusted / "notes.txt"
    notes.write_text("const token = 'TOPSECRET'\n")
    out = await run_parent(env, env.server(trust=(str(trusted),)), parent, args={"scriptPath": str(notes)})
    assert out["status"] == "failed"
    message = out["error"]["message"]
    assert "nested workflow: the file is not a workflow source" in message and "TOPSECRET" not in message


async def test_a_confined_server_never_names_or_quotes_a_personal_definition_of_a_childs_name(
    env: Env,
) -> None:
    trusted, parent, _ = layout(env)
    personal = env.home / ".claude" / "workflows" / "helper.js"
    personal.parent.mkdir(parents=True)
    personal.write_text("export const meta = { name: 'helper', description: 'h' }\nconst = TOPSECRET\n")
    server = env.server(trust=(str(trusted),), confined=True)
    out = await run_parent(env, server, parent)
    async with connect(server) as c:
        top = await call(c, "workflow_validate", {"name": "helper"})
    assert out["status"] == "failed" and top.is_error
    nested, listed = out["error"]["message"], text(top)
    assert "workflow('helper'): no workflow with that name" in nested, nested
    assert "no workflow named 'helper'" in listed, listed
    for message in (nested, listed):
        assert "[outside-roots]" in message, message
        assert "TOPSECRET" not in message and str(env.home) not in message, message
