"""A workflow naming a project agent type runs on the real agent programs (the bundled ``codex``,
Claude Code through the Agent SDK, codex-acp) against the loopback mock model servers, and the request
the mock records carries the agent definition's instructions and model (on codex also for a plugin's
workflow, started by its ``<plugin>:<name>`` identity, naming its plugin's agent); an agent type that nothing
defines fails the call before any provider is contacted, on every provider.

Skipped, with the reason, when a provider's extra is not installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from claude_plugins import apply_plugin_steps
from mocks.mock_chat import MockChat
from mocks.mock_chat import Reply as ChatReply
from mocks.mock_responses import Reply as ResponsesReply
from workflow_mcp import FakeProvider
from workflow_mcp.providers.openai_compat import OpenAIProvider
from workflow_mcp.providers.policy import DEFAULT_POLICY

from acp_kit import MOCK_MODEL, AcpSetup, codex_acp_setup
from claude_kit import ClaudeSetup, claude_setup
from codex_kit import CodexSetup
from helpers import RUN_TIMEOUT_S, Outcome, arun, finish, start

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S * 2)

MARKER = "AUDITOR-BODY-MARKER"
AUDITOR = f"""---
name: security-auditor
description: Audits code for security issues
tools: Read, Grep
model: {{model}}
---
You are a security auditor. {MARKER}.

Second paragraph.
"""
UNKNOWN = """
try { await agent('audit ECHO:never', { agentType: 'no-such-auditor' }); return 'ran' }
catch (e) { return e.message }
"""
UNKNOWN_MESSAGE = (
    "agent({agentType}): agent type 'no-such-auditor' not found. Available agents: claude, Explore, "
    "general-purpose, Plan, security-auditor, statusline-setup"
)


def write_auditor(project: Path, model: str) -> None:
    agents = project / ".claude" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "security-auditor.md").write_text(AUDITOR.format(model=model))


async def run_in(project: Path, home: Path, body: str, router: Any) -> Outcome:
    return await finish(start(body, provider=router, cwd=str(project), home=str(home)))


def texts_of(value: Any) -> list[str]:
    """Every string inside a JSON value (a request body), depth first."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in texts_of(v)]
    if isinstance(value, list):
        return [t for v in value for t in texts_of(v)]
    return []


# -- codex ---------------------------------------------------------------------------------------


def test_on_codex_the_agents_instructions_are_developer_instructions_and_its_model_is_used(
    codex: CodexSetup, tmp_path: Path
) -> None:
    write_auditor(codex.cwd, "gpt-5.4-mini")
    codex.mock.on("audit ECHO:x", ResponsesReply(text="audited"))

    async def scenario() -> Outcome:
        async with codex.router() as router:
            body = "return await agent('audit ECHO:x', { agentType: 'security-auditor' })"
            return await run_in(codex.cwd, tmp_path / "home", body, router)

    out = arun(scenario())
    assert out.status == "completed", out.error
    assert out.result == "audited"
    (request,) = [r for r in codex.mock.received if r.prompt == "audit ECHO:x"]
    assert request.model == "gpt-5.4-mini"  # the definition's, not the configured mock-model
    developer = [
        t
        for item in request.body.get("input") or []
        if item.get("role") == "developer"
        for t in texts_of(item)
    ]
    assert any(f"You are a security auditor. {MARKER}.\n\nSecond paragraph." in t for t in developer)
    assert MARKER not in request.prompt


PLUGIN_HELLO = """export const meta = { name: 'hello', description: 'a plugin workflow' }
return await agent('plugin review ECHO:p', { agentType: 'wfp:helper' })
"""
PLUGIN_HELPER = f"""---
name: helper
description: a plugin agent
model: gpt-5.4-mini
---
You review as the plugin says. {MARKER}-PLUGIN.
"""


