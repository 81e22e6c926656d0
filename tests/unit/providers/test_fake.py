"""FakeProvider follows the conformance README's "The fake provider script"."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

import workflow_mcp.providers as providers
from workflow_mcp.errors import InvalidInputError
from workflow_mcp.providers import (
    AgentContext,
    AgentExecutionError,
    AgentProvider,
    AgentRequest,
    AgentResult,
    CancelSignal,
    FakeProvider,
    ProviderEvent,
    TokenUsage,
)
from workflow_mcp.providers.base import ProviderUsageLimitError

SCHEMA = {
    "type": "object",
    "properties": {
        "issues": {"type": "array", "items": {"type": "string"}},
        "severity": {"type": "string", "enum": ["low", "high"]},
    },
    "required": ["issues"],
}


T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def request(prompt: str = "hello", label: str = "l", **fields: Any) -> AgentRequest:
    return AgentRequest(prompt=prompt, label=label, **fields)


async def execute(
    provider: FakeProvider,
    req: AgentRequest,
    events: list[ProviderEvent] | None = None,
    signal: CancelSignal | None = None,
) -> AgentResult:
    sink: list[ProviderEvent] = [] if events is None else events

    async def emit(event: ProviderEvent) -> None:
        sink.append(event)

    return await provider.execute(req, AgentContext(signal=signal or CancelSignal(), emit=emit))


def call(provider: FakeProvider, prompt: str = "hello", label: str = "l", **fields: Any) -> AgentResult:
    return run(execute(provider, request(prompt, label, **fields)))


def text_of(provider: FakeProvider, prompt: str = "hello", label: str = "l", **fields: Any) -> str | None:
    return call(provider, prompt, label, **fields).text


def by_label(*pairs: tuple[str, str]) -> FakeProvider:
    return FakeProvider(
        {"rules": [{"match": {"label": glob}, "respond": {"text": out}} for glob, out in pairs]}
    )


# -- the provider seam -------------------------------------------------------------------------


def test_the_fake_provider_satisfies_the_agent_provider_protocol() -> None:
    provider = FakeProvider()
    assert isinstance(provider, AgentProvider)
    assert provider.name == "fake"
    assert FakeProvider(name="dry-run").name == "dry-run"
    caps = provider.capabilities
    assert (caps.structured_output, caps.streaming, caps.cancellation) == (True, True, True)


def test_the_providers_package_exports_exactly_its_public_names() -> None:
    assert sorted(providers.__all__) == providers.__all__
    for name in providers.__all__:
        assert getattr(providers, name) is not None
    assert "FakeProvider" in providers.__all__
    assert "TokenUsage" in providers.__all__


def test_every_call_is_recorded_in_calls_in_order() -> None:
    provider = FakeProvider()
    first, second = request("a", "x"), request("b", "y", model="opus")
    run(execute(provider, first))
    run(execute(provider, second))
    assert provider.calls == [first, second]


# -- match keys --------------------------------------------------------------------------------


def test_a_label_glob_star_matches_any_run_of_characters() -> None:
    provider = by_label(("verify:*", "V"))
    assert text_of(provider, label="verify:no-any") == "V"
    assert text_of(provider, label="verify:") == "V"
    assert text_of(provider, label="xverify:a") == "hello"  # whole label, not a search


def test_a_label_glob_question_mark_matches_exactly_one_character() -> None:
    provider = by_label(("vote:?", "one"))
    assert text_of(provider, label="vote:1") == "one"
    assert text_of(provider, label="vote:12") == "hello"
    assert text_of(provider, label="vote:") == "hello"


def test_a_label_glob_is_case_sensitive_and_has_no_other_wildcards() -> None:
    provider = by_label(("[ab].c", "hit"))
    assert text_of(provider, label="[ab].c") == "hit"
    assert text_of(provider, label="a.c") == "hello"
    assert text_of(provider, label="[AB].C") == "hello"


def test_a_plain_label_matches_only_that_label() -> None:
    provider = by_label(("api", "A"))
    assert text_of(provider, label="api") == "A"
    assert text_of(provider, label="api2") == "hello"


def test_a_prompt_regex_is_searched_in_the_prompt() -> None:
    provider = FakeProvider(
        {
            "rules": [
                {"match": {"prompt": "^double 21$"}, "respond": {"text": "42"}},
                {"match": {"prompt": "rank"}, "respond": {"text": "ranked"}},
            ]
        }
    )
    assert text_of(provider, "double 21") == "42"
    assert text_of(provider, "double 210") == "double 210"
    assert text_of(provider, "please rank these") == "ranked"


@pytest.mark.parametrize(
    ("key", "field"),
    [("phase", "phase"), ("model", "model"), ("agentType", "agent_type")],
)
def test_phase_model_and_agent_type_match_exactly(key: str, field: str) -> None:
    provider = FakeProvider({"rules": [{"match": {key: "Verify"}, "respond": {"text": "hit"}}]})
    assert text_of(provider, **{field: "Verify"}) == "hit"
    assert text_of(provider, **{field: "verify"}) == "hello"
    assert text_of(provider, **{field: "Verify2"}) == "hello"
    assert text_of(provider) == "hello"


def test_an_instructions_regex_is_searched_in_the_agent_definitions_instructions() -> None:
    provider = FakeProvider(
        {"rules": [{"match": {"instructions": "security audit"}, "respond": {"text": "hit"}}]}
    )
    assert text_of(provider, instructions="You do a security audit.") == "hit"
    assert text_of(provider, instructions="You write docs.") == "hello"
    assert text_of(provider) == "hello"


def test_agent_definition_placeholders_render_its_instructions_and_tool_lists() -> None:
    provider = FakeProvider({"default": {"text": "{instructions}|{tools}|{disallowedTools}"}})
    defined = request("p", "lab", instructions="Audit.", tools=("Read", "Grep"), disallowed_tools=("Bash",))
    assert run(execute(provider, defined)).text == "Audit.|Read,Grep|Bash"
    assert run(execute(provider, request("p", "lab", tools=()))).text == "||"
    assert text_of(provider, "p", "lab") == "|*|"


def test_a_null_exact_match_selects_calls_without_that_option() -> None:
    provider = FakeProvider({"rules": [{"match": {"phase": None}, "respond": {"text": "no phase"}}]})
    assert text_of(provider) == "no phase"
    assert text_of(provider, phase="Extract") == "hello"


def test_every_given_match_key_must_hold() -> None:
    provider = FakeProvider(
        {"rules": [{"match": {"label": "judge:*", "model": "opus"}, "respond": {"text": "hit"}}]}
    )
    assert text_of(provider, label="judge:a", model="opus") == "hit"
    assert text_of(provider, label="judge:a", model="haiku") == "hello"
    assert text_of(provider, label="other", model="opus") == "hello"


def test_a_rule_without_match_matches_every_call() -> None:
    provider = FakeProvider({"rules": [{"respond": {"text": "always"}}]})
    assert text_of(provider, label="anything") == "always"


def test_the_first_matching_rule_answers() -> None:
    provider = by_label(("verify:no-any", "specific"), ("verify:*", "general"))
    assert text_of(provider, label="verify:no-any") == "specific"
    assert text_of(provider, label="verify:no-eval") == "general"


def test_the_default_answers_when_no_rule_matches() -> None:
    provider = FakeProvider(
        {"rules": [{"match": {"label": "a"}, "respond": {"text": "A"}}], "default": {"text": "D"}}
    )
    assert text_of(provider, label="a") == "A"
    assert text_of(provider, label="b") == "D"


def test_without_a_matching_rule_or_default_a_text_call_echoes_the_prompt() -> None:
    assert text_of(FakeProvider(None), "dry run me") == "dry run me"
    assert text_of(FakeProvider({}), "dry run me") == "dry run me"


def test_without_a_matching_rule_or_default_a_schema_call_gets_a_synthesized_instance() -> None:
    result = call(FakeProvider(), schema=SCHEMA)
    assert result.outcome == "completed"
    assert result.has_structured is True
    assert result.structured == {"issues": []}


# -- respond keys ------------------------------------------------------------------------------


def test_text_placeholders_render_the_call_values_and_absent_ones_as_empty() -> None:
    template = "{label}|{model}|{effort}|{agentType}|{phase}|{isolation}|{prompt}"
    provider = FakeProvider({"default": {"text": template}})
    full = request(
        "p",
        "lab",
        model="opus",
        effort="high",
        agent_type="general-purpose",
        phase="Ph",
        isolation="worktree",
    )
    assert run(execute(provider, full)).text == "lab|opus|high|general-purpose|Ph|worktree|p"
    assert text_of(provider, "p", "lab") == "lab||||||p"


def test_placeholders_are_substituted_once_and_other_braces_stay_literal() -> None:
    provider = FakeProvider({"default": {"text": '{"x": {prompt}} {unknown} {label}'}})
    assert text_of(provider, "{label}", "L") == '{"x": {label}} {unknown} L'


def test_echo_answers_with_the_prompt() -> None:
    assert text_of(FakeProvider({"default": {"echo": True}}), "say this") == "say this"


def test_echo_on_a_schema_call_gives_text_without_structured_output() -> None:
    result = call(FakeProvider({"default": {"echo": True}}), "say this", schema=SCHEMA)
    assert (result.text, result.has_structured) == ("say this", False)


def test_result_is_the_structured_output_of_a_schema_call() -> None:
    value = {"issues": ["unused import"], "severity": "low"}
    result = call(FakeProvider({"default": {"result": value}}), schema=SCHEMA)
    assert result.outcome == "completed"
    assert (result.has_structured, result.structured, result.text) == (True, value, None)


def test_result_is_returned_unvalidated_so_the_engine_can_reask() -> None:
    result = call(FakeProvider({"default": {"result": {"issues": "not-an-array"}}}), schema=SCHEMA)
    assert result.structured == {"issues": "not-an-array"}


def test_result_on_a_call_without_schema_becomes_compact_json_text() -> None:
    assert text_of(FakeProvider({"default": {"result": {"a": [1, "é"]}}})) == '{"a":[1,"é"]}'
    assert text_of(FakeProvider({"default": {"result": None}})) == "null"
    assert call(FakeProvider({"default": {"result": 3}})).has_structured is False


def test_a_string_result_on_a_call_without_schema_is_the_text_itself() -> None:
    assert text_of(FakeProvider({"default": {"result": "plain"}})) == "plain"


def test_each_call_gets_its_own_copy_of_a_result() -> None:
    provider = FakeProvider({"default": {"result": {"urls": ["u1"]}}})
    first = call(provider, schema={"type": "object"})
    first.structured["urls"].append("mutated")
    assert call(provider, schema={"type": "object"}).structured == {"urls": ["u1"]}


def test_a_script_mutated_after_construction_does_not_change_answers() -> None:
    script: dict[str, Any] = {"default": {"result": {"k": [1]}}}
    provider = FakeProvider(script)
    script["default"]["result"]["k"].append(2)
    assert call(provider, schema={"type": "object"}).structured == {"k": [1]}


def test_fail_provider_resolves_provider_failed_with_the_message() -> None:
    result = call(FakeProvider({"default": {"fail": "provider", "message": "HTTP 500"}}))
    assert (result.outcome, result.message, result.text) == ("provider_failed", "HTTP 500", None)
    assert call(FakeProvider({"default": {"fail": "provider"}})).message == "fake provider failure"


def test_fail_skip_resolves_skipped() -> None:
    result = call(FakeProvider({"default": {"fail": "skip"}}))
    assert (result.outcome, result.has_structured, result.text) == ("skipped", False, None)


def test_fail_error_raises_an_execution_error_with_the_message() -> None:
    with pytest.raises(AgentExecutionError, match="disk full"):
        call(FakeProvider({"default": {"fail": "error", "message": "disk full"}}))
    with pytest.raises(AgentExecutionError, match="fake execution error"):
        call(FakeProvider({"default": {"fail": "error"}}))


def test_fail_no_structured_output_completes_with_text_but_no_structured_output() -> None:
    result = call(
        FakeProvider({"default": {"fail": "no_structured_output", "message": "I forgot"}}), schema=SCHEMA
    )
    assert (result.outcome, result.has_structured, result.text) == ("completed", False, "I forgot")
    bare = call(FakeProvider({"default": {"fail": "no_structured_output"}}), schema=SCHEMA)
    assert (bare.has_structured, bare.text) == (False, "")


class Clock:
    """A clock a test moves by hand (seconds since the epoch)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


