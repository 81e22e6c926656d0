"""agent() semantics beyond the conformance cases (profile claude-code/2.1.332): what reaches the
provider, stalls, schema re-asks, invalid schemas, the 1,000-call cap and budget admission. Engine-only
behaviour runs on the scripted in-memory realm; what the realm decides (fan-out slots dropped for the
budget, nested workflows) runs on Node."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp.engine.backoff import RetryPolicy
from workflow_mcp.providers import AgentContext, AgentRequest, AgentResult, FakeProvider, ProviderCapabilities
from workflow_mcp.providers.base import ProviderEvent
from workflow_mcp.realm.scripted import AgentRejected, ScriptedWorkflow

from helpers import count, run_scripted, run_source

SCHEMA = {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}
SCHEMA_JS = "{ type: 'object', properties: { n: { type: 'number' } }, required: ['n'] }"


def test_every_recognised_option_reaches_the_provider_and_unknown_ones_do_not() -> None:
    provider = FakeProvider({"default": {"result": {"n": 1}}})

    async def script(realm: ScriptedWorkflow) -> Any:
        return await realm.agent(
            "the prompt",
            label="L1",
            phase="Custom",
            model="sonnet",
            effort="high",
            agentType="general-purpose",
            isolation="worktree",
            stallMs=60000,
            schema=SCHEMA,
            disallowedTools=["Bash"],
            bashCommandClamp=["Bash(ls)"],
            sharedHeadLength=12,
            totallyUnknown={"x": 1},
        )

    outcome = run_scripted(script, provider=provider)
    assert outcome.result == {"n": 1}
    (request,) = provider.calls
    (queued,) = outcome.of("agent.queued")
    assert request.prompt == "the prompt"
    assert request.label == "L1"
    assert request.phase == "Custom"
    assert request.model == "sonnet"
    assert request.effort == "high"
    assert request.agent_type == "general-purpose"
    assert request.isolation == "worktree"
    assert request.stall_ms == 60000
    assert request.schema == SCHEMA
    assert request.attempt == 1 and request.feedback is None
    assert request.run_id == outcome.handle.run_id
    assert request.agent_id == queued.agent_id
    assert request.options["disallowedTools"] == ["Bash"]
    assert request.options["bashCommandClamp"] == ["Bash(ls)"]
    assert request.options["sharedHeadLength"] == 12
    assert "totallyUnknown" not in request.options
    assert "label" not in request.options and "phase" not in request.options


def one_call(**opts: Any) -> Callable[[ScriptedWorkflow], Coroutine[Any, Any, Any]]:
    """A scripted workflow making one agent('p', opts) call and returning its result."""

    async def script(realm: ScriptedWorkflow) -> Any:
        return await realm.agent("p", **opts)

    return script


# The options below reach the engine as the JSON values the realm sends; the realm's own reading of
# a JavaScript options object is the conformance cases' (agents-option-fallbacks, effort-names-normalized).


@pytest.mark.parametrize("effort", ["ludicrous", 42, "", " low", {}, None])
def test_an_invalid_effort_is_ignored_and_the_call_still_runs(effort: Any) -> None:
    provider = FakeProvider({"default": {"text": "effort={effort}"}})
    outcome = run_scripted(one_call(effort=effort), provider=provider)
    assert outcome.result == "effort="
    (request,) = provider.calls
    assert request.effort is None
    assert "effort" not in request.options


@pytest.mark.parametrize("effort", ["low", "medium", "high", "xhigh", "max"])
def test_each_valid_effort_reaches_the_provider(effort: str) -> None:
    provider = FakeProvider()
    run_scripted(one_call(effort=effort), provider=provider)
    assert provider.calls[0].effort == effort


@pytest.mark.parametrize(("effort", "reaches"), [("HIGH", "high"), ("Low", "low"), (["max"], "max")])
def test_an_effort_is_read_as_its_lower_case_string_as_claude_reads_it(effort: Any, reaches: str) -> None:
    provider = FakeProvider()
    run_scripted(one_call(effort=effort), provider=provider)
    assert provider.calls[0].effort == reaches
    assert provider.calls[0].options["effort"] == reaches


def test_the_provider_sees_the_coerced_prompt_and_the_fallback_label() -> None:
    provider = FakeProvider()
    run_source(
        "await agent({ toString() { return 'never called' } })\nawait agent(7)\n"
        "await agent('  many\\n\\n spaces\\there ' + 'x'.repeat(80))",
        provider=provider,
    )
    prompts = [c.prompt for c in provider.calls]
    assert prompts[:2] == ["[object]", "7"]
    raw = "  many\n\n spaces\there " + "x" * 80
    assert provider.calls[2].prompt == raw
    # the first 60 raw characters, whitespace runs collapsed, trimmed; no ellipsis
    assert provider.calls[2].label == "many spaces here " + "x" * 39


def test_agents_before_the_first_phase_have_none_and_later_ones_take_the_current_phase() -> None:
    provider = FakeProvider()
    run_source(
        "await agent('a')\nphase('One')\nawait agent('b')\nawait agent('c', { phase: 'Other' })\n"
        "phase('Two')\nawait agent('d')",
        provider=provider,
    )
    assert [c.phase for c in provider.calls] == [None, "One", "Other", "Two"]


# -- stalls ------------------------------------------------------------------------------------


async def stalling(realm: ScriptedWorkflow) -> str:
    start = asyncio.get_running_loop().time()
    try:
        result = "resolved: " + str(await realm.agent("x", label="slow", stallMs=50))
    except AgentRejected as exc:
        result = "rejected: " + exc.message
    return f"{result} after {asyncio.get_running_loop().time() - start:.3f} s"


# The stall window runs on the loop's clock: on a virtual-time loop the tests below are exact and take
# no wall-clock time (no race between a 50 ms window and a 1 s answer on a loaded machine).


def test_a_call_that_makes_no_progress_within_stall_ms_is_retried_five_times_then_rejects() -> None:
    provider = FakeProvider({"default": {"text": "late", "delayMs": 1000}})
    outcome = run_scripted(stalling, provider=provider, virtual_time=True)
    assert outcome.status == "completed", outcome.error
    assert re.match(r"rejected: .*stall.* after 0\.300 s$", outcome.result), outcome.result  # 6 x 50 ms
    assert len(provider.calls) == 6  # the first attempt and 5 retries
    assert count(outcome.events, "warning") == 5
    (failed,) = outcome.of("agent.failed")
    assert failed.payload["reason"] == "stalled"
    assert count(outcome.events, "agent.started") == 1


def test_a_stalled_call_that_answers_on_a_retry_resolves() -> None:
    provider = FakeProvider(
        {"default": {"sequence": [{"text": "late", "delayMs": 1000}, {"text": "on time"}]}}
    )
    outcome = run_scripted(stalling, provider=provider, virtual_time=True)
    assert outcome.result == "resolved: on time after 0.050 s"
    assert len(provider.calls) == 2
    assert count(outcome.events, "warning") == 1


# -- structured output -------------------------------------------------------------------------


async def schema_call(realm: ScriptedWorkflow) -> Any:
    try:
        return await realm.agent("x", label="s", schema=SCHEMA)
    except AgentRejected as exc:
        return "rejected: " + exc.message


def test_an_answer_that_always_fails_the_schema_is_asked_exactly_five_times_then_rejects() -> None:
    provider = FakeProvider({"default": {"result": {"n": "not a number"}}})
    outcome = run_scripted(schema_call, provider=provider)
    assert str(outcome.result).startswith("rejected: ")
    assert "5" in outcome.result
    assert [c.attempt for c in provider.calls] == [1, 2, 3, 4, 5]
    assert provider.calls[0].feedback is None
    assert all(c.feedback for c in provider.calls[1:])
    assert len({c.agent_id for c in provider.calls}) == 1
    (failed,) = outcome.of("agent.failed")
    assert failed.payload["reason"] == "schema_validation"


def test_an_answer_that_passes_the_schema_on_a_re_ask_resolves_with_it() -> None:
    provider = FakeProvider(
        {"default": {"sequence": [{"result": {"n": "x"}}, {"result": {}}, {"result": {"n": 3}}]}}
    )
    outcome = run_scripted(schema_call, provider=provider)
    assert outcome.result == {"n": 3}
    assert len(provider.calls) == 3


@pytest.mark.parametrize("schema", ["5", "'object'", "true"])
def test_a_non_object_schema_rejects_with_a_type_error_before_the_provider_is_called(schema: str) -> None:
    provider = FakeProvider()
    body = (
        f"try {{ await agent('x', {{ schema: {schema} }}); return 'resolved' }}\n"
        "catch (e) { return [Object.getPrototypeOf(e) === null, e.name] }"
    )
    outcome = run_source(body, provider=provider)
    assert outcome.result == [True, "TypeError"]  # a host error: a null-prototype object
    assert provider.calls == []
    assert count(outcome.events, "agent.started") == 0


@pytest.mark.parametrize(
    "schema", ["{ type: 'bogus-type' }", "{ type: 'object', required: 'n' }", "{}", "[1]"]
)
def test_an_object_schema_that_fails_the_meta_schema_rejects_with_an_error_before_the_provider(
    schema: str,
) -> None:
    provider = FakeProvider()
    body = (
        f"try {{ await agent('x', {{ schema: {schema} }}); return 'resolved' }}\n"
        "catch (e) { return [e.name, Object.getPrototypeOf(e) === null, e.message] }"
    )
    outcome = run_source(body, provider=provider)
    name, is_host_error, message = outcome.result
    assert (name, is_host_error) == ("TelemetrySafeError", True)
    assert message.startswith(
        ("agent({schema}) received an invalid JSON Schema: ", "agent({schema}) received an unusable")
    )
    assert provider.calls == []


def test_a_null_schema_runs_as_a_plain_text_call() -> None:
    provider = FakeProvider({"default": {"text": "plain"}})
    outcome = run_source("return await agent('x', { schema: null })", provider=provider)
    assert outcome.result == "plain"
    assert provider.calls[0].schema is None


def test_a_call_rejected_for_its_schema_still_counts_toward_the_call_cap() -> None:
    provider = FakeProvider()

    async def script(realm: ScriptedWorkflow) -> list[str]:
        out = []
        for opts in ({"schema": 5}, {}, {}):
            try:
                await realm.agent("x", **opts)
                out.append("ok")
            except AgentRejected as exc:
                out.append(exc.message)
        return out

    outcome = run_scripted(script, provider=provider, max_agents=2)
    first, second, third = outcome.result
    assert "schema" in first
    assert second == "ok"
    assert "call cap" in third
    assert len(provider.calls) == 1


# -- the 1,000-call cap ------------------------------------------------------------------------

CHILD = (
    "export const meta = { name: 'child-fan', description: 'fans out args.n agent calls' }\n"
    "const r = await parallel(\n"
    "  Array.from({ length: args.n }, (_, i) => () => agent('c' + i, { label: 'c' })))\n"
    "return r.filter((x) => x === null).length\n"
)


def test_the_1000_call_cap_counts_the_calls_of_nested_children(tmp_path: Path) -> None:
    (tmp_path / ".claude" / "workflows").mkdir(parents=True)
    (tmp_path / ".claude" / "workflows" / "child-fan.js").write_text(CHILD)
    provider = FakeProvider({"default": {"text": "ok"}})
    body = (
        "const a = await parallel(\n"
        "  Array.from({ length: 600 }, (_, i) => () => agent('p' + i, { label: 'p' })))\n"
        "const childNulls = await workflow('child-fan', { n: 600 })\n"
        "let direct\n"
        "try { await agent('one more'); direct = 'resolved' } catch (e) { direct = e.message }\n"
        "return { parentNulls: a.filter((x) => x === null).length, childNulls, direct }"
    )
    outcome = run_source(
        body, provider=provider, cwd=str(tmp_path), home=str(tmp_path / "home"), concurrency=16
    )
    assert outcome.status == "completed", outcome.error
    result: dict[str, Any] = outcome.result
    assert result["parentNulls"] == 0
    assert result["childNulls"] == 200
    assert "1,000" in result["direct"]
    assert len(provider.calls) == 1000
    assert count(outcome.events, "agent.started") == 1000


# -- budget admission --------------------------------------------------------------------------

BUDGET_SCRIPT = {"rules": [{"match": {"label": "big"}, "respond": {"text": "s", "tokens": {"output": 100}}}]}


def test_budget_admission_logs_one_line_per_fan_out_for_its_dropped_slots() -> None:
    provider = FakeProvider(BUDGET_SCRIPT)
    body = (
        "await agent('spend', { label: 'big' })\n"
        "const r = await parallel([1, 2, 3, 4, 5].map((i) => () => agent('s' + i)))\n"
        "const q = await pipeline([1, 2, 3], (x) => agent('q' + x))\n"
        "const mixed = await parallel([() => 'plain', () => agent('m')])\n"
        "return [r, q, mixed]"
    )
    outcome = run_source(body, provider=provider, token_budget=50)
    assert outcome.result == [[None] * 5, [None] * 3, ["plain", None]]
    assert len(provider.calls) == 1
    lines = outcome.logs
    assert len(lines) == 3, lines
    assert re.search(r"parallel.*\b5\b.*budget", lines[0]), lines[0]
    assert re.search(r"pipeline.*\b3\b.*budget", lines[1]), lines[1]
    assert re.search(r"parallel.*\b1\b.*budget", lines[2]), lines[2]
    assert not any("failed" in line for line in lines)


async def two_calls(realm: ScriptedWorkflow) -> list[Any]:
    await realm.agent("a")
    return [await realm.agent("b"), realm.spent]


def test_a_budget_of_zero_admits_every_call() -> None:
    provider = FakeProvider({"default": {"text": "ok", "tokens": {"output": 10}}})
    outcome = run_scripted(two_calls, provider=provider, token_budget=0)
    assert outcome.result == ["ok", 20]
    assert len(provider.calls) == 2


def test_a_call_after_the_budget_is_spent_is_refused_before_the_provider() -> None:
    provider = FakeProvider({"default": {"text": "ok", "tokens": {"output": 60}}})

    async def script(realm: ScriptedWorkflow) -> list[Any]:
        out: list[Any] = [await realm.agent("a"), await realm.agent("b")]  # 120 of 100 spent
        try:
            await realm.agent("c")
        except AgentRejected as exc:
            out.append([exc.code, exc.message])
        return out

    outcome = run_scripted(script, provider=provider, token_budget=100)
    first, second, (code, message) = outcome.result
    assert (first, second, code) == ("ok", "ok", "budget_exceeded")
    assert "120 of 100 output tokens" in message
    assert len(provider.calls) == 2


def test_only_output_tokens_are_charged_to_the_budget() -> None:
    provider = FakeProvider({"default": {"text": "ok", "tokens": {"input": 1000, "output": 7}}})
    outcome = run_scripted(two_calls, provider=provider, token_budget=100)
    assert outcome.result == ["ok", 14]
    (completed,) = outcome.of("run.completed")
    assert completed.payload["tokenUsage"]["spent"] == 14


class Retrying:
    """A provider whose backend reports that it is retrying (a ``retry`` event, as codex's
    "Reconnecting..." becomes) and then never answers."""

    def __init__(self, *, streaming: bool = True) -> None:
        self.name = "retrying"
        self.capabilities = ProviderCapabilities(streaming=streaming)
        self.calls = 0

    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        self.calls += 1
        await context.emit(ProviderEvent(kind="retry", text="Reconnecting... 2/5 (no network)"))
        await asyncio.Event().wait()  # hung: only the stall window ends this
        raise AssertionError("unreachable")


def test_retry_events_are_not_progress_so_a_backend_that_reconnects_forever_stalls() -> None:
    provider = Retrying()
    outcome = run_scripted(stalling, provider=provider, virtual_time=True)
    assert re.match(r"rejected: agent stalled on all 6 attempts.* after 0\.300 s$", outcome.result), (
        outcome.result
    )
    assert "the provider was retrying: Reconnecting... 2/5 (no network)" in outcome.result
    assert provider.calls == 6
    warnings = [e.payload["message"] for e in outcome.of("warning")]
    assert warnings[0] == (
        "[slow] stalled: no progress for 50 ms; the provider was retrying: Reconnecting... 2/5 (no network); "
        "retrying (1 of 5)"
    )


def test_the_stall_window_applies_to_providers_that_do_not_stream_and_its_default_is_an_option() -> None:
    # No stallMs option: the run's default window (RunOptions.stall_ms, else the profile's 180 s).
    provider = Retrying(streaming=False)

    async def quiet(realm: ScriptedWorkflow) -> str:
        try:
            return str(await realm.agent("x", label="quiet"))
        except AgentRejected as exc:
            return "rejected: " + exc.message

    outcome = run_scripted(quiet, provider=provider, stall_ms=40, virtual_time=True)
    assert outcome.result.startswith("rejected: agent stalled on all 6 attempts (no progress for 40 ms each)")
    assert provider.calls == 6


class RateLimited:
    """Answers ``rate_limit`` (with ``retry_after_s``) ``times`` times, then text."""

    def __init__(self, times: int, retry_after_s: float | None = 0.0) -> None:
        self.name = "limited"
        self.capabilities = ProviderCapabilities(streaming=True)
        self.times = times
        self.retry_after_s = retry_after_s
        self.calls = 0

    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        self.calls += 1
        if self.calls <= self.times:
            return AgentResult(
                outcome="provider_failed",
                message="429 Too Many Requests",
                failure="rate_limit",
                retry_after_s=self.retry_after_s,
            )
        return AgentResult(text=f"answered on call {self.calls}")


def test_a_rate_limited_answer_is_retried_honouring_retry_after_then_resolves() -> None:
    provider = RateLimited(times=2)
    outcome = run_scripted(one_call(label="busy"), provider=provider, virtual_time=True)
    assert outcome.result == "answered on call 3"
    warnings = [e.payload["message"] for e in outcome.of("warning")]
    assert warnings == [
        "[busy] rate limit: 429 Too Many Requests; retrying in 0.0 s (Retry-After 0 s; 1 of 4)",
        "[busy] rate limit: 429 Too Many Requests; retrying in 0.0 s (Retry-After 0 s; 2 of 4)",
    ]
    assert count(outcome.events, "agent.started") == 1 and not outcome.of("agent.failed")


def test_rate_limit_retries_are_bounded_then_the_call_resolves_null_like_a_provider_failure() -> None:
    provider = RateLimited(times=100, retry_after_s=None)
    policy = RetryPolicy(retries=2, base_ms=1, max_ms=2)
    outcome = run_scripted(one_call(label="busy"), provider=provider, retry=policy, virtual_time=True)
    assert outcome.status == "completed" and outcome.result is None
    assert provider.calls == 3
    (failed,) = outcome.of("agent.failed")
    assert failed.payload["reason"] == "provider_failed"
    assert "retrying in" in outcome.of("warning")[0].payload["message"]


def test_a_retry_after_longer_than_the_policy_allows_is_not_waited_for() -> None:
    provider = RateLimited(times=1, retry_after_s=3600)
    outcome = run_scripted(one_call(label="busy"), provider=provider, virtual_time=True)
    assert outcome.result is None and provider.calls == 1 and not outcome.of("warning")


def test_the_backoff_doubles_up_to_its_bound_with_jitter_in_the_upper_half() -> None:
    policy = RetryPolicy(retries=10, base_ms=100, max_ms=400)
    low, high = random.Random(0), random.Random(1)
    for retry, step in ((1, 0.1), (2, 0.2), (3, 0.4), (4, 0.4), (10, 0.4)):
        for rng in (low, high):
            wait = policy.delay(retry, None, rng)
            assert wait is not None and step / 2 <= wait <= step
    assert policy.delay(11, None) is None
    assert 2.0 <= (policy.delay(1, 2.0) or 0) <= 2.2


# -- agentTimeoutMs ------------------------------------------------------------------------------
# On a virtual-time loop: the limit is exact, and no test waits for it in wall-clock time.


async def timed(realm: ScriptedWorkflow) -> str:
    start = asyncio.get_running_loop().time()
    try:
        result = "resolved: " + str(await realm.agent("x", label="long"))
    except AgentRejected as exc:
        result = "rejected: " + exc.message
    return f"{result} after {asyncio.get_running_loop().time() - start:.3f} s"


def test_a_call_past_agent_timeout_ms_is_cut_at_the_limit_and_rejects_naming_it() -> None:
    provider = FakeProvider({"default": {"text": "late", "delayMs": 10_000}})
    outcome = run_scripted(timed, provider=provider, agent_timeout_ms=2_000, virtual_time=True)
    assert outcome.result == (
        "rejected: the agent did not finish within 2000 ms (agentTimeoutMs) after 2.000 s"
    ), outcome.result
    assert len(provider.calls) == 1 and not outcome.of("warning")
    (failed,) = outcome.of("agent.failed")
    assert failed.payload["reason"] == "error"


def test_the_timeout_spans_the_stall_retries_of_one_call() -> None:
    provider = FakeProvider({"default": {"text": "late", "delayMs": 10_000}})
    outcome = run_scripted(timed, provider=provider, stall_ms=500, agent_timeout_ms=1_200, virtual_time=True)
    assert outcome.result == (
        "rejected: the agent did not finish within 1200 ms (agentTimeoutMs) after 1.200 s"
    ), outcome.result
    assert len(provider.calls) == 3  # at 0, 0.5 and 1.0 s; the third is cut at 1.2 s
    assert count(outcome.events, "warning") == 2


def test_a_call_that_answers_within_the_timeout_resolves() -> None:
    provider = FakeProvider({"default": {"text": "in time", "delayMs": 1_999}})
    outcome = run_scripted(timed, provider=provider, agent_timeout_ms=2_000, virtual_time=True)
    assert outcome.result == "resolved: in time after 1.999 s"


def test_a_rate_limit_retry_that_would_end_past_the_timeout_is_not_waited_for() -> None:
    provider = RateLimited(times=1, retry_after_s=5)
    outcome = run_scripted(
        one_call(label="busy"), provider=provider, agent_timeout_ms=2_000, virtual_time=True
    )
    assert outcome.result is None and provider.calls == 1 and not outcome.of("warning")
    (failed,) = outcome.of("agent.failed")
    assert failed.payload["reason"] == "provider_failed"


def test_the_queued_event_carries_a_bounded_masked_preview_of_the_prompt() -> None:
    provider = FakeProvider({"default": {"text": "ok"}})
    prompt = "Deploy with token=abcd1234secret then report. " + "detail " * 200

    async def script(realm: ScriptedWorkflow) -> Any:
        return await realm.agent(prompt, label="deploy")

    outcome = run_scripted(script, provider=provider)
    (queued,) = outcome.of("agent.queued")
    preview = queued.payload["promptPreview"]
    assert preview.startswith("Deploy with token=[redacted] then report. detail")
    assert len(preview) == 300 and preview.endswith("…")
    assert provider.calls[0].prompt == prompt  # the provider still gets the prompt as written
