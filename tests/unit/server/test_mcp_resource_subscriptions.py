"""Handshake-era ``resources/subscribe`` subscriptions end with ``resources/unsubscribe`` and with the
client's connection: a server that many clients come to and leave holds only its live clients'
subscriptions. Real MCP clients (the SDK's ``Client``) against the server, in memory."""

from __future__ import annotations

import warnings
from typing import Any

import anyio
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import ResourceUpdatedNotification

from mcp_kit import HELLO, PARK, Env, call, connect, data, wait_for_event


async def test_many_clients_that_subscribe_and_leave_leave_no_subscription_behind(env: Env) -> None:
    env.workflow("hello", HELLO)
    server = env.trusted_server()
    async with connect(server) as c:
        rid = data(await call(c, "workflow_run", {"name": "hello", "provider": "fake"}))["runId"]
    uris = [f"workflow://runs/{rid}", f"workflow://runs/{rid}/events"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        for round_ in range(30):
            async with connect(server, mode="legacy") as first, connect(server, mode="legacy") as second:
                for uri in uris:
                    await first.session.subscribe_resource(uri)
                    await first.session.subscribe_resource(uri)  # again: still one subscription
                await second.session.subscribe_resource(uris[0])
                assert len(server.resource_subscribers) == 3 and server.resource_subscribers.uris == 2
                if round_ % 2:  # half the clients unsubscribe before they leave, half just leave
                    await first.session.unsubscribe_resource(uris[1])
                    assert len(server.resource_subscribers) == 2
            assert len(server.resource_subscribers) == 0, round_
            assert server.resource_subscribers.uris == 0


async def test_an_unsubscribed_client_hears_no_more_updates_and_a_subscribed_one_does(env: Env) -> None:
    env.workflow("hello", HELLO)
    server = env.trusted_server()
    heard: dict[str, list[str]] = {"gone": [], "kept": []}
    kept_heard = anyio.Event()

    def handler(name: str) -> Any:
        async def on_message(message: Any) -> None:
            if isinstance(message, ResourceUpdatedNotification):
                heard[name].append(str(message.params.uri))
                if name == "kept":
                    kept_heard.set()

        return on_message

    async with (
        connect(server, mode="legacy", message_handler=handler("gone")) as gone,
        connect(server, mode="legacy", message_handler=handler("kept")) as kept,
    ):
        rid = data(
            await call(
                kept, "workflow_run", {"name": "hello", "provider": "fake", "fakeScript": PARK, "waitMs": 0}
            )
        )["runId"]
        await wait_for_event(kept, rid, "agent.started")
        uri = f"workflow://runs/{rid}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await gone.session.subscribe_resource(uri)
            await kept.session.subscribe_resource(uri)
            await gone.session.unsubscribe_resource(uri)
        assert server.resource_subscribers.of(uri) != [] and len(server.resource_subscribers) == 1
        await call(kept, "workflow_run_cancel", {"runId": rid})
        with anyio.fail_after(30):
            await kept_heard.wait()
        await call(
            gone, "workflow_run_status", {"runId": rid}
        )  # a round trip: anything sent before it has arrived
    assert uri in heard["kept"]
    assert heard["gone"] == []