RESET = "2026-01-01T05:00:00Z"
RESET_EPOCH = 1767243600.0  # RESET as seconds since the epoch


def test_fail_usage_limit_raises_the_usage_limit_error_the_engine_pauses_on() -> None:
    provider = FakeProvider(
        {"default": {"fail": "usage_limit", "resetsAt": RESET, "message": "5-hour limit"}},
        clock=Clock(RESET_EPOCH - 60),
    )
    with pytest.raises(ProviderUsageLimitError) as caught:
        call(provider)
    assert caught.value.to_json() == {
        "reason": "usage_limit",
        "backend": "fake",
        "detail": "5-hour limit",
        "resetsAt": RESET,
    }
    with pytest.raises(ProviderUsageLimitError) as bare:
        call(FakeProvider({"default": {"fail": "usage_limit"}}))
    assert bare.value.resets_at is None and bare.value.detail == ""


def test_a_reset_time_with_another_zone_is_reported_in_utc_whole_seconds() -> None:
    provider = FakeProvider(
        {"default": {"fail": "usage_limit", "resetsAt": "2026-01-01T07:00:00.750+02:00"}},
        clock=Clock(0),
    )
    with pytest.raises(ProviderUsageLimitError) as caught:
        call(provider)
    assert caught.value.resets_at == RESET


