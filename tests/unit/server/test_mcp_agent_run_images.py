"""Image attachments of ``agent_run`` (the SDK's in-memory ``Client(server)``, the real service, the
``openai`` provider against the loopback Chat Completions mock): they reach the model as image
parts, are stored with the run and handed to it again on resume; an attachment that breaks a rule,
leaves the file scope or goes to a provider without image input is refused before anything starts."""

from __future__ import annotations

import base64
import struct
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from mcp_kit import BOUND_S, Env, call, data

pytestmark = pytest.mark.anyio

_TESTS = str(Path(__file__).resolve().parents[2])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from mocks.mock_chat import MockChat  # noqa: E402
from mocks.mock_chat import Reply as ChatReply  # noqa: E402


def _png() -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00\x80"))
        + chunk(b"IEND", b"")
    )


PNG = _png()
DATA_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


@pytest.fixture
def chat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MockChat]:
    """The mock, and a user configuration whose ``openai`` provider reaches it."""
    pytest.importorskip("openai", reason="the openai extra is not installed")
    monkeypatch.setenv("MOCK_CHAT_KEY", "sk-mock-key")
    with MockChat() as mock:
        user = tmp_path / "user-home"
        user.mkdir()
        (user / "config.toml").write_text(
            "[providers.openai]\n"
            f'model = "mock-model"\nbase_url = "{mock.base_url}"\napi_key_env = "MOCK_CHAT_KEY"\nmax_retries = 0\n'
        )
        monkeypatch.setenv("WORKFLOW_MCP_HOME", str(user))
        yield mock


def _images(body: Any) -> list[Any]:
    return [
        part["image_url"]["url"]
        for message in body["messages"]
        if isinstance(message["content"], list)
        for part in message["content"]
        if part["type"] == "image_url"
    ]


async def test_an_image_attachment_reaches_the_model_as_an_image_part_and_is_kept_with_the_run(
    env: Env, chat: MockChat
) -> None:
    (env.project / "shot.png").write_bytes(PNG)
    chat.on("what is in", ChatReply(text="a grey dot"))
    async with Client(env.server()) as c:
        with anyio.fail_after(BOUND_S):
            out = data(
                await call(
                    c,
                    "agent_run",
                    {
                        "prompt": "what is in the picture?",
                        "provider": "openai",
                        "attachments": [
                            {"type": "image", "path": "shot.png"},
                            {
                                "type": "image",
                                "data": base64.b64encode(PNG).decode(),
                                "mimeType": "image/png",
                            },
                        ],
                    },
                )
            )
        assert (out["status"], out["result"]) == ("completed", "a grey dot")
        assert _images(chat.received[0].body) == [DATA_URL, DATA_URL]
        (stored,) = (await c.read_resource(f"workflow://runs/{out['runId']}/artifacts/attachment-1")).contents
    assert stored.mime_type == "image/png" and base64.b64decode(getattr(stored, "blob", "")) == PNG


async def test_a_resumed_agent_run_hands_the_model_the_same_images(env: Env, chat: MockChat) -> None:
    from workflow_mcp.service import ProviderChoice

    chat.auth_error = True  # the first attempt pauses for a login
    with anyio.fail_after(BOUND_S):
        handle = env.service.run_agent(
            "what is in the picture?",
            provider=ProviderChoice(name="openai"),
            attachments=[{"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}],
        )
        assert await handle.wait() == "paused"
        chat.auth_error = False
        resumed = await env.service.resume(handle.run_id)
        assert await resumed.result() == "mock final answer"
    assert [_images(r.body) for r in chat.received] == [[DATA_URL], [DATA_URL]]


@pytest.mark.parametrize(
    ("attachments", "says"),
    [
        ([{"type": "image", "data": "AAAA"}], "attachments[0].mimeType: is required with data"),
        ([{"type": "image", "path": "notes.txt"}], "attachments[0].path: is not an image of an allowed type"),
        ([{"type": "image", "path": "../outside.png"}], "outside-roots"),
    ],
)
async def test_a_bad_or_unreachable_attachment_is_an_invalid_params_error_and_starts_nothing(
    env: Env, chat: MockChat, attachments: list[dict[str, Any]], says: str
) -> None:
    (env.project / "notes.txt").write_text("not an image")
    (env.root / "outside.png").write_bytes(PNG)
    async with Client(env.server(confined=True)) as c:
        with pytest.raises(MCPError) as caught:
            await c.call_tool(
                "agent_run", {"prompt": "look", "provider": "openai", "attachments": attachments}
            )
    assert caught.value.error.code == INVALID_PARAMS and says in caught.value.error.message
    assert chat.received == [] and env.service.list_runs() == []


async def test_images_for_a_provider_without_image_input_are_refused_naming_the_capability(env: Env) -> None:
    async with Client(env.server()) as c:
        with pytest.raises(MCPError) as caught:
            await c.call_tool(
                "agent_run",
                {
                    "prompt": "look",
                    "provider": "fake",
                    "attachments": [
                        {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}
                    ],
                },
            )
    assert caught.value.error.code == INVALID_PARAMS
    assert "provider 'fake' has no image input (capability images)" in caught.value.error.message
    assert env.service.list_runs() == []


async def test_an_idempotency_key_returns_the_same_run_for_the_same_images_and_refuses_others(
    env: Env, chat: MockChat
) -> None:
    from workflow_mcp.errors import IdempotencyKeyReusedError
    from workflow_mcp.service import ProviderChoice

    chat.on("look", ChatReply(hold=True))
    image = [{"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}]
    other = [{"type": "image", "data": base64.b64encode(PNG + b"\x00").decode(), "mimeType": "image/png"}]
    choice = ProviderChoice(name="openai")
    try:
        with anyio.fail_after(BOUND_S):
            first = env.service.run_agent("look", provider=choice, attachments=image, idempotency_key="k1")
            again = env.service.run_agent("look", provider=choice, attachments=image, idempotency_key="k1")
            assert again.run_id == first.run_id
            with pytest.raises(IdempotencyKeyReusedError):
                env.service.run_agent("look", provider=choice, attachments=other, idempotency_key="k1")
    finally:
        chat.release()
    with anyio.fail_after(BOUND_S):
        assert await first.result() == "mock final answer"