def test_on_codex_a_plugin_workflow_runs_by_its_identity_and_its_plugin_agent_reaches_the_model(
    codex: CodexSetup, tmp_path: Path
) -> None:
    # A directory marketplace installed as `claude plugin marketplace add` / `install` leave it
    # (tests/claude_plugins.py); the run's workflow starts the plugin's `wfp:hello` by its identity.
    market = tmp_path / "mkt"
    (market / ".claude-plugin").mkdir(parents=True)
    (market / ".claude-plugin" / "marketplace.json").write_text(
        '{"name": "localmkt", "plugins": [{"name": "wfp", "source": "./plugins/wfp"}]}'
    )
    plugin = market / "plugins" / "wfp"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text('{"name": "wfp", "version": "1.0.0"}')
    (plugin / "workflows").mkdir()
    (plugin / "workflows" / "hello.js").write_text(PLUGIN_HELLO)
    (plugin / "agents").mkdir()
    (plugin / "agents" / "helper.md").write_text(PLUGIN_HELPER)
    steps = {"plugins": [["marketplace", "add", "{root}/mkt"], ["install", "wfp@localmkt"]]}
    apply_plugin_steps(steps, tmp_path, codex.cwd)
    codex.mock.on("plugin review ECHO:p", ResponsesReply(text="reviewed by the plugin agent"))

    async def scenario() -> Outcome:
        async with codex.router() as router:
            return await run_in(codex.cwd, tmp_path / "home", "return await workflow('wfp:hello')", router)

    out = arun(scenario())
    assert out.status == "completed", out.error
    assert out.result == "reviewed by the plugin agent"
    (request,) = [r for r in codex.mock.received if r.prompt == "plugin review ECHO:p"]
    assert request.model == "gpt-5.4-mini"  # the plugin agent's model
    developer = [
        t
        for item in request.body.get("input") or []
        if item.get("role") == "developer"
        for t in texts_of(item)
    ]
    assert any(f"You review as the plugin says. {MARKER}-PLUGIN." in t for t in developer)


def test_on_codex_an_agent_without_edit_tools_runs_in_a_read_only_sandbox(
    codex: CodexSetup, tmp_path: Path
) -> None:
    write_auditor(codex.cwd, "gpt-5.4-mini")

    async def scenario() -> Outcome:
        async with codex.router() as router:
            body = (
                "const a = await agent('audit ECHO:ro', { agentType: 'security-auditor' })\n"
                "const b = await agent('plain ECHO:rw')\n"
                "return [a, b]"
            )
            return await run_in(codex.cwd, tmp_path / "home", body, router)

    out = arun(scenario())
    assert out.status == "completed", out.error
    audited = codex.mock.wait_for_prompt("audit ECHO:ro", 1)
    plain = codex.mock.wait_for_prompt("plain ECHO:rw", 1)
    assert "read-only" in sandbox_sentence(audited.body)
    assert "read-only" not in sandbox_sentence(plain.body)


def sandbox_sentence(body: Any) -> str:
    """The part of codex's own instructions that names the sandbox mode."""
    return " ".join(t for t in texts_of(body) if "sandbox" in t.lower() and "mode" in t.lower())


def test_on_codex_an_unknown_agent_type_never_reaches_the_model(codex: CodexSetup, tmp_path: Path) -> None:
    write_auditor(codex.cwd, "gpt-5.4-mini")

    async def scenario() -> Outcome:
        async with codex.router() as router:
            return await run_in(codex.cwd, tmp_path / "home", UNKNOWN, router)

    out = arun(scenario())
    assert out.result == UNKNOWN_MESSAGE
    assert codex.mock.received == [] and out.of("agent.started") == []


# -- claude --------------------------------------------------------------------------------------


@pytest.fixture
def claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ClaudeSetup]:
    pytest.importorskip(
        "claude_agent_sdk", reason="the claude extra is not installed (pip install -e '.[test,claude]')"
    )
    with claude_setup(tmp_path, monkeypatch) as setup:
        yield setup


def test_on_claude_the_agents_body_is_the_system_prompt_its_tools_and_its_model_apply(
    claude: ClaudeSetup,
) -> None:
    write_auditor(claude.cwd, "haiku")

    async def scenario() -> Outcome:
        async with claude.router() as router:
            body = "return await agent('audit ECHO:x', { agentType: 'security-auditor' })"
            return await run_in(claude.cwd, claude.home, body, router)

    out = arun(scenario())
    assert out.status == "completed", out.error
    assert out.result == "x-done"
    (request,) = [r for r in claude.mock.received if r.prompt == "audit ECHO:x"]
    assert "haiku" in str(request.model)
    # Claude Code adds its own DeferredToolPlaceholder; nothing else beyond the definition's list.
    assert {"Read", "Grep"} <= set(request.tools) <= {"Read", "Grep", "DeferredToolPlaceholder"}
    system = "\n".join(texts_of(request.body.get("system")))
    assert f"You are a security auditor. {MARKER}.\n\nSecond paragraph." in system