def test_a_usage_limit_stops_answering_once_the_clock_reaches_its_reset_time() -> None:
    clock = Clock(RESET_EPOCH - 1)
    provider = FakeProvider(
        {
            "rules": [{"match": {"label": "a"}, "respond": {"fail": "usage_limit", "resetsAt": RESET}}],
            "default": {"text": "after the reset"},
        },
        clock=clock,
    )
    with pytest.raises(ProviderUsageLimitError):
        call(provider, label="a")
    clock.now = RESET_EPOCH
    assert text_of(provider, label="a") == "after the reset"


def test_an_expired_limit_in_a_sequence_does_not_advance_its_counter() -> None:
    clock = Clock(RESET_EPOCH)
    provider = FakeProvider(
        {"default": {"sequence": [{"fail": "usage_limit", "resetsAt": RESET}, {"text": "second"}]}},
        clock=clock,
    )
    assert text_of(provider, "p") == "p"  # the limit has reset: synthesized, the counter stays at 0
    clock.now = RESET_EPOCH - 5
    with pytest.raises(ProviderUsageLimitError):
        call(provider)
    assert text_of(provider) == "second"


def test_an_expired_queued_limit_is_dropped_and_the_next_answer_used() -> None:
    provider = FakeProvider({"default": {"text": "scripted"}}, clock=Clock(RESET_EPOCH + 1))
    provider.enqueue({"fail": "usage_limit", "resetsAt": RESET})
    provider.enqueue({"text": "queued"})
    assert text_of(provider) == "queued"
    assert text_of(provider) == "scripted"


