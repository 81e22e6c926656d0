"""Realm messages over the 64 MB limit, in both directions, and what one run may emit: every case is a
clear error naming the limit and what exceeded it, the run ends (never hangs) and the host is fine.

Once asyncio's "Separator is not found, and chunk exceed the limit" ended these runs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import workflow_mcp.definitions.profile as profiles
from workflow_mcp.definitions import get_profile
from workflow_mcp.engine.run import clip_text
from workflow_mcp.providers import AgentContext, AgentRequest, AgentResult, ProviderEvent
from workflow_mcp.realm.worker import MAX_MESSAGE_BYTES

from helpers import RecordingProvider, logs, run_source

MB = 1024 * 1024
OVER = MAX_MESSAGE_BYTES + 16 * MB  # 80 MB


def answering(text_size: int) -> RecordingProvider:
    async def answer(request: AgentRequest, context: AgentContext) -> AgentResult:
        return AgentResult(text="r" * text_size)

    return RecordingProvider(answer)


# -- worker → host ------------------------------------------------------------------------------


def test_a_final_value_over_the_limit_fails_the_run_naming_the_limit_and_its_size() -> None:
    outcome = run_source(f"return 'z'.repeat({OVER})")
    assert outcome.status == "failed"
    assert outcome.failure["name"] == "RangeError"
    message = outcome.failure["message"]
    assert "the workflow's final value is 80.0 MB as a realm message" in message
    assert "at most 64 MB per message" in message


def test_a_final_value_just_under_the_limit_arrives_whole() -> None:
    outcome = run_source(f"return 'z'.repeat({MAX_MESSAGE_BYTES - MB})")
    assert outcome.status == "completed", outcome.error
    assert len(outcome.result) == MAX_MESSAGE_BYTES - MB


def test_an_agent_prompt_over_the_limit_throws_a_catchable_range_error_in_the_workflow() -> None:
    body = (
        f"try {{ await agent('p'.repeat({OVER})) }} catch (e) {{ return [e.name, e.message] }}\nreturn 'sent'"
    )
    provider = answering(1)
    outcome = run_source(body, provider=provider)
    assert outcome.status == "completed", outcome.error
    name, message = outcome.result
    assert name == "RangeError" and "agent() prompt with its options is 80.0 MB" in message
    assert "at most 64 MB per message" in message
    assert provider.calls == []


def test_workflow_args_over_the_message_limit_reach_the_child_because_they_never_leave_the_realm(
    tmp_path: Path,
) -> None:
    # Child args are copied from realm to realm (as in Claude Code), never sent to the host.
    (tmp_path / "child.js").write_text(
        "export const meta = { name: 'child', description: 'measures' }\nreturn args.big.length\n"
    )
    body = f"return await workflow({{ scriptPath: 'child.js' }}, {{ big: 'a'.repeat({OVER}) }})"
    outcome = run_source(body, cwd=str(tmp_path))
    assert (outcome.status, outcome.result) == ("completed", OVER), outcome.error


def test_a_huge_thrown_error_message_is_cut_and_the_run_fails_with_it() -> None:
    outcome = run_source(f"throw new Error('e'.repeat({OVER}) + 'TAIL')")
    assert outcome.status == "failed"
    message = outcome.failure["message"]
    assert len(message) < 70_000 and message.endswith("TAIL") and "characters truncated" in message


# -- host → worker ------------------------------------------------------------------------------


def test_an_agent_result_over_the_limit_rejects_the_call_naming_the_label_and_the_limit() -> None:
    outcome = run_source("return await agent('big', { label: 'huge' })", provider=answering(OVER))
    assert outcome.status == "failed"
    assert outcome.failure["name"] == "RangeError"
    message = outcome.failure["message"]
    assert "the result of agent [huge] is 80.0 MB as JSON" in message
    assert "at most 64 MB per message" in message and "write large output to a file" in message


def test_answers_that_together_exceed_the_limit_reach_the_realm_in_several_batches() -> None:
    size = 20 * MB
    body = "const r = await parallel([1, 2, 3, 4, 5].map((i) => () => agent('p' + i)))\nreturn r.map((x) => x.length)"
    outcome = run_source(body, provider=answering(size), concurrency=5)
    assert outcome.status == "completed", outcome.error
    assert outcome.result == [size] * 5


def test_args_over_the_limit_fail_the_run_before_it_starts() -> None:
    outcome = run_source("return 1", args={"big": "a" * OVER})
    assert outcome.status == "failed"
    message = outcome.failure["message"]
    assert "the run's args with the workflow source is 80.0 MB as JSON" in message
    assert "pass large inputs as files" in message


# -- per-run caps -------------------------------------------------------------------------------


def test_log_lines_past_the_runs_limit_are_dropped_with_a_warning_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    profile = dataclasses.replace(get_profile(), max_log_lines=50)
    monkeypatch.setitem(profiles.PROFILES, profiles.DEFAULT_PROFILE, profile)
    outcome = run_source("for (let i = 0; i < 80; i++) log('line ' + i)\nreturn 'done'")
    assert outcome.status == "completed", outcome.error
    assert logs(outcome.events) == [f"line {i}" for i in range(50)]
    warnings = [e.payload["message"] for e in outcome.of("warning")]
    assert len(warnings) == 2
    assert "log limit (50 log lines" in warnings[0] and "later log lines are dropped" in warnings[0]
    assert warnings[1] == "30 log lines of this run were dropped (log limit)"


def test_a_run_that_emits_too_many_events_fails_naming_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    profile = dataclasses.replace(get_profile(), max_run_events=200)
    monkeypatch.setitem(profiles.PROFILES, profiles.DEFAULT_PROFILE, profile)
    outcome = run_source("for (let i = 0; ; i++) { phase('p' + i); await agent('x' + i) }")
    assert outcome.status == "failed"
    assert outcome.failure["name"] == "LimitError"
    assert "the run emitted 200 events, the most one run may" in outcome.failure["message"]
    assert len(outcome.events) < 220


def test_streamed_deltas_past_the_runs_limit_are_dropped_and_never_fail_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    profile = dataclasses.replace(get_profile(), max_run_events=200, max_output_deltas=50)
    monkeypatch.setitem(profiles.PROFILES, profiles.DEFAULT_PROFILE, profile)

    async def answer(request: AgentRequest, context: AgentContext) -> AgentResult:
        for i in range(500):  # a long streamed answer: more deltas than the run may have events
            await context.emit(ProviderEvent(kind="output.delta", text=f"t{i} "))
        return AgentResult(text="the whole answer")

    provider = RecordingProvider(answer, streaming=True)
    outcome = run_source("return [await agent('a'), await agent('b')]", provider=provider)
    assert outcome.status == "completed", outcome.error
    assert outcome.result == ["the whole answer", "the whole answer"]
    assert len(outcome.of("agent.output.delta")) == 50
    (warning,) = [e.payload["message"] for e in outcome.of("warning")]
    assert "this run recorded 50 streamed output deltas, the most one run records" in warning
    assert "later deltas are dropped" in warning


@pytest.mark.parametrize(
    ("length", "cut"),
    [(11_024, False), (11_025, True), (2_000_003, True)],
)
def test_log_lines_are_cut_exactly_where_claude_code_cuts_them(length: int, cut: bool) -> None:
    outcome = run_source(f"log('x'.repeat({length}))\nconsole.log('c'.repeat({length}))\nreturn 1")
    lines = outcome.logs
    for line, ch in zip(lines, "xc", strict=True):
        if cut:
            assert (
                line == ch * 5_000 + f"\n\n... [{length - 10_000} characters truncated] ...\n\n" + ch * 5_000
            )
        else:
            assert line == ch * length


def test_the_host_cuts_its_own_long_lines_the_same_way_in_utf16_units() -> None:
    text = "😀" * 6_000  # 12,000 UTF-16 units
    assert (
        clip_text(text, 11_024, 5_000)
        == "😀" * 2_500 + "\n\n... [2000 characters truncated] ...\n\n" + "😀" * 2_500
    )
    assert clip_text("😀" * 5_512, 11_024, 5_000) == "😀" * 5_512
    odd = clip_text("a" + "😀" * 6_000 + "b", 11_024, 5_000)  # both cuts split a surrogate pair
    assert (
        odd
        == "a" + "😀" * 2_499 + "\ufffd\n\n... [2002 characters truncated] ...\n\n\ufffd" + "😀" * 2_499 + "b"
    )
