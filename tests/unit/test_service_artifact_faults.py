"""Image attachments of an agent run when the disk holding the store is full: they are stored before
the run starts, so a run that cannot keep them never calls its agent and the error names the disk and
says what to do; the service keeps serving and the next call, once space is back, runs with them.
A real tiny tmpfs, a real SQLite file."""

from __future__ import annotations

import asyncio
import base64
import os
import struct
import zlib
from pathlib import Path

import pytest

from workflow_mcp import WorkflowService
from workflow_mcp.errors import StoreFullError
from workflow_mcp.providers.base import AgentContext, AgentRequest, AgentResult, ProviderCapabilities
from workflow_mcp.store.sqlite import SqliteStore

from store_faults import fill_disk, tiny_tmpfs

BOUND_S = 60.0


def _png(padding: int) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(b"\x00\x80"))
        + chunk(b"tEXt", os.urandom(padding))  # incompressible, so it really takes the space
        + chunk(b"IEND", b"")
    )


class Seeing:
    """A provider with image input that records every request it gets."""

    name = "seeing"
    capabilities = ProviderCapabilities(images=True)

    def __init__(self) -> None:
        self.requests: list[AgentRequest] = []

    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        self.requests.append(request)
        return AgentResult(text=f"saw {len(request.images)} image(s)")

    async def aclose(self) -> None:
        return None


def _image(data: bytes) -> dict[str, str]:
    return {"type": "image", "data": base64.b64encode(data).decode(), "mimeType": "image/png"}


def test_an_attachment_that_does_not_fit_on_the_disk_stops_the_run_before_its_agent_is_called(
    tmp_path: Path,
) -> None:
    big = _png(1_000_000)
    with tiny_tmpfs(tmp_path / "state", "2m") as home:

        async def scenario() -> None:
            service = WorkflowService(SqliteStore(home / "state.db"), cwd=str(tmp_path))
            provider = Seeing()
            try:
                filler = fill_disk(home, leave=300_000)
                with pytest.raises(StoreFullError) as exc:
                    service.run_agent("describe it", provider=provider, attachments=[_image(big)])
                message = str(exc.value)
                assert f"bytes free at {home})" in message and "could not store its attachment-1" in message
                assert "never ran" in message and "start it again" in message
                assert provider.requests == []
                (refused,) = service.store.list_runs()
                assert service.store.get_artifact(refused.run_id, "attachment-1") is None
                filler.unlink()  # space is back: the service still serves, and the images go along
                handle = service.run_agent("describe it", provider=provider, attachments=[_image(big)])
                assert await asyncio.wait_for(handle.result(), BOUND_S) == "saw 1 image(s)"
                assert [len(r.images) for r in provider.requests] == [1]
                stored = service.store.get_artifact(handle.run_id, "attachment-1")
                assert stored is not None and stored[2] == big
            finally:
                service.store.close()

        asyncio.run(scenario())