def test_retry_after_ms_reports_a_reset_that_far_after_the_call_and_never_expires() -> None:
    clock = Clock(RESET_EPOCH - 90.4)
    provider = FakeProvider({"default": {"fail": "usage_limit", "retryAfterMs": 90_000}}, clock=clock)
    with pytest.raises(ProviderUsageLimitError) as caught:
        call(provider)
    assert caught.value.resets_at == "2026-01-01T04:59:59Z"  # whole seconds, rounded down
    clock.now = RESET_EPOCH + 3600
    with pytest.raises(ProviderUsageLimitError) as later:
        call(provider)
    assert later.value.resets_at == "2026-01-01T06:01:30Z"


def test_synthesize_echoes_text_calls_and_fills_schema_calls() -> None:
    provider = FakeProvider({"default": {"synthesize": True}})
    assert text_of(provider, "echo me") == "echo me"
    result = call(
        provider,
        schema={"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}, "required": ["n"]},
    )
    assert result.structured == {"n": 3}


def test_a_respond_without_an_answer_key_synthesizes() -> None:
    provider = FakeProvider({"default": {"tokens": {"input": 1, "output": 2}}})
    result = call(provider, "p")
    assert (result.text, result.usage) == ("p", TokenUsage(input=1, output=2))


def test_a_schema_the_synthesizer_cannot_satisfy_raises_an_execution_error() -> None:
    with pytest.raises(AgentExecutionError, match="cannot synthesize"):
        call(FakeProvider(), schema={"type": "integer", "minimum": 3, "maximum": 2})


def test_tokens_become_the_usage_of_the_call_whatever_the_outcome() -> None:
    tokens = {"input": 900, "output": 1100}
    assert call(FakeProvider({"default": {"text": "x", "tokens": tokens}})).usage == TokenUsage(900, 1100)
    failed = call(FakeProvider({"default": {"fail": "provider", "tokens": tokens}}))
    assert failed.usage == TokenUsage(900, 1100)
    cached = call(FakeProvider({"default": {"echo": True, "tokens": {"cacheRead": 5, "cacheWrite": 6}}}))
    assert cached.usage == TokenUsage(0, 0, 5, 6)


def test_usage_is_zero_without_tokens() -> None:
    assert call(FakeProvider()).usage == TokenUsage()


def test_a_sequence_answers_successive_calls_then_repeats_its_last_step() -> None:
    provider = FakeProvider(
        {
            "default": {
                "sequence": [{"text": "one"}, {"text": "two", "tokens": {"output": 2}}, {"fail": "skip"}]
            }
        }
    )
    results = [call(provider) for _ in range(5)]
    assert [r.text for r in results[:2]] == ["one", "two"]
    assert results[1].usage.output == 2
    assert [r.outcome for r in results[2:]] == ["skipped"] * 3


def test_a_sequence_counter_belongs_to_its_rule() -> None:
    provider = FakeProvider(
        {
            "rules": [
                {"match": {"label": "a"}, "respond": {"sequence": [{"text": "a1"}, {"text": "a2"}]}},
                {"match": {"label": "b"}, "respond": {"sequence": [{"text": "b1"}, {"text": "b2"}]}},
            ]
        }
    )
    assert [text_of(provider, label=x) for x in ("a", "b", "b", "a", "a")] == ["a1", "b1", "b2", "a2", "a2"]


def test_a_schema_reask_is_a_new_call_and_takes_the_next_sequence_step() -> None:
    provider = FakeProvider(
        {"default": {"sequence": [{"result": {"issues": "bad"}}, {"result": {"issues": ["fixed"]}}]}}
    )
    first = call(provider, schema=SCHEMA)
    second = call(provider, schema=SCHEMA, attempt=2, feedback="issues: 'bad' is not of type 'array'")
    assert (first.structured, second.structured) == ({"issues": "bad"}, {"issues": ["fixed"]})


def test_the_extract_until_dry_script_answers_rounds_verifies_and_judges() -> None:
    # conformance runtime/shape-extract-until-dry
    rules_schema = {
        "type": "object",
        "properties": {"rules": {"type": "array", "items": {"type": "string"}}},
        "required": ["rules"],
    }
    step_tokens = {"input": 100, "output": 50}
    provider = FakeProvider(
        {
            "rules": [
                {
                    "match": {"label": "extract"},
                    "respond": {
                        "sequence": [
                            {"result": {"rules": ["no-eval", "no-any"]}, "tokens": step_tokens},
                            {"result": {"rules": ["no-any", "prefer-const"]}, "tokens": step_tokens},
                            {"result": {"rules": ["no-eval"]}, "tokens": step_tokens},
                        ]
                    },
                },
                {"match": {"label": "verify:no-any"}, "respond": {"result": {"real": False}}},
                {"match": {"label": "verify:*"}, "respond": {"result": {"real": True}}},
                {"match": {"label": "judge:*"}, "respond": {"text": "{model}:{prompt}"}},
            ]
        }
    )
    rounds = [call(provider, f"round {i}", "extract", schema=rules_schema).structured for i in (1, 2, 3, 4)]
    assert rounds[2] == rounds[3] == {"rules": ["no-eval"]}
    assert call(provider, label="verify:no-any", schema={}).structured == {"real": False}
    assert call(provider, label="verify:no-eval", schema={}).structured == {"real": True}
    assert text_of(provider, "Rank a,b", "judge:strict", model="opus") == "opus:Rank a,b"


def test_enqueued_responses_answer_first_in_order_then_the_script_resumes() -> None:
    provider = FakeProvider({"default": {"text": "scripted"}})
    provider.enqueue({"text": "first"})
    provider.enqueue({"fail": "provider", "message": "second"})
    results = [call(provider) for _ in range(3)]
    assert results[0].text == "first"
    assert (results[1].outcome, results[1].message) == ("provider_failed", "second")
    assert results[2].text == "scripted"


def test_enqueued_responses_do_not_advance_a_rule_sequence() -> None:
    provider = FakeProvider({"default": {"sequence": [{"text": "s1"}, {"text": "s2"}]}})
    provider.enqueue({"text": "queued"})
    assert [text_of(provider) for _ in range(3)] == ["queued", "s1", "s2"]


def test_enqueue_refuses_a_sequence_and_malformed_responses() -> None:
    provider = FakeProvider()
    with pytest.raises(InvalidInputError, match=r"enqueue: respond\.sequence: is not allowed"):
        provider.enqueue({"sequence": [{"text": "a"}]})
    with pytest.raises(InvalidInputError, match=r"enqueue: respond\.fail: must be one of"):
        provider.enqueue({"fail": "nope"})


# -- events and time ---------------------------------------------------------------------------


def test_a_text_answer_emits_one_output_delta_with_the_text() -> None:
    events: list[ProviderEvent] = []
    run(execute(FakeProvider({"default": {"text": "streamed"}}), request(), events))
    assert events == [ProviderEvent(kind="output.delta", text="streamed")]


def test_structured_failed_and_empty_answers_emit_no_output_delta() -> None:
    events: list[ProviderEvent] = []
    run(execute(FakeProvider({"default": {"result": {}}}), request(schema={"type": "object"}), events))
    run(execute(FakeProvider({"default": {"fail": "provider"}}), request(), events))
    run(execute(FakeProvider({"default": {"text": ""}}), request(), events))
    assert events == []


def test_delay_ms_postpones_the_answer() -> None:
    async def scenario() -> tuple[float, AgentResult]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        result = await execute(FakeProvider({"default": {"text": "late", "delayMs": 30}}), request())
        return loop.time() - start, result

    elapsed, result = run(scenario())
    assert result.text == "late"
    assert elapsed >= 0.025


def test_firing_the_signal_ends_a_delay_at_once_with_cancelled_error() -> None:
    async def scenario() -> float:
        loop = asyncio.get_running_loop()
        provider = FakeProvider({"default": {"text": "never", "delayMs": 60_000}})
        signal = CancelSignal()
        events: list[ProviderEvent] = []
        task = asyncio.create_task(execute(provider, request(), events, signal))
        while not provider.calls:  # let the call start and reach its delay (no wall-clock sleep)
            await asyncio.sleep(0)
        start = loop.time()
        signal.cancel("user cancelled the run")
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=5)
        assert task.cancelled()
        assert events == []
        return loop.time() - start

    assert run(scenario()) < 1.0


