"""Source approval, run ownership and policy ceilings (in-memory client; the HTTP token layer has its
own tests in test_http_guard.py and tests/e2e/mcp)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from workflow_mcp.server import Principal, ServerPolicy

from mcp_kit import BOUND_S, HELLO, PARK, Env, approve, call, connect, data, text, wait_for_event

pytestmark = pytest.mark.anyio

RUN: dict[str, Any] = {"script": HELLO, "provider": "fake", "waitMs": 20_000}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_never_approved_source_is_shown_to_the_user_once_and_runs_when_approved(
    env: Env, mode: str
) -> None:
    """2026-07-28 connections ask through the input-required flow, handshake-era ones through
    elicitation/create: the same tool call works on both."""
    asked = approve(True)
    approvals = str(env.root / "state" / "approvals.json")
    async with connect(env.server(approvals=approvals), mode=mode, elicitation_callback=asked) as c:
        first = await call(c, "workflow_run", RUN)
        second = await call(c, "workflow_run", RUN)
    assert data(first)["status"] == "completed" and data(second)["status"] == "completed"
    (question,) = asked.asked  # type: ignore[attr-defined]
    assert "'hello' (inline script)" in question and "sha256" in question
    stored = json.loads(Path(approvals).read_text())
    assert stored["version"] == 2
    assert [(a["sourceHash"], a["by"]) for a in stored["approvals"]] == [(_sha(HELLO), None)]
    assert stat.S_IMODE(os.stat(approvals).st_mode) == 0o600


def _sha(source: str) -> str:
    import hashlib

    return hashlib.sha256(source.encode()).hexdigest()


async def test_a_declined_approval_starts_nothing(env: Env) -> None:
    async with connect(env.server(), elicitation_callback=approve(False)) as c:
        result = await call(c, "workflow_run", RUN)
    assert result.is_error and "did not approve" in text(result)
    assert env.service.list_runs() == []


async def test_without_elicitation_an_unapproved_source_is_refused_with_what_to_do(env: Env) -> None:
    async with connect(env.server()) as c:
        result = await call(c, "workflow_run", RUN)
    assert result.is_error
    assert "elicitation" in text(result) and "--allow-inline-scripts" in text(result)
    assert f"workflow-mcp approvals add --sha256 {_sha(RUN['script'])}" in text(result)
    assert env.service.list_runs() == []


async def test_an_http_client_is_told_the_approval_command_for_its_own_token_and_no_stdio_only_option(
    env: Env,
) -> None:
    async with connect(env.server(principal=Principal("http:alice", scoped=True))) as c:
        result = await call(c, "workflow_run", RUN)
    assert f"workflow-mcp approvals add --client alice --sha256 {_sha(RUN['script'])}" in text(result)
    assert "--allow-inline-scripts" not in text(result)


async def test_files_under_a_trusted_directory_run_without_asking(env: Env) -> None:
    env.workflow("hello", HELLO)
    asked = approve(True)
    async with connect(env.trusted_server(), elicitation_callback=asked) as c:
        out = data(await call(c, "workflow_run", {"name": "hello", "provider": "fake", "waitMs": 20_000}))
    assert out["status"] == "completed" and asked.asked == []  # type: ignore[attr-defined]


async def test_a_changed_file_is_asked_about_again(env: Env) -> None:
    path = env.workflow("hello", HELLO)
    asked = approve(True)
    async with connect(env.server(), elicitation_callback=asked) as c:
        await call(c, "workflow_run", {"path": str(path), "provider": "fake", "waitMs": 20_000})
        path.write_text(HELLO.replace("greeted", "welcomed"))
        out = data(await call(c, "workflow_run", {"path": str(path), "provider": "fake", "waitMs": 20_000}))
    assert out["logs"] == ["welcomed hello undefined"]
    assert len(asked.asked) == 2  # type: ignore[attr-defined]


async def test_a_scoped_client_cannot_see_read_await_or_cancel_another_clients_run(env: Env) -> None:
    env.workflow("hello", HELLO)
    trust = (str(env.project),)
    alice = env.server(trust=trust, principal=Principal("http:alice", scoped=True))
    bob = env.server(trust=trust, principal=Principal("http:bob", scoped=True))
    async with connect(alice) as a, connect(bob) as b:
        rid = data(
            await call(
                a, "workflow_run", {"name": "hello", "provider": "fake", "fakeScript": PARK, "waitMs": 0}
            )
        )["runId"]
        await wait_for_event(a, rid, "agent.started")
        for tool, extra in [
            ("workflow_run_status", {}),
            ("workflow_run_events", {}),
            ("workflow_run_await", {"waitMs": 0}),
            ("workflow_run_cancel", {}),
        ]:
            refused = await call(b, tool, {"runId": rid, **extra})
            assert refused.is_error and f"No run {rid!r} is visible to this client" in text(refused), tool
        resumed = await call(b, "workflow_run", {"resumeFromRunId": rid, "provider": "fake"})
        assert resumed.is_error and "is visible" in text(resumed)
        with pytest.raises(MCPError):
            await b.read_resource(f"workflow://runs/{rid}")
        app = "ui://workflow-mcp/run-viewer.html"  # the run viewer App: one page for everyone, no run in it
        assert [r.uri for r in (await b.list_resources()).resources] == [app]
        assert [r.uri for r in (await a.list_resources()).resources] == [app, f"workflow://runs/{rid}"]
        assert data(await call(a, "workflow_run_status", {"runId": rid}))["status"] == "running"
        assert data(await call(a, "workflow_run_cancel", {"runId": rid}))["status"] == "cancelled"


async def test_idempotency_keys_are_scoped_to_their_client(env: Env) -> None:
    env.workflow("hello", HELLO)
    trust = (str(env.project),)
    run = {"name": "hello", "provider": "fake", "idempotencyKey": "same", "waitMs": 20_000}
    async with (
        Client(env.server(trust=trust, principal=Principal("http:alice", scoped=True))) as a,
        Client(env.server(trust=trust, principal=Principal("http:bob", scoped=True))) as b,
    ):
        with anyio.fail_after(BOUND_S):
            ra = data(await call(a, "workflow_run", run))
            rb = data(await call(b, "workflow_run", run))
    assert ra["runId"] != rb["runId"] and ra["deduplicated"] is False and rb["deduplicated"] is False


async def test_run_limits_are_ceilings_the_caller_can_lower_but_not_raise(env: Env) -> None:
    env.workflow("hello", HELLO)
    policy = ServerPolicy(max_concurrency=2, max_token_budget=100)
    async with connect(env.trusted_server(policy=policy)) as c:
        wide = data(
            await call(
                c,
                "workflow_run",
                {
                    "name": "hello",
                    "provider": "fake",
                    "concurrency": 8,
                    "tokenBudget": 5000,
                    "waitMs": 20_000,
                },
            )
        )
        narrow = data(
            await call(
                c,
                "workflow_run",
                {"name": "hello", "provider": "fake", "concurrency": 1, "tokenBudget": 10, "waitMs": 20_000},
            )
        )
    for rid, (concurrency, budget) in ((wide["runId"], (2, 100)), (narrow["runId"], (1, 10))):
        started = env.service.events(rid, 0, 1)[0].payload
        assert (started["concurrency"], started["tokenBudget"]) == (concurrency, budget)


async def test_runs_beyond_the_servers_cap_are_refused_with_the_limit_until_one_ends(env: Env) -> None:
    env.workflow("hello", HELLO)
    async with connect(env.trusted_server(policy=ServerPolicy(max_runs=1))) as c:
        first = data(
            await call(
                c, "workflow_run", {"name": "hello", "provider": "fake", "fakeScript": PARK, "waitMs": 0}
            )
        )["runId"]
        await wait_for_event(c, first, "agent.started")
        refused = await call(c, "workflow_run", {"name": "hello", "provider": "fake"})
        agent = await call(c, "agent_run", {"prompt": "hi", "provider": "fake", "waitMs": 0})
        assert [r.run_id for r in env.service.list_runs()] == [first]  # nothing else was started
        for result in (refused, agent):
            assert result.is_error and "limit of concurrent runs (max_runs 1" in text(result)
            assert "workflow-mcp serve --max-runs N" in text(result) and "workflow_run_cancel" in text(result)
        assert data(await call(c, "workflow_run_cancel", {"runId": first}))["status"] == "cancelled"
        again = data(await call(c, "workflow_run", {"name": "hello", "provider": "fake", "waitMs": 20_000}))
    assert again["status"] == "completed"
