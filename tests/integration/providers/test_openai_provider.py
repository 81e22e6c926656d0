"""The openai provider calls an OpenAI-compatible endpoint through the real ``openai`` SDK, here a
loopback mock of Chat Completions and the Responses API (``tests/mocks/mock_chat.py``): text and
schema calls on the wire, re-asks, the SDK's retries, keys, the Responses API, efforts, settings and
usage limits — observed through the engine where the engine can see the claim. What every provider
guarantees is ``tests/contract/``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from mocks.mock_chat import MockChat, Reply
from workflow_mcp.providers.base import (
    AgentContext,
    AgentRequest,
    AgentResult,
    CancelSignal,
    ProviderAuthError,
)
from workflow_mcp.providers.config import ProviderConfig, ProviderConfigError
from workflow_mcp.providers.openai_compat import OpenAIProvider
from workflow_mcp.providers.policy import DEFAULT_POLICY
from workflow_mcp.providers.registry import register_provider, unregister_provider
from workflow_mcp.providers.routing import RoutingProvider, build_router

from helpers import RUN_TIMEOUT_S, Outcome, arun, finish, start

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S * 2)

pytest.importorskip("openai", reason="the openai extra is not installed (pip install -e '.[test,openai]')")

SCHEMA = """const schema = { type: 'object', properties: { issues: { type: 'array', items: { type: 'string' } },
  severity: { type: 'string', enum: ['low', 'high'] } }, required: ['issues'] }"""


@pytest.fixture
def chat(monkeypatch: pytest.MonkeyPatch) -> Iterator[MockChat]:
    monkeypatch.setenv("MOCK_CHAT_KEY", "sk-mock-key")
    register_provider("openai", OpenAIProvider)
    try:
        with MockChat() as mock:
            yield mock
    finally:
        unregister_provider("openai")


def settings(chat: MockChat, **extra: Any) -> dict[str, Any]:
    return {
        "model": "mock-model",
        "base_url": chat.base_url,
        "api_key_env": "MOCK_CHAT_KEY",
        "max_retries": 0,
        **extra,
    }


@contextlib.asynccontextmanager
async def router(chat: MockChat, **extra: Any) -> AsyncIterator[RoutingProvider]:
    built = build_router(
        provider="openai", config=ProviderConfig(settings={"openai": settings(chat, **extra)})
    )
    try:
        yield built
    finally:
        await built.aclose()


async def run_on_openai(chat: MockChat, body: str, **extra: Any) -> Outcome:
    async with router(chat, **extra) as provider:
        return await finish(start(body, provider=provider))


async def call(
    provider: OpenAIProvider, request: AgentRequest, signal: CancelSignal | None = None
) -> AgentResult:
    async def emit(event: Any) -> None:
        pass

    return await provider.execute(request, AgentContext(signal=signal or CancelSignal(), emit=emit))


async def once(provider: OpenAIProvider, request: AgentRequest) -> AgentResult:
    """One call on a provider that is closed afterwards."""
    try:
        return await call(provider, request)
    finally:
        await provider.aclose()


def provider_for(chat: MockChat, **extra: Any) -> OpenAIProvider:
    return OpenAIProvider.create(settings(chat, **extra), policy=DEFAULT_POLICY, source="test")


def test_a_text_call_returns_the_models_answer_and_charges_its_output_tokens(chat: MockChat) -> None:
    out = arun(run_on_openai(chat, "return await agent('say ECHO:ping', { label: 'hi' })"))
    assert out.status == "completed", out.error
    assert out.result == "ping-done"
    (done,) = out.of("agent.completed")
    assert done.payload["tokenUsage"] == {"input": 10, "output": 4, "cacheRead": 2, "cacheWrite": 0}
    assert out.of("run.completed")[0].payload["tokenUsage"]["spent"] == 4
    (sent,) = chat.received
    assert sent.api == "chat"
    assert sent.model == "mock-model"
    assert sent.authorization == "Bearer sk-mock-key"
    assert sent.body["messages"] == [{"role": "user", "content": "say ECHO:ping"}]


def test_a_schema_call_sends_a_strict_json_schema_and_returns_the_projected_value(chat: MockChat) -> None:
    chat.on("review", Reply(json={"issues": ["unused import"], "severity": None}))
    out = arun(run_on_openai(chat, SCHEMA + "\nreturn await agent('review a.ts', { schema })"))
    assert out.status == "completed", out.error
    assert out.result == {"issues": ["unused import"]}  # the synthetic null became an omission
    (sent,) = chat.received
    fmt = sent.body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["additionalProperties"] is False
    assert fmt["json_schema"]["schema"]["required"] == ["issues", "severity"]
    assert fmt["json_schema"]["schema"]["properties"]["severity"]["type"] == ["string", "null"]


def test_a_top_level_array_schema_is_wrapped_for_the_endpoint_and_unwrapped_for_the_workflow(
    chat: MockChat,
) -> None:
    # Profile claude-code/2.1.209 lets a non-object root reach the provider (2.1.332 refuses it first).
    body = "return await agent('list ECHO:n', { schema: { type: 'array', items: { type: 'integer' } } })"

    async def scenario() -> Outcome:
        async with router(chat) as provider:
            return await finish(start(body, provider=provider, profile="claude-code/2.1.209"))

    out = arun(scenario())
    assert out.status == "completed", out.error
    assert out.result == [1]
    assert chat.received[0].schema is not None and chat.received[0].schema["required"] == ["value"]


def test_a_schema_re_ask_continues_the_conversation_with_the_engines_feedback(chat: MockChat) -> None:
    answers = iter(
        [
            Reply(json={"issues": "not-an-array", "severity": None}),
            Reply(json={"issues": ["x"], "severity": "low"}),
        ]
    )
    chat.on("review|did not match", lambda rec: next(answers))
    out = arun(run_on_openai(chat, SCHEMA + "\nreturn await agent('review a.ts', { schema })"))
    assert out.status == "completed", out.error
    assert out.result == {"issues": ["x"], "severity": "low"}
    _, second = chat.received
    roles = [m["role"] for m in second.body["messages"]]
    assert roles == ["user", "assistant", "user"]
    assert second.prompt.startswith("Your structured output did not match the schema")


def test_a_reply_that_is_not_json_is_asked_again_once_then_has_no_structured_output(chat: MockChat) -> None:
    chat.on("", Reply(text="I cannot do JSON."))
    body = SCHEMA + "\ntry { return await agent('review a.ts', { schema }) } catch (e) { return e.message }"
    out = arun(run_on_openai(chat, body))
    assert out.result.startswith("agent({schema}): subagent completed without calling StructuredOutput")
    assert "not a JSON value" in out.result
    assert [r.prompt.startswith("Your last reply was not a JSON value") for r in chat.received] == [
        False,
        True,
    ]


def test_a_server_failure_after_the_sdks_retries_resolves_null_while_a_bad_request_rejects(
    chat: MockChat,
) -> None:
    chat.on("^api$", Reply(status=500, message="upstream exploded"))
    chat.on("^err$", Reply(status=400, message="disk full"))
    body = """
    const api = await agent('api', { label: 'api' })
    let err
    try { await agent('err', { label: 'err' }); err = 'resolved' } catch (e) { err = e.message }
    return { api, err }
    """
    out = arun(run_on_openai(chat, body, max_retries=1))
    assert out.status == "completed", out.error
    assert out.result == {"api": None, "err": "openai: disk full"}
    assert "[api] failed: openai: upstream exploded" in out.logs
    assert [r.prompt for r in chat.received] == ["api", "api", "err"]  # one SDK retry of the 500


def test_a_refused_key_raises_the_auth_error_naming_the_backend_and_the_variable(chat: MockChat) -> None:
    chat.auth_error = True
    with pytest.raises(ProviderAuthError) as caught:
        arun(once(provider_for(chat, backend="my-llm"), AgentRequest(prompt="hi", label="hi")))
    assert caught.value.backend == "my-llm"
    assert caught.value.login_hint == "set MOCK_CHAT_KEY"
    assert "sk-mock-key" not in str(caught.value)


def test_a_remote_endpoint_without_a_key_raises_the_auth_error_before_any_request(
    chat: MockChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MOCK_CHAT_KEY")
    provider = OpenAIProvider.create(
        {"model": "m", "base_url": "https://llm.example.invalid/v1", "api_key_env": "MOCK_CHAT_KEY"},
        policy=DEFAULT_POLICY,
        source="test",
    )
    with pytest.raises(ProviderAuthError, match="MOCK_CHAT_KEY is not set"):
        arun(once(provider, AgentRequest(prompt="hi", label="hi")))


def test_a_local_endpoint_needs_no_key(chat: MockChat, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MOCK_CHAT_KEY")
    result = arun(once(provider_for(chat), AgentRequest(prompt="ECHO:local", label="l")))
    assert result.text == "local-done"


def test_the_responses_api_returns_the_response_id_as_session_and_continues_from_it(chat: MockChat) -> None:
    async def scenario() -> tuple[AgentResult, AgentResult]:
        provider = provider_for(chat, api="responses", system_prompt="be brief")
        try:
            first = await call(provider, AgentRequest(prompt="ECHO:one", label="a"))
            second = await call(provider, AgentRequest(prompt="ECHO:two", label="b", session=first.session))
            return first, second
        finally:
            await provider.aclose()

    first, second = arun(scenario())
    assert (first.text, second.text) == ("one-done", "two-done")
    one, two = chat.received
    assert one.api == two.api == "responses"
    assert one.body["instructions"] == "be brief"
    assert "previous_response_id" not in one.body
    assert two.body["previous_response_id"] == first.session


def test_a_schema_call_on_the_responses_api_sends_the_strict_schema_as_text_format(chat: MockChat) -> None:
    chat.on("review", Reply(json={"issues": [], "severity": None}))
    out = arun(
        run_on_openai(chat, SCHEMA + "\nreturn await agent('review a.ts', { schema })", api="responses")
    )
    assert out.result == {"issues": []}
    fmt = chat.received[0].body["text"]["format"]
    assert (fmt["type"], fmt["strict"], fmt["schema"]["additionalProperties"]) == ("json_schema", True, False)


def test_a_refusal_is_the_text_of_a_text_call_and_no_structured_output_for_a_schema_call(
    chat: MockChat,
) -> None:
    chat.on("", Reply(refusal="I can't help with that."))
    body = (
        SCHEMA
        + """
    const text = await agent('plain')
    let structured
    try { structured = await agent('review', { schema }) } catch (e) { structured = e.message }
    return { text, structured }
    """
    )
    out = arun(run_on_openai(chat, body))
    assert out.result["text"] == "I can't help with that."
    assert "completed without calling StructuredOutput" in out.result["structured"]


def test_unmapped_efforts_are_not_sent_and_mapped_ones_are(chat: MockChat) -> None:
    out = arun(
        run_on_openai(
            chat,
            "await agent('ECHO:a', { effort: 'low' }); return await agent('ECHO:b', { effort: 'high' })",
            efforts={"high": "high"},
        )
    )
    assert out.result == "b-done"
    a, b = chat.received
    assert "reasoning_effort" not in a.body
    assert b.body["reasoning_effort"] == "high"


def test_the_probe_tells_a_missing_model_a_local_endpoint_and_a_missing_key_apart(
    chat: MockChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MOCK_CHAT_KEY")
    assert OpenAIProvider.probe({}).available is False
    assert "model" in (OpenAIProvider.probe({}).problem or "")
    local = OpenAIProvider.probe({"model": "m", "base_url": chat.base_url, "api_key_env": "MOCK_CHAT_KEY"})
    assert (local.available, local.logged_in) == (True, None)
    remote = OpenAIProvider.probe(
        {"model": "m", "base_url": "https://x.invalid/v1", "api_key_env": "MOCK_CHAT_KEY"}
    )
    assert (remote.available, remote.logged_in) == (True, False)
    monkeypatch.setenv("MOCK_CHAT_KEY", "k")
    keyed = OpenAIProvider.probe(
        {"model": "m", "base_url": "https://x.invalid/v1", "api_key_env": "MOCK_CHAT_KEY"}
    )
    assert (keyed.logged_in, keyed.login) == (True, "MOCK_CHAT_KEY is set")


def test_bad_settings_are_refused_naming_the_file_and_the_key() -> None:
    with pytest.raises(
        ProviderConfigError, match=r"workflow-mcp.toml: providers.openai.temprature: unknown setting"
    ):
        OpenAIProvider.create(
            {"model": "m", "temprature": 0}, policy=DEFAULT_POLICY, source="workflow-mcp.toml"
        )
    with pytest.raises(ProviderConfigError, match=r"providers.openai.model: is required"):
        OpenAIProvider.create({}, policy=DEFAULT_POLICY, source="workflow-mcp.toml")
    with pytest.raises(
        ProviderConfigError, match=r"providers.openai.api: must be one of chat, responses, got 'completions'"
    ):
        OpenAIProvider.create(
            {"model": "m", "api": "completions"}, policy=DEFAULT_POLICY, source="workflow-mcp.toml"
        )


# -- rate and usage limits, through the real SDK ------------------------------------------------


def test_a_429_with_retry_after_is_retried_by_the_engine_after_that_wait_then_answers(chat: MockChat) -> None:
    answers = iter(
        [
            Reply(status=429, message="Rate limit reached for requests", headers=(("retry-after-ms", "30"),)),
            Reply(status=529, message="Overloaded", headers=(("retry-after", "0"),)),
            Reply(text="finally"),
        ]
    )
    chat.on("busy", lambda rec: next(answers))
    out = arun(run_on_openai(chat, "return await agent('busy now', { label: 'busy' })"))
    assert out.status == "completed", out.error
    assert out.result == "finally"
    warnings = [e.payload["message"] for e in out.of("warning")]
    assert len(warnings) == 2
    assert warnings[0].startswith(
        "[busy] rate limit: openai: Rate limit reached for requests; retrying in 0.0 s"
    )
    assert "(Retry-After 0.03 s; 1 of 4)" in warnings[0]
    assert warnings[1].startswith(
        "[busy] overloaded: openai: Overloaded; retrying in 0.0 s (Retry-After 0 s; 2 of 4)"
    )
    assert [r.prompt for r in chat.received] == [
        "busy now"
    ] * 3  # max_retries = 0: the SDK itself never retried


def test_a_spent_quota_pauses_the_run_with_usage_limit_and_the_reset_time(chat: MockChat) -> None:
    import datetime

    chat.on(
        "work",
        Reply(
            status=429,
            message="You exceeded your current quota, please check your plan and billing details.",
            code="insufficient_quota",
            headers=(("retry-after", "3600"),),
        ),
    )
    before = datetime.datetime.now(datetime.UTC)
    out = arun(run_on_openai(chat, "const a = await agent('work', { label: 'w' })\nreturn a"))
    assert out.status == "paused", out.error
    (paused,) = out.of("run.paused")
    assert paused.payload["reason"] == "usage_limit" and paused.payload["backend"] == "openai"
    assert "exceeded your current quota" in paused.payload["detail"]
    resets = datetime.datetime.fromisoformat(paused.payload["resetsAt"].replace("Z", "+00:00"))
    assert 3590 <= (resets - before).total_seconds() <= 3610
    assert out.error is not None and out.error.startswith("openai reached its usage limit (it resets at ")
    (failed,) = out.of("agent.failed")
    assert failed.payload["reason"] == "usage_limit"
    assert len(chat.received) == 1  # a spent quota is never retried


def test_resume_wait_continues_a_usage_limited_run_after_its_reset(chat: MockChat, tmp_path: Any) -> None:
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    cli = str(Path(sys.executable).with_name("workflow-mcp"))
    state = tmp_path / "state"
    state.mkdir()
    (state / "config.toml").write_text(
        '[providers.openai]\nmodel = "mock-model"\n'
        f'base_url = "{chat.base_url}"\napi_key_env = "MOCK_CHAT_KEY"\nmax_retries = 0\n'
        '[policy]\nenv = ["MOCK_CHAT_KEY"]\n'
    )
    (tmp_path / "wf.js").write_text(
        "export const meta = { name: 'q', description: 'quota' }\nreturn await agent('say ECHO:later')\n"
    )
    env = {**os.environ, "WORKFLOW_MCP_HOME": str(state), "HOME": str(tmp_path)}
    limited = Reply(
        status=429, message="quota spent", code="insufficient_quota", headers=(("retry-after", "1"),)
    )
    chat.on("later", lambda rec: limited if len(chat.received) == 1 else Reply(text="after the reset"))

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [cli, *argv, "--events", "none"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    first = run("run", "wf.js", "--provider", "openai")
    assert first.returncode == 1, first.stderr
    assert "paused: openai reached its usage limit (it resets at " in first.stderr
    run_id = first.stderr.split("workflow-mcp: run ")[1].split()[0]
    resumed = run("resume", run_id, "--wait")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == "after the reset"
    assert len(chat.received) == 2
