"""What one client may hold of a real ``workflow-mcp serve --http``: idle sockets past the file
descriptor limit (EMFILE) never end the process, a connection that does not finish its request head is
closed after the header timeout, and requests past the connection limit get 503. Every wait is bounded;
the only timed waits are the server's own timeouts being measured."""

from __future__ import annotations

import asyncio
import contextlib
import resource
import socket
import time
from collections.abc import Iterator

import anyio
import httpx2
import pytest

from mcp_kit import BOUND_S, call, data
from mcp_serve_kit import ALICE, INITIALIZE, Site, http_client, http_server, secret

pytestmark = pytest.mark.anyio

IDLE = 1_100
SERVER_FILES = 256
HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "Authorization": f"Bearer {secret(ALICE)}",
}


@contextlib.contextmanager
def idle_sockets(port: int, n: int) -> Iterator[list[socket.socket]]:
    """``n`` connected sockets that never send a byte (closed on exit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 200:
        if hard != resource.RLIM_INFINITY and hard < n + 200:
            pytest.skip(f"this process may open only {hard} files; the test needs {n + 200}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (n + 200, hard))
    opened: list[socket.socket] = []
    try:
        for _ in range(n):
            opened.append(socket.create_connection(("127.0.0.1", port), timeout=BOUND_S))
        yield opened
    finally:
        for s in opened:
            s.close()


async def test_idle_sockets_past_the_file_limit_leave_the_server_up_and_serving(site: Site) -> None:
    async with http_server(site, max_open_files=SERVER_FILES) as server:
        with idle_sockets(server.port, IDLE) as opened:
            assert len(opened) == IDLE
            # The server ran out of descriptors while accepting them (it says so once), and is still up.
            await server.stderr_line("Too many open files")
            assert server.proc.returncode is None
        start = time.perf_counter()
        with anyio.fail_after(BOUND_S):
            async with http_client(server.url, ALICE) as c:
                providers = data(await call(c, "providers_list", {}))
        served_after = time.perf_counter() - start
        assert any(p["name"] == "fake" for p in providers["providers"])
        assert server.proc.returncode is None, "".join(server.stderr)
    assert served_after < BOUND_S


async def test_a_connection_that_does_not_finish_its_request_is_closed_after_the_header_timeout(
    site: Site,
) -> None:
    async with http_server(site, args=("--header-timeout", "1")) as server:
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            f"Authorization: Bearer {secret(ALICE)}\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\n"
        )

        async def closed_after(how: str) -> float:
            """Seconds until the server closes a connection that is idle, trickles its head, or sends a
            whole (authenticated) head and trickles its body."""
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            start = time.perf_counter()
            if how == "slow head":
                writer.write(head.encode())
            elif how == "slow body":
                writer.write(f"{head}Content-Length: 100000\r\n\r\n{{".encode())

            async def send_slowly() -> None:
                with contextlib.suppress(ConnectionError):
                    while how != "idle":  # one more byte now and then (the attack's pace), never the end
                        writer.write(b"X" if how == "slow head" else b" ")
                        await writer.drain()
                        await asyncio.sleep(0.1)

            sender = asyncio.create_task(send_slowly())
            try:
                with anyio.fail_after(10):
                    with contextlib.suppress(ConnectionError):
                        assert await reader.read() == b""
                return time.perf_counter() - start
            finally:
                sender.cancel()
                writer.close()

        ways = ("idle", "slow head", "slow body")
        closed = dict(zip(ways, await asyncio.gather(*(closed_after(how) for how in ways)), strict=True))
        assert all(0.9 <= seconds < 5 for seconds in closed.values()), closed
        # A request that takes longer than the header timeout is not cut: it arrived in time.
        async with http_client(server.url, ALICE) as c:
            out = data(
                await call(
                    c,
                    "workflow_run",
                    {
                        "name": "hello",
                        "provider": "fake",
                        "fakeScript": {"default": {"delayMs": 1500}},
                        "waitMs": 20_000,
                    },
                )
            )
        assert out["status"] == "completed"


async def test_requests_past_the_connection_limit_get_503_until_connections_close(site: Site) -> None:
    async with http_server(site, args=("--max-connections", "4")) as server:
        async with httpx2.AsyncClient(timeout=BOUND_S) as h:
            with idle_sockets(server.port, 4):
                busy = await h.post(server.url, json=INITIALIZE, headers=HEADERS)
                assert busy.status_code == 503
            with anyio.fail_after(BOUND_S):
                while True:  # until the server has seen the four sockets close; no sleeping
                    ok = await h.post(server.url, json=INITIALIZE, headers={**HEADERS, "Connection": "close"})
                    if ok.status_code != 503:
                        break
        assert ok.status_code == 200
        assert server.proc.returncode is None
