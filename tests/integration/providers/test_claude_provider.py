"""The claude provider runs real Claude Code queries (``claude-agent-sdk``'s bundled CLI) against
the loopback mock Messages API: text and schema calls, failures, auth, cancellation, resume and
policy — observed through the engine where the engine can see the claim.

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
from workflow_mcp.providers.base import AgentRequest, CancelSignal, ProviderAuthError
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


def test_a_text_call_returns_the_models_answer_streams_it_and_charges_its_output_tokens(
    claude: ClaudeSetup,
) -> None:
    claude.mock.on("ECHO:ping", Reply(text="ping-done", tokens=(10, 5, 3, 2)))
    out = arun(run_on_claude(claude, "return await agent('say ECHO:ping', { label: 'hi' })"))
    assert out.status == "completed", out.error
    assert out.result == "ping-done"
    assert [e.payload["text"] for e in out.of("agent.output.delta")] == ["ping-done"]
    (done,) = out.of("agent.completed")
    assert done.payload["tokenUsage"] == {"input": 10, "output": 5, "cacheRead": 3, "cacheWrite": 2}
    assert out.of("run.completed")[0].payload["tokenUsage"]["spent"] == 5
    assert claude.mock.prompts() == ["say ECHO:ping"]


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


def test_a_model_failure_resolves_null_and_logs_the_api_error(claude: ClaudeSetup) -> None:
    claude.mock.on("^api$", Reply(status=500, message="mock overload"))
    out = arun(run_on_claude(claude, "return await agent('api', { label: 'api' })"))
    assert out.status == "completed", out.error
    assert out.result is None
    assert any(line.startswith("[api] failed: ") and "500" in line for line in out.logs)
    assert [e.payload["reason"] for e in out.of("agent.failed")] == ["provider_failed"]
    assert len(claude.mock.received) == 1  # CLAUDE_CODE_MAX_RETRIES=0: no retry


def test_a_refused_login_raises_the_auth_error_that_names_the_backend_and_the_login_command(
    claude: ClaudeSetup,
) -> None:
    claude.mock.auth_error = True

    async def scenario() -> None:
        with pytest.raises(ProviderAuthError) as caught:
            await call(claude.provider(), AgentRequest(prompt="hello", label="hello", cwd=str(claude.cwd)))
        assert caught.value.backend == "claude"
        assert caught.value.to_json()["reason"] == "auth_required"
        assert "claude /login" in str(caught.value)
        assert "dummy" not in str(caught.value)

    arun(scenario())


def test_an_auth_failure_pauses_the_run_with_the_backend_named(claude: ClaudeSetup) -> None:
    claude.mock.auth_error = True
    out = arun(run_on_claude(claude, "try { await agent('hello') } catch (e) { return e.message }"))
    assert out.status == "paused"
    (paused,) = out.of("run.paused")
    assert paused.payload["reason"] == "auth_required" and paused.payload["backend"] == "claude"


def test_cancelling_a_run_ends_the_running_query_and_the_provider_stays_usable(claude: ClaudeSetup) -> None:
    claude.mock.on("^hang", Reply(hold=True))

    async def scenario() -> None:
        async with claude.router() as router:
            handle = start("return await agent('hang forever')", provider=router, cwd=str(claude.cwd))
            await asyncio.to_thread(claude.mock.wait_for_prompt, "^hang")
            handle.cancel("the test cancels")
            out = await finish(handle, timeout=30)
            assert out.status == "cancelled"
            assert [e.payload["reason"] for e in out.of("agent.failed")] == ["cancelled"]
            again = await finish(
                start("return await agent('ECHO:again')", provider=router, cwd=str(claude.cwd))
            )
            assert again.result == "again-done"
        claude.mock.release()

    arun(scenario())


def test_the_cancel_signal_ends_a_call_mid_query_with_cancelled_error(claude: ClaudeSetup) -> None:
    claude.mock.on("^hang", Reply(hold=True))

    async def scenario() -> None:
        signal = CancelSignal()
        task = asyncio.ensure_future(
            call(claude.provider(), AgentRequest(prompt="hang", label="h", cwd=str(claude.cwd)), signal)
        )
        try:
            await asyncio.to_thread(claude.mock.wait_for_prompt, "^hang")
            signal.cancel("stop")
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, 20)
            if os.path.isdir("/proc"):
                assert cli_children(os.getpid()) == []  # the CLI process ended with the call
        finally:
            claude.mock.release()

    arun(scenario())


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