def test_cancelling_the_call_during_a_delay_leaves_no_task_behind() -> None:
    async def scenario() -> set[asyncio.Task[Any]]:
        provider = FakeProvider({"default": {"text": "never", "delayMs": 60_000}})
        task = asyncio.create_task(execute(provider, request()))
        while not provider.calls:
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=5)
        return asyncio.all_tasks() - {asyncio.current_task()}

    assert run(scenario()) == set()


def test_a_call_whose_signal_already_fired_is_cancelled_before_answering() -> None:
    signal = CancelSignal()
    signal.cancel()
    provider = FakeProvider({"default": {"fail": "error"}})
    with pytest.raises(asyncio.CancelledError):
        run(execute(provider, request(), signal=signal))
    assert len(provider.calls) == 1


def test_a_delay_without_a_fired_signal_ends_with_the_answer() -> None:
    result = call(FakeProvider({"default": {"echo": True, "delayMs": 1}}), "done")
    assert result.text == "done"


# -- script validation -------------------------------------------------------------------------

INVALID_SCRIPTS: list[tuple[Any, str]] = [
    ([], r"fake script: must be a JSON object"),
    ({"rulez": []}, r"fake script: rulez: unknown key; expected one of rules, default"),
    ({"rules": {}}, r"rules: must be a list of rules"),
    ({"rules": ["x"]}, r"rules\[0\]: must be an object with `match` and `respond`"),
    ({"rules": [{"match": {}}]}, r"rules\[0\]\.respond: is required"),
    ({"rules": [{"respond": {}, "when": {}}]}, r"rules\[0\]\.when: unknown key"),
    (
        {"rules": [{"respond": {}}, {"respond": {}}, {"respond": {"fail": "boom"}}]},
        r"rules\[2\]\.respond\.fail: must be one of provider, skip, error, no_structured_output",
    ),
    ({"rules": [{"match": [], "respond": {}}]}, r"rules\[0\]\.match: must be an object"),
    ({"rules": [{"match": {"lable": "x"}, "respond": {}}]}, r"rules\[0\]\.match\.lable: unknown key"),
    ({"rules": [{"match": {"label": 3}, "respond": {}}]}, r"rules\[0\]\.match\.label: must be a string"),
    (
        {"rules": [{"match": {"prompt": "("}, "respond": {}}]},
        r"rules\[0\]\.match\.prompt: invalid regular expression",
    ),
    (
        {"rules": [{"match": {"phase": 1}, "respond": {}}]},
        r"rules\[0\]\.match\.phase: must be a string or null",
    ),
    ({"rules": [{"respond": "ok"}]}, r"rules\[0\]\.respond: must be an object"),
    ({"default": {"txt": "x"}}, r"default\.txt: unknown key"),
    ({"default": {"text": 1}}, r"default\.text: must be a string"),
    ({"default": {"text": "a", "echo": True}}, r"default: text and echo are mutually exclusive"),
    ({"default": {"result": 1, "fail": "skip"}}, r"default: result and fail are mutually exclusive"),
    ({"default": {"echo": False}}, r"default\.echo: must be true"),
    ({"default": {"synthesize": "yes"}}, r"default\.synthesize: must be true"),
    ({"default": {"message": "m"}}, r"default\.message: is only valid with `fail`"),
    ({"default": {"fail": "error", "message": 5}}, r"default\.message: must be a string"),
    ({"default": {"delayMs": -1}}, r"default\.delayMs: must be a non-negative number"),
    ({"default": {"delayMs": "10"}}, r"default\.delayMs: must be a non-negative number"),
    ({"default": {"delayMs": True}}, r"default\.delayMs: must be a non-negative number"),
    ({"default": {"tokens": 5}}, r"default\.tokens: must be an object"),
    ({"default": {"tokens": {"inputs": 1}}}, r"default\.tokens\.inputs: unknown key"),
    ({"default": {"tokens": {"input": -1}}}, r"default\.tokens\.input: must be a non-negative integer"),
    ({"default": {"tokens": {"output": 1.5}}}, r"default\.tokens\.output: must be a non-negative integer"),
    ({"default": {"sequence": []}}, r"default\.sequence: must be a non-empty list"),
    ({"default": {"sequence": {"text": "a"}}}, r"default\.sequence: must be a non-empty list"),
    (
        {"default": {"sequence": [{"text": "a"}], "delayMs": 5}},
        r"default: `sequence` cannot be combined with delayMs",
    ),
    (
        {"default": {"sequence": [{"text": "a"}, {"sequence": [{"text": "b"}]}]}},
        r"default\.sequence\[1\]\.sequence: is not allowed here",
    ),
    (
        {"rules": [{"respond": {"sequence": [{"fail": "nope"}]}}]},
        r"rules\[0\]\.respond\.sequence\[0\]\.fail: must be one of",
    ),
    ({"default": {"result": {"a": {1, 2}}}}, r"default\.result\.a: not a JSON value \(set\)"),
    ({"default": {"result": [math.nan]}}, r"default\.result\[0\]: not a JSON value \(nan\)"),
    ({"default": {"result": {1: "x"}}}, r"default\.result: object keys must be strings"),
    ({"default": {"resetsAt": RESET}}, r"default\.resetsAt: is only valid with `fail: usage_limit`"),
    (
        {"default": {"fail": "provider", "retryAfterMs": 5}},
        r"default\.retryAfterMs: is only valid with `fail: usage_limit`",
    ),
    (
        {"default": {"fail": "usage_limit", "resetsAt": RESET, "retryAfterMs": 5}},
        r"default: resetsAt and retryAfterMs are mutually exclusive",
    ),
    ({"default": {"fail": "usage_limit", "resetsAt": 5}}, r"default\.resetsAt: must be an ISO 8601 time"),
    (
        {"default": {"fail": "usage_limit", "resetsAt": "tomorrow"}},
        r"default\.resetsAt: must be an ISO 8601 time with a zone.*'tomorrow'",
    ),
    (
        {"default": {"fail": "usage_limit", "resetsAt": "2026-01-01T05:00:00"}},
        r"default\.resetsAt: must name its zone",
    ),
    (
        {"default": {"fail": "usage_limit", "retryAfterMs": -1}},
        r"default\.retryAfterMs: must be a non-negative number",
    ),
    (
        {"default": {"fail": "usage_limit", "retryAfterMs": math.inf}},
        r"default\.retryAfterMs: must be a non-negative number",
    ),
]


