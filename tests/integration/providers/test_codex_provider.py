"""The codex provider runs real Codex turns (the SDK's bundled ``codex app-server``) against the
loopback mock Responses API: text and schema calls, fan-out, failures, auth, cancellation, resume,
policy and routing — observed through the engine where the engine can see the claim."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from mocks.mock_responses import Received, Reply
from workflow_mcp.providers.base import (
    AgentContext,
    AgentRequest,
    AgentResult,
    CancelSignal,
    ProviderAuthError,
    ProviderEvent,
)
from workflow_mcp.providers.codex import CodexProvider
from workflow_mcp.providers.routing import ModelAliasError

from codex_kit import CodexSetup
from helpers import RUN_TIMEOUT_S, Outcome, arun, finish, start

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S * 2)


async def run_on_codex(codex: CodexSetup, body: str, concurrency: int | None = None, **extra: Any) -> Outcome:
    async with codex.router(**extra) as router:
        return await finish(start(body, provider=router, cwd=str(codex.cwd), concurrency=concurrency))


async def call(
    provider: CodexProvider, request: AgentRequest, signal: CancelSignal | None = None
) -> tuple[AgentResult, list[ProviderEvent]]:
    events: list[ProviderEvent] = []

    async def emit(event: ProviderEvent) -> None:
        events.append(event)

    result = await provider.execute(request, AgentContext(signal=signal or CancelSignal(), emit=emit))
    return result, events


def provider_for(codex: CodexSetup, **settings: Any) -> CodexProvider:
    return CodexProvider.create({**codex.settings, **settings}, policy=codex.config().policy, source="test")


def test_a_text_call_returns_the_models_answer_streams_it_and_charges_its_output_tokens(
    codex: CodexSetup,
) -> None:
    out = arun(run_on_codex(codex, "return await agent('say ECHO:ping', { label: 'hi' })"))
    assert out.status == "completed", out.error
    assert out.result == "ping-done"
    assert [e.payload["text"] for e in out.of("agent.output.delta")] == ["ping-done"]
    (done,) = out.of("agent.completed")
    assert done.payload["tokenUsage"] == {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0}
    assert out.of("run.completed")[0].payload["tokenUsage"]["spent"] == 5
    assert codex.mock.prompts() == ["say ECHO:ping"]


def test_a_schema_call_sends_a_strict_schema_and_returns_the_projected_validated_value(
    codex: CodexSetup,
) -> None:
    codex.mock.on("review", Reply(json={"issues": ["unused import"], "severity": None}))
    body = """
    const schema = { type: 'object', properties: { issues: { type: 'array', items: { type: 'string' } },
      severity: { type: 'string', enum: ['low', 'high'] } }, required: ['issues'] }
    return await agent('review a.ts', { schema })
    """
    out = arun(run_on_codex(codex, body))
    assert out.status == "completed", out.error
    assert out.result == {"issues": ["unused import"]}  # the synthetic null became an omission
    (sent,) = codex.mock.received
    assert sent.schema is not None
    assert sent.schema["additionalProperties"] is False
    assert sent.schema["required"] == ["issues", "severity"]
    assert sent.schema["properties"]["severity"]["type"] == ["string", "null"]


def test_a_top_level_array_schema_is_wrapped_for_codex_and_unwrapped_for_the_workflow(
    codex: CodexSetup,
) -> None:
    # Profile claude-code/2.1.209 lets a non-object root reach the provider (2.1.332 refuses it first).
    body = "return await agent('list ECHO:n', { schema: { type: 'array', items: { type: 'integer' } } })"

    async def scenario() -> Outcome:
        async with codex.router() as router:
            return await finish(
                start(body, provider=router, cwd=str(codex.cwd), profile="claude-code/2.1.209")
            )

    out = arun(scenario())
    assert out.status == "completed", out.error
    assert out.result == [1]
    (sent,) = codex.mock.received
    assert sent.schema is not None and sent.schema["required"] == ["value"]


def test_a_schema_re_ask_continues_the_same_codex_thread_with_the_engines_feedback(codex: CodexSetup) -> None:
    answers = iter([Reply(json={"n": "not a number"}), Reply(json={"n": 3})])
    codex.mock.on("count", lambda rec: next(answers), whole_thread=True)
    body = "return await agent('count things', { schema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] } })"
    out = arun(run_on_codex(codex, body))
    assert out.status == "completed", out.error
    assert out.result == {"n": 3}
    first, second = codex.mock.received
    assert first.thread_id == second.thread_id
    assert second.prompt.startswith("Your structured output did not match the schema")


def test_a_parallel_fan_out_runs_every_turn_at_once_and_keeps_the_result_order(codex: CodexSetup) -> None:
    width = 6
    barrier = threading.Barrier(width, timeout=60)

    def together(rec: Received) -> Reply:
        barrier.wait()  # every request must be in flight at the same time to pass
        return Reply(text=rec.prompt.upper())

    codex.mock.on("^item", together)
    body = f"return await parallel(Array.from({{ length: {width} }}, (_, i) => () => agent('item ' + i)))"
    out = arun(run_on_codex(codex, body, concurrency=width))
    assert out.status == "completed", out.error
    assert out.result == [f"ITEM {i}" for i in range(width)]
    assert codex.mock.peak_in_flight == width


def test_a_model_failure_resolves_null_and_logs_while_a_bad_request_rejects_with_its_message(
    codex: CodexSetup,
) -> None:
    codex.mock.on("^api$", Reply(status=500, message="HTTP 500"))
    codex.mock.on("^err$", Reply(status=400, message="disk full"))
    body = """
    const api = await agent('api', { label: 'api' })
    let err
    try { await agent('err', { label: 'err' }); err = 'resolved' } catch (e) { err = e.message }
    return { api, err }
    """
    out = arun(run_on_codex(codex, body))
    assert out.status == "completed", out.error
    assert out.result["api"] is None
    assert "disk full" in out.result["err"]
    assert any(line.startswith("[api] failed: ") for line in out.logs)
    reasons = {e.payload["label"]: e.payload["reason"] for e in out.of("agent.failed")}
    assert reasons == {"api": "provider_failed", "err": "error"}


def test_a_refused_login_raises_the_auth_error_that_names_the_backend_and_the_login_command(
    codex: CodexSetup,
) -> None:
    codex.mock.auth_error = True

    async def scenario() -> None:
        provider = provider_for(codex)
        try:
            with pytest.raises(ProviderAuthError) as caught:
                await call(provider, AgentRequest(prompt="hello", label="hello", cwd=str(codex.cwd)))
        finally:
            await provider.aclose()
        assert caught.value.backend == "codex"
        assert caught.value.to_json()["reason"] == "auth_required"
        assert "codex login" in str(caught.value)
        assert "mock-key" not in str(caught.value)

    arun(scenario())


def test_an_auth_failure_pauses_the_run_with_the_backend_named(codex: CodexSetup) -> None:
    codex.mock.auth_error = True
    out = arun(run_on_codex(codex, "try { await agent('hello') } catch (e) { return e.message }"))
    assert out.status == "paused"
    (paused,) = out.of("run.paused")
    assert paused.payload["reason"] == "auth_required" and paused.payload["backend"] == "codex"


def test_cancelling_a_run_interrupts_the_running_turn_and_the_provider_stays_usable(
    codex: CodexSetup,
) -> None:
    codex.mock.on("^hang", Reply(hold=True))

    async def scenario() -> None:
        async with codex.router() as router:
            handle = start("return await agent('hang forever')", provider=router, cwd=str(codex.cwd))
            await asyncio.to_thread(codex.mock.wait_for_prompt, "^hang")
            handle.cancel("the test cancels")
            out = await finish(handle, timeout=30)
            assert out.status == "cancelled"
            assert [e.payload["reason"] for e in out.of("agent.failed")] == ["cancelled"]
            again = await finish(
                start("return await agent('ECHO:again')", provider=router, cwd=str(codex.cwd))
            )
            assert again.result == "again-done"
        codex.mock.release()

    arun(scenario())


def test_the_cancel_signal_ends_a_call_mid_turn_with_cancelled_error(codex: CodexSetup) -> None:
    codex.mock.on("^hang", Reply(hold=True))

    async def scenario() -> None:
        provider = provider_for(codex)
        signal = CancelSignal()
        try:
            task = asyncio.ensure_future(
                call(provider, AgentRequest(prompt="hang", label="h", cwd=str(codex.cwd)), signal)
            )
            await asyncio.to_thread(codex.mock.wait_for_prompt, "^hang")
            signal.cancel("stop")
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, 20)
        finally:
            codex.mock.release()
            await provider.aclose()

    arun(scenario())


def test_a_turn_interrupted_from_outside_the_call_resolves_skipped(codex: CodexSetup) -> None:
    codex.mock.on("^hang", Reply(hold=True))

    async def scenario() -> None:
        provider = provider_for(codex)
        try:
            task = asyncio.ensure_future(
                call(provider, AgentRequest(prompt="hang", label="h", cwd=str(codex.cwd)))
            )
            rec = await asyncio.to_thread(codex.mock.wait_for_prompt, "^hang")
            assert rec.thread_id and rec.turn_id
            await provider.interrupt_turn(rec.thread_id, rec.turn_id)
            result, _ = await asyncio.wait_for(task, 20)
            assert result.outcome == "skipped"
        finally:
            codex.mock.release()
            await provider.aclose()

    arun(scenario())


def test_the_thread_id_is_the_session_and_a_request_with_it_resumes_that_thread(codex: CodexSetup) -> None:
    async def scenario() -> None:
        provider = provider_for(codex)
        try:
            first, _ = await call(provider, AgentRequest(prompt="ECHO:one", label="a", cwd=str(codex.cwd)))
            assert first.session
            second, _ = await call(
                provider,
                AgentRequest(prompt="ECHO:two", label="b", cwd=str(codex.cwd), session=first.session),
            )
            assert second.session == first.session
            assert second.text == "two-done"
        finally:
            await provider.aclose()

    arun(scenario())
    one, two = codex.mock.received
    assert one.thread_id == two.thread_id
    assert "ECHO:one" in json.dumps(two.body["input"])  # the resumed thread carries the first turn


def test_the_default_policy_reaches_codex_as_workspace_write_without_network(codex: CodexSetup) -> None:
    arun(run_on_codex(codex, "return await agent('ECHO:p')"))
    (rec,) = codex.mock.received
    developer = json.dumps(rec.body["input"])
    assert "Network access is restricted" in developer
    assert '\\"sandbox_mode\\":\\"workspace-write\\"' in json.dumps(rec.body["client_metadata"])


def test_a_caller_narrowing_the_policy_to_read_only_reaches_codex(codex: CodexSetup) -> None:
    async def scenario() -> None:
        from workflow_mcp.providers.routing import build_router

        router = build_router(provider="codex", config=codex.config(), policy={"sandbox": "read-only"})
        try:
            await finish(start("return await agent('ECHO:r')", provider=router, cwd=str(codex.cwd)))
        finally:
            await router.aclose()

    arun(scenario())
    (rec,) = codex.mock.received
    assert '\\"sandbox_mode\\":\\"read-only\\"' in json.dumps(rec.body["client_metadata"])


def app_server_environ(parent: int) -> dict[str, str]:
    """The environment of the codex app-server started by process ``parent`` (Linux /proc)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"app-server" in cmdline:
            raw = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            return dict(item.decode().split("=", 1) for item in raw if b"=" in item)
    raise AssertionError("no codex app-server child found")


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the child's environment from /proc")
def test_the_codex_process_sees_only_allowlisted_environment_names(
    codex: CodexSetup, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UNRELATED_SECRET_TOKEN", "s3cret")

    async def scenario() -> dict[str, str]:
        provider = provider_for(codex)
        try:
            await call(provider, AgentRequest(prompt="ECHO:env", label="e", cwd=str(codex.cwd)))
            return await asyncio.to_thread(app_server_environ, os.getpid())
        finally:
            await provider.aclose()

    seen = arun(scenario())
    assert "UNRELATED_SECRET_TOKEN" not in seen
    assert seen["MOCK_API_KEY"] == "mock-key"
    assert seen["CODEX_HOME"] == str(codex.home)
    assert "PATH" in seen


def test_a_claude_alias_without_a_mapping_is_refused_before_codex_is_called(codex: CodexSetup) -> None:
    out = arun(
        run_on_codex(codex, "try { await agent('x', { model: 'sonnet' }) } catch (e) { return e.message }")
    )
    assert "Claude model alias" in out.result and "[providers.codex.models]" in out.result
    assert codex.mock.received == []


def test_a_mapped_claude_alias_reaches_codex_as_the_configured_model(codex: CodexSetup) -> None:
    out = arun(
        run_on_codex(
            codex,
            "return await agent('ECHO:m', { model: 'sonnet' })",
            provider="codex",
            models={"codex": {"sonnet": "mock-model-large"}},
        )
    )
    assert out.result == "m-done"
    assert codex.mock.received[0].model == "mock-model-large"


def test_the_provider_refuses_a_bare_claude_alias_when_used_without_routing(codex: CodexSetup) -> None:
    async def scenario() -> None:
        provider = provider_for(codex)
        try:
            with pytest.raises(ModelAliasError):
                await call(provider, AgentRequest(prompt="x", label="x", model="opus", cwd=str(codex.cwd)))
        finally:
            await provider.aclose()

    arun(scenario())


def test_a_failed_codex_call_falls_back_to_the_next_provider_in_the_chain(codex: CodexSetup) -> None:
    codex.mock.on("", Reply(status=503, message="overloaded"))
    out = arun(
        run_on_codex(
            codex,
            "return await agent('ECHO:fb')",
            default="codex",
            fallback=("fake",),
            settings={"fake": {"script": {"default": {"text": "from fake"}}}},
        )
    )
    assert out.status == "completed", out.error
    assert out.result == "from fake"
    assert len(codex.mock.received) == 1
