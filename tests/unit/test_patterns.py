"""Regular expressions from workflows and clients are matched under a time limit
(``workflow_mcp.patterns``): a catastrophic pattern fails with an error naming it and the limit instead
of holding the event loop. Exercised through the parts that take them: JSON-schema ``pattern``,
``patternProperties`` and ``additionalProperties`` of an agent's schema, and the fake provider's rules."""

from __future__ import annotations

import time

import pytest

from workflow_mcp.errors import InvalidInputError
from workflow_mcp.patterns import MATCH_TIMEOUT_S, PatternTimeoutError, compile_bounded
from workflow_mcp.providers import FakeProvider

from helpers import run_source

EVIL = "(a|a)+$"  # backtracks in the regex package too (it optimizes (a+)+$)
VICTIM = "a" * 40 + "!"


def test_a_catastrophic_pattern_times_out_naming_the_pattern_and_the_limit() -> None:
    began = time.monotonic()
    with pytest.raises(PatternTimeoutError) as caught:
        compile_bounded(EVIL).search(VICTIM)
    assert time.monotonic() - began < 5
    assert EVIL in str(caught.value)
    assert f"{MATCH_TIMEOUT_S * 1000:.0f} ms" in str(caught.value)
    assert isinstance(caught.value, InvalidInputError)


def test_ordinary_patterns_match_as_re_does() -> None:
    assert compile_bounded(r"^fix \d+$").search("fix 12")
    assert not compile_bounded(r"^fix \d+$").search("fix it")
    assert compile_bounded("a.b", dotall=True).fullmatch("a\nb")
    assert not compile_bounded("a.b").fullmatch("a\nb")


def test_a_pattern_that_does_not_compile_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="missing"):
        compile_bounded("(unclosed")
    with pytest.raises(ValueError):
        compile_bounded("(" * 5000 + ")" * 5000)


def schema_call(schema_js: str) -> str:
    return (
        f"try {{ return await agent('x', {{ label: 's', schema: {schema_js} }}) }}\n"
        "catch (e) { return 'rejected: ' + e.message }"
    )


@pytest.mark.parametrize(
    ("schema_js", "answer"),
    [
        (
            f"{{ type: 'object', properties: {{ s: {{ type: 'string', pattern: '{EVIL}' }} }} }}",
            {"s": VICTIM},
        ),
        (f"{{ type: 'object', patternProperties: {{ '{EVIL}': {{ type: 'string' }} }} }}", {VICTIM: "v"}),
        (
            f"{{ type: 'object', patternProperties: {{ '{EVIL}': {{}} }}, additionalProperties: false }}",
            {VICTIM: "v"},
        ),
    ],
    ids=["pattern", "patternProperties", "additionalProperties"],
)
def test_a_catastrophic_schema_pattern_rejects_the_call_in_bounded_time(
    schema_js: str, answer: dict[str, object]
) -> None:
    provider = FakeProvider({"default": {"result": answer}})
    began = time.monotonic()
    outcome = run_source(schema_call(schema_js), provider=provider, timeout=60)
    took = time.monotonic() - began
    assert outcome.status == "completed", outcome.error
    assert str(outcome.result).startswith("rejected: ")
    assert "took longer than" in outcome.result and EVIL in outcome.result
    assert took < 30  # five asks, each match cut at the limit


def test_schema_patterns_still_validate_ordinary_answers() -> None:
    schema_js = (
        "{ type: 'object', properties: { s: { type: 'string', pattern: '^ok-[0-9]+$' } }, required: ['s'] }"
    )
    good = run_source(schema_call(schema_js), provider=FakeProvider({"default": {"result": {"s": "ok-7"}}}))
    assert good.result == {"s": "ok-7"}
    bad = run_source(schema_call(schema_js), provider=FakeProvider({"default": {"result": {"s": "no"}}}))
    assert str(bad.result).startswith("rejected: ")


def test_a_catastrophic_fake_rule_fails_the_call_naming_the_pattern() -> None:
    provider = FakeProvider({"rules": [{"match": {"prompt": EVIL}, "respond": {"text": "never"}}]})
    began = time.monotonic()
    outcome = run_source(
        f"try {{ return await agent('{VICTIM}') }} catch (e) {{ return 'failed: ' + e.message }}",
        provider=provider,
        timeout=30,
    )
    assert time.monotonic() - began < 15
    assert "took longer than" in str(outcome.result) and EVIL in str(outcome.result)


def test_a_label_glob_with_many_stars_is_bounded_too() -> None:
    glob = "*a" * 30 + "*b"
    provider = FakeProvider({"rules": [{"match": {"label": glob}, "respond": {"text": "never"}}]})
    began = time.monotonic()
    outcome = run_source(
        "try { return await agent('p', { label: '"
        + "a" * 60
        + "' }) } catch (e) { return 'failed: ' + e.message }",
        provider=provider,
        timeout=30,
    )
    assert time.monotonic() - began < 15
    assert outcome.status == "completed", outcome.error
