"""Runs through the MCP tools (in-memory client): foreground waits with progress, durable event
cursors, bounded snapshots, await/cancel semantics, idempotency, resume, run ownership, notifications."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import ResourceUpdatedNotification

from helpers import counted_provider
from mcp_kit import HELLO, PARK, STEPS, Env, all_events, call, connect, data, text, wait_for_event

pytestmark = pytest.mark.anyio


async def test_a_foreground_run_returns_its_outcome_with_result_logs_and_token_usage(env: Env) -> None:
    env.workflow("hello", HELLO)
    script = {"default": {"tokens": {"input": 3, "output": 5}}}
    async with connect(env.trusted_server()) as c:
        result = await call(
            c,
            "workflow_run",
            {
                "name": "hello",
                "provider": "fake",
                "fakeScript": script,
                "args": {"who": "ada"},
                "waitMs": 20_000,
            },
        )
    out = data(result)
    assert not result.is_error
    assert out["status"] == "completed" and out["terminal"] is True and out["workflow"] == "hello"
    assert out["result"] == {"a": "hello ada", "args": {"who": "ada"}}
    assert out["logs"] == ["greeted hello ada"]
    assert out["tokenUsage"]["input"] == 3 and out["tokenUsage"]["output"] == 5
    assert text(result).startswith(f"Run {out['runId']} (hello) completed.")


async def test_args_omitted_and_args_null_stay_different(env: Env) -> None:
    env.workflow("hello", HELLO)
    async with connect(env.trusted_server()) as c:
        omitted = data(await call(c, "workflow_run", {"name": "hello", "provider": "fake", "waitMs": 20_000}))
        null = data(
            await call(
                c, "workflow_run", {"name": "hello", "provider": "fake", "args": None, "waitMs": 20_000}
            )
        )
    assert omitted["result"]["args"] == "undefined"
    assert null["result"]["args"] is None


async def test_wait_zero_returns_the_run_handle_at_once_and_the_run_keeps_going(env: Env) -> None:
    env.workflow("hello", HELLO)
    async with connect(env.trusted_server()) as c:
        handle = data(
            await call(
                c, "workflow_run", {"name": "hello", "provider": "fake", "fakeScript": PARK, "waitMs": 0}
            )
        )
        assert handle["terminal"] is False and handle["workflow"] == "hello"
        assert "result" not in handle and "logs" not in handle
        await wait_for_event(c, handle["runId"], "agent.started")
        cancelled = data(await call(c, "workflow_run_cancel", {"runId": handle["runId"]}))
    assert cancelled == {"runId": handle["runId"], "outcome": "cancelling", "status": "cancelled"}


async def test_progress_notifications_arrive_while_waiting_in_the_foreground(env: Env) -> None:
    env.workflow("steps", STEPS)
    seen: list[tuple[float, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, message))

    async with connect(env.trusted_server()) as c:
        out = data(
            await call(
                c,
                "workflow_run",
                {"name": "steps", "provider": "fake", "args": {"n": 3}, "waitMs": 20_000},
                progress_callback=progress,
            )
        )
    assert out["status"] == "completed"
    values = [v for v, _ in seen]
    assert values and values == sorted(values) and len(set(values)) == len(values)
    assert seen[-1][1] is not None and "3/3 agent calls done" in seen[-1][1]


async def test_the_event_cursor_pages_through_every_event_exactly_once(env: Env) -> None:
    env.workflow("steps", STEPS)
    async with connect(env.trusted_server()) as c:
        rid = data(await call(c, "workflow_run", {"name": "steps", "provider": "fake", "waitMs": 20_000}))[
            "runId"
        ]
        events = await all_events(c, rid)
        first = data(await call(c, "workflow_run_events", {"runId": rid, "after": 0, "limit": 4}))
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["type"] == "run.started" and events[-1]["type"] == "run.completed"
    assert all(e["runId"] == rid and e["eventId"] == f"{rid}:{e['sequence']}" for e in events)
    assert first["nextCursor"] == 4 and first["hasMore"] is True and first["terminal"] is True


async def test_a_long_poll_returns_as_soon_as_the_next_event_is_committed(env: Env) -> None:
    env.workflow("hello", HELLO)
    async with connect(env.trusted_server()) as c:
        rid = data(
            await call(
                c, "workflow_run", {"name": "hello", "provider": "fake", "fakeScript": PARK, "waitMs": 0}
            )
        )["runId"]
        started = await wait_for_event(c, rid, "agent.started")
        async with anyio.create_task_group() as tg:
            pages: list[dict[str, Any]] = []

            async def poll() -> None:
                pages.append(
                    data(
                        await call(
                            c, "workflow_run_events", {"runId": rid, "after": started, "waitMs": 25_000}
                        )
                    )
                )

            tg.start_soon(poll)
            await call(c, "workflow_run_cancel", {"runId": rid})
    (page,) = pages
    assert page["events"] and page["events"][0]["sequence"] == started + 1


async def test_the_status_snapshot_is_bounded_filtered_and_never_shows_prompts_or_args(env: Env) -> None:
    noisy = (
        "export const meta = { name: 'noisy', description: 'many calls and long logs' }\n"
        "for (let i = 0; i < 30; i++) {\n"
        "  await agent('SECRET-PROMPT ' + args.secret + ' ' + i, { label: (i % 2 ? 'odd-' : 'even-') + i })\n"
        "  log('x'.repeat(2000))\n"
        "}\n"
        "return 'ok'\n"
    )
    env.workflow("noisy", noisy)
    async with connect(env.trusted_server()) as c:
        rid = data(
            await call(
                c,
                "workflow_run",
                {"name": "noisy", "provider": "fake", "args": {"secret": "S3CR3T"}, "waitMs": 20_000},
            )
        )["runId"]
        full = data(await call(c, "workflow_run_status", {"runId": rid, "lastN": 200, "logLines": 200}))
        odd = data(await call(c, "workflow_run_status", {"runId": rid, "labelGlob": "odd-*", "lastN": 3}))
    wire = json.dumps(full)
    assert len(wire.encode()) <= 16_384 and full["truncated"] is True
    assert all(len(line) <= 500 for line in full["logTail"])
    # The fake echoes prompts into results, so previews are the one place a prompt could leak from:
    # they are bounded, and the snapshot never carries the prompt or args fields themselves.
    assert "args" not in full and "prompt" not in wire.lower().replace("secret-prompt", "")
    assert [a["label"] for a in odd["recentCalls"]] == ["odd-25", "odd-27", "odd-29"]
    assert full["counts"]["completed"] == 30 and full["status"] == "completed"


async def test_the_status_snapshot_shows_the_phase_list_meta_phases_first(env: Env) -> None:
    env.workflow(
        "phased",
        "export const meta = { name: 'phased', description: 'd', phases: [{ title: 'Plan' }, { title: 'Never' }] }\n"
        "phase('Plan')\nawait agent('p')\nawait agent('q', { phase: 'Adhoc' })\nreturn 1\n",
    )
    async with connect(env.trusted_server()) as c:
        rid = data(await call(c, "workflow_run", {"name": "phased", "provider": "fake", "waitMs": 20_000}))[
            "runId"
        ]
        snap = data(await call(c, "workflow_run_status", {"runId": rid}))
        titles = [e["payload"]["title"] for e in await all_events(c, rid) if e["type"] == "phase.started"]
    assert snap["phases"] == [
        {"title": "Plan", "status": "completed"},
        {"title": "Never", "status": "pending"},
        {"title": "Adhoc", "status": "completed"},
    ]
    assert titles == ["Plan", "Never", "Adhoc"]


async def test_cancelling_an_await_leaves_the_run_running(env: Env) -> None:
    env.workflow("hello", HELLO)
    async with connect(env.trusted_server()) as c:
        rid = data(
            await call(
                c, "workflow_run", {"name": "hello", "provider": "fake", "fakeScript": PARK, "waitMs": 0}
            )
        )["runId"]
        await wait_for_event(c, rid, "agent.started")
        with anyio.move_on_after(0.3):  # the client gives up waiting; the server's wait is cancelled
            await c.call_tool("workflow_run_await", {"runId": rid, "waitMs": 25_000})
        still = data(await call(c, "workflow_run_await", {"runId": rid, "waitMs": 0}))
        assert still["status"] == "running" and still["terminal"] is False
        await call(c, "workflow_run_cancel", {"runId": rid})
        ended = data(await call(c, "workflow_run_await", {"runId": rid, "waitMs": 20_000}))
    assert ended["status"] == "cancelled" and ended["terminal"] is True


async def test_a_cancelled_run_resumes_and_replays_its_finished_calls(env: Env) -> None:
    env.workflow("steps", STEPS)
    # The first two calls answer at once; the third parks until the run is cancelled.
    script = {
        "rules": [{"match": {"prompt": "^step [01]$"}, "respond": {"tokens": {"output": 7}}}],
        "default": PARK["default"],
    }
    async with connect(env.trusted_server()) as c:
        first = data(
            await call(
                c,
                "workflow_run",
                {"name": "steps", "provider": "fake", "fakeScript": script, "args": {"n": 3}, "waitMs": 0},
            )
        )["runId"]
        await wait_for_event(c, first, "agent.started", count=3)
        assert data(await call(c, "workflow_run_cancel", {"runId": first}))["status"] == "cancelled"
        # The resume would keep the run's fake script (whose third call parks): answer it instead.
        answer = {"provider": "fake", "fakeScript": {"default": {"text": "done"}}}
        resumed = data(await call(c, "workflow_run", {"resumeFromRunId": first, **answer, "waitMs": 20_000}))
    assert resumed["status"] == "completed" and resumed["result"] == 3 and resumed["resumedFrom"] == first
    assert resumed["tokenUsage"]["replayedOutput"] == 14  # two replayed calls, stored args reused


async def test_workflow_run_builds_a_provider_once_for_all_runs_of_a_configuration_and_closes_it(
    env: Env,
) -> None:
    env.workflow("hello", HELLO)
    with counted_provider() as built:
        async with connect(env.trusted_server()) as c:
            for _ in range(3):
                out = data(
                    await call(c, "workflow_run", {"name": "hello", "provider": "counted", "waitMs": 20_000})
                )
                assert out["status"] == "completed" and out["result"]["a"] == "counted hello undefined"
        assert len(built) == 1 and not built[0].closed  # not one per call, nor two (resolver and body)
        await env.service.shutdown()
    assert built[0].closed


async def test_the_same_idempotency_key_yields_one_run_sequentially_and_concurrently(env: Env) -> None:
    env.workflow("hello", HELLO)
    call_args = {"name": "hello", "provider": "fake", "idempotencyKey": "deploy-42", "waitMs": 20_000}
    async with connect(env.trusted_server()) as c:
        results: list[dict[str, Any]] = []

        async def run() -> None:
            results.append(data(await call(c, "workflow_run", call_args)))

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(run)
        again = data(await call(c, "workflow_run", call_args))
    assert len({r["runId"] for r in [*results, again]}) == 1
    assert sorted(r["deduplicated"] for r in results) == [False, True, True, True]
    assert again["deduplicated"] is True and again["status"] == "completed"
    assert len(env.service.list_runs()) == 1


async def test_a_run_outlives_the_client_that_started_it(env: Env) -> None:
    env.workflow("steps", STEPS)
    server = env.trusted_server()
    slow = {"default": {"delayMs": 20}}
    async with Client(server) as c:
        rid = data(
            await call(
                c, "workflow_run", {"name": "steps", "provider": "fake", "fakeScript": slow, "args": {"n": 8}}
            )
        )["runId"]
        early = data(await call(c, "workflow_run_events", {"runId": rid, "after": 0, "limit": 2}))
    async with connect(server) as again:
        events = list(early["events"])
        cursor = early["nextCursor"]
        while True:
            page = data(
                await call(again, "workflow_run_events", {"runId": rid, "after": cursor, "waitMs": 5000})
            )
            events += page["events"]
            cursor = page["nextCursor"]
            if page["terminal"] and not page["hasMore"]:
                break
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["type"] == "run.completed" and events[-1]["payload"]["result"] == 8


async def test_subscribed_clients_are_told_when_a_run_changes(env: Env) -> None:
    env.workflow("hello", HELLO)
    server = env.trusted_server()
    async with connect(server) as c:
        rid = data(
            await call(
                c, "workflow_run", {"name": "hello", "provider": "fake", "fakeScript": PARK, "waitMs": 0}
            )
        )["runId"]
        uri = f"workflow://runs/{rid}"
        await wait_for_event(c, rid, "agent.started")
        async with c.listen(resource_subscriptions=[uri]) as sub:
            await call(c, "workflow_run_cancel", {"runId": rid})
            async for event in sub:
                assert getattr(event, "uri", None) == uri
                break


async def test_handshake_era_clients_subscribe_with_resources_subscribe(env: Env) -> None:
    env.workflow("hello", HELLO)
    updated = anyio.Event()
    uris: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            uris.append(str(message.params.uri))
            updated.set()

    async with connect(env.trusted_server(), mode="legacy", message_handler=on_message) as c:
        assert c.server_capabilities.resources is not None and c.server_capabilities.resources.subscribe
        rid = data(
            await call(
                c, "workflow_run", {"name": "hello", "provider": "fake", "fakeScript": PARK, "waitMs": 0}
            )
        )["runId"]
        await wait_for_event(c, rid, "agent.started")
        with pytest.warns(MCPDeprecationWarning, match="resources/subscribe"):
            await c.session.subscribe_resource(f"workflow://runs/{rid}")
        await call(c, "workflow_run_cancel", {"runId": rid})
        await updated.wait()
    assert f"workflow://runs/{rid}" in uris


async def test_finished_runs_leave_memory_but_stay_readable(env: Env) -> None:
    env.workflow("hello", HELLO)
    async with connect(env.trusted_server()) as c:
        ids = [
            data(await call(c, "workflow_run", {"name": "hello", "provider": "fake", "waitMs": 20_000}))[
                "runId"
            ]
            for _ in range(3)
        ]
        assert env.service.prune_finished(keep=1) == 2
        assert list(env.service.live) == ids[-1:]
        first = data(await call(c, "workflow_run_await", {"runId": ids[0], "waitMs": 0}))
        events = await all_events(c, ids[0])
    assert first["status"] == "completed" and events[-1]["type"] == "run.completed"