@pytest.mark.parametrize(("script", "message"), INVALID_SCRIPTS)
def test_a_malformed_script_is_refused_naming_the_bad_path(script: Any, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        FakeProvider(script)


def test_every_conformance_style_script_is_accepted() -> None:
    scripts: list[dict[str, Any]] = [
        {"default": {"text": "{label}|{model}|{effort}|{agentType}|{phase}"}},
        {
            "rules": [
                {"match": {"label": "api"}, "respond": {"fail": "provider", "message": "HTTP 500"}},
                {"match": {"label": "skip"}, "respond": {"fail": "skip"}},
                {"match": {"label": "err"}, "respond": {"fail": "error", "message": "disk full"}},
            ]
        },
        {"rules": [{"match": {"label": "slow"}, "respond": {"text": "S", "delayMs": 600}}]},
        {
            "rules": [{"match": {"prompt": "^second$"}, "respond": {"fail": "provider", "message": "x"}}],
            "default": {"echo": True, "tokens": {"input": 10, "output": 100}},
        },
        {"rules": [{"match": {"label": "missing"}, "respond": {"fail": "no_structured_output"}}]},
    ]
    for script in scripts:
        FakeProvider(script)


def test_from_file_loads_a_json_script(tmp_path: Path) -> None:
    path = tmp_path / "fake.json"
    path.write_text(json.dumps({"default": {"text": "from file"}}), encoding="utf-8")
    provider = FakeProvider.from_file(path, name="scripted")
    assert provider.name == "scripted"
    assert text_of(provider) == "from file"


def test_from_file_names_the_file_and_path_of_a_script_error(tmp_path: Path) -> None:
    path = tmp_path / "fake.json"
    path.write_text(json.dumps({"rules": [{"respond": {"fail": "boom"}}]}), encoding="utf-8")
    with pytest.raises(InvalidInputError, match=r"fake\.json: rules\[0\]\.respond\.fail: must be one of"):
        FakeProvider.from_file(path)


def test_a_scripted_result_nested_past_256_levels_is_refused_not_a_recursion_error() -> None:
    deep: Any = 1
    for _ in range(5_000):
        deep = [deep]
    with pytest.raises(InvalidInputError, match=r"default\.result\[0\].*: nested deeper than 256 levels"):
        FakeProvider({"default": {"result": deep}})
    shallow: Any = 1
    for _ in range(256):
        shallow = [shallow]
    assert FakeProvider({"default": {"result": shallow}}).script is not None


def test_from_file_refuses_a_script_too_deep_to_read(tmp_path: Path) -> None:
    path = tmp_path / "fake.json"
    path.write_text('{"default": {"result": ' + "[" * 100_000 + "]" * 100_000 + "}}", encoding="utf-8")
    with pytest.raises(InvalidInputError, match=r"fake\.json: nested too deeply to read"):
        FakeProvider.from_file(path)


def test_from_file_reports_invalid_json_with_its_position(tmp_path: Path) -> None:
    path = tmp_path / "fake.json"
    path.write_text('{"default":\n  {"text": }}', encoding="utf-8")
    with pytest.raises(InvalidInputError, match=r"fake\.json: not valid JSON: .* at line 2 column"):
        FakeProvider.from_file(str(path))


def test_from_file_reports_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"missing\.json: cannot read the file"):
        FakeProvider.from_file(tmp_path / "missing.json")


