"""The acp provider against a scripted ACP agent (``acp_stub_agent.py``, the same SDK on the agent
side) for what a model mock cannot provoke in a real agent: permission requests answered from the
policy, AUTH_REQUIRED, a crashing agent, reported usage, model and effort choices, the process
pool, and the whole process group killed on close."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp import MemoryStore, RunOptions, WorkflowService, load_workflow
from workflow_mcp.providers.acp import ACPProvider
from workflow_mcp.providers.base import (
    AgentExecutionError,
    AgentRequest,
    CancelSignal,
    ProviderAuthError,
    TokenUsage,
)
from workflow_mcp.providers.config import ProviderConfig
from workflow_mcp.providers.policy import DEFAULT_POLICY, Policy
from workflow_mcp.providers.routing import build_router

from acp_kit import SDK_SKIP_REASON, call, environ_of, group_members, registered, still_running, stub_settings
from helpers import RUN_TIMEOUT_S, arun, finish, start

pytestmark = [
    pytest.mark.timeout(RUN_TIMEOUT_S * 2),
    pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process groups from /proc"),
]

pytest.importorskip("acp", reason=SDK_SKIP_REASON)


def stub(policy: Policy = DEFAULT_POLICY, **settings: Any) -> ACPProvider:
    return ACPProvider.create(stub_settings(**settings), policy=policy, source="test")


def ask(prompt: str, cwd: Path, **fields: Any) -> AgentRequest:
    return AgentRequest(prompt=prompt, label="stub", cwd=str(cwd), **fields)


async def one(provider: ACPProvider, request: AgentRequest) -> Any:
    try:
        return await call(provider, request)
    finally:
        await provider.aclose()


PERMISSIONS = [
    # (policy, prompt, the option the agent was given)
    ({}, "permission read /etc/hosts", "allow_once"),
    ({}, "permission search", "allow_once"),
    ({}, "permission edit src/a.ts", "allow_once"),
    ({}, "permission delete {cwd}/old.txt", "allow_once"),
    ({}, "permission edit /etc/passwd", "reject_once"),
    ({}, "permission edit", "reject_once"),
    ({}, "permission move {cwd}/../escape.txt", "reject_once"),
    ({"writable_roots": ("{tmp}/extra",)}, "permission edit {tmp}/extra/x.txt", "allow_once"),
    ({"sandbox": "read-only"}, "permission edit src/a.ts", "reject_once"),
    ({"sandbox": "danger-full-access"}, "permission edit /etc/passwd", "allow_once"),
    ({}, "permission execute", "reject_once"),
    ({}, "permission other", "reject_once"),
    ({"approvals": "auto-review"}, "permission execute", "allow_once"),
    ({"sandbox": "danger-full-access"}, "permission switch_mode", "allow_once"),
    ({}, "permission fetch", "reject_once"),
    ({"network": True}, "permission fetch", "allow_once"),
]


@pytest.mark.parametrize(("policy", "prompt", "chosen"), PERMISSIONS)
def test_a_permission_request_is_answered_from_the_policy_and_denied_when_nobody_can_approve(
    policy: dict[str, Any], prompt: str, chosen: str, tmp_path: Path
) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    values: dict[str, Any] = {
        k: tuple(v.format(tmp=tmp_path) for v in val) if isinstance(val, tuple) else val
        for k, val in policy.items()
    }
    result, events = arun(one(stub(Policy(**values)), ask(prompt.format(cwd=cwd, tmp=tmp_path), cwd)))
    assert result.text == chosen
    (decision,) = [e for e in events if "permission" in e.data]
    assert decision.data["allowed"] is (chosen == "allow_once")
    assert decision.text.startswith("permission allowed" if chosen == "allow_once" else "permission denied")


def test_a_missing_login_at_session_start_raises_the_auth_error_naming_the_agent(tmp_path: Path) -> None:
    provider = stub(set_env={"STUB_AUTH": "new"}, login_hint="stub login")
    with pytest.raises(ProviderAuthError) as caught:
        arun(one(provider, ask("hello", tmp_path)))
    assert caught.value.backend == "stub-agent"
    assert caught.value.to_json() == {
        "reason": "auth_required",
        "backend": "stub-agent",
        "detail": "Authentication required",
        "loginHint": "stub login",
    }


def test_an_expired_login_during_a_turn_raises_the_auth_error(tmp_path: Path) -> None:
    with pytest.raises(ProviderAuthError) as caught:
        arun(one(stub(agent_name="my-agent"), ask("auth", tmp_path)))
    assert caught.value.backend == "my-agent"
    assert "authentication required" in str(caught.value)


def test_an_auth_error_pauses_the_run_with_a_context_naming_the_agent(tmp_path: Path) -> None:
    async def scenario() -> Any:
        with registered():
            conf = ProviderConfig(settings={"acp": stub_settings(login_hint="stub login")})
            router = build_router(provider="acp", config=conf)
            try:
                return await finish(start("return await agent('auth')", provider=router))
            finally:
                await router.aclose()

    out = arun(scenario())
    assert out.status == "paused"
    (paused,) = out.of("run.paused")
    assert {k: paused.payload[k] for k in ("reason", "backend", "loginHint")} == {
        "reason": "auth_required",
        "backend": "stub-agent",
        "loginHint": "stub login",
    }
    assert [e.payload["reason"] for e in out.of("agent.failed")] == ["auth_required"]


def test_a_run_paused_for_a_login_resumes_after_the_login_and_replays_what_was_done(tmp_path: Path) -> None:
    logged_out, log = tmp_path / "logged-out", tmp_path / "prompts.log"
    logged_out.touch()
    source = (
        "export const meta = { name: 'login', description: 'needs a login half way' }\n"
        "const a = await agent('first')\n"
        "const b = await agent('gated second')\n"
        "return [a, b]\n"
    )
    conf = ProviderConfig(
        settings={"acp": stub_settings(set_env={"STUB_LOGGED_OUT": str(logged_out), "STUB_LOG": str(log)})}
    )

    async def scenario() -> Any:
        service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
        workflow = load_workflow(source=source)
        with registered():
            router = build_router(provider="acp", config=conf)
            try:
                first = service.start_run(workflow, provider=router, options=RunOptions(cwd=str(tmp_path)))
                assert await asyncio.wait_for(first.wait(), RUN_TIMEOUT_S) == "paused"
            finally:
                await router.aclose()
            assert service.status(first.run_id).paused_reason == "auth_required"
            logged_out.unlink()  # the user logs in
            log.write_text("")
            router = build_router(provider="acp", config=conf)
            try:
                second = service.start_run(
                    workflow, provider=router, options=RunOptions(cwd=str(tmp_path)), resume_from=first.run_id
                )
                return await asyncio.wait_for(second.result(), RUN_TIMEOUT_S)
            finally:
                await router.aclose()

    assert arun(scenario()) == ["first", "gated second"]
    assert log.read_text().splitlines() == ["gated second"]  # "first" was replayed, not run again


def test_an_agent_that_dies_mid_turn_is_a_provider_failure_and_the_next_call_starts_a_new_one(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        provider = stub()
        try:
            first, _ = await call(provider, ask("pid", tmp_path))
            crashed, _ = await call(provider, ask("crash", tmp_path))
            assert crashed.outcome == "provider_failed"
            assert crashed.message == "stub-agent exited with code 3: stub agent crashed on purpose"
            again, _ = await call(provider, ask("pid", tmp_path))
            assert again.outcome == "completed"
            assert again.text != first.text
            # A stack trace after the error: the message gives the error, not the trace's last line.
            traced, _ = await call(provider, ask("crash trace", tmp_path))
            assert traced.message == (
                "stub-agent exited with code 3: Error: ENOENT: no such file or directory, lstat '/nowhere'"
            )
        finally:
            await provider.aclose()

    arun(scenario())


def test_an_agent_error_rejects_with_the_agents_message(tmp_path: Path) -> None:
    with pytest.raises(AgentExecutionError, match="stub-agent: the disk is full"):
        arun(one(stub(), ask("fail the disk is full", tmp_path)))


def test_tool_calls_are_progress_and_the_answer_is_the_message_after_the_last_tool_call(
    tmp_path: Path,
) -> None:
    result, events = arun(one(stub(), ask("tools", tmp_path)))
    assert result.text == "final answer"
    assert [e.text for e in events if e.kind == "output.delta"] == ["let me look", "final answer"]
    progress = [e for e in events if e.kind == "progress"]
    assert [(e.data["update"], e.data["status"]) for e in progress] == [
        ("tool_call", "in_progress"),
        ("tool_call_update", "completed"),
    ]
    assert progress[0].text == "tool read a.ts (read) in_progress"


def test_token_usage_the_agent_reports_becomes_the_calls_usage(tmp_path: Path) -> None:
    result, _ = arun(one(stub(), ask("usage", tmp_path)))
    assert result.usage == TokenUsage(input=7, output=3, cache_read=2)


def test_model_and_effort_are_set_through_the_sessions_config_options(tmp_path: Path) -> None:
    result, _ = arun(one(stub(), ask("model", tmp_path, model="stub-large", effort="high")))
    assert result.text == "stub-large/high"


def test_the_configured_model_applies_when_the_call_names_none(tmp_path: Path) -> None:
    result, _ = arun(one(stub(model="stub-large"), ask("model", tmp_path)))
    assert result.text == "stub-large/medium"


def test_a_model_the_agent_does_not_offer_is_refused_naming_what_it_offers(tmp_path: Path) -> None:
    with pytest.raises(
        AgentExecutionError, match="stub-agent has no model 'gpt-9'; it offers: stub-small, stub-large"
    ):
        arun(one(stub(), ask("model", tmp_path, model="gpt-9")))


def test_an_effort_the_agent_does_not_offer_is_reported_and_left_at_its_default(tmp_path: Path) -> None:
    result, events = arun(one(stub(), ask("model", tmp_path, effort="max")))
    assert result.text == "stub-small/medium"
    assert any(e.data.get("ignored") == "effort" for e in events)


def test_an_agent_that_takes_a_system_prompt_gets_the_definitions_instructions_in_session_new(
    tmp_path: Path,
) -> None:
    request = ask("system", tmp_path, agent_type="auditor", instructions="You audit code.")
    result, _ = arun(one(stub(system_prompt_meta=True), request))
    assert result.text == "You audit code."


def test_other_agents_get_the_instructions_as_a_framed_preamble_of_the_prompt(tmp_path: Path) -> None:
    request = ask("json said", tmp_path, agent_type="auditor", instructions="You audit code.")
    result, _ = arun(one(stub(), request))
    assert result.text is not None
    assert result.text.startswith("You act as the agent described by the instructions between")
    assert "<agent-instructions>\nYou audit code.\n</agent-instructions>" in result.text
    assert result.text.endswith("The task:\njson said")


def test_a_call_without_a_definition_has_no_system_prompt_and_no_preamble(tmp_path: Path) -> None:
    result, _ = arun(one(stub(system_prompt_meta=True), ask("system", tmp_path)))
    assert result.text == "none"
    plain, _ = arun(one(stub(), ask("json said", tmp_path)))
    assert plain.text == "said"


@pytest.mark.parametrize(("tools", "chosen"), [(("Read", "Grep"), "reject_once"), (None, "allow_once")])
def test_an_agent_without_edit_tools_has_its_edit_permission_requests_refused(
    tools: tuple[str, ...] | None, chosen: str, tmp_path: Path
) -> None:
    target = str(tmp_path / "a.txt")
    request = ask(f"permission edit {target}", tmp_path, agent_type="auditor", tools=tools)
    result, _ = arun(one(stub(), request))
    assert result.text is not None and result.text.endswith(chosen)


def test_a_fenced_json_answer_is_the_structured_result(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    result, _ = arun(one(stub(), ask('json ```json\n{"a": 1}\n```', tmp_path, schema=schema)))
    assert result.has_structured and result.structured == {"a": 1}


def test_a_non_json_answer_after_the_format_re_asks_has_no_structured_output_and_says_why(
    tmp_path: Path,
) -> None:
    schema = {"type": "object"}
    result, events = arun(one(stub(json_retries=1), ask("json not json at all", tmp_path, schema=schema)))
    assert not result.has_structured
    assert result.message is not None and "not a JSON value" in result.message
    assert [e.data["reask"] for e in events if "reask" in e.data] == [1]


def test_the_pool_puts_at_most_max_sessions_turns_on_one_process(tmp_path: Path) -> None:
    async def scenario() -> None:
        provider = stub(max_sessions=2)
        signals = [CancelSignal() for _ in range(4)]
        started = [asyncio.Event() for _ in range(4)]
        tasks = [
            asyncio.ensure_future(call(provider, ask("hang", tmp_path), s, e))
            for s, e in zip(signals, started, strict=True)
        ]
        try:
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in started)), 30)
            assert len(provider.running_sessions) == 4
            assert len(provider.processes) == 2
        finally:
            for s in signals:
                s.cancel("done")
            await asyncio.wait(tasks, timeout=30)
            await provider.aclose()
        assert all(t.cancelled() for t in tasks)

    arun(scenario())


def test_one_process_serves_sequential_calls_unless_reuse_is_off(tmp_path: Path) -> None:
    async def pids(provider: ACPProvider) -> set[str]:
        try:
            return {(await call(provider, ask("pid", tmp_path)))[0].text or "" for _ in range(2)}
        finally:
            await provider.aclose()

    assert len(arun(pids(stub()))) == 1
    assert len(arun(pids(stub(reuse=False)))) == 2


def test_the_cancel_signal_ends_a_turn_and_the_provider_stays_usable(tmp_path: Path) -> None:
    async def scenario() -> None:
        provider = stub()
        signal = CancelSignal()
        try:
            started = asyncio.Event()
            task = asyncio.ensure_future(call(provider, ask("hang", tmp_path), signal, started))
            await asyncio.wait_for(started.wait(), 30)
            signal.cancel("the test cancels")
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, 20)
            again, _ = await call(provider, ask("still here", tmp_path))
            assert again.text == "still here"
        finally:
            await provider.aclose()

    arun(scenario())


def test_a_turn_interrupted_from_outside_the_call_resolves_skipped(tmp_path: Path) -> None:
    async def scenario() -> None:
        provider = stub()
        try:
            started = asyncio.Event()
            task = asyncio.ensure_future(call(provider, ask("hang", tmp_path), started=started))
            await asyncio.wait_for(started.wait(), 30)
            await provider.interrupt_session(provider.running_sessions[0])
            result, _ = await asyncio.wait_for(task, 20)
            assert result.outcome == "skipped"
        finally:
            await provider.aclose()

    arun(scenario())


def test_closing_kills_the_agents_whole_process_group_children_included(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, list[int]]:
        provider = stub()
        try:
            result, _ = await call(provider, ask("child", tmp_path))
            (pgid,) = provider.processes
            members = group_members(pgid)
            assert int(result.text or 0) in members
        finally:
            await provider.aclose()
        return pgid, members

    pgid, members = arun(scenario())
    assert still_running(members) == []
    assert group_members(pgid) == []


def test_the_agent_process_sees_only_allowlisted_environment_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UNRELATED_SECRET_TOKEN", "s3cret")
    monkeypatch.setenv("PASSED_NAME", "yes")

    async def scenario() -> dict[str, str]:
        provider = stub(env=["PASSED_NAME"], set_env={"FIXED": "1"})
        try:
            await call(provider, ask("hello", tmp_path))
            (pid,) = provider.processes
            return environ_of(pid)
        finally:
            await provider.aclose()

    seen = arun(scenario())
    assert "UNRELATED_SECRET_TOKEN" not in seen
    assert seen["PASSED_NAME"] == "yes"
    assert seen["FIXED"] == "1"
    assert "PATH" in seen
    assert os.environ["PATH"] == seen["PATH"]
