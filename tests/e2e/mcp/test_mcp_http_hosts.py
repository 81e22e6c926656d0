"""``workflow-mcp serve --http`` bound beyond loopback answers its remote clients: a wildcard bind
serves clients that connect by one of the machine's addresses, ``--allowed-host`` adds names (a DNS name,
a proxy's), and the DNS-rebinding guard still refuses every other name. Every wait is bounded."""

from __future__ import annotations

import asyncio
import socket

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_kit import BOUND_S, call, data
from mcp_serve_kit import ALICE, CLI, INITIALIZE, Site, http_client, http_server, secret

pytestmark = pytest.mark.anyio


def outward_address() -> str:
    """An address of this machine other than 127.0.0.1: the one its default route leaves from (no
    packet is sent), else 127.0.0.2 (any 127/8 address reaches a wildcard bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
            address = str(probe.getsockname()[0])
        except OSError:
            address = "127.0.0.1"
    return address if address != "127.0.0.1" else "127.0.0.2"


async def test_a_wildcard_bind_serves_clients_that_connect_by_the_machines_address(site: Site) -> None:
    address = outward_address()
    async with http_server(site, args=("--host", "0.0.0.0")) as server:
        with anyio.fail_after(BOUND_S):
            async with http_client(f"http://{address}:{server.port}/mcp", ALICE) as remote:
                out = data(
                    await call(
                        remote, "workflow_run", {"name": "hello", "provider": "fake", "waitMs": 20_000}
                    )
                )
            async with httpx2.AsyncClient(timeout=BOUND_S) as h:
                rebound = await h.post(
                    f"http://{address}:{server.port}/mcp",
                    json=INITIALIZE,
                    headers={
                        "Host": f"rebind.evil.example:{server.port}",
                        "Authorization": f"Bearer {secret(ALICE)}",
                        "Accept": "application/json, text/event-stream",
                    },
                )
        banner = await server.stderr_line("serving MCP")
    assert out["status"] == "completed"
    assert rebound.status_code == 403 and rebound.json()["error"] == "forbidden_host"
    assert "--allowed-host NAME" in rebound.json()["message"]
    assert "the address each connection arrived on" in banner


async def test_allowed_hosts_add_names_and_the_rest_stay_refused(site: Site) -> None:
    args = ("--host", "0.0.0.0", "--allowed-host", "mcp.example", "--allowed-host", "proxy.internal:443")
    async with http_server(site, args=args) as server, httpx2.AsyncClient(timeout=BOUND_S) as h:
        url = f"http://127.0.0.1:{server.port}/mcp"
        auth = {"Authorization": f"Bearer {secret(ALICE)}", "Accept": "application/json, text/event-stream"}
        statuses = {}
        for host in (
            f"mcp.example:{server.port}",
            "mcp.example",
            "proxy.internal:443",
            "proxy.internal",
            "other.example",
        ):
            response = await h.post(url, json=INITIALIZE, headers={**auth, "Host": host})
            statuses[host] = response.status_code
        # The SDK client, through a name only --allowed-host makes known (as a proxy would send it).
        named = {"Authorization": f"Bearer {secret(ALICE)}", "Host": "mcp.example"}
        with anyio.fail_after(BOUND_S):
            async with (
                httpx2.AsyncClient(headers=named, timeout=httpx2.Timeout(30, read=60)) as via_proxy,
                Client(streamable_http_client(url, http_client=via_proxy)) as client,
            ):
                providers = data(await call(client, "providers_list", {}))
    assert any(p["name"] == "fake" for p in providers["providers"])
    assert statuses == {
        f"mcp.example:{server.port}": 200,
        "mcp.example": 200,
        "proxy.internal:443": 200,
        "proxy.internal": 403,
        "other.example": 403,
    }


async def test_a_wildcard_allowed_host_is_refused_for_a_loopback_bind(site: Site) -> None:
    proc = await asyncio.create_subprocess_exec(
        CLI,
        "serve",
        "--http",
        "--allowed-host",
        "*",
        cwd=str(site.project),
        env=site.env(WORKFLOW_MCP_TOKEN=ALICE),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(BOUND_S):
        _, err = await proc.communicate()
    assert proc.returncode == 2
    assert "keeps" in err.decode() and "--allowed-host NAME" in err.decode()