def test_the_provider_kit_builds_a_fake_from_a_providers_fake_table(tmp_path: Path) -> None:
    from workflow_mcp.providers.fake import FakeSettings
    from workflow_mcp.providers.policy import DEFAULT_POLICY

    inline = FakeProvider.create(
        {"script": {"default": {"text": "inline"}}}, policy=DEFAULT_POLICY, source="c"
    )
    assert text_of(inline) == "inline" and inline.settings == FakeSettings({"default": {"text": "inline"}})
    path = tmp_path / "fake.json"
    path.write_text(json.dumps({"default": {"text": "from file"}}), encoding="utf-8")
    from_file = FakeProvider.create({"script": str(path)}, policy=DEFAULT_POLICY, source="c")
    assert text_of(from_file) == "from file" and from_file.script == {"default": {"text": "from file"}}
    assert text_of(FakeProvider.create({}, policy=DEFAULT_POLICY, source="c")) == "hello"


@pytest.mark.parametrize(
    ("settings", "key", "problem"),
    [
        ({"colour": "red"}, "providers.fake.colour", "unknown setting; expected one of script"),
        ({"script": 5}, "providers.fake.script", "must be string or table"),
        ({"script": ["a"]}, "providers.fake.script", "must be string or table"),
    ],
)
def test_a_bad_providers_fake_table_names_the_file_and_key(
    settings: dict[str, Any], key: str, problem: str
) -> None:
    from workflow_mcp.providers.config import ProviderConfigError
    from workflow_mcp.providers.policy import DEFAULT_POLICY

    with pytest.raises(ProviderConfigError) as caught:
        FakeProvider.create(settings, policy=DEFAULT_POLICY, source="/p/workflow-mcp.toml")
    assert (caught.value.path, caught.value.key) == ("/p/workflow-mcp.toml", key)
    assert problem in str(caught.value)


def test_a_script_given_as_a_string_is_refused_never_read_as_a_file(tmp_path: Path) -> None:
    path = tmp_path / "fake.json"
    path.write_text(json.dumps({"default": {"text": "from file"}}), encoding="utf-8")
    with pytest.raises(InvalidInputError, match=r"^fake script: must be a JSON object .*, got a string$"):
        FakeProvider(str(path))  # type: ignore[arg-type]


def test_a_constant_text_answer_is_the_same_value_every_call_and_streams_each_time() -> None:
    provider = FakeProvider({"default": {"text": "fixed", "tokens": {"input": 1, "output": 2}}})
    first_events: list[ProviderEvent] = []
    again_events: list[ProviderEvent] = []
    first = run(execute(provider, request("a", "a"), first_events))
    again = run(execute(provider, request("b", "b"), again_events))
    assert first == again == AgentResult(text="fixed", usage=TokenUsage(input=1, output=2))
    assert first_events == again_events == [ProviderEvent(kind="output.delta", text="fixed")]
    templated = FakeProvider({"default": {"text": "for {label}"}})
    assert [text_of(templated, label=label) for label in ("x", "y")] == ["for x", "for y"]
