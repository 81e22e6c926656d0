"""Two HTTP clients of one real ``workflow-mcp serve --http`` (each its own bearer token): neither hears
of the other's runs through subscriptions (``subscriptions/listen``, ``resources/subscribe``), and
neither can probe or borrow the other's approvals. Every wait is bounded."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated

from mcp_kit import BOUND_S, HELLO, PARK, approve, call, data, text, wait_for_event
from mcp_serve_kit import ALICE, BOB, CLI, Site, http_client, http_server

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


# -- approvals ------------------------------------------------------------------------------------
INLINE = HELLO.replace("greeted", "inline-greeted")
"""An inline script: never under a --trust directory, so it runs only once approved."""


def sha(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


async def local_run(site: Site, name: str) -> str:
    """Run a workflow file outside every project root with the CLI (the local user's run, never
    approved over MCP) on the server's state; returns its run id."""
    secret_file = site.home / f"{name}.js"
    secret_file.write_text(f"export const meta = {{ name: '{name}', description: 'private' }}\nreturn 1\n")
    proc = await asyncio.create_subprocess_exec(
        CLI,
        "run",
        str(secret_file),
        "--provider",
        "fake",
        "--events",
        "jsonl",
        cwd=str(site.home),
        env=site.env(),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(BOUND_S):
        _, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return str(json.loads(err.decode().splitlines()[0])["runId"])


async def test_a_client_is_never_asked_about_another_clients_run_and_learns_nothing(site: Site) -> None:
    theirs = await local_run(site, "secret-plan")
    bob_asked = approve(True)
    async with (
        http_server(site) as server,
        http_client(server.url, BOB, elicitation_callback=bob_asked) as bob,
    ):
        with anyio.fail_after(BOUND_S):
            probe = await call(bob, "workflow_run", {"resumeFromRunId": theirs, "provider": "fake"})
            nothing = await call(bob, "workflow_run", {"resumeFromRunId": "run_0000", "provider": "fake"})
    # Nobody asked Bob's user about (or named) a workflow of a run Bob may not see…
    assert bob_asked.asked == []  # type: ignore[attr-defined]
    assert probe.is_error and "is visible to this client" in text(probe) and "secret-plan" not in text(probe)
    # …and another's run reads exactly like no run at all, apart from the id.
    assert text(probe).replace(theirs, "ID") == text(nothing).replace("run_0000", "ID")


async def test_an_approval_lets_only_the_client_that_gave_it_run_the_source(site: Site) -> None:
    alice_asked, bob_asked = approve(True), approve(False)
    run = {"script": INLINE, "provider": "fake", "waitMs": 20_000}
    async with (
        http_server(site) as server,
        http_client(server.url, ALICE, elicitation_callback=alice_asked) as alice,
        http_client(server.url, BOB, elicitation_callback=bob_asked) as bob,
        http_client(server.url, BOB) as bob_without_elicitation,
    ):
        with anyio.fail_after(BOUND_S):
            first = data(await call(alice, "workflow_run", run))
            again = data(await call(alice, "workflow_run", run))
            declined = await call(bob, "workflow_run", run)
            refused = await call(bob_without_elicitation, "workflow_run", run)
    assert first["status"] == again["status"] == "completed"
    assert len(alice_asked.asked) == 1 and len(bob_asked.asked) == 1  # type: ignore[attr-defined]
    assert declined.is_error and "did not approve" in text(declined)
    assert refused.is_error and "never been approved" in text(refused)
    stored = json.loads((site.state / "approvals.json").read_text())
    assert [(a["sourceHash"], a["by"]) for a in stored["approvals"]] == [(sha(INLINE), "http:alice")]


async def test_a_damaged_approvals_file_is_copied_aside_and_every_legible_approval_kept(site: Site) -> None:
    other = HELLO.replace("greeted", "other-greeted")
    site.state.mkdir(parents=True, exist_ok=True)
    path = site.state / "approvals.json"
    # Version 1, cut short in its second entry (a crash mid-write by an older release, a full disk…).
    damaged = (
        '{"approved": {"' + sha(INLINE) + '": {"name": "hello", "path": null, "by": "http:alice", '
        '"approvedAt": "2026-01-01T00:00:00Z"}, "' + sha(other) + '": {"name": "hello", "pa'
    )
    path.write_text(damaged)
    path.chmod(0o600)
    alice_asked, bob_asked = approve(True), approve(False)
    async with http_server(site) as server:
        warning = await server.stderr_line("approvals file")
        async with (
            http_client(server.url, ALICE, elicitation_callback=alice_asked) as alice,
            http_client(server.url, BOB, elicitation_callback=bob_asked) as bob,
        ):
            with anyio.fail_after(BOUND_S):
                kept = data(
                    await call(
                        alice, "workflow_run", {"script": INLINE, "provider": "fake", "waitMs": 20_000}
                    )
                )
                await call(bob, "workflow_run", {"script": INLINE, "provider": "fake", "waitMs": 20_000})
    (backup,) = site.state.glob("approvals.json.damaged-*")
    assert backup.read_text() == damaged and oct(backup.stat().st_mode & 0o777) == "0o600"
    assert str(backup) in warning and str(path) in warning and "1 approval(s) could still be read" in warning
    assert "approved again" in warning
    assert kept["status"] == "completed" and alice_asked.asked == []  # type: ignore[attr-defined]
    assert len(bob_asked.asked) == 1  # type: ignore[attr-defined]
    stored = json.loads(path.read_text())
    assert stored["version"] == 2 and [a["sourceHash"] for a in stored["approvals"]] == [sha(INLINE)]
