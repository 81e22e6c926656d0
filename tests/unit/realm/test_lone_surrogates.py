"""Lone UTF-16 surrogates made at run time (``'\\uD800'``, half an emoji from ``slice``) or handed back
by a provider: every one reaches the host as U+FFFD, so nothing the run stores or prints has a
string UTF-8 cannot carry. Once a final value or a provider's text holding one crashed the CLI
(``UnicodeEncodeError``) or failed the run with a ``StoreError``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from workflow_mcp.engine.run import well_formed
from workflow_mcp.events import Event
from workflow_mcp.providers import AgentContext, AgentExecutionError, AgentRequest, AgentResult, ProviderEvent

from helpers import RecordingProvider, run_source


def utf8_safe(events: list[Event]) -> None:
    """Every event payload encodes as UTF-8 JSON, as the store and MCP encode it."""
    for e in events:
        json.dumps(e.payload, ensure_ascii=False).encode("utf-8")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("return '\\uD800'", "\ufffd"),
        ("return { a: 'x\\uDFFFy' }", {"a": "x\ufffdy"}),
        ("return { ['\\uD800']: 1 }", {"\ufffd": 1}),
        ("return ['😀'.slice(0, 1), '😀'.slice(1)]", ["\ufffd", "\ufffd"]),
        ("return '\\uD83D\\uDE00'", "😀"),  # a whole pair is one character, kept
        ("return '\\\\uD800'", "\\uD800"),  # an escaped backslash is text, not a surrogate
    ],
    ids=["string", "in-a-value", "in-a-key", "sliced-emoji", "pair", "escaped-backslash"],
)
def test_a_lone_surrogate_in_the_final_value_reaches_the_host_as_u_fffd(body: str, expected: Any) -> None:
    outcome = run_source(body)
    assert outcome.status == "completed", outcome.error
    assert outcome.result == expected
    utf8_safe(outcome.events)


def test_lone_surrogates_in_logs_phases_labels_and_prompts_reach_the_host_as_u_fffd() -> None:
    provider = RecordingProvider(lambda request, context: _text(request.prompt))
    outcome = run_source(
        "const s = 'a\\uD800'\nlog(s); phase(s)\nreturn await agent(s, { label: s })", provider=provider
    )
    assert outcome.status == "completed", outcome.error
    assert outcome.result == "a\ufffd"
    (request,) = provider.calls
    assert request.prompt == "a\ufffd" and request.label == "a\ufffd"
    assert outcome.logs == ["a\ufffd"]
    utf8_safe(outcome.events)


def test_a_providers_text_output_and_deltas_with_lone_surrogates_reach_the_workflow_as_u_fffd() -> None:
    async def answer(request: AgentRequest, context: AgentContext) -> AgentResult:
        await context.emit(ProviderEvent(kind="output.delta", text="half \ud800"))
        return AgentResult(text="a\udc00b")

    outcome = run_source("return await agent('p')", provider=RecordingProvider(answer, streaming=True))
    assert outcome.status == "completed", outcome.error
    assert outcome.result == "a\ufffdb"
    assert [e.payload["text"] for e in outcome.of("agent.output.delta")] == ["half \ufffd"]
    utf8_safe(outcome.events)


@pytest.mark.parametrize("how", ["failed", "raised"])
def test_a_providers_failure_message_with_a_lone_surrogate_is_kept_as_u_fffd(how: str) -> None:
    async def answer(request: AgentRequest, context: AgentContext) -> AgentResult:
        if how == "raised":
            raise AgentExecutionError("broke \ud800 here")
        return AgentResult(outcome="provider_failed", message="broke \ud800 here")

    outcome = run_source(
        "try { return await agent('p') } catch (e) { return e.message }", provider=RecordingProvider(answer)
    )
    assert outcome.status == "completed", outcome.error
    assert "broke \ufffd here" in json.dumps(outcome.result, ensure_ascii=False) + "".join(outcome.logs)
    utf8_safe(outcome.events)


def test_well_formed_replaces_only_lone_surrogates() -> None:
    assert well_formed("plain") == "plain"
    assert well_formed("é😀") == "é😀"
    assert well_formed("\ud83d\ude00") == "😀"  # two halves held apart are one character again
    assert well_formed("a\ud800b\udfff") == "a\ufffdb\ufffd"


async def _text(value: str) -> AgentResult:
    return AgentResult(text=value)
