"""The provider contract: what every agent provider guarantees the engine, stated once and checked
against each provider (fake, codex, claude, acp, openai, cli) through its real SDK or program and a
loopback model server (``conftest.py``). What only one provider has (Codex thread resume, ACP
permission requests, OpenAI's Responses API …) stays in ``tests/integration/providers/``.
"""

from __future__ import annotations

import asyncio

import pytest
from provider_backends import Backend

from workflow_mcp.providers.base import (
    AgentRequest,
    CancelSignal,
    ProviderAuthError,
)

from helpers import RUN_TIMEOUT_S, Outcome, arun, finish, start
from helpers import call_provider as call

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S * 2)

SCHEMA = """const schema = { type: 'object', properties: { issues: { type: 'array', items: { type: 'string' } },
  severity: { type: 'string', enum: ['low', 'high'] } }, required: ['issues'] }"""


async def run_on(backend: Backend, body: str) -> Outcome:
    provider = backend.provider()
    try:
        return await finish(start(body, provider=provider, cwd=backend.cwd))
    finally:
        await provider.aclose()


def test_a_text_call_answers_streams_the_text_if_it_can_and_reports_the_models_token_usage(
    backend: Backend,
) -> None:
    backend.answer("^say hello$", text="hello there")
    out = arun(run_on(backend, "return await agent('say hello', { label: 'hi' })"))
    assert out.status == "completed", out.error
    assert out.result == "hello there"
    streamed = "".join(e.payload["text"] for e in out.of("agent.output.delta"))
    assert streamed == ("hello there" if backend.provider().capabilities.streaming else "")
    (done,) = out.of("agent.completed")
    assert done.payload["tokenUsage"] == backend.usage()
    # Only output tokens charge the workflow's budget (profile claude-code/2.1.332).
    assert out.of("run.completed")[0].payload["tokenUsage"]["spent"] == backend.usage()["output"]


def test_a_schema_call_resolves_to_the_models_json_value(backend: Backend) -> None:
    backend.answer("^review a.ts", json={"issues": ["unused import"], "severity": "low"})
    out = arun(run_on(backend, SCHEMA + "\nreturn await agent('review a.ts', { schema })"))
    assert out.status == "completed", out.error
    assert out.result == {"issues": ["unused import"], "severity": "low"}
    (done,) = out.of("agent.completed")
    assert done.payload["tokenUsage"]["output"] == backend.usage()["output"]


def test_a_model_failure_resolves_null_and_logs_while_a_bad_request_rejects_with_its_message(
    backend: Backend,
) -> None:
    backend.fail("^api$")
    backend.refuse("^err$", "disk full")
    backend.answer("^after$", text="still here")
    body = """
    const api = await agent('api', { label: 'api' })
    let err
    try { await agent('err', { label: 'err' }); err = 'resolved' } catch (e) { err = e.message }
    return [api, err, await agent('after')]
    """
    out = arun(run_on(backend, body))
    assert out.status == "completed", out.error
    api, err, after = out.result
    assert (api, after) == (None, "still here")
    assert "disk full" in err
    assert any(line.startswith("[api] failed: ") for line in out.logs)
    reasons = {e.payload["label"]: e.payload["reason"] for e in out.of("agent.failed")}
    assert reasons == {"api": "provider_failed", "err": "error"}


def test_a_refused_login_pauses_the_run_for_that_login_naming_the_backend(backend: Backend) -> None:
    if not backend.has_login:
        pytest.skip(f"the {backend.name} provider has no login to refuse")
    backend.refuse_login()
    out = arun(run_on(backend, "try { await agent('hello') } catch (e) { return e.message }"))
    assert out.status == "paused"
    (paused,) = out.of("run.paused")
    assert paused.payload["reason"] == "auth_required"
    assert paused.payload["backend"] == backend.backend
    assert out.result is None  # the workflow never saw the failure as its own error


def test_a_refused_login_raises_the_auth_error_naming_the_backend_and_the_login_without_a_secret(
    backend: Backend,
) -> None:
    if not backend.has_login:
        pytest.skip(f"the {backend.name} provider has no login to refuse")
    backend.refuse_login()

    async def scenario() -> ProviderAuthError:
        provider = backend.provider()
        try:
            with pytest.raises(ProviderAuthError) as caught:
                await call(provider, AgentRequest(prompt="hello", label="hello", cwd=backend.cwd))
        finally:
            await provider.aclose()
        return caught.value

    error = arun(scenario())
    assert error.backend == backend.backend and error.login_hint == backend.login_hint
    assert error.to_json()["reason"] == "auth_required"
    assert backend.login_hint is not None and backend.login_hint in str(error)
    assert backend.secret not in str(error) and backend.secret not in str(error.to_json())


def test_cancelling_a_run_ends_the_running_call_and_the_provider_stays_usable(backend: Backend) -> None:
    backend.hold("^hang")
    backend.answer("^again$", text="again-done")

    async def scenario() -> None:
        provider = backend.provider()
        try:
            handle = start("return await agent('hang forever')", provider=provider, cwd=backend.cwd)
            await backend.in_flight("^hang", provider)
            handle.cancel("the test cancels")
            out = await finish(handle, timeout=30)
            assert out.status == "cancelled"
            assert [e.payload["reason"] for e in out.of("agent.failed")] == ["cancelled"]
            again = await finish(start("return await agent('again')", provider=provider, cwd=backend.cwd))
            assert again.result == "again-done", again.error
        finally:
            backend.release()
            await provider.aclose()

    arun(scenario())


def test_the_cancel_signal_ends_a_call_mid_turn_and_the_provider_stays_usable(backend: Backend) -> None:
    backend.hold("^hang")
    backend.answer("^again$", text="again-done")

    async def scenario() -> None:
        provider = backend.provider()
        signal = CancelSignal()
        try:
            task = asyncio.ensure_future(
                call(provider, AgentRequest(prompt="hang", label="h", cwd=backend.cwd), signal)
            )
            await backend.in_flight("^hang", provider)
            signal.cancel("the test cancels")
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, 30)
            backend.release()
            again, _ = await call(provider, AgentRequest(prompt="again", label="a", cwd=backend.cwd))
            assert (again.outcome, again.text) == ("completed", "again-done")
        finally:
            backend.release()
            await provider.aclose()

    arun(scenario())


def test_a_call_whose_signal_already_fired_is_cancelled_before_the_model_is_asked(backend: Backend) -> None:
    async def scenario() -> None:
        provider = backend.provider()
        signal = CancelSignal()
        signal.cancel("before")
        try:
            with pytest.raises(asyncio.CancelledError):
                await call(provider, AgentRequest(prompt="never", label="n", cwd=backend.cwd), signal)
        finally:
            await provider.aclose()

    arun(scenario())
    mock = getattr(backend, "mock", None)
    assert mock is None or mock.received == []
