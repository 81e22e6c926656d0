"""The claude provider runs real Claude Code queries (``claude-agent-sdk``'s bundled CLI) against
the loopback mock Messages API: what only Claude has (its StructuredOutput tool, session resume,
native model aliases, permission modes, the environment it sees) — observed through the engine where
the engine can see the claim. What every provider guarantees is ``tests/contract/``.

Skipped, with the reason, when the ``claude`` extra is not installed."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip(
    "claude_agent_sdk", reason="the claude extra is not installed (pip install -e '.[test,claude]')"
)

from mocks.mock_messages import Reply
from workflow_mcp.providers.base import AgentRequest, CancelSignal
from workflow_mcp.providers.claude import ClaudeProvider, permission_mode_for
from workflow_mcp.providers.config import ProviderConfigError
from workflow_mcp.providers.policy import Policy
from workflow_mcp.providers.registry import available

from claude_kit import ClaudeSetup, call, claude_setup
from helpers import RUN_TIMEOUT_S, Outcome, arun, finish, start

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S * 2)


@pytest.fixture
def claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ClaudeSetup]:
    with claude_setup(tmp_path, monkeypatch) as setup:
        yield setup


async def run_on_claude(claude: ClaudeSetup, body: str, **extra: object) -> Outcome:
    async with claude.router(**extra) as router:
        return await finish(start(body, provider=router, cwd=str(claude.cwd)))


def test_a_schema_call_offers_claudes_structured_output_tool_and_returns_its_value(
    claude: ClaudeSetup,
) -> None:
    claude.mock.on("review", Reply(json={"issues": ["unused import"]}))
    body = """
    const schema = { type: 'object', properties: { issues: { type: 'array', items: { type: 'string' } },
      severity: { type: 'string', enum: ['low', 'high'] } }, required: ['issues'] }
    return await agent('review a.ts', { schema })
    """
    out = arun(run_on_claude(claude, body))
    assert out.status == "completed", out.error
    assert out.result == {"issues": ["unused import"]}
    tool = claude.mock.received[0].structured_tool
    assert tool is not None
    assert tool["input_schema"]["required"] == ["issues"]  # the portable schema, unchanged


def test_the_session_id_is_returned_and_a_request_with_it_resumes_that_conversation(
    claude: ClaudeSetup,
) -> None:
    async def scenario() -> tuple[str | None, str | None]:
        provider = claude.provider()
        first, _ = await call(provider, AgentRequest(prompt="ECHO:one", label="a", cwd=str(claude.cwd)))
        assert first.session
        second, _ = await call(
            provider, AgentRequest(prompt="ECHO:two", label="b", cwd=str(claude.cwd), session=first.session)
        )
        assert second.text == "two-done"
        return first.session, second.session

    arun(scenario())
    one, two = claude.mock.received
    assert (one.prompt, two.prompt) == ("ECHO:one", "ECHO:two")
    assert "ECHO:one" in str(two.body["messages"][0])  # the resumed conversation carries the first turn


def test_the_model_passes_through_and_claude_aliases_are_native(claude: ClaudeSetup) -> None:
    out = arun(run_on_claude(claude, "return await agent('ECHO:m', { model: 'haiku' })"))
    assert out.result == "m-done", out.error
    assert "haiku" in (claude.mock.received[0].model or "")


def test_the_default_policy_accepts_edits_and_never_bypasses_permissions() -> None:
    assert permission_mode_for(Policy()) == "acceptEdits"
    assert permission_mode_for(Policy(sandbox="read-only")) == "plan"
    assert permission_mode_for(Policy(sandbox="danger-full-access")) == "bypassPermissions"
    with pytest.raises(ProviderConfigError, match=r"providers\.claude\.permission_mode"):
        ClaudeProvider.create({"permission_mode": "bypassPermissions"}, policy=Policy(), source="test.toml")


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the child's environment from /proc")
def test_the_claude_process_sees_no_value_of_a_name_outside_the_allowlist(
    claude: ClaudeSetup, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UNRELATED_SECRET_TOKEN", "s3cret")
    claude.mock.on("^env", Reply(hold=True))

    async def scenario() -> dict[str, str]:
        signal = CancelSignal()
        task = asyncio.ensure_future(
            call(claude.provider(), AgentRequest(prompt="env", label="e", cwd=str(claude.cwd)), signal)
        )
        try:
            await asyncio.to_thread(claude.mock.wait_for_prompt, "^env")
            return cli_environ(os.getpid())
        finally:
            signal.cancel("done")
            claude.mock.release()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, 20)

    seen = arun(scenario())
    assert seen.get("UNRELATED_SECRET_TOKEN", "") == ""
    assert seen["ANTHROPIC_BASE_URL"] == claude.mock.base_url
    assert seen["CLAUDE_CONFIG_DIR"] == claude.settings["config_dir"]


def cli_children(parent: int) -> list[dict[str, str]]:
    """The environments of the live claude CLI processes started by process ``parent`` (Linux /proc)."""
    found: list[dict[str, str]] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            raw = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[1]) == parent and b"CLAUDE_AGENT_SDK_VERSION" in b"".join(raw):
            found.append(dict(item.decode().split("=", 1) for item in raw if b"=" in item))
    return found


def cli_environ(parent: int) -> dict[str, str]:
    """The environment of the one claude CLI started by process ``parent``."""
    (env,) = cli_children(parent)
    return env


def test_the_probe_finds_the_bundled_cli_and_a_login_without_revealing_it(claude: ClaudeSetup) -> None:
    info = available("claude", claude.settings)
    assert info.availability.available and info.availability.ready
    assert info.availability.version and info.availability.version[0].isdigit()
    assert info.availability.login == "ANTHROPIC_API_KEY is set"
    assert "dummy" not in str(info.to_json())
