"""The acp provider runs a real ACP agent, ``@zed-industries/codex-acp`` (the node wrapper and the
native agent it spawns), against the loopback mock Responses API: what only ACP has (schema
instructions and format re-asks, fan-out on one process, AUTH_REQUIRED, session interrupts and
resume, the process group, the policy as the agent's flags) — observed through the engine where the
engine can see the claim. What every provider guarantees is ``tests/contract/``."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mocks.mock_responses import Received, Reply
from workflow_mcp.providers.acp import FEEDBACK_SUFFIX, ACPProvider
from workflow_mcp.providers.base import AgentRequest, ProviderAuthError
from workflow_mcp.providers.routing import build_router

from acp_kit import AcpSetup, call, codex_acp_setup, environ_of, group_members, still_running
from helpers import RUN_TIMEOUT_S, Outcome, arun, finish, start

pytestmark = [
    pytest.mark.timeout(RUN_TIMEOUT_S * 2),
    pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process groups from /proc"),
]

SCHEMA = """const schema = { type: 'object', properties: { issues: { type: 'array', items: { type: 'string' } },
  severity: { type: 'string', enum: ['low', 'high'] } }, required: ['issues'] }"""


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AcpSetup]:
    with codex_acp_setup(tmp_path, monkeypatch) as setup:
        yield setup


async def run_on_acp(agent: AcpSetup, body: str, concurrency: int | None = None, **extra: Any) -> Outcome:
    async with agent.router(**extra) as router:
        return await finish(start(body, provider=router, cwd=str(agent.cwd), concurrency=concurrency))


def request(agent: AcpSetup, prompt: str, **fields: Any) -> AgentRequest:
    return AgentRequest(prompt=prompt, label="t", cwd=str(agent.cwd), **fields)


def test_a_schema_call_instructs_the_agent_and_returns_its_json_answer(agent: AcpSetup) -> None:
    agent.mock.on("review", Reply(json={"issues": ["unused import"], "severity": "low"}))
    out = arun(run_on_acp(agent, SCHEMA + "\nreturn await agent('review a.ts', { schema })"))
    assert out.status == "completed", out.error
    assert out.result == {"issues": ["unused import"], "severity": "low"}
    (sent,) = agent.mock.received
    assert sent.prompt.startswith("review a.ts\n\nWhen you have finished, reply with only a JSON value")
    assert '"required": ["issues"]' in sent.prompt


def test_a_non_json_answer_is_asked_again_in_the_same_session(agent: AcpSetup) -> None:
    answers = iter([Reply(text="The issues are: none."), Reply(json={"issues": []})])
    agent.mock.on("review", lambda rec: next(answers), whole_thread=True)
    out = arun(run_on_acp(agent, SCHEMA + "\nreturn await agent('review a.ts', { schema })"))
    assert out.status == "completed", out.error
    assert out.result == {"issues": []}
    first, second = agent.mock.received
    assert first.thread_id == second.thread_id
    assert second.prompt.startswith("Your last reply was not a JSON value")


def test_an_answer_failing_validation_is_re_asked_by_the_engine_in_the_same_session(agent: AcpSetup) -> None:
    answers = iter([Reply(json={"issues": "not-an-array"}), Reply(json={"issues": ["x"]})])
    agent.mock.on("review", lambda rec: next(answers), whole_thread=True)
    out = arun(run_on_acp(agent, SCHEMA + "\nreturn await agent('review a.ts', { schema })"))
    assert out.status == "completed", out.error
    assert out.result == {"issues": ["x"]}
    first, second = agent.mock.received
    assert first.thread_id == second.thread_id
    assert second.prompt.startswith("Your structured output did not match the schema")
    assert second.prompt.endswith(FEEDBACK_SUFFIX)


def test_an_answer_that_is_never_json_rejects_the_call(agent: AcpSetup) -> None:
    agent.mock.on("review", Reply(text="I could not produce the review."), whole_thread=True)
    body = SCHEMA + "\ntry { return await agent('review c.ts', { schema }) } catch (e) { return e.message }"
    out = arun(run_on_acp(agent, body))
    assert out.status == "completed", out.error
    assert out.result.startswith("agent({schema}): subagent completed without calling StructuredOutput")
    assert "not a JSON value" in out.result
    assert len(agent.mock.received) == 3  # the first answer and two format re-asks


def test_a_parallel_fan_out_of_four_runs_every_turn_at_once_in_one_agent_process(agent: AcpSetup) -> None:
    width = 4
    barrier = threading.Barrier(width, timeout=60)

    def together(rec: Received) -> Reply:
        barrier.wait()  # every request must be in flight at the same time to pass
        return Reply(text=rec.prompt.upper())

    agent.mock.on("^item", together)
    body = f"return await parallel(Array.from({{ length: {width} }}, (_, i) => () => agent('item ' + i)))"

    async def scenario() -> tuple[Outcome, list[int]]:
        async with agent.router() as router:
            out = await finish(start(body, provider=router, cwd=str(agent.cwd), concurrency=width))
            provider = router.providers["acp"]
            assert isinstance(provider, ACPProvider)
            return out, provider.processes

    out, processes = arun(scenario())
    assert out.status == "completed", out.error
    assert out.result == [f"ITEM {i}" for i in range(width)]
    assert agent.mock.peak_in_flight == width
    assert len(processes) == 1
    assert len({r.thread_id for r in agent.mock.received}) == width


def test_an_agent_without_any_login_answers_auth_required_and_that_raises_the_auth_error(
    agent: AcpSetup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "CODEX_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    empty_home = tmp_path / "logged-out"  # no config (so OpenAI itself), no auth.json, no key
    empty_home.mkdir()

    async def scenario() -> None:
        provider = agent.provider(set_env={"CODEX_HOME": str(empty_home)}, env=[])
        try:
            with pytest.raises(ProviderAuthError) as caught:
                await call(provider, request(agent, "hello"))
        finally:
            await provider.aclose()
        assert caught.value.to_json()["reason"] == "auth_required"
        assert caught.value.backend == "codex-acp"

    arun(scenario())
    assert agent.mock.received == []


def test_a_turn_interrupted_from_outside_the_call_resolves_skipped(agent: AcpSetup) -> None:
    agent.mock.on("^hang", Reply(hold=True))

    async def scenario() -> None:
        provider = agent.provider()
        try:
            task = asyncio.ensure_future(call(provider, request(agent, "hang")))
            rec = await asyncio.to_thread(agent.mock.wait_for_prompt, "^hang")
            assert rec.thread_id in provider.running_sessions  # codex's thread is the ACP session
            await provider.interrupt_session(rec.thread_id)
            result, _ = await asyncio.wait_for(task, 20)
            assert result.outcome == "skipped"
        finally:
            agent.mock.release()
            await provider.aclose()

    arun(scenario())


def test_the_session_id_is_the_result_session_and_a_request_with_it_resumes_that_session(
    agent: AcpSetup,
) -> None:
    async def scenario() -> None:
        provider = agent.provider()
        try:
            first, _ = await call(provider, request(agent, "ECHO:one"))
            assert first.session
        finally:
            await provider.aclose()
        fresh = agent.provider()  # a new process: the session comes back from the agent's store
        try:
            second, events = await call(fresh, request(agent, "ECHO:two", session=first.session))
            assert second.session == first.session
            assert second.text == "two-done"
            assert any(e.text.startswith("resumed codex-acp session") for e in events)
        finally:
            await fresh.aclose()

    arun(scenario())
    one, two = agent.mock.received
    assert one.thread_id == two.thread_id
    assert "ECHO:one" in str(two.body["input"])  # the resumed session carries the first turn


def test_closing_kills_the_wrapper_and_the_native_agent_it_spawned(agent: AcpSetup) -> None:
    async def scenario() -> tuple[int, list[int]]:
        provider = agent.provider()
        try:
            await call(provider, request(agent, "ECHO:x"))
            (pgid,) = provider.processes
            members = group_members(pgid)
        finally:
            await provider.aclose()
        return pgid, members

    pgid, members = arun(scenario())
    assert len(members) >= 2  # node and the native codex-acp
    assert still_running(members) == []
    assert group_members(pgid) == []


def test_the_agent_process_sees_only_allowlisted_environment_names(
    agent: AcpSetup, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UNRELATED_SECRET_TOKEN", "s3cret")

    async def scenario() -> list[dict[str, str]]:
        provider = agent.provider()
        try:
            await call(provider, request(agent, "ECHO:env"))
            (pgid,) = provider.processes
            return [environ_of(pid) for pid in group_members(pgid)]
        finally:
            await provider.aclose()

    for seen in arun(scenario()):
        assert "UNRELATED_SECRET_TOKEN" not in seen
        assert seen["MOCK_API_KEY"] == "mock-key"
        assert seen["CODEX_HOME"] == str(agent.home)
        assert seen["PATH"] == os.environ["PATH"]


def sandbox_line(rec: Received) -> str:
    """The sandbox sentence of the instructions codex sends the model."""
    text = json.dumps(rec.body["input"])
    return text[text.index("`sandbox_mode` is") :].split("\\n")[0]


def test_the_policy_reaches_codex_acp_as_its_sandbox_and_settings_args_cannot_widen_it(
    agent: AcpSetup,
) -> None:
    body = "return await agent('ECHO:p')"
    arun(
        run_on_acp(
            agent,
            body,
            settings={"acp": {**agent.settings, "args": ["-c", 'sandbox_mode="danger-full-access"']}},
            provider="acp",
        )
    )
    (rec,) = agent.mock.received
    assert sandbox_line(rec).startswith("`sandbox_mode` is `workspace-write`")
    assert "Network access is restricted" in sandbox_line(rec)


def test_a_caller_narrowing_the_policy_to_read_only_reaches_codex_acp(agent: AcpSetup) -> None:
    async def scenario() -> None:
        router = build_router(provider="acp", config=agent.config(), policy={"sandbox": "read-only"})
        try:
            await finish(start("return await agent('ECHO:r')", provider=router, cwd=str(agent.cwd)))
        finally:
            await router.aclose()

    arun(scenario())
    (rec,) = agent.mock.received
    assert sandbox_line(rec).startswith("`sandbox_mode` is `read-only`")
