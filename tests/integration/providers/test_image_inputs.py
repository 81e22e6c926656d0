"""An image attachment reaches each model as that provider's own image input (against the loopback
mocks: openai's ``image_url`` parts, Claude's ``image`` blocks, ACP ``image`` content blocks
relayed by codex-acp, the cli provider's image file), and a provider without image input refuses it
naming the capability."""

from __future__ import annotations

import base64
import struct
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mocks.mock_chat import MockChat
from mocks.mock_chat import Reply as ChatReply
from workflow_mcp.providers.base import AgentRequest, ImageInput, ProviderSetupError
from workflow_mcp.providers.cli import CLIProvider
from workflow_mcp.providers.config import ProviderConfig
from workflow_mcp.providers.policy import DEFAULT_POLICY
from workflow_mcp.providers.registry import register_provider, unregister_provider
from workflow_mcp.providers.routing import CapabilityError, build_router

from helpers import arun, call_provider

pytestmark = pytest.mark.timeout(120)


def _png(width: int = 2, height: int = 2) -> bytes:
    """A real PNG (8-bit grey): Claude Code decodes an image before it sends it."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes([0x80] * width) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


PNG = _png()
IMAGE = ImageInput(data=PNG, mime_type="image/png", name="shot.png")
B64 = base64.b64encode(PNG).decode()
_CONTRACT = str(Path(__file__).resolve().parents[2] / "contract")


def ask(provider: Any, prompt: str = "describe the picture", **request: Any) -> Any:
    async def scenario() -> Any:
        try:
            result, _ = await call_provider(
                provider, AgentRequest(prompt=prompt, label="look", images=(IMAGE,), **request)
            )
            return result
        finally:
            await provider.aclose()

    return arun(scenario())


@pytest.fixture
def chat(monkeypatch: pytest.MonkeyPatch) -> Iterator[MockChat]:
    monkeypatch.setenv("MOCK_CHAT_KEY", "sk-mock-key")
    with MockChat() as mock:
        mock.on("describe", ChatReply(text="a tiny picture"))
        yield mock


def _parts(body: dict[str, Any]) -> list[Any]:
    last = [m for m in body.get("messages") or body.get("input") or [] if m.get("role") == "user"][-1]
    content = last["content"]
    assert isinstance(content, list)
    return content


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_openai_sends_an_image_as_an_image_part_after_the_text(chat: MockChat, api: str) -> None:
    pytest.importorskip("openai", reason="the openai extra is not installed")
    from workflow_mcp.providers.openai_compat import OpenAIProvider

    provider = OpenAIProvider.create(
        {"model": "m", "base_url": chat.base_url, "api_key_env": "MOCK_CHAT_KEY", "api": api},
        policy=DEFAULT_POLICY,
        source="test",
    )
    assert provider.capabilities.images
    result = ask(provider)
    assert result.outcome == "completed"
    parts = _parts(dict(chat.received[0].body))
    if api == "chat":
        assert parts == [
            {"type": "text", "text": "describe the picture"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}},
        ]
    else:
        assert parts == [
            {"type": "input_text", "text": "describe the picture"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{B64}"},
        ]


def test_the_cli_provider_hands_the_program_each_image_as_a_file_of_its_type(chat: MockChat) -> None:
    sys.path.insert(0, _CONTRACT)
    from provider_backends import cli_agent_settings

    provider = CLIProvider.create(
        cli_agent_settings(chat.base_url, images=True), policy=DEFAULT_POLICY, source="test"
    )
    result = ask(provider)
    assert (result.outcome, result.text) == ("completed", "a tiny picture")
    # agent_cli.py sent the file it was given as an image_url part: the bytes arrived unchanged.
    assert _parts(dict(chat.received[0].body))[1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{B64}"},
    }


def test_a_cli_provider_that_declares_no_image_input_refuses_the_call_naming_the_capability(
    chat: MockChat,
) -> None:
    sys.path.insert(0, _CONTRACT)
    from provider_backends import cli_agent_settings

    provider = CLIProvider.create(cli_agent_settings(chat.base_url), policy=DEFAULT_POLICY, source="test")
    with pytest.raises(ProviderSetupError, match=r"no image input \(capability images"):
        ask(provider)
    assert chat.received == []


def test_claude_sends_an_image_as_an_image_block_after_the_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("claude_agent_sdk", reason="the claude extra is not installed")
    from mocks.mock_messages import Reply as MessagesReply

    from claude_kit import claude_setup

    with claude_setup(tmp_path, monkeypatch) as setup:
        setup.mock.on("describe", MessagesReply(text="a tiny picture"))
        result = ask(setup.provider(), cwd=str(setup.cwd))
        assert (result.outcome, result.text) == ("completed", "a tiny picture")
        messages = setup.mock.received[0].body["messages"]
        content = [block for m in messages if m["role"] == "user" for block in m["content"]]
        images = [block for block in content if block.get("type") == "image"]
        assert images == [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}}
        ]
        assert any(
            block.get("type") == "text" and "describe the picture" in block["text"] for block in content
        )


def test_acp_sends_an_image_as_an_image_content_block_which_codex_acp_relays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mocks.mock_responses import Reply as ResponsesReply

    from acp_kit import codex_acp_setup

    with codex_acp_setup(tmp_path, monkeypatch) as setup:
        setup.mock.on("describe", ResponsesReply(text="a tiny picture"))
        result = ask(setup.provider(), cwd=str(setup.cwd))
        assert (result.outcome, result.text) == ("completed", "a tiny picture")
        body = setup.mock.received[-1].body
        sent = [
            part
            for item in body.get("input") or []
            if isinstance(item, dict) and item.get("role") == "user"
            for part in item.get("content") or []
            if isinstance(part, dict) and part.get("type") == "input_image"
        ]
        assert [part["image_url"] for part in sent] == [f"data:image/png;base64,{B64}"]


def test_an_acp_agent_whose_initialize_takes_no_images_refuses_the_call_naming_the_capability() -> None:
    pytest.importorskip("acp", reason="the acp extra is not installed")
    from workflow_mcp.providers.acp import ACPProvider

    from acp_kit import stub_settings

    provider = ACPProvider.create(stub_settings(), policy=DEFAULT_POLICY, source="test")
    with pytest.raises(ProviderSetupError, match=r"takes no images .*promptCapabilities.image"):
        ask(provider)


def test_routing_refuses_images_for_a_provider_without_image_input_naming_one_that_has_it(
    chat: MockChat,
) -> None:
    sys.path.insert(0, _CONTRACT)
    from provider_backends import cli_agent_settings

    register_provider("cli", CLIProvider)
    try:
        config = ProviderConfig(
            path="workflow-mcp.toml",
            default="fake",
            settings={"cli": cli_agent_settings(chat.base_url, images=True)},
            rules=(),
        )
        router = build_router(provider=None, config=config, cwd=".")
        refusal = router.refusal(AgentRequest(prompt="p", label="l", images=(IMAGE,)))
        assert isinstance(refusal, CapabilityError)
        assert (
            "provider 'fake' (chosen by default in workflow-mcp.toml) has no image input (capability images)"
            in str(refusal)
        )
        arun(router.aclose())
    finally:
        unregister_provider("cli")