def test_on_claude_an_unknown_agent_type_never_reaches_the_model(claude: ClaudeSetup) -> None:
    write_auditor(claude.cwd, "haiku")

    async def scenario() -> Outcome:
        async with claude.router() as router:
            return await run_in(claude.cwd, claude.home, UNKNOWN, router)

    out = arun(scenario())
    assert out.result == UNKNOWN_MESSAGE
    assert claude.mock.received == [] and out.of("agent.started") == []


# -- acp (codex-acp) -----------------------------------------------------------------------------


@pytest.fixture
def acp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AcpSetup]:
    with codex_acp_setup(tmp_path, monkeypatch) as setup:
        yield setup


def test_on_acp_the_agents_instructions_frame_the_first_prompt_and_its_model_is_chosen(
    acp: AcpSetup, tmp_path: Path
) -> None:
    write_auditor(acp.cwd, "haiku")
    acp.mock.on("ECHO:x", ResponsesReply(text="audited"))

    async def scenario() -> Outcome:
        # Claude's aliases are never guessed: the configuration maps the definition's model.
        async with acp.router(provider="acp", models={"acp": {"haiku": MOCK_MODEL}}) as router:
            body = "return await agent('audit ECHO:x', { agentType: 'security-auditor' })"
            return await run_in(acp.cwd, tmp_path / "home", body, router)

    out = arun(scenario())
    assert out.status == "completed", out.error
    assert out.result == "audited"
    request = acp.mock.wait_for_prompt("ECHO:x", 1)
    assert request.model == MOCK_MODEL
    assert "<agent-instructions>\nYou are a security auditor." in request.prompt
    assert MARKER in request.prompt and request.prompt.endswith("The task:\naudit ECHO:x")


def test_on_acp_an_unknown_agent_type_never_starts_the_agent(acp: AcpSetup, tmp_path: Path) -> None:
    write_auditor(acp.cwd, "haiku")

    async def scenario() -> tuple[Outcome, list[int]]:
        async with acp.router() as router:
            out = await run_in(acp.cwd, tmp_path / "home", UNKNOWN, router)
            provider = router.providers["acp"]
            return out, list(getattr(provider, "processes", []))

    out, processes = arun(scenario())
    assert out.result == UNKNOWN_MESSAGE
    assert acp.mock.received == [] and processes == [] and out.of("agent.started") == []


# -- openai and fake -----------------------------------------------------------------------------


@pytest.fixture
def chat(monkeypatch: pytest.MonkeyPatch) -> Iterator[MockChat]:
    pytest.importorskip(
        "openai", reason="the openai extra is not installed (pip install -e '.[test,openai]')"
    )
    monkeypatch.setenv("MOCK_CHAT_KEY", "sk-mock-key")
    with MockChat() as mock:
        yield mock


def openai_on(chat: MockChat, api: str) -> OpenAIProvider:
    settings = {"model": "mock-model", "base_url": chat.base_url, "api_key_env": "MOCK_CHAT_KEY", "api": api}
    return OpenAIProvider.create({**settings, "max_retries": 0}, policy=DEFAULT_POLICY, source="test")


def test_on_openai_and_fake_an_unknown_agent_type_is_refused_before_the_provider(
    chat: MockChat, tmp_path: Path
) -> None:
    project = tmp_path / "work"
    write_auditor(project, "haiku")
    fake = FakeProvider()

    async def scenario() -> list[Outcome]:
        return [await run_in(project, tmp_path / "home", UNKNOWN, p) for p in (openai_on(chat, "chat"), fake)]

    outcomes = arun(scenario())
    assert [o.result for o in outcomes] == [UNKNOWN_MESSAGE, UNKNOWN_MESSAGE]
    assert chat.received == [] and fake.calls == []


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_on_openai_the_agents_instructions_are_a_system_message(
    chat: MockChat, api: str, tmp_path: Path
) -> None:
    project = tmp_path / "work"
    write_auditor(project, "gpt-5.4-mini")
    chat.on("audit", ChatReply(text="audited"))
    body = "return await agent('audit this', { agentType: 'security-auditor' })"
    out = arun(run_in(project, tmp_path / "home", body, openai_on(chat, api)))
    assert out.status == "completed", out.error
    assert out.result == "audited"
    (request,) = chat.received
    assert request.model == "gpt-5.4-mini"
    if api == "chat":
        system = [m["content"] for m in request.body["messages"] if m["role"] == "system"]
    else:
        system = [request.body["instructions"]]
    assert system == [f"You are a security auditor. {MARKER}.\n\nSecond paragraph."]
