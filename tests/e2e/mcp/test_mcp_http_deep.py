"""A request body past the SDK's 4 MiB limit gets a 413 naming it; a request nested deeper than the Streamable HTTP transport's JSON reader goes (the MCP SDK's
``pydantic_core.from_json`` stops at 200 levels) gets an invalid-params error for its own ``id`` that
names the rule and both limits, as stdio names ``too-deep``, instead of the SDK's bare "Parse error:
recursion limit exceeded" with no ``id``; the server keeps serving. One real ``serve --http``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx2
import pytest
from mcp import MCPError

from mcp_serve_kit import ALICE, INITIALIZE, Site, http_client, http_server, secret

pytestmark = pytest.mark.anyio

HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "Authorization": f"Bearer {secret(ALICE)}",
}


def _call(ident: int, levels: int) -> bytes:
    deep = "[" * levels + "]" * levels
    return (
        f'{{"jsonrpc": "2.0", "id": {ident}, "method": "tools/call", "params": {{"name": "workflow_validate", '
        f'"arguments": {{"script": "return 1", "x": {deep}}}}}}}'
    ).encode()


async def test_a_request_nested_past_the_http_reader_is_refused_for_its_id_naming_the_limits(
    site: Site,
) -> None:
    async with http_server(site) as server, httpx2.AsyncClient(timeout=30) as raw:
        opened = await raw.post(server.url, headers=HEADERS, json=INITIALIZE)
        assert opened.status_code == 200, opened.text
        session = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
        await raw.post(
            server.url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        for ident, levels in ((2, 199), (3, 300), (4, 100_000)):
            answer = await raw.post(server.url, headers=session, content=_call(ident, levels))
            assert answer.status_code == 400, answer.text
            error = answer.json()
            assert error["id"] == ident
            assert error["error"]["code"] == -32602
            message = error["error"]["message"]
            assert "deeper than 200 levels" in message and "at most 256 levels" in message
            assert "rule too-deep, MAX_VALUE_DEPTH" in message
        # Shallower than the reader's limit goes on to the tool (which names the unknown argument).
        shallow = await raw.post(server.url, headers=session, content=_call(5, 150))
        assert shallow.status_code == 200 and "unknown argument 'x'" in shallow.text
        # A body past the SDK's limit is refused naming it, declared or not; the session goes on.
        big = (
            b'{"jsonrpc": "2.0", "id": 6, "method": "ping", "params": {"x": "'
            + b"a" * (4 * 1024 * 1024)
            + b'"}}'
        )

        async def chunked() -> AsyncIterator[bytes]:
            yield big[:1000]
            yield big[1000:]

        for declared in (big, chunked()):  # Content-Length, then chunked
            over = await raw.post(server.url, headers=session, content=declared)
            assert over.status_code == 413, over.text
            assert "over 4,194,304 bytes" in over.json()["message"]
        # A declared length of 40 digits, on a raw socket (no client would send it): refused unread
        # (by the HTTP parser itself: 400).
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        head = "".join(f"{k}: {v}\r\n" for k, v in session.items())
        writer.write(
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n{head}content-length: {'9' * 40}\r\n\r\n".encode()
        )
        await writer.drain()
        async with asyncio.timeout(30):
            status = await reader.readline()
        writer.close()
        assert status.startswith((b"HTTP/1.1 400", b"HTTP/1.1 413")), status
        # The SDK's own client sees the refusal as the call's error, and the server still serves it.
        async with http_client(server.url, ALICE) as client:
            with pytest.raises(MCPError, match="rule too-deep"):
                await client.call_tool("workflow_validate", {"script": json.loads("[" * 199 + "]" * 199)})
            tools = await client.list_tools()
            assert any(t.name == "workflow_validate" for t in tools.tools)
