"""Two HTTP clients of one real ``workflow-mcp serve --http`` (each its own bearer token): neither hears
of the other's runs through subscriptions (``subscriptions/listen``, ``resources/subscribe``), and
neither can probe or borrow the other's approvals. Every wait is bounded."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated

from mcp_kit import BOUND_S, PARK, call, data, wait_for_event
from mcp_serve_kit import ALICE, BOB, Site, http_client, http_server

pytestmark = pytest.mark.anyio


async def parked(client: Any) -> str:
    rid = str(
        data(await call(client, "workflow_run", {"name": "hello", "provider": "fake", "fakeScript": PARK}))[
            "runId"
        ]
    )
    await wait_for_event(client, rid, "agent.started")
    return rid


async def test_a_listening_client_hears_only_of_its_own_runs(site: Site) -> None:
    async with (
        http_server(site) as server,
        http_client(server.url, ALICE) as alice,
        http_client(server.url, BOB) as bob,
    ):
        with anyio.fail_after(BOUND_S):
            hers, his = await parked(alice), await parked(bob)
            her_uri, his_uri = f"workflow://runs/{hers}", f"workflow://runs/{his}"
            heard: list[Any] = []
            # Bob names Alice's run as well as his own, and asks for list changes.
            async with bob.listen(
                resources_list_changed=True, resource_subscriptions=[her_uri, his_uri]
            ) as bob_hears:
                async with alice.listen(
                    resources_list_changed=True, resource_subscriptions=[her_uri]
                ) as alice_hears:
                    await call(alice, "workflow_run", {"name": "hello", "provider": "fake", "waitMs": 20_000})
                    await call(alice, "workflow_run_cancel", {"runId": hers})
                    alice_heard = set()
                    async for event in alice_hears:  # Alice hears of both: her list and her run
                        alice_heard.add(type(event))
                        if alice_heard == {ResourcesListChanged, ResourceUpdated}:
                            break
                # Bob's own run changes last; everything he heard before it is what leaked, if anything.
                await call(bob, "workflow_run_cancel", {"runId": his})
                async for event in bob_hears:
                    heard.append(event)
                    if isinstance(event, ResourceUpdated) and event.uri == his_uri:
                        break
    assert heard == [ResourceUpdated(uri=his_uri)], heard


async def test_a_handshake_era_client_cannot_subscribe_to_another_clients_run(site: Site) -> None:
    async with (
        http_server(site) as server,
        http_client(server.url, ALICE) as alice,
        http_client(server.url, BOB, mode="legacy") as bob,
    ):
        with anyio.fail_after(BOUND_S):
            hers = await parked(alice)
            with pytest.warns(MCPDeprecationWarning), pytest.raises(MCPError, match="visible to this client"):
                await bob.session.subscribe_resource(f"workflow://runs/{hers}")
            await call(alice, "workflow_run_cancel", {"runId": hers})
