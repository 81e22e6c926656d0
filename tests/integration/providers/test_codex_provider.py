"""The codex provider runs real Codex turns (the SDK's bundled ``codex app-server``) against the
loopback mock Responses API: what only Codex has (strict schemas, thread re-asks and resume, turn
interrupts, fan-out on one app-server, policy, routing, reconnects) — observed through the engine
where the engine can see the claim. What every provider guarantees is ``tests/contract/``."""

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
    AgentRequest,
)
from workflow_mcp.providers.codex import CodexProvider
from workflow_mcp.providers.routing import ModelAliasError

from codex_kit import CodexSetup
from helpers import RUN_TIMEOUT_S, Outcome, arun, finish, start
from helpers import call_provider as call

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S * 2)


async def run_on_codex(codex: CodexSetup, body: str, concurrency: int | None = None, **extra: Any) -> Outcome:
    async with codex.router(**extra) as router:
        return await finish(start(body, provider=router, cwd=str(codex.cwd), concurrency=concurrency))


def provider_for(codex: CodexSetup, **settings: Any) -> CodexProvider:
    return CodexProvider.create({**codex.settings, **settings}, policy=codex.config().policy, source="test")


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
    # The workflow caught the rejection, but its only call failed for a configuration reason: the
    # run fails with that reason instead of completing.
    assert out.status == "failed" and out.error is not None
    assert out.error.startswith("every agent call of this run (1) failed for one reason: model 'sonnet'")
    assert "Claude model alias" in out.error and "[providers.codex.models]" in out.error
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


def test_a_codex_that_reconnects_forever_fails_within_six_stall_windows(
    codex: CodexSetup, tmp_path: Path
) -> None:
    # The hang: codex cannot reach its model and retries ("Reconnecting... n/5", then
    # "waiting for network") forever. Those retries are not progress, so the stall window fires.
    import socket

    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    home = tmp_path / "unreachable-home"
    home.mkdir()
    (home / "config.toml").write_text(
        'model = "mock-model"\nmodel_provider = "mock"\napproval_policy = "never"\n'
        '[model_providers.mock]\nname = "Unreachable"\n'
        f'base_url = "http://127.0.0.1:{port}/v1"\nwire_api = "responses"\nenv_key = "MOCK_API_KEY"\n'
    )
    stall_ms = 3500  # codex reports its first reconnect about 3 s into a turn
    body = f"try {{ return await agent('say hi', {{ label: 'hi', stallMs: {stall_ms} }}) }} catch (e) {{ return e.message }}"

    async def scenario() -> tuple[Outcome, float]:
        settings = {**codex.settings, "codex_home": str(home)}
        async with codex.router(settings={"codex": settings}, provider="codex") as router:
            loop = asyncio.get_running_loop()
            began = loop.time()
            out = await finish(start(body, provider=router, cwd=str(codex.cwd)))
            return out, loop.time() - began

    out, elapsed = arun(scenario())
    assert out.status == "completed", out.error
    assert out.result.startswith(f"agent stalled on all 6 attempts (no progress for {stall_ms} ms each)")
    warnings = [e.payload["message"] for e in out.of("warning")]
    assert len(warnings) == 5
    assert any("the provider was retrying: codex: Reconnecting..." in w for w in warnings), warnings
    assert elapsed < stall_ms / 1000 * 6 + 3.0, elapsed  # six windows, plus the run's own start-up
